//! The index pool: exact exhaustion, exclusive indices across threads,
//! owned guards, waiting (blocking, timed, async), close, fairness and
//! growth, all through the pool's one free list.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use tagpool::{AcquireError, IndexGuard, IndexPool, TryAcquireError};

mod support;
use support::executor::{counting, poll_once};
use support::{watchdog, WAITING};

#[test]
fn every_index_once_then_exhausted() {
    for capacity in [1, 3, 64, 1000] {
        let pool = IndexPool::new(capacity);
        let guards: Vec<IndexGuard<'_>> =
            (0..capacity).map(|_| pool.try_acquire().unwrap()).collect();
        let mut indices: Vec<usize> = guards.iter().map(IndexGuard::index).collect();
        indices.sort_unstable();
        assert_eq!(indices, (0..capacity).collect::<Vec<_>>());
        assert_eq!(pool.try_acquire().unwrap_err(), TryAcquireError::Exhausted);
        let stats = pool.stats();
        assert_eq!(
            (stats.capacity, stats.in_use, stats.available),
            (capacity, capacity, 0)
        );
        assert_eq!(stats.failed_acquires, 1);
        drop(guards);
        assert_eq!(pool.stats().in_use, 0);
    }
}

#[test]
fn indices_are_exclusive_across_threads() {
    let _watchdog = watchdog("indices_are_exclusive_across_threads", WAITING);
    let rounds = if cfg!(miri) { 50 } else { 50_000 };
    for caches in [true, false] {
        let pool = IndexPool::builder()
            .capacity(8)
            .thread_cache_size(if caches { 4 } else { 0 })
            .build()
            .unwrap();
        let owned: Vec<AtomicBool> = (0..8).map(|_| AtomicBool::new(false)).collect();
        thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    let mut held = Vec::new();
                    for round in 0..rounds {
                        if let Ok(g) = pool.try_acquire() {
                            let was = owned[g.index()].swap(true, Ordering::SeqCst);
                            assert!(!was, "index {} handed out twice", g.index());
                            held.push(g);
                        }
                        if held.len() > 2 || round % 3 == 0 {
                            if let Some(g) = held.pop() {
                                owned[g.index()].store(false, Ordering::SeqCst);
                            }
                        }
                    }
                    for g in held {
                        owned[g.index()].store(false, Ordering::SeqCst);
                    }
                });
            }
        });
        assert_eq!(pool.stats().in_use, 0);
    }
}

#[test]
fn owned_guards_move_between_threads_and_outlive_the_pool() {
    let pool = Arc::new(IndexPool::new(4));
    let guards: Vec<_> = (0..4).map(|_| pool.try_acquire_owned().unwrap()).collect();
    assert!(pool.try_acquire_owned().is_err());
    let jobs: Vec<_> = guards
        .into_iter()
        .map(|g| thread::spawn(move || g.index()))
        .collect();
    let mut indices: Vec<usize> = jobs.into_iter().map(|j| j.join().unwrap()).collect();
    indices.sort_unstable();
    assert_eq!(indices, [0, 1, 2, 3]);
    let last = pool.acquire_owned().unwrap();
    drop(pool);
    assert!(last.index() < 4, "the state outlives the handle");
    drop(last);
}

#[test]
fn waiting_acquires_get_the_released_index() {
    let _watchdog = watchdog("waiting_acquires_get_the_released_index", WAITING);
    let pool = IndexPool::builder().capacity(1).fair().build().unwrap();
    let first = pool.acquire().unwrap();
    assert!(pool.acquire_timeout(Duration::from_millis(5)).is_err());
    thread::scope(|s| {
        let waiter = s.spawn(|| pool.acquire().map(|g| g.index()));
        while pool.stats().waiting_threads == 0 {
            thread::sleep(Duration::from_millis(1));
        }
        drop(first);
        assert_eq!(waiter.join().unwrap(), Ok(0));
    });
    assert_eq!(pool.stats().timeouts, 1);
}

#[test]
fn close_wakes_waiters_and_held_indices_come_back() {
    let _watchdog = watchdog("close_wakes_waiters_and_held_indices_come_back", WAITING);
    let pool = Arc::new(IndexPool::new(1));
    let held = pool.try_acquire_owned().unwrap();
    let waiter = {
        let pool = pool.clone();
        thread::spawn(move || pool.acquire_owned().map(|g| g.index()))
    };
    while pool.stats().waiting_threads == 0 {
        thread::sleep(Duration::from_millis(1));
    }
    assert!(pool.close());
    assert!(!pool.close());
    assert_eq!(waiter.join().unwrap(), Err(AcquireError::Closed));
    assert!(pool.is_closed());
    assert_eq!(pool.try_acquire().unwrap_err(), TryAcquireError::Closed);
    drop(held);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn async_acquires_wait_and_cancel_without_loss() {
    let _watchdog = watchdog("async_acquires_wait_and_cancel_without_loss", WAITING);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let pool = Arc::new(IndexPool::new(1));
        let held = pool.acquire_async().await.unwrap();
        // A cancelled wait loses nothing.
        let timed_out =
            tokio::time::timeout(Duration::from_millis(5), pool.acquire_owned_async()).await;
        assert!(timed_out.is_err());
        let stats = pool.stats();
        assert_eq!((stats.cancelled_waits, stats.waiting_tasks), (1, 0));
        let waiter = tokio::spawn({
            let pool = pool.clone();
            async move { pool.acquire_owned_async().await.map(|g| g.index()) }
        });
        tokio::task::yield_now().await;
        drop(held);
        assert_eq!(waiter.await.unwrap(), Ok(0));
        assert_eq!(pool.stats().in_use, 0);
    });
}

