import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import {
  blockHashes,
  createGateway,
  type Gateway,
  type GatewayOptions,
  IndexSnapshotWriter,
  type KvIndex,
  KvRouteError,
  KvRouter,
  stringifyEvents,
  type WarmStartOptions,
  warmStart,
} from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { makeCa, makeClientCert, makeServerCert } from './helpers/certs.js';
import { TestEnginePublisher } from './helpers/engine-publisher.js';
import { packBatch, vllmRemoved, vllmStored } from './helpers/engine-wire.js';
import { NatsServer } from './helpers/nats-server.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { waitFor } from './helpers/wait.js';

const BS = 4;
const WORKER = 7;

/** Block `i` of the test chain: hash 100 + i, tokens [i, 1, 2, 3]. */
function block(i: number, parent: bigint | null): Uint8Array {
  return packBatch([vllmStored([100n + BigInt(i)], parent, [i, 1, 2, 3])]);
}
const prompt = (blocks: number) => Array.from({ length: blocks }, (_, i) => [i + 1, 1, 2, 3]).flat();

async function publishChain(pub: TestEnginePublisher, from: number, to: number): Promise<void> {
  for (let i = from; i <= to; i++) await pub.publish(0, block(i, i === 1 ? null : 100n + BigInt(i - 1)));
}

/** What a router answers for every prefix of the chain: the observable the warm start must copy. */
function answers(index: KvIndex, blocks: number): string {
  const out: string[] = [];
  for (let n = 1; n <= blocks; n++) {
    const { scores } = index.findMatchesForRequest(prompt(n));
    out.push(scores.map((s) => `${s.workerId}:${s.dpRank}:${s.blocks}`).join(','));
  }
  return out.join(' | ');
}

