//! The per-(worker, dp rank) sequence state machine of a live event stream: gap detection and
//! repair, restart detection, resync. Pure logic, no sockets: it consumes frames and emits
//! [`Step`]s that the socket runner (`source.rs`) carries out, so every transition is testable
//! on its own and the pure-JS twin (`ts/ingest/cursor.ts`) can mirror it rule for rule.
//!
//! Cursors: `last_live` is the highest seq seen on the SUB socket in this incarnation (live seqs
//! rise strictly, so one at or below it means the publisher restarted); `applied` is the highest
//! seq applied, replay included.
//! 1. live `s ≤ last_live` → **restart**: reset the rank, forget both cursors, treat `s` as a
//!    first frame. (Dynamo drops every batch as stale until `s` passes the old watermark, and
//!    keeps the old incarnation's blocks.) So is a live `s` that a replay applied already (the
//!    replay ran ahead of the live stream) when its payload differs from the replayed one's.
//! 2. first frame: `s = 0` → apply; otherwise replay from 0 (complete only if the reply starts
//!    at 0 without holes), or without a replay socket mark the rank resyncing and apply.
//! 3. `s ≤ applied` → duplicate; `s = applied + 1` → apply.
//! 4. `s > applied + 1` → **gap**: ask the replay socket for `applied + 1…` with a deadline, hold
//!    live frames meanwhile, apply replayed seqs in order, then the held ones without duplicates.
//!    A reply that starts late, has a hole, ends early or times out, a missing replay socket, or
//!    too many held frames make the gap **unrecoverable**: reset the rank, mark it resyncing,
//!    and go on from the frames held (never apply over a hole while reporting active).
//!    The request starts one batch early, at `applied`, whose payload digest the cursor kept: a
//!    replayed batch is byte-identical to the live one, so a different payload there means the
//!    engine **restarted during the gap** and its new seqs already passed the old ones (which
//!    seqs alone cannot show): reset the rank and replay the new incarnation from 0. A reply
//!    that starts past `applied` cannot be checked, so it is a late start like any other (a ring
//!    that starts at `applied + 1` may be a restarted engine's). A cursor resumed from a
//!    warm-start snapshot checks the digest the snapshot kept for its seq.
//! 5. resyncing ends at the first fresh chain-root store or AllBlocksCleared.
//! 6. a block-size mismatch fails the rank for good: its frames are then ignored (counted).

use super::convert::ConvertOutcome;
use crate::hashing::xxh3_64;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankState {
    /// No frame yet.
    Connecting,
    /// Applying a contiguous stream; the index holds what the engine reported.
    Active,
    /// Repairing a gap through the replay socket; live frames are held.
    Recovering,
    /// The rank was cleared after an unrecoverable gap; it holds only what arrived since.
    Resyncing,
    /// Stopped for good (block-size mismatch, or a socket that cannot be opened).
    Failed,
}

impl RankState {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Connecting => "connecting",
            Self::Active => "active",
            Self::Recovering => "recovering",
            Self::Resyncing => "resyncing",
            Self::Failed => "failed",
        }
    }
}

/// What the runner must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Decode and apply this batch; report the outcome through [`Cursor::on_outcome`].
    Apply { seq: u64, payload: Vec<u8> },
    /// Drop everything the rank holds.
    Reset,
    /// Open a replay request for `start…`, replacing any earlier one.
    RequestReplay { start: u64 },
    /// Close the replay request (its late replies must not be read).
    CancelReplay,
}

/// Counters of the stream machine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamCounters {
    pub frames: u64,
    pub gaps: u64,
    pub replay_requests: u64,
    pub replayed: u64,
    pub replay_failures: u64,
    pub replay_timeouts: u64,
    pub restarts: u64,
    pub resyncs: u64,
    pub duplicates: u64,
    /// Frames of a failed rank, ignored.
    pub ignored: u64,
    /// Replay replies that arrived when no replay was open.
    pub stale_replies: u64,
}

struct Replay {
    start: u64,
    next: u64,
    /// The batch the reply should open with, `(seq, payload digest)`: the last one applied,
    /// asked for again to check that the engine did not restart during the gap (rule 4).
    check: Option<(u64, u64)>,
    deadline: Instant,
}

/// Limits of one cursor.
#[derive(Debug, Clone, Copy)]
pub struct CursorConfig {
    pub has_replay: bool,
    pub replay_timeout: Duration,
    /// Live frames held during a replay before giving up on it.
    pub max_held: usize,
}

