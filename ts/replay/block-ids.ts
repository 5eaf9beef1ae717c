/**
 * Interns sequence hashes as small numbers for one simulation: equal hashes get equal ids, ids
 * count up from 0. The engines' block pools key their maps on these ids (see `FullBlock.id`),
 * and the hit-ratio ceiling marks them in a bitmap. Keys are the hash's low 32 bits read from its
 * halves as a small integer (no bigint, no heap number); the full hash is compared on every hit,
 * and the few hashes whose low 32 bits collide with another's (a few hundred in a million) go to
 * an exact map.
 * @internal
 * @module
 */

export class BlockIds {
  private readonly byKey = new Map<number, number>();
  private readonly overflow = new Map<bigint, number>();
  /** Halves of each id's hash, for the exactness check. */
  private lo = new Uint32Array(1024);
  private hi = new Uint32Array(1024);
  private count = 0;

  /** Ids issued so far (every id is below this). */
  get size(): number {
    return this.count;
  }

  private issue(lo: number, hi: number): number {
    if (this.count === this.lo.length) {
      const grow = (a: Uint32Array) => {
        const b = new Uint32Array(a.length * 2);
        b.set(a);
        return b;
      };
      this.lo = grow(this.lo);
      this.hi = grow(this.hi);
    }
    this.lo[this.count] = lo;
    this.hi[this.count] = hi;
    return this.count++;
  }

  /** The ids of every hash of `seqs`, in order. */
  of(seqs: BigUint64Array): Int32Array {
    const halves = new Uint32Array(seqs.buffer, seqs.byteOffset, seqs.length * 2);
    const out = new Int32Array(seqs.length);
    for (let i = 0; i < seqs.length; i++) {
      // Little-endian (the only platforms kvroute builds for): low half first.
      const lo = halves[2 * i];
      const hi = halves[2 * i + 1];
      const key = lo | 0;
      const id = this.byKey.get(key);
      if (id === undefined) {
        const fresh = this.issue(lo, hi);
        this.byKey.set(key, fresh);
        out[i] = fresh;
      } else if (this.lo[id] === lo && this.hi[id] === hi) {
        out[i] = id;
      } else {
        // Same low 32 bits, another hash: exact lookup.
        const seq = seqs[i];
        let other = this.overflow.get(seq);
        if (other === undefined) {
          other = this.issue(lo, hi);
          this.overflow.set(seq, other);
        }
        out[i] = other;
      }
    }
    return out;
  }
}
