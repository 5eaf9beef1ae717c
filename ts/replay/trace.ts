/**
 * Request traces in the Mooncake JSONL format (one request per line), as published with the
 * FAST'25 Mooncake paper and used by Dynamo's replay tools.
 *
 * A row carries no tokens, only `hash_ids`: one id per `traceBlockSize` tokens, where equal ids
 * mean equal blocks *given the same prefix*. kvroute synthesises tokens from them
 * deterministically, so prefix sharing in the trace becomes prefix sharing in token space.
 */

import { readFileSync } from 'node:fs';
import { KvRouteError } from '../errors.js';
import { checkOptions, describe } from '../validate.js';
import { checkTraceBlockSize, checkTraceRequest } from './trace-check.js';

/**
 * One request of a trace.
 * @group Replay
 */
export interface TraceRequest {
  /** 1-based line in the source (0 for generated traces without a file). */
  line: number;
  /** Arrival time in ms from the start of the trace. */
  timestampMs: number;
  /** Prompt length in tokens. */
  inputLength: number;
  /** Tokens to generate. */
  outputLength: number;
  /** One id per `traceBlockSize` prompt tokens. */
  hashIds: number[];
  /** Conversation this request belongs to: `session_id`, or in Bailian traces the `chat_id` of
   * the conversation's first turn (found through `parent_chat_id`). */
  sessionId?: string;
  /** Bailian traces: this turn's chat id. */
  chatId?: string;
  /** For later turns: ms after the previous turn of the session completed (`delay`). */
  delayMs?: number;
  /** Bailian traces: the chat this one continues. */
  parentChatId?: string;
  /** Bailian traces: the turn number. */
  turn?: number;
}

/**
 * A parsed trace.
 * @group Replay
 */
export interface Trace {
  /** Where it came from (a path), if from a file. */
  path?: string;
  /** Tokens per hash id. */
  traceBlockSize: number;
  /** Requests in file order. */
  requests: TraceRequest[];
}

/**
 * Options of {@link loadTrace}.
 * @group Replay
 */
export interface LoadTraceOptions {
  /** Tokens per hash id; 512 for the Mooncake traces, 16 for Bailian ones. Default 512. */
  traceBlockSize?: number;
}

const KNOWN = new Set([
  'timestamp',
  'created_time',
  'input_length',
  'input_tokens',
  'output_length',
  'output_tokens',
  'hash_ids',
  'session_id',
  'delay',
  'delay_ms',
  'chat_id',
  'parent_chat_id',
  'turn',
]);

function bad(line: number, what: string): never {
  throw new KvRouteError('ERR_INVALID_ARG', `trace line ${line}: ${what}`);
}

function pick(row: Record<string, unknown>, line: number, names: string[], required: boolean): unknown {
  const present = names.filter((n) => row[n] !== undefined && row[n] !== null);
  if (present.length > 1) bad(line, `both ${present.join(' and ')} are given`);
  if (present.length === 0 && required) bad(line, `${names.join(' (or ')}${names.length > 1 ? ')' : ''} is missing`);
  return present.length ? row[present[0]] : undefined;
}

function integer(value: unknown, line: number, name: string, min: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min)
    bad(line, `${name} must be an integer >= ${min}, got ${describe(value)}`);
  return value;
}

function optionalId(value: unknown, line: number, name: string): string | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value))) return String(value);
  return bad(line, `${name} must be a string or a number, got ${describe(value)}`);
}

function parseRow(text: string, line: number, traceBlockSize: number): TraceRequest {
  let row: unknown;
  try {
    row = JSON.parse(text);
  } catch (err) {
    bad(line, `invalid JSON (${(err as Error).message})`);
  }
  if (row === null || typeof row !== 'object' || Array.isArray(row)) bad(line, `expected a JSON object, got ${describe(row)}`);
  const r = row as Record<string, unknown>;
  for (const key of Object.keys(r)) if (!KNOWN.has(key)) bad(line, `unknown field "${key}"`);
  const ts = pick(r, line, ['timestamp', 'created_time'], true);
  if (typeof ts !== 'number' || !Number.isFinite(ts) || ts < 0)
    bad(line, `timestamp must be a non-negative number of ms, got ${describe(ts)}`);
  const inputLength = integer(pick(r, line, ['input_length', 'input_tokens'], true), line, 'input_length', 1);
  const outputLength = integer(pick(r, line, ['output_length', 'output_tokens'], true), line, 'output_length', 1);
  const ids = r.hash_ids;
  if (!Array.isArray(ids) || ids.length === 0) bad(line, `hash_ids must be a non-empty array of integers, got ${describe(ids)}`);
  const hashIds = ids.map((id, i) => integer(id, line, `hash_ids[${i}]`, 0));
  if (inputLength > hashIds.length * traceBlockSize) {
    bad(line, `input_length ${inputLength} exceeds ${hashIds.length} hash ids × ${traceBlockSize} tokens (wrong --trace-block-size?)`);
  }
  const req: TraceRequest = { line, timestampMs: ts, inputLength, outputLength, hashIds };
  const sessionId = optionalId(r.session_id, line, 'session_id');
  if (sessionId !== undefined) req.sessionId = sessionId;
  const chatId = optionalId(r.chat_id, line, 'chat_id');
  if (chatId !== undefined) req.chatId = chatId;
  const delay = pick(r, line, ['delay', 'delay_ms'], false);
  if (delay !== undefined) {
    if (typeof delay !== 'number' || !Number.isFinite(delay) || delay < 0)
      bad(line, `delay must be a non-negative number of ms, got ${describe(delay)}`);
    req.delayMs = delay;
  }
  const parent = optionalId(r.parent_chat_id, line, 'parent_chat_id');
  if (parent !== undefined && parent !== '-1') req.parentChatId = parent;
  if (r.turn !== undefined) req.turn = integer(r.turn, line, 'turn', 0);
  return req;
}

