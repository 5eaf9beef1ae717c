import { copyFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connect } from 'node:tls';
import { Agent, request } from 'undici';
import { afterAll, describe, expect, test } from 'vitest';
import { createGateway, type GatewayOptions, KvRouteError } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { makeCa, makeCert, makeClientCert } from './helpers/certs.js';
import { killCommandsAfterEach, runCommand } from './helpers/cli-process.js';
import { requireDist } from './helpers/dist.js';
import { closeFleetsAfterEach, startFleet, startWorker, workerEntry } from './helpers/gateway.js';
import { scrape } from './helpers/prometheus.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();
killCommandsAfterEach();

/** Trusts any certificate: these tests read which one the proxy serves. */
const agent = new Agent({ connect: { rejectUnauthorized: false } });
afterAll(() => agent.close());

/** The fingerprint of the certificate a new connection to `url` is served. */
function servedFingerprint(url: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port), rejectUnauthorized: false }, () => {
      const fingerprint = socket.getPeerCertificate().fingerprint256;
      socket.end();
      resolve(fingerprint);
    });
    socket.on('error', reject);
  });
}

/** A series of the gateway's metrics (summed over those with `labels`), read over HTTPS. */
async function metric(url: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  return (await scrape(`${url}/metrics`, agent)).sum(name, labels);
}

async function complete(url: string, dispatcher = agent): Promise<number> {
  const res = await request(`${url}/v1/completions`, {
    method: 'POST',
    dispatcher,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: [1, 2, 3], max_tokens: 1 }),
  });
  await res.body.dump();
  return res.statusCode;
}

/** Replaces the served files with `from`'s, as a renewal writes them: certificate, then key. */
function renew(to: { certFile: string; keyFile: string }, from: { certFile: string; keyFile: string }): void {
  copyFileSync(from.certFile, to.certFile);
  copyFileSync(from.keyFile, to.keyFile);
}

