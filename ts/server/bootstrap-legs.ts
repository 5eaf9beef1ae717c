/**
 * Disaggregated serving over SGLang's bootstrap protocol (`disaggregation.protocol: 'sglang'`):
 * a prefill worker (`--disaggregation-mode prefill`) runs a bootstrap server beside its HTTP API;
 * a request's two legs go out at once, each the request itself with the prefill worker's
 * `bootstrap_host` and `bootstrap_port` and one fresh `bootstrap_room`. The decode worker meets
 * the prefill worker in that room and receives the prompt's KV; the prefill worker computes the
 * prompt, hands the KV over and answers with its first token. Neither leg can finish without the
 * other, so they cannot be sent in turn as vLLM's are (disaggregation.ts).
 *
 * Both legs are routed by the router's cost, each in its pool: the prefill leg booked under its
 * own id beside the decode leg's booking (which carries no prefill work, as a decode worker
 * computes none), and freed when the prefill worker answers. The client gets the decode worker's
 * answer once the prefill worker's has come, so that a failed prefill leg is retried, with a new
 * room and a new decode leg, on another prefill worker before anything reaches the client. A
 * decode leg that fails as its prefill leg does is not held against its worker
 * ({@link PEER_VERDICT_MS}), nor one whose prefill worker is hung, nor the other way round
 * ({@link peerSilent}). A prefill worker's 4xx is the request's fault and is the client's answer.
 * @internal
 * @module
 */

import { TIMED_OUT, within } from '../within.js';
import type { FailureKind } from './breaker.js';
import {
  connect,
  expectedCachedTokens,
  LEG_ABANDONED,
  type Leg,
  type PeerState,
  queueKeyOf,
  type Routed,
  routeFields,
  routeOnce,
  sendLeg,
  type Upstream,
} from './connect.js';
import { describeError, failureKind, workerGone } from './failures.js';
import { inputLogprobsOf } from './generate-facts.js';
import { type FirstLeg, legsBody } from './legs.js';
import type { Outcome, ProxyContext } from './proxy.js';
import { inScope, routingScope } from './scope.js';
import { answerCachedTokens } from './sse.js';
import { reported } from './stream-watch.js';
import type { Attempt } from './tracing/request-trace.js';
import { SGLANG_BOOTSTRAP_PORT } from './worker-role.js';

/** The fields SGLang's bootstrap protocol adds to both legs; the gateway sets them. */
const BOOTSTRAP_FIELDS = ['bootstrap_host', 'bootstrap_port', 'bootstrap_room'] as const;

/** A room number: random, as SGLang's own load balancer draws them, below 2^53 so that JSON keeps it exact. */
function newRoom(): number {
  return Math.floor(Math.random() * Number.MAX_SAFE_INTEGER);
}

/** The host a decode worker reaches a prefill worker's bootstrap server at: its URL's, IPv6 in brackets as in a URL. */
function bootstrapHost(url: string | undefined): string {
  return url === undefined ? '' : new URL(url).hostname;
}

/** The prefill leg's body: the request, unstreamed (its answer is read whole, never the client's but for a 4xx). */
function prefillBody(body: Record<string, unknown>, room: Record<string, unknown>): string {
  const { stream_options: _options, ...rest } = body;
  return JSON.stringify({ ...rest, ...room, stream: false });
}

/**
 * How a prefill leg ended: answered (its engine's cached-token report), refused by a 4xx, failed
 * (why, how, and whether its decode worker's death `excused` it), or cut because its decode leg
 * could not be served (`abandoned`).
 */
type PrefillEnd =
  | { ok: true; cached: number | undefined; inputLogprobs: unknown[] | undefined }
  | { answer: Upstream; attempt: Attempt }
  | { failed: string; kind: FailureKind; excused?: true; silentDecode?: bigint }
  | { abandoned: true };

/**
 * A prefill leg's abort reason when its worker was found silent (see {@link peerSilent}) by its
 * decode leg's failure: the leg fails as its worker's, rather than being abandoned.
 */
const WORKER_SILENT = 'worker_silent';

/**
 * How long one leg's failure (a 5xx or a timeout) waits for news of the other leg before it
 * counts against its own worker. A decode worker fails at once when its prefill worker dies (its
 * room is gone: SGLang aborts the transfer with a 500), and a prefill worker's transfer fails when
 * its decode worker dies; the gateway may read that failure before the dead worker's own. A dead
 * worker's news reaches both legs at about the same time, and a worker's own fault leaves its
 * peer waiting, so a second tells them apart without holding a retry up for long.
 */
const PEER_VERDICT_MS = 1000;

