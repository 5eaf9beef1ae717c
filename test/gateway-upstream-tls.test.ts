import { copyFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { createGateway, type GatewayOptions, KvRouteError, startMockWorker } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { makeCa, makeClientCert, makeServerCert } from './helpers/certs.js';
import { closeFleetsAfterEach, startFleet, startWorker, workerEntry } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

/** A CA, a worker certificate it signed, and a client CA with one client certificate. */
function pki() {
  const dir = scratchDir('kvroute-upstream-tls-');
  const workersCa = makeCa(dir, 'workers-ca');
  const clientsCa = makeCa(dir, 'clients-ca');
  return {
    dir,
    workersCa,
    clientsCa,
    worker: makeServerCert(dir, 'worker', workersCa),
    gateway: makeClientCert(dir, 'gateway', clientsCa),
  };
}

const completion = (url: string) => postJson(`${url}/v1/completions`, { prompt: [1, 2, 3, 4, 5], max_tokens: 1 });

describe.each(BACKENDS)('gateway: workers over HTTPS (%s)', (backend) => {
  test("a worker serving HTTPS with a private CA's certificate is reached with upstream.tls.caFile, and not without", async () => {
    const p = pki();
    const worker = await startWorker({ sslCertfile: p.worker.certFile, sslKeyfile: p.worker.keyFile });
    expect(worker.url.startsWith('https://127.0.0.1:')).toBe(true);
    const trusting = await startFleet(backend, 0, {
      workers: [workerEntry(worker, 1)],
      upstream: { tls: { caFile: p.workersCa.certFile } },
    });
    const r = await completion(trusting.url);
    expect(r.status).toBe(200);
    expect(r.headers.get('x-kvroute-worker')).toBe('1');
    // The model list and the health checks go the same way.
    const models = (await (await fetch(`${trusting.url}/v1/models`)).json()) as { data: { id: string }[] };
    expect(models.data.map((m) => m.id)).toContain('mock-model');

    const untrusting = await startFleet(backend, 0, { workers: [workerEntry(worker, 1)] });
    const refused = await completion(untrusting.url);
    expect(refused.status).toBeGreaterThanOrEqual(500);
    expect(refused.json.error.message).toMatch(/certificate/i);
  });

  test('a worker that requires a client certificate (mutual TLS) takes the one in upstream.tls, and no request without', async () => {
    const p = pki();
    const worker = await startWorker({ sslCertfile: p.worker.certFile, sslKeyfile: p.worker.keyFile, sslCaCerts: p.clientsCa.certFile });
    const withCert = await startFleet(backend, 0, {
      workers: [workerEntry(worker, 1)],
      upstream: { tls: { caFile: p.workersCa.certFile, certFile: p.gateway.certFile, keyFile: p.gateway.keyFile } },
    });
    expect((await completion(withCert.url)).status).toBe(200);
    const without = await startFleet(backend, 0, {
      workers: [workerEntry(worker, 1)],
      upstream: { tls: { caFile: p.workersCa.certFile } },
    });
    expect((await completion(without.url)).status).toBeGreaterThanOrEqual(500);
  });

  test('a client certificate renewed on disk is presented on new connections without a restart', async () => {
    const p = pki();
    const worker = await startWorker({ sslCertfile: p.worker.certFile, sslKeyfile: p.worker.keyFile, sslCaCerts: p.clientsCa.certFile });
    // The gateway starts with a certificate the worker does not trust (another CA signed it).
    const strangers = makeCa(p.dir, 'strangers-ca');
    const stranger = makeClientCert(p.dir, 'stranger', strangers);
    const presented = { certFile: join(p.dir, 'presented.crt'), keyFile: join(p.dir, 'presented.key') };
    copyFileSync(stranger.certFile, presented.certFile);
    copyFileSync(stranger.keyFile, presented.keyFile);
    const f = await startFleet(backend, 0, {
      // Health probes on: they bring the worker back once its handshakes succeed.
      workers: [workerEntry(worker, 1)],
      upstream: { tls: { caFile: p.workersCa.certFile, ...presented, watchIntervalMs: 50 } },
    });
    expect((await completion(f.url)).status).toBeGreaterThanOrEqual(500);
    // The renewal: the certificate the worker's CA signed, then a torn one (refused, the good one kept).
    copyFileSync(p.gateway.certFile, presented.certFile);
    copyFileSync(p.gateway.keyFile, presented.keyFile);
    const reloads = async (result: string) =>
      (await scrape(`${f.adminUrl}/metrics`)).sum('kvroute_gateway_upstream_tls_reloads_total', { result });
    await waitFor(async () => (await reloads('applied')) === 1, 'the renewed certificate loaded');
    await waitFor(async () => (await completion(f.url)).status === 200, 'a request with the renewed certificate');
    writeFileSync(presented.certFile, 'torn');
    await waitFor(async () => (await reloads('rejected')) === 1, 'the torn file refused');
    expect((await completion(f.url)).status).toBe(200);
  });

  test('bad TLS files are refused at start, naming the option', async () => {
    const p = pki();
    const bad: [GatewayOptions['upstream'], RegExp][] = [
      [{ tls: { certFile: p.gateway.certFile } }, /upstream.tls.certFile and upstream.tls.keyFile go together/],
      [{ tls: { caFile: `${p.dir}/missing.crt` } }, /upstream.tls.caFile cannot be read: ENOENT/],
      [{ tls: { caFile: p.gateway.keyFile } }, /upstream.tls.caFile do not load: no PEM certificate/],
      [{ tls: { certFile: p.gateway.certFile, keyFile: p.worker.keyFile } }, /upstream.tls.certFile and upstream.tls.keyFile do not load/],
      [{ tls: { cafile: 'x' } as never }, /unknown key "cafile"/],
    ];
    for (const [upstream, message] of bad) {
      expect(() => createGateway({ blockSize: 16, backend, logLevel: false, upstream })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_ARG', message: expect.stringMatching(message) }),
      );
    }
    await expect(startMockWorker({ port: 0, sslCertfile: p.worker.certFile })).rejects.toThrow(/given together/);
    await expect(startMockWorker({ port: 0, sslCaCerts: p.clientsCa.certFile })).rejects.toThrow(/needs opts.sslCertfile/);
    await expect(startMockWorker({ port: 0, sslCertfile: p.worker.certFile, sslKeyfile: p.gateway.keyFile })).rejects.toBeInstanceOf(
      KvRouteError,
    );
  });
});
