//! Handing the process's free heap memory back to the operating system.
//!
//! Why this exists: freeing an index's trees returns their chunks to the allocator, not
//! necessarily to the system, and with glibc whether it does depends on the process's history.
//! glibc gives a heap's free top back only above its trim threshold, and that threshold moves:
//! each time the process frees a chunk that glibc had mapped on its own (an index's large name
//! table, or any large buffer the host frees), glibc raises the size above which it maps chunks
//! to that chunk's size and the trim threshold to twice it, up to 32 and 64 MiB. A writer
//! thread's heap is at most 64 MiB, so from then on it never shrinks, and freeing an index gives
//! the system nothing. In `test/index-memory.test.ts` the resident set stayed exactly where it
//! was after closing a 24 MB index in 5 of 8 runs in one round of work and 2 of 6 in the next,
//! once the name tables' small sizes had changed (in 0 of 8 before that change, which can only
//! have altered what the process had freed before), and in 0 of 8 with the change and the
//! mapping threshold pinned (`MALLOC_MMAP_THRESHOLD_`, which turns the moving thresholds off).
//! Asking glibc to trim after closing releases the free pages of every arena whatever the
//! thresholds: 1.06-3.4 times the index's reported bytes in that test (10 runs; other free
//! pages go too), in about 1 ms.

/// Asks the allocator to give every whole free page of its heaps back to the system, and says
/// whether it gave any. glibc only (`malloc_trim`, in glibc since 2.0 and releasing pages inside
/// a heap since 2.8, so the binary's glibc 2.17 floor has it); elsewhere a no-op returning false.
/// It costs about a millisecond in a Node process (it walks every arena's free lists) and the
/// process then faults pages in again as it reuses the memory, so callers keep it for large
/// frees ([`crate::index::KvIndex::close_returning_memory`]).
pub fn return_free_pages() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: malloc_trim takes no pointers and is safe to call from any thread at any time;
        // it takes each arena's lock itself.
        unsafe { malloc_trim(0) != 0 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
