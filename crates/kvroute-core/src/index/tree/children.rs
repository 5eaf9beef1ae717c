//! A node's children, keyed by the first local hash of their edge. Most nodes have none or two,
//! kept in the node itself; up to eight sit in a short vector, which beats a hash map on both
//! memory and speed until it grows; more go to a hash table.
//!
//! The hash table keeps 8 bytes a child, not 16: the key's low 32 bits and the child's id. The
//! full key is the child's own first local hash, so a lookup whose low bits match confirms it
//! there (the caller passes the way to read it), and the table grows by the low bits alone. In
//! the W = 256 benchmark index one node of each shard has thousands of children, and its table
//! in each copy of the view went from 139,312 to 73,744 bytes (a 64-bit key and a 32-bit id
//! take 16 bytes with padding). A lookup that finds the child reads that child's edge next
//! anyway, so the confirmation costs no extra cache miss.

use super::NodeId;
use hashbrown::HashTable;
use std::hash::BuildHasher;

const FEW_MAX: usize = 8;

/// How many of a [`Pair`]'s entries are in use. An enum rather than an integer so that its
/// unused values can hold [`Children`]'s variant tag: with a `u32` count the tag took 8 bytes
/// of its own, and a node 88 bytes instead of 80 (about 1% of a W = 256 index, whose nodes
/// are kept once per copy of the view).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum PairLen {
    #[default]
    Zero = 0,
    One = 1,
    Two = 2,
}

impl PairLen {
    fn get(self) -> usize {
        self as usize
    }

    fn of(len: usize) -> Self {
        match len {
            0 => Self::Zero,
            1 => Self::One,
            _ => {
                debug_assert_eq!(len, 2, "a pair holds at most two children");
                Self::Two
            }
        }
    }
}

/// Children kept in the node itself: a split leaves a node with exactly two (the old tail and
/// the new branch), the most common case, and a `Vec` of them was a heap allocation of four
/// pairs (64 bytes) per node and view copy, and a `malloc` and `free` for every split and freed
/// node. It is the largest variant (28 bytes), and the enum is no larger than it: the tag sits
/// in the count's spare values.
#[derive(Debug, Default)]
pub struct Pair {
    len: PairLen,
    nodes: [NodeId; 2],
    locals: [u64; 2],
}

#[derive(Debug)]
pub enum Children {
    /// Up to two (`len` of them).
    Pair(Pair),
    /// Three to eight.
    Few(Vec<(u64, NodeId)>),
    /// Boxed, so that the enum is no larger than a pair: nodes with more than eight children
    /// are few (the root, mostly), and one more pointer to follow there costs less than eight
    /// bytes in every node of both copies of the view.
    Many(Box<HashTable<Tagged>>),
}

/// A child in a [`Children::Many`] table: its key's low 32 bits and its id.
#[derive(Debug, Clone, Copy)]
pub struct Tagged {
    low: u32,
    node: NodeId,
}

/// The low 32 bits of a key (truncation intended: the rest is the child's own first hash).
fn low_bits(local: u64) -> u32 {
    local as u32
}

/// Where a table entry with these low bits goes. Keys are already hashes, but tests and some
/// engines use small integers, so the low bits are mixed (Fx) rather than used as they are.
fn hash_low(low: u32) -> u64 {
    rustc_hash::FxBuildHasher.hash_one(low)
}

const _: () = assert!(std::mem::size_of::<Children>() == 32);

impl Default for Children {
    fn default() -> Self {
        Self::Pair(Pair::default())
    }
}

impl Children {
    /// The child keyed `local`. `first_local` reads a child's first local hash (`None` while its
    /// edge is empty: only between the write step that adds a child and the one that gives it
    /// its positions, when nothing looks it up); only a table asks, to confirm a match of the
    /// key's low bits.
    #[inline]
    pub fn get(&self, local: u64, first_local: impl Fn(NodeId) -> Option<u64>) -> Option<NodeId> {
        match self {
            Self::Pair(p) => (0..p.len.get()).find(|&i| p.locals[i] == local).map(|i| p.nodes[i]),
            Self::Few(v) => v.iter().find(|(k, _)| *k == local).map(|(_, n)| *n),
            Self::Many(m) => {
                let low = low_bits(local);
                m.find(hash_low(low), |t| t.low == low && first_local(t.node) == Some(local)).map(|t| t.node)
            }
        }
    }

