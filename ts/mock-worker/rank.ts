/**
 * One dp rank of the mock worker: the replay engine (continuous batching, chunked prefill,
 * prefix-caching block pool, preemption, Dynamo's timing polynomials) running in wall-clock time
 * scaled by `speedup`. Each engine pass takes its modelled duration, then delivers its tokens to
 * every decoding request (one, or a speculative decoding burst) and publishes the pass's KV
 * events as one batch.
 *
 * Block names are chained hashes of the block's tokens under a random per-incarnation seed, as
 * vLLM's are without `PYTHONHASHSEED`: a restart changes every name.
 * @module
 */

import { xxh3_64 } from '../hashing.js';
import { Engine } from '../replay/engine.js';
import { ranNothing } from '../replay/engine-config.js';
import type { CacheEvent, FullBlock } from '../replay/kv-cache.js';
import { SimRequest } from '../replay/sim-request.js';
import { emptySpeculativeStats, type ResolvedSpeculative, type SpeculativeStats } from '../replay/speculative.js';
import type { RankPublisher } from './publisher.js';
import { encodeBatch, type WireEvent, type WireFormat } from './wire.js';

/** Block names are hashed in JavaScript (see `MockRank.name`). */
const JS_HASHING = { backend: 'js' } as const;

export interface RankConfig {
  blockSize: number;
  numGpuBlocks: number;
  /** Host-memory blocks behind the GPU pool (0: none). */
  cpuOffloadBlocks: number;
  /** µs to load one token's KV from host memory. */
  cpuLoadUsPerToken: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  speedup: number;
  /** Divides decode time on top of `speedup` (Dynamo's `decode_speedup_ratio`). */
  decodeSpeedup: number;
  /** Multi-token decode steps (MTP, EAGLE); undefined: none. */
  speculative: ResolvedSpeculative | undefined;
  wire: WireFormat;
}

/** A LoRA adapter a request runs under: its name and vLLM's integer id for it (from 1). */
export interface LoraRef {
  name: string;
  id: number;
}

/** A request in flight on a rank. */
export interface LiveRequest {
  prompt: number[];
  /** The adapter: its blocks are named apart from the base model's (vLLM's extra hash keys). */
  lora?: LoraRef;
  /** vLLM's `cache_salt`: it names the first block apart, so the whole chain is apart. */
  cacheSalt?: string;
  /** The whole output this request will produce (its length is `max_tokens`). */
  output: number[];
  /**
   * Prompt tokens whose KV a prefill worker computed, pulled instead of computed (a decode leg
   * of a disaggregated request, `kv_transfer_params.do_remote_prefill`). Default 0.
   */
  remoteTokens?: number;
  /** Told the pool ids of the prompt's full blocks once they are named (a prefill leg offers them to the decode worker). */
  onBlocks?(ids: number[]): void;
  /** New tokens since the last call; `first` on the first one. */
  onTokens(tokens: number[], first: boolean): void;
  /** Finished normally; `cachedTokens` of the prompt came from the prefix cache. */
  onDone(cachedTokens: number): void;
  /** Ended by a fault (restart, crash). */
  onAbort(reason: string): void;
}

interface Entry {
  req: LiveRequest;
  sim: SimRequest;
  delivered: number;
  /** Block names this request registered tokens for. */
  names: bigint[];
}

function random64(): bigint {
  const b = new BigUint64Array(1);
  crypto.getRandomValues(b);
  return b[0];
}

/** What a block was named from besides its tokens and parent, kept to publish it. */
interface BlockInfo {
  tokens: number[];
  lora: LoraRef | undefined;
  /** The salt of the block's chain (vLLM hashes it into the first block only). */
  salt: string | undefined;
  /** The block starts at token 0. */
  root: boolean;
}

const UTF8 = new TextEncoder();
const NO_BYTES = new Uint8Array(0);

/** vLLM's extra hash keys of a block: the adapter's name, then the salt in a chain's first block. */
function extraKeys(info: BlockInfo): string[] {
  const keys = info.lora ? [info.lora.name] : [];
  if (info.root && info.salt !== undefined) keys.push(info.salt);
  return keys;
}

/**
 * The pool id of a block (see `FullBlock.id`): its name's low 52 bits. A long-running worker
 * cannot keep an interning table of every name it ever saw; two names agreeing on 52 bits (odds
 * about 1 in 10^7 for a pool of 16,384 blocks) would share a pool slot, harmless in a mock.
 */
