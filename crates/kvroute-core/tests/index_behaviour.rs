//! Behaviours of the index, ported from the checklist of Dynamo's kv-router tests and written
//! against this crate's public API. Where our removal rule differs (a gap never resurrects
//! descendants), the tests assert ours.

mod common;

use common::{cleared, event, rank, remove, store, store_salted};
use kvroute_core::index::{EventData, RouterEvent, StoredBlock, Tree};

fn apply(tree: &mut Tree, events: &[RouterEvent]) {
    for e in events {
        tree.apply_event(e, 0.0);
    }
}

/// (worker, dp rank, blocks) per matching rank.
fn scores(tree: &Tree, query: &[u64]) -> Vec<(u64, u32, u32)> {
    tree.find_matches(query, 0.0).iter().map(|s| (s.rank.worker_id, s.rank.dp_rank, s.blocks)).collect()
}

fn seq(range: std::ops::RangeInclusive<u64>) -> Vec<u64> {
    range.collect()
}

#[test]
fn store_then_query_prefixes() {
    let mut t = Tree::new();
    apply(&mut t, &[store(rank(0, 0), &[], &[1, 2, 3])]);
    assert_eq!(scores(&t, &[1, 2, 3]), [(0, 0, 3)]);
    assert_eq!(scores(&t, &[1, 2, 999]), [(0, 0, 2)]);
    assert!(scores(&t, &[999, 998]).is_empty());
    assert!(scores(&t, &[]).is_empty());
}

#[test]
fn removing_every_block_leaves_nothing() {
    let mut t = Tree::new();
    apply(&mut t, &[store(rank(0, 0), &[], &[1, 2, 3]), remove(rank(0, 0), &[1, 2, 3], &[1, 2, 3])]);
    assert!(scores(&t, &[1, 2, 3]).is_empty());
    let s = t.stats();
    assert_eq!((s.blocks, s.tree_nodes, s.tree_blocks), (0, 0, 0));
}

#[test]
fn branching_workers() {
    let mut t = Tree::new();
    apply(&mut t, &[store(rank(0, 0), &[], &[1, 2]), store(rank(1, 0), &[], &[1, 3])]);
    assert_eq!(scores(&t, &[1]), [(0, 0, 1), (1, 0, 1)]);
    assert_eq!(scores(&t, &[1, 2]), [(0, 0, 2), (1, 0, 1)]);
}

#[test]
fn remove_worker_drops_all_its_ranks_only() {
    let mut t = Tree::new();
    apply(
        &mut t,
        &[store(rank(0, 0), &[], &[1, 2, 3]), store(rank(0, 1), &[], &[1, 2, 3]), store(rank(1, 0), &[], &[1, 2, 3])],
    );
    t.remove_worker(0, None);
    assert_eq!(scores(&t, &[1, 2, 3]), [(1, 0, 3)]);
    t.remove_worker(42, None);
    assert_eq!(scores(&t, &[1, 2, 3]), [(1, 0, 3)]);
}

#[test]
fn remove_one_dp_rank() {
    let mut t = Tree::new();
    apply(
        &mut t,
        &[store(rank(7, 0), &[], &[1, 2, 3]), store(rank(7, 1), &[], &[1, 2, 3]), store(rank(7, 2), &[], &[1, 2, 3])],
    );
    assert_eq!(scores(&t, &[1, 2, 3]), [(7, 0, 3), (7, 1, 3), (7, 2, 3)]);
    t.remove_worker(7, Some(0));
    assert_eq!(scores(&t, &[1, 2, 3]), [(7, 1, 3), (7, 2, 3)]);
}

#[test]
fn cleared_drops_one_rank_and_rebuilds() {
    let mut t = Tree::new();
    apply(
        &mut t,
        &[store(rank(0, 0), &[], &[1, 2, 3]), store(rank(0, 1), &[], &[1, 2, 3]), store(rank(1, 0), &[], &[1, 2, 3])],
    );
    apply(&mut t, &[cleared(rank(0, 0))]);
    assert_eq!(scores(&t, &[1, 2, 3]), [(0, 1, 3), (1, 0, 3)]);
    apply(&mut t, &[store(rank(0, 0), &[], &[1, 2, 3])]);
    assert_eq!(scores(&t, &[1, 2, 3]), [(0, 0, 3), (0, 1, 3), (1, 0, 3)]);
    assert_eq!(t.stats().events.cleared, 1);
}

