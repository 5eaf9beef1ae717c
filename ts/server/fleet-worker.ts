/**
 * What the fleet (`fleet.ts`) holds of each worker, and the shapes it reports: the routable
 * workers by role, a model card's facts, a rank's listener status and a health change.
 * @internal
 * @module
 */

import type { Pool } from 'undici';
import type { EngineSource } from '../ingest/source.js';
import type { Breaker, WorkerHealthState } from './breaker.js';
import type { CacheAccuracy } from './cache-accuracy.js';
import type { InFlightCutOff } from './cut-off.js';
import type { ResolvedWorker } from './options.js';
import type { WorkerRest } from './worker-rest.js';

/** The routable workers, by the part of a request they may take (see `Fleet.routableByRole`). */
export interface RoutableWorkers {
  all: bigint[];
  /** Those that take whole requests: all but the prefill workers. */
  whole: bigint[];
  /** The prefill workers. */
  prefill: bigint[];
  /** The decode workers. */
  decode: bigint[];
}

/** A worker as the fleet holds it; `url` is undefined for an index-only worker (`POST /register`). */
export interface FleetWorker {
  readonly spec: ResolvedWorker;
  readonly pool: Pool | undefined;
  readonly breaker: Breaker;
  source: EngineSource | undefined;
  inRouter: boolean;
  /** The model it serves: the first of `modelNames`, once learned. */
  readonly model: string | undefined;
  /** Every name it serves the model under, first the first its `/v1/models` lists (vLLM's `--served-model-name` may give several). */
  modelNames: ReadonlySet<string>;
  /** The LoRA adapters it lists (models with a `parent`), as of `modelsReadAt`. */
  adapters: ReadonlySet<string>;
  /** Its model list's `root` (the weights it loaded) and `max_model_len` per listed name, when given. */
  cards: ReadonlyMap<string, ModelCardFacts>;
  /** When its `/v1/models` was last read (ms, `performance.now()`); adapters can be loaded at run time. */
  modelsReadAt: number;
  /** Who added it: the config, the admin API, the indexer API or DNS discovery. */
  readonly origin: 'config' | 'admin' | 'indexer' | 'discovery';
  /** Its engine's reported cached tokens against the predictions, since it joined. */
  readonly accuracy: CacheAccuracy;
  /** Whether it rests (asleep, paused, its memory released through the control routes): out of routing until woken. */
  readonly rest: WorkerRest;
  /** Whether its probes ask `/is_sleeping` (until it answers 404: an engine without vLLM's dev-mode routes). */
  asksSleeping: boolean;
  /** Its requests in flight, cut when its probes find it down. */
  readonly cutOff: InFlightCutOff;
}

/** What a worker's `/v1/models` says of a model beyond its name. */
export interface ModelCardFacts {
  root: string | undefined;
  maxModelLen: number | undefined;
}

/**
 * A rank's event listener, in the indexer API's words.
 * @group Gateway
 */
export type ListenerStatus = 'pending' | 'active' | 'paused' | 'failed';

/** A breaker transition, for logs and metrics. */
export interface HealthChange {
  workerId: bigint;
  state: WorkerHealthState;
  reason: string;
}
