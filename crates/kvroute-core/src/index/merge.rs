//! Merging the shards' scores for a query: each shard returns its scores sorted in tree order
//! (blocks descending, then rank) and shards hold disjoint ranks, so a read merges sorted runs.

use super::tree::MatchScore;
use std::cell::RefCell;

/// A reader thread's buffers for the shards' runs, kept between queries: a W = 256 query
/// collects up to 256 scores, and growing a fresh vector for them (then two more for the merge)
/// put a tenth of the query's time in `malloc`, much of it glibc consolidating the small chunks
/// the last query freed before it could serve the larger ones (perf, Intel Xeon, 2026-12-03).
/// Not part of any index's `memory_bytes`: at most [`Runs::KEEP`] scores each, per thread.
#[derive(Default)]
struct Runs {
    scores: Vec<MatchScore>,
    spare: Vec<MatchScore>,
    bounds: Vec<usize>,
    merged: Vec<usize>,
}

impl Runs {
    /// Buffers that grew past this many scores are given back after the query.
    const KEEP: usize = 1 << 12;
}

thread_local! {
    static RUNS: RefCell<Runs> = RefCell::default();
}

/// Collects `shards` sorted runs (`fill(i, out)` appends shard `i`'s scores, in tree order:
/// blocks descending, then rank) and merges them into one vector of exactly their length,
/// pairwise. A stable sort of the concatenation merges in linear time too, but its scratch
/// allocation and run detection cost as much as ordering each shard's scores (perf, W = 256).
pub fn merged_runs(shards: usize, mut fill: impl FnMut(usize, &mut Vec<MatchScore>)) -> Vec<MatchScore> {
    RUNS.with(|cell| match cell.try_borrow_mut() {
        Ok(mut runs) => {
            let out = collect_and_merge(&mut runs, shards, &mut fill);
            if runs.scores.capacity().max(runs.spare.capacity()) > Runs::KEEP {
                *runs = Runs::default();
            }
            out
        }
        // Only if a query ran inside another on this thread, which nothing does today.
        Err(_) => collect_and_merge(&mut Runs::default(), shards, &mut fill),
    })
}

fn collect_and_merge(
    runs: &mut Runs,
    shards: usize,
    fill: &mut impl FnMut(usize, &mut Vec<MatchScore>),
) -> Vec<MatchScore> {
    let Runs { scores, spare, bounds, merged } = runs;
    scores.clear();
    bounds.clear();
    bounds.push(0);
    for shard in 0..shards {
        fill(shard, scores);
        // Empty runs are left out.
        if scores.len() != *bounds.last().expect("starts with 0") {
            bounds.push(scores.len());
        }
    }
    // Pairwise rounds in the scratch buffers until at most two runs are left.
    while bounds.len() > 3 {
        spare.clear();
        merged.clear();
        merged.push(0);
        for k in (0..bounds.len() - 1).step_by(2) {
            let (start, mid) = (bounds[k], bounds[k + 1]);
            match bounds.get(k + 2) {
                Some(&end) => merge_two(&scores[start..mid], &scores[mid..end], spare),
                None => spare.extend_from_slice(&scores[start..mid]),
            }
            merged.push(spare.len());
        }
        std::mem::swap(scores, spare);
        std::mem::swap(bounds, merged);
    }
    match bounds.as_slice() {
        [_, mid, end] => {
            let mut out = Vec::with_capacity(*end);
            merge_two(&scores[..*mid], &scores[*mid..*end], &mut out);
            out
        }
        _ => scores.clone(),
    }
}

/// Merges two sorted runs into `out`. The branch that picks a side predicts well, since the
/// shards hold alternate ranks: a select on packed keys instead was 23% slower at W = 256.
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
    use super::merged_runs;
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
            let start = |i: usize| if i == 0 { 0 } else { ends[i - 1] };
            let merged = merged_runs(shards as usize, |i, out| out.extend_from_slice(&runs[start(i)..ends[i]]));
            assert_eq!(merged, expected, "round {round}");
            assert_eq!(merged.capacity(), merged.len(), "round {round}: an exact allocation");
        }
    }
}
