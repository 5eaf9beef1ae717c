import { SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, test } from 'vitest';
import { createGateway, type GatewayOptions, KvRouteError } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { killCommandsAfterEach, runCommand } from './helpers/cli-process.js';
import { requireDist } from './helpers/dist.js';
import { closeFleetsAfterEach, gatewayBehindWire, startWorker, workerEntry } from './helpers/gateway.js';
import { postJson, sse } from './helpers/http.js';
import { OtlpReceiver } from './helpers/otlp-receiver.js';
import { scrape } from './helpers/prometheus.js';
import { headOf, headsOn } from './helpers/tcp-proxy.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';
const PARENT = `00-${TRACE_ID}-${CLIENT_SPAN}-01`;
const STATE = 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE';

/** An application's SDK that keeps every span it ends, in order. */
function memorySdk() {
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] });
  return { provider, spans: () => exporter.getFinishedSpans() };
}

/** The request's spans: its server span (by `kvroute.request_id` or route) and its children. */
function family(spans: ReadableSpan[], server: ReadableSpan) {
  const children = spans.filter((s) => s.parentSpanContext?.spanId === server.spanContext().spanId);
  return {
    server,
    children,
    step: (name: string) => children.find((s) => s.name === name),
    tries: children.filter((s) => s.kind === SpanKind.CLIENT),
  };
}

