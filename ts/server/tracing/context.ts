/**
 * W3C Trace Context (`traceparent`, `tracestate`) passed on from the client to the worker, so
 * that an engine tracing its requests (vLLM's `--otlp-traces-endpoint`) puts its spans under the
 * client's trace, as it would without the gateway between them. Without a tracer the gateway
 * passes the context on unchanged, as a proxy that does not trace must; with one, its own spans
 * go between the client's and the engine's (`request-trace.ts`).
 *
 * A `traceparent` the recommendation says to ignore (malformed, version `ff`, an all-zero id, or
 * sent twice) is not passed on, and neither is its `tracestate`, as the recommendation asks; a
 * `tracestate` longer than {@link MAX_TRACESTATE} characters is left out, and the `traceparent`
 * passed on without it. Both are counted (`kvroute_gateway_trace_contexts_total{result}`).
 * @internal
 * @module
 */

import type { IncomingHttpHeaders } from 'node:http';
import { type Context, createTraceState, ROOT_CONTEXT, trace } from '@opentelemetry/api';

/** The longest `tracestate` passed on (the recommendation asks for at least 512; 32 members of at most 256 fit in 8,224 with commas). */
export const MAX_TRACESTATE = 8224;

/** A version-00 `traceparent`, or a later version's, whose first four fields version 00 defines. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The trace context a client sent, to pass on. */
export interface TraceContext {
  traceparent: string;
  tracestate: string | undefined;
  /** The trace id, for the request's log line. */
  traceId: string;
  /** The client's span, the parent of the gateway's. */
  parentId: string;
  /** The trace flags (bit 0: sampled). */
  flags: number;
}

/** What became of a request's trace context (the metric's `result`). */
export type TraceContextResult = 'forwarded' | 'forwarded_without_state' | 'invalid';

/** Reads the client's trace context; `undefined` context when it sent none or one to ignore. */
export function readTraceContext(headers: IncomingHttpHeaders): { context?: TraceContext; result?: TraceContextResult } {
  const parent = headers.traceparent;
  if (parent === undefined) return {};
  // Node joins a repeated unknown header with ", ", which no valid traceparent holds.
  const m = typeof parent === 'string' ? TRACEPARENT.exec(parent) : null;
  if (!m) return { result: 'invalid' };
  const [, version, traceId, parentId, flagsHex, rest] = m;
  if (version === 'ff' || (version === '00' && rest !== undefined) || /^0+$/.test(traceId) || /^0+$/.test(parentId))
    return { result: 'invalid' };
  // Repeated tracestate headers are one list (Node joins them with ", ", as the recommendation combines them).
  const state = headers.tracestate;
  const tracestate = Array.isArray(state) ? state.join(',') : state;
  const flags = Number.parseInt(flagsHex, 16);
  if (tracestate !== undefined && tracestate.length > MAX_TRACESTATE)
    return {
      context: { traceparent: parent as string, tracestate: undefined, traceId, parentId, flags },
      result: 'forwarded_without_state',
    };
  return { context: { traceparent: parent as string, tracestate: tracestate || undefined, traceId, parentId, flags }, result: 'forwarded' };
}

/** The headers that carry `context` to a worker. */
export function traceHeaders(context: TraceContext | undefined): Record<string, string> {
  if (context === undefined) return {};
  return context.tracestate === undefined
    ? { traceparent: context.traceparent }
    : { traceparent: context.traceparent, tracestate: context.tracestate };
}

/** The OpenTelemetry context whose parent is the client's span (a remote one), or the root without one. */
export function parentContext(client: TraceContext | undefined): Context {
  if (client === undefined) return ROOT_CONTEXT;
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: client.traceId,
    spanId: client.parentId,
    traceFlags: client.flags,
    isRemote: true,
    ...(client.tracestate === undefined ? {} : { traceState: createTraceState(client.tracestate) }),
  });
}
