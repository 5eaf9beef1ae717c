//! Wait-free reads for the tree: two copies, left-right style.
//!
//! Readers use the published copy and never wait: no lock, no spinning, no chance of being held up
//! by a writer that the OS descheduled while holding a lock (on a small or virtualised machine
//! that made lock-based reads take hundreds of microseconds at the tail). A writer applies each
//! operation to the other copy, publishes that copy, waits until no reader is left on the old
//! one, then applies the same operation to it. Operations are deterministic, so the copies stay
//! identical.
//!
//! Costs: what is kept here is held twice (the index keeps only the view, not the writers' book,
//! in it, and the view's edges point at buffers the book owns), and each write reaches both
//! copies (the second by a cheap journal replay). Writers are serialised by a mutex.
//!
//! Waiting for readers to leave: a query takes a few microseconds, so the writer spins for a few
//! first. A reader that is still there after that is usually one the scheduler preempted
//! mid-query (more busy threads than cores), back only after a time slice. The writer then
//! sleeps, and the last reader out wakes it: the freed core lets the scheduler run that reader
//! (or anything else) instead of a writer spinning for it. The wake is one extra load for every
//! reader that leaves a copy last, and a futex call only when a writer sleeps. Measured on the
//! concurrent phase of `bench/vs-dynamo` (two writers, one reader querying in a loop, the
//! producer, two cores; means over alternating runs), against spinning with `yield_now`:
//! writers W = 16 22.8 → 35.9 M block-events/s, W = 256 16.1 → 18.0, churn 9.1 → 11.4; the
//! reader's p99 unchanged at W = 256 and 1.9 → 2.1-2.5 µs at W = 16 (the wake it pays).

use parking_lot::Mutex;
use std::cell::UnsafeCell;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

/// How long a writer spins for readers to leave the old copy before it sleeps: a running reader
/// usually leaves within this; one that does not was most likely preempted (see the module doc).
/// 5 µs measured a little better than 20 µs on all three workloads of the concurrent phase; on
/// an Intel Xeon VM, where a query takes longer, 20 and 50 µs gave the writers no more at W = 256
/// (medians of 9 runs: 15.7, 14.9 and 13.9 M block-events/s for 5, 20 and 50 µs).
const SPIN_BEFORE_SLEEP: Duration = Duration::from_micros(5);

/// A sleeping writer re-checks at least this often (a safety net: the last reader out wakes it).
const SLEEP_RECHECK: Duration = Duration::from_millis(1);

pub struct LeftRight<T> {
    copies: [UnsafeCell<T>; 2],
    /// The copy readers use.
    published: AtomicUsize,
    /// Readers currently on each copy.
    readers: [AtomicUsize; 2],
    writer: Mutex<()>,
    /// A writer sleeps in [`LeftRight::wait_for_readers`]: the last reader out wakes `sleeper`.
    writer_sleeps: AtomicBool,
    sleeper: Mutex<Option<Thread>>,
}

// Safety: a copy is only mutated by the writer holding `writer`, and only while no reader is on it
// (`write` waits for its reader count to drop to zero after publishing the other copy; readers
// re-check `published` after registering, so none can slip in). Readers only take shared
// references. So the usual Send/Sync bounds of a RwLock<T> suffice.
unsafe impl<T: Send + Sync> Sync for LeftRight<T> {}
// Safety: owning the structure owns both copies; moving it moves them.
unsafe impl<T: Send> Send for LeftRight<T> {}

impl<T> LeftRight<T> {
    pub fn new(a: T, b: T) -> Self {
        Self {
            copies: [UnsafeCell::new(a), UnsafeCell::new(b)],
            published: AtomicUsize::new(0),
            readers: [AtomicUsize::new(0), AtomicUsize::new(0)],
            writer: Mutex::new(()),
            writer_sleeps: AtomicBool::new(false),
            sleeper: Mutex::new(None),
        }
    }

