//! The sizing rule for small pools, measured: pools whose capacity is
//! comparable to threads × cache size, with tagpool's default caches against
//! caches off (every operation on the shared free list) and fixed sizes.
//!
//! ```text
//! cargo run --release -p tagpool-benches --bin small            # every row
//! cargo run --release -p tagpool-benches --bin small -- ring mt4/ # rows whose name contains either
//! ```
//!
//! Two patterns:
//! - `ringC/T`: `T` threads share a pool of `C` slots, each keeping `C / T`
//!   values and replacing the oldest (release it, then acquire): demand
//!   equals the capacity, so an exact pool never refuses at quiescence.
//! - `mtC/T`: `T` threads each acquire (waiting if the pool is empty), touch
//!   and release, on a pool of `C` slots (`T` may exceed `C`).
//!
//! Each figure is the median of 9 rounds of wall-clock time per operation
//! (acquire + touch + release) over all threads; the settings alternate
//! round by round in one process. Run it with nothing else on the machine.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use tagpool::Pool;

/// Wall-clock time each round runs for, about.
const ROUND: Duration = Duration::from_millis(60);
/// Rounds per setting; the median is reported.
const ROUNDS: usize = 9;

#[derive(Clone, Copy)]
enum Pattern {
    /// Each thread keeps `capacity / threads` values, replacing the oldest.
    Ring,
    /// Each thread acquires (waiting), touches, releases.
    Mt,
    /// One thread acquires owned guards (waiting), touches and sends them
    /// through a bounded channel of 64; another drops them.
    Handoff,
    /// `T` tokio tasks on a 2-worker runtime each cycle an async acquire,
    /// a touch, one yield while holding, and a release (the criterion
    /// suite's `async` group).
    Async,
}

/// Wall-clock ns per operation of `threads` threads on `pool` for about
/// [`ROUND`], and the number of `try_acquire` refusals (ring only).
fn round(pool: &Arc<Pool<[u64; 8]>>, pattern: Pattern, threads: usize) -> (f64, u64) {
    match pattern {
        Pattern::Handoff => return handoff(pool),
        Pattern::Async => return tasks(pool, threads),
        _ => {}
    }
    let barrier = Barrier::new(threads);
    let keep = (pool.capacity() / threads).max(1);
    let start = Instant::now();
    let (ops, refused) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut ops = 0u64;
                    let mut refused = 0u64;
                    barrier.wait();
                    let begin = Instant::now();
                    match pattern {
                        Pattern::Ring => {
                            let mut ring = VecDeque::with_capacity(keep);
                            for _ in 0..keep {
                                ring.push_back(pool.acquire().expect("open"));
                            }
                            while begin.elapsed() < ROUND {
                                for _ in 0..256 {
                                    drop(ring.pop_front());
                                    let mut g = loop {
                                        match pool.try_acquire() {
                                            Ok(g) => break g,
                                            Err(_) => refused += 1,
                                        }
                                    };
                                    g[0] = black_box(ops);
                                    ring.push_back(g);
                                    ops += 1;
                                }
                            }
                        }
                        Pattern::Handoff | Pattern::Async => unreachable!("handled above"),
                        Pattern::Mt => {
                            while begin.elapsed() < ROUND {
                                for _ in 0..256 {
                                    let mut g = pool.acquire().expect("open");
                                    g[0] = black_box(ops);
                                    drop(g);
                                    ops += 1;
                                }
                            }
                        }
                    }
                    (ops, refused)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    });
    (start.elapsed().as_secs_f64() * 1e9 / ops as f64, refused)
}

/// The hand-off pattern: wall-clock ns per value, no refusals counted.
fn handoff(pool: &Arc<Pool<[u64; 8]>>) -> (f64, u64) {
    let (tx, rx) = sync_channel(64);
    let start = Instant::now();
    let consumer = std::thread::spawn(move || {
        let mut n = 0u64;
        for g in rx {
            drop(g);
            n += 1;
        }
        n
    });
    let mut ops = 0u64;
    while start.elapsed() < ROUND {
        for _ in 0..256 {
            let mut g = pool.acquire_owned().expect("open");
            g[0] = black_box(ops);
            tx.send(g).expect("consumer alive");
            ops += 1;
        }
    }
    drop(tx);
    let n = consumer.join().expect("no panic");
    (start.elapsed().as_secs_f64() * 1e9 / n as f64, 0)
}

