/**
 * Builds engine KV-event payloads the way the engines' msgspec encoders lay them out: a batch
 * `[ts, events, dp_rank]` of tagged maps (vLLM ≥ 0.24, SGLang ≥ 0.5.20) or tagged arrays.
 */

import { Packr } from 'msgpackr';

const packr = new Packr({ useRecords: false, variableMapSize: true, int64AsType: 'bigint' });

export type WireValue = unknown;

/** A map event: `{type: tag, ...fields}` with keys in the given order. */
export function mapEvent(tag: string, fields: Record<string, WireValue>): Map<string, WireValue> {
  return new Map<string, WireValue>([['type', tag], ...Object.entries(fields)]);
}

export function packBatch(events: WireValue[], opts: { ts?: number; dpRank?: number | null } = {}): Uint8Array {
  return new Uint8Array(packr.pack([opts.ts ?? 1.5, events, opts.dpRank === undefined ? 0 : opts.dpRank]));
}

export function pack(value: WireValue): Uint8Array {
  return new Uint8Array(packr.pack(value));
}

export function hex(s: string): Uint8Array {
  return new Uint8Array(Buffer.from(s, 'hex'));
}

/** A vLLM 0.33 map BlockStored. */
export function vllmStored(
  hashes: bigint[],
  parent: bigint | null,
  tokens: number[],
  extra: Record<string, WireValue> = {},
  blockSize = 4,
): Map<string, WireValue> {
  return mapEvent('BlockStored', {
    block_hashes: hashes,
    parent_block_hash: parent,
    token_ids: tokens,
    block_size: blockSize,
    lora_id: null,
    medium: 'GPU',
    lora_name: null,
    group_idx: 0,
    kv_cache_spec_kind: 'full_attention',
    ...extra,
  });
}

export function vllmRemoved(hashes: bigint[], extra: Record<string, WireValue> = {}): Map<string, WireValue> {
  return mapEvent('BlockRemoved', { block_hashes: hashes, medium: 'GPU', ...extra });
}
