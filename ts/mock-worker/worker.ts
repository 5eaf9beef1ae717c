/**
 * `startMockWorker`: a simulated vLLM worker as a live process part: an OpenAI-compatible HTTP
 * API (Fastify), one engine per dp rank running in wall-clock time, and real vLLM-wire KV events
 * on ZeroMQ, with faults on demand. `kvroute mock-worker` runs the same as a command.
 * @module
 */

import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { KvRouteError } from '../errors.js';
import { type AdmittedLeg, BootstrapLegs, legFailure } from './bootstrap.js';
import { registerCacheReset } from './cache-reset.js';
import { openEventStream } from './engine-run.js';
import { registerGenerate } from './generate.js';
import { contextParams, type KvTransfer, offeredParams } from './kv-transfer.js';
import { LoraAdapters, registerLoraUpdating } from './lora-adapters.js';
import { registerMessages } from './messages.js';
import { mockMetrics } from './metrics.js';
import { modelList } from './models.js';
import {
  BadRequest,
  chatOpening,
  checkFits,
  chunk,
  errorBody,
  fullResponse,
  type ParsedRequest,
  parseRequest,
  usage,
  usageChunk,
} from './openai.js';
import {
  checkFault,
  type MockFault,
  type MockWorkerOptions,
  type ResolvedMockOptions,
  rankEndpoint,
  resolveMockOptions,
} from './options.js';
import { RankPublisher } from './publisher.js';
import { type LiveRequest, MockRank } from './rank.js';
import { type ResponsesEngine, registerResponses } from './responses.js';
import { registerRestRoutes, SleepMode } from './rest-routes.js';
import { MockSequence } from './sequence.js';
import { registerServerInfo } from './server-info.js';
import { collectStats, type MockWorkerStats } from './stats.js';
import { chunkDue } from './stream-interval.js';
import { registerTokenize } from './tokenize-routes.js';
import { EngineTracer, engineRequestSpan } from './tracing.js';

/**
 * A running mock worker.
 * @group Mock worker
 */
export interface MockWorker {
  /** Base URL of its HTTP API (`http://127.0.0.1:<port>`). */
  readonly url: string;
  /** Rank 0's KV-event endpoint as bound, or undefined without events. */
  readonly kvEventsEndpoint: string | undefined;
  /** Every rank's KV-event endpoint, in rank order. */
  readonly kvEventsEndpoints: string[];
  /** Every rank's replay endpoint, in rank order (empty without replay). */
  readonly replayEndpoints: string[];
  /** A `disaggregationMode: 'prefill'` worker's bootstrap server port as bound; undefined otherwise. */
  readonly bootstrapPort: number | undefined;
  /** The resolved options. */
  readonly options: Readonly<ResolvedMockOptions>;
  /** Counters and gauges of the worker. */
  stats(): MockWorkerStats;
  /**
   * Injects a fault now (what `POST /admin/fault` does).
   * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad argument for an unknown fault.
   */
  fault(fault: MockFault): void;
  /**
   * Stops the HTTP server, the engines and the sockets. Idempotent.
   * @throws nothing; calling it again does nothing.
   */
  close(): Promise<void>;
}

