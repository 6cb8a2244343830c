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
//! - `handles_st_insert_remove`, `handles_st_get`, `handles_st_get_mut`,
//!   `handles_st_iter`, `handles_st_iter_mut`: one thread, `&mut` where the
//!   API allows, `HandlePool<u64>` against slotmap's `SlotMap`,
//!   `DenseSlotMap` and thunderdome's `Arena` (the workloads
//!   are `tagpool_benches::keyed`'s); the iterators per value visited.
//! - `handles_insert_full`: an insert into a full store, refused: tagpool's
//!   never-evicting pool of 64, and a slab configured to one page of 64
//!   entries per shard, filled by the measuring thread (one thread).
//! - `handles_evict`: insert into a full pool of 64 that evicts the oldest
//!   value or the least by key (tagpool only: sharded-slab cannot evict,
//!   and grows instead of filling up).
//! - `scope`: N values taken from a `Pool<[u64; 8]>` of 1024 and returned,
//!   through one `Pool::scope` (one batch) or N guards dropped one by one;
//!   per value.
//! - `handles_probe_start`, `handles_probe_end`: the same arithmetic on one
//!   and on two threads; the ratio of their times per unit of work says
//!   whether two CPUs were free (about 2: trust the `/2` rows).
//!
//! `cargo bench -p tagpool-benches --bench handles`; the medians are in
//! `target/criterion/<group>/<function>/<threads or N>/new/estimates.json`,
//! and `cargo run --release -p tagpool-benches --bin report` tabulates them.
//! The group and function names and the sizes are `tagpool_benches::handles`.

use std::hint::black_box;
use std::sync::{Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sharded_slab::Slab;
use slotmap::{DefaultKey, DenseSlotMap, SlotMap};
use tagpool::{Handle, HandlePool, Pool};
use tagpool_benches::handles::{self as names, CAPACITY, FULL_CAPACITY, LIVE, SCOPE_SIZES};
use tagpool_benches::keyed::{self as st, Store};
use thunderdome::Arena;

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
    const NAME: &'static str = names::TAGPOOL;

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
    const NAME: &'static str = names::SHARDED_SLAB;

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

/// The timed part of one thread's run: from leaving the barrier to its last
/// operation (its clean-up after that is not timed).
struct Span {
    start: Instant,
    end: Instant,
}

/// Runs `body(thread, ops, barrier)` on `threads` threads released together
/// and returns the time per operation of all of them (from the first
/// thread's start to the last thread's end), scaled to `iters`.
fn parallel<F>(threads: usize, iters: u64, body: F) -> Duration
where
    F: Fn(usize, u64, &Barrier) -> Span + Sync,
{
    let ops = iters.div_ceil(threads as u64).max(1);
    let barrier = Barrier::new(threads);
    let spans = Mutex::new(Vec::new());
    thread::scope(|s| {
        for t in 0..threads {
            let (body, barrier, spans) = (&body, &barrier, &spans);
            s.spawn(move || {
                let span = body(t, ops, barrier);
                spans.lock().unwrap().push(span);
            });
        }
    });
    let spans = spans.into_inner().unwrap();
    let first = spans.iter().map(|s| s.start).min().unwrap();
    let last = spans.iter().map(|s| s.end).max().unwrap();
    let total = last.duration_since(first);
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
        let mut group = c.benchmark_group(names::INSERT_REMOVE);
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
                    let end = Instant::now();
                    for key in live {
                        store.remove(key);
                    }
                    Span { start, end }
                })
            });
        });
        group.finish();

        let mut group = c.benchmark_group(names::GET);
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
                    let end = Instant::now();
                    for key in live {
                        store.remove(key);
                    }
                    Span { start, end }
                })
            });
        });
        group.finish();

        let mut group = c.benchmark_group(names::GET_STALE);
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
                    let end = Instant::now();
                    for key in successors {
                        store.remove(key);
                    }
                    Span { start, end }
                })
            });
        });
        group.finish();
    }
}

/// One single-threaded group: `run(store, keys, iters)` on each store in
/// turn, each on a store of its own populated once (values live
/// [`LIVE`], capacity [`CAPACITY`]), in one group so that they run back to
/// back.
fn single_group(c: &mut Criterion, group: &str, run: Workload) {
    let mut group = c.benchmark_group(group);
    bench_store::<HandlePool<u64>>(&mut group, run);
    bench_store::<SlotMap<DefaultKey, u64>>(&mut group, run);
    bench_store::<DenseSlotMap<DefaultKey, u64>>(&mut group, run);
    bench_store::<Arena<u64>>(&mut group, run);
    group.finish();
}

/// Which of `keyed`'s workloads a single-threaded group runs.
#[derive(Clone, Copy)]
enum Workload {
    InsertRemove,
    Get,
    GetMut,
    Iter,
    IterMut,
}

