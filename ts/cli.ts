/**
 * The `kvroute` command: `replay`, `gen-trace`, `serve` and `mock-worker`.
 * @internal
 * @module
 */

import { accessSync, constants, existsSync, statSync, writeFileSync } from 'node:fs';
import { basename, dirname, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { BackendName } from './backend-types.js';
import { type Flags, helpText, parseCommand, UsageError } from './cli-args.js';
import { KvRouteError } from './errors.js';
import { runMockWorker } from './mock-worker/cli.js';
import { fleetWords } from './replay/disaggregation.js';
import { DISAGGREGATION_FLAGS, disaggregationFromFlags } from './replay/disaggregation-flags.js';
import { generateTrace, traceToJsonl } from './replay/generate.js';
import { renderHtml } from './replay/html.js';
import { PREEMPTION_MODES, type PreemptionMode } from './replay/preemption.js';
import { type ReplayOptions, type ReplayPolicy, replay } from './replay/replay.js';
import type { PolicyReport, ReplayReport } from './replay/report.js';
import type { ReplicaBalancer } from './replay/simulate.js';
import { meanBurst, type ResolvedSpeculative } from './replay/speculative.js';
import { SPECULATIVE_FLAGS, speculativeFromFlags } from './replay/speculative-flags.js';
import type { TimingModel } from './replay/timing.js';
import type { Selector } from './router/select.js';
import { runServe } from './server/cli.js';
import { runDemo } from './server/demo.js';
import { packageVersion } from './version.js';

const REPLAY_FLAGS: Flags = {
  workers: { kind: 'number', help: 'simulated workers', default: '16' },
  router: {
    kind: 'string',
    value: 'policy',
    help: 'kv, round-robin, random, or a path to a selector module (it is imported: its code runs)',
    default: 'kv',
  },
  compare: { kind: 'string', value: 'a,b,…', help: 'several policies side by side, instead of --router' },
  'block-size': { kind: 'number', help: 'tokens per KV block of the engines', default: '64' },
  'trace-block-size': { kind: 'number', help: 'tokens per hash id in the trace (Mooncake 512, Bailian 16)', default: '512' },
  'num-gpu-blocks': { kind: 'number', help: 'KV blocks per worker rank', default: '16384' },
  'cpu-offload-blocks': {
    kind: 'number',
    help: 'host-memory KV blocks per rank behind the GPU pool (CPU offload; the router hears and credits the host tier)',
    default: '0',
  },
  'cpu-load-us-per-token': { kind: 'number', help: "µs to load one token's KV back from host memory", default: '6' },
  'max-num-seqs': { kind: 'number', help: 'running requests per rank', default: '256' },
  'max-num-batched-tokens': { kind: 'number', help: 'tokens per engine pass', default: '8192' },
  'dp-size': { kind: 'number', help: 'data-parallel ranks per worker', default: '1' },
  speedup: { kind: 'number', help: 'divides every modelled engine duration', default: '1' },
  'decode-speedup': {
    kind: 'number',
    help: "divides decode time on top of --speedup (Dynamo's decode_speedup_ratio: speculative decoding)",
    default: '1',
  },
  ...SPECULATIVE_FLAGS,
  ...DISAGGREGATION_FLAGS,
  'no-enable-prefix-caching': {
    kind: 'boolean',
    help: "engines without prefix caching (vLLM's flag): nothing reused, no KV events; the baseline",
  },
  'preemption-mode': {
    kind: 'string',
    value: 'lifo|fifo',
    help: "which running request a rank preempts when its KV blocks run out: the newest (vLLM's rule) or the oldest (Dynamo's preemption_mode)",
    default: 'lifo',
  },
  timing: {
    kind: 'string',
    value: 'dynamo|classic',
    help: "engine pass timing: Dynamo 1.6's mocker, or kvroute's earlier model",
    default: 'dynamo',
  },
  'arrival-speedup': { kind: 'number', help: "divides the trace's arrival times", default: '1' },
  'router-config': { kind: 'string', value: 'json', help: 'KvRouter options as JSON, e.g. \'{"prefillLoadScale":1}\'' },
  variant: {
    kind: 'string',
    value: 'name=json',
    multiple: true,
    help: 'one more KV run, named, with KvRouter options of its own over --router-config, e.g. \'decay={"overlapScoreCreditDecay":1}\'; repeat for several',
  },
  sweep: {
    kind: 'string',
    value: 'option=v1,v2,…',
    help: 'one more KV run per value of a KvRouter option, over --router-config, e.g. overlapScoreCreditDecay=0,0.5,1',
  },
  limit: { kind: 'number', help: 'replay only the first N requests' },
  seed: { kind: 'number', help: 'seed of the routers and the workload', default: '42' },
  report: { kind: 'string', value: 'file', help: 'write the JSON report there' },
  html: { kind: 'string', value: 'file', help: 'write a self-contained HTML page there' },
  backend: { kind: 'string', value: 'native|js', help: 'the backend to run on', default: 'the process default' },
  replicas: { kind: 'number', help: 'router replicas behind a load balancer, each with its own index', default: '1' },
  'replica-sync': { kind: 'string', value: 'on|off', help: 'replicas share in-flight load', default: 'on' },
  'arrival-spread-ms': {
    kind: 'number',
    help: "spread each arrival by a seeded offset below this many ms of the trace's clock (for coarse timestamps)",
    default: '0',
  },
  'replica-sync-delay-ms': {
    kind: 'number',
    help: 'simulated time a sync message takes to reach the other replicas (a NATS hop), ms',
    default: '0',
  },
  'replica-lb': {
    kind: 'string',
    value: 'random|round-robin|session',
    help: "how the load balancer spreads arrivals (session: by a hash of the request's session)",
    default: 'random',
  },
};
const REPLAY_USAGE = helpText(
  'kvroute replay [trace.jsonl] [options]',
  'Replays a Mooncake-style trace through simulated vLLM-like workers behind each routing policy and\nreports TTFT, ITL, end-to-end latency and prefix-cache hits. Without a trace it uses the built-in\ngenerated workload (what gen-trace prints).',
  REPLAY_FLAGS,
);
const GEN_FLAGS: Flags = {
  requests: { kind: 'number', help: 'requests to generate', default: '2000' },
  rate: { kind: 'number', help: 'mean arrivals per second (Poisson)', default: '4' },
  'prefix-groups': { kind: 'number', help: 'distinct shared system prompts', default: '20' },
  'shared-prefix-blocks': { kind: 'number', help: 'length of each shared prompt, in trace blocks', default: '8' },
  turns: { kind: 'number', help: 'maximum turns per conversation', default: '4' },
  seed: { kind: 'number', help: 'seed of the generator', default: '1' },
};
const GEN_USAGE = helpText(
  'kvroute gen-trace [options] > trace.jsonl',
  'Prints a generated multi-turn trace in the Mooncake JSONL format.',
  GEN_FLAGS,
);
const USAGE = `usage: kvroute <command> [options]

commands:
  replay        replay a trace through simulated workers behind routing policies
  gen-trace     print a generated trace
  serve         run an OpenAI-compatible KV-aware gateway in front of workers
  demo          4 mock workers behind the gateway: a trace with KV routing, then round robin
  mock-worker   run a simulated vLLM worker (OpenAI HTTP API and vLLM-wire KV events)

kvroute <command> --help describes a command's options; kvroute --version prints the version.`;

async function loadPolicy(spec: string): Promise<ReplayPolicy> {
  if (spec === 'kv' || spec === 'round-robin' || spec === 'random') return spec;
  if (!existsSync(resolve(spec))) {
    throw new UsageError(`unknown policy "${spec}": use kv, round-robin, random, or the path of a selector module`, REPLAY_USAGE);
  }
  const mod = (await import(pathToFileURL(resolve(spec)).href)) as { default?: unknown; selector?: unknown };
  const selector = typeof mod.default === 'function' ? mod.default : mod.selector;
  if (typeof selector !== 'function') throw new UsageError(`${spec} exports no selector function (default export or 'selector')`);
  return { name: basename(spec), selector: selector as Selector };
}

/** `--variant name=json`: the KV policy under that name, with those router options. */
function parseVariant(spec: string): ReplayPolicy {
  const eq = spec.indexOf('=');
  if (eq < 1)
    throw new UsageError(
      `--variant must be name=json, e.g. 'decay={"overlapScoreCreditDecay":1}', got ${JSON.stringify(spec)}`,
      REPLAY_USAGE,
    );
  const name = spec.slice(0, eq);
  try {
    return { name, routerConfig: JSON.parse(spec.slice(eq + 1)) };
  } catch (err) {
    throw new UsageError(`--variant ${name}: its options are not valid JSON: ${(err as Error).message}`, REPLAY_USAGE);
  }
}

/** `--sweep option=v1,v2,…`: the KV policy once per value (JSON: numbers, booleans, null), named `option=value`. */
function parseSweep(spec: string): ReplayPolicy[] {
  const eq = spec.indexOf('=');
  if (eq < 1 || eq === spec.length - 1)
    throw new UsageError(`--sweep must be option=v1,v2,…, e.g. overlapScoreCreditDecay=0,0.5,1, got ${JSON.stringify(spec)}`, REPLAY_USAGE);
  const option = spec.slice(0, eq);
  return spec
    .slice(eq + 1)
    .split(',')
    .map((text) => {
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        throw new UsageError(
          `--sweep ${option}: ${JSON.stringify(text)} is not a JSON value (a number, true, false or null)`,
          REPLAY_USAGE,
        );
      }
      return { name: `${option}=${text}`, routerConfig: { [option]: value } };
    });
}