describe.each(BACKENDS)('gateway: its own spans (%s)', (backend) => {
  test("a routed request is a server span under the client's, with tokenize, route and the try the engine hangs under", async () => {
    const sdk = memorySdk();
    const g = await gatewayBehindWire(backend, { tracing: { tracerProvider: sdk.provider } });
    try {
      const r = await postJson(
        `${g.url}/v1/completions`,
        { model: 'mock-model', prompt: 'hello there, how are you', max_tokens: 2 },
        { traceparent: PARENT, tracestate: STATE, 'x-request-id': 'one' },
      );
      expect(r.status).toBe(200);
      const server = sdk.spans().find((s) => s.kind === SpanKind.SERVER);
      if (!server) throw new Error('no server span');
      expect(server.name).toBe('POST /v1/completions');
      expect(server.spanContext().traceId).toBe(TRACE_ID);
      expect(server.parentSpanContext?.spanId).toBe(CLIENT_SPAN);
      expect(server.attributes).toMatchObject({
        'http.request.method': 'POST',
        'http.route': '/v1/completions',
        'http.response.status_code': 200,
        'kvroute.worker': '1',
        'kvroute.dp_rank': 0,
        'kvroute.attempts': 1,
        'kvroute.request_id': r.headers.get('x-kvroute-request-id'),
        'gen_ai.request.model': 'mock-model',
        'kvroute.stream': false,
      });
      expect(server.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
      expect(server.events.map((e) => e.name)).toEqual(['first_token']);
      const f = family(sdk.spans(), server);
      expect(f.step('tokenize')?.attributes['kvroute.prompt_tokens']).toBe(server.attributes['gen_ai.usage.input_tokens']);
      expect(f.step('route')?.attributes).toMatchObject({ 'kvroute.worker': '1', 'kvroute.candidate_workers': 1 });
      expect(f.tries).toHaveLength(1);
      const [attempt] = f.tries;
      expect(attempt.name).toBe('POST /v1/completions');
      expect(attempt.attributes).toMatchObject({
        'http.request.method': 'POST',
        'server.address': '127.0.0.1',
        'server.port': g.wire.port,
        'url.full': `http://127.0.0.1:${g.wire.port}/v1/completions`,
        'http.response.status_code': 200,
        'kvroute.worker': '1',
      });
      // The engine's parent is the try, in the client's trace, with the client's tracestate.
      expect(headOf(g.wire.sent, 'one')).toMatchObject({
        traceparent: `00-${TRACE_ID}-${attempt.spanContext().spanId}-01`,
        tracestate: STATE,
      });
      // The engine asked to tokenize the prompt gets the tokenize step as its parent.
      const tokenizeCalls = headsOn(g.wire.sent).filter((r) => r.line === 'POST /tokenize');
      expect(tokenizeCalls.map((r) => [r.head.traceparent, r.head.tracestate])).toEqual([
        [`00-${TRACE_ID}-${f.step('tokenize')?.spanContext().spanId}-01`, STATE],
      ]);
      // The try that served the request carries what routing predicted and the engine reported.
      expect(attempt.attributes['kvroute.predicted_cached_tokens']).toBe(server.attributes['kvroute.predicted_cached_tokens']);
      expect(attempt.attributes['kvroute.reported_cached_tokens']).toBe(server.attributes['kvroute.reported_cached_tokens']);
      expect(typeof server.attributes['kvroute.reported_cached_tokens']).toBe('number');
    } finally {
      await g.close();
    }
  });

  test('without a client context a trace starts at the gateway; a stream marks its first token; passed-on routes are traced', async () => {
    const sdk = memorySdk();
    const g = await gatewayBehindWire(backend, { tracing: { tracerProvider: sdk.provider } });
    try {
      const streamed = await sse(
        `${g.url}/v1/chat/completions`,
        { messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 3 },
        { 'x-request-id': 'two' },
      );
      expect(streamed.status).toBe(200);
      const server = sdk.spans().find((s) => s.kind === SpanKind.SERVER && s.name === 'POST /v1/chat/completions');
      if (!server) throw new Error('no server span');
      expect(server.parentSpanContext).toBeUndefined();
      expect(server.attributes['kvroute.stream']).toBe(true);
      expect(server.events.map((e) => e.name)).toEqual(['first_token']);
      expect(server.attributes['kvroute.ttft_ms']).toBeGreaterThan(0);
      const [attempt] = family(sdk.spans(), server).tries;
      expect(headOf(g.wire.sent, 'two').traceparent).toBe(`00-${server.spanContext().traceId}-${attempt.spanContext().spanId}-01`);
      expect(headOf(g.wire.sent, 'two').tracestate).toBeUndefined();

      const tokenized = await postJson(`${g.url}/tokenize`, { prompt: 'hi' }, { traceparent: PARENT, 'x-request-id': 'three' });
      expect(tokenized.status).toBe(200);
      const passed = sdk.spans().find((s) => s.kind === SpanKind.SERVER && s.name === 'POST /tokenize');
      if (!passed) throw new Error('no server span for /tokenize');
      expect(passed.parentSpanContext?.spanId).toBe(CLIENT_SPAN);
      expect(passed.attributes).toMatchObject({ 'http.response.status_code': 200, 'kvroute.worker': '1' });
      const [passedTry] = family(sdk.spans(), passed).tries;
      expect(headOf(g.wire.sent, 'three').traceparent).toBe(`00-${TRACE_ID}-${passedTry.spanContext().spanId}-01`);

      // A bad request is still a span, the client's fault (no error status).
      const bad = await postJson(`${g.url}/v1/completions`, { prompt: 'hi', max_tokens: -1 });
      expect(bad.status).toBe(400);
      const refused = sdk.spans().find((s) => s.kind === SpanKind.SERVER && s.attributes['http.response.status_code'] === 400);
      expect(refused?.status.code).toBe(SpanStatusCode.UNSET);
    } finally {
      await g.close();
    }
  });

  test("a client's unsampled trace records nothing, and the engine gets the trace with the gateway's id, unsampled", async () => {
    const sdk = memorySdk();
    const g = await gatewayBehindWire(backend, { tracing: { tracerProvider: sdk.provider } });
    try {
      const unsampled = `00-${TRACE_ID}-${CLIENT_SPAN}-00`;
      const r = await postJson(
        `${g.url}/v1/completions`,
        { prompt: 'hi', max_tokens: 1 },
        { traceparent: unsampled, 'x-request-id': 'four' },
      );
      expect(r.status).toBe(200);
      expect(sdk.spans()).toEqual([]);
      const sent = headOf(g.wire.sent, 'four').traceparent;
      expect(sent).toMatch(new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-00$`));
      expect(sent).not.toBe(unsampled);
    } finally {
      await g.close();
    }
  });

  test("a batch's span: its prompts' tries under it, and a worker lost after the 200 makes it an error", async () => {
    const sdk = memorySdk();
    const g = await gatewayBehindWire(backend, { tracing: { tracerProvider: sdk.provider } });
    try {
      const r = await fetch(`${g.url}/v1/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', traceparent: PARENT },
        body: JSON.stringify({ prompt: ['first prompt of the batch', 'second prompt of the batch'], stream: true, max_tokens: 4000 }),
      });
      expect(r.status).toBe(200);
      const reader = (r.body as ReadableStream<Uint8Array>).getReader();
      let text = '';
      while (!text.includes('data: ')) text += new TextDecoder().decode((await reader.read()).value);
      // The worker's connections cut while the prompts stream: the client gets an error event.
      await g.wire.cut();
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += new TextDecoder().decode(chunk.value);
      expect(text).toContain('failed mid-stream');
      const server = sdk.spans().find((s) => s.kind === SpanKind.SERVER);
      if (!server) throw new Error('no server span');
      expect(server.attributes).toMatchObject({ 'kvroute.prompts': 2, 'error.type': 'upstream_error' });
      expect(server.attributes['kvroute.request_id']).toBe(r.headers.get('x-kvroute-request-id'));
      expect(server.attributes['gen_ai.usage.input_tokens']).toBeGreaterThan(0);
      expect(server.status.code).toBe(SpanStatusCode.ERROR);
      const f = family(sdk.spans(), server);
      expect(f.children.filter((s) => s.name === 'tokenize')).toHaveLength(2);
      expect(f.tries).toHaveLength(2);
      expect(f.tries.some((t) => t.status.code === SpanStatusCode.ERROR)).toBe(true);
    } finally {
      await g.close();
    }
  });

  test('a worker that fails before it answers is a failed try beside the one that served the request', async () => {
    const sdk = memorySdk();
    const dead = await startWorker();
    const deadUrl = dead.url;
    await dead.close();
    const live = await startWorker();
    const gateway = createGateway({
      blockSize: 16,
      backend,
      logLevel: false,
      health: { intervalMs: 0 },
      router: { overlapScoreWeight: 0, routerTemperature: 0 },
      tracing: { tracerProvider: sdk.provider },
      workers: [{ id: 1, url: deadUrl }, workerEntry(live, 2)],
    });
    try {
      const { url } = await gateway.listen();
      // Token-id prompts (no tokenizer call reaches the dead worker), sent at once: the cost
      // spreads them, so some go to the dead worker first.
      const answers = await Promise.all(
        Array.from({ length: 4 }, (_, i) =>
          postJson(`${url}/v1/completions`, { prompt: [i + 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17], max_tokens: 2 }),
        ),
      );
      for (const a of answers) expect(a.status).toBe(200);
      const retried = answers.find((a) => a.headers.get('x-kvroute-attempts') === '2')?.headers.get('x-kvroute-request-id');
      if (!retried) throw new Error('no request tried the dead worker first');
      const server = sdk.spans().find((s) => s.kind === SpanKind.SERVER && s.attributes['kvroute.request_id'] === retried);
      if (!server) throw new Error('no server span');
      expect(server.attributes).toMatchObject({ 'kvroute.attempts': 2, 'kvroute.worker': '2', 'http.response.status_code': 200 });
      expect(server.status.code).toBe(SpanStatusCode.UNSET);
      const f = family(sdk.spans(), server);
      expect(f.children.filter((s) => s.name === 'route')).toHaveLength(2);
      const [first, second] = [...f.tries].sort((a, b) => Number(a.startTime[0] - b.startTime[0]) || a.startTime[1] - b.startTime[1]);
      expect(first.attributes).toMatchObject({
        'kvroute.worker': '1',
        'server.port': Number(new URL(deadUrl).port),
        'error.type': 'connect',
      });
      expect(first.status.code).toBe(SpanStatusCode.ERROR);
      expect(second.attributes).toMatchObject({ 'kvroute.worker': '2', 'http.request.resend_count': 1, 'http.response.status_code': 200 });
      expect(second.status.code).toBe(SpanStatusCode.UNSET);
    } finally {
      await gateway.close();
    }
  });
});

