/**
 * An OTLP/HTTP traces receiver on 127.0.0.1, as a collector's `otlp` receiver listens on :4318:
 * it takes the JSON-encoded `ExportTraceServiceRequest`s the gateway's exporter POSTs to
 * `/v1/traces` and keeps the spans, so a test reads what a collector would have received. (An
 * OpenTelemetry Collector itself is a Go binary published on GitHub, out of this machine's reach.)
 * `answer` sets the status it replies with, to test refused exports.
 */

import { createServer, type Server } from 'node:http';

/** One received span, its attributes flattened to plain values. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | undefined;
  name: string;
  /** OTLP's span kind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, unknown>;
  events: string[];
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: number;
  /** The resource's `service.name`. */
  service: unknown;
}

interface AnyValue {
  stringValue?: string;
  intValue?: string | number;
  doubleValue?: number;
  boolValue?: boolean;
}
interface KeyValue {
  key: string;
  value: AnyValue;
}

function plain(v: AnyValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  return v.boolValue;
}

const flat = (kvs: KeyValue[] | undefined) => Object.fromEntries((kvs ?? []).map((kv) => [kv.key, plain(kv.value)]));

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Export requests received, accepted or not. */
  requests = 0;
  /** The status every export is answered with. */
  answer = 200;
  private server: Server | undefined;

  /** Listens on a free port of 127.0.0.1; resolves the traces URL. */
  async start(): Promise<string> {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.requests++;
        if (req.url !== '/v1/traces' || req.method !== 'POST' || this.answer !== 200) {
          res.writeHead(req.url === '/v1/traces' ? this.answer : 404, { 'content-type': 'application/json' }).end('{}');
          return;
        }
        this.take(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    return `http://127.0.0.1:${address.port}/v1/traces`;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private take(body: {
    resourceSpans?: {
      resource?: { attributes?: KeyValue[] };
      scopeSpans?: {
        spans?: {
          traceId: string;
          spanId: string;
          parentSpanId?: string;
          name: string;
          kind: number;
          attributes?: KeyValue[];
          events?: { name: string }[];
          status?: { code?: number };
        }[];
      }[];
    }[];
  }): void {
    for (const rs of body.resourceSpans ?? []) {
      const service = flat(rs.resource?.attributes)['service.name'];
      for (const ss of rs.scopeSpans ?? [])
        for (const s of ss.spans ?? [])
          this.spans.push({
            traceId: s.traceId,
            spanId: s.spanId,
            parentSpanId: s.parentSpanId || undefined,
            name: s.name,
            kind: s.kind,
            attributes: flat(s.attributes),
            events: (s.events ?? []).map((e) => e.name),
            status: s.status?.code ?? 0,
            service,
          });
    }
  }
}
