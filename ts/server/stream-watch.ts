/**
 * What the gateway measures of an answer as it passes: the first token (the TTFT, and the
 * prefill's end for the router), the gaps between token events, the engine's `cached_tokens`
 * against the prediction, and, when the router tracks output blocks, the output so far.
 * @internal
 * @module
 */

import { MAX_TOKENS_PER_REQUEST } from '../limits.js';
import type { Outcome, ProxyContext } from './proxy.js';
import { type EventFacts, inspectEvent } from './sse.js';

export function firstToken(ctx: ProxyContext, outcome: Outcome, started: number): void {
  ctx.router.markPrefillCompleted(outcome.id);
  outcome.ttftMs = performance.now() - started;
  ctx.metrics.ttft.observe({ model: outcome.model }, outcome.ttftMs / 1000);
  outcome.trace.event('first_token', { 'kvroute.request_id': outcome.id });
}

/**
 * Records an engine's cached-token report against the prediction for the worker that made it:
 * the request's own, unless `by` names another (the prefill worker of a request whose legs ran
 * at once).
 */
export function reported(
  ctx: ProxyContext,
  outcome: Outcome,
  cached: number | undefined,
  by: Pick<Outcome, 'worker' | 'predicted'> = outcome,
): void {
  if (cached === undefined || by.predicted === undefined) return;
  outcome.reported = cached;
  const worker = by.worker === undefined ? undefined : ctx.fleet.get(by.worker);
  const result = worker?.accuracy.record(by.predicted, cached);
  ctx.metrics.prediction(by.worker, by.predicted, cached, result);
}

/**
 * A stream's output tokens, summed over its choices (each of `n` sequences holds its own output
 * blocks). A chunk's running usage (`continuous_usage_stats`, which the gateway asks for when it
 * counts) gives its choice's count exactly, however many tokens the chunk carries; without one,
 * a token event counts as one token.
 */
export class OutputCount {
  private readonly perChoice = new Map<number, number>();
  /** All choices' tokens so far. */
  total = 0;

  /** Takes a token event's facts; returns the new total. */
  add(facts: EventFacts): number {
    const choice = facts.choice ?? 0;
    const before = this.perChoice.get(choice) ?? 0;
    const running = facts.completionTokens;
    // An engine's running count when it is a plausible one; one more token otherwise.
    const plausible = running !== undefined && Number.isInteger(running) && running >= before && running <= MAX_TOKENS_PER_REQUEST;
    const now = plausible ? running : before + 1;
    this.perChoice.set(choice, now);
    this.total = Math.min(this.total + now - before, MAX_TOKENS_PER_REQUEST);
    return this.total;
  }
}

/** Reads each event of a stream for what the gateway measures; returns the event's facts. */
export function eventWatcher(ctx: ProxyContext, outcome: Outcome, started: number): (event: string) => EventFacts {
  let lastToken = 0;
  const output = ctx.opts.router.routerTrackOutputBlocks === true ? new OutputCount() : undefined;
  return (event) => {
    const facts = inspectEvent(event);
    if (facts.token) {
      const now = performance.now();
      if (outcome.ttftMs === undefined) firstToken(ctx, outcome, started);
      else ctx.metrics.itl.observe({ model: outcome.model }, (now - lastToken) / 1000);
      lastToken = now;
      if (output) ctx.router.markOutputTokens(outcome.id, output.add(facts));
    }
    if (facts.cachedTokens !== undefined) reported(ctx, outcome, facts.cachedTokens);
    return facts;
  };
}
