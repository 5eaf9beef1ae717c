//! The index's writer threads carry distinct, whole names where Linux shows them (`top -H`,
//! perf, `/proc/<pid>/task/*/comm`: 15 bytes at most), and `close` ends them. A test binary of
//! its own: its process has no other index's threads.

use kvroute_core::index::KvIndex;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// The names of this process's threads that start with `prefix`.
fn threads_named(prefix: &str) -> BTreeSet<String> {
    std::fs::read_dir("/proc/self/task")
        .expect("Linux /proc")
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|comm| comm.trim_end().to_owned())
        .filter(|comm| comm.starts_with(prefix))
        .collect()
}

/// The names once they equal `expected`, or as they are after five seconds. A new thread names
/// itself once it runs, and a joined thread leaves `/proc` a moment after `join` returns (the
/// kernel wakes the joiner before it reaps the thread), so each check waits for its state.
fn settled_names(prefix: &str, expected: &BTreeSet<String>) -> BTreeSet<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let names = threads_named(prefix);
        if names == *expected || Instant::now() > deadline {
            return names;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn writer_threads_have_distinct_whole_names_and_end_on_close() {
    assert!(threads_named("kvr-").is_empty());
    let index = KvIndex::new(3).expect("index");
    let expected: BTreeSet<String> = (0..3).map(|id| format!("kvr-writer-{id}")).collect();
    assert_eq!(settled_names("kvr-", &expected), expected);
    index.close();
    assert_eq!(settled_names("kvr-", &BTreeSet::new()), BTreeSet::new(), "writer threads outlive close");
}
