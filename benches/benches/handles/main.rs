//! tagpool's handle pool against sharded-slab's `Slab` (the crate a user
//! would pick for concurrent keys), and per-frame scopes against single
//! acquires and releases.
//!
//! Groups (ns per operation, criterion medians; `/1` one thread, `/2` two
//! threads each on keys of its own, time per operation of the pair):
//!
//! - `handles_insert_remove`: insert a value and remove it by its key, with
//!   512 other values live (capacity 1024).
//! - `handles_get`: read a live value through its key, cycling over the
//!   thread's live keys.
//! - `handles_get_stale`: look up a removed key (both answer none).
//! - `handles_evict`: insert into a full pool of 64 that evicts the oldest
//!   value or the least by key (tagpool only: sharded-slab cannot evict,
//!   and grows instead of filling up).
//! - `scope`: N values taken from a `Pool<[u64; 8]>` of 1024 and returned,
//!   through one `Pool::scope` (one batch) or N guards dropped one by one;
//!   per value.
//! - `handles_probe_start`, `handles_probe_end`: the same arithmetic on one and on two threads; the ratio of
//!   their times per unit of work says whether two CPUs were free (about
//!   2: trust the `/2` rows).
//!
//! `cargo bench -p tagpool-benches --bench handles`; the medians are in
//! `target/criterion/<group>/<function>/<threads or N>/new/estimates.json`.

use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sharded_slab::Slab;
use tagpool::{Handle, HandlePool, Pool};

/// Entries of the key benchmarks' pools.
const CAPACITY: usize = 1024;
/// Values live during the key benchmarks, split between the threads.
const LIVE: usize = 512;
/// Entries of the eviction benchmark's pools.
const EVICT_CAPACITY: usize = 64;

/// A concurrent keyed store: the handle pool or sharded-slab's `Slab`.
trait Keyed: Sync + Sized {
    type Key: Copy + Send + Sync;
    const NAME: &'static str;
    fn build() -> Self;
    fn insert(&self, value: u64) -> Self::Key;
    fn get(&self, key: Self::Key) -> Option<u64>;
    fn remove(&self, key: Self::Key) -> bool;
}

impl Keyed for HandlePool<u64> {
    type Key = Handle;
    const NAME: &'static str = "tagpool";

    fn build() -> Self {
        HandlePool::new(CAPACITY)
    }

    #[inline]
    fn insert(&self, value: u64) -> Handle {
        HandlePool::insert(self, value).expect("the pool has room")
    }

    #[inline]
    fn get(&self, key: Handle) -> Option<u64> {
        HandlePool::get(self, key).map(|v| *v)
    }

    #[inline]
    fn remove(&self, key: Handle) -> bool {
        HandlePool::remove(self, key)
    }
}

impl Keyed for Slab<u64> {
    type Key = usize;
    const NAME: &'static str = "sharded_slab";

    fn build() -> Self {
        Slab::new()
    }

    #[inline]
    fn insert(&self, value: u64) -> usize {
        Slab::insert(self, value).expect("the slab has room")
    }

    #[inline]
    fn get(&self, key: usize) -> Option<u64> {
        Slab::get(self, key).map(|v| *v)
    }

    #[inline]
    fn remove(&self, key: usize) -> bool {
        Slab::remove(self, key)
    }
}

/// Runs `body(thread, ops)` on `threads` threads released together and
/// returns the time per operation of all of them, scaled to `iters`.
fn parallel<F>(threads: usize, iters: u64, body: F) -> Duration
where
    F: Fn(usize, u64, &Barrier) -> Instant + Sync,
{
    let ops = iters.div_ceil(threads as u64).max(1);
    let barrier = Barrier::new(threads);
    let starts = Mutex::new(Vec::new());
    let end = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (body, barrier, starts) = (&body, &barrier, &starts);
                s.spawn(move || {
                    let start = body(t, ops, barrier);
                    starts.lock().unwrap().push(start);
                    Instant::now()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .max()
            .unwrap()
    });
    let first = starts.into_inner().unwrap().into_iter().min().unwrap();
    let total = end.duration_since(first);
    let per_op = total.as_secs_f64() / (ops * threads as u64) as f64;
    Duration::from_secs_f64(per_op * iters as f64)
}

/// Each thread's live values: inserted on that thread (sharded-slab's
/// shards are per thread), `LIVE / threads` of them.
fn populate<K: Keyed>(store: &K, thread: usize, threads: usize) -> Vec<K::Key> {
    (0..LIVE / threads)
        .map(|i| store.insert((thread * LIVE + i) as u64))
        .collect()
}

