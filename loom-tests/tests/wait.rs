//! Models of waiting: no release while a thread waits is ever lost.
//!
//! loom reports a deadlock if a waiter stays parked with no thread left to
//! wake it, so each model passing means every waiter completes in every
//! explored interleaving.

#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tagpool::Pool;
use tagpool_loom_tests::{check, drain, uncached};

/// One slot, one holder, one waiter.
#[test]
fn waiter_wakes_on_release() {
    check("waiter_wakes_on_release", 3, || {
        let pool = Arc::new(Pool::new(1, || 0usize));
        let held = pool.acquire().unwrap();
        let waiter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || *pool.acquire().unwrap() += 1)
        };
        drop(held);
        waiter.join().unwrap();
        assert_eq!(*pool.try_acquire().unwrap(), 1);
    });
}

/// One slot, one holder, two waiters: each release wakes a waiter.
#[test]
fn two_waiters_one_slot() {
    check("two_waiters_one_slot", 3, || {
        let pool = Arc::new(Pool::new(1, || 0usize));
        let held = pool.acquire().unwrap();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || *pool.acquire().unwrap() += 1)
            })
            .collect();
        drop(held);
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(*pool.try_acquire().unwrap(), 2);
    });
}

/// Two slots released back to back while two threads wait: the second
/// release's notification must not be absorbed by the first.
#[test]
fn two_waiters_two_slots() {
    check("two_waiters_two_slots", 3, || {
        let pool = Arc::new(uncached(2, || 0usize));
        let (a, b) = (pool.acquire().unwrap(), pool.acquire().unwrap());
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    let mut g = pool.acquire_owned().unwrap();
                    *g += 1;
                    // Hold until both waiters are through, so that each one
                    // needs its own release.
                    g
                })
            })
            .collect();
        drop(a);
        drop(b);
        let guards: Vec<_> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(guards.iter().map(|g| **g).sum::<usize>(), 2);
        drop(guards);
        drain(&pool);
    });
}

/// A releaser that finds every listener notified clears the waiter flag,
/// but only from the exact head it wrote. Here the releaser acquires again
/// while two waiters register: if it cleared a flag set after its push, a
/// parked waiter would never be woken. Bounded at two preemptions (three
/// take 13 minutes); `clear_after_a_second_push_keeps_a_new_waiter` is the
/// model `run.sh` proves fails when the clear ignores what happened since
/// the push.
#[test]
fn clear_never_drops_a_later_registration() {
    check("clear_never_drops_a_later_registration", 2, || {
        let pool = Arc::new(Pool::new(1, || 0usize));
        let held = pool.acquire().unwrap();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || *pool.acquire().unwrap() += 1)
            })
            .collect();
        drop(held);
        *pool.acquire().unwrap() += 1;
        for w in waiters {
            w.join().unwrap();
        }
        assert_eq!(*pool.try_acquire().unwrap(), 3);
    });
}

/// The clear's race in its smallest form: the releaser pushes twice while
/// the first waiter, already notified, has not run; that waiter then takes
/// the slot and a second waiter registers before the releaser's clear. A
/// clear from whatever the head is now would drop the second waiter's flag,
/// and the first waiter's release would wake nobody. The yields put the
/// race within one preemption (`clear_never_drops_a_later_registration`
/// needs three, 13 minutes): `run.sh` proves this model fails with the
/// clear-any fault.
#[test]
fn clear_after_a_second_push_keeps_a_new_waiter() {
    check("clear_after_a_second_push_keeps_a_new_waiter", 2, || {
        let pool = Arc::new(Pool::new(1, || 0usize));
        let held = pool.acquire().unwrap();
        let first = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let mut slot = pool.acquire().unwrap();
                *slot += 1;
                // Holds the slot across a switch: the second waiter may
                // register now, without a preemption.
                thread::yield_now();
            })
        };
        // Until `first` waits (counted before it registers), without
        // spending a preemption on it.
        while pool.stats().waits == 0 {
            thread::yield_now();
        }
        let second = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || *pool.acquire().unwrap() += 1)
        };
        drop(held);
        // A second push while a notified waiter may still be asleep.
        if let Ok(again) = pool.try_acquire() {
            drop(again);
        }
        first.join().unwrap();
        second.join().unwrap();
        assert_eq!(*pool.try_acquire().unwrap(), 2);
    });
}
