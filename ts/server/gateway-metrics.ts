/**
 * What the gateway measures itself, per request: status by worker, TTFT, inter-token and
 * end-to-end latency as the client sees them, routing and tokenizing time, queue waits,
 * retries, rejections, worker health, and how right the router's cache predictions were (the
 * engine's reported `cached_tokens` against the predicted overlap).
 * @internal
 * @module
 */

import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { packageVersion } from '../version.js';
import type { WorkerHealthState } from './breaker.js';

const LATENCY = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const FAST = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1];
const TOKENS = [0, 16, 64, 256, 1024, 4096, 16384, 65536];

/**
 * `kvroute_gateway_build_info`: 1, labelled with what runs (kvroute's version, the backend, Node's
 * version), so that a fleet's dashboards can tell replicas on different releases apart.
 */
export function buildInfo(registry: Registry, backend: string): void {
  new Gauge({
    name: 'kvroute_gateway_build_info',
    help: "What this gateway runs: kvroute's version, the backend and Node's version (always 1).",
    labelNames: ['version', 'backend', 'node'],
    registers: [registry],
  }).set({ version: packageVersion(), backend, node: process.version }, 1);
}

export class GatewayMetrics {
  /** By worker, status and `model` (see `modelLabel`: the request's model when served, `none` or `unknown`). */
  readonly requests: Counter<'worker' | 'status' | 'model'>;
  readonly passedOn: Counter<'path' | 'worker' | 'status'>;
  readonly responseLookups: Counter<'result'>;
  readonly loraRestores: Counter<'worker' | 'result'>;
  readonly ttft: Histogram<'model'>;
  readonly itl: Histogram<'model'>;
  readonly duration: Histogram<'model'>;
  readonly routing: Histogram;
  readonly tokenizing: Histogram<'tokenizer'>;
  readonly queueWait: Histogram<'model'>;
  readonly predictedCached: Counter<'worker'>;
  readonly reportedCached: Counter<'worker'>;
  readonly predictions: Counter<'worker' | 'outcome'>;
  readonly predictionError: Histogram;
  readonly retries: Counter<'reason'>;
  readonly prefillLegs: Counter<'worker' | 'result'>;
  readonly peerFailedLegs: Counter<'worker' | 'leg'>;
  readonly peerProbes: Counter<'worker' | 'leg' | 'result'>;
  readonly prefillLegTime: Histogram;
  readonly rejected: Counter<'reason'>;
  readonly traceContexts: Counter<'result'>;
  readonly spans: Counter<'result'>;
  readonly inFlight: Gauge;
  readonly health: Gauge<'worker' | 'state'>;
  /** 1 per reason a worker rests (asleep, paused, memory released through the control routes); absent when it does not. */
  readonly resting: Gauge<'worker' | 'reason'>;
  readonly transitions: Counter<'worker' | 'state'>;

