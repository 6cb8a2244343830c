//! A job system whose payload buffers come from a shared pool.
//!
//! One producer (the main thread) turns numbered jobs into payloads and hands
//! them to worker threads through a channel. Each payload is a `Vec<u8>` from
//! an `Arc<Pool<Vec<u8>>>` whose reset closure clears it, so a buffer keeps
//! its capacity from job to job and nothing is allocated per job.
//!
//! What it shows:
//!
//! - `acquire_owned` gives a `'static` guard that moves into the job and on
//!   to a worker thread, where it is dropped: the buffer is reset and
//!   released there, not on the producer.
//! - The pool's capacity bounds the jobs in flight. When every buffer is in a
//!   queued or running job, `acquire_owned` makes the producer wait for a
//!   worker to finish one: backpressure without a bounded channel.
//!   `stats().waits` counts how often that happened.
//!
//! At the end it prints throughput and the pool's statistics, then checks
//! that every job was processed exactly once, that checksums computed by the
//! workers match the producer's, that every buffer came out of the pool empty
//! with its capacity, that every release ran on a worker thread, and that the
//! pool is empty. It exits with status 1 if any check fails.
//!
//! ```text
//! cargo run --release --example job_system
//! cargo run --release --example job_system -- --jobs 20000 --workers 2 --capacity 16
//! ```

use std::cell::Cell;
use std::fmt::Display;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Instant;

use tagpool::{OwnedPoolGuard, Pool};

/// Every payload buffer is made with this capacity; no payload is longer.
const PAYLOAD_CAPACITY: usize = 4096;
/// The shortest payload.
const MIN_PAYLOAD: usize = 64;

const USAGE: &str = "\
usage: job_system [--jobs N] [--workers W] [--capacity C]

  --jobs N       jobs to run (default 200000)
  --workers W    worker threads (default 4)
  --capacity C   payload buffers in the pool, the most jobs in flight (default 64)";

struct Args {
    jobs: usize,
    workers: usize,
    capacity: usize,
}