/**
 * Bailian traces chain turns by `parent_chat_id`: a turn belongs to the session of its parent,
 * and a first turn starts a session named by its own `chat_id`.
 */
function linkBailianTurns(requests: TraceRequest[]): void {
  const sessionOfChat = new Map<string, string>();
  for (const req of requests) {
    if (req.chatId === undefined || req.sessionId !== undefined) continue;
    const parentSession = req.parentChatId === undefined ? undefined : sessionOfChat.get(req.parentChatId);
    req.sessionId = parentSession ?? req.chatId;
    sessionOfChat.set(req.chatId, req.sessionId);
  }
}

/**
 * Parses trace text (JSONL). Blank lines are skipped; the first malformed line throws.
 * @group Replay
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument for malformed JSONL (the message names the line and field).
 */
export function parseTrace(text: string, opts: LoadTraceOptions = {}): Trace {
  if (typeof text !== 'string') throw new KvRouteError('ERR_INVALID_ARG', `parseTrace needs JSONL text, got ${describe(text)}`);
  const o = checkOptions(opts, 'opts', ['traceBlockSize']);
  const traceBlockSize = o.traceBlockSize ?? 512;
  if (typeof traceBlockSize !== 'number' || !Number.isInteger(traceBlockSize) || traceBlockSize < 1)
    throw new KvRouteError('ERR_INVALID_ARG', `traceBlockSize must be a positive integer, got ${describe(traceBlockSize)}`);
  const requests: TraceRequest[] = [];
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    if (lines[i].trim() === '') continue;
    requests.push(parseRow(lines[i], i + 1, traceBlockSize));
  }
  if (requests.length === 0) throw new KvRouteError('ERR_INVALID_ARG', 'the trace has no requests');
  linkBailianTurns(requests);
  return { traceBlockSize, requests };
}

/**
 * Loads a trace from a file path, or parses it when given the text itself (anything starting
 * with `{` or containing a newline).
 * @group Replay
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument for an unreadable file or malformed JSONL (the message names the line).
 */
export function loadTrace(pathOrText: string, opts: LoadTraceOptions = {}): Trace {
  if (typeof pathOrText !== 'string')
    throw new KvRouteError('ERR_INVALID_ARG', `loadTrace needs a path or JSONL text, got ${describe(pathOrText)}`);
  if (pathOrText.trimStart().startsWith('{') || pathOrText.includes('\n')) return parseTrace(pathOrText, opts);
  let text: string;
  try {
    text = readFileSync(pathOrText, 'utf8');
  } catch (err) {
    throw new KvRouteError('ERR_INVALID_ARG', `cannot read trace ${pathOrText}: ${(err as Error).message}`);
  }
  return { ...parseTrace(text, opts), path: pathOrText };
}

/** A bijection on u32 (an xorshift-multiply mix), so distinct inputs give distinct tokens. */
function mix32(x: number): number {
  let z = x >>> 0;
  z = Math.imul(z ^ (z >>> 16), 0x7feb352d) >>> 0;
  z = Math.imul(z ^ (z >>> 15), 0x846ca68b) >>> 0;
  return (z ^ (z >>> 16)) >>> 0;
}

/**
 * The prompt tokens of a request: `traceBlockSize` tokens per hash id, token j of id h being
 * `mix32(h · traceBlockSize + j)`, cut to `inputLength`. Equal ids give equal tokens, different
 * ids different tokens (for ids below 2^32 / traceBlockSize; above, collisions become merely
 * unlikely), and the engine blocks inside one trace block differ from each other.
 * @group Replay
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument.
 */
export function synthesizeTokens(req: TraceRequest, traceBlockSize: number): Uint32Array {
  const size = checkTraceBlockSize(traceBlockSize, 'traceBlockSize');
  return promptTokens(checkTraceRequest(req, size, 'req'), size);
}

/** @internal {@link synthesizeTokens} of a request already checked (the replay checks its trace once). */
export function promptTokens(req: TraceRequest, traceBlockSize: number): Uint32Array {
  const out = new Uint32Array(req.inputLength);
  // Block by block: no division per token (this runs for every prompt token of a replay).
  for (let start = 0, b = 0; start < req.inputLength; start += traceBlockSize, b++) {
    const base = req.hashIds[b] * traceBlockSize;
    const end = Math.min(start + traceBlockSize, req.inputLength);
    if (base + traceBlockSize <= 4294967296) {
      for (let k = start, v = base; k < end; k++, v++) out[k] = mix32(v);
    } else {
      for (let k = start, v = base; k < end; k++, v++) out[k] = v < 4294967296 ? mix32(v) : mix32(mix32(Math.floor(v / 4294967296)) ^ v);
    }
  }
  return out;
}
