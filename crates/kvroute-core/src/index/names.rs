//! [`NameTable`]: a rank's block names → block ids, the map every stored and removed block
//! probes. Hand-rolled rather than a general hash map, for what the profiles of the index
//! workload showed:
//! * **One cache line per operation.** Entries live in 64-byte buckets of nine, each entry a
//!   24-bit fingerprint of the name and the 32-bit block id (7 bytes, against 16 for a key and a
//!   value). A lookup reads its home bucket and, only when that bucket ever overflowed, the next
//!   one. The linear-probing table this replaced scanned about eight slots (two or three lines)
//!   to prove a name absent at three quarters full, and its backward-shift deletion scanned the
//!   same run again: a quarter of the writer's time went into removals alone.
//! * **Small.** The names are the index's largest part at W = 256. Buckets of seven entries
//!   with 32-bit fingerprints took 15 bytes per held block there (tables double, so they sit
//!   about 60% full); nine with 24-bit ones take 12 (a W = 256 index 39.2 → 36.5 bytes per held
//!   block), and the two-writer ingest of a fresh W = 256 index was 15% faster (8 alternating
//!   pairs; W = 16 even), from fewer pages to fault and fewer full buckets. A fingerprint keeps
//!   24 minus log2(buckets) bits to tell a bucket's entries apart: for tables of 512 buckets
//!   (a rank of 8,000 to 16,000 names) a lookup meets a false hit fewer than once in 3,600, for
//!   2^15 (a million names) about once in 57, for 2^19 (ten million) about once in four; each
//!   costs a read of the block's data.
//! * **Removal touches one bucket, usually.** The last entry of the bucket fills the hole; an
//!   overflow counter per bucket (entries that were pushed past it) says whether a lookup must
//!   go on to the next bucket, and is counted down when such an entry leaves, so no tombstones
//!   build up. When entries had been pushed past the emptied bucket, the nearest moves back
//!   into it (a bucketed backward shift, `Table::refill`), so every bucket that counts an
//!   overflow stays full, as in a table built by inserts alone. Without that, a table of steady
//!   size whose names come and go (a rank with a full cache) drifted: at 75% of its slots a
//!   lookup of an absent name visited 7 buckets after 2 million replacements and 9 after 6
//!   million (1.4 in the same table rebuilt), at 83% 117 and then 2,000, as counts stuck at
//!   saturation. With it they stay at 1.4 and 2.2. The bench workloads' tables sit under half
//!   full, where it costs nothing measurable (instructions +0.1%, cache misses even).
//! * **Probes can be prefetched**: an event's names are known up front, so the writer asks for
//!   the next names' buckets while it works on the current one, overlapping the cache misses.
//! * **A bucket is scanned without branches**: its fingerprints sit side by side, so two vector
//!   compares find every hit at once (`Bucket::fingerprint_hits`).
//!
//! A fingerprint can match another name, so a hit is confirmed by the caller's `is_name`, which
//! compares the block's own name (the writer reads that block's data next anyway). The table
//! never needs the names themselves: a bucket's home is taken from the fingerprint's bits, so
//! growing rehashes from the fingerprints alone.
//!
//! Split into 4 tables by the name's hash, so that growing rehashes a quarter of a large rank's
//! names at a time (a million-name rank: about a millisecond). It was 16 tables: with 256 ranks
//! that is 4,096 small tables a shard, each growing through every size, and the two-writer
//! ingest at W = 256 was 11% faster with 4 (8 alternating pairs, 7 faster; churn +3.5%, W = 16
//! even, the bare tree even); glibc grows a thread's heap by an `mprotect` call per shortfall,
//! which holds the address space's lock that the other writer's page faults need, and those
//! calls fell from 11,948 to 5,085 per three rounds. The cost: a table four times larger keeps
//! two fingerprint bits fewer to tell a bucket's entries apart (above).

