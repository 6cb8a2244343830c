//! tagpool against its peers: every workload, both payloads, one harness.
//!
//! See the crate docs (`benches/src/lib.rs`) for the workloads and the
//! report, and `benches/src/subjects.rs` for the implementations. Defaults
//! keep the whole suite under 20 minutes on two cores: 20 samples, 1 s of
//! warm-up and 2 s of measurement per benchmark (0.5 s and 1.5 s in the
//! groups of [`MANY_THREADS`] or more threads); the usual criterion flags
//! (`--warm-up-time`, `--measurement-time`, a filter such as `st/`)
//! override them, except in `handoff` and `asym`, which set their own and
//! run in rounds (see [`owned`]).

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion};
use tagpool_benches::subjects::{
    each_handoff, each_subject, EachHandoff, EachSubject, Handoff, Payload, Subject,
};
use tagpool_benches::tasks::{self, AsyncPool, EachAsync};
use tagpool_benches::{
    names, ASYNC_GROUP, ASYNC_ROWS, ASYNC_TASKS, CAPACITY, PROBE_END, PROBE_FUNCTION, PROBE_START,
    ROUND, ROUNDS,
};

mod workloads;

use workloads::{Asym, Burst, Hold, Mt, OwnedWorkload, Pass, Small, St, Workload};

type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// Registers every implementation it visits under the workload `W`, each on
/// a pool built for it alone.
struct Register<'g, 'c, W> {
    /// The workload's criterion group.
    group: &'g mut Group<'c>,
    /// The workload.
    workload: PhantomData<W>,
    /// The round of an [`owned`] group, written into the benchmark id
    /// (`vec4096#3`); `None` in the other groups.
    round: Option<u32>,
}

impl<'g, 'c, W> Register<'g, 'c, W> {
    fn new(group: &'g mut Group<'c>) -> Self {
        Self {
            group,
            workload: PhantomData,
            round: None,
        }
    }
}

impl<W: Workload, P: Payload> EachSubject<P> for Register<'_, '_, W> {
    fn visit<S: Subject<P>>(&mut self) {
        let subject = S::build(W::CAPACITY);
        self.group
            .bench_function(BenchmarkId::new(S::NAME, P::NAME), |b| {
                W::run::<P, S>(b, &subject);
            });
        // A pool that refused an acquire of a threaded workload (where the
        // pool is never out of values for long) says so here, as the
        // median cannot.
        let (refused, acquires) = workloads::take_refusals();
        if refused > 0 {
            eprintln!(
                "{}/{}/{}: {refused} of {acquires} acquires refused and retried \
                 (warm-up included)",
                W::NAME,
                S::NAME,
                P::NAME
            );
        }
    }
}

impl<W: OwnedWorkload, P: Payload> EachHandoff<P> for Register<'_, '_, W> {
    fn visit<H: Handoff<P>>(&mut self) {
        let pool: Arc<H> = H::build(CAPACITY);
        let payload = match self.round {
            Some(round) => format!("{}{ROUND}{round}", P::NAME),
            None => P::NAME.to_owned(),
        };
        self.group
            .bench_function(BenchmarkId::new(H::NAME, payload), |b| {
                W::run::<P, H>(b, &pool);
            });
    }
}

/// The thread count from which a group gets a shorter warm-up and
/// measurement (0.5 s and 1.5 s instead of 1 s and 2 s): `mt16`, `mt32`,
/// `hold16` and `small64x16` add 92 benchmarks, which at the default would
/// take the suite past 20 minutes on two cores. With this many threads on
/// few CPUs a sample spans many scheduler time slices even so.
const MANY_THREADS: usize = 16;

/// One criterion group per workload: every [`Subject`], both payloads.
fn shared<W: Workload>(c: &mut Criterion) {
    let mut group = c.benchmark_group(W::NAME);
    if W::THREADS >= MANY_THREADS {
        // A group's setting would override the command line's.
        if !on_command_line("--warm-up-time") {
            group.warm_up_time(Duration::from_millis(500));
        }
        if !on_command_line("--measurement-time") {
            group.measurement_time(Duration::from_millis(1500));
        }
    }
    let mut register = Register::<W>::new(&mut group);
    each_subject::<[u64; 8]>(&mut register);
    each_subject::<Vec<u8>>(&mut register);
    if W::NAME == St::NAME {
        floors::<[u64; 8]>(&mut group);
        floors::<Vec<u8>>(&mut group);
    }
    group.finish();
}

/// Whether the command line gives criterion's `flag`, as `flag VALUE` or
/// `flag=VALUE`.
fn on_command_line(flag: &str) -> bool {
    std::env::args().any(|arg| {
        arg == flag
            || arg
                .strip_prefix(flag)
                .is_some_and(|rest| rest.starts_with('='))
    })
}

