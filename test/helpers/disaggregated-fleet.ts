/**
 * A disaggregated fleet for the gateway's suites: real mock workers by role, each one's HTTP API
 * behind a TCP proxy that keeps what the gateway sent it (`received`), their KV events direct,
 * and a listening gateway. Closed after each test (with `closeFleetsAfterEach`).
 */

import { afterEach, expect } from 'vitest';
import type { BackendName, Gateway, GatewayOptions, GatewayWorker, MockWorker, MockWorkerOptions, WorkerRole } from '../../ts/index.js';
import { quietGateway, startWorker, wiredEntry, wireTo } from './gateway.js';
import { type Json, postJson, sse } from './http.js';
import { headsOn, type TcpProxy } from './tcp-proxy.js';
import { sleep } from './wait.js';

export interface DisaggregatedFleet {
  url: string;
  workers: MockWorker[];
  /** What the gateway sent each worker, by worker id (1-based). */
  wires: TcpProxy[];
  gateway: Gateway;
  /** The routed requests worker `id` received (not the engine tokenizer's `/tokenize` calls), bodies parsed. */
  received(id: number): { path: string; head: Record<string, string>; body: Json }[];
}

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close().catch(() => undefined);
});

/** How the fleet's workers start and are listed: each role's mock options, and its entry's extra keys. */
export interface FleetShape {
  worker?: (role: WorkerRole) => MockWorkerOptions;
  entry?: (worker: MockWorker, role: WorkerRole) => Partial<GatewayWorker>;
}

/** Workers 1 and 2 prefill, 3 and 4 decode (unless `roles` says otherwise), each behind a wire. */
export async function disaggregatedFleet(
  backend: BackendName,
  roles: WorkerRole[] = ['prefill', 'prefill', 'decode', 'decode'],
  opts: Partial<GatewayOptions> = {},
  shape: FleetShape = {},
): Promise<DisaggregatedFleet> {
  const workers = await Promise.all(roles.map((role) => startWorker(shape.worker?.(role) ?? {})));
  const wires = await Promise.all(workers.map(wireTo));
  const gateway = quietGateway(
    backend,
    opts,
    workers.map((w, i) => ({ ...wiredEntry(w, i + 1, wires[i]), role: roles[i], ...shape.entry?.(w, roles[i]) })),
  );
  closers.push(async () => {
    await gateway.close({ now: true });
    for (const wire of wires) await wire.cut();
  });
  const { url } = await gateway.listen();
  await sleep(300);
  return {
    url,
    workers,
    wires,
    gateway,
    received: (id) =>
      headsOn(wires[id - 1].sent)
        .filter((r) => r.line.startsWith('POST ') && r.line !== 'POST /tokenize')
        .map((r) => ({ path: r.line.split(' ')[1], head: r.head, body: JSON.parse(r.body) })),
  };
}

/** `n` words `seed0 seed1 …`: a prompt of its own per seed. */
export const text = (n: number, seed: string) => Array.from({ length: n }, (_, i) => `${seed}${i}`).join(' ');

/**
 * A streamed chat of one user message with its usage asked for, through `url`; checks that its
 * stream ends with the usage of `limit`'s tokens and `[DONE]`. `limit`: `{ max_tokens: 4 }` or
 * `{ max_completion_tokens: 4 }`.
 */
export async function streamedChat(url: string, limit: Record<string, number>): Promise<{ body: Json; events: Json[]; headers: Headers }> {
  const body = {
    model: 'mock-model',
    messages: [{ role: 'user', content: text(40, 'chat') }],
    ...limit,
    stream: true,
    stream_options: { include_usage: true },
  };
  const r = await sse(`${url}/v1/chat/completions`, body);
  expect(r.status).toBe(200);
  expect(r.events.at(-1)).toBe('[DONE]');
  expect(r.events.at(-2).usage.completion_tokens).toBe(Object.values(limit)[0]);
  return { body, events: r.events, headers: r.headers };
}

/** A completion batch of two prompts (`text(30, 'one')`, `text(30, 'two')`) as request `b`; checks that both choices came. */
export async function twoPromptBatch(url: string): Promise<Awaited<ReturnType<typeof postJson>>> {
  const batch = await postJson(
    `${url}/v1/completions`,
    { model: 'mock-model', prompt: [text(30, 'one'), text(30, 'two')], max_tokens: 2 },
    { 'x-request-id': 'b' },
  );
  expect(batch.status).toBe(200);
  expect(batch.json.choices.map((c: Json) => c.index)).toEqual([0, 1]);
  return batch;
}

/** How long a mock leg waits for its peer: short, so that a missed meeting fails the test rather than hangs it. */
export const PEER_TIMEOUT_MS = 4000;

/** Workers in SGLang's modes by role (aggregated ones serve whole requests), prefill workers listed with their bootstrap ports. */
export const SGLANG: FleetShape = {
  worker: (role) => ({ disaggregationMode: role === 'aggregated' ? null : role, bootstrapPort: 0, bootstrapTimeoutMs: PEER_TIMEOUT_MS }),
  entry: (w, role) => (role === 'prefill' ? { bootstrapPort: w.bootstrapPort } : {}),
};

/** A fleet over SGLang's bootstrap protocol (workers 1 and 2 prefill, 3 and 4 decode unless `roles` says otherwise). */
export const sglangFleet = (backend: BackendName, roles?: WorkerRole[], opts: Partial<GatewayOptions> = {}) =>
  disaggregatedFleet(backend, roles, { disaggregation: { protocol: 'sglang' }, ...opts }, SGLANG);
