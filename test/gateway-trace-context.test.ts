import { connect } from 'node:net';
import { describe, expect, test } from 'vitest';
import { BACKENDS } from './helpers/backends.js';
import { closeFleetsAfterEach, gatewayBehindWire } from './helpers/gateway.js';
import { postJson, sse } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { headOf } from './helpers/tcp-proxy.js';

closeFleetsAfterEach();

const PARENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';
const STATE = 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE';

/** Sends `text` as it is over a new connection; resolves what came back once the server closes it. */
function rawRequest(url: string, text: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    let answer = '';
    const socket = connect(Number(port), hostname, () => socket.write(text));
    socket.on('data', (d) => {
      answer += d.toString('latin1');
    });
    socket.on('close', () => resolve(answer));
    socket.on('error', reject);
  });
}

describe.each(BACKENDS)("gateway: the client's W3C trace context reaches the engine (%s)", (backend) => {
  test('traceparent and tracestate are passed on unchanged to routed, batched and passed-on requests; a context to ignore is not', async () => {
    // The worker's HTTP API behind a TCP proxy that keeps what the gateway sent; its KV events direct.
    const { url, wire, close } = await gatewayBehindWire(backend);
    try {
      const traced = { traceparent: PARENT, tracestate: STATE };
      const one = await postJson(`${url}/v1/completions`, { prompt: 'hello there', max_tokens: 2 }, { ...traced, 'x-request-id': 'one' });
      expect(one.status).toBe(200);
      const streamed = await sse(
        `${url}/v1/chat/completions`,
        { messages: [{ role: 'user', content: 'hi' }], stream: true },
        { ...traced, 'x-request-id': 'two' },
      );
      expect(streamed.status).toBe(200);
      const batch = await postJson(`${url}/v1/completions`, { prompt: ['a', 'b'], max_tokens: 1 }, { ...traced, 'x-request-id': 'three' });
      expect(batch.status).toBe(200);
      const tokenized = await postJson(`${url}/tokenize`, { prompt: 'hi' }, { ...traced, 'x-request-id': 'four' });
      expect(tokenized.status).toBe(200);
      for (const id of ['one', 'two', 'three-0', 'three-1', 'four']) expect(headOf(wire.sent, id)).toMatchObject(traced);

      // Contexts the recommendation says to ignore: upper-case hex, an all-zero trace id, version ff.
      const ignored = [PARENT.toUpperCase(), `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`, `ff${PARENT.slice(2)}`, `${PARENT}-extra`];
      for (const [i, traceparent] of ignored.entries()) {
        const r = await postJson(
          `${url}/v1/completions`,
          { prompt: 'hi', max_tokens: 1 },
          { traceparent, tracestate: STATE, 'x-request-id': `bad-${i}` },
        );
        expect(r.status).toBe(200);
        const head = headOf(wire.sent, `bad-${i}`);
        expect([head.traceparent, head.tracestate]).toEqual([undefined, undefined]);
      }
      // Sent twice (two header lines, written by hand: HTTP clients merge them): ignored too.
      const body = '{"prompt":"hi","max_tokens":1}';
      const twice = await rawRequest(
        url,
        `POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nx-request-id: twice\r\ntraceparent: ${PARENT}\r\ntraceparent: ${PARENT}\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
      );
      expect(twice).toMatch(/^HTTP\/1\.1 200/);
      expect(headOf(wire.sent, 'twice').traceparent).toBeUndefined();
      // A later version may carry more fields: passed on as it came.
      const later = `01${PARENT.slice(2)}-more`;
      await postJson(`${url}/v1/completions`, { prompt: 'hi', max_tokens: 1 }, { traceparent: later, 'x-request-id': 'later' });
      expect(headOf(wire.sent, 'later').traceparent).toBe(later);
      // An oversized tracestate is left out; its traceparent still goes.
      const huge = `a=${'x'.repeat(9000)}`;
      await postJson(
        `${url}/v1/completions`,
        { prompt: 'hi', max_tokens: 1 },
        { traceparent: PARENT, tracestate: huge, 'x-request-id': 'huge' },
      );
      expect(headOf(wire.sent, 'huge')).toMatchObject({ traceparent: PARENT });
      expect(headOf(wire.sent, 'huge').tracestate).toBeUndefined();

      const m = await scrape(`${url}/metrics`);
      expect(m.sum('kvroute_gateway_trace_contexts_total', { result: 'forwarded' })).toBe(5);
      expect(m.sum('kvroute_gateway_trace_contexts_total', { result: 'invalid' })).toBe(5);
      expect(m.sum('kvroute_gateway_trace_contexts_total', { result: 'forwarded_without_state' })).toBe(1);
    } finally {
      await close();
    }
  });
});
