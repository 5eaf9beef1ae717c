//! The left-right lock under readers that stay: a writer waiting for readers to leave the old
//! copy spins briefly and then sleeps until the last reader out wakes it. These tests hold read
//! guards far longer than the spin, so the sleeping path runs, and check that no write ever
//! touches a copy a reader is on and that every write finishes once the readers leave.

use kvroute_core::index::lock::LeftRight;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

/// A copy whose two halves a write sets one after the other: a reader that sees them differ saw
/// a copy mid-write.
#[derive(Default)]
struct Pair {
    first: u64,
    second: u64,
}

fn set(pair: &mut Pair, value: u64) {
    pair.first = value;
    std::hint::black_box(&pair.first);
    for _ in 0..50 {
        std::hint::spin_loop();
    }
    pair.second = value;
}

#[test]
fn a_write_waits_for_a_reader_that_stays_and_finishes_when_it_leaves() {
    let lock = Arc::new(LeftRight::new(Pair::default(), Pair::default()));
    let reader_left = Arc::new(AtomicBool::new(false));
    let holding = Arc::new(Barrier::new(2));
    let reader = {
        let (lock, reader_left, holding) = (Arc::clone(&lock), Arc::clone(&reader_left), Arc::clone(&holding));
        std::thread::spawn(move || {
            let guard = lock.read();
            holding.wait();
            // Far longer than the writer spins: it must sleep and be woken by this drop.
            std::thread::sleep(Duration::from_millis(30));
            let seen = (guard.first, guard.second);
            reader_left.store(true, Ordering::SeqCst);
            drop(guard);
            seen
        })
    };
    holding.wait();
    let mut second_step_saw_reader_gone = Vec::new();
    lock.write_split(
        |copy| set(copy, 1),
        |()| (),
        |copy, ()| {
            second_step_saw_reader_gone.push(reader_left.load(Ordering::SeqCst));
            set(copy, 1);
        },
    );
    assert_eq!(reader.join().expect("reader"), (0, 0), "the reader's copy never changed under it");
    assert_eq!(second_step_saw_reader_gone, vec![true], "the old copy was written only after the reader left");
    let now = lock.read();
    assert_eq!((now.first, now.second), (1, 1));
}

#[test]
fn readers_that_stay_or_leave_at_once_never_see_a_copy_mid_write() {
    const WRITES: u64 = 400;
    const READERS: usize = 3;
    let lock = Arc::new(LeftRight::new(Pair::default(), Pair::default()));
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    // The writes start once every reader has read once, so they overlap with reads.
    let reading = Arc::new(Barrier::new(READERS + 1));
    let readers: Vec<_> = (0..READERS as u64)
        .map(|id| {
            let (lock, done, reads, reading) =
                (Arc::clone(&lock), Arc::clone(&done), Arc::clone(&reads), Arc::clone(&reading));
            std::thread::spawn(move || {
                let mut last = 0;
                let mut n = 0u64;
                loop {
                    let guard = lock.read();
                    let (first, second) = (guard.first, guard.second);
                    assert_eq!(first, second, "reader {id} saw a copy mid-write");
                    assert!(first >= last, "reader {id} went back from write {last} to {first}");
                    last = first;
                    n += 1;
                    // Every few reads, stay past the writer's spin so it has to sleep.
                    if n.is_multiple_of(7 + id) {
                        std::thread::sleep(Duration::from_micros(200));
                        assert_eq!((guard.first, guard.second), (first, second), "reader {id}'s copy changed under it");
                    }
                    drop(guard);
                    if n == 1 {
                        reading.wait();
                    }
                    if done.load(Ordering::SeqCst) {
                        break;
                    }
                }
                reads.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    reading.wait();
    for value in 1..=WRITES {
        lock.write(|copy| set(copy, value));
    }
    done.store(true, Ordering::SeqCst);
    for reader in readers {
        reader.join().expect("reader");
    }
    assert!(reads.load(Ordering::Relaxed) >= READERS as u64, "every reader read at least once");
    let now = lock.read();
    assert_eq!((now.first, now.second), (WRITES, WRITES));
}