fn keyed<K: Keyed>(c: &mut Criterion) {
    for threads in [1, 2] {
        let mut group = c.benchmark_group("handles_insert_remove");
        group.bench_function(BenchmarkId::new(K::NAME, threads), |b| {
            let store = K::build();
            b.iter_custom(|iters| {
                parallel(threads, iters, |t, ops, barrier| {
                    let live = populate(&store, t, threads);
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..ops {
                        let key = store.insert(black_box(i));
                        black_box(store.remove(key));
                    }
                    for key in live {
                        store.remove(key);
                    }
                    start
                })
            });
        });
        group.finish();

        let mut group = c.benchmark_group("handles_get");
        group.bench_function(BenchmarkId::new(K::NAME, threads), |b| {
            let store = K::build();
            b.iter_custom(|iters| {
                parallel(threads, iters, |t, ops, barrier| {
                    let live = populate(&store, t, threads);
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..ops as usize {
                        let key = live[i % live.len()];
                        black_box(store.get(black_box(key)));
                    }
                    for key in live {
                        store.remove(key);
                    }
                    start
                })
            });
        });
        group.finish();

        let mut group = c.benchmark_group("handles_get_stale");
        group.bench_function(BenchmarkId::new(K::NAME, threads), |b| {
            let store = K::build();
            b.iter_custom(|iters| {
                parallel(threads, iters, |t, ops, barrier| {
                    let live = populate(&store, t, threads);
                    for &key in &live {
                        store.remove(key);
                    }
                    // Other values take the entries: the stale keys name
                    // occupied entries of a later generation.
                    let successors = populate(&store, t, threads);
                    barrier.wait();
                    let start = Instant::now();
                    for i in 0..ops as usize {
                        let key = live[i % live.len()];
                        assert!(store.get(black_box(key)).is_none());
                    }
                    for key in successors {
                        store.remove(key);
                    }
                    start
                })
            });
        });
        group.finish();
    }
}

fn evict(c: &mut Criterion) {
    let mut group = c.benchmark_group("handles_evict");
    for (name, pool) in [
        (
            "tagpool_oldest",
            HandlePool::builder()
                .capacity(EVICT_CAPACITY)
                .evict_oldest()
                .build()
                .unwrap(),
        ),
        (
            "tagpool_min_by_key",
            HandlePool::builder()
                .capacity(EVICT_CAPACITY)
                .evict_min_by_key(|v: &u64| *v)
                .build()
                .unwrap(),
        ),
    ] {
        for i in 0..EVICT_CAPACITY as u64 {
            pool.insert(i).unwrap();
        }
        group.bench_function(BenchmarkId::new(name, 1), |b| {
            let mut i = EVICT_CAPACITY as u64;
            b.iter(|| {
                i += 1;
                black_box(pool.insert(black_box(i)).unwrap())
            });
        });
    }
    group.finish();
}

fn scope(c: &mut Criterion) {
    let pool = Pool::new(1024, || [0u64; 8]);
    let mut group = c.benchmark_group("scope");
    for n in [16usize, 64, 256] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new("tagpool_scope", n), |b| {
            b.iter(|| {
                let frame = pool.scope();
                for i in 0..n {
                    let value = frame.try_acquire().unwrap();
                    value[0] = black_box(i as u64);
                }
            });
        });
        let mut held = Vec::with_capacity(n);
        group.bench_function(BenchmarkId::new("tagpool_guards", n), |b| {
            b.iter(|| {
                for i in 0..n {
                    let mut value = pool.try_acquire().unwrap();
                    value[0] = black_box(i as u64);
                    held.push(value);
                }
                held.clear();
            });
        });
    }
    group.finish();
}

/// Pure arithmetic, `units` times.
fn spin(units: u64) -> u64 {
    let mut x = black_box(1u64);
    for _ in 0..units * 64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
    }
    x
}

fn probe(c: &mut Criterion, name: &str) {
    let mut group = c.benchmark_group(name);
    for threads in [1, 2] {
        group.bench_function(BenchmarkId::new("spin", threads), |b| {
            b.iter_custom(|iters| {
                parallel(threads, iters, |_, ops, barrier| {
                    barrier.wait();
                    let start = Instant::now();
                    black_box(spin(ops));
                    start
                })
            });
        });
    }
    group.finish();
}

fn probe_start(c: &mut Criterion) {
    probe(c, "handles_probe_start");
}

fn probe_end(c: &mut Criterion) {
    probe(c, "handles_probe_end");
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = probe_start, keyed::<HandlePool<u64>>, keyed::<Slab<u64>>, evict, scope, probe_end
}
criterion_main!(benches);