/** A bar on a terminal; without one, a plain line every few seconds (and at each policy's end). */
function progressBar(): (policy: string, done: number, total: number) => void {
  if (!process.stderr.isTTY) {
    let last = performance.now();
    return (policy, done, total) => {
      const now = performance.now();
      if (now - last < 5000 && done !== total) return;
      last = now;
      process.stderr.write(`replay ${policy}: ${done}/${total} requests\n`);
    };
  }
  return (policy, done, total) => {
    const width = 30;
    const filled = Math.round((done / total) * width);
    process.stderr.write(
      `\r${policy.padEnd(12)} [${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total}${done === total ? '\n' : ''}`,
    );
  };
}

const f = (n: number, digits = 1) => n.toFixed(digits);

/** How the report's header describes the replicas' sync. */
function syncLabel(sync: boolean | undefined, delayMs: number | undefined): string {
  if (!sync) return 'not sharing load';
  return delayMs ? `sharing load after ${delayMs} ms` : 'sharing load';
}

function table(report: ReplayReport): string {
  const p = report.policies;
  const rows: Array<[string, (x: PolicyReport) => string]> = [
    ['requests', (x) => String(x.requests)],
    ['TTFT mean ms', (x) => f(x.ttftMs.mean)],
    ['TTFT p50 ms', (x) => f(x.ttftMs.p50)],
    ['TTFT p99 ms', (x) => f(x.ttftMs.p99)],
    ['ITL mean ms', (x) => f(x.itlMs.mean, 2)],
    ['ITL p99 ms', (x) => f(x.itlMs.p99, 2)],
    ['TPOT mean ms', (x) => f(x.tpotMs.mean, 2)],
    ['E2E mean ms', (x) => f(x.e2eMs.mean)],
    ['E2E p99 ms', (x) => f(x.e2eMs.p99)],
    ['hit ratio', (x) => `${f(100 * x.hitRatio)}%`],
    // Only when requests were preempted (a preempted request often comes back to its own blocks).
    ...(p.some((x) => x.preemptions > 0)
      ? [
          ['hit ratio, first admission', (x: PolicyReport) => `${f(100 * x.firstAdmissionHitRatio)}%`] as [
            string,
            (x: PolicyReport) => string,
          ],
        ]
      : []),
    ['requests/s', (x) => f(x.throughput.requestsPerSec, 2)],
    ['output tokens/s', (x) => f(x.throughput.outputTokensPerSec, 0)],
    ['preemptions', (x) => String(x.preemptions)],
    // Only with CPU offload (`--cpu-offload-blocks`).
    ...(p.some((x) => x.hostLoadedBlocks > 0)
      ? [['host loads (blocks)', (x: PolicyReport) => String(x.hostLoadedBlocks)] as [string, (x: PolicyReport) => string]]
      : []),
    // Only with speculative decoding (`--num-speculative-tokens`).
    ...(p.some((x) => x.acceptLength !== undefined)
      ? [
          ['accept length', (x: PolicyReport) => (x.acceptLength === undefined ? '-' : f(x.acceptLength, 2))] as [
            string,
            (x: PolicyReport) => string,
          ],
        ]
      : []),
    // Only with session affinity (`sessionAffinityTtlSecs` in a policy's router options).
    ...(p.some((x) => x.sessions !== undefined)
      ? [
          ['session hits / binds', (x: PolicyReport) => (x.sessions ? `${x.sessions.hits} / ${x.sessions.bindings}` : '-')] as [
            string,
            (x: PolicyReport) => string,
          ],
        ]
      : []),
    ['simulated s', (x) => f(x.simulatedSeconds)],
    ['wall s', (x) => f(x.wallSeconds, 2)],
    ['sim s / wall s', (x) => f(x.simSecondsPerWallSecond, 0)],
    ['decisions / wall s', (x) => f(x.decisionsPerWallSecond, 0)],
  ];
  const head = ['', ...p.map((x) => x.name)];
  const body = rows.map(([label, get]) => [label, ...p.map(get)]);
  const widths = head.map((_, c) => Math.max(...[head, ...body].map((r) => r[c].length)));
  const line = (r: string[]) => r.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ');
  const upper = `${f(100 * report.trace.upperBoundHitRatio)}%`;
  const c = report.config as {
    workers: number;
    replicas?: number;
    replicaSync?: boolean;
    replicaSyncDelayMs?: number;
    replicaBalancer?: string;
    arrivalSpreadMs?: number;
    prefixCaching?: boolean;
    speculative?: ResolvedSpeculative;
    preemptionMode?: PreemptionMode;
  };
  const routers =
    (c.replicas ?? 1) > 1
      ? `, ${c.replicas} router replicas (${syncLabel(c.replicaSync, c.replicaSyncDelayMs)}, ${c.replicaBalancer} balancer)`
      : '';
  // Without prefix caching nothing can hit: the trace's ceiling would mislead.
  const caching = c.prefixCaching === false ? 'engines without prefix caching' : `hit ratio ceiling ${upper}`;
  const spec = c.speculative
    ? `; speculative decoding: ${c.speculative.draftTokens} drafts, acceptance ${c.speculative.acceptRates.join(',')} (${meanBurst(c.speculative).toFixed(2)} tokens a step)`
    : '';
  const fifo = c.preemptionMode === 'fifo' ? '; FIFO preemption (the oldest running request goes first)' : '';
  const spread = c.arrivalSpreadMs ? `; arrivals spread over ${c.arrivalSpreadMs} ms` : '';
  const fleet = fleetWords(report.config);
  return `${report.trace.requests} requests (${report.trace.path ?? 'built-in generated workload'}), ${fleet}${routers}; ${caching}${spec}${fifo}${spread}\n\n${[line(head), ...body.map(line)].join('\n')}\n`;
}