/// Index pools of one index: barging (the default) and fair.
fn index_pools_of_one() -> [Arc<IndexPool>; 2] {
    [
        Arc::new(IndexPool::new(1)),
        Arc::new(IndexPool::builder().capacity(1).fair().build().unwrap()),
    ]
}

/// A pending `AcquireIndex` or `AcquireOwnedIndex`, dropped, cancels its
/// wait: no task stays counted as waiting (a barging pool's count would
/// stay up for good), and the index released next goes to the next
/// acquire, not to the dead waiter (a fair pool would hand it to the dead
/// ticket and lose it).
#[test]
fn dropped_pending_index_futures_cancel_their_wait() {
    for owned in [false, true] {
        for pool in index_pools_of_one() {
            let held = pool.try_acquire().unwrap();
            let (wakes, waker) = counting();
            if owned {
                let mut acquire = pool.acquire_owned_async();
                assert!(poll_once(&mut acquire, &waker).is_pending());
                assert_eq!(pool.stats().waiting_tasks, 1);
            } else {
                let mut acquire = pool.acquire_async();
                assert!(poll_once(&mut acquire, &waker).is_pending());
                assert_eq!(pool.stats().waiting_tasks, 1);
            }
            let stats = pool.stats();
            assert_eq!(
                (stats.waiting_tasks, stats.cancelled_waits),
                (0, 1),
                "{pool:?}"
            );
            drop(held);
            assert_eq!(wakes.wakes(), 0, "the dead waiter is not woken");
            let next = pool.try_acquire().expect("the released index is free");
            assert_eq!(next.index(), 0);
            drop(next);
            let stats = pool.stats();
            assert_eq!((stats.in_use, stats.available), (0, 1), "{pool:?}");
        }
    }
}

/// A pending index future dropped after the release that woke it (and, in
/// a fair pool, handed it the index) passes the index on to the next
/// waiter.
#[test]
fn index_future_cancelled_after_its_wake_up_passes_the_index_on() {
    for pool in index_pools_of_one() {
        let held = pool.try_acquire().unwrap();
        let (first_wakes, first_waker) = counting();
        let (second_wakes, second_waker) = counting();
        let mut first = pool.acquire_async();
        let mut second = pool.acquire_owned_async();
        assert!(poll_once(&mut first, &first_waker).is_pending());
        assert!(poll_once(&mut second, &second_waker).is_pending());
        assert_eq!(pool.stats().waiting_tasks, 2);
        drop(held);
        assert!(first_wakes.wakes() >= 1, "FIFO: the first waiter is woken");
        drop(first);
        assert!(second_wakes.wakes() >= 1, "the wake-up was passed on");
        match poll_once(&mut second, &second_waker) {
            std::task::Poll::Ready(Ok(guard)) => assert_eq!(guard.index(), 0),
            _ => panic!("the second waiter gets the index"),
        }
        let stats = pool.stats();
        assert_eq!(
            (stats.in_use, stats.available, stats.waiting_tasks),
            (0, 1, 0),
            "{pool:?}"
        );
        assert_eq!(stats.cancelled_waits, 1);
    }
}

#[test]
fn an_elastic_index_pool_grows_to_its_bound() {
    let pool = IndexPool::builder()
        .capacity(100)
        .initial(10)
        .build()
        .unwrap();
    assert_eq!(pool.stats().allocated, 10);
    let guards: Vec<_> = (0..100).map(|_| pool.try_acquire().unwrap()).collect();
    assert_eq!(pool.stats().allocated, 100);
    let mut indices: Vec<usize> = guards.iter().map(IndexGuard::index).collect();
    indices.sort_unstable();
    assert_eq!(indices, (0..100).collect::<Vec<_>>());
    assert!(pool.try_acquire().is_err());
}

#[test]
fn bad_sizes_are_build_errors() {
    use tagpool::BuildError;
    assert_eq!(
        IndexPool::builder().build().unwrap_err(),
        BuildError::ZeroCapacity
    );
    assert_eq!(
        IndexPool::builder()
            .capacity(4)
            .initial(0)
            .build()
            .unwrap_err(),
        BuildError::ZeroInitial
    );
    assert!(matches!(
        IndexPool::builder()
            .capacity(tagpool::MAX_CAPACITY + 1)
            .build(),
        Err(BuildError::CapacityTooLarge { .. })
    ));
    assert!(std::panic::catch_unwind(|| IndexPool::new(0)).is_err());
}
