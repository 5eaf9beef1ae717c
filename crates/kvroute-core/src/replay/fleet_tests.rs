//! Tests of the replay's simulation clock (`fleet.rs`) through its public methods: the order of
//! simultaneous events under each timing model, loads from host memory beside passes, and the
//! handoff of a disaggregated request from a prefill rank to a decode rank.

use super::engine::EngineConfig;
use super::fleet::{Fleet, FleetRank, Wake};
use super::handoff::{HandoffDelay, RankRole};
use super::speculative::Speculative;
use super::timing::{decode_ms, prefill_ms, TimingModel};
use crate::replay::PreemptionMode;

fn config(timing: TimingModel) -> EngineConfig {
    EngineConfig {
        block_size: 4,
        num_gpu_blocks: 64,
        max_num_seqs: 8,
        max_num_batched_tokens: 32,
        speedup: 1.0,
        decode_speedup: 1.0,
        speculative: Speculative::default(),
        timing,
        host_blocks: 0,
        host_load_ms_per_block: 0.0,
        preemption_mode: PreemptionMode::Lifo,
    }
}

/// A fleet of one aggregated rank for `requests` requests.
fn one_rank(config: EngineConfig, requests: usize) -> Fleet {
    Fleet::new(config, &[FleetRank { worker_id: 0, dp_rank: 0, role: RankRole::Aggregated }], requests, true)
        .expect("fleet")
}

fn drive(fleet: &mut Fleet, prompt: &[i32]) -> Vec<(f64, Wake)> {
    let mut wakes = Vec::new();
    loop {
        let w = fleet.run().expect("runs");
        wakes.push((fleet.clock(), w));
        match w {
            Wake::Done => return wakes,
            Wake::Arrival(uid) => {
                let seqs: Vec<u64> = prompt.iter().map(|&k| 100 + k as u64).collect();
                fleet.add_request(uid, 9, 3, &seqs, &seqs).expect("adds");
                fleet.enqueue(0, uid).expect("enqueues");
            }
            // Disaggregated fleets in these tests: rank 0 prefills, rank 1 decodes.
            Wake::Handoff(uid) => fleet.enqueue(1, uid).expect("enqueues the decode leg"),
            Wake::Output(_) => {}
        }
    }
}

fn disaggregated(delay: HandoffDelay) -> Fleet {
    let ranks = [
        FleetRank { worker_id: 0, dp_rank: 0, role: RankRole::Prefill },
        FleetRank { worker_id: 1, dp_rank: 0, role: RankRole::Decode },
    ];
    let mut fleet = Fleet::new(config(TimingModel::Dynamo), &ranks, 1, true).expect("fleet");
    fleet.set_handoff_delay(delay).expect("a valid delay");
    fleet
}

#[test]
fn a_disaggregated_request_prefills_then_decodes_once_its_kv_arrived() {
    let mut fleet = disaggregated(HandoffDelay { fixed_ms: 2.0, ms_per_token: 0.5, destination_missing: false });
    fleet.load(&[0.0], &[0]).expect("load");
    let wakes = drive(&mut fleet, &[1, 2]);
    let prefill_end = prefill_ms(9.0);
    assert!(
        wakes.iter().any(|&(at, w)| w == Wake::Handoff(0) && at == prefill_end),
        "the decode router places the request as soon as its prefill ends: {wakes:?}"
    );
    let o = fleet.outcomes()[0];
    // The decode rank reserves room at once; the KV arrives 2 ms + 9 tokens × 0.5 ms later. It
    // computes no prompt: its first token is one decode step over the request's 3 blocks (of 64).
    let arrived = prefill_end + 2.0 + 9.0 * 0.5;
    let step = decode_ms(3.0 / 64.0);
    assert_eq!(o.first_token_ms, arrived + step);
    assert!(o.last_token_ms > o.first_token_ms, "two more tokens follow on the decode rank");
    assert_eq!((o.arrival_ms, o.reused_tokens), (0.0, 0));
}

#[test]
fn legs_go_to_ranks_of_their_role() {
    let mut fleet = disaggregated(HandoffDelay::default());
    fleet.load(&[0.0], &[0]).expect("load");
    assert_eq!(fleet.run().expect("runs"), Wake::Arrival(0));
    fleet.add_request(0, 9, 3, &[101, 102], &[101, 102]).expect("adds");
    let err = fleet.enqueue(1, 0).expect_err("an arrival cannot go to a decode rank");
    assert!(err.to_string().contains("must go through a prefill rank"), "{err}");
    fleet.enqueue(0, 0).expect("enqueues the prefill leg");
    loop {
        match fleet.run().expect("runs") {
            Wake::Handoff(uid) => {
                let err = fleet.enqueue(0, uid).expect_err("a decode leg cannot go to a prefill rank");
                assert!(err.to_string().contains("goes to a decode rank"), "{err}");
                fleet.enqueue(1, uid).expect("enqueues the decode leg");
            }
            Wake::Done => break,
            _ => {}
        }
    }
    assert!(fleet.outcomes()[0].last_token_ms > 0.0);
    let bad = HandoffDelay { fixed_ms: f64::NAN, ..HandoffDelay::default() };
    assert!(fleet.set_handoff_delay(bad).is_err(), "a NaN delay is refused");
}