#[test]
fn continuation_extends_and_is_not_a_duplicate() {
    let mut t = Tree::new();
    apply(&mut t, &[store(rank(0, 0), &[], &[1, 2, 3]), store(rank(0, 0), &[1, 2, 3], &[4, 5])]);
    assert_eq!(scores(&t, &[1, 2, 3, 4, 5]), [(0, 0, 5)]);
    assert_eq!(scores(&t, &[1, 2, 3]), [(0, 0, 3)]);
    let s = t.stats();
    assert_eq!((s.events.duplicate_stores, s.events.parent_block_not_found, s.tree_nodes), (0, 0, 1));
}

#[test]
fn duplicate_store_is_counted_and_changes_nothing() {
    let mut t = Tree::new();
    apply(&mut t, &[store(rank(0, 0), &[], &[1, 2, 3])]);
    let before = t.dump();
    apply(&mut t, &[store(rank(0, 0), &[], &[1, 2, 3])]);
    assert_eq!(t.dump(), before);
    assert_eq!(scores(&t, &[1, 2, 3]), [(0, 0, 3)]);
    let s = t.stats().events;
    assert_eq!((s.duplicate_stores, s.stored, s.invalid_block, s.parent_block_not_found), (1, 2, 0, 0));
}

#[test]
fn tree_size_accounting() {
    let mut t = Tree::new();
    let r = rank(0, 0);
    let size = |t: &Tree| t.tree_size(r);
    apply(&mut t, &[store(r, &[], &[1, 2, 3])]);
    assert_eq!(size(&t), 3);
    apply(&mut t, &[store(r, &[], &[1, 2, 3])]);
    assert_eq!(size(&t), 3);
    apply(&mut t, &[store(r, &[1, 2, 3], &[4, 5])]);
    assert_eq!(size(&t), 5);
    apply(&mut t, &[remove(r, &[1, 2, 3, 4, 5], &[4, 5])]);
    assert_eq!((size(&t), scores(&t, &[1, 2, 3, 4, 5])), (3, vec![(0, 0, 3)]));
    apply(&mut t, &[remove(r, &[1, 2, 3, 4, 5], &[4, 5])]);
    assert_eq!(size(&t), 3);
    apply(&mut t, &[remove(r, &[1, 2, 3], &[1, 2, 3])]);
    assert_eq!((size(&t), t.dump().len()), (0, 0));
}

#[test]
fn mid_chain_removal_cuts_descendants_and_a_restore_does_not_resurrect_them() {
    let mut t = Tree::new();
    let r = rank(0, 0);
    apply(&mut t, &[store(r, &[], &[1, 2, 3, 4, 5]), remove(r, &[1, 2, 3, 4, 5], &[3])]);
    assert_eq!(scores(&t, &[1, 2, 3, 4, 5]), [(0, 0, 2)]);
    assert_eq!(t.tree_size(r), 2);
    apply(&mut t, &[store(r, &[1, 2], &[3])]);
    assert_eq!(scores(&t, &[1, 2, 3, 4, 5]), [(0, 0, 3)]);
    apply(&mut t, &[store(r, &[1, 2, 3], &[4, 5])]);
    assert_eq!(scores(&t, &[1, 2, 3, 4, 5]), [(0, 0, 5)]);
    assert_eq!(t.tree_size(r), 5);
}

#[test]
fn shared_prefix_branches_and_a_foreign_parent_is_rejected() {
    let mut t = Tree::new();
    let (w1, w2) = (rank(1, 0), rank(2, 0));
    apply(&mut t, &[store(w1, &[], &[1, 2, 3]), store(w2, &[], &[1, 2, 3]), store(w1, &[1, 2, 3], &[4, 5, 6])]);
    assert_eq!(scores(&t, &seq(1..=6)), [(1, 0, 6), (2, 0, 3)]);
    apply(&mut t, &[store(w2, &[1, 2, 3], &[7, 8])]);
    assert_eq!(scores(&t, &[1, 2, 3, 7, 8]), [(2, 0, 5), (1, 0, 3)]);
    assert_eq!(scores(&t, &seq(1..=6)), [(1, 0, 6), (2, 0, 3)]);
    apply(&mut t, &[store(w2, &seq(1..=6), &[9, 10])]);
    assert_eq!(t.stats().events.parent_block_not_found, 1);
    assert_eq!(scores(&t, &seq(1..=6)), [(1, 0, 6), (2, 0, 3)]);
}

