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
