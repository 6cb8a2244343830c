//! Async acquires: wake-ups, cancellation, mixing with blocking waiters.
//! Barging and fair pools alike. The executor is a minimal one (miri runs
//! these); tokio is used where a real runtime is the point.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::thread;
use std::time::Duration;

use tagpool::{AcquireError, Pool};

mod support;
use support::executor::{block_on, counting, poll_once};
use support::{watchdog, watchdog_reporting, WAITING};

/// Pools of one slot: barging (the default) and fair.
fn pools_of_one() -> [Pool<u32>; 2] {
    [
        Pool::new(1, || 0),
        Pool::builder(|| 0).capacity(1).fair().build().unwrap(),
    ]
}

#[test]
fn a_free_slot_is_taken_on_the_first_poll() {
    let pool = Pool::new(2, || 7u32);
    let (wakes, waker) = counting();
    let mut acquire = pool.acquire_async();
    match poll_once(&mut acquire, &waker) {
        Poll::Ready(Ok(guard)) => assert_eq!(*guard, 7),
        other => panic!("expected a slot, got {:?}", other.map(|r| r.map(|_| ()))),
    }
    assert_eq!(wakes.wakes(), 0);
    let stats = pool.stats();
    assert_eq!(
        (stats.in_use, stats.async_waits, stats.waiting_tasks),
        (0, 0, 0)
    );
}

#[test]
fn a_pending_acquire_is_woken_by_a_release_and_then_takes_the_slot() {
    for pool in pools_of_one() {
        let held = pool.try_acquire().unwrap();
        let (wakes, waker) = counting();
        let mut acquire = pool.acquire_async();
        assert!(poll_once(&mut acquire, &waker).is_pending());
        assert!(poll_once(&mut acquire, &waker).is_pending(), "polled again");
        let stats = pool.stats();
        assert_eq!((stats.async_waits, stats.waiting_tasks), (1, 1));
        assert_eq!(wakes.wakes(), 0);
        drop(held);
        assert!(wakes.wakes() >= 1, "the release woke the task");
        match poll_once(&mut acquire, &waker) {
            Poll::Ready(Ok(guard)) => assert_eq!(*guard, 0),
            _ => panic!("the woken task gets the slot"),
        }
        let stats = pool.stats();
        assert_eq!(
            (stats.in_use, stats.waiting_tasks, stats.cancelled_waits),
            (0, 0, 0)
        );
    }
}

#[test]
fn a_cancelled_waiter_passes_its_wake_up_to_the_next() {
    for pool in pools_of_one() {
        let fair = format!("{pool:?}").contains("fair: true");
        let held = pool.try_acquire().unwrap();
        let (first_wakes, first_waker) = counting();
        let (second_wakes, second_waker) = counting();
        let mut first = pool.acquire_async();
        let mut second = pool.acquire_async();
        assert!(poll_once(&mut first, &first_waker).is_pending());
        assert!(poll_once(&mut second, &second_waker).is_pending());
        drop(held);
        // FIFO: the first waiter is woken (and, if fair, handed the slot).
        assert!(first_wakes.wakes() >= 1);
        assert_eq!(second_wakes.wakes(), 0, "one release, one wake-up");
        if fair {
            assert!(pool.try_acquire().is_err(), "handed over: no barging");
        }
        drop(first); // cancelled after its wake-up
        assert!(second_wakes.wakes() >= 1, "the wake-up was passed on");
        match poll_once(&mut second, &second_waker) {
            Poll::Ready(Ok(guard)) => drop(guard),
            _ => panic!("the second waiter gets the slot"),
        }
        let stats = pool.stats();
        assert_eq!(stats.cancelled_waits, 1);
        assert_eq!(
            (stats.in_use, stats.available, stats.waiting_tasks),
            (0, 1, 0)
        );
    }
}

