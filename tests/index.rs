//! The index pool: exact exhaustion, exclusive indices across threads,
//! owned guards, waiting (blocking, timed, async), close, fairness and
//! growth, all through the pool's one free list.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use tagpool::{AcquireError, IndexGuard, IndexPool, TryAcquireError};

mod support;
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
            (stats.in_use, stats.available, stats.filled),
            (capacity, 0, 0)
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
