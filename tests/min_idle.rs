//! `Builder::min_idle`: a floor of filled idle values that discards, trims
//! and `retain_idle` refill.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use tagpool::{BuildError, Builder, Pool};

/// A builder whose factory makes 0, 1, 2, ... and the count of its calls.
fn counting() -> (Builder<usize>, Arc<AtomicUsize>) {
    let made = Arc::new(AtomicUsize::new(0));
    let m = Arc::clone(&made);
    (Pool::builder(move || m.fetch_add(1, SeqCst)), made)
}

/// A lazy pool of `capacity` counting its factory calls, floor `min`.
fn counted(capacity: usize, min: usize) -> (Pool<usize>, Arc<AtomicUsize>) {
    let (builder, made) = counting();
    let pool = builder
        .capacity(capacity)
        .lazy()
        .min_idle(min)
        .build()
        .unwrap();
    (pool, made)
}

#[test]
fn a_lazy_pool_makes_its_floor_at_build() {
    let (pool, made) = counted(8, 3);
    assert_eq!((pool.stats().filled, made.load(SeqCst)), (3, 3));
    // Acquires do not trigger it: held values are not idle, and no
    // discard, trim or retain ran.
    let held: Vec<_> = (0..3).map(|_| pool.acquire().unwrap()).collect();
    assert_eq!(made.load(SeqCst), 3);
    drop(held);
}

#[test]
fn a_trim_below_the_floor_refills_it() {
    let (pool, made) = counted(8, 2);
    let held: Vec<_> = (0..6).map(|_| pool.acquire().unwrap()).collect();
    drop(held);
    assert_eq!(pool.stats().filled, 6);
    assert_eq!(pool.trim(1), 5);
    let stats = pool.stats();
    assert_eq!(
        (stats.filled, stats.in_use),
        (2, 0),
        "refilled to the floor"
    );
    assert_eq!(made.load(SeqCst), 7, "one new value");
    assert_eq!(pool.trim(2), 0, "at the floor already");
    assert_eq!(made.load(SeqCst), 7);
}

#[test]
fn retain_idle_below_the_floor_refills_it_and_drain_does_not() {
    let (pool, made) = counted(4, 2);
    assert_eq!(pool.retain_idle(|_| false), 2);
    assert_eq!((pool.stats().filled, made.load(SeqCst)), (2, 4));
    let drained = pool.drain_idle();
    assert_eq!(drained.len(), 2);
    assert_eq!(pool.stats().filled, 0, "drain hands values over, no refill");
}

#[test]
fn a_discard_below_the_floor_gives_the_slot_back_with_a_fresh_value() {
    let (builder, made) = counting();
    let pool = builder
        .capacity(4)
        .lazy()
        .min_idle(2)
        .discard_if(|v: &usize| *v < 2)
        .build()
        .unwrap();
    let a = pool.acquire().unwrap();
    let b = pool.acquire().unwrap();
    assert_eq!(*a + *b, 1, "the two values made at build");
    drop(a);
    drop(b);
    let stats = pool.stats();
    assert_eq!(stats.discarded, 2);
    assert_eq!(stats.filled, 2, "each discarded slot came back filled");
    assert_eq!(made.load(SeqCst), 4);
    let mut values: Vec<usize> = (0..2).map(|_| *pool.acquire().unwrap()).collect();
    values.sort_unstable();
    assert!(values.iter().all(|&v| v >= 2), "fresh values: {values:?}");
}

#[test]
fn a_discard_above_the_floor_leaves_its_slot_empty() {
    let (builder, made) = counting();
    let pool = builder
        .capacity(4)
        .min_idle(1)
        .thread_cache(false)
        .discard_if(|v: &usize| *v == 0)
        .build()
        .unwrap();
    // Eager: 4 values, 0 to 3. Hold all, give back the three kept first.
    let mut held: Vec<_> = (0..4).map(|_| pool.acquire().unwrap()).collect();
    held.sort_by_key(|g| **g);
    let zero = held.remove(0);
    drop(held);
    assert_eq!(pool.stats().filled, 4);
    drop(zero); // discarded, with 3 values idle: above the floor
    let stats = pool.stats();
    assert_eq!((stats.discarded, stats.filled), (1, 3), "no refill");
    assert_eq!(made.load(SeqCst), 4);
}

#[test]
fn a_scope_of_discards_refills_to_the_floor_once() {
    let (builder, made) = counting();
    let pool = builder
        .capacity(4)
        .thread_cache(false)
        .min_idle(1)
        .discard_if(|_: &usize| true)
        .build()
        .unwrap();
    {
        let scope = pool.scope();
        for _ in 0..4 {
            scope.acquire().unwrap();
        }
    }
    let stats = pool.stats();
    assert_eq!(stats.discarded, 4);
    assert_eq!(stats.filled, 1, "the floor, not every discarded slot");
    assert_eq!(made.load(SeqCst), 4 + 1);
}

