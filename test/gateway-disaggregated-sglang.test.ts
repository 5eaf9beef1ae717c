/**
 * Disaggregated serving over SGLang's bootstrap protocol (`disaggregation.protocol: 'sglang'`):
 * each request's prefill and decode legs sent at once, each with the prefill worker's bootstrap
 * host and port and one fresh room. The mock workers run in SGLang's disaggregation modes, where
 * neither leg finishes without the other (a prefill leg waits for its decode worker to join its
 * room, a decode leg for the room's KV), so a gateway that sent the legs in turn, or to the wrong
 * room, would get no answer. Their HTTP APIs sit behind TCP proxies that keep what was sent.
 */

import { describe, expect, test } from 'vitest';
import { createGateway, type GatewayOptions, type MockWorker, writeMockTokenizer } from '../ts/index.js';
import { parseWorkerFlag } from '../ts/server/config-file.js';
import { BACKENDS } from './helpers/backends.js';
import {
  disaggregatedFleet,
  type FleetShape,
  SGLANG,
  sglangFleet,
  streamedChat,
  text,
  twoPromptBatch,
} from './helpers/disaggregated-fleet.js';
import { closeFleetsAfterEach, nothingInFlight, startWorker } from './helpers/gateway.js';
import { type Json, postJson, sse } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { sleep, waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

const roomOf = (body: Json) => ({ host: body.bootstrap_host, port: body.bootstrap_port, room: body.bootstrap_room });

describe.each(BACKENDS)("disaggregated serving over SGLang's bootstrap protocol (%s)", (backend) => {
  test('both legs go at once with the prefill worker’s bootstrap host and port and one room; the client gets the decode worker’s answer', async () => {
    const f = await sglangFleet(backend);
    const body = { model: 'mock-model', prompt: text(60, 'alpha'), max_tokens: 5, temperature: 0 };
    const r = await postJson(`${f.url}/v1/completions`, body, { 'x-request-id': 'sg-1' });
    expect(r.status).toBe(200);
    expect(r.json.usage.completion_tokens).toBe(5);
    const prefillWorker = Number(r.headers.get('x-kvroute-prefill-worker'));
    const decodeWorker = Number(r.headers.get('x-kvroute-worker'));
    expect([1, 2]).toContain(prefillWorker);
    expect([3, 4]).toContain(decodeWorker);

    const [prefill, ...morePrefills] = f.received(prefillWorker);
    const [decode, ...moreDecodes] = f.received(decodeWorker);
    expect([morePrefills, moreDecodes]).toEqual([[], []]);
    const room = roomOf(decode.body);
    expect(room.host).toBe('127.0.0.1');
    expect(room.port).toBe(f.workers[prefillWorker - 1].bootstrapPort);
    expect(Number.isSafeInteger(room.room) && room.room >= 0).toBe(true);
    // The prefill leg: the request unstreamed, in the same room; the decode leg: the request itself.
    expect(prefill.body).toEqual({ ...body, ...decode.body, stream: false });
    const { bootstrap_host: _h, bootstrap_port: _p, bootstrap_room: _r, ...rest } = decode.body;
    expect(rest).toEqual(body);
    expect([prefill.head['x-request-id'], decode.head['x-request-id']]).toEqual(['sg-1', 'sg-1']);
    for (const id of [1, 2, 3, 4]) if (id !== prefillWorker && id !== decodeWorker) expect(f.received(id)).toEqual([]);

    // They met: the prefill worker handed its KV over, the decode worker filled the prompt without compute.
    expect(f.workers[prefillWorker - 1].stats().kvTransfers).toEqual({ offered: 1, pulled: 0 });
    expect(f.workers[decodeWorker - 1].stats().kvTransfers).toEqual({ offered: 0, pulled: 1 });
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_prefill_legs_total', { worker: String(prefillWorker), result: 'transferred' })).toBe(1);
    expect(m.sum('kvroute_gateway_prefill_leg_seconds')).toBe(1);
    // Both legs were booked (each on its own worker) and both bookings are freed.
    expect(m.sum('kvroute_router_in_flight_requests')).toBe(0);
    expect(m.sum('kvroute_gateway_requests_total', { worker: String(decodeWorker), status: '200' })).toBe(1);
  });

  test('a streamed chat is streamed from the decode worker; every request meets in a room of its own', async () => {
    const f = await sglangFleet(backend, ['prefill', 'decode']);
    await streamedChat(f.url, { max_tokens: 4 });
    const second = await streamedChat(f.url, { max_tokens: 4 });
    const prefills = f.received(1);
    const decodes = f.received(2);
    expect(prefills.map((p) => [p.body.stream, p.body.stream_options])).toEqual([
      [false, undefined],
      [false, undefined],
    ]);
    expect(decodes.map((d) => [d.body.stream, d.body.stream_options])).toEqual([
      [true, { include_usage: true }],
      [true, { include_usage: true }],
    ]);
    expect(prefills.map((p) => p.body.bootstrap_room)).toEqual(decodes.map((d) => d.body.bootstrap_room));
    expect(decodes[0].body.bootstrap_room).not.toBe(decodes[1].body.bootstrap_room);
    // The second prefill found the first one's prompt cached: its report is the prefill worker's.
    expect(Number(second.headers.get('x-kvroute-cached-tokens'))).toBeGreaterThan(0);
  });

  test("SGLang's /generate is split the same way: its legs meet in one room, the client gets the decode worker's streamed answer", async () => {
    const f = await sglangFleet(backend, ['prefill', 'decode']);
    const input = Array.from({ length: 70 }, (_, i) => 300 + i);
    const body = { input_ids: input, sampling_params: { max_new_tokens: 4 }, stream: true, rid: 'gen-1' };
    const first = await sse(`${f.url}/generate`, body);
    expect(first.status).toBe(200);
    expect(first.events.at(-1)).toBe('[DONE]');
    expect((first.events.at(-2) as Json).meta_info).toMatchObject({ id: 'gen-1', completion_tokens: 4 });
    expect([first.headers.get('x-kvroute-prefill-worker'), first.headers.get('x-kvroute-worker')]).toEqual(['1', '2']);
    const [prefill] = f.received(1);
    const [decode] = f.received(2);
    expect([prefill.path, decode.path]).toEqual(['/generate', '/generate']);
    // The prefill leg: the request unstreamed, in the decode leg's room.
    expect(prefill.body).toEqual({ ...decode.body, stream: false });
    const { bootstrap_host: _h, bootstrap_port: _p, bootstrap_room: _r, ...rest } = decode.body;
    expect(rest).toEqual(body);
    expect(roomOf(decode.body).port).toBe(f.workers[0].bootstrapPort);
    expect(f.workers[0].stats().kvTransfers).toEqual({ offered: 1, pulled: 0 });
    expect(f.workers[1].stats().kvTransfers).toEqual({ offered: 0, pulled: 1 });
    // The second request's prefill found the first one's prompt cached; the prefill worker's meta_info said so.
    await sleep(300);
    const second = await postJson(`${f.url}/generate`, { input_ids: [...input, 1, 2], sampling_params: { max_new_tokens: 2 } });
    expect(second.status).toBe(200);
    expect(second.headers.get('x-kvroute-cached-tokens')).toBe('64');
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_prefill_legs_total', { worker: '1', result: 'transferred' })).toBe(2);
    expect(m.sum('kvroute_gateway_cache_predictions_total', { worker: '1', outcome: 'exact' })).toBe(2);
    expect(m.sum('kvroute_router_in_flight_requests')).toBe(0);
  });

  test("with return_logprob, the prompt's log probabilities the prefill worker computed come first in the decode worker's answer, as SGLang's load balancer merges them", async () => {
    const f = await sglangFleet(backend, ['prefill', 'decode']);
    const input = Array.from({ length: 20 }, (_, i) => 40 + i);
    const body = { input_ids: input, sampling_params: { max_new_tokens: 3 }, return_logprob: true };
    const whole = await postJson(`${f.url}/generate`, body);
    expect(whole.status).toBe(200);
    const logprobs = whole.json.meta_info.input_token_logprobs as [number | null, number, null][];
    expect(logprobs.map(([, token]) => token)).toEqual(input);
    expect(logprobs[0][0]).toBeNull();
    expect(logprobs.slice(1).every(([lp]) => typeof lp === 'number' && lp < 0)).toBe(true);
    expect(whole.json.meta_info.output_token_logprobs).toHaveLength(3);
    // Streamed: every event that carries them gets them.
    const streamed = await sse(`${f.url}/generate`, { ...body, stream: true });
    const events = streamed.events.slice(0, -1) as Json[];
    expect(events.length).toBeGreaterThan(0);
    for (const e of events) expect(e.meta_info.input_token_logprobs).toEqual(logprobs);
    // Without return_logprob nothing is added.
    const plain = await postJson(`${f.url}/generate`, { input_ids: input, sampling_params: { max_new_tokens: 1 } });
    expect(plain.json.meta_info.input_token_logprobs).toBeUndefined();
  });

  test('a prefill worker that fails is replaced: the pair is sent again, with a new room, to another prefill worker', async () => {
    const f = await sglangFleet(backend, ['prefill', 'prefill', 'decode']);
    const prompt = text(80, 'retry');
    const warm = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 1 });
    expect(warm.status).toBe(200);
    const cached = Number(warm.headers.get('x-kvroute-prefill-worker'));
    const other = cached === 1 ? 2 : 1;
    await sleep(200);
    // The prefill worker holding the prompt (the router's choice) goes away.
    f.workers[cached - 1].fault({ kind: 'crash' });
    await sleep(100);
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 3 }, { 'x-request-id': 'again' });
    expect(r.status).toBe(200);
    expect(r.json.usage.completion_tokens).toBe(3);
    expect(r.headers.get('x-kvroute-prefill-worker')).toBe(String(other));
    const [retried] = f.received(other);
    const decodes = f.received(3).filter((d) => d.head['x-request-id'] === 'again');
    expect(decodes.at(-1)?.body.bootstrap_room).toBe(retried.body.bootstrap_room);
    expect(roomOf(decodes.at(-1)?.body).port).toBe(f.workers[other - 1].bootstrapPort);
    // The crashed worker's room is not reused.
    const crashedRoom = f.received(cached).at(-1)?.body.bootstrap_room;
    expect(crashedRoom).not.toBe(retried.body.bootstrap_room);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_retries_total')).toBeGreaterThanOrEqual(1);
    expect(m.sum('kvroute_gateway_prefill_legs_total', { worker: String(other), result: 'transferred' })).toBe(1);
  });

  test("a decode worker failing because its prefill worker did is not blamed: the pair goes to another prefill worker, the decode worker's health untouched", async () => {
    const f = await sglangFleet(backend, ['prefill', 'prefill', 'decode']);
    const prompt = text(80, 'blame');
    const warm = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 1 });
    const cached = Number(warm.headers.get('x-kvroute-prefill-worker'));
    const other = cached === 1 ? 2 : 1;
    await sleep(200);
    // The prefill worker the router prefers dies; the news reaches the gateway late, after the
    // decode worker, which finds the room gone at once, has answered 500.
    f.wires[cached - 1].closeLagMs = 400;
    f.workers[cached - 1].fault({ kind: 'crash' });
    await sleep(100);
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 3 }, { 'x-request-id': 'blame' });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-kvroute-prefill-worker')).toBe(String(other));
    expect(r.headers.get('x-kvroute-worker')).toBe('3');
    // The decode worker did answer 500 in the dead room (and was sent the pair again, in the new one).
    const decodes = f.received(3).filter((d) => d.head['x-request-id'] === 'blame');
    expect(decodes.map((d) => roomOf(d.body).port)).toEqual([f.workers[cached - 1].bootstrapPort, f.workers[other - 1].bootstrapPort]);
    const decode = (await f.gateway.workers()).find((w) => w.id === 3n);
    expect([decode?.health, decode?.consecutiveFailures]).toEqual(['healthy', 0]);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_peer_failed_legs_total', { worker: '3' })).toBe(1);
    expect(m.sum('kvroute_gateway_retries_total')).toBe(1);
    // No booking of the failed pair outlives it.
    expect(m.sum('kvroute_router_in_flight_requests')).toBe(0);
  });

  test("a decode worker that waited in vain for a hung prefill worker is not blamed: the prefill worker's health probe fails, and the pair goes to another prefill worker", async () => {
    // A local tokenizer: the engine's /tokenize could meet the hung worker.
    const tokenizer = writeMockTokenizer(scratchDir('kvroute-sglang-tok-'));
    const f = await sglangFleet(backend, ['prefill', 'prefill', 'decode'], { tokenizer, health: { intervalMs: 0, timeoutMs: 300 } });
    const prompt = text(80, 'hung');
    const warm = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 1 });
    const hung = Number(warm.headers.get('x-kvroute-prefill-worker'));
    const other = hung === 1 ? 2 : 1;
    await sleep(200);
    // The prefill worker the router prefers hangs: it answers nothing, its health probes included,
    // and the decode worker, waiting in its room for KV that never comes, gives up with a 500.
    f.workers[hung - 1].fault({ kind: 'hang' });
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt, max_tokens: 3 }, { 'x-request-id': 'hung' });
    expect(r.status).toBe(200);
    expect(r.headers.get('x-kvroute-prefill-worker')).toBe(String(other));
    expect(r.headers.get('x-kvroute-worker')).toBe('3');
    expect(f.received(hung).filter((d) => d.head['x-request-id'] === 'hung')).toHaveLength(1);
    const workers = await f.gateway.workers();
    const decode = workers.find((w) => w.id === 3n);
    expect([decode?.health, decode?.consecutiveFailures]).toEqual(['healthy', 0]);
    expect(workers.find((w) => w.id === BigInt(hung))?.consecutiveFailures).toBe(1);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_peer_probes_total', { worker: String(hung), leg: 'prefill', result: 'silent' })).toBe(1);
    expect(m.sum('kvroute_gateway_peer_probes_total')).toBe(1);
    expect(m.sum('kvroute_gateway_peer_failed_legs_total', { worker: '3', leg: 'decode' })).toBe(1);
    expect(m.sum('kvroute_gateway_retries_total', { reason: 'probe' })).toBe(1);
    expect(m.sum('kvroute_router_in_flight_requests')).toBe(0);
  });

  test("a prefill worker that is slow but answers its health probe does not excuse its decode workers: each one's timeout in the room is its own", async () => {
    // Decode workers that wait 300 ms in a room; a prefill worker computing at a tenth of its modelled speed.
    const shape: FleetShape = {
      ...SGLANG,
      worker: (role) => ({ ...SGLANG.worker?.(role), ...(role === 'prefill' ? { speedup: 1 } : { bootstrapTimeoutMs: 300 }) }),
    };
    const tokenizer = writeMockTokenizer(scratchDir('kvroute-sglang-tok-'));
    const f = await disaggregatedFleet(
      backend,
      ['prefill', 'decode', 'decode'],
      { disaggregation: { protocol: 'sglang' }, tokenizer, health: { intervalMs: 0, timeoutMs: 300 } },
      shape,
    );
    f.workers[0].fault({ kind: 'slow', factor: 10 });
    await sleep(50);
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: text(3000, 'slow'), max_tokens: 2 });
    // Both decode workers gave up on the room in turn; the prefill leg, still computing, was cut then.
    expect(r.status).toBe(502);
    expect(r.json.error.message).toMatch(/no worker could serve the request \(worker [23] answered 500\)/);
    const workers = await f.gateway.workers();
    const failures = (id: bigint) => workers.find((w) => w.id === id)?.consecutiveFailures;
    expect([failures(1n), failures(2n), failures(3n)]).toEqual([0, 1, 1]);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_peer_probes_total', { worker: '1', leg: 'prefill', result: 'answered' })).toBe(2);
    expect(m.sum('kvroute_gateway_peer_probes_total')).toBe(2);
    expect(m.sum('kvroute_gateway_peer_failed_legs_total')).toBe(0);
    expect(m.sum('kvroute_router_in_flight_requests')).toBe(0);
  });

  test("a prefill worker whose decode worker hung is not blamed: the decode worker's health probe fails, and the pair goes again to another decode worker", async () => {
    const tokenizer = writeMockTokenizer(scratchDir('kvroute-sglang-tok-'));
    const f = await sglangFleet(backend, ['prefill', 'decode', 'decode'], { tokenizer, health: { intervalMs: 0, timeoutMs: 300 } });
    // A hung decode worker never joins its room: the prefill leg waits for it, then fails with a 500.
    const hung = 2;
    f.workers[hung - 1].fault({ kind: 'hang' });
    await sleep(50);
    // Two requests at once: the router spreads their decode legs, so one meets the hung worker.
    const replies = await Promise.all(
      ['one', 'two'].map((id) =>
        postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: text(60, id), max_tokens: 3 }, { 'x-request-id': id }),
      ),
    );
    expect(replies.map((r) => [r.status, r.headers.get('x-kvroute-worker'), r.headers.get('x-kvroute-prefill-worker')])).toEqual([
      [200, '3', '1'],
      [200, '3', '1'],
    ]);
    expect(f.received(hung)).toHaveLength(1);
    const workers = await f.gateway.workers();
    const prefill = workers.find((w) => w.id === 1n);
    expect([prefill?.health, prefill?.consecutiveFailures]).toEqual(['healthy', 0]);
    expect(workers.find((w) => w.id === BigInt(hung))?.consecutiveFailures).toBe(1);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_peer_probes_total', { worker: String(hung), leg: 'decode', result: 'silent' })).toBe(1);
    expect(m.sum('kvroute_gateway_peer_probes_total')).toBe(1);
    expect(m.sum('kvroute_gateway_peer_failed_legs_total', { worker: '1', leg: 'prefill' })).toBe(1);
    expect(m.sum('kvroute_router_in_flight_requests')).toBe(0);
  });

  test('a decode worker failing once its prefill leg is served is blamed, and the pair goes again in a new room rather than to another decode worker in the spent one', async () => {
    // Workers at their modelled speed, so that the answer takes long enough to be cut off.
    const slow: FleetShape = { ...SGLANG, worker: (role) => ({ ...SGLANG.worker?.(role), speedup: 1 }) };
    const f = await disaggregatedFleet(backend, ['prefill', 'decode', 'decode'], { disaggregation: { protocol: 'sglang' } }, slow);
    const reply = postJson(
      `${f.url}/v1/completions`,
      { model: 'mock-model', prompt: text(40, 'spent'), max_tokens: 300 },
      { 'x-request-id': 'spent' },
    );
    // The prefill leg is served; the decode worker generating the answer is cut off before it answers.
    const metrics = () => scrape(`${f.url}/metrics`);
    await waitFor(async () => (await metrics()).sum('kvroute_gateway_prefill_leg_seconds') === 1, 'the prefill leg served');
    const first = [2, 3].find((id) => f.received(id).some((d) => d.head['x-request-id'] === 'spent')) as number;
    await f.wires[first - 1].cut();
    const r = await reply;
    expect(r.status).toBe(200);
    expect(r.json.usage.completion_tokens).toBe(300);
    const second = first === 2 ? 3 : 2;
    expect(r.headers.get('x-kvroute-worker')).toBe(String(second));
    // The pair went again: the prefill worker a second time, in a new room, which the other decode worker joined.
    const rooms = f.received(1).map((d) => d.body.bootstrap_room);
    expect(rooms).toHaveLength(2);
    expect(rooms[1]).not.toBe(rooms[0]);
    expect(f.received(second).map((d) => d.body.bootstrap_room)).toEqual([rooms[1]]);
    const decode = (await f.gateway.workers()).find((w) => w.id === BigInt(first));
    expect(decode?.health).toBe('down');
    const m = await metrics();
    expect(m.sum('kvroute_gateway_prefill_legs_total', { worker: '1', result: 'transferred' })).toBe(2);
    expect(m.sum('kvroute_gateway_peer_failed_legs_total')).toBe(0);
    expect(m.sum('kvroute_router_in_flight_requests')).toBe(0);
  });

  test("a prefill worker whose transfer fails because its decode worker died is not blamed: the pair goes again, the prefill worker's health untouched", async () => {
    // Prefill workers at their modelled speed, so that a long prompt's compute outlasts its decode worker.
    const slow: FleetShape = { ...SGLANG, worker: (role) => ({ ...SGLANG.worker?.(role), ...(role === 'prefill' ? { speedup: 1 } : {}) }) };
    const f = await disaggregatedFleet(
      backend,
      ['prefill', 'prefill', 'decode', 'decode'],
      { disaggregation: { protocol: 'sglang' } },
      slow,
    );
    // A dead decode worker's news reaches the gateway a second late: after its prefill worker's
    // failed transfer, and too late for the gateway to send another decode worker into the room.
    for (const wire of f.wires.slice(2)) wire.closeLagMs = 1000;
    const reply = postJson(
      `${f.url}/v1/completions`,
      { model: 'mock-model', prompt: text(3000, 'died'), max_tokens: 2 },
      { 'x-request-id': 'died' },
    );
    const sentTo = () => [3, 4].find((id) => f.received(id).some((d) => d.head['x-request-id'] === 'died'));
    // The decode worker dies once it has joined the room, while the prefill worker computes the
    // prompt (0.5-0.7 s: a crash up to 0.5 s later still meets it computing).
    await waitFor(() => sentTo() !== undefined, 'the decode leg sent');
    await sleep(30);
    const decode = sentTo() as number;
    f.workers[decode - 1].fault({ kind: 'crash' });
    const r = await reply;
    expect(r.status).toBe(200);
    const prefill = f.received(1).length > 0 && f.received(1)[0].head['x-request-id'] === 'died' ? 1 : 2;
    const workers = await f.gateway.workers();
    const health = (id: number) => workers.find((w) => w.id === BigInt(id));
    expect([health(prefill)?.health, health(prefill)?.consecutiveFailures]).toEqual(['healthy', 0]);
    expect(health(decode)?.health).toBe('down');
    expect(r.headers.get('x-kvroute-worker')).toBe(String(decode === 3 ? 4 : 3));
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_peer_failed_legs_total', { worker: String(prefill), leg: 'prefill' })).toBe(1);
    expect(m.sum('kvroute_router_in_flight_requests')).toBe(0);
  });

  test('without a prefill worker that answers, the request is refused (an SGLang decode worker cannot serve it alone)', async () => {
    // A local tokenizer: the engine's /tokenize would meet the unreachable worker first.
    const tokenizer = writeMockTokenizer(scratchDir('kvroute-sglang-tok-'));
    const f = await sglangFleet(backend, ['prefill', 'decode'], { upstream: { retries: 1 }, tokenizer });
    await f.wires[0].cut();
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: 'hello there', max_tokens: 2 });
    expect(r.status).toBe(502);
    expect(r.json.error.message).toMatch(/no prefill worker could serve the request \(worker 1: /);
    expect(r.headers.get('retry-after')).not.toBeNull();
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_prefill_legs_total', { worker: 'none', result: 'failed' })).toBe(1);
    expect(m.sum('kvroute_gateway_rejected_total', { reason: 'upstream_failed' })).toBe(1);
    expect(f.workers[1].stats().kvTransfers.pulled).toBe(0);
    // With the prefill worker gone from the routable workers, the request is not split, and no worker takes it whole.
    f.workers[0].fault({ kind: 'crash' });
    await waitFor(async () => (await f.gateway.workers()).find((w) => w.id === 1n)?.routable === false, 'the crashed worker is down');
    const alone = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: 'hello there', max_tokens: 2 });
    expect(alone.status).toBe(503);
    expect(alone.json.error.message).toMatch(
      /no healthy worker takes whole requests: prefill and decode workers \(SGLang’s\) serve one leg/,
    );
    expect(f.received(2).every((d) => d.body.bootstrap_room !== undefined)).toBe(true);
  });

  test('when no decode worker answers, the prefill leg is cut at once rather than left waiting for its room', async () => {
    const f = await sglangFleet(backend, ['prefill', 'decode']);
    await f.wires[1].cut();
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: 'hello there', max_tokens: 2 });
    expect(r.status).toBe(502);
    // Its booking is gone as the refusal comes (left waiting, it would be held until the prefill worker gave up).
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_router_in_flight_requests', { worker: '1' })).toBe(0);
    expect(r.json.error.message).toMatch(/no worker could serve the request \(worker 2: /);
    expect(f.received(1).length).toBeLessThanOrEqual(1);
    expect(f.workers[0].stats().kvTransfers.offered).toBe(0);
  });

  test('a client leaving a stream its decode worker has gone silent on ends the decode leg at once: no request or booking is left behind', async () => {
    const f = await sglangFleet(backend, ['prefill', 'decode']);
    const client = new AbortController();
    const res = await fetch(`${f.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'mock-model', prompt: text(40, 'leaving'), max_tokens: 2000, stream: true }),
      signal: client.signal,
    });
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    await reader.read();
    // The decode worker stops mid-stream: only the client's leaving can end the leg before the minute's body timeout.
    f.workers[1].fault({ kind: 'hang' });
    client.abort();
    await nothingInFlight(f.url);
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_requests_total', { status: 'client_closed' })).toBe(1);
    f.workers[1].fault({ kind: 'recover' });
  });

  test('a prefill worker’s 400 is the client’s answer; a client’s own bootstrap fields are refused', async () => {
    const f = await sglangFleet(backend, ['prefill', 'decode']);
    const r = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: 'hello there', max_tokens: 3, top_p: 7 });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/top_p/);
    expect(r.headers.get('x-kvroute-worker')).toBe('1');
    const m = await scrape(`${f.url}/metrics`);
    expect(m.sum('kvroute_gateway_prefill_legs_total', { result: 'refused' })).toBe(1);
    const own = await postJson(`${f.url}/v1/completions`, { model: 'mock-model', prompt: 'hi', max_tokens: 1, bootstrap_room: 7 });
    expect(own.status).toBe(400);
    expect(own.json.error.message).toMatch(/bootstrap_room is set by the gateway/);
    expect(f.received(1)).toHaveLength(1);
  });

  test("a batch's prompts each meet in a room of their own; whole requests go to aggregated workers only", async () => {
    const f = await sglangFleet(backend, ['prefill', 'decode', 'aggregated']);
    const _batch = await twoPromptBatch(f.url);
    const prefills = f.received(1);
    const decodes = f.received(2);
    expect(prefills.map((p) => [p.head['x-request-id'], p.body.bootstrap_room]).sort()).toEqual(
      decodes.map((d) => [d.head['x-request-id'], d.body.bootstrap_room]).sort(),
    );
    expect(new Set(decodes.map((d) => d.body.bootstrap_room)).size).toBe(2);
    expect(f.received(3)).toEqual([]);
    // The Responses API is not split: it goes whole, to the aggregated worker (not to an SGLang decode worker).
    const responses = await postJson(`${f.url}/v1/responses`, { model: 'mock-model', input: 'hello', max_output_tokens: 2 });
    expect(responses.status).toBe(200);
    expect(responses.headers.get('x-kvroute-worker')).toBe('3');
    // Nor is a /generate batch (one room meets one prompt): whole, to the aggregated worker, its answer a list.
    const generated = await postJson(`${f.url}/generate`, { text: ['one', 'two'], sampling_params: { max_new_tokens: 2 } });
    expect([generated.status, generated.headers.get('x-kvroute-worker'), generated.json.length]).toEqual([200, '3', 2]);
    // A batch of one is a list too (its answer a list), so it goes whole as well.
    const single = await postJson(`${f.url}/generate`, { input_ids: [[1, 2, 3]], sampling_params: { max_new_tokens: 1 } });
    expect([single.status, single.headers.get('x-kvroute-worker'), single.json.length]).toEqual([200, '3', 1]);
    expect(f.received(3).map((r) => [r.path, r.body.bootstrap_room])).toEqual([
      ['/v1/responses', undefined],
      ['/generate', undefined],
      ['/generate', undefined],
    ]);

    const noWhole = await sglangFleet(backend, ['prefill', 'decode']);
    const refused = await postJson(`${noWhole.url}/v1/responses`, { model: 'mock-model', input: 'hello', max_output_tokens: 2 });
    expect(refused.status).toBe(503);
    expect(noWhole.received(2)).toEqual([]);
  });

  test('options: the protocol and bootstrap ports are checked by name; a changed port is applied in place', async () => {
    const worker = { id: 1, url: 'http://127.0.0.1:1' };
    const make = (o: Partial<GatewayOptions>) => () => createGateway({ blockSize: 16, backend, logLevel: false, workers: [worker], ...o });
    expect(make({ disaggregation: { protocol: 'nixl' as never } })).toThrow(
      /disaggregation\.protocol must be one of 'vllm', 'trtllm', 'sglang', got "nixl"/,
    );
    expect(make({ disaggregation: { protocol: 'sglang', bypassBelowTokens: 64 } })).toThrow(
      /bypassBelowTokens .*not with protocol 'sglang'/,
    );
    expect(make({ workers: [{ ...worker, role: 'decode', bootstrapPort: 8998 }] })).toThrow(
      /workers\[0\]\.bootstrapPort is a prefill worker's .*the role is 'decode'/,
    );
    expect(make({ workers: [{ ...worker, role: 'prefill', bootstrapPort: 70000 }] })).toThrow(
      /workers\[0\]\.bootstrapPort must be a TCP port/,
    );
    expect(make({ discovery: { srv: 'a.test', role: 'aggregated', bootstrapPort: 8998 } })).toThrow(
      /discovery\.bootstrapPort is a prefill/,
    );
    expect(parseWorkerFlag('id=1,url=http://p:8000,role=prefill,bootstrap-port=9000')).toMatchObject({ bootstrapPort: 9000 });

    const g = createGateway({
      blockSize: 16,
      backend,
      logLevel: false,
      health: { intervalMs: 0 },
      disaggregation: { protocol: 'sglang' },
      workers: [{ ...worker, role: 'prefill' }],
    });
    try {
      expect(g.workers()[0].bootstrapPort).toBeNull();
      const changes = g.setWorkers([{ ...worker, role: 'prefill', bootstrapPort: 9000 }]);
      expect(changes.updated).toEqual([1n]);
      expect(g.workers()[0].bootstrapPort).toBe(9000);
    } finally {
      await g.close({ now: true });
    }
  });
});

describe('the mock worker in SGLang’s disaggregation modes', () => {
  const ask = (w: MockWorker, body: Json) =>
    postJson(`${w.url}/v1/completions`, { model: 'mock-model', prompt: 'hi there', max_tokens: 2, ...body });

  test('a leg without its peer fails with 500 after bootstrapTimeoutMs; a leg without a room is refused', async () => {
    const p = await startWorker({ disaggregationMode: 'prefill', bootstrapPort: 0, bootstrapTimeoutMs: 300 });
    const d = await startWorker({ disaggregationMode: 'decode', bootstrapTimeoutMs: 300 });
    const alone = await ask(p, { bootstrap_host: '127.0.0.1', bootstrap_port: p.bootstrapPort, bootstrap_room: 1 });
    expect(alone.status).toBe(500);
    expect(alone.json.error.message).toMatch(/no decode worker joined bootstrap room 1 within 300 ms/);
    const lost = await ask(d, { bootstrap_host: '127.0.0.1', bootstrap_port: p.bootstrapPort, bootstrap_room: 2 });
    expect(lost.status).toBe(500);
    expect(lost.json.error.message).toMatch(/bootstrap room 2 at 127\.0\.0\.1:\d+ gave no KV: answered 504/);
    for (const w of [p, d]) {
      const none = await ask(w, {});
      expect(none.status).toBe(400);
      expect(none.json.error.param).toBe('bootstrap_room');
    }
    const partial = await ask(d, { bootstrap_host: '127.0.0.1', bootstrap_room: 3 });
    expect([partial.status, partial.json.error.param]).toEqual([400, 'bootstrap_port']);
    expect([p.stats().kvTransfers, d.stats().kvTransfers]).toEqual([
      { offered: 0, pulled: 0 },
      { offered: 0, pulled: 0 },
    ]);
  });

  test('a prefill leg whose decode worker left the room before the KV was handed over fails with 500; another decode worker joining in time takes the KV', async () => {
    // At its modelled speed, the prefill worker computes a long prompt for about half a second after the decode worker joins.
    const p = await startWorker({ disaggregationMode: 'prefill', bootstrapPort: 0, bootstrapTimeoutMs: 3000, speedup: 1 });
    const room = (n: number) => ({
      bootstrap_host: '127.0.0.1',
      bootstrap_port: p.bootstrapPort,
      bootstrap_room: n,
      prompt: text(3000, 'left'),
    });
    const dead = await startWorker({ disaggregationMode: 'decode', bootstrapTimeoutMs: 3000 });
    const prefill = ask(p, room(7));
    // Its own answer is lost with it.
    void ask(dead, room(7)).catch(() => undefined);
    await sleep(100);
    // The decode worker dies: its connection to the room closes.
    dead.fault({ kind: 'crash' });
    const failed = await prefill;
    expect(failed.status).toBe(500);
    expect(failed.json.error.message).toMatch(/the KV transfer failed: the decode worker left the bootstrap room/);
    // A decode worker that takes the leaver's place before the KV is ready receives it (the prefill
    // worker slowed down, so that the place is taken in time).
    p.fault({ kind: 'slow', factor: 20 });
    const first = await startWorker({ disaggregationMode: 'decode', bootstrapTimeoutMs: 3000 });
    const second = await startWorker({ disaggregationMode: 'decode', bootstrapTimeoutMs: 3000 });
    const served = ask(p, room(8));
    void ask(first, room(8)).catch(() => undefined);
    await sleep(100);
    first.fault({ kind: 'crash' });
    const replaced = await ask(second, room(8));
    expect([(await served).status, replaced.status]).toEqual([200, 200]);
    expect(second.stats().kvTransfers.pulled).toBe(1);
  });

  test('a pair meets: the prefill answers one token, the decode the whole output; a worker serving whole requests ignores the fields', async () => {
    const p = await startWorker({ disaggregationMode: 'prefill', bootstrapPort: 0, bootstrapTimeoutMs: 3000 });
    const d = await startWorker({ disaggregationMode: 'decode', bootstrapTimeoutMs: 3000 });
    const room = { bootstrap_host: '127.0.0.1', bootstrap_port: p.bootstrapPort, bootstrap_room: 42 };
    const [prefill, decode] = await Promise.all([ask(p, { ...room, max_tokens: 6 }), ask(d, { ...room, max_tokens: 6 })]);
    expect([prefill.status, decode.status]).toEqual([200, 200]);
    expect([prefill.json.usage.completion_tokens, decode.json.usage.completion_tokens]).toEqual([1, 6]);
    expect(p.stats().kvTransfers.offered).toBe(1);
    expect(d.stats().kvTransfers.pulled).toBe(1);
    const whole = await startWorker();
    expect(whole.bootstrapPort).toBeUndefined();
    const plain = await ask(whole, room);
    expect([plain.status, plain.json.usage.completion_tokens]).toEqual([200, 2]);
    await expect(startWorker({ disaggregationMode: 'both' as never })).rejects.toThrow(
      /opts\.disaggregationMode must be 'prefill', 'decode' or null/,
    );
  });
});
