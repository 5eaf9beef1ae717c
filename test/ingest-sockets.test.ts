import { describe, expect, test } from 'vitest';
import { type EngineSource, KvIndex, KvRouter, type SourceStateChange, xxh3_64 } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { closeAfterEach } from './helpers/close-after-each.js';
import { chain, heldNames, chainNames as range } from './helpers/engine-chain.js';
import { TestEnginePublisher } from './helpers/engine-publisher.js';
import { packBatch, vllmRemoved } from './helpers/engine-wire.js';
import { expectKvError } from './helpers/errors.js';
import { batchesByRank, captureNames, readCapture } from './helpers/kvcap.js';
import { sleep, waitFor } from './helpers/wait.js';

const BS = 4;
const track = closeAfterEach();

describe.each(BACKENDS)('engine sources over real sockets (%s)', (backend) => {
  function setup(blockSize = BS) {
    return track(new KvIndex({ blockSize, backend }));
  }

  async function publishAll(pub: TestEnginePublisher, payloads: Uint8Array[], rank = 0, drop?: (i: number) => boolean) {
    for (const [i, p] of payloads.entries()) await pub.publish(rank, p, { drop: drop?.(i) });
  }

  test('a stream applies in order and the source reports it; state changes are emitted', async () => {
    const pub = track(await TestEnginePublisher.start());
    const index = setup();
    const src = index.subscribe({ workerId: 7, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint });
    const changes: SourceStateChange[] = [];
    src.on('state', (c) => changes.push(c));
    expect(src.state).toEqual(['connecting']);
    await pub.waitForSubscribers();
    await publishAll(pub, chain(100n, 10));
    await waitFor(() => src.stats().ranks[0].batches === 10, 'ten batches');
    await index.flush();
    expect(heldNames(index)).toEqual(range(100n, 10));
    const r = src.stats().ranks[0];
    expect(r).toMatchObject({ state: 'active', lastSeq: 9n, gaps: 0, restarts: 0, decodeErrors: 0, blocks: { stored: 10, removed: 0 } });
    expect(r.lagMs).not.toBeNull();
    await waitFor(() => changes.length > 0, 'a state event');
    expect(changes[0]).toMatchObject({ workerId: 7n, dpRank: 0, state: 'active' });
  });

  test('state changes are also an async iterable that ends when the source closes', async () => {
    const pub = track(await TestEnginePublisher.start());
    const index = setup();
    const src = index.subscribe({ workerId: 8, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint });
    const seen: string[] = [];
    const consumer = (async () => {
      for await (const change of src) seen.push(`${change.dpRank}:${change.state}`);
    })();
    await pub.waitForSubscribers();
    await publishAll(pub, chain(0n, 2));
    await waitFor(() => seen.length > 0, 'a change');
    src.close();
    await consumer;
    expect(seen[0]).toBe('0:active');
  });

  test('a live gap is repaired from the replay socket without duplicates (both reply framings, a topic)', async () => {
    for (const framing of ['old', 'new'] as const) {
      const pub = track(await TestEnginePublisher.start({ framing, topic: 'kv' }));
      const index = setup();
      const src = index.subscribe({ workerId: 1, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint, topic: 'kv' });
      await pub.waitForSubscribers();
      // Seqs 3..5 never reach the subscriber.
      await publishAll(pub, chain(0n, 12), 0, (i) => i >= 3 && i <= 5);
      await waitFor(() => src.stats().ranks[0].lastSeq === 11n, `seq 11 (${framing})`);
      await index.flush();
      expect(heldNames(index)).toEqual(range(0n, 12));
      const r = src.stats().ranks[0];
      expect(r).toMatchObject({ state: 'active', gaps: 1, replayFailures: 0, blocks: { stored: 12 } });
      expect(r.replayed).toBeGreaterThanOrEqual(3);
      // From the last seq applied: its batch must come back unchanged (no restart meanwhile).
      expect(pub.replayRequests).toEqual([2n]);
    }
  });

  test('a first frame past 0 is completed from the replay socket (a subscriber that joined late)', async () => {
    const pub = track(await TestEnginePublisher.start());
    await publishAll(pub, chain(0n, 5)); // nobody listening
    const index = setup();
    const src = index.subscribe({ workerId: 1, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint });
    await pub.waitForSubscribers();
    await publishAll(pub, chain(5n, 2, 5n));
    await waitFor(() => src.stats().ranks[0].lastSeq === 6n, 'seq 6');
    await index.flush();
    expect(heldNames(index)).toEqual(range(0n, 7));
    expect(src.stats().ranks[0]).toMatchObject({ state: 'active', replayRequests: 1 });
  });

  test.each(['silent', 'gone'] as const)('a replay socket that is %s: the rank is cleared and resyncs until fresh stores', async (mode) => {
    const pub = track(await TestEnginePublisher.start());
    if (mode === 'silent') pub.answerReplays = false;
    else pub.closeReplay();
    const index = setup();
    const src = index.subscribe({ workerId: 1, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint, replayTimeoutMs: 300 });
    await pub.waitForSubscribers();
    await publishAll(pub, chain(0n, 6), 0, (i) => i === 2);
    await waitFor(() => src.stats().ranks[0].state === 'resyncing', 'resyncing');
    await index.flush();
    const r = src.stats().ranks[0];
    expect(r).toMatchObject({ replayTimeouts: 1, replayFailures: 1, resyncs: 1 });
    expect(r.reason).toMatch(/replay socket did not finish within 300 ms: rank cleared/);
    // Cleared, and the frames after the hole cannot attach to anything: nothing possibly wrong is kept.
    expect(heldNames(index)).toEqual([]);
    // A fresh root store: complete again.
    await publishAll(pub, chain(50n, 2));
    await waitFor(() => src.stats().ranks[0].state === 'active' && src.stats().ranks[0].lastSeq === 7n, 'active again');
    await index.flush();
    expect(heldNames(index)).toEqual(range(50n, 2));
  });

  test('no replay endpoint: a gap clears the rank at once', async () => {
    const pub = track(await TestEnginePublisher.start({ replay: false }));
    const index = setup();
    const src = index.subscribe({ workerId: 1, endpoint: pub.endpoint });
    await pub.waitForSubscribers();
    await publishAll(pub, chain(0n, 3));
    await waitFor(() => src.stats().ranks[0].lastSeq === 2n, 'seq 2');
    await pub.publish(0, chain(10n, 1)[0], { drop: true });
    await publishAll(pub, chain(20n, 1));
    await waitFor(() => src.stats().ranks[0].lastSeq === 4n, 'seq 4');
    await index.flush();
    expect(heldNames(index)).toEqual([21n]);
    expect(src.stats().ranks[0]).toMatchObject({ gaps: 1, resyncs: 1, state: 'active' });
  });

  test('an engine restart (seq back to 0, new hashes) leaves exactly what the new incarnation stored', async () => {
    const pub = track(await TestEnginePublisher.start());
    const index = setup();
    const src = index.subscribe({ workerId: 3, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint });
    await pub.waitForSubscribers();
    await publishAll(pub, chain(0n, 8));
    await waitFor(() => src.stats().ranks[0].lastSeq === 7n, 'seq 7');
    pub.restart();
    // Same tokens, new hashes (vLLM's random root), fewer batches than before.
    await publishAll(pub, [...chain(1000n, 2), packBatch([vllmRemoved([1002n])])]);
    await waitFor(() => src.stats().ranks[0].restarts === 1 && src.stats().ranks[0].lastSeq === 2n, 'the restart');
    await index.flush();
    expect(heldNames(index)).toEqual([1001n]);
    expect(src.stats().ranks[0]).toMatchObject({ state: 'active', incarnation: 1, restarts: 1 });
  });

  test('an engine restarted unseen, its new seqs already past the old ones: found by the replayed batch at the applied seq', async () => {
    const first = await TestEnginePublisher.start();
    const [port, replayPort] = [first.port, first.replayPort];
    const index = setup();
    const src = index.subscribe({ workerId: 5, endpoint: first.endpoint, replayEndpoint: first.replayEndpoint });
    await first.waitForSubscribers();
    await publishAll(first, chain(0n, 3));
    await waitFor(() => src.stats().ranks[0].lastSeq === 2n, 'the first incarnation');
    // What a snapshot records to resume from: xxh3-64 of the last batch applied, alike on both backends.
    expect(src.stats().ranks[0].lastBatchDigest).toBe(xxh3_64(chain(0n, 3)[2]));
    first.close();
    await sleep(300); // libzmq releases the ports asynchronously
    // A new process on the same ports: new hashes, and seqs 0..4 published before the
    // subscriber is back, so the first it hears is seq 5, past the 2 it applied.
    const second = track(await TestEnginePublisher.start({ basePort: port, replayBasePort: replayPort }));
    const restarted = chain(40n, 6);
    await publishAll(second, restarted.slice(0, 5), 0, () => true);
    await second.waitForSubscribers();
    await second.publish(0, restarted[5]);
    await waitFor(() => src.stats().ranks[0].lastSeq === 5n && src.stats().ranks[0].state === 'active', 'the new incarnation');
    await index.flush();
    expect(heldNames(index)).toEqual(range(40n, 6));
    expect(src.stats().ranks[0]).toMatchObject({ incarnation: 1, restarts: 1, gaps: 1, resyncs: 0, replayRequests: 2 });
    expect(second.replayRequests).toEqual([2n, 0n]);
  });

  test('a replay that ran ahead of the live stream, then a restart: the live batch it already applied differs, so the rank is cleared', async () => {
    const pub = track(await TestEnginePublisher.start());
    const index = setup();
    const src = index.subscribe({ workerId: 6, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint });
    await pub.waitForSubscribers();
    const old = chain(0n, 7);
    await publishAll(pub, old.slice(0, 2));
    await waitFor(() => src.stats().ranks[0].lastSeq === 1n, 'seq 1');
    // Seqs 2..4 are lost; seq 5 shows the gap; seq 6 reaches the ring before the replay is
    // answered, so the replay applies it ahead of the live stream.
    const release = pub.holdReplays();
    for (const p of old.slice(2, 5)) await pub.publish(0, p, { drop: true });
    await pub.publish(0, old[5]);
    await waitFor(() => pub.replayRequests.length === 1, 'the replay request');
    await pub.publish(0, old[6], { drop: true });
    release();
    await waitFor(() => src.stats().ranks[0].lastSeq === 6n && src.stats().ranks[0].state === 'active', 'the replay');
    // The engine restarts unheard; the first batch heard from it is its seq 6, which the old
    // incarnation's replay applied already.
    pub.restart();
    const renamed = chain(70n, 7);
    for (const p of renamed.slice(0, 6)) await pub.publish(0, p, { drop: true });
    await pub.publish(0, renamed[6]);
    await waitFor(() => src.stats().ranks[0].restarts === 1 && src.stats().ranks[0].state === 'active', 'the restart');
    await index.flush();
    expect(heldNames(index)).toEqual(range(70n, 7));
    expect(src.stats().ranks[0]).toMatchObject({ lastSeq: 6n, incarnation: 1, resyncs: 0 });
  });

  test('two dp ranks on port + rank, one restarting while the other runs', async () => {
    const pub = track(await TestEnginePublisher.start({ dpRanks: 2 }));
    const index = setup();
    const src = index.subscribe({ workerId: 9, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint, dataParallelSize: 2 });
    expect(src.stats().ranks.map((r) => r.endpoint)).toEqual([pub.endpoint, `tcp://127.0.0.1:${pub.port + 1}`]);
    await pub.waitForSubscribers();
    await publishAll(pub, chain(0n, 3), 0);
    await publishAll(pub, chain(100n, 4), 1);
    await waitFor(() => src.stats().ranks[1].lastSeq === 3n && src.stats().ranks[0].lastSeq === 2n, 'both ranks');
    pub.restart(1);
    await publishAll(pub, chain(200n, 1), 1);
    await waitFor(() => src.stats().ranks[1].restarts === 1, 'rank 1 restart');
    await index.flush();
    expect(heldNames(index, 0)).toEqual(range(0n, 3));
    expect(heldNames(index, 1)).toEqual([201n]);
    expect(src.state).toEqual(['active', 'active']);
  });

  test('a publisher that starts after the subscriber, dies, and comes back as a new process', async () => {
    const probe = await TestEnginePublisher.start({ replay: false });
    const port = probe.port;
    probe.close();
    await sleep(300); // libzmq releases the port asynchronously
    const index = setup();
    const src = index.subscribe({ workerId: 4, endpoint: `tcp://127.0.0.1:${port}` });
    await sleep(100);
    const first = await TestEnginePublisher.start({ replay: false, basePort: port });
    await first.waitForSubscribers();
    await publishAll(first, chain(0n, 3));
    await waitFor(() => src.stats().ranks[0].lastSeq === 2n, 'the first publisher');
    first.close();
    await sleep(300);
    expect(src.state).toEqual(['active']);
    const second = track(await TestEnginePublisher.start({ replay: false, basePort: port }));
    await second.waitForSubscribers();
    await publishAll(second, chain(40n, 1));
    await waitFor(() => src.stats().ranks[0].restarts === 1, 'the restart');
    await index.flush();
    expect(heldNames(index)).toEqual([41n]);
  });

  test('a block-size mismatch fails the rank with both sizes named', async () => {
    const pub = track(await TestEnginePublisher.start());
    const index = setup(8);
    const src = index.subscribe({ workerId: 1, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint });
    await pub.waitForSubscribers();
    await publishAll(pub, chain(0n, 3));
    await waitFor(() => src.state[0] === 'failed', 'failed');
    const r = src.stats().ranks[0];
    expect(r.reason).toMatch(/block size mismatch: the engine uses 4, the router 8/);
    expect(r.filtered.block_size_mismatch).toBe(1);
    await waitFor(() => src.stats().ranks[0].ignored === 2, 'later frames ignored');
  });

  test('close during recovery returns promptly; close is idempotent; the source is gone from the index', async () => {
    const pub = track(await TestEnginePublisher.start());
    pub.answerReplays = false;
    const index = setup();
    const src = index.subscribe({ workerId: 1, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint, replayTimeoutMs: 60_000 });
    await pub.waitForSubscribers();
    await publishAll(pub, chain(0n, 4), 0, (i) => i === 1);
    await waitFor(() => src.state[0] === 'recovering', 'recovering');
    const t0 = Date.now();
    src.close();
    expect(Date.now() - t0).toBeLessThan(1000);
    src.close();
    expect(src.closed).toBe(true);
    expect(index.engineSources()).toEqual([]);
    // The same worker can be subscribed again.
    track(index.subscribe({ workerId: 1, endpoint: pub.endpoint }));
  });

  test('bind mode: the engine connects to us', async () => {
    const probe = await TestEnginePublisher.start({ replay: false });
    const port = probe.port;
    probe.close();
    await sleep(300); // libzmq releases the port asynchronously
    const index = setup();
    const src = index.subscribe({ workerId: 2, endpoint: `tcp://127.0.0.1:${port}`, bind: true });
    const { XPublisher } = await import('zeromq');
    const pub = track(new XPublisher({ linger: 0 }));
    pub.connect(`tcp://127.0.0.1:${port}`);
    const [subscription] = await pub.receive(); // the source's subscription reached the engine
    expect(subscription[0]).toBe(1);
    const seq = new Uint8Array(8);
    await pub.send(['', seq, chain(0n, 1)[0]]);
    await waitFor(() => src.stats().ranks[0].batches === 1, 'the batch');
    // The port is taken now: a second bind fails up front.
    expectKvError(
      () => index.subscribe({ workerId: 3, endpoint: `tcp://127.0.0.1:${port}`, bind: true }),
      'ERR_INVALID_ARG',
      /cannot bind/,
    );
  });

  test('subscribe validates everything before opening any socket', () => {
    const index = setup();
    const bad = (o: unknown, re: RegExp) => expectKvError(() => index.subscribe(o as never), 'ERR_INVALID_ARG', re);
    bad({ workerId: 1 }, /endpoint is required/);
    bad({ workerId: 1, endpoint: 'http://x:1' }, /unknown transport/);
    bad({ workerId: 1, endpoint: 'tcp://h' }, /no port/);
    bad({ workerId: 1, endpoint: 'tcp://h:70000' }, /above 65535/);
    bad({ workerId: 1, endpoint: 'tcp://h:65535', dataParallelSize: 2 }, /port 65536/);
    bad({ workerId: 1, endpoint: ['tcp://h:1'], dataParallelSize: 2 }, /1 endpoints for 2 dp ranks/);
    bad({ workerId: -1, endpoint: 'tcp://h:1' }, /workerId/);
    bad({ workerId: 1, endpoint: 'tcp://h:1', blockSize: 16 }, /blockSize is 16 but the index hashes blocks of 4/);
    bad({ workerId: 1, endpoint: 'tcp://h:1', engine: 'tgi' }, /engine must be one of/);
    bad({ workerId: 1, endpoint: 'tcp://h:1', replayTimeoutMs: -1 }, /replayTimeoutMs/);
    bad({ workerId: 1, endpoint: 'tcp://h:1', colour: 'red' }, /unknown option "colour"/);
    bad(
      [
        { workerId: 1, endpoint: 'tcp://127.0.0.1:1' },
        { workerId: 1, endpoint: 'tcp://127.0.0.1:2' },
      ],
      /already subscribed/,
    );
    expect(index.engineSources()).toEqual([]);
    track(index.subscribe({ workerId: 1, endpoint: 'tcp://127.0.0.1:1' }));
    bad({ workerId: 1, endpoint: 'tcp://127.0.0.1:2' }, /already subscribed/);
  });

  test('a fleet through KvRouter: workers registered, routed by cache, removeWorker closes the source', async () => {
    const pubs = [track(await TestEnginePublisher.start()), track(await TestEnginePublisher.start())];
    const router = track(new KvRouter({ blockSize: BS, backend }));
    const sources: EngineSource[] = router.subscribe(
      pubs.map((p, i) => ({ workerId: i + 1, endpoint: p.endpoint, replayEndpoint: p.replayEndpoint })),
    );
    expect(sources.map((s) => s.workerId)).toEqual([1n, 2n]);
    await Promise.all(pubs.map((p) => p.waitForSubscribers()));
    await publishAll(pubs[1], chain(0n, 3));
    await waitFor(() => sources[1].stats().ranks[0].lastSeq === 2n, 'worker 2');
    await router.flush();
    const tokens = [1, 1, 2, 3, 2, 1, 2, 3, 3, 1, 2, 3];
    const decision = await router.route({ requestId: 'r1', tokens });
    expect(decision.workerId).toBe(2n);
    expect(decision.overlapBlocks).toBe(3);
    router.free('r1');
    router.removeWorker(2);
    expect(sources[1].closed).toBe(true);
    expect(sources[0].closed).toBe(false);
  });
});

