//! tagpool's `HandlePool` shared by threads, against a `SlotMap` behind
//! std's `RwLock`, parking_lot's `RwLock` and std's `Mutex`, sharded-slab's
//! `Slab` and dashmap's `DashMap`, the stores interleaved round by round
//! in one process: ratios that the machine's slow and fast spells (and
//! other processes) shift for every store alike.
//!
//! ```text
//! cargo run --release -p tagpool-benches --bin handles_mt                  # every row
//! cargo run --release -p tagpool-benches --bin handles_mt -- hot8 iter     # rows whose name contains either
//! cargo run --release -p tagpool-benches --bin handles_mt -- --threads 1,2,16 --rounds 15 --ms 50
//! cargo run --release -p tagpool-benches --bin handles_mt -- --threads 2 --churn-per-us 1 iter_churn
//! cargo run --release -p tagpool-benches --bin handles_mt -- benches/RESULTS.md   # and write it there
//! ```
//!
//! Given a file (an argument ending in `.md`), it writes its table there,
//! between `<!-- handles_mt:start -->` and `<!-- handles_mt:end -->` if the
//! file has them (else the file is the table).
//!
//! The workloads are those of `tagpool_benches::handles_mt` (4096 `u64`
//! values live in stores of 8192), each on 1 and 2 threads and on as many
//! as the machine has CPUs (`--threads` picks others). One round of a row
//! runs every store for about `--ms` milliseconds (default 100), all
//! threads started at a barrier and stopped by a flag, starting with a
//! different store each round; each figure is the median over `--rounds`
//! rounds (default 7) of ns per operation per thread (the round's time
//! times its threads over their operations: a figure that stays flat as
//! threads are added is a store that scales), and each ratio the median of
//! the rounds' ratios. `iter_churn` counts per value visited, by the
//! iterating threads only; sharded-slab has no iteration through `&self`
//! (`-`). Its churner removes and inserts flat out, unless
//! `--churn-per-us X` paces it at X pairs per µs (catching up on the pairs
//! it falls behind: a store that makes its writer wait shows it in the
//! churner's column).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::{Mutex, RwLock};
use std::time::Duration;
use tagpool_benches::median;

use sharded_slab::Slab;
use slotmap::{DefaultKey, SlotMap};
use tagpool::HandlePool;
use tagpool_benches::handles_mt::{self as mt, Counted, Dash, Populated, Store, Workload};

const USAGE: &str = "usage: handles_mt [--rounds N] [--ms MS] [--threads N,N,...] \
                     [--churn-per-us X] [ROW...] [OUT.md]";

/// Where in an output file the table goes.
const MARKERS: (&str, &str) = ("<!-- handles_mt:start -->", "<!-- handles_mt:end -->");

/// One round of a row: its index in, ns per operation per thread out.
type Measure = Box<dyn FnMut(usize) -> mt::Round>;

/// A store's measurement of one row, with its column name.
struct Column {
    name: &'static str,
    /// `None`: the store cannot run the row.
    measure: Option<Measure>,
    /// ns per operation per thread, one per round.
    figures: Vec<f64>,
    /// `iter_churn`: the churner's pairs per µs, one per round.
    churned: Vec<f64>,
}

/// The row `workload` on `threads` threads measured on `S`, its store
/// filled now and kept across the rounds.
fn column<S: Store>(workload: Workload, threads: usize, round: Duration) -> Column {
    let measure: Option<Measure> = if workload == Workload::IterChurn && !S::ITERATES {
        None
    } else {
        let populated = Populated::<S>::new();
        Some(Box::new(move |r| {
            mt::run(&populated, workload, threads, round, r)
        }))
    };
    Column {
        name: S::NAME,
        measure,
        figures: Vec::new(),
        churned: Vec::new(),
    }
}

/// Every store's column of a row, tagpool first.
fn columns(workload: Workload, threads: usize, round: Duration) -> Vec<Column> {
    vec![
        column::<HandlePool<u64>>(workload, threads, round),
        column::<Counted>(workload, threads, round),
        column::<RwLock<SlotMap<DefaultKey, u64>>>(workload, threads, round),
        column::<parking_lot::RwLock<SlotMap<DefaultKey, u64>>>(workload, threads, round),
        column::<Mutex<SlotMap<DefaultKey, u64>>>(workload, threads, round),
        column::<Slab<u64>>(workload, threads, round),
        column::<Dash>(workload, threads, round),
    ]
}

