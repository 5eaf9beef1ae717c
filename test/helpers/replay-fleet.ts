/**
 * A one-rank replay fleet driven through the backend interface the simulation uses (the fleet is
 * internal): a small engine's spec, and a loop that enqueues each arrival on rank 0 and reads
 * every request's outcome. Shared by the fleet suites.
 */
import { OUTCOME, OUTCOME_FIGURES, type ReplayFleetBackend, type ReplayFleetSpec } from '../../ts/backend-types.js';

/** A small engine (block size 4, 64 GPU blocks), Dynamo timing, one rank, two requests. */
export const fleetSpec = (over: Partial<ReplayFleetSpec> = {}): ReplayFleetSpec => ({
  blockSize: 4,
  numGpuBlocks: 64,
  maxNumSeqs: 8,
  maxNumBatchedTokens: 32,
  speedup: 1,
  decodeSpeedup: 1,
  timing: 'dynamo',
  preemptionMode: 'lifo',
  hostBlocks: 0,
  hostLoadMsPerBlock: 0,
  workers: [0],
  dpRanks: [0],
  requests: 2,
  publishEvents: true,
  indexes: [],
  ...over,
});

/** A request: its prompt's full blocks, named by small numbers (equal names, equal blocks). */
export interface Req {
  at: number;
  blocks: number[];
  input: number;
  output: number;
}

export interface Outcome {
  arrival: number;
  firstToken: number;
  lastToken: number;
  reused: number;
  /** Reused at the first admission, before any preemption. */
  firstReused: number;
  preemptions: number;
}

/** Runs requests through a one-rank fleet; every arrival is enqueued on rank 0. */
export function drive(fleet: ReplayFleetBackend, reqs: Req[]): { outcomes: Outcome[]; wakes: Array<[number, number, number]> } {
  fleet.load(
    Float64Array.from(reqs, (r) => r.at),
    Uint32Array.from(reqs, (_, i) => i),
  );
  const header = new Float64Array(2);
  const wakes: Array<[number, number, number]> = [];
  for (let kind = fleet.run(header); kind !== 0; kind = fleet.run(header)) {
    wakes.push([kind, header[0], header[1]]);
    if (kind === 1) {
      const uid = header[1];
      const r = reqs[uid];
      const seqs = BigUint64Array.from(r.blocks, (b) => BigInt(1000 + b));
      const locals = BigUint64Array.from(r.blocks, (b) => BigInt(b));
      fleet.addRequest(uid, r.input, r.output, seqs, locals);
      fleet.enqueue(0, uid);
    }
  }
  const f = fleet.outcomes();
  const at = (i: number, figure: keyof typeof OUTCOME) => f[OUTCOME_FIGURES * i + OUTCOME[figure]];
  const outcomes = reqs.map((_, i) => ({
    arrival: at(i, 'arrivalMs'),
    firstToken: at(i, 'firstTokenMs'),
    lastToken: at(i, 'lastTokenMs'),
    reused: at(i, 'reusedTokens'),
    firstReused: at(i, 'firstReusedTokens'),
    preemptions: at(i, 'preemptions'),
  }));
  return { outcomes, wakes };
}
