//! Elastic storage, trimming, and values in and out of the pool.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use tagpool::{AttachError, Pool, PoolGuard, TryAcquireError};

mod support;
use support::{watchdog, WAITING};

/// Counts values made and dropped, so that a test can check that every
/// value is dropped exactly once.
#[derive(Default)]
struct Tally {
    made: AtomicUsize,
    dropped: AtomicUsize,
}

struct Tracked {
    tally: Arc<Tally>,
    id: usize,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        self.tally.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

fn tracked(tally: &Arc<Tally>) -> impl Fn() -> Tracked + Send + Sync + 'static {
    let tally = tally.clone();
    move || Tracked {
        id: tally.made.fetch_add(1, Ordering::SeqCst),
        tally: tally.clone(),
    }
}

fn live(tally: &Tally) -> usize {
    tally.made.load(Ordering::SeqCst) - tally.dropped.load(Ordering::SeqCst)
}

#[test]
fn an_elastic_pool_doubles_up_to_its_bound_and_then_is_exhausted() {
    let pool = Pool::builder(|| [0u64; 4])
        .capacity(20)
        .initial(3)
        .build()
        .unwrap();
    let mut allocated = Vec::new();
    let mut guards = Vec::new();
    for _ in 0..20 {
        guards.push(pool.try_acquire().unwrap());
        allocated.push(pool.stats().allocated);
    }
    allocated.dedup();
    assert_eq!(allocated, [3, 6, 12, 20], "doubling, the last cut at 20");
    assert_eq!(
        pool.try_acquire().unwrap_err(),
        TryAcquireError::Exhausted,
        "at the bound, exhaustion is as without growth"
    );
    let stats = pool.stats();
    assert_eq!(
        (stats.in_use, stats.available, stats.peak_in_use),
        (20, 0, 20)
    );
    let mut indices: Vec<usize> = guards.iter().map(PoolGuard::index).collect();
    indices.sort_unstable();
    assert_eq!(indices, (0..20).collect::<Vec<_>>());
}

#[test]
fn a_guard_keeps_its_address_while_the_pool_grows() {
    let pool = Pool::builder(|| vec![0u8; 8])
        .capacity(1000)
        .initial(1)
        .build()
        .unwrap();
    let mut first = pool.try_acquire().unwrap();
    first[0] = 42;
    let address: *const Vec<u8> = &*first;
    let more: Vec<_> = (0..999).map(|_| pool.try_acquire().unwrap()).collect();
    assert_eq!(pool.stats().allocated, 1000);
    assert_eq!(&*first as *const Vec<u8>, address, "the value never moved");
    assert_eq!(first[0], 42);
    drop(more);
    drop(first);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn grown_slots_are_filled_by_the_factory_on_first_acquire_and_dropped_once() {
    let tally = Arc::new(Tally::default());
    {
        let pool = Pool::builder(tracked(&tally))
            .capacity(10)
            .initial(2)
            .build()
            .unwrap();
        assert_eq!(
            tally.made.load(Ordering::SeqCst),
            2,
            "the first segment is eager"
        );
        let guards: Vec<_> = (0..5).map(|_| pool.try_acquire().unwrap()).collect();
        let stats = pool.stats();
        assert_eq!((stats.allocated, stats.filled), (8, 5));
        assert_eq!(tally.made.load(Ordering::SeqCst), 5, "three made on demand");
        drop(guards);
    }
    assert_eq!(live(&tally), 0, "the pool's drop dropped every value once");
}

#[test]
fn threads_racing_to_grow_get_distinct_slots_and_reach_the_bound() {
    let _watchdog = watchdog("threads_racing_to_grow", WAITING);
    let rounds = if cfg!(miri) { 2 } else { 100 };
    for round in 0..rounds {
        let pool = Pool::builder(|| 0usize)
            .capacity(100)
            .initial(1)
            .thread_cache(round % 2 == 0)
            .build()
            .unwrap();
        let barrier = Barrier::new(4);
        let held: Vec<Vec<PoolGuard<'_, usize>>> = thread::scope(|s| {
            let takers: Vec<_> = (0..4)
                .map(|t| {
                    let (pool, barrier) = (&pool, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        let mut held = Vec::new();
                        while let Ok(mut g) = pool.try_acquire() {
                            *g = t;
                            held.push(g);
                        }
                        held
                    })
                })
                .collect();
            takers.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let indices: HashSet<usize> = held.iter().flatten().map(PoolGuard::index).collect();
        assert_eq!(indices.len(), 100, "every slot exactly once");
        assert_eq!(held.iter().map(Vec::len).sum::<usize>(), 100);
        for (t, guards) in held.iter().enumerate() {
            assert!(guards.iter().all(|g| **g == t), "a value written by two");
        }
        drop(held);
        let stats = pool.stats();
        assert_eq!(
            (stats.in_use, stats.available, stats.allocated),
            (0, 100, 100)
        );
    }
}

