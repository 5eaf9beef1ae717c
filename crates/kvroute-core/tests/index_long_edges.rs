//! Paths longer than the longest edge the tree makes (1,024 positions, so that a position's
//! location packs into 32 bits): one rank stores a long path in random pieces, others branch off
//! it and ranks remove blocks at random positions, seams included; the tree must answer every
//! query like the reference model, and its dump must rebuild it.

mod common;

use common::model::Model;
use common::{event, rank, remove, store};
use kvroute_core::index::{EventData, Rank, Tree};
use proptest::prelude::*;

const PATH_LEN: usize = 3200;
/// Offsets next to the seams of a path cut into 1,024-position edges.
const NEAR_SEAMS: [usize; 8] = [1, 1023, 1024, 1025, 2047, 2048, 2049, 3072];

/// A position anywhere on the path, or next to a seam (where off-by-one errors live).
fn position() -> impl Strategy<Value = usize> {
    prop_oneof![1..=PATH_LEN, proptest::sample::select(NEAR_SEAMS.to_vec())]
}

fn check(tree: &Tree, model: &Model, path: &[u64], branches: &[(usize, u64)]) -> Result<(), TestCaseError> {
    let mut queries: Vec<Vec<u64>> = NEAR_SEAMS.iter().map(|&n| path[..n].to_vec()).collect();
    queries.push(path.to_vec());
    queries.extend(branches.iter().map(|&(at, local)| [&path[..at], &[local]].concat()));
    for q in queries {
        let got: Vec<(Rank, u32, u32)> =
            tree.find_matches(&q, 0.0).iter().map(|s| (s.rank, s.blocks, s.tree_size)).collect();
        prop_assert_eq!(got, model.find_matches(&q), "query of {} blocks", q.len());
    }
    prop_assert_eq!(tree.stats().blocks, model.total_blocks());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn long_paths_match_the_reference_model(
        pieces in prop::collection::vec(1usize..900, 1..8),
        branches in prop::collection::vec((position(), 1u64..4), 0..5),
        removals in prop::collection::vec((0u64..4, position()), 0..6),
        regrow in any::<bool>(),
    ) {
        let path: Vec<u64> = (1..=PATH_LEN as u64).collect();
        let mut tree = Tree::new();
        let mut model = Model::default();
        let apply = |tree: &mut Tree, model: &mut Model, e| {
            tree.apply_event(&e, 0.0);
            model.apply(&e);
        };
        // Rank 0 stores the path piece by piece (each piece's parent is the last block before it).
        let mut stored = 0;
        for piece in pieces {
            let end = (stored + piece).min(PATH_LEN);
            apply(&mut tree, &mut model, store(rank(0, 0), &path[..stored], &path[stored..end]));
            stored = end;
        }
        // Rank w stores the path up to `at` from the root, then a block of its own.
        let branches: Vec<(usize, u64)> = branches.into_iter().map(|(at, w)| (at, 10_000 + w)).collect();
        for &(at, local) in &branches {
            apply(&mut tree, &mut model, store(rank(local - 10_000, 0), &[], &[&path[..at], &[local]].concat()));
        }
        check(&tree, &model, &path, &branches)?;
        for (w, at) in removals {
            apply(&mut tree, &mut model, remove(rank(w, 0), &path, &[at]));
            check(&tree, &model, &path, &branches)?;
        }
        if regrow {
            // Rank 0 gets the rest of the path back from wherever it now ends, in one store.
            let held = model.find_matches(&path).iter().find(|s| s.0 == rank(0, 0)).map_or(0, |s| s.1 as usize);
            apply(&mut tree, &mut model, store(rank(0, 0), &path[..held], &path[held..]));
            check(&tree, &model, &path, &branches)?;
        }
        let dump = tree.dump();
        let mut restored = Tree::new();
        for d in &dump {
            restored.apply_event(&event(d.rank, EventData::Stored { parent: d.parent, blocks: d.blocks.clone() }), 0.0);
        }
        prop_assert_eq!(restored.dump(), dump);
        check(&restored, &model, &path, &branches)?;
    }
}
