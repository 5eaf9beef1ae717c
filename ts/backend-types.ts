/**
 * What a backend provides. The native backend implements it over the napi binding, the pure-JS
 * backend in TypeScript; every public class picks one at construction and only talks to it
 * through these interfaces, which keeps the two interchangeable.
 * @internal
 * @module
 */

/** Which implementation runs kvroute's hot paths. */
export type BackendName = 'native' | 'js';

/** Hashing primitives; arguments are already validated. */
export interface HashingBackend {
  blockHashes(
    tokens: Uint32Array,
    blockSize: number,
    loraName: string | undefined,
    cacheNamespace: string | undefined,
    eagle: boolean,
    mmOffsets?: Uint32Array,
    mmHashes?: BigUint64Array,
  ): BigUint64Array;
  sequenceHashes(localHashes: BigUint64Array): BigUint64Array;
  xxh3(data: Uint8Array, seedHi: number, seedLo: number): bigint;
}

export interface Backend {
  readonly name: BackendName;
  readonly hashing: HashingBackend;
}
