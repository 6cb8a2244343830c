//! Per-thread caches keep the capacity exact: slots parked in the caches of
//! live, parked and exited threads are found by every acquire that needs
//! them, waiting acquires included, and `stats()` counts them.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Duration;

use tagpool::{BuildError, OwnedPoolGuard, Pool, PoolGuard};

/// Long enough never to fire on a loaded CI machine; a lost slot or a lost
/// wake-up fails the test instead of hanging it.
const PATIENCE: Duration = Duration::from_secs(30);

const ROUNDS: usize = if cfg!(miri) { 20 } else { 10_000 };

fn cached_pool(capacity: usize, cache: usize) -> Pool<u64> {
    Pool::builder(|| 0u64)
        .capacity(capacity)
        .thread_cache_size(cache)
        .build()
        .expect("valid sizes")
}

/// Takes every slot, checking each index once.
fn take_all(pool: &Pool<u64>) -> Vec<PoolGuard<'_, u64>> {
    let all: Vec<_> = (0..pool.capacity())
        .map(|i| {
            pool.try_acquire()
                .unwrap_or_else(|_| panic!("slot {i} of {} is lost", pool.capacity()))
        })
        .collect();
    let mut indices: Vec<_> = all.iter().map(PoolGuard::index).collect();
    indices.sort_unstable();
    indices.dedup();
    assert_eq!(
        indices.len(),
        pool.capacity(),
        "an index was handed out twice"
    );
    assert!(pool.try_acquire().is_err(), "more slots than the capacity");
    all
}

/// Parks slots in a thread's cache: acquire and release `n` at once.
fn park_some(pool: &Pool<u64>, n: usize) {
    let held: Vec<_> = (0..n).map(|_| pool.try_acquire().unwrap()).collect();
    drop(held);
}

#[test]
fn default_caches_are_sized_from_the_capacity() {
    let debug = |capacity| format!("{:?}", Pool::new(capacity, || 0u8));
    assert!(debug(1).contains("thread_cache: 0"), "{}", debug(1));
    assert!(debug(2).contains("thread_cache: 2"), "{}", debug(2));
    assert!(debug(16).contains("thread_cache: 2"), "{}", debug(16));
    assert!(debug(31).contains("thread_cache: 2"), "{}", debug(31));
    assert!(debug(32).contains("thread_cache: 4"), "{}", debug(32));
    assert!(debug(100).contains("thread_cache: 12"), "{}", debug(100));
    assert!(debug(1024).contains("thread_cache: 64"), "{}", debug(1024));
    assert!(debug(60_000).contains("thread_cache: 64"));
}

/// Takes every slot (emptying every cache), releases `n` of them on this
/// thread, and returns how many slots the caches then keep.
fn cached_after_releasing(pool: &Pool<u64>, n: usize) -> usize {
    let mut all: Vec<_> = (0..pool.capacity())
        .map(|_| pool.try_acquire().unwrap())
        .collect();
    assert_eq!(pool.stats().cached, 0);
    all.truncate(pool.capacity() - n);
    pool.stats().cached
}

#[test]
fn default_caches_shrink_to_each_threads_share_as_threads_arrive() {
    let threads = if cfg!(miri) { 4 } else { 16 };
    // 8 per thread by default (64 / 8); a share of 64 / 16 = 4 (miri:
    // capacity 16, 2 by default, a share of 16 / 4 = 4 leaves it at 2).
    let capacity = if cfg!(miri) { 16 } else { 64 };
    let pool = Pool::new(capacity, || 0u64);
    let size = if cfg!(miri) { 2 } else { 8 };
    assert_eq!(
        cached_after_releasing(&pool, size),
        size,
        "one thread: the whole size"
    );
    // Every thread makes its magazine while all of them are alive (a
    // thread that exits gives its id, and so its magazine, to the next).
    let barrier = std::sync::Barrier::new(threads);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                // Waiting, not `try_acquire`: while other threads' caches
                // fill, a refused try is allowed (no quiescence).
                drop(pool.acquire().unwrap());
                barrier.wait();
            });
        }
    });
    let share = (capacity / threads).min(size);
    let kept = cached_after_releasing(&pool, size);
    assert!(kept <= share, "{kept} cached, above a share of {share}");
    // An explicit size is kept whatever the thread count.
    let pool = Pool::builder(|| 0u64)
        .capacity(capacity)
        .thread_cache_size(size)
        .build()
        .unwrap();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                // Waiting, not `try_acquire`: while other threads' caches
                // fill, a refused try is allowed (no quiescence).
                drop(pool.acquire().unwrap());
                barrier.wait();
            });
        }
    });
    assert_eq!(cached_after_releasing(&pool, size), size);
}

