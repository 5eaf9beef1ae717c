/**
 * A request's spans: one `SERVER` span from arrival to the last byte, its steps (`tokenize`,
 * `route`) and one `CLIENT` span per worker tried, whose context is what the worker receives as
 * its `traceparent`, so that the engine's spans hang under the try that reached it. A failed
 * try stays in the trace beside the one that succeeded.
 *
 * The spans come from the gateway's tracer (`tracing` option; by default the global
 * OpenTelemetry API's, which records nothing until an application registers an SDK). When the
 * tracer makes no span of its own, the client's `traceparent` and `tracestate` are passed on
 * unchanged, as before there was tracing: a gateway without a tracer is a proxy that does not
 * trace.
 * @internal
 * @module
 */

import {
  type Attributes,
  type Context,
  isSpanContextValid,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import { parentContext, type TraceContext, traceHeaders } from './context.js';

/** What ended a request or a try: an HTTP status, or why there was none. */
export type TraceStatus = number | 'client_closed' | 'upstream_error' | string | undefined;

/**
 * Sets a finished request's or try's outcome on its span: an HTTP status (5xx an error, 4xx the
 * client's business, as OpenTelemetry's HTTP conventions have it), or the name of what failed
 * (a client that left is not the gateway's error).
 */
function setStatus(span: Span, status: TraceStatus, error?: string): void {
  if (typeof status === 'number') {
    span.setAttribute('http.response.status_code', status);
    if (status < 500) return;
    span.setAttribute('error.type', String(status));
  } else if (status !== undefined) {
    span.setAttribute('error.type', status);
    if (status === 'client_closed') return;
  } else return;
  span.setStatus({ code: SpanStatusCode.ERROR, ...(error === undefined ? {} : { message: error }) });
}

/** One try of a worker: its span and the headers that carry it. */
export interface Attempt {
  /** `traceparent` (and the client's `tracestate`) for the worker. */
  readonly headers: Record<string, string>;
  /** Adds attributes to the try's span (`attributes` read only when recording). */
  set(attributes: () => Attributes): void;
  /** Ends the try's span with the worker's status, or what failed; again does nothing. */
  end(status: TraceStatus, error?: string): void;
}

const NOTHING = () => {};

/** A request's spans, or the client's context passed on when there are none. */
export class RequestTrace {
  private ended = false;

  private constructor(
    /** The client's trace context, as it came. */
    readonly client: TraceContext | undefined,
    private readonly tracer: Tracer,
    private readonly span: Span,
    private readonly within: Context,
  ) {}

  /** Starts the request's `SERVER` span, a child of the client's span when it sent one. */
  static start(tracer: Tracer, name: string, client: TraceContext | undefined, attributes: Attributes): RequestTrace {
    const parent = parentContext(client);
    const span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parent);
    // The steps' and tries' parent; a span not recorded has none (and a context is a map copy).
    return new RequestTrace(client, tracer, span, span.isRecording() ? trace.setSpan(parent, span) : parent);
  }

  /** Whether the spans are recorded (a tracer is set and sampled the request). */
  get recording(): boolean {
    return this.span.isRecording();
  }

  /** The trace id for the request's log line: the gateway's trace when it made one, else the client's. */
  get traceId(): string | undefined {
    const own = this.span.spanContext();
    return isSpanContextValid(own) ? own.traceId : this.client?.traceId;
  }

  /** The request's span id for its log line, when recorded (so the line finds its span). */
  get spanId(): string | undefined {
    return this.recording ? this.span.spanContext().spanId : undefined;
  }

  /** Adds attributes to the request's span (`attributes` read only when recording). */
  set(attributes: () => Attributes): void {
    if (this.recording) this.span.setAttributes(attributes());
  }

  /** Marks a moment of the request (the first token). */
  event(name: string, attributes?: Attributes): void {
    if (this.recording) this.span.addEvent(name, attributes);
  }

  /** Times a step of the request (tokenizing, routing) as a child span; `undefined` when not recording. */
  step(name: string, attributes?: Attributes): Span | undefined {
    return this.recording ? this.tracer.startSpan(name, { kind: SpanKind.INTERNAL, attributes }, this.within) : undefined;
  }

  /** Starts a try of a worker: a `CLIENT` span, whose context the worker receives (`attributes` read only when recording). */
  attempt(name: string, attributes: () => Attributes): Attempt {
    if (!this.recording) return { headers: this.headersOf(this.span), set: NOTHING, end: NOTHING };
    const span = this.tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes: attributes() }, this.within);
    let done = false;
    return {
      headers: this.headersOf(span),
      set: (attributes) => {
        if (!done) span.setAttributes(attributes());
      },
      end: (status, error) => {
        if (done) return;
        done = true;
        setStatus(span, status, error);
        span.end();
      },
    };
  }

  /** Ends the request's span with its status (once; later calls do nothing). */
  end(status: TraceStatus, error?: string): void {
    if (this.ended) return;
    this.ended = true;
    setStatus(this.span, status, error);
    this.span.end();
  }

  /**
   * The headers that carry `span` (a step of this request; `undefined`, not recorded: the
   * request's own span) to a worker. A span the tracer made (an id of its own, sampled or not)
   * is the worker's parent, with the client's `tracestate`; without one (no tracer: the span is
   * the client's context itself) the client's headers go on as they came.
   */
  headersOf(span: Span | undefined): Record<string, string> {
    const own = (span ?? this.span).spanContext();
    if (!isSpanContextValid(own) || own.spanId === this.client?.parentId) return traceHeaders(this.client);
    const traceparent = `00-${own.traceId}-${own.spanId}-${(own.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
    return this.client?.tracestate === undefined ? { traceparent } : { traceparent, tracestate: this.client.tracestate };
  }
}

/**
 * A try's attributes, by OpenTelemetry's HTTP client conventions (`url.full`, `server.*`,
 * `http.request.resend_count` from the second try on) and the gateway's own (`kvroute.*`).
 */
export function upstreamAttributes(
  url: string | undefined,
  path: string,
  method: string,
  worker: bigint,
  dpRank: number | undefined,
  resend: number,
): Attributes {
  const attributes: Attributes = { 'http.request.method': method, 'kvroute.worker': String(worker) };
  if (dpRank !== undefined) attributes['kvroute.dp_rank'] = dpRank;
  if (resend > 0) attributes['http.request.resend_count'] = resend;
  if (url !== undefined) {
    const u = new URL(url);
    attributes['url.full'] = new URL(path, u).href;
    attributes['server.address'] = u.hostname;
    attributes['server.port'] = u.port === '' ? (u.protocol === 'https:' ? 443 : 80) : Number(u.port);
  }
  return attributes;
}
