/**
 * Cross-origin requests to the OpenAI-compatible API, as vLLM answers them: vLLM's server
 * always runs a CORS middleware (`--allowed-origins`, `--allowed-methods`, `--allowed-headers`,
 * each `["*"]` by default, and `--allow-credentials`, off), so a browser application that calls
 * vLLM directly keeps working when kvroute stands in front. `@fastify/cors` does the protocol.
 *
 * Only the proxy's routes take part. The admin and indexer API and `/metrics` never do: a page
 * of any origin could otherwise make a browser on the operator's network change the fleet (a
 * preflight that succeeded would let the browser send the `PUT /admin/workers` after it, whatever
 * the answer's headers). A preflight for any other path falls through to the 404 it would get
 * without CORS. Preflights are counted by whether they were allowed. A request without an
 * `Origin` header (not a browser's cross-origin one) gets no CORS headers, as Starlette answers.
 * @internal
 * @module
 */

import cors, { type FastifyCorsOptions } from '@fastify/cors';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Counter, type Registry } from 'prom-client';
import { describe } from '../validate.js';
import { invalid, isHttpToken, record } from './option-checks.js';

/**
 * Cross-origin (CORS) answers of the proxy's routes, vLLM's flags as options. The default is
 * vLLM's: every origin, method and header, without credentials. `cors: false` (or
 * `allowedOrigins: []`) answers none.
 * @group Gateway
 */
export interface CorsOptions {
  /** Origins allowed (`https://app.example.com`), or `'*'` for any. Default `['*']`. */
  allowedOrigins?: string[];
  /** Methods a preflight allows, or `'*'` for all. Default `['*']`. */
  allowedMethods?: string[];
  /** Request headers a preflight allows, or `'*'` for those asked. Default `['*']`. */
  allowedHeaders?: string[];
  /** Let pages send cookies and `Authorization` with credentials mode `include`. Default false. */
  allowCredentials?: boolean;
  /** How long a browser may keep a preflight's answer, seconds. Default 600. */
  maxAgeSecs?: number;
}

/** @internal the checked options; undefined: no CORS. */
export type ResolvedCors = Required<CorsOptions> | undefined;

const KEYS = ['allowedOrigins', 'allowedMethods', 'allowedHeaders', 'allowCredentials', 'maxAgeSecs'];
/** What `'*'` stands for among methods (the fetch standard's methods, as Starlette lists them). */
const ALL_METHODS = ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'PATCH', 'POST', 'PUT'];
/** The gateway's answer headers a page may read (besides those the fetch standard always shows). */
const EXPOSED = [
  'x-kvroute-request-id',
  'x-kvroute-worker',
  'x-kvroute-workers',
  'x-kvroute-dp-rank',
  'x-kvroute-cached-tokens',
  'x-kvroute-attempts',
  'x-kvroute-session-id',
  'retry-after',
];

function list(value: unknown, at: string, check: (item: string) => boolean, what: string): string[] {
  if (value === undefined) return ['*'];
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string' && (v === '*' || check(v))))
    throw invalid(`${at} must be a list of ${what} or "*", got ${describe(value)}`);
  return value as string[];
}

/** An origin exactly as browsers send it: scheme, host and port only. */
function isOrigin(value: string): boolean {
  try {
    return new URL(value).origin === value;
  } catch {
    return false;
  }
}

/** Reads the `cors` option; `ERR_INVALID_ARG` naming the key at fault. */
export function resolveCors(value: unknown): ResolvedCors {
  if (value === false) return undefined;
  const o = value === undefined ? {} : record(value, 'cors', KEYS);
  const allowedOrigins = list(o.allowedOrigins, 'cors.allowedOrigins', isOrigin, 'origins (scheme://host[:port])');
  if (o.allowCredentials !== undefined && typeof o.allowCredentials !== 'boolean')
    throw invalid(`cors.allowCredentials must be a boolean, got ${describe(o.allowCredentials)}`);
  const maxAgeSecs = o.maxAgeSecs === undefined ? 600 : o.maxAgeSecs;
  if (typeof maxAgeSecs !== 'number' || !Number.isInteger(maxAgeSecs) || maxAgeSecs < 0 || maxAgeSecs > 86_400)
    throw invalid(`cors.maxAgeSecs must be an integer in [0, 86400], got ${describe(o.maxAgeSecs)}`);
  const resolved = {
    allowedOrigins,
    allowedMethods: list(o.allowedMethods, 'cors.allowedMethods', isHttpToken, 'HTTP methods'),
    allowedHeaders: list(o.allowedHeaders, 'cors.allowedHeaders', isHttpToken, 'header names'),
    allowCredentials: o.allowCredentials === true,
    maxAgeSecs,
  };
  return allowedOrigins.length === 0 ? undefined : resolved;
}

