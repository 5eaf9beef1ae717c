//! Golden vectors of the engine-event reference (§7): every layout of G1 decodes to the same
//! store with Dynamo's tokens_hash; salts, bytes hashes and the cursor's rules.

use kvroute_core::index::{KvIndex, Rank};
use kvroute_core::ingest::cursor::{Cursor, CursorConfig, RankState, Step};
use kvroute_core::ingest::{decode_batch, EngineEvent, EngineIngest};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

const G1: [&str; 5] = [
    "93cb3ff000000000000091de000aa474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391cfffffffffffffffffb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739401020304aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da3475055a96c6f72615f6e616d65c0a967726f75705f69647800b26b765f63616368655f737065635f6b696e64ae66756c6c5f617474656e74696f6e00",
    "93cb3ff0000000000000919cab426c6f636b53746f72656491cfffffffffffffffffc0940102030404c0a3475055c0c000ae66756c6c5f617474656e74696f6ec000",
    "93cb3ff00000000000009197ab426c6f636b53746f72656491cfffffffffffffffffc0940102030404c0a347505500",
    "93cb3ff00000000000009187a474797065ab426c6f636b53746f726564ac626c6f636b5f68617368657391ffb1706172656e745f626c6f636b5f68617368c0a9746f6b656e5f6964739401020304aa626c6f636b5f73697a6504a76c6f72615f6964c0a66d656469756da347505500",
    "93cb3ff00000000000009197ab426c6f636b53746f72656491ffc0940102030404c0a347505500",
];

fn stored_blocks(payload: &[u8], block_size: u32) -> Vec<(u64, u64)> {
    let index = Arc::new(KvIndex::new(1).unwrap());
    let ingest = EngineIngest::new(Arc::clone(&index), block_size).unwrap();
    let outcome = ingest.apply_payload(Rank::new(1, 0), payload, 0, 0.0).unwrap();
    assert_eq!(outcome.error, None);
    index.flush().unwrap();
    index.dump().unwrap().iter().flat_map(|d| d.blocks.iter().map(|b| (b.ext, b.local))).collect()
}

#[test]
fn g1_every_layout_gives_dynamo_golden_store() {
    for payload in G1 {
        assert_eq!(stored_blocks(&hex(payload), 4), vec![(u64::MAX, 14643705804678351452)], "{payload}");
    }
}

#[test]
fn g1_salted_sglang_array_uses_the_salt() {
    let salted = "93cb3ff00000000000009198ab426c6f636b53746f72656491ffc0940102030404c0a347505581aa63616368655f73616c74a874656e616e742d6100";
    assert_eq!(stored_blocks(&hex(salted), 4), vec![(u64::MAX, 5738685477468498325)]);
}

#[test]
fn bytes_hashes_fold_to_the_int_mode_value() {
    // [1.0, [["BlockStored", [bin32 00..1f], nil, [1,2,3,4], 4, nil, "GPU"]], 0]
    let mut p = hex("93cb3ff00000000000009197ab426c6f636b53746f72656491c420");
    p.extend(0u8..32);
    p.extend(hex("c0940102030404c0a347505500"));
    let batch = decode_batch(&p).unwrap();
    let EngineEvent::Stored(s) = &batch.events[0] else { panic!("not a store") };
    assert_eq!(s.block_hashes, vec![1736447835066146335]);
    assert_eq!(batch.notes.folded_hashes, 1);
}

#[test]
fn unknown_tags_skip_one_event_and_bad_values_fail_the_batch() {
    // [1.0, [["Bogus", 1], ["AllBlocksCleared"]], 0]
    let batch = decode_batch(&hex("93cb3ff0000000000000929285a5426f67757301" /* tag */)).err();
    assert!(batch.is_some(), "a truncated payload is an error");
    let ok = decode_batch(&hex("93cb3ff000000000000092 92a5426f67757301 91b0416c6c426c6f636b73436c6561726564 00"
        .replace(' ', "")
        .as_str()))
    .unwrap();
    assert_eq!(ok.events.len(), 1);
    assert_eq!(ok.notes.unknown_events, 1);
    // A float hash: [1.0, [["BlockRemoved", [1.5]]], 0]
    let err = decode_batch(&hex("93cb3ff0000000000000919283ac426c6f636b52656d6f76656491cb3ff800000000000000"
        .replace("83ac", "92ac")
        .as_str()));
    assert!(err.is_err());
}

