//! Per-call latency of single acquires and single releases in the `mt4`
//! workload, for tagpool and every thread-safe peer, as percentiles.
//!
//! ```text
//! cargo run --release -p tagpool-benches --bin latency -- [--samples N] [OUT.md]
//! ```
//!
//! Four threads share one pool of capacity 1024 holding `[u64; 8]` and loop
//! over acquire + touch + release. After a warm-up, each thread times every
//! acquire and every release with a pair of `Instant::now()` around the one
//! call, `N` of each per thread (200,000 by default), and the four threads'
//! samples are merged. Nothing is subtracted: the line under the table gives
//! the cost of an empty `Instant` pair on this machine, the floor of every
//! figure. With fewer cores than threads, the tails include preemption.
//!
//! `OUT.md` is overwritten, unless it holds the markers
//! `<!-- latency-table:start -->` and `<!-- latency-table:end -->`: then only
//! the text between them is replaced.

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Barrier;
use std::thread;
use std::time::Instant;

use tagpool_benches::subjects::{each_subject, EachSubject, Subject};
use tagpool_benches::{write_between, Machine, CAPACITY, LATENCY_MARKERS};

const USAGE: &str = "usage: latency [--samples N] [OUT.md]";

/// Threads sharing the pool, as in `mt4`.
const THREADS: usize = 4;

/// Timed acquires (and releases) per thread unless `--samples` says.
const DEFAULT_SAMPLES: usize = 200_000;

/// Untimed operations per thread before the timed ones, as a fraction of the
/// samples: caches, branch predictors and the pools' own state settle.
const WARM_UP_PER_SAMPLES: usize = 10;

/// The payload: 64 bytes, as in the suite's `64B` rows.
type Payload = [u64; 8];

/// The percentiles of the table, with their column labels.
const PERCENTILES: [(f64, &str); 3] = [(0.50, "p50"), (0.99, "p99"), (0.999, "p99.9")];

fn main() -> ExitCode {
    let mut samples = DEFAULT_SAMPLES;
    let mut out = None;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        match arg.to_str() {
            Some("--samples") => match args.next().and_then(|n| n.to_str()?.parse().ok()) {
                Some(n) if n > 0 => samples = n,
                _ => return fail(USAGE),
            },
            Some("-h" | "--help") => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ if out.is_none() => out = Some(PathBuf::from(arg)),
            _ => return fail(USAGE),
        }
    }

    let mut measure = Measure {
        samples,
        rows: Vec::new(),
    };
    each_subject::<Payload>(&mut measure);
    let floor = instant_pair(samples * THREADS);
    let table = render(&measure.rows, floor, samples, &Machine::current());
    print!("{table}");
    if let Some(path) = out {
        if let Err(e) = write_between(&path, &table, LATENCY_MARKERS) {
            return fail(&format!("cannot write {}: {e}", path.display()));
        }
        eprintln!("latency: wrote {}", path.display());
    }
    ExitCode::SUCCESS
}

fn fail(message: &str) -> ExitCode {
    eprintln!("latency: {message}");
    ExitCode::FAILURE
}

/// Percentiles of one kind of call, in [`PERCENTILES`] order, in ns.
type Spread = [u64; 3];

/// One row of the table.
#[derive(Debug)]
struct Row {
    /// The implementation's benchmark name.
    name: &'static str,
    /// Percentiles of single acquires.
    acquire: Spread,
    /// Percentiles of single releases.
    release: Spread,
}

/// Measures every implementation it visits, one after the other.
#[derive(Debug)]
struct Measure {
    /// Timed calls of each kind per thread.
    samples: usize,
    /// The rows measured so far, in visiting order.
    rows: Vec<Row>,
}

impl EachSubject<Payload> for Measure {
    fn visit<S: Subject<Payload>>(&mut self) {
        eprintln!("latency: {}", S::NAME);
        self.rows.push(measure::<S>(self.samples));
    }
}