function poolId(seq: bigint): number {
  return Number(BigInt.asUintN(52, seq));
}

export class MockRank {
  private engine: Engine;
  private seed = random64();
  private readonly live = new Map<number, Entry>();
  /** Each block name the pool may publish (dropped once the block leaves the pool). */
  private readonly blocks = new Map<bigint, BlockInfo>();
  /** How many in-flight requests use each block name (their tokens must be kept). */
  private readonly liveRefs = new Map<bigint, number>();
  private uid = 0;
  private loop: Promise<void> | undefined;
  /** Ends the engine loop's wait early while it waits only for a load from host memory. */
  private wakeEarly: (() => void) | undefined;
  private paused = false;
  /** Multiplies pass durations (a `slow` fault). */
  slowFactor = 1;
  /**
   * Speculative decoding's drafts and acceptances for `/metrics` (vLLM's `spec_decode_*`),
   * across restarts as the other counters; undefined without speculative decoding.
   */
  readonly speculative: SpeculativeStats | undefined;
  /**
   * Totals for `/metrics`, counted when a request's first token comes out. Prompt tokens split by
   * where their KV came from, as vLLM's `prompt_tokens_by_source`: the GPU prefix cache
   * (`prefixHits`), host memory (`hostHits`, vLLM's external connector hits), a prefill worker
   * (`pulledTokens`, a disaggregated decode's), or computed.
   */
  readonly counters = {
    prefixQueries: 0,
    prefixHits: 0,
    hostQueries: 0,
    hostHits: 0,
    pulledTokens: 0,
    computedPromptTokens: 0,
    finished: 0,
    promptTokens: 0,
    generationTokens: 0,
    aborted: 0,
    /** Running requests preempted for lack of KV blocks (vLLM's `num_preemptions`). */
    preemptions: 0,
  };

  constructor(
    readonly dpRank: number,
    private readonly config: RankConfig,
    private readonly publisher: RankPublisher | undefined,
  ) {
    this.speculative = config.speculative && emptySpeculativeStats(config.speculative);
    this.engine = this.newEngine();
  }

  private newEngine(): Engine {
    const c = this.config;
    // The rank's draws are seeded by its dp rank, as a replay fleet seeds them by its ranks' order.
    return new Engine(
      {
        ...c,
        hostBlocks: c.cpuOffloadBlocks,
        hostLoadMsPerBlock: (c.cpuLoadUsPerToken * c.blockSize) / 1000,
        outputBlock: (r, index, parent) => this.outputBlock(r, index, parent),
      },
      this.dpRank,
      this.speculative,
    );
  }

  get running(): number {
    return this.engine.running;
  }

  get waiting(): number {
    return this.engine.waitingCount;
  }

  /** Fraction of the KV pool in use. */
  get kvUsage(): number {
    return this.engine.cache.used / this.config.numGpuBlocks;
  }

  /** Blocks held in host memory, and loaded back from it since the incarnation began. */
  get host(): { blocks: number; loaded: number } {
    const h = this.engine.cache.host;
    return { blocks: h?.size ?? 0, loaded: h?.loaded ?? 0 };
  }

  /** A block's name: its parent's, its tokens and its extra keys, hashed under the incarnation's seed. */
  private name(parent: bigint | null, info: BlockInfo): bigint {
    const { tokens } = info;
    const keys = extraKeys(info);
    const extra = keys.length === 0 ? NO_BYTES : UTF8.encode(keys.join('\u0000'));
    const bytes = new Uint8Array(8 + 4 * tokens.length + extra.length);
    const view = new DataView(bytes.buffer);
    view.setBigUint64(0, parent ?? 0n, true);
    for (let i = 0; i < tokens.length; i++) view.setUint32(8 + 4 * i, tokens[i], true);
    bytes.set(extra, 8 + 4 * tokens.length);
    // The pure-JS hash: for a block of 16 tokens (72 bytes) a Node-API call costs more than the
    // hashing (profiled: 4.5% of the worker's CPU through the native backend, 1% in JavaScript).
    return xxh3_64(bytes, this.seed, JS_HASHING);
  }

