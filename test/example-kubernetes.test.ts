import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, test } from 'vitest';
import { parseAllDocuments } from 'yaml';
import type { MockWorker } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { killCommandsAfterEach, runCommand } from './helpers/cli-process.js';
import { ROOT, requireDist } from './helpers/dist.js';
import { DnsServer } from './helpers/dns-server.js';
import { closeFleetsAfterEach, startWorker } from './helpers/gateway.js';
import { postJson } from './helpers/http.js';
import { NatsServer } from './helpers/nats-server.js';
import { OtlpReceiver } from './helpers/otlp-receiver.js';
import { scrape } from './helpers/prometheus.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { waitFor } from './helpers/wait.js';

closeFleetsAfterEach();
killCommandsAfterEach();

const DIR = join(ROOT, 'examples', 'kubernetes');

// biome-ignore lint/suspicious/noExplicitAny: Kubernetes objects, read field by field below
type K8sObject = any;

function manifests(file: string): K8sObject[] {
  return parseAllDocuments(readFileSync(join(DIR, file), 'utf8')).map((d) => d.toJS());
}

const kvroute = manifests('kvroute.yaml');
const vllm = manifests('vllm.yaml');
const configMap = kvroute.find((o) => o.kind === 'ConfigMap');
const deployment = kvroute.find((o) => o.kind === 'Deployment');
const container = deployment.spec.template.spec.containers[0];
const fleet = parseAllDocuments(configMap.data['fleet.yaml'])[0].toJS();

/** `--flag=value` and `--flag value` as [flag, value] pairs (a boolean flag's value undefined). */
function flagPairs(args: string[]): [string, string | undefined][] {
  const pairs: [string, string | undefined][] = [];
  for (let i = 0; i < args.length; i++) {
    const eq = args[i].indexOf('=');
    if (eq > 0) pairs.push([args[i].slice(0, eq), args[i].slice(eq + 1)]);
    else if (args[i + 1] !== undefined && !args[i + 1].startsWith('--')) pairs.push([args[i], args[++i]]);
    else pairs.push([args[i], undefined]);
  }
  return pairs;
}

describe('examples/kubernetes: the manifests agree with each other', () => {
  test("kvroute's SRV names are the headless Service's named ports, in its namespace", () => {
    const service = vllm.find((o) => o.kind === 'Service');
    expect(service.spec.clusterIP).toBe('None');
    const zone = `${service.metadata.name}.${service.metadata.namespace}.svc.cluster.local`;
    const srv = (port: string) => `_${port}._tcp.${zone}`;
    const names = service.spec.ports.map((p: { name: string }) => p.name);
    expect(fleet.discovery).toMatchObject({ srv: srv('http'), kvEventsSrv: srv('kv-events'), replaySrv: srv('replay') });
    expect(names).toEqual(expect.arrayContaining(['http', 'kv-events', 'replay']));
    // The engines' block size and KV-event ports are the ones the gateway is told.
    const engineArgs = new Map(flagPairs(vllm.find((o) => o.kind === 'Deployment').spec.template.spec.containers[0].args));
    expect(Number(engineArgs.get('--block-size'))).toBe(fleet.blockSize);
    const events = JSON.parse(engineArgs.get('--kv-events-config') as string);
    const port = (name: string) => service.spec.ports.find((p: { name: string }) => p.name === name).targetPort;
    expect(events).toMatchObject({ enable_kv_cache_events: true, publisher: 'zmq' });
    expect([events.endpoint, events.replay_endpoint]).toEqual([`tcp://*:${port('kv-events')}`, `tcp://*:${port('replay')}`]);
    // The probes and the config volume point where the command serves and reads.
    const args = new Map(flagPairs(container.args.slice(1)));
    const containerPort = (name: string) => container.ports.find((p: { name: string }) => p.name === name).containerPort;
    expect(String(containerPort('http'))).toBe(args.get('--port'));
    expect(String(containerPort('metrics'))).toBe(args.get('--metrics-port'));
    expect(args.get('--config')).toBe(`${container.volumeMounts[0].mountPath}/fleet.yaml`);
    expect(deployment.spec.template.spec.terminationGracePeriodSeconds).toBeGreaterThan(
      Number(args.get('--shutdown-delay-secs')) + Number(args.get('--drain-timeout-secs')),
    );
  });
});