class Worker implements MockWorker {
  url = '';
  kvEventsEndpoints: string[] = [];
  replayEndpoints: string[] = [];
  ranks: MockRank[] = [];
  publishers: RankPublisher[] = [];
  app: FastifyInstance;
  /** The adapters served now (`loraModules`, and those loaded at run time). */
  readonly adapters: LoraAdapters;
  /** What requests are checked against: the model, the adapters, the chat and length settings. */
  private readonly served: ResolvedMockOptions & { adapters: LoraAdapters };
  hung = false;
  closed = false;
  faults: MockFault['kind'][] = [];
  private readonly sockets = new Set<Socket>();
  private readonly timers: NodeJS.Timeout[] = [];
  private nextRank = 0;
  private counter = 0;
  /** The engine id a prefill leg's answer names (vLLM's `remote_engine_id`). */
  private readonly engineId = randomUUID();
  /** Disaggregated legs served (see `MockWorkerStats.kvTransfers`). */
  private readonly kvTransfers = { offered: 0, pulled: 0 };
  /** SGLang-style legs' meeting (with `disaggregationMode`). */
  private bootstrap: BootstrapLegs | undefined;
  private readonly hanging = new Set<FastifyReply>();
  /** vLLM's sleep mode: asleep, generation requests get 503 until woken. */
  private readonly sleepMode = new SleepMode();
  /** Called when a crash fault stops the worker (the CLI exits the process). */
  onCrash: (() => void) | undefined;
  /** vLLM's request spans, with `otlpTracesEndpoint`. */
  private readonly tracer: EngineTracer | undefined;

  constructor(readonly options: ResolvedMockOptions) {
    this.tracer = EngineTracer.to(options.otlpTracesEndpoint, options.otlpTracesProtocol, 'kvroute-mock-worker');
    this.adapters = new LoraAdapters(options.loraModules);
    this.served = { ...options, adapters: this.adapters };
    // vLLM takes response ids (`/v1/responses/{id}`) of any length; Fastify's default stops at 100.
    const appOptions = {
      logger: false,
      bodyLimit: 64 << 20,
      forceCloseConnections: true,
      routerOptions: { maxParamLength: 4096 },
    } as const;
    this.app = (options.https ? Fastify({ ...appOptions, https: options.https }) : Fastify(appOptions)) as unknown as FastifyInstance;
    this.routes();
  }

  get kvEventsEndpoint(): string | undefined {
    return this.kvEventsEndpoints[0];
  }

  get bootstrapPort(): number | undefined {
    return this.bootstrap?.port;
  }

  async start(): Promise<void> {
    const o = this.options;
    try {
      for (let r = 0; r < o.dpSize; r++) {
        let publisher: RankPublisher | undefined;
        if (o.kvEvents) {
          publisher = await RankPublisher.open({
            wire: o.wire,
            topic: o.topic,
            endpoint: rankEndpoint(o.kvEvents, r),
            replayEndpoint: o.replay ? rankEndpoint(o.replay, r) : undefined,
            bufferSteps: o.bufferSteps,
          });
          this.publishers.push(publisher);
          this.kvEventsEndpoints.push(publisher.lastEndpoint as string);
          if (o.replay) this.replayEndpoints.push(publisher.replayLastEndpoint as string);
        }
        this.ranks.push(new MockRank(r, o, publisher));
      }
      this.app.server.on('connection', (s: Socket) => {
        this.sockets.add(s);
        s.on('close', () => this.sockets.delete(s));
      });
      if (o.disaggregationMode)
        this.bootstrap = await BootstrapLegs.open(o.disaggregationMode, o.host, o.bootstrapPort, o.bootstrapTimeoutMs);
      const address = await this.app.listen({ port: o.port, host: o.host });
      this.url = address.replace('[::1]', '127.0.0.1');
    } catch (err) {
      await this.close();
      throw new KvRouteError('ERR_INVALID_ARG', `cannot start the mock worker: ${(err as Error).message}`, { cause: err });
    }
    for (const { fault, afterMs } of o.faults) {
      const t = setTimeout(() => this.fault(fault), afterMs);
      t.unref();
      this.timers.push(t);
    }
  }

  private chooseRank(request: FastifyRequest): MockRank {
    const header = request.headers['x-data-parallel-rank'];
    const wanted = typeof header === 'string' ? Number(header) : Number.NaN;
    if (Number.isInteger(wanted) && wanted >= 0 && wanted < this.ranks.length) return this.ranks[wanted];
    // Least loaded, round robin among equals.
    let best = this.ranks[this.nextRank++ % this.ranks.length];
    for (const r of this.ranks) if (r.running + r.waiting < best.running + best.waiting) best = r;
    return best;
  }