fn bench_store<S: Store>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    run: Workload,
) {
    let (mut store, live) = st::populated::<S>();
    group.bench_function(BenchmarkId::new(S::NAME, 1), |b| {
        b.iter_custom(|iters| match run {
            Workload::InsertRemove => st::insert_remove(&mut store, iters),
            Workload::Get => st::get(&store, &live, iters),
            Workload::GetMut => st::get_mut(&mut store, &live, iters),
            Workload::Iter => st::iter(&store, iters),
            Workload::IterMut => st::iter_mut(&mut store, iters),
        });
    });
}

fn single(c: &mut Criterion) {
    for (group, run) in [
        (names::ST_INSERT_REMOVE, Workload::InsertRemove),
        (names::ST_GET, Workload::Get),
        (names::ST_GET_MUT, Workload::GetMut),
        (names::ST_ITER, Workload::Iter),
        (names::ST_ITER_MUT, Workload::IterMut),
    ] {
        single_group(c, group, run);
    }
}

/// sharded-slab's configuration for [`insert_full`]: one page of
/// [`FULL_CAPACITY`] entries per shard, so that a thread's shard fills up
/// (by default the slab grows to billions of entries).
struct OnePage;

impl sharded_slab::Config for OnePage {
    const INITIAL_PAGE_SIZE: usize = FULL_CAPACITY;
    const MAX_PAGES: usize = 1;
}

/// An insert into a full store, refused: the value comes back (tagpool) or
/// is dropped (sharded-slab). One thread, which filled the store: the
/// slab's shards are per thread.
fn insert_full(c: &mut Criterion) {
    let mut group = c.benchmark_group(names::INSERT_FULL);

    let pool = HandlePool::new(FULL_CAPACITY);
    for i in 0..FULL_CAPACITY as u64 {
        pool.insert(i).expect("the pool has room");
    }
    group.bench_function(BenchmarkId::new(names::TAGPOOL, 1), |b| {
        b.iter(|| {
            let refused = pool.insert(black_box(1));
            assert!(refused.is_err(), "the pool is full");
            black_box(refused)
        });
    });

    let slab: Slab<u64, OnePage> = Slab::new_with_config();
    for i in 0..FULL_CAPACITY as u64 {
        slab.insert(i).expect("the shard has room");
    }
    group.bench_function(BenchmarkId::new(names::SHARDED_SLAB, 1), |b| {
        b.iter(|| {
            let refused = slab.insert(black_box(1));
            assert!(refused.is_none(), "the shard is full");
            black_box(refused)
        });
    });
    group.finish();
}

fn evict(c: &mut Criterion) {
    let mut group = c.benchmark_group(names::EVICT);
    for (name, pool) in [
        (
            names::EVICT_OLDEST,
            HandlePool::builder()
                .capacity(FULL_CAPACITY)
                .evict_oldest()
                .build()
                .unwrap(),
        ),
        (
            names::EVICT_MIN_BY_KEY,
            HandlePool::builder()
                .capacity(FULL_CAPACITY)
                .evict_min_by_key(|v: &u64| *v)
                .build()
                .unwrap(),
        ),
    ] {
        for i in 0..FULL_CAPACITY as u64 {
            pool.insert(i).unwrap();
        }
        group.bench_function(BenchmarkId::new(name, 1), |b| {
            let mut i = FULL_CAPACITY as u64;
            b.iter(|| {
                i += 1;
                black_box(pool.insert(black_box(i)).unwrap())
            });
        });
    }
    group.finish();
}

fn scope(c: &mut Criterion) {
    let pool = Pool::new(CAPACITY, || [0u64; 8]);
    let mut group = c.benchmark_group(names::SCOPE);
    for n in SCOPE_SIZES {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(BenchmarkId::new(names::SCOPE_BATCH, n), |b| {
            b.iter(|| {
                let frame = pool.scope();
                for i in 0..n {
                    let value = frame.try_acquire().unwrap();
                    value[0] = black_box(i as u64);
                }
            });
        });
        let mut held = Vec::with_capacity(n);
        group.bench_function(BenchmarkId::new(names::SCOPE_GUARDS, n), |b| {
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
                    Span {
                        start,
                        end: Instant::now(),
                    }
                })
            });
        });
    }
    group.finish();
}

fn probe_start(c: &mut Criterion) {
    probe(c, names::PROBE_START);
}

fn probe_end(c: &mut Criterion) {
    probe(c, names::PROBE_END);
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
    targets = probe_start, keyed::<HandlePool<u64>>, keyed::<Slab<u64>>, single, insert_full,
        evict, scope, probe_end
}
criterion_main!(benches);