#[test]
fn a_cancelled_waiter_that_was_never_woken_leaves_no_trace() {
    for pool in pools_of_one() {
        let held = pool.try_acquire().unwrap();
        let (_, waker) = counting();
        for _ in 0..3 {
            let mut acquire = pool.acquire_async();
            assert!(poll_once(&mut acquire, &waker).is_pending());
        }
        let stats = pool.stats();
        assert_eq!((stats.cancelled_waits, stats.waiting_tasks), (3, 0));
        drop(held);
        // Nothing was left queued: the slot is free, not handed to a ghost.
        assert!(pool.try_acquire().is_ok());
        assert_eq!(pool.stats().available, 1);
    }
}

#[test]
fn a_future_dropped_before_its_first_poll_counts_nothing() {
    let pool = Pool::new(1, || 0u8);
    let held = pool.try_acquire().unwrap();
    drop(pool.acquire_async());
    let stats = pool.stats();
    assert_eq!(
        (stats.async_waits, stats.cancelled_waits, stats.in_use),
        (0, 0, 1)
    );
    drop(held);
}

#[test]
#[cfg_attr(miri, ignore = "leaks a future on purpose, which miri reports")]
fn a_forgotten_pending_future_costs_what_the_docs_say() {
    // Barging: the slot handed to its ticket stays in use; the others go
    // on, and it stays counted.
    let pool = Pool::new(2, || 0u8);
    let held = (pool.try_acquire().unwrap(), pool.try_acquire().unwrap());
    let (_, waker) = counting();
    let mut forgotten = pool.acquire_async();
    assert!(poll_once(&mut forgotten, &waker).is_pending());
    std::mem::forget(forgotten);
    drop(held.0); // to the forgotten ticket
    assert!(
        pool.try_acquire().is_err(),
        "handed to the forgotten future"
    );
    drop(held.1);
    assert!(pool.try_acquire().is_ok(), "the other slot is free");
    assert_eq!(pool.stats().waiting_tasks, 1, "counted for good");

    // Fair: the slot handed to it stays in use; the others go on.
    let pool = Pool::builder(|| 0u8).capacity(2).fair().build().unwrap();
    let held = (pool.try_acquire().unwrap(), pool.try_acquire().unwrap());
    let mut forgotten = pool.acquire_async();
    assert!(poll_once(&mut forgotten, &waker).is_pending());
    std::mem::forget(forgotten);
    let mut next = pool.acquire_async();
    assert!(poll_once(&mut next, &waker).is_pending());
    drop(held.0); // to the forgotten ticket
    assert!(poll_once(&mut next, &waker).is_pending());
    drop(held.1); // to the next waiter
    match poll_once(&mut next, &waker) {
        Poll::Ready(Ok(guard)) => drop(guard),
        _ => panic!("the second release reaches the live waiter"),
    }
    let stats = pool.stats();
    assert_eq!(
        (stats.in_use, stats.available, stats.waiting_tasks),
        (1, 1, 1)
    );
}

