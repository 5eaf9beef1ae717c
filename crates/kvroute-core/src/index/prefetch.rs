//! Software prefetches: hints that start loading a cache line the writer will need soon, so
//! that its miss overlaps other work (name buckets a few names ahead, the next lines of an
//! array being appended to). A hint never faults, whatever the address.

/// A read prefetch of the cache line holding `value`.
pub fn prefetch<T>(value: &T) {
    prefetch_address(value as *const T);
}

/// A read prefetch of the cache line at `address`, which need not point into an allocation
/// (an array's end plus a few lines, say).
pub fn prefetch_address<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // Safety: prefetching is a hint; it never faults, even on an invalid address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
