//! `Pool::close` and fair pools (`Builder::fair`), with blocking waiters.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::Duration;

use tagpool::{AcquireError, AcquireTimeoutError, BuildError, Pool, TryAcquireError};

mod support;
use support::{watchdog, WAITING};

/// Spins until `n` threads wait on `pool`.
fn until_threads<T>(pool: &Pool<T>, n: usize) {
    while pool.stats().waiting_threads != n {
        thread::yield_now();
    }
}

fn pool_of(capacity: usize, fair: bool) -> Pool<u64> {
    let builder = Pool::builder(|| 0).capacity(capacity);
    if fair { builder.fair() } else { builder }.build().unwrap()
}

#[test]
fn close_ends_every_blocked_wait_with_closed() {
    let _watchdog = watchdog("close_ends_every_blocked_wait_with_closed", WAITING);
    for fair in [false, true] {
        let pool = Arc::new(pool_of(1, fair));
        let held = pool.try_acquire().unwrap();
        let waiters: Vec<_> = (0..3)
            .map(|i| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || match i {
                    0 => pool
                        .acquire()
                        .map(|_| ())
                        .map_err(AcquireTimeoutError::from),
                    1 => pool
                        .acquire_owned()
                        .map(|_| ())
                        .map_err(AcquireTimeoutError::from),
                    _ => pool.acquire_timeout(Duration::from_secs(600)).map(|_| ()),
                })
            })
            .collect();
        until_threads(&pool, 3);
        assert!(pool.close());
        for waiter in waiters {
            assert_eq!(waiter.join().unwrap(), Err(AcquireTimeoutError::Closed));
        }
        assert_eq!(pool.try_acquire().map(|_| ()), Err(TryAcquireError::Closed));
        assert_eq!(pool.acquire().map(|_| ()), Err(AcquireError::Closed));
        drop(held);
        let stats = pool.stats();
        assert!(stats.closed);
        assert_eq!(
            (stats.in_use, stats.available, stats.waiting_threads),
            (0, 1, 0)
        );
        assert_eq!(
            stats.failed_acquires, 0,
            "a closed pool's refusals are not failures"
        );
    }
}

#[test]
fn a_closed_pool_hands_out_no_cached_slot_on_any_thread() {
    let _watchdog = watchdog(
        "a_closed_pool_hands_out_no_cached_slot_on_any_thread",
        WAITING,
    );
    let pool = Pool::builder(|| 0u64).capacity(256).build().unwrap();
    let cached_here = |pool: &Pool<u64>| {
        let held: Vec<_> = (0..8).map(|_| pool.try_acquire().unwrap()).collect();
        drop(held); // into this thread's cache
    };
    let closed = Barrier::new(2);
    let parked = Barrier::new(2);
    thread::scope(|s| {
        s.spawn(|| {
            cached_here(&pool);
            parked.wait();
            closed.wait();
            assert_eq!(pool.try_acquire().map(|_| ()), Err(TryAcquireError::Closed));
        });
        cached_here(&pool);
        parked.wait();
        assert!(pool.stats().cached > 0, "the test needs cached slots");
        assert!(pool.close());
        assert_eq!(pool.stats().cached, 0, "close empties every cache");
        assert_eq!(pool.try_acquire().map(|_| ()), Err(TryAcquireError::Closed));
        closed.wait();
    });
    // Releases after the close go on, and stay out of the caches.
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available, stats.cached), (0, 256, 0));
}

#[test]
fn guards_out_at_close_are_released_and_every_value_dropped_once() {
    static DROPS: AtomicUsize = AtomicUsize::new(0);
    struct Counted;
    impl Drop for Counted {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
        }
    }
    for fair in [false, true] {
        DROPS.store(0, Ordering::SeqCst);
        let builder = Pool::builder(|| Counted).capacity(64);
        let pool = Arc::new(if fair { builder.fair() } else { builder }.build().unwrap());
        let borrowed = pool.try_acquire().unwrap();
        let owned = pool.try_acquire_owned().unwrap();
        pool.close();
        drop(borrowed);
        let handle = Arc::clone(&pool);
        drop(pool);
        drop(handle); // the owned guard keeps the values
        assert_eq!(DROPS.load(Ordering::SeqCst), 0);
        thread::spawn(move || drop(owned)).join().unwrap();
        assert_eq!(DROPS.load(Ordering::SeqCst), 64, "each value dropped once");
    }
}

