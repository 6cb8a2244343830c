//! Waiting, measured: async pools under tokio, and fair against barging
//! hand-off at capacity 1.
//!
//! ```text
//! cargo run --release -p tagpool-benches --bin waiting -- [--rounds N] [--ms MS] [--fairness-only] [OUT.md]
//! ```
//!
//! 1. **Async.** Every async implementation (`tagpool_benches::tasks`) in
//!    one tokio runtime (two workers): 16 tasks cycle acquire, touch, one
//!    yield while holding the buffer, release. Per row, `--rounds` rounds
//!    interleave the implementations (so a slow spell of the machine hits
//!    them all); the table shows the median round's time per operation,
//!    and the percentiles of every acquire's wait (from calling the acquire
//!    to holding the buffer) over all rounds. Rows: a plentiful pool
//!    (1024), a scarce one (4) and capacity 1.
//! 2. **Fairness, threads.** Capacity 1, eight threads, each looping for
//!    `--ms` milliseconds: a blocking acquire, about 200 ns of work while
//!    holding, release. tagpool (barging), tagpool fair, and a
//!    `Mutex<Vec>` + `Condvar` pool, one after the other in each of
//!    `--rounds` rounds (one run's p99.9 is a handful of waits, which one
//!    preemption of the VM can move: the rounds pool them). Throughput
//!    over all threads (median round), the percentiles of the wait over
//!    all rounds and the range of one round's p99.9, the fewest and most
//!    operations one thread
//!    got (starvation shows as a wide spread), and the slots tagpool
//!    handed straight to a waiter (`Stats::handoffs`: every release that
//!    found a waiter in the fair pool; in the barging one, only those
//!    forced by the starvation bound).
//!
//! With a file argument the tables also go there, between
//! `<!-- waiting:start -->` and `<!-- waiting:end -->` if it has them.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Barrier, Condvar, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use tagpool_benches::tasks::{self, AsyncPool, EachAsync};
use tagpool_benches::{write_between, Machine, ASYNC_TASKS, CAPACITY};

const USAGE: &str = "usage: waiting [--rounds N] [--ms MS] [--fairness-only] [OUT.md]  \
     (defaults: 7 rounds, 1000 ms per fairness run)";

/// Where the tables go in a file that has these markers.
const MARKERS: (&str, &str) = ("<!-- waiting:start -->", "<!-- waiting:end -->");

/// Operations per task per async round.
const OPS_PER_TASK: u64 = 20_000;

/// The fairness runs' threads, all on one slot.
const THREADS: usize = 8;

/// The percentiles of the tables.
const PERCENTILES: [(f64, &str); 3] = [(0.50, "p50"), (0.99, "p99"), (0.999, "p99.9")];

fn main() -> ExitCode {
    let mut rounds = 7;
    let mut ms = 1000;
    let mut out = None;
    let mut fairness_only = false;
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        let number = |args: &mut dyn Iterator<Item = std::ffi::OsString>| {
            args.next()
                .and_then(|n| n.to_str()?.parse::<u64>().ok())
                .filter(|&n| n > 0)
        };
        match arg.to_str() {
            Some("--rounds") => match number(&mut args) {
                Some(n) => rounds = n as usize,
                None => return fail(USAGE),
            },
            Some("--ms") => match number(&mut args) {
                Some(n) => ms = n,
                None => return fail(USAGE),
            },
            Some("--fairness-only") => fairness_only = true,
            Some("-h" | "--help") => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            _ if out.is_none() => out = Some(PathBuf::from(arg)),
            _ => return fail(USAGE),
        }
    }

    let machine = Machine::current();
    let mut report = format!(
        "Waiting, measured {} on {}, {} logical CPUs (`waiting` binary, {rounds} rounds, \
         {ms} ms per fairness run).\n\n",
        machine.date, machine.cpu, machine.cpus
    );
    if !fairness_only {
        report.push_str(&async_table(rounds));
        report.push('\n');
    }
    report.push_str(&fairness_table(rounds, Duration::from_millis(ms)));
    print!("{report}");
    if let Some(path) = out {
        if let Err(e) = write_between(&path, &report, MARKERS) {
            return fail(&format!("cannot write {}: {e}", path.display()));
        }
        eprintln!("waiting: wrote {}", path.display());
    }
    ExitCode::SUCCESS
}

fn fail(message: &str) -> ExitCode {
    eprintln!("waiting: {message}");
    ExitCode::FAILURE
}

/// The `q`-quantile of sorted `samples`, in microseconds.
fn quantile_us(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e6
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// One implementation's async results on one row.
struct AsyncRow {
    name: &'static str,
    /// ns per operation, one per round.
    per_op: Vec<f64>,
    /// Every acquire's wait, all rounds.
    waits: Vec<Duration>,
}

/// Runs one round of every implementation on pools of `capacity`, each
/// in a fresh runtime: a runtime settles into a scheduling mode (its
/// workers spinning or parking) that can halve or double every figure for
/// as long as it lives, so one runtime per measurement lets the median of
/// the rounds see both.
struct Round<'a> {
    capacity: usize,
    rows: &'a mut Vec<AsyncRow>,
    next: usize,
}

