//! Models of async waiting, cancellation, fair hand-off and closing.
//!
//! Futures run on `loom::future::block_on`, loom's own executor: a task
//! that returns `Pending` parks its thread until its waker is called, so a
//! wake-up that is never delivered is a deadlock, which loom reports. A
//! cancelled future is polled by hand once with a no-op waker, then
//! dropped. Values are loom cells: a slot handed to two holders at once is
//! reported as a concurrent access.

#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use loom::future::block_on;
use loom::thread;
use tagpool::{AcquireError, Pool};
use tagpool_loom_tests::{check, drain};

/// A pool of one slot, barging (the default) or fair.
fn pool_of_one(fair: bool) -> Arc<Pool<usize>> {
    let builder = Pool::builder(|| 0usize).capacity(1);
    Arc::new(if fair { builder.fair() } else { builder }.build().unwrap())
}

/// One slot, one holder, one task waiting in `acquire_async`: the release
/// wakes it (barging and fair pools).
#[test]
fn async_waiter_wakes_on_release() {
    check("async_waiter_wakes_on_release", 3, || {
        for fair in [false, true] {
            let pool = pool_of_one(fair);
            let held = pool.try_acquire().unwrap();
            let task = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || block_on(async { *pool.acquire_async().await.unwrap() += 1 }))
            };
            drop(held);
            task.join().unwrap();
            assert_eq!(*pool.try_acquire().unwrap(), 1);
            drain(&pool);
        }
    });
}

/// One slot, two waiting tasks; one of them is polled once and dropped
/// (cancelled) at any point, maybe after the release handed its ticket
/// the slot (a waiting task queues a ticket, barging pool or fair): the
/// other still gets the slot.
#[test]
fn cancelled_waiter_passes_the_slot_on() {
    for fair in [false, true] {
        let name = if fair {
            "cancelled_waiter_passes_the_slot_on (fair)"
        } else {
            "cancelled_waiter_passes_the_slot_on (barging)"
        };
        check(name, 2, move || {
            let pool = pool_of_one(fair);
            let held = pool.try_acquire().unwrap();
            let cancelled = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    let mut acquire = pool.acquire_async();
                    let mut cx = Context::from_waker(Waker::noop());
                    if let Poll::Ready(got) = Pin::new(&mut acquire).poll(&mut cx) {
                        drop(got.unwrap()); // the slot was free: give it back
                    }
                    drop(acquire);
                })
            };
            let waiter = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || block_on(async { *pool.acquire_async().await.unwrap() += 1 }))
            };
            drop(held);
            cancelled.join().unwrap();
            waiter.join().unwrap();
            let stats = pool.stats();
            assert_eq!((stats.in_use, stats.waiting_tasks), (0, 0));
            drain(&pool);
        });
    }
}

/// A fair pool of one slot with a blocked thread and a waiting task: the
/// holder's release goes to one of them, whose release goes to the other.
/// Never to both at once (the value cell would report it), never lost (a
/// waiter left waiting deadlocks).
#[test]
fn fair_hand_off_is_exclusive_and_loses_nothing() {
    check("fair_hand_off_is_exclusive_and_loses_nothing", 3, || {
        let pool = pool_of_one(true);
        let held = pool.try_acquire().unwrap();
        let thread_waiter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || *pool.acquire().unwrap() += 1)
        };
        let task_waiter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || block_on(async { *pool.acquire_async().await.unwrap() += 1 }))
        };
        drop(held);
        thread_waiter.join().unwrap();
        task_waiter.join().unwrap();
        assert_eq!(*pool.try_acquire().unwrap(), 2);
        drain(&pool);
    });
}

/// One slot, two waiters that keep what they get, a release and a close:
/// every waiter ends, with the slot or with `Closed`, never with neither;
/// at most one gets the slot; the pool ends whole.
#[test]
fn close_races_a_release_and_waiters() {
    for fair in [false, true] {
        let name = if fair {
            "close_races_a_release_and_waiters (fair)"
        } else {
            "close_races_a_release_and_waiters (barging)"
        };
        check(name, 2, move || {
            let pool = pool_of_one(fair);
            let held = pool.try_acquire().unwrap();
            let thread_waiter = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || pool.acquire_owned())
            };
            let task_waiter = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || block_on(pool.acquire_owned_async()))
            };
            drop(held);
            pool.close();
            let got = [thread_waiter.join().unwrap(), task_waiter.join().unwrap()];
            assert!(got
                .iter()
                .all(|g| matches!(g, Ok(_) | Err(AcquireError::Closed))));
            assert!(got.iter().filter(|g| g.is_ok()).count() <= 1);
            drop(got);
            let stats = pool.stats();
            assert!(stats.closed);
            assert_eq!((stats.in_use, stats.available), (0, 1));
            assert_eq!((stats.waiting_threads, stats.waiting_tasks), (0, 0));
        });
    }
}

/// A fair pool of two: one thread acquires one slot, then waits for the
/// second, while `drain_idle` pops the idle slot and gives it back, which
/// in a fair pool hands it straight to the queued waiter. However the
/// waiter gets it (a pop, or the drain's hand-off), it holds both slots at
/// once, and the peak must say so, even when it lets go of both before the
/// drain's pass ends.
#[test]
fn fair_hand_off_of_an_idle_slot_counts_towards_the_peak() {
    check(
        "fair_hand_off_of_an_idle_slot_counts_towards_the_peak",
        3,
        || {
            let pool = Arc::new(Pool::builder(|| 0usize).capacity(2).fair().build().unwrap());
            let holder = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    let first = pool.acquire().unwrap();
                    let second = pool.acquire().unwrap();
                    drop(second);
                    drop(first);
                })
            };
            let _ = pool.drain_idle();
            holder.join().unwrap();
            let stats = pool.stats();
            assert_eq!(
                stats.peak_in_use, 2,
                "both slots were held at once: {stats:?}"
            );
            drain(&pool);
        },
    );
}

/// A fair pool of two whose top idle slot holds a value and whose other
/// slot is empty: `attach` takes the idle slot out of the list on its way
/// to the empty one (its target), then gives it back, maybe to a waiter
/// queued meanwhile. That waiter holds one slot, and nobody else holds
/// any: a hand-off must not count the attach's target as held (`run.sh`
/// proves this model fails when it does, `tagpool_loom_attach_target_held`:
/// the peak reads 2). (A waiter that pops a slot while the attach holds
/// its target may count the target: the documented limit of
/// `Stats::peak_in_use`; the model checks the hand-off's record only.)
#[test]
fn attach_hands_an_idle_slot_to_a_fair_waiter() {
    check("attach_hands_an_idle_slot_to_a_fair_waiter", 3, || {
        let pool = Arc::new(
            Pool::builder(|| 0usize)
                .capacity(2)
                .lazy()
                .fair()
                .build()
                .unwrap(),
        );
        // One slot filled and idle on top of the list, the other empty.
        drop(pool.try_acquire().unwrap());
        let waiter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || *pool.acquire().unwrap() += 1)
        };
        // `Full` if the waiter took (and filled) the empty slot first.
        let _ = pool.attach(7);
        waiter.join().unwrap();
        let stats = pool.stats();
        if stats.handoffs > 0 {
            assert_eq!(stats.peak_in_use, 1, "one slot held at a time: {stats:?}");
        }
        drain(&pool);
    });
}
