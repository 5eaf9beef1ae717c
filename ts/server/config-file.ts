/**
 * `kvroute serve`'s inputs: a YAML or JSON config file with the keys of {@link GatewayOptions},
 * and the `--worker 'id=1,url=…,kv-events=…'` flag. Both end in the same validation, so a file
 * and flags fail with the same messages.
 * @internal
 * @module
 */

import { readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { KvRouteError } from '../errors.js';
import type { GatewayWorker } from './options.js';

/** Reads a config file (`.json`, or YAML otherwise) into an object for {@link resolveGatewayOptions}. */
export function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new KvRouteError('ERR_INVALID_ARG', `cannot read the config file ${path}: ${(err as Error).message}`, { cause: err });
  }
  let value: unknown;
  try {
    value = extname(path) === '.json' ? JSON.parse(text) : parseYaml(text, { intAsBigInt: false, uniqueKeys: true });
  } catch (err) {
    throw new KvRouteError('ERR_INVALID_ARG', `${path} does not parse: ${(err as Error).message}`, { cause: err });
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new KvRouteError('ERR_INVALID_ARG', `${path} must hold a mapping of options`);
  }
  return value as Record<string, unknown>;
}

const WORKER_FLAG_KEYS: Record<string, keyof GatewayWorker> = {
  id: 'id',
  url: 'url',
  'kv-events': 'kvEvents',
  replay: 'replay',
  'dp-size': 'dpSize',
  'max-num-batched-tokens': 'maxNumBatchedTokens',
  weight: 'weight',
  role: 'role',
  'bootstrap-port': 'bootstrapPort',
};
const NUMERIC = new Set<keyof GatewayWorker>(['dpSize', 'maxNumBatchedTokens', 'weight', 'bootstrapPort']);

/** `id=1,url=http://…,kv-events=tcp://…,replay=tcp://…,dp-size=2` → a worker (validated later). */
export function parseWorkerFlag(spec: string): Record<string, unknown> {
  const worker: Record<string, unknown> = {};
  for (const part of spec.split(',')) {
    const eq = part.indexOf('=');
    const key = eq < 0 ? part : part.slice(0, eq);
    const name = WORKER_FLAG_KEYS[key.trim()];
    if (eq < 0 || name === undefined) {
      throw new KvRouteError(
        'ERR_INVALID_ARG',
        `--worker: "${part}" is not key=value with key one of ${Object.keys(WORKER_FLAG_KEYS).join(', ')}`,
      );
    }
    const raw = part.slice(eq + 1).trim();
    worker[name] = NUMERIC.has(name) && raw !== '' && Number.isFinite(Number(raw)) ? Number(raw) : raw;
  }
  return worker;
}