#[test]
fn same_instant_arrivals_share_a_pass_under_dynamo_timing() {
    let mut fleet = one_rank(config(TimingModel::Dynamo), 2);
    fleet.load(&[0.0, 0.0], &[0, 1]).expect("load");
    let wakes = drive(&mut fleet, &[1, 2]);
    let outcomes = fleet.outcomes();
    // Both are admitted in the one pass that starts after the instant: the first prefills
    // 9 tokens, the second finds 8 cached and computes its last. One polynomial on 10
    // tokens, no decode step.
    assert_eq!(outcomes[0].first_token_ms, prefill_ms(10.0));
    assert_eq!(outcomes[1].first_token_ms, outcomes[0].first_token_ms);
    assert_eq!(outcomes[1].reused_tokens, 8);
    assert!(matches!(wakes.last(), Some((_, Wake::Done))));
}

#[test]
fn classic_timing_starts_a_pass_at_the_first_arrival() {
    let mut fleet = one_rank(config(TimingModel::Classic), 2);
    fleet.load(&[0.0, 0.0], &[0, 1]).expect("load");
    drive(&mut fleet, &[1, 2]);
    let outcomes = fleet.outcomes();
    assert!(outcomes[1].first_token_ms > outcomes[0].first_token_ms);
    assert_eq!(outcomes[1].reused_tokens, 8, "the second request hits the first's prompt blocks");
}

#[test]
fn a_rank_waiting_only_for_a_load_starts_an_arrival_at_once() {
    // Request 0's two blocks leave the GPU for request 1's ten and stay in host memory;
    // request 2 loads them back (2 s); request 3 arrives 10 ms into that load.
    let config = EngineConfig {
        num_gpu_blocks: 10,
        host_blocks: 16,
        host_load_ms_per_block: 1000.0,
        preemption_mode: PreemptionMode::Lifo,
        ..config(TimingModel::Dynamo)
    };
    let requests: [(f64, u64, &[u64]); 4] =
        [(0.0, 9, &[1, 2]), (100.0, 37, &[3, 4, 5, 6, 7, 8, 9, 10, 11]), (10_000.0, 9, &[1, 2]), (10_010.0, 5, &[20])];
    let mut fleet = one_rank(config, 4);
    let at: Vec<f64> = requests.iter().map(|r| r.0).collect();
    fleet.load(&at, &[0, 1, 2, 3]).expect("load");
    loop {
        match fleet.run().expect("runs") {
            Wake::Done => break,
            Wake::Arrival(uid) => {
                let (_, input, blocks) = requests[uid as usize];
                let seqs: Vec<u64> = blocks.iter().map(|&b| 100 + b).collect();
                fleet.add_request(uid, input, 2, &seqs, &seqs).expect("adds");
                fleet.enqueue(0, uid).expect("enqueues");
            }
            Wake::Output(_) | Wake::Handoff(_) => {}
        }
    }
    assert_eq!(fleet.host_loaded_blocks(), 2);
    let outcomes = fleet.outcomes();
    assert!(outcomes[2].first_token_ms > 12_000.0, "request 2 waits for its load");
    assert!(outcomes[3].first_token_ms < 10_010.0 + 100.0, "request 3 does not: {}", outcomes[3].first_token_ms);
}

#[test]
fn bad_arguments_are_typed_errors() {
    let mut fleet = one_rank(config(TimingModel::Dynamo), 1);
    assert!(fleet.enqueue(3, 0).is_err());
    assert!(fleet.load(&[0.0], &[5]).is_err());
    assert!(fleet.set_next_turn(0, 0, f64::NAN).is_err());
    assert!(Fleet::new(EngineConfig { block_size: 0, ..config(TimingModel::Dynamo) }, &[], 0, true).is_err());
    for decode_speedup in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(Fleet::new(EngineConfig { decode_speedup, ..config(TimingModel::Dynamo) }, &[], 0, true).is_err());
    }
    let speculative = |draft_tokens, rate| Speculative { draft_tokens, accept_rates: [rate; 5], seed: 1 };
    for bad in [speculative(6, 0.5), speculative(2, 1.5), speculative(2, f64::NAN)] {
        assert!(Fleet::new(EngineConfig { speculative: bad, ..config(TimingModel::Dynamo) }, &[], 0, true).is_err());
    }
    assert!(Fleet::new(EngineConfig { speculative: speculative(2, 0.5), ..config(TimingModel::Dynamo) }, &[], 0, true)
        .is_ok());
}
