/**
 * A seeded synthetic workload in the Mooncake trace format: chat conversations that share system
 * prompts, with multi-turn follow-ups that extend their own history. It is what `kvroute replay`
 * runs when no trace is given, so the demo works anywhere.
 */

import { KvRouteError } from '../errors.js';
import { SeededRandom } from '../random.js';
import { checkOptions, describe, positiveInteger } from '../validate.js';
import type { Trace, TraceRequest } from './trace.js';

/**
 * Options of {@link generateTrace}; every field has a default.
 * @group Replay
 */
export interface GenerateTraceOptions {
  /** Number of requests. Default 2000. */
  requests?: number;
  /** Mean arrival rate, requests per second (Poisson arrivals). Default 4. */
  rate?: number;
  /** Distinct shared system prompts. Default 20. */
  prefixGroups?: number;
  /** Length of each shared prompt, in trace blocks. Default 8. */
  sharedPrefixBlocks?: number;
  /** Maximum turns per conversation. Default 4. */
  turns?: number;
  /** Tokens per hash id. Default 512. */
  traceBlockSize?: number;
  /** Seed of the generator. Default 1. */
  seed?: number;
}

/**
 * Generates a trace; the same options always give the same trace.
 * @group Replay
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (an option out of range).
 */
export function generateTrace(opts: GenerateTraceOptions = {}): Trace {
  checkOptions(opts, 'opts', ['requests', 'rate', 'prefixGroups', 'sharedPrefixBlocks', 'turns', 'traceBlockSize', 'seed']);
  const requests = positiveInteger(opts.requests, 'requests', 2000);
  const groups = positiveInteger(opts.prefixGroups, 'prefixGroups', 20);
  const prefixBlocks = positiveInteger(opts.sharedPrefixBlocks, 'sharedPrefixBlocks', 8);
  const turns = positiveInteger(opts.turns, 'turns', 4);
  const traceBlockSize = positiveInteger(opts.traceBlockSize, 'traceBlockSize', 512);
  const seed = opts.seed ?? 1;
  if (!Number.isInteger(seed)) throw new KvRouteError('ERR_INVALID_ARG', `seed must be an integer, got ${describe(seed)}`);
  const rate = opts.rate ?? 4;
  if (typeof rate !== 'number' || !Number.isFinite(rate) || rate <= 0)
    throw new KvRouteError('ERR_INVALID_ARG', `rate must be a positive number, got ${describe(rate)}`);

  const rng = new SeededRandom(seed);
  let nextId = 0;
  const prompts = Array.from({ length: groups }, () => Array.from({ length: prefixBlocks }, () => nextId++));
  // Open conversations: their history of ids and how many turns they have had.
  const open: Array<{ ids: number[]; turns: number; session: string }> = [];
  const out: TraceRequest[] = [];
  let clock = 0;
  for (let n = 0; n < requests; n++) {
    clock += (-Math.log(1 - rng.next()) / rate) * 1000;
    let convo = open.length > 0 && rng.next() < 0.5 ? open[rng.int(0, open.length - 1)] : undefined;
    if (!convo) {
      // Zipf-like popularity: low group numbers are used more often.
      const group = Math.min(groups - 1, Math.floor(groups * rng.next() ** 2));
      convo = { ids: [...prompts[group]], turns: 0, session: `s${n}` };
      open.push(convo);
    }
    const fresh = rng.int(1, 6);
    for (let k = 0; k < fresh; k++) convo.ids.push(nextId++);
    convo.turns++;
    const ids = [...convo.ids];
    out.push({
      line: 0,
      timestampMs: Math.round(clock),
      inputLength: ids.length * traceBlockSize - rng.int(0, traceBlockSize - 1),
      outputLength: rng.int(16, 512),
      hashIds: ids,
      sessionId: convo.session,
    });
    if (convo.turns >= turns) open.splice(open.indexOf(convo), 1);
    if (open.length > 64) open.shift();
  }
  return { traceBlockSize, requests: out };
}

/**
 * The trace as Mooncake JSONL text (what `kvroute gen-trace` prints).
 * @group Replay
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument (not a trace).
 */
export function traceToJsonl(trace: Trace): string {
  if (trace === null || typeof trace !== 'object' || !Array.isArray((trace as Trace).requests))
    throw new KvRouteError('ERR_INVALID_ARG', `traceToJsonl needs a Trace, got ${describe(trace)}`);
  return `${trace.requests
    .map((r) =>
      JSON.stringify({
        timestamp: r.timestampMs,
        input_length: r.inputLength,
        output_length: r.outputLength,
        hash_ids: r.hashIds,
        ...(r.sessionId === undefined ? {} : { session_id: r.sessionId }),
      }),
    )
    .join('\n')}\n`;
}
