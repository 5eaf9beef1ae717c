import { expect } from 'vitest';
import { KvRouteError } from '../../ts/index.js';

/** Asserts that `fn` throws a KvRouteError with this code and a message matching `message`. */
export function expectKvError(fn: () => unknown, code: string, message: RegExp): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(KvRouteError);
  expect((caught as KvRouteError).code).toBe(code);
  expect((caught as KvRouteError).message).toMatch(message);
}
