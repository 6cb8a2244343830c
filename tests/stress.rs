//! Multi-threaded stress: exclusivity and conservation under contention.
//!
//! Threads hold two or more guards at once and release them in varying
//! order: single acquire/release pairs can never reach the ABA interleaving.
//!
//! Every loop runs for a time, not a count (see `support::budget`), so a
//! test takes as long on 64 cores as on 2; no thread ever holds a slot while
//! it waits for another unless the wait is sure to end without a timeout
//! (see [`waiting_acquires`]). `TAGPOOL_STRESS_MS` makes every loop run
//! longer, e.g. for a soak on a big machine.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::Duration;

use tagpool::{OwnedPoolGuard, Pool, PoolGuard};

mod support;
use support::budget::{cpus, more_threads_than_cpus, Budget, Preempters, Progress};
use support::{watchdog, watchdog_reporting, WAITING};

/// How long each pool is hammered.
const HAMMER: Duration = Duration::from_millis(100);

/// The rounds each thread does at least, and all it does under miri.
const FLOOR: u64 = 200;

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
    /// With [`Preempters`] running beside the threads.
    preempt: bool,
}

const PLAIN: Setup = Setup {
    cache: 0,
    reset: false,
    lazy: false,
    initial: None,
    preempt: false,
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
    let rounds = hammer_pool(
        build(capacity, setup),
        threads,
        Budget::new(HAMMER, FLOOR),
        setup,
    );
    // Shown with `--nocapture`: how much work the budget bought here.
    eprintln!("{threads} threads on {capacity} slots: {rounds} rounds");
}

/// `threads` threads acquire (`try_acquire` only: nobody waits) and release
/// in random order until `budget` ends, each checking every value it takes;
/// then the pool must be whole. Returns the rounds done, all threads'.
fn hammer_pool(pool: Pool<Marked>, threads: usize, budget: Budget, setup: Setup) -> u64 {
    let capacity = pool.capacity();
    let barrier = Barrier::new(threads);
    let preempters = setup.preempt.then(Preempters::start);
    let rounds: u64 = thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (pool, barrier) = (&pool, &barrier);
                s.spawn(move || {
                    let me = t + 1;
                    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ me as u64);
                    let mut held: Vec<PoolGuard<'_, Marked>> = Vec::new();
                    // Even threads hold up to 3 guards; the others mostly
                    // single pairs, which interleave with the holders.
                    let max_held = if t % 2 == 0 { 3 } else { 1 };
                    barrier.wait();
                    let mut round = 0;
                    while budget.more(round) {
                        round += 1;
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
                                // The slot goes back empty: the factory refills
                                // it on its next acquire, which must own it by
                                // then.
                                let _value: Marked = PoolGuard::detach(g);
                            }
                        }
                    }
                    for mut g in held.drain(..) {
                        leave(&mut g, me);
                    }
                    round
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    drop(preempters);
    assert_conserved(&pool);
    let stats = pool.stats();
    assert!(stats.peak_in_use <= capacity);
    rounds
}

#[test]
fn exclusive_and_conserved_while_growing() {
    let _watchdog = watchdog("exclusive_and_conserved_while_growing", WAITING);
    // Many short runs on new pools, for as long as the budget lasts: the
    // races are at the start of each, while the pool grows.
    let budget = Budget::new(Duration::from_millis(200), 2);
    let mut round = 0;
    while budget.more(round) {
        // Pools that start with one slot and double to 9 (1, 2, 4, 8, 9):
        // each round's threads race to grow every segment.
        let cache = if round % 2 == 0 { 0 } else { 2 };
        let setup = Setup {
            cache,
            lazy: round % 3 == 0,
            initial: Some(1),
            ..PLAIN
        };
        let ops = if cfg!(miri) { 50 } else { 250 };
        hammer_pool(build(9, setup), 4, Budget::rounds(ops), setup);
        round += 1;
    }
    eprintln!("{round} pools grown");
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
    let rounds = hammer_pool(pool, 2, Budget::new(HAMMER, FLOOR), setup);
    eprintln!("then {rounds} rounds");
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
    hammer_with(5, more_threads_than_cpus(), Setup { cache: 2, ..PLAIN });
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
            ..PLAIN
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
            ..PLAIN
        },
    );
}

#[test]
fn exclusive_and_conserved_on_a_small_pool() {
    hammer(5, 4);
}

