//! [`EngineSource`]: one engine worker's KV-event stream, every dp rank of it, on a Rust thread.
//!
//! The thread owns one SUB socket per rank (and, while a gap is being repaired, one DEALER on
//! that rank's replay socket), polls them with libzmq, and runs each frame through the rank's
//! [`Cursor`] and the shared [`EngineIngest`]: decode, convert, hash and enqueue into the index
//! all happen here, so the JavaScript thread is never involved per batch. The index events of a
//! burst of frames (up to [`BURST`] per socket) are committed together, once per poll round. The
//! thread wakes at least every [`POLL_INTERVAL`] to honour `close` and replay deadlines.
//!
//! ZeroMQ implementation: libzmq itself, built from source and linked statically by the `zmq`
//! crate (`zmq-sys` vendors it), so the `.node` needs no system libzmq, only the libstdc++ that
//! Node already loads. It is the ZeroMQ the engines use through pyzmq, so framing, subscriptions
//! and reconnection behave exactly as their publishers expect; the interoperability tests replay
//! the engines' captured frames through real sockets (`test/ingest-sockets.test.ts`). The
//! pure-Rust `zeromq` crate was the alternative; it would bring an async runtime into the core
//! for no gain in compatibility.

use super::counters::IngestCounters;
use super::cursor::{Cursor, CursorConfig, RankState, Step, StreamCounters};
use super::endpoint;
use super::engine::EngineIngest;
use crate::index::{Rank, WorkerId};
use crate::KvError;
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Longest sleep of the source thread between checks of `close` and replay deadlines.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Live frames drained from one socket before the others get a turn.
pub const BURST: usize = 256;

/// One ZeroMQ context for the process: its I/O thread serves every source.
fn context() -> &'static zmq::Context {
    static CONTEXT: OnceLock<zmq::Context> = OnceLock::new();
    CONTEXT.get_or_init(zmq::Context::new)
}

fn wall_ms() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
}

/// What to subscribe to.
#[derive(Debug, Clone)]
pub struct SourceConfig {
    pub worker_id: WorkerId,
    /// The dp ranks, and for each its PUB endpoint and (optionally) replay endpoint.
    pub ranks: Vec<u32>,
    pub endpoints: Vec<String>,
    pub replay_endpoints: Option<Vec<String>>,
    /// Bind the SUB sockets (the engines connect to us) instead of connecting.
    pub bind: bool,
    /// Subscription prefix.
    pub topic: String,
    pub replay_timeout: Duration,
    /// Live frames held per rank during a replay before the replay is given up.
    pub max_held: usize,
    /// Receive high-water mark of the SUB sockets (0 = unlimited).
    pub receive_hwm: i32,
    /// Per rank, the engine seq the index already holds (a warm start); empty or `None`: none.
    pub resume_after: Vec<Option<u64>>,
    /// Per rank, the digest of the batch applied at that seq, if the snapshot kept it
    /// ([`Cursor::resuming_after`]); empty or `None`: none.
    pub resume_digests: Vec<Option<u64>>,
}

/// A rank's view for stats.
#[derive(Debug, Clone)]
pub struct RankStatus {
    pub dp_rank: u32,
    pub endpoint: String,
    pub replay_endpoint: Option<String>,
    pub state: RankState,
    pub reason: String,
    pub last_seq: Option<u64>,
    /// Digest of the batch applied at `last_seq` (what a snapshot records to resume from).
    pub last_digest: Option<u64>,
    pub incarnation: u64,
    pub stream: StreamCounters,
    pub held: usize,
    /// Frames that were not `[topic, 8-byte seq, payload]`, or replay replies that were malformed.
    pub malformed_frames: u64,
    /// Local wall-clock time of the last applied batch (ms since the epoch).
    pub last_batch_ms: Option<f64>,
    /// Local receive time minus the batch's own timestamp (ms; includes any clock skew).
    pub lag_ms: Option<f64>,
}

/// A state change, as the JavaScript side reports it.
#[derive(Debug, Clone)]
pub struct StateChange {
    pub dp_rank: u32,
    pub state: RankState,
    pub reason: String,
    pub at_ms: f64,
}

struct Shared {
    status: Mutex<Vec<RankStatus>>,
    changes: Mutex<Vec<StateChange>>,
}