describe.each(BACKENDS)('gateway: spans through the global OpenTelemetry API (%s)', (backend) => {
  afterEach(() => trace.disable());

  test('with no tracing option the gateway uses the provider an application registered', async () => {
    const sdk = memorySdk();
    trace.setGlobalTracerProvider(sdk.provider);
    const g = await gatewayBehindWire(backend);
    try {
      const r = await postJson(`${g.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 }, { traceparent: PARENT, 'x-request-id': 'five' });
      expect(r.status).toBe(200);
      const server = sdk.spans().find((s) => s.kind === SpanKind.SERVER);
      expect(server?.instrumentationScope.name).toBe('kvroute');
      expect(server?.parentSpanContext?.spanId).toBe(CLIENT_SPAN);
      expect(headOf(g.wire.sent, 'five').traceparent).not.toBe(PARENT);
    } finally {
      await g.close();
    }
  });
});

describe.each(BACKENDS)('gateway: OTLP export (%s)', (backend) => {
  test('spans go to the OTLP/HTTP endpoint as JSON under the service name, and are counted', async () => {
    const receiver = new OtlpReceiver();
    const endpoint = await receiver.start();
    const g = await gatewayBehindWire(backend, {
      tracing: { otlpEndpoint: endpoint, serviceName: 'gateway-under-test', exportDelayMs: 50 },
    });
    try {
      const r = await postJson(`${g.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 }, { traceparent: PARENT, 'x-request-id': 'six' });
      expect(r.status).toBe(200);
      await waitFor(() => receiver.spans.some((s) => s.kind === 2), 'the server span at the receiver');
      const server = receiver.spans.find((s) => s.kind === 2);
      expect(server).toMatchObject({
        traceId: TRACE_ID,
        parentSpanId: CLIENT_SPAN,
        name: 'POST /v1/completions',
        service: 'gateway-under-test',
      });
      expect(server?.attributes['kvroute.worker']).toBe('1');
      expect(receiver.spans.map((s) => s.name).sort()).toEqual(['POST /v1/completions', 'POST /v1/completions', 'route', 'tokenize']);
      // Counted once the collector's answer is read, just after it took the spans.
      await waitFor(
        async () => (await scrape(`${g.url}/metrics`)).sum('kvroute_gateway_spans_total', { result: 'exported' }) === receiver.spans.length,
        'the exported spans counted',
      );

      // A collector that refuses the export: counted as failed, and the gateway serves on.
      receiver.answer = 400;
      const before = receiver.requests;
      expect((await postJson(`${g.url}/v1/completions`, { prompt: 'hi again', max_tokens: 1 })).status).toBe(200);
      await waitFor(() => receiver.requests > before, 'a refused export');
      await waitFor(
        async () => (await scrape(`${g.url}/metrics`)).sum('kvroute_gateway_spans_total', { result: 'failed' }) === 4,
        'the refused spans counted',
      );
    } finally {
      await g.close();
      await receiver.close();
    }
  });

  test("one trace from the client through the gateway to the engine: the engine's span hangs under the gateway's try", async () => {
    const receiver = new OtlpReceiver();
    const endpoint = await receiver.start();
    const worker = await startWorker({ otlpTracesEndpoint: endpoint });
    const gateway = createGateway({
      blockSize: 16,
      backend,
      logLevel: false,
      health: { intervalMs: 0 },
      tracing: { otlpEndpoint: endpoint },
      workers: [workerEntry(worker, 1)],
    });
    try {
      const { url } = await gateway.listen();
      const r = await postJson(`${url}/v1/completions`, { prompt: [1, 2, 3, 4], max_tokens: 2 }, { traceparent: PARENT });
      expect(r.status).toBe(200);
    } finally {
      await gateway.close();
      await worker.close();
      await receiver.close();
    }
    const server = receiver.spans.find((s) => s.kind === 2 && s.name === 'POST /v1/completions');
    const attempt = receiver.spans.find((s) => s.kind === 3);
    const engine = receiver.spans.find((s) => s.name === 'llm_request');
    expect(server).toMatchObject({ traceId: TRACE_ID, parentSpanId: CLIENT_SPAN, service: 'kvroute' });
    expect(attempt).toMatchObject({ traceId: TRACE_ID, parentSpanId: server?.spanId });
    expect(engine).toMatchObject({ traceId: TRACE_ID, parentSpanId: attempt?.spanId, service: 'kvroute-mock-worker' });
    expect(engine?.attributes['gen_ai.usage.prompt_tokens']).toBe(4);
  });

  test.each([
    ['http/protobuf', 'application/x-protobuf'],
    ['grpc', 'grpc'],
    ['http/json', 'application/json'],
  ] as const)('otlpProtocol %s: the spans and the headers reach the receiver in that encoding', async (protocol, encoding) => {
    const receiver = new OtlpReceiver();
    const endpoint = protocol === 'grpc' ? await receiver.startGrpc() : await receiver.start();
    const g = await gatewayBehindWire(backend, {
      tracing: { otlpEndpoint: endpoint, otlpProtocol: protocol, otlpHeaders: { 'x-tenant': 'blue' }, exportDelayMs: 50 },
    });
    try {
      const r = await postJson(`${g.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 }, { traceparent: PARENT });
      expect(r.status).toBe(200);
      await waitFor(() => receiver.spans.length === 4, 'the four spans at the receiver');
      expect(new Set(receiver.encodings)).toEqual(new Set([encoding]));
      expect(receiver.lastHeaders['x-tenant']).toBe('blue');
      const server = receiver.spans.find((s) => s.kind === 2);
      expect(server).toMatchObject({ traceId: TRACE_ID, parentSpanId: CLIENT_SPAN, name: 'POST /v1/completions', service: 'kvroute' });
      expect(server?.attributes).toMatchObject({ 'kvroute.worker': '1', 'kvroute.attempts': 1 });
      const attempt = receiver.spans.find((s) => s.kind === 3);
      expect(attempt).toMatchObject({ traceId: TRACE_ID, parentSpanId: server?.spanId });
      await waitFor(
        async () => (await scrape(`${g.url}/metrics`)).sum('kvroute_gateway_spans_total', { result: 'exported' }) === 4,
        'the exported spans counted',
      );
    } finally {
      await g.close();
      await receiver.close();
    }
  });

  test('close() exports the spans still waiting', async () => {
    const receiver = new OtlpReceiver();
    const endpoint = await receiver.start();
    const g = await gatewayBehindWire(backend, { tracing: { otlpEndpoint: endpoint, exportDelayMs: 3_600_000 } });
    try {
      expect((await postJson(`${g.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 })).status).toBe(200);
      expect(receiver.spans).toEqual([]);
    } finally {
      await g.close();
    }
    expect(receiver.spans.find((s) => s.kind === 2)?.service).toBe('kvroute');
    await receiver.close();
  });
});

