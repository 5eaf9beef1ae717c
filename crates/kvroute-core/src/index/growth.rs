//! Containers whose growth never stalls a writer for long.
//!
//! The tree is guarded by one lock, so any single operation that takes long stalls every reader.
//! A plain `Vec` copies all its elements when it grows, and a hash map rehashes all its entries:
//! megabytes and hundreds of microseconds once the index holds millions of blocks. These two
//! containers bound that work: [`ChunkedVec`] grows by adding a chunk and never moves an element,
//! and [`crate::index::names::NameTable`] splits a rank's names over 4 tables, so one rehash
//! touches a quarter of them.

use rustc_hash::FxBuildHasher;
use std::ops::{Index, IndexMut};

const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
const MASK: usize = CHUNK - 1;

/// A growable array in chunks of 4,096 elements. The first chunk grows like a `Vec` (so an empty
/// or small index stays small: an empty one allocates nothing); later chunks are allocated whole,
/// so growth never moves more than one chunk's elements.
#[derive(Debug)]
pub struct ChunkedVec<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for ChunkedVec<T> {
    fn default() -> Self {
        Self { chunks: Vec::new(), len: 0 }
    }
}

impl<T> ChunkedVec<T> {
    /// Appends `value` and returns its index.
    pub fn push(&mut self, value: T) -> usize {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push(value),
            _ => {
                let mut chunk = if self.chunks.is_empty() { Vec::new() } else { Vec::with_capacity(CHUNK) };
                chunk.push(value);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
        self.len - 1
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements the chunks have room for (for memory accounting).
    pub fn capacity(&self) -> usize {
        self.chunks.iter().map(Vec::capacity).sum()
    }

    /// Heap bytes of the chunks themselves (not of what elements own).
    pub fn heap_bytes(&self) -> usize {
        self.capacity() * std::mem::size_of::<T>() + self.chunks.capacity() * std::mem::size_of::<Vec<T>>()
    }

    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flat_map(|c| c.iter())
    }
}

impl<T> Index<usize> for ChunkedVec<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        &self.chunks[i >> CHUNK_BITS][i & MASK]
    }
}

impl<T> IndexMut<usize> for ChunkedVec<T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        &mut self.chunks[i >> CHUNK_BITS][i & MASK]
    }
}

/// The index's hash map: hashbrown with the Fx hash (keys are already hashes, so a cheap hash
/// suffices), used directly rather than through std for [`FastMap::allocation_size`]: what a
/// map really holds, tombstones included, which `capacity()` does not tell.
pub type FastMap<K, V> = hashbrown::HashMap<K, V, FxBuildHasher>;