pub struct EngineSource {
    worker_id: WorkerId,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

struct RankIo {
    rank: Rank,
    sub: zmq::Socket,
    replay_endpoint: Option<String>,
    dealer: Option<zmq::Socket>,
    cursor: Cursor,
}

fn socket_error(what: &str, endpoint: &str, e: zmq::Error) -> KvError {
    KvError::invalid_arg(format!("cannot {what} {endpoint}: {e}"))
}

impl EngineSource {
    /// Opens the sockets (so a bad endpoint or a port in use fails here) and starts the thread.
    pub fn start(ingest: Arc<EngineIngest>, config: SourceConfig) -> Result<Self, KvError> {
        if config.ranks.is_empty() || config.ranks.len() != config.endpoints.len() {
            return Err(KvError::invalid_arg("a source needs one endpoint per dp rank"));
        }
        if config.replay_endpoints.as_ref().is_some_and(|r| r.len() != config.ranks.len()) {
            return Err(KvError::invalid_arg("a source needs one replay endpoint per dp rank"));
        }
        let cursor_config = CursorConfig {
            has_replay: config.replay_endpoints.is_some(),
            replay_timeout: config.replay_timeout,
            max_held: config.max_held,
        };
        let mut io = Vec::with_capacity(config.ranks.len());
        let mut status = Vec::with_capacity(config.ranks.len());
        for (i, &dp_rank) in config.ranks.iter().enumerate() {
            let endpoint = &config.endpoints[i];
            endpoint::validate(endpoint, "endpoint")?;
            let replay_endpoint = config.replay_endpoints.as_ref().map(|r| r[i].clone());
            if let Some(r) = &replay_endpoint {
                endpoint::validate(r, "replayEndpoint")?;
            }
            let sub = context().socket(zmq::SUB).map_err(|e| socket_error("open a socket for", endpoint, e))?;
            sub.set_linger(0)
                .and_then(|()| sub.set_rcvhwm(config.receive_hwm))
                .map_err(|e| socket_error("configure", endpoint, e))?;
            sub.set_subscribe(config.topic.as_bytes()).map_err(|e| socket_error("subscribe on", endpoint, e))?;
            if config.bind {
                sub.bind(endpoint).map_err(|e| socket_error("bind", endpoint, e))?;
            } else {
                sub.connect(endpoint).map_err(|e| socket_error("connect to", endpoint, e))?;
            }
            status.push(RankStatus {
                dp_rank,
                endpoint: endpoint.clone(),
                replay_endpoint: replay_endpoint.clone(),
                state: RankState::Connecting,
                reason: String::from("waiting for the first batch"),
                last_seq: None,
                last_digest: None,
                incarnation: 0,
                stream: StreamCounters::default(),
                held: 0,
                malformed_frames: 0,
                last_batch_ms: None,
                lag_ms: None,
            });
            io.push(RankIo {
                rank: Rank::new(config.worker_id, dp_rank),
                sub,
                replay_endpoint,
                dealer: None,
                cursor: match config.resume_after.get(i).copied().flatten() {
                    Some(seq) => {
                        Cursor::resuming_after(cursor_config, seq, config.resume_digests.get(i).copied().flatten())
                    }
                    None => Cursor::new(cursor_config),
                },
            });
        }
        let shared = Arc::new(Shared { status: Mutex::new(status), changes: Mutex::new(Vec::new()) });
        let stop = Arc::new(AtomicBool::new(false));
        let runner = Runner {
            ingest,
            pending: Vec::new(),
            pending_counters: Vec::new(),
            io,
            shared: Arc::clone(&shared),
            stop: Arc::clone(&stop),
        };
        // Linux keeps 15 bytes of a thread's name: "kvr-src-" leaves room for 7 digits of the
        // worker id, where "kvroute-source-" left none.
        let handle = std::thread::Builder::new()
            .name(format!("kvr-src-{}", config.worker_id))
            .spawn(move || runner.run())
            .map_err(|e| KvError::invalid_arg(format!("cannot start the source thread: {e}")))?;
        Ok(Self { worker_id: config.worker_id, shared, stop, handle: Mutex::new(Some(handle)) })
    }

    pub fn worker_id(&self) -> WorkerId {
        self.worker_id
    }

    pub fn status(&self) -> Vec<RankStatus> {
        self.shared.status.lock().clone()
    }

