/** Small HTTP helpers over Node's fetch (undici) for tests against real servers on 127.0.0.1. */

/** A parsed JSON body; the tests check its fields one by one. */
// biome-ignore lint/suspicious/noExplicitAny: response bodies are untyped JSON, narrowed by the assertions
export type Json = any;

export async function postJson(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Json; text: string; headers: Headers }> {
  const r = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });
  const text = await r.text();
  // A plain-text answer (vLLM answers some routes so) has no JSON.
  const json = text && r.headers.get('content-type')?.startsWith('text/plain') !== true ? JSON.parse(text) : undefined;
  return { status: r.status, json, text, headers: r.headers };
}

/** The `data:` payloads of an SSE response, in order (`[DONE]` kept as a string). */
export async function sse(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; events: Json[]; headers: Headers }> {
  const r = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });
  const text = await r.text();
  const events = text
    .split('\n\n')
    .filter((b) => b.startsWith('data: '))
    .map((b) => b.slice(6))
    .map((d) => (d === '[DONE]' ? d : JSON.parse(d)));
  return { status: r.status, events, headers: r.headers };
}

/** A Responses API stream's named events, in order: each event's name and its parsed `data:`. */
export async function namedEvents(
  url: string,
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; events: { event: string; data: Json }[]; headers: Headers }> {
  const r = await fetch(url, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });
  const text = await r.text();
  const events = text
    .split('\n\n')
    .filter((b) => b.startsWith('event: '))
    .map((b) => {
      const [name, data] = b.split('\n');
      return { event: name.slice(7), data: JSON.parse(data.slice(6)) };
    });
  return { status: r.status, events, headers: r.headers };
}
