/**
 * The mock worker's `/metrics`, with vLLM's metric names (`vllm:num_requests_running`, …) on a
 * `prom-client` registry of its own, read from the ranks at scrape time. With CPU offload it adds
 * what vLLM adds with a KV connector: the connector's lookups and hits
 * (`vllm:external_prefix_cache_*`); with speculative decoding, vLLM's drafts and acceptances
 * (`vllm:spec_decode_*`); prompt tokens by source are always there.
 * @module
 */

import { Counter, Gauge, Registry } from 'prom-client';
import { acceptedTokens } from '../replay/speculative.js';
import type { MockRank } from './rank.js';

/** Where a prompt token's KV came from, as vLLM's `prompt_tokens_by_source` labels it. */
const SOURCES = {
  local_compute: (r: MockRank) => r.counters.computedPromptTokens,
  local_cache_hit: (r: MockRank) => r.counters.prefixHits,
  external_kv_transfer: (r: MockRank) => r.counters.hostHits + r.counters.pulledTokens,
} as const;

export function mockMetrics(model: string, ranks: () => readonly MockRank[], opts: { offload: boolean; speculative: boolean }): Registry {
  const registry = new Registry();
  const labels = ['model_name', 'engine'] as const;
  const each = (fn: (r: MockRank) => number) => (metric: Gauge<(typeof labels)[number]> | Counter<(typeof labels)[number]>) => {
    metric.reset();
    for (const r of ranks()) {
      const l = { model_name: model, engine: String(r.dpRank) };
      if (metric instanceof Gauge) metric.set(l, fn(r));
      else metric.inc(l, fn(r));
    }
  };
  // One definition for both kinds: read from the ranks at every scrape.
  const define = (Kind: typeof Gauge | typeof Counter) => (name: string, help: string, fn: (r: MockRank) => number) => {
    const set = each(fn);
    new Kind({
      name,
      help,
      labelNames: labels,
      registers: [registry],
      collect() {
        set(this);
      },
    });
  };
  const gauge = define(Gauge);
  const counter = define(Counter);
  gauge('vllm:num_requests_running', 'Requests in the model execution batches.', (r) => r.running);
  gauge('vllm:num_requests_waiting', 'Requests waiting to be processed.', (r) => r.waiting);
  gauge('vllm:kv_cache_usage_perc', 'KV-cache usage: 1 means 100 percent.', (r) => r.kvUsage);
  gauge('vllm:gpu_cache_usage_perc', 'GPU KV-cache usage (the name before vLLM 0.10): 1 means 100 percent.', (r) => r.kvUsage);
  counter('vllm:prefix_cache_queries_total', 'Prompt tokens looked up in the prefix cache.', (r) => r.counters.prefixQueries);
  counter('vllm:prefix_cache_hits_total', 'Prompt tokens served by the GPU prefix cache.', (r) => r.counters.prefixHits);
  if (opts.offload) {
    counter(
      'vllm:external_prefix_cache_queries_total',
      'Prompt tokens looked up in host memory (the KV connector).',
      (r) => r.counters.hostQueries,
    );
    counter('vllm:external_prefix_cache_hits_total', 'Prompt tokens loaded back from host memory.', (r) => r.counters.hostHits);
  }
  counter('vllm:prompt_tokens_total', 'Prefill tokens processed.', (r) => r.counters.promptTokens);
  counter(
    'vllm:prompt_tokens_cached_total',
    'Prompt tokens whose KV was cached (GPU prefix cache or host memory).',
    (r) => r.counters.prefixHits + r.counters.hostHits,
  );
  new Counter({
    name: 'vllm:prompt_tokens_by_source_total',
    help: 'Prompt tokens by where their KV came from.',
    labelNames: [...labels, 'source'],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of ranks())
        for (const [source, count] of Object.entries(SOURCES)) this.inc({ model_name: model, engine: String(r.dpRank), source }, count(r));
    },
  });
  counter('vllm:generation_tokens_total', 'Generation tokens processed.', (r) => r.counters.generationTokens);
  counter('vllm:request_success_total', 'Requests finished.', (r) => r.counters.finished);
  counter('vllm:num_preemptions_total', 'Cumulative number of preemption from the engine.', (r) => r.counters.preemptions);
  if (opts.speculative) speculativeMetrics(model, ranks, counter, registry);
  return registry;
}

/**
 * vLLM's speculative decoding counters: its acceptance rate is accepted over draft tokens, its
 * mean acceptance length 1 + accepted over drafts.
 */
function speculativeMetrics(
  model: string,
  ranks: () => readonly MockRank[],
  counter: (name: string, help: string, fn: (r: MockRank) => number) => void,
  registry: Registry,
): void {
  const accepted = (r: MockRank) => (r.speculative ? acceptedTokens(r.speculative) : 0);
  counter('vllm:spec_decode_num_drafts_total', 'Number of spec decoding drafts.', (r) => r.speculative?.drafts ?? 0);
  counter('vllm:spec_decode_num_draft_tokens_total', 'Number of draft tokens.', (r) => r.speculative?.draftTokens ?? 0);
  counter('vllm:spec_decode_num_accepted_tokens_total', 'Number of accepted tokens.', accepted);
  new Counter({
    name: 'vllm:spec_decode_num_accepted_tokens_per_pos_total',
    help: 'Accepted tokens per draft position.',
    labelNames: ['model_name', 'engine', 'position'],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of ranks())
        r.speculative?.acceptedPerPosition.forEach((count, position) => {
          this.inc({ model_name: model, engine: String(r.dpRank), position: String(position) }, count);
        });
    },
  });
}
