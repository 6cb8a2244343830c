//! tagpool's `HandlePool` against slotmap and thunderdome on one thread,
//! and the refused insert against sharded-slab, the stores interleaved
//! round by round in one process: ratios that the machine's slow and fast
//! spells (and other processes) shift for every store alike.
//!
//! ```text
//! cargo run --release -p tagpool-benches --bin keyed                 # every row
//! cargo run --release -p tagpool-benches --bin keyed -- get_mut iter # rows whose name contains either
//! cargo run --release -p tagpool-benches --bin keyed -- --rounds 15 --ms 20 refused
//! cargo run --release -p tagpool-benches --bin keyed -- secondary reserve  # issue 38 item 7
//! cargo run --release -p tagpool-benches --bin keyed -- benches/RESULTS.md   # and write it there
//! ```
//!
//! Given a file (an argument ending in `.md`), it writes its table there,
//! between `<!-- keyed:start -->` and `<!-- keyed:end -->` if the file has
//! them (else the file is the table).
//!
//! Rows `section_get`, `with`, `section_iter`: tagpool's read sections
//! (a section per pass over the keys, a one-shot `with`, a section's
//! iterator) against the peers' plain `get` and shared iterator.
//!
//! Rows `insert_remove`, `get`, `get_mut`, `iter`, `iter_mut`: the
//! workloads of `tagpool_benches::keyed` (512 values live in a store of
//! 1024; the iterators per value visited), the same as the criterion groups
//! `handles_st_*`. Row `refused`: an insert into a full store of 64, one
//! thread: `HandlePool::new(64)` (caches on, the default), the same with
//! caches off, and sharded-slab's `Slab` with one page of 64 per shard.
//!
//! Rows `secondary_dense_*` and `secondary_sparse_*` (`insert`, `get`,
//! `remove`, `iter`): tagpool's `SecondaryMap` and `SparseSecondaryMap`
//! keyed by a `HandlePool`'s 512 keys, against slotmap's `SecondaryMap` and
//! `SparseSecondaryMap` keyed by a `SlotMap`'s (the workloads of
//! `tagpool_benches::secondary`). Row `reserve`: `reserve` +
//! `insert_reserved` through `&self` (`tagpool_reserve`) against one shared
//! `insert` (`tagpool_insert`), each on a `HandlePool::new(1024)` holding
//! 512 values, in timed batches of 256 whose keys are then removed outside
//! the timing; its ratio is reserve + fill / insert.
//!
//! Each round runs every store of a row for about `--ms` milliseconds
//! (default 10), starting with a different store each round; each figure is
//! the median over `--rounds` rounds (default 9) of ns per operation, and
//! each ratio the median of the rounds' ratios.

use std::fmt::Write as _;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tagpool_benches::median;

use slotmap::{DefaultKey, DenseSlotMap, SlotMap};
use tagpool::{Handle, HandlePool};
use tagpool_benches::handles::FULL_CAPACITY;
use tagpool_benches::keyed::{self as st, Store};
use tagpool_benches::secondary::{self as sec, Map};
use thunderdome::Arena;

const USAGE: &str = "usage: keyed [--rounds N] [--ms MS] [ROW...] [OUT.md]";

/// Where in an output file the table goes.
const MARKERS: (&str, &str) = ("<!-- keyed:start -->", "<!-- keyed:end -->");

/// One measurement: runs `ops` operations and returns their time.
type Measure = Box<dyn FnMut(u64) -> Duration>;

/// A store's measurement of one row, with its column name.
struct Column {
    name: &'static str,
    measure: Measure,
    /// Operations per round, calibrated on the first round.
    ops: u64,
    /// ns per operation, one per round.
    figures: Vec<f64>,
}

impl Column {
    /// A column not measured yet.
    fn new(name: &'static str, measure: Measure) -> Self {
        Column {
            name,
            measure,
            ops: 0,
            figures: Vec::new(),
        }
    }
}

