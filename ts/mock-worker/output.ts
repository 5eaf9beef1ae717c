/**
 * What the mock model says: deterministic text for a (seed, prompt) pair, so tests and demos are
 * reproducible. ASCII words, so that every token (one UTF-8 byte) is a whole character and a
 * stream can be cut anywhere.
 * @module
 */

import { xxh3_64 } from '../hashing.js';

const WORDS = (
  'the a cache block token prefix route worker engine fleet model prompt reply stream fast quiet ' +
  'green river stone light window paper garden signal number morning table house'
).split(' ');

/** The first `count` tokens of the reply to `prompt`. */
export function mockOutput(prompt: readonly number[], count: number, seed: number): number[] {
  let state = Number(xxh3_64(Uint8Array.from(prompt.map((t) => t & 0xff)), BigInt(seed >>> 0)) & 0xffffffffn) >>> 0;
  const next = () => {
    // mulberry32
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const out: number[] = [];
  while (out.length < count) {
    const word = WORDS[Math.floor(next() * WORDS.length)];
    for (const ch of `${out.length === 0 ? '' : ' '}${word}`) {
      if (out.length < count) out.push(ch.charCodeAt(0));
    }
  }
  return out;
}
