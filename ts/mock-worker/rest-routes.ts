/**
 * The engine resting on demand, as RL loops drive it between rollouts. vLLM's sleep mode on the mock worker (`POST /sleep`, `POST /wake_up`, `GET /is_sleeping`, which
 * vLLM serves in its dev mode with `--enable-sleep-mode`): asleep, an engine has offloaded its
 * weights and dropped its KV cache, so it serves no request until woken. The mock drops every
 * rank's cache when it falls asleep (publishing `AllBlocksCleared`, as the reset does) and answers
 * generation requests 503 while asleep; it refuses to sleep with 400 while requests run (its cache
 * in use), as its cache reset does. It wakes in parts as vLLM does: `?tags=weights`, then
 * `?tags=kv_cache` (no tags: both). SGLang's `POST /pause_generation` stops the engine's passes
 * (running and new requests wait where they are) until `POST /continue_generation`.
 * @internal
 * @module
 */

import type { FastifyInstance } from 'fastify';
import { resetAllCaches } from './cache-reset.js';
import { errorBody } from './openai.js';

/** The parts a sleeping engine wakes, one `tags` each. */
const PARTS = ['weights', 'kv_cache'] as const;

export class SleepMode {
  private readonly asleep = new Set<string>();

  get sleeping(): boolean {
    return this.asleep.size > 0;
  }

  fallAsleep(): void {
    for (const p of PARTS) this.asleep.add(p);
  }

  wake(parts: readonly string[]): void {
    for (const p of parts) this.asleep.delete(p);
  }
}

/** What the routes act on: each rank's cache, and its passes. */
interface RestingRank {
  resetPrefixCache(): boolean;
  pause(): void;
  resume(): void;
}

export function registerRestRoutes(app: FastifyInstance, sleep: SleepMode, ranks: () => readonly RestingRank[]): void {
  app.post('/sleep', async (_req, reply) => {
    // Asleep only when every cache could go, as the cache reset decides.
    if (!resetAllCaches(ranks())) return reply.code(400).send(errorBody('the KV cache is in use by running requests', 400, null));
    sleep.fallAsleep();
    return reply.code(200).send();
  });
  app.post('/wake_up', async (req, reply) => {
    const tags = new URLSearchParams(req.url.includes('?') ? req.url.slice(req.url.indexOf('?') + 1) : '').getAll('tags');
    const unknown = tags.find((t) => !(PARTS as readonly string[]).includes(t));
    if (unknown !== undefined)
      return reply.code(400).send(errorBody(`unknown tag ${JSON.stringify(unknown)} (weights, kv_cache)`, 400, 'tags'));
    sleep.wake(tags.length > 0 ? tags : PARTS);
    return reply.code(200).send();
  });
  app.get('/is_sleeping', async () => ({ is_sleeping: sleep.sleeping }));
  app.post('/pause_generation', async () => {
    for (const rank of ranks()) rank.pause();
    return { message: 'Generation paused successfully.', status: 'ok' };
  });
  app.post('/continue_generation', async () => {
    for (const rank of ranks()) rank.resume();
    return { message: 'Generation continued successfully.', status: 'ok' };
  });
}
