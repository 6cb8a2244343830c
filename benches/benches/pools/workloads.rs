//! The workloads: how each drives a [`Subject`] or a [`Handoff`], and what
//! it reports.
//!
//! Every workload reports the wall-clock time of one operation (acquire +
//! touch + release). Criterion's `iters` is a number of operations: a
//! workload that runs operations in threads or in bursts runs at least
//! `iters` of them and scales its elapsed time to exactly `iters`, so that
//! criterion's time budget stays a budget of wall-clock time.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use criterion::Bencher;
use tagpool_benches::CAPACITY;

use crate::subjects::{Handoff, Payload, Subject};

/// A workload on an implementation shared by reference.
pub trait Workload {
    /// The workload's name: criterion's group id and the table's row.
    const NAME: &'static str;

    /// Measures `subject`.
    fn run<P: Payload, S: Subject<P>>(b: &mut Bencher<'_>, subject: &S);
}

/// One operation: acquire, touch, release.
#[inline(always)]
fn op<P: Payload, S: Subject<P>>(subject: &S, v: u64) {
    let mut item = subject.acquire();
    S::payload(&mut item).touch(v);
    subject.release(item);
}

/// `elapsed` for `done` operations, scaled to `iters` operations.
fn scale(elapsed: Duration, done: u64, iters: u64) -> Duration {
    if done == iters {
        elapsed
    } else {
        elapsed.mul_f64(iters as f64 / done as f64)
    }
}

/// Runs `body(ops, barrier)` on `threads` scoped threads, `ops =
/// ceil(iters / threads)`, and returns the wall-clock time from the barrier
/// to the last thread's end, scaled to `iters` operations.
///
/// `body` does its untimed setup, then waits on the barrier exactly once,
/// then does its `ops` operations.
fn parallel<F>(threads: usize, iters: u64, body: F) -> Duration
where
    F: Fn(u64, &Barrier) + Sync,
{
    let ops = iters.div_ceil(threads as u64).max(1);
    let barrier = Barrier::new(threads + 1);
    let start = thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| body(ops, &barrier));
        }
        barrier.wait();
        Instant::now()
    });
    scale(start.elapsed(), ops * threads as u64, iters)
}

/// `st`: one thread.
#[derive(Debug)]
pub struct St;

impl Workload for St {
    const NAME: &'static str = "st";

    fn run<P: Payload, S: Subject<P>>(b: &mut Bencher<'_>, subject: &S) {
        b.iter(|| op(subject, black_box(1)));
    }
}

/// `mtN`: `N` threads share the pool, each doing operations; the figure is
/// wall-clock time over all threads' operations (inverse throughput).
#[derive(Debug)]
pub struct Mt<const N: usize>;

impl<const N: usize> Workload for Mt<N> {
    const NAME: &'static str = match N {
        2 => "mt2",
        4 => "mt4",
        8 => "mt8",
        _ => panic!("add the name of this thread count"),
    };

    fn run<P: Payload, S: Subject<P>>(b: &mut Bencher<'_>, subject: &S) {
        b.iter_custom(|iters| {
            parallel(N, iters, |ops, barrier| {
                barrier.wait();
                for _ in 0..ops {
                    op(subject, black_box(1));
                }
            })
        });
    }
}

/// `burst256`: acquire and touch 256 values, then release the 256 in the
/// order they were acquired; the figure is per value.
#[derive(Debug)]
pub struct Burst;

/// Values per burst.
const BURST: usize = 256;

impl Workload for Burst {
    const NAME: &'static str = "burst256";

    fn run<P: Payload, S: Subject<P>>(b: &mut Bencher<'_>, subject: &S) {
        let mut held = Vec::with_capacity(BURST);
        b.iter_custom(|iters| {
            let bursts = iters.div_ceil(BURST as u64);
            let start = Instant::now();
            for _ in 0..bursts {
                for _ in 0..BURST {
                    let mut item = subject.acquire();
                    S::payload(&mut item).touch(black_box(1));
                    held.push(item);
                }
                for item in held.drain(..) {
                    subject.release(item);
                }
            }
            scale(start.elapsed(), bursts * BURST as u64, iters)
        });
    }
}

/// `hold2`: two threads, each keeping its last 8 values: every operation
/// acquires and touches a new one and releases the oldest.
#[derive(Debug)]
pub struct Hold2;

/// Values each `hold2` thread keeps.
const RING: usize = 8;

impl Workload for Hold2 {
    const NAME: &'static str = "hold2";

    fn run<P: Payload, S: Subject<P>>(b: &mut Bencher<'_>, subject: &S) {
        b.iter_custom(|iters| {
            parallel(2, iters, |ops, barrier| {
                let mut ring = VecDeque::with_capacity(RING + 1);
                for _ in 0..RING {
                    ring.push_back(subject.acquire());
                }
                barrier.wait();
                for _ in 0..ops {
                    let mut item = subject.acquire();
                    S::payload(&mut item).touch(black_box(1));
                    ring.push_back(item);
                    if let Some(oldest) = ring.pop_front() {
                        subject.release(oldest);
                    }
                }
                for item in ring {
                    subject.release(item);
                }
            })
        });
    }
}

/// The name of the handoff workload.
pub const HANDOFF: &str = "handoff";

/// Values in flight between the two `handoff` threads at most (plus one on
/// each side), well under the capacity.
const CHANNEL: usize = 64;

/// `handoff`: this thread acquires and touches values and sends them through
/// a bounded crossbeam channel; a second thread receives and releases them.
/// The figure is wall-clock time per value, until the consumer is done.
pub fn handoff<P: Payload, H: Handoff<P>>(b: &mut Bencher<'_>, pool: &Arc<H>) {
    b.iter_custom(|iters| {
        let (tx, rx) = crossbeam_channel::bounded::<H::Owned>(CHANNEL);
        let start = thread::scope(|s| {
            s.spawn(|| {
                for owned in rx {
                    pool.release_owned(owned);
                }
            });
            let start = Instant::now();
            for _ in 0..iters {
                let owned = pool.produce(black_box(1));
                tx.send(owned).expect("the consumer outlives the sender");
            }
            drop(tx);
            start
        });
        start.elapsed()
    });
}

/// The `st` floor of a thread-unsafe free list: pop a value off a `Vec`,
/// touch it, push it back.
pub fn floor_vec<P: Payload>(b: &mut Bencher<'_>) {
    let mut list: Vec<P> = (0..CAPACITY).map(|_| P::make()).collect();
    b.iter(|| {
        // `black_box` keeps the pop and the push: without it LLVM may fold
        // them into a write to the last element.
        let list = black_box(&mut list);
        let mut value = list.pop().expect("the list is never empty");
        value.touch(black_box(1));
        list.push(value);
    });
}

/// The `st` floor of any pool built on one atomic word: two uncontended
/// compare-exchanges (the acquire's and the release's) on one `AtomicU64`,
/// with the same touch of a value between them.
pub fn floor_2cas<P: Payload>(b: &mut Bencher<'_>) {
    let head = AtomicU64::new(0);
    let mut current = 0u64;
    let mut value = P::make();
    b.iter(|| {
        // Acquire: pairs with the Release of the previous iteration, like a
        // pool's pop with the push that freed the slot.
        current =
            match head.compare_exchange(current, current + 1, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => current + 1,
                Err(actual) => actual,
            };
        black_box(&mut value).touch(black_box(1));
        // Release: publishes the touch to the next acquirer.
        current =
            match head.compare_exchange(current, current + 1, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => current + 1,
                Err(actual) => actual,
            };
    });
}
