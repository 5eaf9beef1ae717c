/**
 * Disaggregated serving: a request's prefill on one worker, its decode on another, the KV cache
 * passed between them by the engines. For engines that hand it over in two steps (vLLM's
 * connectors, `vllm-handover.ts`; TensorRT-LLM's, `trtllm-handover.ts`) the gateway does what
 * their own disaggregation proxies do, with both legs routed by the router instead of in turn:
 *
 * 1. the prefill leg goes to a `prefill` worker, chosen by KV overlap and load like any request,
 *    as a copy of the request, unstreamed, asking its engine to keep the KV for a remote decode;
 *    its answer carries the parameters the decode worker needs to receive it;
 * 2. the decode leg goes to a `decode` worker, chosen among the decode pool by the same cost (a
 *    decode worker already holding the prompt's prefix receives less of it), as the request
 *    itself with those parameters; its answer is the client's, streamed or not. Its booking's
 *    prefill ends at once: a decode worker computes none.
 *
 * A prefill leg is routed and retried like a whole request. When no prefill worker answers it,
 * the request goes whole to a decode worker (both engines' decode workers also serve requests
 * that carry no parameters), so a lost prefill pool slows requests but does not fail them. A
 * prefill worker's 4xx is the request's fault and is the client's answer, as is a prefill answer
 * that already finished the request (TensorRT-LLM's rule). A batch's prompts, which the gateway
 * routes one by one, are split one by one. With `disaggregation.bypassBelowTokens`, a prompt a
 * decode worker already holds all but a few tokens of skips the prefill leg (Dynamo's
 * conditional prefill). SGLang's engines pass the KV otherwise, both legs at once:
 * `bootstrap-legs.ts`.
 * @internal
 * @module
 */

import type { PotentialLoad } from '../router/types.js';
import { answeredUpstream } from './answered.js';
import { bootstrapLegs } from './bootstrap-legs.js';
import { connect, type Routed } from './connect.js';
import { describeError, failureKind } from './failures.js';
import type { Fleet } from './fleet.js';
import { type FirstLeg, legsBody, type TwoStepProtocol, WHOLE } from './legs.js';
import type { ReadRequest, RequestKind } from './prompt.js';
import type { ProxyContext } from './proxy.js';
import { inScope, routingScope } from './scope.js';
import { usageFacts } from './sse.js';
import { reported } from './stream-watch.js';
import { TRTLLM_HANDOVER } from './trtllm-handover.js';
import { VLLM_HANDOVER } from './vllm-handover.js';
import type { DisaggregationProtocol } from './worker-role.js';

/** How each two-step protocol hands the KV over (SGLang's sends both legs at once: bootstrap-legs.ts). */
const HANDOVERS: Record<Exclude<DisaggregationProtocol, 'sglang'>, TwoStepProtocol> = { vllm: VLLM_HANDOVER, trtllm: TRTLLM_HANDOVER };

/** The prefill worker that served a request's prefill leg. */
export interface PrefillLeg {
  worker: bigint;
  dpRank: number;
  /** The prompt tokens it should have found cached (see `expectedCachedTokens`). */
  cachedTokens: number;
}

/**
 * Whether a request is served in two legs: a completion or chat of one prompt (a batch's
 * prompts are asked one by one), or with SGLang's protocol an SGLang `/generate` of one prompt (whose legs meet
 * in a bootstrap room as a completion's do), not pinned to a worker, with a prefill and a decode
 * worker routable for its model; the decode workers that may take it when so.
 */
export function splits(fleet: Fleet, read: ReadRequest, kind: RequestKind, only: bigint | undefined): bigint[] | undefined {
  const splittable = kind === 'completion' || kind === 'chat' || (kind === 'generate' && fleet.protocol === 'sglang');
  if (!splittable || read.batch || read.wholeBatch || only !== undefined) return undefined;
  const { prefill, decode } = fleet.routableByRole();
  if (prefill.length === 0 || decode.length === 0) return undefined;
  const scope = routingScope(read.model, read.cacheSalt, fleet);
  const decoders = decode.filter((id) => inScope(scope, id));
  return decoders.length > 0 && prefill.some((id) => inScope(scope, id)) ? decoders : undefined;
}

/**
 * Whether a request that could be split skips its prefill leg (`disaggregation.bypassBelowTokens`):
 * the decode worker caching the longest prefix of its prompt holds all but at most that many of
 * its tokens, so computing them there costs less than a prefill worker's leg and a KV transfer.
 */
function bypassesPrefill(ctx: ProxyContext, read: ReadRequest, tokens: number[], decoders: bigint[]): boolean {
  const limit = ctx.opts.disaggregation.bypassBelowTokens;
  if (limit === null) return false;
  const scope = routingScope(read.model, read.cacheSalt, ctx.fleet);
  const loads = ctx.router.potentialLoads({ requestId: 'kvroute-prefill-bypass', tokens, allowedWorkers: decoders, ...scope.hash });
  return skipsPrefill(tokens.length, loads, ctx.opts.blockSize, limit);
}