/// The row `row` measured on `S`.
fn column<S: Store + 'static>(row: &str) -> Column {
    let (mut store, live) = st::populated::<S>();
    let measure: Measure = match row {
        "insert_remove" => Box::new(move |ops| st::insert_remove(&mut store, ops)),
        // The peers' plain reads, against tagpool's section forms.
        "get" | "section_get" | "with" => Box::new(move |ops| st::get(&store, &live, ops)),
        "section_iter" => Box::new(move |ops| st::iter(&store, ops)),
        "get_mut" => Box::new(move |ops| st::get_mut(&mut store, &live, ops)),
        "iter" => Box::new(move |ops| st::iter(&store, ops)),
        "iter_mut" => Box::new(move |ops| st::iter_mut(&mut store, ops)),
        _ => unreachable!("a known row"),
    };
    Column::new(S::NAME, measure)
}

/// sharded-slab with one page of [`FULL_CAPACITY`] entries per shard, so
/// that a thread's shard fills up (the bench target's `OnePage`).
struct OnePage;

impl sharded_slab::Config for OnePage {
    const INITIAL_PAGE_SIZE: usize = FULL_CAPACITY;
    const MAX_PAGES: usize = 1;
}

/// The refused-insert row's columns: full stores, filled by this thread.
fn refused() -> Vec<Column> {
    let full = |name: &'static str, pool: HandlePool<u64>| {
        for i in 0..FULL_CAPACITY as u64 {
            pool.insert(i).expect("the pool has room");
        }
        let measure: Measure = Box::new(move |ops| {
            let start = Instant::now();
            for i in 0..ops {
                assert!(pool.insert(black_box(i)).is_err(), "the pool is full");
            }
            start.elapsed()
        });
        Column::new(name, measure)
    };
    let cached = HandlePool::new(FULL_CAPACITY);
    let uncached = HandlePool::builder()
        .capacity(FULL_CAPACITY)
        .thread_cache(false)
        .build()
        .expect("a valid pool");
    let slab: sharded_slab::Slab<u64, OnePage> = sharded_slab::Slab::new_with_config();
    for i in 0..FULL_CAPACITY as u64 {
        slab.insert(i).expect("the shard has room");
    }
    vec![
        full("tagpool", cached),
        full("tagpool_no_cache", uncached),
        Column::new(
            "sharded_slab",
            Box::new(move |ops| {
                let start = Instant::now();
                for i in 0..ops {
                    assert!(slab.insert(black_box(i)).is_none(), "the shard is full");
                }
                start.elapsed()
            }),
        ),
    ]
}

/// tagpool's read-section rows: its section `get`, one-shot `with`, and
/// section iterator.
fn section_column(row: &str) -> Column {
    let (store, live) = st::populated::<HandlePool<u64>>();
    let measure: Measure = match row {
        "section_get" => Box::new(move |ops| st::section_get(&store, &live, ops)),
        "with" => Box::new(move |ops| st::with(&store, &live, ops)),
        "section_iter" => Box::new(move |ops| st::section_iter(&store, ops)),
        _ => unreachable!("a section row"),
    };
    Column::new("tagpool", measure)
}

/// The secondary-map row `op` (`insert`, `get`, `remove`, `iter`)
/// measured on `M`.
fn map_column<M: Map + 'static>(op: &str) -> Column {
    let (keys, mut map) = sec::filled::<M>();
    let order = sec::shuffled(&keys);
    let measure: Measure = match op {
        "insert" => Box::new(move |ops| sec::insert::<M>(&keys, ops)),
        "get" => Box::new(move |ops| sec::get(&map, &order, ops)),
        "remove" => Box::new(move |ops| sec::remove(&mut map, &keys, &order, ops)),
        "iter" => Box::new(move |ops| sec::iter(&map, ops)),
        _ => unreachable!("a secondary-map row"),
    };
    Column::new(M::NAME, measure)
}

/// The reservation row's columns: `reserve` + `insert_reserved`, then one
/// shared `insert`, each on a pool of its own, populated as the other rows'.
fn reserve() -> Vec<Column> {
    let (reserving, _) = st::populated::<HandlePool<u64>>();
    let (inserting, _) = st::populated::<HandlePool<u64>>();
    vec![
        Column::new(
            "tagpool_reserve",
            Box::new(move |ops| st::reserve_fill(&reserving, ops)),
        ),
        Column::new(
            "tagpool_insert",
            Box::new(move |ops| st::shared_insert(&inserting, ops)),
        ),
    ]
}