const CAPTURES = captureNames();

describe.skipIf(CAPTURES.length === 0).each(BACKENDS)('captured frames replayed through a real publisher (%s)', (backend) => {
  test.each(CAPTURES)('%s', async (name) => {
    const capture = readCapture(name);
    const byRank = batchesByRank(capture);
    const ranks = [...byRank.keys()].length;
    const pub = track(await TestEnginePublisher.start({ dpRanks: ranks, framing: capture.truth.replay_topic_frame ? 'new' : 'old' }));
    const index = track(new KvIndex({ blockSize: capture.truth.block_size, backend }));
    const src = index.subscribe({ workerId: 7, endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint, dataParallelSize: ranks });
    await pub.waitForSubscribers();
    for (const [rank, batches] of byRank) {
      // The capture's own gaps (what its SUB missed) are dropped live here too.
      for (const b of batches) await pub.publish(rank, b.payload, { drop: !b.live });
    }
    for (const [rank, batches] of byRank) {
      const last = batches[batches.length - 1].seq;
      await waitFor(() => src.stats().ranks[rank].lastSeq === last, `${name} rank ${rank}`);
    }
    await index.flush();
    const direct = track(new KvIndex({ blockSize: capture.truth.block_size, backend }));
    for (const [rank, batches] of byRank) for (const b of batches) direct.applyEngineBatch(7, rank, b.payload);
    await direct.flush();
    expect(index.dump()).toEqual(direct.dump());
    const gaps = src.stats().ranks.reduce((n, r) => n + r.gaps, 0);
    expect(gaps).toBe(Object.values(capture.truth.ranks).reduce((n, r) => n + r.gaps.length, 0));
    expect(src.state.every((s) => s === 'active')).toBe(true);
  });
});
