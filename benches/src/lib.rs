//! The benchmark suite of `tagpool` against the pools users would pick
//! instead, and the report that turns criterion's output into a table.
//!
//! # What is measured
//!
//! The bench target `pools` (`benches/pools/`) runs every [workload](WORKLOADS)
//! with every [payload](PAYLOADS) on every [implementation](IMPLEMENTATIONS)
//! that can do it, in one process, with one harness. One *operation* is
//! acquire + touch + release; every benchmark reports the wall-clock time of
//! one operation, so a multi-threaded figure is the inverse of the total
//! throughput of all its threads. The implementations themselves live in
//! [`subjects`], shared by the bench target and the `latency` binary.
//!
//! The bench target `handles` (`benches/handles/`) measures tagpool's
//! handle pool against sharded-slab's `Slab` (threads), against slotmap and
//! thunderdome (one thread, `&mut`, see [`keyed`]), eviction, and scopes
//! against guards; its names and sizes are in [`handles`], and the report
//! shows it in tables of its own.
//!
//! # How to run it
//!
//! ```text
//! cargo bench -p tagpool-benches
//! cargo run --release -p tagpool-benches --bin report -- [OUT.md]
//! cargo run --release -p tagpool-benches --bin latency -- [OUT.md]
//! ```
//!
//! The report reads `new/benchmark.json` and `new/estimates.json` under
//! criterion's output folder (see [`criterion_dir`]) and prints a markdown
//! table of medians, the ratio of tagpool to the best peer per row (pools
//! only: neither `alloc` nor the floors), the ratio of tagpool to `alloc`,
//! and the checks of the performance targets. The `latency` binary measures
//! single acquires and releases in `mt4` and prints their percentiles.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

pub mod affinity;
pub mod handles_mt;
pub mod keyed;
pub mod secondary;
pub mod subjects;
pub mod tasks;

/// The pool capacity every pool in the suite is built with, except in the
/// [`SMALL_WORKLOADS`], whose capacity is in their name.
pub const CAPACITY: usize = 1024;

/// The rounds of the `handoff` and `asym` groups: each measures every
/// implementation once, and a row's figure is the median of its rounds
/// (see `owned` in `benches/pools/main.rs`).
pub const ROUNDS: u32 = 5;

/// Separates the payload from the round in the value of a benchmark run
/// in rounds (`vec4096#3`).
pub const ROUND: char = '#';

/// The criterion group of the async measurements (see [`tasks`]), shown in
/// a table of its own.
pub const ASYNC_GROUP: &str = "async";

/// The tasks of the async measurements, each cycling acquire, touch, a
/// yield while holding the buffer, and release.
pub const ASYNC_TASKS: usize = 16;

/// The async rows: a label (criterion's value) and the pool's capacity.
/// `plenty` never runs dry; `scarce` has a quarter as many buffers as
/// there are tasks, so tasks wait for buffers.
pub const ASYNC_ROWS: [(&str, usize); 2] = [("plenty", CAPACITY), ("scarce", ASYNC_TASKS / 4)];

/// The workloads, in table order.
///
/// | name | what one benchmark does |
/// |------|-------------------------|
/// | `st` | one thread: acquire, touch, release |
/// | `mt2`, `mt4`, `mt8`, `mt16`, `mt32` | that many threads share one pool, each doing `st` operations |
/// | `burst256` | acquire 256 values (touching each), then release the 256 |
/// | `handoff` | acquire and touch on one thread, release on another through a single-producer ring |
/// | `hold2`, `hold16` | that many threads, each keeping a ring of 8 values: acquire a new one, release the oldest |
/// | `small16x2`, `small64x16` | a pool of 16 shared by 2 threads, of 64 by 16, each thread keeping its share of the capacity (8, 4): release the oldest, then acquire a new one |
/// | `asym` | four threads in a ring: each acquires values and sends them to the next, which releases them |
pub const WORKLOADS: &[&str] = &[
    "st",
    "mt2",
    "mt4",
    "mt8",
    "mt16",
    "mt32",
    "burst256",
    "handoff",
    "hold2",
    "hold16",
    "small16x2",
    "small64x16",
    "asym",
];

/// The workloads whose pool is not of [`CAPACITY`] values but as small as
/// the threads' demand: the capacity, then the threads, are in the name.
pub const SMALL_WORKLOADS: &[&str] = &["small16x2", "small64x16"];

/// The rows of the main target: tagpool at least as fast as the best peer
/// in each of these workloads, with both payloads (`asym` is shown, not
/// targeted).
pub const TARGET_WORKLOADS: &[&str] = &[
    "st",
    "mt2",
    "mt4",
    "mt8",
    "mt16",
    "mt32",
    "burst256",
    "handoff",
    "hold2",
    "hold16",
    "small16x2",
    "small64x16",
];

/// The workloads whose tagpool median the report also shows as a multiple
/// of tagpool's own `st`: every one with threads sharing a pool.
const THREADED_WORKLOADS: &[&str] = &[
    "mt2",
    "mt4",
    "mt8",
    "mt16",
    "mt32",
    "hold2",
    "hold16",
    "small16x2",
    "small64x16",
];

/// The criterion group of the two-threads-vs-one probe run before the
/// workloads; [`PROBE_END`] is the one run after them.
pub const PROBE_START: &str = "probe_start";
/// The criterion group of the probe run after the workloads.
pub const PROBE_END: &str = "probe_end";
/// The probe's function id; its value is the thread count, 1 or 2.
pub const PROBE_FUNCTION: &str = "spin";

/// The payloads, in table order: 64 bytes (`[u64; 8]`, the touch writes one
/// word) and a `Vec<u8>` with capacity 4096 (the touch writes one byte).
pub const PAYLOADS: &[&str] = &["64B", "vec4096"];

