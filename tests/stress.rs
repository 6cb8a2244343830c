//! Multi-threaded stress: exclusivity and conservation under contention.
//!
//! Threads hold two or more guards at once and release them in varying
//! order: single acquire/release pairs can never reach the ABA interleaving.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;

use tagpool::{OwnedPoolGuard, Pool, PoolGuard};

mod support;
use support::{watchdog, WAITING};

/// Operations per thread: enough to take a few seconds in release mode.
const OPS: usize = if cfg!(miri) {
    200
} else if cfg!(debug_assertions) {
    200_000
} else {
    1_000_000
};

/// A pooled value whose holder is recorded with atomic swaps, so two
/// simultaneous holders are caught whatever the free list does.
///
/// The swaps are `Relaxed`: a swap is atomic whatever its ordering, so it
/// still sees any other holder, and it adds no happens-before edge of its
/// own that could hide a missing edge in the pool from ThreadSanitizer.
struct Marked {
    /// 0 when free, otherwise the holding thread's id + 1.
    holder: AtomicUsize,
    /// Bumped by each holder outside the marker's own synchronization (before
    /// `enter`'s swap and after `leave`'s), so only the pool's happens-before
    /// edge orders successive holders' writes: ThreadSanitizer and miri
    /// report a race if the pool fails to publish the value.
    uses: u64,
}

fn marked() -> Marked {
    Marked {
        holder: AtomicUsize::new(0),
        uses: 0,
    }
}

/// Claims the value for `me`, panicking if someone else holds it.
fn enter(value: &mut Marked, me: usize) {
    value.uses += 1;
    let previous = value.holder.swap(me, Ordering::Relaxed);
    assert_eq!(
        previous, 0,
        "thread {me} acquired a value held by thread {previous}"
    );
}

/// Releases the value, panicking if the mark changed while it was held.
fn leave(value: &mut Marked, me: usize) {
    let previous = value.holder.swap(0, Ordering::Relaxed);
    assert_eq!(
        previous, me,
        "thread {me}'s value was taken by thread {previous}"
    );
    value.uses += 1;
}

/// A tiny deterministic generator, so each thread varies its pattern.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Every slot can be held at once, each exactly once, with its mark clear.
fn assert_conserved(pool: &Pool<Marked>) {
    assert_eq!(pool.stats().in_use, 0);
    let all: Vec<_> = (0..pool.capacity())
        .map(|_| pool.try_acquire().expect("a slot was lost"))
        .collect();
    assert!(pool.try_acquire().is_err(), "a slot is handed out twice");
    let mut indices: Vec<_> = all.iter().map(PoolGuard::index).collect();
    indices.sort_unstable();
    indices.dedup();
    assert_eq!(indices.len(), pool.capacity());
    assert!(all.iter().all(|m| m.holder.load(Ordering::SeqCst) == 0));
}

/// How a stress pool is built.
#[derive(Clone, Copy)]
struct Setup {
    /// Per-thread cache size; 0 is off.
    cache: usize,
    /// With a reset closure that checks nobody holds the value it resets.
    reset: bool,
    /// Lazy, and guards are sometimes detached, so the factory refills
    /// slots all the time.
    lazy: bool,
    /// Elastic: starts with this many slots and grows to the capacity.
    initial: Option<usize>,
}

const PLAIN: Setup = Setup {
    cache: 0,
    reset: false,
    lazy: false,
    initial: None,
};

fn build(capacity: usize, setup: Setup) -> Pool<Marked> {
    let mut builder = Pool::builder(marked)
        .capacity(capacity)
        .thread_cache_size(setup.cache);
    if setup.lazy {
        builder = builder.lazy();
    }
    if let Some(initial) = setup.initial {
        builder = builder.initial(initial);
    }
    if setup.reset {
        // A reset that ran after its slot was pushed back (or a push that
        // ran before the reset) would meet the slot's next holder here.
        builder = builder.reset(|m: &mut Marked| {
            let holder = m.holder.load(Ordering::Relaxed);
            assert_eq!(holder, 0, "the reset ran on a value thread {holder} holds");
            m.uses += 1;
        });
    }
    builder.build().expect("valid setup")
}

fn hammer(capacity: usize, threads: usize) {
    hammer_with(capacity, threads, PLAIN);
}

fn hammer_with(capacity: usize, threads: usize, setup: Setup) {
    hammer_pool(build(capacity, setup), threads, OPS, setup);
}

