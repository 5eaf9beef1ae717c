//! A node's children, keyed by the first local hash of their edge. Most nodes have one or two
//! children, so a short vector beats a hash map on both memory and speed until it grows.

use super::NodeId;
use crate::index::growth::FastMap;

const INLINE_MAX: usize = 8;

#[derive(Debug, Default)]
pub enum Children {
    #[default]
    None,
    Few(Vec<(u64, NodeId)>),
    Many(FastMap<u64, NodeId>),
}

impl Children {
    pub fn get(&self, local: u64) -> Option<NodeId> {
        match self {
            Self::None => None,
            Self::Few(v) => v.iter().find(|(k, _)| *k == local).map(|(_, n)| *n),
            Self::Many(m) => m.get(&local).copied(),
        }
    }

    pub fn insert(&mut self, local: u64, node: NodeId) {
        match self {
            Self::None => *self = Self::Few(vec![(local, node)]),
            Self::Few(v) => {
                if let Some(slot) = v.iter_mut().find(|(k, _)| *k == local) {
                    slot.1 = node;
                } else if v.len() < INLINE_MAX {
                    v.push((local, node));
                } else {
                    let mut m: FastMap<u64, NodeId> = v.drain(..).collect();
                    m.insert(local, node);
                    *self = Self::Many(m);
                }
            }
            Self::Many(m) => {
                m.insert(local, node);
            }
        }
    }

    pub fn remove(&mut self, local: u64) {
        match self {
            Self::None => {}
            Self::Few(v) => {
                v.retain(|(k, _)| *k != local);
                if v.is_empty() {
                    *self = Self::None;
                }
            }
            Self::Many(m) => {
                m.remove(&local);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        match self {
            Self::None => true,
            Self::Few(v) => v.is_empty(),
            Self::Many(m) => m.is_empty(),
        }
    }

    pub fn ids(&self) -> Vec<NodeId> {
        self.iter().collect()
    }

    /// The children's ids, without collecting them (a removal filters them first).
    pub fn iter(&self) -> impl Iterator<Item = NodeId> + '_ {
        let (few, many) = match self {
            Self::None => (None, None),
            Self::Few(v) => (Some(v.iter().map(|(_, n)| *n)), None),
            Self::Many(m) => (None, Some(m.values().copied())),
        };
        few.into_iter().flatten().chain(many.into_iter().flatten())
    }

    /// Children ordered by their first local hash: dumps must not depend on insertion order.
    pub fn sorted(&self) -> Vec<(u64, NodeId)> {
        let mut out: Vec<(u64, NodeId)> = match self {
            Self::None => Vec::new(),
            Self::Few(v) => v.clone(),
            Self::Many(m) => m.iter().map(|(k, n)| (*k, *n)).collect(),
        };
        out.sort_unstable_by_key(|(k, _)| *k);
        out
    }

    pub fn heap_bytes(&self) -> usize {
        match self {
            Self::None => 0,
            Self::Few(v) => crate::index::stats::vec_bytes::<(u64, NodeId)>(v.capacity()),
            Self::Many(m) => m.allocation_size(),
        }
    }
}