#[test]
fn prefix_reuse_then_tail_append() {
    let mut t = Tree::new();
    let (w1, w2) = (rank(1, 0), rank(2, 0));
    apply(&mut t, &[store(w1, &[], &seq(1..=6)), store(w2, &[], &[1, 2, 3]), store(w2, &[1, 2, 3], &[4, 5, 6])]);
    apply(&mut t, &[store(w2, &seq(1..=6), &[7, 8, 9])]);
    assert_eq!(scores(&t, &seq(1..=9)), [(2, 0, 9), (1, 0, 6)]);
}

#[test]
fn removing_the_last_block_or_unknown_blocks() {
    let mut t = Tree::new();
    let r = rank(0, 0);
    apply(&mut t, &[store(r, &[], &[1, 2, 3]), remove(r, &[1, 2, 3], &[3])]);
    assert_eq!((scores(&t, &[1, 2, 3]), scores(&t, &[1, 2])), (vec![(0, 0, 2)], vec![(0, 0, 2)]));
    apply(&mut t, &[event(r, EventData::Removed { hashes: vec![999, 998] })]);
    assert_eq!(scores(&t, &[1, 2]), [(0, 0, 2)]);
    assert_eq!(t.stats().events.block_not_found, 2);
}

#[test]
fn disjoint_sequences_of_one_worker() {
    let mut t = Tree::new();
    let r = rank(0, 0);
    apply(&mut t, &[store(r, &[], &[1, 2, 3]), store(r, &[], &[100, 101, 102])]);
    assert_eq!(scores(&t, &[1, 2, 3]), [(0, 0, 3)]);
    assert_eq!(scores(&t, &[100, 101, 102]), [(0, 0, 3)]);
    assert_eq!(scores(&t, &[1, 100]), [(0, 0, 1)]);
}

#[test]
fn divergence_positions_and_long_sequences() {
    for len in [31u64, 32, 33, 63, 64, 65, 96, 1000] {
        let mut t = Tree::new();
        apply(&mut t, &[store(rank(0, 0), &[], &seq(1..=len))]);
        assert_eq!(scores(&t, &seq(1..=len)), [(0, 0, len as u32)]);
    }
    let mut t = Tree::new();
    apply(&mut t, &[store(rank(0, 0), &[], &seq(1..=100))]);
    for p in [31usize, 32, 33, 63, 64, 65, 95, 96, 97] {
        let mut q = seq(1..=100);
        q[p] = 9999;
        assert_eq!(scores(&t, &q), [(0, 0, p as u32)]);
    }
}

#[test]
fn chunks_via_continuations_stay_one_edge() {
    let mut t = Tree::new();
    let r = rank(0, 0);
    for chunk in 0..20u64 {
        let prefix = seq(1..=chunk * 10);
        let locals = seq(chunk * 10 + 1..=chunk * 10 + 10);
        apply(&mut t, &[store(r, &prefix, &locals)]);
    }
    assert_eq!(scores(&t, &seq(1..=200)), [(0, 0, 200)]);
    assert_eq!(scores(&t, &seq(1..=75)), [(0, 0, 75)]);
    assert_eq!(t.stats().tree_nodes, 1, "decode-style appends extend the leaf in place");
    assert_eq!(t.dump().len(), 1);
}

#[test]
fn lora_style_distinct_locals_do_not_collide() {
    let mut t = Tree::new();
    apply(&mut t, &[store(rank(0, 0), &[], &[11, 12, 13]), store(rank(1, 0), &[], &[21, 22, 23])]);
    assert_eq!(scores(&t, &[11, 12, 13]), [(0, 0, 3)]);
    assert_eq!(scores(&t, &[21, 22, 23]), [(1, 0, 3)]);
}

