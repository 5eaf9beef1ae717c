import { afterEach } from 'vitest';

/**
 * Registers an `afterEach` that closes, newest first, everything the returned `track` was given
 * during the test: sockets, sources and indexes a failing test would otherwise leave open.
 */
export function closeAfterEach(): <T extends { close(): void }>(x: T) => T {
  const open: { close(): void }[] = [];
  afterEach(() => {
    for (const x of open.splice(0).reverse()) x.close();
  });
  return (x) => {
    open.push(x);
    return x;
  };
}