/** The preflights answered, by whether they were allowed. */
export function corsMetrics(registry: Registry): Counter<'result'> {
  const counter = new Counter({
    name: 'kvroute_gateway_cors_preflights_total',
    help: "CORS preflights of the proxy's routes: allowed (answered for an origin the cors option allows) or refused.",
    labelNames: ['result'],
    registers: [registry],
  });
  for (const result of ['allowed', 'refused']) counter.inc({ result }, 0);
  return counter;
}

/** @fastify/cors's options for `c`. */
function pluginOptions(c: NonNullable<ResolvedCors>): FastifyCorsOptions {
  const anyOrigin = c.allowedOrigins.includes('*');
  return {
    // With credentials a browser refuses `*`: the request's origin is sent back instead, as Starlette does.
    origin: anyOrigin ? (c.allowCredentials ? true : '*') : c.allowedOrigins,
    methods: c.allowedMethods.includes('*') ? ALL_METHODS : c.allowedMethods,
    // Omitted: the headers a preflight asks for are allowed.
    ...(c.allowedHeaders.includes('*') ? {} : { allowedHeaders: c.allowedHeaders }),
    credentials: c.allowCredentials,
    exposedHeaders: EXPOSED,
    maxAge: c.maxAgeSecs,
    // A preflight is answered before the API-key check: browsers send it without credentials.
    hook: 'onRequest',
  };
}

/** A route pattern (`/v1/responses/:id`) as a test of concrete paths. */
function pathTest(pattern: string): RegExp {
  const escaped = pattern
    .split('/')
    .map((part) => (part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('/');
  return new RegExp(`^${escaped}$`);
}

/**
 * The CORS headers of an actual (not preflight) request's answer, for a page at `origin`, or
 * none when the origin is not allowed: what @fastify/cors would set, written here so that
 * requests without an `Origin` (every client that is not a browser) cost nothing. Running the
 * plugin's hook on every request cost 8% of the gateway's short-request throughput per
 * CPU-second (BENCHMARKS.md).
 */
function answerHeaders(c: NonNullable<ResolvedCors>): (origin: string) => Record<string, string> | undefined {
  const any = c.allowedOrigins.includes('*');
  const listed = new Set(c.allowedOrigins);
  const exposed = EXPOSED.join(', ');
  return (origin) => {
    if (!any && !listed.has(origin)) return undefined;
    // `*` only when any origin may read it without credentials; else the origin, which makes the answer vary by it.
    const allow = any && !c.allowCredentials ? '*' : origin;
    return {
      'access-control-allow-origin': allow,
      ...(allow === '*' ? {} : { vary: 'Origin' }),
      ...(c.allowCredentials ? { 'access-control-allow-credentials': 'true' } : {}),
      'access-control-expose-headers': exposed,
    };
  };
}

/**
 * Registers CORS in the proxy's scope, before its API-key check; `routes()` lists the proxy's
 * route patterns (known once they are registered). Preflights go to @fastify/cors, in a scope
 * of its own whose one route is its `OPTIONS *` (so its hook runs for preflights only); a
 * preflight for a path that is not the proxy's gets no CORS and falls through to a 404. An
 * actual request with an `Origin` gets its answer's headers from {@link answerHeaders}.
 */
export async function registerCors(
  proxy: FastifyInstance,
  c: NonNullable<ResolvedCors>,
  preflights: Counter<'result'>,
  routes: () => readonly string[],
): Promise<void> {
  const options = pluginOptions(c);
  let tests: RegExp[] | undefined;
  const isProxyRoute = (req: FastifyRequest) => {
    tests ??= routes().map(pathTest);
    const path = req.url.split('?')[0];
    return tests.some((t) => t.test(path));
  };
  await proxy.register(async (preflight) => {
    await preflight.register(cors, {
      delegator: (req, done) => done(null, isProxyRoute(req) ? options : { origin: false }),
    });
    preflight.addHook('onResponse', async (req, reply) => {
      if (req.headers['access-control-request-method'] === undefined) return;
      preflights.inc({ result: reply.statusCode < 300 && reply.hasHeader('access-control-allow-origin') ? 'allowed' : 'refused' });
    });
  });
  const headersFor = answerHeaders(c);
  proxy.addHook('onRequest', (req, reply, done) => {
    const origin = req.headers.origin;
    // A preflight is the plugin's (the OPTIONS * route is in this scope's reach too).
    const headers = origin === undefined || req.method === 'OPTIONS' ? undefined : headersFor(origin);
    // On the raw response: a stream's answer is written there (hijacked), and Node merges these into any writeHead.
    if (headers) for (const [name, value] of Object.entries(headers)) reply.raw.setHeader(name, value);
    done();
  });
}
