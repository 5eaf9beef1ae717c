/**
 * vLLM's KV connectors' hand-over between a request's two legs (NixlConnector, and those that
 * take the same `kv_transfer_params`), as vLLM's own disaggregation proxy drives it: the prefill
 * leg asks the connector to keep the KV for a remote decode; its answer's parameters tell the
 * decode worker where to pull it from.
 * @internal
 * @module
 */

import type { TwoStepProtocol } from './legs.js';

/** What the prefill leg asks of the prefill worker's connector (vLLM's proxy sends the same). */
const PREFILL_TRANSFER = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

/** The KV-transfer parameters of a prefill worker's answer, when it gave any. */
function transferParams(answer: unknown): Record<string, unknown> | undefined {
  const params = (answer as { kv_transfer_params?: unknown } | null)?.kv_transfer_params;
  return params !== null && typeof params === 'object' && !Array.isArray(params) ? (params as Record<string, unknown>) : undefined;
}

export const VLLM_HANDOVER: TwoStepProtocol = {
  gatewaySet: ['kv_transfer_params'],
  /**
   * One token, unstreamed, asking the connector to keep the KV for a remote decode; the options
   * that concern the output alone (`stream_options`, `min_tokens`) stay with the decode leg.
   */
  prefillBody(body) {
    const { stream_options: _options, min_tokens: _min, min_completion_tokens: _minCompletion, ...rest } = body;
    return JSON.stringify({
      ...rest,
      stream: false,
      max_tokens: 1,
      ...(body.max_completion_tokens === undefined ? {} : { max_completion_tokens: 1 }),
      kv_transfer_params: PREFILL_TRANSFER,
    });
  },
  /** The request with the answer's parameters; without any (a worker without a connector) the request as sent, which the decode worker computes itself, as vLLM's proxy lets it. */
  decodeBody(body, answer, forward) {
    const params = transferParams(answer);
    return params
      ? { body: JSON.stringify({ ...body, kv_transfer_params: params }), transferred: true }
      : { body: forward, transferred: false };
  },
};
