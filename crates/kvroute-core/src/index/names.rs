//! [`NameTable`]: a rank's block names → block ids, the map every stored and removed block
//! probes once. Hand-rolled rather than a general hash map for two reasons measured on the index
//! workload: a probe can be **prefetched** (an event's names are known up front, so the writer
//! asks for the next names' slots while it works on the current one, overlapping the cache
//! misses that were most of its time), and an entry is one 16-byte slot found by linear probing,
//! usually in one cache line.
//!
//! Split into 16 tables by the key's hash, like the map it replaces, so that growing rehashes a
//! sixteenth of a large rank's names at a time and never stalls a writer for long.

use crate::index::stats::vec_bytes;

const SHARD_BITS: u32 = 4;
const SHARDS: usize = 1 << SHARD_BITS;
/// Slots a table starts with once it gets its first name.
const FIRST_SLOTS: usize = 8;
/// The fullest a table gets, as a fraction (numerator, denominator).
const MAX_LOAD: (usize, usize) = (3, 4);
/// Marks a free slot (block ids stay below it: the arena would need 2^32 positions).
const EMPTY: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
#[repr(C, align(16))]
struct Slot {
    key: u64,
    value: u32,
}

const FREE: Slot = Slot { key: 0, value: EMPTY };

/// Keys are engine hashes, but tests and some engines use small integers: mix before use.
fn mix(key: u64) -> u64 {
    (key ^ (key >> 29)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[derive(Debug, Default)]
struct Table {
    slots: Vec<Slot>,
    len: usize,
}

impl Table {
    fn home(&self, h: u64) -> usize {
        // The top bits chose the table; the next ones choose the slot.
        ((h << SHARD_BITS) >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    fn find(&self, key: u64, h: u64) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        loop {
            let s = self.slots[i];
            if s.value == EMPTY {
                return None;
            }
            if s.key == key {
                return Some(i);
            }
            i = (i + 1) & mask;
        }
    }

    fn insert(&mut self, key: u64, value: u32, h: u64) -> Option<u32> {
        // At most MAX_LOAD full keeps linear probes short.
        if (self.len + 1) * MAX_LOAD.1 > self.slots.len() * MAX_LOAD.0 {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(h);
        loop {
            let s = &mut self.slots[i];
            if s.value == EMPTY {
                *s = Slot { key, value };
                self.len += 1;
                return None;
            }
            if s.key == key {
                return Some(std::mem::replace(&mut s.value, value));
            }
            i = (i + 1) & mask;
        }
    }

    fn grow(&mut self) {
        let size = (self.slots.len() * 2).max(FIRST_SLOTS);
        let old = std::mem::replace(&mut self.slots, vec![FREE; size]);
        self.len = 0;
        for s in old.into_iter().filter(|s| s.value != EMPTY) {
            self.insert(s.key, s.value, mix(s.key));
        }
    }

    /// Removes by shifting later entries of the probe run back, so no tombstones build up.
    fn remove(&mut self, key: u64, h: u64) -> Option<u32> {
        let mut hole = self.find(key, h)?;
        let value = self.slots[hole].value;
        let mask = self.slots.len() - 1;
        let mut j = hole;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s.value == EMPTY {
                break;
            }
            // `s` may fill the hole only if its home is not cyclically in (hole, j].
            let home = self.home(mix(s.key));
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole] = FREE;
        self.len -= 1;
        if self.len == 0 {
            self.slots = Vec::new();
        }
        Some(value)
    }
}

/// Block names (u64) → block ids (u32).
#[derive(Debug, Default)]
pub struct NameTable {
    tables: [Table; SHARDS],
    len: usize,
}

impl NameTable {
    fn table(&self, h: u64) -> &Table {
        &self.tables[(h >> (64 - SHARD_BITS)) as usize]
    }

    fn table_mut(&mut self, h: u64) -> &mut Table {
        &mut self.tables[(h >> (64 - SHARD_BITS)) as usize]
    }

    pub fn get(&self, key: &u64) -> Option<&u32> {
        let h = mix(*key);
        let t = self.table(h);
        t.find(*key, h).map(|i| &t.slots[i].value)
    }

    pub fn contains_key(&self, key: &u64) -> bool {
        self.get(key).is_some()
    }

    pub fn insert(&mut self, key: u64, value: u32) -> Option<u32> {
        debug_assert!(value != EMPTY, "block id out of range");
        let h = mix(key);
        let old = self.table_mut(h).insert(key, value, h);
        self.len += usize::from(old.is_none());
        old
    }

    pub fn remove(&mut self, key: &u64) -> Option<u32> {
        let h = mix(*key);
        let old = self.table_mut(h).remove(*key, h);
        self.len -= usize::from(old.is_some());
        old
    }

    /// Asks the CPU to start loading the slot where `key` would sit; a hint, never a fault.
    pub fn prefetch(&self, key: u64) {
        let h = mix(key);
        let t = self.table(h);
        if let Some(slot) = t.slots.get(if t.slots.is_empty() { 0 } else { t.home(h) }) {
            prefetch(slot);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes of the tables.
    pub fn heap_bytes(&self) -> usize {
        self.tables.iter().map(|t| vec_bytes::<Slot>(t.slots.capacity())).sum()
    }
}

/// A read prefetch of the cache line holding `value`.
pub fn prefetch<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // Safety: prefetching is a hint; it never faults, even on an invalid address, and `value`
    // is a valid reference anyway.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((value as *const T).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

#[cfg(test)]
mod tests {
    use super::NameTable;
    use std::collections::HashMap;

    /// Against std's map, with small keys (which collide after masking) and heavy removal.
    #[test]
    fn behaves_like_a_map() {
        let mut ours = NameTable::default();
        let mut reference = HashMap::new();
        let mut x: u64 = 0x1234_5678;
        for step in 0..200_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let key = x % 5_000;
            if x.is_multiple_of(3) {
                assert_eq!(ours.remove(&key), reference.remove(&key), "step {step}");
            } else {
                assert_eq!(ours.insert(key, step), reference.insert(key, step), "step {step}");
            }
            assert_eq!(ours.len(), reference.len());
        }
        for key in 0..5_000 {
            assert_eq!(ours.get(&key), reference.get(&key));
        }
        for key in 0..5_000 {
            ours.remove(&key);
        }
        assert!(ours.is_empty());
        assert_eq!(ours.heap_bytes(), 0);
    }
}
