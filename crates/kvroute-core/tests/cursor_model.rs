//! The stream cursor against a simulated engine and a lossy link, seeded: an engine publishes
//! numbered batches, keeps the last few in its replay ring, and now and then restarts (seq back
//! to 0, ring emptied, its batches different); the link drops live frames, and replays are
//! answered from the ring at once, after more live frames, or never. What the cursor has applied
//! since its last reset must always be batches of the engine's current incarnation, and all of
//! them from seq 0 on whenever it reports `Active`: no batch of an earlier incarnation and no
//! hole, whichever way the restarts and losses fell, once it has heard the incarnation and
//! any replay it asked for has answered.
//! The one case the wire cannot show is left out: a restart whose first heard batch is exactly
//! the next seq after the last one applied.

mod common;

use common::rng::Rng;
use kvroute_core::ingest::cursor::{Cursor, CursorConfig, Step};
use kvroute_core::ingest::RankState;
use std::time::{Duration, Instant};

/// A batch's payload: which incarnation sent it, and its seq.
fn payload(incarnation: u64, seq: u64) -> Vec<u8> {
    [incarnation.to_le_bytes(), seq.to_le_bytes()].concat()
}

fn parse(p: &[u8]) -> (u64, u64) {
    let word = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().unwrap_or_default());
    (word(0), word(8))
}

struct Engine {
    incarnation: u64,
    next_seq: u64,
    ring: Vec<(u64, Vec<u8>)>,
    ring_size: usize,
}

impl Engine {
    fn publish(&mut self) -> (u64, Vec<u8>) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let p = payload(self.incarnation, seq);
        self.ring.push((seq, p.clone()));
        if self.ring.len() > self.ring_size {
            self.ring.remove(0);
        }
        (seq, p)
    }

    fn restart(&mut self) {
        self.incarnation += 1;
        self.next_seq = 0;
        self.ring.clear();
    }
}

/// What the index holds of the rank: the batches applied since the last reset.
#[derive(Default)]
struct Applied(Vec<(u64, u64)>);

impl Applied {
    fn take(&mut self, steps: &mut Vec<Step>, pending_replay: &mut Option<u64>) {
        for step in steps.drain(..) {
            match step {
                Step::Apply { payload, .. } => self.0.push(parse(&payload)),
                Step::Reset => self.0.clear(),
                Step::RequestReplay { start } => *pending_replay = Some(start),
                Step::CancelReplay => *pending_replay = None,
            }
        }
    }
}

#[test]
fn applied_batches_are_always_the_current_incarnation_and_whole_when_active() {
    let config = CursorConfig { has_replay: true, replay_timeout: Duration::from_millis(50), max_held: 8 };
    let mut blind_spots = 0;
    let mut restarts_seen = 0;
    for seed in 1..=400u64 {
        let mut rng = Rng::seeded(seed);
        let mut engine = Engine { incarnation: 0, next_seq: 0, ring: Vec::new(), ring_size: 3 + (seed % 6) as usize };
        let mut cursor = Cursor::new(config);
        let mut applied = Applied::default();
        let mut replay: Option<u64> = None;
        let mut steps = Vec::new();
        let mut now = Instant::now();
        // Set when a restart's first heard batch continues the old seqs exactly: not checkable.
        let mut unseen_restart = false;
        let mut restarted_since_heard = false;
        for _ in 0..300 {
            now += Duration::from_millis(1);
            if rng.chance(4) {
                engine.restart();
                restarted_since_heard = true;
            }
            let (seq, p) = engine.publish();
            if !rng.chance(30) {
                if restarted_since_heard && cursor.last_seq().is_some_and(|a| seq == a + 1) {
                    unseen_restart = true;
                }
                restarted_since_heard = false;
                cursor.on_live(seq, p, now, &mut steps);
            }
            applied.take(&mut steps, &mut replay);
            // A replay request is answered now (most often), later, or never (then it times out).
            if let Some(start) = replay {
                match rng.next() % 10 {
                    0 => {}
                    1 => {
                        now += Duration::from_millis(60);
                        cursor.on_tick(now, &mut steps);
                    }
                    _ => {
                        for (s, p) in engine.ring.iter().filter(|(s, _)| *s >= start).cloned().collect::<Vec<_>>() {
                            cursor.on_replay(Some((s, p)), now, &mut steps);
                            applied.take(&mut steps, &mut replay);
                            if replay != Some(start) {
                                break; // the cursor asked for another range (a restart found) or gave up
                            }
                        }
                        if replay == Some(start) {
                            cursor.on_replay(None, now, &mut steps);
                        }
                    }
                }
                applied.take(&mut steps, &mut replay);
                // A new request (from 0, after a restart was found) is answered on the next turn.
            }
            if unseen_restart {
                blind_spots += 1;
                break;
            }
            if restarted_since_heard || cursor.state() == RankState::Recovering {
                // Nothing of the new incarnation heard yet, or its replay still unanswered:
                // nothing to tell it by yet.
                continue;
            }
            let current = engine.incarnation;
            assert!(
                applied.0.iter().all(|&(inc, _)| inc == current),
                "seed {seed}: batches of an earlier incarnation are still applied: {:?}",
                applied.0
            );
            if cursor.state() == RankState::Active {
                let seqs: Vec<u64> = applied.0.iter().map(|&(_, s)| s).collect();
                let whole: Vec<u64> = (0..seqs.len() as u64).collect();
                assert_eq!(seqs, whole, "seed {seed}: an active rank holds a hole");
            }
        }
        restarts_seen += cursor.counters.restarts;
    }
    // The simulation reaches the cases it is for: restarts found, and few it cannot see.
    assert!(restarts_seen > 200, "restarts seen: {restarts_seen}");
    assert!(blind_spots < 80, "blind spots: {blind_spots}");
    eprintln!("cursor model: {restarts_seen} restarts found, {blind_spots} seeds ended at the blind spot");
}
