/**
 * A completion request that batches several prompts (`prompt` a list of strings or token-id
 * lists, as evaluation harnesses send them): vLLM runs each prompt as a request of its own, so the
 * gateway routes and forwards each on its own too, to the worker holding that prompt's prefix, and
 * merges the answers into the one vLLM would give: prompt i's choices numbered from i × n, usage
 * summed, one id (`cmpl-` and the client's `X-Request-Id`, or the gateway's id). Prompt i's
 * request goes to its worker as `<id>-<i>`, vLLM's own name for it. Streams are interleaved event
 * by event as the prompts' tokens arrive, with one usage chunk (when the client asked for it) and
 * one `[DONE]` at the end.
 *
 * All or nothing, as in vLLM: when one prompt cannot be served (refused by the gateway, or an
 * engine's 4xx), the others are let go and the client gets that one's answer; a worker that fails
 * mid-stream ends the whole stream with an error event.
 * @internal
 * @module
 */

import type { FastifyReply } from 'fastify';
import { connect, type Upstream } from './connect.js';
import { firstLeg, splits } from './disaggregation.js';
import { describeError, failureKind } from './failures.js';
import { WHOLE } from './legs.js';
import type { ReadRequest } from './prompt.js';
import {
  contentType,
  finish,
  newOutcome,
  type Outcome,
  ofPrompt,
  openAiError,
  ourHeaders,
  type ProxyContext,
  type Refusal,
  refuse,
  tokenize,
  tokenizeRefusal,
  writerOf,
} from './proxy.js';
import { SseSplitter } from './sse.js';
import { eventWatcher, firstToken, reported } from './stream-watch.js';
import type { RequestTrace } from './tracing/request-trace.js';

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  prompt_tokens_details?: { cached_tokens: number };
}

interface Chunk {
  id?: unknown;
  created?: unknown;
  model?: unknown;
  choices?: { index?: unknown }[];
  usage?: Partial<Usage> | null;
}

export async function proxyBatch(
  ctx: ProxyContext,
  reply: FastifyReply,
  read: ReadRequest,
  prompts: ReadRequest[],
  path: string,
  signal: AbortSignal,
  client: { clientId: string | undefined; trace: RequestTrace; failure: { status?: Outcome['status'] } },
  started: number,
): Promise<FastifyReply> {
  const { clientId, trace } = client;
  const base = `kvr-${ctx.nextId++}`;
  let tokens: number[][];
  try {
    tokens = await Promise.all(
      prompts.map((p, i) => tokenize(ctx, p, trace).catch((err) => Promise.reject(ofPrompt(err, `prompt[${i}]`)))),
    );
  } catch (err) {
    return refuse(ctx, reply, tokenizeRefusal(err));
  }
  trace.set(() => ({ 'kvroute.request_id': base, 'gen_ai.usage.input_tokens': tokens.reduce((n, t) => n + t.length, 0) }));
  const outcomes = prompts.map((_, i) =>
    newOutcome(ctx, {
      id: `${base}-${i}`,
      clientId: clientId === undefined ? undefined : `${clientId}-${i}`,
      trace,
      tokens: tokens[i],
      model: prompts[i].model,
    }),
  );
  // One prompt refused, or the client gone: the others stop waiting and their workers are let go.
  const stop = new AbortController();
  const onClientGone = () => stop.abort();
  signal.addEventListener('abort', onClientGone, { once: true });
  ctx.metrics.inFlight.inc();
  let ups: (Upstream | Refusal)[] = [];
  try {
    ups = await Promise.all(
      prompts.map(async (p, i) => {
        // In a disaggregated fleet each prompt is split as a request of its own would be.
        const decoders = splits(ctx.fleet, p, 'completion', undefined);
        const routed = { ctx, read: p, tokens: tokens[i], path, signal: stop.signal, outcome: outcomes[i] };
        const first = decoders ? await firstLeg(routed, decoders) : WHOLE;
        const up = 'refusal' in first ? first.refusal : 'answer' in first ? first.answer : await connect(routed, undefined, first.leg);
        if ('refused' in up) stop.abort();
        return up;
      }),
    );
    const refusals = ups.filter((u): u is Refusal => 'refused' in u);
    if (refusals.length > 0) {
      await letGo(ups);
      // The refusal that stopped the others, not theirs (a client gone only when it was).
      const refusal = refusals.find((r) => r.refused !== 'client_closed') ?? refusals[0];
      if (signal.aborted) refusal.refused = 'client_closed';
      for (const o of outcomes) o.status = refusal.refused;
      return refuse(ctx, reply, refusal);
    }
    const connected = ups as Upstream[];
    const id = `cmpl-${clientId ?? base}`;
    const headers = batchHeaders(base, connected, outcomes);
    const failed = connected.findIndex((u) => u.res.statusCode !== 200);
    if (failed >= 0) return await answerWithFailure(ctx, reply, connected, outcomes, failed, headers);
    if (read.stream) await stream(ctx, reply, read, connected, outcomes, { id, headers, stop, started });
    else await collect(ctx, reply, read, connected, outcomes, { id, headers, started });
    return reply;
  } finally {
    signal.removeEventListener('abort', onClientGone);
    for (const [i, u] of ups.entries()) if (!('refused' in u)) ctx.router.free(outcomes[i].id);
    ctx.metrics.inFlight.dec();
    for (const [i, o] of outcomes.entries()) finish(ctx, o, prompts[i], path, started);
    // The request's span takes a prompt's failure after the 200 (a worker lost mid-stream, or the
    // client gone), which its HTTP status cannot show; a worker's failure before a client's leaving.
    const failed = outcomes.map((o) => o.status).filter((s) => typeof s === 'string');
    client.failure.status = failed.find((s) => s !== 'client_closed') ?? failed[0];
  }
}

