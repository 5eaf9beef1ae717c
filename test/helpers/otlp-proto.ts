/**
 * OTLP's trace messages in protobuf, read with protobufjs, for the test receivers of the
 * `http/protobuf` and `grpc` exports. Only the fields the tests read are declared (field numbers
 * from opentelemetry-proto's `trace.proto`, `common.proto`, `resource.proto` and
 * `trace_service.proto`); protobuf skips the others. A decoded request is given the shape of
 * OTLP's JSON encoding (ids in hex, 64-bit integers as strings), so one reader takes all three.
 */

import protobuf from 'protobufjs';

const PROTO = `
syntax = "proto3";
package otlp;
message AnyValue {
  oneof value {
    string string_value = 1;
    bool bool_value = 2;
    int64 int_value = 3;
    double double_value = 4;
  }
}
message KeyValue { string key = 1; AnyValue value = 2; }
message Resource { repeated KeyValue attributes = 1; }
message Event { string name = 2; }
message Status { string message = 2; int32 code = 3; }
message Span {
  bytes trace_id = 1;
  bytes span_id = 2;
  bytes parent_span_id = 4;
  string name = 5;
  int32 kind = 6;
  repeated KeyValue attributes = 9;
  repeated Event events = 11;
  Status status = 15;
}
message ScopeSpans { repeated Span spans = 2; }
message ResourceSpans { Resource resource = 1; repeated ScopeSpans scope_spans = 2; }
message ExportTraceServiceRequest { repeated ResourceSpans resource_spans = 1; }
`;

const root = protobuf.parse(PROTO, { keepCase: false }).root;
const Request = root.lookupType('otlp.ExportTraceServiceRequest');

/** The gRPC method a collector's `otlp` receiver serves on :4317. */
export const TRACE_EXPORT_PATH = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

interface DecodedSpan {
  traceId?: string;
  spanId?: string;
  parentSpanId?: string;
}
interface Decoded {
  resourceSpans?: { scopeSpans?: { spans?: DecodedSpan[] }[] }[];
}

/** A protobuf `ExportTraceServiceRequest`, as its JSON encoding would read (ids in hex). */
export function decodeTraceRequest(bytes: Uint8Array): unknown {
  const body = Request.toObject(Request.decode(bytes), { longs: String, bytes: String }) as Decoded;
  const hex = (base64: string | undefined) => (base64 ? Buffer.from(base64, 'base64').toString('hex') : undefined);
  for (const rs of body.resourceSpans ?? [])
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? []) {
        s.traceId = hex(s.traceId);
        s.spanId = hex(s.spanId);
        s.parentSpanId = hex(s.parentSpanId);
      }
  return body;
}