#[test]
fn polling_a_resolved_future_panics() {
    let pool = Pool::new(1, || 0u8);
    let (_, waker) = counting();
    let mut acquire = pool.acquire_async();
    let guard = match poll_once(&mut acquire, &waker) {
        Poll::Ready(guard) => guard,
        Poll::Pending => panic!("a slot is free"),
    };
    let again = panic::catch_unwind(AssertUnwindSafe(|| poll_once(&mut acquire, &waker)));
    assert!(again.is_err());
    drop(guard);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn a_panicking_factory_in_an_async_acquire_returns_the_slot() {
    let calls = Arc::new(AtomicUsize::new(0));
    let pool = {
        let calls = Arc::clone(&calls);
        Pool::builder(move || {
            if calls.fetch_add(1, Ordering::SeqCst) == 0 {
                panic!("first fill fails");
            }
            5u8
        })
        .capacity(1)
        .lazy()
        .build()
        .unwrap()
    };
    let failed = panic::catch_unwind(AssertUnwindSafe(|| block_on(pool.acquire_async())));
    assert!(failed.is_err());
    assert_eq!(pool.stats().in_use, 0, "the slot went back");
    assert_eq!(*block_on(pool.acquire_async()).unwrap(), 5);
}

#[test]
fn close_ends_pending_waits_with_closed() {
    for pool in pools_of_one() {
        let held = pool.try_acquire().unwrap();
        let (wakes, waker) = counting();
        let mut acquire = pool.acquire_async();
        assert!(poll_once(&mut acquire, &waker).is_pending());
        assert!(pool.close());
        assert!(wakes.wakes() >= 1, "close woke the task");
        match poll_once(&mut acquire, &waker) {
            Poll::Ready(Err(AcquireError::Closed)) => {}
            _ => panic!("a closed pool ends the wait with Closed"),
        }
        assert_eq!(
            block_on(pool.acquire_async()).map(|_| ()),
            Err(AcquireError::Closed)
        );
        drop(held);
        let stats = pool.stats();
        assert!(stats.closed);
        assert_eq!(
            (stats.in_use, stats.available, stats.waiting_tasks),
            (0, 1, 0)
        );
    }
}

#[test]
fn blocking_and_async_waiters_share_one_pool() {
    let _watchdog = watchdog("blocking_and_async_waiters_share_one_pool", WAITING);
    const ROUNDS: usize = if cfg!(miri) { 5 } else { 500 };
    for fair in [false, true] {
        let mut builder = Pool::builder(|| 0usize).capacity(1);
        if fair {
            builder = builder.fair();
        }
        let pool = builder.build().unwrap();
        thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..ROUNDS {
                        *pool.acquire().unwrap() += 1;
                    }
                });
                s.spawn(|| {
                    block_on(async {
                        for _ in 0..ROUNDS {
                            *pool.acquire_async().await.unwrap() += 1;
                        }
                    })
                });
            }
        });
        assert_eq!(*pool.try_acquire().unwrap(), 4 * ROUNDS);
        let stats = pool.stats();
        assert_eq!((stats.waiting_threads, stats.waiting_tasks), (0, 0));
    }
}

#[test]
fn owned_futures_are_send_and_static() {
    fn spawnable<F: std::future::Future + Send + 'static>(_: &F) {}
    let pool = Arc::new(Pool::new(1, || vec![0u8; 8]));
    let acquire = pool.acquire_owned_async();
    spawnable(&acquire);
    let guard = thread::spawn(move || block_on(acquire))
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(guard.len(), 8);
    drop(pool); // the guard keeps the values alive
    drop(guard);
}

#[test]
fn a_pending_owned_future_keeps_the_pool_alive() {
    let pool = Arc::new(Pool::new(1, || 1u8));
    let held = pool.try_acquire_owned().unwrap();
    let (_, waker) = counting();
    let mut acquire = pool.acquire_owned_async();
    assert!(poll_once(&mut acquire, &waker).is_pending());
    drop(pool);
    drop(held);
    match poll_once(&mut acquire, &waker) {
        Poll::Ready(Ok(guard)) => assert_eq!(*guard, 1),
        _ => panic!("the released slot reaches the waiter"),
    }
}

#[cfg(not(miri))]
mod on_tokio {
    use super::*;
    use tokio::time::timeout;

