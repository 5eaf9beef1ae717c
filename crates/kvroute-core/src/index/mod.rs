//! The KV index: which (worker, dp rank) holds which KV blocks.
//!
//! # Semantics
//! Each rank holds a set of blocks. A block sits at a path of local hashes from the root and is
//! named by that rank's external hash (names are per rank: ranks may disagree on them). Storing
//! requires the parent to be held by the same rank; removing a block removes everything the rank
//! holds below it, so a rank's coverage is always a prefix-closed set and a re-stored gap never
//! resurrects old descendants. `find_matches` reports, per rank, how many leading blocks of the
//! query it holds.
//!
//! # Design
//! A compressed radix tree ([`tree::Tree`]) in two arenas:
//! * **Nodes** have an edge: a run of at most 1,024 local hashes (a longer run chains through
//!   children), contiguous so matching compares a slice,
//!   with the positions' block ids beside it in one buffer (`tree/edge.rs`), plus `holders`, a
//!   slot-sorted list of `(rank, cutoff)`: the rank holds the edge's first `cutoff` positions.
//!   Children are keyed by the first local hash of their edge.
//! * **Blocks** are stable ids for tree positions. A rank's lookup maps its names to block ids,
//!   not to (node, offset), so splitting an edge re-points each moved position once instead of
//!   once per rank that holds it (Dynamo re-points lookups per rank, lazily). A position keeps one
//!   canonical name (its creator's); a rank whose engine names it differently gets an alias
//!   entry, so the common case of agreeing names costs nothing extra.
//!
//! Invariants, which make matching a single walk that never overcounts:
//! 1. the holders of a child are a subset of the holders that cover its parent's whole edge;
//! 2. every position is held by some rank: removal frees unheld tails and nodes at once,
//!    so leaves can again be extended in place (the decode pattern of one block per event);
//! 3. a rank's predicted (approximate-mode) blocks lie below its confirmed ones, and their
//!    expiry never increases along a path (a prediction refreshes its whole path and never
//!    shortens a TTL, even if the caller's clock goes back), so expired predictions are a suffix
//!    that a binary search finds without any write, and that the writer removes with one cut
//!    from one expiry entry per prediction (`expiry.rs`).
//!
//! Concurrency: **one shard per writer thread**, each worker pinned to one writer (`shard.rs`).
//! A shard's tree is split by who reads it: the **view** (edges, holders, children, ranks,
//! predictions) is what queries read, kept twice left-right style ([`lock`]), except that the
//! edges' positions are stored once, in buffers both copies point at (a writer only writes
//! positions neither copy shows: `tree/edge.rs`); the **book** (names, block locations, edge
//! buffers, free lists, counters) only its writer reads, kept once. Queries read
//! the published view without any lock and never wait. A writer applies a whole batch of events
//! to the book and the other view, journaling the view's changes as resolved, per-edge ops;
//! publishes that view (the batch is now visible, and `flush` returns); waits for readers to
//! leave the old view and replays the journal there, which costs a small fraction of the first
//! application because the name lookups and checks are not redone. Writers share no lock, so
//! ingest scales with writer threads up to the cores available; a read visits every shard and
//! merges their (rank-disjoint, already sorted) scores. Dynamo's concurrent tree uses per-node
//! locks and epochs instead; ours trades a second copy of the view for reads that cannot be held
//! up by writers at all, and for simple single-threaded tree code. Growth never stalls a writer
//! for long either ([`growth`]). Edges are never re-merged after removals (neither are Dynamo's).
//!
//! # Write path: what was tried (bench/vs-dynamo, W = 16, 2 writers, this 2-core machine)
//! | design | ingest M block-events/s | vs Dynamo | note |
//! |---|---:|---:|---|
//! | one tree, one writer lock, one publish per event | 1.6 | 0.10× | writers serialise |
//! | + one publish per batch | 1.8 | | publish cost was small |
//! | + one shard per writer | 3.0 | | writers in parallel |
//! | + no per-store set allocation, empty-map probes skipped | 3.3–4.4 | 0.25× | bare tree 5.5 |
//! | + book kept once, second view replays a journal | 5.4 | 0.39× | memory 157 → 90 B/block |
//! | + leaf-first removal runs cut once | | | bare tree 3.4 → 5.2 |
//! | + own name table, probes prefetched 8 names ahead | 12.3 | 0.73× | bare tree 5.2 → 7–8.5 |
//! | + location and name in one slot, scratch dedup set | 15.8 | 0.93× | bare tree 9.3 |
//! | + a store's cutoff written once per node | 15.5 | 0.90× | W = 256: 0.71×; full-bench sitting |
//! | tried: one shard-wide canonical name table | | | W = 256: no memory gain, 15% slower |
//! | name table in 64-byte buckets of fingerprints (see below) | 16.5 | | bare tree 10 → 12, W = 256 7.0 → 11.9; 76 → 60 B/block |
//! | + waiters woken only at the position they need | 24.2 | | 1 writer 9 → 12.6; W = 256 12 → 16.4 |
//! | + removals prefetch the block after its bucket; flat repeat check | | | (measured with the line above) |
//! | + new names claimed (checked, then inserted at once); a run's names taken at once | 21.6–22.6 | 1.10–1.2× | churn 9 → 10; noisy sitting |
//! | tried: a writer polls its queue 50 µs before sleeping | | | lockstep unchanged (one writer's speed bounds it) |
//! | bucket fingerprints compared at once (SSE2), not one by one | 32–40 | 1.53–1.55× | bare tree W = 16 15 → 26; W = 256 1.37–1.42× |
//! | + prefetch 16 names ahead (8 for block data); no repeat search for new-only stores | | | within noise, kept (+2–5%) |
//! | tried: freed nodes keep their buffers for reuse | | | churn and W = 16 unchanged (bare tree) |
//! | tried: name buckets from zeroed memory; prefetch 32 ahead | | | no change: growth cost is page faults |
//! | tried: prefetch the next event's first names during the current one | | | best of 6 runs equal |
//! | tried: a writer applies up to 32 queued ops in one write (one swap) | | | churn probe +5% over 9 pairs, within noise: the queue is rarely backlogged |
//! | a removed name looked up and taken out in one scan; a new name checked and inserted in one call; cut positions already taken only counted; bucket home by a multiply | 41 (mean of 4) | | instructions (cachegrind, whole bare-tree probe) W = 16 1.83 → 1.42 G, W = 256 1.11 → 0.96 G; 2 writers W = 16 33 → 41 M/s (means of 4 alternating pairs), W = 256 unchanged |
//! | tried: replay the journal at the start of the next write instead of after publishing | | | concurrent phase unchanged (W = 16 19.7 vs 18.6, W = 256 11.9 vs 12.1 M/s over 3 alternating pairs): see below |
//! | tried: prefetch the next bucket too when the home bucket is full or has overflowed | | | bare tree W = 256 unchanged over 3 pairs |
//! | every name prefetch loads the home bucket and the next; tables up to 7/8 full; `grow` out of line | | | bare tree W = 256 +6%, W = 16 +4% (6 alternating pairs); names 7% smaller at W = 256, 13% on churn |
//! | a batch for one writer sent as is (no per-writer vectors); applied batches freed by the sender | | | churn futex calls 85k → 7.5k per 3 rounds; comparison +5–6% at W = 16 and churn |
//! | tried: writers never freeing event memory (a measurement, not a design) | | | churn and W = 16 +25–50%: freeing costs that much, wherever it runs |
//! | edges stored once for both copies of the view (shared buffers; the replay sets a pointer and a length) | | | memory W = 256 49.3 → 39.2 B per held block (0.77 → 0.61× Dynamo), W = 16 0.21 → 0.16×, churn 0.18 → 0.15×; a fresh W = 256 index +9% (5 alternating pairs); later rounds depend on glibc's reuse of freed memory |
//! | name buckets of nine entries with 24-bit fingerprints (were seven with 32-bit) | | | memory W = 256 39.2 → 36.5 B per held block (0.61 → 0.57× Dynamo; W = 16 and churn unchanged, their tables' sizes fall just past a doubling either way); two-writer W = 256 ingest +15% (8 alternating pairs; churn +9%, W = 16 even) |
//! | tried: name tables that grow by a quarter, not double (any bucket count: the home is a multiply) | | | names W = 256 15 → 11.7 B per held block, but the bare tree 27% slower (5 pairs): each name is rehashed about four times, `grow` 3% → 9% of samples |
//! | tried: block data without the offset in the edge (12 bytes, not 16; the writer finds the offset in the edge's block ids, from a hint or the end) | | | memory W = 256 36.5 → 33.4 B per held block (0.52×), W = 16 47.9 → 44.1; but churn ingest 6% slower (8 pairs, 6 of them slower): the edge's block ids are loaded before the cut that used to load them, a cache miss nothing prefetches (4.5% of samples); prefetching the node and then the edge's last block id two and four names ahead made the bare tree on churn 16% slower still (8 pairs, 7 slower) |
//! | tried: name tables up to fifteen sixteenths full (were seven eighths) | | | W = 256 36.5 → 35.7 B per held block; W = 16 and churn unchanged (their tables' peak sizes decide); not worth the longer overflow runs |
//! | tried: each writer thread grows its glibc heap ahead once (chunks allocated and freed at start) | | | a fresh W = 256 ingest made 11,882 `mprotect` calls (glibc grows a thread's heap page by page), 1,042 with it; speed +3% over 6 pairs, within noise; not a library's business |
//! | a writer waiting for readers to leave the old copy spins 5 µs, then sleeps until the last reader out wakes it (was: spin with `yield_now` until they leave) | | | concurrent phase, writers: W = 16 22.8 → 35.9, W = 256 16.1 → 18.0, churn 9.1 → 11.4 M block-events/s (means of 4-5 alternating runs of 3); see [`lock`] |
//! | tried: prefetch the first lines of the next event's blocks before applying each event | | | the first scan of a store's blocks (its parent check) stayed at 7% of the store's samples, about 2% of a writer: a sequential read the hardware already streams; ingest within noise (6-8 pairs) |
//! | tried: name tables that grow alternately by half and by a third (1, 2, 3, 4, 6, 8, ...), not double | | | memory W = 256 36.5 → 34.3 B per held block, W = 16 47.9 → 43.9, churn 56.7 → 52.7; but ingest 9-10% slower on all three (6 pairs each): fuller tables send more lookups past a full bucket (`store` 25 → 29% of samples at W = 16, `grow` only 1.1 → 1.3%) |
//! | four name tables a rank, not sixteen | | | two-writer ingest W = 256 +11% (8 alternating pairs, 7 faster), churn +3.5%, W = 16 and the bare tree even: fewer, larger tables halve glibc's `mprotect` calls (11,948 → 5,085 per three rounds), which hold the lock the other writer's page faults need; growth now rehashes a quarter of a rank |
//! | up to two holders and two children kept in the node itself (the node stays 88 bytes); chunked arrays sized in bytes (512 nodes a chunk, not 4,096) | | | memory W = 256 36.5 → 35.9 B per held block, W = 16 47.9 → 46.6, churn 56.2 → 49.7; ingest even (6-10 alternating pairs) |
//! | tried: block data without the offset (12 bytes), found in the edge below the rank's cutoff, with tables up to fifteen sixteenths full | | | W = 256 35.9 → 32.0 B per held block, 0.497× Dynamo (the target); but two-writer W = 16 ingest 9-15% slower over 10 alternating pairs (the position's lookup 9% of samples: the node, then its edge's block-id line, a miss the 16-byte record did not need), churn 6-8% |
//! | block data of 12 bytes with the offset: node and offset packed in 32 bits, edges at most 1,024 positions (longer runs chain), a side table for locations that do not pack | | | W = 256 35.9 → 32.8 B per held block, W = 16 46.6 → 42.8, churn 49.7 → 47.2; ingest even (8-10 alternating pairs on all three workloads); a first version that read the old record before writing a new one was 7-8% slower at W = 16 (the read missed) |
//! | split heads moved to exact buffers; chunks that grow like vectors; 16-byte edge owners; exact child vectors; repeat scratch above 8 KiB given back | | | W = 256 32.8 → 32.1 B per held block (0.499-0.500× Dynamo), W = 16 → 41.2, churn → 43.0; ingest even (bare tree on churn +2%, 8 pairs) |
//! | tried: name tables up to fifteen sixteenths full, with the packed block data | | | W = 256 32.8 → 32.0 B per held block, but two-writer ingest 7-8% slower at W = 16 and W = 256 (8 pairs each, 7 slower) |
//! | the names of existing positions a rank did not hold are claimed during the walk that checks them (one probe of the rank's table, not a check and a later insert); the repeat search only for events that rename a held block | | | instructions (cachegrind, whole bare-tree probe) W = 256 1.11 → 0.99 G; bare tree +4% at W = 256, +10% at W = 16 (6 alternating pairs); two-writer ingest +5% / +3% / +1% (W = 256 / W = 16 / churn, 8 pairs) |
//! | a claim whose home bucket has room and never overflowed: one visit of it; tables keep the count at which they grow | | | W = 256 0.99 → 0.97 G instructions; time within noise (16 pairs) |
//! | a plain store (no predictions, no renames) sets the rank's cutoffs from the walk's two ends, going up from the last node, instead of visiting each existing position again | | | W = 256 0.97 → 0.90 G; the round (these three rows) W = 256 1.11 → 0.90 G, W = 16 1.60 → 1.44 G, churn 0.97 → 0.85 G; bare tree +17% / +11% / +15% (5 pairs), two-writer ingest +7.5% / even / +5% (8 pairs) |
//! | tried: `grow`'s rehash on a local slice, the table's address and size in registers | | | W = 256 instructions 10% more in `grow` (105 → 116 M): the compiler had done better; dropped |
//! | tried: name buckets of ten entries with 24-bit block ids (ids past 24 bits in a side map) | | | W = 256 32.1 → 30.9 B per held block (0.48× Dynamo) and two-writer ingest there +9% (6 pairs); but W = 16 26% slower and churn 15% (5-6 pairs, all slower): their ranks hold a power of two of names (4,096 and 256 a table), which ten-entry buckets fit at 80% load instead of growing to 40%, and at that load removals leave overflow counts that saturate (672 of 64,000 buckets at W = 16), so lookups scan 11 buckets on average instead of 2 |
//! | a writer applies the event batches queued behind the one it takes in the same write (up to 64 batches or 4,096 blocks; other ops end the group, keeping queue order): one publish and one wait for readers for the lot | | | concurrent phase, writers: W = 256 +12% (12 alternating runs of 3), churn +8%, W = 16 +3% (4); plain two-writer ingest W = 16 +9.5% (6 pairs, 6 faster), W = 256 and churn even. The round-five try of the same idea (32 ops) was measured on plain ingest only, where the queue is rarely the limit |
//! | children's variant tag in spare values of their count, the hash-map form boxed (a node 88 → 80 bytes) | | | W = 256 32.14 → 32.03 B per held block (70.88 → 70.63 MB: nodes are kept once per copy of the view); find, W = 256 and W = 16 ingest even (4-5 alternating pairs) |
//! | a removal moves entries pushed past the emptied name bucket back into it (bucketed backward shift: `names.rs`) | | | a robustness fix: a table of steady size under churn (a rank with a full cache) drifted to 7-9 buckets per absent lookup at 75% of its slots and 117-2,000 at 83%, and now stays at 1.4 and 2.2, as if rebuilt; the bench's tables sit under half full, where it costs +0.1% instructions and no cache misses |
//! | tried again with it: name buckets of ten entries with 24-bit block ids (a side map by name for larger ids) | | | W = 256 32.0 → 30.7 B per held block (0.48× Dynamo), but its ingest even (6 alternating pairs) and W = 16 13% slower (6 pairs, all slower): instructions +8% at W = 256 (three-byte ids) and +18% at W = 16, whose tables of 4,096 names now sit 80% full, where moving entries back costs 50 instructions per removal |
//! | a claim's common case (home bucket with room, no hit, nothing pushed past it) inlined into the writer's loops, the rest out of line | | | instructions (whole bare-tree probe) W = 256 935 → 888 M, W = 16 1,476 → 1,415 M, churn 868 → 846 M; bare tree W = 256 +3% (12 pairs in alternating order, 11 faster), W = 16 and churn even; two-writer W = 256 +3% (12 pairs, noisy) |
//! | tried: a claim's rest as one scan that proves the name absent and finds the bucket with room (not a lookup, then an insert) | | | W = 256 instructions 888 → 896 M: the slow claims are long overflow runs (2.5 buckets a claim) where the two scans cost little more than one with its extra bookkeeping |
//! | tried: `grow`'s rehash with the home as a shift and the new table in a local | | | instructions even (106 vs 105 M): about 32 a rehashed entry either way |
//! | tried: `grow` splitting an old bucket straight into its two new ones when nothing was pushed past the bucket before it | | | W = 256 `grow` 105 → 123 M instructions: at seven eighths full about half the buckets follow one that overflowed, so half the entries still took `put`, and the split's own work cost more than it saved (an earlier version, splitting only buckets nothing had been pushed into: 105 → 101 M) |
//! | a store's own parent among its blocks left to the claims to reject (the parent's name is the rank's already), not looked for by a scan of the event first | | | instructions (whole bare-tree probe) W = 256 888 → 876 M; bare tree W = 256 +2% (8 pairs in alternating order, 7 faster), W = 16 +6% (6 pairs, 5 faster); two-writer W = 256 +4% (10 pairs, noisy). The scan was 7% of the bare tree's samples: the event's first read, whose misses the claims' loops now take in stride |
//! | tried: each name hashed once for its prefetch and its claim (the keys of the 16 names in flight kept in a ring) | | | W = 256 instructions 888 → 904 M: the ring's loads and stores cost more than the hash they save |
//! | tried: new blocks allocated at their final location (the node and offset `insert_new` will make, planned before the names are claimed, the new nodes' ids peeked from the free list), not allocated and then relocated | | | instructions W = 256 876 → 853 M, W = 16 1,403 → 1,378 M, churn 842 → 835 M; but time even: bare tree W = 256 0.96 and 0.99 (10 and 12 pairs), W = 16 0.98 (8), two-writer W = 256 0.97 (10): the second write of a record goes to a line the first just brought in |
//! | tried: the ids of a store's new blocks in a scratch vector kept between events | | | W = 256 instructions 876 → 875 M: a small vector's `malloc` and `free` cost little |
//! | tried on the Intel Xeon machine (fifteenth round): name buckets prefetched 16 names ahead and block data 4 (and 24 and 8; 32 and 12), against 16 and 8 | | | bare tree W = 16: none faster; 16 and 4 12% slower (8 alternating pairs) |
//! | tried again (seventeenth round), as a multimap: one shard-wide table of every position by its canonical name, a rank's name confirmed by the holders of the block's node (only aliases kept per rank), a removal's lookup taking the entry out when no other rank holds the block; tables up to 3/4 full | | | memory W = 256 32.0 → 27.6 B per held block (0.43× Dynamo), churn −18%, W = 16 even (−19% at 7/8 full, where the bare tree at W = 16 was 27% slower); instructions (whole bare-tree probe) W = 256 876 → 848 M, W = 16 1,403 → 1,511 M, churn 842 → 900 M; bare tree 16% / 5% / 8% slower (W = 16 / W = 256 / churn, 8 alternating pairs); two-writer ingest even (+4% / +1% / +1%, 12 pairs each, about half faster) |
//! | a rank's names and the block data borrowed once per walk or name, not looked up (slot checked, rank live) at every step; a new block's record pushed as it is; `ChunkedVec::push` inlined for room in the last chunk; a removal's common case (home bucket, nothing pushed past it) inlined with its name check; `ChunkedVec` indexing checks the length once | | | instructions (whole bare-tree probe) W = 16 1,403 → 1,099 M with the next row, then 1,025 M; W = 256 876 → 803 M; churn 842 → 688 M. Two-writer ingest over the round: W = 16 +27% (12 alternating pairs, 12 faster), W = 256 +8% (10 of 12), churn +8% (10 of 12) |
//! | the removal's second prefetch stage dropped (a second scan of the name's bucket, eight names ahead, to prefetch its block's record) | | | 88 instructions per removed block (W = 16 −13%); two-writer ingest W = 16 +10% (10 pairs, 8 faster), churn +4%: on the Intel machine the writer is bound by instructions more than by that miss |
//! | tried: `BlockArena::loc` inlined into the removal loop again | | | W = 16 −1.1% instructions, W = 256 +0.3%: not kept |
//! | tried: the walk over a store's existing positions prefetching the record of the block eight positions on along the edge | | | W = 256 +1.7% instructions; two-writer ingest even at W = 256 and W = 16 (10 alternating pairs each): those reads mostly hit |
//! | measured, not a design (nineteenth round): every name table made 1,024 buckets at its first insert, so none grows | | | instructions (whole bare-tree probe) W = 256 803 → 604 M, two-writer ingest there +24% (4 alternating pairs): a quarter of the W = 256 writer is tables growing and claims that pass runs of full buckets, at the memory the 0.5× target leaves no room for |
//! | `grow` places each rehashed entry itself: one compare of the new bucket's counts byte, the old bucket read as slices (no bounds checks) | | | W = 256 `grow` 114 → 94 M instructions (bare tree 803 → 783 M; W = 16 1,028 → 1,025 M, churn even); two-writer ingest W = 256 +5% (10 alternating pairs, 9 faster), W = 16 and churn even (6 pairs) |
//! | tried again: a slow claim as one walk that proves the name absent and remembers the first bucket with room | | | W = 256 instructions 783 → 813 M (`claim_elsewhere` without `grow` 86 → 116 M) |
//! | a lookup's name check out of line (`Bucket::confirmed_id`): a claim past its home bucket scans for a miss, and the inlined check made its loop spill | | | a slow claim 214 → 192 instructions; bare tree W = 256 783 → 771 M, W = 16 1,025 → 1,021 M, churn 686 → 685 M; two-writer ingest W = 256 +4.6% (10 alternating pairs, 8 faster) |
//! | `ChunkedVec::push` prefetches the line 256 bytes past the new end (128 and 512 tried: 4% slower) | | | two-writer ingest W = 256 +10% (8 alternating pairs, 7 faster), churn +7% (6 of 8), W = 16 even; instructions +0.6%: appended block records and nodes go to memory rarely in the cache |
//! | a block's record with its name first (was: the packed location first) | | | the compiler copies a new record from the stack as 8 + 4 bytes, and the 8-byte read spanned both fields' stores, a store-forwarding stall on every new block (a fifth of `store`'s perf samples at W = 256); two-writer ingest W = 256 +7% (8 pairs, 6 faster), instructions unchanged |
//! | tried (nineteenth round, with the two rows above): name buckets prefetched 12 or 8 names ahead instead of 16 | | | two-writer ingest within noise: 12 ahead W = 256 +2% (12 alternating pairs, 6 faster), W = 16 +5% (7 of 12), churn −1% (5 of 12); 8 ahead W = 256 −2% (8 pairs, 3 faster), W = 16 +4% (6 of 8) |
//! | name tables under 64 buckets grow fourfold, larger ones double (sizes 1, 4, 16, 64, 128, ...); from the twentieth round, A/B pairs run both systems in one process, as the comparison does | | | two-writer ingest W = 256: writers' CPU time −4 to −10% (26 alternating pairs in three batches), wall +6-10% (16 of 26 faster); W = 16 CPU −10%; churn even; bare tree W = 256 773 → 757 M instructions; benchmark indexes the same size to the byte. Reverted in the twentieth round, when `close()` then often gave the system no memory back; landed again in the twenty-first with `close()` asking glibc for free pages (`heap.rs`: glibc's trim threshold moves with what the process freed before, which the table sizes had changed) |
//! | measured, not landed: one name table a rank instead of four | | | two-writer ingest W = 256 +21% (8 alternating pairs, 6 faster), churn +14% (8 of 8), W = 16 +4%; in five sittings W = 256 CPU-time ratio 1.92 → 2.06, W = 16 ingest 1.98 → 2.44 (medians); but W = 256 bytes 32.04 → 32.09 per held block, 0.4998-0.5009× Dynamo (over the target in one sitting of five: which ranks end just past a doubling is luck, the same in expectation), a rank's doubling rehashes all its names (a million: 6-8 ms, was a quarter at a time) and tables four times larger keep two fingerprint bits fewer |
//! | tried: one name table a rank with tables up to fifteen sixteenths full (to buy back the memory) | | | W = 256 63.76 → 61.79 MB (bare tree), but two-writer ingest churn −52%, W = 16 −13%, W = 256 −8% (6 pairs each): churn's and W = 16's ranks hold a power of two of names, which then fills its table to 89%, where overflow runs are long |
//! | tried: name tables from a zeroed allocation (`alloc_zeroed`), so a fresh table is not written with zeros first | | | two-writer ingest W = 256 +2% then −4% (8 and 12 pairs), bare tree +14% then +5%: within noise, as in the round that first tried it |
//! | tried: `grow` keeping a new bucket's counts byte in a register while entries go to it (the byte is read and incremented through memory per entry) | | | W = 256 −12% (8 pairs, 1 faster): an old bucket's entries go at random to one of its two new buckets, so the branch that switches buckets is a coin toss; keeping both new buckets' counts in one register instead: instructions 773 → 818 M, ingest even (14 pairs) |
//! | tried: `grow` prefetching the new buckets eight ahead of the ones it fills | | | two-writer ingest W = 256 +4% and +2% (8 and 6 pairs, 4 and 3 faster): within noise, the hardware already streams them |
//! | measured again (twenty-second round), with small tables growing fourfold: one name table a rank instead of four | | | W = 256 bare tree 63.65 → 63.76 MB; Dynamo / kvroute ingest, both systems in one process, 8 alternating pairs of 8 rounds: 1.87-2.10 (median 1.985) with four tables, 1.87-2.15 (1.975) with one. The nineteenth round's gain came from skipping the small sizes, which fourfold growth now does for four tables too |
//! | tried again (twenty-second round): a writer's group of queued batches up to 256 batches or 16,384 blocks (were 64 and 4,096) | | | concurrent phase W = 256, writers 17.9-21.5 against 19.0-21.4 M block-events/s (4 alternating pairs, medians of 5 runs each): even, as in the thirteenth round. Waiting for readers is 0.14% of the writers' samples there; what they lack is time on a core (the twenty-second round below) |
//! | a node with more than eight children keeps them in a hash table of 8-byte entries (the key's low 32 bits and the child's id), not 16-byte (key, id) pairs; a match of the low bits is confirmed against the child's first local hash, which the walk reads next anyway | | | W = 256 index 70,633,120 → 70,370,976 bytes (`memoryBytes`; 32.03 → 31.91 per held block): one node in each shard has thousands of children, and its table in each copy of the view went from 139,312 to 73,744 bytes; W = 16 −65,536 bytes. Speed even: ingest ratio against Dynamo, medians of alternating pairs, W = 256 1.92 → 1.94 (6 pairs), W = 16 2.115 → 2.085 and churn 2.10 → 2.075 (4 each); idle find even |
//! | tried (twenty-third round): `ChunkedVec` chunks after the first allocated whole, not grown from an eighth by `realloc` (whose copies and their page faults were about 3% of a W = 256 writer's perf samples) | | | two-writer ingest W = 256 even: ratio against Dynamo 1.905 → 1.925 (medians of 10 alternating pairs, both systems in one process; single pairs ranged 1.65-2.24); not kept, since each array's last chunk would then hold up to 64 KiB unused, where the W = 256 memory target has about 0.5% to spare |
//! | (twenty-fourth round) a real event that renames nothing takes the plain store path even when its shard holds predictions (it used to whenever none did), and confirms the rank's predictions by walking up from the last position it held; removals look for predictions only in ranks that have some | | | confirmations (`cargo bench --bench predict -- --bare --confirm`, µs per request) 8.1 → 7.3 sticky, 10.6 → 9.2 spread (medians of 6 alternating runs); without predictions the bare tree even on all three workloads (6 runs each) |
//! | tried (twenty-fourth round): name tables at most three quarters full again (seven eighths since the seventh round), so that claims meet fewer full home buckets (`claim_elsewhere` and `grow` were a quarter of a W = 256 writer's samples) | | | bare tree W = 256 even (medians of 6 alternating runs 15.75 vs 15.65 M block-events/s), W = 16 and churn even; W = 256 tree 63.5 → 66.9 MB, past the 0.5× memory target |
//! | (twenty-fifth round) name tables under 256 buckets grow fourfold (sizes 1, 4, 16, 64, 256, 512, ...: the 128-bucket size skipped) | | | instructions (whole bare-tree probe) W = 256 772 → 724 M (`grow` 54 → 35 M, `claim_elsewhere` 52 → 36 M); bare tree W = 256 +7% (4 alternating pairs, all faster), W = 16 and churn even (3 each); two-writer ingest W = 256, Dynamo's / kvroute's writer CPU time 1.85 → 1.97 and wall-clock ratio 1.98 → 2.07 (medians of 6 alternating pairs, both systems in one process); W = 256 index +80 KiB (31.91 → 31.95 B per held block), W = 16 and churn the same to within a KiB |
//! | tried (twenty-fifth round): while a reader stays on the copy in use past the spin, a writer applies the batches queued next to its spare copy before publishing (up to 65,536 blocks more), rather than publish and sleep until that reader leaves | | | `perf sched` of the W = 256 concurrent phase had shown the writers parked a third of the time, the preempted reader queued behind the other writer while a core idled; with the change idle went 0.31 → 0.12-0.17 cores and the writers' share 1.01-1.12 → 1.21-1.35 cores (three runs each, under the tracer). Untraced, the writers' throughput stayed even: kvroute alone 23.8 vs 23.1 M block-events/s (medians of 8 alternating runs; with 262,144 blocks more, 23.9), their cores 1.09 → 1.25; against Dynamo 1.48 → 1.63 (medians of 12 alternating pairs, single pairs 1.19-2.09). The writers took the idle core but did less per CPU-second; dropped |
//! | tried (twenty-sixth round): a writer yields its core once, between events, whenever another writer of the index has gone to sleep waiting for a reader (the preempted reader may be queued behind it) | | | concurrent phase W = 256, kvroute alone, 6 alternating pairs (medians of a process's last 3 of 4 runs): writers 27.2 → 25.4 M block-events/s, their cores 1.00 → 0.99, the reader's 0.88 → 0.93. In most runs the reader kept a core to itself (0.93-0.95) and the two writers shared the other, where no reader stalls them; `perf sched` showed each writer switched out only 13-28 times a run (slices of 2-4 ms). Dropped |
//! | tried (twenty-seventh round, the Intel VM of model 167): a writer waiting for readers past the spin polls every 30 µs instead of being woken by the last reader out (so that the wake-up, which the scheduler may place on the reader's core, cannot preempt the reader) | | | concurrent phase W = 256, kvroute alone, 8 alternating pairs (medians of a process's last 3 of 4 runs): writers 30.2 → 28.4 M block-events/s, their cores 1.10 → 1.02, the reader's 0.62 → 0.82: the wake from the reader helps the writers. Dropped |
//! | tried (twenty-seventh round, same VM): no spin before the writer sleeps for a reader (was 5 µs) | | | same phase and method: writers 27.4 → 28.6 M block-events/s, cores 1.00 → 1.02 (8 pairs): within noise. Dropped |
//! | tried (twenty-eighth round, same VM): the reader that wakes a sleeping writer then yields its core (`sched_yield`), so that the writer it woke may run there at once | | | concurrent phase, kvroute alone, 16 alternating pairs (same method): W = 256 writers 28.1 → 30.6 M block-events/s (12 of 16 faster), their cores 1.01 → 1.12; churn +5%, W = 16 even. Against Dynamo in one process, 18 processes each: W = 256 ratio 1.67-2.10 (median 1.78, one at 2×) → 1.62-2.41 (1.87, four at 2×); reader p99 even, p99.9 12-43 µs either way. Dropped: a yield in the read path lets a writer hold up a query's return for a time slice on a busy machine (in a gateway, the JavaScript thread), which the design exists to avoid, and the gain leaves the median short of 2× |
//!
//! What the profiles showed at each step: the second application of every event (its hash
//! probes again, on the second copy) was half the writers' time, so only the view is kept twice
//! and its copy replays resolved per-edge ops. Then most of the time was hash-table probes that
//! miss the cache, one or two per stored or removed block: an event's names are known before any
//! is used, so the writer prefetches a few names ahead and the misses overlap (hashbrown does not
//! expose a probe's address, hence [`names::NameTable`]). Engines evict leaf first, so a Removed
//! event's runs along an edge are cut once instead of position by position. Tried and not kept:
//! a name table at most half full instead of three quarters (no measurable gain, 25% more
//! memory). Also tried: one shard-wide table of canonical names instead of one per rank (at
//! W = 256 a position is held by only 1.3 ranks per shard, so memory stayed at 143 MB while the
//! holder check each lookup then needs cost 15% of ingest). Reads were also made cheaper: results
//! sort by a packed u64 (blocks, rank order) key, which halved a query at W = 256.
//!
//! The next profile had a quarter of the writer's time in the name table's backward-shift
//! deletion and in proving names absent: linear probing at three quarters full scans about eight
//! slots (two or three cache lines) for either. [`names::NameTable`] then kept seven 8-byte
//! entries (32-bit fingerprint, block id) per 64-byte bucket (nine of 7 bytes now, see below),
//! with an overflow counter per bucket instead of shifting: every operation reads one line,
//! usually, and the table is half the size.
//! A fingerprint hit is confirmed against the block's own name, which the writer reads next anyway.
//! Then the writer's own clock showed a fifth of its time outside the tree: every applied batch
//! woke the thread waiting in `flush` (a futex wake-up and a reschedule, about 6 µs on this VM),
//! although it waited for the last batch only; waiters now register the position they need. A
//! removal's two dependent misses (the name's bucket, then its block's data) are prefetched in
//! two stages, sixteen and eight names ahead. A Stored event's new names are claimed (each
//! checked and inserted back to back, its bucket in the cache) right before the tree changes,
//! and given back if one is taken; a Removed event takes each name of its leaf-first run out of the table as soon as
//! the run reaches it, while the bucket is in the cache, so the cut does not visit it again.
//! Then a bucket's scan itself: the seven fingerprints were compared one by one and the loop left
//! at a random place on every removal, a mispredicted branch per block; two SSE2 compares give a
//! bit mask of the hits instead, which made the bare tree 1.5–1.7× faster. (Reads, for the
//! record: edges are compared eight hashes at a time, long results are ordered by grouping their
//! few distinct block counts rather than sorted, shards' runs are merged by hand and per-thread
//! scratch replaces per-query allocations: a W = 256 query 6.9 → about 3.8 µs on the probe.)
//! Two later tries, both measured in alternating pairs and dropped. Replaying the journal at the
//! start of the next write (or when the writer idles) instead of right after publishing, so that a
//! writer need not wait for the readers of the copy it just unpublished: the profile of the
//! concurrent phase (two writers, one reader querying in a loop, the producer, on two cores) still
//! showed the writers yielding, now at the start of the next write, because the reader they wait
//! for is one the scheduler preempted mid-query, and it is back only after a time slice whenever
//! the writer next needs that copy. (What did help, later: a writer that sleeps instead of
//! spinning for that reader frees its core for it; see [`lock`].) And prefetching the bucket after a full or overflowed home
//! bucket (about one insert in four spills at three quarters full): no change in the bare tree.
//! Transparent huge pages for the heap (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`, a setting of the
//! whole process, not a library's to make) gave the bare tree +5% at W = 256: TLB misses are a
//! small part of the cost (and two writers at W = 256 were even with it in the twenty-third
//! round: our times 0.0614-0.0689 s a round without, 0.0626-0.0664 s with, four alternating pairs).
//!
//! Then instructions, counted with cachegrind, which on this noisy machine gives the same
//! answer every run: about 435 per block-event on the bare tree at W = 16, a quarter of them
//! spent finding a name's table, fingerprint and bucket again for each of the three or four
//! times a block's name was touched. A removed name is now looked up and taken out of its table
//! in one scan (`Book::take_named`; a name that starts a new run goes back in for the pending
//! cut), a new name is checked and inserted in one call (`Book::claim_name`), the cut counts the
//! positions whose names were taken instead of visiting each, and a bucket's home is a multiply
//! instead of a checked shift: 25% fewer instructions at W = 16, 14% at W = 256, where the
//! wall-clock rate did not move (its cost is cache misses and page faults as tables grow).
//!
//! What the time goes to now: one bucket and one block-data miss per removed block and one
//! bucket miss per new block (prefetched, so they overlap), about 330 instructions per
//! block-event on the bare tree at W = 16, node allocations and the second view's replay (about
//! 6% of a writer); at W = 256, page faults as 256 ranks' name tables and the rest of the tree
//! grow (perf: 27% of a writer's samples in the kernel, 14% in `malloc` and `free`); on the churn workload, the structural
//! work of many small events (nodes created, split and freed in both views; their allocations
//! and frees are some 5% of its instructions). The next step is fewer, larger allocations:
//! edges, block data and names in per-shard arenas.
//!
//! Then the machinery around the tree (2026-12-02, fifth round). With events built before the
//! clock starts (the comparison copied every event inside its timed loop until then), the
//! writers' remaining overhead showed up as futex calls: glibc frees a chunk into the arena of
//! the thread that allocated it, under that arena's lock, so two writers freeing the sender's
//! event batches slept on one lock, a call every batch or two on churn. A batch that belongs to
//! one writer now goes to it as it is, and applied batches wait in the writer's pile for the
//! next sender (`apply_events`, `flush`) to free them (see `spent.rs`). Also found this round, by
//! the JS differential test once tables ran 7/8 full: a lookup of an absent name in a table
//! whose every bucket counted an overflow went round it forever (a hung writer); scans now stop
//! after every bucket. And the cost that dominates W = 256 is first touches of memory: a page
//! fault costs about 2 µs on this VM, a fresh 100 MB index faults about 25,000 pages, and
//! whether an index gets memory its process freed before (no faults) depends on glibc's arena
//! reuse, so the comparison now reports each round's faults.
//!
//! Then memory again (sixth round): both copies of the view kept their own edges, 12 bytes per
//! tree position each (a local hash and a block id), and the second copy's replay copied every
//! appended position. An edge's positions never change while a copy shows them, so the copies
//! now point at one buffer per edge, owned by the book: a writer appends in place when no copy
//! shows the positions it writes (the copy readers are on is the tree before this write, so only
//! a node shortened in this write, or one out of room, moves to a new buffer), and buffers no
//! copy shows any more are freed when the next write starts. The replay of an append sets a
//! pointer and a length. A W = 256 index went from 108.7 to 86.5 MB; a node's two copies from
//! two vectors each to 16 bytes each. A test cuts and regrows one leaf in every write while a
//! reader checks it never sees a mix of the two paths; writing in place regardless fails it
//! every run. A write that panics poisons its shard (no more writes; reads go on), since the
//! copies and the book may then disagree about which buffers are shown.
//!
//! Then the names' own size (seventh round). At W = 256 the rank tables were the index's largest
//! part, 15 bytes per held block: seven 8-byte entries per 64-byte bucket, and tables that
//! double sit about 60% full on average. A bucket now holds nine entries with 24-bit
//! fingerprints (their low 16 and high 8 bits each side by side, so three SSE2 compares test all
//! nine), 12 bytes per held block: a W = 256 index 86.5 → 80.5 MB, and its two-writer ingest 15%
//! faster, from fewer pages to fault. The two other ways to the 0.5× memory target were measured
//! and dropped (table above): tables that grow by a quarter rehash every name several times, and
//! block data without the edge offset moves a cache miss where nothing prefetches it.
//!
//! Eighth round. Tables that grow by half and then by a third (so they sit about 73% full, not
//! 63%) cut the W = 256 index to 34.3 bytes per held block, but ingest was 9-10% slower on every
//! workload, and the profile put the loss in lookups, not in `grow`: fuller tables send more of
//! them past a full bucket. Incremental growth, which keeps tables full all the time, would pay
//! the same, so the names' remaining slack is the price of their speed with buckets of nine.
//! What did help was around the tree: in the concurrent phase a writer waiting for a reader
//! that the scheduler preempted now sleeps instead of spinning ([`lock`]), which gave the
//! writers 12-57% more there; and four name tables a rank instead of sixteen, which made two
//! writers at W = 256 11% faster through the allocator, not the tree ([`names`]).
//!
//! Ninth round: the memory around the tree. Most nodes have one or two holders and zero or two
//! children, and each was a `Vec` (a heap allocation of four pairs at least, per node and view
//! copy); up to two of each now sit in the node, in bytes it had anyway (`tree/holders.rs`,
//! `tree/children.rs`), and [`growth::ChunkedVec`] sizes its chunks in bytes, so the nodes'
//! last chunk leaves less room unused: churn 56.2 → 49.7 bytes per held block, W = 256 36.5 →
//! 35.9, ingest even. The 0.5× memory target at W = 256 was reached once, at 32.0 bytes (block
//! data of 12 bytes without the offset, which the writer finds below the rank's cutoff in the
//! edge, and tables up to 15/16 full), and dropped: W = 16's ingest, which meets its 2× target,
//! fell 9-15%, since finding a position now loads the node and then a line of its edge, two
//! misses the old record did not need.
//!
//! Tenth round: the offset without a miss. A position's node and offset now share one `u32`
//! (`tree/blocks.rs`): the offset in 10 bits, because the tree keeps every edge at most 1,024
//! positions long (a longer run continues in a child the rank holds whole), and the node in the
//! other 22, with a side table for the locations that do not fit (past about four million
//! nodes), so a huge tree is slower and larger, never wrong. Block data is 12 bytes with no
//! extra load, and ingest measured even. Then the memory no container used: a split head kept
//! its whole old buffer although, with a child, it never grows in place again (the tail's
//! positions were allocated twice, 1.2 MB at W = 256); a new chunk was allocated whole for its
//! first element; each node's edge owner kept a length nobody read. W = 256 went 35.9 → 32.1
//! bytes per held block, which against Dynamo's 64.22-64.38 (its allocation order varies by
//! sitting) is 0.499-0.500×: on the target's line rather than under it (see `BENCHMARKS.md`).
//!
//! Eleventh round: instructions again. Cachegrind on the bare tree at W = 256 counted about 450
//! instructions per stored block, and a position that another rank had created cost twice a
//! new one: the walk that checks an event's existing positions looked each name up in the
//! rank's table, a second pass over the same positions inserted it (another probe), set the
//! rank's cutoff node by node and counted each block, and every such event searched its names
//! for repeats. Now the walk claims each name it reaches (checked and inserted in one probe, and
//! given back if the event is rejected), so a repeat is caught by its second claim and the
//! repeat search only runs for the rare event that renames a held block; and a plain store sets
//! the rank's cutoffs from the walk's two ends, going up the parent links from the last node.
//! The whole probe at W = 256 went from 1.11 to 0.90 G instructions (W = 16 1.60 → 1.44, churn
//! 0.97 → 0.85), the bare tree 11-17% faster on the three workloads; two writers gain less
//! (even to +7.5%), because their time also goes to page faults on fresh memory and to the
//! second core's share of the sender's work. The concurrent phase (a reader querying in a loop
//! while two writers apply) then gained from writers applying the batches queued behind the one
//! they take in the same write: one publish, and one wait for a preempted reader to leave the
//! other copy, per group rather than per batch (W = 256 +12% there).
//!
//! Fifteenth round: another machine. The rounds above ran on an AMD EPYC VM; this one is an
//! Intel Xeon (Emerald Rapids, KVM, 2 vCPUs at 2.3 GHz). The same code's bare tree runs 15-23 M
//! block-events/s at W = 256 here, against 26-30 M there, for the same instruction count; our
//! two-writer ingest lost about half, Dynamo's a quarter to a third, so every write ratio fell
//! (`bench/vs-dynamo/HISTORY.md`). Two writers spend about a quarter more writer CPU on the same
//! events than one (perf, W = 16), spread over the tree in proportion (stores +27%, name removals +40%,
//! prefetches +22%), as slower memory accesses would, not a shared lock or line; the shards'
//! duplicated positions add 10% more work. Prefetch
//! distances tried again for this machine (buckets 16 names ahead and block data 4; 24 and 8;
//! 32 and 12): none beat 16 and 8. A W = 256 query spent a tenth of its time in `malloc`, growing
//! fresh vectors for the shards' runs and their merge; per-thread buffers (`merge.rs`) made
//! queries 11% faster at W = 256, 28% at W = 16 and 22% on churn. A merge that picks the next
//! score without a branch was 23% slower: shards hold alternate ranks, so the branch predicts.
//! And the lockstep walk (each batch flushed before the next query) took 0.4-2.4 s across
//! sittings, and its profile was mostly the scheduler: a flush yielded from the start. It now
//! spins up to 50 µs first (`concurrent.rs`): the walk 29% faster at W = 16, 26% on churn and
//! 17% at W = 256 (medians of 6 alternating runs).
//!
//! Sixteenth round, same machine: where the rest of the gap is. Its two virtual CPUs run a
//! chain of dependent additions at 1.7-2.7 GHz, changing from run to run and differing by up to
//! 1.5× at once, so the writer that lands on the slower one sets a burst's wall time: the two
//! writers execute the same instructions (callgrind per thread) yet took 1.03-1.85× each
//! other's CPU time. Sharing the work out as it goes would need more shards than writers, and
//! shards duplicate shared prefixes: a W = 256 index is 29.7 / 32.0 / 33.3 / 33.9 bytes per
//! held block with 1 / 2 / 3 / 4 shards, past the memory target from three on. Counted in CPU
//! time rather than wall time, Dynamo's threads spend 1.3-1.9× ours at W = 16 and 256 here, so
//! balance alone would not reach 2× either. Tried and dropped: a claim that proves a name
//! absent and finds its bucket in one walk (0.8% more instructions), prefetching only a name's
//! home bucket (W = 16 9.5% slower) and a block record's second line only when it straddles two
//! (17.5% slower); and freeing applied event batches no longer costs measurably
//! (`bench/vs-dynamo/HISTORY.md`).
//!
//! Seventeenth round: the names, shared. At W = 256 half the block-events store a position
//! another rank created, and each costs that rank an insert into its own table and that table's
//! growth (`grow` is 13% of the bare tree's instructions there, claims past a full bucket 10%).
//! A shard-wide table that holds each position once, by its canonical name, with a rank's name
//! for it confirmed by the holders of the block's node (so only aliases stay per rank), removes
//! those inserts and 14% of a W = 256 index's memory. But every lookup of a rank's name then
//! reads the node's holders too, and where a position has one holder (W = 16) nothing is saved:
//! one writer was 5-16% slower on the three workloads, two writers even (table above). Not kept:
//! the memory target is met already and the write targets are the ones short.
//!
//! Eighteenth round: instructions against Dynamo's own. Callgrind on each system's writer
//! threads (`npm run bench:vs-dynamo-instructions`) counted 321-456 instructions per
//! block-event for ours against 188-297 for Dynamo's, 1.5-1.7× as many, on all three workloads:
//! our lead in CPU time came from stalling far less per instruction (one-line buckets,
//! prefetched misses, no locks), not from doing less, so the write targets' gap was
//! instructions. Much of it was bookkeeping around the name tables: the rank's table looked up
//! (slot bounds, live-rank check) two or three times per name, records written twice, every
//! `ChunkedVec` index checked twice, and a second prefetch stage per removed name that rescanned
//! its bucket to prefetch the block's record (88 instructions, more than the miss it hid costs
//! on this machine). Without them (table above) ours run 227-354 against 188-297, 1.2× Dynamo's at
//! W = 16 and on churn and 1.34× at W = 256, and two-writer ingest rose 27% / 8% / 8%. What is
//! left at W = 256 is mostly the names themselves: claims past a full home bucket and the
//! tables' growth are a quarter of the instructions, and emptier tables would cost the memory
//! the 0.5× target has no room for (`BENCHMARKS.md`).
//!
//! Nineteenth round: stalls, found with perf once the instructions were cut. A fifth of
//! `store`'s samples at W = 256 sat on one instruction: the copy of a new block's record from
//! the stack, whose 8-byte read spanned the two stores that had built it (a 4-byte location,
//! then the name), which the CPU cannot forward, so every new block waited for both to reach
//! the cache. The record now starts with its name and each read matches one store. Appends to
//! the block records and nodes also waited on each cache line's first write (memory just grown
//! or freed by an earlier index); `ChunkedVec::push` now prefetches four lines ahead. With a
//! tighter rehash in `grow` and the name check out of the claims' slow scan (table above), the
//! two-writer ingest at W = 256 rose about a quarter against the round's start (`ingest-rounds`,
//! both systems, medians of 8 rounds: 1.55-1.64× Dynamo → 1.78-2.14×), the instruction count
//! only 4% (326 → 314 per block-event). The lesson for this tree: once instructions are few,
//! look at where perf's samples pile up on a single instruction.
//!
//! Twentieth round: the tables' count, measured and not landed. One name table a rank instead
//! of four was a fifth faster at W = 256 in alternating pairs but left that index over the 0.5×
//! memory target in one sitting of five and a rank's growth unsplit; growing small tables
//! fourfold got half of that, and was reverted when `close()` then often handed no memory back.
//! A/B pairs now run both systems in one process: alone, kvroute's fresh index faulted about ten
//! times the pages (its heap trimmed between rounds), which weighed changes by their faults.
//!
//! Twenty-first round: that memory was never the tables' doing. glibc gives a heap's free top
//! back to the system only above a trim threshold that rises each time the process frees a
//! large mapped chunk, up to the size of a writer thread's whole heap; which chunks the process
//! had freed before decided whether closing an index gave anything back. Pinning the threshold
//! (`MALLOC_MMAP_THRESHOLD_`) made the memory test pass 8 of 8 with fourfold growth; `close()`
//! now asks glibc to return free pages for any index of a megabyte or more (`heap.rs`), and the
//! fourfold growth is back.
//!
//! Twenty-second round: the memory target's margin. Dynamo's own size moves from sitting to
//! sitting (64.06-64.41 bytes per held block at W = 256), and at 64.06 our 32.04 was 0.5001×.
//! Where a W = 256 index's 70.6 MB go (two shards): rank names 26.5 MB (12 bytes a name, tables
//! 59% full), edges 20.6 MB and block data 20.3 MB (12 bytes each per position; 1,689,912
//! positions, where one tree of all ranks has 1,462,320: prefixes that workers of both writers
//! store are made in both shards), four copies of the view 3.2 MB, of which 557 KB were the
//! child tables of one node per shard. Those now keep 8 bytes a child (the table above): 31.91
//! bytes per held block, 0.498× Dynamo's smallest. Also measured again: one name table a rank
//! no longer gains anything, now that small tables grow fourfold (the table above).
//!
//! [`KvIndex`] adds the background writer threads, flush barrier and close.

pub mod concurrent;
pub mod event;
mod expiry;
pub mod growth;
pub mod json;
pub mod lock;
pub(crate) mod lower;
mod merge;
pub mod names;
pub mod packed;
mod prefetch;
pub(crate) mod shard;
mod spent;
pub mod stats;
pub mod tree;

pub use concurrent::{KvIndex, Overlap, PredictionTicket};
pub use event::{DpRank, EventData, Rank, RouterEvent, StoredBlock, WorkerId};
pub use spent::MAX_PILE_BYTES;
pub use stats::{EventCounters, IndexStats, Rejection};
pub use tree::{DumpedStore, MatchScore, Tree};
