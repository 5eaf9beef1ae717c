import { request } from 'undici';
import { describe, expect, test } from 'vitest';
import { type CorsOptions, createGateway } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { killCommandsAfterEach, runCommand } from './helpers/cli-process.js';
import { requireDist } from './helpers/dist.js';
import { expectKvError } from './helpers/errors.js';
import { closeFleetsAfterEach, startFleet, startWorker } from './helpers/gateway.js';
import { scrape } from './helpers/prometheus.js';

closeFleetsAfterEach();
killCommandsAfterEach();

const APP = 'https://app.test';

/** A browser's preflight: OPTIONS with the origin, and the method and headers it means to send. */
async function preflight(url: string, origin = APP, method = 'POST', headers = 'authorization, content-type') {
  const r = await request(url, {
    method: 'OPTIONS',
    headers: { origin, 'access-control-request-method': method, 'access-control-request-headers': headers },
  });
  await r.body.dump();
  return { status: r.statusCode, headers: r.headers };
}

/** A POST from the page at APP (`origin: ''`: from no page, without an Origin). */
async function post(url: string, body: unknown, extra: Record<string, string> = {}) {
  const headers = Object.fromEntries(Object.entries({ origin: APP, ...extra }).filter(([, v]) => v !== ''));
  const r = await request(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  await r.body.dump();
  return { status: r.statusCode, headers: r.headers };
}

describe.each(BACKENDS)('gateway: cross-origin requests (%s)', (backend) => {
  test("by default as vLLM answers them: any origin, method and header, before the API-key check; never the admin API's", async () => {
    const f = await startFleet(backend, 1, { auth: { apiKeys: ['key-1'] } });
    const pre = await preflight(`${f.url}/v1/chat/completions`);
    expect(pre.status).toBe(204);
    expect(pre.headers).toMatchObject({
      'access-control-allow-origin': '*',
      'access-control-allow-headers': 'authorization, content-type',
      'access-control-max-age': '600',
    });
    expect(String(pre.headers['access-control-allow-methods']).split(', ')).toContain('POST');
    expect(pre.headers['access-control-allow-credentials']).toBeUndefined();
    // A route with a parameter takes part too.
    expect((await preflight(`${f.url}/v1/responses/resp_1`, APP, 'GET')).headers['access-control-allow-origin']).toBe('*');

    // The request itself: the answer may be read, the gateway's headers with it.
    const r = await post(`${f.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 }, { authorization: 'Bearer key-1' });
    expect(r.status).toBe(200);
    expect(r.headers['access-control-allow-origin']).toBe('*');
    expect(String(r.headers['access-control-expose-headers'])).toContain('x-kvroute-worker');
    // A stream's answer too (written past Fastify's reply).
    const stream = await post(
      `${f.url}/v1/chat/completions`,
      { messages: [{ role: 'user', content: 'hi' }], max_tokens: 2, stream: true },
      {
        authorization: 'Bearer key-1',
      },
    );
    expect(stream.headers['content-type']).toBe('text/event-stream');
    expect(stream.headers['access-control-allow-origin']).toBe('*');
    expect(String(stream.headers['access-control-expose-headers'])).toContain('x-kvroute-cached-tokens');
    // A client that is not a browser (no Origin) gets no CORS headers.
    const plain = await post(`${f.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 }, { authorization: 'Bearer key-1', origin: '' });
    expect(plain.headers['access-control-allow-origin']).toBeUndefined();
    // Without the key: still refused, and the refusal readable by the page.
    const refused = await post(`${f.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 });
    expect(refused.status).toBe(401);
    expect(refused.headers['access-control-allow-origin']).toBe('*');

    // The admin API, on the same listener: no preflight succeeds, so a page cannot send the PUT.
    // (Refused as any request without the key is, here; 404 without keys, as below.)
    const admin = await preflight(`${f.url}/admin/workers`, APP, 'PUT');
    expect(admin.status).toBe(401);
    expect(admin.headers['access-control-allow-origin']).toBeUndefined();
    const metrics = await request(`${f.url}/metrics`, { headers: { origin: APP } });
    await metrics.body.dump();
    expect(metrics.headers['access-control-allow-origin']).toBeUndefined();
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_cors_preflights_total', { result: 'allowed' })).toBe(2);
  });

  test('listed origins with credentials: the origin is sent back, another origin is refused and counted', async () => {
    const f = await startFleet(backend, 1, {
      cors: { allowedOrigins: [APP], allowedMethods: ['POST'], allowedHeaders: ['content-type'], allowCredentials: true, maxAgeSecs: 60 },
    });
    const pre = await preflight(`${f.url}/v1/completions`, APP, 'POST', 'content-type');
    expect(pre.status).toBe(204);
    expect(pre.headers).toMatchObject({
      'access-control-allow-origin': APP,
      'access-control-allow-credentials': 'true',
      'access-control-allow-methods': 'POST',
      'access-control-allow-headers': 'content-type',
      'access-control-max-age': '60',
    });
    // The request itself from the listed page: its origin sent back, with credentials, varying by origin.
    const own = await post(`${f.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 });
    expect(own.headers).toMatchObject({ 'access-control-allow-origin': APP, 'access-control-allow-credentials': 'true', vary: 'Origin' });
    const other = await preflight(`${f.url}/v1/completions`, 'https://evil.test');
    expect(other.headers['access-control-allow-origin']).toBeUndefined();
    const r = await post(`${f.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 }, { origin: 'https://evil.test' });
    expect(r.status).toBe(200);
    expect(r.headers['access-control-allow-origin']).toBeUndefined();
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_cors_preflights_total', { result: 'allowed' })).toBe(1);
    expect(m.sum('kvroute_gateway_cors_preflights_total', { result: 'refused' })).toBe(1);
  });

  test('cors: false (or no origins) answers no cross-origin request; bad options name the key', async () => {
    for (const cors of [false, { allowedOrigins: [] }] as (false | CorsOptions)[]) {
      const f = await startFleet(backend, 1, { cors });
      expect((await preflight(`${f.url}/v1/completions`)).status).toBe(404);
      const r = await post(`${f.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 });
      expect(r.status).toBe(200);
      expect(r.headers['access-control-allow-origin']).toBeUndefined();
    }
    // Without API keys, another path's preflight finds no route.
    const open = await startFleet(backend, 1);
    const admin = await preflight(`${open.url}/admin/workers`, APP, 'PUT');
    expect(admin.status).toBe(404);
    expect(admin.headers['access-control-allow-origin']).toBeUndefined();
    for (const [cors, message] of [
      [{ allowedOrigins: ['https://app.test/path'] }, /cors\.allowedOrigins must be a list of origins/],
      [{ allowedOrigins: 'https://app.test' }, /cors\.allowedOrigins must be a list of origins/],
      [{ allowedMethods: [1] }, /cors\.allowedMethods must be a list of HTTP methods/],
      [{ allowedHeaders: ['bad header'] }, /cors\.allowedHeaders must be a list of header names/],
      [{ allowCredentials: 'yes' }, /cors\.allowCredentials must be a boolean/],
      [{ maxAgeSecs: -1 }, /cors\.maxAgeSecs must be an integer in \[0, 86400\]/],
      [{ allowedOrigin: ['*'] }, /cors: unknown key "allowedOrigin".*allowedOrigins/],
      [true, /cors must be an object/],
    ] as const) {
      expectKvError(() => createGateway({ blockSize: 16, backend, logLevel: false, cors: cors as never }), 'ERR_INVALID_ARG', message);
    }
  });

  test("kvroute serve takes vLLM's flags: --allowed-origins and --allow-credentials as JSON and a switch", async () => {
    requireDist();
    const worker = await startWorker();
    const serve = runCommand(
      [
        'serve',
        '--port',
        '0',
        '--block-size',
        '16',
        '--backend',
        backend,
        '--worker',
        `id=1,url=${worker.url}`,
        '--allowed-origins',
        `["${APP}"]`,
        '--allow-credentials',
      ],
      /proxy (http:\/\/127\.0\.0\.1:\d+)/,
    );
    const url = (await serve.match)[1];
    expect((await preflight(`${url}/v1/completions`)).headers).toMatchObject({
      'access-control-allow-origin': APP,
      'access-control-allow-credentials': 'true',
    });
    const bad = runCommand(['serve', '--port', '0', '--block-size', '16', '--allowed-origins', '*'], /never/);
    await expect(bad.match).rejects.toThrow(/exited 2 .*--allowed-origins is not JSON/);
  });
});