    /// State changes since the last call.
    pub fn take_changes(&self) -> Vec<StateChange> {
        std::mem::take(&mut *self.shared.changes.lock())
    }

    pub fn is_closed(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Stops the thread and closes the sockets; returns within about [`POLL_INTERVAL`].
    /// Idempotent. Batches already applied stay in the index.
    pub fn close(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(handle) = self.handle.lock().take() {
            let _ = handle.join();
        }
    }
}

impl Drop for EngineSource {
    fn drop(&mut self) {
        self.close();
    }
}

struct Runner {
    ingest: Arc<EngineIngest>,
    /// Index events converted since the last commit (committed after every drained burst).
    pending: Vec<crate::index::RouterEvent>,
    /// The counters of the burst's batches, added once `pending` is committed.
    pending_counters: Vec<(Rank, IngestCounters)>,
    io: Vec<RankIo>,
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
}

enum Readable {
    Live(usize),
    Replay(usize),
}

impl Runner {
    fn run(mut self) {
        let mut steps = Vec::new();
        while !self.stop.load(Ordering::Acquire) {
            let ready = self.poll();
            for r in ready {
                match r {
                    Readable::Live(i) => self.drain_live(i, &mut steps),
                    Readable::Replay(i) => self.drain_replay(i, &mut steps),
                }
            }
            let now = Instant::now();
            for i in 0..self.io.len() {
                self.io[i].cursor.on_tick(now, &mut steps);
                self.execute(i, &mut steps);
            }
            self.commit();
        }
    }

    /// Hands the burst's index events to the index, then its batches' counters to the ranks
    /// (so counters never run ahead of what a flush makes visible); stops the source if the
    /// index is closed.
    fn commit(&mut self) {
        let events = std::mem::take(&mut self.pending);
        let committed = self.ingest.commit(events, wall_ms());
        for (rank, counters) in self.pending_counters.drain(..) {
            self.ingest.add_counters(rank, &counters);
        }
        if committed.is_err() {
            self.stop.store(true, Ordering::Release);
        }
    }

    fn poll(&self) -> Vec<Readable> {
        let now = Instant::now();
        let wait = self
            .io
            .iter()
            .filter_map(|r| r.cursor.deadline())
            .map(|d| d.saturating_duration_since(now))
            .fold(POLL_INTERVAL, Duration::min);
        let mut items = Vec::with_capacity(self.io.len() * 2);
        let mut owners = Vec::with_capacity(self.io.len() * 2);
        for (i, r) in self.io.iter().enumerate() {
            items.push(r.sub.as_poll_item(zmq::POLLIN));
            owners.push(Readable::Live(i));
            if let Some(d) = &r.dealer {
                items.push(d.as_poll_item(zmq::POLLIN));
                owners.push(Readable::Replay(i));
            }
        }
        if zmq::poll(&mut items, wait.as_millis() as i64).is_err() {
            return Vec::new();
        }
        items.iter().zip(owners).filter(|(item, _)| item.is_readable()).map(|(_, o)| o).collect()
    }

    fn drain_live(&mut self, i: usize, steps: &mut Vec<Step>) {
        for _ in 0..BURST {
            let frames = match self.io[i].sub.recv_multipart(zmq::DONTWAIT) {
                Ok(frames) => frames,
                Err(_) => return,
            };
            let now = Instant::now();
            match <[Vec<u8>; 3]>::try_from(frames) {
                Ok([_topic, seq, payload]) if seq.len() == 8 => {
                    let seq = u64::from_be_bytes(seq.try_into().unwrap_or_default());
                    self.io[i].cursor.on_live(seq, payload, now, steps);
                }
                _ => self.shared.status.lock()[i].malformed_frames += 1,
            }
            self.execute(i, steps);
        }
    }

    fn drain_replay(&mut self, i: usize, steps: &mut Vec<Step>) {
        for _ in 0..BURST {
            let Some(dealer) = &self.io[i].dealer else { return };
            let frames = match dealer.recv_multipart(zmq::DONTWAIT) {
                Ok(frames) => frames,
                Err(_) => return,
            };
            let now = Instant::now();
            match parse_reply(frames) {
                Some(reply) => self.io[i].cursor.on_replay(reply, now, steps),
                None => {
                    self.shared.status.lock()[i].malformed_frames += 1;
                    // A reply we cannot read leaves the replay unfinishable: let it time out.
                }
            }
            self.execute(i, steps);
        }
    }

