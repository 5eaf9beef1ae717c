/**
 * Validation of {@link SubscribeOptions}, identical for both backends, and the per-rank
 * endpoints as vLLM and SGLang derive them (rank r: port + r, or path + `_dp<r>`).
 * @internal
 * @module
 */

import type { RawSourceConfig } from '../backend-types.js';
import { KvRouteError } from '../errors.js';
import { checkOptions, describe } from '../validate.js';
import type { EngineName, SubscribeOptions } from './types.js';

const OPTIONS = [
  'workerId',
  'endpoint',
  'replayEndpoint',
  'dataParallelSize',
  'engine',
  'topic',
  'blockSize',
  'bind',
  'replayTimeoutMs',
  'maxHeldBatches',
  'resumeAfterSeq',
  'resumeAfterDigest',
  'receiveHighWaterMark',
] as const;
const ENGINES: readonly EngineName[] = ['auto', 'vllm', 'sglang', 'trtllm'];
/** Most dp ranks one source accepts (one socket each). */
export const MAX_DP_RANKS = 1024;

function invalid(message: string): KvRouteError {
  return new KvRouteError('ERR_INVALID_ARG', message);
}

/** Checks an endpoint's shape: tcp://host:port, ipc://path or inproc://name. */
export function checkEndpoint(endpoint: unknown, name: string): string {
  if (typeof endpoint !== 'string') throw invalid(`${name} must be a string such as tcp://host:port, got ${describe(endpoint)}`);
  const bad = (why: string) =>
    invalid(`${name} must be tcp://host:port, ipc://path or inproc://name (${why}), got ${JSON.stringify(endpoint)}`);
  if (endpoint.startsWith('tcp://')) {
    const rest = endpoint.slice(6);
    const colon = rest.lastIndexOf(':');
    if (colon < 0) throw bad('no port');
    if (colon === 0) throw bad('no host');
    const port = rest.slice(colon + 1);
    if (!/^\d+$/.test(port)) throw bad('the port is not a number');
    if (Number(port) > 65535) throw bad('the port is above 65535');
    return endpoint;
  }
  for (const scheme of ['ipc://', 'inproc://']) {
    if (endpoint.startsWith(scheme)) {
      if (endpoint.length === scheme.length) throw bad('empty path');
      return endpoint;
    }
  }
  throw bad('unknown transport');
}

/** The endpoint of dp rank `rank` given rank 0's. */
export function endpointForRank(base: string, rank: number, name: string): string {
  checkEndpoint(base, name);
  if (rank === 0) return base;
  if (base.startsWith('tcp://')) {
    const colon = base.lastIndexOf(':');
    const port = Number(base.slice(colon + 1)) + rank;
    if (port > 65535) throw invalid(`${name}: dp rank ${rank} would use port ${port}, above 65535`);
    return `${base.slice(0, colon)}:${port}`;
  }
  return `${base}_dp${rank}`;
}

function positiveInt(value: unknown, name: string, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > max) {
    throw invalid(`${name} must be an integer in [0, ${max}], got ${describe(value)}`);
  }
  return value;
}

function endpoints(value: unknown, size: number, name: string): string[] {
  if (Array.isArray(value)) {
    if (value.length !== size) throw invalid(`${name} lists ${value.length} endpoints for ${size} dp ranks`);
    return value.map((e, i) => checkEndpoint(e, `${name}[${i}]`));
  }
  return Array.from({ length: size }, (_, r) => endpointForRank(value as string, r, name));
}

/** Per-rank resume seqs: one value for every rank, or one per rank (`null`: none); -1n is none. */
function resumeSeqs(value: unknown, size: number, name: string): bigint[] {
  const one = (v: unknown, what: string): bigint => {
    if (v === null) return -1n;
    if (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0) return BigInt(v);
    if (typeof v === 'bigint' && v >= 0n && v < 2n ** 64n) return v;
    throw invalid(`${what} must be an engine seq (a non-negative integer) or null, got ${describe(v)}`);
  };
  if (!Array.isArray(value)) return Array.from({ length: size }, () => one(value, name));
  if (value.length !== size) throw invalid(`${name} must have one entry per dp rank (${size}), got ${value.length}`);
  return value.map((v, i) => one(v, `${name}[${i}]`));
}

