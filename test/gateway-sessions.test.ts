/**
 * The gateway's session affinity: a client's `X-Dynamo-Session-ID` (or `X-Kvroute-Session-Id`)
 * keeps its requests on one worker when the router's `sessionAffinityTtlSecs` is set.
 */
import { describe, expect, test } from 'vitest';
import { createGateway } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, startFleet, startWorker, workerEntry } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { natsServerSuite } from './helpers/nats-server.js';
import { scrape } from './helpers/prometheus.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

const turn = (i: number) => `Turn ${i}: a question of its own, unlike any other turn's. `.repeat(3);

describe.each(BACKENDS)('gateway session affinity (%s)', (backend) => {
  test("a session's requests stay on the worker its first one went to; a request without a session goes by cost", async () => {
    const f = await startFleet(backend, 3, { router: { sessionAffinityTtlSecs: 60 } });
    const ask = (i: number, headers: Record<string, string>) =>
      postJson(`${f.url}/v1/completions`, { prompt: turn(i), max_tokens: 2 }, headers);
    const first = await ask(0, { 'x-dynamo-session-id': 'agent-1' });
    expect(first.status).toBe(200);
    const worker = first.headers.get('x-kvroute-worker');
    await waitFor(() => f.gateway.router.stats().index.blocks > 0, "the first turn's blocks to be indexed");
    // Unrelated prompts: by cost they would go to a worker with an emptier cache.
    const alone = await ask(1, {});
    expect(alone.headers.get('x-kvroute-worker')).not.toBe(worker);
    for (let i = 2; i < 5; i++) {
      const header = i % 2 === 0 ? 'x-dynamo-session-id' : 'x-kvroute-session-id';
      const r = await ask(i, { [header]: 'agent-1' });
      expect(r.headers.get('x-kvroute-worker'), `turn ${i}`).toBe(worker);
    }
    const bound = await fetch(`${f.url}/admin/sessions/agent-1`);
    expect(await bound.json()).toMatchObject({ sessionId: 'agent-1', workerId: Number(worker), inFlight: 0, origin: '' });
    const unknown = await fetch(`${f.url}/admin/sessions/agent-2`);
    expect([unknown.status, ((await unknown.json()) as { error: string }).error]).toEqual([404, 'session "agent-2" is not bound']);
    const page = await scrape(`${f.url}/metrics`);
    expect(page.sum('kvroute_router_session_bindings')).toBe(1);
    expect(page.sum('kvroute_router_session_hits_total')).toBe(3);
    expect(page.sum('kvroute_router_session_binds_total')).toBe(1);
    const tooLong = await ask(9, { 'x-dynamo-session-id': 's'.repeat(1025) });
    expect([tooLong.status, tooLong.json.error.message]).toEqual([400, 'x-dynamo-session-id must be at most 1024 characters, got 1025']);
  });
});

describe.each(BACKENDS)("gateway session affinity from coding agents' own ids (%s)", (backend) => {
  test("Claude Code's X-Claude-Code-Session-Id and an OpenAI client's prompt_cache_key keep a session on its worker; the gateway's own headers come first", async () => {
    const f = await startFleet(backend, 3, { router: { sessionAffinityTtlSecs: 60 } });
    const ask = (i: number, headers: Record<string, string>, body: Record<string, unknown> = {}) =>
      postJson(`${f.url}/v1/chat/completions`, { messages: [{ role: 'user', content: turn(i) }], max_tokens: 2, ...body }, headers);
    const claude = await ask(0, { 'x-claude-code-session-id': 'c0ffee00-0000-4000-8000-000000000001' });
    const codex = await ask(1, {}, { prompt_cache_key: 'codex-thread-1' });
    expect([claude.status, codex.status]).toEqual([200, 200]);
    for (let i = 2; i < 6; i++) {
      const a = await ask(i, { 'x-claude-code-session-id': 'c0ffee00-0000-4000-8000-000000000001' });
      const b = await ask(i + 10, {}, { prompt_cache_key: 'codex-thread-1' });
      expect(a.headers.get('x-kvroute-worker'), `turn ${i}`).toBe(claude.headers.get('x-kvroute-worker'));
      expect(b.headers.get('x-kvroute-worker'), `turn ${i}`).toBe(codex.headers.get('x-kvroute-worker'));
    }
    expect(f.gateway.router.stats().sessions?.bindings).toBe(2);
    // The gateway's own header names the session when both are sent; an agent's id too long to use is passed over, not refused.
    const both = await ask(20, { 'x-kvroute-session-id': 'mine', 'x-claude-code-session-id': 'c0ffee00-0000-4000-8000-000000000001' });
    expect(both.status).toBe(200);
    expect(f.gateway.router.stats().sessions?.bindings).toBe(3);
    const long = await ask(21, { 'x-claude-code-session-id': 'x'.repeat(1025) }, { prompt_cache_key: 'y'.repeat(1025) });
    expect(long.status).toBe(200);
    expect(f.gateway.router.stats().sessions?.bindings).toBe(3);
  });
});

