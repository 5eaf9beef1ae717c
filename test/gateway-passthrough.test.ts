import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, test } from 'vitest';
import { mockTokenize } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, gatewayBehindWire, startFleet, startWorker, workerEntry } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { headsOn } from './helpers/tcp-proxy.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

describe.each(BACKENDS)('gateway: vLLM endpoints passed on (%s)', (backend) => {
  test("/tokenize and /detokenize reach a worker serving the model and answer with the engine's words", async () => {
    const workers = [await startWorker({ model: 'm-a' }), await startWorker({ model: 'm-b' })];
    const f = await startFleet(backend, 0, { workers: workers.map((w, i) => workerEntry(w, i + 1)) });
    const models = async () => ((await (await fetch(`${f.url}/v1/models`)).json()) as { data: unknown[] }).data.length;
    await waitFor(async () => (await models()) === 2, 'both models to be learned');
    for (let i = 0; i < 4; i++) {
      const t = await postJson(`${f.url}/tokenize`, { model: 'm-b', prompt: `hello ${i}` });
      expect([t.status, t.headers.get('x-kvroute-worker')]).toEqual([200, '2']);
      expect(t.json.tokens).toEqual(mockTokenize(`hello ${i}`));
      const d = await postJson(`${f.url}/detokenize`, { model: 'm-a', tokens: t.json.tokens });
      expect([d.status, d.headers.get('x-kvroute-worker'), d.json.prompt]).toEqual([200, '1', `hello ${i}`]);
    }
    // The engine's refusal is the client's answer, status and message.
    const bad = await postJson(`${f.url}/detokenize`, { model: 'm-a', tokens: 'nope' });
    expect([bad.status, bad.json.error.message]).toEqual([400, 'tokens must be a list of token ids']);
    // An endpoint the engine does not serve is its 404, not the gateway's.
    const missing = await postJson(`${f.url}/v1/embeddings`, { model: 'm-a', input: 'x' });
    expect([missing.status, missing.headers.get('x-kvroute-worker')]).toEqual([404, '1']);
    expect((await postJson(`${f.url}/tokenize`, [1, 2])).status).toBe(400);
    const metrics = await (await fetch(`${f.url}/metrics`)).text();
    expect(metrics).toMatch(/kvroute_gateway_passed_on_requests_total\{path="\/tokenize",worker="2",status="200"\} 4/);
    expect(metrics).toMatch(/kvroute_gateway_passed_on_requests_total\{path="\/detokenize",worker="1",status="400"\} 1/);
    // Passed-on requests are not routed: the router booked none.
    expect(f.gateway.router.stats().routed).toBe(0);
    // An endpoint the gateway does not serve: OpenAI's error shape, naming it, and counted.
    const audio = await postJson(`${f.url}/v1/audio/transcriptions?x=1`, { model: 'm-a' });
    expect([audio.status, audio.json.error]).toEqual([
      404,
      { message: 'kvroute serve has no route POST /v1/audio/transcriptions', type: 'NotFoundError', param: null, code: 404 },
    ]);
    expect(await (await fetch(`${f.url}/metrics`)).text()).toMatch(/kvroute_gateway_rejected_total\{reason="not_found"\} 1/);
  });

  test("the engines' GET descriptions (/version, SGLang's /get_model_info and /get_server_info) are passed on, query and all", async () => {
    const f = await startFleet(backend, 2);
    const info = await fetch(`${f.url}/get_model_info`);
    expect(info.status).toBe(200);
    expect(await info.json()).toMatchObject({ model_path: 'mock-model', is_generation: true });
    expect(['1', '2']).toContain(info.headers.get('x-kvroute-worker'));
    const server = (await (await fetch(`${f.url}/get_server_info?verbose=1`)).json()) as Record<string, unknown>;
    expect(server).toMatchObject({ model_path: 'mock-model', page_size: 16 });
    expect(((await (await fetch(`${f.url}/version`)).json()) as { version: string }).version).toMatch(/^\d+\.\d+/);
    const metrics = await (await fetch(`${f.url}/metrics`)).text();
    expect(metrics).toMatch(/kvroute_gateway_passed_on_requests_total\{path="\/get_model_info",worker="[12]",status="200"\} 1/);
    expect(f.gateway.router.stats().routed).toBe(0);
    const g = await gatewayBehindWire(backend);
    try {
      expect((await fetch(`${g.url}/get_server_info?verbose=1`)).status).toBe(200);
      expect(headsOn(g.wire.sent).map((h) => h.line)).toContain('GET /get_server_info?verbose=1');
    } finally {
      await g.close();
    }
  });

  test('a worker that fails before answering counts against its health and the request goes to another', async () => {
    const broken = createServer((req, res) => {
      if (req.url === '/health') return res.end('ok');
      res.statusCode = 500;
      res.end('{"error":{"message":"boom"}}');
    });
    await new Promise<void>((resolve) => broken.listen(0, '127.0.0.1', resolve));
    try {
      const good = await startWorker();
      const brokenUrl = `http://127.0.0.1:${(broken.address() as AddressInfo).port}`;
      const f = await startFleet(backend, 0, {
        workers: [{ id: 1, url: brokenUrl }, workerEntry(good, 2)],
        health: { intervalMs: 0 },
      });
      for (let i = 0; i < 3; i++) {
        const t = await postJson(`${f.url}/tokenize`, { prompt: 'abc' });
        expect([t.status, t.headers.get('x-kvroute-worker'), t.json.tokens]).toEqual([200, '2', mockTokenize('abc')]);
      }
      const metrics = await (await fetch(`${f.url}/metrics`)).text();
      expect(metrics).toMatch(/kvroute_gateway_retries_total\{reason="status"\} [1-3]/);
      await good.close();
      // No worker left that answers: 502 naming the last failure.
      const none = await postJson(`${f.url}/tokenize`, { prompt: 'abc' });
      expect(none.status).toBeGreaterThanOrEqual(502);
      expect(none.json.error.message).toMatch(/no worker could serve \/tokenize/);
    } finally {
      broken.close();
    }
  });

  test("the proxy's API keys guard the passed-on routes too; requests take the workers in turn", async () => {
    const f = await startFleet(backend, 2, { auth: { apiKeys: ['key-a'] } });
    expect((await postJson(`${f.url}/tokenize`, { prompt: 'abc' })).status).toBe(401);
    const used = new Set<string | null>();
    for (let i = 0; i < 4; i++) {
      const ok = await postJson(`${f.url}/tokenize`, { prompt: 'abc' }, { authorization: 'Bearer key-a' });
      expect([ok.status, ok.json.tokens]).toEqual([200, mockTokenize('abc')]);
      used.add(ok.headers.get('x-kvroute-worker'));
    }
    expect([...used].sort()).toEqual(['1', '2']);
    const tooLong = await postJson(
      `${f.url}/tokenize`,
      { prompt: 'abc' },
      { authorization: 'Bearer key-a', 'x-request-id': 'x'.repeat(600) },
    );
    expect([tooLong.status, tooLong.json.error.message]).toEqual([400, 'X-Request-Id must be at most 512 characters, got 600']);
  });
});