/**
 * News of a pair's decode leg, for its prefill leg's verdict: the decode worker it was last
 * routed to, and when decode workers died (a refused or reset connection to one, or its probes
 * found it down). A decode worker that dies as the prefill worker sends it the KV fails that
 * transfer, and the prefill worker's 5xx or timeout within {@link PEER_VERDICT_MS} of the death,
 * before or after it, is put down to it.
 */
class DecodeNews {
  /** The decode worker the leg was last routed to. */
  worker: bigint | undefined;
  private last = Number.NEGATIVE_INFINITY;
  private readonly waiting: (() => void)[] = [];

  died(): void {
    this.last = performance.now();
    for (const wake of this.waiting.splice(0)) wake();
  }

  /** Whether a decode worker died within `ms` before now, or dies within `ms` from now. */
  async near(ms: number): Promise<boolean> {
    if (performance.now() - this.last <= ms) return true;
    const next = new Promise<void>((resolve) => this.waiting.push(resolve));
    return (await within(next, ms)) !== TIMED_OUT;
  }
}

/**
 * Whether a failed leg's peer worker is silent: asked when the peer's leg has not answered, by a
 * health probe now (its breaker counts the verdict, as for any probe). A hung worker (a stuck
 * scheduler, a wedged GPU) leaves its peer leg waiting in the room until that leg's worker gives
 * up with a 5xx or the gateway's timeout runs out, and that worker, which did nothing wrong, would
 * be blamed for it; the hung worker's own leg would time out later still, or never be blamed at all.
 */
async function peerSilent(ctx: ProxyContext, worker: bigint, leg: 'prefill' | 'decode'): Promise<boolean> {
  const verdict = await ctx.fleet.probeNow(worker);
  if (verdict === undefined) return false;
  ctx.metrics.peerProbes.inc({ worker: String(worker), leg, result: verdict ? 'answered' : 'silent' });
  return !verdict;
}

/**
 * Why a prefill leg's 5xx or timeout is its decode worker's doing: a decode worker of its pair
 * died near it (see {@link DecodeNews}), or the one it waits for is silent (see {@link peerSilent}).
 */
async function decodeExcuse(ctx: ProxyContext, decode: DecodeNews): Promise<'died' | 'silent' | undefined> {
  if (await decode.near(PEER_VERDICT_MS)) return 'died';
  if (decode.worker !== undefined && (await peerSilent(ctx, decode.worker, 'decode'))) return 'silent';
  return undefined;
}

/**
 * Sends the prefill leg and reads its answer; its booking (`bookedAs`) is freed when it ends. A
 * 5xx or a timeout its decode worker explains (see {@link decodeExcuse}) is not counted against
 * the prefill worker, whose transfer that worker failed.
 */
async function prefillAnswer(
  ctx: ProxyContext,
  decision: Upstream['decision'],
  path: string,
  leg: Leg,
  signal: AbortSignal,
  outcome: Outcome,
  bookedAs: string,
  decode: DecodeNews,
): Promise<PrefillEnd> {
  const worker = decision.workerId;
  const { attempt, response } = sendLeg(ctx, decision, path, leg, signal, outcome);
  const { res, err } = await response.then(
    (ok) => ({ res: ok, err: undefined }),
    (failure: unknown) => ({ res: undefined, err: failure }),
  );
  const failed = async (why: number | string, kind: FailureKind, detail: string): Promise<PrefillEnd> => {
    ctx.router.free(bookedAs);
    const excuse = signal.aborted || workerGone(kind) ? undefined : await decodeExcuse(ctx, decode);
    if (signal.aborted && signal.reason === WORKER_SILENT) {
      // Its health probe counted against it already.
      attempt.end('timeout', 'no answer, and its health probe failed when its decode leg failed');
      ctx.metrics.retries.inc({ reason: 'probe' });
      return { failed: `worker ${worker}: no answer, and its health probe failed`, kind: 'probe' };
    }
    if (signal.aborted) {
      attempt.end(signal.reason === LEG_ABANDONED ? LEG_ABANDONED : 'client_closed');
      return { abandoned: true };
    }
    if (excuse !== undefined) {
      attempt.end(why, `${detail}, after its peer leg failed`);
      ctx.metrics.peerFailedLegs.inc({ worker: String(worker), leg: 'prefill' });
      const silent = excuse === 'silent' ? { silentDecode: decode.worker as bigint } : {};
      return {
        failed: `worker ${worker} ${detail} after its decode worker ${excuse === 'died' ? 'failed' : 'fell silent'}`,
        kind,
        excused: true,
        ...silent,
      };
    }
    attempt.end(why, detail);
    ctx.fleet.failure(worker, kind, detail);
    ctx.metrics.retries.inc({ reason: kind });
    return { failed: `worker ${worker}: ${detail}`, kind };
  };
  if (res === undefined) return failed(failureKind(err), failureKind(err), describeError(err));
  if (res.statusCode >= 500) {
    await res.body.dump().catch(() => undefined);
    return failed(res.statusCode, 'status', `answered ${res.statusCode}`);
  }
  if (res.statusCode !== 200) {
    // The request's own fault: the client's answer, its try ending with the request.
    ctx.router.free(bookedAs);
    return { answer: { decision, res }, attempt };
  }
  let text: string;
  try {
    text = await res.body.text();
  } catch (e) {
    return failed('upstream_error', failureKind(e), describeError(e));
  }
  ctx.router.free(bookedAs);
  ctx.fleet.success(worker);
  attempt.end(200);
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    answer = undefined;
  }
  return { ok: true, cached: answerCachedTokens(answer), inputLogprobs: inputLogprobsOf(answer) };
}

