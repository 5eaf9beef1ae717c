/**
 * Request errors answered with vLLM's error body: {@link BadRequest} with status 400 (by the mock
 * worker, and by the gateway for requests it cannot read), {@link NotFound} with 404 (by the mock
 * worker, for what vLLM answers 404: an unknown model, adapter or stored response).
 * @internal
 * @module
 */

export class BadRequest extends Error {}

/** vLLM's 404 `NotFoundError`; the mock worker's error handler reads `statusCode`. */
export class NotFound extends Error {
  readonly statusCode = 404;
}
