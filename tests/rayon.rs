//! Parallel iteration over a `HandlePool` borrowed `&mut` (the `rayon`
//! feature): every live value once, with its own key, across segments and
//! holes, on a thread pool of several workers. Without the feature this
//! file is empty.
#![cfg(feature = "rayon")]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rayon::iter::ParallelIterator;
use rayon::ThreadPoolBuilder;
use tagpool::{Handle, HandlePool};

/// A pool whose segments are allocated on demand (`[0, 16)`, `[16, 32)`,
/// `[32, 64)`, ...), `n` values inserted, every third removed: the live
/// values with their keys.
fn with_holes(capacity: usize, n: u64) -> (HandlePool<u64>, BTreeMap<Handle, u64>) {
    let mut pool = HandlePool::builder()
        .capacity(capacity)
        .initial(16)
        .build()
        .unwrap();
    let mut live = BTreeMap::new();
    for v in 0..n {
        let key = pool.insert_mut(v).unwrap();
        if v % 3 == 1 {
            assert_eq!(pool.remove_mut(key), Some(v));
        } else {
            live.insert(key, v);
        }
    }
    (pool, live)
}

/// Runs `f` on a rayon pool of four workers, so that the walk is split.
fn on_four<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    let workers = ThreadPoolBuilder::new().num_threads(4).build().unwrap();
    workers.install(f)
}

fn sizes() -> (usize, u64) {
    if cfg!(miri) {
        (64, 40)
    } else {
        (1 << 14, 12_000)
    }
}

#[test]
fn par_iter_yields_every_live_value_once_with_its_key() {
    let (capacity, n) = sizes();
    let (mut pool, live) = with_holes(capacity, n);
    let seen: Vec<(Handle, u64)> =
        on_four(|| pool.par_iter().map(|(key, value)| (key, *value)).collect());
    assert_eq!(seen.len(), live.len());
    let seen: BTreeMap<_, _> = seen.into_iter().collect();
    assert_eq!(seen, live, "each once, under its own key");
    let sum: u64 = on_four(|| pool.par_values().sum());
    assert_eq!(sum, live.values().sum::<u64>());
}

#[test]
fn par_iter_mut_and_par_values_mut_reach_every_live_value_once() {
    let (capacity, n) = sizes();
    let (mut pool, live) = with_holes(capacity, n);
    on_four(|| {
        pool.par_iter_mut()
            .for_each(|(key, value)| *value = *value * 1000 + key.index() as u64)
    });
    on_four(|| pool.par_values_mut().for_each(|value| *value += 1));
    for (&key, &v) in &live {
        assert_eq!(
            pool.get_mut(key).copied(),
            Some(v * 1000 + key.index() as u64 + 1)
        );
    }
    assert_eq!(pool.len(), live.len(), "nothing added or removed");
}

#[test]
fn parallel_walks_of_an_empty_pool_yield_nothing() {
    let mut pool = HandlePool::<String>::builder()
        .capacity(64)
        .initial(1)
        .build()
        .unwrap();
    assert_eq!(pool.par_iter().count(), 0);
    assert_eq!(pool.par_values_mut().count(), 0);
    let key = pool.insert(String::from("x")).unwrap();
    pool.remove(key);
    assert_eq!(pool.par_iter_mut().count(), 0);
    assert_eq!(pool.par_values().count(), 0);
}

/// The walk of one segment (a pool allocated at build) is split between
/// workers: each value's step waits, for a bounded time, until a second
/// worker has taken part, which only a split lets happen.
#[test]
fn one_segment_is_split_between_workers() {
    let n = if cfg!(miri) { 8 } else { 1 << 12 };
    let mut pool = HandlePool::new(n);
    for v in 0..n as u64 {
        pool.insert_mut(v).unwrap();
    }
    let workers = AtomicUsize::new(0);
    let deadline = Instant::now() + Duration::from_secs(30);
    let seen = on_four(|| {
        pool.par_values()
            .map(|v| {
                let me = 1 << rayon::current_thread_index().unwrap();
                workers.fetch_or(me, Ordering::SeqCst);
                while workers.load(Ordering::SeqCst).count_ones() < 2 && Instant::now() < deadline {
                    std::thread::yield_now();
                }
                *v
            })
            .count()
    });
    assert_eq!(seen, n);
    assert!(workers.load(Ordering::SeqCst).count_ones() > 1, "split");
}