#[test]
fn a_cache_above_the_maximum_is_an_error() {
    let err = Pool::builder(|| 0u8)
        .capacity(100)
        .thread_cache_size(65)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::ThreadCacheTooLarge {
            requested: 65,
            max: 64
        }
    );
    assert_eq!(
        err.to_string(),
        "thread cache size 65 is above the maximum of 64"
    );
    // 0 switches caches off; a cache larger than the capacity is allowed.
    let pool = cached_pool(3, 0);
    assert_eq!(take_all(&pool).len(), 3);
    let pool = cached_pool(3, 64);
    assert_eq!(take_all(&pool).len(), 3);
}

#[test]
fn slots_cached_by_exited_threads_are_found() {
    let pool = cached_pool(16, 8);
    thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| park_some(&pool, 3));
        }
    });
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available), (0, 16));
    assert!(stats.cached > 0, "the exited threads left slots cached");
    let all = take_all(&pool);
    assert_eq!(pool.stats().cached, 0);
    drop(all);
}

#[test]
fn slots_cached_by_a_parked_thread_are_found() {
    let pool = cached_pool(8, 8);
    let (parked_tx, parked_rx) = mpsc::channel();
    let (wake_tx, wake_rx) = mpsc::channel::<()>();
    thread::scope(|s| {
        let pool = &pool;
        s.spawn(move || {
            park_some(pool, 8);
            parked_tx.send(()).unwrap();
            // Alive, blocked, holding the whole pool in its cache.
            wake_rx.recv().unwrap();
            // Its cache was revoked; it still works.
            park_some(pool, 8);
        });
        parked_rx.recv().unwrap();
        assert_eq!(pool.stats().cached, 8);
        drop(take_all(pool));
        wake_tx.send(()).unwrap();
    });
    drop(take_all(&pool));
}

#[test]
fn a_drained_cache_is_taken_back_empty() {
    // A thread parks the whole pool in its cache; another takes it all (the
    // first cache is drained) and holds it. The first thread's next acquire
    // must find nothing, and its cache must count as empty throughout.
    let pool = cached_pool(8, 8);
    let (parked_tx, parked_rx) = mpsc::channel();
    let (taken_tx, taken_rx) = mpsc::channel::<()>();
    let (checked_tx, checked_rx) = mpsc::channel::<()>();
    thread::scope(|s| {
        let pool = &pool;
        s.spawn(move || {
            park_some(pool, 8);
            parked_tx.send(()).unwrap();
            taken_rx.recv().unwrap();
            assert!(pool.try_acquire().is_err(), "another thread holds all");
            checked_tx.send(()).unwrap();
        });
        parked_rx.recv().unwrap();
        let all = take_all(pool);
        assert_eq!(all.len(), 8);
        let stats = pool.stats();
        assert_eq!((stats.in_use, stats.available, stats.cached), (8, 0, 0));
        taken_tx.send(()).unwrap();
        checked_rx.recv().unwrap();
        drop(all);
    });
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available), (0, 8));
    drop(take_all(&pool));
}