impl EachAsync for Round<'_> {
    fn visit<A: AsyncPool>(&mut self) {
        let pool = A::build(self.capacity);
        let runtime = tasks::runtime();
        // Warm-up: fill lazy pools, start the runtime's threads.
        tasks::cycles(&runtime, &pool, ASYNC_TASKS, 500, tasks::ignore);
        let start = Instant::now();
        let waits = tasks::cycles(&runtime, &pool, ASYNC_TASKS, OPS_PER_TASK, tasks::record);
        let elapsed = start.elapsed();
        let ops = OPS_PER_TASK as f64 * ASYNC_TASKS as f64;
        if self.rows.len() <= self.next {
            self.rows.push(AsyncRow {
                name: A::NAME,
                per_op: Vec::new(),
                waits: Vec::new(),
            });
        }
        let row = &mut self.rows[self.next];
        row.per_op.push(elapsed.as_secs_f64() * 1e9 / ops);
        row.waits.extend(waits);
        self.next += 1;
    }
}

fn async_table(rounds: usize) -> String {
    let mut out = format!(
        "Async: {ASYNC_TASKS} tasks on a 2-worker tokio runtime, each cycling acquire, touch, \
         one `yield_now` while holding, release (`Vec<u8>` buffers of 4096 bytes). ns per \
         operation (median round) and each acquire's wait in µs (all rounds); \
         ratio = ns per operation / the best other crate's.\n\n\
         | capacity | pool | ns/op | ratio | wait p50 | wait p99 | wait p99.9 |\n\
         |---:|---|---:|---:|---:|---:|---:|\n"
    );
    for capacity in [CAPACITY, ASYNC_TASKS / 4, 1] {
        let mut rows = Vec::new();
        for _ in 0..rounds {
            let mut round = Round {
                capacity,
                rows: &mut rows,
                next: 0,
            };
            tasks::each_async(&mut round);
        }
        let medians: Vec<(&str, f64)> = rows
            .iter_mut()
            .map(|r| (r.name, median(&mut r.per_op)))
            .collect();
        let best_other = medians
            .iter()
            .filter(|(name, _)| !name.starts_with("tagpool"))
            .map(|&(_, ns)| ns)
            .fold(f64::INFINITY, f64::min);
        for (row, &(name, ns)) in rows.iter_mut().zip(&medians) {
            row.waits.sort_unstable();
            let _ = std::fmt::Write::write_fmt(
                &mut out,
                format_args!(
                    "| {capacity} | {name} | {ns:.0} | {:.2} | {:.1} | {:.1} | {:.1} |\n",
                    ns / best_other,
                    quantile_us(&row.waits, PERCENTILES[0].0),
                    quantile_us(&row.waits, PERCENTILES[1].0),
                    quantile_us(&row.waits, PERCENTILES[2].0),
                ),
            );
        }
    }
    out
}

/// A blocking pool of one slot for the fairness runs.
trait OneSlot: Sync {
    const NAME: &'static str;
    /// Acquires (blocking), runs `work`, releases.
    fn cycle(&self, work: impl FnOnce());
    /// Slots handed straight to a waiter so far, if the pool counts them.
    fn handoffs(&self) -> Option<u64> {
        None
    }
}

struct Barging(tagpool::Pool<u64>);
struct Fair(tagpool::Pool<u64>);

/// A `Mutex<Vec>` of values and a `Condvar` for waiters: the classic
/// blocking pool.
struct CondvarPool {
    values: Mutex<Vec<u64>>,
    freed: Condvar,
}

impl OneSlot for Barging {
    const NAME: &'static str = "tagpool";
    fn cycle(&self, work: impl FnOnce()) {
        let mut guard = self.0.acquire().expect("never closed");
        *guard += 1;
        work();
    }
    fn handoffs(&self) -> Option<u64> {
        Some(self.0.stats().handoffs)
    }
}

impl OneSlot for Fair {
    const NAME: &'static str = "tagpool_fair";
    fn cycle(&self, work: impl FnOnce()) {
        let mut guard = self.0.acquire().expect("never closed");
        *guard += 1;
        work();
    }
    fn handoffs(&self) -> Option<u64> {
        Some(self.0.stats().handoffs)
    }
}

impl OneSlot for CondvarPool {
    const NAME: &'static str = "mutex_condvar";
    fn cycle(&self, work: impl FnOnce()) {
        let mut values = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        let mut value = loop {
            if let Some(value) = values.pop() {
                break value;
            }
            values = self
                .freed
                .wait(values)
                .unwrap_or_else(PoisonError::into_inner);
        };
        drop(values);
        value += 1;
        work();
        self.values
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(value);
        self.freed.notify_one();
    }
}

/// About 200 ns of work while holding the slot.
fn work() {
    let mut x = 1u64;
    for i in 0..200u64 {
        x = black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
    }
    black_box(x);
}