describe.each(BACKENDS)("examples/kubernetes: kvroute.yaml's command, config and probes, run (%s)", (backend) => {
  const dns = new DnsServer();
  const nats = new NatsServer();
  beforeAll(() => nats.start());
  afterAll(async () => {
    await nats.dispose();
  });
  afterEach(() => dns.stop());

  test('discovers a pod under the SRV names, serves it, shares load over NATS, exports spans, and shuts down as the probes expect', async () => {
    requireDist();
    const worker: MockWorker = await startWorker();
    const pod = 'pod-0.vllm.default.svc.cluster.local';
    const port = (url: string) => Number(new URL(url).port);
    await dns.serve(
      [
        [fleet.discovery.srv, pod, port(worker.url)],
        [fleet.discovery.kvEventsSrv, pod, port(worker.kvEventsEndpoints[0])],
        [fleet.discovery.replaySrv, pod, port(worker.replayEndpoints[0])],
      ],
      [pod],
    );
    const receiver = new OtlpReceiver();
    const traces = await receiver.start();
    const config = join(scratchDir('kvroute-k8s-'), 'fleet.yaml');
    writeFileSync(config, configMap.data['fleet.yaml']);
    // The manifest's command with this machine's addresses in place of the cluster's.
    const local: Record<string, string> = {
      '--config': config,
      '--host': '127.0.0.1',
      '--port': '0',
      '--metrics-host': '127.0.0.1',
      '--metrics-port': '0',
      '--replicas': nats.url,
      '--otlp-traces-endpoint': traces,
    };
    const [command, ...rest] = container.args as string[];
    expect(command).toBe('serve');
    const pairs = flagPairs(rest);
    expect(pairs.map(([f]) => f)).toEqual(expect.arrayContaining(Object.keys(local)));
    const args = pairs.flatMap(([flag, value]) => (value === undefined ? [flag] : [flag, local[flag] ?? value]));
    const serve = runCommand(
      ['serve', ...args, '--dns-server', dns.server, '--backend', backend],
      /proxy (http:\/\/127\.0\.0\.1:\d+), admin (http:\/\/127\.0\.0\.1:\d+)/,
    );
    try {
      const [, proxy, admin] = await serve.match;
      const probe = (probeSpec: K8sObject) =>
        fetch(`${probeSpec.httpGet.port === 'metrics' ? admin : proxy}${probeSpec.httpGet.path}`).then((r) => r.status);
      await waitFor(async () => (await probe(container.readinessProbe)) === 200, 'ready: the pod discovered');
      expect(await probe(container.livenessProbe)).toBe(200);
      const r = await postJson(`${proxy}/v1/completions`, { prompt: 'hello from the cluster', max_tokens: 2 });
      expect(r.status).toBe(200);
      const m = await scrape(`${admin}/metrics`);
      expect(m.sum('kvroute_gateway_discovered_workers', { srv: fleet.discovery.srv })).toBe(1);
      expect(m.sum('kvroute_gateway_requests_total', { status: '200' })).toBe(1);
      expect(m.sum('kvroute_replica_connected')).toBe(1);

      // SIGTERM: not ready at once, still serving through the delay; a second signal ends it.
      serve.child.kill('SIGTERM');
      await waitFor(async () => (await probe(container.readinessProbe)) === 503, 'not ready while shutting down');
      expect((await postJson(`${proxy}/v1/completions`, { prompt: 'one more', max_tokens: 1 })).status).toBe(200);
      serve.child.kill('SIGTERM');
      expect(await serve.exited).toBe(0);
      expect(receiver.spans.filter((s) => s.kind === 2 && s.name === 'POST /v1/completions')).toHaveLength(2);
    } finally {
      await receiver.close();
    }
  });
});
