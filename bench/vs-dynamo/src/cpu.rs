//! On-CPU time per thread of this process, from Linux's `/proc/self/task/*/schedstat` (whose
//! first field is nanoseconds run), for probes that ask where a phase's CPU went: the thread
//! feeding events or the writers.

use std::collections::BTreeMap;

/// Nanoseconds each live thread has run so far, by thread id, with its name.
pub fn per_thread() -> BTreeMap<u32, (String, u64)> {
    let mut out = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return out };
    for task in tasks.flatten() {
        let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok()) else { continue };
        let read = |file: &str| std::fs::read_to_string(task.path().join(file)).unwrap_or_default();
        let ran = read("schedstat").split_whitespace().next().and_then(|n| n.parse().ok()).unwrap_or(0);
        out.insert(tid, (read("comm").trim().to_owned(), ran));
    }
    out
}

/// Milliseconds run between two snapshots, summed per thread name (threads that ended in
/// between are missing from the second and not counted).
pub fn ran_ms(before: &BTreeMap<u32, (String, u64)>, after: &BTreeMap<u32, (String, u64)>) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (tid, (name, ran)) in after {
        let start = before.get(tid).map_or(0, |(_, r)| *r);
        *out.entry(name.clone()).or_insert(0.0) += ran.saturating_sub(start) as f64 / 1e6;
    }
    out
}

/// Milliseconds each index thread ran between two snapshots, in thread-id (creation) order:
/// kvroute's writers (named `kvr-writer-N`, writer 0 first), or, with `prefix` `None`, Dynamo's
/// pool threads (unnamed, so they carry the process's name; the main thread, whose id is the
/// process's, is left out).
pub fn index_threads_ms(
    before: &BTreeMap<u32, (String, u64)>,
    after: &BTreeMap<u32, (String, u64)>,
    prefix: Option<&str>,
) -> Vec<f64> {
    let pid = std::process::id();
    let main_name = after.get(&pid).map(|(name, _)| name.clone()).unwrap_or_default();
    after
        .iter()
        .filter(|(tid, (name, _))| match prefix {
            Some(prefix) => name.starts_with(prefix),
            None => **tid != pid && *name == main_name,
        })
        .map(|(tid, (_, ran))| ran.saturating_sub(before.get(tid).map_or(0, |(_, r)| *r)) as f64 / 1e6)
        .collect()
}

/// Iterations per second of a chain of dependent one-cycle additions on the calling thread for
/// about `millis`: the core's effective clock in GHz, as far as this thread gets it. On a VM
/// whose virtual CPUs share physical cores with other tenants it moves from run to run, and
/// the index benchmarks' rates move with it.
pub fn effective_ghz(millis: u64) -> f64 {
    let start = std::time::Instant::now();
    let mut x = 0u64;
    let mut iterations = 0u64;
    while start.elapsed().as_millis() < u128::from(millis) {
        for _ in 0..1_000_000 {
            // Safety: one register addition; the asm keeps the compiler from folding the chain.
            unsafe { std::arch::asm!("add {0}, 1", inout(reg) x) };
        }
        iterations += 1_000_000;
    }
    std::hint::black_box(x);
    iterations as f64 / start.elapsed().as_secs_f64() / 1e9
}
