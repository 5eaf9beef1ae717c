//! The replay's events in (time, sequence) order, deterministic for simultaneous events: the
//! arrivals known up front wait in a sorted array, a binary min-heap holds the rest (engine
//! passes, loads that end, later turns of sessions), so it stays as small as the fleet instead of
//! as long as the trace. The Rust twin of `ts/replay/event-queue.ts`.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

#[derive(Clone, Copy)]
pub(super) enum Kind {
    Arrival(u32),
    Pass(usize),
    /// A rank with nothing to run but loads from host memory: the first one ends.
    LoadReady(usize),
    /// Disaggregated: a request's prefill leg ended; the decode pool's router places it.
    Handoff(u32),
    /// Disaggregated: a request's KV has reached its decode rank (`engine/handoff.rs`).
    Transfer(u32),
}

#[derive(Clone, Copy)]
pub(super) struct Event {
    pub at: f64,
    seq: u64,
    pub kind: Kind,
}

impl Event {
    fn key(&self) -> (f64, u64) {
        (self.at, self.seq)
    }
}

impl PartialEq for Event {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Event {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b) = (self.key(), other.key());
        a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
    }
}

/// Arrivals known up front in a sorted array; a min-heap for passes and later turns.
#[derive(Default)]
pub(super) struct EventQueue {
    backlog: Vec<Event>,
    head: usize,
    heap: BinaryHeap<Reverse<Event>>,
    seq: u64,
}

impl EventQueue {
    pub fn load(&mut self, at: &[f64], uids: &[u32]) {
        self.backlog = at
            .iter()
            .zip(uids)
            .map(|(&at, &uid)| {
                let seq = self.seq;
                self.seq += 1;
                Event { at, seq, kind: Kind::Arrival(uid) }
            })
            .collect();
        self.backlog.sort();
        self.head = 0;
    }

    pub fn push(&mut self, at: f64, kind: Kind) {
        let seq = self.seq;
        self.seq += 1;
        self.heap.push(Reverse(Event { at, seq, kind }));
    }

    pub fn next_at(&self) -> Option<f64> {
        let a = self.heap.peek().map(|r| r.0.at);
        let b = self.backlog.get(self.head).map(|e| e.at);
        match (a, b) {
            (None, b) => b,
            (Some(a), Some(b)) if b < a => Some(b),
            (a, _) => a,
        }
    }

    pub fn pop(&mut self) -> Option<Event> {
        if let Some(&b) = self.backlog.get(self.head) {
            if self.heap.peek().is_none_or(|top| b < top.0) {
                self.head += 1;
                return Some(b);
            }
        }
        self.heap.pop().map(|r| r.0)
    }
}
