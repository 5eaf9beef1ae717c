/**
 * What both protocols of disaggregated serving share (vLLM's in `disaggregation.ts`, SGLang's
 * in `bootstrap-legs.ts`): the body both legs start from, and what a request's first step leaves
 * the proxy to do.
 * @internal
 * @module
 */

import type { Leg, Upstream } from './connect.js';
import { BadRequest, type ReadRequest } from './prompt.js';
import type { Refusal } from './proxy.js';

/** What is left after a request's first leg: the leg to connect (undefined: the request whole), a refusal, or a worker's answer to give the client. */
export type FirstLeg = { leg: Leg | undefined } | { refusal: Refusal } | { answer: Upstream };

/** A request served whole: what callers use for one that is not split, without awaiting anything. */
export const WHOLE: FirstLeg = { leg: undefined };

/**
 * The body the client sent, as forwarded: both legs are made from it.
 * @throws {BadRequest} when it sets `kv_transfer_params`, which the gateway sets.
 */
export function forwardedBody(read: ReadRequest): Record<string, unknown> {
  const body = JSON.parse(read.forward) as Record<string, unknown>;
  // The gateway sets the connector's parameters of both legs; a client's own would be lost or
  // contradicted, silently.
  if (body.kv_transfer_params !== undefined && body.kv_transfer_params !== null)
    throw new BadRequest('kv_transfer_params is set by the gateway when it serves a request in prefill and decode legs: leave it out');
  return body;
}
