//! Waiting for a slot: `acquire`, `acquire_timeout` and their owned forms.
//!
//! No test asserts a tight timing: only "not before the timeout" and
//! "eventually".

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use tagpool::Pool;

mod support;
use support::{watchdog, WAITING};

/// Waits until `pool` reports at least `n` waiting acquires, then a little
/// longer so that they are most likely parked (correctness never depends on
/// it: a waiter that has not parked yet simply finds the slot).
fn until_waiting<T>(pool: &Pool<T>, n: u64) {
    while pool.stats().waits < n {
        thread::sleep(Duration::from_millis(1));
    }
    thread::sleep(Duration::from_millis(10));
}

#[test]
fn a_waiter_wakes_when_another_thread_releases() {
    let _watchdog = watchdog("a_waiter_wakes_when_another_thread_releases", WAITING);
    let pool = Pool::new(1, || 0u32);
    let held = pool.acquire().unwrap();
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut g = pool.acquire().unwrap();
            *g += 1;
        });
        until_waiting(&pool, 1);
        drop(held);
        waiter.join().unwrap();
    });
    assert_eq!(*pool.try_acquire().unwrap(), 1);
    assert_eq!(pool.stats().waits, 1);
}

#[test]
fn acquire_timeout_returns_none_no_sooner_than_its_timeout() {
    let _watchdog = watchdog(
        "acquire_timeout_returns_none_no_sooner_than_its_timeout",
        WAITING,
    );
    let pool = Pool::new(1, || ());
    let _held = pool.acquire().unwrap();
    let timeout = Duration::from_millis(30);
    let start = Instant::now();
    assert!(pool.acquire_timeout(timeout).is_err());
    assert!(start.elapsed() >= timeout, "returned before its timeout");
    let stats = pool.stats();
    assert_eq!((stats.waits, stats.timeouts), (1, 1));
}

#[test]
fn acquire_timeout_gets_a_slot_released_while_it_waits() {
    let _watchdog = watchdog(
        "acquire_timeout_gets_a_slot_released_while_it_waits",
        WAITING,
    );
    let pool = Pool::new(1, || ());
    let held = pool.acquire().unwrap();
    thread::scope(|s| {
        // Longer than the watchdog: a lost wake-up is reported as a hang,
        // never as a timeout on a slow machine.
        let waiter = s.spawn(|| pool.acquire_timeout(2 * WAITING).is_ok());
        until_waiting(&pool, 1);
        drop(held);
        assert!(waiter.join().unwrap());
    });
    assert_eq!(pool.stats().timeouts, 0);
}

#[test]
fn a_zero_timeout_still_takes_a_free_slot() {
    let _watchdog = watchdog("a_zero_timeout_still_takes_a_free_slot", WAITING);
    let pool = Pool::new(1, || ());
    assert!(pool.acquire_timeout(Duration::ZERO).is_ok());
    let huge = Duration::from_secs(u64::MAX);
    assert!(
        pool.acquire_timeout(huge).is_ok(),
        "an unrepresentable deadline waits unbounded"
    );
}

#[test]
fn many_waiters_on_a_pool_of_one_all_finish() {
    let _watchdog = watchdog("many_waiters_on_a_pool_of_one_all_finish", WAITING);
    const THREADS: usize = 8;
    let rounds = if cfg!(miri) { 3 } else { 500 };
    let pool = Pool::new(1, || 0usize);
    let barrier = Barrier::new(THREADS);
    thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                barrier.wait();
                for _ in 0..rounds {
                    *pool.acquire().unwrap() += 1;
                }
            });
        }
    });
    assert_eq!(*pool.try_acquire().unwrap(), THREADS * rounds);
}

#[test]
fn every_parked_waiter_is_woken_by_its_own_release() {
    let _watchdog = watchdog("every_parked_waiter_is_woken_by_its_own_release", WAITING);
    // Two releases in a row while two threads wait: each must wake one
    // waiter (a second notification must not be swallowed by the first).
    let pool = Pool::new(2, || ());
    let (a, b) = (pool.acquire().unwrap(), pool.acquire().unwrap());
    thread::scope(|s| {
        let w1 = s.spawn(|| drop(pool.acquire().unwrap()));
        let w2 = s.spawn(|| drop(pool.acquire().unwrap()));
        until_waiting(&pool, 2);
        drop(a);
        drop(b);
        w1.join().unwrap();
        w2.join().unwrap();
    });
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn owned_waiters_wake_on_release_from_another_thread() {
    let _watchdog = watchdog("owned_waiters_wake_on_release_from_another_thread", WAITING);
    let pool = Arc::new(Pool::new(1, || 0u8));
    let held = pool.acquire_owned().unwrap();
    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let g = pool.acquire_owned().unwrap();
                drop(g);
                // Longer than the watchdog, as above.
                pool.acquire_owned_timeout(2 * WAITING).is_ok()
            })
        })
        .collect();
    until_waiting(&pool, 1);
    thread::spawn(move || drop(held)).join().unwrap();
    for w in waiters {
        assert!(w.join().unwrap());
    }
}

#[test]
fn acquire_owned_timeout_times_out() {
    let _watchdog = watchdog("acquire_owned_timeout_times_out", WAITING);
    let pool = Arc::new(Pool::new(1, || 0u8));
    let _held = pool.acquire_owned().unwrap();
    let start = Instant::now();
    assert!(pool
        .acquire_owned_timeout(Duration::from_millis(20))
        .is_err());
    assert!(start.elapsed() >= Duration::from_millis(20));
}

#[test]
fn a_waiter_gets_a_slot_whose_reset_panicked() {
    let _watchdog = watchdog("a_waiter_gets_a_slot_whose_reset_panicked", WAITING);
    let resets = Arc::new(AtomicUsize::new(0));
    let pool = {
        let resets = Arc::clone(&resets);
        Pool::builder(|| 5u32)
            .capacity(1)
            .reset(move |_: &mut u32| {
                if resets.fetch_add(1, Ordering::SeqCst) == 0 {
                    panic!("first reset fails");
                }
            })
            .build()
            .unwrap()
    };
    let held = pool.acquire().unwrap();
    thread::scope(|s| {
        let waiter = s.spawn(|| *pool.acquire().unwrap());
        until_waiting(&pool, 1);
        let released = panic::catch_unwind(AssertUnwindSafe(move || drop(held)));
        assert!(
            released.is_err(),
            "the reset panic propagates to the releaser"
        );
        assert_eq!(
            waiter.join().unwrap(),
            5,
            "the waiter got a freshly made value"
        );
    });
}

#[test]
fn timed_out_waiters_do_not_swallow_wake_ups() {
    let _watchdog = watchdog("timed_out_waiters_do_not_swallow_wake_ups", WAITING);
    // Waiters that give up race with releases; whoever is still waiting must
    // get the slot. Every `acquire` below must return.
    let rounds = if cfg!(miri) { 2 } else { 300 };
    let pool = Pool::new(1, || ());
    thread::scope(|s| {
        for t in 0..4u64 {
            let pool = &pool;
            s.spawn(move || {
                for i in 0..rounds {
                    if (i + t) % 2 == 0 {
                        drop(pool.acquire_timeout(Duration::from_micros(50)));
                    } else {
                        drop(pool.acquire().unwrap());
                    }
                }
            });
        }
    });
    assert_eq!(pool.stats().in_use, 0);
}