#[test]
fn a_waiting_acquire_grows_an_elastic_pool_instead_of_waiting() {
    let pool = Arc::new(
        Pool::builder(|| 0u8)
            .capacity(4)
            .initial(1)
            .build()
            .unwrap(),
    );
    let a = pool.acquire_owned().unwrap();
    let b = pool.acquire_owned().unwrap();
    assert_eq!(pool.stats().waits, 0);
    assert_eq!(pool.stats().allocated, 2);
    drop((a, b));
}

#[test]
fn a_fair_elastic_pool_grows_then_hands_off_at_its_bound() {
    let _watchdog = watchdog("a_fair_elastic_pool_grows_then_hands_off", WAITING);
    let pool = Arc::new(
        Pool::builder(|| 0u8)
            .capacity(3)
            .initial(1)
            .fair()
            .build()
            .unwrap(),
    );
    let mut held: Vec<_> = (0..3).map(|_| pool.try_acquire_owned().unwrap()).collect();
    assert_eq!(pool.stats().allocated, 3);
    let waiter = {
        let pool = pool.clone();
        thread::spawn(move || {
            pool.acquire_owned()
                .map(|g| tagpool::OwnedPoolGuard::index(&g))
        })
    };
    while pool.stats().waiting_threads == 0 {
        thread::yield_now();
    }
    let handed = held.pop().unwrap();
    let index = tagpool::OwnedPoolGuard::index(&handed);
    drop(handed);
    assert_eq!(
        waiter.join().unwrap(),
        Ok(index),
        "the released slot, handed off"
    );
    drop(held);
    assert_eq!(pool.stats().available, 3);
}

#[test]
fn a_closed_elastic_pool_does_not_grow() {
    let pool = Pool::builder(|| 0u8)
        .capacity(8)
        .initial(1)
        .build()
        .unwrap();
    let held = pool.try_acquire().unwrap();
    pool.close();
    assert_eq!(pool.try_acquire().unwrap_err(), TryAcquireError::Closed);
    assert_eq!(pool.stats().allocated, 1);
    drop(held);
}

