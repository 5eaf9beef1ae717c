//! Edges: a node's run of local hashes and block ids, stored once for both copies of the view.
//!
//! Each edge lives in one heap buffer (`cap` local hashes, then `cap` block ids). The two copies
//! of the view point at the same buffer, each with its own length; the book owns the buffers
//! ([`EdgeStore`], by node id). Keeping an edge once instead of once per copy saves 12 bytes per
//! tree position and half the allocations, and the second copy's replay sets a pointer and a
//! length instead of copying positions.
//!
//! Why sharing is safe: a writer only writes positions that no copy shows. The copy readers
//! may be on is the copy as it was before the current write, so a position at or after a
//! node's length now is unseen unless this write truncated that node (a split moves both parts
//! to new buffers); such a node, or one without room, moves to a new buffer when it grows. A buffer
//! that no copy should show any more (its node freed, or moved) is retired and freed at the
//! start of the next write, when the previous write's replay has brought the other copy up to
//! date (writes to a tree are serialised: see `shard.rs`).

use super::blocks::MAX_EDGE_LEN;
use super::{BlockId, NodeId};
use crate::index::event::StoredBlock;
use crate::index::growth::ChunkedVec;
use std::alloc::{alloc, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

/// An edge as a copy of the view sees it: the first `len` positions of a buffer of `cap`.
#[derive(Debug, Clone, Copy)]
pub struct Edge {
    ptr: NonNull<u64>,
    len: u32,
    cap: u32,
}

// Safety: an `Edge` is a read-only window on a buffer that the book owns; the positions it
// shows are never written while any copy of the view shows them, and the buffer outlives every
// copy that points at it (see the module docs). Sharing it between threads is sharing `&[u64]`.
unsafe impl Send for Edge {}
// Safety: as above.
unsafe impl Sync for Edge {}

impl Default for Edge {
    fn default() -> Self {
        Self { ptr: NonNull::dangling(), len: 0, cap: 0 }
    }
}

impl Edge {
    pub fn len(&self) -> u32 {
        self.len
    }

    pub fn locals(&self) -> &[u64] {
        // Safety: `len <= cap` positions of a live buffer, written before this edge was made
        // (an empty edge's dangling pointer is aligned, and zero elements are read).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len as usize) }
    }

    pub fn blocks(&self) -> &[BlockId] {
        // Safety: as for `locals`; the block ids follow the `cap` local hashes, and a u64
        // boundary is aligned for u32.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().add(self.cap as usize).cast(), self.len as usize) }
    }

    /// The same buffer showing only its first `len` positions (never more than it showed).
    pub fn truncated(self, len: u32) -> Self {
        debug_assert!(len <= self.len);
        Self { len: len.min(self.len), ..self }
    }

    fn layout(cap: u32) -> Layout {
        let size = cap as usize * (std::mem::size_of::<u64>() + std::mem::size_of::<BlockId>());
        Layout::from_size_align(size, std::mem::align_of::<u64>()).expect("edge buffer size")
    }

    /// A new empty buffer with room for `cap` (at least 1) positions.
    fn allocate(cap: u32) -> Self {
        debug_assert!(cap > 0);
        // Safety: the layout has a non-zero size.
        let raw = unsafe { alloc(Self::layout(cap)) };
        let ptr = NonNull::new(raw.cast::<u64>()).unwrap_or_else(|| handle_alloc_error(Self::layout(cap)));
        Self { ptr, len: 0, cap }
    }

    /// Frees the buffer. The caller guarantees no copy of the view shows it any more.
    unsafe fn free(self) {
        if self.cap > 0 {
            // Safety: allocated by `allocate` with this layout, and freed once (the caller's word).
            unsafe { dealloc(self.ptr.as_ptr().cast(), Self::layout(self.cap)) };
        }
    }

    fn bytes(&self) -> usize {
        Self::layout(self.cap).size()
    }

    /// Writes positions `len..len + n` and returns the edge showing them. The caller guarantees
    /// that they fit and that no copy of the view shows them.
    unsafe fn append(self, locals: impl Iterator<Item = u64>, ids: &[BlockId]) -> Self {
        debug_assert!(self.len as usize + ids.len() <= self.cap as usize);
        let at = self.len as usize;
        // Safety: offsets within the buffer (`len + n <= cap`, the caller's word), and positions
        // that nobody reads while they are written.
        unsafe {
            let local_out = self.ptr.as_ptr().add(at);
            let block_out = self.ptr.as_ptr().add(self.cap as usize).cast::<BlockId>().add(at);
            for (j, (local, &id)) in locals.zip(ids).enumerate() {
                local_out.add(j).write(local);
                block_out.add(j).write(id);
            }
        }
        Self { len: self.len + ids.len() as u32, ..self }
    }
}

/// The book's side: which buffer each node owns, and the buffers the current write retired.
#[derive(Debug, Default)]
pub struct EdgeStore {
    owned: ChunkedVec<Owned>,
    /// Buffers no copy will show once the current write is replayed; freed by the next write.
    retired: Vec<Edge>,
    /// The current write's number (never 0, so a node never cut has `cut_in` 0).
    write: u32,
    /// Bytes of every owned and retired buffer.
    bytes: usize,
}

/// A node's buffer (its address and room; the copies of the view hold the lengths), 16 bytes.
#[derive(Debug)]
struct Owned {
    ptr: NonNull<u64>,
    cap: u32,
    /// The write that last shortened this node: until it ends, the other copy may still show
    /// positions past the node's length, so they are not written in place.
    cut_in: u32,
}

// Safety: as for `Edge`: the book owns the buffer, and only the writer of its tree touches it.
unsafe impl Send for Owned {}
// Safety: as above.
unsafe impl Sync for Owned {}

impl Default for Owned {
    fn default() -> Self {
        Self { ptr: NonNull::dangling(), cap: 0, cut_in: 0 }
    }
}

impl Owned {
    /// The buffer as an edge that shows none of it (for freeing or retiring it).
    fn buffer(&self) -> Edge {
        Edge { ptr: self.ptr, len: 0, cap: self.cap }
    }

    fn set(&mut self, edge: Edge) {
        (self.ptr, self.cap) = (edge.ptr, edge.cap);
    }
}

impl EdgeStore {
    /// Starts a write: frees the buffers the previous write retired (its replay is done, so no
    /// copy shows them).
    pub fn begin_write(&mut self) {
        for edge in self.retired.drain(..) {
            self.bytes -= edge.bytes();
            // Safety: retired by the previous write; every copy has replayed it since.
            unsafe { edge.free() };
        }
        self.write = self.write.wrapping_add(1).max(1);
    }

    fn owned_mut(&mut self, node: NodeId) -> &mut Owned {
        while self.owned.len() <= node as usize {
            self.owned.push(Owned::default());
        }
        &mut self.owned[node as usize]
    }

    /// Appends positions to `node`'s edge (`edge`, as the writer's copy shows it) and returns
    /// the edge both copies are to show: the same buffer when the new positions fit and no copy
    /// shows them, else a new one (room doubles, as a `Vec`'s does, so decode's one block at a
    /// time costs amortised constant time).
    pub fn append(&mut self, node: NodeId, edge: Edge, blocks: &[StoredBlock], ids: &[BlockId]) -> Edge {
        let write = self.write;
        let owned = self.owned_mut(node);
        debug_assert_eq!(owned.ptr, edge.ptr, "the writer's copy shows the owned buffer");
        let needed = edge.len + ids.len() as u32;
        let target = if needed <= edge.cap && owned.cut_in != write {
            edge
        } else {
            // Room doubles only when the positions do not fit (a node cut this write that
            // grows again keeps its room: else repeated cuts and stores would double it each time).
            let cap = if needed <= edge.cap {
                edge.cap
            } else if edge.cap == 0 {
                needed
            } else {
                // No room past the longest edge the tree makes (`needed` never exceeds it).
                needed.max(edge.cap.saturating_mul(2).min(MAX_EDGE_LEN))
            };
            let fresh = Edge::allocate(cap);
            // Safety: the new buffer has room for the old positions and nobody shows it yet.
            let fresh = unsafe { fresh.append(edge.locals().iter().copied(), edge.blocks()) };
            self.replace(node, fresh);
            fresh
        };
        // Safety: they fit, and positions from the length on are shown by no copy (the other
        // copy shows this buffer no longer than now unless cut this write, handled above).
        let appended = unsafe { target.append(blocks.iter().map(|b| b.local), ids) };
        self.owned_mut(node).set(appended);
        appended
    }

    /// Splits `node`'s edge before position `k`: the positions from `k` on are copied to a new
    /// buffer for `tail`, and the first `k` to a new buffer for `node`; returns (head, tail).
    /// The head moves too because its old buffer's room past `k` would be dead: a split head has
    /// a child, so it never grows in place again, and without the move every split left the
    /// tail's positions allocated twice (1.2 MB of a W = 256 index). Copying the head costs
    /// little: splits are rare next to the block-events that make them.
    pub fn split(&mut self, node: NodeId, tail: NodeId, edge: Edge, k: u32) -> (Edge, Edge) {
        debug_assert!(k > 0 && k < edge.len);
        let (locals, blocks) = (edge.locals(), edge.blocks());
        let fresh = Edge::allocate(edge.len - k);
        // Safety: each new buffer has exactly the room, and nobody shows either yet.
        let fresh = unsafe { fresh.append(locals[k as usize..].iter().copied(), &blocks[k as usize..]) };
        let head = Edge::allocate(k);
        // Safety: as above.
        let head = unsafe { head.append(locals[..k as usize].iter().copied(), &blocks[..k as usize]) };
        // No `shortened` mark: the head's new buffer is one no copy shows yet, and it has no
        // room to grow in place anyway.
        self.replace(node, head);
        self.replace(tail, fresh);
        (head, fresh)
    }

    /// Records that `node`'s edge got shorter in this write.
    pub fn shortened(&mut self, node: NodeId) {
        let write = self.write;
        self.owned_mut(node).cut_in = write;
    }

    /// `node` is freed: its buffer is retired.
    pub fn free(&mut self, node: NodeId) {
        self.replace(node, Edge::default());
    }

    /// Makes `edge` the buffer `node` owns, retiring the one it owned.
    fn replace(&mut self, node: NodeId, edge: Edge) {
        self.bytes += edge.bytes();
        let owned = self.owned_mut(node);
        let old = owned.buffer();
        owned.set(edge);
        if old.cap > 0 {
            self.retired.push(old);
        }
    }

    /// Heap bytes: the buffers and the table of owners.
    pub fn heap_bytes(&self) -> usize {
        self.bytes + self.owned.heap_bytes() + crate::index::stats::vec_bytes::<Edge>(self.retired.capacity())
    }
}

impl Drop for EdgeStore {
    fn drop(&mut self) {
        // Dropping the book means no copy of the view is read any more (see `shard.rs`).
        self.begin_write();
        for owned in self.owned.iter() {
            // Safety: as above; each buffer is owned by one node only.
            unsafe { owned.buffer().free() };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(locals: &[u64]) -> Vec<StoredBlock> {
        locals.iter().map(|&local| StoredBlock { ext: local + 100, local }).collect()
    }

    fn ids(locals: &[u64]) -> Vec<BlockId> {
        locals.iter().map(|&l| l as BlockId * 10).collect()
    }

    fn append(store: &mut EdgeStore, node: NodeId, edge: Edge, locals: &[u64]) -> Edge {
        store.append(node, edge, &blocks(locals), &ids(locals))
    }

    #[test]
    fn positions_are_written_in_place_only_where_no_copy_shows_them() {
        let mut store = EdgeStore::default();
        store.begin_write();
        let first = append(&mut store, 1, Edge::default(), &[1, 2, 3]);
        assert_eq!((first.locals(), first.blocks(), first.cap), (&[1, 2, 3][..], &[10, 20, 30][..], 3));
        let owners = store.owned.heap_bytes();
        assert_eq!(store.heap_bytes(), 36 + owners);

        // A later write that does not fit moves to a buffer of twice the room; the old one is
        // retired (still counted) until the next write starts.
        store.begin_write();
        let moved = append(&mut store, 1, first, &[4]);
        assert_ne!(moved.ptr, first.ptr);
        assert_eq!((moved.locals(), moved.cap), (&[1, 2, 3, 4][..], 6));
        assert_eq!(first.locals(), &[1, 2, 3], "the old copy still shows its positions");
        let in_place = append(&mut store, 1, moved, &[5]);
        assert_eq!((in_place.ptr, in_place.locals()), (moved.ptr, &[1, 2, 3, 4, 5][..]));
        assert_eq!(store.heap_bytes(), 36 + 72 + store.owned.heap_bytes() + vec_bytes_of_retired(&store));

        // Cut and grown in one write: the other copy may show the cut positions, so the node
        // moves (keeping its room) and the old buffer keeps what it showed.
        store.shortened(1);
        let regrown = append(&mut store, 1, in_place.truncated(2), &[9]);
        assert_ne!(regrown.ptr, in_place.ptr);
        assert_eq!((regrown.locals(), regrown.blocks(), regrown.cap), (&[1, 2, 9][..], &[10, 20, 90][..], 6));
        assert_eq!(in_place.locals(), &[1, 2, 3, 4, 5]);

        // In the next write the cut is replayed everywhere: growth is in place again.
        store.begin_write();
        assert_eq!(store.heap_bytes(), 72 + store.owned.heap_bytes() + vec_bytes_of_retired(&store));
        let later = append(&mut store, 1, regrown, &[10]);
        assert_eq!((later.ptr, later.locals()), (regrown.ptr, &[1, 2, 9, 10][..]));
    }

    #[test]
    fn a_split_copies_both_parts_to_exact_buffers_and_a_freed_node_retires_its_buffer() {
        let mut store = EdgeStore::default();
        store.begin_write();
        let edge = append(&mut store, 1, Edge::default(), &[1, 2, 3, 4]);
        store.begin_write();
        let (head, tail) = store.split(1, 2, edge, 1);
        assert_eq!((tail.locals(), tail.blocks(), tail.cap), (&[2, 3, 4][..], &[20, 30, 40][..], 3));
        assert_eq!((head.locals(), head.blocks(), head.cap), (&[1][..], &[10][..], 1));
        assert_eq!(edge.locals(), &[1, 2, 3, 4], "the old copy still shows the whole edge");
        // The old buffer is retired (counted until the next write starts); growing the head moves it.
        assert_eq!(store.heap_bytes(), 48 + 12 + 36 + store.owned.heap_bytes() + vec_bytes_of_retired(&store));
        let grown = append(&mut store, 1, head, &[7]);
        assert_ne!(grown.ptr, head.ptr);
        assert_eq!(grown.locals(), &[1, 7]);
        store.free(2);
        store.begin_write();
        assert_eq!(store.heap_bytes(), 24 + store.owned.heap_bytes() + vec_bytes_of_retired(&store));
    }

    fn vec_bytes_of_retired(store: &EdgeStore) -> usize {
        crate::index::stats::vec_bytes::<Edge>(store.retired.capacity())
    }
}