describe.each(BACKENDS)('gateway: TLS from files, renewed while it runs (%s)', (backend) => {
  test('a renewed pair on disk is served to new connections; one that does not load is refused and the served one stays', async () => {
    const dir = scratchDir('kvroute-tls-files-');
    const first = makeCert(dir, 'first', 30);
    const second = makeCert(dir, 'second', 60);
    const served = { certFile: join(dir, 'served.crt'), keyFile: join(dir, 'served.key') };
    renew(served, first);
    const worker = await startWorker();
    const f = await startFleet(backend, 0, { workers: [workerEntry(worker, 1)], tls: { ...served, watchIntervalMs: 50 } });
    expect(f.url.startsWith('https://')).toBe(true);
    expect(await servedFingerprint(f.url)).toBe(first.fingerprint);
    expect(await complete(f.url)).toBe(200);
    const expiry = 'kvroute_gateway_tls_certificate_expiry_timestamp_seconds';
    expect(await metric(f.url, expiry)).toBe(Date.parse(first.validTo) / 1000);

    renew(served, second);
    await waitFor(async () => (await servedFingerprint(f.url)) === second.fingerprint, 'the renewed certificate served');
    expect(await metric(f.url, 'kvroute_gateway_tls_reloads_total', { result: 'applied' })).toBe(1);
    expect(await metric(f.url, expiry)).toBe(Date.parse(second.validTo) / 1000);
    expect(await complete(f.url)).toBe(200);

    // A key that is not the certificate's (a renewal caught between its two files for good), then a torn file.
    copyFileSync(first.keyFile, served.keyFile);
    await waitFor(async () => (await metric(f.url, 'kvroute_gateway_tls_reloads_total', { result: 'rejected' })) === 1, 'the refusal');
    writeFileSync(served.certFile, second.cert.slice(0, 200));
    copyFileSync(second.keyFile, served.keyFile);
    await waitFor(async () => (await metric(f.url, 'kvroute_gateway_tls_reloads_total', { result: 'rejected' })) === 2, 'the refusal');
    expect(await servedFingerprint(f.url)).toBe(second.fingerprint);
    expect(await complete(f.url)).toBe(200);
    expect(await metric(f.url, 'kvroute_gateway_tls_reloads_total', { result: 'applied' })).toBe(1);
  });

  test('with client CAs only clients holding a certificate they signed get in; a new CA file applies without a restart', async () => {
    const dir = scratchDir('kvroute-mtls-');
    const server = makeCert(dir, 'server');
    const [caA, caB] = [makeCa(dir, 'ca-a'), makeCa(dir, 'ca-b')];
    const [alice, bob] = [makeClientCert(dir, 'alice', caA), makeClientCert(dir, 'bob', caB)];
    const clientCa = join(dir, 'clients.crt');
    copyFileSync(caA.certFile, clientCa);
    const worker = await startWorker();
    const f = await startFleet(backend, 0, {
      workers: [workerEntry(worker, 1)],
      tls: { certFile: server.certFile, keyFile: server.keyFile, caFile: clientCa, watchIntervalMs: 50 },
    });
    const as = (who: { cert: string; key: string } | undefined) =>
      new Agent({ connect: { rejectUnauthorized: false, ...(who ? { cert: who.cert, key: who.key } : {}) } });
    const status = async (who: { cert: string; key: string } | undefined) => {
      const dispatcher = as(who);
      try {
        return await complete(f.url, dispatcher);
      } catch {
        return 'refused';
      } finally {
        await dispatcher.close();
      }
    };
    expect(await status(alice)).toBe(200);
    expect(await status(undefined)).toBe('refused');
    expect(await status(bob)).toBe('refused');
    const failures = async () => {
      const dispatcher = as(alice);
      const m = await scrape(`${f.url}/metrics`, dispatcher);
      await dispatcher.close();
      return m.sum('kvroute_gateway_tls_handshake_failures_total');
    };
    expect(await failures()).toBeGreaterThanOrEqual(2);

    // The clients' CA is replaced: bob's certificate is now the one that verifies.
    copyFileSync(caB.certFile, clientCa);
    await waitFor(async () => (await status(bob)) === 200, "bob's CA applied");
    expect(await status(alice)).toBe('refused');
  });

  test('PEM text is served as before, with its expiry; bad pairs are refused at createGateway', async () => {
    const dir = scratchDir('kvroute-tls-bad-');
    const a = makeCert(dir, 'a');
    const b = makeCert(dir, 'b');
    const worker = await startWorker();
    const f = await startFleet(backend, 0, { workers: [workerEntry(worker, 1)], tls: { cert: a.cert, key: a.key } });
    expect(await servedFingerprint(f.url)).toBe(a.fingerprint);
    expect(await metric(f.url, 'kvroute_gateway_tls_certificate_expiry_timestamp_seconds')).toBe(Date.parse(a.validTo) / 1000);
    expect((await scrape(`${f.url}/metrics`, agent)).has('kvroute_gateway_tls_reloads_total')).toBe(false);

    const bad: [unknown, RegExp][] = [
      [{ cert: a.cert, key: b.key }, /tls.cert and tls.key do not load as a TLS certificate and its key/],
      [{ cert: 'not a certificate', key: a.key }, /do not load/],
      [{ certFile: a.certFile, keyFile: b.keyFile }, /tls.certFile and tls.keyFile do not load/],
      [{ certFile: join(dir, 'missing.crt'), keyFile: a.keyFile }, /tls.certFile cannot be read: ENOENT/],
      [{ cert: a.cert, key: a.key, certFile: a.certFile, keyFile: a.keyFile }, /one pair/],
      [{ cert: a.cert }, /tls.key must be PEM text/],
      [{ certFile: a.certFile }, /tls.keyFile must be a non-empty string/],
      [{ cert: a.cert, key: a.key, watchIntervalMs: 100 }, /watchIntervalMs goes with certFile/],
      [{ certFile: a.certFile, keyFile: a.keyFile, watchIntervalMs: 1 }, /tls.watchIntervalMs must be an integer in \[10,/],
      [{ certfile: a.certFile }, /unknown key "certfile".*certFile/],
      [{ cert: a.cert, key: a.key, ca: 'not a certificate' }, /the client CAs do not load: no PEM certificate/],
      [{ certFile: a.certFile, keyFile: a.keyFile, caFile: join(dir, 'missing-ca.crt') }, /tls.caFile cannot be read/],
      [{ cert: a.cert, key: a.key, caFile: a.certFile }, /tls.caFile goes with certFile and keyFile; with cert and key, give tls.ca/],
      [{ certFile: a.certFile, keyFile: a.keyFile, ca: a.cert }, /tls.ca goes with cert and key/],
    ];
    for (const [tls, message] of bad) {
      let err: unknown;
      try {
        createGateway({ blockSize: 16, backend, logLevel: false, tls: tls as GatewayOptions['tls'] });
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(Object.keys(tls as object))).toBeInstanceOf(KvRouteError);
      expect((err as KvRouteError).code).toBe('ERR_INVALID_ARG');
      expect((err as Error).message).toMatch(message);
    }
  });

  test('kvroute serve --ssl-certfile --ssl-keyfile (--ssl-ca-certs) serves HTTPS (to clients with a certificate); one without the other is a usage error', async () => {
    requireDist();
    const dir = scratchDir('kvroute-tls-cli-');
    const cert = makeCert(dir, 'cli');
    const ca = makeCa(dir, 'cli-ca');
    const client = makeClientCert(dir, 'cli-client', ca);
    const worker = await startWorker();
    const tlsFlags = ['--ssl-certfile', cert.certFile, '--ssl-keyfile', cert.keyFile];
    const serve = runCommand(
      ['serve', '--port', '0', '--block-size', '16', '--backend', backend, '--worker', `id=1,url=${worker.url}`, ...tlsFlags],
      /proxy (https:\/\/127\.0\.0\.1:\d+)/,
    );
    const url = (await serve.match)[1];
    expect(await servedFingerprint(url)).toBe(cert.fingerprint);
    expect(await complete(url)).toBe(200);
    const half = runCommand(['serve', '--port', '0', '--block-size', '16', '--ssl-certfile', cert.certFile], /never/);
    await expect(half.match).rejects.toThrow(/exited 2 .*--ssl-certfile and --ssl-keyfile go together/);
    const mutual = runCommand(
      ['serve', '--port', '0', '--block-size', '16', '--backend', backend, '--worker', `id=1,url=${worker.url}`, ...tlsFlags].concat([
        '--ssl-ca-certs',
        ca.certFile,
      ]),
      /proxy (https:\/\/127\.0\.0\.1:\d+)/,
    );
    const mutualUrl = (await mutual.match)[1];
    await expect(complete(mutualUrl)).rejects.toThrow();
    const withCert = new Agent({ connect: { rejectUnauthorized: false, cert: client.cert, key: client.key } });
    expect(await complete(mutualUrl, withCert)).toBe(200);
    await withCert.close();
    const alone = runCommand(['serve', '--port', '0', '--block-size', '16', '--ssl-ca-certs', ca.certFile], /never/);
    await expect(alone.match).rejects.toThrow(/exited 2 .*--ssl-ca-certs needs --ssl-certfile and --ssl-keyfile/);
  });
});