  private register(entry: Entry | undefined, parent: bigint | null, info: BlockInfo): FullBlock {
    const seq = this.name(parent, info);
    this.blocks.set(seq, info);
    if (entry) {
      entry.names.push(seq);
      this.liveRefs.set(seq, (this.liveRefs.get(seq) ?? 0) + 1);
    }
    return { seq, local: seq, id: poolId(seq) };
  }

  private outputBlock(r: SimRequest, index: number, parent: FullBlock | undefined): FullBlock {
    const entry = this.live.get(r.uid);
    const bs = this.config.blockSize;
    const k = r.promptBlocks.length + index;
    const full = entry ? [...entry.req.prompt, ...entry.req.output] : [];
    const tokens = full.slice(k * bs, (k + 1) * bs);
    const info: BlockInfo = { tokens, lora: entry?.req.lora, salt: entry?.req.cacheSalt, root: k === 0 };
    return this.register(entry, parent?.seq ?? null, info);
  }

  /** Queues a request; the engine loop runs while anything is in flight. */
  submit(req: LiveRequest): () => void {
    const bs = this.config.blockSize;
    const uid = this.uid++;
    const entry: Entry = { req, sim: undefined as unknown as SimRequest, delivered: 0, names: [] };
    this.live.set(uid, entry);
    const blocks: FullBlock[] = [];
    let parent: bigint | null = null;
    for (let i = 0; (i + 1) * bs <= req.prompt.length; i++) {
      const tokens = req.prompt.slice(i * bs, (i + 1) * bs);
      const block = this.register(entry, parent, { tokens, lora: req.lora, salt: req.cacheSalt, root: i === 0 });
      blocks.push(block);
      parent = block.seq;
    }
    entry.sim = new SimRequest(uid, req.prompt.length, Math.max(1, req.output.length), blocks);
    entry.sim.remoteTokens = Math.min(req.remoteTokens ?? 0, req.prompt.length);
    entry.sim.arrivalMs = performance.now();
    req.onBlocks?.(blocks.map((b) => b.id));
    this.engine.enqueue(entry.sim);
    this.wakeEarly?.();
    this.kick();
    return () => this.cancel(uid);
  }

  /** A client went away: the request leaves the engine at once. */
  private cancel(uid: number): void {
    const entry = this.live.get(uid);
    if (!entry) return;
    this.engine.abort(entry.sim);
    this.forget(uid, entry);
    this.counters.aborted++;
  }

  private forget(uid: number, entry: Entry): void {
    this.live.delete(uid);
    for (const seq of entry.names) {
      const refs = (this.liveRefs.get(seq) ?? 1) - 1;
      if (refs > 0) this.liveRefs.set(seq, refs);
      else {
        this.liveRefs.delete(seq);
        if (!this.engine.cache.contains({ seq, local: seq, id: poolId(seq) })) this.blocks.delete(seq);
      }
    }
  }

  private kick(): void {
    if (this.loop || this.paused) return;
    this.loop = this.run().finally(() => {
      this.loop = undefined;
      if (!this.engine.idle && !this.paused) this.kick();
    });
  }

  private async run(): Promise<void> {
    let due = performance.now();
    while (!this.engine.idle && !this.paused) {
      const engine = this.engine;
      const start = Math.max(due, performance.now() - 50);
      const pass = engine.step(start);
      // A pass that ran nothing waits for the first load from host memory to end, or for a new
      // request, which may run beside the loads (as in the replay's fleet).
      const ready = ranNothing(pass) ? engine.nextLoadReadyMs : undefined;
      due = start + (ready === undefined ? pass.durationMs : ready - start) * this.slowFactor;
      const wait = due - performance.now();
      // Passes shorter than a timer tick run back to back; the schedule (`due`) keeps the pace.
      await new Promise<void>((resolve) => {
        if (wait < 1) return void setImmediate(resolve);
        const timer = setTimeout(resolve, wait);
        if (ready === undefined) return;
        this.wakeEarly = () => {
          clearTimeout(timer);
          due = performance.now();
          resolve();
        };
      });
      this.wakeEarly = undefined;
      if (engine !== this.engine) return; // restarted meanwhile
      this.publish(pass.events);
      this.counters.preemptions += pass.preempted;
      for (const r of pass.firstTokens) {
        const entry = this.live.get(r.uid);
        if (!entry) continue;
        const c = this.counters;
        c.prefixQueries += r.inputLength;
        c.prefixHits += r.reusedTokens - r.reusedHostTokens;
        if (this.engine.cache.host) c.hostQueries += r.inputLength;
        c.hostHits += r.reusedHostTokens;
        // A decode leg pulls what its own cache lacks.
        const pulled = Math.max(0, Math.min(r.remoteTokens, r.inputLength) - r.reusedTokens);
        c.pulledTokens += pulled;
        c.computedPromptTokens += r.inputLength - r.reusedTokens - pulled;
        c.promptTokens += r.inputLength;
      }
      this.deliver(new Set(pass.finished));
    }
  }

