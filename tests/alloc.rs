//! Once an eager pool is built, acquiring and releasing allocate nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use tagpool::Pool;

/// Rounds per test; miri runs far fewer.
const ROUNDS: u32 = if cfg!(miri) { 20 } else { 10_000 };

/// Counts allocations made by the current thread while counting is on, so
/// the test harness's own threads do not disturb the count.
struct CountingAllocator;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to `System` unchanged; the thread-local
// bookkeeping uses `const` initializers, so it never allocates itself.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        // SAFETY: as for `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as for `alloc`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn note_allocation() {
    // `try_with`: during thread teardown the locals may be gone.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

/// The allocations `f` makes on this thread.
fn allocations_in(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|on| on.set(true));
    f();
    COUNTING.with(|on| on.set(false));
    ALLOCATIONS.with(Cell::get)
}

/// Drops `v` out of the optimizer's sight, so that the allocation cannot
/// be elided (`std::hint::black_box` needs Rust 1.66, above the MSRV).
#[inline(never)]
fn sink(v: Vec<u8>) {
    drop(v);
}

#[test]
fn the_counter_sees_allocations() {
    // Proves the instrument works, so a zero below means something.
    assert_eq!(allocations_in(|| sink(vec![1u8; 16])), 1);
}

#[test]
fn borrowed_guards_allocate_nothing() {
    let pool = Pool::builder(|| Vec::<u8>::with_capacity(4096))
        .capacity(64)
        .reset(Vec::clear)
        .build()
        .unwrap();
    // A thread's first use of a pool makes its cache entry: that is the
    // one allocation, outside the count.
    drop(pool.try_acquire());
    let n = allocations_in(|| {
        for i in 0..ROUNDS {
            let mut a = pool.try_acquire().unwrap();
            let mut b = pool.acquire().unwrap();
            a.push(i as u8);
            b.extend_from_slice(&[1, 2, 3]);
            drop(b);
            drop(a);
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn owned_guards_allocate_nothing() {
    let pool = Arc::new(
        Pool::builder(|| [0u64; 8])
            .capacity(16)
            .thread_cache_size(4)
            .build()
            .unwrap(),
    );
    drop(pool.try_acquire_owned());
    let n = allocations_in(|| {
        for i in 0..u64::from(ROUNDS) {
            let mut g = pool.try_acquire_owned().unwrap();
            g[0] = i;
            let h = pool.acquire_owned().unwrap();
            drop(g);
            drop(h);
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn exhaustion_with_thread_caches_allocates_nothing() {
    let pool = Pool::builder(|| 0u64)
        .capacity(4)
        .thread_cache_size(2)
        .build()
        .unwrap();
    let held: Vec<_> = (0..4).map(|_| pool.try_acquire().unwrap()).collect();
    let n = allocations_in(|| {
        for _ in 0..ROUNDS {
            assert!(pool.try_acquire().is_err());
        }
    });
    assert_eq!(n, 0);
    drop(held);
}

#[test]
fn exhaustion_allocates_nothing() {
    let pool = Pool::new(1, || 0u64);
    let held = pool.try_acquire().unwrap();
    let n = allocations_in(|| {
        for _ in 0..ROUNDS {
            assert!(pool.try_acquire().is_err());
        }
    });
    assert_eq!(n, 0);
    drop(held);
}
