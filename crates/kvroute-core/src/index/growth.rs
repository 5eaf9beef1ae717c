//! Containers whose growth never stalls a writer for long.
//!
//! The tree is guarded by one lock, so any single operation that takes long stalls every reader.
//! A plain `Vec` copies all its elements when it grows, and a hash map rehashes all its entries:
//! megabytes and hundreds of microseconds once the index holds millions of blocks. These two
//! containers bound that work: [`ChunkedVec`] grows by adding a chunk and never moves an element,
//! and [`ShardedMap`] splits a rank's names over 16 maps, so one rehash touches a sixteenth of them.

use rustc_hash::{FxHashMap, FxHasher};
use std::hash::Hasher;
use std::ops::{Index, IndexMut};

const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
const MASK: usize = CHUNK - 1;

/// A growable array in fixed chunks of 4,096 elements.
#[derive(Debug, Default)]
pub struct ChunkedVec<T> {
    chunks: Vec<Box<[T]>>,
    len: usize,
}

impl<T: Default> ChunkedVec<T> {
    /// Appends `value` and returns its index.
    pub fn push(&mut self, value: T) -> usize {
        if self.len == self.chunks.len() * CHUNK {
            self.chunks.push((0..CHUNK).map(|_| T::default()).collect());
        }
        let i = self.len;
        self.len += 1;
        self[i] = value;
        i
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn capacity(&self) -> usize {
        self.chunks.len() * CHUNK
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flat_map(|c| c.iter()).take(self.len)
    }
}

impl<T> Index<usize> for ChunkedVec<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        debug_assert!(i < self.len);
        &self.chunks[i >> CHUNK_BITS][i & MASK]
    }
}

impl<T> IndexMut<usize> for ChunkedVec<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        debug_assert!(i < self.len);
        &mut self.chunks[i >> CHUNK_BITS][i & MASK]
    }
}

const SHARDS: usize = 16;

/// A map from u64 keys, split into 16 hash maps by the key's hash.
#[derive(Debug, Default)]
pub struct ShardedMap<V> {
    shards: [FxHashMap<u64, V>; SHARDS],
    len: usize,
}

fn shard(key: u64) -> usize {
    let mut h = FxHasher::default();
    h.write_u64(key);
    (h.finish() >> 60) as usize
}

impl<V> ShardedMap<V> {
    pub fn get(&self, key: &u64) -> Option<&V> {
        self.shards[shard(*key)].get(key)
    }

    pub fn contains_key(&self, key: &u64) -> bool {
        self.shards[shard(*key)].contains_key(key)
    }

    pub fn insert(&mut self, key: u64, value: V) -> Option<V> {
        let old = self.shards[shard(key)].insert(key, value);
        if old.is_none() {
            self.len += 1;
        }
        old
    }

    pub fn remove(&mut self, key: &u64) -> Option<V> {
        let old = self.shards[shard(*key)].remove(key);
        if old.is_some() {
            self.len -= 1;
        }
        old
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries the shards have room for (for memory estimates).
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(|s| s.capacity()).sum()
    }
}
