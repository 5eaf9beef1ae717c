/**
 * The mock model's log probabilities, in vLLM's two response shapes: deterministic made-up values
 * (the mock samples nothing), with the sampled token always the most likely one and `k`
 * alternatives below it, so that a client reading logprobs gets well-formed answers of the size it
 * asked for. Completions report each token's alternatives as a map from token text to logprob
 * (at least the sampled token's), chat completions as a list of the `k` most likely.
 * @module
 */

import { detokenize } from './tokenizer.js';

/** One position's log probabilities: the token there first, then its alternatives, most likely first. */
export interface PositionLogprobs {
  token: number;
  logprob: number;
  top: { token: number; logprob: number }[];
}

/** Tokens offered as the alternatives, in this order (the token itself skipped). */
const ALTERNATIVES = Array.from(' etaoinshrdlcumwfgypbvkjxqz.,', (c) => c.charCodeAt(0));

/** A value in [0, 1) from a position, a token and a salt (a small integer hash: stable, not random). */
function unit(position: number, token: number, salt: number): number {
  let h = Math.imul(position ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(token + 1, 0xc2b2ae35) ^ Math.imul(salt + 7, 0x27d4eb2f);
  h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d);
  h ^= h >>> 13;
  return (h >>> 0) / 4294967296;
}

/** The log probabilities at `position` (of the prompt and output together) where `token` was produced, with `k` alternatives. */
export function positionLogprobs(position: number, token: number, k: number): PositionLogprobs {
  const logprob = -(0.01 + 0.9 * unit(position, token, 0));
  const top = [{ token, logprob }];
  for (const alt of ALTERNATIVES) {
    if (top.length >= Math.max(k, 1)) break;
    if (alt !== token) top.push({ token: alt, logprob: logprob - 0.7 * top.length - 0.3 * unit(position, alt, top.length) });
  }
  return { token, logprob, top };
}

/** vLLM's completions `logprobs` object. */
export interface CompletionLogprobs {
  text_offset: number[];
  token_logprobs: (number | null)[];
  tokens: string[];
  top_logprobs: (Record<string, number> | null)[];
}

/**
 * The completions shape for consecutive positions (`null`: the prompt's first token, which has no
 * logprob), text offsets counted from `offset`. A map holds the sampled token and, with `k` > 1,
 * its alternatives: `max(k, 1)` entries, as vLLM reports them.
 */
export function completionLogprobs(
  positions: readonly (PositionLogprobs | null)[],
  tokens: readonly number[],
  k: number,
  offset: number,
): CompletionLogprobs {
  const out: CompletionLogprobs = { text_offset: [], token_logprobs: [], tokens: [], top_logprobs: [] };
  let at = offset;
  positions.forEach((p, i) => {
    const text = detokenize([tokens[i]]);
    out.tokens.push(text);
    out.text_offset.push(at);
    at += text.length;
    out.token_logprobs.push(p ? p.logprob : null);
    out.top_logprobs.push(p ? Object.fromEntries(p.top.slice(0, Math.max(k, 1)).map((e) => [detokenize([e.token]), e.logprob])) : null);
  });
  return out;
}

const utf8 = new TextEncoder();

function chatEntry(token: number, logprob: number): { token: string; logprob: number; bytes: number[] } {
  const text = detokenize([token]);
  return { token: text, logprob, bytes: Array.from(utf8.encode(text)) };
}

/** vLLM's chat `logprobs` object for output positions: each with its `k` most likely tokens. */
export function chatLogprobs(positions: readonly PositionLogprobs[], k: number): unknown {
  return {
    content: positions.map((p) => ({
      ...chatEntry(p.token, p.logprob),
      top_logprobs: p.top.slice(0, k).map((e) => chatEntry(e.token, e.logprob)),
    })),
  };
}
