//! A tier's blocks written back as chains, for dumps: one Stored event per run of blocks that
//! continue each other, not one per block.
//!
//! A run starts with a **head** in position form: a root block named as the head whose local
//! hash is the head's position (a root block's position is its local hash), so replaying it
//! places the head exactly where it was, with no parent to find, whatever else the index holds
//! by then. Each block after it is written as engines write one, (name, local hash), and lands
//! at its true position because that position was computed from its parent's the same way. A
//! run continues through each position's first child (by name); the other children head runs of
//! their own. So a restore of a dump dumps the same runs again: every head is a root there, and
//! every other block still follows the block it followed.
//!
//! Heads are the blocks whose parent the rank does not hold in this tier (its parent is on the
//! device, in another tier, gone, or there is none), and positions the rank holds under a second
//! name, which are written alone. A device chain takes a pair of hashes per block, and so do
//! runs, but for their heads.

use super::Placed;
use crate::index::StoredBlock;
use rustc_hash::FxHashMap;
use std::collections::hash_map::Entry;

/// One rank's blocks in one tier (`names`: name → placement) as runs of [`StoredBlock`]s, the
/// first of each in position form. Every block is in exactly one run. Runs come in no
/// particular order.
pub(super) fn runs(names: &FxHashMap<u64, Placed>) -> Vec<Vec<StoredBlock>> {
    let alone = |name: u64, p: &Placed| vec![StoredBlock { ext: name, local: p.position }];
    let mut by_name: Vec<(u64, Placed)> = names.iter().map(|(&n, &p)| (n, p)).collect();
    by_name.sort_unstable_by_key(|&(name, _)| name);
    let mut out = Vec::new();
    // Each position is written under its smallest name; its other names go alone.
    let mut first: FxHashMap<u64, (u64, Placed)> = FxHashMap::default();
    for (name, p) in by_name {
        match first.entry(p.position) {
            Entry::Vacant(slot) => {
                slot.insert((name, p));
            }
            Entry::Occupied(_) => out.push(alone(name, &p)),
        }
    }
    let mut heads = Vec::new();
    let mut children: FxHashMap<u64, Vec<(u64, Placed)>> = FxHashMap::default();
    for &(name, p) in first.values() {
        if !p.is_root() && first.contains_key(&p.parent) {
            children.entry(p.parent).or_default().push((name, p));
        } else {
            heads.push((name, p));
        }
    }
    for list in children.values_mut() {
        list.sort_unstable_by_key(|&(name, _)| name);
    }
    while let Some((name, head)) = heads.pop() {
        let mut run = alone(name, &head);
        let mut at = head.position;
        // Taking a position's children out of the map visits each position once.
        while let Some(list) = children.remove(&at) {
            let mut list = list.into_iter();
            let Some((next, p)) = list.next() else { break };
            heads.extend(list);
            run.push(StoredBlock { ext: next, local: p.local });
            at = p.position;
        }
        out.push(run);
    }
    // What no head reached would sit on a cycle of positions, which only a hash collision
    // makes: written alone, it is still dumped.
    for (name, p) in children.into_values().flatten() {
        out.push(alone(name, &p));
    }
    out
}
