import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, test } from 'vitest';
import { mockTokenize, writeMockTokenizer } from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { killCommandsAfterEach, runCommand } from './helpers/cli-process.js';
import { requireDist } from './helpers/dist.js';
import { postJson, sse } from './helpers/http.js';
import { scrape } from './helpers/prometheus.js';
import { scratchDir } from './helpers/scratch-dir.js';
import { sleep, waitFor } from './helpers/wait.js';

killCommandsAfterEach();

describe('kvroute serve as a command', () => {
  test('serves a fleet of mock-worker processes from a YAML config; SIGTERM drains and exits 0', async () => {
    requireDist();
    const workerLine = /(http:\/\/127\.0\.0\.1:\d+), KV events (tcp:\/\/\S+), replay (tcp:\/\/\S+)/;
    const workers = await Promise.all(
      [0, 1].map(() =>
        runCommand(
          ['mock-worker', '--port', '0', '--kv-events', 'tcp://127.0.0.1:0', '--replay', 'tcp://127.0.0.1:0', '--speedup', '20'],
          workerLine,
        ),
      ),
    );
    const found = await Promise.all(workers.map((w) => w.match));
    const dir = scratchDir('kvroute-serve-');
    const config = join(dir, 'fleet.yaml');
    writeFileSync(
      config,
      [
        'blockSize: 16',
        'health: { intervalMs: 200 }',
        'workers:',
        ...found.map((m, i) => `  - { id: ${i + 1}, url: "${m[1]}", kvEvents: "${m[2]}", replay: "${m[3]}" }`),
        '',
      ].join('\n'),
    );
    const serve = runCommand(['serve', '--config', config, '--port', '0', '--log-level', 'info'], /proxy (http:\/\/127\.0\.0\.1:\d+)/);
    const url = (await serve.match)[1];
    await sleep(300);
    const prompt = 'a shared prefix that both requests start with, long enough for a few blocks ';
    const a = await postJson(`${url}/v1/completions`, { prompt: `${prompt}one`, max_tokens: 3 });
    expect(a.status).toBe(200);
    await sleep(200);
    const b = await sse(
      `${url}/v1/completions`,
      { prompt: `${prompt}two`, max_tokens: 3, stream: true, model: 'mock-model' },
      { 'x-dynamo-session-id': 'agent-7', traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
    );
    expect(b.headers.get('x-kvroute-worker')).toBe(a.headers.get('x-kvroute-worker'));
    expect(Number(b.headers.get('x-kvroute-cached-tokens'))).toBeGreaterThan(0);
    serve.child.kill('SIGTERM');
    expect(await serve.exited).toBe(0);
    // One structured line per request, without the prompt text.
    const lines = serve
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"request"'))
      .map((l) => JSON.parse(l));
    expect(lines.length).toBe(2);
    expect(lines[0]).toMatchObject({ model: null, salted: false });
    expect(lines[0]).not.toHaveProperty('sessionId');
    expect(lines[0]).not.toHaveProperty('traceId');
    expect(lines[1]).toMatchObject({
      status: 200,
      stream: true,
      worker: a.headers.get('x-kvroute-worker'),
      model: 'mock-model',
      sessionId: 'agent-7',
      traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
    });
    expect(serve.output()).not.toContain('shared prefix');
    for (const w of workers) w.child.kill('SIGTERM');
  });

  test("SGLang's disaggregation from the command line: mock workers in its modes, a gateway speaking its protocol", async () => {
    requireDist();
    const prefill = runCommand(
      ['mock-worker', '--port', '0', '--disaggregation-mode', 'prefill', '--disaggregation-bootstrap-port', '0', '--speedup', '20'],
      /(http:\/\/127\.0\.0\.1:\d+), no KV events, prefill legs \(bootstrap port (\d+)\)/,
    );
    const decode = runCommand(
      ['mock-worker', '--port', '0', '--disaggregation-mode', 'decode', '--speedup', '20'],
      /(http:\/\/127\.0\.0\.1:\d+), no KV events, decode legs\n/,
    );
    const [p, d] = await Promise.all([prefill.match, decode.match]);
    const serve = runCommand(
      [
        'serve',
        '--block-size',
        '16',
        '--port',
        '0',
        '--disaggregation-protocol',
        'sglang',
        '--router-config',
        '{"useKvEvents":false}',
        '--worker',
        `id=1,url=${p[1]},role=prefill,bootstrap-port=${p[2]}`,
        '--worker',
        `id=2,url=${d[1]},role=decode`,
      ],
      /proxy (http:\/\/127\.0\.0\.1:\d+)/,
    );
    const url = (await serve.match)[1];
    await sleep(300);
    const r = await postJson(`${url}/v1/completions`, { model: 'mock-model', prompt: 'hello there, from the command line', max_tokens: 3 });
    expect(r.status).toBe(200);
    expect(r.json.usage.completion_tokens).toBe(3);
    expect([r.headers.get('x-kvroute-prefill-worker'), r.headers.get('x-kvroute-worker')]).toEqual(['1', '2']);
    serve.child.kill('SIGTERM');
    expect(await serve.exited).toBe(0);
    const bad = runCommand(['serve', '--block-size', '16', '--disaggregation-protocol', 'nixl'], /never/);
    bad.match.catch(() => undefined);
    expect(await bad.exited).toBe(2);
    expect(bad.errors()).toMatch(/disaggregation\.protocol must be one of 'vllm', 'trtllm', 'sglang', got "nixl"/);
    const badPort = runCommand(['mock-worker', '--port', '0', '--disaggregation-bootstrap-port', '70000'], /never/);
    badPort.match.catch(() => undefined);
    expect(await badPort.exited).toBe(2);
    expect(badPort.errors()).toMatch(/--disaggregation-bootstrap-port must be/);
    for (const w of [prefill, decode]) w.child.kill('SIGTERM');
  });

  test("vLLM's chat-template flags shape the local tokenizer; with the engine tokenizer they are a usage error", async () => {
    requireDist();
    const dir = scratchDir('kvroute-serve-');
    const path = writeMockTokenizer(dir);
    const file = join(dir, 'template.jinja');
    // Loops over a message's content, so auto gives it OpenAI's parts; "string" takes the other branch.
    writeFileSync(
      file,
      'F{% for m in messages %}{% if m.content is string %}S{{ m.content }}{% else %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}{% endfor %}',
    );
    const worker = runCommand(
      ['mock-worker', '--port', '0', '--kv-events', 'tcp://127.0.0.1:0', '--replay', 'tcp://127.0.0.1:0'],
      /(http:\/\/127\.0\.0\.1:\d+)/,
    );
    const workerFlag = `id=1,url=${(await worker.match)[1]}`;
    const explain = async (flags: string[]) => {
      const serve = runCommand(
        ['serve', '--block-size', '16', '--port', '0', '--log-level', 'off', '--worker', workerFlag, '--tokenizer', path, ...flags],
        /admin (http:\/\/127\.0\.0\.1:\d+)/,
      );
      const admin = (await serve.match)[1];
      let r = await postJson(`${admin}/admin/explain`, { messages: [{ role: 'user', content: 'hi' }] });
      // The worker joins routing at its first health check.
      for (let i = 0; i < 50 && r.status !== 200; i++) {
        await sleep(100);
        r = await postJson(`${admin}/admin/explain`, { messages: [{ role: 'user', content: 'hi' }] });
      }
      serve.child.kill('SIGTERM');
      expect(await serve.exited).toBe(0);
      return r.json.tokens;
    };
    expect(await explain(['--chat-template', file])).toEqual(mockTokenize('Fhi'));
    expect(await explain(['--chat-template', file, '--chat-template-content-format', 'string'])).toEqual(mockTokenize('FShi'));
    expect(await explain(['--chat-template', 'L{{ messages[0].content }}'])).toEqual(mockTokenize('Lhi'));
    for (const [flags, message] of [
      [['--chat-template-content-format', 'string'], /--chat-template-content-format shapes a local tokenizer/],
      [
        ['--tokenizer', path, '--chat-template', join(dir, 'missing.jinja')],
        /--chat-template .*missing\.jinja looks like a file, but there is none/,
      ],
      [['--tokenizer', path, '--chat-template-content-format', 'json'], /chatTemplateContentFormat must be 'auto', 'string' or 'openai'/],
    ] as const) {
      const bad = runCommand(['serve', '--block-size', '16', ...flags], /never/);
      bad.match.catch(() => undefined);
      expect(await bad.exited).toBe(2);
      expect(bad.errors()).toMatch(message);
    }
    worker.child.kill('SIGTERM');
  });

  test('SIGTERM with --shutdown-delay-secs: serves on, not ready; a second SIGTERM closes at once', async () => {
    requireDist();
    const worker = runCommand(['mock-worker', '--port', '0'], /(http:\/\/127\.0\.0\.1:\d+)/);
    const workerUrl = (await worker.match)[1];
    const serve = runCommand(
      ['serve', '--block-size', '16', '--port', '0', '--worker', `id=1,url=${workerUrl}`, '--shutdown-delay-secs', '600'],
      /proxy (http:\/\/127\.0\.0\.1:\d+)/,
    );
    const url = (await serve.match)[1];
    await waitFor(async () => (await fetch(`${url}/ready`)).status === 200, 'the worker to be ready');
    serve.child.kill('SIGTERM');
    await waitFor(async () => (await fetch(`${url}/ready`)).status === 503, 'not ready');
    expect((await postJson(`${url}/v1/completions`, { prompt: 'still served', max_tokens: 1 })).status).toBe(200);
    serve.child.kill('SIGTERM');
    expect(await serve.exited).toBe(0);
    worker.child.kill('SIGTERM');
    const bad = runCommand(['serve', '--block-size', '16', '--shutdown-delay-secs=-1'], /never/);
    bad.match.catch(() => undefined);
    expect(await bad.exited).toBe(2);
    expect(bad.errors()).toMatch(/--shutdown-delay-secs must be a number of seconds in \[0, 86400\]/);
  });

  test.each(BACKENDS)(
    "/metrics carries the process's own metrics beside the gateway's (%s): memory, CPU, event-loop delay, GC",
    async (backend) => {
      requireDist();
      const serve = runCommand(['serve', '--block-size', '16', '--port', '0', '--backend', backend], /proxy (http:\/\/127\.0\.0\.1:\d+)/);
      const url = (await serve.match)[1];
      const m = await scrape(`${url}/metrics`);
      expect(m.sum('process_resident_memory_bytes')).toBeGreaterThan(10 * 2 ** 20);
      expect(m.sum('nodejs_heap_size_used_bytes')).toBeGreaterThan(0);
      expect(m.sum('process_cpu_seconds_total')).toBeGreaterThan(0);
      expect(m.has('nodejs_eventloop_lag_p99_seconds')).toBe(true);
      expect(m.has('nodejs_gc_duration_seconds')).toBe(true);
      expect(m.sum('kvroute_gateway_build_info', { backend })).toBe(1);
      serve.child.kill('SIGTERM');
      expect(await serve.exited).toBe(0);
    },
  );

  test('a bad config or flag exits 2 with the key named', async () => {
    requireDist();
    const dir = scratchDir('kvroute-serve-');
    const config = join(dir, 'bad.yaml');
    writeFileSync(config, 'blockSize: 16\nworkers:\n  - { id: 1, url: "not a url" }\n');
    const bad = runCommand(['serve', '--config', config], /never/);
    bad.match.catch(() => undefined);
    expect(await bad.exited).toBe(2);
    expect(bad.errors()).toMatch(/workers\[0\]\.url/);
    const flag = runCommand(['serve', '--block-size', '16', '--worker', 'id=1,uri=http://x'], /never/);
    flag.match.catch(() => undefined);
    expect(await flag.exited).toBe(2);
    expect(flag.errors()).toMatch(/--worker: "uri=http:\/\/x"/);
    const role = runCommand(['serve', '--block-size', '16', '--worker', 'id=1,url=http://127.0.0.1:1,role=both'], /never/);
    role.match.catch(() => undefined);
    expect(await role.exited).toBe(2);
    expect(role.errors()).toMatch(/workers\[0\]\.role must be one of 'aggregated', 'prefill', 'decode', got "both"/);
    const bypass = runCommand(
      ['serve', '--block-size', '16', '--worker', 'id=1,url=http://127.0.0.1:1', '--disaggregation-bypass-below-tokens', '1.5'],
      /never/,
    );
    bypass.match.catch(() => undefined);
    expect(await bypass.exited).toBe(2);
    expect(bypass.errors()).toMatch(/disaggregation\.bypassBelowTokens must be an integer in \[0, 2147483648\], got 1\.5/);
    const policy = runCommand(
      [
        'serve',
        '--block-size',
        '16',
        '--worker',
        'id=1,url=http://127.0.0.1:1',
        '--router-config',
        '{"selectionPolicy":"lmetric","prefillLoadScale":2}',
      ],
      /never/,
    );
    policy.match.catch(() => undefined);
    expect(await policy.exited).toBe(2);
    expect(policy.errors()).toMatch(
      /router\.prefillLoadScale is a term of the linear cost and has no effect with selectionPolicy 'lmetric'/,
    );
    const discover = runCommand(['serve', '--block-size', '16', '--discover-srv', 'not a name!', '--dns-server', '127.0.0.1:1'], /never/);
    discover.match.catch(() => undefined);
    expect(await discover.exited).toBe(2);
    expect(discover.errors()).toMatch(/discovery\.srv must be a DNS name, got "not a name!"/);
    const both = runCommand(['serve', '--block-size', '16', '--discover-srv', 'a.test', '--discover-host', 'b.test'], /never/);
    both.match.catch(() => undefined);
    expect(await both.exited).toBe(2);
    expect(both.errors()).toMatch(/discovery needs exactly one of srv .* and host/);
    const none = runCommand(['serve'], /never/);
    none.match.catch(() => undefined);
    expect(await none.exited).toBe(2);
    expect(none.errors()).toMatch(/--block-size/);
  });
});