fn hammer_pool(pool: Pool<Marked>, threads: usize, ops: usize, setup: Setup) {
    let capacity = pool.capacity();
    let barrier = Barrier::new(threads);
    thread::scope(|s| {
        for t in 0..threads {
            let (pool, barrier) = (&pool, &barrier);
            s.spawn(move || {
                let me = t + 1;
                let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ me as u64);
                let mut held: Vec<PoolGuard<'_, Marked>> = Vec::new();
                barrier.wait();
                for _ in 0..ops {
                    // Threads 0 and 1 hold up to 3 guards; the others mostly
                    // single pairs, which interleave with the holders.
                    let max_held = if t % 2 == 0 { 3 } else { 1 };
                    let r = rng.next();
                    if held.len() < max_held && r % 3 != 0 {
                        if let Ok(mut g) = pool.try_acquire() {
                            enter(&mut g, me);
                            held.push(g);
                        }
                    } else if !held.is_empty() {
                        // Release in varying order: not always the newest.
                        let k = (r >> 8) as usize % held.len();
                        let mut g = held.swap_remove(k);
                        leave(&mut g, me);
                        if setup.lazy && (r >> 20) % 4 == 0 {
                            // The slot goes back empty: the factory refills it
                            // on its next acquire, which must own it by then.
                            let _value: Marked = PoolGuard::detach(g);
                        }
                    }
                }
                for mut g in held.drain(..) {
                    leave(&mut g, me);
                }
            });
        }
    });
    assert_conserved(&pool);
    let stats = pool.stats();
    assert!(stats.peak_in_use <= capacity);
}

#[test]
fn exclusive_and_conserved_while_growing() {
    let _watchdog = watchdog("exclusive_and_conserved_while_growing", WAITING);
    let rounds = if cfg!(miri) { 2 } else { 300 };
    for round in 0..rounds {
        // Pools that start with one slot and double to 9 (1, 2, 4, 8, 9):
        // each round's threads race to grow every segment.
        let cache = if round % 2 == 0 { 0 } else { 2 };
        let setup = Setup {
            cache,
            lazy: round % 3 == 0,
            initial: Some(1),
            ..PLAIN
        };
        hammer_pool(build(9, setup), 4, OPS / 1000 + 50, setup);
    }
}

#[test]
#[cfg_attr(
    any(debug_assertions, miri),
    ignore = "2^24 slots: a minute in debug builds; runs in release (CI's stress step)"
)]
fn a_pool_of_2_pow_24_slots_grows_on_demand_under_the_stress_checks() {
    let _watchdog = watchdog("2^24 slots", WAITING);
    const CAPACITY: usize = 1 << 24;
    let setup = Setup {
        cache: 32,
        lazy: true,
        initial: Some(1024),
        ..PLAIN
    };
    let pool = build(CAPACITY, setup);
    assert_eq!(pool.stats().allocated, 1024);
    // Two threads take every slot, growing the pool to its bound; each
    // marks what it holds, so a slot handed out twice is caught.
    let held: Vec<Vec<PoolGuard<'_, Marked>>> = thread::scope(|s| {
        let takers: Vec<_> = (1..=2)
            .map(|me| {
                let pool = &pool;
                s.spawn(move || {
                    let mut held = Vec::new();
                    while let Ok(mut g) = pool.try_acquire() {
                        enter(&mut g, me);
                        held.push(g);
                    }
                    held
                })
            })
            .collect();
        takers.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let stats = pool.stats();
    assert_eq!(
        (stats.in_use, stats.allocated, stats.filled),
        (CAPACITY, CAPACITY, CAPACITY)
    );
    let mut indices: Vec<u32> = held
        .iter()
        .flatten()
        .map(|g| PoolGuard::index(g) as u32)
        .collect();
    indices.sort_unstable();
    indices.dedup();
    assert_eq!(indices.len(), CAPACITY, "every slot exactly once");
    drop(indices);
    for (me, guards) in held.into_iter().enumerate() {
        for mut g in guards {
            leave(&mut g, me + 1);
        }
    }
    assert_eq!(pool.stats().available, CAPACITY);
    // Then the usual churn across the whole pool, and conservation.
    hammer_pool(pool, 2, OPS / 4, setup);
}

#[test]
fn exclusive_and_conserved_on_a_tiny_pool() {
    hammer(2, 4);
}

#[test]
fn exclusive_and_conserved_with_thread_caches_on_a_tiny_pool() {
    // Caches of 2 on 2 slots: most acquires revoke another thread's cache.
    hammer_with(2, 4, Setup { cache: 2, ..PLAIN });
}

#[test]
fn exclusive_and_conserved_with_thread_caches() {
    hammer_with(64, 4, Setup { cache: 8, ..PLAIN });
}

#[test]
fn exclusive_and_conserved_with_thread_caches_and_more_threads_than_cores() {
    hammer_with(5, 8, Setup { cache: 2, ..PLAIN });
}