/**
 * Per rank, the digest of the batch at the resumed seq (-1n: none). A digest needs a seq to
 * belong to, so one given without `resumeAfterSeq`, or for a rank resumed after no seq, is an
 * error rather than a check that silently never runs.
 */
function resumeDigests(value: unknown, seqs: bigint[] | undefined, size: number, name: string): bigint[] {
  if (seqs === undefined) throw invalid(`${name} needs resumeAfterSeq: a digest names the batch at that seq`);
  const one = (v: unknown, what: string, seq: bigint): bigint => {
    if (v === null) return -1n;
    if (typeof v !== 'bigint' || v < 0n || v >= 2n ** 64n) {
      throw invalid(`${what} must be a batch digest as lastBatchDigest reports it (a bigint of 64 bits) or null, got ${describe(v)}`);
    }
    if (seq < 0n) throw invalid(`${what} is given for a dp rank resumed after no seq (its resumeAfterSeq is null)`);
    return v;
  };
  if (!Array.isArray(value)) return seqs.map((seq) => one(value, name, seq));
  if (value.length !== size) throw invalid(`${name} must have one entry per dp rank (${size}), got ${value.length}`);
  return value.map((v, i) => one(v, `${name}[${i}]`, seqs[i]));
}

export interface ParsedSubscribe {
  config: Omit<RawSourceConfig, 'workerId' | 'blockSize'>;
  engine: EngineName;
}

/** Validates everything but the worker id (the caller checks that with its own rules). */
export function parseSubscribeOptions(opts: SubscribeOptions, indexBlockSize: number, name: string): ParsedSubscribe {
  const o = checkOptions(opts, name, OPTIONS);
  if (opts === undefined || opts === null) throw invalid(`${name} must be an object with at least workerId and endpoint`);
  if (o.endpoint === undefined) throw invalid(`${name}.endpoint is required (the engine's KV-event PUB endpoint)`);
  const size =
    o.dataParallelSize === undefined
      ? Array.isArray(o.endpoint)
        ? (o.endpoint as unknown[]).length
        : 1
      : positiveInt(o.dataParallelSize, `${name}.dataParallelSize`, MAX_DP_RANKS);
  if (size < 1) throw invalid(`${name}.dataParallelSize must be at least 1`);
  const engine = (o.engine ?? 'auto') as EngineName;
  if (!ENGINES.includes(engine)) throw invalid(`${name}.engine must be one of ${ENGINES.join(', ')}, got ${describe(o.engine)}`);
  if (o.blockSize !== undefined && o.blockSize !== indexBlockSize) {
    throw invalid(
      `${name}.blockSize is ${describe(o.blockSize)} but the index hashes blocks of ${indexBlockSize} tokens: create the index with the engine's block size`,
    );
  }
  const topic = o.topic ?? '';
  if (typeof topic !== 'string') throw invalid(`${name}.topic must be a string, got ${describe(topic)}`);
  const bind = o.bind ?? false;
  if (typeof bind !== 'boolean') throw invalid(`${name}.bind must be a boolean, got ${describe(bind)}`);
  const resumeAfter = o.resumeAfterSeq === undefined ? undefined : resumeSeqs(o.resumeAfterSeq, size, `${name}.resumeAfterSeq`);
  return {
    engine,
    config: {
      ranks: Array.from({ length: size }, (_, r) => r),
      endpoints: endpoints(o.endpoint, size, `${name}.endpoint`),
      replayEndpoints: o.replayEndpoint === undefined ? undefined : endpoints(o.replayEndpoint, size, `${name}.replayEndpoint`),
      bind,
      topic,
      replayTimeoutMs: o.replayTimeoutMs === undefined ? 5000 : positiveInt(o.replayTimeoutMs, `${name}.replayTimeoutMs`, 3_600_000),
      maxHeld: o.maxHeldBatches === undefined ? 10_000 : positiveInt(o.maxHeldBatches, `${name}.maxHeldBatches`, 10_000_000),
      receiveHwm:
        o.receiveHighWaterMark === undefined ? 100_000 : positiveInt(o.receiveHighWaterMark, `${name}.receiveHighWaterMark`, 2 ** 31 - 1),
      ...(resumeAfter === undefined ? {} : { resumeAfter }),
      ...(o.resumeAfterDigest === undefined
        ? {}
        : { resumeDigests: resumeDigests(o.resumeAfterDigest, resumeAfter, size, `${name}.resumeAfterDigest`) }),
    },
  };
}
