import { afterEach, describe, expect, test } from 'vitest';
import { createGateway, type MockWorker, type WorkerView } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { killCommandsAfterEach, runCommand } from './helpers/cli-process.js';
import { type DnsServer as Dns, DnsServer, type SrvRecord } from './helpers/dns-server.js';
import { expectKvError } from './helpers/errors.js';
import { closeFleetsAfterEach, startFleet, startWorker } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();
killCommandsAfterEach();
const servers: Dns[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.stop();
});

const port = (endpoint: string) => Number(new URL(endpoint).port);
const HTTP = '_http._tcp.vllm.test';
const KV = '_kv-events._tcp.vllm.test';
const REPLAY = '_replay._tcp.vllm.test';

/** The records a headless Service would publish for these pods (target `pod-i.vllm.test`). */
function records(pods: [number, MockWorker][], opts: { withoutKv?: number } = {}): { srv: SrvRecord[]; hosts: string[] } {
  const srv: SrvRecord[] = [];
  for (const [i, w] of pods) {
    const target = `pod-${i}.vllm.test`;
    srv.push([HTTP, target, port(w.url)]);
    if (opts.withoutKv !== i) srv.push([KV, target, port(w.kvEventsEndpoints[0])]);
    srv.push([REPLAY, target, port(w.replayEndpoints[0])]);
  }
  return { srv, hosts: pods.map(([i]) => `pod-${i}.vllm.test`) };
}

async function dnsWith(pods: [number, MockWorker][], opts?: { withoutKv?: number }): Promise<DnsServer> {
  const dns = new DnsServer();
  servers.push(dns);
  const r = records(pods, opts);
  await dns.serve(r.srv, r.hosts);
  return dns;
}

