//! Active-load bookkeeping: shared prefixes count once, every release returns the figures to
//! exactly zero, expiry and worker removal free what they should.

mod common;

use common::rank;
use kvroute_core::load::{ActiveLoad, LoadFigures};

fn figures(load: &ActiveLoad, worker: u64, blocks: &[u64]) -> LoadFigures {
    load.figures(rank(worker, 0), blocks)
}

#[test]
fn shared_prefixes_count_once_and_release_to_zero() {
    let mut load = ActiveLoad::default();
    load.book(1, rank(0, 0), vec![10, 11, 12], 300, 0.0).unwrap();
    load.book(2, rank(0, 0), vec![10, 11, 13], 100, 0.0).unwrap();
    assert_eq!(
        figures(&load, 0, &[10, 11, 14, 15]),
        LoadFigures { active_prefill_tokens: 400, active_blocks: 4, new_blocks: 2, requests: 2 }
    );
    assert!(load.prefill_completed(1));
    assert!(load.prefill_completed(1), "a repeated first token is harmless");
    assert_eq!(figures(&load, 0, &[]).active_prefill_tokens, 100);
    assert!(load.free(1));
    assert!(!load.free(1), "freeing twice is a no-op");
    assert_eq!(figures(&load, 0, &[10]).active_blocks, 3);
    assert!(load.free(2));
    assert_eq!(figures(&load, 0, &[10]), LoadFigures { new_blocks: 1, ..LoadFigures::default() });
    assert!(load.snapshot().is_empty());
    assert!(load.book(3, rank(0, 0), vec![], 0, 0.0).is_ok());
    assert!(load.book(3, rank(0, 0), vec![], 0, 0.0).is_err(), "a handle is booked once");
}

#[test]
fn expiry_and_worker_removal_free_their_requests() {
    let mut load = ActiveLoad::default();
    load.book(1, rank(1, 0), vec![1], 10, 0.0).unwrap();
    load.book(2, rank(2, 0), vec![2], 10, 50.0).unwrap();
    load.book(3, rank(2, 1), vec![3], 10, 100.0).unwrap();
    assert_eq!(load.expire(60.0), vec![1, 2]);
    assert_eq!(load.in_flight(), 1);
    assert_eq!(load.remove_worker(2), vec![3]);
    assert_eq!(load.in_flight(), 0);
    assert!(load.snapshot().is_empty());
}

#[test]
fn random_cycles_return_every_figure_to_zero() {
    let mut load = ActiveLoad::default();
    let mut state = 12345u64;
    let mut next = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        state >> 33
    };
    let mut live = Vec::new();
    for id in 0..5000u64 {
        let blocks: Vec<u64> = (0..next() % 8).map(|i| i * 7 + next() % 3).collect();
        load.book(id, rank(next() % 4, (next() % 2) as u32), blocks, next() % 1000, id as f64).unwrap();
        live.push(id);
        if next() % 3 == 0 {
            load.prefill_completed(live[(next() as usize) % live.len()]);
        }
        if next() % 2 == 0 {
            let victim = live.swap_remove((next() as usize) % live.len());
            assert!(load.free(victim));
        }
    }
    for id in live {
        assert!(load.free(id));
    }
    assert!(load.snapshot().is_empty());
    assert_eq!(load.in_flight(), 0);
}

#[test]
fn touch_renews_the_expiry_lease() {
    let mut load = ActiveLoad::default();
    load.book(1, rank(1, 0), vec![1], 10, 0.0).unwrap();
    load.book(2, rank(1, 0), vec![2], 10, 0.0).unwrap();
    assert!(load.touch(1, 90.0));
    assert!(!load.touch(9, 90.0), "unknown handles are reported");
    // `expire(cutoff)` frees what was booked (or last touched) before the cutoff.
    assert_eq!(load.expire(50.0), vec![2], "the renewed request survives its old deadline");
    assert_eq!(load.expire(80.0), Vec::<u64>::new());
    assert_eq!(load.expire(95.0), vec![1]);
    assert!(load.snapshot().is_empty());
}