/**
 * Where a prefill leg stands for its failed decode leg (see {@link PeerState}): waiting in its
 * room, unless it ended in time. Its decode worker is blameless when the prefill worker was
 * unreachable, reset or silent (a connect failure or a timeout), the request refused, or the leg
 * cut (the client left). A prefill worker's 5xx does not clear it: that may as well follow from the
 * decode worker's fault (a transfer to a decode worker that failed), so both count.
 */
function prefillState(end: PrefillEnd | typeof TIMED_OUT): PeerState {
  if (end === TIMED_OUT) return 'waiting';
  if ('ok' in end || ('failed' in end && end.kind === 'status')) return 'ended';
  return 'failed';
}

/** Drops a decode leg's answer the client will not get (its prefill leg failed or refused). */
async function abandon(ctx: ProxyContext, outcome: Outcome, decode: Upstream | { refused: unknown }): Promise<void> {
  if ('refused' in decode) return;
  outcome.attempt?.end(LEG_ABANDONED);
  outcome.attempt = undefined;
  await decode.res.body.dump().catch(() => undefined);
  ctx.router.free(outcome.id);
}

/**
 * Sends one pair of legs, the prefill leg to the routed prefill worker and the decode leg to none
 * of the `silent` decode workers; `retry` when that prefill worker failed, or when the decode
 * worker failed (`prefillSpared`: the prefill worker served its part, or failed only because the
 * decode worker died or fell silent, and may be chosen again; `silentDecode`: the one that fell silent).
 */
async function sendPair(
  r: Routed,
  prefill: Upstream['decision'],
  body: Record<string, unknown>,
  silent: ReadonlySet<bigint>,
): Promise<FirstLeg | { retry: string; prefillSpared?: true; silentDecode?: bigint }> {
  const { ctx, tokens, path, signal, outcome } = r;
  const spec = ctx.fleet.get(prefill.workerId)?.spec;
  const room = {
    bootstrap_host: bootstrapHost(spec?.url),
    bootstrap_port: spec?.bootstrapPort ?? SGLANG_BOOTSTRAP_PORT,
    bootstrap_room: newRoom(),
  };
  const bookedAs = `${outcome.id}/prefill`;
  const expected = expectedCachedTokens(prefill, ctx.opts.blockSize, tokens.length);
  // Either leg ending without its part done ends the other, which would wait for its peer in vain.
  const prefillStop = new AbortController();
  const decodeStop = new AbortController();
  const onClientGone = () => {
    prefillStop.abort('client_closed');
    decodeStop.abort('client_closed');
  };
  signal.addEventListener('abort', onClientGone, { once: true });
  // The decode worker's answer, once the client's, stays cut by the client's leaving while it is delivered.
  let answered = false;
  const decode = new DecodeNews();
  const t0 = performance.now();
  try {
    const prefillEnd = prefillAnswer(
      ctx,
      prefill,
      path,
      { kind: 'prefill', body: prefillBody(body, room) },
      prefillStop.signal,
      outcome,
      bookedAs,
      decode,
    ).then((end) => {
      if ('ok' in end) ctx.metrics.prefillLegTime.observe((performance.now() - t0) / 1000);
      else decodeStop.abort(LEG_ABANDONED);
      return end;
    });
    const [p, d] = await Promise.all([
      prefillEnd,
      connect({ ...r, signal: decodeStop.signal }, undefined, {
        kind: 'decode',
        body: JSON.stringify({ ...body, ...room }),
        // A refused or reset connection, or a worker found down, is the decode worker's own: the prefill leg is asked as it stands.
        peer: async (failure) => {
          if (workerGone(failure)) {
            decode.died();
            return prefillState(await within(prefillEnd, 0));
          }
          const state = prefillState(await within(prefillEnd, PEER_VERDICT_MS));
          // A prefill leg still unanswered may be a hung prefill worker's, which this decode worker waited for in vain.
          if (state !== 'waiting' || !(await peerSilent(ctx, prefill.workerId, 'prefill'))) return state;
          prefillStop.abort(WORKER_SILENT);
          return 'failed';
        },
        routed: (worker) => {
          decode.worker = worker;
        },
        avoid: silent,
      }).then((up) => {
        if ('refused' in up) prefillStop.abort(LEG_ABANDONED);
        return up;
      }),
    ]);
    if (signal.aborted) {
      await abandon(ctx, outcome, d);
      outcome.status = 'client_closed';
      return { refusal: { refused: 'client_closed', message: 'the client went away' } };
    }
    if ('failed' in p) {
      await abandon(ctx, outcome, d);
      outcome.status = 0;
      if (!p.excused) return { retry: p.failed };
      return p.silentDecode === undefined
        ? { retry: p.failed, prefillSpared: true }
        : { retry: p.failed, prefillSpared: true, silentDecode: p.silentDecode };
    }
    // The decode leg found no decode worker that answered (its refusal says why).
    if ('abandoned' in p) return { refusal: 'refused' in d ? d : { refused: 502, message: 'the prefill leg was cut' } };
    if ('answer' in p) {
      await abandon(ctx, outcome, d);
      ctx.metrics.prefillLegs.inc({ worker: String(prefill.workerId), result: 'refused' });
      outcome.status = 0;
      outcome.worker = prefill.workerId;
      outcome.dpRank = prefill.dpRank;
      outcome.attempt = p.attempt;
      return { answer: p.answer };
    }
    ctx.metrics.prefillLegs.inc({ worker: String(prefill.workerId), result: 'transferred' });
    // The prefill worker's cache is the one the router predicted for: its report is compared.
    reported(ctx, outcome, p.cached, { worker: prefill.workerId, predicted: expected });
    outcome.prefill = { worker: prefill.workerId, dpRank: prefill.dpRank, cachedTokens: expected };
    // A decode worker that failed once its room's KV was on its way leaves no room to retry in: the pair goes again.
    if ('refused' in d) return d.refused === 'client_closed' ? { refusal: d } : { retry: d.message, prefillSpared: true };
    answered = true;
    // The prompt's log probabilities are the prefill worker's (SGLang's `/generate` with `return_logprob`).
    return p.inputLogprobs === undefined ? { answer: d } : { answer: d, prefillInputLogprobs: p.inputLogprobs };
  } finally {
    if (!answered) signal.removeEventListener('abort', onClientGone);
  }
}

