/**
 * A worker's answer the gateway already read whole, given to the client as any worker's answer
 * is (`deliver`, or a batch's collection): the JSON as it came, or, for a client that asked for
 * a stream, the same answer as a stream's events. TensorRT-LLM's context answer that finished its
 * request (disaggregation.ts) is one.
 * @internal
 * @module
 */

import { Readable } from 'node:stream';
import type { Dispatcher } from 'undici';
import type { Upstream } from './connect.js';

/** A choice of an answer: a chat's carries its `message`. */
interface Choice {
  message?: Record<string, unknown>;
  [key: string]: unknown;
}

/**
 * A completion's or chat's answer as a stream's events: its choices in one chunk (a chat's
 * `message` as the `delta`), its usage in a chunk of its own (which the gateway keeps or drops as
 * for any stream), then `[DONE]`.
 */
export function asEvents(answer: Record<string, unknown>): string {
  const { usage, choices, object, ...head } = answer;
  const chat = object === 'chat.completion';
  const chunkObject = chat ? 'chat.completion.chunk' : object;
  const each = ((choices ?? []) as Choice[]).map(({ message, ...c }) => (chat ? { ...c, delta: message ?? {} } : c));
  const events: Record<string, unknown>[] = [{ ...head, object: chunkObject, choices: each }];
  if (usage !== undefined) events.push({ ...head, object: chunkObject, choices: [], usage });
  return `${events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('')}data: [DONE]\n\n`;
}

/** A body already read, with the methods of undici's that the gateway calls. */
function readBody(text: string): Dispatcher.ResponseData['body'] {
  const stream = Readable.from([Buffer.from(text)]);
  return Object.assign(stream, {
    text: async () => text,
    json: async () => JSON.parse(text) as unknown,
    dump: async () => {
      stream.destroy();
    },
  }) as unknown as Dispatcher.ResponseData['body'];
}

/** `answer`, the worker's that `decision` chose, as an upstream answer: JSON, or events for a stream. */
export function answeredUpstream(decision: Upstream['decision'], answer: Record<string, unknown>, stream: boolean): Upstream {
  const text = stream ? asEvents(answer) : JSON.stringify(answer);
  return {
    decision,
    res: {
      statusCode: 200,
      headers: { 'content-type': stream ? 'text/event-stream' : 'application/json' },
      body: readBody(text),
    } as unknown as Dispatcher.ResponseData,
  };
}