    /// Adds `node` under `local`, which no child has yet: the writer adds a child only where its
    /// walk found none, and a split gives the head a fresh set. (A pair or a short vector would
    /// re-point an existing key; a table would hold both.)
    pub fn insert(&mut self, local: u64, node: NodeId) {
        match self {
            Self::Pair(p) => {
                let len = p.len.get();
                if let Some(i) = (0..len).find(|&i| p.locals[i] == local) {
                    p.nodes[i] = node;
                } else if len < 2 {
                    p.locals[len] = local;
                    p.nodes[len] = node;
                    p.len = PairLen::of(len + 1);
                } else {
                    let mut v = Vec::with_capacity(3);
                    v.extend((0..2).map(|i| (p.locals[i], p.nodes[i])));
                    v.push((local, node));
                    *self = Self::Few(v);
                }
            }
            Self::Few(v) => {
                if let Some(slot) = v.iter_mut().find(|(k, _)| *k == local) {
                    slot.1 = node;
                } else if v.len() < FEW_MAX {
                    // Exact room: children are added rarely (at a split or a new branch), and
                    // a doubled vector's spare room was a quarter of the children's memory.
                    v.reserve_exact(1);
                    v.push((local, node));
                } else {
                    let mut table = HashTable::with_capacity(FEW_MAX + 1);
                    for (k, n) in v.drain(..).chain(std::iter::once((local, node))) {
                        insert_tagged(&mut table, k, n);
                    }
                    *self = Self::Many(Box::new(table));
                }
            }
            Self::Many(m) => insert_tagged(m, local, node),
        }
    }

    /// Removes the child `node`, keyed `local`.
    pub fn remove(&mut self, local: u64, node: NodeId) {
        match self {
            Self::Pair(p) => {
                let len = p.len.get();
                if let Some(i) = (0..len).find(|&i| p.locals[i] == local) {
                    debug_assert_eq!(p.nodes[i], node);
                    p.locals[i] = p.locals[len - 1];
                    p.nodes[i] = p.nodes[len - 1];
                    p.len = PairLen::of(len - 1);
                }
            }
            Self::Few(v) => {
                v.retain(|(k, _)| *k != local);
                if v.len() <= 2 {
                    let mut p = Pair { len: PairLen::of(v.len()), ..Pair::default() };
                    for (i, (k, n)) in v.iter().enumerate() {
                        p.locals[i] = *k;
                        p.nodes[i] = *n;
                    }
                    *self = Self::Pair(p);
                }
            }
            Self::Many(m) => {
                if let Ok(entry) = m.find_entry(hash_low(low_bits(local)), |t| t.node == node) {
                    entry.remove();
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Self::Pair(p) => p.len == PairLen::Zero,
            Self::Few(v) => v.is_empty(),
            Self::Many(m) => m.is_empty(),
        }
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.iter().collect()
    }

    /// The children's ids, without collecting them (a removal filters them first).
    pub fn iter(&self) -> impl Iterator<Item = NodeId> + '_ {
        let (pair, few, many) = match self {
            Self::Pair(p) => (Some(&p.nodes[..p.len.get()]), None, None),
            Self::Few(v) => (None, Some(v.iter().map(|(_, n)| *n)), None),
            Self::Many(m) => (None, None, Some(m.iter().map(|t| t.node))),
        };
        pair.into_iter().flatten().copied().chain(few.into_iter().flatten()).chain(many.into_iter().flatten())
    }

    /// Children ordered by their first local hash: dumps must not depend on insertion order.
    /// `first_local` as for [`Self::get`]; outside a write every child has its positions.
    pub fn sorted(&self, first_local: impl Fn(NodeId) -> Option<u64>) -> Vec<(u64, NodeId)> {
        let mut out: Vec<(u64, NodeId)> = match self {
            Self::Pair(p) => (0..p.len.get()).map(|i| (p.locals[i], p.nodes[i])).collect(),
            Self::Few(v) => v.clone(),
            Self::Many(m) => m.iter().map(|t| (first_local(t.node).unwrap_or(u64::from(t.low)), t.node)).collect(),
        };
        out.sort_unstable_by_key(|(k, _)| *k);
        out
    }

    pub fn heap_bytes(&self) -> usize {
        match self {
            Self::Pair(_) => 0,
            Self::Few(v) => crate::index::stats::vec_bytes::<(u64, NodeId)>(v.capacity()),
            Self::Many(m) => std::mem::size_of::<HashTable<Tagged>>() + m.allocation_size(),
        }
    }
}

fn insert_tagged(table: &mut HashTable<Tagged>, local: u64, node: NodeId) {
    let low = low_bits(local);
    table.insert_unique(hash_low(low), Tagged { low, node }, |t| hash_low(t.low));
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, HashMap};

