//! Differential test: random event streams applied to the tree and to the reference model must
//! give the same answers to every query, the same sizes, and dumps that rebuild the same state.
//! A small local-hash alphabet makes prefixes share, branch and split edges often.

mod common;

use common::model::Model;
use common::{event, names, rank};
use kvroute_core::index::{EventData, Rank, RouterEvent, StoredBlock, Tree};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// Store locals under a parent picked by `parent` (see `pick_parent`); names come from the
    /// rank's salt, or from a tiny alphabet when `raw_names` (to provoke renames and conflicts).
    Store {
        rank: (u64, u32),
        parent: u8,
        locals: Vec<u64>,
        raw_names: Option<Vec<u64>>,
    },
    Remove {
        rank: (u64, u32),
        pick: u8,
        count: u8,
    },
    Clear {
        rank: (u64, u32),
    },
    RemoveWorker {
        worker: u64,
        dp_rank: Option<u32>,
    },
}

fn salt(r: Rank) -> u64 {
    // Ranks of worker 2 name blocks differently from everyone else.
    if r.worker_id == 2 {
        0x5eed_0000 + u64::from(r.dp_rank)
    } else {
        0
    }
}

fn op_strategy() -> impl Strategy<Value = Op> {
    let rank = (0u64..3, 0u32..2);
    prop_oneof![
        6 => (rank.clone(), any::<u8>(), prop::collection::vec(1u64..=4, 1..5), prop::option::weighted(0.15, prop::collection::vec(1u64..=6, 4)))
            .prop_map(|(rank, parent, locals, raw)| {
                let raw_names = raw.map(|r| r[..locals.len()].to_vec());
                Op::Store { rank, parent, locals, raw_names }
            }),
        3 => (rank.clone(), any::<u8>(), 1u8..3).prop_map(|(rank, pick, count)| Op::Remove { rank, pick, count }),
        1 => rank.clone().prop_map(|rank| Op::Clear { rank }),
        1 => (0u64..3, prop::option::of(0u32..2)).prop_map(|(worker, dp_rank)| Op::RemoveWorker { worker, dp_rank }),
    ]
}

/// Every path a rank of the tree could be asked about: held paths of all ranks plus their
/// one-block extensions, so parents are mostly valid but sometimes foreign or missing.
fn known_paths(t: &Tree) -> Vec<(Rank, Vec<u64>, Vec<u64>)> {
    let mut out = Vec::new();
    for d in t.dump() {
        let mut path = match d.parent {
            None => Vec::new(),
            Some(p) => out
                .iter()
                .find(|(r, _, n): &&(Rank, Vec<u64>, Vec<u64>)| *r == d.rank && n.last() == Some(&p))
                .map(|(_, l, _)| l.clone())
                .unwrap_or_default(),
        };
        let mut exts = if path.is_empty() {
            Vec::new()
        } else {
            out.iter().find(|(r, l, _)| *r == d.rank && *l == path).map(|(_, _, n)| n.clone()).unwrap_or_default()
        };
        for b in &d.blocks {
            path.push(b.local);
            exts.push(b.ext);
            out.push((d.rank, path.clone(), exts.clone()));
        }
    }
    out
}

fn to_event(op: &Op, tree: &Tree) -> Option<RouterEvent> {
    let paths = known_paths(tree);
    match op {
        Op::Store { rank: (w, d), parent, locals, raw_names } => {
            let r = rank(*w, *d);
            let (prefix, parent_ext) = if *parent < 64 || paths.is_empty() {
                (Vec::new(), None)
            } else if *parent < 80 {
                (vec![9], Some(0xdead))
            } else {
                let (_, path, exts) = &paths[*parent as usize % paths.len()];
                (path.clone(), Some(*exts.last().unwrap()))
            };
            let exts = raw_names.clone().unwrap_or_else(|| names(&prefix, locals, salt(r)));
            let blocks = locals.iter().zip(exts).map(|(&local, ext)| StoredBlock { ext, local }).collect();
            Some(event(r, EventData::Stored { parent: parent_ext, blocks }))
        }
        Op::Remove { rank: (w, d), pick, count } => {
            let r = rank(*w, *d);
            let mine: Vec<u64> =
                paths.iter().filter(|(pr, _, _)| *pr == r).map(|(_, _, n)| *n.last().unwrap()).collect();
            let mut hashes = Vec::new();
            for i in 0..*count {
                if mine.is_empty() || pick.wrapping_add(i) % 7 == 0 {
                    hashes.push(0xbad0 + u64::from(i));
                } else {
                    hashes.push(mine[(*pick as usize + i as usize) % mine.len()]);
                }
            }
            Some(event(r, EventData::Removed { hashes }))
        }
        Op::Clear { rank: (w, d) } => Some(event(rank(*w, *d), EventData::Cleared)),
        Op::RemoveWorker { .. } => None,
    }
}

fn queries(model: &Model) -> Vec<Vec<u64>> {
    let mut qs: Vec<Vec<u64>> = vec![vec![1, 2, 3, 4], vec![1, 1, 1], vec![2], vec![4, 3, 2, 1, 1]];
    for a in 1..=4u64 {
        for b in 1..=4u64 {
            qs.push(vec![a, b, 1, 2, 3]);
        }
    }
    let _ = model;
    qs
}

fn check(tree: &Tree, model: &Model) -> Result<(), TestCaseError> {
    for q in queries(model) {
        let got: Vec<(Rank, u32, u32)> =
            tree.find_matches(&q, 0.0).iter().map(|s| (s.rank, s.blocks, s.tree_size)).collect();
        prop_assert_eq!(got, model.find_matches(&q), "query {:?}", q);
    }
    prop_assert_eq!(tree.stats().blocks, model.total_blocks());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn tree_matches_the_reference_model(ops in prop::collection::vec(op_strategy(), 1..120)) {
        let mut tree = Tree::new();
        let mut model = Model::default();
        for op in &ops {
            match op {
                Op::RemoveWorker { worker, dp_rank } => {
                    tree.remove_worker(*worker, *dp_rank);
                    model.remove_worker(*worker, *dp_rank);
                }
                other => {
                    let e = to_event(other, &tree).unwrap();
                    tree.apply_event(&e, 0.0);
                    model.apply(&e);
                }
            }
            check(&tree, &model)?;
        }
        let dump = tree.dump();
        let mut restored = Tree::new();
        for d in &dump {
            restored.apply_event(&event(d.rank, EventData::Stored { parent: d.parent, blocks: d.blocks.clone() }), 0.0);
        }
        prop_assert_eq!(restored.dump(), dump);
        check(&restored, &model)?;
    }
}
