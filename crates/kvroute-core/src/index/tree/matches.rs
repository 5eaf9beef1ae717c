//! `find_matches`: for each rank, how many leading blocks of a query it holds.

use super::ranks::Slot;
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

impl View {
    /// Scores every rank holding at least the query's first block, sorted by blocks (descending),
    /// then worker id, then dp rank. Predicted blocks whose TTL passed at `now_ms` do not count,
    /// even before the next write sweeps them away.
    pub fn find_matches(&self, query: &[u64], now_ms: f64) -> Vec<MatchScore> {
        let Some(&first_local) = query.first() else {
            return Vec::new();
        };
        let Some(first) = self.node(ROOT).children.get(first_local) else {
            return Vec::new();
        };
        let track_path = self.predictions > 0;
        let mut path: Vec<BlockId> = Vec::new();
        // Every rank that scores holds the first node, so its holders are the result rows.
        let mut scores: Vec<(Slot, u32)> = self.node(first).holders.clone();
        let (mut node, mut depth, mut is_first) = (first, 0u32, true);
        loop {
            let n = self.node(node);
            let rest = &query[depth as usize..];
            let m = n.locals.iter().zip(rest).take_while(|(a, b)| a == b).count() as u32;
            if is_first {
                for (score, (_, cutoff)) in scores.iter_mut().zip(&n.holders) {
                    score.1 = (*cutoff).min(m);
                }
            } else {
                for &(slot, cutoff) in &n.holders {
                    if let Ok(i) = scores.binary_search_by_key(&slot, |(s, _)| *s) {
                        scores[i].1 = depth + cutoff.min(m);
                    }
                }
            }
            if track_path {
                path.extend_from_slice(&n.blocks[..m as usize]);
            }
            depth += m;
            is_first = false;
            if m < n.len() || depth as usize == query.len() {
                break;
            }
            match n.children.get(query[depth as usize]) {
                Some(child) => node = child,
                None => break,
            }
        }
        // Sort key: blocks descending, then rank order, packed in a u64 (cheap to compare).
        let mut keys: Vec<u64> = scores
            .into_iter()
            .filter_map(|(slot, blocks)| {
                let blocks = if track_path {
                    unexpired_prefix(&path, blocks, &self.ranks.state(slot).predicted, now_ms)
                } else {
                    blocks
                };
                (blocks > 0).then(|| (u64::from(!blocks) << 32) | u64::from(self.ranks.position(slot)))
            })
            .collect();
        keys.sort_unstable();
        keys.into_iter()
            .map(|key| {
                let state = self.ranks.state(self.ranks.at_position(key as u32));
                MatchScore { rank: state.rank, blocks: !((key >> 32) as u32), tree_size: state.held }
            })
            .collect()
    }
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