#[test]
fn exclusive_and_conserved_with_waiting_acquires() {
    waiting_acquires("exclusive_and_conserved_with_waiting_acquires", PLAIN);
}

#[test]
fn exclusive_and_conserved_with_waiting_acquires_and_thread_caches() {
    waiting_acquires(
        "exclusive_and_conserved_with_waiting_acquires_and_thread_caches",
        Setup { cache: 2, ..PLAIN },
    );
}

/// Four threads on three slots, each taking one slot with a blocking
/// acquire and often a second while it holds the first.
///
/// Holding one slot while waiting for another is a cycle when every thread
/// does it at once (three holders, each waiting for a fourth slot): such a
/// wait ends only at its timeout, which costs a timer tick (up to 4 ms on
/// some kernels, whatever the timeout asked). Where threads truly run at
/// once (16 cores) the cycle closes on nearly every round, so no wait here
/// depends on it: at most two threads (`capacity - 1`, counted by a token)
/// hold a slot while they wait for a second, and the others only try for
/// one. Then a slot is always held by a thread that will release it
/// without waiting, and every wait that holds a slot ends with a release.
/// Timeouts are still exercised, by brief waits for a first slot, which
/// hold nothing.
///
/// The rounds run in epochs that every thread finishes before the next
/// starts ([`Epochs`]). A waiter that is never served (a lost slot, a lost
/// wake-up) is then not rescued by the releases of later rounds: it keeps
/// the others waiting at the epoch's end, and the watchdog reports the hang
/// with each thread's rounds. (A blocked thread of a barging pool stops
/// listening for a wake-up at the pool's starvation bound and queues for a
/// hand-off, so a lost wake-up costs it that bound rather than a hang; the
/// async tests, which have no such bound, still hang on one. Before the
/// bound, this test hung on a planted lost wake-up in 32 runs of 32.)
fn waiting_acquires(name: &str, setup: Setup) {
    const THREADS: usize = 4;
    const CAPACITY: usize = 3;
    /// How long a brief wait for a first slot lasts.
    const BRIEF: Duration = Duration::from_micros(20);
    let pool = Arc::new(build(CAPACITY, setup));
    let progress = Arc::new(Progress::new(THREADS));
    let _watchdog = {
        let (pool, progress) = (Arc::clone(&pool), Arc::clone(&progress));
        watchdog_reporting(name, WAITING, move || {
            format!("{}; {:?}", progress.report(), pool.stats())
        })
    };
    // Threads holding a slot while they block for a second one.
    let blocking_holders = AtomicUsize::new(0);
    let epochs = Epochs::new(THREADS, Budget::new(Duration::from_millis(300), FLOOR / 4));
    let rounds: u64 = thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let (pool, progress) = (&*pool, &*progress);
                let (blocking_holders, epochs) = (&blocking_holders, &epochs);
                s.spawn(move || {
                    let _fail = epochs.fail_on_panic();
                    let me = t + 1;
                    let mut rng = XorShift(me as u64 * 7919);
                    let mut round = 0;
                    loop {
                        for _ in 0..Epochs::ROUNDS {
                            let r = rng.next();
                            // The first slot: waiting, holding nothing; a
                            // brief wait may time out (and must pass on a
                            // wake-up it got), which ends the round.
                            let a = if r % 4 == 3 {
                                pool.acquire_timeout(BRIEF).ok()
                            } else {
                                Some(pool.acquire().unwrap())
                            };
                            let mut a = match a {
                                Some(a) => a,
                                None => continue,
                            };
                            enter(&mut a, me);
                            // The second: waiting only with the token,
                            // else a try.
                            // Relaxed: a count, which publishes nothing
                            // (the pool must order the values itself).
                            let token = r % 3 != 0
                                && blocking_holders
                                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                                        (n + 1 < CAPACITY).then_some(n + 1)
                                    })
                                    .is_ok();
                            let mut b = if token {
                                let b = if (r >> 2) % 2 == 0 {
                                    pool.acquire().unwrap()
                                } else {
                                    // Longer than the watchdog: it ends
                                    // with a release, never a timeout.
                                    pool.acquire_timeout(2 * WAITING).unwrap()
                                };
                                blocking_holders.fetch_sub(1, Ordering::Relaxed);
                                Some(b)
                            } else {
                                pool.try_acquire().ok()
                            };
                            if let Some(b) = b.as_mut() {
                                enter(b, me);
                            }
                            if (r >> 4) % 4 == 0 {
                                // Hold across a switch to another thread,
                                // which then finds the pool empty and
                                // waits (on 2 CPUs too).
                                thread::yield_now();
                            }
                            if (r >> 8) % 2 == 0 {
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
                        round += Epochs::ROUNDS;
                        progress.set(t, round);
                        if !epochs.next() {
                            break;
                        }
                    }
                    progress.done(t, round);
                    round
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).sum()
    });
    let stats = pool.stats();
    eprintln!("{name}: {rounds} rounds, {stats:?}");
    assert_eq!(stats.waiting_threads, 0);
    assert_conserved(&pool);
}

