/**
 * vLLM's `GET /is_sleeping` through the gateway, where the fleet is the engine: every worker
 * (resting ones too) is asked, and the answer is theirs, `{"is_sleeping": …}`, when they agree.
 * Workers that disagree (one woken or put to sleep outside the gateway, or one that refused a
 * call) get 409 naming which sleep, so that an RL loop checking that its fleet slept or woke is
 * not told yes for half of it; a worker that fails to answer (404 from an engine without vLLM's
 * dev-mode routes) makes the answer its failure, as with the control routes. Each answer also
 * decides that worker's rest, as a health probe's does (`Fleet.foundSleeping`).
 * @internal
 * @module
 */

import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ProxyContext } from './proxy.js';
import { answerAll, ask, startBroadcast, type WorkerAnswer } from './worker-broadcast.js';

/** A worker's `is_sleeping`, when its answer is vLLM's. */
function sleepingIn(answer: WorkerAnswer): boolean | undefined {
  if (answer.status !== 200) return undefined;
  try {
    const body = JSON.parse(answer.text) as { is_sleeping?: unknown };
    return typeof body.is_sleeping === 'boolean' ? body.is_sleeping : undefined;
  } catch {
    return undefined;
  }
}

/** Answers `GET /is_sleeping` from every worker's answer. */
export async function askIsSleeping(ctx: ProxyContext, req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const r = startBroadcast(ctx, req, reply, '/is_sleeping', false, true);
  if (!r) return reply;
  const headers = { 'x-request-id': r.start.clientId ?? r.start.id };
  const answers = await Promise.all(
    r.workers.map((worker) => ask(ctx, worker, '/is_sleeping', undefined, headers, r.start.abort.signal, r.start.trace, 'GET')),
  );
  if (r.start.abort.signal.aborted) {
    r.start.trace.end('client_closed');
    return reply;
  }
  const sleeping = answers.map(sleepingIn);
  answers.forEach((a, i) => {
    const s = sleeping[i];
    if (s !== undefined) ctx.fleet.foundSleeping(a.worker, s);
  });
  const asleep = answers.filter((_, i) => sleeping[i] === true).map((a) => a.worker);
  const awake = answers.filter((_, i) => sleeping[i] === false).map((a) => a.worker);
  const type = 'application/json';
  if (asleep.length === 0 || awake.length === 0 || sleeping.includes(undefined)) return answerAll(ctx, reply, r, answers, { type });
  return answerAll(ctx, reply, r, answers, { conflict: `the workers disagree: ${asleep.join(', ')} sleeping, ${awake.join(', ')} awake` });
}
