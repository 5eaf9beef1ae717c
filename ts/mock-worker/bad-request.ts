/**
 * Request errors answered with vLLM's error body: {@link BadRequest} with status 400 (by the mock
 * worker, and by the gateway for requests it cannot read), {@link NotFound} with 404 (by the mock
 * worker, for what vLLM answers 404: an unknown model, adapter or stored response).
 * @internal
 * @module
 */

export class BadRequest extends Error {
  /** The request field at fault, which vLLM's error body names as `param` (when it knows it). */
  readonly param: string | undefined;

  constructor(message: string, param?: string) {
    super(message);
    this.param = param;
  }
}

/** vLLM's 404 `NotFoundError`; the mock worker's error handler reads `statusCode`. */
export class NotFound extends Error {
  readonly statusCode = 404;
}

/**
 * vLLM's refusal of one request field (its `VLLMValidationError`): the message ends with the
 * field's name and the value refused, as vLLM prints them, and the error body names the field.
 * @param value the value as Python prints it (a float as Python prints it: `floatRepr`), or undefined to leave it out
 */
export function invalidField(message: string, field: string, value?: string): BadRequest {
  return new BadRequest(`${message} (parameter=${field}${value === undefined ? '' : `, value=${value}`})`, field);
}