/// The bench target `handles` (`benches/handles/`): tagpool's
/// `HandlePool<u64>` against sharded-slab's `Slab<u64>`, eviction, and
/// `Pool::scope` against guards. Its criterion groups, function ids and
/// sizes, shared by the bench target and the report (which shows them in
/// tables of their own, never in the pool table).
pub mod handles {
    /// Insert a value, then remove it by its key.
    pub const INSERT_REMOVE: &str = "handles_insert_remove";
    /// Read a live value through its key.
    pub const GET: &str = "handles_get";
    /// Look up a removed key: both answer none.
    pub const GET_STALE: &str = "handles_get_stale";
    /// An insert into a full store, refused (tagpool's never-evicting
    /// pool; a slab configured to one page of [`FULL_CAPACITY`] per shard).
    pub const INSERT_FULL: &str = "handles_insert_full";
    /// An insert into a full pool that evicts (tagpool only).
    pub const EVICT: &str = "handles_evict";
    /// N values through one `Pool::scope` or as N guards; the payload is N.
    pub const SCOPE: &str = "scope";
    /// One thread, `&mut` where the API allows (see [`crate::keyed`]):
    /// insert a value, then remove it by its key.
    pub const ST_INSERT_REMOVE: &str = "handles_st_insert_remove";
    /// One thread: read a live value through its key (tagpool: `get`, a
    /// counted `Ref`).
    pub const ST_GET: &str = "handles_st_get";
    /// One thread: add 1 to a live value through `get_mut(&mut self)`.
    pub const ST_GET_MUT: &str = "handles_st_get_mut";
    /// One thread: visit every live value through the shared iterator;
    /// per value visited.
    pub const ST_ITER: &str = "handles_st_iter";
    /// One thread: add 1 to every live value through the `&mut` iterator;
    /// per value visited (tagpool reads through `iter()` until
    /// `HandlePool::iter_mut` exists: see `keyed.rs`).
    pub const ST_ITER_MUT: &str = "handles_st_iter_mut";
    /// The two-threads-vs-one probe before the target's groups.
    pub const PROBE_START: &str = "handles_probe_start";
    /// The probe after them.
    pub const PROBE_END: &str = "handles_probe_end";
    /// Every group of the target.
    pub const GROUPS: &[&str] = &[
        INSERT_REMOVE,
        GET,
        GET_STALE,
        INSERT_FULL,
        EVICT,
        SCOPE,
        ST_INSERT_REMOVE,
        ST_GET,
        ST_GET_MUT,
        ST_ITER,
        ST_ITER_MUT,
        PROBE_START,
        PROBE_END,
    ];

    /// The single-threaded groups against slotmap and thunderdome, in
    /// table order, with their labels.
    pub const ST: &[(&str, &str)] = &[
        (ST_INSERT_REMOVE, "insert + remove"),
        (ST_GET, "`get` (read a live value)"),
        (ST_GET_MUT, "`get_mut` (`&mut`, add 1)"),
        (ST_ITER, "`iter` (per value)"),
        (ST_ITER_MUT, "`iter_mut` (per value)"),
    ];

    /// The stores of the single-threaded groups, in column order: tagpool,
    /// then the peers.
    pub const ST_STORES: &[&str] = &[TAGPOOL, SLOTMAP, SLOTMAP_DENSE, THUNDERDOME];

    /// The keyed groups run on both stores, in table order, with their
    /// labels.
    pub const KEYED: &[(&str, &str)] = &[
        (INSERT_REMOVE, "insert + remove"),
        (GET, "`get` (read a live value)"),
        (GET_STALE, "`get` through a stale key"),
        (INSERT_FULL, "insert into a full store (refused)"),
    ];

    /// `HandlePool` in the keyed groups (the function id).
    pub const TAGPOOL: &str = super::names::TAGPOOL;
    /// sharded-slab's `Slab` in the keyed groups.
    pub const SHARDED_SLAB: &str = super::names::SHARDED_SLAB;
    /// slotmap's `SlotMap<DefaultKey, u64>` in the single-threaded groups.
    pub const SLOTMAP: &str = "slotmap";
    /// slotmap's `DenseSlotMap` (values packed in a `Vec`, keys through an
    /// indirection).
    pub const SLOTMAP_DENSE: &str = "slotmap_dense";
    /// thunderdome's `Arena<u64>`.
    pub const THUNDERDOME: &str = "thunderdome";
    /// [`EVICT`]: `evict_oldest`.
    pub const EVICT_OLDEST: &str = "tagpool_oldest";
    /// [`EVICT`]: `evict_min_by_key`.
    pub const EVICT_MIN_BY_KEY: &str = "tagpool_min_by_key";
    /// [`SCOPE`]: one `Pool::scope`, one batch back at its drop.
    pub const SCOPE_BATCH: &str = "tagpool_scope";
    /// [`SCOPE`]: N guards held in a `Vec`, each released on its own.
    pub const SCOPE_GUARDS: &str = "tagpool_guards";

    /// Entries of the keyed groups' pools.
    pub const CAPACITY: usize = super::CAPACITY;
    /// Values live during the keyed groups, split between the threads.
    pub const LIVE: usize = 512;
    /// Entries of the eviction and full-insert pools (per shard for the
    /// slab, which only fills up one shard per thread).
    pub const FULL_CAPACITY: usize = 64;
    /// The values per scope (N).
    pub const SCOPE_SIZES: [usize; 3] = [16, 64, 256];
}

/// Whether `row` belongs to the `handles` target (shown apart).
fn is_handles(row: &Row) -> bool {
    handles::GROUPS.contains(&row.workload.as_str())
}

/// What an implementation is to the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The crate under test.
    Subject,
    /// A thread-safe pool: the ratio compares tagpool with the best.
    Peer,
    /// No pool at all (`alloc`): a thread-safe alternative with a ratio
    /// column of its own, never the best peer.
    Baseline,
    /// A lower bound that is no thread-safe pool (`st` only); shown, never
    /// compared against in the ratio.
    Floor,
}

/// One implementation under test: its benchmark name and what it is.
#[derive(Clone, Copy, Debug)]
pub struct Implementation {
    /// The function name in criterion's benchmark id and the table's column.
    pub name: &'static str,
    /// Subject, peer or floor.
    pub kind: Kind,
    /// One line for the table's legend.
    pub about: &'static str,
}

/// The benchmark names of the implementations, shared by the bench target
/// and the report so that neither can drift.
pub mod names {
    /// `tagpool::Pool`.
    pub const TAGPOOL: &str = "tagpool";
    /// `tagpool::Pool` built elastic (`initial` = capacity / 16), grown to
    /// its capacity before measuring.
    pub const TAGPOOL_ELASTIC: &str = "tagpool_elastic";
    /// `std::sync::Mutex<Vec<T>>`.
    pub const MUTEX_VEC: &str = "mutex_vec";
    /// `crossbeam_queue::ArrayQueue<T>`.
    pub const ARRAY_QUEUE: &str = "array_queue";
    /// `lockfree_object_pool::LinearObjectPool`.
    pub const LOCKFREE_LINEAR: &str = "lfop_linear";
    /// `lockfree_object_pool::SpinLockObjectPool`.
    pub const LOCKFREE_SPINLOCK: &str = "lfop_spinlock";
    /// `object_pool::Pool`.
    pub const OBJECT_POOL: &str = "object_pool";
    /// `sharded_slab::Pool`.
    pub const SHARDED_SLAB: &str = "sharded_slab";
    /// `opool::Pool`.
    pub const OPOOL: &str = "opool";
    /// `deadpool::unmanaged::Pool`.
    pub const DEADPOOL: &str = "deadpool";
    /// `zeropool::ZeroPool` (`vec4096` only).
    pub const ZEROPOOL: &str = "zeropool";
    /// A fresh `Box`/`Vec::with_capacity` per operation.
    pub const ALLOC: &str = "alloc";
    /// A thread-unsafe `Vec<u32>` of free indices over a slab of values.
    pub const FLOOR_INDEX: &str = "floor_index";
    /// A thread-unsafe `Vec` free list.
    pub const FLOOR_VEC: &str = "floor_vec";
    /// Two uncontended compare-exchanges on one `AtomicU64`.
    pub const FLOOR_2CAS: &str = "floor_2cas";
}