  /** Holds the reply forever while hung (until recover or close). */
  private hang(reply: FastifyReply): boolean {
    if (!this.hung) return false;
    this.hanging.add(reply);
    return true;
  }

  /**
   * Takes a generation request the worker cannot serve now: answered 503 while asleep
   * (`rest-routes.ts`; its health probe still answers, as vLLM's does), held while hung. False
   * when it can be served.
   */
  private unavailable(reply: FastifyReply): boolean {
    if (this.sleepMode.sleeping) {
      void reply.code(503).send(errorBody('the engine is sleeping (POST /wake_up)', 503));
      return true;
    }
    return this.hang(reply);
  }

  private routes(): void {
    const app = this.app;
    const o = this.options;
    app.setErrorHandler((err: Error & { statusCode?: number }, _req, reply) => {
      const code = err instanceof BadRequest ? 400 : (err.statusCode ?? 500);
      void reply.code(code).send(errorBody(err.message, code, err instanceof BadRequest ? (err.param ?? null) : null));
    });
    // vLLM's --api-key guards the /v1 routes only (not /health, /metrics or /tokenize), with its own 401 body.
    if (o.apiKey) {
      const expected = `Bearer ${o.apiKey}`;
      app.addHook('onRequest', async (req, reply) => {
        if (req.url.startsWith('/v1') && req.headers.authorization !== expected) return reply.code(401).send({ error: 'Unauthorized' });
      });
    }
    app.get('/health', async (_req, reply) => {
      if (this.hang(reply)) return reply;
      return reply.code(200).send();
    });
    app.get('/v1/models', async () => modelList(o.model, this.adapters.names(), o.maxModelLen));
    registerTokenize(app, o, this.served);
    registerCacheReset(app, () => this.ranks);
    registerRestRoutes(app, this.sleepMode, () => this.ranks);
    registerServerInfo(app, o);
    const metrics = mockMetrics(o.model, () => this.ranks, { offload: o.cpuOffloadBlocks > 0, speculative: o.speculative !== undefined });
    app.get('/metrics', async (_req, reply) => reply.header('content-type', metrics.contentType).send(await metrics.metrics()));
    app.post('/admin/fault', async (req) => {
      const fault = (() => {
        try {
          return checkFault(req.body, 'body');
        } catch (err) {
          throw new BadRequest((err as Error).message);
        }
      })();
      // Answer first: a crash must not take its own reply down.
      setImmediate(() => this.fault(fault));
      return { ok: true, fault };
    });
    if (o.runtimeLoraUpdating) registerLoraUpdating(app, this.adapters, o.model);
    const engine: ResponsesEngine = {
      options: o,
      served: this.served,
      hang: (reply) => this.unavailable(reply),
      rankFor: (req) => {
        const rank = this.chooseRank(req);
        return { dpRank: rank.dpRank, run: (job: LiveRequest) => rank.submit(job) };
      },
      requestSpan: (req, facts) => engineRequestSpan(this.tracer, req.headers, facts),
    };
    registerResponses(app, engine);
    registerMessages(app, engine);
    registerGenerate(app, {
      ...engine,
      admitLeg: async (body, reply) => {
        const leg = await this.meetPeer(body, reply);
        if (leg?.pull) this.kvTransfers.pulled++;
        return leg;
      },
    });
    for (const [path, chat] of [
      ['/v1/completions', false],
      ['/v1/chat/completions', true],
    ] as const) {
      app.post(path, async (req, reply) => {
        if (this.unavailable(reply)) return reply;
        const parsed = parseRequest(req.body, chat, this.served);
        for (const prompt of parsed.prompts) {
          const needs = prompt.length + parsed.maxTokens;
          checkFits(
            prompt.length,
            parsed.maxTokens,
            o,
            `this model's maximum context length is ${o.maxModelLen} tokens; the request needs ${needs}`,
          );
        }
        const leg = await this.admitLeg(req, reply, parsed);
        return this.serve(req, reply, parsed, leg);
      });
    }
  }