describe.each(BACKENDS)('gateway: workers found in DNS SRV records (%s)', (backend) => {
  test('discovered workers join, serve and leave with the records; config workers stay; a DNS outage keeps them', async () => {
    const [a, b] = await Promise.all([startWorker(), startWorker()]);
    const dns = await dnsWith([
      [1, a],
      [2, b],
    ]);
    const f = await startFleet(backend, 1, {
      discovery: { srv: HTTP, kvEventsSrv: KV, replaySrv: REPLAY, servers: [dns.server], intervalMs: 150, timeoutMs: 200 },
    });
    const discovered = () => f.gateway.workers().filter((w) => w.origin === 'discovery');
    await waitFor(() => discovered().length === 2, 'both pods to be discovered');
    expect(
      discovered()
        .map((w) => [w.url, w.kvEvents, w.replay])
        .sort(),
    ).toEqual([a, b].map((w) => [w.url, w.kvEventsEndpoints, w.replayEndpoints]).sort());
    expect(f.gateway.workers().find((w) => w.origin === 'config')).toMatchObject({ id: 1n });

    // A discovered worker serves and is indexed: a prompt it answered, sent again, finds its blocks there.
    const ids = new Set(discovered().map((w) => String(w.id)));
    let prompt = '';
    let served: string | null = null;
    for (let i = 0; i < 40 && served === null; i++) {
      const p = `prompt ${i} for a discovered pod, long enough to fill a few KV blocks of sixteen tokens each `;
      const r = await postJson(`${f.url}/v1/completions`, { prompt: p, max_tokens: 1 });
      expect(r.status).toBe(200);
      if (ids.has(r.headers.get('x-kvroute-worker') ?? '')) [prompt, served] = [p, r.headers.get('x-kvroute-worker')];
    }
    expect(served).not.toBeNull();
    await waitFor(async () => {
      const r = await postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 1 });
      return r.headers.get('x-kvroute-worker') === served && Number(r.headers.get('x-kvroute-cached-tokens')) > 0;
    }, "the discovered worker's blocks to be indexed");

    // Setting the config's list leaves the discovered workers be, and cannot name them.
    const config = f.gateway.workers().find((w) => w.origin === 'config') as WorkerView;
    const entry = { id: 1, url: config.url as string, kvEvents: config.kvEvents ?? undefined, replay: config.replay ?? undefined };
    expect(f.gateway.setWorkers([entry])).toMatchObject({ unchanged: [1n], removed: [] });
    expectKvError(
      () => f.gateway.setWorkers([entry, { id: discovered()[0].id, url: a.url }]),
      'ERR_INVALID_ARG',
      /was added by DNS discovery/,
    );

    // Pod 2 goes: its records go, and so does its worker.
    const r1 = records([[1, a]]);
    await dns.serve(r1.srv, r1.hosts);
    await waitFor(() => discovered().length === 1, 'pod 2 to leave');
    expect(discovered()[0].url).toBe(a.url);
    // DNS down: resolutions fail, and the workers stay as they were.
    await dns.stop();
    await waitFor(
      async () => (await scrape(`${f.url}/metrics`)).sum('kvroute_gateway_discovery_resolutions_total', { result: 'failed' }) >= 2,
      'failed rounds',
    );
    expect(discovered().map((w) => w.url)).toEqual([a.url]);
    expect(f.gateway.workers()).toHaveLength(2);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_discovered_workers')).toBe(1);
    expect(m.sum('kvroute_gateway_discovery_resolutions_total', { result: 'ok' })).toBeGreaterThanOrEqual(2);
  });

  test('several Services (one per model, say): each keeps its own workers, and one losing a pod leaves the other be', async () => {
    const [a, b, c] = await Promise.all([startWorker(), startWorker(), startWorker()]);
    const srvOf = (svc: string, i: number, w: MockWorker): SrvRecord[] => [
      [`_http._tcp.${svc}.test`, `pod-${i}.${svc}.test`, port(w.url)],
      [`_kv-events._tcp.${svc}.test`, `pod-${i}.${svc}.test`, port(w.kvEventsEndpoints[0])],
    ];
    const dns = new DnsServer();
    servers.push(dns);
    const hosts = ['pod-1.one.test', 'pod-1.two.test', 'pod-2.two.test'];
    await dns.serve([...srvOf('one', 1, a), ...srvOf('two', 1, b), ...srvOf('two', 2, c)], hosts);
    const entry = (svc: string) => ({
      srv: `_http._tcp.${svc}.test`,
      kvEventsSrv: `_kv-events._tcp.${svc}.test`,
      servers: [dns.server],
      intervalMs: 150,
      timeoutMs: 200,
    });
    const f = await startFleet(backend, 0, { workers: [], discovery: [entry('one'), entry('two')] });
    const urls = () =>
      f.gateway
        .workers()
        .map((w) => w.url)
        .sort();
    await waitFor(() => urls().length === 3, 'every pod of both Services');
    // Service two loses a pod: its answer, which never listed Service one's pod, removes its own only.
    await dns.serve([...srvOf('one', 1, a), ...srvOf('two', 2, c)], hosts);
    await waitFor(() => urls().length === 2, "Service two's pod to leave");
    expect(urls()).toEqual([a.url, c.url].sort());
    // Service one lists Service two's pod too: it stays Service two's, and Service one's own pod stays served.
    await dns.serve([...srvOf('one', 1, a), ...srvOf('one', 2, c), ...srvOf('two', 2, c)], [...hosts, 'pod-2.one.test']);
    await waitFor(
      async () =>
        (await scrape(`${f.url}/metrics`)).sum('kvroute_gateway_discovery_skipped_total', {
          srv: '_http._tcp.one.test',
          reason: 'claimed',
        }) > 0,
      "Service one to find Service two's pod claimed",
    );
    expect(urls()).toEqual([a.url, c.url].sort());
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_discovered_workers', { srv: '_http._tcp.one.test' })).toBe(1);
    expect(m.sum('kvroute_gateway_discovered_workers', { srv: '_http._tcp.two.test' })).toBe(1);
    expectKvError(
      () => createGateway({ blockSize: 16, backend, logLevel: false, discovery: [entry('one'), entry('one')] }),
      'ERR_INVALID_ARG',
      /discovery lists _http\._tcp\.one\.test twice/,
    );
    expectKvError(
      () => createGateway({ blockSize: 16, backend, logLevel: false, discovery: [entry('one'), { srv: 'bad name' }] }),
      'ERR_INVALID_ARG',
      /discovery\[1\]\.srv must be a DNS name/,
    );
  });

  test('a pod listed without its KV-event record waits for it, counted; bad discovery options name the key', async () => {
    const [a, b] = await Promise.all([startWorker(), startWorker()]);
    const dns = await dnsWith(
      [
        [1, a],
        [2, b],
      ],
      { withoutKv: 2 },
    );
    const f = await startFleet(backend, 0, {
      workers: [],
      discovery: { srv: HTTP, kvEventsSrv: KV, servers: [dns.server], intervalMs: 150 },
    });
    await waitFor(
      async () => (await scrape(`${f.url}/metrics`)).sum('kvroute_gateway_discovery_skipped_total', { reason: 'no_kv_events' }) >= 1,
      'the skip',
    );
    expect(f.gateway.workers().map((w) => w.url)).toEqual([a.url]);
    // Without replaySrv, no replay endpoint.
    expect(f.gateway.workers()[0]).toMatchObject({ kvEvents: a.kvEventsEndpoints, replay: null });
    for (const [discovery, message] of [
      [{ srv: 'not a name!' }, /discovery\.srv must be a DNS name/],
      [{ srv: HTTP, intervalMs: 5 }, /discovery\.intervalMs must be an integer in \[100, 3600000\]/],
      [{ srv: HTTP, servers: [] }, /discovery\.servers must be a non-empty list/],
      [{ srv: HTTP, servers: ['dns.example'] }, /discovery\.servers: .*dns\.example/],
      [{ srv: HTTP, port: 1 }, /discovery\.port goes with host, not srv/],
      [{ srv: HTTP, nope: 1 }, /discovery: unknown key "nope"/],
    ] as const) {
      expectKvError(
        () => createGateway({ blockSize: 16, backend, logLevel: false, discovery: discovery as never }),
        'ERR_INVALID_ARG',
        message,
      );
    }
  });
});