#[test]
fn trim_drops_idle_values_beyond_keep_and_never_a_held_one() {
    let tally = Arc::new(Tally::default());
    let pool = Pool::builder(tracked(&tally))
        .capacity(16)
        .initial(4)
        .thread_cache(false)
        .build()
        .unwrap();
    let mut all: Vec<_> = (0..16).map(|_| pool.try_acquire().unwrap()).collect();
    let held: Vec<_> = all.drain(..6).collect();
    let held_ids: Vec<usize> = held.iter().map(|g| g.id).collect();
    drop(all); // 10 idle, most recently released on top
    assert_eq!(pool.trim(3), 7);
    assert_eq!(live(&tally), 9, "6 held and 3 kept");
    let stats = pool.stats();
    assert_eq!((stats.filled, stats.in_use, stats.available), (9, 6, 10));
    assert_eq!(held.iter().map(|g| g.id).collect::<Vec<_>>(), held_ids);
    // The kept values come first, then the factory refills trimmed slots.
    let made = tally.made.load(Ordering::SeqCst);
    let again: Vec<_> = (0..10).map(|_| pool.try_acquire().unwrap()).collect();
    assert_eq!(tally.made.load(Ordering::SeqCst), made + 7);
    assert!(
        again[..3].iter().all(|g| g.id < made),
        "kept values reused first"
    );
    drop(again);
    drop(held);
    assert_eq!(pool.trim(0), 16);
    assert_eq!((pool.stats().filled, live(&tally)), (0, 0));
    assert_eq!(pool.trim(0), 0, "nothing left to trim");
}

#[test]
fn trim_reaches_slots_parked_in_thread_caches() {
    let pool = Pool::builder(|| vec![0u8; 64])
        .capacity(64)
        .thread_cache_size(8)
        .build()
        .unwrap();
    thread::scope(|s| {
        s.spawn(|| drop(pool.try_acquire().unwrap())); // parks slots in its cache
    });
    let guards: Vec<_> = (0..4).map(|_| pool.try_acquire().unwrap()).collect();
    drop(guards);
    assert!(pool.stats().cached > 0);
    assert_eq!(pool.trim(0), 64);
    assert_eq!(pool.stats().filled, 0);
    assert_eq!(pool.stats().available, 64, "every slot is still there");
}

#[test]
fn trimming_races_acquires_without_losing_or_doubling_a_value() {
    let _watchdog = watchdog("trimming_races_acquires", WAITING);
    let tally = Arc::new(Tally::default());
    let rounds = if cfg!(miri) { 3 } else { 300 };
    {
        let pool = Pool::builder(tracked(&tally))
            .capacity(32)
            .initial(2)
            .thread_cache_size(4)
            .build()
            .unwrap();
        thread::scope(|s| {
            for t in 0..2 {
                let pool = &pool;
                s.spawn(move || {
                    for i in 0..rounds * 10 {
                        let mut held = Vec::new();
                        for _ in 0..(i + t) % 5 + 1 {
                            // A waiting acquire: a trim holds slots briefly.
                            let g = pool.acquire().unwrap();
                            assert!(g.id < usize::MAX);
                            held.push(g);
                        }
                    }
                });
            }
            s.spawn(|| {
                for i in 0..rounds {
                    pool.trim(i % 3);
                    if i % 7 == 0 {
                        pool.drain_idle();
                    }
                }
            });
        });
        let stats = pool.stats();
        assert_eq!((stats.in_use, stats.available), (0, 32));
        assert_eq!(stats.filled, live(&tally), "filled counts the live values");
    }
    assert_eq!(live(&tally), 0, "every value dropped exactly once");
}

#[test]
fn drain_idle_takes_values_and_leaves_slots() {
    let pool = Pool::builder(|| 5u32).capacity(4).build().unwrap();
    let held = pool.try_acquire().unwrap();
    let idle = pool.drain_idle();
    assert_eq!(idle, [5, 5, 5]);
    let stats = pool.stats();
    assert_eq!((stats.filled, stats.available), (1, 3));
    assert_eq!(*pool.try_acquire().unwrap(), 5, "refilled by the factory");
    drop(held);
}

#[test]
fn attach_fills_an_empty_slot_then_reports_full() {
    let pool = Pool::builder(|| 0u32).capacity(3).lazy().build().unwrap();
    pool.attach(7).unwrap();
    pool.attach(8).unwrap();
    let stats = pool.stats();
    assert_eq!((stats.filled, stats.available), (2, 3));
    pool.attach(9).unwrap();
    assert_eq!(pool.attach(10), Err(AttachError::Full(10)));
    let guards: Vec<_> = (0..3).map(|_| pool.try_acquire().unwrap()).collect();
    let mut values: Vec<u32> = guards.iter().map(|g| **g).collect();
    values.sort_unstable();
    assert_eq!(values, [7, 8, 9], "attached values are acquired, not made");
}

