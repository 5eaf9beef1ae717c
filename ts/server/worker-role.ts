/**
 * A worker's part in serving requests: whole requests, or one leg of a disaggregated request
 * (see `disaggregation.ts`). Its own file so that both the worker list and DNS discovery check it.
 * @internal
 * @module
 */

import { describe } from '../validate.js';
import { invalid } from './option-checks.js';

/**
 * A worker's part in serving requests. With routable `'prefill'` and `'decode'` workers, a
 * completion or chat is served in two legs, as vLLM's disaggregated proxy serves it (NixlConnector
 * and the like): its prefill on a prefill worker chosen by KV overlap and load (`max_tokens` 1,
 * `kv_transfer_params.do_remote_decode`), then the request itself on a decode worker, with the
 * KV-transfer parameters the prefill answered. Other requests go whole to aggregated and decode
 * workers; a prefill worker takes prefill legs only. SGLang's protocol is the other way of
 * passing the KV (see {@link DisaggregationProtocol}).
 * @group Gateway
 */
export type WorkerRole = 'aggregated' | 'prefill' | 'decode';

/**
 * How a disaggregated fleet's engines pass a request's KV cache, and so how the gateway sends its
 * two legs:
 * - `'vllm'`: vLLM's KV connectors (NixlConnector and those taking the same parameters). The
 *   prefill leg first (`max_tokens` 1, `kv_transfer_params.do_remote_decode`), then the decode
 *   leg with the `kv_transfer_params` the prefill worker answered.
 * - `'trtllm'`: TensorRT-LLM's (`trtllm-serve` context and generation servers). The context leg
 *   first (`disaggregated_params.request_type: "context_only"`), then the generation leg with the
 *   `disaggregated_params` of the context answer's first choice as `"generation_only"` (and a
 *   completion's prompt as the context server's token ids). A context answer that already ended
 *   is the client's answer.
 * - `'sglang'`: SGLang's bootstrap protocol (`--disaggregation-mode prefill|decode`). Both legs at
 *   once, each the request with the prefill worker's `bootstrap_host` and `bootstrap_port` and a
 *   fresh `bootstrap_room`: the decode worker meets the prefill worker there and receives the KV.
 *   An SGLang decode worker cannot serve a request alone, so whole requests go to aggregated
 *   workers only.
 * @group Gateway
 */
export type DisaggregationProtocol = 'vllm' | 'trtllm' | 'sglang';

/** The protocols `disaggregation.protocol` may name. */
export const DISAGGREGATION_PROTOCOLS: readonly DisaggregationProtocol[] = ['vllm', 'trtllm', 'sglang'];

/** The roles a worker may have. */
export const WORKER_ROLES: readonly WorkerRole[] = ['aggregated', 'prefill', 'decode'];

/** A worker's `role`, `'aggregated'` when absent. */
export function workerRole(value: unknown, at: string): WorkerRole {
  if (value === undefined) return 'aggregated';
  if (!WORKER_ROLES.includes(value as WorkerRole))
    throw invalid(`${at} must be one of ${WORKER_ROLES.map((r) => `'${r}'`).join(', ')}, got ${describe(value)}`);
  return value as WorkerRole;
}

/** SGLang's `--disaggregation-bootstrap-port` default: where a prefill worker's bootstrap server listens unless told otherwise. */
export const SGLANG_BOOTSTRAP_PORT = 8998;

/**
 * A worker's `bootstrapPort` (SGLang's disaggregation bootstrap server): a TCP port, for
 * `prefill` workers only (a decode worker's is never asked for); undefined when absent.
 */
export function bootstrapPort(value: unknown, role: WorkerRole, at: string): number | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 65535)
    throw invalid(`${at} must be a TCP port (1 to 65535), got ${describe(value)}`);
  if (role !== 'prefill') throw invalid(`${at} is a prefill worker's (SGLang's bootstrap server), but the role is '${role}'`);
  return value;
}
