/**
 * One request's run on a rank of the mock engine, as the Responses and Messages APIs drive it:
 * its `llm_request` span told of the first token and the end (whichever way it ends), and, for
 * an answer sent whole, the wait for it: 503 when the engine stops it, cancelled when the client
 * goes away. Every streamed answer (completions, chat, Responses, Messages) opens its event
 * stream here.
 * @internal
 * @module
 */

import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { LiveRequest } from './rank.js';
import type { EngineRequestSpan } from './tracing.js';

/** What a run feeds the engine: the prompt, its scope and the output it will produce. */
export type RunInput = Pick<LiveRequest, 'prompt' | 'lora' | 'cacheSalt' | 'output'>;

export interface EngineRun {
  /** The engine's request for these callbacks, its span told of the first token and the end. */
  job(onTokens: LiveRequest['onTokens'], onDone: LiveRequest['onDone'], onAbort: LiveRequest['onAbort']): LiveRequest;
  /** Ends the span when the request ends otherwise (the client gone). */
  ended(error?: string): void;
}

/** A run of `input` traced by `span`; `completionTokens()` counts the output so far, for the span's end. */
export function engineRun(input: RunInput, span: EngineRequestSpan, completionTokens: () => number): EngineRun {
  const ended = (error?: string) => span.end({ promptTokens: input.prompt.length, completionTokens: completionTokens() }, error);
  return {
    ended,
    job: (onTokens, onDone, onAbort) => ({
      ...input,
      onTokens: (tokens, first) => {
        span.firstToken();
        onTokens(tokens, first);
      },
      onDone: (cached) => {
        ended();
        onDone(cached);
      },
      onAbort: (reason) => {
        ended(reason);
        onAbort(reason);
      },
    }),
  };
}

/**
 * Runs a request whose answer goes whole: `onTokens` collects the output, `answer(cached)` is the
 * body once it is done; the engine stopping it is a 503, and a client that goes away cancels it.
 */
export function runWhole<T>(
  rank: { run(job: LiveRequest): () => void },
  reply: FastifyReply,
  run: EngineRun,
  onTokens: (tokens: number[]) => void,
  answer: (cachedTokens: number) => T,
): Promise<T> {
  return new Promise((resolve, reject) => {
    const cancel = rank.run(
      run.job(
        (tokens) => onTokens(tokens),
        (cached) => resolve(answer(cached)),
        (reason) => reject(Object.assign(new Error(`the engine stopped: ${reason}`), { statusCode: 503 })),
      ),
    );
    // The response's close (not the request's, which fires once the body is read) tells a client that went away.
    reply.raw.on('close', () => {
      if (reply.raw.writableFinished) return;
      cancel();
      run.ended('the client went away');
    });
  });
}

/**
 * Runs a streamed request: `onDone` or `onStopped` (the engine stopped it) ends the stream, only
 * the first of them; a client that goes away first cancels it.
 */
export function runStreamed(
  rank: { run(job: LiveRequest): () => void },
  res: ServerResponse,
  run: EngineRun,
  onTokens: LiveRequest['onTokens'],
  onDone: (cachedTokens: number) => void,
  onStopped: (reason: string) => void,
): void {
  let done = false;
  const cancel = rank.run(
    run.job(
      onTokens,
      (cached) => {
        done = true;
        onDone(cached);
      },
      (reason) => {
        if (done) return;
        done = true;
        onStopped(reason);
      },
    ),
  );
  res.on('close', () => {
    if (done) return;
    cancel();
    run.ended('the client went away');
  });
}

/** Opens an answer's event stream, naming the rank that serves it as vLLM does. */
export function openEventStream(res: ServerResponse, dpRank: number): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
    'x-data-parallel-rank': String(dpRank),
  });
}
