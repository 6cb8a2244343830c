//! What releasing whole segments would cost: the price of a
//! `crossbeam-epoch` pin, measured against tagpool's own operations.
//!
//! An elastic pool could return whole idle segments (links and values) to
//! the allocator, but other threads may still read a segment's links
//! speculatively (a pop reads the link of the head it loaded; a batch
//! refill walks several). Freeing a segment then needs deferred
//! reclamation, and every reader of links must be pinned: each operation on
//! the shared free list, so once per batch with per-thread caches and once
//! per acquire or release without them (fair pools, small pools, caches
//! off).
//!
//! ```text
//! cargo run --release -p tagpool-benches --bin epoch
//! ```
//!
//! One thread; each figure is the median of 15 rounds of ns per operation,
//! the variants interleaved round by round in one process:
//!
//! - `tagpool`: acquire, touch, release (default pool: per-thread caches);
//! - `tagpool + pin per op`: the same with a `crossbeam_epoch::pin()` held
//!   across each acquire + release (the cost for pools without caches);
//! - `tagpool + pin per 32 ops`: one pin per 32 operations (the cost with
//!   caches, whose batches are up to 32 slots);
//! - `tagpool, caches off`: every operation on the shared free list;
//! - `tagpool, caches off + pin per op`: what such a pool would pay.
//!
//! Run it with nothing else on the machine.

use std::hint::black_box;
use std::time::Instant;

use tagpool::Pool;

const OPS: u64 = 2_000_000;
const ROUNDS: usize = 15;

fn per_op(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_nanos() as f64 / OPS as f64
}

fn plain(pool: &Pool<[u64; 8]>) {
    for i in 0..OPS {
        let mut g = pool.try_acquire().expect("one guard at a time");
        g[0] = black_box(i);
    }
}

fn pinned_each(pool: &Pool<[u64; 8]>) {
    for i in 0..OPS {
        let guard = crossbeam_epoch::pin();
        let mut g = pool.try_acquire().expect("one guard at a time");
        g[0] = black_box(i);
        drop(g);
        drop(guard);
    }
}

fn pinned_per_batch(pool: &Pool<[u64; 8]>) {
    for i in 0..OPS {
        let guard = if i % 32 == 0 {
            Some(crossbeam_epoch::pin())
        } else {
            None
        };
        let mut g = pool.try_acquire().expect("one guard at a time");
        g[0] = black_box(i);
        drop(g);
        drop(guard);
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let cached = Pool::new(1024, || [0u64; 8]);
    let uncached = Pool::builder(|| [0u64; 8])
        .capacity(1024)
        .thread_cache(false)
        .build()
        .expect("a valid pool");
    let variants: [(&str, &dyn Fn() -> f64); 5] = [
        ("tagpool", &|| per_op(|| plain(&cached))),
        ("tagpool + pin per op", &|| per_op(|| pinned_each(&cached))),
        ("tagpool + pin per 32 ops", &|| {
            per_op(|| pinned_per_batch(&cached))
        }),
        ("tagpool, caches off", &|| per_op(|| plain(&uncached))),
        ("tagpool, caches off + pin per op", &|| {
            per_op(|| pinned_each(&uncached))
        }),
    ];
    let mut samples = vec![Vec::new(); variants.len()];
    for _ in 0..ROUNDS {
        for (i, (_, run)) in variants.iter().enumerate() {
            samples[i].push(run());
        }
    }
    let medians: Vec<f64> = samples.into_iter().map(median).collect();
    println!("| variant | ns per acquire + release (median of {ROUNDS}) | ratio to its base |");
    println!("|---|---:|---:|");
    for (i, (name, _)) in variants.iter().enumerate() {
        let base = if i < 3 { medians[0] } else { medians[3] };
        println!("| {name} | {:.2} | {:.2} |", medians[i], medians[i] / base);
    }
}