/**
 * Serves a request's two legs over SGLang's bootstrap protocol (see the module's description): a
 * prefill worker routed, both legs sent, retried on another prefill worker when it fails, and
 * as a new pair when the decode worker fails once its prefill leg is served.
 */
export async function bootstrapLegs(r: Routed): Promise<FirstLeg> {
  const { ctx, read, tokens, signal, outcome } = r;
  const start = legsBody(read, outcome, BOOTSTRAP_FIELDS);
  if ('refusal' in start) return start;
  const { body } = start;
  const scope = routingScope(read.model, read.cacheSalt, ctx.fleet);
  const fields = routeFields(read, scope, 'prefill');
  const tried = new Set<bigint>();
  // Decode workers found silent by a failed prefill leg: the request's later pairs go to others.
  const silentDecodes = new Set<bigint>();
  let lastFailure = '';
  let decodeFailed = false;
  for (let attempt = 0; attempt <= ctx.opts.upstream.retries; attempt++) {
    const allowed = ctx.fleet.routableByRole().prefill.filter((id) => !tried.has(id) && inScope(scope, id));
    if (allowed.length === 0) break;
    const prefill = await routeOnce(ctx, tokens, allowed, fields, queueKeyOf(read, scope), signal, outcome, `${outcome.id}/prefill`);
    if ('refused' in prefill) {
      outcome.status = prefill.refused;
      return { refusal: prefill };
    }
    tried.add(prefill.workerId);
    outcome.attempts++;
    const pair = await sendPair(r, prefill, body, silentDecodes);
    if (!('retry' in pair)) return pair;
    lastFailure = pair.retry;
    decodeFailed = pair.prefillSpared === true;
    if (pair.silentDecode !== undefined) silentDecodes.add(pair.silentDecode);
    if (decodeFailed) tried.delete(prefill.workerId);
  }
  const refused = lastFailure ? 502 : 503;
  outcome.status = refused;
  // The last pair's prefill leg was served: its decode leg's refusal says why the request was not.
  if (decodeFailed) return { refusal: { refused, reason: 'upstream_failed', message: lastFailure } };
  ctx.metrics.prefillLegs.inc({ worker: 'none', result: 'failed' });
  return {
    refusal: {
      refused,
      reason: lastFailure ? 'upstream_failed' : 'no_worker',
      message: `no prefill worker could serve the request (${lastFailure || 'no healthy prefill worker'})`,
    },
  };
}
