/**
 * What the protocols of disaggregated serving share (the two-step ones in `disaggregation.ts`,
 * SGLang's in `bootstrap-legs.ts`): the hand-over of a two-step protocol, the body both legs
 * start from, and what a request's first step leaves the proxy to do.
 * @internal
 * @module
 */

import type { Leg, Upstream } from './connect.js';
import { BadRequest, type ReadRequest } from './prompt.js';
import type { Outcome, Refusal } from './proxy.js';

/**
 * How a two-step protocol hands a request's KV from its prefill leg to its decode leg (vLLM's
 * connectors', TensorRT-LLM's): the prefill leg's body, and what its answer leaves to send.
 */
export interface TwoStepProtocol {
  /** The body fields the gateway sets for the engines (a client's own is refused in a disaggregated fleet). */
  readonly gatewaySet: readonly string[];
  /** The prefill leg's body, from the client's. */
  prefillBody(body: Record<string, unknown>): string;
  /**
   * The decode leg's body from the prefill worker's answer (`transferred` when it carries the
   * answer's parameters; without them the decode worker computes the prompt itself), or the
   * request's final answer when the prefill leg already finished it.
   */
  decodeBody(
    body: Record<string, unknown>,
    answer: unknown,
    forward: string,
  ): { body: string; transferred: boolean } | { finished: Record<string, unknown> };
}

/** What is left after a request's first leg: the leg to connect (undefined: the request whole), a refusal, or a worker's answer to give the client. */
export type FirstLeg =
  | { leg: Leg | undefined }
  | { refusal: Refusal }
  | {
      answer: Upstream;
      /**
       * The prompt's log probabilities from the prefill worker, to put in front of the answer's own
       * (SGLang's `/generate` with `return_logprob`, whose decode worker computed no prompt).
       */
      prefillInputLogprobs?: unknown[];
    };

/** A request served whole: what callers use for one that is not split, without awaiting anything. */
export const WHOLE: FirstLeg = { leg: undefined };

/**
 * The body the client sent, as forwarded: both legs are made from it.
 * @throws {BadRequest} when it sets one of `gatewaySet`, which the gateway sets.
 */
function forwardedBody(read: ReadRequest, gatewaySet: readonly string[]): Record<string, unknown> {
  const body = JSON.parse(read.forward) as Record<string, unknown>;
  // The gateway sets the engines' parameters of both legs; a client's own would be lost or
  // contradicted, silently.
  const own = gatewaySet.find((k) => body[k] !== undefined && body[k] !== null);
  if (own !== undefined)
    throw new BadRequest(`${own} is set by the gateway when it serves a request in prefill and decode legs: leave it out`);
  return body;
}

/**
 * The client's body both legs start from, or the 400 refusal of one that sets what the gateway
 * sets for the engines (the protocol's `gatewaySet`).
 */
export function legsBody(
  read: ReadRequest,
  outcome: Outcome,
  gatewaySet: readonly string[],
): { body: Record<string, unknown> } | { refusal: Refusal } {
  try {
    return { body: forwardedBody(read, gatewaySet) };
  } catch (err) {
    if (!(err instanceof BadRequest)) throw err;
    outcome.status = 400;
    return { refusal: { refused: 400, message: err.message } };
  }
}