  constructor(registry: Registry) {
    const registers = [registry];
    this.requests = new Counter({
      name: 'kvroute_gateway_requests_total',
      help: 'Proxied requests by worker and HTTP status (worker "none" when none was chosen).',
      labelNames: ['worker', 'status', 'model'],
      registers,
    });
    this.passedOn = new Counter({
      name: 'kvroute_gateway_passed_on_requests_total',
      help: 'Requests to vLLM endpoints passed on without routing (/tokenize, embeddings, ...), by path, worker and HTTP status.',
      labelNames: ['path', 'worker', 'status'],
      registers,
    });
    this.responseLookups = new Counter({
      name: 'kvroute_gateway_response_lookups_total',
      help: 'Lookups of the worker holding a Responses API response (previous_response_id, GET, cancel): remembered, found by asking the workers, not_found, or unavailable (its worker is down or did not answer).',
      labelNames: ['result'],
      registers,
    });
    this.loraRestores = new Counter({
      name: 'kvroute_gateway_lora_restores_total',
      help: 'LoRA adapters loaded through the gateway and loaded again on a worker that came back without them (restarted, or added later), by worker and result (loaded, failed).',
      labelNames: ['worker', 'result'],
      registers,
    });
    this.ttft = new Histogram({
      name: 'kvroute_gateway_time_to_first_token_seconds',
      help: "Arrival to the first token sent to the client (non-streaming: to the worker's response).",
      buckets: LATENCY,
      labelNames: ['model'],
      registers,
    });
    this.itl = new Histogram({
      name: 'kvroute_gateway_inter_token_latency_seconds',
      help: 'Time between streamed token chunks.',
      buckets: FAST.concat([0.05, 0.25, 1]),
      labelNames: ['model'],
      registers,
    });
    this.duration = new Histogram({
      name: 'kvroute_gateway_request_duration_seconds',
      help: 'Arrival to the last byte.',
      buckets: LATENCY,
      labelNames: ['model'],
      registers,
    });
    this.routing = new Histogram({
      name: 'kvroute_gateway_routing_duration_seconds',
      help: 'Time in route(), queue waits excluded.',
      buckets: FAST,
      registers,
    });
    this.tokenizing = new Histogram({
      name: 'kvroute_gateway_tokenize_duration_seconds',
      help: 'Prompt tokenization time, by tokenizer.',
      labelNames: ['tokenizer'],
      buckets: FAST.concat([0.05, 0.25]),
      registers,
    });
    this.queueWait = new Histogram({
      name: 'kvroute_gateway_queue_wait_seconds',
      help: "Time requests waited in the router's queue.",
      buckets: LATENCY,
      labelNames: ['model'],
      registers,
    });
    this.predictedCached = new Counter({
      name: 'kvroute_gateway_predicted_cached_tokens_total',
      help: 'Prompt tokens the router predicted cached on the chosen worker (requests whose engine reported usage).',
      labelNames: ['worker'],
      registers,
    });
    this.reportedCached = new Counter({
      name: 'kvroute_gateway_reported_cached_tokens_total',
      help: 'Prompt tokens the engines reported cached (usage.prompt_tokens_details.cached_tokens).',
      labelNames: ['worker'],
      registers,
    });
    this.predictions = new Counter({
      name: 'kvroute_gateway_cache_predictions_total',
      help: 'Cache predictions by worker and outcome against the engine report: exact, over (predicted more) or under.',
      labelNames: ['worker', 'outcome'],
      registers,
    });
    this.predictionError = new Histogram({
      name: 'kvroute_gateway_cache_prediction_error_tokens',
      help: 'Absolute difference between predicted and reported cached tokens.',
      buckets: TOKENS,
      registers,
    });
    this.retries = new Counter({
      name: 'kvroute_gateway_retries_total',
      help: 'Requests retried on another worker, by the first failure (connect, status, timeout, probe, cut).',
      labelNames: ['reason'],
      registers,
    });
    this.prefillLegs = new Counter({
      name: 'kvroute_gateway_prefill_legs_total',
      help:
        'Prefill legs of disaggregated requests, by result: transferred (the decode leg got KV-transfer parameters; with ' +
        "SGLang's protocol, the prefill worker answered beside its decode worker), " +
        'no_transfer_params (the prefill worker answered none: the decode worker computes the prompt), refused (the ' +
        "prefill worker's 4xx, given to the client), finished (TensorRT-LLM's context answer ended the request: it is the client's), failed (no prefill worker answered: the request went whole to a decode worker, " +
        "or with SGLang's protocol was refused with 502), " +
        'bypassed (a decode worker held all but disaggregation.bypassBelowTokens of the prompt: no prefill leg, the request went whole). ' +
        'By the prefill worker that answered ("none" for failed without an answer, and bypassed).',
      labelNames: ['worker', 'result'],
      registers,
    });
    this.peerFailedLegs = new Counter({
      name: 'kvroute_gateway_peer_failed_legs_total',
      help:
        "Legs of disaggregated requests (SGLang's protocol) whose worker failed (a 5xx or a timeout) with the other leg's " +
        'worker: a decode leg after its prefill worker could not be reached, reset or timed out, a prefill leg (its transfer) ' +
        "after its decode worker's connection was refused or reset, either one after the other leg's worker fell silent (see " +
        "kvroute_gateway_peer_probes_total). Not counted against the worker's health; the pair is " +
        'sent again. By the worker excused and its leg.',
      labelNames: ['worker', 'leg'],
      registers,
    });
    this.peerProbes = new Counter({
      name: 'kvroute_gateway_peer_probes_total',
      help:
        "Health probes (GET /health) of the other leg's worker when a leg of a disaggregated request (SGLang's protocol) " +
        'failed with a 5xx or a timeout while that leg had not answered: silent (the probe failed: that worker is blamed, ' +
        'the failed leg excused) or answered (the failed leg is blamed). By the worker probed and its leg.',
      labelNames: ['worker', 'leg', 'result'],
      registers,
    });
    this.prefillLegTime = new Histogram({
      name: 'kvroute_gateway_prefill_leg_seconds',
      help:
        "Time from routing a prefill leg to its answer read whole (the decode leg starts then; with SGLang's protocol it is sent " +
        'beside the decode leg, from their sending).',
      buckets: LATENCY,
      registers,
    });
    this.rejected = new Counter({
      name: 'kvroute_gateway_rejected_total',
      help: 'Requests refused by the gateway, by reason.',
      labelNames: ['reason'],
      registers,
    });
    this.traceContexts = new Counter({
      name: 'kvroute_gateway_trace_contexts_total',
      help: "Clients' W3C trace contexts: forwarded to the worker, forwarded without an oversized tracestate, or invalid (not forwarded).",
      labelNames: ['result'],
      registers,
    });
    this.spans = new Counter({
      name: 'kvroute_gateway_spans_total',
      help: 'Spans of the OTLP export (tracing.otlpEndpoint) the gateway finished with: exported, dropped (its queue full) or failed.',
      labelNames: ['result'],
      registers,
    });
    this.inFlight = new Gauge({ name: 'kvroute_gateway_in_flight_requests', help: 'Requests being proxied.', registers });
    this.health = new Gauge({
      name: 'kvroute_gateway_worker_health',
      help: 'Worker health per state (1 for the current one).',
      labelNames: ['worker', 'state'],
      registers,
    });
    this.resting = new Gauge({
      name: 'kvroute_gateway_worker_resting',
      help: 'Workers resting, out of routing until woken, by why (sleep, pause, release): put to rest through the control routes.',
      labelNames: ['worker', 'reason'],
      registers,
    });
    this.transitions = new Counter({
      name: 'kvroute_gateway_worker_health_changes_total',
      help: 'Worker health transitions, by the state entered.',
      labelNames: ['worker', 'state'],
      registers,
    });
  }

