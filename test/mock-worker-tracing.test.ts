import { describe, expect, test } from 'vitest';
import { KvRouteError, startMockWorker } from '../ts/index.js';
import { killCommandsAfterEach, runCommand } from './helpers/cli-process.js';
import { requireDist } from './helpers/dist.js';
import { closeFleetsAfterEach, startWorker } from './helpers/gateway.js';
import { postJson, sse } from './helpers/http.js';
import { OtlpReceiver } from './helpers/otlp-receiver.js';

closeFleetsAfterEach();
killCommandsAfterEach();

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';
const PARENT_SPAN = 'b7ad6b7169203331';

describe("the mock worker's request spans (vLLM's --otlp-traces-endpoint)", () => {
  test('each completion or chat request is an llm_request span under its traceparent, with vLLM attributes, exported by close() at the latest', async () => {
    const receiver = new OtlpReceiver();
    const endpoint = await receiver.start();
    const worker = await startWorker({ otlpTracesEndpoint: endpoint });
    const usage: { prompt_tokens: number; completion_tokens: number }[] = [];
    try {
      const whole = await postJson(
        `${worker.url}/v1/completions`,
        { prompt: 'hello there', max_tokens: 3, temperature: 0.5, n: 2 },
        { traceparent: `00-${TRACE_ID}-${PARENT_SPAN}-01`, 'x-request-id': 'r1' },
      );
      expect(whole.status).toBe(200);
      usage.push(whole.json.usage);
      const streamed = await sse(`${worker.url}/v1/chat/completions`, {
        messages: [{ role: 'user', content: 'hi' }],
        max_tokens: 4,
        stream: true,
        stream_options: { include_usage: true },
      });
      expect(streamed.status).toBe(200);
      usage.push(streamed.events.find((e) => e !== '[DONE]' && e.usage)?.usage);
    } finally {
      await worker.close();
    }
    const [first, second] = receiver.spans;
    expect(receiver.spans).toHaveLength(2);
    expect(first).toMatchObject({
      name: 'llm_request',
      kind: 2,
      traceId: TRACE_ID,
      parentSpanId: PARENT_SPAN,
      service: 'kvroute-mock-worker',
    });
    expect(first.attributes).toMatchObject({
      'gen_ai.request.id': 'cmpl-r1',
      'gen_ai.response.model': 'mock-model',
      'gen_ai.request.max_tokens': 3,
      'gen_ai.request.temperature': 0.5,
      'gen_ai.request.top_p': 1,
      'gen_ai.request.n': 2,
      'gen_ai.usage.completion_tokens': 6,
      'gen_ai.usage.num_sequences': 2,
    });
    const latency = first.attributes as Record<string, number>;
    expect(latency['gen_ai.latency.time_to_first_token']).toBeGreaterThan(0);
    expect(latency['gen_ai.latency.e2e']).toBeGreaterThanOrEqual(latency['gen_ai.latency.time_to_first_token']);
    // No traceparent: a trace of its own. The counts are the answers' usage.
    expect(second.parentSpanId).toBeUndefined();
    for (const [i, span] of [first, second].entries()) {
      expect(span.attributes['gen_ai.usage.prompt_tokens']).toBe(usage[i].prompt_tokens);
      expect(span.attributes['gen_ai.usage.completion_tokens']).toBe(usage[i].completion_tokens);
    }
    await receiver.close();
  });

  test('a Responses API request is one too, named by its response id', async () => {
    const receiver = new OtlpReceiver();
    const endpoint = await receiver.start();
    const worker = await startWorker({ otlpTracesEndpoint: endpoint });
    let response: { id: string; usage: { input_tokens: number; output_tokens: number } };
    try {
      const r = await postJson(
        `${worker.url}/v1/responses`,
        { input: 'hello there', max_output_tokens: 3, top_p: 0.5 },
        { traceparent: `00-${TRACE_ID}-${PARENT_SPAN}-01` },
      );
      expect(r.status).toBe(200);
      response = r.json;
    } finally {
      await worker.close();
    }
    expect(receiver.spans).toHaveLength(1);
    expect(receiver.spans[0]).toMatchObject({ name: 'llm_request', traceId: TRACE_ID, parentSpanId: PARENT_SPAN });
    expect(receiver.spans[0].attributes).toMatchObject({
      'gen_ai.request.id': response.id,
      'gen_ai.request.max_tokens': 3,
      'gen_ai.request.top_p': 0.5,
      'gen_ai.usage.prompt_tokens': response.usage.input_tokens,
      'gen_ai.usage.completion_tokens': response.usage.output_tokens,
    });
    await receiver.close();
  });

  test('kvroute mock-worker --otlp-traces-endpoint exports them; SIGTERM sends the last', async () => {
    requireDist();
    const receiver = new OtlpReceiver();
    const endpoint = await receiver.start();
    try {
      const worker = runCommand(['mock-worker', '--port', '0', '--otlp-traces-endpoint', endpoint], /(http:\/\/127\.0\.0\.1:\d+)/);
      const url = (await worker.match)[1];
      const r = await postJson(
        `${url}/v1/completions`,
        { prompt: 'hi', max_tokens: 1 },
        { traceparent: `00-${TRACE_ID}-${PARENT_SPAN}-01` },
      );
      expect(r.status).toBe(200);
      worker.child.kill('SIGTERM');
      expect(await worker.exited).toBe(0);
      expect(receiver.spans).toEqual([expect.objectContaining({ name: 'llm_request', traceId: TRACE_ID, parentSpanId: PARENT_SPAN })]);
      const bad = runCommand(['mock-worker', '--port', '0', '--otlp-traces-endpoint', 'localhost:4318'], /never/);
      await expect(bad.match).rejects.toThrow(/exited 2 .*--otlp-traces-endpoint must be an http\(s\) URL/);
    } finally {
      await receiver.close();
    }
  });

  test('over gRPC, as vLLM sends by default: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL=grpc (the CLI), otlpTracesProtocol (the API)', async () => {
    requireDist();
    const receiver = new OtlpReceiver();
    const endpoint = await receiver.startGrpc();
    try {
      const cli = runCommand(['mock-worker', '--port', '0', '--otlp-traces-endpoint', endpoint], /(http:\/\/127\.0\.0\.1:\d+)/, {
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc',
      });
      const url = (await cli.match)[1];
      const traceparent = `00-${TRACE_ID}-${PARENT_SPAN}-01`;
      expect((await postJson(`${url}/v1/completions`, { prompt: 'hi', max_tokens: 1 }, { traceparent })).status).toBe(200);
      cli.child.kill('SIGTERM');
      expect(await cli.exited).toBe(0);
      const api = await startWorker({ otlpTracesEndpoint: endpoint, otlpTracesProtocol: 'grpc' });
      expect((await postJson(`${api.url}/v1/completions`, { prompt: 'hi', max_tokens: 1 }, { traceparent })).status).toBe(200);
      await api.close();
      expect(receiver.spans).toEqual([
        expect.objectContaining({ name: 'llm_request', traceId: TRACE_ID, parentSpanId: PARENT_SPAN }),
        expect.objectContaining({ name: 'llm_request', traceId: TRACE_ID, parentSpanId: PARENT_SPAN }),
      ]);
      expect(receiver.encodings).toEqual(['grpc', 'grpc']);
      const bad = runCommand(['mock-worker', '--port', '0', '--otlp-traces-endpoint', endpoint], /never/, {
        OTEL_EXPORTER_OTLP_PROTOCOL: 'udp',
      });
      await expect(bad.match).rejects.toThrow(
        /exited 2 .*--otlp-traces-protocol must be one of http\/json, http\/protobuf, grpc, got "udp"/,
      );
    } finally {
      await receiver.close();
    }
  });

  test('a bad endpoint is refused', async () => {
    await expect(startMockWorker({ port: 0, otlpTracesEndpoint: 'tcp://127.0.0.1:4318' })).rejects.toThrow(
      expect.objectContaining({
        code: 'ERR_INVALID_ARG',
        message: expect.stringMatching(/opts.otlpTracesEndpoint must be an http\(s\) URL/),
      }),
    );
    await expect(startMockWorker({ port: 0, otlpTracesEndpoint: 5 as unknown as string })).rejects.toBeInstanceOf(KvRouteError);
  });
});