    /// Twelve keys, pairs of which share their low 32 bits, so that a table must confirm a
    /// match of the low bits against the child's own key.
    fn key_of(k: u64) -> u64 {
        (k % 6) | ((k / 6) << 32)
    }

    proptest! {
        /// Inserts and removals against a map, over enough keys (12) to pass through all three
        /// forms and back.
        #[test]
        fn behaves_like_a_map_in_every_form(
            ops in prop::collection::vec((0u64..12, prop::bool::weighted(0.7)), 0..300),
        ) {
            let mut children = Children::default();
            let mut model = BTreeMap::new();
            // Each child's own first local hash, as its edge would give it.
            let mut first_locals = HashMap::new();
            for (step, (k, inserting)) in (0u32..).zip(ops) {
                let key = key_of(k);
                if let Some(old) = model.remove(&key) {
                    children.remove(key, old);
                }
                if inserting {
                    children.insert(key, step);
                    model.insert(key, step);
                    first_locals.insert(step, key);
                }
                let first_local = |node: NodeId| first_locals.get(&node).copied();
                let expected: Vec<_> = model.iter().map(|(k, n)| (*k, *n)).collect();
                prop_assert_eq!(children.sorted(first_local), expected);
                for probe in (0..12).map(key_of) {
                    prop_assert_eq!(children.get(probe, first_local), model.get(&probe).copied());
                }
                prop_assert_eq!(children.is_empty(), model.is_empty());
                let mut ids = children.ids();
                ids.sort_unstable();
                let mut want: Vec<_> = model.values().copied().collect();
                want.sort_unstable();
                prop_assert_eq!(ids, want);
                if model.len() <= 2 && !matches!(children, Children::Many(_)) {
                    prop_assert_eq!(children.heap_bytes(), 0, "two or fewer children are kept in place");
                }
            }
        }
    }

    #[test]
    fn a_table_keeps_eight_bytes_a_child_and_tells_keys_with_equal_low_bits_apart() {
        let mut children = Children::default();
        let keys: Vec<u64> = (0..1000u64).map(|i| (i / 2) | ((i % 2) << 40)).collect();
        for (node, &key) in (0u32..).zip(&keys) {
            children.insert(key, node);
        }
        let first_local = |node: NodeId| keys.get(node as usize).copied();
        assert!(matches!(children, Children::Many(_)));
        for (node, &key) in (0u32..).zip(&keys) {
            assert_eq!(children.get(key, first_local), Some(node));
        }
        assert_eq!(children.get(7 | (1 << 41), first_local), None, "same low bits, another key");
        // hashbrown, at most 7/8 full: 2,048 buckets of 8 bytes and a control byte each, and 16
        // more control bytes.
        assert_eq!(children.heap_bytes(), std::mem::size_of::<HashTable<Tagged>>() + 2048 * 9 + 16);
        children.remove(keys[3], 3);
        assert_eq!(children.get(keys[3], first_local), None);
        assert_eq!(children.get(keys[2], first_local), Some(2), "the key with the same low bits stays");
    }
}
