import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { KvRouter, type NatsReplicaOptions } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { makeCa, makeClientCert, makeServerCert, type TestCert } from './helpers/certs.js';
import { killCommandsAfterEach, runCommand } from './helpers/cli-process.js';
import { requireDist } from './helpers/dist.js';
import { NatsServer } from './helpers/nats-server.js';
import { scrape } from './helpers/prometheus.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { sleep, waitFor } from './helpers/wait.js';

/** A nats-server that requires TLS and verifies clients' certificates (mutual TLS), and the files around it. */
const dir = scratchDir('kvroute-nats-tls-');
const server = new NatsServer();
let serverCa: TestCert;
let serverCert: TestCert;
let client: TestCert;
beforeAll(async () => {
  serverCa = makeCa(dir, 'nats-ca');
  const clientsCa = makeCa(dir, 'nats-clients-ca');
  serverCert = makeServerCert(dir, 'nats-server', serverCa);
  client = makeClientCert(dir, 'replica', clientsCa);
  const tls = ['--tls', '--tlscert', serverCert.certFile, '--tlskey', serverCert.keyFile];
  await server.start([...tls, '--tlsverify', '--tlscacert', clientsCa.certFile]);
});
afterAll(() => server.dispose());

killCommandsAfterEach();

describe.each(BACKENDS)('replicas over a NATS server that requires mutual TLS (%s)', (backend) => {
  const open: KvRouter[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((r) => r.closeAsync()));
  });
  const replica = (id: string, nats: Partial<NatsReplicaOptions>) => {
    const r = new KvRouter({
      blockSize: 4,
      backend,
      replicas: {
        nats: { servers: server.url, subject: `kvroute.tls.${backend}`, ...nats },
        replicaId: id,
        heartbeatMs: 100,
        leaseMs: 1000,
      },
    });
    open.push(r);
    return r;
  };

  test("replicas holding the server's CA and a client certificate sync; one without the certificate cannot join", async () => {
    const tls = { caFile: serverCa.certFile, certFile: client.certFile, keyFile: client.keyFile };
    const [a, b] = [replica('a', { tls }), replica('b', { tls })];
    await waitFor(() => a.stats().replicas?.peers === 1 && b.stats().replicas?.peers === 1, 'both replicas to hear each other');
    expect(a.stats().replicas?.connected).toBe(true);
    const outsider = replica('outsider', { tls: { caFile: serverCa.certFile } });
    await sleep(1000);
    expect(outsider.stats().replicas?.connected).toBe(false);
    expect(a.stats().replicas?.peers).toBe(1);
  });

  test('kvroute serve --replicas with --nats-ca-file, --nats-cert-file and --nats-key-file connects; the TLS flags alone are a usage error', async () => {
    requireDist();
    const serve = runCommand(
      ['serve', '--port', '0', '--block-size', '16', '--backend', backend, '--replicas', server.url].concat([
        '--nats-ca-file',
        serverCa.certFile,
        '--nats-cert-file',
        client.certFile,
        '--nats-key-file',
        client.keyFile,
      ]),
      /admin (http:\/\/127\.0\.0\.1:\d+)/,
    );
    const admin = (await serve.match)[1];
    await waitFor(
      async () => (await scrape(`${admin}/metrics`)).sum('kvroute_replica_connected') === 1,
      'the replica sync connected over TLS',
    );
    const alone = runCommand(['serve', '--port', '0', '--block-size', '16', '--nats-ca-file', serverCa.certFile], /never/);
    await expect(alone.match).rejects.toThrow(/exited 2 .*--nats-ca-file, --nats-cert-file and --nats-key-file go with --replicas/);
  });

  test('bad TLS files are refused at construction, naming the option', () => {
    const bad: [NatsReplicaOptions['tls'], RegExp][] = [
      [{ caFile: `${dir}/missing.crt` }, /opts.replicas.nats.tls.caFile cannot be read: ENOENT/],
      [{ caFile: client.keyFile }, /opts.replicas.nats.tls.caFile do not load: no PEM certificate/],
      [{ certFile: client.certFile }, /opts.replicas.nats.tls.certFile and opts.replicas.nats.tls.keyFile go together/],
      [{ certFile: client.certFile, keyFile: serverCert.keyFile }, /do not load as a TLS certificate and its key/],
      [{ cafile: 'x' } as never, /unknown option "cafile"/],
    ];
    for (const [tls, message] of bad)
      expect(() => new KvRouter({ blockSize: 4, backend, replicas: { nats: { servers: server.url, tls } } })).toThrow(
        expect.objectContaining({ code: 'ERR_INVALID_ARG', message: expect.stringMatching(message) }),
      );
  });
});