    /// Carries out the cursor's steps for rank `i`, then publishes its status.
    fn execute(&mut self, i: usize, steps: &mut Vec<Step>) {
        let mut last_ts = None;
        let mut k = 0;
        while k < steps.len() {
            let step = std::mem::replace(&mut steps[k], Step::CancelReplay);
            k += 1;
            let rank = self.io[i].rank;
            match step {
                Step::Apply { seq, payload } => {
                    let mut outcome = self.ingest.convert_payload(rank, &payload, seq, &mut self.pending);
                    self.pending_counters.push((rank, std::mem::take(&mut outcome.counters)));
                    last_ts = outcome.ts.or(last_ts);
                    let mut more = Vec::new();
                    self.io[i].cursor.on_outcome(&outcome.convert, &mut more);
                    steps.extend(more);
                }
                Step::Reset => self.ingest.reset_rank(rank, &mut self.pending),
                Step::RequestReplay { start } => match self.open_replay(i, start) {
                    Ok(dealer) => self.io[i].dealer = Some(dealer),
                    Err(e) => {
                        let mut more = Vec::new();
                        self.io[i].cursor.replay_unavailable(&e, &mut more);
                        steps.extend(more);
                    }
                },
                Step::CancelReplay => self.io[i].dealer = None,
            }
        }
        steps.clear();
        self.publish(i, last_ts);
    }

    fn open_replay(&self, i: usize, start: u64) -> Result<zmq::Socket, String> {
        let endpoint = self.io[i].replay_endpoint.as_deref().ok_or("no replay endpoint")?;
        let dealer = context().socket(zmq::DEALER).map_err(|e| e.to_string())?;
        dealer.set_linger(0).map_err(|e| e.to_string())?;
        dealer.set_rcvhwm(0).map_err(|e| e.to_string())?;
        dealer.connect(endpoint).map_err(|e| format!("cannot connect to {endpoint}: {e}"))?;
        // DEALER queues the request until the connection is up.
        dealer.send_multipart([&b""[..], &start.to_be_bytes()[..]], zmq::DONTWAIT).map_err(|e| e.to_string())?;
        Ok(dealer)
    }

    fn publish(&mut self, i: usize, last_ts: Option<f64>) {
        let changes = self.io[i].cursor.take_transitions();
        let cursor = &self.io[i].cursor;
        let now = wall_ms();
        let dp_rank = self.io[i].rank.dp_rank;
        {
            let mut status = self.shared.status.lock();
            let s = &mut status[i];
            s.state = cursor.state();
            s.last_seq = cursor.last_seq();
            s.last_digest = cursor.applied_digest();
            s.incarnation = cursor.incarnation;
            s.stream = cursor.counters;
            s.held = cursor.held();
            if let Some((_, reason)) = changes.last() {
                s.reason.clone_from(reason);
            }
            if let Some(ts) = last_ts {
                s.last_batch_ms = Some(now);
                s.lag_ms = Some(now - ts * 1000.0);
            }
        }
        if !changes.is_empty() {
            let mut log = self.shared.changes.lock();
            // Bounded: a consumer that never reads keeps only the newest changes.
            if log.len() > 10_000 {
                log.drain(..5_000);
            }
            log.extend(changes.into_iter().map(|(state, reason)| StateChange { dp_rank, state, reason, at_ms: now }));
        }
    }
}

/// A replay reply as the DEALER sees it: `["", seq, payload]` (older engines) or
/// `["", topic, seq, payload]` (vLLM ≥ 0.26, SGLang ≥ 0.5.22). `Some(None)` is the end marker
/// (seq all ones, or an empty payload); `None` a malformed reply.
fn parse_reply(mut frames: Vec<Vec<u8>>) -> Option<Option<(u64, Vec<u8>)>> {
    if frames.first().is_some_and(Vec::is_empty) {
        frames.remove(0);
    }
    let (seq, payload) = match frames.len() {
        2 => (frames.remove(0), frames.remove(0)),
        3 => (frames.remove(1), frames.remove(1)),
        _ => return None,
    };
    let seq: [u8; 8] = seq.try_into().ok()?;
    let seq = u64::from_be_bytes(seq);
    if seq == u64::MAX || payload.is_empty() {
        return Some(None);
    }
    Some(Some((seq, payload)))
}