#[test]
fn self_referencing_store_is_rejected_whole() {
    let mut t = Tree::new();
    let r = rank(0, 0);
    apply(&mut t, &[store(r, &[], &[1, 2])]);
    let parent = common::names(&[], &[1, 2], 0)[1];
    let e = event(
        r,
        EventData::Stored {
            parent: Some(parent),
            blocks: vec![StoredBlock { ext: 77, local: 3 }, StoredBlock { ext: parent, local: 4 }],
        },
    );
    apply(&mut t, &[e]);
    assert_eq!(t.stats().events.invalid_block, 1);
    assert_eq!(scores(&t, &[1, 2, 3]), [(0, 0, 2)]);

    // The parent's name on positions that exist already: one another rank made (the rank does
    // not hold it yet), and one the rank holds under another name (a rename).
    let other = rank(1, 0);
    apply(&mut t, &[store(other, &[], &[1, 2, 3, 4])]);
    let first = common::names(&[], &[1], 0)[0];
    let onto = |blocks: Vec<StoredBlock>| event(r, EventData::Stored { parent: Some(first), blocks });
    let names = common::names(&[1], &[2, 3], 0);
    apply(
        &mut t,
        &[
            onto(vec![StoredBlock { ext: names[0], local: 2 }, StoredBlock { ext: first, local: 3 }]),
            onto(vec![StoredBlock { ext: first, local: 2 }]),
        ],
    );
    assert_eq!(t.stats().events.invalid_block, 3);
    assert_eq!(scores(&t, &[1, 2, 3, 4]), [(1, 0, 4), (0, 0, 2)]);
    assert_eq!(t.stats().blocks, 6);
}

#[test]
fn a_name_reused_for_another_position_is_rejected_whole() {
    let mut t = Tree::new();
    let r = rank(0, 0);
    let e = |locals: [u64; 2], exts: [u64; 2]| {
        event(
            r,
            EventData::Stored {
                parent: None,
                blocks: (0..2).map(|i| StoredBlock { ext: exts[i], local: locals[i] }).collect(),
            },
        )
    };
    apply(&mut t, &[e([1, 2], [10, 20]), e([5, 6], [30, 20]), e([7, 8], [40, 40])]);
    assert_eq!(t.stats().events.invalid_block, 2);
    assert!(scores(&t, &[5]).is_empty());
    assert_eq!(scores(&t, &[1, 2]), [(0, 0, 2)]);
}

#[test]
fn ranks_may_name_the_same_path_differently() {
    let mut t = Tree::new();
    let (a, b) = (rank(1, 0), rank(2, 0));
    apply(&mut t, &[store_salted(a, &[], &[1, 2, 3], 0), store_salted(b, &[], &[1, 2, 3], 0xabc)]);
    apply(&mut t, &[store_salted(b, &[1, 2, 3], &[4], 0xabc)]);
    assert_eq!(scores(&t, &[1, 2, 3, 4]), [(2, 0, 4), (1, 0, 3)]);
    let bname = common::names(&[], &[1, 2], 0xabc)[1];
    apply(&mut t, &[event(b, EventData::Removed { hashes: vec![bname] })]);
    assert_eq!(scores(&t, &[1, 2, 3, 4]), [(1, 0, 3), (2, 0, 1)]);
    let dumped = t.dump();
    let restored = {
        let mut r = Tree::new();
        for d in &dumped {
            r.apply_event(&event(d.rank, EventData::Stored { parent: d.parent, blocks: d.blocks.clone() }), 0.0);
        }
        r
    };
    assert_eq!(restored.dump(), dumped);
    assert_eq!(scores(&restored, &[1, 2, 3, 4]), scores(&t, &[1, 2, 3, 4]));
}

#[test]
fn other_tiers_are_counted_and_ignored() {
    let mut t = Tree::new();
    let mut e = store(rank(0, 0), &[], &[1, 2]);
    e.lower_tier = Some(kvroute_core::tiers::LowerTier::HostPinned);
    apply(&mut t, &[e]);
    assert!(scores(&t, &[1]).is_empty());
    assert_eq!(t.stats().events.ignored_tier, 1);
}

#[test]
fn linear_sequence_dumps_as_one_event() {
    let mut t = Tree::new();
    apply(&mut t, &[store(rank(0, 0), &[], &[1, 2, 3, 4])]);
    let d = t.dump();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].blocks.iter().map(|b| b.local).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert_eq!(d[0].parent, None);
}

#[test]
fn compact_dump_has_parents_first_and_round_trips() {
    let mut t = Tree::new();
    let (w1, w2) = (rank(1, 0), rank(2, 0));
    apply(&mut t, &[store(w1, &[], &seq(1..=6)), store(w2, &[], &[1, 2, 3]), store(w2, &[1, 2, 3], &[7, 8])]);
    let d = t.dump();
    assert_eq!(d.iter().map(|e| e.blocks.len()).sum::<usize>(), 11);
    assert_eq!(d.len(), 2, "each rank's held set is one chain here");
    let mut r = Tree::new();
    for e in &d {
        r.apply_event(&event(e.rank, EventData::Stored { parent: e.parent, blocks: e.blocks.clone() }), 0.0);
    }
    assert_eq!(r.dump(), d);
    assert_eq!(r.stats().events.parent_block_not_found, 0);
}