describe.each(BACKENDS)('index warm start (%s)', (backend) => {
  const cleanup: (() => Promise<void> | void)[] = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });

  /** A running replica: a gateway (with `extra` options) whose router follows one engine, and the engine. */
  async function peer(extra: Partial<GatewayOptions> = {}): Promise<{ gw: Gateway; url: string; pub: TestEnginePublisher }> {
    const pub = await TestEnginePublisher.start();
    cleanup.push(() => pub.close());
    const gw = createGateway({ blockSize: BS, backend, logLevel: false, ...extra });
    cleanup.push(() => gw.close());
    const { url } = await gw.listen();
    const src = gw.router.subscribe({ workerId: WORKER, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint });
    await pub.waitForSubscribers();
    await publishChain(pub, 1, 10);
    await waitFor(() => src.stats().ranks[0].lastSeq === 9n, 'the peer to apply ten batches');
    await gw.router.flush();
    return { gw, url, pub };
  }

  function router(): KvRouter {
    const r = new KvRouter({ blockSize: BS, backend });
    cleanup.push(() => r.closeAsync());
    return r;
  }

  test("from a peer's /dump: the same answers, and the engine stream resumes after the dump (gap replayed)", async () => {
    const { gw, url, pub } = await peer();
    const fresh = router();
    const result = await warmStart(fresh, { peer: url });
    expect(result).toMatchObject({ from: 'peer', events: 1, blocks: 10, resumableRanks: 1 });
    expect(answers(fresh.index, 12)).toBe(answers(gw.router.index, 12));
    // The engine moves on before the new replica subscribes: seqs 10 and 11 are the gap.
    await publishChain(pub, 11, 12);
    await waitFor(() => gw.router.index.engineSources()[0].stats().ranks[0].lastSeq === 11n, 'the peer to apply the gap');
    const src = fresh.subscribe({ workerId: WORKER, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint });
    await pub.waitForSubscribers(2);
    await publishChain(pub, 13, 13);
    await waitFor(() => src.stats().ranks[0].lastSeq === 12n, 'the new replica to catch up');
    await Promise.all([fresh.flush(), gw.router.flush()]);
    // It asked the replay socket for the gap only, not for the whole history: from seq 9, the
    // dump's, whose batch (by the digest the dump carries) shows the engine did not restart.
    expect(pub.replayRequests).toEqual([9n]);
    expect(src.stats().ranks[0]).toMatchObject({ state: 'active', resyncs: 0 });
    expect(answers(fresh.index, 14)).toBe(answers(gw.router.index, 14));
    expect(fresh.index.stats().blocks).toBe(13);
  });

  test("the peer's lower tiers come too: blocks its engine offloaded to CPU memory, removable by name afterwards", async () => {
    const { gw, url, pub } = await peer();
    // The engine keeps blocks 11-14 in CPU memory only, below its GPU chain's last block.
    const tail = Array.from({ length: 4 }, (_, i) => 111n + BigInt(i));
    await pub.publish(0, packBatch([vllmStored(tail, 110n, prompt(14).slice(10 * BS), { medium: 'CPU' })]));
    await waitFor(() => gw.router.index.engineSources()[0].stats().ranks[0].lastSeq === 10n, 'the peer to apply the offload');
    await gw.router.flush();
    const hashes = [...blockHashes(prompt(14), BS, { backend })];
    const tiered = (r: KvRouter) => r.index.findTieredMatches(hashes, [{ workerId: WORKER }]);
    expect(tiered(gw.router)).toEqual([{ workerId: BigInt(WORKER), dpRank: 0, device: 10, hostPinned: 4, disk: 0, external: 0 }]);
    const fresh = router();
    expect(await warmStart(fresh, { peer: url })).toMatchObject({ blocks: 10, lowerTierBlocks: 4, resumableRanks: 1 });
    expect(tiered(fresh)).toEqual(tiered(gw.router));
    // The engine drops its CPU copy of block 13: both replicas' host runs stop at block 12.
    const src = fresh.subscribe({ workerId: WORKER, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint });
    await pub.waitForSubscribers(2);
    await pub.publish(0, packBatch([vllmRemoved([113n], { medium: 'CPU' })]));
    await waitFor(() => src.stats().ranks[0].lastSeq === 11n, 'the new replica to apply the removal');
    await waitFor(() => gw.router.index.engineSources()[0].stats().ranks[0].lastSeq === 11n, 'the peer to apply the removal');
    await Promise.all([fresh.flush(), gw.router.flush()]);
    expect(tiered(fresh)).toEqual([{ workerId: BigInt(WORKER), dpRank: 0, device: 10, hostPinned: 2, disk: 0, external: 0 }]);
    expect(tiered(fresh)).toEqual(tiered(gw.router));
    expect(fresh.index.stats().lowerTiers.host_pinned).toMatchObject({ blocks: 3, removed: 1, not_found: 0 });
  });

  test('an engine restarted since the snapshot clears the rank instead of keeping stale blocks', async () => {
    const { url, pub } = await peer();
    const fresh = router();
    await warmStart(fresh, { peer: url });
    const src = fresh.subscribe({ workerId: WORKER, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint });
    await pub.waitForSubscribers(2);
    pub.restart();
    await pub.publish(0, block(1, null));
    await waitFor(() => src.stats().ranks[0].restarts === 1, 'the restart to be seen');
    await fresh.flush();
    expect(fresh.index.stats().blocks).toBe(1);
  });

  test("an engine restarted since the snapshot, its new seqs already past the snapshot's: found by the batch the gap's replay returns at that seq", async () => {
    const { gw, url, pub } = await peer();
    const fresh = router();
    await warmStart(fresh, { peer: url });
    // The restarted engine names the same tokens anew (vLLM's random root); its seqs 0..10 go
    // out while no replica hears them, so the first batch the new replica hears is seq 11.
    pub.restart();
    const renamed = (i: number) => packBatch([vllmStored([500n + BigInt(i)], i === 1 ? null : 499n + BigInt(i), [i, 1, 2, 3])]);
    for (let i = 1; i <= 11; i++) await pub.publish(0, renamed(i), { drop: true });
    const src = fresh.subscribe({ workerId: WORKER, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint });
    await pub.waitForSubscribers(2);
    await pub.publish(0, renamed(12));
    await waitFor(() => src.stats().ranks[0].lastSeq === 11n && src.stats().ranks[0].state === 'active', 'the new replica');
    await waitFor(() => gw.router.index.engineSources()[0].stats().ranks[0].lastSeq === 11n, 'the peer');
    await Promise.all([fresh.flush(), gw.router.flush()]);
    // Only the new incarnation's twelve blocks, by their new names: none of the snapshot's ten.
    expect(fresh.index.stats().blocks).toBe(12);
    expect(fresh.index.dump().flatMap((e) => e.event.data.stored.blocks.map((b) => BigInt(b.block_hash)) ?? [])).not.toContain(101n);
    expect(src.stats().ranks[0]).toMatchObject({ restarts: 1, incarnation: 1, resyncs: 0 });
    expect(answers(fresh.index, 12)).toBe(answers(gw.router.index, 12));
  });

  test('a gateway configured with warmStart loads before it listens', async () => {
    const { gw, url } = await peer();
    const second = createGateway({ blockSize: BS, backend, logLevel: false, warmStart: { peer: url } });
    cleanup.push(() => second.close());
    await second.listen();
    const r = await second.warmStart;
    expect(r).toMatchObject({ from: 'peer', blocks: 10 });
    expect(answers(second.router.index, 10)).toBe(answers(gw.router.index, 10));
  });

  test("a peer serving HTTPS with a private CA and guarding /dump with the fleet's admin token: warmStart.tls and the gateway's own token reach it", async () => {
    const dir = scratchDir('kvroute-warm-tls-');
    const ca = makeCa(dir, 'replicas-ca');
    const clientsCa = makeCa(dir, 'clients-ca');
    const server = makeServerCert(dir, 'replica', ca);
    const client = makeClientCert(dir, 'replica-client', clientsCa);
    const auth = { adminToken: 'fleet-admin' };
    // Mutual TLS: the peer takes only clients with a certificate its clients' CA signed.
    const { url } = await peer({ auth, tls: { certFile: server.certFile, keyFile: server.keyFile, caFile: clientsCa.certFile } });
    expect(url.startsWith('https://')).toBe(true);
    const tls = { caFile: ca.certFile, certFile: client.certFile, keyFile: client.keyFile };
    const started = async (warm: WarmStartOptions, own: Partial<GatewayOptions> = { auth }) => {
      const g = createGateway({ blockSize: BS, backend, logLevel: false, warmStart: warm, ...own });
      cleanup.push(() => g.close());
      return g.warmStart;
    };
    const loaded = await started({ peer: url, tls });
    expect(loaded).toMatchObject({ from: 'peer', blocks: 10 });
    // Each thing missing is its own failure, and the gateway starts cold.
    const failures = [
      [await started({ peer: url, tls }, {}), /answered 401/],
      [await started({ peer: url, tls: { caFile: ca.certFile } }), /cannot read .*\/dump/],
      [await started({ peer: url }), /cannot read .*\/dump: .*certificate/i],
      [await started({ peer: url, tls, headers: { Authorization: 'Bearer wrong' } }), /answered 401/],
    ] as const;
    for (const [result, message] of failures) {
      expect(result).toBeInstanceOf(KvRouteError);
      expect((result as KvRouteError).message).toMatch(message);
    }
    // Bad TLS options are refused before any request.
    const fresh = router();
    const bad: [WarmStartOptions, RegExp][] = [
      [{ peer: url, tls: { caFile: `${dir}/missing.pem` } }, /opts.tls.caFile cannot be read: ENOENT/],
      [{ peer: url, tls: { certFile: client.certFile } }, /opts.tls.certFile and opts.tls.keyFile go together/],
      [{ peer: url, tls: { caFile: client.keyFile } }, /opts.tls.caFile .*no PEM certificate/],
      [{ snapshot: { servers: 'nats://127.0.0.1:1' }, tls: { caFile: ca.certFile } }, /opts.tls is the peer request's/],
      [{ peer: url, headers: 'authorization: x' as never }, /opts.headers must be an object of header names to strings/],
      [{ peer: url, headers: { authorization: 1 } as never }, /opts.headers must be an object of header names to strings/],
    ];
    for (const [opts, message] of bad) await expect(warmStart(fresh, opts)).rejects.toThrow(message);
    expect(fresh.index.stats().blocks).toBe(0);
  });

  test('a gateway closed during its warm start never adds its workers', async () => {
    const { url } = await peer();
    const closing = createGateway({
      blockSize: BS,
      backend,
      logLevel: false,
      warmStart: { peer: url },
      workers: [{ id: 5, url: 'http://127.0.0.1:1', kvEvents: 'tcp://127.0.0.1:2' }],
    });
    await closing.close();
    expect(await closing.warmStart).toMatchObject({ from: 'peer' });
    expect(closing.workers()).toEqual([]);
  });

  test('a gateway whose snapshot store is unreachable counts and reports the failures, and serves on', async () => {
    const gw = createGateway({ blockSize: BS, backend, logLevel: false, snapshots: { servers: 'nats://127.0.0.1:1', everyMs: 100 } });
    cleanup.push(() => gw.close());
    const failures: KvRouteError[] = [];
    gw.snapshots?.on('failed', (err) => failures.push(err));
    // A listener that throws changes nothing for the writer or the other listeners.
    gw.snapshots?.on('failed', () => {
      throw new Error('a broken listener');
    });
    expect(() => gw.snapshots?.on('nope' as 'failed', () => {})).toThrow(/event must be 'written' or 'failed'/);
    const { url } = await gw.listen();
    await waitFor(() => failures.length >= 2, 'two failed writes', 10_000);
    expect(failures[0]).toBeInstanceOf(KvRouteError);
    expect(failures[0].code).toBe('ERR_INTERNAL');
    expect(gw.snapshots?.stats()).toMatchObject({ writes: 0, lastBytes: 0, lastWriteAt: null });
    const text = await (await fetch(`${url}/metrics`)).text();
    expect(Number(/^kvroute_snapshot_failures_total (\d+)$/m.exec(text)?.[1])).toBeGreaterThanOrEqual(2);
    expect(text).toMatch(/^kvroute_snapshot_writes_total 0$/m);
    expect(text).toMatch(/^kvroute_snapshot_last_write_timestamp_seconds 0$/m);
    expect((await fetch(`${url}/health`)).status).toBe(200);
  });

  test('bad sources are typed errors and apply nothing', async () => {
    const fresh = router();
    const code = async (p: Promise<unknown>) => {
      try {
        await p;
      } catch (err) {
        expect(err).toBeInstanceOf(KvRouteError);
        return (err as KvRouteError).code;
      }
      return 'resolved';
    };
    expect(await code(warmStart(fresh, { peer: 'http://127.0.0.1:1', timeoutMs: 2000 }))).toBe('ERR_INVALID_ARG');
    expect(await code(warmStart(fresh, { peer: 'ftp://x' }))).toBe('ERR_INVALID_ARG');
    expect(await code(warmStart(fresh, {} as never))).toBe('ERR_INVALID_ARG');
    // A peer that answers something else than a dump.
    const other = createGateway({ blockSize: BS * 2, backend, logLevel: false });
    cleanup.push(() => other.close());
    const { url } = await other.listen();
    expect(await code(warmStart(fresh, { peer: url }))).toBe('ERR_INVALID_ARG'); // its block size is 8
    expect(fresh.index.stats().blocks).toBe(0);
    expect(stringifyEvents(fresh.index.dump())).toBe('[]');
    // The resume option itself is validated like every other subscribe option.
    for (const resumeAfterSeq of [-1, 1.5, 'x', [1, 2]]) {
      expect(() => fresh.subscribe({ workerId: 1, endpoint: 'tcp://127.0.0.1:1', resumeAfterSeq: resumeAfterSeq as never })).toThrow(
        KvRouteError,
      );
    }
  });
});