#[test]
fn remote_bookings_share_blocks_with_local_ones_and_report_what_they_hold() {
    use kvroute_core::index::KvIndex;
    use kvroute_core::routing::RouterCore;
    let index = KvIndex::new(1).unwrap();
    let mut core = RouterCore::default();
    let candidates = [rank(7, 0)];
    // A local request of three blocks, booked with its sequence hashes.
    let locals = vec![101, 102, 103];
    core.score(&index, 1, locals, &candidates, 0.0, true).unwrap();
    core.book(&index, 1, rank(7, 0), 50, true, 0.0, None).unwrap();
    let held = core.booked_blocks(1).to_vec();
    assert_eq!(held.len(), 3);
    // A peer books the same first two blocks and two of its own that match nothing.
    core.book_remote(2, rank(7, 0), held[..2].to_vec(), 2, 30, 0.0).unwrap();
    let snap = core.snapshot();
    assert_eq!(snap[0].1.active_blocks, 5, "two shared + one local + two unshared");
    assert_eq!(snap[0].1.active_prefill_tokens, 80);
    assert_eq!(core.booked_blocks(2).len(), 4);
    assert!(core.book_remote(2, rank(7, 0), vec![], 0, 0, 0.0).is_err(), "a handle is booked once");
    assert!(core.book_remote(3, rank(7, 0), vec![], usize::MAX, 0, 0.0).is_err(), "absurd counts are refused");
    assert!(core.free(2));
    assert_eq!(core.snapshot()[0].1.active_blocks, 3);
    assert!(core.booked_blocks(2).is_empty(), "a freed request holds nothing");
}

/// A booking's prediction is queued, not waited for; the next score must still see it (it waits
/// for the writer first). Many rounds over two writers, each a new prefix on a new rank, so a
/// score that did not wait would read the index before the writer applied the prediction.
#[test]
fn the_next_score_sees_the_previous_bookings_prediction() {
    use kvroute_core::index::{KvIndex, Rank};
    use kvroute_core::routing::RouterCore;
    let index = KvIndex::new(2).unwrap();
    let mut core = RouterCore::default();
    let candidates: Vec<Rank> = (0..8).map(|w| rank(w, 0)).collect();
    for round in 0..400u64 {
        let locals: Vec<u64> = (0..64).map(|i| (round << 32) | i).collect();
        let target = candidates[(round % 8) as usize];
        core.score(&index, 2 * round, locals.clone(), &candidates, 0.0, true).unwrap();
        core.book(&index, 2 * round, target, 0, false, 0.0, Some(1e12)).unwrap();
        let figures = core.score(&index, 2 * round + 1, locals, &candidates, 0.0, true).unwrap();
        core.discard(2 * round + 1);
        let seen: Vec<u32> = figures.iter().map(|f| f.overlap).collect();
        let expected: Vec<u32> = candidates.iter().map(|&c| if c == target { 64 } else { 0 }).collect();
        assert_eq!(seen, expected, "round {round}");
    }
}

/// A booking refused because its handle is booked already records no prediction either, and
/// leaves the scored request pending (the JavaScript core behaves the same).
#[test]
fn a_refused_booking_records_no_prediction() {
    use kvroute_core::index::{KvIndex, Rank};
    use kvroute_core::routing::RouterCore;
    let index = KvIndex::new(1).unwrap();
    let mut core = RouterCore::default();
    let candidates: Vec<Rank> = vec![rank(1, 0), rank(2, 0)];
    let locals: Vec<u64> = (0..8).collect();
    core.score(&index, 7, locals.clone(), &candidates, 0.0, true).unwrap();
    core.book(&index, 7, rank(1, 0), 0, true, 0.0, Some(1e12)).unwrap();
    core.score(&index, 7, locals.clone(), &candidates, 0.0, true).unwrap();
    let err = core.book(&index, 7, rank(2, 0), 0, true, 0.0, Some(1e12)).unwrap_err();
    assert!(err.to_string().contains("already booked"), "{err}");
    let figures = core.score(&index, 8, locals, &candidates, 0.0, true).unwrap();
    assert_eq!(figures.iter().map(|f| f.overlap).collect::<Vec<_>>(), vec![8, 0], "no prediction on rank 2");
    // The refused request is still pending: freeing the booking lets it book now.
    assert!(core.free(7));
    core.book(&index, 7, rank(2, 0), 0, true, 0.0, None).unwrap();
}