pub struct Cursor {
    config: CursorConfig,
    last_live: Option<u64>,
    applied: Option<u64>,
    /// `(seq, digest)` of the batches a replay applied past `last_live`, oldest first: a live
    /// frame with one of these seqs must repeat its payload, or the engine restarted (rule 1).
    ahead: VecDeque<(u64, u64)>,
    /// Digest of the payload applied at `applied` ([`digest`]); for a cursor resumed from a
    /// snapshot, the one the snapshot kept, if any.
    applied_digest: Option<u64>,
    state: RankState,
    /// The index may miss blocks the engine holds (cleared after a loss, or joined late).
    partial: bool,
    replay: Option<Replay>,
    held: VecDeque<(u64, Vec<u8>)>,
    pub incarnation: u64,
    pub counters: StreamCounters,
    /// State changes not yet taken by the runner, with their reason.
    transitions: Vec<(RankState, String)>,
}

impl Cursor {
    pub fn new(config: CursorConfig) -> Self {
        Self {
            config,
            last_live: None,
            applied: None,
            applied_digest: None,
            ahead: VecDeque::new(),
            state: RankState::Connecting,
            partial: false,
            replay: None,
            held: VecDeque::new(),
            incarnation: 0,
            counters: StreamCounters::default(),
            transitions: Vec::new(),
        }
    }

    /// A cursor that continues a stream already applied up to `seq` (an index warm-started from
    /// a peer's dump or a snapshot taken at that seq): the next frame should be `seq + 1`; a gap
    /// is repaired through the replay socket, or the rank resyncs; a lower seq is an engine
    /// restart since the snapshot, so the rank is cleared. With the digest of the batch applied
    /// at `seq` (the snapshot's [`Cursor::applied_digest`]), a gap's replay also checks that the
    /// engine did not restart since (rule 4).
    pub fn resuming_after(config: CursorConfig, seq: u64, digest: Option<u64>) -> Self {
        Self { last_live: Some(seq), applied: Some(seq), applied_digest: digest, ..Self::new(config) }
    }

    /// Digest of the payload applied at [`Cursor::last_seq`], for a snapshot to carry (see
    /// [`Cursor::resuming_after`]); `None` before any or on a cursor resumed without one.
    pub fn applied_digest(&self) -> Option<u64> {
        self.applied_digest
    }

    pub fn state(&self) -> RankState {
        self.state
    }

    pub fn last_seq(&self) -> Option<u64> {
        self.applied
    }

    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// The replay deadline, if one is open (the runner polls no longer than this).
    pub fn deadline(&self) -> Option<Instant> {
        self.replay.as_ref().map(|r| r.deadline)
    }

    pub fn take_transitions(&mut self) -> Vec<(RankState, String)> {
        std::mem::take(&mut self.transitions)
    }

    fn set_state(&mut self, state: RankState, reason: impl Into<String>) {
        if self.state != state {
            self.state = state;
            self.transitions.push((state, reason.into()));
        }
    }

    /// Marks the rank failed for good (the runner's own errors, e.g. a socket that cannot open).
    pub fn fail(&mut self, reason: impl Into<String>, out: &mut Vec<Step>) {
        if self.replay.take().is_some() {
            out.push(Step::CancelReplay);
        }
        self.held.clear();
        self.set_state(RankState::Failed, reason);
    }

    fn apply(&mut self, seq: u64, payload: Vec<u8>, out: &mut Vec<Step>) {
        let d = digest(&payload);
        self.applied_digest = Some(d);
        if self.last_live.is_none_or(|l| seq > l) {
            self.ahead.push_back((seq, d));
        }
        out.push(Step::Apply { seq, payload });
        self.applied = Some(seq);
    }

    fn healthy_state(&self) -> RankState {
        if self.partial {
            RankState::Resyncing
        } else {
            RankState::Active
        }
    }

    pub fn on_live(&mut self, seq: u64, payload: Vec<u8>, now: Instant, out: &mut Vec<Step>) {
        self.counters.frames += 1;
        if self.state == RankState::Failed {
            self.counters.ignored += 1;
            return;
        }
        let replayed_differs = self.ahead.iter().find(|(s, _)| *s == seq).is_some_and(|(_, d)| *d != digest(&payload));
        if self.last_live.is_some_and(|l| seq <= l) || replayed_differs {
            self.counters.restarts += 1;
            let previous = self.last_live.unwrap_or(seq);
            if self.replay.take().is_some() {
                out.push(Step::CancelReplay);
            }
            self.held.clear();
            out.push(Step::Reset);
            self.last_live = None;
            self.applied = None;
            self.applied_digest = None;
            self.ahead.clear();
            self.partial = false;
            self.incarnation += 1;
            let why = if replayed_differs {
                format!("seq {seq} is not the batch replayed")
            } else {
                format!("seq {seq} after {previous}")
            };
            self.transitions.push((self.state, format!("engine restarted: {why}; rank cleared")));
        }
        self.last_live = Some(seq);
        while self.ahead.front().is_some_and(|(s, _)| *s <= seq) {
            self.ahead.pop_front();
        }
        if self.replay.is_some() {
            if self.held.len() >= self.config.max_held {
                self.held.push_back((seq, payload));
                self.give_up(format!("more than {} live frames arrived during the replay", self.config.max_held), out);
                return;
            }
            self.held.push_back((seq, payload));
            return;
        }
        self.advance(seq, payload, now, out);
    }