/// One implementation's fairness results over all rounds.
#[derive(Default)]
struct FairnessRow {
    /// Thousands of operations per second, one per round.
    kops: Vec<f64>,
    /// Every acquire's wait, all rounds.
    waits: Vec<Duration>,
    /// Each round's p99.9 wait, in µs.
    tails: Vec<f64>,
    /// The fewest and most operations one thread completed in a round.
    fewest: usize,
    most: usize,
}

/// One fairness run: `THREADS` threads on `pool` for `span`, added to
/// `row`.
fn fairness_run<P: OneSlot>(pool: &P, span: Duration, row: &mut FairnessRow) {
    let start_line = Barrier::new(THREADS + 1);
    let (mut waits, counts, elapsed) = thread::scope(|s| {
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let start_line = &start_line;
                s.spawn(move || {
                    let mut waits = Vec::with_capacity(1 << 16);
                    start_line.wait();
                    let deadline = Instant::now() + span;
                    loop {
                        let asked = Instant::now();
                        if asked >= deadline {
                            break;
                        }
                        let mut got = None;
                        pool.cycle(|| {
                            got = Some(asked.elapsed());
                            work();
                        });
                        waits.push(got.expect("the work ran"));
                    }
                    waits
                })
            })
            .collect();
        start_line.wait();
        let start = Instant::now();
        let per_thread: Vec<Vec<Duration>> = handles
            .into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect();
        let elapsed = start.elapsed();
        let counts: Vec<usize> = per_thread.iter().map(Vec::len).collect();
        let waits: Vec<Duration> = per_thread.into_iter().flatten().collect();
        (waits, counts, elapsed)
    });
    waits.sort_unstable();
    row.kops
        .push(waits.len() as f64 / elapsed.as_secs_f64() / 1e3);
    row.tails.push(quantile_us(&waits, PERCENTILES[2].0));
    let (fewest, most) = (
        counts.iter().min().copied().unwrap_or(0),
        counts.iter().max().copied().unwrap_or(0),
    );
    if row.waits.is_empty() {
        (row.fewest, row.most) = (fewest, most);
    } else {
        (row.fewest, row.most) = (row.fewest.min(fewest), row.most.max(most));
    }
    row.waits.extend(waits);
}

/// One line of the fairness table.
fn fairness_line<P: OneSlot>(pool: &P, row: &mut FairnessRow) -> String {
    row.waits.sort_unstable();
    let handoffs = pool
        .handoffs()
        .map_or_else(|| "–".to_owned(), |n| n.to_string());
    let tails = &mut row.tails;
    tails.sort_by(f64::total_cmp);
    format!(
        "| {} | {:.0} | {:.1} | {:.1} | {:.1} | {:.0} – {:.0} | {:.0} | {} – {} | {handoffs} |\n",
        P::NAME,
        median(&mut row.kops),
        quantile_us(&row.waits, PERCENTILES[0].0),
        quantile_us(&row.waits, PERCENTILES[1].0),
        quantile_us(&row.waits, PERCENTILES[2].0),
        tails.first().copied().unwrap_or(0.0),
        tails.last().copied().unwrap_or(0.0),
        row.waits.last().map_or(0.0, |d| d.as_secs_f64() * 1e6),
        row.fewest,
        row.most,
    )
}

fn fairness_table(rounds: usize, span: Duration) -> String {
    let mut out = format!(
        "Fairness: capacity 1, {THREADS} threads each looping for {} ms: a blocking acquire, \
         about 200 ns of work holding the slot, release; {rounds} rounds, each running the \
         three pools one after the other. Throughput in thousands of operations per second over \
         all threads (median round); the wait (call to holding the slot) in µs, over all \
         rounds, and the lowest and highest p99.9 of one round; the fewest and most operations \
         one thread completed in a round; the slots released straight to a waiter \
         (`Stats::handoffs`, all rounds).\n\n\
         | pool | kops/s | wait p50 | wait p99 | wait p99.9 | p99.9 of a round | wait max | ops per thread | hand-offs |\n\
         |---|---:|---:|---:|---:|---|---:|---|---:|\n",
        span.as_millis()
    );
    let barging = Barging(tagpool::Pool::new(1, || 0));
    let fair = Fair(
        tagpool::Pool::builder(|| 0)
            .capacity(1)
            .fair()
            .build()
            .expect("capacity 1 is valid"),
    );
    let condvar = CondvarPool {
        values: Mutex::new(vec![0]),
        freed: Condvar::new(),
    };
    let mut rows: [FairnessRow; 3] = Default::default();
    for _ in 0..rounds {
        fairness_run(&barging, span, &mut rows[0]);
        fairness_run(&fair, span, &mut rows[1]);
        fairness_run(&condvar, span, &mut rows[2]);
    }
    out.push_str(&fairness_line(&barging, &mut rows[0]));
    out.push_str(&fairness_line(&fair, &mut rows[1]));
    out.push_str(&fairness_line(&condvar, &mut rows[2]));
    out
}
