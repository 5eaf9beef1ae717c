/**
 * Event batches as text. Hashes are u64 and routinely exceed 2^53, so `JSON.parse` and
 * `JSON.stringify` cannot be used on them directly (one rounds, the other throws on bigint).
 */

import { KvRouteError } from '../errors.js';
import { describe } from '../validate.js';
import { parseJsonBatch, stringifyLossless } from './json.js';
import type { RouterEvent } from './types.js';

/**
 * JSON text of events (for example a {@link KvIndex.dump}), with u64 values written as plain JSON
 * numbers. `ndjson` writes one event per line.
 * @group Events
 * @throws {KvRouteError} `ERR_INVALID_EVENT` for an event that does not validate; `ERR_INVALID_ARG` for a bad argument for the format.
 */
export function stringifyEvents(events: Iterable<RouterEvent>, format: 'json' | 'ndjson' = 'json'): string {
  if (format !== 'json' && format !== 'ndjson')
    throw new KvRouteError('ERR_INVALID_ARG', `format must be 'json' or 'ndjson', got ${describe(format)}`);
  if (events === null || typeof events !== 'object' || !(Symbol.iterator in events))
    throw new KvRouteError('ERR_INVALID_ARG', `events must be an iterable of events, got ${describe(events)}`);
  const list = [...events];
  return format === 'json' ? stringifyLossless(list) : list.map((e) => stringifyLossless(e)).join('\n');
}

/**
 * Parses a JSON array or NDJSON of events without precision loss: integers that do not fit a
 * double come back as decimal strings, which every kvroute API accepts as u64, and floats whose
 * value is an integer as {@link JsonFloat}, which integer fields reject. A repeated key, a `\u`
 * escape of half a surrogate pair, a number beyond a double and an event nested deeper than 127
 * levels are errors, as on the native backend. Text is an array when `[` comes first after JSON
 * whitespace; NDJSON lines of JSON whitespace (space, tab, CR) are skipped. The events are not
 * validated here; `KvIndex.applyEvents` does that (and on the native backend parses text itself,
 * in Rust).
 * @group Events
 * @throws {KvRouteError} `ERR_INVALID_EVENT` for text that is not JSON or NDJSON (the message names the line).
 */
export function parseEvents(text: string): unknown[] {
  if (typeof text !== 'string') throw new KvRouteError('ERR_INVALID_ARG', 'text must be a string');
  return parseJsonBatch(text).values;
}