#[test]
fn a_release_is_visible_to_the_next_acquire_on_another_thread() {
    // Capacity 1, two threads strictly alternating: with caches forced on,
    // every acquire must revoke the other thread's cache.
    for cache in [1, 2] {
        let pool = cached_pool(1, cache);
        let (to_b, from_a) = mpsc::channel::<()>();
        let (to_a, from_b) = mpsc::channel::<()>();
        thread::scope(|s| {
            let pool = &pool;
            s.spawn(move || {
                for round in 0..ROUNDS {
                    from_a.recv().unwrap();
                    let g = pool.try_acquire();
                    assert!(g.is_ok(), "B failed in round {round}");
                    drop(g);
                    to_a.send(()).unwrap();
                }
            });
            for round in 0..ROUNDS {
                let g = pool.try_acquire();
                assert!(g.is_ok(), "A failed in round {round}");
                drop(g);
                to_b.send(()).unwrap();
                from_b.recv().unwrap();
            }
        });
        assert_eq!(pool.stats().failed_acquires, 0);
    }
}

#[test]
fn a_waiter_finds_slots_cached_by_an_idle_thread() {
    let pool = cached_pool(8, 8);
    let (parked_tx, parked_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    thread::scope(|s| {
        let pool = &pool;
        s.spawn(move || {
            park_some(pool, 8);
            parked_tx.send(()).unwrap();
            done_rx.recv().unwrap();
        });
        parked_rx.recv().unwrap();
        // Every slot sits in the idle thread's cache: waiting acquires must
        // revoke it rather than wait for a release that never comes.
        let all: Vec<_> = (0..8)
            .map(|_| pool.acquire_timeout(PATIENCE).expect("a cached slot"))
            .collect();
        assert!(pool.try_acquire().is_err());
        drop(all);
        done_tx.send(()).unwrap();
    });
}

#[test]
fn a_waiter_is_woken_by_a_release_into_a_cache() {
    let pool = cached_pool(4, 4);
    let all = take_all(&pool);
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let g = pool.acquire_timeout(PATIENCE).map(|g| *g);
            assert!(g.is_ok(), "the release was lost in a cache");
        });
        // Counted as waiting, then most likely parked (a waiter that is
        // not parked yet finds the slot anyway).
        while pool.stats().waits == 0 {
            thread::yield_now();
        }
        thread::sleep(Duration::from_millis(20));
        // Released into this thread's cache, which must flush to the waiter.
        drop(all);
        waiter.join().unwrap();
    });
}

#[test]
fn many_waiters_and_cached_releasers_lose_nothing() {
    let pool = Arc::new(cached_pool(4, 2));
    let served = Arc::new(AtomicUsize::new(0));
    let threads = 6;
    let per_thread = if cfg!(miri) { 5 } else { 2_000 };
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (pool, served, barrier) =
                (Arc::clone(&pool), Arc::clone(&served), Arc::clone(&barrier));
            thread::spawn(move || {
                barrier.wait();
                for _ in 0..per_thread {
                    let a = pool.acquire_timeout(PATIENCE).expect("no lost wake-up");
                    let b = pool.try_acquire();
                    served.fetch_add(1, Ordering::Relaxed);
                    drop((a, b));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(served.load(Ordering::Relaxed), threads * per_thread);
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available), (0, 4));
    assert!(stats.peak_in_use <= 4);
    drop(take_all(&pool));
}

#[test]
fn stats_are_exact_at_quiescence() {
    let pool = cached_pool(64, 16);
    let held: Vec<_> = (0..5).map(|_| pool.try_acquire().unwrap()).collect();
    thread::scope(|s| {
        for n in 1..=3 {
            let pool = &pool;
            s.spawn(move || park_some(pool, n * 4));
        }
    });
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available), (5, 59));
    assert!(stats.cached <= stats.available);
    assert!(stats.peak_in_use <= 64);
    drop(held);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn no_thread_limit() {
    let pool = Arc::new(cached_pool(64, 8));
    let threads = if cfg!(miri) { 8 } else { 300 };
    // Many threads, most of them gone by the time later ones start: their
    // ids and caches are reused, and nothing they cached is lost.
    for wave in 0..threads / 50 + 1 {
        let handles: Vec<_> = (0..50.min(threads))
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    // At most 50 of the 64 slots are held at once, but a
                    // `try_acquire` may fail while other threads are inside
                    // an operation on the caches that hold the free slots
                    // (its guarantee is for quiescence; seen on 16 cores):
                    // a timed wait finds them. A slot lost for good fails
                    // the wait, and the count below.
                    let g = pool.acquire_owned_timeout(Duration::from_secs(10));
                    assert!(g.is_ok(), "wave {wave}: no slot in 10 s");
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
    assert_eq!(pool.stats().available, 64);
    drop(take_all(&pool));
}

thread_local! {
    static KEPT: RefCell<Vec<OwnedPoolGuard<u64>>> = const { RefCell::new(Vec::new()) };
}

#[test]
fn guards_dropped_by_thread_local_destructors_come_back() {
    let pool = Arc::new(cached_pool(32, 8));
    let handle = {
        let pool = Arc::clone(&pool);
        // Not a scoped thread: `join` must wait for the thread-local
        // destructors, which run after the closure returns.
        thread::spawn(move || {
            let guards: Vec<_> = (0..3).map(|_| pool.try_acquire_owned().unwrap()).collect();
            // Dropped while the thread exits, after or before its cache
            // entry's own bookkeeping is torn down.
            KEPT.with(|k| k.borrow_mut().extend(guards));
        })
    };
    handle.join().unwrap();
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available), (0, 32));
    drop(take_all(&pool));
}