#[test]
fn extension_downgrades_other_holders_then_split() {
    let mut t = Tree::new();
    let (w1, w2) = (rank(1, 0), rank(2, 0));
    apply(&mut t, &[store(w1, &[], &[1, 2, 3]), store(w2, &[], &[1, 2, 3]), store(w1, &[1, 2, 3], &[4, 5, 6])]);
    assert_eq!(t.stats().tree_nodes, 1);
    assert_eq!(scores(&t, &seq(1..=6)), [(1, 0, 6), (2, 0, 3)]);
    apply(&mut t, &[store(w2, &[1, 2, 3], &[7, 8])]);
    assert_eq!(t.stats().tree_nodes, 3);
    assert_eq!(scores(&t, &[1, 2, 3, 7, 8]), [(2, 0, 5), (1, 0, 3)]);
}

#[test]
fn internal_suffix_reuse_stays_one_edge() {
    let mut t = Tree::new();
    let (w1, w2) = (rank(1, 0), rank(2, 0));
    apply(
        &mut t,
        &[store(w1, &[], &seq(1..=35)), store(w2, &[], &seq(1..=10)), store(w2, &seq(1..=10), &seq(11..=40))],
    );
    assert_eq!(scores(&t, &seq(1..=40)), [(2, 0, 40), (1, 0, 35)]);
}

#[test]
fn removal_frees_unheld_positions_immediately() {
    let mut t = Tree::new();
    let r = rank(0, 0);
    apply(&mut t, &[store(r, &[], &[1, 2, 3]), store(r, &[1, 2, 3], &[4, 5]), store(r, &[1, 2], &[9])]);
    apply(&mut t, &[remove(r, &[1, 2, 3, 4, 5], &[2])]);
    let s = t.stats();
    assert_eq!((s.blocks, s.tree_blocks, s.tree_nodes), (1, 1, 1));
    assert_eq!(t.dump().len(), 1);
}

#[test]
fn predictions_count_until_their_ttl_and_real_events_never_expire() {
    let mut t = Tree::new();
    let r = rank(0, 0);
    let locals = [1u64, 2, 3];
    let names = common::names(&[], &locals, 0);
    t.record_prediction(r, &locals, &names, 0.0, 100.0);
    assert_eq!(t.find_matches(&locals, 50.0)[0].blocks, 3);
    assert!(t.find_matches(&locals, 100.0).is_empty(), "expired predictions stop counting before any sweep");
    t.record_prediction(r, &locals[..2], &names[..2], 60.0, 160.0);
    assert_eq!(t.find_matches(&locals, 120.0)[0].blocks, 2, "the refreshed prefix outlives the old tail");
    apply(&mut t, &[store(rank(1, 0), &[], &locals)]);
    t.expire(1000.0);
    assert_eq!(scores(&t, &locals), [(1, 0, 3)]);
    assert_eq!(t.stats().events.expired_blocks, 3);
    t.record_prediction(r, &locals, &names, 1000.0, 1100.0);
    apply(&mut t, &[store(r, &[], &locals)]);
    assert_eq!(t.find_matches(&locals, 99_999.0).len(), 2, "a real store confirms predicted blocks");
}

/// Many ranks over several writer shards: a long result is ordered by blocks (descending), then
/// worker id, then dp rank, whether it has few distinct block counts (ordered by grouping) or
/// many (sorted), and the single tree orders it the same way.
#[test]
fn many_ranks_order_by_blocks_then_rank() {
    use kvroute_core::index::KvIndex;
    let chain: Vec<u64> = (1..=60).collect();
    for distinct_lengths in [3u64, 50] {
        let index = KvIndex::new(3).expect("index");
        let mut tree = Tree::new();
        let mut expected = Vec::new();
        for i in 0..150u64 {
            // Distinct workers, out of order of first sight; dp ranks 0 and 1.
            let (worker, dp) = ((i * 37) % 151, (i % 3 == 0) as u32);
            let len = 1 + (i * 7919) % distinct_lengths;
            let e = store(rank(worker, dp), &[], &chain[..len as usize]);
            index.apply_events(vec![e.clone()], 0.0).expect("open");
            tree.apply_event(&e, 0.0);
            expected.push((worker, dp, len as u32));
        }
        index.flush().expect("flush");
        expected.sort_by(|a, b| b.2.cmp(&a.2).then((a.0, a.1).cmp(&(b.0, b.1))));
        let got: Vec<_> = index
            .find_matches(&chain, 0.0)
            .expect("open")
            .iter()
            .map(|s| (s.rank.worker_id, s.rank.dp_rank, s.blocks))
            .collect();
        assert_eq!(got, expected, "index, {distinct_lengths} lengths");
        assert_eq!(scores(&tree, &chain), expected, "tree, {distinct_lengths} lengths");
    }
}

