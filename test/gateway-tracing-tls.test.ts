import { copyFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { createGateway, type GatewayOptions, KvRouteError, type OtlpProtocol } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { makeCa, makeClientCert, makeServerCert } from './helpers/certs.js';
import { killCommandsAfterEach, runCommand } from './helpers/cli-process.js';
import { requireDist } from './helpers/dist.js';
import { closeFleetsAfterEach, gatewayBehindWire, startWorker } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { OtlpReceiver } from './helpers/otlp-receiver.js';
import { scrape } from './helpers/prometheus.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

/** A collector's CA and certificate for 127.0.0.1, and a client CA with the gateway's certificate. */
function pki() {
  const dir = scratchDir('kvroute-otlp-tls-');
  const collectorCa = makeCa(dir, 'collector-ca');
  const clientsCa = makeCa(dir, 'clients-ca');
  return {
    dir,
    collectorCa,
    clientsCa,
    collector: makeServerCert(dir, 'collector', collectorCa),
    gateway: makeClientCert(dir, 'gateway', clientsCa),
  };
}

/** A receiver over TLS that requires a client certificate the clients' CA signed. */
async function mutualTlsReceiver(p: ReturnType<typeof pki>, protocol: OtlpProtocol) {
  const receiver = new OtlpReceiver();
  const tls = { certFile: p.collector.certFile, keyFile: p.collector.keyFile, clientCa: p.clientsCa.certFile };
  const endpoint = protocol === 'grpc' ? await receiver.startGrpc(tls) : await receiver.start(tls);
  return { receiver, endpoint };
}

const spans = async (url: string, result: string) => (await scrape(`${url}/metrics`)).sum('kvroute_gateway_spans_total', { result });

describe.each(BACKENDS)('gateway: spans to an OTLP endpoint over TLS (%s)', (backend) => {
  test.each(['http/json', 'http/protobuf', 'grpc'] as const)(
    '%s: with the CA and a client certificate in otlpTls the spans reach a collector that requires both; without the certificate every export fails, counted',
    async (protocol) => {
      const p = pki();
      const { receiver, endpoint } = await mutualTlsReceiver(p, protocol);
      expect(endpoint.startsWith('https://127.0.0.1:')).toBe(true);
      const tracing = { otlpEndpoint: endpoint, otlpProtocol: protocol, exportDelayMs: 50 };
      const trusted = await gatewayBehindWire(backend, {
        tracing: { ...tracing, otlpTls: { caFile: p.collectorCa.certFile, certFile: p.gateway.certFile, keyFile: p.gateway.keyFile } },
      });
      // The collector's CA alone: the handshake fails for want of a client certificate.
      const anonymous = await gatewayBehindWire(backend, { tracing: { ...tracing, otlpTls: { caFile: p.collectorCa.certFile } } });
      try {
        expect((await postJson(`${trusted.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 }, { traceparent: PARENT })).status).toBe(
          200,
        );
        await waitFor(() => receiver.spans.length === 4, 'the four spans at the receiver');
        expect(receiver.spans.find((s) => s.kind === 2)).toMatchObject({ name: 'POST /v1/completions', service: 'kvroute' });
        await waitFor(async () => (await spans(trusted.url, 'exported')) === 4, 'the exported spans counted');

        expect((await postJson(`${anonymous.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 })).status).toBe(200);
        await waitFor(async () => (await spans(anonymous.url, 'failed')) === 4, 'the failed export counted', 30_000);
        expect(await spans(anonymous.url, 'exported')).toBe(0);
        expect(receiver.spans).toHaveLength(4);
      } finally {
        await trusted.close();
        await anonymous.close();
        await receiver.close();
      }
    },
  );

  test.each(['http/json', 'grpc'] as const)(
    '%s: a client certificate renewed on disk is presented by later exports without a restart; a torn one is rejected, counted',
    async (protocol) => {
      const p = pki();
      const { receiver, endpoint } = await mutualTlsReceiver(p, protocol);
      // The gateway starts with a certificate the collector does not trust (another CA signed it).
      const stranger = makeClientCert(p.dir, 'stranger', makeCa(p.dir, 'strangers-ca'));
      const presented = { certFile: join(p.dir, 'presented.crt'), keyFile: join(p.dir, 'presented.key') };
      copyFileSync(stranger.certFile, presented.certFile);
      copyFileSync(stranger.keyFile, presented.keyFile);
      const g = await gatewayBehindWire(backend, {
        tracing: {
          otlpEndpoint: endpoint,
          otlpProtocol: protocol,
          exportDelayMs: 50,
          otlpTls: { caFile: p.collectorCa.certFile, ...presented, watchIntervalMs: 50 },
        },
      });
      const reloads = async (result: string) =>
        (await scrape(`${g.url}/metrics`)).sum('kvroute_gateway_otlp_tls_reloads_total', { result });
      try {
        expect((await postJson(`${g.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 })).status).toBe(200);
        await waitFor(async () => (await spans(g.url, 'failed')) === 4, 'the refused export counted', 30_000);

        copyFileSync(p.gateway.certFile, presented.certFile);
        copyFileSync(p.gateway.keyFile, presented.keyFile);
        await waitFor(async () => (await reloads('applied')) === 1, 'the renewed certificate applied');
        expect((await postJson(`${g.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 }, { traceparent: PARENT })).status).toBe(200);
        // Longer than the exporter's own retries (up to 10 s an export): a retried export is a delivered one.
        await waitFor(() => receiver.spans.length >= 4, 'the later spans at the receiver', 30_000);
        expect(receiver.spans).toHaveLength(4);
        expect(receiver.spans.every((s) => s.traceId === PARENT.split('-')[1])).toBe(true);

        // A key that does not match: rejected, and the certificate in use stays.
        writeFileSync(presented.keyFile, readFileSync(p.collector.keyFile));
        await waitFor(async () => (await reloads('rejected')) === 1, 'the torn pair rejected');
        expect(await reloads('applied')).toBe(1);
        expect((await postJson(`${g.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 })).status).toBe(200);
        await waitFor(() => receiver.spans.length >= 8, 'the spans after the rejected change', 30_000);
        expect(receiver.spans).toHaveLength(8);
      } finally {
        await g.close();
        await receiver.close();
      }
    },
  );

  test("a collector whose certificate a private CA signed is refused without that CA (Node's CAs do not hold it)", async () => {
    const p = pki();
    const receiver = new OtlpReceiver();
    const endpoint = await receiver.start({ certFile: p.collector.certFile, keyFile: p.collector.keyFile });
    const g = await gatewayBehindWire(backend, { tracing: { otlpEndpoint: endpoint, exportDelayMs: 50 } });
    try {
      expect((await postJson(`${g.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 })).status).toBe(200);
      await waitFor(async () => (await spans(g.url, 'failed')) === 4, 'the failed export counted', 30_000);
      expect(receiver.spans).toEqual([]);
    } finally {
      await g.close();
      await receiver.close();
    }
  });
});

describe.each(BACKENDS)('gateway: bad otlpTls (%s)', (backend) => {
  const https = 'https://127.0.0.1:4318/v1/traces';
  const bad: [string, (p: ReturnType<typeof pki>) => unknown, RegExp][] = [
    [
      'an http endpoint',
      (p) => ({ otlpEndpoint: 'http://127.0.0.1:4318/v1/traces', otlpTls: { caFile: p.collectorCa.certFile } }),
      /applies to an https endpoint/,
    ],
    [
      'a certificate without its key',
      (p) => ({ otlpEndpoint: https, otlpTls: { certFile: p.gateway.certFile } }),
      /certFile and tracing.otlpTls.keyFile go together/,
    ],
    [
      'a missing file',
      (p) => ({ otlpEndpoint: https, otlpTls: { caFile: join(p.dir, 'gone.pem') } }),
      /tracing.otlpTls.caFile cannot be read/,
    ],
    [
      'a CA file without a certificate',
      (p) => {
        writeFileSync(join(p.dir, 'not.pem'), 'hello');
        return { otlpEndpoint: https, otlpTls: { caFile: join(p.dir, 'not.pem') } };
      },
      /tracing.otlpTls.caFile do not load: no PEM certificate/,
    ],
    [
      "another certificate's key",
      (p) => ({ otlpEndpoint: https, otlpTls: { certFile: p.gateway.certFile, keyFile: p.collector.keyFile } }),
      /tracing.otlpTls.certFile and tracing.otlpTls.keyFile do not load as a TLS certificate and its key/,
    ],
    [
      'a misspelt key',
      (p) => ({ otlpEndpoint: https, otlpTls: { caFiel: p.collectorCa.certFile } }),
      /tracing.otlpTls: unknown key "caFiel".*caFile/,
    ],
    ['an empty path', () => ({ otlpEndpoint: https, otlpTls: { caFile: '' } }), /tracing.otlpTls.caFile must be a non-empty string/],
  ];
  test('each bad otlpTls is refused, naming its fault', () => {
    const p = pki();
    for (const [what, tracing, message] of bad) {
      let err: unknown;
      try {
        createGateway({ blockSize: 16, backend, logLevel: false, tracing: tracing(p) as GatewayOptions['tracing'] });
      } catch (e) {
        err = e;
      }
      expect(err, what).toBeInstanceOf(KvRouteError);
      expect((err as KvRouteError).code, what).toBe('ERR_INVALID_ARG');
      expect((err as Error).message, what).toMatch(message);
    }
  });
});

describe.each(BACKENDS)("kvroute serve: OpenTelemetry's certificate variables (%s)", (backend) => {
  killCommandsAfterEach();

  test('OTEL_EXPORTER_OTLP_CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY reach a mutual-TLS collector; a bad one stops serve at start, named', async () => {
    requireDist();
    const p = pki();
    const worker = await startWorker();
    const { receiver, endpoint } = await mutualTlsReceiver(p, 'http/protobuf');
    const args = ['serve', '--port', '0', '--block-size', '16', '--backend', backend, '--worker', `id=1,url=${worker.url}`];
    try {
      const serve = runCommand(
        [...args, '--otlp-traces-endpoint', endpoint, '--otlp-traces-protocol', 'http/protobuf'],
        /proxy (http:\/\/127\.0\.0\.1:\d+)/,
        {
          OTEL_EXPORTER_OTLP_CERTIFICATE: p.collectorCa.certFile,
          // The traces' own variables win over the shared ones (a shared key that does not match).
          OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: p.collector.certFile,
          OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE: p.gateway.certFile,
          OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY: p.gateway.keyFile,
        },
      );
      const url = (await serve.match)[1];
      expect((await postJson(`${url}/v1/completions`, { prompt: [1, 2, 3], max_tokens: 1 }, { traceparent: PARENT })).status).toBe(200);
      serve.child.kill('SIGTERM');
      expect(await serve.exited).toBe(0);
      expect(receiver.spans.find((s) => s.kind === 2)).toMatchObject({ name: 'POST /v1/completions', service: 'kvroute' });

      const runs: [Record<string, string>, RegExp][] = [
        [{ OTEL_EXPORTER_OTLP_CERTIFICATE: join(p.dir, 'gone.pem') }, /OTEL_EXPORTER_OTLP_CERTIFICATE cannot be read/],
        [{ OTEL_EXPORTER_OTLP_CLIENT_KEY: p.gateway.keyFile }, /OTEL_EXPORTER_OTLP_CLIENT_KEY is set, no CLIENT_CERTIFICATE/],
        [
          { OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE: p.gateway.certFile, OTEL_EXPORTER_OTLP_CLIENT_KEY: p.collector.keyFile },
          /OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY do not load/,
        ],
      ];
      for (const [env, message] of runs) {
        const bad = runCommand([...args, '--otlp-traces-endpoint', endpoint], /never/, env);
        await expect(bad.match).rejects.toThrow(new RegExp(`exited 2 .*${message.source}`));
      }
      // An http endpoint is sent in the clear: the variables do not apply, as in OpenTelemetry's exporters.
      const plain = runCommand([...args, '--otlp-traces-endpoint', 'http://127.0.0.1:9/v1/traces'], /proxy (http:\/\/127\.0\.0\.1:\d+)/, {
        OTEL_EXPORTER_OTLP_CERTIFICATE: join(p.dir, 'gone.pem'),
      });
      await plain.match;
      plain.child.kill('SIGTERM');
      expect(await plain.exited).toBe(0);
    } finally {
      await receiver.close();
    }
  });
});
