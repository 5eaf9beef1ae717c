import { describe, expect, test } from 'vitest';
import { createGateway } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, startFleet, workerEntry } from './helpers/gateway.js';
import { namedEvents, postJson } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

const INSTRUCTIONS = 'You are the oracle of the river. Answer every question with a riddle about stones and water.';

/** A metric's value in a Prometheus text page (0 when the series is absent). */
function metric(page: string, series: string): number {
  const line = page.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? 0 : Number(line.slice(series.length + 1));
}

describe.each(BACKENDS)('gateway: the Responses API (%s)', (backend) => {
  test('a follow-up by previous_response_id, its retrieval and its cancel go to the worker holding the response', async () => {
    const f = await startFleet(backend, 3, {}, { responsesStore: true });
    const first = await postJson(`${f.url}/v1/responses`, {
      input: 'Where do the stones sleep?',
      instructions: INSTRUCTIONS,
      max_output_tokens: 8,
    });
    expect(first.status).toBe(200);
    // The gateway names the response (vLLM's request_id), so it knows its worker before the answer.
    expect(first.json.id).toMatch(/^resp_[0-9a-f]{32}$/);
    const holder = first.headers.get('x-kvroute-worker');
    let previous = first.json.id;
    for (let turn = 0; turn < 4; turn++) {
      const body = { input: `Turn ${turn}: and then?`, previous_response_id: previous, max_output_tokens: 4 };
      let next: { status: number; worker: string | null; id: string; cached: number };
      if (turn % 2 === 0) {
        const r = await postJson(`${f.url}/v1/responses`, body);
        next = {
          status: r.status,
          worker: r.headers.get('x-kvroute-worker'),
          id: r.json.id,
          cached: r.json.usage.input_tokens_details.cached_tokens,
        };
      } else {
        const r = await namedEvents(`${f.url}/v1/responses`, { ...body, stream: true });
        const done = r.events.at(-1)?.data.response;
        next = {
          status: r.status,
          worker: r.headers.get('x-kvroute-worker'),
          id: done.id,
          cached: done.usage.input_tokens_details.cached_tokens,
        };
      }
      expect([next.status, next.worker]).toEqual([200, holder]);
      // The engine found the earlier turns cached: it holds the conversation.
      expect(next.cached).toBeGreaterThan(0);
      previous = next.id;
    }
    const got = await fetch(`${f.url}/v1/responses/${previous}`);
    expect([got.status, got.headers.get('x-kvroute-worker'), ((await got.json()) as { id: string }).id]).toEqual([200, holder, previous]);
    const cancel = await postJson(`${f.url}/v1/responses/${first.json.id}/cancel`, {});
    expect([cancel.status, cancel.headers.get('x-kvroute-worker'), cancel.json.error.message]).toEqual([
      400,
      holder,
      'Cannot cancel a synchronous response.',
    ]);
    // An id no worker holds: every worker was asked, and the answer is vLLM's 404.
    const unknown = await postJson(`${f.url}/v1/responses`, { input: 'x', previous_response_id: 'resp_nope' });
    expect([unknown.status, unknown.json.error.type, unknown.json.error.message]).toEqual([
      404,
      'NotFoundError',
      "Response with id 'resp_nope' not found.",
    ]);
    expect((await fetch(`${f.url}/v1/responses/resp_nope`)).status).toBe(404);
    const page = await (await fetch(`${f.url}/metrics`)).text();
    expect(metric(page, 'kvroute_gateway_response_lookups_total{result="remembered"}')).toBe(6);
    expect(metric(page, 'kvroute_gateway_response_lookups_total{result="not_found"}')).toBe(2);
    expect(metric(page, `kvroute_gateway_passed_on_requests_total{path="/v1/responses/{id}",worker="${holder}",status="200"}`)).toBe(1);
    // Only the first request's prediction is compared with the engine's count: a follow-up's covers its own turn alone.
    expect((await scrape(`${f.url}/metrics`)).sum('kvroute_gateway_cache_predictions_total')).toBe(1);
    // Every routed request was freed.
    expect(f.gateway.router.stats().inFlight).toBe(0);
    const workers = f.workers.map((w) => w.stats().finished[0]);
    expect(workers[Number(holder) - 1]).toBe(5);
    expect(workers.reduce((a, b) => a + b, 0)).toBe(5);
  });

  test('a gateway that does not remember a response (another replica answered it) finds its worker by asking them', async () => {
    const f = await startFleet(backend, 3, {}, { responsesStore: true });
    const other = createGateway({
      blockSize: 16,
      backend,
      logLevel: false,
      health: { intervalMs: 200, timeoutMs: 200 },
      responses: { maxRemembered: 0 },
      workers: f.workers.map((w, i) => workerEntry(w, i + 1)),
    });
    try {
      const { url } = await other.listen();
      // A client's own request_id names the response, long ones too.
      const mine = `resp_${'x'.repeat(300)}`;
      const first = await postJson(`${f.url}/v1/responses`, {
        input: 'Where do the stones sleep?',
        max_output_tokens: 4,
        request_id: mine,
      });
      expect([first.status, first.json.id]).toEqual([200, mine]);
      const holder = first.headers.get('x-kvroute-worker');
      for (let i = 0; i < 2; i++) {
        const r = await postJson(`${url}/v1/responses`, { input: `more ${i}`, previous_response_id: first.json.id, max_output_tokens: 4 });
        expect([r.status, r.headers.get('x-kvroute-worker')]).toEqual([200, holder]);
      }
      const page = await (await fetch(`${url}/metrics`)).text();
      const got = await fetch(`${url}/v1/responses/${mine}`);
      expect([got.status, got.headers.get('x-kvroute-worker')]).toEqual([200, holder]);
      // maxRemembered 0: every lookup asked the workers.
      expect(metric(page, 'kvroute_gateway_response_lookups_total{result="found"}')).toBe(2);
    } finally {
      await other.close();
    }
  });

  test('a response whose worker is down is 503 with Retry-After, not sent to a worker that would not know it', async () => {
    const f = await startFleet(backend, 2, {}, { responsesStore: true });
    const first = await postJson(`${f.url}/v1/responses`, { input: 'Where do the stones sleep?', max_output_tokens: 4 });
    const holder = Number(first.headers.get('x-kvroute-worker'));
    await f.workers[holder - 1].close();
    await waitFor(
      async () => ((await (await fetch(`${f.url}/ready`)).json()) as { routableWorkers: number }).routableWorkers === 1,
      'the closed worker to be down',
    );
    const r = await postJson(`${f.url}/v1/responses`, { input: 'more', previous_response_id: first.json.id });
    expect([r.status, r.headers.get('retry-after')]).toEqual([503, '1']);
    expect(r.json.error.message).toMatch(new RegExp(`held by worker ${holder}, which is not available`));
    expect(f.workers[2 - holder].stats().finished[0]).toBe(0);
    const page = await (await fetch(`${f.url}/metrics`)).text();
    expect(metric(page, 'kvroute_gateway_rejected_total{reason="owner_unavailable"}')).toBe(1);
    // Once its worker is removed from the fleet, the response is gone with it: the others say 404.
    await f.gateway.removeWorker(holder);
    const gone = await postJson(`${f.url}/v1/responses`, { input: 'more', previous_response_id: first.json.id });
    expect([gone.status, gone.json.error.message]).toEqual([404, `Response with id '${first.json.id}' not found.`]);
  });

  test('a stateless conversation (the whole history resent) goes to the worker caching its prefix, and the stream is passed on whole', async () => {
    const f = await startFleet(backend, 3);
    const history: Record<string, unknown>[] = [
      { role: 'user', content: 'Tell me the long tale of the river and the sleeping stones, please.' },
    ];
    const first = await postJson(`${f.url}/v1/responses`, {
      input: history,
      instructions: INSTRUCTIONS,
      store: false,
      max_output_tokens: 8,
    });
    expect(first.status).toBe(200);
    const holder = first.headers.get('x-kvroute-worker');
    history.push(first.json.output[0], { role: 'user', content: 'And what did the stones say?' });
    // Wait until the index knows the holder has the first prompt's blocks.
    await waitFor(async () => {
      const explain = await postJson(`${f.adminUrl}/admin/explain`, { input: history.slice(0, 1), instructions: INSTRUCTIONS });
      return (
        explain.status === 200 &&
        explain.json.candidates.some(
          (c: { workerId: number; overlapBlocks: number }) => String(c.workerId) === holder && c.overlapBlocks > 0,
        )
      );
    }, 'the first prompt to be indexed');
    const second = await namedEvents(`${f.url}/v1/responses`, {
      input: history,
      instructions: INSTRUCTIONS,
      store: false,
      max_output_tokens: 6,
      stream: true,
    });
    expect([second.status, second.headers.get('x-kvroute-worker')]).toEqual([200, holder]);
    expect(Number(second.headers.get('x-kvroute-cached-tokens'))).toBeGreaterThan(0);
    // Every event arrives, in order, with its name.
    const names = second.events.map((e) => e.event);
    expect(names[0]).toBe('response.created');
    expect(names.at(-1)).toBe('response.completed');
    expect(second.events.map((e) => e.data.sequence_number)).toEqual(names.map((_, i) => i));
    const text = second.events
      .filter((e) => e.event === 'response.output_text.delta')
      .map((e) => e.data.delta)
      .join('');
    expect(text).toBe(second.events.at(-1)?.data.response.output[0].content[0].text);
    // The first token was seen (TTFT), and the engine's cached tokens were read from response.completed.
    expect((await scrape(`${f.url}/metrics`)).sum('kvroute_gateway_time_to_first_token_seconds')).toBe(2);
    expect((await scrape(`${f.url}/metrics`)).sum('kvroute_gateway_reported_cached_tokens_total')).toBe(
      second.events.at(-1)?.data.response.usage.input_tokens_details.cached_tokens,
    );
    // store: false: the worker keeps nothing, so the gateway remembered nothing either.
    const got = await fetch(`${f.url}/v1/responses/${first.json.id}`);
    expect(got.status).toBe(404);
    const after = await (await fetch(`${f.url}/metrics`)).text();
    expect(metric(after, 'kvroute_gateway_response_lookups_total{result="remembered"}')).toBe(0);
    expect(metric(after, 'kvroute_gateway_response_lookups_total{result="not_found"}')).toBe(1);
  });

  test('bad requests are 400 before any worker is asked', async () => {
    const f = await startFleet(backend, 1, {}, { responsesStore: true });
    for (const [body, reason] of [
      [{}, 'input must be a non-empty string or a non-empty list of items'],
      [{ input: [{ type: 'web_search_call' }] }, 'input[0]: items of type "web_search_call" are not supported'],
      [{ input: 'x', previous_response_id: 5 }, 'previous_response_id must be a non-empty string'],
      [{ input: 'x', request_id: '' }, 'request_id must be a non-empty string'],
      [{ input: 'x', stream: 'yes' }, 'stream must be a boolean'],
      // The gateway remembers ids and puts them in URLs: a client cannot make them huge.
      [{ input: 'x', request_id: 'r'.repeat(513) }, 'request_id must be at most 512 characters, got 513'],
      [{ input: 'x', previous_response_id: 'r'.repeat(600) }, 'previous_response_id must be at most 512 characters, got 600'],
    ] as const) {
      const r = await postJson(`${f.url}/v1/responses`, body);
      expect([r.status, r.json.error.message]).toEqual([400, reason]);
    }
    const longGet = await fetch(`${f.url}/v1/responses/${'r'.repeat(513)}`);
    expect(longGet.status).toBe(400);
    expect(f.gateway.router.stats().routed).toBe(0);
    expect(f.workers[0].stats().finished).toEqual([0]);
  });
});