#[test]
fn output_blocks_join_the_decode_load_and_decay_only_where_the_request_holds_alone() {
    let mut load = ActiveLoad::default();
    load.book(1, rank(0, 0), vec![10, 11, 12], 0, 0.0).unwrap();
    load.book(2, rank(0, 0), vec![10, 11, 13], 0, 0.0).unwrap();
    assert_eq!(figures(&load, 0, &[]).active_blocks, 4);
    assert!(load.add_output_blocks(1, 2, None).unwrap());
    assert_eq!(figures(&load, 0, &[]).active_blocks, 6, "two blocks of request 1's own");
    assert_eq!(load.blocks_of(1), &[10, 11, 12], "a peer is told the prompt blocks only");
    // Decay 0.25: request 1 alone holds 12 and its two output blocks (3 × 0.25); 10 and 11 are
    // shared and 13 is request 2's, so 3 + 0.75 = 3.75, rounded.
    assert!(load.add_output_blocks(1, 0, Some(0.25)).unwrap());
    assert_eq!(figures(&load, 0, &[]).active_blocks, 4);
    assert_eq!(load.snapshot()[0].1.active_blocks, 4);
    // Another request booking block 12 makes it shared again: it counts whole.
    load.book(3, rank(0, 0), vec![12], 0, 0.0).unwrap();
    assert_eq!(figures(&load, 0, &[]).active_blocks, 5, "10, 11, 13, 12 whole; two outputs at 0.25");
    assert!(load.add_output_blocks(1, 0, Some(0.0)).unwrap());
    assert_eq!(figures(&load, 0, &[]).active_blocks, 4, "the outputs weigh nothing at the expected end");
    assert!(!load.add_output_blocks(9, 1, None).unwrap(), "unknown handles are reported");
    for bad in [-0.1, 1.5, f64::NAN] {
        assert!(load.add_output_blocks(1, 5, Some(bad)).is_err(), "decay {bad} is refused");
    }
    assert!(load.add_output_blocks(1, u32::MAX, None).is_err(), "a count past the bound is refused");
    assert_eq!(figures(&load, 0, &[]).active_blocks, 4, "a refused call changed nothing");
    for id in [1, 2, 3] {
        assert!(load.free(id));
    }
    assert!(load.snapshot().is_empty(), "output blocks and their fractions go with their request");
    load.book(4, rank(0, 0), vec![12], 0, 0.0).unwrap();
    assert_eq!(figures(&load, 0, &[]).active_blocks, 1, "a freed block's fraction does not come back");
}

/// A batch's shared blocks: each distinct block accounted to one request, by sequence hash (so a
/// divergence ends the run even where later locals agree); none without KV reuse; an unscored
/// handle is refused.
#[test]
fn shared_leading_blocks_count_what_requests_before_share() {
    use kvroute_core::index::{KvIndex, Rank};
    use kvroute_core::routing::RouterCore;
    let index = KvIndex::new(1).unwrap();
    let mut core = RouterCore::default();
    let candidates: Vec<Rank> = vec![rank(1, 0)];
    core.score(&index, 1, vec![1, 2, 3], &candidates, 0.0, true).unwrap();
    core.score(&index, 2, vec![1, 2, 3, 4], &candidates, 0.0, true).unwrap();
    core.score(&index, 3, vec![1, 9, 3, 4], &candidates, 0.0, true).unwrap();
    core.score(&index, 4, vec![5], &candidates, 0.0, true).unwrap();
    let distinct = |handles: &[u64], blocks: &[u32]| {
        let shared = core.shared_leading_blocks(handles).unwrap();
        blocks.iter().zip(&shared).map(|(b, s)| b - s).sum::<u32>()
    };
    // 1, 1-2, 1-2-3, 1-2-3-4, 1-9, 1-9-3, 1-9-3-4, 5.
    assert_eq!(distinct(&[1, 2, 3, 4], &[3, 4, 4, 1]), 8);
    assert_eq!(distinct(&[4, 3, 2, 1], &[1, 4, 4, 3]), 8);
    assert_eq!(distinct(&[1, 1, 2], &[3, 3, 4]), 4, "a request listed twice holds its blocks once");
    assert_eq!(core.shared_leading_blocks(&[2, 1]).unwrap().iter().sum::<u32>(), 3);
    core.score(&index, 5, vec![1, 2, 3], &candidates, 0.0, false).unwrap();
    core.score(&index, 6, vec![1, 2, 3], &candidates, 0.0, false).unwrap();
    assert_eq!(core.shared_leading_blocks(&[5, 6]).unwrap(), vec![0, 0], "unshared identities");
    let err = core.shared_leading_blocks(&[1, 99]).unwrap_err();
    assert!(err.to_string().contains("request handle 99 was not scored"), "{err}");
}
