//! A writer thread's loop: takes ops from its queue in order, applies a backlog of event
//! batches in one write, and keeps its shard's memory figure fresh.

use super::{Op, Shared, MEMORY_REFRESH};
use crate::index::event::RouterEvent;
use crate::index::lower::LowerTierState;
use crate::index::tree::{Journal, TreeWriter};
use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::time::Instant;

/// At most this many queued event batches are applied in one write, and no more once they hold
/// [`COALESCE_BLOCKS`] blocks: a write publishes its view and then waits for readers to leave the
/// other copy, so a backlogged writer that published after every batch spent much of its time
/// waiting for a reader that the scheduler had preempted (three busy threads on two cores). The
/// block budget bounds how much later the first batch of a group becomes visible.
const COALESCE_OPS: usize = 64;
const COALESCE_BLOCKS: usize = 4096;

/// One writer thread: applies its queue's ops to its shard in order, a backlog of event batches
/// in one write (see [`COALESCE_OPS`]). After a change it re-measures the shard's heap once the
/// queue is idle, at most every `MEMORY_REFRESH`.
pub(super) fn writer_loop(shared: &Shared, id: usize, rx: &Receiver<Op>) {
    let mut last_measured = Instant::now();
    let mut dirty = false;
    let mut journal = Journal::default();
    let mut group: Vec<Op> = Vec::new();
    // An op taken from the queue while gathering a group that cannot join it: the next one.
    let mut held_back: Option<Op> = None;
    loop {
        // A backlogged queue hands out its next op without a clock read (the timed wait below
        // reads the clock twice: about 2% of a writer's time on the churn workload).
        let queued = match held_back.take().map(Ok).unwrap_or_else(|| rx.try_recv()) {
            Ok(op) => Some(op),
            Err(TryRecvError::Empty) => None,
            Err(TryRecvError::Disconnected) => return,
        };
        let op = if let Some(op) = queued {
            op
        } else if dirty {
            let wait = MEMORY_REFRESH.saturating_sub(last_measured.elapsed());
            match rx.recv_timeout(wait) {
                Ok(op) => op,
                Err(RecvTimeoutError::Timeout) => {
                    // Idle: no sender is coming back soon to free this writer's applied batches.
                    shared.spent.free(id);
                    shared.measure(id);
                    (last_measured, dirty) = (Instant::now(), false);
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            }
        } else {
            match rx.recv() {
                Ok(op) => op,
                Err(_) => return,
            }
        };
        if matches!(op, Op::Stop) {
            return;
        }
        gather(op, rx, &mut group, &mut held_back);
        let ops = group.len() as u64;
        // The ops count as applied once visible; the second view's replay overlaps with
        // whatever the waiter does next.
        let mut counted = false;
        let visible = || {
            counted = true;
            shared.mark_applied(id, ops);
        };
        let shard = &shared.shards[id];
        let group = &mut group;
        let write = |w: &mut TreeWriter<'_>| {
            for op in group.drain(..) {
                // Retired before the batch counts as applied (`flush` frees what it waited for).
                if let Some(batch) = apply(w, &shared.lower, op) {
                    drop(shared.spent.retire(id, batch));
                }
            }
            shared.next_due[id].store(w.next_expiry().to_bits(), Ordering::Release);
        };
        if let Err(payload) = catch_unwind(AssertUnwindSafe(|| shard.write(&mut journal, write, visible))) {
            let detail = panic_message(payload.as_ref());
            shared.failure.lock().get_or_insert(detail);
            // A write that panicked half-way leaves its journal half-replayed: start afresh.
            journal = Journal::default();
        }
        group.clear();
        if !counted {
            shared.mark_applied(id, ops);
        }
        shared.journal_bytes[id].store(journal.heap_bytes() as u64, Ordering::Relaxed);
        dirty = true;
        if last_measured.elapsed() >= MEMORY_REFRESH {
            // A queue that never idles is measured on schedule too.
            shared.measure(id);
            (last_measured, dirty) = (Instant::now(), false);
        }
    }
}

/// Fills `group` with `first` and, when it is a batch of events, the event batches queued right
/// behind it (up to [`COALESCE_OPS`] and [`COALESCE_BLOCKS`]). Another kind of op ends the group
/// and waits in `held_back`, so that ops still apply in queue order.
fn gather(first: Op, rx: &Receiver<Op>, group: &mut Vec<Op>, held_back: &mut Option<Op>) {
    let mut blocks = events_blocks(&first);
    let coalescing = matches!(first, Op::Events { .. });
    group.push(first);
    while coalescing && group.len() < COALESCE_OPS && blocks < COALESCE_BLOCKS {
        match rx.try_recv() {
            Ok(op @ Op::Events { .. }) => {
                blocks += events_blocks(&op);
                group.push(op);
            }
            Ok(other) => {
                *held_back = Some(other);
                return;
            }
            Err(_) => return,
        }
    }
}

/// Blocks named by a batch of events (stored or removed), for [`COALESCE_BLOCKS`].
fn events_blocks(op: &Op) -> usize {
    match op {
        Op::Events { events, .. } => events.iter().map(RouterEvent::block_count).sum(),
        _ => 0,
    }
}

/// Applies one op to a shard through its writer. A batch of events is one write: the views swap
/// once however many events it holds. Returns the applied batch, to be freed elsewhere.
fn apply(w: &mut TreeWriter<'_>, lower: &LowerTierState, op: Op) -> Option<Vec<RouterEvent>> {
    match op {
        Op::Events { events, now_ms } => {
            for event in &events {
                if lower.concerns(event) {
                    lower.apply(event, |rank, name| w.sequence_of(rank, name));
                    if event.lower_tier.is_some() {
                        continue;
                    }
                }
                w.apply_event(event, now_ms);
            }
            return Some(events);
        }
        Op::RemoveWorker { worker_id, dp_rank } => {
            lower.remove_worker(worker_id, dp_rank);
            w.remove_worker(worker_id, dp_rank);
        }
        Op::Predict { rank, locals, seq_hashes, now_ms, expires_at_ms } => {
            w.record_prediction(rank, &locals, &seq_hashes, now_ms, expires_at_ms);
        }
        Op::Expire { now_ms } => w.expire(now_ms),
        Op::Stop => {}
    }
    None
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}