  private deliver(finished: Set<SimRequest>): void {
    for (const [uid, entry] of this.live) {
      const generated = Math.min(entry.sim.generated, entry.req.output.length);
      if (generated > entry.delivered) {
        const first = entry.delivered === 0;
        const tokens = entry.req.output.slice(entry.delivered, generated);
        entry.delivered = generated;
        this.counters.generationTokens += tokens.length;
        entry.req.onTokens(tokens, first);
      }
      if (finished.has(entry.sim)) {
        this.forget(uid, entry);
        this.counters.finished++;
        entry.req.onDone(Math.min(entry.sim.reusedTokens, entry.req.prompt.length));
      }
    }
  }

  private publish(events: CacheEvent[]): void {
    if (!this.publisher || events.length === 0) return;
    const wire: WireEvent[] = [];
    const hostMedium = this.config.wire === 'sglang' ? 'CPU_PINNED' : 'CPU';
    for (const e of events) {
      const medium = e.host ? { medium: hostMedium } : {};
      if ('stored' in e) {
        // A stored event is one request's chain: one adapter, one salt.
        const infos = e.stored.blocks.map((b) => this.blocks.get(b.seq));
        const first = infos[0];
        const keys = infos.map((info) => (info ? extraKeys(info) : []));
        wire.push({
          type: 'BlockStored',
          blockHashes: e.stored.blocks.map((b) => b.seq),
          parent: e.stored.parent,
          tokens: infos.flatMap((info) => info?.tokens ?? []),
          blockSize: this.config.blockSize,
          ...(first?.lora ? { loraName: first.lora.name, loraId: first.lora.id } : {}),
          ...(keys.some((k) => k.length > 0) ? { extraKeys: keys.map((k) => (k.length > 0 ? k : null)) } : {}),
          ...(first?.salt !== undefined ? { cacheSalt: first.salt } : {}),
          ...medium,
        });
      } else {
        if (!e.host) for (const seq of e.removed) if (!this.liveRefs.has(seq)) this.blocks.delete(seq);
        wire.push({ type: 'BlockRemoved', blockHashes: e.removed, ...medium });
      }
    }
    this.publisher.publish(encodeBatch(Date.now() / 1000, wire, this.dpRank, this.config.wire));
  }

  /** Stops passes (a `hang` fault): requests stay where they are. */
  pause(): void {
    this.paused = true;
  }

  resume(): void {
    this.paused = false;
    this.kick();
  }

  /**
   * A new incarnation: every in-flight request fails, the pool is empty, block names change (new
   * seed) and the publisher's seq starts again at 0, as after an engine process restart.
   */
  restart(reason: string): void {
    this.abortAll(reason);
    this.engine = this.newEngine();
    this.seed = random64();
    this.blocks.clear();
    this.liveRefs.clear();
    this.publisher?.restart();
  }

  /**
   * Drops the prefix cache, as vLLM's `/reset_prefix_cache` and SGLang's `/flush_cache` do: a new
   * engine of the same incarnation (block names and the publisher's seq go on), announced with
   * `AllBlocksCleared`. Refused (false) while requests run, as both engines refuse it then.
   */
  resetPrefixCache(): boolean {
    if (this.live.size > 0) return false;
    this.engine = this.newEngine();
    this.blocks.clear();
    this.liveRefs.clear();
    this.publisher?.publish(encodeBatch(Date.now() / 1000, [{ type: 'AllBlocksCleared' }], this.dpRank, this.config.wire));
    return true;
  }

  abortAll(reason: string): void {
    for (const [uid, entry] of [...this.live]) {
      // Gone already: an earlier request's onAbort cancelled it (its sibling sequences, `n` > 1).
      if (!this.live.has(uid)) continue;
      this.engine.abort(entry.sim);
      this.forget(uid, entry);
      this.counters.aborted++;
      entry.req.onAbort(reason);
    }
  }
}