    /// Many tasks on a scarce pool, a third of them with timeouts short
    /// enough to fire: every wait ends, nothing leaks, and the counts agree.
    /// Barging and fair pools of 3, and a barging pool of 64 with
    /// per-thread caches (tasks migrate between the runtime's threads).
    ///
    /// Whether tasks that start together ever find the pool empty is up to
    /// the scheduler (a pool of 64 rarely is): this test holds every slot
    /// until a task is seen waiting, so at least one wait happens, always.
    #[test]
    fn timeouts_and_cancellations_leave_the_pool_whole() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        for (fair, capacity, tasks) in [(false, 3, 48u64), (true, 3, 48), (false, 64, 256)] {
            let mut builder = Pool::builder(|| 0u64).capacity(capacity);
            builder = if fair {
                builder.fair()
            } else {
                builder.thread_cache_size(8)
            };
            let pool = Arc::new(builder.build().unwrap());
            // A task never woken shows as waiting while slots are free.
            let _watchdog = {
                let pool = Arc::clone(&pool);
                watchdog_reporting(
                    format!(
                        "timeouts_and_cancellations_leave_the_pool_whole \
                         (fair: {fair}, capacity {capacity}, {tasks} tasks)"
                    ),
                    WAITING,
                    move || format!("{:?}", pool.stats()),
                )
            };
            let done = rt.block_on(async {
                let held: Vec<_> = (0..capacity)
                    .map(|_| pool.try_acquire_owned().unwrap())
                    .collect();
                let tasks: Vec<_> = (0..tasks)
                    .map(|i| {
                        let pool = Arc::clone(&pool);
                        tokio::spawn(async move {
                            let mut done = 0;
                            for round in 0..40u64 {
                                let acquire = pool.acquire_owned_async();
                                let guard = if (i + round) % 3 == 0 {
                                    match timeout(Duration::from_micros(50), acquire).await {
                                        Ok(guard) => guard.unwrap(),
                                        Err(_) => continue,
                                    }
                                } else {
                                    acquire.await.unwrap()
                                };
                                let mut guard = guard;
                                *guard += 1;
                                tokio::task::yield_now().await;
                                done += 1;
                            }
                            done
                        })
                    })
                    .collect();
                // Two thirds of the tasks wait without a timeout: one of
                // them is counted soon, and stays until the slots come back.
                while pool.stats().waiting_tasks == 0 {
                    tokio::task::yield_now().await;
                }
                drop(held);
                let mut done = 0;
                for task in tasks {
                    done += task.await.unwrap();
                }
                done
            });
            let stats = pool.stats();
            assert_eq!((stats.in_use, stats.available), (0, capacity));
            assert_eq!((stats.waiting_tasks, stats.waiting_threads), (0, 0));
            let all: Vec<_> = (0..capacity)
                .map(|_| pool.try_acquire_owned().unwrap())
                .collect();
            let total: u64 = all.iter().map(|g| **g).sum();
            assert_eq!(total, done, "every increment under a guard, none lost");
            assert!(stats.async_waits > 0, "the task seen waiting is counted");
        }
    }

    /// The README's pattern: a server closes its pool at shutdown and every
    /// task waiting for a buffer returns `Closed`.
    #[test]
    fn close_at_shutdown_ends_every_waiting_task() {
        let _watchdog = watchdog("close_at_shutdown_ends_every_waiting_task", WAITING);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        for fair in [false, true] {
            let mut builder = Pool::builder(Vec::<u8>::new).capacity(2);
            if fair {
                builder = builder.fair();
            }
            let pool = Arc::new(builder.build().unwrap());
            rt.block_on(async {
                let held = (
                    pool.try_acquire_owned().unwrap(),
                    pool.try_acquire_owned().unwrap(),
                );
                let waiters: Vec<_> = (0..16)
                    .map(|_| {
                        let pool = Arc::clone(&pool);
                        tokio::spawn(async move { pool.acquire_owned_async().await.map(|_| ()) })
                    })
                    .collect();
                while pool.stats().waiting_tasks < 16 {
                    tokio::task::yield_now().await;
                }
                assert!(pool.close());
                assert!(!pool.close(), "closed already");
                for waiter in waiters {
                    assert_eq!(waiter.await.unwrap(), Err(AcquireError::Closed));
                }
                drop(held);
            });
            let stats = pool.stats();
            assert!(stats.closed);
            assert_eq!(
                (stats.in_use, stats.available, stats.waiting_tasks),
                (0, 2, 0)
            );
        }
    }
}

#[test]
fn fair_tasks_are_served_in_arrival_order() {
    let pool = Pool::builder(|| 0u32).capacity(1).fair().build().unwrap();
    let held = pool.try_acquire().unwrap();
    let (_, waker) = counting();
    let mut waiting: Vec<_> = (0..4).map(|_| pool.acquire_async()).collect();
    for acquire in &mut waiting {
        assert!(poll_once(acquire, &waker).is_pending());
    }
    drop(held);
    for i in 0..waiting.len() {
        for later in &mut waiting[i + 1..] {
            assert!(poll_once(later, &waker).is_pending(), "no one overtakes");
        }
        let guard = match poll_once(&mut waiting[i], &waker) {
            Poll::Ready(Ok(guard)) => guard,
            _ => panic!("waiter {i} is next"),
        };
        assert_eq!(pool.stats().waiting_tasks, 3 - i);
        drop(guard);
    }
    assert_eq!(pool.stats().available, 1);
}
