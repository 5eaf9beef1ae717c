/**
 * A request error answered with status 400 and vLLM's error body (by the mock worker, and by the
 * gateway for requests it cannot read).
 * @internal
 * @module
 */

export class BadRequest extends Error {}