/// A name used twice inside one Stored event is rejected whole, wherever the two uses sit:
/// both on positions other ranks created, one there and one on a new position, or both new;
/// in short events and in long ones (which are checked differently).
#[test]
fn a_name_repeated_inside_a_store_is_rejected_whole() {
    for len in [4u64, 40] {
        let locals: Vec<u64> = (1..=len).collect();
        let other_names: Vec<u64> = locals.iter().map(|l| 1000 + l).collect();
        let stored = |r, names: &[u64], locals: &[u64]| {
            event(
                r,
                EventData::Stored {
                    parent: None,
                    blocks: locals.iter().zip(names).map(|(&local, &ext)| StoredBlock { ext, local }).collect(),
                },
            )
        };
        let half = (len / 2) as usize;
        // (first use, second use) as indexes into a store of `locals` plus `len` new blocks.
        let cases = [(0, half - 1), (1, len as usize + 2), (len as usize, len as usize + 3)];
        for (a, b) in cases {
            let mut t = Tree::new();
            // Another rank creates the first `len` positions, with the same names as ours.
            apply(&mut t, &[stored(rank(1, 0), &other_names, &locals)]);
            let before = t.stats();
            let all_locals: Vec<u64> = (1..=2 * len).collect();
            let mut names: Vec<u64> = all_locals.iter().map(|l| 1000 + l).collect();
            names[b] = names[a];
            apply(&mut t, &[stored(rank(0, 0), &names, &all_locals)]);
            let after = t.stats();
            assert_eq!(after.events.invalid_block, 1, "len {len}, uses {a} and {b}");
            assert_eq!((after.blocks, after.tree_blocks), (before.blocks, before.tree_blocks), "nothing changed");
            assert_eq!(scores(&t, &all_locals), [(1, 0, len as u32)]);
        }
    }
}

/// A node with many children keeps only the low 32 bits of their keys and confirms a match
/// against the child's own edge: first hashes that differ only in their high bits must still
/// be told apart, through stores, queries, removals, dumps and a restore.
#[test]
fn many_children_whose_first_hashes_share_their_low_bits_are_told_apart() {
    let mut t = Tree::new();
    let (a, b) = (rank(1, 0), rank(2, 0));
    let high = |k: u64| k | (1 << 32);
    for k in 1..=20u64 {
        apply(&mut t, &[store(a, &[], &[k, 100 + k]), store(b, &[], &[high(k), 200 + k])]);
    }
    for k in 1..=20u64 {
        assert_eq!(scores(&t, &[k, 100 + k]), [(1, 0, 2)]);
        assert_eq!(scores(&t, &[high(k), 200 + k]), [(2, 0, 2)]);
        assert!(scores(&t, &[k | (2 << 32)]).is_empty(), "same low bits, a key nobody stored");
    }
    // Removing a's branches leaves b's, whose keys share their low bits, in place.
    for k in 1..=10u64 {
        apply(&mut t, &[remove(a, &[k, 100 + k], &[1])]);
    }
    for k in 1..=20u64 {
        let a_expected: &[(u64, u32, u32)] = if k <= 10 { &[] } else { &[(1, 0, 2)] };
        assert_eq!(scores(&t, &[k, 100 + k]), a_expected);
        assert_eq!(scores(&t, &[high(k), 200 + k]), [(2, 0, 2)]);
    }
    let dumped = t.dump();
    let mut restored = Tree::new();
    for d in &dumped {
        restored.apply_event(&event(d.rank, EventData::Stored { parent: d.parent, blocks: d.blocks.clone() }), 0.0);
    }
    assert_eq!(restored.dump(), dumped);
    assert_eq!(dumped.len(), 30, "one store per branch still held");
    for k in 1..=20u64 {
        assert_eq!(scores(&restored, &[high(k), 200 + k]), scores(&t, &[high(k), 200 + k]));
    }
}
