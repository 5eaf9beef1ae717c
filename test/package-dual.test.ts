import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { expect, test } from 'vitest';
import { DIST_CJS, DIST_ESM, requireDist } from './helpers/dist.js';

test("a KvRouteError from the CJS build is instanceof the ESM build's class, and the reverse", async () => {
  requireDist();
  const cjs = createRequire(import.meta.url)(DIST_CJS) as typeof import('../ts/index.js');
  const esm = (await import(pathToFileURL(DIST_ESM).href)) as typeof import('../ts/index.js');
  expect(cjs.KvRouteError).not.toBe(esm.KvRouteError);
  const fromCjs = (() => {
    try {
      cjs.blockHashes([1], 0);
    } catch (err) {
      return err;
    }
  })();
  const fromEsm = new esm.KvRouteError('ERR_INVALID_ARG', 'x');
  expect(fromCjs).toBeInstanceOf(esm.KvRouteError);
  expect(fromEsm).toBeInstanceOf(cjs.KvRouteError);
  expect(esm.isKvRouteError(fromCjs) && cjs.isKvRouteError(fromEsm)).toBe(true);
  expect(new Error('plain')).not.toBeInstanceOf(esm.KvRouteError);
  expect(esm.isKvRouteError({ code: 'ERR_INVALID_ARG' })).toBe(false);
});
