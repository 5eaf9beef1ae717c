//! Lower storage tiers: the store, removal and clear rules, the continuation walk, and the
//! index's handling of lower-tier events beside the tree (also tested through Node on both
//! backends in `test/lower-tiers.test.ts`).

mod common;

use common::{event, names, rank, store};
use kvroute_core::hashing::sequence_hashes;
use kvroute_core::index::{EventData, KvIndex, Rank, RouterEvent, StoredBlock};
use kvroute_core::tiers::{LowerTier, LowerTiers, TierReach};

/// The blocks of `locals` after `prefix`, named as engines name them.
fn pairs(prefix: &[u64], locals: &[u64]) -> Vec<StoredBlock> {
    names(prefix, locals, 0).into_iter().zip(locals.iter()).map(|(ext, &local)| StoredBlock { ext, local }).collect()
}

fn parent(prefix: &[u64]) -> Option<u64> {
    (!prefix.is_empty()).then(|| names(&[], prefix, 0)[prefix.len() - 1])
}

/// No device tier: a parent outside the lower tiers is unknown.
fn no_device(_: u64) -> Option<u64> {
    None
}

/// A Stored event of `tier`: `locals` after `prefix`, named as engines name them.
fn lower_store(r: Rank, tier: LowerTier, prefix: &[u64], locals: &[u64]) -> RouterEvent {
    RouterEvent { lower_tier: Some(tier), ..store(r, prefix, locals) }
}

fn reach(t: &LowerTiers, query: &[u64], device: u32) -> TierReach {
    t.extensions(&sequence_hashes(query), &[rank(1, 0)], &[device])[0]
}

#[test]
fn the_walk_continues_from_the_device_prefix_through_host_then_disk_then_external() {
    let mut t = LowerTiers::default();
    let r = rank(1, 0);
    t.store(r, LowerTier::HostPinned, None, &pairs(&[], &[1, 2, 3]), no_device);
    t.store(r, LowerTier::Disk, parent(&[1, 2, 3]), &pairs(&[1, 2, 3], &[4, 5]), no_device);
    t.store(r, LowerTier::External, parent(&[1, 2, 3, 4, 5]), &pairs(&[1, 2, 3, 4, 5], &[6]), no_device);
    let q = [1, 2, 3, 4, 5, 6, 7];
    assert_eq!(reach(&t, &q, 1), TierReach { host_pinned: 2, disk: 2, external: 1 });
    assert_eq!(reach(&t, &q, 0), TierReach { host_pinned: 3, disk: 2, external: 1 });
    // A device prefix past the host run: the host adds nothing, the disk continues from there.
    assert_eq!(reach(&t, &q, 3), TierReach { host_pinned: 0, disk: 2, external: 1 });
    // Another path, and another rank, get nothing.
    assert_eq!(reach(&t, &[1, 9], 1), TierReach::default());
    assert_eq!(t.extensions(&sequence_hashes(&q), &[rank(2, 0)], &[0]), vec![TierReach::default()]);
}

#[test]
fn stores_anchor_in_a_lower_tier_and_names_keep_their_positions() {
    let mut t = LowerTiers::default();
    let r = rank(1, 0);
    // The parent is nowhere: nothing applies.
    t.store(r, LowerTier::HostPinned, parent(&[1]), &pairs(&[1], &[2, 3]), no_device);
    t.store(r, LowerTier::HostPinned, None, &pairs(&[], &[1, 2]), no_device);
    t.store(r, LowerTier::HostPinned, None, &pairs(&[], &[1, 2]), no_device);
    // A name used again for another position stops the store there.
    let clash = [(50, 50), (names(&[], &[1], 0)[0], 51), (52, 52)].map(|(ext, local)| StoredBlock { ext, local });
    t.store(r, LowerTier::HostPinned, None, &clash, no_device);
    let [host, disk, _] = t.stats();
    assert_eq!((host.blocks, host.counters.stored, host.counters.unanchored, host.counters.conflicting), (3, 3, 2, 2));
    assert_eq!(disk.blocks, 0);
    t.remove(r, LowerTier::HostPinned, &[names(&[], &[1, 2], 0)[1], 77]);
    let [host, ..] = t.stats();
    assert_eq!((host.blocks, host.counters.removed, host.counters.not_found), (2, 1, 1));
    assert_eq!(reach(&t, &[1, 2], 0).host_pinned, 1);
    t.clear_rank(r);
    assert!(t.is_empty());
}

