import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import { describe, expect, test } from 'vitest';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, startFleet } from './helpers/gateway.js';
import { sse } from './helpers/http.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

/** A client that keeps its connections open, as a load balancer's or an SDK's pool does. */
const keepAlive = new Agent({ keepAlive: true });

/** One POST: its status, the `connection` header of the answer, and its body. */
function post(url: string, body: unknown): Promise<{ status: number; connection: string | undefined; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers: { 'content-type': 'application/json' }, agent: keepAlive }, (res) => {
      let text = '';
      res.on('data', (d) => {
        text += d;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, text }));
    });
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

describe.each(BACKENDS)('gateway: shutting down behind a load balancer (%s)', (backend) => {
  test('with shutdown.delayMs, close() serves on not ready, answers close their connections, and close({ now }) ends the wait', async () => {
    const f = await startFleet(backend, 1, { shutdown: { delayMs: 60_000 } }, { speedup: 5 });
    const ready = await fetch(`${f.url}/ready`);
    expect(ready.status).toBe(200);
    expect((await post(`${f.url}/v1/completions`, { prompt: 'before', max_tokens: 1 })).connection).not.toBe('close');
    const inFlight = sse(`${f.url}/v1/completions`, { prompt: 'a long answer', max_tokens: 20, stream: true });
    await waitFor(() => f.workers[0].stats().running[0] > 0, 'the stream to start');

    let closed = false;
    const closing = f.gateway.close().then(() => {
      closed = true;
    });
    const notReady = await fetch(`${f.url}/ready`);
    expect([notReady.status, ((await notReady.json()) as { status: string }).status]).toEqual([503, 'shutting down']);
    const during = await post(`${f.url}/v1/completions`, { prompt: 'during the delay', max_tokens: 1 });
    expect([during.status, during.connection]).toEqual([200, 'close']);
    expect(closed).toBe(false);

    // A second call (a second SIGTERM) ends the delay; the stream in flight still finishes whole.
    await f.gateway.close({ now: true });
    await closing;
    const stream = await inFlight;
    expect(stream.status).toBe(200);
    expect(stream.events.at(-1)).toBe('[DONE]');
    await expect(fetch(`${f.url}/ready`)).rejects.toThrow();
  });

  test('close() resolves once the last answer is written: it does not wait for clients to let go of their connections', async () => {
    const f = await startFleet(backend, 1, {}, { speedup: 1 });
    // A kept-alive connection whose stream ends after close() began, and one that never sent a request.
    const inFlight = post(`${f.url}/v1/completions`, { prompt: 'an answer that outlives close()', max_tokens: 200, stream: true });
    const silent = connect(Number(new URL(f.url).port), '127.0.0.1');
    const silentClosed = new Promise<void>((resolve) => silent.once('close', () => resolve()));
    silent.on('error', () => {});
    await new Promise((resolve) => silent.once('connect', resolve));
    await waitFor(() => f.workers[0].stats().running[0] > 0, 'the stream to start');
    await f.gateway.close();
    const stream = await inFlight;
    expect([stream.status, stream.connection]).toEqual([200, 'keep-alive']);
    expect(stream.text.trimEnd().endsWith('data: [DONE]')).toBe(true);
    await silentClosed;
    // The kept-alive connection was ended by the gateway, not left in the client's pool.
    const port = new URL(f.url).port;
    await waitFor(() => !Object.keys(keepAlive.freeSockets).some((key) => key.includes(`:${port}:`)), 'the pool to drop the connection');
  });

  test('with shutdown.drainTimeoutMs, requests still in flight after it are cut and close() resolves', async () => {
    const f = await startFleet(backend, 1, { shutdown: { drainTimeoutMs: 300 } }, { speedup: 1 });
    const inFlight = sse(`${f.url}/v1/completions`, { prompt: 'a very long answer', max_tokens: 2000, stream: true }).then(
      (r) => r.events.at(-1),
      (err: Error) => `cut: ${err.message}`,
    );
    await waitFor(() => f.workers[0].stats().running[0] > 0, 'the stream to start');
    await f.gateway.close();
    expect(await inFlight).toMatch(/^cut: /);
    // Cut on the gateway's side, the request's upstream is aborted too.
    await waitFor(() => f.workers[0].stats().running[0] === 0, 'the engine to let the request go');
    expect(f.workers[0].stats().aborted).toBe(1);
  });
});
