/**
 * The `engine` tokenizer's transport: vLLM's `/tokenize` on the fleet's workers, each routable
 * worker (serving the model asked for) tried at most once, in turn. Its answers are sorted three
 * ways: tokens; the request's own fault, which the client gets in the engine's words (an unknown
 * model with the engine's 404, as vLLM answers it on every route; a bad field with 400); and the
 * worker's fault (5xx, no answer), which counts against its breaker and moves on to the next. A
 * worker without a `/tokenize` route (SGLang and TensorRT-LLM serve none that takes chats) is a
 * configuration error, said once in the log and answered 500.
 * @internal
 * @module
 */

import type { FastifyBaseLogger } from 'fastify';
import { KvRouteError } from '../errors.js';
import { describeError, failureKind } from './failures.js';
import type { Fleet } from './fleet.js';
import type { EngineTokenize } from './tokenize.js';

/**
 * An engine's answer to `/tokenize` that is the request's fault (a 4xx).
 * vLLM checks the model first and answers one it does not serve 404 `NotFoundError` ("The model
 * `x` does not exist."), which the gateway passes on, so that an OpenAI client raises
 * `NotFoundError` as it would against vLLM itself.
 */
export class EngineRefusal extends KvRouteError {
  /** 404 for an unknown model, which the gateway's error handlers answer as it is; else none (400). */
  readonly statusCode: 404 | undefined;

  constructor(engineStatus: number, message: string) {
    super('ERR_INVALID_ARG', message);
    this.statusCode = engineStatus === 404 ? 404 : undefined;
  }

  /** An ordinary class check: KvRouteError's brand check would take every KvRouteError for one. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    return Function.prototype[Symbol.hasInstance].call(EngineRefusal, value);
  }

  /** The engine does not serve the model the request names. */
  get unknownModel(): boolean {
    return this.statusCode === 404;
  }
}

/** The message of an engine's error body: vLLM's `{error: {message}}` (flat `{message}` before), FastAPI's `{detail}`. */
function engineMessage(answer: unknown): string | undefined {
  if (answer === null || typeof answer !== 'object') return undefined;
  const a = answer as { error?: { message?: unknown }; message?: unknown; detail?: unknown };
  const m = a.error?.message ?? a.message;
  if (typeof m === 'string') return m;
  return typeof a.detail === 'string' ? a.detail : undefined;
}

/** Whether a 404 is the route missing (FastAPI's `{"detail":"Not Found"}`, or not JSON) rather than vLLM's unknown model. */
function routeMissing(status: number, answer: unknown): boolean {
  if (status !== 404 && status !== 405) return false;
  const a = answer as { error?: unknown; message?: unknown } | undefined;
  return a === undefined || (a?.error === undefined && a?.message === undefined);
}

export function askWorkersToTokenize(fleet: Fleet, log: FastifyBaseLogger): EngineTokenize {
  let next = 0;
  const warned = new Set<bigint>();
  return async (body, trace) => {
    // A prompt for an adapter or one of several models goes to a worker serving it (vLLM tokenizes with its tokenizer).
    const ids = fleet.routableFor(body.model);
    const start = next++;
    let last: unknown;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[(start + i) % ids.length];
      const m = fleet.get(id);
      if (!m?.pool) continue;
      let status: number;
      let answer: unknown;
      try {
        // A worker that goes down is left at once for the next (cut-off.ts).
        const res = await m.cutOff.request(m.pool, {
          method: 'POST',
          path: '/tokenize',
          headers: { ...fleet.upstreamHeaders, ...trace, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        status = res.statusCode;
        const text = await res.body.text();
        try {
          answer = JSON.parse(text);
        } catch {
          if (status === 200) throw new Error('/tokenize answered 200 with a body that is not JSON');
        }
      } catch (err) {
        last = err;
        fleet.failure(id, failureKind(err), describeError(err));
        continue;
      }
      const tokens = (answer as { tokens?: unknown } | undefined)?.tokens;
      if (status === 200 && Array.isArray(tokens)) return tokens as number[];
      if (routeMissing(status, answer)) {
        const why = `worker ${id} has no /tokenize (the engine tokenizer asks vLLM's): set the gateway's tokenizer to the model's tokenizer.json`;
        if (!warned.has(id)) log.error({ worker: String(id) }, why);
        warned.add(id);
        throw new KvRouteError('ERR_DEPENDENCY_MISSING', why);
      }
      if (status < 500) throw new EngineRefusal(status, engineMessage(answer) ?? `/tokenize answered ${status}`);
      last = new Error(`/tokenize answered ${status}${engineMessage(answer) ? `: ${engineMessage(answer)}` : ''}`);
      fleet.failure(id, 'status', `/tokenize answered ${status}`);
    }
    throw new KvRouteError('ERR_NO_WORKERS', `no worker could tokenize the prompt${last ? ` (${(last as Error).message})` : ''}`);
  };
}
