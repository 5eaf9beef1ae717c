//! A node's children, keyed by the first local hash of their edge. Most nodes have none or two,
//! kept in the node itself; up to eight sit in a short vector, which beats a hash map on both
//! memory and speed until it grows; more go to a hash map.

use super::NodeId;
use crate::index::growth::FastMap;

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
    #[allow(clippy::box_collection)]
    Many(Box<FastMap<u64, NodeId>>),
}

const _: () = assert!(std::mem::size_of::<Children>() == 32);

impl Default for Children {
    fn default() -> Self {
        Self::Pair(Pair::default())
    }
}

impl Children {
    pub fn get(&self, local: u64) -> Option<NodeId> {
        match self {
            Self::Pair(p) => (0..p.len.get()).find(|&i| p.locals[i] == local).map(|i| p.nodes[i]),
            Self::Few(v) => v.iter().find(|(k, _)| *k == local).map(|(_, n)| *n),
            Self::Many(m) => m.get(&local).copied(),
        }
    }

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
                    let mut m: FastMap<u64, NodeId> = v.drain(..).collect();
                    m.insert(local, node);
                    *self = Self::Many(Box::new(m));
                }
            }
            Self::Many(m) => {
                m.insert(local, node);
            }
        }
    }

    pub fn remove(&mut self, local: u64) {
        match self {
            Self::Pair(p) => {
                let len = p.len.get();
                if let Some(i) = (0..len).find(|&i| p.locals[i] == local) {
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
                m.remove(&local);
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
            Self::Many(m) => (None, None, Some(m.values().copied())),
        };
        pair.into_iter().flatten().copied().chain(few.into_iter().flatten()).chain(many.into_iter().flatten())
    }

    /// Children ordered by their first local hash: dumps must not depend on insertion order.
    pub fn sorted(&self) -> Vec<(u64, NodeId)> {
        let mut out: Vec<(u64, NodeId)> = match self {
            Self::Pair(p) => (0..p.len.get()).map(|i| (p.locals[i], p.nodes[i])).collect(),
            Self::Few(v) => v.clone(),
            Self::Many(m) => m.iter().map(|(k, n)| (*k, *n)).collect(),
        };
        out.sort_unstable_by_key(|(k, _)| *k);
        out
    }

    pub fn heap_bytes(&self) -> usize {
        match self {
            Self::Pair(_) => 0,
            Self::Few(v) => crate::index::stats::vec_bytes::<(u64, NodeId)>(v.capacity()),
            Self::Many(m) => std::mem::size_of::<FastMap<u64, NodeId>>() + m.allocation_size(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Inserts and removals against a map, over enough keys (12) to pass through all three
        /// forms and back.
        #[test]
        fn behaves_like_a_map_in_every_form(
            ops in prop::collection::vec((0u64..12, prop::bool::weighted(0.7)), 0..300),
        ) {
            let mut children = Children::default();
            let mut model = BTreeMap::new();
            for (step, (key, inserting)) in (0u32..).zip(ops) {
                if inserting {
                    children.insert(key, step);
                    model.insert(key, step);
                } else {
                    children.remove(key);
                    model.remove(&key);
                }
                let expected: Vec<_> = model.iter().map(|(k, n)| (*k, *n)).collect();
                prop_assert_eq!(children.sorted(), expected);
                prop_assert_eq!(children.get(key), model.get(&key).copied());
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
}