describe('snapshots in a NATS object store', () => {
  const server = new NatsServer();
  beforeAll(() => server.start());
  afterAll(() => server.dispose());
  let bucketNo = 0;

  test.each(BACKENDS)('written every N events and read back by a new replica (%s)', async (backend) => {
    const bucket = `kvroute-test-${++bucketNo}`;
    const pub = await TestEnginePublisher.start();
    const source = new KvRouter({ blockSize: BS, backend });
    const writer = new IndexSnapshotWriter(source, { servers: server.url, bucket, everyMs: 60_000, everyEvents: 5 });
    const fresh = new KvRouter({ blockSize: BS, backend });
    try {
      const src = source.subscribe({ workerId: WORKER, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint });
      await pub.waitForSubscribers();
      await publishChain(pub, 1, 6);
      await waitFor(() => src.stats().ranks[0].lastSeq === 5n, 'six batches');
      // Six events since the start: the writer's own check writes a snapshot.
      await waitFor(() => writer.stats().writes >= 1, 'a snapshot after five events', 10_000);
      const result = await warmStart(fresh, { snapshot: { servers: server.url, bucket } });
      expect(result.from).toBe('snapshot');
      expect(result.resumableRanks).toBe(1);
      expect(answers(fresh.index, 8)).toBe(answers(source.index, 8));
      // Missing objects and buckets are clear errors.
      await expect(warmStart(fresh, { snapshot: { servers: server.url, bucket, name: 'nothing' } })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
      });
      await expect(warmStart(fresh, { snapshot: { servers: server.url, bucket: 'no-such-bucket' } })).rejects.toMatchObject({
        code: 'ERR_INVALID_ARG',
      });
    } finally {
      await writer.close();
      pub.close();
      await Promise.all([source.closeAsync(), fresh.closeAsync()]);
    }
  });

  test.each(BACKENDS)('a gateway with snapshots reports each write in its metrics and to listeners (%s)', async (backend) => {
    const bucket = `kvroute-test-${++bucketNo}`;
    const gw = createGateway({ blockSize: BS, backend, logLevel: false, snapshots: { servers: server.url, bucket, everyMs: 100 } });
    try {
      const written: number[] = [];
      gw.snapshots?.on('written', (stats) => written.push(stats.lastBytes));
      await waitFor(() => written.length >= 1, 'a snapshot', 10_000);
      const text = await gw.registry.metrics();
      expect(Number(/^kvroute_snapshot_writes_total (\d+)$/m.exec(text)?.[1])).toBeGreaterThanOrEqual(1);
      expect(text).toMatch(/^kvroute_snapshot_failures_total 0$/m);
      expect(Number(/^kvroute_snapshot_last_bytes (\d+)$/m.exec(text)?.[1])).toBe(written[0]);
      expect(Number(/^kvroute_snapshot_last_write_timestamp_seconds (\S+)$/m.exec(text)?.[1])).toBeGreaterThan(Date.now() / 1000 - 60);
    } finally {
      await gw.close();
    }
  });

  test('a writer whose store is unreachable counts its failures and never throws into the router', async () => {
    const source = new KvRouter({ blockSize: BS });
    const writer = new IndexSnapshotWriter(source, { servers: 'nats://127.0.0.1:1', everyMs: 100 });
    try {
      await expect(writer.write()).rejects.toMatchObject({ code: 'ERR_INTERNAL' });
      expect(writer.stats()).toMatchObject({ writes: 0, failures: 1 });
      expect(writer.stats().lastError).toBeTypeOf('string');
      expect(() => new IndexSnapshotWriter(source, { servers: server.url, bucket: 'a.b' })).toThrow(KvRouteError);
      // Authentication is checked as for the replica sync: user needs pass, one method at most.
      expect(() => new IndexSnapshotWriter(source, { servers: server.url, user: 'u' })).toThrow(KvRouteError);
      expect(() => new IndexSnapshotWriter(source, { servers: server.url, token: 't', credentials: '/x.creds' })).toThrow(KvRouteError);
    } finally {
      await writer.close();
      await source.closeAsync();
    }
  });
});