/** The gateway's headers, one comma-separated value per prompt (empty for a prompt without one: a prefill worker for a prompt served whole). */
function batchHeaders(base: string, ups: Upstream[], outcomes: Outcome[]): Record<string, string> {
  const each = ups.map((u, i) => ourHeaders(u.decision, outcomes[i]));
  const joined: Record<string, string> = {};
  for (const key of new Set(each.flatMap((h) => Object.keys(h)))) joined[key] = each.map((h) => h[key] ?? '').join(',');
  joined['x-kvroute-request-id'] = base;
  return joined;
}

async function letGo(ups: (Upstream | Refusal)[]): Promise<void> {
  await Promise.all(ups.map((u) => ('refused' in u ? undefined : u.res.body.dump().catch(() => undefined))));
}

/** One prompt's worker refused it (4xx): its answer is the client's, as vLLM fails the whole batch. */
async function answerWithFailure(
  ctx: ProxyContext,
  reply: FastifyReply,
  ups: Upstream[],
  outcomes: Outcome[],
  failed: number,
  headers: Record<string, string>,
): Promise<FastifyReply> {
  const { res, decision } = ups[failed];
  const text = await res.body.text().catch(() => '');
  await letGo(ups.filter((_, i) => i !== failed));
  ctx.fleet.success(decision.workerId);
  for (const o of outcomes) o.status = res.statusCode;
  return reply.code(res.statusCode).headers(headers).type(contentType(res.headers, 'application/json')).send(text);
}

/** Prompt i's choices numbered from i × n, as vLLM numbers a batch's. */
function renumber(chunk: Chunk, offset: number, id: string): Chunk {
  for (const c of Array.isArray(chunk.choices) ? chunk.choices : []) if (typeof c?.index === 'number') c.index += offset;
  chunk.id = id;
  return chunk;
}

/** Adds one prompt's usage to the batch's. */
function addUsage(total: Usage, usage: Partial<Usage> | null | undefined): void {
  if (!usage) return;
  total.prompt_tokens += usage.prompt_tokens ?? 0;
  total.completion_tokens += usage.completion_tokens ?? 0;
  total.total_tokens += usage.total_tokens ?? 0;
  const cached = usage.prompt_tokens_details?.cached_tokens;
  if (typeof cached === 'number')
    total.prompt_tokens_details = { cached_tokens: (total.prompt_tokens_details?.cached_tokens ?? 0) + cached };
}

const noUsage = (): Usage => ({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0 });