#[test]
fn integral_floats_read_as_the_integers_they_hold_and_other_floats_fail() {
    // G1's vLLM 0.11 array with its first token id, or its hash, written as a float.
    let with = |from: &str, to: &str| hex(&G1[2].replacen(from, to, 1));
    let stored = |p: &[u8]| stored_blocks(p, 4);
    let golden = vec![(u64::MAX, 14643705804678351452)];
    assert_eq!(stored(&with("9401", "94cb3ff0000000000000")), golden, "token 1.0 (f64)");
    assert_eq!(stored(&with("9401", "94ca3f800000")), golden, "token 1.0 (f32)");
    assert_eq!(stored(&with("cfffffffffffffffff", "cbbff0000000000000")), golden, "hash -1.0, as the integer -1");
    let hash = |to: &str| match &decode_batch(&with("cfffffffffffffffff", to)).map(|b| b.events) {
        Ok(events) => match &events[0] {
            EngineEvent::Stored(s) => Ok(s.block_hashes[0]),
            _ => panic!("not a store"),
        },
        Err(e) => Err(e.0.clone()),
    };
    assert_eq!(hash("cb43e0000000000000"), Ok(1 << 63), "2^63");
    for (to, what) in [("cb43f0000000000000", "2^64"), ("cb7e37e43c8800759c", "1e300"), ("cb3ff8000000000000", "1.5")] {
        assert!(hash(to).is_err_and(|e| e.contains("got a float")), "{what}: {:?}", hash(to));
    }
}

fn cursor(has_replay: bool) -> Cursor {
    Cursor::new(CursorConfig { has_replay, replay_timeout: Duration::from_millis(100), max_held: 4 })
}

fn applied(steps: &[Step]) -> Vec<u64> {
    steps.iter().filter_map(|s| if let Step::Apply { seq, .. } = s { Some(*seq) } else { None }).collect()
}

#[test]
fn g12_cursor_contiguous_gap_restart() {
    let now = Instant::now();
    let mut c = cursor(true);
    let mut out = Vec::new();
    c.on_live(0, vec![], now, &mut out);
    c.on_live(1, vec![], now, &mut out);
    assert_eq!(applied(&out), vec![0, 1]);
    assert_eq!(c.state(), RankState::Active);
    out.clear();
    c.on_live(5, vec![5], now, &mut out);
    // From the last applied seq, to check the engine did not restart meanwhile.
    assert_eq!(out, vec![Step::RequestReplay { start: 1 }]);
    assert_eq!(c.state(), RankState::Recovering);
    out.clear();
    c.on_live(6, vec![6], now, &mut out);
    c.on_replay(Some((1, vec![])), now, &mut out);
    for s in 2..=6 {
        c.on_replay(Some((s, vec![s as u8])), now, &mut out);
    }
    c.on_replay(None, now, &mut out);
    assert_eq!(applied(&out), vec![2, 3, 4, 5, 6], "replayed once each, held frames not applied twice");
    assert_eq!(c.state(), RankState::Active);
    out.clear();
    c.on_live(0, vec![], now, &mut out);
    assert_eq!(out[0], Step::Reset);
    assert_eq!(applied(&out), vec![0]);
    assert_eq!(c.counters.restarts, 1);
}

