//! The workloads: how each drives a [`Subject`] ([`Workload`]) or a
//! [`Handoff`] ([`OwnedWorkload`]), and what it reports.
//!
//! Every workload reports the wall-clock time of one operation (acquire +
//! touch + release). Criterion's `iters` is a number of operations: a
//! workload that runs operations in threads or in bursts runs at least
//! `iters` of them and scales its elapsed time to exactly `iters`, so that
//! criterion's time budget stays a budget of wall-clock time.
//!
//! Every pool is built with [`CAPACITY`] values except in the `small` rows
//! ([`Small`]), whose threads hold the whole of a small pool between them.
//!
//! The workloads with threads acquire through [`Subject::try_acquire`] and
//! retry a refusal ([`acquire_retrying`]): a pool that refuses while one of
//! its values is free (a per-thread cache out of reach, say) costs time
//! instead of ending the suite, and the refusals are counted
//! ([`take_refusals`]) for the bench target to print.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::Bencher;
use rtrb::PushError;
use tagpool_benches::affinity::Pinned;
use tagpool_benches::subjects::{Handoff, Payload, Subject};
use tagpool_benches::CAPACITY;

/// A workload on an implementation shared by reference.
pub trait Workload {
    /// The workload's name: criterion's group id and the table's row.
    const NAME: &'static str;

    /// The capacity of the pool it runs on.
    const CAPACITY: usize = CAPACITY;

    /// The threads that share the pool.
    const THREADS: usize;