/// Threads acquire (blocking, with and without timeouts) and release while
/// another closes: every acquire ends with a slot or `Closed`, those after
/// the close with `Closed`, and the pool ends whole.
#[test]
fn close_racing_acquires_and_releases() {
    let _watchdog = watchdog("close_racing_acquires_and_releases", WAITING);
    let rounds = if cfg!(miri) { 3 } else { 40 };
    for round in 0..rounds {
        for (fair, capacity) in [(false, 2), (true, 2), (false, 64)] {
            let pool = pool_of(capacity, fair);
            let closed = AtomicBool::new(false);
            thread::scope(|s| {
                for t in 0..3u64 {
                    let (pool, closed) = (&pool, &closed);
                    s.spawn(move || loop {
                        let was_closed = closed.load(Ordering::SeqCst);
                        let got = if t == 0 {
                            pool.acquire_timeout(Duration::from_millis(1))
                        } else {
                            pool.acquire().map_err(AcquireTimeoutError::from)
                        };
                        match got {
                            Ok(mut guard) => {
                                assert!(!was_closed, "a slot after the close returned");
                                *guard += 1;
                                let _second = pool.try_acquire();
                            }
                            Err(AcquireTimeoutError::Timeout) => {}
                            Err(_closed) => return,
                        }
                    });
                }
                thread::sleep(Duration::from_micros(50 * (round % 5)));
                pool.close();
                closed.store(true, Ordering::SeqCst);
            });
            let stats = pool.stats();
            assert_eq!((stats.in_use, stats.available), (0, capacity));
            assert_eq!((stats.waiting_threads, stats.cached), (0, 0));
        }
    }
}

#[test]
fn a_fair_pool_with_a_thread_cache_is_an_error() {
    let err = Pool::builder(|| 0u8)
        .capacity(1024)
        .fair()
        .thread_cache_size(8)
        .build()
        .unwrap_err();
    assert_eq!(err, BuildError::FairWithThreadCache);
    assert_eq!(err.to_string(), "a fair pool cannot have per-thread caches");
    // Switching caches off, or leaving the size to the default, is fine.
    let pool = Pool::builder(|| 0u8).capacity(1024).fair().build().unwrap();
    drop(pool.try_acquire().unwrap());
    assert_eq!(pool.stats().cached, 0);
}

#[test]
fn fair_threads_are_served_in_arrival_order() {
    let _watchdog = watchdog("fair_threads_are_served_in_arrival_order", WAITING);
    let pool = pool_of(1, true);
    let order = Mutex::new(Vec::new());
    thread::scope(|s| {
        let held = pool.acquire().unwrap();
        for i in 0..4 {
            let (pool, order) = (&pool, &order);
            s.spawn(move || {
                let guard = pool.acquire().unwrap();
                order.lock().unwrap().push(i);
                drop(guard);
            });
            until_threads(pool, i + 1);
        }
        // A barging thread would find the slot free between hand-offs.
        drop(held);
    });
    assert_eq!(*order.lock().unwrap(), [0, 1, 2, 3]);
}

#[test]
fn a_fair_waiter_that_times_out_leaves_the_queue() {
    let _watchdog = watchdog("a_fair_waiter_that_times_out_leaves_the_queue", WAITING);
    let pool = pool_of(1, true);
    thread::scope(|s| {
        let held = pool.acquire().unwrap();
        let impatient = s.spawn(|| pool.acquire_timeout(Duration::from_millis(20)).map(|_| ()));
        // It has begun to wait (it may have timed out already: on a slow
        // machine, or under miri's clock, 20 ms pass while this spins, so
        // waiting for it to be seen waiting could wait forever).
        while pool.stats().waits == 0 {
            thread::yield_now();
        }
        let patient = s.spawn(|| *pool.acquire().unwrap());
        assert_eq!(impatient.join().unwrap(), Err(AcquireTimeoutError::Timeout));
        until_threads(&pool, 1);
        drop(held); // to the patient waiter, not to the one who left
        assert_eq!(patient.join().unwrap(), 0);
    });
    let stats = pool.stats();
    assert_eq!(
        (stats.timeouts, stats.waiting_threads, stats.available),
        (1, 0, 1)
    );
    // The queue is empty again: releases push, acquires pop.
    let a = pool.try_acquire().unwrap();
    drop(a);
    assert!(pool.try_acquire().is_ok());
}

#[test]
fn fair_pools_conserve_slots_under_contention() {
    let _watchdog = watchdog("fair_pools_conserve_slots_under_contention", WAITING);
    let rounds = if cfg!(miri) { 20 } else { 2_000 };
    let pool = pool_of(2, true);
    thread::scope(|s| {
        for t in 0..4 {
            let pool = &pool;
            s.spawn(move || {
                for i in 0..rounds {
                    let mut guard = if (t + i) % 5 == 0 {
                        match pool.acquire_timeout(Duration::from_micros(20)) {
                            Ok(guard) => guard,
                            Err(_) => continue,
                        }
                    } else {
                        pool.acquire().unwrap()
                    };
                    *guard += 1;
                }
            });
        }
    });
    let stats = pool.stats();
    assert_eq!(
        (stats.in_use, stats.available, stats.waiting_threads),
        (0, 2, 0)
    );
    let both = (pool.try_acquire().unwrap(), pool.try_acquire().unwrap());
    assert_ne!(
        tagpool::PoolGuard::index(&both.0),
        tagpool::PoolGuard::index(&both.1)
    );
}