    /// Steps 2–4 for a frame that is next in line (live, or taken from the held queue).
    fn advance(&mut self, seq: u64, payload: Vec<u8>, now: Instant, out: &mut Vec<Step>) {
        match self.applied {
            None if seq == 0 => {
                self.apply(seq, payload, out);
                let state = self.healthy_state();
                self.set_state(state, "stream started at seq 0");
            }
            None => {
                if self.config.has_replay {
                    self.start_replay(0, None, seq, payload, now, out);
                } else {
                    self.partial = true;
                    self.counters.resyncs += 1;
                    self.apply(seq, payload, out);
                    self.set_state(
                        RankState::Resyncing,
                        format!("joined at seq {seq} with no replay socket: earlier state unknown"),
                    );
                }
            }
            Some(a) if seq <= a => self.counters.duplicates += 1,
            Some(a) if seq == a + 1 => {
                self.apply(seq, payload, out);
                if self.state == RankState::Connecting {
                    let state = self.healthy_state();
                    self.set_state(state, "stream resumed");
                }
            }
            Some(a) => {
                self.counters.gaps += 1;
                if self.config.has_replay {
                    let check = self.applied_digest.map(|d| (a, d));
                    self.start_replay(a + 1, check, seq, payload, now, out);
                } else {
                    out.push(Step::Reset);
                    self.partial = true;
                    self.counters.resyncs += 1;
                    self.apply(seq, payload, out);
                    self.set_state(
                        RankState::Resyncing,
                        format!("lost seq {}..{} and no replay socket: rank cleared", a + 1, seq - 1),
                    );
                }
            }
        }
    }

    /// Asks for `start…` (from `check`'s seq when given), holding the live frame `seq`.
    fn start_replay(
        &mut self,
        start: u64,
        check: Option<(u64, u64)>,
        seq: u64,
        payload: Vec<u8>,
        now: Instant,
        out: &mut Vec<Step>,
    ) {
        self.held.push_front((seq, payload));
        self.open_replay(start, check, now, out);
        self.set_state(RankState::Recovering, format!("replaying from seq {start} (live stream at {seq})"));
    }

    fn open_replay(&mut self, start: u64, check: Option<(u64, u64)>, now: Instant, out: &mut Vec<Step>) {
        self.counters.replay_requests += 1;
        self.replay = Some(Replay { start, next: start, check, deadline: now + self.config.replay_timeout });
        out.push(Step::RequestReplay { start: check.map_or(start, |(seq, _)| seq) });
    }

    /// The replay's first batch is not the one applied at its seq: the engine restarted during
    /// the gap. Clears the rank and replays the new incarnation from 0 (the held live frames are
    /// its own); a ring that no longer starts at 0 then gives up as any late reply does.
    fn restarted_during_gap(&mut self, seq: u64, now: Instant, out: &mut Vec<Step>) {
        self.counters.restarts += 1;
        self.incarnation += 1;
        out.push(Step::Reset);
        self.applied = None;
        self.applied_digest = None;
        self.ahead.clear();
        self.partial = false;
        self.transitions.push((
            self.state,
            format!("engine restarted during the gap: its seq {seq} is not the batch applied; rank cleared"),
        ));
        self.open_replay(0, None, now, out);
    }

