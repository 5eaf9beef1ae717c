import { describe, expect, test } from 'vitest';
import * as kvroute from '../ts/index.js';
import { BACKENDS } from './helpers/backends.js';
import { chatmlBytes } from './helpers/tokenizer-files.js';

/** Values a careless or hostile caller may pass anywhere. */
const HOSTILE: unknown[] = [
  undefined,
  null,
  true,
  0,
  -1,
  1.5,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  2 ** 64,
  -(2n ** 70n),
  2n ** 70n,
  '',
  'x',
  '\uD800',
  Symbol('s'),
  [],
  [Symbol('t')],
  [null],
  {},
  Object.create(null),
  () => 0,
  new Map(),
  new Date(0),
  Uint8Array.of(0xc1),
  {
    [Symbol.toPrimitive]() {
      throw new Error('toPrimitive');
    },
  },
];

/** Calls `fn` and requires that it either returns or throws/rejects a KvRouteError. */
/** KvRouter options of the cost, its selection policy and predict-on-route, each given every hostile value. */
const COST_OPTIONS = [
  'prefillLoadScale',
  'overlapScoreWeight',
  'overlapScoreCredit',
  'overlapScoreCreditDecay',
  'decodeActiveRequestWeight',
  'sharedCacheMultiplier',
  'selectionPolicy',
  'workerType',
  'sessionAffinityTtlSecs',
  'routerPredictedTtlSecs',
] as const;

async function onlyKvRouteErrors(what: string, fn: () => unknown): Promise<void> {
  let result: unknown;
  try {
    result = fn();
    if (result instanceof Promise) await result;
  } catch (err) {
    if (!(err instanceof kvroute.KvRouteError))
      throw new Error(`${what} threw ${err instanceof Error ? `${err.name}: ${err.message}` : String(err)}`);
  }
}

/**
 * The option keys `make` knows, read from its refusal of an unknown one ("(known: …)"), so that
 * these cases follow the code. With `required`, a refusal that lists none fails the test.
 */
async function knownKeys(make: (opts: object) => unknown, required = true): Promise<string[]> {
  try {
    await make({ zzUnknownKey: 1 });
  } catch (err) {
    const m = /\(known: ([^)]*)\)/.exec((err as Error).message);
    if (m) return m[1].split(', ');
  }
  if (required) throw new Error('the refusal of an unknown key did not list the known ones');
  return [];
}

const label = (v: unknown) =>
  typeof v === 'symbol'
    ? 'Symbol'
    : typeof v === 'bigint'
      ? `${v}n`
      : typeof v === 'function'
        ? 'function'
        : Object.prototype.toString.call(v);

const FUNCTIONS: [string, (...a: unknown[]) => unknown][] = [
  ['blockHashes', kvroute.blockHashes as never],
  ['sequenceHashes', kvroute.sequenceHashes as never],
  ['xxh3_64', kvroute.xxh3_64 as never],
  ['decodeEngineBatch', kvroute.decodeEngineBatch as never],
  ['parseEvents', kvroute.parseEvents as never],
  ['stringifyEvents', kvroute.stringifyEvents as never],
  ['parseTrace', kvroute.parseTrace as never],
  ['generateTrace', kvroute.generateTrace as never],
  ['encodeEngineBatch', kvroute.encodeEngineBatch as never],
  ['mockTokenize', kvroute.mockTokenize as never],
  ['mockDetokenize', kvroute.mockDetokenize as never],
  ['renderMockChat', kvroute.renderMockChat as never],
  ['createGateway', kvroute.createGateway as never],
  ['metrics', kvroute.metrics as never],
  ['loadTrace', kvroute.loadTrace as never],
  ['synthesizeTokens', kvroute.synthesizeTokens as never],
  ['upperBoundHitRatio', kvroute.upperBoundHitRatio as never],
  ['traceToJsonl', kvroute.traceToJsonl as never],
  ['warmStart', kvroute.warmStart as never],
  ['new IndexSnapshotWriter', ((...a: unknown[]) => new kvroute.IndexSnapshotWriter(...(a as [never, never]))) as never],
  ['new ReplicaBus', ((...a: unknown[]) => new kvroute.ReplicaBus(...(a as []))) as never],
  ['new JsonFloat', ((...a: unknown[]) => new kvroute.JsonFloat(...(a as [never]))) as never],
  // An object is a set of options that would start a real run: hostile values go in as the
  // options themselves, or as the trace of a one-request run.
  [
    'replay',
    ((v: unknown) =>
      kvroute.replay((v !== null && typeof v === 'object' && !Array.isArray(v) ? { trace: v, workers: 1 } : v) as never)) as never,
  ],
  // An object is a set of options that would start a real worker; every other value must be refused.
  ['startMockWorker', ((v: unknown) => (v !== null && typeof v === 'object' ? undefined : kvroute.startMockWorker(v as never))) as never],
  // Strings are paths it would write to; every other value must be refused.
  [
    'writeMockTokenizer',
    ((v: unknown) => (typeof v === 'string' && v !== '' ? undefined : kvroute.writeMockTokenizer(v as never))) as never,
  ],
];

