/**
 * vLLM's KV-connector parameters of disaggregated serving (`kv_transfer_params`, as its
 * NixlConnector reads and answers them), as the mock worker takes them. A prefill leg
 * (`do_remote_decode`) is answered with the parameters a decode worker needs to pull its prompt's
 * KV; a decode leg (`do_remote_prefill`, with the prefill worker's `remote_block_ids` and
 * `remote_engine_id`) takes its prompt's KV as pulled: its engine fills those tokens without
 * compute. No KV crosses between mock workers: the parameters are checked for their shape only,
 * and the prefill worker frees its blocks when it answers (vLLM's holds them until they are
 * pulled or its timeout ends).
 * @internal
 * @module
 */

import { BadRequest } from './bad-request.js';

/** What a request's `kv_transfer_params` ask. */
export type KvTransfer = 'offer' | 'pull';

/**
 * Reads a request's `kv_transfer_params`: `offer` for a prefill leg, `pull` for a decode leg,
 * undefined for neither (absent, null, or parameters that ask for no transfer).
 * @throws {BadRequest} for parameters that are not an object, ask for both, or a pull without the prefill worker's block ids and engine id.
 */
export function readKvTransfer(b: Record<string, unknown>): KvTransfer | undefined {
  const p = b.kv_transfer_params;
  if (p === undefined || p === null) return undefined;
  if (typeof p !== 'object' || Array.isArray(p)) throw new BadRequest('kv_transfer_params must be an object', 'kv_transfer_params');
  const {
    do_remote_decode: offer,
    do_remote_prefill: pull,
    remote_block_ids: blocks,
    remote_engine_id: engine,
  } = p as Record<string, unknown>;
  if (offer === true && pull === true)
    throw new BadRequest('kv_transfer_params cannot ask for both a remote decode and a remote prefill', 'kv_transfer_params');
  if (pull === true) {
    if (!Array.isArray(blocks) || !blocks.every((id) => Number.isSafeInteger(id)))
      throw new BadRequest('kv_transfer_params.remote_block_ids must list the prefill worker’s block ids', 'kv_transfer_params');
    if (typeof engine !== 'string' || engine === '')
      throw new BadRequest('kv_transfer_params.remote_engine_id must name the prefill worker’s engine', 'kv_transfer_params');
    return 'pull';
  }
  return offer === true ? 'offer' : undefined;
}

/** Where a prefill worker's KV is pulled from, as its answer names it. */
export interface KvOffer {
  engineId: string;
  requestId: string;
  blockIds: readonly number[];
  host: string;
  port: number;
}

/** The `kv_transfer_params` of a prefill leg's answer: what the decode worker is sent. */
export function offeredParams(o: KvOffer): Record<string, unknown> {
  return {
    do_remote_prefill: true,
    do_remote_decode: false,
    remote_block_ids: o.blockIds,
    remote_engine_id: o.engineId,
    remote_request_id: o.requestId,
    remote_host: o.host,
    remote_port: o.port,
    tp_size: 1,
  };
}
