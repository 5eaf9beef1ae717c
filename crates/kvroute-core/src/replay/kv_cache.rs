//! One rank's KV block pool, as vLLM's prefix cache: blocks in use are reference-counted, an
//! unused block stays cached in an LRU list until its room is needed. It writes the KV events a
//! real engine publishes straight into the packed layout the index consumes
//! (`index::packed`): Stored when a block enters the cache, Removed when one is evicted. Blocks
//! taken for a load from host memory are in use but out of other requests' reach, and
//! unannounced, until the load ends (see the TypeScript twin).

use super::host_pool::HostPool;
use super::lru::{LruList, NIL};
use crate::index::packed::{FLAG_DEVICE_TIER, FLAG_HAS_PARENT, KIND_REMOVED, KIND_STORED};
use rustc_hash::FxHashMap;

/// A full block: `key` identifies it within one simulation (interned prompt ids are >= 0,
/// output blocks negative); `seq` and `local` are its sequence and local hashes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub key: i64,
    pub seq: u64,
    pub local: u64,
}

/// A block in the pool: in use (`refs > 0`) or cached in the LRU list at `slot`; `loading`
/// while a load from host memory fills it.
struct Entry {
    refs: u32,
    slot: u32,
    loading: bool,
}

/// The KV events of the passes since the last take, packed (see `index::packed`).
#[derive(Default)]
pub(crate) struct PackedEvents {
    pub meta: Vec<u32>,
    pub words: Vec<u64>,
    /// The tier flags of the last event when it is a Removed that further evictions of that
    /// tier may extend.
    last_removed: Option<u32>,
}

impl PackedEvents {
    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }

    pub fn clear(&mut self) {
        self.meta.clear();
        self.words.clear();
        self.last_removed = None;
    }

    /// A removal of `seq` from the tier `tier_flags` names, joining the last event when it is a
    /// removal from the same tier.
    pub fn push_removed(&mut self, worker_id: u64, dp_rank: u32, tier_flags: u32, seq: u64) {
        if self.last_removed == Some(tier_flags) {
            let n = self.meta.len();
            self.meta[n - 1] += 1;
        } else {
            self.meta.extend([KIND_REMOVED, dp_rank, tier_flags, 1]);
            self.words.extend([worker_id, 0]);
            self.last_removed = Some(tier_flags);
        }
        self.words.push(seq);
    }

    pub fn push_stored(
        &mut self,
        worker_id: u64,
        dp_rank: u32,
        tier_flags: u32,
        parent: Option<u64>,
        blocks: &[Block],
    ) {
        let flags = tier_flags | if parent.is_some() { FLAG_HAS_PARENT } else { 0 };
        self.meta.extend([KIND_STORED, dp_rank, flags, blocks.len() as u32]);
        self.words.extend([worker_id, 0]);
        self.words.extend(parent);
        self.words.extend(blocks.iter().flat_map(|b| [b.seq, b.local]));
        self.last_removed = None;
    }
}

/// The pool: one map from block key to its entry (one lookup per block operation), and a
/// slab-backed doubly-linked LRU list of the cached blocks.
pub(crate) struct KvCache {
    capacity: usize,
    entries: FxHashMap<i64, Entry>,
    cached: LruList,
    active: usize,
    private_blocks: usize,
    pub worker_id: u64,
    dp_rank: u32,
    pub events: PackedEvents,
    /// Fresh blocks of the `use_blocks` call in progress.
    fresh: Vec<Block>,
    /// Blocks in use whose load from host memory has not ended.
    loading_blocks: usize,
    /// Host memory behind the pool (CPU offload); only with `host_blocks` > 0.
    pub host: Option<HostPool>,
}

impl KvCache {
    pub fn new(capacity: usize, host_blocks: usize, worker_id: u64, dp_rank: u32) -> Self {
        Self {
            capacity,
            entries: FxHashMap::default(),
            cached: LruList::default(),
            active: 0,
            private_blocks: 0,
            worker_id,
            dp_rank,
            events: PackedEvents::default(),
            fresh: Vec::new(),
            loading_blocks: 0,
            host: (host_blocks > 0).then(|| HostPool::new(host_blocks)),
        }
    }

    /// Blocks in use (the engine's KV occupancy).
    pub fn used(&self) -> usize {
        self.active + self.private_blocks
    }

    /// Leading `blocks` that are in the pool (in use or cached); a block still loading ends the
    /// run.
    pub fn prefix_hit(&self, blocks: &[Block]) -> usize {
        if self.loading_blocks == 0 {
            return blocks.iter().take_while(|b| self.entries.contains_key(&b.key)).count();
        }
        blocks.iter().take_while(|b| self.entries.get(&b.key).is_some_and(|e| !e.loading)).count()
    }

