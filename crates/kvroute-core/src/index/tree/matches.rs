//! `find_matches`: for each rank, how many leading blocks of a query it holds.

use super::view::View;
use super::{BlockId, ROOT};
use crate::index::event::Rank;

/// One rank's overlap with a query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchScore {
    pub rank: Rank,
    /// Leading blocks of the query the rank holds.
    pub blocks: u32,
    /// Blocks the rank holds in total.
    pub tree_size: u32,
}

/// A reader thread's working buffers, kept between queries: allocating them per query (the
/// scores, the keys, the position array) cost a sixth of a query at W = 256. They are not part of
/// any index's `memory_bytes`: at most [`Scratch::KEEP`] entries each per thread that queries.
#[derive(Default)]
struct Scratch {
    /// A score per rank slot (only the query's rows are meaningful).
    by_slot: Vec<u32>,
    keys: Vec<u64>,
    by_position: Vec<u32>,
    path: Vec<BlockId>,
}

impl Scratch {
    /// Buffers that grew past this many elements are given back after the query.
    const KEEP: usize = 1 << 14;

    fn trim(&mut self) {
        if self.by_slot.capacity() > Self::KEEP
            || self.keys.capacity() > Self::KEEP
            || self.by_position.capacity() > Self::KEEP
            || self.path.capacity() > Self::KEEP
        {
            *self = Self::default();
        }
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::default();
}

impl View {
    /// Scores every rank holding at least the query's first block, sorted by blocks (descending),
    /// then worker id, then dp rank. Predicted blocks whose TTL passed at `now_ms` do not count,
    /// even before the next write sweeps them away.
    pub fn find_matches(&self, query: &[u64], now_ms: f64) -> Vec<MatchScore> {
        let mut out = Vec::new();
        self.find_matches_into(query, now_ms, &mut out);
        out
    }

    /// [`Self::find_matches`], appending its sorted scores to `out` (an index with several shards
    /// collects every shard's run in one vector and merges them).
    pub fn find_matches_into(&self, query: &[u64], now_ms: f64, out: &mut Vec<MatchScore>) {
        SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut scratch) => {
                self.scores_with(query, now_ms, &mut scratch, out);
                scratch.trim();
            }
            // Only if a query ran inside another on this thread, which nothing does today.
            Err(_) => self.scores_with(query, now_ms, &mut Scratch::default(), out),
        });
    }

    fn scores_with(&self, query: &[u64], now_ms: f64, scratch: &mut Scratch, out: &mut Vec<MatchScore>) {
        let Some(&first_local) = query.first() else {
            return;
        };
        let Some(first) = self.node(ROOT).children.get(first_local, |c| self.first_local(c)) else {
            return;
        };
        let track_path = self.predictions > 0;
        let Scratch { by_slot, keys, by_position, path } = scratch;
        path.clear();
        // Every rank that scores holds the first node, so its holders are the result rows; each
        // node below overwrites the score of its own holders (a subset of those rows). Scores sit
        // in an array indexed by slot: one store per holder per node, where a slot-sorted list
        // needed a binary search per holder.
        let rows = self.node(first).holders.as_slice();
        by_slot.resize(by_slot.len().max(self.ranks.slots.len()), 0);
        let mut node = first;
        let mut depth = 0u32;
        loop {
            let n = self.node(node);
            let rest = &query[depth as usize..];
            let m = common_prefix(n.locals(), rest) as u32;
            for &(slot, cutoff) in n.holders.as_slice() {
                by_slot[slot as usize] = depth + cutoff.min(m);
            }
            if track_path {
                path.extend_from_slice(&n.blocks()[..m as usize]);
            }
            depth += m;
            if m < n.len() || depth as usize == query.len() {
                break;
            }
            match n.children.get(query[depth as usize], |c| self.first_local(c)) {
                Some(child) => node = child,
                None => break,
            }
        }
        // Sort key: blocks descending, then rank order, packed in a u64 (cheap to compare).
        keys.clear();
        keys.extend(rows.iter().filter_map(|&(slot, _)| {
            let blocks = by_slot[slot as usize];
            let blocks = if track_path {
                unexpired_prefix(path, blocks, &self.ranks.state(slot).predicted, now_ms)
            } else {
                blocks
            };
            (blocks > 0).then(|| (u64::from(!blocks) << 32) | u64::from(self.ranks.position(slot)))
        }));
        order_keys(keys, self.ranks.count(), by_position);
        out.extend(keys.iter().map(|&key| {
            let state = self.ranks.state(self.ranks.at_position(key as u32));
            MatchScore { rank: state.rank, blocks: !((key >> 32) as u32), tree_size: state.held }
        }));
    }
}

/// Results longer than this are ordered by [`order_keys`]' grouping, shorter ones sorted.
const SHORT_RESULT: usize = 32;
/// The most distinct block counts a result may have for the grouping to beat a sort.
const FEW_COUNTS: usize = 8;

