//! A global allocator wrapper that counts allocations per thread.
//!
//! Install it in a binary with
//! `#[global_allocator] static ALLOC: CountingAllocator = CountingAllocator::system();`
//! and qprof attributes the allocations a thread makes while an operator's code runs to
//! that operator (`numMemoryAllocations`).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

static COUNTING: AtomicBool = AtomicBool::new(true);

/// Turns counting on or off for the whole process (on by default). Overhead benchmarks turn
/// it off while the uninstrumented baseline runs.
pub fn set_counting(enabled: bool) {
    COUNTING.store(enabled, Ordering::Relaxed);
}

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

/// Number of allocations (including reallocations) the calling thread has made through
/// [`CountingAllocator`]; always 0 if it is not the global allocator.
#[inline]
pub fn thread_allocations() -> u64 {
    ALLOCATIONS.try_with(Cell::get).unwrap_or(0)
}

#[inline]
fn count_one() {
    if !COUNTING.load(Ordering::Relaxed) {
        return;
    }
    // `try_with`: the thread-local may already be gone while a thread shuts down.
    let _ = ALLOCATIONS.try_with(|c| c.set(c.get().wrapping_add(1)));
}

/// Counts each allocation in a thread-local counter, then delegates to the inner allocator.
#[derive(Debug, Default)]
pub struct CountingAllocator<A = System> {
    inner: A,
}

impl CountingAllocator<System> {
    /// Wraps the system allocator.
    pub const fn system() -> Self {
        Self { inner: System }
    }
}

// SAFETY: every method forwards to the inner allocator unchanged; counting touches only a
// thread-local `Cell` and never allocates.
unsafe impl<A: GlobalAlloc> GlobalAlloc for CountingAllocator<A> {
    #[inline]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.inner.alloc(layout) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count_one();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.inner.alloc_zeroed(layout) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count_one();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.inner.realloc(ptr, layout, new_size) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.inner.dealloc(ptr, layout) }
    }
}