  /** A worker's resting reasons now (none: it serves, or left the fleet). */
  setResting(worker: bigint, reasons: readonly string[]): void {
    for (const reason of ['sleep', 'pause', 'release']) {
      if (reasons.includes(reason)) this.resting.set({ worker: String(worker), reason }, 1);
      else this.resting.remove({ worker: String(worker), reason });
    }
  }

  setHealth(worker: bigint, state: WorkerHealthState | undefined): void {
    for (const s of ['healthy', 'suspect', 'down'] as const) {
      if (state === undefined) this.health.remove({ worker: String(worker), state: s });
      else this.health.set({ worker: String(worker), state: s }, s === state ? 1 : 0);
    }
  }

  /** Counts one prediction against the engine's report (`outcome` as the worker's tally judged it). */
  prediction(worker: bigint | undefined, predicted: number, reported: number, outcome?: 'exact' | 'over' | 'under'): void {
    const label = worker === undefined ? 'none' : String(worker);
    this.predictedCached.inc({ worker: label }, predicted);
    this.reportedCached.inc({ worker: label }, reported);
    this.predictions.inc({
      worker: label,
      outcome: outcome ?? (predicted === reported ? 'exact' : predicted > reported ? 'over' : 'under'),
    });
    this.predictionError.observe(Math.abs(predicted - reported));
  }
}