/** `--preemption-mode`'s value, checked before the trace is read. */
function preemptionModeFlag(value: unknown): PreemptionMode {
  if (PREEMPTION_MODES.includes(value as PreemptionMode)) return value as PreemptionMode;
  throw new UsageError(`--preemption-mode must be lifo or fifo, got ${String(value)}`, REPLAY_USAGE);
}

/** Fails before a long simulation if its outputs cannot be written. */
function checkWritable(path: string, flag: string): void {
  const full = resolve(path);
  if (existsSync(full) && statSync(full).isDirectory()) throw new UsageError(`--${flag} ${path} is a directory`, REPLAY_USAGE);
  try {
    accessSync(existsSync(full) ? full : dirname(full), constants.W_OK);
  } catch {
    throw new UsageError(`--${flag} ${path} cannot be written`, REPLAY_USAGE);
  }
}

async function runReplay(argv: string[]): Promise<void> {
  const { positional, values: v, help } = parseCommand(argv, REPLAY_FLAGS, REPLAY_USAGE);
  if (help) {
    process.stdout.write(REPLAY_USAGE);
    return;
  }
  if (positional.length > 1) throw new UsageError('replay takes at most one trace file', REPLAY_USAGE);
  if (v.router !== undefined && v.compare !== undefined) throw new UsageError('use --router or --compare, not both', REPLAY_USAGE);
  if (v.report !== undefined) checkWritable(String(v.report), 'report');
  if (v.html !== undefined) checkWritable(String(v.html), 'html');
  const specs = v.compare !== undefined ? String(v.compare).split(',').filter(Boolean) : [String(v.router ?? 'kv')];
  let routerConfig: ReplayOptions['routerConfig'];
  if (v['router-config'] !== undefined) {
    try {
      routerConfig = JSON.parse(String(v['router-config']));
    } catch (err) {
      throw new UsageError(`--router-config is not valid JSON: ${(err as Error).message}`, REPLAY_USAGE);
    }
  }
  const variants = [
    ...((v.variant as string[] | undefined) ?? []).map(parseVariant),
    ...(v.sweep === undefined ? [] : parseSweep(String(v.sweep))),
  ];
  const num = (k: string) => v[k] as number | undefined;
  const sync = v['replica-sync'];
  if (sync !== undefined && sync !== 'on' && sync !== 'off') throw new UsageError('--replica-sync must be on or off', REPLAY_USAGE);
  // Said in the flags' words here: replay's own message names the API's options.
  if (sync === 'off' && v['replica-sync-delay-ms'] !== undefined)
    throw new UsageError('--replica-sync-delay-ms needs --replica-sync on (the replicas share nothing without it)', REPLAY_USAGE);
  const report = await replay({
    ...(positional[0] ? { trace: positional[0] } : {}),
    policies: [...(await Promise.all(specs.map(loadPolicy))), ...variants],
    workers: num('workers'),
    blockSize: num('block-size'),
    traceBlockSize: num('trace-block-size'),
    numGpuBlocks: num('num-gpu-blocks'),
    cpuOffloadBlocks: num('cpu-offload-blocks'),
    cpuLoadUsPerToken: num('cpu-load-us-per-token'),
    maxNumSeqs: num('max-num-seqs'),
    maxNumBatchedTokens: num('max-num-batched-tokens'),
    dpSize: num('dp-size'),
    speedup: num('speedup'),
    decodeSpeedup: num('decode-speedup'),
    ...speculativeFromFlags(v, REPLAY_USAGE),
    ...disaggregationFromFlags(v, REPLAY_USAGE),
    ...(v['no-enable-prefix-caching'] === true ? { prefixCaching: false } : {}),
    ...(v.timing !== undefined ? { timing: v.timing as TimingModel } : {}),
    ...(v['preemption-mode'] !== undefined ? { preemptionMode: preemptionModeFlag(v['preemption-mode']) } : {}),
    arrivalSpeedup: num('arrival-speedup'),
    limit: num('limit'),
    seed: num('seed'),
    ...(routerConfig ? { routerConfig } : {}),
    ...(v.backend !== undefined ? { backend: v.backend as BackendName } : {}),
    replicas: num('replicas'),
    ...(sync !== undefined ? { replicaSync: sync === 'on' } : {}),
    ...(v['replica-sync-delay-ms'] !== undefined ? { replicaSyncDelayMs: num('replica-sync-delay-ms') } : {}),
    ...(v['arrival-spread-ms'] !== undefined ? { arrivalSpreadMs: num('arrival-spread-ms') } : {}),
    ...(v['replica-lb'] !== undefined ? { replicaBalancer: v['replica-lb'] as ReplicaBalancer } : {}),
    onProgress: progressBar(),
  });
  process.stdout.write(`backend: ${String(report.config.backend)}\n${table(report)}`);
  if (v.report !== undefined) writeFileSync(String(v.report), `${JSON.stringify(report, null, 2)}\n`);
  if (v.html !== undefined) writeFileSync(String(v.html), renderHtml(report));
}

