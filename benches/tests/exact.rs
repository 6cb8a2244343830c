//! How each implementation behaves when its pool is momentarily empty: the
//! pattern of the `small16x2` and `small64x16` rows (threads that hold the
//! whole capacity between them, each releasing its oldest value before it
//! acquires a new one), with a payload that counts how many values were
//! made. `benches/README.md` quotes what this finds for each peer.
//!
//! Run with `cargo test --release -p tagpool-benches --test exact --
//! --nocapture` to see the figures. It asserts what the suite relies on:
//! the pools that refuse rather than create (tagpool among them) never make
//! a value beyond the capacity they were built with, and the exact ones
//! never refuse; the refusals of the others are printed.

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use tagpool_benches::names;
use tagpool_benches::subjects::{each_subject, EachSubject, Payload, Subject};

/// Values made so far by [`Counted::make`], over all threads.
static MADE: AtomicUsize = AtomicUsize::new(0);

/// A 64-byte payload whose every pool-made value is counted in [`MADE`].
#[derive(Debug)]
struct Counted([u64; 8]);

impl Payload for Counted {
    const NAME: &'static str = "counted";
    type Fresh = Box<Self>;

    fn make() -> Self {
        MADE.fetch_add(1, Ordering::Relaxed);
        Counted([0; 8])
    }

    fn fresh() -> Box<Self> {
        Box::new(Counted([0; 8]))
    }

    fn of_fresh(fresh: &mut Box<Self>) -> &mut Self {
        fresh
    }

    fn touch(&mut self, v: u64) {
        self.0[0] = v;
    }
}

/// The small rows: capacity and threads; each thread keeps
/// capacity / threads values.
const ROWS: [(usize, usize); 2] = [(16, 2), (64, 16)];

/// Rounds of fresh threads per row, as criterion's samples spawn fresh
/// threads each time (a pool with per-thread state sees them come and go).
const ROUNDS: usize = 8;

/// Operations per thread per round.
const OPS: u64 = 20_000;

/// How long one acquire may keep being refused before the test gives up on
/// the pool instead of hanging.
const STUCK: Duration = Duration::from_secs(10);

/// The pools that never refuse while one of their values is free, and never
/// make one beyond their capacity: a lock around a stack, or a bounded queue
/// whose pop waits out a push in flight.
const EXACT: &[&str] = &[
    names::MUTEX_VEC,
    names::ARRAY_QUEUE,
    names::LOCKFREE_SPINLOCK,
    names::OBJECT_POOL,
    names::OPOOL,
    names::DEADPOOL,
];

/// The fixed-capacity pools: they refuse rather than make a value, so they
/// never hold more than their capacity.
const FIXED: &[&str] = &[names::TAGPOOL, names::TAGPOOL_ELASTIC];

/// What one implementation did on one row.
#[derive(Debug)]
struct Behaviour {
    name: &'static str,
    capacity: usize,
    threads: usize,
    /// Values made by building the pool.
    built: usize,
    /// Values made after that, while the threads ran.
    made_after: usize,
    /// Acquires refused (each retried until it succeeded).
    refused: u64,
    /// Acquires in all (the refused ones not counted).
    acquires: u64,
}

/// Acquires from `subject`, retrying every refusal (counted in `refused`).
fn acquire<'s, S: Subject<Counted>>(subject: &'s S, refused: &mut u64) -> S::Item<'s> {
    let mut since = None;
    loop {
        if let Some(item) = subject.try_acquire() {
            return item;
        }
        *refused += 1;
        let since = *since.get_or_insert_with(Instant::now);
        assert!(
            since.elapsed() < STUCK,
            "{}: refused for {STUCK:?} in a row with values free",
            S::NAME
        );
        thread::yield_now();
    }
}