#[test]
fn a_restart_during_a_gap_is_found_by_the_replayed_batch_at_the_applied_seq() {
    let now = Instant::now();
    let mut c = cursor(true);
    let mut out = Vec::new();
    for s in 0..=3 {
        c.on_live(s, vec![s as u8], now, &mut out);
    }
    out.clear();
    // The engine restarted unseen and its new seqs passed 3: seq 3 there is another batch.
    c.on_live(7, vec![107], now, &mut out);
    assert_eq!(out, vec![Step::RequestReplay { start: 3 }]);
    out.clear();
    c.on_replay(Some((3, vec![103])), now, &mut out);
    assert_eq!(out, vec![Step::Reset, Step::RequestReplay { start: 0 }]);
    assert_eq!((c.counters.restarts, c.incarnation, c.last_seq()), (1, 1, None));
    out.clear();
    for s in 0..=6 {
        c.on_replay(Some((s, vec![100 + s as u8])), now, &mut out);
    }
    c.on_replay(None, now, &mut out);
    assert_eq!(applied(&out), vec![0, 1, 2, 3, 4, 5, 6, 7], "the new incarnation whole, the held frame last");
    assert_eq!(c.state(), RankState::Active);

    // The same batch at the applied seq: no restart, the gap is repaired as usual.
    let mut c = cursor(true);
    out.clear();
    c.on_live(0, vec![0], now, &mut out);
    c.on_live(3, vec![3], now, &mut out);
    c.on_replay(Some((0, vec![0])), now, &mut out);
    c.on_replay(Some((1, vec![1])), now, &mut out);
    c.on_replay(Some((2, vec![2])), now, &mut out);
    c.on_replay(None, now, &mut out);
    assert_eq!(applied(&out), vec![0, 1, 2, 3]);
    assert_eq!((c.counters.restarts, c.state()), (0, RankState::Active));

    // A ring that no longer holds the applied seq: whether the engine restarted cannot be told
    // (a restarted one's ring may start right after it), so the rank resyncs.
    let mut c = cursor(true);
    out.clear();
    c.on_live(0, vec![0], now, &mut out);
    c.on_live(3, vec![3], now, &mut out);
    out.clear();
    c.on_replay(Some((1, vec![1])), now, &mut out);
    assert_eq!(out, vec![Step::CancelReplay, Step::Reset, Step::Apply { seq: 3, payload: vec![3] }]);
    assert_eq!(c.state(), RankState::Resyncing);
}

#[test]
fn failed_replays_clear_the_rank_and_resync() {
    let now = Instant::now();
    let mut c = cursor(true);
    let mut out = Vec::new();
    c.on_live(0, vec![], now, &mut out);
    c.on_live(4, vec![], now, &mut out);
    out.clear();
    c.on_replay(Some((3, vec![])), now, &mut out);
    assert_eq!(out, vec![Step::CancelReplay, Step::Reset, Step::Apply { seq: 4, payload: vec![] }]);
    assert_eq!(c.state(), RankState::Resyncing);
    // Timeout.
    c.on_live(9, vec![], now, &mut out);
    out.clear();
    c.on_tick(now + Duration::from_secs(1), &mut out);
    assert_eq!(applied(&out), vec![9]);
    assert!(out.contains(&Step::Reset));
    assert_eq!(c.counters.replay_timeouts, 1);
}

#[test]
fn a_resumed_cursor_continues_after_the_snapshot_seq() {
    let now = Instant::now();
    let config = CursorConfig { has_replay: true, replay_timeout: Duration::from_millis(100), max_held: 4 };
    // Next in line: applied at once, no replay.
    let mut c = Cursor::resuming_after(config, 9, None);
    let mut out = Vec::new();
    c.on_live(10, vec![], now, &mut out);
    assert_eq!(applied(&out), vec![10]);
    assert_eq!(c.state(), RankState::Active);
    // A gap since the snapshot: replayed from the seq after it, not from 0.
    let mut c = Cursor::resuming_after(config, 9, None);
    out.clear();
    c.on_live(12, vec![], now, &mut out);
    assert_eq!(out, vec![Step::RequestReplay { start: 10 }]);
    // A lower seq: the engine restarted since the snapshot, so the rank is cleared.
    let mut c = Cursor::resuming_after(config, 9, None);
    out.clear();
    c.on_live(0, vec![], now, &mut out);
    assert_eq!(out[0], Step::Reset);
    assert_eq!(c.counters.restarts, 1);
    // With the digest of the snapshot's batch, a gap's replay checks it: another batch at seq 9
    // is an engine restarted since the snapshot, its new seqs past 9.
    let mut c = Cursor::resuming_after(config, 9, Some(kvroute_core::ingest::cursor::digest(&[9])));
    out.clear();
    c.on_live(12, vec![12], now, &mut out);
    assert_eq!(out, vec![Step::RequestReplay { start: 9 }]);
    out.clear();
    c.on_replay(Some((9, vec![109])), now, &mut out);
    assert_eq!(out, vec![Step::Reset, Step::RequestReplay { start: 0 }]);
    assert_eq!(c.counters.restarts, 1);
}