#[test]
fn reset_runs_before_the_slot_is_free_again() {
    hammer_with(
        3,
        4,
        Setup {
            reset: true,
            ..PLAIN
        },
    );
    hammer_with(
        8,
        4,
        Setup {
            cache: 4,
            reset: true,
            lazy: false,
            initial: None,
        },
    );
}

#[test]
fn lazy_fill_owns_its_slot() {
    hammer_with(
        3,
        4,
        Setup {
            lazy: true,
            ..PLAIN
        },
    );
    hammer_with(
        8,
        4,
        Setup {
            cache: 4,
            reset: true,
            lazy: true,
            initial: Some(2),
        },
    );
}

#[test]
fn exclusive_and_conserved_on_a_small_pool() {
    hammer(5, 4);
}

#[test]
fn exclusive_and_conserved_with_waiting_acquires() {
    let _watchdog = watchdog("exclusive_and_conserved_with_waiting_acquires", WAITING);
    waiting_acquires(PLAIN);
}

#[test]
fn exclusive_and_conserved_with_waiting_acquires_and_thread_caches() {
    let _watchdog = watchdog(
        "exclusive_and_conserved_with_waiting_acquires_and_thread_caches",
        WAITING,
    );
    waiting_acquires(Setup { cache: 2, ..PLAIN });
}

fn waiting_acquires(setup: Setup) {
    let pool = build(3, setup);
    thread::scope(|s| {
        for t in 0..4 {
            let pool = &pool;
            s.spawn(move || {
                let me = t + 1;
                let mut rng = XorShift(me as u64 * 7919);
                for _ in 0..OPS / 4 {
                    // Hold two at once: with 4 threads on 3 slots, acquirers
                    // regularly wait for each other.
                    let mut a = pool.acquire().unwrap();
                    enter(&mut a, me);
                    let mut b = pool
                        .acquire_timeout(std::time::Duration::from_millis(1))
                        .ok();
                    if let Some(b) = b.as_mut() {
                        enter(b, me);
                    }
                    if rng.next() % 2 == 0 {
                        leave(&mut a, me);
                        drop(a);
                        if let Some(mut b) = b {
                            leave(&mut b, me);
                        }
                    } else {
                        if let Some(mut b) = b {
                            leave(&mut b, me);
                        }
                        leave(&mut a, me);
                    }
                }
            });
        }
    });
    assert_conserved(&pool);
}

#[test]
fn owned_guards_are_released_on_other_threads() {
    let _watchdog = watchdog("owned_guards_are_released_on_other_threads", WAITING);
    owned_guards_released_elsewhere(PLAIN);
}

#[test]
fn owned_guards_are_released_on_other_threads_with_thread_caches() {
    let _watchdog = watchdog(
        "owned_guards_are_released_on_other_threads_with_thread_caches",
        WAITING,
    );
    owned_guards_released_elsewhere(Setup { cache: 2, ..PLAIN });
}

fn owned_guards_released_elsewhere(setup: Setup) {
    let pool = Arc::new(build(4, setup));
    let released = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::sync_channel::<OwnedPoolGuard<Marked>>(2);
    let consumer = {
        let released = Arc::clone(&released);
        thread::spawn(move || {
            for mut g in rx {
                leave(&mut g, 1);
                drop(g); // released on this thread
                released.fetch_add(1, Ordering::SeqCst);
            }
        })
    };
    let sends = OPS / 10;
    for _ in 0..sends {
        let mut g = pool.acquire_owned().unwrap();
        enter(&mut g, 1);
        tx.send(g).unwrap();
    }
    drop(tx);
    consumer.join().unwrap();
    assert_eq!(released.load(Ordering::SeqCst), sends);
    assert_conserved(&pool);
}

#[test]
fn the_last_owned_guard_drops_the_pool_on_another_thread() {
    let tally = Arc::new(AtomicUsize::new(0));
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let pool = {
        let tally = Arc::clone(&tally);
        Arc::new(Pool::new(3, move || Counted(Arc::clone(&tally))))
    };
    let guards: Vec<_> = (0..3).map(|_| pool.try_acquire_owned().unwrap()).collect();
    drop(pool);
    let handles: Vec<_> = guards
        .into_iter()
        .map(|g| thread::spawn(move || drop(g)))
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(
        tally.load(Ordering::SeqCst),
        3,
        "the pool and its values are gone"
    );
}

#[test]
fn exclusive_and_conserved_with_more_threads_than_cores() {
    // Preemption inside a pop's read-to-CAS window is what ABA needs; more
    // threads than cores makes it happen.
    hammer(3, 8);
}
