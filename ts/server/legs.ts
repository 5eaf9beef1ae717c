/**
 * What both protocols of disaggregated serving share (vLLM's in `disaggregation.ts`, SGLang's
 * in `bootstrap-legs.ts`): the body both legs start from, and what a request's first step leaves
 * the proxy to do.
 * @internal
 * @module
 */

import type { Leg, Upstream } from './connect.js';
import { BadRequest, type ReadRequest } from './prompt.js';
import type { Outcome, Refusal } from './proxy.js';

/** What is left after a request's first leg: the leg to connect (undefined: the request whole), a refusal, or a worker's answer to give the client. */
export type FirstLeg = { leg: Leg | undefined } | { refusal: Refusal } | { answer: Upstream };

/** A request served whole: what callers use for one that is not split, without awaiting anything. */
export const WHOLE: FirstLeg = { leg: undefined };

/**
 * The body the client sent, as forwarded: both legs are made from it.
 * @throws {BadRequest} when it sets `kv_transfer_params` or one of `gatewaySet`, which the gateway sets.
 */
function forwardedBody(read: ReadRequest, gatewaySet: readonly string[]): Record<string, unknown> {
  const body = JSON.parse(read.forward) as Record<string, unknown>;
  // The gateway sets the engines' parameters of both legs; a client's own would be lost or
  // contradicted, silently.
  const own = ['kv_transfer_params', ...gatewaySet].find((k) => body[k] !== undefined && body[k] !== null);
  if (own !== undefined)
    throw new BadRequest(`${own} is set by the gateway when it serves a request in prefill and decode legs: leave it out`);
  return body;
}

/**
 * The client's body both legs start from, or the 400 refusal of one that sets what the gateway
 * sets (`kv_transfer_params`, and the protocol's own `gatewaySet`).
 */
export function legsBody(
  read: ReadRequest,
  outcome: Outcome,
  gatewaySet: readonly string[] = [],
): { body: Record<string, unknown> } | { refusal: Refusal } {
  try {
    return { body: forwardedBody(read, gatewaySet) };
  } catch (err) {
    if (!(err instanceof BadRequest)) throw err;
    outcome.status = 400;
    return { refusal: { refused: 400, message: err.message } };
  }
}
