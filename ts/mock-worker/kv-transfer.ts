/**
 * The two-step hand-over parameters of disaggregated serving, as the mock worker takes them:
 * vLLM's KV-connector parameters (`kv_transfer_params`, as its NixlConnector reads and answers
 * them) and TensorRT-LLM's (`disaggregated_params`, as `trtllm-serve` reads and answers them). A
 * prefill leg (`do_remote_decode`; `request_type: "context_only"`) is answered with the
 * parameters a decode worker needs to receive its prompt's KV; a decode leg (`do_remote_prefill`
 * with the prefill worker's `remote_block_ids` and `remote_engine_id`; `"generation_only"` with
 * its `ctx_request_id` and `first_gen_tokens`) takes its prompt's KV as pulled: its engine fills
 * those tokens without compute. No KV crosses between mock workers: the parameters are checked
 * for their shape only, and the prefill worker frees its blocks when it answers (the engines hold
 * them until they are pulled or a timeout ends).
 * @internal
 * @module
 */

import { BadRequest } from './bad-request.js';

/** What a request's hand-over parameters ask, and in which engine's words. */
export interface KvTransfer {
  kind: 'offer' | 'pull';
  /** The engine's words: vLLM's and TensorRT-LLM's parameters, or SGLang's bootstrap room (met before the request runs). */
  via: 'kv_transfer_params' | 'disaggregated_params' | 'bootstrap_room';
}

/**
 * Reads a request's hand-over parameters: `offer` for a prefill leg, `pull` for a decode leg,
 * undefined for neither (absent, null, or parameters that ask for no transfer).
 * @throws {BadRequest} for parameters that are not an object, ask for both, or a pull without the
 * prefill worker's block ids and engine id (TensorRT-LLM's: its request id and first token).
 */
export function readKvTransfer(b: Record<string, unknown>): KvTransfer | undefined {
  const vllm = readConnectorParams(b);
  const trtllm = readDisaggregatedParams(b);
  if (vllm && trtllm) throw new BadRequest('give kv_transfer_params or disaggregated_params, not both', 'disaggregated_params');
  return vllm ? { kind: vllm, via: 'kv_transfer_params' } : trtllm ? { kind: trtllm, via: 'disaggregated_params' } : undefined;
}

/**
 * TensorRT-LLM's `disaggregated_params`: `offer` for a context-only request, `pull` for a
 * generation-only one, undefined for none (absent, null, `context_and_generation`).
 * @throws {BadRequest} for parameters that are not an object, an unknown `request_type`, or a
 * generation-only request without the context answer's `ctx_request_id` and `first_gen_tokens`.
 */
function readDisaggregatedParams(b: Record<string, unknown>): 'offer' | 'pull' | undefined {
  const p = b.disaggregated_params;
  if (p === undefined || p === null) return undefined;
  if (typeof p !== 'object' || Array.isArray(p)) throw new BadRequest('disaggregated_params must be an object', 'disaggregated_params');
  const { request_type: type, ctx_request_id: ctxId, first_gen_tokens: first } = p as Record<string, unknown>;
  if (type === 'context_only') return 'offer';
  if (type === 'context_and_generation') return undefined;
  if (type !== 'generation_only')
    throw new BadRequest(
      'disaggregated_params.request_type must be context_only, generation_only or context_and_generation',
      'disaggregated_params',
    );
  if (!Number.isSafeInteger(ctxId))
    throw new BadRequest('disaggregated_params.ctx_request_id must name the context request', 'disaggregated_params');
  if (!Array.isArray(first) || !first.every((t) => Number.isSafeInteger(t)))
    throw new BadRequest('disaggregated_params.first_gen_tokens must list the context answer’s first token', 'disaggregated_params');
  return 'pull';
}

/** vLLM's `kv_transfer_params` (see {@link readKvTransfer}). */
function readConnectorParams(b: Record<string, unknown>): 'offer' | 'pull' | undefined {
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

/** What a TensorRT-LLM context answer's first choice carries for its generation leg. */
export interface ContextOffer {
  /** The context request's number (TensorRT-LLM's `ctx_request_id`). */
  requestId: number;
  /** The first generated token. */
  firstToken: number;
  engineId: string;
  blockIds: readonly number[];
}

/** A context answer's `disaggregated_params` (`encoded_opaque_state`: where the KV is, opaque to all but the engines). */
export function contextParams(o: ContextOffer): Record<string, unknown> {
  return {
    request_type: 'context_only',
    first_gen_tokens: [o.firstToken],
    ctx_request_id: o.requestId,
    encoded_opaque_state: Buffer.from(JSON.stringify({ engine: o.engineId, blocks: o.blockIds })).toString('base64'),
    draft_tokens: null,
  };
}