/// Every implementation, in the table's column order.
pub const IMPLEMENTATIONS: &[Implementation] = &[
    Implementation {
        name: names::TAGPOOL,
        kind: Kind::Subject,
        about: "`tagpool::Pool`: `try_acquire`, `try_acquire_owned` for handoff",
    },
    Implementation {
        name: names::TAGPOOL_ELASTIC,
        kind: Kind::Subject,
        about: "`tagpool::Pool` built elastic (`initial(64)`, doubling to 1024), grown before measuring: the cost of segmented storage",
    },
    Implementation {
        name: names::MUTEX_VEC,
        kind: Kind::Peer,
        about: "`std::sync::Mutex<Vec<T>>`: pop, push back",
    },
    Implementation {
        name: names::ARRAY_QUEUE,
        kind: Kind::Peer,
        about: "crossbeam-queue `ArrayQueue<T>`: pop, push back",
    },
    Implementation {
        name: names::LOCKFREE_LINEAR,
        kind: Kind::Peer,
        about: "lockfree-object-pool `LinearObjectPool`: `pull`/`pull_owned`, pre-warmed to the capacity",
    },
    Implementation {
        name: names::LOCKFREE_SPINLOCK,
        kind: Kind::Peer,
        about: "lockfree-object-pool `SpinLockObjectPool`: `pull`/`pull_owned`, pre-warmed to the capacity",
    },
    Implementation {
        name: names::OBJECT_POOL,
        kind: Kind::Peer,
        about: "object-pool `Pool`: `try_pull`/`try_pull_owned`",
    },
    Implementation {
        name: names::SHARDED_SLAB,
        kind: Kind::Peer,
        about: "sharded-slab `Pool`: `create`, release with `clear(key)`",
    },
    Implementation {
        name: names::OPOOL,
        kind: Kind::Peer,
        about: "opool `Pool`: `try_get`/`try_get_rc`, prefilled",
    },
    Implementation {
        name: names::DEADPOOL,
        kind: Kind::Peer,
        about: "deadpool `unmanaged::Pool`, used synchronously: prefilled, `try_get`, drop the `Object`",
    },
    Implementation {
        name: names::ZEROPOOL,
        kind: Kind::Peer,
        about: "zeropool `ZeroPool`, `vec4096` only: `alloc(4096)` (zeroes the buffer), the touch writes byte 0, drop the `Buf`; shared class pre-warmed to the capacity",
    },
    Implementation {
        name: names::ALLOC,
        kind: Kind::Baseline,
        about: "no pool: `Box::new` / `Vec::with_capacity(4096)` and drop",
    },
    Implementation {
        name: names::FLOOR_INDEX,
        kind: Kind::Floor,
        about: "floor, `st` only: a thread-unsafe `Vec<u32>` of free indices over a slab of values allocated once (pop an index, touch the value there, push the index back): tagpool without threads",
    },
    Implementation {
        name: names::FLOOR_VEC,
        kind: Kind::Floor,
        about: "floor, `st` only: a thread-unsafe `Vec<T>` free list (moves the whole value)",
    },
    Implementation {
        name: names::FLOOR_2CAS,
        kind: Kind::Floor,
        about: "floor, `st` only: two uncontended `compare_exchange` on one `AtomicU64`, plus the touch",
    },
];

/// The implementation named `name`, if the suite has one.
pub fn implementation(name: &str) -> Option<&'static Implementation> {
    IMPLEMENTATIONS.iter().find(|i| i.name == name)
}

/// One row of the table: a workload with a payload.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Row {
    /// The workload (criterion's group id).
    pub workload: String,
    /// The payload (criterion's value string).
    pub payload: String,
}

/// Medians in nanoseconds per operation, by row and implementation name.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// `medians[row][implementation]`.
    pub medians: BTreeMap<Row, BTreeMap<String, f64>>,
}

impl Results {
    /// The median of `implementation` on `row`, if it was measured.
    pub fn get(&self, row: &Row, implementation: &str) -> Option<f64> {
        self.medians.get(row)?.get(implementation).copied()
    }

    /// The rows in table order: known workloads and payloads first, in
    /// their declared order, then anything else alphabetically.
    pub fn rows(&self) -> Vec<Row> {
        let mut rows: Vec<Row> = self
            .medians
            .keys()
            .filter(|r| ![PROBE_START, PROBE_END, ASYNC_GROUP].contains(&r.workload.as_str()))
            .filter(|r| !is_handles(r))
            .cloned()
            .collect();
        let rank = |list: &[&str], s: &str| list.iter().position(|x| *x == s).unwrap_or(usize::MAX);
        rows.sort_by_key(|r| {
            (
                rank(WORKLOADS, &r.workload),
                rank(PAYLOADS, &r.payload),
                r.clone(),
            )
        });
        rows
    }

