//! Expiry times of approximate-mode predictions: a min-heap with lazy deletion. A refreshed
//! prediction pushes a new entry and leaves the old one behind; stale entries are recognised when
//! popped because the rank's recorded expiry no longer matches.

use super::tree::ranks::{RankView, Slot};
use super::tree::BlockId;
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    at_ms: f64,
    slot: Slot,
    block: BlockId,
}

impl Eq for Entry {}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        self.at_ms.total_cmp(&other.at_ms).then(self.slot.cmp(&other.slot)).then(self.block.cmp(&other.block))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

const FIRST_COMPACTION: usize = 4096;

#[derive(Debug)]
pub struct ExpiryQueue {
    heap: BinaryHeap<Reverse<Entry>>,
    /// Heap size at which stale entries are next counted (amortised: it doubles each time).
    next_compaction: usize,
}

impl ExpiryQueue {
    /// Heap bytes of the queue.
    pub fn heap_bytes(&self) -> usize {
        self.heap.capacity() * std::mem::size_of::<Reverse<Entry>>()
    }
}

impl Default for ExpiryQueue {
    fn default() -> Self {
        Self { heap: BinaryHeap::new(), next_compaction: FIRST_COMPACTION }
    }
}

impl ExpiryQueue {
    /// Queues an expiry. Refreshed predictions leave stale entries behind; when the heap has
    /// doubled since the last check and more than half of it is stale, it is rebuilt, so memory
    /// stays proportional to the live predictions rather than to the request rate times the TTL.
    pub fn push(&mut self, at_ms: f64, slot: Slot, block: BlockId, ranks: &RankView) {
        self.heap.push(Reverse(Entry { at_ms, slot, block }));
        if self.heap.len() >= self.next_compaction {
            let live: usize = ranks.live().map(|(_, s)| s.predicted.len()).sum();
            if self.heap.len() > 2 * live {
                self.retain_live(ranks);
            }
            self.next_compaction = (2 * self.heap.len()).max(FIRST_COMPACTION);
        }
    }

    /// The next (rank slot, block) whose prediction is due at `now_ms`, skipping stale entries.
    pub fn pop_due(&mut self, now_ms: f64, ranks: &RankView) -> Option<(Slot, BlockId)> {
        while let Some(Reverse(top)) = self.heap.peek().copied() {
            if top.at_ms > now_ms {
                return None;
            }
            self.heap.pop();
            let live = ranks.slots.get(top.slot as usize).and_then(Option::as_ref);
            if live.and_then(|s| s.predicted.get(&top.block)) == Some(&top.at_ms) {
                return Some((top.slot, top.block));
            }
        }
        None
    }

    /// Drops stale entries.
    pub fn retain_live(&mut self, ranks: &RankView) {
        self.heap.retain(|Reverse(e)| {
            ranks.slots.get(e.slot as usize).and_then(Option::as_ref).and_then(|s| s.predicted.get(&e.block))
                == Some(&e.at_ms)
        });
    }
}
