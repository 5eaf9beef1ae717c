//! A Removed event with many names must leave exactly the state that removing its names one
//! event at a time leaves (the tree cuts leaf-first runs once; this checks that shortcut against
//! the plain path), counters included.

mod common;

use common::rng::Rng;
use common::{event, names, rank, store};
use kvroute_core::index::{EventData, Tree};

#[test]
fn multi_name_removals_equal_one_name_at_a_time() {
    for seed in 1..=200u64 {
        let mut rng = Rng::seeded(seed);
        let (mut batched, mut single) = (Tree::new(), Tree::new());
        // A few ranks storing branching paths over a small alphabet, so edges split and share.
        let mut paths: Vec<(u32, Vec<u64>)> = Vec::new();
        for _ in 0..12 {
            let r = rng.below(3) as u32;
            let len = 1 + rng.below(12);
            let path: Vec<u64> = (0..len).map(|_| 1 + rng.below(3) as u64).collect();
            let e = store(rank(0, r), &[], &path);
            batched.apply_event(&e, 0.0);
            single.apply_event(&e, 0.0);
            paths.push((r, path));
        }
        for _ in 0..6 {
            let (r, path) = paths[rng.below(paths.len())].clone();
            let all = names(&[], &path, 0);
            // Leaf first from a random depth, as an LRU evicts, with random twists.
            let top = rng.below(all.len());
            let mut hashes: Vec<u64> = all[top..].iter().rev().copied().collect();
            match rng.below(5) {
                0 => hashes.reverse(),
                1 => hashes.insert(rng.below(hashes.len() + 1), 0xdead_beef),
                2 => hashes.insert(rng.below(hashes.len() + 1), all[rng.below(all.len())]),
                _ => {}
            }
            batched.apply_event(&event(rank(0, r), EventData::Removed { hashes: hashes.clone() }), 0.0);
            for h in hashes {
                single.apply_event(&event(rank(0, r), EventData::Removed { hashes: vec![h] }), 0.0);
            }
        }
        assert_eq!(batched.dump(), single.dump(), "seed {seed}");
        let (b, s) = (batched.stats(), single.stats());
        assert_eq!(b.blocks, s.blocks, "seed {seed}");
        assert_eq!(b.tree_blocks, s.tree_blocks, "seed {seed}");
        assert_eq!(b.tree_nodes, s.tree_nodes, "seed {seed}");
        assert_eq!(b.events.block_not_found, s.events.block_not_found, "seed {seed}");
        for (_, path) in &paths {
            assert_eq!(batched.find_matches(path, 0.0), single.find_matches(path, 0.0), "seed {seed}");
        }
    }
}