    /// Whether the block is in use for a load from host memory that has not ended.
    pub fn is_loading(&self, block: &Block) -> bool {
        self.loading_blocks > 0 && self.entries.get(&block.key).is_some_and(|e| e.loading)
    }

    /// How many of the first `hit` blocks (a prefix the pool holds) are in use by some request:
    /// taking them costs no room, unlike cached blocks that leave the LRU list.
    pub fn active_prefix(&self, blocks: &[Block], hit: usize) -> usize {
        blocks[..hit].iter().filter(|b| self.entries.get(&b.key).is_some_and(|e| e.refs > 0)).count()
    }

    /// Takes one more reference on a block already in the pool; false if it is not there.
    fn take_existing(&mut self, key: i64) -> bool {
        let Some(entry) = self.entries.get_mut(&key) else { return false };
        if entry.refs == 0 {
            let slot = entry.slot;
            entry.refs = 1;
            self.cached.unlink(slot);
            self.active += 1;
        } else {
            entry.refs += 1;
        }
        true
    }

    fn insert_active(&mut self, key: i64, loading: bool) {
        self.entries.insert(key, Entry { refs: 1, slot: NIL, loading });
        self.active += 1;
        self.loading_blocks += usize::from(loading);
    }

    /// Makes room for one more block, evicting the least recently used cached one if needed.
    fn reserve(&mut self) -> bool {
        if self.used() + self.cached.len() < self.capacity {
            return true;
        }
        let Some((slot, block)) = self.cached.front() else { return false };
        self.cached.unlink(slot);
        self.entries.remove(&block.key);
        self.events.push_removed(self.worker_id, self.dp_rank, FLAG_DEVICE_TIER, block.seq);
        true
    }

    fn push_stored(&mut self, parent: Option<u64>, blocks: &[Block]) {
        self.events.push_stored(self.worker_id, self.dp_rank, FLAG_DEVICE_TIER, parent, blocks);
    }

    /// Copies blocks just taken into the host pool, if there is one.
    fn offload(&mut self, blocks: &[Block], parent: Option<u64>) {
        if let Some(host) = &mut self.host {
            host.offload(blocks, parent, &mut self.events, self.worker_id, self.dp_rank);
        }
    }

    /// Takes `blocks` (consecutive, after `parent`) into use; returns how many it took (fewer
    /// when the pool is full of blocks in use). One Stored event covers the newly cached ones.
    pub fn use_blocks(&mut self, blocks: &[Block], parent: Option<u64>) -> usize {
        self.take_blocks(blocks, parent, None)
    }

    /// `use_blocks` for blocks a load from host memory fills: the new ones stay out of reach
    /// (see `prefix_hit`) and unannounced; `held_back` gets them and their parent for
    /// [`KvCache::loaded`] when the load ends.
    pub fn use_loading(
        &mut self,
        blocks: &[Block],
        parent: Option<u64>,
        held_back: &mut (Option<u64>, Vec<Block>),
    ) -> usize {
        held_back.1.clear();
        self.take_blocks(blocks, parent, Some(held_back))
    }

    /// The load whose blocks `use_loading` held back ended: they join the cache, announced.
    pub fn loaded(&mut self, held_back: &mut (Option<u64>, Vec<Block>)) {
        if held_back.1.is_empty() {
            return;
        }
        for b in &held_back.1 {
            if let Some(e) = self.entries.get_mut(&b.key) {
                if e.loading {
                    e.loading = false;
                    self.loading_blocks -= 1;
                }
            }
        }
        self.push_stored(held_back.0, &held_back.1);
        held_back.1.clear();
    }

    fn take_blocks(
        &mut self,
        blocks: &[Block],
        parent: Option<u64>,
        held_back: Option<&mut (Option<u64>, Vec<Block>)>,
    ) -> usize {
        let loading = held_back.is_some();
        let mut fresh = std::mem::take(&mut self.fresh);
        fresh.clear();
        let mut fresh_parent = parent;
        let mut taken = 0;
        for b in blocks {
            if !self.take_existing(b.key) {
                if !self.reserve() {
                    break;
                }
                self.insert_active(b.key, loading);
                if fresh.is_empty() {
                    fresh_parent = if taken == 0 { parent } else { Some(blocks[taken - 1].seq) };
                }
                fresh.push(*b);
            }
            taken += 1;
        }
        if !fresh.is_empty() {
            match held_back {
                Some(out) => {
                    out.0 = fresh_parent;
                    out.1.extend_from_slice(&fresh);
                }
                None => self.push_stored(fresh_parent, &fresh),
            }
        }
        self.fresh = fresh;
        self.offload(&blocks[..taken], parent);
        taken
    }

    /// Takes a private block (a partial block being filled).
    pub fn use_private(&mut self) -> bool {
        if !self.reserve() {
            return false;
        }
        self.private_blocks += 1;
        true
    }