/// 1, 2 and the machine's CPUs, without repeats.
fn default_threads() -> Vec<usize> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads = vec![1, 2, cpus];
    threads.sort_unstable();
    threads.dedup();
    threads
}

fn main() {
    let mut rounds = 7;
    let mut ms = 100u64;
    let mut threads = default_threads();
    let mut filters = Vec::new();
    let mut out_file = None;
    let mut churn_per_us = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let number = |v: Option<String>| v.and_then(|v| v.parse::<u64>().ok()).filter(|n| *n > 0);
        match arg.as_str() {
            "--rounds" => rounds = number(args.next()).expect(USAGE) as usize,
            "--ms" => ms = number(args.next()).expect(USAGE),
            "--churn-per-us" => {
                let per_us = args.next().and_then(|v| v.parse::<f64>().ok());
                let per_us = per_us.filter(|n| *n >= 0.0).expect(USAGE);
                mt::set_churn_pace(per_us);
                churn_per_us = Some(per_us);
            }
            "--threads" => {
                let list = args.next().expect(USAGE);
                threads = list
                    .split(',')
                    .map(|n| number(Some(n.trim().to_owned())).expect(USAGE) as usize)
                    .collect();
                threads.dedup();
            }
            "-h" | "--help" => return println!("{USAGE}"),
            _ if arg.ends_with(".md") => out_file = Some(PathBuf::from(arg)),
            _ => filters.push(arg),
        }
    }
    let round = Duration::from_millis(ms);
    let machine = tagpool_benches::Machine::current();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "`handles_mt` binary, {} on {}, {} logical CPUs: median of {rounds} rounds of about \
         {ms} ms per store, the stores interleaved; ns per operation per thread (round time \
         × threads / operations; `iter_churn`: per value visited by the iterating threads, \
         one other thread churning{}, whose remove + insert pairs per µs the last column \
         gives), and tagpool / store as the median of the rounds' \
         ratios. {} live `u64` values in room for {}; reads in batches of {} per read section \
         (tagpool: `read()`) or lock; `tagpool_counted`: `get` and `iter()`, counted.\n",
        machine.date,
        machine.cpu,
        machine.cpus,
        match churn_per_us {
            Some(per_us) if per_us > 0.0 => format!(" paced at {per_us} pairs per µs"),
            _ => String::from(" flat out"),
        },
        mt::LIVE,
        mt::CAPACITY,
        mt::BATCH
    );
    out.push_str(
        "| workload | threads | store | ns/op/thread | tagpool / store | churner pairs/µs |\n\
         |---|---:|---|---:|---:|---:|\n",
    );
    print!("{out}");
    for workload in Workload::ALL {
        let name = workload.name();
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        for &n in &threads {
            let mut columns = columns(workload, n, round);
            let count = columns.len();
            for r in 0..rounds {
                for k in 0..count {
                    let column = &mut columns[(r + k) % count];
                    if let Some(measure) = &mut column.measure {
                        let round = measure(r);
                        column.figures.push(round.ns_per_op);
                        column.churned.push(round.churned_per_us);
                    }
                }
            }
            let tagpool = columns[0].figures.clone();
            for column in &mut columns {
                let churned =
                    if workload == Workload::IterChurn && n > 1 && !column.churned.is_empty() {
                        format!("{:.1}", median(&mut column.churned))
                    } else {
                        "-".to_owned()
                    };
                let line = if column.figures.is_empty() {
                    format!("| {name} | {n} | {} | - | - | - |", column.name)
                } else {
                    let mut ratios: Vec<f64> = tagpool
                        .iter()
                        .zip(&column.figures)
                        .map(|(t, s)| t / s)
                        .collect();
                    let ns = median(&mut column.figures);
                    format!(
                        "| {name} | {n} | {} | {ns:.2} | {:.2} | {churned} |",
                        column.name,
                        median(&mut ratios)
                    )
                };
                println!("{line}");
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    if let Some(path) = out_file {
        tagpool_benches::write_table_or_exit("handles_mt", &path, &out, MARKERS);
    }
}
