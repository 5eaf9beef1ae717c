//! The index's writer threads carry distinct, whole names where Linux shows them (`top -H`,
//! perf, `/proc/<pid>/task/*/comm`: 15 bytes at most), and `close` ends them. A test binary of
//! its own: its process has no other index's threads.

use kvroute_core::index::KvIndex;
use std::collections::BTreeSet;

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

#[test]
fn writer_threads_have_distinct_whole_names_and_end_on_close() {
    assert!(threads_named("kvr-").is_empty());
    let index = KvIndex::new(3).expect("index");
    let expected: BTreeSet<String> = (0..3).map(|id| format!("kvr-writer-{id}")).collect();
    assert_eq!(threads_named("kvr-"), expected);
    index.close();
    assert!(threads_named("kvr-").is_empty(), "writer threads outlive close");
}