    /// The fastest peer on `row`, with its median: pools only, so neither
    /// tagpool, `alloc` nor the floors.
    pub fn best_peer(&self, row: &Row) -> Option<(&'static str, f64)> {
        IMPLEMENTATIONS
            .iter()
            .filter(|i| i.kind == Kind::Peer)
            .filter_map(|i| Some((i.name, self.get(row, i.name)?)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The two-threads-vs-one probe of group `group` ([`PROBE_START`] or
    /// [`PROBE_END`]): the time per unit of work of one thread over that of
    /// two threads together. About 2 when both CPUs were free; near 1 when
    /// the two threads shared one CPU.
    pub fn probe(&self, group: &str) -> Option<f64> {
        let row = |threads: &str| Row {
            workload: group.to_owned(),
            payload: threads.to_owned(),
        };
        Some(self.get(&row("1"), PROBE_FUNCTION)? / self.get(&row("2"), PROBE_FUNCTION)?)
    }

    /// tagpool's median over the best peer's on `row`: below 1 means tagpool
    /// is faster.
    pub fn ratio(&self, row: &Row) -> Option<f64> {
        Some(self.get(row, names::TAGPOOL)? / self.best_peer(row)?.1)
    }

    /// tagpool's median over `alloc`'s on `row`: below 1 means the pool
    /// beats allocating.
    pub fn alloc_ratio(&self, row: &Row) -> Option<f64> {
        Some(self.get(row, names::TAGPOOL)? / self.get(row, names::ALLOC)?)
    }
}

/// Where criterion wrote its output, in criterion's own order of preference:
/// `$CRITERION_HOME`, `$CARGO_TARGET_DIR/criterion`, the target folder
/// `cargo metadata` names (when run by cargo, which sets `$CARGO`), and
/// finally the workspace's `target/criterion`.
pub fn criterion_dir() -> PathBuf {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return PathBuf::from(home);
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(target).join("criterion");
    }
    if let Some(target) = cargo_metadata_target_dir() {
        return target.join("criterion");
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/criterion")
}

fn cargo_metadata_target_dir() -> Option<PathBuf> {
    let cargo = std::env::var_os("CARGO")?;
    let output = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let metadata: Value = serde_json::from_slice(&output.stdout).ok()?;
    Some(PathBuf::from(metadata.get("target_directory")?.as_str()?))
}

/// Reads every benchmark under `dir`: each `new/benchmark.json` names it
/// (group = workload, function = implementation, value = payload) and the
/// `new/estimates.json` beside it gives its median. A benchmark run in
/// rounds (value `payload#round`) gives one median per round; the result
/// is the median of those (the mean of the middle two for an even count).
///
/// # Errors
///
/// If `dir` cannot be read, or a benchmark's JSON files are unreadable or
/// lack the fields above.
pub fn collect(dir: &Path) -> io::Result<Results> {
    let mut rounds: BTreeMap<(Row, String), Vec<f64>> = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(folder) = pending.pop() {
        for entry in fs::read_dir(&folder)? {
            let path = entry?.path();
            if path.is_dir() {
                pending.push(path);
            } else if path.file_name().is_some_and(|n| n == "benchmark.json")
                && folder.file_name().is_some_and(|n| n == "new")
            {
                let (row, implementation, median) = read_benchmark(&folder)?;
                rounds
                    .entry((row, implementation))
                    .or_default()
                    .push(median);
            }
        }
    }
    let mut results = Results::default();
    for ((row, implementation), medians) in rounds {
        results
            .medians
            .entry(row)
            .or_default()
            .insert(implementation, median_of(medians));
    }
    Ok(results)
}

/// The median of the rounds' medians of one benchmark (one value for a
/// benchmark without rounds); the mean of the middle two for an even
/// count.
fn median_of(mut medians: Vec<f64>) -> f64 {
    medians.sort_by(f64::total_cmp);
    let mid = medians.len() / 2;
    if medians.len().is_multiple_of(2) {
        (medians[mid - 1] + medians[mid]) / 2.0
    } else {
        medians[mid]
    }
}

/// Reads one benchmark's `new/` folder.
fn read_benchmark(new: &Path) -> io::Result<(Row, String, f64)> {
    let id = read_json(&new.join("benchmark.json"))?;
    let estimates = read_json(&new.join("estimates.json"))?;
    let field = |v: &Value, key: &str| -> io::Result<String> {
        v.get(key)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| invalid(new, &format!("no string `{key}` in benchmark.json")))
    };
    let value = field(&id, "value_str")?;
    // A round's value (`vec4096#3`) counts for its payload's row.
    let payload = match value.split_once(ROUND) {
        Some((payload, _round)) => payload.to_owned(),
        None => value,
    };
    let row = Row {
        workload: field(&id, "group_id")?,
        payload,
    };
    let implementation = field(&id, "function_id")?;
    let median = estimates
        .pointer("/median/point_estimate")
        .and_then(Value::as_f64)
        .ok_or_else(|| invalid(new, "no `median.point_estimate` in estimates.json"))?;
    Ok((row, implementation, median))
}

fn read_json(path: &Path) -> io::Result<Value> {
    let text = fs::read_to_string(path)?;
    serde_json::from_str(&text).map_err(|e| invalid(path, &e.to_string()))
}

fn invalid(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}", path.display()),
    )
}

/// What the table says about the machine it ran on.
#[derive(Clone, Debug)]
pub struct Machine {
    /// The CPU model, from `/proc/cpuinfo`.
    pub cpu: String,
    /// Logical CPUs, from `/proc/cpuinfo`.
    pub cpus: usize,
    /// The UTC date of the report, `YYYY-MM-DD`.
    pub date: String,
}

impl Machine {
    /// Reads this machine's CPU and today's date.
    pub fn current() -> Self {
        let info = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let (cpu, cpus) = parse_cpuinfo(&info);
        let days = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() / 86_400);
        Self {
            cpu,
            cpus,
            date: civil_date(days),
        }
    }
}

/// The first `model name` (or `Processor`/`cpu model` on other
/// architectures) and the number of `processor` entries.
pub fn parse_cpuinfo(info: &str) -> (String, usize) {
    let value = |line: &str| line.split_once(':').map(|(_, v)| v.trim().to_owned());
    let cpu = info
        .lines()
        .find(|l| {
            let key = l.split(':').next().unwrap_or("").trim();
            matches!(key, "model name" | "Processor" | "cpu model")
        })
        .and_then(value)
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cpus = info
        .lines()
        .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
        .count();
    (cpu, cpus)
}

