//! tagpool against its peers: every workload, both payloads, one harness.
//!
//! See the crate docs (`benches/src/lib.rs`) for the workloads and the
//! report. Defaults keep the whole suite near ten minutes on two cores:
//! 20 samples, 1 s of warm-up and 2 s of measurement per benchmark; the
//! usual criterion flags (`--warm-up-time`, `--measurement-time`, a filter
//! such as `st/`) override them.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion};
use crossbeam_queue::ArrayQueue;
use lockfree_object_pool::{LinearObjectPool, SpinLockObjectPool};
use tagpool_benches::{names, CAPACITY};

mod subjects;
mod workloads;

use subjects::{Alloc, Handoff, Opool, Payload, Slabbed, Subject};
use workloads::{Burst, Hold2, Mt, St, Workload};

type Group<'a> = BenchmarkGroup<'a, WallTime>;

/// Benchmarks `S` under `W` with payload `P`, on a pool built for it alone.
fn bench<W: Workload, P: Payload, S: Subject<P>>(group: &mut Group<'_>) {
    let subject = S::build(CAPACITY);
    group.bench_function(BenchmarkId::new(S::NAME, P::NAME), |b| {
        W::run::<P, S>(b, &subject);
    });
}

/// Every thread-safe implementation under `W` with payload `P`.
fn all_shared<W: Workload, P: Payload>(group: &mut Group<'_>) {
    bench::<W, P, tagpool::Pool<P>>(group);
    bench::<W, P, Mutex<Vec<P>>>(group);
    bench::<W, P, ArrayQueue<P>>(group);
    bench::<W, P, LinearObjectPool<P>>(group);
    bench::<W, P, SpinLockObjectPool<P>>(group);
    bench::<W, P, object_pool::Pool<P>>(group);
    bench::<W, P, sharded_slab::Pool<Slabbed<P>>>(group);
    bench::<W, P, Opool<P>>(group);
    bench::<W, P, Alloc<P>>(group);
}

/// One criterion group per workload, both payloads in it.
fn shared<W: Workload>(c: &mut Criterion) {
    let mut group = c.benchmark_group(W::NAME);
    all_shared::<W, [u64; 8]>(&mut group);
    all_shared::<W, Vec<u8>>(&mut group);
    if W::NAME == St::NAME {
        floors::<[u64; 8]>(&mut group);
        floors::<Vec<u8>>(&mut group);
    }
    group.finish();
}

/// The two `st` floors with payload `P`.
fn floors<P: Payload>(group: &mut Group<'_>) {
    group.bench_function(BenchmarkId::new(names::FLOOR_VEC, P::NAME), |b| {
        workloads::floor_vec::<P>(b);
    });
    group.bench_function(BenchmarkId::new(names::FLOOR_2CAS, P::NAME), |b| {
        workloads::floor_2cas::<P>(b);
    });
}

/// Benchmarks `H` in the handoff workload with payload `P`.
fn bench_handoff<P: Payload, H: Handoff<P>>(group: &mut Group<'_>) {
    let pool: Arc<H> = H::build(CAPACITY);
    group.bench_function(BenchmarkId::new(H::NAME, P::NAME), |b| {
        workloads::handoff::<P, H>(b, &pool);
    });
}

/// Every implementation that can release on another thread, with `P`.
fn all_handoff<P: Payload>(group: &mut Group<'_>) {
    bench_handoff::<P, tagpool::Pool<P>>(group);
    bench_handoff::<P, Mutex<Vec<P>>>(group);
    bench_handoff::<P, ArrayQueue<P>>(group);
    bench_handoff::<P, LinearObjectPool<P>>(group);
    bench_handoff::<P, SpinLockObjectPool<P>>(group);
    bench_handoff::<P, object_pool::Pool<P>>(group);
    bench_handoff::<P, sharded_slab::Pool<Slabbed<P>>>(group);
    bench_handoff::<P, Opool<P>>(group);
    bench_handoff::<P, Alloc<P>>(group);
}

fn handoff(c: &mut Criterion) {
    let mut group = c.benchmark_group(workloads::HANDOFF);
    all_handoff::<[u64; 8]>(&mut group);
    all_handoff::<Vec<u8>>(&mut group);
    group.finish();
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
    targets = shared::<St>, shared::<Mt<2>>, shared::<Mt<4>>, shared::<Mt<8>>,
        shared::<Burst>, handoff, shared::<Hold2>
}
criterion_main!(benches);
