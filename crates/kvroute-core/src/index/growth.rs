//! Containers whose growth never stalls a writer for long.
//!
//! A writer applies a batch whole before readers see it, so any single operation that takes long
//! delays that batch and everything queued behind it on the shard. A plain `Vec` copies all its
//! elements when it grows, and a hash map rehashes all its entries:
//! megabytes and hundreds of microseconds once the index holds millions of blocks. These two
//! containers bound that work: [`ChunkedVec`] grows within its last chunk (at most 64 KiB moved)
//! or by adding a chunk, never moving the elements of earlier chunks, and
//! [`crate::index::names::NameTable`] splits a rank's names over 4 tables, so one rehash
//! touches a quarter of them.

use crate::index::prefetch::prefetch_address;
use rustc_hash::FxBuildHasher;
use std::ops::{Index, IndexMut};

/// A chunk's size in bytes, at most: chunks hold a power of two elements, as many as fit.
const CHUNK_BYTES: usize = 1 << 16;

/// A growable array in chunks of up to 64 KiB (4,096 blocks' data, 512 nodes). Each chunk grows
/// like a `Vec` up to its full size (so an empty or small index stays small: an empty one
/// allocates nothing), and the first chunk starts empty, later ones at an eighth: growth never
/// moves more than one chunk's elements, and the last chunk's unused room is at most half of it. Sized
/// in bytes rather than elements, so that the last chunk's unused room is as small for large
/// elements (a node is 80 bytes) as for small ones: chunks of 4,096 nodes left a W = 256 index
/// about 0.3 bytes per held block of room never used.
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
    /// An element's size, counted as 1 for zero-sized ones so that the sizes below divide.
    const ELEMENT_BYTES: usize = if std::mem::size_of::<T>() == 0 { 1 } else { std::mem::size_of::<T>() };
    const BITS: u32 = {
        let per_chunk = CHUNK_BYTES / Self::ELEMENT_BYTES;
        if per_chunk <= 1 {
            0
        } else {
            per_chunk.ilog2()
        }
    };
    const CHUNK: usize = 1 << Self::BITS;
    /// How far past the end `push` prefetches, in elements: 256 bytes, four cache lines.
    const AHEAD: usize = 256 / Self::ELEMENT_BYTES;

    /// Appends `value` and returns its index. The common case, room in the last chunk, is
    /// inlined; growing a chunk or starting one is not. It then prefetches the line 256 bytes
    /// past the new end: a writer appends block records and nodes in order, to memory that is
    /// rarely in the cache (just grown, or freed by an earlier index), and each first write to
    /// a line waited for it. With the prefetch the two-writer ingest at W = 256 was 10% faster
    /// (8 alternating pairs, 7 faster), churn 7% (6 of 8), W = 16 even; 128 and 512 bytes
    /// ahead were 4% slower than 256.
    #[inline]
    pub fn push(&mut self, value: T) -> usize {
        // The last chunk is not full (`len` is no multiple of a chunk) and has room allocated.
        if self.len & (Self::CHUNK - 1) != 0 {
            let chunk = self.chunks.last_mut().expect("a partly filled chunk");
            if chunk.len() < chunk.capacity() {
                chunk.push(value);
                prefetch_address(chunk.as_ptr().wrapping_add(chunk.len() + Self::AHEAD));
                self.len += 1;
                return self.len - 1;
            }
        }
        self.push_growing(value)
    }

    #[cold]
    #[inline(never)]
    fn push_growing(&mut self, value: T) -> usize {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < Self::CHUNK => {
                // Room doubles, up to a whole chunk (never past it).
                chunk.reserve_exact(chunk.capacity().clamp(1, Self::CHUNK - chunk.len()));
                chunk.push(value);
            }
            _ => {
                // A new chunk starts at an eighth of its size: else a tree a few elements past
                // a chunk boundary held up to 64 KiB it never used, per array.
                let mut chunk = Vec::with_capacity(if self.chunks.is_empty() { 0 } else { (Self::CHUNK / 8).max(1) });
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

/// Indexing checks `i` against the length once, not against the chunk list and then the chunk:
/// every chunk but the last holds `CHUNK` elements and the last the rest (`push` is the only
/// way in, and starts a chunk only when the last is full), so `i < len` puts element `i` at
/// `i & (CHUNK - 1)` in chunk `i >> BITS`, which exists. The writer indexes block data and
/// nodes several times per block-event; the second check was 5% of a removal's instructions.
impl<T> Index<usize> for ChunkedVec<T> {
    type Output = T;

    #[inline]
    fn index(&self, i: usize) -> &T {
        assert!(i < self.len, "index {i} out of a ChunkedVec of {}", self.len);
        // Safety: see above; `i < len`.
        unsafe { self.chunks.get_unchecked(i >> Self::BITS).get_unchecked(i & (Self::CHUNK - 1)) }
    }
}

impl<T> IndexMut<usize> for ChunkedVec<T> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut T {
        assert!(i < self.len, "index {i} out of a ChunkedVec of {}", self.len);
        // Safety: as for `index`.
        unsafe { self.chunks.get_unchecked_mut(i >> Self::BITS).get_unchecked_mut(i & (Self::CHUNK - 1)) }
    }
}

/// The index's hash map: hashbrown with the Fx hash (keys are already hashes, so a cheap hash
/// suffices), used directly rather than through std for [`FastMap::allocation_size`]: what a
/// map really holds, tombstones included, which `capacity()` does not tell.
pub type FastMap<K, V> = hashbrown::HashMap<K, V, FxBuildHasher>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_hold_about_64_kib_of_any_element() {
        let mut nodes: ChunkedVec<[u64; 11]> = ChunkedVec::default();
        let mut blocks: ChunkedVec<u128> = ChunkedVec::default();
        assert_eq!((ChunkedVec::<[u64; 11]>::CHUNK, ChunkedVec::<u128>::CHUNK), (512, 4096));
        assert_eq!((nodes.heap_bytes(), nodes.capacity()), (0, 0), "empty allocates nothing");
        for i in 0..5000u64 {
            assert_eq!(nodes.push([i; 11]), i as usize);
            blocks.push(u128::from(i));
        }
        assert!((0..5000).all(|i| nodes[i][10] == i as u64 && blocks[i] == i as u128));
        nodes[4999][0] = 7;
        assert_eq!(nodes[4999][0], 7);
        assert!(nodes.capacity() - nodes.len() <= 256, "at most half the last chunk's room unused");
        let mut past: ChunkedVec<[u64; 11]> = ChunkedVec::default();
        for i in 0..=512u64 {
            past.push([i; 11]);
        }
        assert_eq!(past.capacity(), 512 + 64, "one element past a chunk takes an eighth of one");
        assert_eq!(nodes.iter().count(), 5000);
    }

    /// Indexing checks the length once (then reads unchecked), so an index past the length must
    /// still panic: inside the last chunk's allocated room (10 elements, room for 16), and past
    /// a full chunk, reading or writing.
    #[test]
    fn an_index_past_the_length_panics() {
        let filled = |n: u32| {
            let mut v: ChunkedVec<u128> = ChunkedVec::default();
            for i in 0..n {
                v.push(u128::from(i));
            }
            v
        };
        let partial = filled(10);
        assert!(partial.capacity() > 10, "room allocated past the length");
        assert!(std::panic::catch_unwind(|| partial[10]).is_err());
        let mut full = filled(4096);
        assert!(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| full[4096] = 1)).is_err());
        assert_eq!((partial[9], full[4095]), (9, 4095), "in range still reads");
    }
}