describe.each(BACKENDS)('gateway: workers found by the addresses of a name (%s)', (backend) => {
  test('each address is a worker on the given ports: they join, serve and leave with the records; IPv6 when there is no IPv4', async () => {
    // Every pod of a Service serves on the same ports; only 127.0.0.1 has one here, so the
    // other addresses (loopback, nothing listening) are workers that refuse connections.
    const a = await startWorker();
    const dns = new DnsServer();
    servers.push(dns);
    const NAME = 'vllm.test';
    await dns.serve(
      [],
      [
        [NAME, '127.0.0.1'],
        [NAME, '127.0.0.2'],
      ],
    );
    const ports = { port: port(a.url), kvEventsPort: port(a.kvEventsEndpoints[0]), replayPort: port(a.replayEndpoints[0]) };
    const f = await startFleet(backend, 0, {
      workers: [],
      discovery: { host: NAME, ...ports, servers: [dns.server], intervalMs: 150, timeoutMs: 200 },
    });
    const discovered = () =>
      f.gateway
        .workers()
        .filter((w) => w.origin === 'discovery')
        .map((w) => [w.url, w.kvEvents, w.replay])
        .sort();
    const at = (host: string) => [
      `http://${host}:${ports.port}`,
      [`tcp://${host}:${ports.kvEventsPort}`],
      [`tcp://${host}:${ports.replayPort}`],
    ];
    await waitFor(() => discovered().length === 2, 'both addresses to be discovered');
    expect(discovered()).toEqual([at('127.0.0.1'), at('127.0.0.2')]);
    expect(discovered()[0]).toEqual([a.url, a.kvEventsEndpoints, a.replayEndpoints]);

    // The worker that listens serves, and its KV events reach the index.
    const prompt = 'a prompt for the one address that answers, long enough to fill a few KV blocks of sixteen tokens ';
    await waitFor(async () => {
      const r = await postJson(`${f.url}/v1/completions`, { prompt, max_tokens: 1 });
      return r.status === 200 && Number(r.headers.get('x-kvroute-cached-tokens')) > 0;
    }, "the serving worker's blocks to be indexed");
    let m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_discovered_workers', { srv: NAME })).toBe(2);

    // One address goes: its worker goes.
    await dns.serve([], [[NAME, '127.0.0.2']]);
    await waitFor(() => discovered().length === 1 && discovered()[0][0] === at('127.0.0.2')[0], '127.0.0.1 to leave');
    // No A record, an AAAA one: the worker is at the IPv6 address, in brackets.
    await dns.serve([], [[NAME, '::1']]);
    await waitFor(() => discovered().length === 1 && discovered()[0][0] === at('[::1]')[0], 'the IPv6 address');
    expect(discovered()).toEqual([at('[::1]')]);
    // The name gone (NXDOMAIN): a failed round, the worker kept.
    await dns.serve([], []);
    await waitFor(
      async () =>
        (await scrape(`${f.url}/metrics`)).sum('kvroute_gateway_discovery_resolutions_total', { srv: NAME, result: 'failed' }) >= 2,
      'failed rounds',
    );
    expect(discovered()).toEqual([at('[::1]')]);
    m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_discovered_workers', { srv: NAME })).toBe(1);
  });

  test('kvroute serve --discover-host: the flags give the name and the ports', async () => {
    const a = await startWorker();
    const dns = new DnsServer();
    servers.push(dns);
    await dns.serve([], [['vllm.test', '127.0.0.1']]);
    const serve = runCommand(
      [
        'serve',
        '--block-size',
        '16',
        '--host',
        '127.0.0.1',
        '--port',
        '0',
        '--backend',
        backend,
        '--discover-host',
        'vllm.test',
        '--discover-port',
        String(port(a.url)),
        '--discover-kv-events-port',
        String(port(a.kvEventsEndpoints[0])),
        '--dns-server',
        dns.server,
      ],
      /proxy (http:\/\/127\.0\.0\.1:\d+)/,
    );
    const [, proxy] = await serve.match;
    await waitFor(
      async () => (await scrape(`${proxy}/metrics`)).sum('kvroute_gateway_discovered_workers', { srv: 'vllm.test' }) === 1,
      "the worker at the name's address",
    );
    const prompt = 'a prompt for the worker the flags found, long enough to fill a few KV blocks of sixteen tokens ';
    await waitFor(async () => {
      const r = await postJson(`${proxy}/v1/completions`, { prompt, max_tokens: 1 });
      return r.status === 200 && Number(r.headers.get('x-kvroute-cached-tokens')) > 0;
    }, 'its KV events to reach the index through --discover-kv-events-port');
  });

  test('a pod found by its address and by an SRV record is one worker; bad host options name the key', async () => {
    const a = await startWorker();
    const dns = new DnsServer();
    servers.push(dns);
    await dns.serve([[HTTP, 'pod-1.vllm.test', port(a.url)]], ['pod-1.vllm.test', ['vllm.test', '127.0.0.1']]);
    const f = await startFleet(backend, 0, {
      workers: [],
      discovery: [
        { srv: HTTP, servers: [dns.server], intervalMs: 150 },
        { host: 'vllm.test', port: port(a.url), servers: [dns.server], intervalMs: 150 },
      ],
    });
    await waitFor(
      async () => (await scrape(`${f.url}/metrics`)).sum('kvroute_gateway_discovery_skipped_total', { reason: 'claimed' }) >= 1,
      'the second way to find the pod claimed',
    );
    expect(f.gateway.workers().map((w) => w.url)).toEqual([a.url]);
    // Without kvEventsPort: a worker without KV events.
    expect(f.gateway.workers()[0]).toMatchObject({ kvEvents: null, replay: null });
    for (const [discovery, message] of [
      [{}, /discovery needs exactly one of srv .* and host/],
      [{ srv: HTTP, host: 'vllm.test' }, /discovery needs exactly one of srv .* and host/],
      [{ host: 'vllm.test', kvEventsSrv: KV }, /discovery\.kvEventsSrv goes with srv, not host/],
      [{ host: 'vllm.test', replayPort: 5558 }, /discovery\.replayPort needs kvEventsPort/],
      [{ host: 'vllm.test', port: 0 }, /discovery\.port must be an integer in \[1, 65535\]/],
      [{ host: 'vllm.test', kvEventsPort: 65_536 }, /discovery\.kvEventsPort must be an integer in \[1, 65535\]/],
      [{ host: 'http://vllm.test' }, /discovery\.host must be a DNS name/],
    ] as const) {
      expectKvError(
        () => createGateway({ blockSize: 16, backend, logLevel: false, discovery: discovery as never }),
        'ERR_INVALID_ARG',
        message,
      );
    }
    expectKvError(
      () =>
        createGateway({
          blockSize: 16,
          backend,
          logLevel: false,
          discovery: [{ host: 'vllm.test' }, { host: 'VLLM.test', port: 9000 }],
        }),
      'ERR_INVALID_ARG',
      /discovery lists vllm\.test twice/,
    );
  });
});