describe('every public entry point throws only KvRouteError for bad arguments', () => {
  test.each(FUNCTIONS)('%s', async (name, fn) => {
    for (const v of HOSTILE) {
      await onlyKvRouteErrors(`${name}(${label(v)})`, () => fn(v));
      await onlyKvRouteErrors(`${name}(${label(v)} × 4)`, () => fn(v, v, v, v));
      await onlyKvRouteErrors(`${name}([1,2,3,4], ${label(v)})`, () => fn([1, 2, 3, 4], v));
      await onlyKvRouteErrors(`${name}([1,2,3,4], 4, ${label(v)})`, () => fn([1, 2, 3, 4], 4, v));
    }
  });

  test.each(BACKENDS)('KvIndex and KvRouter constructors and methods (%s)', async (backend) => {
    for (const v of HOSTILE) {
      await onlyKvRouteErrors(`new KvIndex(${label(v)})`, () => new kvroute.KvIndex(v as never));
      await onlyKvRouteErrors(
        `new KvIndex({blockSize: 4, backend: ${label(v)}})`,
        () => new kvroute.KvIndex({ blockSize: 4, backend: v as never }),
      );
      await onlyKvRouteErrors(`new KvRouter(${label(v)})`, () => new kvroute.KvRouter(v as never));
      // The cost's weights and predict-on-route: refused with KvRouteError, or accepted (and closed).
      for (const key of COST_OPTIONS) {
        await onlyKvRouteErrors(`new KvRouter({blockSize: 4, ${key}: ${label(v)}})`, () =>
          new kvroute.KvRouter({ blockSize: 4, backend, [key]: v } as never).close(),
        );
      }
    }
    const index = new kvroute.KvIndex({ blockSize: 4, backend, approximate: { ttlMs: 1000 } });
    const router = new kvroute.KvRouter({ blockSize: 4, backend });
    router.addWorker(1);
    // The public methods (TypeScript's private ones are on the prototype too, but not API).
    const PUBLIC: Record<string, string[]> = {
      KvIndex: [
        'applyEvent',
        'applyEvents',
        'flush',
        'findMatches',
        'findMatchesForRequest',
        'recordRouting',
        'removeWorker',
        'subscribe',
        'engineSources',
        'applyEngineBatch',
        'engineStats',
        'dump',
        'stats',
      ],
      KvRouter: [
        'addWorker',
        'updateWorker',
        'removeWorker',
        'subscribe',
        'applyEngineBatch',
        'applyEvent',
        'applyEvents',
        'flush',
        'route',
        'potentialLoads',
        'markPrefillCompleted',
        'touch',
        'free',
        'stats',
      ],
    };
    for (const [obj, name] of [
      [index, 'KvIndex'],
      [router, 'KvRouter'],
    ] as const) {
      for (const m of PUBLIC[name]) {
        expect(typeof (obj as unknown as Record<string, unknown>)[m]).toBe('function');
        const fn = (...a: unknown[]) => (obj as unknown as Record<string, (...x: unknown[]) => unknown>)[m](...a);
        for (const v of HOSTILE) {
          await onlyKvRouteErrors(`${name}.${m}(${label(v)})`, () => fn(v));
          await onlyKvRouteErrors(`${name}.${m}(${label(v)} × 3)`, () => fn(v, v, v));
          await onlyKvRouteErrors(`${name}.${m}(1, ${label(v)})`, () => fn(1, v));
          await onlyKvRouteErrors(`${name}.${m}(1, 0, ${label(v)})`, () => fn(1, 0, v));
        }
      }
    }
    // A request's multimodal hashes, whole and per block: refused with KvRouteError, or routed.
    for (const v of HOSTILE) {
      for (const mmHashes of [v, [v], [null, v], [[v]]]) {
        await onlyKvRouteErrors(`KvRouter.route({mmHashes: ${label(mmHashes)}})`, async () => {
          await router.route({ requestId: 'm', tokens: [1, 2, 3, 4, 5, 6, 7, 8], mmHashes: mmHashes as never });
          router.free('m');
        });
      }
    }
    // A request's overrides: refused with KvRouteError, or routed (and freed).
    for (const key of ['prefillLoadScale', 'overlapScoreWeight', 'overlapScoreCredit', 'routerTemperature']) {
      for (const v of HOSTILE) {
        await onlyKvRouteErrors(`KvRouter.route({overrides: {${key}: ${label(v)}}})`, async () => {
          await router.route({ requestId: 'o', tokens: [1, 2, 3, 4, 5], overrides: { [key]: v } as never });
          router.free('o');
        });
      }
    }
    // An engine source's own methods (nothing listens on the port; connecting does not fail).
    const sourceIndex = new kvroute.KvIndex({ blockSize: 4, backend });
    const source = sourceIndex.subscribe({ workerId: 9, endpoint: 'tcp://127.0.0.1:9' });
    for (const m of ['on', 'off', 'stats', 'close'] as const) {
      const fn = (...a: unknown[]) => (source[m] as (...x: unknown[]) => unknown).apply(source, a);
      for (const v of HOSTILE) {
        await onlyKvRouteErrors(`EngineSource.${m}(${label(v)})`, () => fn(v));
        await onlyKvRouteErrors(`EngineSource.${m}('state', ${label(v)})`, () => fn('state', v));
        await onlyKvRouteErrors(`EngineSource.${m}(${label(v)}, () => 0)`, () => fn(v, () => 0));
      }
    }
    expect(() => source.on('state', 5 as never)).toThrow(/listener must be a function/);
    // TextTokenizer: its constructors and encode (a lone surrogate is text, and encodes).
    const tokenizerJson = JSON.stringify(kvroute.mockTokenizerJson());
    const tokenizer = new kvroute.TextTokenizer(tokenizerJson, { backend });
    const chatTokenizer = new kvroute.TextTokenizer(tokenizerJson, { backend, config: kvroute.mockTokenizerConfig() });
    const cachedTokenizer = new kvroute.TextTokenizer(chatmlBytes().json, { backend, prefixCache: { maxBytes: 1 << 16 } });
    for (const v of HOSTILE) {
      await onlyKvRouteErrors(`new TextTokenizer(${label(v)})`, () => new kvroute.TextTokenizer(v as never, { backend }));
      await onlyKvRouteErrors(`new TextTokenizer(json, ${label(v)})`, () => new kvroute.TextTokenizer(tokenizerJson, v as never));
      await onlyKvRouteErrors(
        `new TextTokenizer(json, {config: ${label(v)}})`,
        () => new kvroute.TextTokenizer(tokenizerJson, { backend, config: v as never }),
      );
      await onlyKvRouteErrors(`TextTokenizer.fromFile(${label(v)})`, () => kvroute.TextTokenizer.fromFile(v as never, { backend }));
      await onlyKvRouteErrors(`TextTokenizer.encode(${label(v)})`, () => tokenizer.encode(v as never));
      await onlyKvRouteErrors(`TextTokenizer.encode('x', ${label(v)})`, () => tokenizer.encode('x', v as never));
      await onlyKvRouteErrors(`TextTokenizer.encode('x', {addSpecialTokens: ${label(v)}})`, () =>
        tokenizer.encode('x', { addSpecialTokens: v as never }),
      );
      await onlyKvRouteErrors(`TextTokenizer(prefix cache).encode(${label(v)})`, () => cachedTokenizer.encode(v as never));
      await onlyKvRouteErrors(
        `new TextTokenizer(json, {prefixCache: {maxBytes: ${label(v)}}})`,
        () => new kvroute.TextTokenizer(tokenizerJson, { backend, prefixCache: { maxBytes: v as never } }),
      );
      for (const key of ['chatTemplate', 'chatTemplateContentFormat', 'trustRequestChatTemplate', 'prefixCache'])
        await onlyKvRouteErrors(
          `new TextTokenizer(json, {${key}: ${label(v)}})`,
          () => new kvroute.TextTokenizer(tokenizerJson, { backend, [key]: v as never }),
        );
      // Chat requests: the whole request, its messages, and each field of one.
      await onlyKvRouteErrors(`TextTokenizer.encodeChat(${label(v)})`, () => chatTokenizer.encodeChat(v as never));
      await onlyKvRouteErrors(`TextTokenizer.applyChatTemplate({messages: ${label(v)}})`, () =>
        chatTokenizer.applyChatTemplate({ messages: v as never }),
      );
      for (const key of [
        'tools',
        'add_generation_prompt',
        'continue_final_message',
        'add_special_tokens',
        'chat_template',
        'chat_template_kwargs',
      ])
        await onlyKvRouteErrors(`TextTokenizer.encodeChat({messages, ${key}: ${label(v)}})`, () =>
          chatTokenizer.encodeChat({ messages: [{ role: 'user', content: 'hi' }], [key]: v as never }),
        );
      await onlyKvRouteErrors(`TextTokenizer.encodeChat({messages: [{role: 'user', content: ${label(v)}}]})`, () =>
        chatTokenizer.encodeChat({ messages: [{ role: 'user', content: v as never }] }),
      );
    }
    source.close();
    sourceIndex.close();
    for (const s of index.engineSources()) s.close();
    for (const s of router.index.engineSources()) s.close();
    index.close();
    router.close();
  });

  test('every gateway option, and one level down in each section, at every hostile value', async () => {
    const make = (opts: object) => kvroute.createGateway({ blockSize: 4, logLevel: false, ...opts } as never).close({ now: true });
    const sections: [string, (v: unknown) => object][] = [];
    for (const key of await knownKeys(make)) {
      if (key === 'blockSize') continue;
      sections.push([key, (v) => ({ [key]: v })]);
      for (const sub of await knownKeys((o) => make({ [key]: o }), false))
        sections.push([`${key}.${sub}`, (v) => ({ [key]: { [sub]: v } })]);
    }
    // Sections whose keys are checked only beside others, and the workers' entries.
    const TRACES = 'http://127.0.0.1:1/v1/traces';
    sections.push(
      ['tracing.otlpHeaders', (v) => ({ tracing: { otlpEndpoint: TRACES, otlpHeaders: v } })],
      ['tracing.sampleRatio', (v) => ({ tracing: { otlpEndpoint: TRACES, sampleRatio: v } })],
      ['tls.cert', (v) => ({ tls: { cert: v, key: v } })],
      ['tls.certFile', (v) => ({ tls: { certFile: v, keyFile: v } })],
      ['workers[0]', (v) => ({ workers: [v] })],
      ...(await knownKeys((o) => make({ workers: [o] }))).map((k): [string, (v: unknown) => object] => [
        `workers[0].${k}`,
        (v) => ({ workers: [{ id: 1, url: 'http://127.0.0.1:1', [k]: v }] }),
      ]),
    );
    expect(sections.length).toBeGreaterThan(60);
    for (const v of HOSTILE)
      for (const [what, opts] of sections) await onlyKvRouteErrors(`createGateway({ ${what}: ${label(v)} })`, () => make(opts(v)));
  });

  test('every mock worker option, each refused with KvRouteError or served (and closed)', async () => {
    const start = async (opts: object) => {
      const w = await kvroute.startMockWorker({ port: 0, ...opts } as never);
      await w.close();
    };
    for (const key of await knownKeys((o) => kvroute.startMockWorker(o as never))) {
      for (const v of HOSTILE) {
        // A hostile port must not bind one: port 0 is the default under test.
        if (key === 'port' && (v === undefined || v === 0)) continue;
        await onlyKvRouteErrors(`startMockWorker({ ${key}: ${label(v)} })`, () => start({ [key]: v }));
      }
    }
  });

  test.each(BACKENDS)('every KvRouter, KvIndex and subscribe option (%s)', async (backend) => {
    const routerKeys = await knownKeys((o) => new kvroute.KvRouter(o as never));
    const replicaKeys = await knownKeys((o) => new kvroute.KvRouter({ blockSize: 4, replicas: o } as never));
    const indexKeys = await knownKeys((o) => new kvroute.KvIndex(o as never));
    for (const v of HOSTILE) {
      for (const key of routerKeys.filter((k) => k !== 'backend' && k !== 'replicas'))
        await onlyKvRouteErrors(`new KvRouter({ ${key}: ${label(v)} })`, () =>
          new kvroute.KvRouter({ blockSize: 4, backend, [key]: v } as never).close(),
        );
      // Replica sync over a bus of its own (no NATS): each key beside it.
      for (const key of replicaKeys.filter((k) => k !== 'nats' && k !== 'transport'))
        await onlyKvRouteErrors(`new KvRouter({ replicas: { ${key}: ${label(v)} } })`, () =>
          new kvroute.KvRouter({ blockSize: 4, backend, replicas: { transport: new kvroute.ReplicaBus(), [key]: v } } as never).close(),
        );
      for (const key of indexKeys.filter((k) => k !== 'backend'))
        await onlyKvRouteErrors(`new KvIndex({ ${key}: ${label(v)} })`, () =>
          new kvroute.KvIndex({ blockSize: 4, backend, [key]: v } as never).close(),
        );
    }
    const router = new kvroute.KvRouter({ blockSize: 4, backend });
    try {
      router.addWorker(1);
      for (const key of (await knownKeys((o) => router.route(o as never))).filter((k) => k !== 'requestId' && k !== 'tokens'))
        for (const v of HOSTILE)
          await onlyKvRouteErrors(`route({ ${key}: ${label(v)} })`, async () => {
            try {
              await router.route({ requestId: 'hostile', tokens: [1, 2, 3, 4, 5, 6, 7, 8], [key]: v } as never);
            } finally {
              router.free('hostile');
            }
          });
      router.removeWorker(1);
      const subscribeKeys = await knownKeys((o) => router.subscribe(o as never));
      for (const v of HOSTILE)
        for (const key of subscribeKeys.filter((k) => k !== 'workerId' && k !== 'endpoint'))
          await onlyKvRouteErrors(`subscribe({ ${key}: ${label(v)} })`, async () => {
            const source = router.subscribe({ workerId: 1, endpoint: 'tcp://127.0.0.1:1', [key]: v } as never);
            await source.close();
            router.removeWorker(1);
          });
    } finally {
      router.close();
    }
  });

  test('the methods of gateways, mock workers, snapshot writers and replica buses', async () => {
    const router = new kvroute.KvRouter({ blockSize: 4 });
    const writer = new kvroute.IndexSnapshotWriter(router, { servers: 'nats://127.0.0.1:1', everyMs: 3_600_000 });
    const bus = new kvroute.ReplicaBus();
    const worker = await kvroute.startMockWorker({ port: 0 });
    const gateway = kvroute.createGateway({ blockSize: 4, logLevel: false });
    // Each method with the arguments it takes; listen() only with values that cannot bind a port.
    const cases: [string, object, string[]][] = [
      ['IndexSnapshotWriter', writer, ['on', 'off', 'stats']],
      ['ReplicaBus', bus, Object.getOwnPropertyNames(kvroute.ReplicaBus.prototype).filter((m) => m !== 'constructor')],
      ['MockWorker', worker, ['fault', 'stats']],
      ['Gateway', gateway, ['addWorker', 'removeWorker', 'setWorkers', 'workers']],
    ];
    try {
      for (const [name, obj, methods] of cases) {
        for (const m of methods) {
          const fn = (...a: unknown[]) => (obj as Record<string, (...x: unknown[]) => unknown>)[m](...a);
          for (const v of HOSTILE) {
            await onlyKvRouteErrors(`${name}.${m}(${label(v)})`, () => fn(v));
            await onlyKvRouteErrors(`${name}.${m}(${label(v)} × 3)`, () => fn(v, v, v));
            await onlyKvRouteErrors(`${name}.${m}('failed', ${label(v)})`, () => fn('failed', v));
          }
        }
      }
      for (const v of HOSTILE) {
        if (v === undefined || (v !== null && typeof v === 'object' && Object.keys(v).length === 0)) continue; // would listen
        await onlyKvRouteErrors(`Gateway.listen(${label(v)})`, () => gateway.listen(v as never));
        await onlyKvRouteErrors(`Gateway.listen({ port: ${label(v)} })`, () => gateway.listen({ port: v as never }));
      }
    } finally {
      await gateway.close();
      await worker.close();
      await writer.close();
      router.close();
    }
  });
});