    /// Measures `subject`, a pool of [`Self::CAPACITY`] values.
    fn run<P: Payload, S: Subject<P>>(b: &mut Bencher<'_>, subject: &S);
}

/// One operation: acquire, touch, release.
#[inline(always)]
fn op<P: Payload, S: Subject<P>>(subject: &S, v: u64) {
    let mut item = subject.acquire();
    S::touch(&mut item, v);
    subject.release(item);
}

/// One operation on a pool shared by threads: [`op`], with the acquire of
/// [`acquire_retrying`].
#[inline(always)]
fn op_shared<P: Payload, S: Subject<P>>(subject: &S, v: u64, refused: &mut u64) {
    let mut item = acquire_retrying(subject, refused);
    S::touch(&mut item, v);
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

/// The start line of a [`parallel`] run: every thread waits on it once, and
/// the run's clock starts when the first thread leaves it.
pub struct Start {
    barrier: Barrier,
    /// The earliest moment a thread left the barrier.
    first: Mutex<Option<Instant>>,
}

impl Start {
    /// Waits for every thread, then notes when this one left.
    pub fn wait(&self) {
        self.barrier.wait();
        let now = Instant::now();
        let mut first = self.first.lock().expect("never poisoned");
        *first = Some(first.map_or(now, |f| f.min(now)));
    }
}

/// Runs `body(index, ops, start)` on `threads` scoped threads (`index`
/// from 0), `ops = ceil(iters / threads)`, and returns the wall-clock time
/// from the first thread's start to the last thread's end, scaled to
/// `iters` operations.
///
/// `body` does its untimed setup, then waits on `start` exactly once, then
/// does its `ops` operations. The clock is read by the threads themselves
/// (after the barrier, after the last operation), so neither the spawning
/// nor the joining is timed.
fn parallel<F>(threads: usize, iters: u64, body: F) -> Duration
where
    F: Fn(usize, u64, &Start) + Sync,
{
    let ops = iters.div_ceil(threads as u64).max(1);
    let start = Start {
        barrier: Barrier::new(threads),
        first: Mutex::new(None),
    };
    let end = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|index| {
                let (body, start) = (&body, &start);
                s.spawn(move || {
                    body(index, ops, start);
                    Instant::now()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a benchmark thread panicked"))
            .max()
            .expect("at least one thread")
    });
    let first = start
        .first
        .into_inner()
        .expect("never poisoned")
        .expect("every thread waited on the start");
    scale(end.duration_since(first), ops * threads as u64, iters)
}

/// `st`: one thread.
#[derive(Debug)]
pub struct St;

impl Workload for St {
    const NAME: &'static str = "st";
    const THREADS: usize = 1;

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
        16 => "mt16",
        32 => "mt32",
        _ => panic!("add the name of this thread count"),
    };
    const THREADS: usize = N;

    fn run<P: Payload, S: Subject<P>>(b: &mut Bencher<'_>, subject: &S) {
        b.iter_custom(|iters| {
            parallel(N, iters, |_, ops, barrier| {
                let mut refused = 0;
                barrier.wait();
                for _ in 0..ops {
                    op_shared(subject, black_box(1), &mut refused);
                }
                tally(refused, ops);
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
    const THREADS: usize = 1;

    fn run<P: Payload, S: Subject<P>>(b: &mut Bencher<'_>, subject: &S) {
        let mut held = Vec::with_capacity(BURST);
        b.iter_custom(|iters| {
            let bursts = iters.div_ceil(BURST as u64);
            let start = Instant::now();
            for _ in 0..bursts {
                for _ in 0..BURST {
                    let mut item = subject.acquire();
                    S::touch(&mut item, black_box(1));
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

/// `holdN` (`hold2`, `hold16`): `N` threads, each keeping its last 8
/// values: every operation acquires and touches a new one and releases the
/// oldest, so a thread holds 9 for a moment (`hold16`: 144 of the 1024).
#[derive(Debug)]
pub struct Hold<const N: usize>;

/// Values each `holdN` thread keeps.
const RING: usize = 8;

impl<const N: usize> Workload for Hold<N> {
    const NAME: &'static str = match N {
        2 => "hold2",
        16 => "hold16",
        _ => panic!("add the name of this thread count"),
    };
    const THREADS: usize = N;

    fn run<P: Payload, S: Subject<P>>(b: &mut Bencher<'_>, subject: &S) {
        b.iter_custom(|iters| {
            parallel(N, iters, |_, ops, barrier| {
                let mut refused = 0;
                let mut ring = VecDeque::with_capacity(RING + 1);
                for _ in 0..RING {
                    ring.push_back(acquire_retrying(subject, &mut refused));
                }
                barrier.wait();
                for _ in 0..ops {
                    let mut item = acquire_retrying(subject, &mut refused);
                    S::touch(&mut item, black_box(1));
                    ring.push_back(item);
                    if let Some(oldest) = ring.pop_front() {
                        subject.release(oldest);
                    }
                }
                for item in ring {
                    subject.release(item);
                }
                tally(refused, ops + RING as u64);
            })
        });
    }
}

/// `smallCxT` (`small16x2`, `small64x16`): a pool of capacity `C` shared by
/// `T` threads, each keeping its last `C / T` values. Every operation first
/// releases the oldest value, then acquires and touches a new one: at most
/// `C` values are ever held, so the pool is often momentarily empty but an
/// exact pool never refuses. The pool is built with `C` values.
#[derive(Debug)]
pub struct Small<const C: usize, const T: usize>;

impl<const C: usize, const T: usize> Workload for Small<C, T> {
    const NAME: &'static str = match (C, T) {
        // Each thread keeps C / T: the threads' rings fill the pool exactly.
        _ if !C.is_multiple_of(T) => panic!("the threads must split the capacity evenly"),
        (16, 2) => "small16x2",
        (64, 16) => "small64x16",
        _ => panic!("add the name of this capacity and thread count"),
    };
    const CAPACITY: usize = C;
    const THREADS: usize = T;

    fn run<P: Payload, S: Subject<P>>(b: &mut Bencher<'_>, subject: &S) {
        let keep = C / T;
        b.iter_custom(|iters| {
            parallel(T, iters, |_, ops, start| {
                let mut refused = 0;
                let mut ring = VecDeque::with_capacity(keep);
                for _ in 0..keep {
                    ring.push_back(acquire_retrying(subject, &mut refused));
                }
                start.wait();
                for _ in 0..ops {
                    // Release first: acquiring first would need one value
                    // more than the capacity.
                    if let Some(oldest) = ring.pop_front() {
                        subject.release(oldest);
                    }
                    let mut item = acquire_retrying(subject, &mut refused);
                    S::touch(&mut item, black_box(1));
                    ring.push_back(item);
                }
                for item in ring {
                    subject.release(item);
                }
                tally(refused, ops + keep as u64);
            })
        });
    }
}

/// Acquires refused (and retried) by the threaded workloads since the last
/// [`take_refusals`].
static REFUSED: AtomicU64 = AtomicU64::new(0);
/// Acquires made by the threaded workloads since the last
/// [`take_refusals`].
static ACQUIRED: AtomicU64 = AtomicU64::new(0);

/// Adds one thread's count of refusals and acquires, once it is done (an
/// atomic add per operation would be a shared cache line of its own).
fn tally(refused: u64, acquired: u64) {
    REFUSED.fetch_add(refused, Ordering::Relaxed);
    ACQUIRED.fetch_add(acquired, Ordering::Relaxed);
}

/// How many acquires of the threaded workloads were refused (and retried),
/// and how many they made in all, since the last call (warm-up included).
pub fn take_refusals() -> (u64, u64) {
    (
        REFUSED.swap(0, Ordering::Relaxed),
        ACQUIRED.swap(0, Ordering::Relaxed),
    )
}

/// How long one acquire may keep being refused before the benchmark gives
/// up on the pool rather than hang.
const STUCK: Duration = Duration::from_secs(10);

/// Takes a value from a pool shared by threads, which may be momentarily
/// empty (the `small` rows) or keep free values out of this thread's reach
/// for a moment: a refusal is counted in `refused` and retried.
#[inline(always)]
fn acquire_retrying<'s, P: Payload, S: Subject<P>>(
    subject: &'s S,
    refused: &mut u64,
) -> S::Item<'s> {
    match subject.try_acquire() {
        Some(item) => item,
        None => retry(subject, refused),
    }
}

/// The refused path of [`acquire_retrying`], out of line. Between tries the
/// thread yields: with more threads than CPUs, the value it waits for may
/// sit with a thread that is not running. Panics after [`STUCK`] of
/// refusals in a row, which no pool whose values are all accounted for can
/// cause: a value would have to be lost or stranded.
#[cold]
#[inline(never)]
fn retry<'s, P: Payload, S: Subject<P>>(subject: &'s S, refused: &mut u64) -> S::Item<'s> {
    let since = Instant::now();
    loop {
        *refused += 1;
        thread::yield_now();
        if let Some(item) = subject.try_acquire() {
            return item;
        }
        assert!(
            since.elapsed() < STUCK,
            "{}: an acquire refused for {STUCK:?} in a row, with values free",
            S::NAME
        );
    }
}

/// A workload on an implementation whose values are released on another
/// thread than the one that acquired them.
pub trait OwnedWorkload {
    /// The workload's name: criterion's group id and the table's row.
    const NAME: &'static str;

    /// Measures `pool`.
    fn run<P: Payload, H: Handoff<P>>(b: &mut Bencher<'_>, pool: &Arc<H>);
}

/// Values in flight in one channel at most (plus one on each side), well
/// under the capacity.
const CHANNEL: usize = 64;

/// `handoff`: this thread acquires and touches values and pushes them into a
/// single-producer, single-consumer ring of 64 (`rtrb`); a second thread pops
/// and releases them.
/// The two threads are pinned to two different CPUs (where there are two),
/// and a side that finds the ring full or empty spins and yields instead
/// of parking, so the figure is the pools' cost and not the OS's wake-up
/// latency (see the benches' README). The figure is wall-clock time per
/// value, until the consumer is done.
#[derive(Debug)]
pub struct Pass;

impl OwnedWorkload for Pass {
    const NAME: &'static str = "handoff";

    fn run<P: Payload, H: Handoff<P>>(b: &mut Bencher<'_>, pool: &Arc<H>) {
        // The producer on one CPU, the consumer on another, for every
        // sample: see `tagpool_benches::affinity` for why.
        let _producer = Pinned::to(0);
        b.iter_custom(|iters| {
            let (mut tx, mut rx) = rtrb::RingBuffer::<H::Owned>::new(CHANNEL);
            let done = AtomicBool::new(false);
            let start = thread::scope(|s| {
                s.spawn(|| {
                    let _consumer = Pinned::to(1);
                    let mut idle = 0;
                    loop {
                        if let Ok(owned) = rx.pop() {
                            pool.release_owned(owned);
                            idle = 0;
                        // Acquire: pairs with the producer's Release store
                        // after its last push, so the ring's last values
                        // are seen below.
                        } else if done.load(Ordering::Acquire) && rx.is_empty() {
                            break;
                        } else {
                            pause(&mut idle);
                        }
                    }
                });
                let start = Instant::now();
                for _ in 0..iters {
                    let mut owned = pool.produce(black_box(1));
                    let mut idle = 0;
                    while let Err(PushError::Full(back)) = tx.push(owned) {
                        owned = back;
                        pause(&mut idle);
                    }
                }
                // Release: publishes the last push before the flag.
                done.store(true, Ordering::Release);
                start
            });
            start.elapsed()
        });
    }
}

/// One wait of a `handoff` side that found the channel full (or empty):
/// spins, and yields its CPU after 64 fruitless tries in a row, never
/// parks.
fn pause(idle: &mut u32) {
    *idle += 1;
    if *idle < 64 {
        std::hint::spin_loop();
    } else {
        thread::yield_now();
    }
}

/// `asym`: four threads share the pool in a ring. Thread `i` acquires and
/// touches values and pushes them into a single-producer, single-consumer
/// ring of 64 (`rtrb`, as `handoff`'s) that leads to thread `(i + 1) % 4`,
/// and releases the values thread `i - 1` pushes to it, so every value is
/// released by another thread than the one that acquired it. No side ever
/// parks or locks: the figure is the pools' cost of values that change
/// threads, not a channel's (a bounded MPMC channel moves two contended
/// lines per value: see the benches' README, "Hand-off rows"). Wall-clock
/// time per value, scaled to `iters` values like the other threaded
/// workloads.
#[derive(Debug)]
pub struct Asym;

/// The threads of the `asym` ring.
const ASYM_THREADS: usize = 4;

/// One ring's two ends, each taken by the thread that uses it.
type Ends<T> = (
    Mutex<Option<rtrb::Producer<T>>>,
    Mutex<Option<rtrb::Consumer<T>>>,
);

impl OwnedWorkload for Asym {
    const NAME: &'static str = "asym";

    fn run<P: Payload, H: Handoff<P>>(b: &mut Bencher<'_>, pool: &Arc<H>) {
        b.iter_custom(|iters| {
            // Ring `i` leads into thread `i`.
            let rings: Vec<Ends<H::Owned>> = (0..ASYM_THREADS)
                .map(|_| {
                    let (tx, rx) = rtrb::RingBuffer::new(CHANNEL);
                    (Mutex::new(Some(tx)), Mutex::new(Some(rx)))
                })
                .collect();
            parallel(ASYM_THREADS, iters, |index, ops, barrier| {
                let next = take_end(&rings[(index + 1) % ASYM_THREADS].0);
                let mine = take_end(&rings[index].1);
                barrier.wait();
                ring_member(pool, next, mine, ops);
            })
        });
    }
}

/// Takes one end of a ring, for the one thread that uses it.
fn take_end<E>(end: &Mutex<Option<E>>) -> E {
    let mut end = end.lock().expect("never poisoned");
    end.take().expect("each end is taken once")
}

/// One thread of the `asym` ring: sends `ops` new values to `next` and
/// releases the `ops` values that arrive on `mine`.
///
/// No call blocks: with every thread blocked on a full ring the ring would
/// deadlock. A value that does not fit in `next` waits while this thread
/// releases what has arrived, and a thread that can do neither spins, then
/// yields its core (four threads may share fewer cores), as `handoff`'s
/// sides do.
fn ring_member<P: Payload, H: Handoff<P>>(
    pool: &Arc<H>,
    mut next: rtrb::Producer<H::Owned>,
    mut mine: rtrb::Consumer<H::Owned>,
    ops: u64,
) {
    let (mut sent, mut released) = (0, 0);
    let mut pending = None;
    let mut idle = 0;
    while sent < ops || released < ops {
        let mut progress = false;
        while let Ok(owned) = mine.pop() {
            pool.release_owned(owned);
            released += 1;
            progress = true;
        }
        if sent < ops {
            let owned = pending.take().unwrap_or_else(|| pool.produce(black_box(1)));
            match next.push(owned) {
                Ok(()) => {
                    sent += 1;
                    progress = true;
                }
                Err(PushError::Full(owned)) => pending = Some(owned),
            }
        }
        if progress {
            idle = 0;
        } else {
            pause(&mut idle);
        }
    }
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

/// The `st` floor of what tagpool is without threads: a thread-unsafe stack
/// of free indices (`Vec<u32>`) over a slab of values allocated once
/// (`Vec<P>`): pop an index, touch the value at that index, push the index
/// back. Only the 4-byte index moves; the value stays in its slot, as in
/// tagpool (where [`floor_vec`] moves the whole value).
pub fn floor_index<P: Payload>(b: &mut Bencher<'_>) {
    let mut slab: Vec<P> = (0..CAPACITY).map(|_| P::make()).collect();
    let mut free: Vec<u32> = (0..CAPACITY as u32).collect();
    b.iter(|| {
        // As in `floor_vec`: `black_box` keeps the pop, the push and the
        // lookup in the slab (with its bounds check, as a pool's).
        let free = black_box(&mut free);
        let index = free.pop().expect("the stack is never empty");
        black_box(&mut slab)[index as usize].touch(black_box(1));
        free.push(index);
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

/// The probe's unit of work: dependent integer steps in registers, with no
/// memory traffic, so that two threads can only be slower than one per unit
/// if they do not each have a CPU of their own.
#[inline(always)]
fn spin_unit(seed: u64) -> u64 {
    let mut x = seed;
    for _ in 0..64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
    }
    x
}

/// The two-threads-vs-one probe: `threads` threads each run units of
/// [`spin_unit`]; the figure is wall-clock time per unit over all threads,
/// so that one thread's figure over two threads' is about 2 when both CPUs
/// are free (see `Results::probe` in the report).
pub fn spin_probe(b: &mut Bencher<'_>, threads: usize) {
    b.iter_custom(|iters| {
        parallel(threads, iters, |index, units, start| {
            start.wait();
            let mut x = index as u64 + 1;
            for _ in 0..units {
                x = spin_unit(black_box(x));
            }
            black_box(x);
        })
    });
}
