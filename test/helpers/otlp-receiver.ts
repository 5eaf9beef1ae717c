/**
 * An OTLP traces receiver on 127.0.0.1, as a collector's `otlp` receiver listens: over HTTP
 * (`start()`, :4318's form) it takes the `ExportTraceServiceRequest`s an exporter POSTs to
 * `/v1/traces`, JSON or protobuf by their content type; over gRPC (`startGrpc()`, :4317's form)
 * the `TraceService/Export` calls. It keeps the spans, so a test reads what a collector would
 * have received. (An OpenTelemetry Collector itself is a Go binary published on GitHub, out of
 * this machine's reach.) `answer` sets the HTTP status it replies with, to test refused exports.
 * Either transport serves TLS when given a certificate, as a collector's `tls` setting makes it,
 * and with `clientCa` requires a client certificate that CA signed.
 */

import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { Server as GrpcServer, ServerCredentials } from '@grpc/grpc-js';
import { decodeTraceRequest, TRACE_EXPORT_PATH } from './otlp-proto.js';

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

/** A receiver's TLS: its certificate and key files, and the CA that signs the clients' certificates it requires. */
export interface ReceiverTls {
  certFile: string;
  keyFile: string;
  clientCa?: string;
}

const flat = (kvs: KeyValue[] | undefined) => Object.fromEntries((kvs ?? []).map((kv) => [kv.key, plain(kv.value)]));

function grpcCredentials(tls: ReceiverTls | undefined): ServerCredentials {
  if (!tls) return ServerCredentials.createInsecure();
  const pair = { cert_chain: readFileSync(tls.certFile), private_key: readFileSync(tls.keyFile) };
  return ServerCredentials.createSsl(tls.clientCa ? readFileSync(tls.clientCa) : null, [pair], tls.clientCa !== undefined);
}

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Export requests received, accepted or not. */
  requests = 0;
  /** The status every export is answered with. */
  answer = 200;
  /** Each export's encoding: `application/json` or `application/x-protobuf` over HTTP, `grpc` over gRPC. */
  readonly encodings: string[] = [];
  /** The headers (or gRPC metadata) of the last export. */
  lastHeaders: Record<string, unknown> = {};
  private server: Server | undefined;
  private grpc: GrpcServer | undefined;

  /** Listens on a free port of 127.0.0.1 (over TLS with `tls`); resolves the traces URL. */
  async start(tls?: ReceiverTls): Promise<string> {
    const handle = (req: IncomingMessage, res: ServerResponse) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        this.requests++;
        if (req.url !== '/v1/traces' || req.method !== 'POST' || this.answer !== 200) {
          res.writeHead(req.url === '/v1/traces' ? this.answer : 404, { 'content-type': 'application/json' }).end('{}');
          return;
        }
        const encoding = String(req.headers['content-type']).split(';')[0];
        const body = Buffer.concat(chunks);
        this.encodings.push(encoding);
        this.lastHeaders = req.headers;
        if (encoding === 'application/x-protobuf') {
          this.take(decodeTraceRequest(body) as Parameters<OtlpReceiver['take']>[0]);
          res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
          return;
        }
        this.take(JSON.parse(body.toString('utf8')));
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    };
    this.server = tls
      ? createTlsServer(
          {
            cert: readFileSync(tls.certFile),
            key: readFileSync(tls.keyFile),
            ...(tls.clientCa ? { ca: readFileSync(tls.clientCa), requestCert: true, rejectUnauthorized: true } : {}),
          },
          handle,
        )
      : createServer(handle);
    await new Promise<void>((resolve) => this.server?.listen(0, '127.0.0.1', resolve));
    const address = this.server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    return `${tls ? 'https' : 'http'}://127.0.0.1:${address.port}/v1/traces`;
  }

  /** Serves OTLP/gRPC on a free port of 127.0.0.1 (over TLS with `tls`); resolves the endpoint URL. */
  async startGrpc(tls?: ReceiverTls): Promise<string> {
    const server = new GrpcServer();
    this.grpc = server;
    const identity = (b: Buffer) => b;
    server.addService(
      {
        Export: {
          path: TRACE_EXPORT_PATH,
          requestStream: false,
          responseStream: false,
          requestSerialize: identity,
          requestDeserialize: identity,
          // An empty ExportTraceServiceResponse: full success.
          responseSerialize: () => Buffer.alloc(0),
          responseDeserialize: identity,
        },
      },
      {
        Export: (call: { request: Buffer; metadata: { getMap(): Record<string, unknown> } }, done: (err: null, reply: Buffer) => void) => {
          this.requests++;
          this.encodings.push('grpc');
          this.lastHeaders = call.metadata.getMap();
          this.take(decodeTraceRequest(call.request) as Parameters<OtlpReceiver['take']>[0]);
          done(null, Buffer.alloc(0));
        },
      },
    );
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', grpcCredentials(tls), (err, p) => (err ? reject(err) : resolve(p))),
    );
    return `${tls ? 'https' : 'http'}://127.0.0.1:${port}`;
  }

  async close(): Promise<void> {
    this.grpc?.forceShutdown();
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
