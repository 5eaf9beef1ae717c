//! Telling V8 about the index's native memory. The trees live outside the JavaScript heap, so
//! without this the garbage collector sees a small object and never hurries to finalise it:
//! thousands of short-lived indexes could hold gigabytes. Each call into the index reports the
//! change in kvroute-core's cheap estimate (`KvIndex::memory_estimate`) once it moved by more
//! than `SLACK`; close and finalisation report the rest.

use kvroute_core::index::KvIndex;
use napi::Env;
use std::sync::atomic::{AtomicI64, Ordering};

/// Changes below this are not worth a call into V8.
const SLACK: i64 = 256 * 1024;

#[derive(Default)]
pub struct ExternalMemory {
    reported: AtomicI64,
}

impl ExternalMemory {
    /// Reports the index's current estimate when it moved by more than `SLACK`.
    pub fn sync(&self, env: &Env, index: &KvIndex) {
        self.sync_to(env, index.memory_estimate());
    }

    /// Reports `bytes` (a fresh measurement) when it moved by more than `SLACK`.
    pub fn sync_to(&self, env: &Env, bytes: u64) {
        let now = i64::try_from(bytes).unwrap_or(i64::MAX);
        let before = self.reported.load(Ordering::Relaxed);
        if (now - before).abs() > SLACK || (now == 0 && before != 0) {
            self.report(env, now - before);
        }
    }

    /// Reports that all of it is gone (after close, or when the object is finalised).
    pub fn release(&self, env: &Env) {
        let before = self.reported.load(Ordering::Relaxed);
        if before != 0 {
            self.report(env, -before);
        }
    }

    fn report(&self, env: &Env, delta: i64) {
        // A failure here only leaves V8's hint stale; it is not worth failing the call.
        if env.adjust_external_memory(delta).is_ok() {
            self.reported.fetch_add(delta, Ordering::Relaxed);
        }
    }
}