use crate::index::prefetch::prefetch;
use crate::index::stats::vec_bytes;

const SHARD_BITS: u32 = 2;
const SHARDS: usize = 1 << SHARD_BITS;
/// Entries per bucket: nine ids, nine 24-bit fingerprints and a byte of counters fill 64 bytes.
const SLOTS: usize = 9;
/// Bits of a fingerprint. The name's hash has others: `SHARD_BITS` choose the table.
const FP_BITS: u32 = 24;
/// The fullest a table gets, as a fraction (numerator, denominator) of its slots. Seven eighths
/// rather than three quarters: the names took 7% less of the index's memory at W = 256 and 13%
/// less on the churn workload, for 1% more instructions (more inserts pass a full bucket, whose
/// successor [`NameTable::prefetch`] loads too) and no change in speed beyond the noise.
const MAX_LOAD: (usize, usize) = (7, 8);
/// Bits of the fingerprint that choose a bucket at most: 2^24 buckets a table, 2^26 a rank, so
/// about 500 million names a rank (`grow` panics beyond, which poisons the writer's shard): an
/// index of some 15 GB for that rank alone.
const MAX_BUCKET_BITS: u32 = FP_BITS;
/// Tables smaller than this many buckets (16 KiB) grow fourfold, larger ones double: sizes go 1,
/// 4, 16, 64, 256, 512, ... buckets. A shard has a thousand tables at W = 256 (four per rank), and
/// a table's early growth is a fixed cost (an allocation, a free, a call) for few names. Fourfold
/// below 64 buckets (the twentieth round) took 4-10% off the writers' CPU time in the two-writer
/// ingest at W = 256 and 10% at W = 16; below 256 (the twenty-fifth) also skips 128, whose growth
/// rehashed about a quarter of all the entries a W = 256 table ever rehashes, after claims that
/// met many full buckets: the bare tree 7% faster there (figures in the tried table of
/// `index/mod.rs`), W = 16 and churn even. Tables of 256 buckets or more grow as before; one that
/// ends smaller can be twice the size doubling would have left, at most 8 KiB more (32 KiB a
/// rank; a W = 256 index +80 KiB). Fourfold growth was reverted once because closing an index
/// then often gave the system no memory back; the cause was glibc's moving trim threshold, not
/// the tables (`heap.rs`), and closing now asks glibc for the pages.
const QUADRUPLE_BELOW: usize = 256;
/// The overflow count saturates here and then stays: a lookup then always goes on to the next
/// bucket, which is slower but never wrong, until the table grows and recounts, or a removal
/// from the bucket finds nothing pushed past it any more (`Table::refill`).
const OVERFLOW_SATURATED: u8 = 15;

/// One cache line of entries. Fingerprints are split into their low 16 and high 8 bits, each
/// kind side by side, so that vector compares test all nine at once.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket {
    ids: [u32; SLOTS],
    low: [u16; SLOTS],
    high: [u8; SLOTS],
    /// Entries in use (`[..len]` of each array) in the low 4 bits; in the high 4, entries whose
    /// home is this bucket or an earlier one stored after it: a lookup that misses here goes on
    /// to the next bucket only when this is not zero.
    counts: u8,
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64 && SLOTS < 16);

impl Bucket {
    fn len(&self) -> usize {
        usize::from(self.counts & 0xF)
    }

    fn overflow(&self) -> u8 {
        self.counts >> 4
    }

    fn add_overflow(&mut self) {
        if self.overflow() < OVERFLOW_SATURATED {
            self.counts += 0x10;
        }
    }

    fn remove_overflow(&mut self) {
        if self.overflow() < OVERFLOW_SATURATED {
            self.counts -= 0x10;
        }
    }

    fn clear_overflow(&mut self) {
        self.counts &= 0xF;
    }

    fn fingerprint(&self, k: usize) -> u32 {
        u32::from(self.low[k]) | (u32::from(self.high[k]) << 16)
    }