/// `YYYY-MM-DD` of the day `days` after 1970-01-01 (proleptic Gregorian).
pub fn civil_date(days: u64) -> String {
    // Shift the epoch to 0000-03-01 so that leap days end each 4-, 100- and
    // 400-year cycle; eras are 400 years (146,097 days).
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Renders the report: the machine line, the table of medians with the best
/// peer, the ratio to it and the ratio to `alloc` per row, the target checks
/// and a legend; then the tables of the `handles` target, if it was
/// measured. Either part is left out when none of its groups were measured.
pub fn render(results: &Results, machine: &Machine) -> String {
    let mut out = String::new();
    if results.medians.keys().any(|r| !is_handles(r)) {
        out.push_str(&render_pools(results, machine));
    }
    render_handles(&mut out, results, machine);
    out
}

/// The pool table, the async table, the targets and the legend.
fn render_pools(results: &Results, machine: &Machine) -> String {
    let mut out = String::new();
    let columns: Vec<&Implementation> = IMPLEMENTATIONS
        .iter()
        .filter(|i| {
            results
                .medians
                .iter()
                .any(|(r, m)| !is_handles(r) && m.contains_key(i.name))
        })
        .collect();
    // `fmt::Write` for `String` never fails.
    let _ = writeln!(
        out,
        "Median ns per operation (acquire + touch + release), capacity {CAPACITY} \
         ({}: the capacity in the name, then the threads); `handoff` and `asym`: the \
         median of {ROUNDS} interleaved rounds' medians. {}, {} logical CPUs, {}.\n",
        SMALL_WORKLOADS
            .iter()
            .map(|w| format!("`{w}`"))
            .collect::<Vec<_>>()
            .join(", "),
        machine.cpu,
        machine.cpus,
        machine.date
    );
    let probes: Vec<String> = [("before", PROBE_START), ("after", PROBE_END)]
        .iter()
        .filter_map(|(when, group)| Some(format!("{:.2} {when}", results.probe(group)?)))
        .collect();
    if !probes.is_empty() {
        let _ = writeln!(
            out,
            "Two-threads-vs-one probe (work per unit time of two threads over one; about 2 when both CPUs are free): {} the workloads.\n",
            probes.join(", ")
        );
    }
    out.push_str("| workload | payload |");
    for c in &columns {
        let _ = write!(out, " {} |", c.name);
    }
    out.push_str(" best peer | tagpool / best | tagpool / alloc |\n|---|---|");
    for _ in &columns {
        out.push_str("---:|");
    }
    out.push_str("---|---:|---:|\n");
    for row in results.rows() {
        let _ = write!(out, "| {} | {} |", row.workload, row.payload);
        for c in &columns {
            match results.get(&row, c.name) {
                Some(ns) => {
                    let _ = write!(out, " {} |", format_ns(ns));
                }
                None => out.push_str(" – |"),
            }
        }
        match results.best_peer(&row) {
            Some((name, _)) => {
                let _ = write!(out, " {name} |");
            }
            None => out.push_str(" – |"),
        }
        for ratio in [results.ratio(&row), results.alloc_ratio(&row)] {
            match ratio {
                Some(ratio) => {
                    let _ = write!(out, " {ratio:.2} |");
                }
                None => out.push_str(" – |"),
            }
        }
        out.push('\n');
    }
    out.push('\n');
    render_async(&mut out, results);
    render_targets(&mut out, results);
    out.push_str(
        "\n– = not measured (floors run in `st` only, zeropool with `vec4096` only). \
         The best peer is the fastest pool of the row: neither `alloc` nor the floors.\n\n",
    );
    for c in &columns {
        let _ = writeln!(out, "- `{}`: {}", c.name, c.about);
    }
    out
}

/// The async implementations, in the async table's column order (see
/// [`tasks`]); the two tagpool ones first.
pub const ASYNC_IMPLEMENTATIONS: &[&str] = &[
    "tagpool",
    "tagpool_fair",
    "deadpool",
    "semaphore_vec",
    "async_object_pool",
];

/// The async group's table, if it was measured: one row per pool size,
/// each tagpool flavour's ratio to the fastest other crate.
fn render_async(out: &mut String, results: &Results) {
    let rows: Vec<(&str, usize)> = ASYNC_ROWS
        .iter()
        .copied()
        .filter(|(label, _)| {
            results.medians.contains_key(&Row {
                workload: ASYNC_GROUP.to_owned(),
                payload: (*label).to_owned(),
            })
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "Async (group `{ASYNC_GROUP}`): median ns per operation over {ASYNC_TASKS} tasks on a \
         2-worker tokio runtime, each cycling acquire, touch, a yield while holding, release \
         (`Vec<u8>` of 4096 bytes). Wait percentiles: the `waiting` binary.\n"
    );
    out.push_str("| pool size |");
    for name in ASYNC_IMPLEMENTATIONS {
        let _ = write!(out, " {name} |");
    }
    out.push_str(" best other | tagpool / best | tagpool_fair / best |\n|---|");
    for _ in ASYNC_IMPLEMENTATIONS {
        out.push_str("---:|");
    }
    out.push_str("---|---:|---:|\n");
    for (label, capacity) in rows {
        let row = Row {
            workload: ASYNC_GROUP.to_owned(),
            payload: label.to_owned(),
        };
        let _ = write!(out, "| {label} ({capacity}) |");
        for name in ASYNC_IMPLEMENTATIONS {
            match results.get(&row, name) {
                Some(ns) => {
                    let _ = write!(out, " {} |", format_ns(ns));
                }
                None => out.push_str(" – |"),
            }
        }
        let best = ASYNC_IMPLEMENTATIONS
            .iter()
            .filter(|name| !name.starts_with("tagpool"))
            .filter_map(|name| Some((*name, results.get(&row, name)?)))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        match best {
            Some((name, best)) => {
                let _ = write!(out, " {name} |");
                for ours in ["tagpool", "tagpool_fair"] {
                    match results.get(&row, ours) {
                        Some(ns) => {
                            let _ = write!(out, " {:.2} |", ns / best);
                        }
                        None => out.push_str(" – |"),
                    }
                }
            }
            None => out.push_str(" – | – | – |"),
        }
        out.push('\n');
    }
    out.push('\n');
}

/// The `handles` target's tables, if it was measured: the keyed groups
/// (and eviction) per thread count, tagpool against sharded-slab; then
/// scopes against guards, per value.
fn render_handles(out: &mut String, results: &Results, machine: &Machine) {
    use handles::{
        EVICT, EVICT_MIN_BY_KEY, EVICT_OLDEST, FULL_CAPACITY, KEYED, LIVE, SCOPE, SCOPE_BATCH,
        SCOPE_GUARDS, SHARDED_SLAB, TAGPOOL,
    };
    if !results.medians.keys().any(is_handles) {
        return;
    }
    if !out.is_empty() {
        out.push('\n');
    }
    let row = |group: &str, payload: &str| Row {
        workload: group.to_owned(),
        payload: payload.to_owned(),
    };
    // The payloads (thread counts, N) measured in `group`, in numeric order.
    let payloads = |group: &str| -> Vec<String> {
        let mut found: Vec<String> = results
            .medians
            .keys()
            .filter(|r| r.workload == group)
            .map(|r| r.payload.clone())
            .collect();
        found.sort_by_key(|p| (p.parse::<u64>().unwrap_or(u64::MAX), p.clone()));
        found
    };
    let cell = |ns: Option<f64>| ns.map_or_else(|| "–".to_owned(), format_ns);
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => format!("{:.2}", a / b),
        _ => "–".to_owned(),
    };
    let _ = writeln!(
        out,
        "Handles (`--bench handles`): median ns per operation, `HandlePool<u64>` against \
         sharded-slab's `Slab<u64>`, capacity {CAPACITY} with {LIVE} values live (full and \
         evicting inserts: capacity {FULL_CAPACITY}, per shard for the slab); threads 2 is two \
         threads on keys of their own, time per operation of the pair. {}, {} logical CPUs, {}.\n",
        machine.cpu, machine.cpus, machine.date
    );
    let probes: Vec<String> = [
        ("before", handles::PROBE_START),
        ("after", handles::PROBE_END),
    ]
    .iter()
    .filter_map(|(when, group)| Some(format!("{:.2} {when}", results.probe(group)?)))
    .collect();
    if !probes.is_empty() {
        let _ = writeln!(
            out,
            "Two-threads-vs-one probe (about 2 when both CPUs are free): {}.\n",
            probes.join(", ")
        );
    }
    let mut lines = Vec::new();
    for (group, label) in KEYED {
        for threads in payloads(group) {
            let r = row(group, &threads);
            let (t, s) = (results.get(&r, TAGPOOL), results.get(&r, SHARDED_SLAB));
            lines.push(format!(
                "| {label} | {threads} | {} | {} | {} |",
                cell(t),
                cell(s),
                ratio(t, s)
            ));
        }
    }
    for (function, label) in [
        (EVICT_OLDEST, "insert evicting, oldest first"),
        (EVICT_MIN_BY_KEY, "insert evicting, least by key"),
    ] {
        for threads in payloads(EVICT) {
            if let Some(ns) = results.get(&row(EVICT, &threads), function) {
                lines.push(format!(
                    "| {label} | {threads} | {} | – | – |",
                    format_ns(ns)
                ));
            }
        }
    }
    if !lines.is_empty() {
        out.push_str(
            "| row | threads | tagpool | sharded_slab | tagpool / sharded_slab |\n\
             |---|---:|---:|---:|---:|\n",
        );
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
        out.push('\n');
    }
    render_single(out, results);
    let sizes = payloads(SCOPE);
    if !sizes.is_empty() {
        let _ = write!(
            out,
            "Scopes (group `{SCOPE}`): median ns per value, N values taken from a \
             `Pool<[u64; 8]>` of {CAPACITY}, each written, all given back.\n\n\
             | N | scope (one batch) | guards (N releases) | scope / guards |\n\
             |---:|---:|---:|---:|\n",
        );
        for n in sizes {
            // Criterion's estimates are per iteration: N values.
            let per_value = |function: &str| {
                let values = n.parse::<f64>().ok()?;
                Some(results.get(&row(SCOPE, &n), function)? / values)
            };
            let (batch, guards) = (per_value(SCOPE_BATCH), per_value(SCOPE_GUARDS));
            let _ = writeln!(
                out,
                "| {n} | {} | {} | {} |",
                cell(batch),
                cell(guards),
                ratio(batch, guards)
            );
        }
        out.push('\n');
    }
}

/// The single-threaded table of the `handles` target: `HandlePool`
/// against slotmap's maps and thunderdome's `Arena`, one row per group and
/// thread count measured, with tagpool's ratios to `SlotMap` and to
/// `Arena`. Left out when none of its groups were measured; a store not
/// measured shows `–`.
fn render_single(out: &mut String, results: &Results) {
    use handles::{LIVE, SLOTMAP, ST, ST_STORES, TAGPOOL, THUNDERDOME};
    let mut lines = Vec::new();
    for (group, label) in ST {
        let mut found: Vec<&Row> = results
            .medians
            .keys()
            .filter(|r| r.workload == *group)
            .collect();
        found.sort_by_key(|r| {
            (
                r.payload.parse::<u64>().unwrap_or(u64::MAX),
                r.payload.clone(),
            )
        });
        for row in found {
            let get = |store: &str| results.get(row, store);
            let cells: Vec<String> = ST_STORES
                .iter()
                .map(|store| get(store).map_or_else(|| "–".to_owned(), format_ns))
                .collect();
            let ratio = |peer: &str| match (get(TAGPOOL), get(peer)) {
                (Some(t), Some(p)) => format!("{:.2}", t / p),
                _ => "–".to_owned(),
            };
            lines.push(format!(
                "| {label} | {} | {} | {} |",
                cells.join(" | "),
                ratio(SLOTMAP),
                ratio(THUNDERDOME)
            ));
        }
    }
    if lines.is_empty() {
        return;
    }
    let _ = write!(
        out,
        "One thread, `&mut` where the API allows (groups `handles_st_*`): median ns per \
         operation (per value visited for the iterators), {LIVE} values live in a store of \
         {CAPACITY}. tagpool's insert, remove and `get` take `&self` (its only forms); \
         `iter_mut` reads through tagpool's `iter()` until `HandlePool::iter_mut` exists. \
         Targets (issue 26): `get_mut`, `iter_mut` and insert + remove at or below 1.20 × \
         slotmap.\n\n| row | {} | tagpool / slotmap | tagpool / thunderdome |\n|---|{}---:|---:|\n",
        ST_STORES.join(" | "),
        "---:|".repeat(ST_STORES.len()),
    );
    for line in lines {
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
}

/// A median in ns: no decimals from 100, one from 1, two below 1 (the
/// single-threaded iterators' figures per value).
fn format_ns(ns: f64) -> String {
    if ns >= 100.0 {
        format!("{ns:.0}")
    } else if ns >= 1.0 {
        format!("{ns:.1}")
    } else {
        format!("{ns:.2}")
    }
}

/// The performance targets, each with its measured figure.
fn render_targets(out: &mut String, results: &Results) {
    let verdict = |ok: bool| if ok { "met" } else { "missed" };
    out.push_str("Targets:\n\n");

    // (a) tagpool at least as fast as the best pool in each targeted row.
    let mut misses = Vec::new();
    let mut unmeasured = Vec::new();
    let mut total = 0;
    for workload in TARGET_WORKLOADS {
        for payload in PAYLOADS {
            total += 1;
            let row = Row {
                workload: (*workload).to_owned(),
                payload: (*payload).to_owned(),
            };
            match (results.ratio(&row), results.best_peer(&row)) {
                (Some(ratio), Some((peer, _))) if ratio > 1.0 => {
                    misses.push(format!("{workload} {payload} ({peer}, {ratio:.2})"));
                }
                (Some(_), Some(_)) => {}
                _ => unmeasured.push(format!("{workload} {payload}")),
            }
        }
    }
    let met = total - misses.len() - unmeasured.len();
    let _ = write!(
        out,
        "- tagpool / best peer <= 1.00 in each of the {total} rows of {} × {{{}}}: {} ({met} of {total} met)",
        TARGET_WORKLOADS.join(", "),
        PAYLOADS.join(", "),
        verdict(misses.is_empty() && unmeasured.is_empty()),
    );
    if !misses.is_empty() {
        let _ = write!(out, "; missed in {}", misses.join(", "));
    }
    if !unmeasured.is_empty() {
        let _ = write!(out, "; not measured: {}", unmeasured.join(", "));
    }
    out.push('\n');

    // (b) stretch: close to tagpool's own data structure without threads
    // (a stack of indices over a slab) on one thread; the value-moving free
    // list beside it, as a figure.
    for payload in PAYLOADS {
        let st = Row {
            workload: "st".to_owned(),
            payload: (*payload).to_owned(),
        };
        let Some(t) = results.get(&st, names::TAGPOOL) else {
            continue;
        };
        let mut figures = Vec::new();
        if let Some(f) = results.get(&st, names::FLOOR_INDEX) {
            let ratio = t / f;
            figures.push(format!(
                "tagpool / floor_index = {ratio:.2} (target <= 2.0: {})",
                verdict(ratio <= 2.0)
            ));
        }
        if let Some(f) = results.get(&st, names::FLOOR_VEC) {
            figures.push(format!("tagpool / floor_vec = {:.2}", t / f));
        }
        if !figures.is_empty() {
            let _ = writeln!(out, "- stretch: st {payload}: {}", figures.join("; "));
        }
    }

    // (c) the cost of one operation with threads, against tagpool's own st.
    for payload in PAYLOADS {
        let row = |workload: &str| Row {
            workload: workload.to_owned(),
            payload: (*payload).to_owned(),
        };
        let Some(st) = results.get(&row("st"), names::TAGPOOL) else {
            continue;
        };
        let figures: Vec<String> = THREADED_WORKLOADS
            .iter()
            .filter_map(|w| {
                let ns = results.get(&row(w), names::TAGPOOL)?;
                Some(format!("{w} {:.2}x of st", ns / st))
            })
            .collect();
        if !figures.is_empty() {
            let _ = writeln!(
                out,
                "- tagpool per-op cost vs its st, {payload}: {}",
                figures.join(", ")
            );
        }
    }
}

/// The markers between which [`write_into`] puts the report when a file
/// already has them (a README section, say).
pub const MARKERS: (&str, &str) = ("<!-- bench-table:start -->", "<!-- bench-table:end -->");

/// The markers between which the `latency` binary puts its table.
pub const LATENCY_MARKERS: (&str, &str) =
    ("<!-- latency-table:start -->", "<!-- latency-table:end -->");

/// Writes `report` to `path`: between the [`MARKERS`] if the file exists and
/// has both, otherwise as the whole file.
///
/// # Errors
///
/// If the file cannot be read (other than not existing) or written.
pub fn write_into(path: &Path, report: &str) -> io::Result<()> {
    write_between(path, report, MARKERS)
}

/// The median of `values` (sorted in place; the upper one of an even
/// count): the interleaving binaries' figure per store and per ratio.
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Writes `table` into `path` between `markers` (see [`write_between`]) for
/// the binary `bin`, reporting on stderr; exits with status 1 if it cannot.
pub fn write_table_or_exit(bin: &str, path: &Path, table: &str, markers: (&str, &str)) {
    match write_between(path, table, markers) {
        Ok(()) => eprintln!("{bin}: wrote {}", path.display()),
        Err(e) => {
            eprintln!("{bin}: cannot write {}: {e}", path.display());
            std::process::exit(1);
        }
    }
}

/// Writes `report` to `path`: between `markers` (start, end) if the file
/// exists and has both, otherwise as the whole file.
///
/// # Errors
///
/// If the file cannot be read (other than not existing) or written.
pub fn write_between(path: &Path, report: &str, markers: (&str, &str)) -> io::Result<()> {
    let existing = match fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    let (start, end) = markers;
    let text = match existing.as_deref().and_then(|t| {
        let s = t.find(start)? + start.len();
        let e = s + t[s..].find(end)?;
        Some((t, s, e))
    }) {
        Some((t, s, e)) => format!("{}\n{report}{}", &t[..s], &t[e..]),
        None => report.to_owned(),
    };
    fs::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(w: &str, p: &str) -> Row {
        Row {
            workload: w.into(),
            payload: p.into(),
        }
    }

    #[test]
    fn civil_date_matches_known_days() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(19_782), "2024-02-29");
        assert_eq!(civil_date(20_454), "2026-01-01");
    }

    #[test]
    fn cpuinfo_gives_model_and_count() {
        let info = "processor\t: 0\nmodel name\t: Some CPU @ 2GHz\n\nprocessor\t: 1\nmodel name\t: Some CPU @ 2GHz\n";
        assert_eq!(parse_cpuinfo(info), ("Some CPU @ 2GHz".to_owned(), 2));
    }

    #[test]
    fn ratio_ignores_floors_and_picks_the_fastest_peer() {
        let mut results = Results::default();
        let st = row("st", "64B");
        for (name, ns) in [
            (names::TAGPOOL, 10.0),
            (names::MUTEX_VEC, 20.0),
            (names::OPOOL, 15.0),
            (names::FLOOR_INDEX, 0.5),
            (names::FLOOR_VEC, 1.0),
        ] {
            results
                .medians
                .entry(st.clone())
                .or_default()
                .insert(name.into(), ns);
        }
        assert_eq!(results.best_peer(&st), Some((names::OPOOL, 15.0)));
        let ratio = results.ratio(&st).expect("both measured");
        assert!((ratio - 10.0 / 15.0).abs() < 1e-9);
    }

    #[test]
    fn alloc_is_no_best_peer_but_has_its_ratio() {
        let mut results = Results::default();
        let st = row("st", "64B");
        for (name, ns) in [
            (names::TAGPOOL, 10.0),
            (names::ALLOC, 5.0),
            (names::DEADPOOL, 40.0),
            (names::FLOOR_2CAS, 2.0),
        ] {
            results
                .medians
                .entry(st.clone())
                .or_default()
                .insert(name.into(), ns);
        }
        assert_eq!(results.best_peer(&st), Some((names::DEADPOOL, 40.0)));
        let ratio = results.alloc_ratio(&st).expect("both measured");
        assert!((ratio - 2.0).abs() < 1e-9);
    }

    #[test]
    fn targets_list_misses_and_unmeasured_rows() {
        let mut results = Results::default();
        for (w, p, tagpool, peer) in [
            ("st", "64B", 10.0, 20.0),
            ("mt2", "vec4096", 30.0, 20.0),
            ("asym", "64B", 90.0, 20.0),
        ] {
            let m = results.medians.entry(row(w, p)).or_default();
            m.insert(names::TAGPOOL.into(), tagpool);
            m.insert(names::OPOOL.into(), peer);
        }
        for (floor, ns) in [(names::FLOOR_INDEX, 4.0), (names::FLOOR_VEC, 8.0)] {
            results
                .medians
                .entry(row("st", "64B"))
                .or_default()
                .insert(floor.into(), ns);
        }
        for (w, ns) in [("hold2", 25.0), ("small64x16", 40.0)] {
            results
                .medians
                .entry(row(w, "64B"))
                .or_default()
                .insert(names::TAGPOOL.into(), ns);
        }
        let mut out = String::new();
        render_targets(&mut out, &results);
        assert!(out.contains("(1 of 24 met); missed in mt2 vec4096 (opool, 1.50); not measured:"));
        assert!(out.contains("small16x2 64B, small16x2 vec4096, small64x16 64B"));
        assert!(!out.contains("asym"));
        assert!(out.contains(
            "st 64B: tagpool / floor_index = 2.50 (target <= 2.0: missed); tagpool / floor_vec = 1.25\n"
        ));
        assert!(out.contains("64B: hold2 2.50x of st, small64x16 4.00x of st"));
    }

    #[test]
    fn rows_follow_the_declared_order() {
        let mut results = Results::default();
        for (w, p) in [
            ("small16x2", "64B"),
            ("hold2", "64B"),
            ("st", "vec4096"),
            ("mt32", "64B"),
            ("st", "64B"),
            ("mt2", "64B"),
        ] {
            results
                .medians
                .entry(row(w, p))
                .or_default()
                .insert(names::TAGPOOL.into(), 1.0);
        }
        let order: Vec<(String, String)> = results
            .rows()
            .into_iter()
            .map(|r| (r.workload, r.payload))
            .collect();
        let expected = [
            ("st", "64B"),
            ("st", "vec4096"),
            ("mt2", "64B"),
            ("mt32", "64B"),
            ("hold2", "64B"),
            ("small16x2", "64B"),
        ];
        assert_eq!(
            order,
            expected.map(|(w, p)| (w.to_owned(), p.to_owned())).to_vec()
        );
    }

    #[test]
    fn the_probe_is_one_thread_over_two_and_no_table_row() {
        let mut results = Results::default();
        for (threads, ns) in [("1", 100.0), ("2", 52.0)] {
            results
                .medians
                .entry(row(PROBE_START, threads))
                .or_default()
                .insert(PROBE_FUNCTION.into(), ns);
        }
        results
            .medians
            .entry(row("st", "64B"))
            .or_default()
            .insert(names::TAGPOOL.into(), 1.0);
        let probe = results.probe(PROBE_START).expect("both halves measured");
        assert!((probe - 100.0 / 52.0).abs() < 1e-9);
        assert_eq!(results.probe(PROBE_END), None);
        assert_eq!(results.rows(), vec![row("st", "64B")]);
        let machine = Machine {
            cpu: "cpu".into(),
            cpus: 2,
            date: "2026-01-01".into(),
        };
        assert!(render(&results, &machine).contains("1.92 before the workloads"));
    }

    #[test]
    fn handles_groups_get_their_own_tables() {
        fn put(results: &mut Results, w: &str, p: &str, name: &str, ns: f64) {
            results
                .medians
                .entry(row(w, p))
                .or_default()
                .insert(name.into(), ns);
        }
        let mut results = Results::default();
        put(&mut results, handles::GET, "2", handles::TAGPOOL, 3.0);
        put(&mut results, handles::GET, "2", handles::SHARDED_SLAB, 6.0);
        put(&mut results, handles::GET, "1", handles::TAGPOOL, 5.0);
        put(
            &mut results,
            handles::EVICT,
            "1",
            handles::EVICT_OLDEST,
            150.0,
        );
        put(
            &mut results,
            handles::SCOPE,
            "64",
            handles::SCOPE_BATCH,
            320.0,
        );
        put(
            &mut results,
            handles::SCOPE,
            "64",
            handles::SCOPE_GUARDS,
            400.0,
        );
        put(&mut results, handles::PROBE_START, "1", PROBE_FUNCTION, 8.0);
        put(&mut results, handles::PROBE_START, "2", PROBE_FUNCTION, 4.0);
        // Partial data: slotmap's dense map was not measured.
        put(
            &mut results,
            handles::ST_GET_MUT,
            "1",
            handles::TAGPOOL,
            3.0,
        );
        put(
            &mut results,
            handles::ST_GET_MUT,
            "1",
            handles::SLOTMAP,
            2.0,
        );
        put(
            &mut results,
            handles::ST_GET_MUT,
            "1",
            handles::THUNDERDOME,
            1.5,
        );
        put(&mut results, handles::ST_ITER, "1", handles::SLOTMAP, 0.34);
        let machine = Machine {
            cpu: "cpu".into(),
            cpus: 2,
            date: "2026-01-01".into(),
        };
        assert!(results.rows().is_empty(), "no pool rows");
        let only = render(&results, &machine);
        assert!(
            !only.contains("Targets:"),
            "no pool table without pool rows"
        );
        assert!(only.contains("probe (about 2 when both CPUs are free): 2.00 before."));
        let get = only.find("| `get` (read a live value) | 1 | 5.0 | – | – |");
        let get2 = only.find("| `get` (read a live value) | 2 | 3.0 | 6.0 | 0.50 |");
        assert!(get.is_some() && get < get2, "threads in order:\n{only}");
        assert!(only.contains("| insert evicting, oldest first | 1 | 150 | – | – |"));
        assert!(
            only.contains("| `get_mut` (`&mut`, add 1) | 3.0 | 2.0 | – | 1.5 | 1.50 | 2.00 |"),
            "single-threaded row:\n{only}"
        );
        assert!(
            only.contains("| `iter` (per value) | – | 0.34 | – | – | – | – |"),
            "a row without tagpool:\n{only}"
        );
        assert!(
            !only.contains("`iter_mut` (per value) |"),
            "unmeasured rows are left out"
        );
        assert!(
            only.contains("| 64 | 5.0 | 6.2 | 0.80 |"),
            "per value:\n{only}"
        );

        put(&mut results, "st", "64B", names::TAGPOOL, 1.0);
        let both = render(&results, &machine);
        assert_eq!(results.rows(), vec![row("st", "64B")]);
        let pools = both
            .strip_suffix(&only)
            .expect("the handles tables come last");
        assert!(pools.contains("Targets:"));
        assert!(
            !pools.contains("sharded_slab"),
            "no slab column in the pool table"
        );
    }

    #[test]
    fn write_into_replaces_only_between_markers() {
        let dir = std::env::temp_dir().join(format!("tagpool-bench-{}", std::process::id()));
        fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("README.md");
        let (start, end) = MARKERS;
        fs::write(&path, format!("intro\n{start}\nold\n{end}\noutro\n")).expect("write");
        write_into(&path, "new\n").expect("write_into");
        let text = fs::read_to_string(&path).expect("read");
        assert_eq!(text, format!("intro\n{start}\nnew\n{end}\noutro\n"));
        fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn rounds_count_for_their_row_as_the_median_of_their_medians() {
        let dir = std::env::temp_dir().join(format!("tagpool-rounds-{}", std::process::id()));
        let bench = |folder: &str, function: &str, value: &str, median: f64| {
            let new = dir.join(folder).join("new");
            fs::create_dir_all(&new).expect("temp dir");
            let id = format!(
                r#"{{"group_id":"handoff","function_id":"{function}","value_str":"{value}"}}"#
            );
            fs::write(new.join("benchmark.json"), id).expect("write");
            let estimates = format!(r#"{{"median":{{"point_estimate":{median}}}}}"#);
            fs::write(new.join("estimates.json"), estimates).expect("write");
        };
        // tagpool: one slow round of three; the peer: four rounds.
        bench("t1", names::TAGPOOL, "vec4096#1", 12.0);
        bench("t2", names::TAGPOOL, "vec4096#2", 160.0);
        bench("t3", names::TAGPOOL, "vec4096#3", 14.0);
        for (round, ns) in [(1, 60.0), (2, 70.0), (3, 50.0), (4, 400.0)] {
            bench(
                &format!("p{round}"),
                "array_queue",
                &format!("vec4096#{round}"),
                ns,
            );
        }
        // Without rounds: the median as it is.
        bench("s", names::TAGPOOL, "64B", 9.0);
        let results = collect(&dir).expect("collect");
        fs::remove_dir_all(&dir).expect("cleanup");
        let row = |payload: &str| Row {
            workload: "handoff".into(),
            payload: payload.into(),
        };
        assert_eq!(results.rows(), vec![row("64B"), row("vec4096")]);
        assert_eq!(results.get(&row("vec4096"), names::TAGPOOL), Some(14.0));
        assert_eq!(results.get(&row("vec4096"), "array_queue"), Some(65.0));
        assert_eq!(results.get(&row("64B"), names::TAGPOOL), Some(9.0));
    }
}