thread_local! {
    static KEPT_ELSEWHERE: RefCell<Vec<OwnedPoolGuard<u64>>> = const { RefCell::new(Vec::new()) };
}

#[test]
fn a_thread_that_only_releases_keeps_the_slots_in_its_cache() {
    let pool = Arc::new(cached_pool(64, 8));
    let guards: Vec<_> = (0..4).map(|_| pool.try_acquire_owned().unwrap()).collect();
    thread::scope(|s| {
        s.spawn(|| {
            // A consumer: it never acquires, and its releases stay local.
            drop(guards);
            assert_eq!(pool.stats().cached, 4, "{:?}", pool.stats());
        });
    });
    // The thread's exit left those slots behind; they are found.
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available), (0, 64));
    drop(take_all(&pool));
}

thread_local! {
    static KEPT_EARLY: RefCell<Vec<OwnedPoolGuard<u64>>> = const { RefCell::new(Vec::new()) };
}

#[test]
fn guards_dropped_after_the_thread_released_its_id_come_back() {
    let pool = Arc::new(cached_pool(32, 8));
    let handle = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || {
            // Registered before the thread's id: destroyed after it, so
            // these releases find no cache and go to the free list.
            KEPT_EARLY.with(|_| ());
            let guards: Vec<_> = (0..3).map(|_| pool.try_acquire_owned().unwrap()).collect();
            KEPT_EARLY.with(|k| k.borrow_mut().extend(guards));
            // More slots parked in this thread's cache, left at exit.
            drop(
                (0..5)
                    .map(|_| pool.try_acquire().unwrap())
                    .collect::<Vec<_>>(),
            );
        })
    };
    handle.join().unwrap();
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available), (0, 32));
    drop(take_all(&pool));
}

thread_local! {
    static KEPT_LAST: RefCell<Option<OwnedPoolGuard<u64>>> = const { RefCell::new(None) };
}

/// A guard released by a thread-local destructor that runs after the
/// thread freed its id (the destructors run in the reverse order of
/// registration, as `guards_dropped_after_the_thread_released_its_id_come_back`
/// relies on) goes to the free list: the thread's cache entry belongs to
/// the id's next owner now. A thread that freed its id but kept its memo of
/// the entry would push the index into that entry (where the id's next
/// owner may be working), which the cached count shows.
#[test]
fn a_guard_released_after_the_thread_freed_its_id_bypasses_its_old_cache() {
    let pool = Arc::new(cached_pool(32, 8));
    let handle = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || {
            // Registered before the thread's id: destroyed after it.
            KEPT_LAST.with(|_| ());
            // The thread's last use of any pool: its memo points at its
            // entry of `pool`, which keeps room for the late release.
            let guard = pool.try_acquire_owned().unwrap();
            let cached = pool.stats().cached;
            KEPT_LAST.with(|k| *k.borrow_mut() = Some(guard));
            cached
        })
    };
    let cached = handle.join().unwrap();
    let stats = pool.stats();
    assert_eq!(
        (stats.in_use, stats.available, stats.cached),
        (0, 32, cached),
        "the late release went into the exited thread's cache: {stats:?}"
    );
    drop(take_all(&pool));
}

