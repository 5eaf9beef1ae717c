//! Readers running during heavy writes through [`KvIndex`] never report more than a rank held at
//! some instant: every score a reader sees must be one the reference model produced for that
//! rank at some point of the rank's own event sequence.

mod common;

use common::model::Model;
use common::{cleared, rank, remove, store};
use kvroute_core::index::{KvIndex, Rank, RouterEvent};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const QUERY: [u64; 8] = [1, 2, 3, 4, 5, 6, 7, 8];

/// Each worker grows and shrinks its own copy of QUERY's path; workers share prefixes, so the
/// writers split and extend the same edges concurrently.
fn stream(worker: u64) -> Vec<RouterEvent> {
    let r = rank(worker, 0);
    let mut out = Vec::new();
    for round in 0..300u64 {
        let len = 1 + ((round * 7 + worker) % 8) as usize;
        out.push(store(r, &[], &QUERY[..len]));
        let cut = 1 + ((round * 3 + worker) % len as u64) as usize;
        out.push(remove(r, &QUERY[..len], &[cut]));
    }
    out
}

#[test]
fn concurrent_reads_never_overcount() {
    let workers: Vec<u64> = (0..6).collect();
    // Scores each rank may legally show: the model's score after each prefix of its own events.
    let mut allowed: HashMap<Rank, HashSet<u32>> = HashMap::new();
    for &w in &workers {
        let mut model = Model::default();
        let set = allowed.entry(rank(w, 0)).or_default();
        set.insert(0);
        for e in stream(w) {
            model.apply(&e);
            set.insert(model.find_matches(&QUERY).first().map_or(0, |m| m.1));
        }
    }
    let index = Arc::new(KvIndex::new(3).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let (index, done, allowed) = (Arc::clone(&index), Arc::clone(&done), allowed.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                while !done.load(Ordering::Acquire) || reads < 1000 {
                    for s in index.find_matches(&QUERY, 0.0).unwrap() {
                        assert!(allowed[&s.rank].contains(&s.blocks), "rank {:?} showed {} blocks", s.rank, s.blocks);
                    }
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    for chunk in 0..30 {
        let batch: Vec<RouterEvent> =
            workers.iter().flat_map(|&w| stream(w)[chunk * 20..(chunk + 1) * 20].to_vec()).collect();
        index.apply_events(batch, 0.0).unwrap();
    }
    index.flush().unwrap();
    done.store(true, Ordering::Release);
    for r in readers {
        assert!(r.join().unwrap() >= 1000);
    }
    // After the flush the index equals the model exactly.
    let mut model = Model::default();
    for &w in &workers {
        for e in stream(w) {
            model.apply(&e);
        }
    }
    let got: Vec<(Rank, u32, u32)> =
        index.find_matches(&QUERY, 0.0).unwrap().iter().map(|s| (s.rank, s.blocks, s.tree_size)).collect();
    assert_eq!(got, model.find_matches(&QUERY));
}

#[test]
fn close_is_idempotent_and_later_calls_fail() {
    let index = KvIndex::new(2).unwrap();
    index.apply_events(vec![store(rank(1, 0), &[], &[1, 2])], 0.0).unwrap();
    index.flush().unwrap();
    index.close();
    index.close();
    assert_eq!(index.find_matches(&[1], 0.0).unwrap_err().code.as_str(), "ERR_CLOSED");
    assert_eq!(index.apply_events(Vec::new(), 0.0).unwrap_err().code.as_str(), "ERR_CLOSED");
}

#[test]
fn closing_a_large_index_asks_for_its_pages_back_and_a_small_one_does_not() {
    let small = KvIndex::new(2).unwrap();
    small.apply_events(vec![store(rank(1, 0), &[], &[1, 2])], 0.0).unwrap();
    small.flush().unwrap();
    assert!(!small.close_returning_memory(), "a few KiB: not worth a trim");
    // 100,000 held blocks: megabytes of block records and names.
    let large = KvIndex::new(2).unwrap();
    let locals: Vec<u64> = (0..50_000).collect();
    large.apply_events(vec![store(rank(1, 0), &[], &locals), store(rank(2, 0), &[], &locals)], 0.0).unwrap();
    large.flush().unwrap();
    assert!(large.close_returning_memory());
    assert!(!large.close_returning_memory(), "closed already: nothing freed");
    assert_eq!(large.find_matches(&[0], 0.0).unwrap_err().code.as_str(), "ERR_CLOSED");
}

#[test]
fn writer_thread_count_is_validated() {
    assert!(KvIndex::new(0).is_err());
    assert!(KvIndex::new(65).is_err());
}

/// Stores and removals long enough to be applied in parts: the result equals the model, a long
/// store that is invalid only near its end changes nothing, and concurrent reads never see more
/// than the rank holds after the event.
#[test]
fn long_events_apply_in_parts_without_changing_semantics() {
    use common::event;
    use kvroute_core::index::{EventData, StoredBlock};
    let r = rank(9, 0);
    let long: Vec<u64> = (1..=300).collect();
    let mut events = vec![store(r, &[], &long[..200]), store(r, &long[..200], &long[200..])];
    // Invalid only at block 150: reuses the name of block 10. Must be rejected whole.
    let mut bad = store(r, &[], &(1000..1200).collect::<Vec<_>>());
    if let EventData::Stored { blocks, .. } = &mut bad.data {
        blocks[150] = StoredBlock { ext: common::names(&[], &long, 0)[9], local: 7777 };
    }
    events.push(bad);
    events.push(remove(r, &long, &(100..=300).rev().step_by(3).collect::<Vec<_>>()));
    events.push(event(r, EventData::Removed { hashes: (0..100).map(|i| 0xdead_0000 + i).collect() }));
    let mut model = Model::default();
    for e in &events {
        model.apply(e);
    }
    let index = Arc::new(KvIndex::new(2).unwrap());
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (index, done) = (Arc::clone(&index), Arc::clone(&done));
        std::thread::spawn(move || {
            let query: Vec<u64> = (1..=300).collect();
            while !done.load(Ordering::Acquire) {
                for s in index.find_matches(&query, 0.0).unwrap() {
                    assert!(s.blocks <= 300);
                }
                assert!(index.find_matches(&[1000], 0.0).unwrap().is_empty(), "a rejected store leaked");
            }
        })
    };
    for _ in 0..20 {
        index.apply_events(events.clone(), 0.0).unwrap();
        index.remove_worker(9, None).unwrap();
    }
    index.apply_events(events, 0.0).unwrap();
    index.flush().unwrap();
    done.store(true, Ordering::Release);
    reader.join().unwrap();
    let got: Vec<(Rank, u32, u32)> =
        index.find_matches(&long, 0.0).unwrap().iter().map(|s| (s.rank, s.blocks, s.tree_size)).collect();
    assert_eq!(got, model.find_matches(&long));
    let (stats, _) = index.stats().unwrap();
    assert_eq!(stats.events.invalid_block, 21);
    assert_eq!(stats.events.block_not_found, 21 * 100);
    assert_eq!(stats.events.stored, 42);
}

/// Waiters sleeping on different positions of different writers are each woken once their own
/// events are applied (writers wake sleepers only at the positions they registered): every
/// flush returns having seen its own store, and approximate-mode predictions (which wait for one
/// writer) return visible, while another thread keeps every writer's queue busy. Bounded: each
/// waiter must finish within a deadline, so a lost wake-up fails instead of hanging.
#[test]
fn waiters_at_different_positions_all_wake() {
    const WAITERS: u64 = 6;
    let index = Arc::new(KvIndex::new(3).expect("index"));
    let stop = Arc::new(AtomicBool::new(false));
    let background = {
        let (index, stop) = (Arc::clone(&index), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut round = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Paced like an engine source: a bounded backlog, so each flush waits for a
                // bounded amount of work (an unbounded one would outrun the writers).
                if index.pending().expect("open") > 64 {
                    std::thread::yield_now();
                    continue;
                }
                let batch = (100..112).map(|w| store(rank(w, 0), &[], &[round % 50 + 1, 2, 3])).collect();
                index.apply_events(batch, 0.0).expect("open");
                index.apply_events((100..112).map(|w| cleared(rank(w, 0))).collect(), 0.0).expect("open");
                round += 1;
            }
        })
    };
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    for waiter in 0..WAITERS {
        let (index, done_tx) = (Arc::clone(&index), done_tx.clone());
        std::thread::spawn(move || {
            for step in 0..40u64 {
                let r = rank(waiter, 0);
                let path = [1000 + waiter, step + 1];
                if step % 2 == 0 {
                    index.apply_events(vec![cleared(r), store(r, &[], &path)], 0.0).expect("open");
                    index.flush().expect("flush");
                } else {
                    index.record_routing(rank(waiter, 1), path.to_vec(), 0.0, 1e12).expect("predict");
                }
                let scores = index.find_matches(&path, 0.0).expect("open");
                let expected = if step % 2 == 0 { r } else { rank(waiter, 1) };
                assert!(scores.iter().any(|s| s.rank == expected && s.blocks == 2), "waiter {waiter} step {step}");
            }
            done_tx.send(waiter).expect("report");
        });
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut finished = HashSet::new();
    while finished.len() < WAITERS as usize {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match done_rx.recv_timeout(left) {
            Ok(waiter) => {
                finished.insert(waiter);
            }
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(500));
                panic!(
                    "waiters {finished:?} of {WAITERS} finished ({e}), pending {:?}: a wake-up was lost",
                    index.pending()
                )
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    background.join().expect("background writer");
}

/// A prediction is visible when `record_routing` returns, however many threads send to the same
/// writer at once: a waiter is released by the position of its own op, so positions must follow
/// the queue's order (they did not when a prediction took its position outside the lock that
/// other sends hold, and another thread's op overtook it).
#[test]
fn predictions_are_visible_on_return_under_concurrent_senders() {
    const THREADS: u64 = 8;
    const CALLS: u64 = 1_500;
    let index = Arc::new(KvIndex::new(1).expect("index"));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let index = Arc::clone(&index);
            std::thread::spawn(move || {
                for call in 0..CALLS {
                    let path = [5_000 + t, call + 1];
                    if call % 3 == 0 {
                        // Unlocked and locked senders mixed: events of another worker too.
                        let other = rank(100 + t, 0);
                        index.apply_events(vec![cleared(other), store(other, &[], &path)], 0.0).expect("open");
                    }
                    index.record_routing(rank(t, 0), path.to_vec(), 0.0, 1e12).expect("predict");
                    let scores = index.find_matches(&path, 0.0).expect("open");
                    if !scores.iter().any(|s| s.rank == rank(t, 0) && s.blocks == 2) {
                        return Err(format!("thread {t} call {call}: own prediction not visible"));
                    }
                }
                Ok(())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("thread").unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Ops sent faster than the writers apply them queue up: the final state must still be that of
/// applying every op in order. Single-event batches, removals of whole workers between them and
/// a close right after the last send (the stop queues behind them), with the model applying the
/// same sequence.
#[test]
fn queued_ops_apply_in_order() {
    for writers in [1, 2] {
        let index = KvIndex::new(writers).unwrap();
        let mut model = Model::default();
        let streams: Vec<Vec<RouterEvent>> = (0..4).map(stream).collect();
        for i in 0..streams[0].len() {
            for (worker, s) in streams.iter().enumerate() {
                index.apply_events(vec![s[i].clone()], 0.0).unwrap();
                model.apply(&s[i]);
                if (i + worker) % 97 == 0 {
                    index.remove_worker(worker as u64, None).unwrap();
                    model.remove_worker(worker as u64, None);
                }
            }
        }
        index.flush().unwrap();
        let got: Vec<(Rank, u32, u32)> =
            index.find_matches(&QUERY, 0.0).unwrap().iter().map(|s| (s.rank, s.blocks, s.tree_size)).collect();
        assert_eq!(got, model.find_matches(&QUERY), "{writers} writers");
        assert_eq!(index.stats().unwrap().0.blocks, model.total_blocks(), "{writers} writers");
        // A close while ops are still queued stops after them and frees the trees.
        index.apply_events(streams[0].clone(), 0.0).unwrap();
        index.close();
        assert!(index.find_matches(&QUERY, 0.0).is_err());
    }
}

/// A worker's ops all reach the writer that holds its ranks, whether its events come in a batch
/// of their own or mixed with other workers' (the two paths of `apply_events`), and its removal
/// reaches that writer too: a continuation applied on another writer's shard would not find its
/// parent, and a removal sent elsewhere would leave the worker's blocks in place.
#[test]
fn a_workers_ops_reach_one_writer_however_they_are_batched() {
    const WORKERS: u64 = 6;
    for writers in [2, 3] {
        let index = KvIndex::new(writers).unwrap();
        for w in 0..WORKERS {
            index.apply_events(vec![store(rank(w, 0), &[], &QUERY[..2])], 0.0).unwrap();
        }
        let mixed: Vec<RouterEvent> =
            (0..WORKERS).rev().map(|w| store(rank(w, 0), &QUERY[..2], &QUERY[2..4])).collect();
        index.apply_events(mixed, 0.0).unwrap();
        for w in 0..WORKERS {
            index.apply_events(vec![store(rank(w, 0), &QUERY[..4], &QUERY[4..6])], 0.0).unwrap();
        }
        index.remove_worker(1, None).unwrap();
        index.remove_worker(4, None).unwrap();
        index.flush().unwrap();
        let (stats, _) = index.stats().unwrap();
        assert_eq!(stats.events.parent_block_not_found, 0, "{writers} writers");
        let got: Vec<(u64, u32)> =
            index.find_matches(&QUERY, 0.0).unwrap().iter().map(|s| (s.rank.worker_id, s.blocks)).collect();
        assert_eq!(got, vec![(0, 6), (2, 6), (3, 6), (5, 6)], "{writers} writers");
    }
}

/// Applied batches wait in their writer's pile for the next sender to free them, and count in
/// `stats().memory_bytes` meanwhile; a writer left idle frees its pile itself, and a pile never
/// holds more than `MAX_PILE_BYTES`: a larger batch is freed by its writer at once.
#[test]
fn applied_batches_are_freed_by_senders_or_idle_writers_and_stay_bounded() {
    use std::time::{Duration, Instant};
    let index = KvIndex::new(1).unwrap();
    // A batch of 1000 removals of unknown blocks: the tree does not change, the batch is kept.
    let hashes: Vec<u64> = (1..=1000).collect();
    let batch = || vec![common::event(rank(1, 0), kvroute_core::index::EventData::Removed { hashes: hashes.clone() })];
    let bytes_of_batch = (hashes.len() * 8) as u64;
    // The rank's own state exists from its first event on: measured after it.
    index.apply_events(batch(), 0.0).unwrap();
    index.flush().unwrap();
    let empty = index.stats().unwrap().0.memory_bytes;
    let settle = |index: &KvIndex| {
        while index.pending().unwrap() > 0 {
            std::thread::yield_now();
        }
    };
    index.apply_events(batch(), 0.0).unwrap();
    settle(&index);
    let held = index.stats().unwrap().0.memory_bytes;
    assert!(held >= empty + bytes_of_batch, "an applied batch waiting to be freed is counted: {held} vs {empty}");
    // The writer, idle, frees it within a few of its memory refreshes (250 ms each).
    let deadline = Instant::now() + Duration::from_secs(10);
    while index.stats().unwrap().0.memory_bytes > empty {
        assert!(Instant::now() < deadline, "an idle writer kept its applied batch");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A flush frees what it waited for at once.
    index.apply_events(batch(), 0.0).unwrap();
    index.flush().unwrap();
    assert_eq!(index.stats().unwrap().0.memory_bytes, empty);
    // A batch over the bound is freed by the writer at once, not kept.
    let big: Vec<u64> = (1..=(kvroute_core::index::MAX_PILE_BYTES as u64 / 8 + 1)).collect();
    index
        .apply_events(vec![common::event(rank(1, 0), kvroute_core::index::EventData::Removed { hashes: big })], 0.0)
        .unwrap();
    settle(&index);
    assert!(index.stats().unwrap().0.memory_bytes < empty + kvroute_core::index::MAX_PILE_BYTES as u64 / 2);
}

/// Edge positions are stored once for both copies of the view; a write never rewrites what the
/// copy readers are on still shows. Here every write cuts a leaf's tail and grows the leaf again
/// with other blocks (the positions the cut freed are exactly where the new ones would go): a
/// reader must see one path or the other in full, never a mix of the two.
#[test]
fn a_leaf_cut_and_grown_in_one_write_never_shows_a_mix() {
    const HALF: usize = 32;
    let r = rank(1, 0);
    let a: Vec<u64> = (1..=2 * HALF as u64).collect();
    let b: Vec<u64> = a[..HALF].iter().copied().chain(1001..=1000 + HALF as u64).collect();
    let index = Arc::new(KvIndex::new(1).unwrap());
    index.apply_events(vec![store(r, &[], &a)], 0.0).unwrap();
    index.flush().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let reader = {
        let (index, done, a, b) = (Arc::clone(&index), Arc::clone(&done), a.clone(), b.clone());
        std::thread::spawn(move || {
            let mut reads = 0u64;
            while !done.load(Ordering::Acquire) || reads < 1000 {
                for query in [&a, &b] {
                    let got = index.find_matches(query, 0.0).unwrap()[0].blocks as usize;
                    assert!(got == HALF || got == 2 * HALF, "a reader saw {got} blocks of one path");
                }
                reads += 1;
            }
        })
    };
    for round in 0..20_000 {
        let (from, to) = if round % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let swap = vec![remove(r, from, &[HALF + 1]), store(r, &to[..HALF], &to[HALF..])];
        index.apply_events(swap, 0.0).unwrap();
    }
    index.flush().unwrap();
    done.store(true, Ordering::Release);
    reader.join().unwrap();
    assert_eq!(index.find_matches(&a, 0.0).unwrap()[0].blocks as usize, 2 * HALF);
    assert_eq!(index.find_matches(&b, 0.0).unwrap()[0].blocks as usize, HALF);
}
