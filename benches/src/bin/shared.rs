//! `SharedPoolGuard` (a shared pooled value) against `Arc`: the cost of a
//! clone and a drop, the two interleaved round by round in one process.
//!
//! ```text
//! cargo run --release -p tagpool-benches --bin shared
//! cargo run --release -p tagpool-benches --bin shared -- --rounds 15 --ms 50
//! cargo run --release -p tagpool-benches --bin shared -- benches/RESULTS.md   # and write it there
//! ```
//!
//! Rows, each on 1 and 2 threads (every thread clones and drops shares of
//! the same value, so on two threads both write one counter):
//! - `clone_drop`: one clone, then its drop, in a loop;
//! - `clone8_drop8`: eight clones kept, then their drops;
//! - `clone_read_drop`: one clone, a read through it (`Deref`), its drop.
//!
//! Each figure is the median over the rounds of ns per clone + drop pair
//! per thread; each ratio the median of the rounds' ratios.

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use tagpool::{OwnedPoolGuard, Pool, SharedPoolGuard};
use tagpool_benches::median;

const USAGE: &str = "usage: shared [--rounds N] [--ms MS] [OUT.md]";
const MARKERS: (&str, &str) = ("<!-- shared:start -->", "<!-- shared:end -->");

/// A value shared by the threads of a row.
trait Share: Clone + Send + Sync + 'static {
    fn read(&self) -> u64;
}

impl Share for SharedPoolGuard<u64> {
    #[inline]
    fn read(&self) -> u64 {
        **self
    }
}

impl Share for Arc<u64> {
    #[inline]
    fn read(&self) -> u64 {
        **self
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Row {
    CloneDrop,
    Clone8Drop8,
    CloneReadDrop,
}

impl Row {
    fn name(self) -> &'static str {
        match self {
            Row::CloneDrop => "clone_drop",
            Row::Clone8Drop8 => "clone8_drop8",
            Row::CloneReadDrop => "clone_read_drop",
        }
    }
}

/// One round: `threads` threads run `row` on shares of `value` for about
/// `duration`; returns ns per clone + drop pair per thread.
fn round<S: Share>(value: &S, row: Row, threads: usize, duration: Duration) -> f64 {
    let stop = AtomicBool::new(false);
    let barrier = Barrier::new(threads + 1);
    let (start, pairs, end) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (stop, barrier) = (&stop, &barrier);
                let value = value.clone();
                s.spawn(move || {
                    barrier.wait();
                    let mut pairs = 0u64;
                    let mut sum = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..64 {
                            match row {
                                Row::CloneDrop => drop(black_box(value.clone())),
                                Row::Clone8Drop8 => {
                                    let eight: [S; 8] = std::array::from_fn(|_| value.clone());
                                    drop(black_box(eight));
                                }
                                Row::CloneReadDrop => {
                                    let share = black_box(value.clone());
                                    sum = sum.wrapping_add(share.read());
                                }
                            }
                        }
                        pairs += if row == Row::Clone8Drop8 { 64 * 8 } else { 64 };
                    }
                    black_box(sum);
                    (pairs, Instant::now())
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(duration);
        stop.store(true, Ordering::Relaxed);
        let results: Vec<(u64, Instant)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        let end = results.iter().map(|r| r.1).max().unwrap();
        (start, results.iter().map(|r| r.0).sum::<u64>(), end)
    });
    end.duration_since(start).as_nanos() as f64 * threads as f64 / pairs as f64
}

fn main() {
    let mut rounds = 9;
    let mut ms = 100u64;
    let mut out_file = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let number = |v: Option<String>| v.and_then(|v| v.parse::<u64>().ok()).filter(|n| *n > 0);
        match arg.as_str() {
            "--rounds" => rounds = number(args.next()).expect(USAGE) as usize,
            "--ms" => ms = number(args.next()).expect(USAGE),
            "-h" | "--help" => return println!("{USAGE}"),
            _ if arg.ends_with(".md") => out_file = Some(PathBuf::from(arg)),
            _ => panic!("{USAGE}"),
        }
    }
    let duration = Duration::from_millis(ms);
    let pool = Arc::new(Pool::new(1, || 7u64));
    let shared = OwnedPoolGuard::share(pool.acquire_owned().expect("a slot"));
    let arc = Arc::new(7u64);
    let machine = tagpool_benches::Machine::current();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "`shared` binary, {} on {}, {} logical CPUs: median of {rounds} rounds of about {ms} ms \
         per type, the two alternating which goes first; ns per clone + drop per thread (every \
         thread on shares of one `u64`), and SharedPoolGuard / Arc as the median of the rounds' \
         ratios.\n",
        machine.date, machine.cpu, machine.cpus
    );
    out.push_str(
        "| row | threads | SharedPoolGuard | Arc | SharedPoolGuard / Arc |\n|---|---:|---:|---:|---:|\n",
    );
    print!("{out}");
    for row in [Row::CloneDrop, Row::Clone8Drop8, Row::CloneReadDrop] {
        for threads in [1, 2] {
            let (mut ours, mut arcs, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
            for r in 0..rounds {
                let (a, b) = if r % 2 == 0 {
                    let a = round(&shared, row, threads, duration);
                    (a, round(&arc, row, threads, duration))
                } else {
                    let b = round(&arc, row, threads, duration);
                    (round(&shared, row, threads, duration), b)
                };
                ours.push(a);
                arcs.push(b);
                ratios.push(a / b);
            }
            let line = format!(
                "| {} | {threads} | {:.2} | {:.2} | {:.2} |",
                row.name(),
                median(&mut ours),
                median(&mut arcs),
                median(&mut ratios)
            );
            println!("{line}");
            out.push_str(&line);
            out.push('\n');
        }
    }
    drop(shared);
    if let Some(path) = out_file {
        tagpool_benches::write_table_or_exit("shared", &path, &out, MARKERS);
    }
}
