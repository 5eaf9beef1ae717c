//! Removed and Cleared events. Removing a block removes everything the rank holds below it, so a
//! rank's coverage is always contiguous from the root and a re-stored gap never resurrects
//! descendants. Positions nobody holds any more are freed at once, keeping the tree minimal.

use super::ranks::Slot;
use super::{Loc, NodeId, Tree, ROOT};

impl Tree {
    /// Removes the rank's block named `ext` and everything the rank holds below it.
    /// Returns `false` when the rank has no block of that name.
    pub(super) fn remove_named(&mut self, slot: Slot, ext: u64) -> bool {
        let Some(&block) = self.ranks.state(slot).lookup.get(&ext) else {
            return false;
        };
        let loc = self.blocks.loc[block as usize];
        self.cut_at(slot, loc);
        true
    }

    /// Drops every block the rank holds. The rank itself stays known.
    pub(super) fn clear_slot(&mut self, slot: Slot) {
        let held: Vec<NodeId> =
            self.node(ROOT).children.ids().into_iter().filter(|&c| self.node(c).cutoff(slot) > 0).collect();
        for child in held {
            self.drop_subtree(slot, child);
        }
        debug_assert!(self.ranks.state(slot).lookup.is_empty());
        self.ranks.state_mut(slot).predicted.clear();
    }

    /// The rank keeps `edge[0..loc.pos]` of `loc.node` and loses the rest of it and all below.
    fn cut_at(&mut self, slot: Slot, loc: Loc) {
        let n = self.node(loc.node);
        let cutoff = n.cutoff(slot);
        if cutoff == n.len() {
            let below: Vec<NodeId> = n.children.ids().into_iter().filter(|&c| self.node(c).cutoff(slot) > 0).collect();
            for child in below {
                self.drop_subtree(slot, child);
            }
        }
        for pos in loc.pos..cutoff {
            let block = self.node(loc.node).blocks[pos as usize];
            self.drop_name(slot, block);
        }
        self.node_mut(loc.node).set_cutoff(slot, loc.pos);
        self.tidy(loc.node);
    }

    /// Removes the rank from `top` and every node below it, children before parents so that each
    /// node is tidied after everything under it.
    fn drop_subtree(&mut self, slot: Slot, top: NodeId) {
        let mut order = Vec::new();
        let mut stack = vec![top];
        while let Some(id) = stack.pop() {
            order.push(id);
            let n = self.node(id);
            if n.cutoff(slot) == n.len() {
                stack.extend(n.children.ids().into_iter().filter(|&c| self.node(c).cutoff(slot) > 0));
            }
        }
        for id in order.into_iter().rev() {
            let cutoff = self.node(id).cutoff(slot);
            for pos in 0..cutoff {
                let block = self.node(id).blocks[pos as usize];
                self.drop_name(slot, block);
            }
            self.node_mut(id).set_cutoff(slot, 0);
            self.tidy(id);
        }
    }

    /// Frees the positions of `id` that no rank holds: the whole node when nobody holds it, or the
    /// unheld tail of its edge. Nothing below an unheld position can be held (holders of a child
    /// are full holders of its parent), so no children are lost.
    fn tidy(&mut self, id: NodeId) {
        if id == ROOT {
            return;
        }
        let n = self.node(id);
        let keep = n.max_cutoff();
        if keep == n.len() {
            return;
        }
        debug_assert!(n.children.is_empty(), "an unheld edge tail must have no children");
        let (parent, first) = (n.parent, n.locals[0]);
        self.blocks.free.extend_from_slice(&self.nodes[id as usize].blocks[keep as usize..]);
        if keep > 0 {
            let n = self.node_mut(id);
            n.locals.truncate(keep as usize);
            n.blocks.truncate(keep as usize);
            return;
        }
        self.node_mut(parent).children.remove(first);
        let n = self.node_mut(id);
        *n = Default::default();
        self.free_nodes.push(id);
    }
}