    fn push(&mut self, fp: u32, id: u32) {
        let len = self.len();
        self.ids[len] = id;
        self.low[len] = fp as u16;
        self.high[len] = (fp >> 16) as u8;
        self.counts += 1;
    }

    /// Removes entry `k`: the last entry takes its place.
    fn remove(&mut self, k: usize) {
        let last = self.len() - 1;
        self.ids[k] = self.ids[last];
        self.low[k] = self.low[last];
        self.high[k] = self.high[last];
        self.counts -= 1;
    }

    /// The first entry in use whose fingerprint is `fp` and whose id `is_name` confirms.
    fn position(&self, fp: u32, is_name: impl FnMut(u32) -> bool) -> Option<usize> {
        self.first_confirmed(self.fingerprint_hits(fp), is_name)
    }

    /// The first of the entries `hits` marks whose id `is_name` confirms.
    #[inline(always)]
    fn first_confirmed(&self, mut hits: u32, mut is_name: impl FnMut(u32) -> bool) -> Option<usize> {
        while hits != 0 {
            let k = hits.trailing_zeros() as usize;
            if is_name(self.ids[k]) {
                return Some(k);
            }
            hits &= hits - 1;
        }
        None
    }

    /// The id of [`Self::first_confirmed`], out of line for the scans that expect a miss
    /// ([`Table::find`], which a claim past its home bucket runs): the name check inlined
    /// there (the rank's aliases, the block's data) made the loop spill its values. Out of
    /// line, such a claim takes 192 instructions instead of 214 (W = 256 bare tree 783 → 771 M;
    /// two-writer ingest +4.6%, 10 alternating pairs, 8 faster).
    #[inline(never)]
    fn confirmed_id(&self, hits: u32, is_name: impl FnMut(u32) -> bool) -> Option<u32> {
        self.first_confirmed(hits, is_name).map(|k| self.ids[k])
    }

    /// A bit per entry in use whose fingerprint is `fp`, compared all at once rather than entry
    /// by entry: a hit sits at a random place in its bucket, so a loop's exit was a mispredicted
    /// branch on every removal. Two SSE2 compares of eight low halves (entries 0-7 and 1-8),
    /// one of sixteen bytes that end the bucket (the nine high bytes among them).
    #[cfg(target_arch = "x86_64")]
    fn fingerprint_hits(&self, fp: u32) -> u32 {
        use std::arch::x86_64::{
            _mm_cmpeq_epi16, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_packs_epi16, _mm_set1_epi16,
            _mm_set1_epi8,
        };
        const LOW: usize = std::mem::offset_of!(Bucket, low);
        const TAIL: usize = std::mem::size_of::<Bucket>() - 16;
        const HIGH_SHIFT: usize = std::mem::offset_of!(Bucket, high) - TAIL;
        // Safety: every load reads 16 bytes inside the bucket (bytes LOW..LOW + 16,
        // LOW + 2..LOW + 18 and the last 16); SSE2 is part of x86_64.
        let (low, high) = unsafe {
            let base = (self as *const Self).cast::<u8>();
            let needle = _mm_set1_epi16(fp as u16 as i16);
            let first = _mm_cmpeq_epi16(_mm_loadu_si128(base.add(LOW).cast()), needle);
            let rest = _mm_cmpeq_epi16(_mm_loadu_si128(base.add(LOW + 2).cast()), needle);
            // Packed to a byte per entry: entries 0-7, then entries 1-8.
            let low = _mm_movemask_epi8(_mm_packs_epi16(first, rest)) as u32;
            let high_needle = _mm_set1_epi8((fp >> 16) as u8 as i8);
            let high = _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128(base.add(TAIL).cast()), high_needle)) as u32;
            ((low & 0xFF) | ((low >> 7) & 0x1FE), high >> HIGH_SHIFT)
        };
        low & high & ((1 << self.len()) - 1)
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn fingerprint_hits(&self, fp: u32) -> u32 {
        (0..self.len()).filter(|&k| self.fingerprint(k) == fp).fold(0, |hits, k| hits | (1 << k))
    }
}

