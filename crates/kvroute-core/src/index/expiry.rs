//! Expiry times of approximate-mode predictions: a min-heap with lazy deletion, one entry per
//! prediction rather than per block. An entry names the deepest block a prediction reached; the
//! blocks above it that share its expiry expire with it (expiry never increases along a rank's
//! path, so the expired blocks of a path are a suffix, which the writer finds by walking up from
//! the entry's block). A refreshed prediction pushes a new entry and leaves the old one behind;
//! stale entries are recognised when popped because the rank's recorded expiry of the entry's
//! block no longer matches.
//!
//! What keeps every predicted block covered: a block with expiry `e` always has an entry `e`
//! naming it or a block below it with the same expiry. A prediction's entry covers every block
//! it refreshed. When a removal cuts a rank's path below a predicted block, the entries under the
//! cut are lost, so the cut pushes one for the block it leaves deepest (`tree/remove.rs`,
//! `cut_at`). That one entry is enough: a block above whose entry named a block under the cut
//! has the same expiry as that block, and expiry never increases with depth, so every block
//! between them, the one left deepest included, has that expiry too.
//!
//! One entry per block (the first design) cost a heap push per predicted block and, as requests
//! refreshed shared prefixes, a pop of a stale entry per block: 27% of the writer's samples on
//! the Mooncake trace (`cargo bench -p kvroute-core --bench predict`).

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
    /// Queues the expiry of `block`, the deepest block of a prediction (or of a cut path).
    /// Refreshed predictions leave stale entries behind; when the heap has doubled since the last
    /// check, the stale entries are dropped, so memory stays proportional to the live predictions
    /// rather than to the request rate times the TTL (amortised: each check at least doubles the
    /// next threshold).
    pub fn push(&mut self, at_ms: f64, slot: Slot, block: BlockId, ranks: &RankView) {
        self.heap.push(Reverse(Entry { at_ms, slot, block }));
        if self.heap.len() >= self.next_compaction {
            self.retain_live(ranks);
            self.next_compaction = (2 * self.heap.len()).max(FIRST_COMPACTION);
        }
    }

    /// The earliest queued expiry (perhaps of a stale entry, so never later than the real one).
    pub fn next_due(&self) -> Option<f64> {
        self.heap.peek().map(|Reverse(e)| e.at_ms)
    }

    /// The next (rank slot, block) whose prediction is due at `now_ms`, skipping stale entries.
    /// The blocks above it with the same expiry are due too.
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