describe.each(BACKENDS)('gateway session affinity with several models (%s)', (backend) => {
  test("an agent's session that calls two models keeps a worker per model", async () => {
    const workers = await Promise.all(['m-a', 'm-a', 'm-b', 'm-b'].map((model) => startWorker({ model })));
    const f = await startFleet(backend, 0, {
      router: { sessionAffinityTtlSecs: 60 },
      workers: workers.map((w, i) => workerEntry(w, i + 1)),
    });
    const models = async () => ((await (await fetch(`${f.url}/v1/models`)).json()) as { data: unknown[] }).data.length;
    await waitFor(async () => (await models()) === 2, 'both models to be learned');
    const ask = async (i: number, model: string) => {
      const r = await postJson(`${f.url}/v1/completions`, { prompt: turn(i), max_tokens: 2, model }, { 'x-dynamo-session-id': 'agent' });
      expect(r.status).toBe(200);
      return r.headers.get('x-kvroute-worker');
    };
    // The planner and the executor take turns; each keeps its first worker.
    const seen = { 'm-a': new Set<string | null>(), 'm-b': new Set<string | null>() };
    for (let i = 0; i < 6; i++) {
      const model = i % 2 === 0 ? 'm-a' : 'm-b';
      seen[model].add(await ask(i, model));
    }
    expect([seen['m-a'].size, seen['m-b'].size]).toEqual([1, 1]);
    expect(f.gateway.router.stats().sessions).toMatchObject({ bound: 2, bindings: 2, hits: 4, invalidated: 0 });
    const planner = await fetch(`${f.url}/admin/sessions/agent?model=m-a`);
    expect(await planner.json()).toMatchObject({ sessionId: 'agent', model: 'm-a', workerId: Number([...seen['m-a']][0]) });
    const noModel = await fetch(`${f.url}/admin/sessions/agent`);
    expect([noModel.status, ((await noModel.json()) as { error: string }).error]).toEqual([404, 'session "agent" is not bound']);
    const twice = await fetch(`${f.url}/admin/sessions/agent?model=m-a&model=m-b`);
    expect([twice.status, ((await twice.json()) as { error: string }).error]).toEqual([400, 'model must be given once']);
  });
});

describe('gateway replicas share session bindings over a real nats-server', () => {
  const { server: nats } = natsServerSuite();

  test.each(BACKENDS)("a session's turns stay on one worker whichever gateway they reach (%s)", async (backend) => {
    const router = (id: string) => ({
      sessionAffinityTtlSecs: 60,
      replicas: { nats: { servers: nats.url, subject: `kvroute.gw-sessions-${backend}` }, replicaId: id, heartbeatMs: 100 },
    });
    const a = await startFleet(backend, 3, { router: router('gw-a') });
    const b = createGateway({
      blockSize: 16,
      backend,
      logLevel: false,
      router: router('gw-b'),
      workers: a.workers.map((w, i) => workerEntry(w, i + 1)),
    });
    try {
      const { url: bUrl } = await b.listen();
      await waitFor(() => b.router.stats().replicas?.peers === 1 && a.gateway.router.stats().replicas?.peers === 1, 'the gateways to meet');
      const ask = (url: string, i: number, session?: string) =>
        postJson(`${url}/v1/completions`, { prompt: turn(i), max_tokens: 2 }, session ? { 'x-dynamo-session-id': session } : {});
      const first = await ask(a.url, 0, 'agent-1');
      const worker = first.headers.get('x-kvroute-worker');
      await waitFor(() => b.router.stats().sessions?.bound === 1, 'gateway B to hear of the binding');
      // B's index holds the first turn's blocks too (an equal cost goes to the emptier cache).
      await waitFor(() => b.router.stats().index.blocks > 0, "the first turn's blocks to reach B's index");
      // Through B, by cost an unrelated prompt goes elsewhere; the session's turns go to A's worker.
      expect((await ask(bUrl, 1)).headers.get('x-kvroute-worker')).not.toBe(worker);
      for (let i = 2; i < 5; i++) {
        const r = await ask(i % 2 === 0 ? bUrl : a.url, i, 'agent-1');
        expect(r.headers.get('x-kvroute-worker'), `turn ${i}`).toBe(worker);
      }
      const page = await scrape(`${bUrl}/metrics`);
      expect(page.sum('kvroute_router_session_adopted_total')).toBe(1);
      expect(page.sum('kvroute_router_session_binds_total')).toBe(0);
      expect(page.sum('kvroute_replica_session_updates_received_total')).toBeGreaterThan(0);
    } finally {
      await b.close();
    }
  });
});