#[test]
fn guards_of_an_unused_pool_dropped_by_thread_local_destructors_come_back() {
    let pool = Arc::new(cached_pool(32, 8));
    let other = Arc::new(cached_pool(32, 8));
    let guards: Vec<_> = (0..3).map(|_| pool.try_acquire_owned().unwrap()).collect();
    let handle = {
        let other = Arc::clone(&other);
        thread::spawn(move || {
            // The thread has a cache entry in `other`, none in `pool`;
            // `pool`'s guards are dropped while the thread exits, so their
            // release makes the thread's entry then, or (after the thread's
            // id is released) goes to the free list.
            drop(other.try_acquire().unwrap());
            KEPT_ELSEWHERE.with(|k| k.borrow_mut().extend(guards));
        })
    };
    handle.join().unwrap();
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available), (0, 32));
    drop(take_all(&pool));
}

#[test]
fn caches_off_hold_nothing() {
    let pool = Pool::builder(|| 0u64)
        .capacity(1024)
        .thread_cache(false)
        .build()
        .unwrap();
    park_some(&pool, 10);
    assert_eq!(pool.stats().cached, 0);
    let on = cached_pool(1024, 64);
    park_some(&on, 10);
    assert!(on.stats().cached >= 10);
    assert_eq!(on.stats().available, 1024);
}

#[test]
fn one_acquire_on_a_fresh_pool_reads_a_peak_of_one() {
    let pool = Pool::new(1024, || 0u8);
    drop(pool.try_acquire().unwrap());
    let stats = pool.stats();
    assert!(stats.cached > 1, "the acquire refilled a cache: {stats:?}");
    assert_eq!(stats.peak_in_use, 1, "{stats:?}");
}

#[test]
fn the_peak_counts_every_slot_taken_from_a_cache() {
    // One thread alone, whose cache never overflows nor is revoked: the
    // peak is exact, whether or not its guards are still held, and
    // whether or not it refilled again since.
    for held in [2, 5, 20, 31, 32, 33, 40] {
        let pool = Pool::new(1024, || 0u8);
        let guards: Vec<_> = (0..held).map(|_| pool.try_acquire().unwrap()).collect();
        assert_eq!(pool.stats().peak_in_use, held, "while held");
        drop(guards);
        assert_eq!(pool.stats().peak_in_use, held, "after the release");
        // Another round of fewer keeps the figure, and a refill folds it.
        drop(
            (0..held / 2)
                .map(|_| pool.try_acquire().unwrap())
                .collect::<Vec<_>>(),
        );
        drop(
            (0..100)
                .map(|_| pool.try_acquire().unwrap())
                .collect::<Vec<_>>(),
        );
        assert_eq!(pool.stats().peak_in_use, 100, "held {held}, then 100");
    }
}

#[test]
fn the_peak_bounds_the_slots_held_by_several_threads() {
    let pool = Pool::new(1024, || 0u8);
    let held = Barrier::new(4);
    thread::scope(|s| {
        for n in 1..=4 {
            let (pool, held) = (&pool, &held);
            s.spawn(move || {
                let guards: Vec<_> = (0..n * 7).map(|_| pool.try_acquire().unwrap()).collect();
                held.wait();
                drop(guards);
            });
        }
    });
    let stats = pool.stats();
    // 7 + 14 + 21 + 28 held at once; other threads' caches (at most 64
    // slots each) may count too.
    assert!(stats.peak_in_use >= 70, "{stats:?}");
    assert!(stats.peak_in_use <= 70 + 3 * 64, "{stats:?}");
}
