import { afterEach } from 'vitest';
import { type BackendName, KvIndex } from '../../ts/index.js';

/** A valid `cleared` event as JSON text, with `fields` (each followed by a comma) put first. */
export const clearedEvent = (fields: string) => `{"worker_id": 1, ${fields} "event": {"event_id": 0, "data": "cleared"}}`;

/**
 * A document embedded where any JSON value is allowed (`state_source`), so that only the JSON
 * parser judges it: the event's object is level 1, the document level 2.
 */
export const embedding = (doc: string) => clearedEvent(`"state_source": ${doc},`);

/** `accepted`, or the code of what applying threw: a text as one event, or any application. */
export function outcome(index: KvIndex, apply: string | ((i: KvIndex) => unknown)): string {
  try {
    if (typeof apply === 'string') index.applyEvent(apply);
    else apply(index);
    return 'accepted';
  } catch (err) {
    return (err as { code?: string }).code ?? 'threw';
  }
}

/** Makes indexes of block size 4 on `backend`, each closed after the test (call in a describe). */
export function indexesClosedAfterEach(backend: BackendName): () => KvIndex {
  const open: KvIndex[] = [];
  afterEach(() => {
    for (const i of open.splice(0)) i.close();
  });
  return () => {
    const i = new KvIndex({ blockSize: 4, backend });
    open.push(i);
    return i;
  };
}