/// A barrier between epochs of [`Epochs::ROUNDS`] rounds, made of `Relaxed`
/// atomics so that it orders nothing the pool should order itself (a
/// `std::sync::Barrier` would hide a missing edge from ThreadSanitizer).
/// The last thread to arrive decides, from the budget, whether the others
/// go on: they all agree. A thread that panics (a check failed) ends every
/// epoch, so that the test fails with its message instead of hanging.
struct Epochs {
    threads: u64,
    budget: Budget,
    /// Arrivals at epoch ends, over all epochs.
    arrived: AtomicU64,
    /// Epochs ended, shifted left by one; bit 0: stop.
    ended: AtomicU64,
    /// A thread panicked.
    failed: AtomicBool,
}

impl Epochs {
    const ROUNDS: u64 = 64;

    fn new(threads: usize, budget: Budget) -> Self {
        Epochs {
            threads: threads as u64,
            budget,
            arrived: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            failed: AtomicBool::new(false),
        }
    }

    /// Ends this thread's epoch: waits for the others, then says whether
    /// another epoch runs.
    fn next(&self) -> bool {
        // Relaxed throughout: see the type's docs.
        let arrived = self.arrived.fetch_add(1, Ordering::Relaxed) + 1;
        let epoch = (arrived - 1) / self.threads;
        if arrived % self.threads == 0 {
            let stop = !self.budget.more((epoch + 1) * Self::ROUNDS);
            self.ended
                .store((epoch + 1) << 1 | u64::from(stop), Ordering::Relaxed);
        } else {
            while self.ended.load(Ordering::Relaxed) >> 1 <= epoch
                && !self.failed.load(Ordering::Relaxed)
            {
                thread::yield_now();
            }
        }
        self.ended.load(Ordering::Relaxed) & 1 == 0 && !self.failed.load(Ordering::Relaxed)
    }

    /// Ends every epoch if this thread panics before the guard is dropped.
    fn fail_on_panic(&self) -> impl Drop + '_ {
        struct FailOnPanic<'a>(&'a Epochs);
        impl Drop for FailOnPanic<'_> {
            fn drop(&mut self) {
                if thread::panicking() {
                    self.0.failed.store(true, Ordering::Relaxed);
                }
            }
        }
        FailOnPanic(self)
    }
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
    // The producer waits for slots the consumer releases, or for room in
    // the channel: each send is a hand-off between the two threads.
    let budget = Budget::new(HAMMER, FLOOR / 10);
    let mut sends = 0;
    while budget.more(sends) {
        let mut g = pool.acquire_owned().unwrap();
        enter(&mut g, 1);
        tx.send(g).unwrap();
        sends += 1;
    }
    drop(tx);
    consumer.join().unwrap();
    assert_eq!(released.load(Ordering::SeqCst) as u64, sends);
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

/// The ABA test: a thread preempted between reading the head (and the link
/// below it) and its CAS, while others pop and push that head back, must
/// fail its CAS. On many cores true parallelism opens that window often;
/// on 2 it takes preemption inside it, so two more threads than CPUs, and
/// [`Preempters`] to interrupt them far more often than time slices do.
/// (Twice the CPUs or more caught it less often on 2 CPUs: each thread then
/// runs less of the time.) Six slots: a free list of 3 or fewer rarely
/// returns to a head a stale thread read with another link below it.
#[test]
fn exclusive_and_conserved_with_more_threads_than_cores() {
    let setup = Setup {
        preempt: true,
        ..PLAIN
    };
    let threads = cpus() + 2;
    let budget = Budget::new(Duration::from_secs(1), FLOOR);
    let rounds = hammer_pool(build(6, setup), threads, budget, setup);
    eprintln!("{threads} threads on 6 slots, preempted: {rounds} rounds");
}
