//! Merging the shards' scores for a query: each shard returns its scores sorted in tree order
//! (blocks descending, then rank) and shards hold disjoint ranks, so a read merges sorted runs.

use super::tree::MatchScore;

/// Merges the sorted runs `runs[..ends[0]]`, `runs[ends[0]..ends[1]]`, … (tree order: blocks
/// descending, then rank) into one sorted vector, pairwise. A stable sort of the concatenation
/// merges in linear time too, but its scratch allocation and run detection cost as much as
/// ordering each shard's scores (perf, W = 256).
pub fn merge_runs(mut runs: Vec<MatchScore>, ends: &[usize]) -> Vec<MatchScore> {
    let mut bounds: Vec<usize> = std::iter::once(0).chain(ends.iter().copied()).collect();
    bounds.dedup();
    let mut spare = Vec::new();
    while bounds.len() > 2 {
        spare.clear();
        spare.reserve(runs.len());
        let mut merged = vec![0];
        for k in (0..bounds.len() - 1).step_by(2) {
            let (start, mid) = (bounds[k], bounds[k + 1]);
            match bounds.get(k + 2) {
                Some(&end) => merge_two(&runs[start..mid], &runs[mid..end], &mut spare),
                None => spare.extend_from_slice(&runs[start..mid]),
            }
            merged.push(spare.len());
        }
        std::mem::swap(&mut runs, &mut spare);
        bounds = merged;
    }
    runs
}

fn merge_two(a: &[MatchScore], b: &[MatchScore], out: &mut Vec<MatchScore>) {
    let precedes = |x: &MatchScore, y: &MatchScore| x.blocks > y.blocks || (x.blocks == y.blocks && x.rank < y.rank);
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if precedes(&b[j], &a[i]) {
            out.push(b[j]);
            j += 1;
        } else {
            out.push(a[i]);
            i += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
}

#[cfg(test)]
mod tests {
    use super::merge_runs;
    use crate::index::{MatchScore, Rank};

    /// Against a sort of the concatenation: up to seven runs, some empty, with ties on blocks.
    #[test]
    fn merge_runs_orders_like_a_sort() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let order = |a: &MatchScore, b: &MatchScore| b.blocks.cmp(&a.blocks).then(a.rank.cmp(&b.rank));
        for round in 0..300 {
            let shards = 1 + round % 7;
            let (mut runs, mut ends) = (Vec::new(), Vec::new());
            for shard in 0..shards {
                let mut run: Vec<MatchScore> = (0..next(6))
                    .map(|r| MatchScore {
                        rank: Rank::new(next(4), (r * 7 + shard) as u32),
                        blocks: 1 + next(3) as u32,
                        tree_size: 9,
                    })
                    .collect();
                run.sort_by(order);
                runs.extend(run);
                ends.push(runs.len());
            }
            let mut expected = runs.clone();
            expected.sort_by(order);
            assert_eq!(merge_runs(runs, &ends), expected, "round {round}");
        }
    }
}
