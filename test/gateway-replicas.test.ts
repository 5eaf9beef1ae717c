import { type ChildProcess, spawn } from 'node:child_process';
import { join } from 'node:path';
import { request } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { ROOT, requireDist } from './helpers/dist.js';
import { closeFleetsAfterEach, startWorker } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { NatsServer } from './helpers/nats-server.js';
import { scrape } from './helpers/prometheus.js';
import { waitFor } from './helpers/wait.js';

const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) if (c.exitCode === null) c.kill('SIGKILL');
});
closeFleetsAfterEach();

/** `kvroute serve <args>` as a process: its proxy URL once it listens, and its output (pino's JSON lines) so far. */
function serveProcess(args: string[], logLevel = 'warn'): { url: Promise<string>; output: () => string } {
  const child = spawn(process.execPath, [join(ROOT, 'dist', 'cli.js'), 'serve', '--port', '0', '--log-level', logLevel, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let out = '';
  let err = '';
  child.stderr.on('data', (d) => {
    err += d;
  });
  const url = new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (d) => {
      out += d;
      const m = /proxy (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`kvroute serve exited ${code}: ${out} ${err}`)));
  });
  return { url, output: () => out };
}

const serve = (args: string[]): Promise<string> => serveProcess(args).url;

async function stats(url: string): Promise<{ replicas?: { peers: number; remoteInFlight: number }; index: { blocks: number } }> {
  const res = await request(`${url}/admin/stats`);
  return (await res.body.json()) as never;
}

describe('kvroute serve replicas', () => {
  const nats = new NatsServer();
  beforeAll(() => nats.start());
  afterAll(() => nats.dispose());

  test('two gateways share in-flight load over NATS; a third warm-starts from a peer', async () => {
    requireDist();
    const workers = await Promise.all([startWorker({ speedup: 2 }), startWorker({ speedup: 2 })]);
    const flag = (w: (typeof workers)[number], id: number, replay: boolean) =>
      `id=${id},url=${w.url},kv-events=${w.kvEventsEndpoints[0]}${replay ? `,replay=${w.replayEndpoints[0]}` : ''}`;
    const fleet = (replay: boolean) => workers.flatMap((w, i) => ['--worker', flag(w, i + 1, replay)]);
    const [a, b] = await Promise.all([
      serve(['--block-size', '16', ...fleet(true), '--replicas', nats.url, '--replica-id', 'gw-a']),
      serve(['--block-size', '16', ...fleet(true), '--replicas', nats.url, '--replica-id', 'gw-b']),
    ]);
    for (const url of [a, b]) {
      const deadline = Date.now() + 10_000;
      while ((await stats(url)).replicas?.peers !== 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    }
    expect((await stats(b)).replicas?.peers).toBe(1);
    // A long completion through gateway A: while it runs, gateway B counts it.
    const prompt = 'a system prompt that every request of this test shares, long enough for several KV blocks; ';
    const long = postJson(`${a}/v1/completions`, { prompt: `${prompt}tell a long story`, max_tokens: 600 });
    let seen = 0;
    const deadline = Date.now() + 10_000;
    while (seen === 0 && Date.now() < deadline) {
      seen = (await stats(b)).replicas?.remoteInFlight ?? 0;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(seen).toBe(1);
    const done = await long;
    expect(done.status).toBe(200);
    const worker = done.headers.get('x-kvroute-worker');
    const settle = Date.now() + 10_000;
    while ((await stats(b)).replicas?.remoteInFlight !== 0 && Date.now() < settle) await new Promise((r) => setTimeout(r, 20));
    expect((await stats(b)).replicas?.remoteInFlight).toBe(0);
    // The sync in each gateway's metrics: A published the booking and its free, B heard them.
    const [ma, mb] = await Promise.all([scrape(`${a}/metrics`), scrape(`${b}/metrics`)]);
    for (const m of [ma, mb]) {
      expect([m.sum('kvroute_replica_connected'), m.sum('kvroute_replica_peers'), m.sum('kvroute_replica_outages_total')]).toEqual([
        1, 1, 0,
      ]);
      expect(m.sum('kvroute_replica_messages_rejected_total')).toBe(0);
    }
    expect(ma.sum('kvroute_replica_messages_published_total')).toBeGreaterThan(0);
    expect(ma.sum('kvroute_replica_published_bytes_total')).toBeGreaterThan(ma.sum('kvroute_replica_messages_published_total'));
    expect(mb.sum('kvroute_replica_messages_received_total')).toBeGreaterThan(0);

    // A third gateway without replay sockets would start with an empty index; warm-started from A
    // it knows A's blocks at once and sends the same prefix to the same worker, with a cache hit.
    const c = await serve(['--block-size', '16', ...fleet(false), '--warm-start-from', a]);
    expect((await stats(c)).index.blocks).toBe((await stats(a)).index.blocks);
    // Without replicas the sync's counters stay 0.
    expect((await scrape(`${c}/metrics`)).sum('kvroute_replica_messages_published_total')).toBe(0);
    const again = await postJson(`${c}/v1/completions`, { prompt: `${prompt}and another`, max_tokens: 2 });
    expect(again.status).toBe(200);
    expect(again.headers.get('x-kvroute-worker')).toBe(worker);
    expect(Number(again.headers.get('x-kvroute-cached-tokens'))).toBeGreaterThan(0);
  });

  test('the gateway logs the replica sync losing NATS and getting it back', async () => {
    requireDist();
    const gw = serveProcess(['--block-size', '16', '--replicas', nats.url, '--replica-id', 'gw-log'], 'info');
    // One whose NATS is nowhere serves anyway, and says so once.
    const alone = serveProcess(['--block-size', '16', '--replicas', 'nats://127.0.0.1:1', '--replica-id', 'gw-alone'], 'info');
    await Promise.all([gw.url, alone.url]);
    const logged = (pattern: RegExp) => waitFor(() => pattern.test(gw.output()), `a log line matching ${pattern}`, 15_000);
    await logged(/"level":30,[^\n]*"replica":"gw-log"[^\n]*"msg":"replica sync connected"/);
    await nats.stop();
    await logged(/"level":40,[^\n]*"outages":1[^\n]*"msg":"replica sync lost its connection/);
    await nats.start();
    await logged(/"level":30,[^\n]*"msg":"replica sync reconnected"/);
    await waitFor(
      () => /"level":40,[^\n]*"msg":"replica sync cannot reach NATS yet/.test(alone.output()),
      'the lone replica to say so',
      15_000,
    );
    expect(alone.output().match(/cannot reach NATS/g)).toHaveLength(1);
    expect((await fetch(`${await alone.url}/health`)).status).toBe(200);
  });
});
