//! Models of the pool around the free list: owned guards, lazy fill and
//! detach, reset, and statistics.

#![cfg(loom)]

use std::sync::Arc;

use loom::alloc::Track;
use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;
use tagpool::{OwnedPoolGuard, Pool, PoolGuard, SharedPoolGuard, TryAcquireError};
use tagpool_loom_tests::{check, drain, uncached};

/// A guard acquired on one thread and dropped on another, while the pool's
/// own thread keeps acquiring.
#[test]
fn owned_guard_dropped_on_another_thread() {
    check("owned_guard_dropped_on_another_thread", 3, || {
        let pool = Arc::new(uncached(2, || 0usize));
        let mut g = pool.try_acquire_owned().unwrap();
        *g += 1;
        let job = thread::spawn(move || {
            *g += 1;
            drop(g);
        });
        if let Ok(mut h) = pool.try_acquire_owned() {
            *h += 10;
        }
        job.join().unwrap();
        let all: Vec<_> = (0..2).filter_map(|_| pool.try_acquire().ok()).collect();
        assert_eq!(all.iter().map(|g| **g).sum::<usize>(), 12);
    });
}

/// The last owned guard, dropped on another thread, drops the pool and every
/// value in it; loom's `Track` reports any value leaked.
#[test]
fn pool_dropped_by_its_last_owned_guard() {
    check("pool_dropped_by_its_last_owned_guard", 3, || {
        let dropped = Arc::new(AtomicUsize::new(0));
        let pool = Arc::new(uncached(2, || Track::new(0usize)));
        let guards = [
            pool.try_acquire_owned().unwrap(),
            pool.try_acquire_owned().unwrap(),
        ];
        drop(pool);
        let handles: Vec<_> = guards
            .into_iter()
            .map(|mut g| {
                let dropped = Arc::clone(&dropped);
                thread::spawn(move || {
                    *g.get_mut() += 1;
                    drop(g);
                    dropped.fetch_add(1, Ordering::Relaxed);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        // `Track` reports a value the last guard did not drop.
        assert_eq!(dropped.load(Ordering::Relaxed), 2);
    });
}

/// A lazy pool runs its factory exactly once per fill; a detached slot is
/// refilled; no value is dropped twice or leaked (`Track`).
#[test]
fn lazy_fill_and_detach() {
    check("lazy_fill_and_detach", 3, || {
        let made = Arc::new(AtomicUsize::new(0));
        let pool = {
            let made = Arc::clone(&made);
            Arc::new(
                Pool::builder(move || Track::new(made.fetch_add(1, Ordering::Relaxed)))
                    .capacity(1)
                    .lazy()
                    .build()
                    .unwrap(),
            )
        };
        let detacher = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.try_acquire().map(PoolGuard::detach).is_ok())
        };
        let used = pool
            .try_acquire_owned()
            .map(|g| *OwnedPoolGuard::detach(g).get_ref() + 1);
        let detached_there = detacher.join().unwrap();
        let detached = usize::from(detached_there) + usize::from(used.is_ok());
        // Every acquire found an empty slot (lazy, then detached), so each
        // one ran the factory exactly once.
        assert_eq!(made.load(Ordering::Relaxed), detached);
        let again = pool.try_acquire().unwrap();
        assert_eq!(*again.get_ref(), detached, "the empty slot was refilled");
        drop(again);
        drain(&pool);
    });
}

/// The reset closure runs exactly once per release, before the slot can be
/// acquired again: every acquirer sees the reset value.
#[test]
fn reset_runs_once_per_release() {
    check("reset_runs_once_per_release", 3, || {
        let resets = Arc::new(AtomicUsize::new(0));
        let pool = {
            let resets = Arc::clone(&resets);
            Arc::new(
                Pool::builder(|| 0usize)
                    .capacity(1)
                    .reset(move |v: &mut usize| {
                        *v = 0;
                        resets.fetch_add(1, Ordering::Relaxed);
                    })
                    .build()
                    .unwrap(),
            )
        };
        let use_once = |pool: &Pool<usize>, mark: usize| -> usize {
            match pool.try_acquire() {
                Ok(mut g) => {
                    assert_eq!(*g, 0, "an acquirer saw a value that was not reset");
                    *g = mark;
                    1
                }
                Err(_) => 0,
            }
        };
        let other = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || use_once(&pool, 1) + use_once(&pool, 2))
        };
        let here = use_once(&pool, 3);
        let releases = here + other.join().unwrap();
        assert_eq!(resets.load(Ordering::Relaxed), releases);
        drain(&pool);
    });
}