/// One criterion group per workload: every [`Handoff`], both payloads, in
/// [`ROUNDS`] rounds, each of which measures every implementation once on
/// a fresh pool (20 samples over 1.2 s after 0.3 s of warm-up); the report
/// takes the median of an implementation's rounds.
///
/// Rounds, because how fast a value crosses between this VM's two vCPUs
/// changes for seconds to minutes at a time, in three steps about 3× apart
/// for every implementation (see `benches/README.md`, "Hand-off rows"): a
/// benchmark measured in one go lands wholly in one step, and two
/// implementations measured a minute apart compared the VM's steps, not
/// the pools. Rounds spread each implementation over the whole group's
/// time, interleaved with the others, as the `keyed` binary does.
fn owned<W: OwnedWorkload>(c: &mut Criterion) {
    let mut group = c.benchmark_group(W::NAME);
    group
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_millis(1200));
    let mut register = Register::<W>::new(&mut group);
    for round in 1..=ROUNDS {
        register.round = Some(round);
        each_handoff::<[u64; 8]>(&mut register);
        each_handoff::<Vec<u8>>(&mut register);
    }
    group.finish();
}

/// The async group: every [`AsyncPool`] on a tokio runtime with two
/// workers, [`ASYNC_TASKS`] tasks each cycling acquire, touch, one yield
/// while holding, release; on the pools of [`ASYNC_ROWS`], plentiful and
/// scarce (fewer buffers than tasks).
/// Wall-clock time per operation over all tasks, on one runtime for the
/// whole group, as a server keeps one. (On the 2-vCPU VM every
/// implementation sometimes runs 2.5 to 3 times slower for seconds at a
/// time, which a fresh runtime per sample did not avoid; a fresh runtime
/// per sample also charges tagpool its per-thread cache set-up on every
/// sample.)
fn async_group(c: &mut Criterion) {
    struct Visit<'g, 'c> {
        group: &'g mut Group<'c>,
        runtime: &'g tokio::runtime::Runtime,
    }
    impl EachAsync for Visit<'_, '_> {
        fn visit<A: AsyncPool>(&mut self) {
            for (label, capacity) in ASYNC_ROWS {
                let pool = A::build(capacity);
                let runtime = self.runtime;
                self.group
                    .bench_function(BenchmarkId::new(A::NAME, label), |b| {
                        b.iter_custom(|iters| {
                            let ops = iters.div_ceil(ASYNC_TASKS as u64).max(1);
                            let start = Instant::now();
                            tasks::cycles(runtime, &pool, ASYNC_TASKS, ops, tasks::ignore);
                            let total = ops * ASYNC_TASKS as u64;
                            start.elapsed().mul_f64(iters as f64 / total as f64)
                        });
                    });
            }
        }
    }
    let runtime = tasks::runtime();
    let mut group = c.benchmark_group(ASYNC_GROUP);
    group.measurement_time(Duration::from_secs(3));
    tasks::each_async(&mut Visit {
        group: &mut group,
        runtime: &runtime,
    });
    group.finish();
}

/// The three `st` floors with payload `P`.
fn floors<P: Payload>(group: &mut Group<'_>) {
    group.bench_function(BenchmarkId::new(names::FLOOR_INDEX, P::NAME), |b| {
        workloads::floor_index::<P>(b);
    });
    group.bench_function(BenchmarkId::new(names::FLOOR_VEC, P::NAME), |b| {
        workloads::floor_vec::<P>(b);
    });
    group.bench_function(BenchmarkId::new(names::FLOOR_2CAS, P::NAME), |b| {
        workloads::floor_2cas::<P>(b);
    });
}

/// The two-threads-vs-one probe (one thread, then two), as the criterion
/// group `name`: run first and last, so that the report can say whether
/// both CPUs were free around the multi-threaded rows.
fn probe(c: &mut Criterion, name: &str) {
    let mut group = c.benchmark_group(name);
    for threads in [1, 2] {
        group.bench_function(BenchmarkId::new(PROBE_FUNCTION, threads), |b| {
            workloads::spin_probe(b, threads);
        });
    }
    group.finish();
}

fn probe_start(c: &mut Criterion) {
    probe(c, PROBE_START);
}

fn probe_end(c: &mut Criterion) {
    probe(c, PROBE_END);
}

/// Short enough for the whole suite on two shared cores; the command line
/// overrides any of it.
fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .nresamples(20_000)
}

criterion_group! {
    name = benches;
    config = config();
    targets = probe_start, shared::<St>, shared::<Mt<2>>, shared::<Mt<4>>, shared::<Mt<8>>,
        shared::<Mt<16>>, shared::<Mt<32>>, shared::<Burst>, owned::<Pass>, shared::<Hold<2>>,
        shared::<Hold<16>>, shared::<Small<16, 2>>, shared::<Small<64, 16>>, owned::<Asym>,
        async_group, probe_end
}
criterion_main!(benches);
