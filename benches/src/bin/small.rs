//! The sizing rule for small pools, measured: pools whose capacity is
//! comparable to threads × cache size, with tagpool's default caches (an
//! eighth of the capacity per thread, none below 32) against caches off
//! (the 0.1 path: every operation on the shared free list).
//!
//! ```text
//! cargo run --release -p tagpool-benches --bin small
//! ```
//!
//! Each figure is the median of 11 rounds of wall-clock time per operation
//! (acquire + touch + release) over all threads; the two settings alternate
//! round by round in one process. Run it with nothing else on the machine.

use std::hint::black_box;
use std::sync::Barrier;
use std::time::Instant;

use tagpool::Pool;

/// Operations per thread per round.
const OPS: u64 = 200_000;
/// Rounds per setting; the median is reported.
const ROUNDS: usize = 11;

/// Wall-clock ns per operation of `threads` threads doing `OPS` operations
/// each on `pool`.
fn round(pool: &Pool<[u64; 8]>, threads: usize) -> f64 {
    let barrier = Barrier::new(threads);
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                for i in 0..OPS {
                    // At most `threads` guards are out at once, fewer than
                    // the capacity: `try_acquire` never fails.
                    let mut g = pool.try_acquire().expect("fewer threads than slots");
                    g[0] = black_box(i);
                }
            });
        }
    });
    start.elapsed().as_secs_f64() * 1e9 / (OPS * threads as u64) as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    println!("| capacity | threads | cache (default rule) | default ns/op | caches off ns/op | default / off |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for capacity in [16, 32, 64, 128] {
        for threads in [2, 4, 8] {
            let on = Pool::new(capacity, || [0u64; 8]);
            let off = Pool::builder(|| [0u64; 8])
                .capacity(capacity)
                .thread_cache(false)
                .build()
                .expect("a valid capacity");
            let (mut a, mut b) = (Vec::new(), Vec::new());
            for _ in 0..ROUNDS {
                a.push(round(&on, threads));
                b.push(round(&off, threads));
            }
            let (a, b) = (median(a), median(b));
            // The cache size the default rule chose, from the pool's Debug.
            let size = format!("{on:?}")
                .split("thread_cache: ")
                .nth(1)
                .and_then(|rest| rest.split(',').next())
                .unwrap_or("?")
                .to_owned();
            println!(
                "| {capacity} | {threads} | {size} | {a:.1} | {b:.1} | {:.2} |",
                a / b
            );
        }
    }
}