describe.each(BACKENDS)('gateway: bad tracing options (%s)', (backend) => {
  const bad: [unknown, RegExp][] = [
    [{ tracerProvider: {} }, /tracing.tracerProvider must be an OpenTelemetry TracerProvider/],
    [{ tracerProvider: { getTracer: () => undefined }, otlpEndpoint: 'http://127.0.0.1:4318/v1/traces' }, /leave out tracing.otlpEndpoint/],
    [{}, /tracing needs otlpEndpoint/],
    [{ otlpEndpoint: 'ftp://127.0.0.1/v1/traces' }, /tracing.otlpEndpoint must be an http\(s\) URL/],
    [{ otlpEndpoint: 'not a url' }, /tracing.otlpEndpoint must be an http\(s\) URL/],
    [{ otlpEndpoint: 'http://127.0.0.1:4318/v1/traces', sampleRatio: 1.5 }, /tracing.sampleRatio must be in \[0, 1\]/],
    [{ otlpEndpoint: 'http://127.0.0.1:4318/v1/traces', otlpHeaders: { a: 1 } }, /tracing.otlpHeaders.a must be a string/],
    [{ otlpEndpoint: 'http://127.0.0.1:4318/v1/traces', exportDelayMs: 0 }, /tracing.exportDelayMs must be an integer/],
    [{ otlpEndpoint: 'http://127.0.0.1:4318/v1/traces', sampleRatoi: 0.5 }, /unknown key "sampleRatoi".*sampleRatio/],
    [
      { otlpEndpoint: 'http://127.0.0.1:4317', otlpProtocol: 'grpc/json' },
      /tracing.otlpProtocol must be one of http\/json, http\/protobuf, grpc/,
    ],
    [{ otlpEndpoint: 'http://127.0.0.1:4318/v1/traces', otlpHeaders: { 'bad name': 'x' } }, /"bad name" is not an HTTP header name/],
    [{ otlpEndpoint: 'http://127.0.0.1:4318/v1/traces', otlpHeaders: { a: 'x\r\ny: z' } }, /tracing.otlpHeaders.a must be printable text/],
    [
      { otlpEndpoint: 'http://127.0.0.1:4317', otlpProtocol: 'grpc', otlpHeaders: { 'key-bin': 'x' } },
      /"key-bin" is not a gRPC metadata key/,
    ],
    [
      { otlpEndpoint: 'http://127.0.0.1:4317', otlpProtocol: 'grpc', otlpHeaders: { a: 'é' } },
      /tracing.otlpHeaders.a must be printable ASCII/,
    ],
    ['yes', /tracing must be an object/],
  ];
  test.each(bad)('%j is refused', (tracing, message) => {
    let err: unknown;
    try {
      createGateway({ blockSize: 16, backend, logLevel: false, tracing: tracing as GatewayOptions['tracing'] });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(KvRouteError);
    expect((err as KvRouteError).code).toBe('ERR_INVALID_ARG');
    expect((err as Error).message).toMatch(message);
  });
});

describe.each(BACKENDS)('kvroute serve: spans to an OTLP endpoint (%s)', (backend) => {
  killCommandsAfterEach();

  test("--otlp-traces-endpoint, or OpenTelemetry's environment variables, export the spans; SIGTERM sends the last ones", async () => {
    requireDist();
    const worker = await startWorker();
    const receiver = new OtlpReceiver();
    const endpoint = await receiver.start();
    try {
      const runs: [string[], Record<string, string>, string][] = [
        [['--otlp-traces-endpoint', endpoint], {}, 'kvroute'],
        // The base URL an OpenTelemetry operator injects (the traces path is added to it), and a
        // sampler that records no trace the gateway starts, only those a client sampled.
        [
          [],
          {
            OTEL_EXPORTER_OTLP_ENDPOINT: endpoint.replace('/v1/traces', '/'),
            OTEL_SERVICE_NAME: 'gw-from-env',
            OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
            OTEL_TRACES_SAMPLER_ARG: '0',
          },
          'gw-from-env',
        ],
      ];
      for (const [i, [flags, env, service]] of runs.entries()) {
        const serve = runCommand(
          ['serve', '--port', '0', '--block-size', '16', '--backend', backend, '--worker', `id=1,url=${worker.url}`, ...flags],
          /proxy (http:\/\/127\.0\.0\.1:\d+)/,
          env,
        );
        const url = (await serve.match)[1];
        const traceId = `${i + 1}`.padStart(32, 'a');
        const r = await postJson(
          `${url}/v1/completions`,
          { prompt: [1, 2, 3], max_tokens: 1 },
          { traceparent: `00-${traceId}-${CLIENT_SPAN}-01` },
        );
        expect(r.status).toBe(200);
        const unsampled = await postJson(`${url}/v1/completions`, { prompt: [4, 5, 6], max_tokens: 1 });
        expect(unsampled.status).toBe(200);
        serve.child.kill('SIGTERM');
        expect(await serve.exited).toBe(0);
        const server = receiver.spans.find((s) => s.kind === 2 && s.traceId === traceId);
        expect(server).toMatchObject({ name: 'POST /v1/completions', parentSpanId: CLIENT_SPAN, service });
        // The request's log line names its trace and its span.
        const line = serve
          .output()
          .split('\n')
          .filter((l) => l.includes('"msg":"request"'))
          .map((l) => JSON.parse(l))[0];
        expect(line).toMatchObject({ traceId, spanId: server?.spanId });
        // Without a client's trace: recorded at ratio 1 (the flag's run), not at 0 (the sampler's).
        const own = receiver.spans.filter((s) => s.kind === 2 && s.service === service && s.parentSpanId === undefined);
        expect(own).toHaveLength(i === 0 ? 1 : 0);
      }
      const noEndpoint = runCommand(['serve', '--port', '0', '--block-size', '16', '--otlp-traces-protocol', 'grpc'], /never/);
      await expect(noEndpoint.match).rejects.toThrow(/exited 2 .*--otlp-traces-protocol needs an OTLP endpoint/);
      const bad = runCommand(['serve', '--port', '0', '--block-size', '16', '--otlp-traces-endpoint', endpoint], /never/, {
        OTEL_TRACES_SAMPLER: 'jaeger_remote',
      });
      await expect(bad.match).rejects.toThrow(/exited 2 .*OTEL_TRACES_SAMPLER "jaeger_remote" is not one kvroute serve takes/);
    } finally {
      await receiver.close();
    }
  });
});

describe.each(BACKENDS)('kvroute serve: OTLP over gRPC from the environment (%s)', (backend) => {
  killCommandsAfterEach();

  test('OTEL_EXPORTER_OTLP_PROTOCOL=grpc sends to OTEL_EXPORTER_OTLP_ENDPOINT as it is (no traces path); the flag overrides it', async () => {
    requireDist();
    const worker = await startWorker();
    const grpc = new OtlpReceiver();
    const http = new OtlpReceiver();
    const [grpcEndpoint, httpEndpoint] = [await grpc.startGrpc(), await http.start()];
    try {
      const runs: [string[], Record<string, string>, OtlpReceiver, string][] = [
        [[], { OTEL_EXPORTER_OTLP_ENDPOINT: grpcEndpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, grpc, 'grpc'],
        [
          ['--otlp-traces-endpoint', httpEndpoint, '--otlp-traces-protocol', 'http/protobuf'],
          { OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' },
          http,
          'application/x-protobuf',
        ],
      ];
      for (const [flags, env, receiver, encoding] of runs) {
        const serve = runCommand(
          ['serve', '--port', '0', '--block-size', '16', '--backend', backend, '--worker', `id=1,url=${worker.url}`, ...flags],
          /proxy (http:\/\/127\.0\.0\.1:\d+)/,
          env,
        );
        const url = (await serve.match)[1];
        expect((await postJson(`${url}/v1/completions`, { prompt: [1, 2, 3], max_tokens: 1 }, { traceparent: PARENT })).status).toBe(200);
        serve.child.kill('SIGTERM');
        expect(await serve.exited).toBe(0);
        expect(receiver.spans.find((s) => s.kind === 2)).toMatchObject({ traceId: TRACE_ID, parentSpanId: CLIENT_SPAN });
        expect(new Set(receiver.encodings)).toEqual(new Set([encoding]));
      }
      const bad = runCommand(['serve', '--port', '0', '--block-size', '16', '--otlp-traces-endpoint', httpEndpoint], /never/, {
        OTEL_EXPORTER_OTLP_PROTOCOL: 'thrift',
      });
      await expect(bad.match).rejects.toThrow(
        /exited 2 .*tracing\.otlpProtocol must be one of http\/json, http\/protobuf, grpc, got "thrift"/,
      );
    } finally {
      await grpc.close();
      await http.close();
    }
  });
});