function runGenTrace(argv: string[]): void {
  const { positional, values: v, help } = parseCommand(argv, GEN_FLAGS, GEN_USAGE);
  if (help) {
    process.stdout.write(GEN_USAGE);
    return;
  }
  if (positional.length > 0) throw new UsageError('gen-trace takes no positional arguments', GEN_USAGE);
  const trace = generateTrace({
    requests: v.requests as number | undefined,
    rate: v.rate as number | undefined,
    prefixGroups: v['prefix-groups'] as number | undefined,
    sharedPrefixBlocks: v['shared-prefix-blocks'] as number | undefined,
    turns: v.turns as number | undefined,
    seed: v.seed as number | undefined,
  });
  process.stdout.write(traceToJsonl(trace));
}

/** Runs the command line; returns the exit code (0 ok, 1 failure, 2 usage). */
export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    if (command === 'replay') await runReplay(rest);
    else if (command === 'gen-trace') runGenTrace(rest);
    else if (command === 'mock-worker') return await runMockWorker(rest);
    else if (command === 'serve') return await runServe(rest);
    else if (command === 'demo') return await runDemo(rest);
    else if (command === '--version' || command === '-v') process.stdout.write(`kvroute ${packageVersion()}\n`);
    else if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
      process.stdout.write(`${USAGE}\n`);
      return command === undefined ? 2 : 0;
    } else throw new UsageError(`unknown command "${command}"`, USAGE);
    return 0;
  } catch (err) {
    if (err instanceof UsageError || (err instanceof KvRouteError && err.code === 'ERR_INVALID_ARG')) {
      const usage = err instanceof UsageError && err.usage ? `\n${err.usage}\n` : '';
      process.stderr.write(`kvroute: ${err.message}\n${usage}`);
      return 2;
    }
    process.stderr.write(`kvroute: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}