#[test]
fn a_closed_pool_refills_nothing() {
    let (builder, made) = counting();
    let pool = builder
        .capacity(2)
        .lazy()
        .min_idle(2)
        .discard_if(|_: &usize| true)
        .build()
        .unwrap();
    let held = pool.acquire().unwrap();
    assert!(pool.close());
    drop(held);
    assert_eq!(made.load(SeqCst), 2, "no factory call after the close");
    assert_eq!(pool.stats().filled, 1);
}

#[test]
fn a_failing_factory_stops_the_refill_quietly() {
    let up = Arc::new(AtomicBool::new(true));
    let u = Arc::clone(&up);
    let pool: Pool<u8, &'static str> =
        Pool::try_builder(move || if u.load(SeqCst) { Ok(1) } else { Err("down") })
            .capacity(4)
            .lazy()
            .min_idle(2)
            .build()
            .unwrap();
    up.store(false, SeqCst);
    assert_eq!(pool.trim(0), 2);
    let stats = pool.stats();
    assert_eq!((stats.filled, stats.available), (0, 4), "nothing lost");
    up.store(true, SeqCst);
    assert_eq!(pool.trim(0), 0);
    assert_eq!(pool.stats().filled, 2, "the next trigger refills");
}

#[test]
fn a_panicking_factory_in_a_refill_propagates_and_keeps_the_pool() {
    let panics = Arc::new(AtomicBool::new(false));
    let p = Arc::clone(&panics);
    let pool = Pool::builder(move || {
        assert!(!p.load(SeqCst), "factory failure");
        0u8
    })
    .capacity(4)
    .lazy()
    .min_idle(2)
    .build()
    .unwrap();
    panics.store(true, SeqCst);
    let caught = panic::catch_unwind(AssertUnwindSafe(|| pool.trim(0)));
    assert!(
        caught.is_err(),
        "the factory's panic propagates from the trim"
    );
    panics.store(false, SeqCst);
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available, stats.filled), (0, 4, 0));
    pool.trim(0);
    assert_eq!(pool.stats().filled, 2);
}

#[test]
fn a_floor_the_pool_cannot_keep_is_refused_at_build() {
    let err = Pool::builder(|| 0u8)
        .capacity(2)
        .min_idle(3)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::MinIdle {
            min_idle: 3,
            limit: 2
        }
    );
    let err = Pool::builder(|| 0u8)
        .capacity(8)
        .initial(2)
        .min_idle(3)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::MinIdle {
            min_idle: 3,
            limit: 2
        }
    );
    let err = Pool::builder_from_values(vec![1u8, 2])
        .min_idle(1)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::MinIdle {
            min_idle: 1,
            limit: 0
        }
    );
    assert!(err.to_string().contains("min_idle 1"));
    // An eager pool is full already; a floor of the capacity is allowed.
    let pool = Pool::builder(|| 0u8)
        .capacity(2)
        .min_idle(2)
        .build()
        .unwrap();
    assert_eq!(pool.stats().filled, 2);
}

/// Values parked in a thread's cache are idle: a `retain_idle` that keeps
/// everything finds the floor met (it sweeps the caches, then counts), and
/// so does a discard while values sit in the cache.
#[test]
fn a_floor_with_caches_counts_the_cached_values_as_idle() {
    let (builder, made) = counting();
    let pool = builder
        .capacity(16)
        .lazy()
        .thread_cache_size(4)
        .min_idle(3)
        .build()
        .unwrap();
    let held: Vec<_> = (0..8).map(|_| pool.acquire().unwrap()).collect();
    drop(held);
    assert!(pool.stats().cached > 0);
    assert_eq!(pool.retain_idle(|_| true), 0);
    assert_eq!(made.load(SeqCst), 8, "8 idle values: the floor is met");
    pool.trim(0);
    assert_eq!(pool.stats().filled, 3);
    assert_eq!(made.load(SeqCst), 8 + 3, "8 made, then 3 after the trim");
}

#[test]
fn an_elastic_pool_refills_within_its_growth() {
    let (builder, made) = counting();
    let pool = builder
        .capacity(16)
        .initial(2)
        .lazy()
        .min_idle(2)
        .build()
        .unwrap();
    assert_eq!(pool.stats().filled, 2);
    // Both values held: a trim finds no empty idle slot and grows.
    let held = (pool.acquire().unwrap(), pool.acquire().unwrap());
    assert_eq!(pool.trim(0), 0);
    let stats = pool.stats();
    assert_eq!(
        (stats.filled, stats.in_use),
        (4, 2),
        "two idle values again"
    );
    assert!(stats.allocated > 2, "grown");
    assert_eq!(made.load(SeqCst), 4, "two at build, two after the trim");
    drop(held);
}
