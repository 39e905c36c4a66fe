//! A counting allocator for the memory benchmarks: the high-water mark of live heap
//! bytes. A benchmark installs it with `#[global_allocator]`.
// Not every benchmark that includes the support module counts.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

/// Counts live bytes and their peak.
pub struct Counting;

/// Bytes live now, as counted.
pub fn live() -> usize {
    LIVE.load(Relaxed)
}

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let live = LIVE.fetch_add(layout.size(), Relaxed) + layout.size();
        PEAK.fetch_max(live, Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // A growing realloc may copy: count the moment both blocks exist. A shrinking
        // one is done in place by glibc (split, or mremap for large blocks).
        let transient = if new_size > layout.size() {
            new_size
        } else {
            0
        };
        let live = LIVE.fetch_add(transient, Relaxed) + transient;
        PEAK.fetch_max(live, Relaxed);
        LIVE.fetch_sub(transient, Relaxed);
        LIVE.fetch_add(new_size, Relaxed);
        let out = System.realloc(ptr, layout, new_size);
        LIVE.fetch_sub(layout.size(), Relaxed);
        out
    }
}

/// Runs `f` and returns its result with the peak of live bytes above what was live
/// before it started.
pub fn peak_above_baseline<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let baseline = LIVE.load(Relaxed);
    PEAK.store(baseline, Relaxed);
    let out = f();
    (out, PEAK.load(Relaxed) - baseline)
}