    /// One replay reply: `Some((seq, payload))`, or `None` for the end marker.
    pub fn on_replay(&mut self, reply: Option<(u64, Vec<u8>)>, now: Instant, out: &mut Vec<Step>) {
        let Some(replay) = self.replay.as_mut() else {
            self.counters.stale_replies += 1;
            return;
        };
        match reply {
            Some((seq, payload)) => {
                if let Some((checked, applied)) = replay.check {
                    if seq == checked {
                        replay.check = None;
                        self.counters.replayed += 1;
                        if digest(&payload) != applied {
                            self.restarted_during_gap(seq, now, out);
                        }
                        return;
                    }
                    if seq > checked {
                        // The ring no longer holds the batch to check: a restarted engine's
                        // ring may start right after it too, so the gap cannot be trusted.
                        let reason =
                            format!("replay started at seq {seq}, expected {checked} (the batch applied last)");
                        self.give_up(reason, out);
                        return;
                    }
                }
                if seq < replay.next {
                    self.counters.duplicates += 1;
                    return;
                }
                if seq > replay.next {
                    let what = if replay.next == replay.start { "started" } else { "has a hole" };
                    let reason = format!("replay {what} at seq {seq}, expected {}", replay.next);
                    self.give_up(reason, out);
                    return;
                }
                replay.next = seq + 1;
                self.counters.replayed += 1;
                if self.applied.is_none_or(|a| seq > a) {
                    self.apply(seq, payload, out);
                }
            }
            None => self.finish_replay(now, out),
        }
    }

    fn finish_replay(&mut self, now: Instant, out: &mut Vec<Step>) {
        let Some(replay) = self.replay.take() else { return };
        out.push(Step::CancelReplay);
        // The replay must reach the first held live frame.
        let covered = match (self.held.front(), self.applied) {
            (None, _) => true,
            (Some((s, _)), Some(a)) => a + 1 >= *s,
            (Some((s, _)), None) => *s == 0,
        };
        if !covered {
            let first_live = self.held.front().map_or(0, |(s, _)| *s);
            let reason = match replay.next.checked_sub(1).filter(|_| replay.next > replay.start) {
                Some(r) => format!("replay ended at seq {r}, before the live stream's seq {first_live}"),
                None => format!("replay socket holds nothing from seq {}", replay.start),
            };
            self.give_up(reason, out);
            return;
        }
        let state = self.healthy_state();
        self.set_state(state, format!("replayed seq {}..{}", replay.start, replay.next.saturating_sub(1)));
        self.drain_held(now, out);
    }

    fn drain_held(&mut self, now: Instant, out: &mut Vec<Step>) {
        while self.replay.is_none() {
            let Some((seq, payload)) = self.held.pop_front() else { break };
            self.advance(seq, payload, now, out);
        }
    }

    /// The gap cannot be repaired: reset, resync, go on from what was held.
    fn give_up(&mut self, reason: String, out: &mut Vec<Step>) {
        if self.replay.take().is_some() {
            out.push(Step::CancelReplay);
        }
        self.counters.replay_failures += 1;
        self.counters.resyncs += 1;
        out.push(Step::Reset);
        self.ahead.clear();
        self.partial = true;
        self.set_state(RankState::Resyncing, format!("{reason}: rank cleared"));
        for (seq, payload) in std::mem::take(&mut self.held) {
            self.apply(seq, payload, out);
        }
    }

    /// The replay request could not even be sent (the endpoint cannot be connected to): the gap
    /// is unrecoverable at once.
    pub fn replay_unavailable(&mut self, reason: &str, out: &mut Vec<Step>) {
        if self.replay.is_some() {
            self.give_up(format!("replay request failed: {reason}"), out);
        }
    }

    /// Deadlines: a replay open past its timeout is given up.
    pub fn on_tick(&mut self, now: Instant, out: &mut Vec<Step>) {
        if self.replay.as_ref().is_some_and(|r| now >= r.deadline) {
            self.counters.replay_timeouts += 1;
            let ms = self.config.replay_timeout.as_millis();
            self.give_up(format!("replay socket did not finish within {ms} ms"), out);
        }
    }

    /// What applying a batch revealed: a block-size mismatch fails the rank; a fresh root store
    /// or a clear ends a resync.
    pub fn on_outcome(&mut self, outcome: &ConvertOutcome, out: &mut Vec<Step>) {
        if let Some((engine, router)) = outcome.block_size_mismatch {
            out.push(Step::Reset);
            self.fail(format!("block size mismatch: the engine uses {engine}, the router {router}"), out);
            return;
        }
        if self.partial && (outcome.fresh_root_store || outcome.cleared) && self.replay.is_none() {
            self.partial = false;
            let why = if outcome.cleared { "engine cleared its cache" } else { "fresh stores since the loss" };
            self.set_state(RankState::Active, why);
        }
    }
}

/// What identifies a payload for rule 4's check: a replayed batch is byte-identical to the
/// live one, and a restarted engine's batch differs (its timestamp, and its hashes' random root).
/// xxh3-64 with seed 0, which the pure-JS backend computes alike (snapshots carry it).
pub fn digest(payload: &[u8]) -> u64 {
    xxh3_64(payload, 0)
}