#[test]
fn the_index_applies_lower_tier_events_beside_the_tree_and_clears_both() {
    let index = KvIndex::new(2).unwrap();
    let r = rank(3, 0);
    let lower = |tier, prefix: &[u64], locals: &[u64]| lower_store(r, tier, prefix, locals);
    index
        .apply_events(
            vec![
                store(r, &[], &[1]),
                lower(LowerTier::HostPinned, &[], &[1, 2, 3]),
                lower(LowerTier::Disk, &[1, 2, 3], &[4]),
            ],
            0.0,
        )
        .unwrap();
    index.flush().unwrap();
    let o = index.overlaps(&[1, 2, 3, 4, 5], None, 0.0, &[r, rank(4, 0)]).unwrap();
    assert_eq!((o[0].device, o[0].tree_size, o[0].lower), (1, 1, TierReach { host_pinned: 2, disk: 1, external: 0 }));
    assert_eq!(o[1].lower, TierReach::default());
    let (stats, _) = index.stats().unwrap();
    assert_eq!((stats.blocks, stats.lower_tiers[0].blocks, stats.lower_tiers[1].blocks), (1, 3, 1));

    // A store whose parent the rank holds only on the device is placed below that block, found
    // in the writer's book after the worker's earlier events (here in the same batch).
    index
        .apply_events(
            vec![
                store(r, &[], &[7, 8]),
                lower(LowerTier::HostPinned, &[7, 8], &[9]),
                lower(LowerTier::Disk, &[70], &[9]),
            ],
            0.0,
        )
        .unwrap();
    index.flush().unwrap();
    let o = index.overlaps(&[7, 8, 9], None, 0.0, &[r]).unwrap();
    assert_eq!((o[0].device, o[0].lower.host_pinned), (2, 1));
    let (stats, _) = index.stats().unwrap();
    assert_eq!((stats.lower_tiers[0].counters.stored, stats.lower_tiers[1].counters.unanchored), (4, 1));

    // A lower tier's clear leaves the tree; a device clear wipes both.
    let clear = |tier| RouterEvent { rank: r, event_id: 0, lower_tier: tier, data: EventData::Cleared };
    index.apply_events(vec![clear(Some(LowerTier::Disk))], 0.0).unwrap();
    index.flush().unwrap();
    let (stats, _) = index.stats().unwrap();
    assert_eq!((stats.blocks, stats.lower_tiers[0].blocks), (3, 0));
    index.apply_events(vec![lower(LowerTier::HostPinned, &[], &[1]), clear(None)], 0.0).unwrap();
    index.flush().unwrap();
    let (stats, _) = index.stats().unwrap();
    assert_eq!((stats.blocks, stats.lower_tiers[0].blocks), (0, 0));
    index.apply_events(vec![lower(LowerTier::External, &[], &[1])], 0.0).unwrap();
    index.remove_worker(3, None).unwrap();
    index.flush().unwrap();
    assert_eq!(index.stats().unwrap().0.lower_tiers[2].blocks, 0);
}

#[test]
fn a_dump_lists_the_lower_tiers_as_runs_headed_at_their_positions_and_restores_them() {
    let index = KvIndex::new(2).unwrap();
    let r = rank(3, 1);
    let lower = |tier, prefix: &[u64], locals: &[u64]| lower_store(r, tier, prefix, locals);
    // A second name for the root block 5's position, smaller than its own (a root's name is its local
    // hash here).
    let alias = StoredBlock { ext: 4, local: 5 };
    index
        .apply_events(
            vec![
                store(r, &[], &[1, 2]),
                lower(LowerTier::HostPinned, &[1, 2], &[3, 4]),
                lower(LowerTier::HostPinned, &[], &[5, 6, 8]),
                lower(LowerTier::HostPinned, &[5, 6], &[9]),
                lower(LowerTier::Disk, &[5, 6, 8], &[10, 11]),
                RouterEvent {
                    lower_tier: Some(LowerTier::HostPinned),
                    ..event(r, EventData::Stored { parent: None, blocks: vec![alias] })
                },
            ],
            0.0,
        )
        .unwrap();
    index.flush().unwrap();
    let dump = index.dump().unwrap();
    assert!(dump.iter().all(|d| d.rank == r && d.parent.is_none()));
    let name = |path: &[u64]| names(&[], path, 0)[path.len() - 1];
    let at = |path: &[u64]| StoredBlock { ext: name(path), local: sequence_hashes(path)[path.len() - 1] };
    let then = |path: &[u64]| StoredBlock { ext: name(path), local: path[path.len() - 1] };
    // Block 5's position continues under the alias (the smaller name), and its own name goes
    // alone; 5-6's first child by name continues the run, the other heads its own.
    let (first, second) = if name(&[5, 6, 8]) < name(&[5, 6, 9]) { (8, 9) } else { (9, 8) };
    let mut host = vec![
        vec![at(&[1, 2, 3]), then(&[1, 2, 3, 4])], // its parent is on the device
        vec![alias, then(&[5, 6]), then(&[5, 6, first])],
        vec![at(&[5])],
        vec![at(&[5, 6, second])],
    ];
    host.sort_by_key(|run| run[0].ext);
    let disk = vec![vec![at(&[5, 6, 8, 10]), then(&[5, 6, 8, 10, 11])]]; // its parent is in the host tier
    let expected: Vec<_> = [(None, vec![vec![then(&[1]), then(&[1, 2])]])]
        .into_iter()
        .chain([(Some(LowerTier::HostPinned), host), (Some(LowerTier::Disk), disk)])
        .flat_map(|(tier, runs)| runs.into_iter().map(move |run| (tier, run)))
        .collect();
    assert_eq!(dump.iter().map(|d| (d.lower_tier, d.blocks.clone())).collect::<Vec<_>>(), expected);

    // Replayed with the lower tiers first, into an index whose device holds nothing yet: the
    // same tiers, the same dump.
    let restored = KvIndex::new(2).unwrap();
    let events = dump.iter().rev().map(|d| RouterEvent {
        rank: d.rank,
        event_id: 0,
        lower_tier: d.lower_tier,
        data: EventData::Stored { parent: d.parent, blocks: d.blocks.clone() },
    });
    restored.apply_events(events.collect(), 0.0).unwrap();
    restored.flush().unwrap();
    assert_eq!(restored.dump().unwrap(), dump);
    for (query, device, host, disk) in
        [(&[1, 2, 3, 4][..], 2, 2, 0), (&[5, 6, 8, 10, 11], 0, 3, 2), (&[5, 6, 9], 0, 3, 0)]
    {
        for i in [&index, &restored] {
            let o = i.overlaps(query, None, 0.0, &[r]).unwrap();
            assert_eq!((o[0].device, o[0].lower.host_pinned, o[0].lower.disk), (device, host, disk), "{query:?}");
        }
    }
}