/// Orders score keys (`!blocks << 32 | rank position`) ascending, as `sort_unstable` would.
/// With many ranks a result is long but has few distinct block counts (at W = 256, nearly all
/// of 129–256 scores share two to four counts), so instead of sorting it, the keys are spread
/// over `by_position` (scratch: an array indexed by rank position) and read back once per distinct count, highest first:
/// O(ranks × counts) simple steps instead of a sort's mispredicted comparisons, which were half
/// the cost of the tree walk. Short results, or many distinct counts, are sorted.
fn order_keys(keys: &mut [u64], positions: usize, by_position: &mut Vec<u32>) {
    let mut counts = [0u32; FEW_COUNTS];
    let mut distinct = 0;
    if keys.len() > SHORT_RESULT {
        for &key in keys.iter() {
            let count = (key >> 32) as u32;
            if !counts[..distinct].contains(&count) {
                if distinct == FEW_COUNTS {
                    distinct = usize::MAX;
                    break;
                }
                counts[distinct] = count;
                distinct += 1;
            }
        }
    }
    if keys.len() <= SHORT_RESULT || distinct == usize::MAX {
        keys.sort_unstable();
        return;
    }
    // Stored inverted (`!blocks`), so ascending is most blocks first. No key is `u32::MAX`
    // (that would be 0 blocks, which is never reported), so it marks an empty position.
    let counts = &mut counts[..distinct];
    counts.sort_unstable();
    by_position.clear();
    by_position.resize(positions, u32::MAX);
    for &key in keys.iter() {
        by_position[key as u32 as usize] = (key >> 32) as u32;
    }
    let mut out = keys.iter_mut();
    for &count in counts.iter() {
        for (position, _) in by_position.iter().enumerate().filter(|(_, &c)| c == count) {
            *out.next().expect("as many keys as scored positions") = (u64::from(count) << 32) | position as u64;
        }
    }
}

/// How many leading elements `a` and `b` share. Edges and queries run to hundreds of blocks, so
/// this compares eight at a time (an XOR-OR the compiler turns into vector instructions) and
/// finds the first difference only inside the chunk that has one: the element-by-element loop it
/// replaced was a third of a query's time at W = 256.
fn common_prefix(a: &[u64], b: &[u64]) -> usize {
    const CHUNK: usize = 8;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut done = 0;
    for (x, y) in a.chunks_exact(CHUNK).zip(b.chunks_exact(CHUNK)) {
        if x.iter().zip(y).fold(0, |diff, (p, q)| diff | (p ^ q)) != 0 {
            break;
        }
        done += CHUNK;
    }
    done + a[done..].iter().zip(&b[done..]).take_while(|(p, q)| p == q).count()
}

/// How many of the first `held` path blocks are not expired predictions. Expiry never increases
/// along a rank's path (a prediction refreshes its whole prefix, and confirmed blocks sit above
/// predicted ones), so the expired blocks form a suffix and a binary search finds its start.
fn unexpired_prefix(
    path: &[BlockId],
    held: u32,
    predicted: &crate::index::growth::FastMap<BlockId, f64>,
    now_ms: f64,
) -> u32 {
    if predicted.is_empty() {
        return held;
    }
    let expired = |i: usize| predicted.get(&path[i]).is_some_and(|&t| t <= now_ms);
    let (mut lo, mut hi) = (0usize, held as usize);
    while lo < hi {
        let mid = (lo + hi) / 2;
        if expired(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo as u32
}

#[cfg(test)]
mod tests {
    use super::{common_prefix, order_keys, FEW_COUNTS, SHORT_RESULT};

    /// Against a plain sort: short and long results, few and many distinct counts, positions
    /// with gaps (ranks that do not score).
    #[test]
    fn order_keys_sorts() {
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for len in [0, 1, SHORT_RESULT, SHORT_RESULT + 1, 100, 256] {
            for distinct in [1, 2, FEW_COUNTS, FEW_COUNTS + 1, 40] {
                let positions = len * 2 + 3;
                let mut free: Vec<u64> = (0..positions as u64).collect();
                let mut keys: Vec<u64> = (0..len)
                    .map(|_| {
                        let position = free.swap_remove((next() % free.len() as u64) as usize);
                        let blocks = 1 + (next() % distinct as u64) * 7;
                        (u64::from(!(blocks as u32)) << 32) | position
                    })
                    .collect();
                let mut expected = keys.clone();
                expected.sort_unstable();
                order_keys(&mut keys, positions, &mut Vec::new());
                assert_eq!(keys, expected, "len {len} distinct {distinct}");
            }
        }
    }

    /// Against the element-by-element definition: every mismatch position inside and across the
    /// chunks, and every pair of lengths around them.
    #[test]
    fn common_prefix_finds_the_first_difference() {
        let a: Vec<u64> = (0..40).map(|i| i * 0x9E37_79B9 + 1).collect();
        for len_a in 0..=a.len() {
            for len_b in [0, 1, 7, 8, 9, 16, 17, 25, 40] {
                for differ_at in 0..=len_b {
                    let mut b: Vec<u64> = a.iter().copied().chain(1000..).take(len_b).collect();
                    if let Some(x) = b.get_mut(differ_at) {
                        *x ^= 1 << (differ_at % 64);
                    }
                    let expected = a[..len_a].iter().zip(&b).take_while(|(p, q)| p == q).count();
                    assert_eq!(common_prefix(&a[..len_a], &b), expected, "len_a {len_a} len_b {len_b} at {differ_at}");
                }
            }
        }
    }
}