    pub fn release_private(&mut self) {
        self.private_blocks -= 1;
    }

    /// A private block became full with this identity: it joins the prefix cache and is
    /// announced, unless an identical block is already there, in which case the two merge. It
    /// is not copied to host memory, which takes prompt blocks only (see `HostPool`).
    pub fn promote(&mut self, block: Block, parent: Option<u64>) {
        self.private_blocks -= 1;
        if !self.take_existing(block.key) {
            self.insert_active(block.key, false);
            self.push_stored(parent, &[block]);
        }
    }

    /// Releases blocks, most recent first; unused ones stay cached, newest last in the LRU.
    pub fn release(&mut self, blocks: &[Block]) {
        for b in blocks.iter().rev() {
            match self.entries.get_mut(&b.key) {
                Some(e) if e.refs > 1 => e.refs -= 1,
                Some(e) if e.refs == 1 => {
                    self.active -= 1;
                    let slot = self.cached.push(*b);
                    if let Some(e) = self.entries.get_mut(&b.key) {
                        e.refs = 0;
                        e.slot = slot;
                    }
                }
                _ => {}
            }
        }
    }
}

/// Blocks for the replay's unit tests: key `i`, sequence hash `1000 + i`, local hash `i`.
#[cfg(test)]
pub(crate) fn test_blocks(ids: &[i64]) -> Vec<Block> {
    ids.iter().map(|&i| Block { key: i, seq: 1000 + i as u64, local: i as u64 }).collect()
}

#[cfg(test)]
mod tests {
    use super::test_blocks as blocks;
    use super::*;

    #[test]
    fn evicts_least_recently_used_and_announces_it() {
        let mut c = KvCache::new(4, 0, 7, 0);
        assert_eq!(c.use_blocks(&blocks(&[1, 2, 3]), None), 3);
        c.release(&blocks(&[1, 2, 3]));
        c.events.clear();
        assert_eq!(c.use_blocks(&blocks(&[7, 8]), None), 2);
        // One Removed (block 3's seq, released first) then the Stored of 7 and 8.
        assert_eq!(c.events.meta, vec![KIND_REMOVED, 0, FLAG_DEVICE_TIER, 1, KIND_STORED, 0, FLAG_DEVICE_TIER, 2]);
        assert_eq!(c.events.words, vec![7, 0, 1003, 7, 0, 1007, 7, 1008, 8]);
        assert_eq!(c.prefix_hit(&blocks(&[1, 2])), 2);
    }

    #[test]
    fn active_prefix_counts_the_hit_blocks_in_use() {
        let mut c = KvCache::new(8, 0, 0, 0);
        c.use_blocks(&blocks(&[1, 2, 3]), None);
        c.release(&blocks(&[3]));
        let prompt = blocks(&[1, 2, 3, 4]);
        assert_eq!(c.prefix_hit(&prompt), 3);
        // Blocks 1 and 2 are in use; 3 is only cached (taking it leaves the LRU list).
        assert_eq!(c.active_prefix(&prompt, 3), 2);
        assert_eq!(c.active_prefix(&prompt, 1), 1);
    }

    #[test]
    fn blocks_a_load_fills_are_out_of_reach_and_unannounced_until_it_ends() {
        let mut c = KvCache::new(8, 0, 7, 0);
        c.use_blocks(&blocks(&[1]), None);
        c.events.clear();
        let prompt = blocks(&[1, 2, 3]);
        let mut held_back = (None, Vec::new());
        assert_eq!(c.use_loading(&prompt[1..], Some(1001), &mut held_back), 2);
        assert!(c.events.is_empty(), "nothing announced while loading");
        assert_eq!(c.prefix_hit(&prompt), 1, "block 2 is loading: the hit stops before it");
        assert!(c.is_loading(&prompt[1]) && !c.is_loading(&prompt[0]));
        assert_eq!(c.used(), 3, "the loading blocks take their room at once");
        c.loaded(&mut held_back);
        assert_eq!(c.prefix_hit(&prompt), 3);
        assert!(!c.is_loading(&prompt[1]));
        assert_eq!(c.events.meta, vec![KIND_STORED, 0, FLAG_DEVICE_TIER | FLAG_HAS_PARENT, 2]);
        assert_eq!(c.events.words, vec![7, 0, 1001, 1002, 2, 1003, 3]);
    }

    #[test]
    fn full_pool_takes_what_fits() {
        let mut c = KvCache::new(3, 0, 0, 0);
        assert_eq!(c.use_blocks(&blocks(&[1, 2, 3, 4]), None), 3);
        assert!(!c.use_private());
        c.release(&blocks(&[3]));
        assert!(c.use_private());
        assert_eq!(c.used(), 3);
    }
}
