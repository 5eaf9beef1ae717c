//! A least-recently-used list of blocks in a slab (slots reused, no allocation per block once
//! warm): the GPU pool's unused cached blocks, and every block of the host pool. Twin of
//! `ts/replay/lru-blocks.ts`.

use super::kv_cache::Block;

pub(crate) const NIL: u32 = u32::MAX;

struct LruNode {
    block: Block,
    prev: u32,
    next: u32,
}

#[derive(Default)]
pub(crate) struct LruList {
    nodes: Vec<LruNode>,
    free_slots: Vec<u32>,
    head: Option<u32>,
    tail: Option<u32>,
    len: usize,
}

impl LruList {
    pub fn len(&self) -> usize {
        self.len
    }

    /// Appends `block` as the most recently used; returns its slot.
    pub fn push(&mut self, block: Block) -> u32 {
        let node = LruNode { block, prev: self.tail.unwrap_or(NIL), next: NIL };
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.nodes[s as usize] = node;
                s
            }
            None => {
                self.nodes.push(node);
                (self.nodes.len() - 1) as u32
            }
        };
        match self.tail {
            None => self.head = Some(slot),
            Some(t) => self.nodes[t as usize].next = slot,
        }
        self.tail = Some(slot);
        self.len += 1;
        slot
    }

    /// Removes the block at `slot`.
    pub fn unlink(&mut self, slot: u32) {
        let (prev, next) = {
            let n = &self.nodes[slot as usize];
            (n.prev, n.next)
        };
        if prev == NIL {
            self.head = (next != NIL).then_some(next);
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = (prev != NIL).then_some(prev);
        } else {
            self.nodes[next as usize].prev = prev;
        }
        self.free_slots.push(slot);
        self.len -= 1;
    }

    /// The least recently used block and its slot.
    pub fn front(&self) -> Option<(u32, Block)> {
        self.head.map(|slot| (slot, self.nodes[slot as usize].block))
    }
}