/// Runs `mt4` on a fresh pool of `S` and returns the merged percentiles.
fn measure<S: Subject<Payload>>(samples: usize) -> Row {
    let pool = S::build(CAPACITY);
    let barrier = Barrier::new(THREADS);
    let per_thread: Vec<(Vec<u64>, Vec<u64>)> = thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| s.spawn(|| one_thread(&pool, &barrier, samples)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a measuring thread panicked"))
            .collect()
    });
    let (mut acquire, mut release): (Vec<u64>, Vec<u64>) = (Vec::new(), Vec::new());
    for (a, r) in per_thread {
        acquire.extend(a);
        release.extend(r);
    }
    Row {
        name: S::NAME,
        acquire: spread(&mut acquire),
        release: spread(&mut release),
    }
}

/// One of the `mt4` threads: warm-up, then `samples` timed acquires and
/// releases, returned as nanoseconds (acquires, releases).
fn one_thread<S: Subject<Payload>>(
    pool: &S,
    barrier: &Barrier,
    samples: usize,
) -> (Vec<u64>, Vec<u64>) {
    let mut acquire = Vec::with_capacity(samples);
    let mut release = Vec::with_capacity(samples);
    barrier.wait();
    for _ in 0..samples * WARM_UP_PER_SAMPLES / 100 {
        let mut item = pool.acquire();
        S::touch(&mut item, black_box(1));
        pool.release(item);
    }
    // The four threads time their calls together.
    barrier.wait();
    for _ in 0..samples {
        let t0 = Instant::now();
        let mut item = pool.acquire();
        let t1 = Instant::now();
        S::touch(&mut item, black_box(1));
        let t2 = Instant::now();
        pool.release(item);
        let t3 = Instant::now();
        acquire.push(nanos(t1 - t0));
        release.push(nanos(t3 - t2));
    }
    (acquire, release)
}

/// The cost of an empty `Instant::now()` pair, timed `n` times on this
/// thread alone: (p50, p99) in ns.
fn instant_pair(n: usize) -> (u64, u64) {
    let mut pairs: Vec<u64> = (0..n)
        .map(|_| {
            let t0 = Instant::now();
            let t1 = Instant::now();
            nanos(t1 - t0)
        })
        .collect();
    let [p50, p99, _] = spread(&mut pairs);
    (p50, p99)
}

fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The [`PERCENTILES`] of `samples` (nearest rank), sorting them.
fn spread(samples: &mut [u64]) -> Spread {
    samples.sort_unstable();
    PERCENTILES.map(|(q, _)| {
        // Nearest rank: the smallest sample with at least `q` of them at or
        // below it.
        let rank = (q * samples.len() as f64).ceil() as usize;
        samples[rank.clamp(1, samples.len()) - 1]
    })
}

/// The markdown table, the `Instant` floor under it and the conditions.
fn render(rows: &[Row], floor: (u64, u64), samples: usize, machine: &Machine) -> String {
    let mut out = String::new();
    // `fmt::Write` for `String` never fails.
    let _ = writeln!(
        out,
        "Per-call latency in ns, `mt4`: {THREADS} threads share one pool of {CAPACITY} \
         `[u64; 8]`, each timing {samples} single acquires and releases after {} untimed \
         operations. {}, {} logical CPUs, {}.\n",
        samples * WARM_UP_PER_SAMPLES / 100,
        machine.cpu,
        machine.cpus,
        machine.date
    );
    out.push_str("| implementation |");
    for call in ["acquire", "release"] {
        for (_, label) in PERCENTILES {
            let _ = write!(out, " {call} {label} |");
        }
    }
    out.push_str("\n|---|");
    for _ in 0..2 * PERCENTILES.len() {
        out.push_str("---:|");
    }
    out.push('\n');
    for row in rows {
        let _ = write!(out, "| {} |", row.name);
        for ns in row.acquire.iter().chain(&row.release) {
            let _ = write!(out, " {ns} |");
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "\nAn empty `Instant::now()` pair costs {} ns at p50 and {} ns at p99 on this \
         machine; it is included in every figure above, not subtracted.",
        floor.0, floor.1
    );
    if machine.cpus < THREADS {
        let _ = writeln!(
            out,
            "\n{THREADS} threads on {} logical CPUs: a thread preempted inside a call (or \
             while holding a lock another thread waits for) puts its time slice into the \
             tail percentiles.",
            machine.cpus
        );
    }
    out.push_str(
        "\nzeropool is not in this table: it pools byte buffers only, and this \
         workload's payload is `[u64; 8]`.\n",
    );
    out
}
