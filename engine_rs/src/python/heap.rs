//! The extension's heap: mimalloc, with its first arena kept off transparent huge pages.
//!
//! With THP set to `always` (a common Linux default), the kernel backs every 2 MiB-aligned
//! range of an anonymous mapping with a huge page at its first touch, and zeroes all 2 MiB
//! then. mimalloc reserves its memory in 1 GiB arenas, so every 2 MiB the engine's heap grows
//! by costs one such fault, paid by whatever allocates there: a mask fill in a decoding step.
//! On a virtual machine whose memory the host backs lazily that fault takes milliseconds (about
//! 5 ms measured on the 2-core development VM, against tens of microseconds for the step), and
//! the memory a grammar touches is far below 2 MiB per fault. So the first arena, which the
//! engine's allocations prefer, is reserved at import and advised `MADV_NOHUGEPAGE`: the heap
//! grows page by page. Only that arena: nothing else in the process changes (no process-wide
//! `PR_SET_THP_DISABLE`), and a heap that outgrows it gets mimalloc's usual arenas.
//!
//! Freed memory is purged by reset, not decommit: mimalloc purges pages freed more than 10 ms
//! ago, by default decommitting them (`MADV_DONTNEED`), so the next compilation after any pause
//! (a server between requests) faults every page of its working set in again and the kernel
//! zeroes each (about 1 ms of a 100-tool grammar's 8 ms compile, measured). Reset
//! (`MADV_FREE`) still lets the kernel take the pages under memory pressure, but a page it has
//! not taken is reused without a fault. The environment's `MIMALLOC_PURGE_DECOMMITS` wins.

use std::ffi::{c_int, c_void};

/// The size of the reserved arena: address space only (pages are committed as used), as
/// mimalloc's own default reservation.
const ARENA_BYTES: usize = 1 << 30;

extern "C" {
    // mimalloc's C API (linked in by the `mimalloc` crate; not all of it has Rust bindings).
    fn mi_reserve_os_memory_ex(
        size: usize,
        commit: bool,
        allow_large: bool,
        exclusive: bool,
        arena_id: *mut *mut c_void,
    ) -> c_int;
    fn mi_arena_area(arena_id: *mut c_void, size: *mut usize) -> *mut c_void;
    fn mi_option_disable(option: c_int);
}

/// `mi_option_purge_decommits` (`mi_option_reset_decommits` before mimalloc 2.1): its place in
/// `mi_option_t`, the same in mimalloc 2 and 3.
const MI_OPTION_PURGE_DECOMMITS: c_int = 5;

/// Purges freed memory by reset instead of decommit (see the module documentation), unless the
/// environment sets the option.
pub(super) fn purge_by_reset() {
    if std::env::var_os("MIMALLOC_PURGE_DECOMMITS").is_none() {
        // SAFETY: a plain C call; options may be set at any time.
        unsafe { mi_option_disable(MI_OPTION_PURGE_DECOMMITS) }
    }
}

/// Reserves the engine's first arena and advises it off huge pages (best effort: where either
/// step fails the heap is mimalloc's default).
#[cfg(target_os = "linux")]
pub(super) fn reserve_small_page_arena() {
    let mut id: *mut c_void = std::ptr::null_mut();
    // SAFETY: plain C calls with valid out-pointers; mimalloc owns the memory it reserves.
    unsafe {
        if mi_reserve_os_memory_ex(ARENA_BYTES, false, false, false, &mut id) != 0 {
            return;
        }
        let mut size = 0usize;
        let start = mi_arena_area(id, &mut size);
        if !start.is_null() {
            libc::madvise(start, size, libc::MADV_NOHUGEPAGE);
        }
    }
}

/// Elsewhere mimalloc's defaults stand (transparent huge pages are Linux's).
#[cfg(not(target_os = "linux"))]
pub(super) fn reserve_small_page_arena() {}