  /**
   * With `disaggregationMode`, waits for the request's peer leg (bootstrap.ts): a decode leg's
   * prompt is then pulled, a prefill leg generates its one token and hands its KV over.
   */
  private async admitLeg(req: FastifyRequest, reply: FastifyReply, parsed: ParsedRequest): Promise<AdmittedLeg | undefined> {
    const leg = await this.meetPeer(req.body as Record<string, unknown>, reply);
    if (leg?.pull) parsed.kvTransfer = { kind: 'pull', via: 'bootstrap_room' };
    else if (leg) parsed.maxTokens = 1;
    return leg;
  }

  /** A leg's meeting in its bootstrap room (none without `disaggregationMode`); an offer is counted, and dropped if its client goes. */
  private async meetPeer(body: Record<string, unknown>, reply: FastifyReply): Promise<AdmittedLeg | undefined> {
    if (!this.bootstrap) return undefined;
    const leg = await this.bootstrap.admit(body);
    if (!leg.pull) {
      this.kvTransfers.offered++;
      reply.raw.on('close', () => leg.drop?.());
    }
    return leg;
  }

  /** A prefill leg's answer with what its decode leg needs, in the words of the engine it was asked in. */
  private offering(
    answer: Record<string, unknown>,
    via: KvTransfer['via'],
    id: string,
    blockIds: number[],
    first: MockSequence,
  ): Record<string, unknown> {
    if (via === 'disaggregated_params') {
      const params = contextParams({ requestId: this.counter++, firstToken: first.output[0], engineId: this.engineId, blockIds });
      const [choice, ...rest] = answer.choices as Record<string, unknown>[];
      return { ...answer, choices: [{ ...choice, disaggregated_params: params }, ...rest], prompt_token_ids: first.prompt };
    }
    const { hostname, port } = new URL(this.url);
    const params = offeredParams({ engineId: this.engineId, requestId: id, blockIds, host: hostname, port: Number(port) });
    return { ...answer, kv_transfer_params: params };
  }