/** The bypass rule: the prompt's tokens the best-placed decode worker lacks are at most `limit` (null: never). */
export function skipsPrefill(
  promptTokens: number,
  decodeLoads: readonly PotentialLoad[],
  blockSize: number,
  limit: number | null,
): boolean {
  return limit !== null && netNewTokens(promptTokens, decodeLoads, blockSize) <= limit;
}

/**
 * A prompt's tokens that the decode worker caching its longest prefix lacks (Dynamo's net new
 * tokens of conditional prefill), from the decode workers' `potentialLoads`.
 */
function netNewTokens(promptTokens: number, decodeLoads: readonly PotentialLoad[], blockSize: number): number {
  let held = 0;
  for (const c of decodeLoads) held = Math.max(held, c.overlapBlocks);
  return Math.max(0, promptTokens - held * blockSize);
}

/**
 * Runs a request's prefill leg (see the module's description); what it leaves is the decode leg,
 * the whole request (no prefill worker answered), a refusal (the gateway's, or a client gone), or
 * a prefill worker's answer for the client (a 4xx, its body unread; a finished request).
 */
async function prefillLeg(r: Routed, { protocol, body }: { protocol: TwoStepProtocol; body: Record<string, unknown> }): Promise<FirstLeg> {
  const { ctx, read, signal, outcome } = r;
  const t0 = performance.now();
  const up = await connect(r, undefined, { kind: 'prefill', body: protocol.prefillBody(body) });
  if ('refused' in up) {
    if (up.reason === 'upstream_failed' || up.reason === 'no_worker') {
      ctx.metrics.prefillLegs.inc({ worker: 'none', result: 'failed' });
      return WHOLE;
    }
    return { refusal: up };
  }
  const { decision, res } = up;
  if (res.statusCode !== 200) {
    // Below 500 (connect retries the rest): the request's own fault. The worker's answer is the
    // client's, and its try ends with the request, as a whole request's would.
    ctx.metrics.prefillLegs.inc({ worker: String(decision.workerId), result: 'refused' });
    ctx.metrics.prefillLegTime.observe((performance.now() - t0) / 1000);
    return { answer: up };
  }
  const attempt = outcome.attempt;
  outcome.attempt = undefined;
  let text: string;
  try {
    text = await res.body.text();
  } catch (err) {
    ctx.router.free(outcome.id);
    if (signal.aborted) {
      attempt?.end('client_closed');
      outcome.status = 'client_closed';
      return { refusal: { refused: 'client_closed', message: 'the client went away' } };
    }
    attempt?.end('upstream_error', describeError(err));
    ctx.fleet.failure(decision.workerId, failureKind(err), describeError(err));
    ctx.metrics.prefillLegs.inc({ worker: String(decision.workerId), result: 'failed' });
    return WHOLE;
  } finally {
    ctx.metrics.prefillLegTime.observe((performance.now() - t0) / 1000);
  }
  ctx.router.free(outcome.id);
  ctx.fleet.success(decision.workerId);
  attempt?.end(res.statusCode);
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    answer = undefined;
  }
  // The prefill worker's cache is the one the router predicted for: its report is compared here;
  // the decode worker's is not comparable.
  reported(ctx, outcome, usageFacts((answer as { usage?: never } | undefined)?.usage).cachedTokens);
  outcome.predicted = undefined;
  const next = protocol.decodeBody(body, answer, read.forward);
  if ('finished' in next) {
    // The prefill worker finished the request (TensorRT-LLM's context answer that stopped at its
    // first token): its answer is the client's, and no decode leg runs.
    ctx.metrics.prefillLegs.inc({ worker: String(decision.workerId), result: 'finished' });
    return { answer: answeredUpstream(decision, next.finished, read.stream) };
  }
  outcome.prefill = { worker: decision.workerId, dpRank: decision.dpRank, cachedTokens: outcome.expected ?? decision.cachedTokens };
  ctx.metrics.prefillLegs.inc({ worker: String(decision.workerId), result: next.transferred ? 'transferred' : 'no_transfer_params' });
  return { leg: { kind: 'decode', body: next.body } };
}

/**
 * Where a request that may be split starts (`decoders`: what {@link splits} answered): its
 * prefill leg, unless `disaggregation.bypassBelowTokens` skips it; with SGLang's protocol, both
 * legs at once (bootstrap-legs.ts), the decode worker's answer left to deliver.
 */
export async function firstLeg(r: Routed, decoders: bigint[]): Promise<FirstLeg> {
  const { ctx, read, tokens, outcome } = r;
  if (ctx.opts.disaggregation.protocol === 'sglang') return bootstrapLegs(r);
  const protocol = HANDOVERS[ctx.opts.disaggregation.protocol];
  // A client's own hand-over parameters are refused whether or not the prefill leg is skipped.
  const start = legsBody(read, outcome, protocol.gatewaySet);
  if ('refusal' in start) return start;
  if (bypassesPrefill(ctx, read, tokens, decoders)) {
    ctx.metrics.prefillLegs.inc({ worker: 'none', result: 'bypassed' });
    return WHOLE;
  }
  return prefillLeg(r, { protocol, body: start.body });
}
