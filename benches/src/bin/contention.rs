//! Counts failed compare-exchanges on tagpool's free-list head per operation
//! in the multi-threaded workloads, to show where the single head costs time.
//!
//! Needs a bench-only build of tagpool that counts them:
//!
//! ```text
//! RUSTFLAGS="--cfg tagpool_cas_stats" cargo run --release -p tagpool-benches \
//!     --bin contention --target-dir target/cas-stats
//! ```
//!
//! Each row is the median of 5 runs. Every CAS on the head, successful or
//! not, takes the head's cache line exclusively. `head RMWs / op` counts
//! them all (pops, pushes, batch pops and pushes of the per-thread caches,
//! waiter-flag updates) per operation: the number of times an operation
//! claims the shared line, a lower bound on its cache-line transfers when
//! the threads really run in parallel. Without caches it is
//! `2 + retries / op`; with them, a thread touches the head once per batch.

#[cfg(tagpool_cas_stats)]
fn main() {
    use std::hint::black_box;
    use std::sync::Barrier;
    use std::time::Instant;

    use tagpool::Pool;

    const OPS: u64 = 2_000_000;
    const RUNS: usize = 5;

    /// One run: `threads` threads doing `OPS` operations each; each thread
    /// holds up to `ring` guards (1: acquire + touch + release). Returns
    /// (ns per operation, pop retries per op, push retries per op, head
    /// CASes per op).
    fn run(threads: usize, ring: usize) -> (f64, f64, f64, f64) {
        let pool = Pool::new(1024, || [0u64; 8]);
        let barrier = Barrier::new(threads);
        let start = Instant::now();
        let retries: Vec<[u64; 4]> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let mut held = std::collections::VecDeque::with_capacity(ring);
                        barrier.wait();
                        let _ = tagpool::__take_cas_retries();
                        for i in 0..OPS {
                            let mut g = pool
                                .try_acquire()
                                .expect("capacity 1024 is never exhausted");
                            g[0] = black_box(i);
                            held.push_back(g);
                            if held.len() >= ring {
                                held.pop_front();
                            }
                        }
                        held.clear();
                        tagpool::__take_cas_retries()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("no panics"))
                .collect()
        });
        let elapsed = start.elapsed();
        let ops = (OPS * threads as u64) as f64;
        let pop: u64 = retries.iter().map(|r| r[0]).sum();
        let push: u64 = retries.iter().map(|r| r[1]).sum();
        let all: u64 = retries.iter().map(|r| r.iter().sum::<u64>()).sum();
        (
            elapsed.as_nanos() as f64 / ops,
            pop as f64 / ops,
            push as f64 / ops,
            all as f64 / ops,
        )
    }

    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }

    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("tagpool head contention, capacity 1024, {OPS} ops per thread, median of {RUNS} runs, {cpus} CPUs");
    println!();
    println!(
        "| workload | threads | ns / op | pop retries / op | push retries / op | head RMWs / op |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (name, threads, ring) in [
        ("st", 1, 1),
        ("mt2", 2, 1),
        ("mt4", 4, 1),
        ("mt8", 8, 1),
        ("hold2", 2, 8),
    ] {
        let runs: Vec<_> = (0..RUNS).map(|_| run(threads, ring)).collect();
        let ns = median(runs.iter().map(|r| r.0).collect());
        let pop = median(runs.iter().map(|r| r.1).collect());
        let push = median(runs.iter().map(|r| r.2).collect());
        let rmws = median(runs.iter().map(|r| r.3).collect());
        println!("| {name} | {threads} | {ns:.1} | {pop:.3} | {push:.3} | {rmws:.3} |");
    }
}

#[cfg(not(tagpool_cas_stats))]
fn main() {
    eprintln!(
        "contention needs a bench-only build of tagpool:\n  \
         RUSTFLAGS=\"--cfg tagpool_cas_stats\" cargo run --release -p tagpool-benches \
         --bin contention --target-dir target/cas-stats"
    );
    std::process::exit(2);
}