  private serve(req: FastifyRequest, reply: FastifyReply, parsed: ParsedRequest, leg?: AdmittedLeg): Promise<unknown> {
    const rank = this.chooseRank(req);
    // vLLM names a request after the client's X-Request-Id when it sends one.
    const named = req.headers['x-request-id'];
    const id = `${parsed.chat ? 'chatcmpl' : 'cmpl'}-${typeof named === 'string' && named !== '' ? named : `mock-${this.counter++}`}`;
    const created = Math.floor(Date.now() / 1000);
    void reply.header('x-data-parallel-rank', String(rank.dpRank));
    // Each prompt's `n` sequences, each a request of the rank's engine, as vLLM runs them (the
    // later ones find the first one's prompt blocks cached). Sequence k = i × n + j samples
    // prompt i with the seed plus j, so samples differ and the first is the `n = 1` answer; the
    // usage counts each prompt once, with its first sequence's cached tokens.
    const n = parsed.n;
    // A request's own seed picks its text as the worker's does.
    const seed = parsed.sampling.seed ?? this.options.seed;
    const sequences = parsed.prompts.flatMap((prompt) => Array.from({ length: n }, (_, j) => new MockSequence(parsed, prompt, seed + j)));
    const promptTokens = parsed.prompts.reduce((sum, p) => sum + p.length, 0);
    const body = req.body as { temperature?: unknown; top_p?: unknown };
    const span = engineRequestSpan(this.tracer, req.headers, {
      id,
      model: parsed.model,
      maxTokens: parsed.maxTokens,
      n,
      temperature: typeof body.temperature === 'number' ? body.temperature : 1,
      topP: typeof body.top_p === 'number' ? body.top_p : 1,
    });
    const ended = (completionTokens: number, error?: string) => span.end({ promptTokens, completionTokens }, error);
    const cachedOf: number[] = [];
    const cached = () => cachedOf.reduce((sum, c, k) => (k % n === 0 ? sum + c : sum), 0);
    const cancels: (() => void)[] = [];
    const cancelAll = () => {
      for (const cancel of cancels) cancel();
    };
    // A decode leg pulls its prompt's KV; a prefill leg offers its first prompt's blocks.
    if (parsed.kvTransfer?.kind === 'pull') this.kvTransfers.pulled++;
    let offered: number[] = [];
    // A prefill leg's KV reached no decode worker (it left its room): the leg fails at its end.
    let handedOver = true;
    const submit = (
      k: number,
      onTokens: (tokens: number[], first: boolean) => void,
      onDone: () => void,
      onAbort: (reason: string) => void,
    ) =>
      cancels.push(
        rank.submit({
          prompt: sequences[k].prompt,
          lora: parsed.lora,
          cacheSalt: parsed.cacheSalt,
          output: sequences[k].output,
          remoteTokens: parsed.kvTransfer?.kind === 'pull' ? sequences[k].prompt.length : 0,
          ...(parsed.kvTransfer?.kind === 'offer' && k === 0 ? { onBlocks: (ids: number[]) => (offered = ids) } : {}),
          onTokens: (tokens, first) => {
            if (first && k === 0 && leg?.handOver?.(sequences[0].prompt.length) === false) handedOver = false;
            onTokens(tokens, first);
          },
          onDone: (c) => {
            cachedOf[k] = c;
            onDone();
          },
          onAbort,
        }),
      );
    if (!parsed.stream) {
      return new Promise((resolve, reject) => {
        let generated = 0;
        let left = sequences.length;
        for (let k = 0; k < sequences.length; k++) {
          submit(
            k,
            (t) => {
              span.firstToken();
              generated += t.length;
            },
            () => {
              if (--left > 0) return;
              if (!handedOver) {
                ended(generated, 'the KV transfer failed');
                return reject(legFailure('the KV transfer failed: the decode worker left the bootstrap room'));
              }
              ended(generated);
              const choices = sequences.map((s) => s.choice());
              const answer = fullResponse(parsed, id, created, choices, usage(promptTokens, generated, cached()));
              if (parsed.kvTransfer?.kind !== 'offer') return resolve(answer);
              this.kvTransfers.offered++;
              resolve(this.offering(answer as Record<string, unknown>, parsed.kvTransfer.via, id, offered, sequences[0]));
            },
            (reason) => {
              cancelAll();
              ended(generated, reason);
              reject(Object.assign(new Error(`the engine stopped: ${reason}`), { statusCode: 503 }));
            },
          );
        }
        // The response's close (not the request's, which fires once the body is read) tells a
        // client that went away.
        reply.raw.on('close', () => {
          if (reply.raw.writableFinished) return;
          cancelAll();
          ended(generated, 'the client went away');
        });
      });
    }
    reply.hijack();
    const res = reply.raw;
    openEventStream(res, rank.dpRank);
    const send = (data: unknown) => res.write(`data: ${JSON.stringify(data)}\n\n`);
    let done = false;
    let generated = 0;
    let left = sequences.length;
    const interval = this.options.streamInterval;
    // vLLM opens a chat stream, when the first output arrives, with every choice's role.
    let opened = !parsed.chat;
    const open = () => {
      if (opened) return;
      opened = true;
      sequences.forEach((s, k) => {
        for (const c of chatOpening(parsed, id, created, k, s.prompt)) send(c);
      });
    };
    for (let k = 0; k < sequences.length; k++) {
      const seq = sequences[k];
      let made = 0;
      let sent = 0;
      submit(
        k,
        (tokens) => {
          span.firstToken();
          open();
          generated += tokens.length;
          made += tokens.length;
          // As vLLM streams them, one check per engine step (whose tokens are several under
          // speculative decoding): the first step's at once, then a chunk each time `interval`
          // more are out (every step by default), the last with the rest and how the sequence
          // ended; text is held back while a stop string may still match.
          if (!chunkDue(made, sent, seq.end.generated, interval)) return;
          const end = made === seq.end.generated ? seq.end : undefined;
          send(chunk(parsed, id, created, k, seq.delta(sent, made), end, { prompt: seq.prompt.length, completion: made }));
          sent = made;
        },
        () => {
          if (--left > 0) return;
          done = true;
          ended(generated);
          if (parsed.includeUsage) send(usageChunk(parsed, id, created, usage(promptTokens, generated, cached())));
          res.end('data: [DONE]\n\n');
        },
        (reason) => {
          if (done) return;
          done = true;
          cancelAll();
          ended(generated, reason);
          send(errorBody(`the engine stopped: ${reason}`, 503));
          res.destroy();
        },
      );
    }
    res.on('close', () => {
      if (done) return;
      cancelAll();
      ended(generated, 'the client went away');
    });
    return Promise.resolve(reply);
  }