/// Every row's columns, tagpool first.
fn columns(row: &str) -> Vec<Column> {
    if row == "refused" {
        return refused();
    }
    if row == "reserve" {
        return reserve();
    }
    if let Some(op) = row.strip_prefix("secondary_dense_") {
        return vec![
            map_column::<tagpool::SecondaryMap<Handle, u64>>(op),
            map_column::<slotmap::SecondaryMap<DefaultKey, u64>>(op),
        ];
    }
    if let Some(op) = row.strip_prefix("secondary_sparse_") {
        return vec![
            map_column::<tagpool::SparseSecondaryMap<Handle, u64>>(op),
            map_column::<slotmap::SparseSecondaryMap<DefaultKey, u64>>(op),
        ];
    }
    let tagpool = match row {
        "section_get" | "with" | "section_iter" => section_column(row),
        _ => column::<HandlePool<u64>>(row),
    };
    vec![
        tagpool,
        column::<SlotMap<DefaultKey, u64>>(row),
        column::<DenseSlotMap<DefaultKey, u64>>(row),
        column::<Arena<u64>>(row),
    ]
}

const ROWS: [&str; 18] = [
    "insert_remove",
    "get",
    "section_get",
    "with",
    "get_mut",
    "iter",
    "section_iter",
    "iter_mut",
    "refused",
    "secondary_dense_insert",
    "secondary_dense_get",
    "secondary_dense_remove",
    "secondary_dense_iter",
    "secondary_sparse_insert",
    "secondary_sparse_get",
    "secondary_sparse_remove",
    "secondary_sparse_iter",
    "reserve",
];

fn main() {
    let mut rounds = 9;
    let mut ms = 10u64;
    let mut filters = Vec::new();
    let mut out_file = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let number = |v: Option<String>| v.and_then(|v| v.parse::<u64>().ok()).filter(|n| *n > 0);
        match arg.as_str() {
            "--rounds" => rounds = number(args.next()).expect(USAGE) as usize,
            "--ms" => ms = number(args.next()).expect(USAGE),
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
        "`keyed` binary, {} on {}, {} logical CPUs: median of {rounds} rounds of about {ms} ms \
         per store, the stores interleaved; ns per operation (iterators: per value), \
         and tagpool / store as the median of the rounds' ratios. tagpool on one thread: \
         `insert_mut`, `remove_mut`, `get_mut`, `iter_mut`; `get` and `iter` are its shared, \
         counted reads; `section_get`, `with` and `section_iter` its read sections. \
         `secondary_dense_*`, `secondary_sparse_*`: tagpool's `SecondaryMap` and \
         `SparseSecondaryMap` against slotmap's, keyed by their primary's 512 live keys. \
         `reserve`: `reserve` + `insert_reserved` against a shared `insert`, ratio \
         reserve / insert.\n",
        machine.date, machine.cpu, machine.cpus
    );
    out.push_str("| row | store | ns | tagpool / store |\n|---|---|---:|---:|\n");
    print!("{out}");
    for row in ROWS {
        if !filters.is_empty() && !filters.iter().any(|f| row.contains(f.as_str())) {
            continue;
        }
        let mut columns = columns(row);
        for column in &mut columns {
            // Calibrate: warm up, then size a round to about `round`.
            let mut ops = 1 << 12;
            loop {
                let took = (column.measure)(ops);
                if took >= round / 4 {
                    column.ops = (ops as f64 * round.as_secs_f64() / took.as_secs_f64()) as u64;
                    break;
                }
                ops *= 4;
            }
        }
        let n = columns.len();
        for r in 0..rounds {
            for k in 0..n {
                let column = &mut columns[(r + k) % n];
                let took = (column.measure)(column.ops);
                column
                    .figures
                    .push(took.as_nanos() as f64 / column.ops as f64);
            }
        }
        let tagpool = columns[0].figures.clone();
        for column in &mut columns {
            let mut ratios: Vec<f64> = tagpool
                .iter()
                .zip(&column.figures)
                .map(|(t, s)| t / s)
                .collect();
            let ns = median(&mut column.figures);
            let line = format!(
                "| {row} | {} | {ns:.2} | {:.2} |",
                column.name,
                median(&mut ratios)
            );
            println!("{line}");
            out.push_str(&line);
            out.push('\n');
        }
    }
    if let Some(path) = out_file {
        tagpool_benches::write_table_or_exit("keyed", &path, &out, MARKERS);
    }
}
