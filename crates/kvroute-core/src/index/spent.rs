//! [`SpentBatches`]: event batches the writers applied, handed back to be freed by the threads
//! that send events, not by the writers.
//!
//! Why: a batch's memory comes from the sending thread's allocator arena. glibc frees a chunk
//! into the arena it came from, under that arena's lock, so writers freeing what one thread
//! allocated queue up on one lock, against each other and against the sender; a waiter sleeps
//! in the kernel (a futex call), and waking it costs microseconds on a small VM. Measured on the
//! `bench:vs-dynamo` churn workload (two events per batch, two writers, three rounds): futex
//! calls 19.6k → 7.5k and the process's CPU time 539 → 482 ms (`ingest-only` probe); in the
//! comparison, kvroute's ingest rate +5% at W = 16 and +6% on churn (means of three runs). Writers that
//! never freed their batches at all (a measurement, not a design) were faster still: freeing
//! itself is most of that cost, and it now runs on the sender's thread.
//!
//! So a writer leaves each applied batch in its pile, and the next sender (`apply_events`,
//! `flush`) frees every pile after sending, on its own thread and arena, where nothing
//! contends. A pile is bounded: past [`MAX_PILE_BYTES`] (a sender that stopped calling) the
//! writer frees the batch itself, as before; and a writer that finds its queue idle for a while
//! frees its own pile, so an index that stops receiving events keeps no event memory.

use super::event::{EventData, RouterEvent, StoredBlock};
use super::stats::vec_bytes;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most event memory one writer's pile holds before the writer frees batches itself.
pub const MAX_PILE_BYTES: usize = 4 << 20;

#[derive(Default)]
struct Pile {
    batches: Vec<Vec<RouterEvent>>,
    bytes: usize,
}

pub struct SpentBatches {
    piles: Vec<Mutex<Pile>>,
    /// Bytes held in all piles, for `stats().memory_bytes`.
    held: AtomicU64,
}

/// Heap bytes of a batch of events (what freeing it gives back).
fn batch_bytes(batch: &Vec<RouterEvent>) -> usize {
    let payload: usize = batch
        .iter()
        .map(|e| match &e.data {
            EventData::Stored { blocks, .. } => vec_bytes::<StoredBlock>(blocks.capacity()),
            EventData::Removed { hashes } => vec_bytes::<u64>(hashes.capacity()),
            EventData::Cleared => 0,
        })
        .sum();
    vec_bytes::<RouterEvent>(batch.capacity()) + payload
}

impl SpentBatches {
    pub fn new(writers: usize) -> Self {
        Self { piles: (0..writers).map(|_| Mutex::new(Pile::default())).collect(), held: AtomicU64::new(0) }
    }

    /// Writer `writer` is done with `batch`: it waits in the writer's pile for a sender to free
    /// it. Returns it instead when the pile is full; the caller frees it then.
    pub fn retire(&self, writer: usize, batch: Vec<RouterEvent>) -> Option<Vec<RouterEvent>> {
        let bytes = batch_bytes(&batch);
        let mut pile = self.piles[writer].lock();
        if pile.bytes + bytes > MAX_PILE_BYTES {
            return Some(batch);
        }
        pile.batches.push(batch);
        pile.bytes += bytes;
        self.held.fetch_add(bytes as u64, Ordering::Relaxed);
        None
    }

    /// Frees every writer's pile on the calling thread (the locks are held only to take them).
    pub fn free_all(&self) {
        for writer in 0..self.piles.len() {
            self.free(writer);
        }
    }

    /// Frees one writer's pile on the calling thread.
    pub fn free(&self, writer: usize) {
        let taken = std::mem::take(&mut *self.piles[writer].lock());
        if taken.bytes > 0 {
            self.held.fetch_sub(taken.bytes as u64, Ordering::Relaxed);
        }
        drop(taken);
    }

    /// Bytes of event memory waiting in the piles.
    pub fn held_bytes(&self) -> u64 {
        self.held.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::{batch_bytes, SpentBatches, MAX_PILE_BYTES};
    use crate::index::{EventData, Rank, RouterEvent};

    fn removals(n: usize) -> Vec<RouterEvent> {
        let data = EventData::Removed { hashes: (0..n as u64).collect() };
        vec![RouterEvent { rank: Rank::new(1, 0), event_id: 0, lower_tier: None, data }]
    }

    #[test]
    fn piles_keep_batches_up_to_their_bound_and_count_them() {
        let spent = SpentBatches::new(2);
        let small = removals(1000);
        let small_bytes = batch_bytes(&small) as u64;
        assert!(spent.retire(0, small).is_none());
        assert!(spent.retire(1, removals(1000)).is_none());
        assert_eq!(spent.held_bytes(), 2 * small_bytes);
        // Past the bound the batch comes back to be freed by the writer; the pile is unchanged.
        let big = removals(MAX_PILE_BYTES / 8);
        assert!(spent.retire(0, big).is_some());
        assert_eq!(spent.held_bytes(), 2 * small_bytes);
        spent.free(1);
        assert_eq!(spent.held_bytes(), small_bytes);
        spent.free_all();
        assert_eq!(spent.held_bytes(), 0);
        // A freed pile takes batches again.
        assert!(spent.retire(0, removals(10)).is_none());
    }
}