/// Runs the small pattern on a pool of `capacity` shared by `threads`.
fn run<S: Subject<Counted>>(capacity: usize, threads: usize) -> Behaviour {
    let keep = capacity / threads;
    MADE.store(0, Ordering::Relaxed);
    let subject = S::build(capacity);
    let built = MADE.load(Ordering::Relaxed);
    let refused = AtomicU64::new(0);
    for _ in 0..ROUNDS {
        let barrier = Barrier::new(threads);
        thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let mut mine = 0;
                    let mut ring = VecDeque::with_capacity(keep);
                    for _ in 0..keep {
                        ring.push_back(acquire(&subject, &mut mine));
                    }
                    barrier.wait();
                    for i in 0..OPS {
                        if let Some(oldest) = ring.pop_front() {
                            subject.release(oldest);
                        }
                        let mut item = acquire(&subject, &mut mine);
                        S::touch(&mut item, black_box(i));
                        ring.push_back(item);
                    }
                    for item in ring {
                        subject.release(item);
                    }
                    refused.fetch_add(mine, Ordering::Relaxed);
                });
            }
        });
    }
    drop(subject);
    Behaviour {
        name: S::NAME,
        capacity,
        threads,
        built,
        made_after: MADE.load(Ordering::Relaxed) - built,
        refused: refused.into_inner(),
        acquires: ROUNDS as u64 * threads as u64 * (OPS + keep as u64),
    }
}

/// Runs every pool of the suite (not `alloc`, which is no pool) on every
/// row.
struct All(Vec<Behaviour>);

impl EachSubject<Counted> for All {
    fn visit<S: Subject<Counted>>(&mut self) {
        if S::NAME == names::ALLOC {
            return;
        }
        for (capacity, threads) in ROWS {
            self.0.push(run::<S>(capacity, threads));
        }
    }
}

#[test]
fn small_rows_on_every_pool() {
    let mut all = All(Vec::new());
    each_subject::<Counted>(&mut all);
    println!("| pool | row | made by the build | made while running | refused / acquires |");
    println!("|---|---|---:|---:|---:|");
    for b in &all.0 {
        println!(
            "| {} | small{}x{} | {} | {} | {} / {} |",
            b.name, b.capacity, b.threads, b.built, b.made_after, b.refused, b.acquires
        );
    }
    for b in &all.0 {
        let row = format!("{} small{}x{}", b.name, b.capacity, b.threads);
        if EXACT.contains(&b.name) || FIXED.contains(&b.name) {
            assert_eq!(b.made_after, 0, "{row}: made values beyond its capacity");
            assert!(b.built <= b.capacity, "{row}: built {} values", b.built);
        }
        if EXACT.contains(&b.name) {
            assert_eq!(b.refused, 0, "{row}: refused with values free");
        }
    }
}

/// zeropool (byte buffers only) counts its fresh allocations itself.
#[test]
fn small_rows_on_zeropool() {
    const SIZE: usize = 4096;
    for (capacity, threads) in ROWS {
        let keep = capacity / threads;
        // As the suite's adapter builds it, with statistics on.
        let pool = zeropool::ZeroPool::new()
            .max_buffers_per_class(capacity)
            .track_stats(true);
        pool.warm(capacity, SIZE);
        pool.reset_stats();
        for _ in 0..ROUNDS {
            let barrier = Barrier::new(threads);
            thread::scope(|s| {
                for _ in 0..threads {
                    s.spawn(|| {
                        let mut ring: VecDeque<_> = (0..keep).map(|_| pool.alloc(SIZE)).collect();
                        barrier.wait();
                        for i in 0..OPS {
                            drop(ring.pop_front());
                            let mut buf = pool.alloc(SIZE);
                            buf[0] = black_box(i as u8);
                            ring.push_back(buf);
                        }
                    });
                }
            });
        }
        let stats = pool.stats();
        println!(
            "zeropool small{capacity}x{threads}: {} fresh allocations in {} allocs \
             ({} from thread caches, {} from the shared queue)",
            stats.allocations, stats.gets, stats.tls_hits, stats.shared_hits
        );
    }
}