async function collect(
  ctx: ProxyContext,
  reply: FastifyReply,
  read: ReadRequest,
  ups: Upstream[],
  outcomes: Outcome[],
  o: { id: string; headers: Record<string, string>; started: number },
): Promise<void> {
  const answers: Chunk[] = [];
  for (const [i, { res, decision }] of ups.entries()) {
    try {
      const answer = JSON.parse(await res.body.text()) as Chunk;
      if (answer === null || typeof answer !== 'object') throw new Error('the answer is not a JSON object');
      answers.push(answer);
    } catch (err) {
      await letGo(ups.slice(i + 1));
      for (const x of outcomes) x.status = 'upstream_error';
      ctx.fleet.failure(decision.workerId, failureKind(err), describeError(err));
      void reply
        .code(502)
        .send(openAiError(`worker ${decision.workerId} failed mid-response: ${describeError(err)}`, 'ServiceUnavailableError', 502));
      return;
    }
    firstToken(ctx, outcomes[i], o.started);
    reported(ctx, outcomes[i], answers[i].usage?.prompt_tokens_details?.cached_tokens);
    ctx.fleet.success(decision.workerId);
    outcomes[i].status = 200;
  }
  const usage = noUsage();
  for (const a of answers) addUsage(usage, a.usage);
  const merged = {
    ...answers[0],
    id: o.id,
    choices: answers.flatMap((a, i) => renumber(a, i * read.choicesPerPrompt, o.id).choices ?? []),
    usage,
  };
  void reply.code(200).headers(o.headers).type('application/json').send(JSON.stringify(merged));
}

async function stream(
  ctx: ProxyContext,
  reply: FastifyReply,
  read: ReadRequest,
  ups: Upstream[],
  outcomes: Outcome[],
  o: { id: string; headers: Record<string, string>; stop: AbortController; started: number },
): Promise<void> {
  reply.hijack();
  const out = reply.raw;
  out.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive', ...o.headers });
  for (const x of outcomes) x.status = 200;
  const write = writerOf(out);
  const usage = noUsage();
  let meta: { created?: unknown; model?: unknown } | undefined;
  let failure: string | undefined;
  const pump = async (i: number) => {
    const { res, decision } = ups[i];
    const splitter = new SseSplitter();
    const watch = eventWatcher(ctx, outcomes[i], o.started);
    try {
      for await (const bytes of res.body) {
        for (const event of splitter.push(bytes as Uint8Array)) {
          const facts = watch(event);
          if (facts.done) continue;
          const chunk = facts.chunk as Chunk | undefined;
          meta ??= chunk && { created: chunk.created, model: chunk.model };
          // Each prompt's usage chunk is summed into the batch's one.
          if (facts.usageOnly) {
            addUsage(usage, chunk?.usage);
            continue;
          }
          // Running usage the gateway asked for on the client's behalf is not the client's.
          if (chunk && read.ownChunkUsage) delete chunk.usage;
          if (failure === undefined)
            await write(chunk ? `data: ${JSON.stringify(renumber(chunk, i * read.choicesPerPrompt, o.id))}\n\n` : event);
        }
      }
      ctx.fleet.success(decision.workerId);
    } catch (err) {
      if (failure !== undefined || o.stop.signal.aborted) return;
      failure = `worker ${decision.workerId} failed mid-stream: ${describeError(err)}`;
      outcomes[i].status = 'upstream_error';
      ctx.fleet.failure(decision.workerId, failureKind(err), describeError(err));
      o.stop.abort();
    }
  };
  await Promise.all(ups.map((_, i) => pump(i)));
  if (out.destroyed) {
    for (const x of outcomes) if (x.status === 200) x.status = 'client_closed';
    return;
  }
  if (failure !== undefined) {
    out.end(`data: ${JSON.stringify(openAiError(failure, 'ServiceUnavailableError', 502))}\n\n`);
    return;
  }
  if (read.clientWantsUsage)
    await write(`data: ${JSON.stringify({ id: o.id, object: 'text_completion', ...meta, choices: [], usage })}\n\n`);
  out.end('data: [DONE]\n\n');
}
