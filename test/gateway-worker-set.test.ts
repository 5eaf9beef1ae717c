import { describe, expect, test } from 'vitest';
import { createGateway, type WorkerView } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { expectKvError } from './helpers/errors.js';
import { closeFleetsAfterEach, startFleet, startWorker, workerEntry } from './helpers/gateway.js';
import { postJson, sse } from './helpers/http.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

const PROMPT = 'a prompt long enough to fill several KV blocks of sixteen tokens each, and then some more words ';

interface Candidate {
  workerId: number;
  overlapBlocks: number;
}

/** What the index holds of PROMPT per worker, through the admin API's explain. */
async function overlaps(adminUrl: string): Promise<Map<number, number>> {
  const r = await postJson(`${adminUrl}/admin/explain`, { prompt: PROMPT });
  return new Map((r.json.candidates as Candidate[]).map((c) => [c.workerId, c.overlapBlocks]));
}

const ids = (list: WorkerView[]) => list.map((w) => w.id).sort();

describe.each(BACKENDS)('gateway: the whole worker list set at once (%s)', (backend) => {
  test('setWorkers keeps a worker whose engine is the same, retunes it in place, replaces a moved one, adds and removes', async () => {
    const f = await startFleet(backend, 2);
    const served = await postJson(`${f.url}/v1/completions`, { prompt: PROMPT, max_tokens: 2 });
    const warm = Number(served.headers.get('x-kvroute-worker'));
    const other = warm === 1 ? 2 : 1;
    await waitFor(async () => ((await overlaps(f.adminUrl)).get(warm) ?? 0) > 0, "the served worker's blocks in the index");
    const held = (await overlaps(f.adminUrl)).get(warm);
    const entries = [workerEntry(f.workers[0], 1), workerEntry(f.workers[1], 2)];

    // The same engines, one with a new weight and batch budget: nothing it holds is dropped.
    const retuned = entries.map((e) => (e.id === warm ? { ...e, weight: 3, maxNumBatchedTokens: 4096 } : e));
    expect(f.gateway.setWorkers(retuned)).toEqual({
      added: [],
      removed: [],
      replaced: [],
      updated: [BigInt(warm)],
      unchanged: [BigInt(other)],
    });
    expect((await overlaps(f.adminUrl)).get(warm)).toBe(held);
    expect(f.gateway.workers().find((w) => w.id === BigInt(warm))).toMatchObject({ weight: 3, health: 'healthy', routable: true });
    expect(f.gateway.setWorkers(retuned)).toMatchObject({ updated: [], unchanged: [1n, 2n] });

    // The warm worker's id now names another engine: what the index held for the old one goes.
    const moved = await startWorker();
    const replaced = retuned.map((e) => (e.id === warm ? { ...workerEntry(moved, warm), weight: 3 } : e));
    expect(f.gateway.setWorkers(replaced)).toMatchObject({ replaced: [BigInt(warm)], unchanged: [BigInt(other)] });
    // The native index applies the removal on its writer threads: visible once they have.
    await waitFor(async () => ((await overlaps(f.adminUrl)).get(warm) ?? 0) === 0, "the old engine's blocks to go");
    expect(f.gateway.workers().find((w) => w.id === BigInt(warm))).toMatchObject({ url: moved.url, origin: 'config' });

    // One worker out, a new one in; the health gauge follows both.
    const added = await startWorker();
    const next = [replaced.find((e) => e.id === warm) as (typeof replaced)[number], workerEntry(added, 9)];
    expect(f.gateway.setWorkers(next)).toEqual({
      added: [9n],
      removed: [BigInt(other)],
      replaced: [],
      updated: [],
      unchanged: [BigInt(warm)],
    });
    expect(ids(f.gateway.workers())).toEqual([BigInt(warm), 9n].sort());
    expect(f.gateway.router.stats().workers).toBe(2);
    const metrics = await (await fetch(`${f.adminUrl}/metrics`)).text();
    expect(metrics).toContain('kvroute_gateway_worker_health{worker="9",state="healthy"} 1');
    expect(metrics).not.toContain(`kvroute_gateway_worker_health{worker="${other}"`);
    const seen = new Set<string | null>();
    for (let i = 0; i < 8; i++) {
      const r = await postJson(`${f.url}/v1/completions`, { prompt: `after the change ${i}`, max_tokens: 2 });
      expect(r.status).toBe(200);
      seen.add(r.headers.get('x-kvroute-worker'));
    }
    expect(seen.has(String(other))).toBe(false);
  });

  test('a bad list changes nothing and names the entry at fault; after close() it is ERR_CLOSED', async () => {
    const f = await startFleet(backend, 2);
    const entries = [workerEntry(f.workers[0], 1), workerEntry(f.workers[1], 2)];
    const before = f.gateway.workers();
    expectKvError(
      () => f.gateway.setWorkers([entries[0], { ...entries[1], id: 1 }]),
      'ERR_INVALID_ARG',
      /workers\[1\]\.id: worker 1 is listed twice/,
    );
    expectKvError(() => f.gateway.setWorkers([entries[0], { ...entries[1], url: 'ftp://x' }]), 'ERR_INVALID_ARG', /workers\[1\]\.url/);
    expectKvError(() => f.gateway.setWorkers({} as never), 'ERR_INVALID_ARG', /workers must be a list of workers/);
    // The bad entry is the last one: the first's removal of worker 2 did not happen either.
    expectKvError(() => f.gateway.setWorkers([entries[0], { id: 3 } as never]), 'ERR_INVALID_ARG', /workers\[1\]/);
    expect(f.gateway.workers()).toEqual(before);
    await f.gateway.close();
    expectKvError(() => f.gateway.setWorkers(entries), 'ERR_CLOSED', /closed/);
  });

  test('a request in flight on a worker taken out finishes there', async () => {
    const f = await startFleet(backend, 2, {}, { speedup: 2 });
    const stream = sse(`${f.url}/v1/completions`, { prompt: 'a long answer', max_tokens: 60, stream: true });
    await waitFor(() => f.workers.some((w) => w.stats().running[0] > 0), 'the stream to start');
    const busy = f.workers.findIndex((w) => w.stats().running[0] > 0);
    const keep = busy === 0 ? 1 : 0;
    expect(f.gateway.setWorkers([workerEntry(f.workers[keep], keep + 1)]).removed).toEqual([BigInt(busy + 1)]);
    const result = await stream;
    expect(result.status).toBe(200);
    expect(result.events.at(-1)).toBe('[DONE]');
    expect(result.events.some((e) => e !== '[DONE]' && e.error)).toBe(false);
  });

  test('PUT /admin/workers sets the list, behind the admin token; the indexer API keeps its own workers', async () => {
    const f = await startFleet(backend, 2, { auth: { adminToken: 'secret' } });
    const auth = { authorization: 'Bearer secret' };
    const put = async (body: string, headers: Record<string, string> = auth) => {
      const r = await fetch(`${f.adminUrl}/admin/workers`, {
        method: 'PUT',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
      return { status: r.status, text: await r.text() };
    };
    const first = JSON.stringify([workerEntry(f.workers[0], 1)]);
    expect((await put(first, {})).status).toBe(401);
    expect(f.gateway.workers()).toHaveLength(2);
    // An index-only worker registered through Dynamo's indexer API, with an id above 2^53.
    const big = '18446744073709551615';
    const register = await fetch(`${f.adminUrl}/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...auth },
      body: `{"instance_id":${big},"endpoint":"${f.workers[1].kvEventsEndpoints[0]}","model_name":"mock-model","block_size":16}`,
    });
    expect(register.status).toBe(201);
    const ok = await put(first);
    expect(ok.status).toBe(200);
    expect(JSON.parse(ok.text)).toEqual({ added: [], removed: [2], replaced: [], updated: [], unchanged: [1] });
    expect(ids(f.gateway.workers())).toEqual([1n, BigInt(big)]);
    // Listing the indexer's worker is refused whole; ids travel as exact JSON numbers.
    const clash = await put(`[${first.slice(1, -1)},{"id":${big},"url":"${f.workers[1].url}"}]`);
    expect(clash.status).toBe(400);
    expect(JSON.parse(clash.text).error).toMatch(
      new RegExp(`body\\[1\\]\\.id: worker ${big} was added by the indexer API; \\/unregister it first`),
    );
    const notAList = await put('{"workers":[]}');
    expect([notAList.status, JSON.parse(notAList.text).error]).toEqual([400, 'body must be a list of workers']);
    expect(ids(f.gateway.workers())).toEqual([1n, BigInt(big)]);
    const listed = await fetch(`${f.adminUrl}/admin/workers`, { headers: auth });
    expect(((await listed.json()) as { origin: string }[]).map((w) => w.origin)).toEqual(['config', 'indexer']);
  });

  test('before the warm start ends, setWorkers edits the list the gateway starts with', async () => {
    const [a, b] = await Promise.all([startWorker(), startWorker()]);
    // No peer answers there: the warm start fails and the gateway starts cold, with the list as set meanwhile.
    const gateway = createGateway({
      blockSize: 16,
      backend,
      logLevel: false,
      workers: [workerEntry(a, 1)],
      warmStart: { peer: 'http://127.0.0.1:9', timeoutMs: 2000 },
    });
    try {
      expect(gateway.workers()).toEqual([]);
      expect(gateway.setWorkers([workerEntry(a, 1), workerEntry(b, 2)])).toEqual({
        added: [2n],
        removed: [],
        replaced: [],
        updated: [],
        unchanged: [1n],
      });
      expect(gateway.setWorkers([workerEntry(b, 2)])).toMatchObject({ removed: [1n], unchanged: [2n] });
      await gateway.listen();
      expect(await gateway.warmStart).toBeInstanceOf(Error);
      expect(ids(gateway.workers())).toEqual([2n]);
    } finally {
      await gateway.close();
    }
  });
});