#[test]
fn attach_finds_a_detached_slot_under_filled_ones_and_grows_an_elastic_pool() {
    let pool = Pool::builder(|| 1u32)
        .capacity(8)
        .initial(2)
        .build()
        .unwrap();
    let g = pool.try_acquire().unwrap();
    let _taken: u32 = PoolGuard::detach(g);
    pool.attach(2).unwrap();
    assert_eq!(pool.stats().allocated, 2, "the detached slot was reused");
    pool.attach(3).unwrap();
    let stats = pool.stats();
    assert_eq!((stats.allocated, stats.filled), (4, 3), "grew for it");
    pool.close();
    assert_eq!(pool.attach(4), Err(AttachError::Closed(4)));
    assert_eq!(AttachError::Closed(4).to_string(), "pool is closed");
    assert_eq!(format!("{:?}", AttachError::Full(4)), "Full(..)");
}

#[test]
fn values_fill_the_first_slots_and_an_elastic_pool_holds_them_all() {
    let pool = Pool::builder(|| 0u32)
        .capacity(10)
        .initial(2)
        .values(vec![1, 2, 3, 4, 5])
        .build()
        .unwrap();
    let stats = pool.stats();
    assert_eq!(
        (stats.allocated, stats.filled),
        (5, 5),
        "segment 0 holds every value"
    );
    let guards: Vec<_> = (0..5).map(|_| pool.try_acquire().unwrap()).collect();
    let got: Vec<(usize, u32)> = guards.iter().map(|g| (PoolGuard::index(g), **g)).collect();
    assert_eq!(
        got,
        [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)],
        "slot i holds values[i]"
    );
}

#[test]
fn iterating_a_pool_yields_its_idle_values_and_owned_guards_keep_theirs() {
    let tally = Arc::new(Tally::default());
    let pool = Arc::new(Pool::new(4, tracked(&tally)));
    let owned = pool.try_acquire_owned().unwrap();
    let kept_id = owned.id;
    let pool = Arc::try_unwrap(pool).expect("no other handle");
    let idle: Vec<Tracked> = pool.into_iter().collect();
    assert_eq!(idle.len(), 3);
    assert!(idle.iter().all(|v| v.id != kept_id));
    drop(idle);
    assert_eq!(live(&tally), 1, "the owned guard's value lives on");
    drop(owned);
    assert_eq!(live(&tally), 0);
}

/// A value whose drop panics once, for the pool's drop.
struct PanicsOnDrop {
    panics: bool,
    dropped: Arc<AtomicUsize>,
}

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        self.dropped.fetch_add(1, Ordering::SeqCst);
        if self.panics {
            panic!("a value whose drop panics");
        }
    }
}

#[test]
fn a_panicking_value_drop_in_the_pools_drop_leaks_no_segment() {
    let made = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let (m, d) = (Arc::clone(&made), Arc::clone(&dropped));
    let pool = Pool::builder(move || PanicsOnDrop {
        // The first value, in the first segment: its drop panics before
        // the later segments are dropped.
        panics: m.fetch_add(1, Ordering::SeqCst) == 0,
        dropped: Arc::clone(&d),
    })
    .capacity(16)
    .initial(2)
    .thread_cache(false)
    .build()
    .unwrap();
    let held: Vec<_> = std::iter::from_fn(|| pool.try_acquire().ok()).collect();
    assert_eq!(held.len(), 16, "every segment grown");
    drop(held);
    let dropping = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(pool)));
    assert!(
        dropping.is_err(),
        "the value's panic reaches the pool's drop"
    );
    assert_eq!(made.load(Ordering::SeqCst), 16);
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        16,
        "every value of every segment is dropped"
    );
}