  fault(value: MockFault): void {
    const fault = checkFault(value, 'fault');
    if (this.closed) return;
    this.faults.push(fault.kind);
    switch (fault.kind) {
      case 'crash':
        for (const r of this.ranks) r.abortAll('crash');
        for (const s of this.sockets) s.destroy();
        void this.close().then(() => this.onCrash?.());
        break;
      case 'hang':
        this.hung = true;
        for (const r of this.ranks) r.pause();
        break;
      case 'slow':
        for (const r of this.ranks) r.slowFactor = fault.factor ?? 10;
        break;
      case 'drop-events':
        for (const p of this.publishers) p.dropNext += fault.count ?? 1;
        break;
      case 'restart':
        for (const r of this.ranks) r.restart('restart');
        // A new engine process has only the adapters it was started with.
        this.adapters.reset();
        break;
      case 'recover':
        this.hung = false;
        for (const r of this.ranks) {
          r.slowFactor = 1;
          r.resume();
        }
        for (const reply of this.hanging)
          if (!reply.sent) void reply.code(503).send(errorBody('the worker recovered from a hang; retry', 503));
        this.hanging.clear();
        break;
    }
  }

  stats(): MockWorkerStats {
    return collectStats(
      this.ranks,
      this.publishers,
      { ...this.kvTransfers },
      this.options.speculative !== undefined,
      this.faults,
      this.closed,
    );
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    for (const r of this.ranks) {
      r.pause();
      r.abortAll('worker closed');
    }
    for (const reply of this.hanging) reply.raw.destroy();
    for (const p of this.publishers) p.close();
    await this.bootstrap?.close();
    await this.app.close();
    // The last requests' spans go out before close() resolves; an unreachable collector is not the caller's failure.
    await this.tracer?.shutdown().catch(() => undefined);
  }
}

/**
 * Starts a mock vLLM worker: HTTP on `host:port`, KV events on `kvEvents` (rank r on port + r).
 *
 * @example
 * ```ts
 * const w = await startMockWorker({ port: 0, kvEvents: 'tcp://127.0.0.1:0', replay: 'tcp://127.0.0.1:0', speedup: 10 });
 * const index = new KvIndex({ blockSize: 16 });
 * index.subscribe({ workerId: 1, endpoint: w.kvEventsEndpoints, replayEndpoint: w.replayEndpoints });
 * await fetch(`${w.url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: 'hi', max_tokens: 8 }), headers: { 'content-type': 'application/json' } });
 * ```
 * @throws {KvRouteError} `ERR_INVALID_ARG` for a bad option or a port in use;
 * `ERR_DEPENDENCY_MISSING` without the optional `zeromq`/`msgpackr` packages when KV events are on.
 * @group Mock worker
 */
export async function startMockWorker(opts?: MockWorkerOptions): Promise<MockWorker> {
  const worker = new Worker(resolveMockOptions(opts));
  await worker.start();
  return worker;
}

/** @internal the CLI hooks process exit on crash. */
export function onMockCrash(worker: MockWorker, fn: () => void): void {
  (worker as Worker).onCrash = fn;
}
