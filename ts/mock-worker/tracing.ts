/**
 * The mock worker's request spans, as vLLM makes them with `--otlp-traces-endpoint`: one
 * `llm_request` span (kind `SERVER`) per completion, chat, Responses or Messages API request, a child of the request's
 * `traceparent` (a router's try, or the client), from arrival to the last token, with vLLM's
 * attribute names (`gen_ai.request.*`, `gen_ai.usage.*`, and `gen_ai.latency.*` in seconds).
 * Exported by the same OpenTelemetry SDK setup as the gateway's (OTLP over HTTP or gRPC). So a fleet of
 * mock workers behind `kvroute serve` shows whole traces: client, gateway, engine.
 * @internal
 * @module
 */

import type { IncomingHttpHeaders } from 'node:http';
import { type Attributes, type Span, SpanKind, SpanStatusCode } from '@opentelemetry/api';
import { parentContext, readTraceContext } from '../server/tracing/context.js';
import type { OtlpProtocol } from '../server/tracing/options.js';
import { type GatewayTracer, otlpTracer } from '../server/tracing/provider.js';

/** One request's span; nothing when the worker does not trace. */
export interface EngineRequestSpan {
  /** The first output token came out. */
  firstToken(): void;
  /** The request ended: its token counts, or why it stopped. */
  end(usage: { promptTokens: number; completionTokens: number }, error?: string): void;
}

const UNTRACED: EngineRequestSpan = { firstToken: () => {}, end: () => {} };

/** What vLLM's span says of a request before it runs. */
export interface EngineRequestFacts {
  id: string;
  model: string;
  maxTokens: number;
  n: number;
  temperature: number;
  topP: number;
}

export class EngineTracer {
  private constructor(private readonly sdk: GatewayTracer) {}

  /** A tracer exporting to `endpoint` over `protocol`, or `undefined` without one (the worker then makes no spans). */
  static to(endpoint: string | undefined, protocol: OtlpProtocol, serviceName: string): EngineTracer | undefined {
    if (endpoint === undefined) return undefined;
    return new EngineTracer(
      otlpTracer({ endpoint, protocol, headers: {}, tls: undefined, serviceName, sampleRatio: 1, exportDelayMs: 5000 }),
    );
  }

  /** Starts a request's span under its `traceparent` (vLLM extracts the W3C context the same way). */
  request(headers: IncomingHttpHeaders, facts: EngineRequestFacts): EngineRequestSpan {
    const parent = parentContext(readTraceContext(headers).context);
    const attributes: Attributes = {
      'gen_ai.request.id': facts.id,
      'gen_ai.response.model': facts.model,
      'gen_ai.request.max_tokens': facts.maxTokens,
      'gen_ai.request.n': facts.n,
      'gen_ai.request.temperature': facts.temperature,
      'gen_ai.request.top_p': facts.topP,
    };
    const span: Span = this.sdk.tracer.startSpan('llm_request', { kind: SpanKind.SERVER, attributes }, parent);
    const arrived = performance.now();
    let firstAt: number | undefined;
    let ended = false;
    return {
      firstToken: () => {
        firstAt ??= performance.now();
      },
      end: ({ promptTokens, completionTokens }, error) => {
        if (ended) return;
        ended = true;
        const now = performance.now();
        span.setAttributes({
          'gen_ai.usage.prompt_tokens': promptTokens,
          'gen_ai.usage.completion_tokens': completionTokens,
          'gen_ai.usage.num_sequences': facts.n,
          'gen_ai.latency.e2e': (now - arrived) / 1000,
          ...(firstAt === undefined ? {} : { 'gen_ai.latency.time_to_first_token': (firstAt - arrived) / 1000 }),
        });
        if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error });
        span.end();
      },
    };
  }

  /** Exports what is left and stops. */
  shutdown(): Promise<void> {
    return this.sdk.shutdown();
  }
}

/** A request's span from `tracer`, or one that records nothing. */
export function engineRequestSpan(
  tracer: EngineTracer | undefined,
  headers: IncomingHttpHeaders,
  facts: EngineRequestFacts,
): EngineRequestSpan {
  return tracer ? tracer.request(headers, facts) : UNTRACED;
}