/// Once every thread has joined, the statistics agree with what happened.
#[test]
fn stats_consistent_after_join() {
    check("stats_consistent_after_join", 3, || {
        let pool = Arc::new(uncached(2, || ()));
        let holder = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let a = pool.try_acquire();
                let b = pool.try_acquire();
                usize::from(a.is_err()) + usize::from(b.is_err())
            })
        };
        let failed_here = usize::from(pool.try_acquire().is_err());
        let failed = failed_here + holder.join().unwrap();
        let stats = pool.stats();
        assert_eq!((stats.in_use, stats.available), (0, 2));
        assert_eq!(stats.failed_acquires, failed as u64);
        assert!(stats.peak_in_use >= 1 && stats.peak_in_use <= 2);
        if failed > 0 {
            assert_eq!(
                stats.peak_in_use, 2,
                "a failure means both slots were held at once"
            );
        }
    });
}

/// Idle values first: a lazy pool whose factory starts failing while
/// another thread's cache holds two filled values. An acquire that happens
/// after that thread's releases (`released`) takes one of them instead of
/// running the factory on the empty slot it pops; one that races them may
/// fail (with the factory's error, or exhausted while the other thread's
/// cache is busy) but never loses a slot. `run.sh` proves this model fails
/// when the factory runs first (`tagpool_loom_factory_before_idle`).
#[test]
fn idle_value_in_another_cache_is_served_before_a_failing_factory() {
    check(
        "idle_value_in_another_cache_is_served_before_a_failing_factory",
        3,
        || {
            let up = Arc::new(AtomicBool::new(true));
            let factory_up = Arc::clone(&up);
            let pool: Arc<Pool<usize, &'static str>> = Arc::new(
                Pool::try_builder(move || {
                    if factory_up.load(Ordering::SeqCst) {
                        Ok(1)
                    } else {
                        Err("refused")
                    }
                })
                .capacity(4)
                .lazy()
                .thread_cache_size(2)
                .build()
                .unwrap(),
            );
            let released = Arc::new(AtomicBool::new(false));
            let owner = {
                let (pool, released) = (Arc::clone(&pool), Arc::clone(&released));
                thread::spawn(move || {
                    let a = pool.try_acquire().expect("the factory works");
                    let b = pool.try_acquire().expect("the factory works");
                    up.store(false, Ordering::SeqCst);
                    drop((a, b));
                    // Release: the releases happen-before an acquire that reads
                    // `true`.
                    released.store(true, Ordering::Release);
                })
            };
            thread::yield_now();
            let after = released.load(Ordering::Acquire);
            match pool.try_acquire() {
                Ok(g) => assert_eq!(*g, 1),
                Err(TryAcquireError::Factory(_)) => {
                    assert!(
                        !after,
                        "the factory ran (and failed) while a value was idle"
                    )
                }
                Err(TryAcquireError::Exhausted) => {
                    assert!(!after, "exhausted with every slot free")
                }
                Err(e) => panic!("{e:?}"),
            }
            owner.join().unwrap();
            let stats = pool.stats();
            assert_eq!((stats.in_use, stats.available), (0, 4));
            // A third value only from an acquire that raced the owner while
            // the factory still worked.
            assert!(stats.filled == 2 || (!after && stats.filled == 3));
        },
    );
}

