//! Shared helpers for tagpool's loom models (the models live in `tests/`).
//!
//! Run them with `loom-tests/run.sh`: it builds with `--cfg loom` and the
//! `loom` feature, which swap tagpool's atomics and value cells for loom's.

#![cfg(loom)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tagpool::{Pool, PoolGuard};

/// Runs `model` under loom's exhaustive scheduler and prints how many
/// interleavings it explored and how long that took.
///
/// The preemption bound comes from `LOOM_MAX_PREEMPTIONS` (`run.sh` sets
/// it); without it, `default_preemptions` applies, so a plain
/// `cargo test` cannot wander into an unbounded search.
pub fn check<F>(name: &str, default_preemptions: usize, model: F)
where
    F: Fn() + Sync + Send + 'static,
{
    let iterations = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&iterations);
    let mut builder = loom::model::Builder::new();
    if builder.preemption_bound.is_none() {
        builder.preemption_bound = Some(default_preemptions);
    }
    let bound = builder.preemption_bound;
    let start = Instant::now();
    builder.check(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        model();
    });
    eprintln!(
        "loom model {name}: {} iterations in {:.2?} (preemption bound {bound:?})",
        iterations.load(Ordering::Relaxed),
        start.elapsed()
    );
}

/// A pool of `capacity` values from `factory` with per-thread caches off:
/// the free list alone, as the models of it need (the default rule gives
/// every pool of 2 slots or more caches).
pub fn uncached<T, F>(capacity: usize, factory: F) -> Pool<T>
where
    F: Fn() -> T + Send + Sync + 'static,
{
    Pool::builder(factory)
        .capacity(capacity)
        .thread_cache(false)
        .build()
        .expect("a valid capacity")
}

/// A handle pool of `capacity` entries with per-thread caches off: inserts
/// take indices from the free list in its own order, as the models that
/// steer which entry each thread gets need.
pub fn uncached_handles<T>(capacity: usize) -> tagpool::HandlePool<T> {
    tagpool::HandlePool::builder()
        .capacity(capacity)
        .thread_cache(false)
        .build()
        .expect("a valid capacity")
}

/// Acquires every slot at once and checks that each index comes exactly
/// once and that exactly `capacity` slots exist. The loop is bounded: a
/// corrupted free list can be cyclic.
pub fn drain<T>(pool: &Pool<T>) {
    let capacity = pool.capacity();
    let mut seen = BTreeSet::new();
    let mut held = Vec::new();
    for _ in 0..=capacity {
        match pool.try_acquire() {
            Ok(g) => {
                assert!(
                    seen.insert(PoolGuard::index(&g)),
                    "index {} handed out twice",
                    PoolGuard::index(&g)
                );
                held.push(g);
            }
            Err(_) => break,
        }
    }
    assert_eq!(
        held.len(),
        capacity,
        "the free list lost or duplicated slots: {seen:?}"
    );
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available), (capacity, 0));
}
