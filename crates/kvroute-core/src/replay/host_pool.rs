//! The simulated engine's host-memory tier (vLLM's CPU offloading), the Rust twin of
//! `ts/replay/host-pool.ts` (read there for the model): every prompt block a request takes into
//! the GPU pool is copied here unless held already, the least recently used leave when it is
//! full, and a prompt continuing here past its GPU hit loads those blocks back. Its events go
//! into the GPU pool's packed buffer, on the host tier, so both tiers' events keep one order.

use super::kv_cache::{Block, PackedEvents};
use super::lru::LruList;
use crate::index::packed::LOWER_TIER_SHIFT;
use crate::tiers::LowerTier;
use rustc_hash::FxHashMap;

/// The packed flags of the host tier's events.
pub(crate) const HOST_TIER_FLAGS: u32 = (LowerTier::HostPinned as u32) << LOWER_TIER_SHIFT;

pub(crate) struct HostPool {
    capacity: usize,
    slots: FxHashMap<i64, u32>,
    lru: LruList,
    /// Blocks loaded back to the GPU since the pool began.
    pub loaded: u64,
    /// Indexes of the new blocks of the `offload` call in progress.
    fresh: Vec<usize>,
}

impl HostPool {
    pub fn new(capacity: usize) -> Self {
        Self { capacity, slots: FxHashMap::default(), lru: LruList::default(), loaded: 0, fresh: Vec::new() }
    }

    /// How many of `blocks`, from `from` on, the pool holds in a row.
    pub fn prefix_hit(&self, blocks: &[Block], from: usize) -> usize {
        blocks[from..].iter().take_while(|b| self.slots.contains_key(&b.key)).count()
    }

    /// Makes a block the pool holds the most recently used; false if it does not hold it.
    fn touch(&mut self, block: Block) -> bool {
        let Some(slot) = self.slots.get(&block.key).copied() else { return false };
        self.lru.unlink(slot);
        let slot = self.lru.push(block);
        self.slots.insert(block.key, slot);
        true
    }

    /// Copies blocks a request just took into the GPU pool (a chain after `parent`); see the
    /// TypeScript twin for the rules. Each run of consecutive new blocks is one Stored event.
    pub fn offload(
        &mut self,
        stored: &[Block],
        parent: Option<u64>,
        events: &mut PackedEvents,
        worker_id: u64,
        dp_rank: u32,
    ) {
        let mut fresh = std::mem::take(&mut self.fresh);
        fresh.clear();
        for (i, &b) in stored.iter().enumerate() {
            if !self.touch(b) {
                fresh.push(i);
            }
        }
        if fresh.len() > self.capacity {
            fresh.drain(..fresh.len() - self.capacity);
        }
        while self.lru.len() + fresh.len() > self.capacity {
            let (slot, lru) = self.lru.front().expect("a full pool has a least recently used block");
            self.lru.unlink(slot);
            self.slots.remove(&lru.key);
            events.push_removed(worker_id, dp_rank, HOST_TIER_FLAGS, lru.seq);
        }
        let mut k = 0;
        while k < fresh.len() {
            let start = fresh[k];
            let mut end = start;
            while k + 1 < fresh.len() && fresh[k + 1] == end + 1 {
                k += 1;
                end += 1;
            }
            k += 1;
            let run_parent = if start == 0 { parent } else { Some(stored[start - 1].seq) };
            events.push_stored(worker_id, dp_rank, HOST_TIER_FLAGS, run_parent, &stored[start..=end]);
            for &b in &stored[start..=end] {
                let slot = self.lru.push(b);
                self.slots.insert(b.key, slot);
            }
        }
        self.fresh = fresh;
    }

    /// Blocks loaded back to the GPU become the most recently used.
    pub fn load(&mut self, blocks: &[Block]) {
        for &b in blocks {
            self.touch(b);
        }
        self.loaded += blocks.len() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::packed::{FLAG_HAS_PARENT, KIND_REMOVED, KIND_STORED};
    use crate::replay::kv_cache::test_blocks as blocks;

    #[test]
    fn copies_new_blocks_as_true_chains_and_evicts_the_least_recently_used_first() {
        let mut pool = HostPool::new(4);
        let mut ev = PackedEvents::default();
        pool.offload(&blocks(&[1, 2, 3]), None, &mut ev, 7, 0);
        assert_eq!(ev.meta, vec![KIND_STORED, 0, HOST_TIER_FLAGS, 3]);
        ev.clear();
        // Block 3 is held (it becomes the most recently used); 4 and 5 need room: block 1 leaves.
        pool.offload(&blocks(&[3, 4, 5]), Some(1002), &mut ev, 7, 0);
        assert_eq!(
            ev.meta,
            vec![KIND_REMOVED, 0, HOST_TIER_FLAGS, 1, KIND_STORED, 0, HOST_TIER_FLAGS | FLAG_HAS_PARENT, 2]
        );
        assert_eq!(ev.words, vec![7, 0, 1001, 7, 0, 1003, 1004, 4, 1005, 5]);
        assert_eq!(pool.prefix_hit(&blocks(&[1, 2, 3, 4, 5]), 1), 4);
        ev.clear();
        // Held blocks between new ones split the copy into runs, each under its true parent.
        pool.offload(&blocks(&[8, 3, 9]), None, &mut ev, 7, 0);
        assert_eq!(
            ev.meta[4..],
            [KIND_STORED, 0, HOST_TIER_FLAGS, 1, KIND_STORED, 0, HOST_TIER_FLAGS | FLAG_HAS_PARENT, 1]
        );
        pool.load(&blocks(&[3]));
        assert_eq!(pool.loaded, 1);
    }
}