/// A shared pooled value read on two threads while its shares drop in
/// either order: the last share's reset (a write of the value) comes after
/// every other share's reads, and the slot goes back exactly once. The
/// value's cell is loom's, so a reset racing a read is reported. `run.sh`
/// proves this model fails with a Relaxed decrement and no fence
/// (`tagpool_loom_share_relaxed_drop`).
#[test]
fn shares_read_on_two_threads_reset_once_after_every_read() {
    check(
        "shares_read_on_two_threads_reset_once_after_every_read",
        3,
        || {
            let resets = Arc::new(AtomicUsize::new(0));
            let counted = Arc::clone(&resets);
            let pool = Arc::new(
                Pool::builder(|| UnsafeCell::new(0usize))
                    .capacity(1)
                    .thread_cache(false)
                    .reset(move |v: &mut UnsafeCell<usize>| {
                        // A write of the value: loom reports it if a share's
                        // read may still run.
                        v.with_mut(|p| unsafe { *p = 0 });
                        counted.fetch_add(1, Ordering::Relaxed);
                    })
                    .build()
                    .unwrap(),
            );
            let mut guard = pool.try_acquire_owned().unwrap();
            guard.with_mut(|p| unsafe { *p = 5 });
            let shared = OwnedPoolGuard::share(guard);
            let other = shared.clone();
            let reader = thread::spawn(move || {
                assert_eq!(other.with(|p| unsafe { *p }), 5);
                drop(other);
            });
            assert_eq!(shared.with(|p| unsafe { *p }), 5);
            drop(shared);
            reader.join().unwrap();
            assert_eq!(
                resets.load(Ordering::Relaxed),
                1,
                "reset once, by the last share"
            );
            let again = pool.try_acquire().expect("the slot came back");
            assert_eq!(again.with(|p| unsafe { *p }), 0);
        },
    );
}

/// `try_unwrap` on one thread races another share's read and drop, in a
/// pool with caches whose handle is already gone: the unwrapped guard
/// writes the value only after the other share's reads (loom's cell
/// reports a race otherwise), every value is dropped once (`Track`), and
/// the last release frees the pool. `run.sh` proves this model fails
/// with a Relaxed load in `try_unwrap` (`tagpool_loom_share_unwrap_relaxed`).
#[test]
fn try_unwrap_races_a_shares_drop_with_the_handle_gone() {
    check(
        "try_unwrap_races_a_shares_drop_with_the_handle_gone",
        3,
        || {
            let pool = Arc::new(
                Pool::builder(|| Track::new(UnsafeCell::new(0usize)))
                    .capacity(2)
                    .thread_cache_size(2)
                    .reset(|v: &mut Track<UnsafeCell<usize>>| {
                        v.get_mut().with_mut(|p| unsafe { *p = 0 })
                    })
                    .build()
                    .unwrap(),
            );
            let guard = pool.try_acquire_owned().unwrap();
            guard.get_ref().with_mut(|p| unsafe { *p = 5 });
            let shared = OwnedPoolGuard::share(guard);
            let other = shared.clone();
            drop(pool);
            let reader = thread::spawn(move || {
                assert_eq!(other.get_ref().with(|p| unsafe { *p }), 5);
                drop(other);
            });
            match SharedPoolGuard::try_unwrap(shared) {
                Ok(guard) => guard.get_ref().with_mut(|p| unsafe { *p = 7 }),
                Err(shared) => drop(shared),
            }
            reader.join().unwrap();
        },
    );
}

/// A pop that read the head before another thread took the slot and
/// shared it reads the share count as the slot's link (a batch pop's walk
/// too, with caches): its CAS fails on the tag and it tries again, and
/// every slot is still there afterwards. (A review found a debug assertion
/// on that garbage link; the word is masked now.)
#[test]
fn a_stale_pop_reads_a_share_count_as_a_link() {
    for cache in [0, 2] {
        check("a_stale_pop_reads_a_share_count_as_a_link", 3, move || {
            let pool = Arc::new(
                Pool::builder(|| 0usize)
                    .capacity(2)
                    .thread_cache_size(cache)
                    .build()
                    .unwrap(),
            );
            let other = Arc::clone(&pool);
            let popper = thread::spawn(move || {
                let _ = other.try_acquire();
            });
            if let Ok(guard) = pool.try_acquire_owned() {
                let shared = OwnedPoolGuard::share(guard);
                let clones: Vec<_> = (0..3).map(|_| shared.clone()).collect();
                assert_eq!(SharedPoolGuard::strong_count(&shared), 4);
                drop(clones);
                drop(shared);
            }
            popper.join().unwrap();
            let held: Vec<_> = (0..2).map(|_| pool.try_acquire().unwrap()).collect();
            assert_ne!(PoolGuard::index(&held[0]), PoolGuard::index(&held[1]));
        });
    }
}