/// Keys are engine hashes, but tests and some engines use small integers: mix before use.
fn mix(key: u64) -> u64 {
    (key ^ (key >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The table a key belongs to (the mixed key's top `SHARD_BITS`), and its fingerprint (the
/// `FP_BITS` after them, whose top bits choose the bucket).
fn split(key: u64) -> (usize, u32) {
    let h = mix(key);
    let fp = (h >> (64 - SHARD_BITS - FP_BITS)) as u32 & ((1 << FP_BITS) - 1);
    ((h >> (64 - SHARD_BITS)) as usize, fp)
}

#[derive(Debug, Default)]
struct Table {
    buckets: Vec<Bucket>,
    /// log2 of the bucket count.
    bits: u32,
    len: usize,
    /// The most entries the table holds before it grows (`MAX_LOAD` of its slots), kept so that
    /// an insert compares two numbers instead of multiplying them out.
    most: usize,
}

impl Table {
    /// The bucket the fingerprint's bits after the table's choose: the top `bits` of them,
    /// taken as a multiply by the (power of two) bucket count, which is 0 for an empty or
    /// one-bucket table without a special case.
    fn home(&self, fp: u32) -> usize {
        ((u64::from(fp << (32 - FP_BITS)) * self.buckets.len() as u64) >> 32) as usize
    }

    fn next(&self, i: usize) -> usize {
        (i + 1) & (self.buckets.len() - 1)
    }

    fn find(&self, fp: u32, mut is_name: impl FnMut(u32) -> bool) -> Option<u32> {
        if self.buckets.is_empty() {
            return None;
        }
        let mut i = self.home(fp);
        // At most every bucket once: after removals every bucket can still count an overflow
        // (an entry pushed past it when it was full), and an absent name then ends the scan here.
        for _ in 0..self.buckets.len() {
            let b = &self.buckets[i];
            let hits = b.fingerprint_hits(fp);
            if hits != 0 {
                if let Some(id) = b.confirmed_id(hits, &mut is_name) {
                    return Some(id);
                }
            }
            if b.overflow() == 0 {
                return None;
            }
            i = self.next(i);
        }
        None
    }

    fn insert(&mut self, fp: u32, id: u32) {
        if self.len >= self.most {
            self.grow();
        }
        self.put(fp, id);
        self.len += 1;
    }

    /// Places an entry in the first bucket from its home with room, counting the overflow on
    /// each full bucket it passes. The table is never full, so this ends.
    fn put(&mut self, fp: u32, id: u32) {
        let mut i = self.home(fp);
        loop {
            let b = &mut self.buckets[i];
            if b.len() < SLOTS {
                b.push(fp, id);
                return;
            }
            b.add_overflow();
            i = self.next(i);
        }
    }

    /// Grows the table (see [`QUADRUPLE_BELOW`] for by how much) and rehashes it from the
    /// fingerprints. Kept out of line: inlined, it made every insert save and restore more
    /// registers (outlining it took 3% off the bare tree's instructions at W = 256). The rehash
    /// places each entry itself rather than through [`Self::put`]: in a table filled by inserts
    /// alone a bucket counts an overflow only once full, so one compare of its counts byte says
    /// whether it has room, and the old bucket's entries are read as slices, which leaves no bounds
    /// check in the loop. That is 22 instructions an entry where `put` took 30: at W = 256, where
    /// `grow` is a seventh of the writer's instructions, 114 → 94 M (whole bare-tree probe 803 →
    /// 783 M) and the two-writer ingest 5% faster (10 alternating pairs, 9 faster).
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let bits = match self.buckets.len() {
            0 => 0,
            n if n < QUADRUPLE_BELOW => self.bits + 2,
            _ => self.bits + 1,
        };
        assert!(bits <= MAX_BUCKET_BITS, "name table over 2^{MAX_BUCKET_BITS} buckets");
        let old = std::mem::replace(&mut self.buckets, vec![Bucket::default(); 1 << bits]);
        self.bits = bits;
        self.most = self.buckets.len() * SLOTS * MAX_LOAD.0 / MAX_LOAD.1;
        let shift = FP_BITS - bits;
        let mask = self.buckets.len() - 1;
        let new = self.buckets.as_mut_slice();
        for b in &old {
            let len = b.len().min(SLOTS);
            for ((&id, &low), &high) in b.ids[..len].iter().zip(&b.low[..len]).zip(&b.high[..len]) {
                let fp = u32::from(low) | (u32::from(high) << 16);
                let mut i = (fp >> shift) as usize;
                loop {
                    let to = &mut new[i & mask];
                    // In a table built by inserts alone a bucket counts an overflow only when
                    // full, so its counts byte is below `SLOTS` exactly when it has room. The
                    // entry is written here rather than by `Bucket::push`: through it the bare
                    // tree at W = 256 ran 0.4% fewer instructions but 10% slower (8 alternating
                    // pairs, none faster; two-writer ingest 4% slower, 2 of 10 faster).
                    let counts = to.counts;
                    if usize::from(counts) < SLOTS {
                        let at = usize::from(counts);
                        to.ids[at] = id;
                        to.low[at] = low;
                        to.high[at] = high;
                        to.counts = counts + 1;
                        break;
                    }
                    to.add_overflow();
                    i += 1;
                }
            }
        }
    }

    /// Removes the first entry with fingerprint `fp` for whose id `is_it` holds, and returns
    /// that id: the bucket's last entry fills its place, and the buckets it had been pushed past
    /// count it off their overflow. Out of line: [`Self::take`] inlines the common case.
    #[inline(never)]
    fn remove_where(&mut self, fp: u32, mut is_it: impl FnMut(u32) -> bool) -> Option<u32> {
        if self.buckets.is_empty() {
            return None;
        }
        let home = self.home(fp);
        let mut i = home;
        let mut found = None;
        // At most every bucket once, as in `find`.
        for _ in 0..self.buckets.len() {
            let b = &mut self.buckets[i];
            if let Some(k) = b.position(fp, &mut is_it) {
                found = Some(b.ids[k]);
                b.remove(k);
                break;
            }
            if b.overflow() == 0 {
                return None;
            }
            i = self.next(i);
        }
        let id = found?;
        self.count_off(home, i);
        self.len -= 1;
        if self.len == 0 {
            *self = Self::default();
        } else if self.buckets[i].overflow() != 0 {
            self.refill(i);
        }
        Some(id)
    }

    /// An entry homed at `home` no longer sits in bucket `at`: the buckets it had been pushed
    /// past (`home` up to `at`) count it off.
    fn count_off(&mut self, home: usize, at: usize) {
        let mut j = home;
        while j != at {
            self.buckets[j].remove_overflow();
            j = self.next(j);
        }
    }

    /// Bucket `hole` just lost an entry. When entries homed at or before it were pushed past
    /// it (its overflow count says so), the nearest of them moves back into it, and the same is
    /// done for the bucket that one left: a bucketed backward shift. It keeps what a table
    /// built by inserts alone has, every bucket that counts an overflow full, so lookups go on
    /// past a bucket only when they must (the module doc has what steady churn did without it).
    /// A count found stale (saturated, with nothing left pushed past) is set to zero here. Out
    /// of line: most removals leave a bucket that nothing was pushed past, and the caller checks
    /// that first.
    #[cold]
    #[inline(never)]
    fn refill(&mut self, mut hole: usize) {
        let mask = self.buckets.len() - 1;
        while self.buckets[hole].overflow() != 0 {
            // Entries that passed `hole` sit in the run of buckets after it that count an
            // overflow, or in the bucket that ends the run. An entry at `k` homed at `h` passed
            // the buckets from `h` up to `k`.
            let mut k = self.next(hole);
            let mut moved = None;
            while k != hole {
                let b = &self.buckets[k];
                let passed_hole = |e: usize| {
                    let h = self.home(b.fingerprint(e));
                    hole.wrapping_sub(h) & mask < k.wrapping_sub(h) & mask
                };
                if let Some(e) = (0..b.len()).find(|&e| passed_hole(e)) {
                    moved = Some((k, e));
                    break;
                }
                if b.overflow() == 0 {
                    break;
                }
                k = self.next(k);
            }
            let Some((k, e)) = moved else {
                // Nothing passed it after all: a saturated count that no longer holds.
                self.buckets[hole].clear_overflow();
                return;
            };
            let (fp, id) = (self.buckets[k].fingerprint(e), self.buckets[k].ids[e]);
            self.buckets[k].remove(e);
            self.buckets[hole].push(fp, id);
            // It still passes the buckets before `hole`, no longer those from `hole` up to `k`.
            self.count_off(hole, k);
            hole = k;
        }
    }

    /// Removes the entry for `fp` whose id `is_name` confirms when its home bucket settles the
    /// removal at once, and returns the outcome; `None` when it does not: an entry found at home
    /// in a bucket that entries were pushed past (a backward shift follows), the table's last
    /// entry, or no entry at home when entries were pushed past it. The common case of
    /// [`Self::remove_where`], inlined into the caller while the general scan stays out of line.
    #[inline(always)]
    fn take_at_home(&mut self, fp: u32, mut is_name: impl FnMut(u32) -> bool) -> Option<Option<u32>> {
        if self.buckets.is_empty() {
            return Some(None);
        }
        let home = self.home(fp);
        let b = &mut self.buckets[home];
        if b.overflow() != 0 || self.len <= 1 {
            return None;
        }
        let Some(k) = b.position(fp, &mut is_name) else {
            return Some(None);
        };
        let id = b.ids[k];
        b.remove(k);
        self.len -= 1;
        Some(Some(id))
    }

    /// Removes the entry for `fp` whose id `is_name` confirms, as [`Self::remove_where`] does:
    /// its common case inlined ([`Self::take_at_home`]), the rest out of line.
    #[inline(always)]
    fn take(&mut self, fp: u32, mut is_name: impl FnMut(u32) -> bool) -> Option<u32> {
        match self.take_at_home(fp, &mut is_name) {
            Some(outcome) => outcome,
            None => self.remove_where(fp, is_name),
        }
    }

    /// Inserts `(fp, id)` when its home bucket shows at once that the name is absent (no
    /// fingerprint hit, nothing ever pushed past it) and has room, where `put` would place it;
    /// returns whether it did. The common case of [`Self::claim`] (about four claims in five
    /// at W = 256), inlined into the writer's loops while the rest stays out of line: the claim
    /// as one function saved and restored six registers and spilled a dozen values on every
    /// call for its rare paths' sake. Split so, the bare tree ran 5% fewer instructions at
    /// W = 256 (4% at W = 16, 3% on churn) and 3% faster at W = 256 (12 pairs in alternating
    /// order, 11 faster; W = 16 and churn even). Inlining the whole claim instead had added 1.4%.
    #[inline(always)]
    fn claim_at_home(&mut self, fp: u32, id: u32) -> bool {
        if self.len >= self.most {
            return false;
        }
        let home = self.home(fp);
        let b = &mut self.buckets[home];
        if b.fingerprint_hits(fp) != 0 || b.overflow() != 0 || b.len() == SLOTS {
            return false;
        }
        b.push(fp, id);
        self.len += 1;
        true
    }

    /// Inserts `(fp, id)` unless an entry with fingerprint `fp` for whose id `is_name` holds is
    /// there already; returns that entry's id then, and changes nothing.
    #[inline(always)]
    fn claim(&mut self, fp: u32, id: u32, is_name: impl FnMut(u32) -> bool) -> Option<u32> {
        if self.claim_at_home(fp, id) {
            return None;
        }
        self.claim_elsewhere(fp, id, is_name)
    }

    /// The rest of [`Self::claim`]: a fingerprint hit to confirm, a full or overflowed home
    /// bucket, or a table due to grow. Out of line (see [`Self::claim_at_home`]).
    #[inline(never)]
    fn claim_elsewhere(&mut self, fp: u32, id: u32, is_name: impl FnMut(u32) -> bool) -> Option<u32> {
        if let Some(existing) = self.find(fp, is_name) {
            return Some(existing);
        }
        self.insert(fp, id);
        None
    }
}

/// Block names (u64) → block ids (u32). A name is in the table at most once (the writer checks
/// before inserting); `is_name(id)` tells whether block `id` is the one the rank names so.
#[derive(Debug, Default)]
pub struct NameTable {
    tables: [Table; SHARDS],
    len: usize,
}

impl NameTable {
    /// The block named `key`: the entry whose fingerprint matches and for which `is_name` holds.
    pub fn get(&self, key: u64, is_name: impl FnMut(u32) -> bool) -> Option<u32> {
        let (t, fp) = split(key);
        self.tables[t].find(fp, is_name)
    }

    /// Adds `key → value`. The caller guarantees `key` is absent.
    pub fn insert(&mut self, key: u64, value: u32) {
        let (t, fp) = split(key);
        self.tables[t].insert(fp, value);
        self.len += 1;
    }

    /// Removes `key → value`; returns whether it was there.
    pub fn remove(&mut self, key: u64, value: u32) -> bool {
        let (t, fp) = split(key);
        let removed = self.tables[t].remove_where(fp, |id| id == value).is_some();
        self.len -= usize::from(removed);
        removed
    }

    /// Removes the block named `key` (as [`Self::get`] finds it) and returns it: a lookup and
    /// a removal in one scan of the bucket. Inlined, with the table's common case.
    #[inline(always)]
    pub fn take(&mut self, key: u64, is_name: impl FnMut(u32) -> bool) -> Option<u32> {
        let (t, fp) = split(key);
        let taken = self.tables[t].take(fp, is_name);
        self.len -= usize::from(taken.is_some());
        taken
    }

    /// Adds `key → value` unless the table names a block `key` already (as [`Self::get`] finds
    /// it): then returns that block and changes nothing. A lookup and an insert in one call.
    #[inline(always)]
    pub fn claim(&mut self, key: u64, value: u32, is_name: impl FnMut(u32) -> bool) -> Option<u32> {
        let (t, fp) = split(key);
        let existing = self.tables[t].claim(fp, value, is_name);
        self.len += usize::from(existing.is_none());
        existing
    }

    /// Asks the CPU to start loading the bucket where `key` would sit, and the bucket after it;
    /// a hint, never a fault. The second line is for inserts whose home bucket is full (one in
    /// six at W = 256, counted when tables were at most three quarters full): each waited on a
    /// cache miss of its own there, a third of the inserts' time in perf's samples. Loading both
    /// made the bare tree 6% faster at W = 256 and 4% at W = 16 (six alternating pairs).
    pub fn prefetch(&self, key: u64) {
        let (t, fp) = split(key);
        let table = &self.tables[t];
        let home = table.home(fp);
        if let Some(bucket) = table.buckets.get(home) {
            prefetch(bucket);
            prefetch(&table.buckets[table.next(home)]);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes of the tables.
    pub fn heap_bytes(&self) -> usize {
        self.tables.iter().map(|t| vec_bytes::<Bucket>(t.buckets.capacity())).sum()
    }
}

#[cfg(test)]
mod tests;