/// The async pattern: wall-clock ns per operation over all tasks.
fn tasks(pool: &Arc<Pool<[u64; 8]>>, tasks: usize) -> (f64, u64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("a tokio runtime");
    let start = Instant::now();
    let ops: u64 = runtime.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let pool = Arc::clone(pool);
                tokio::spawn(async move {
                    let begin = Instant::now();
                    let mut ops = 0u64;
                    while begin.elapsed() < ROUND {
                        let mut g = pool.acquire_owned_async().await.expect("open");
                        g[0] = black_box(ops);
                        tokio::task::yield_now().await;
                        drop(g);
                        ops += 1;
                    }
                    ops
                })
            })
            .collect();
        let mut total = 0;
        for h in handles {
            total += h.await.expect("no panic");
        }
        total
    });
    (start.elapsed().as_secs_f64() * 1e9 / ops as f64, 0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).collect();
    let rows: &[(Pattern, &str, usize, usize)] = &[
        (Pattern::Ring, "ring", 4, 2),
        (Pattern::Ring, "ring", 16, 2),
        (Pattern::Ring, "ring", 16, 4),
        (Pattern::Ring, "ring", 64, 2),
        (Pattern::Ring, "ring", 64, 16),
        (Pattern::Ring, "ring", 64, 32),
        (Pattern::Mt, "mt", 1, 2),
        (Pattern::Mt, "mt", 2, 2),
        (Pattern::Mt, "mt", 2, 4),
        (Pattern::Mt, "mt", 4, 2),
        (Pattern::Mt, "mt", 4, 8),
        (Pattern::Mt, "mt", 16, 2),
        (Pattern::Mt, "mt", 16, 16),
        (Pattern::Mt, "mt", 16, 32),
        (Pattern::Mt, "mt", 64, 16),
        (Pattern::Mt, "mt", 64, 64),
        (Pattern::Mt, "mt", 1024, 32),
        (Pattern::Mt, "mt", 64, 128),
        (Pattern::Mt, "mt", 256, 128),
        (Pattern::Ring, "ring", 256, 64),
        (Pattern::Handoff, "handoff", 4, 2),
        (Pattern::Handoff, "handoff", 16, 2),
        (Pattern::Handoff, "handoff", 64, 2),
        (Pattern::Handoff, "handoff", 1024, 2),
        (Pattern::Async, "async", 4, 16),
        (Pattern::Async, "async", 16, 64),
        (Pattern::Async, "async", 1024, 16),
    ];
    let settings: &[(&str, Option<usize>)] = &[
        ("default", None),
        ("off", Some(0)),
        ("2", Some(2)),
        ("4", Some(4)),
        ("8", Some(8)),
        ("16", Some(16)),
    ];
    print!("| row | default size |");
    for (name, _) in settings {
        print!(" {name} ns/op |");
    }
    println!(" refusals (default) |");
    print!("|---|---:|");
    for _ in settings {
        print!("---:|");
    }
    println!("---:|");
    for &(pattern, name, capacity, threads) in rows {
        let label = format!("{name}{capacity}/{threads}");
        if !filters.is_empty() && !filters.iter().any(|f| label.contains(f.as_str())) {
            continue;
        }
        let pools: Vec<Arc<Pool<[u64; 8]>>> = settings
            .iter()
            .map(|(_, size)| {
                let b = Pool::builder(|| [0u64; 8]).capacity(capacity);
                match size {
                    None => b.build(),
                    Some(s) => b.thread_cache_size(*s).build(),
                }
                .map(Arc::new)
                .expect("a valid pool")
            })
            .collect();
        let mut times = vec![Vec::new(); pools.len()];
        let mut refused = 0;
        for _ in 0..ROUNDS {
            for (i, pool) in pools.iter().enumerate() {
                let (t, r) = round(pool, pattern, threads);
                times[i].push(t);
                if i == 0 {
                    refused += r;
                }
            }
        }
        let size = format!("{:?}", pools[0])
            .split("thread_cache: ")
            .nth(1)
            .and_then(|rest| rest.split([',', ' ']).next())
            .unwrap_or("?")
            .to_owned();
        print!("| {label} | {size} |");
        for t in times {
            print!(" {:.1} |", median(t));
        }
        println!(" {refused} |");
    }
}