    /// A shared view of the published copy. Wait-free unless a writer publishes in the very
    /// instant this registers, in which case it retries on the new copy.
    pub fn read(&self) -> ReadGuard<'_, T> {
        loop {
            let i = self.published.load(Ordering::SeqCst);
            self.readers[i].fetch_add(1, Ordering::SeqCst);
            if self.published.load(Ordering::SeqCst) == i {
                return ReadGuard { owner: self, copy: i };
            }
            self.leave(i);
        }
    }

    /// Applies `op` to both copies (it runs once per copy, so it must be deterministic).
    pub fn write(&self, mut op: impl FnMut(&mut T)) {
        self.write_split(
            |copy| {
                op(copy);
                op
            },
            |op| op,
            |copy, mut op| op(copy),
        );
    }

    /// One write in three steps: `first` changes the spare copy, which is then published;
    /// `published` gets `first`'s result as soon as the change is visible to readers (a caller
    /// waiting for visibility need not wait for the rest); `second`, once no reader is left on the
    /// old copy, brings that copy up to date. `second` must leave it identical to the first:
    /// The tree's journal (`tree/journal.rs`) replays what `first` did, without redoing its work.
    pub fn write_split<R, S>(
        &self,
        first: impl FnOnce(&mut T) -> R,
        published: impl FnOnce(R) -> S,
        second: impl FnOnce(&mut T, S),
    ) {
        let _writer = self.writer.lock();
        let read = self.published.load(Ordering::SeqCst);
        let spare = 1 - read;
        // Safety: no reader is on `spare` (the previous write waited for them to leave before
        // touching it, and `published` has pointed elsewhere since), and `writer` excludes
        // other writers.
        let result = first(unsafe { &mut *self.copies[spare].get() });
        self.published.store(spare, Ordering::SeqCst);
        let handed = published(result);
        self.wait_for_readers(read);
        // Safety: `published` now points at `spare`, the readers that were on `read` have left,
        // and new readers re-check `published` and go to `spare`.
        second(unsafe { &mut *self.copies[read].get() }, handed);
    }

    /// Returns once no reader is on `copy`: spins briefly, then sleeps until the last reader out
    /// wakes it. Sleeping frees this core, so the scheduler can move a preempted reader onto it.
    fn wait_for_readers(&self, copy: usize) {
        let readers = &self.readers[copy];
        // Usually no reader is there: no clock read then.
        if readers.load(Ordering::SeqCst) == 0 {
            return;
        }
        let start = Instant::now();
        let mut spins = 0u32;
        while readers.load(Ordering::SeqCst) > 0 {
            std::hint::spin_loop();
            spins += 1;
            if spins.is_multiple_of(64) && start.elapsed() > SPIN_BEFORE_SLEEP {
                break;
            }
        }
        if readers.load(Ordering::SeqCst) == 0 {
            return;
        }
        *self.sleeper.lock() = Some(std::thread::current());
        // Either this store or a leaving reader's decrement comes first (both SeqCst): the
        // reader then sees the flag and wakes this thread, or this thread sees the count at 0.
        self.writer_sleeps.store(true, Ordering::SeqCst);
        while readers.load(Ordering::SeqCst) > 0 {
            std::thread::park_timeout(SLEEP_RECHECK);
        }
        self.writer_sleeps.store(false, Ordering::SeqCst);
    }

    /// A reader leaving `copy`: the last one out wakes a sleeping writer.
    fn leave(&self, copy: usize) {
        if self.readers[copy].fetch_sub(1, Ordering::SeqCst) == 1 && self.writer_sleeps.load(Ordering::SeqCst) {
            if let Some(writer) = self.sleeper.lock().as_ref() {
                writer.unpark();
            }
        }
    }
}

pub struct ReadGuard<'a, T> {
    owner: &'a LeftRight<T>,
    copy: usize,
}

impl<T> Deref for ReadGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // Safety: this guard is registered in `readers[copy]`, so no writer mutates that copy
        // until the guard drops.
        unsafe { &*self.owner.copies[self.copy].get() }
    }
}

impl<T> Drop for ReadGuard<'_, T> {
    fn drop(&mut self) {
        self.owner.leave(self.copy);
    }
}