impl Args {
    fn parse() -> Result<Self, String> {
        let mut args = Args {
            jobs: 200_000,
            workers: 4,
            capacity: 64,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            match flag.as_str() {
                "--jobs" => args.jobs = value(&mut it, &flag)?,
                "--workers" => args.workers = value(&mut it, &flag)?,
                "--capacity" => args.capacity = value(&mut it, &flag)?,
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        if args.jobs == 0 || args.workers == 0 || args.capacity == 0 {
            return Err("--jobs, --workers and --capacity must be at least 1".into());
        }
        Ok(args)
    }
}

/// Parses the value that follows `flag`.
fn value<T>(it: &mut impl Iterator<Item = String>, flag: &str) -> Result<T, String>
where
    T: FromStr,
    T::Err: Display,
{
    let raw = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
    raw.parse().map_err(|err| format!("{flag} {raw}: {err}"))
}

/// A unit of work: its payload buffer travels with it and goes back to the
/// pool when the job is dropped, wherever that happens.
struct Job {
    id: usize,
    /// The producer's checksum of `payload`.
    checksum: u64,
    payload: OwnedPoolGuard<Vec<u8>>,
}

/// What one worker did.
#[derive(Default)]
struct WorkerReport {
    jobs: u64,
    bytes: u64,
    /// Wrapping sum of the checksums this worker computed.
    checksum_sum: u64,
    /// Jobs whose payload did not hash to the producer's checksum.
    corrupt: u64,
}

thread_local! {
    /// Set on worker threads, so that the reset closure can tell where it runs.
    static ON_WORKER: Cell<bool> = const { Cell::new(false) };
}

/// xorshift64: a tiny deterministic generator for payload contents.
fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// FNV-1a, 64 bits: the "processing" both sides do on a payload.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Fills an empty `payload` with the deterministic contents of job `id`.
fn fill(payload: &mut Vec<u8>, id: usize) {
    let mut state = (id as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let len = MIN_PAYLOAD + (xorshift(&mut state) as usize) % (PAYLOAD_CAPACITY - MIN_PAYLOAD);
    while payload.len() < len {
        let word = xorshift(&mut state).to_le_bytes();
        let take = (len - payload.len()).min(word.len());
        payload.extend_from_slice(&word[..take]);
    }
}

fn worker(jobs: &Mutex<mpsc::Receiver<Job>>, seen: &[AtomicU8]) -> WorkerReport {
    ON_WORKER.with(|on| on.set(true));
    let mut report = WorkerReport::default();
    loop {
        // Hold the lock only to take one job; `Err` means the producer is
        // done and the queue is drained.
        let next = jobs.lock().expect("no worker panics").recv();
        let job = match next {
            Ok(job) => job,
            Err(_) => break,
        };
        let checksum = fnv1a(&job.payload);
        if checksum != job.checksum {
            report.corrupt += 1;
        }
        // Relaxed: a tally read after every worker is joined.
        seen[job.id].fetch_add(1, Ordering::Relaxed);
        report.jobs += 1;
        report.bytes += job.payload.len() as u64;
        report.checksum_sum = report.checksum_sum.wrapping_add(checksum);
        // `job` is dropped here: its payload is cleared and released on this
        // worker thread.
    }
    report
}

/// Prints one check and remembers whether any failed.
#[derive(Default)]
struct Checks {
    failed: usize,
}

impl Checks {
    fn check(&mut self, ok: bool, what: impl Display) {
        println!("  {}  {what}", if ok { "ok    " } else { "FAILED" });
        if !ok {
            self.failed += 1;
        }
    }
}

fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("job_system: {err}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };

    let resets = Arc::new(AtomicU64::new(0));
    let worker_resets = Arc::new(AtomicU64::new(0));
    let pool = {
        let resets = Arc::clone(&resets);
        let worker_resets = Arc::clone(&worker_resets);
        Pool::builder(|| Vec::with_capacity(PAYLOAD_CAPACITY))
            .capacity(args.capacity)
            .reset(move |payload: &mut Vec<u8>| {
                payload.clear(); // keeps the capacity
                                 // Relaxed: tallies read after every worker is joined.
                resets.fetch_add(1, Ordering::Relaxed);
                if ON_WORKER.with(Cell::get) {
                    worker_resets.fetch_add(1, Ordering::Relaxed);
                }
            })
            .build()
    };
    let pool = match pool {
        Ok(pool) => Arc::new(pool),
        Err(err) => {
            eprintln!("job_system: {err}");
            return ExitCode::from(2);
        }
    };

    let seen: Arc<[AtomicU8]> = (0..args.jobs).map(|_| AtomicU8::new(0)).collect();
    let (sender, receiver) = mpsc::channel::<Job>();
    let receiver = Arc::new(Mutex::new(receiver));

    let start = Instant::now();
    let workers: Vec<_> = (0..args.workers)
        .map(|n| {
            let receiver = Arc::clone(&receiver);
            let seen = Arc::clone(&seen);
            thread::Builder::new()
                .name(format!("worker-{n}"))
                .spawn(move || worker(&receiver, &seen))
                .expect("spawning a worker thread")
        })
        .collect();

    // The producer: one buffer per job, waiting while all are in flight.
    let mut produced_sum = 0u64;
    let mut dirty_buffers = 0u64;
    for id in 0..args.jobs {
        // Waits (a short spin, then parked) while every buffer is in flight.
        let mut payload = pool.acquire_owned().unwrap();
        if !payload.is_empty() || payload.capacity() < PAYLOAD_CAPACITY {
            dirty_buffers += 1;
            payload.clear();
        }
        fill(&mut payload, id);
        let checksum = fnv1a(&payload);
        produced_sum = produced_sum.wrapping_add(checksum);
        let job = Job {
            id,
            checksum,
            payload,
        };
        sender.send(job).expect("workers outlive the producer");
    }
    drop(sender); // lets the workers' `recv` end once the queue is empty

    let reports: Vec<WorkerReport> = workers
        .into_iter()
        .map(|handle| handle.join().expect("a worker panicked"))
        .collect();
    let elapsed = start.elapsed();

    let processed: u64 = reports.iter().map(|r| r.jobs).sum();
    let bytes: u64 = reports.iter().map(|r| r.bytes).sum();
    let corrupt: u64 = reports.iter().map(|r| r.corrupt).sum();
    let worker_sum = reports
        .iter()
        .fold(0u64, |sum, r| sum.wrapping_add(r.checksum_sum));
    let once = seen
        .iter()
        .filter(|n| n.load(Ordering::Relaxed) == 1)
        .count();
    let stats = pool.stats();
    let resets = resets.load(Ordering::Relaxed);
    let worker_resets = worker_resets.load(Ordering::Relaxed);
    let secs = elapsed.as_secs_f64();
    let per_worker: Vec<String> = reports.iter().map(|r| r.jobs.to_string()).collect();

    println!(
        "job_system: {} jobs, 1 producer, {} worker threads, {} pooled payload buffers",
        args.jobs, args.workers, stats.capacity
    );
    println!("  elapsed          {:.3} s", secs);
    println!(
        "  throughput       {:.0} jobs/s, {:.1} MiB/s of payload",
        processed as f64 / secs,
        bytes as f64 / secs / (1024.0 * 1024.0)
    );
    println!("  jobs per worker  {}", per_worker.join(", "));
    println!(
        "  pool             peak in use {} of {}, failed acquires {}, waits {}, timeouts {}",
        stats.peak_in_use, stats.capacity, stats.failed_acquires, stats.waits, stats.timeouts
    );
    println!(
        "  producer         found every buffer in flight {} times (stats().waits)",
        stats.waits
    );
    println!("checks");
    let mut checks = Checks::default();
    checks.check(
        processed == args.jobs as u64 && once == args.jobs,
        format_args!(
            "every job processed exactly once ({processed} processed, {once} of {} seen once)",
            args.jobs
        ),
    );
    checks.check(
        corrupt == 0 && worker_sum == produced_sum,
        format_args!(
            "checksums match (producer {produced_sum:#018x}, workers {worker_sum:#018x}, \
             {corrupt} corrupt)"
        ),
    );
    checks.check(
        dirty_buffers == 0,
        format_args!(
            "every buffer came out of the pool empty with capacity >= {PAYLOAD_CAPACITY} \
             ({dirty_buffers} did not)"
        ),
    );
    checks.check(
        resets == args.jobs as u64 && worker_resets == resets,
        format_args!(
            "every buffer was reset once, on a worker thread ({worker_resets} of {resets})"
        ),
    );
    checks.check(
        stats.failed_acquires == 0 && stats.waits <= args.jobs as u64,
        format_args!(
            "pool counters agree with the producer (no try_acquire, failed acquires {}; \
             waits {} <= {} acquires)",
            stats.failed_acquires, stats.waits, args.jobs
        ),
    );
    checks.check(
        stats.peak_in_use <= stats.capacity,
        format_args!(
            "jobs in flight never exceeded the pool (peak {} of {})",
            stats.peak_in_use, stats.capacity
        ),
    );
    checks.check(
        stats.in_use == 0 && stats.available == stats.capacity,
        format_args!(
            "pool empty at the end (in use {}, available {})",
            stats.in_use, stats.available
        ),
    );

    if checks.failed == 0 {
        ExitCode::SUCCESS
    } else {
        println!("{} check(s) failed", checks.failed);
        ExitCode::FAILURE
    }
}
