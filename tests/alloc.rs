//! Once an eager pool is built, acquiring and releasing allocate nothing;
//! and a pool's state, index pools' included, is freed once the pool and
//! its last owned guard are gone.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use tagpool::{IndexPool, Pool};

/// Rounds per test; miri runs far fewer.
const ROUNDS: u32 = if cfg!(miri) { 20 } else { 10_000 };

/// Counts allocations made by the current thread while counting is on, so
/// the test harness's own threads do not disturb the count.
struct CountingAllocator;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static LIVE_BYTES: Cell<i64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to `System` unchanged; the thread-local
// bookkeeping uses `const` initializers, so it never allocates itself.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        note_bytes(layout.size() as i64);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_allocation();
        note_bytes(layout.size() as i64);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_allocation();
        note_bytes(new_size as i64 - layout.size() as i64);
        // SAFETY: as for `alloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note_bytes(-(layout.size() as i64));
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

fn note_bytes(delta: i64) {
    // `try_with`: as above.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = LIVE_BYTES.try_with(|n| n.set(n.get() + delta));
        }
    });
}

/// The bytes `f` leaves allocated, counting allocations and frees on this
/// thread only.
fn bytes_left_by(f: impl FnOnce()) -> i64 {
    LIVE_BYTES.with(|n| n.set(0));
    COUNTING.with(|on| on.set(true));
    f();
    COUNTING.with(|on| on.set(false));
    LIVE_BYTES.with(Cell::get)
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

/// Index pools, cached and not, barging and fair.
fn index_pools() -> [fn() -> IndexPool; 3] {
    [
        || IndexPool::new(8),
        || {
            IndexPool::builder()
                .capacity(8)
                .thread_cache(false)
                .build()
                .unwrap()
        },
        || IndexPool::builder().capacity(8).fair().build().unwrap(),
    ]
}

/// Owned index guards outlive their pool; once the last is dropped, the
/// pool's state is freed: nothing the pool allocated is left. An owned
/// guard released as a borrowed one releases its index but never its share
/// of the state, which then leaks.
#[test]
fn owned_index_guards_free_the_pool_state_after_the_last_one() {
    for make in index_pools() {
        let run = || {
            let pool = Arc::new(make());
            let guards: Vec<_> = (0..3).map(|_| pool.try_acquire_owned().unwrap()).collect();
            // Released while the pool lives, through this thread's cache.
            drop(pool.try_acquire_owned().unwrap());
            drop(pool);
            drop(guards);
        };
        // The thread's first use of a pool registers its id: once per
        // thread, outside the count.
        run();
        assert_eq!(bytes_left_by(run), 0, "{:?}", make());
    }
}

/// The same for a pool of values: after the pool and its last owned guard
/// go, every value the factory made is dropped, and nothing is left.
#[test]
fn owned_pool_guards_free_the_pool_state_after_the_last_one() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static MADE: AtomicUsize = AtomicUsize::new(0);
    static DROPPED: AtomicUsize = AtomicUsize::new(0);
    struct Counted;
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
    let run = || {
        let pool = Arc::new(Pool::new(8, || {
            MADE.fetch_add(1, Ordering::Relaxed);
            Counted
        }));
        let guards: Vec<_> = (0..3).map(|_| pool.try_acquire_owned().unwrap()).collect();
        drop(pool.try_acquire_owned().unwrap());
        drop(pool);
        drop(guards);
    };
    run();
    assert_eq!(bytes_left_by(run), 0);
    assert_eq!(
        DROPPED.load(Ordering::Relaxed),
        MADE.load(Ordering::Relaxed)
    );
}
