//! Keeping a pool's values healthy: `discard_if` on release, `retain_idle`
//! on idle values, a factory that can fail (`try_builder`), and a pool of
//! given values without a factory (`from_values`), whose emptied slots
//! retire.

use std::io;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use tagpool::{
    AcquireError, AcquireTimeoutError, AttachError, BuildError, Pool, PoolGuard, TryAcquireError,
};

mod support;
use support::{executor, watchdog, WAITING};

/// A value that counts its drops.
struct Counted(Arc<AtomicUsize>, usize);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

// ---------------------------------------------------------------------------
// discard_if
// ---------------------------------------------------------------------------

#[test]
fn discard_drops_the_value_on_the_releasing_thread_and_keeps_the_capacity() {
    for cache in [false, true] {
        let drops = Arc::new(AtomicUsize::new(0));
        let made = Arc::new(AtomicUsize::new(0));
        let (d, m) = (Arc::clone(&drops), Arc::clone(&made));
        let pool = Pool::builder(move || Counted(Arc::clone(&d), m.fetch_add(1, SeqCst)))
            .capacity(4)
            .thread_cache(cache)
            .reset(|c: &mut Counted| c.1 += 100)
            // Checked after the reset: the reset's +100 is seen.
            .discard_if(|c: &Counted| c.1 >= 200)
            .build()
            .unwrap();
        assert_eq!(made.load(SeqCst), 4);
        let mut g = pool.try_acquire().unwrap();
        g.1 += 100; // 100 + reset 100: discarded
        drop(g);
        assert_eq!(drops.load(SeqCst), 1, "dropped by the release itself");
        let stats = pool.stats();
        assert_eq!((stats.discarded, stats.filled, stats.available), (1, 3, 4));
        assert_eq!(stats.retired, 0);
        // The empty slot is refilled on its next acquire: the capacity stays.
        let all: Vec<_> = (0..4).map(|_| pool.try_acquire().unwrap()).collect();
        assert_eq!(made.load(SeqCst), 5);
        assert!(all.iter().all(|c| c.1 < 200));
        drop(all); // each + 100: kept
        assert_eq!(pool.stats().discarded, 1);
        assert_eq!(pool.stats().filled, 4);
    }
}

#[test]
fn discard_without_reset_sees_the_value_as_left() {
    let pool = Pool::builder(Vec::<u8>::new)
        .capacity(1)
        .discard_if(|v: &Vec<u8>| v.len() > 2)
        .build()
        .unwrap();
    pool.try_acquire().unwrap().push(1);
    assert_eq!(pool.try_acquire().unwrap().len(), 1, "kept as it was");
    pool.try_acquire().unwrap().extend_from_slice(&[2, 3]);
    assert!(pool.try_acquire().unwrap().is_empty(), "discarded, remade");
    assert_eq!(pool.stats().discarded, 1);
}

#[test]
fn a_panicking_discard_check_is_handled_as_a_resets_panic() {
    let drops = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&drops);
    let pool = Pool::builder(move || Counted(Arc::clone(&d), 0))
        .capacity(1)
        .discard_if(|c: &Counted| {
            if c.1 == 7 {
                panic!("discard check failed");
            }
            false
        })
        .build()
        .unwrap();
    let mut g = pool.try_acquire().unwrap();
    g.1 = 7;
    let caught = panic::catch_unwind(AssertUnwindSafe(move || drop(g)));
    let payload = caught.expect_err("the check's panic propagates from the drop");
    assert_eq!(
        payload.downcast_ref::<&str>(),
        Some(&"discard check failed")
    );
    assert_eq!(drops.load(SeqCst), 1, "the value was dropped");
    let stats = pool.stats();
    assert_eq!((stats.filled, stats.available, stats.discarded), (0, 1, 0));
    assert_eq!(pool.try_acquire().unwrap().1, 0, "refilled by the factory");
}

#[test]
fn a_panic_in_a_discarded_values_drop_propagates_after_the_slot_is_back() {
    struct Bomb;
    impl Drop for Bomb {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                panic!("bomb");
            }
        }
    }
    let pool = Pool::builder(|| Some(Bomb))
        .capacity(1)
        .discard_if(|b: &Option<Bomb>| b.is_some())
        .build()
        .unwrap();
    let g = pool.try_acquire().unwrap();
    let caught = panic::catch_unwind(AssertUnwindSafe(move || drop(g)));
    assert!(caught.is_err());
    assert_eq!(pool.stats().discarded, 1);
    let mut g = pool.try_acquire().unwrap();
    std::mem::forget(g.take()); // defuse
    drop(g);
    assert_eq!(pool.stats().available, 1);
}

#[test]
fn a_guard_dropped_during_an_unwind_skips_the_discard_check() {
    let checked = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&checked);
    let pool = Pool::builder(|| 1u32)
        .capacity(1)
        .discard_if(move |_: &u32| {
            c.fetch_add(1, SeqCst);
            false
        })
        .build()
        .unwrap();
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        let _g = pool.try_acquire().unwrap();
        panic!("holder failed");
    }));
    assert!(caught.is_err());
    assert_eq!(checked.load(SeqCst), 0);
    let stats = pool.stats();
    assert_eq!(
        (stats.filled, stats.available),
        (0, 1),
        "dropped, slot empty"
    );
}

#[test]
fn a_scope_checks_its_values_for_discarding() {
    let pool = Pool::builder(|| 0u32)
        .capacity(3)
        .discard_if(|v: &u32| *v % 2 == 1)
        .build()
        .unwrap();
    {
        let frame = pool.scope();
        for i in 0..3 {
            *frame.try_acquire().unwrap() = i;
        }
    }
    let stats = pool.stats();
    assert_eq!((stats.discarded, stats.filled, stats.available), (1, 2, 3));
}

#[test]
fn detach_does_not_run_the_discard_check() {
    let pool = Pool::builder(|| 3u32)
        .capacity(1)
        .discard_if(|_: &u32| true)
        .build()
        .unwrap();
    assert_eq!(PoolGuard::detach(pool.try_acquire().unwrap()), 3);
    assert_eq!(pool.stats().discarded, 0);
}

#[test]
fn owned_guards_discard_on_any_thread() {
    let pool = Arc::new(
        Pool::builder(|| 0u64)
            .capacity(2)
            .discard_if(|v: &u64| *v > 0)
            .build()
            .unwrap(),
    );
    let mut g = pool.try_acquire_owned().unwrap();
    *g = 5;
    thread::spawn(move || drop(g)).join().unwrap();
    assert_eq!(pool.stats().discarded, 1);
    assert_eq!(pool.stats().in_use, 0);
    // The pool's last handle goes while an owned guard that discards is out.
    let mut g = pool.try_acquire_owned().unwrap();
    *g = 1;
    drop(Arc::try_unwrap(pool).expect("one handle"));
    drop(g);
}

/// Threads acquire, write and release; odd values are discarded. Every slot
/// and value is accounted for at the end.
#[test]
fn concurrent_discards_keep_every_slot() {
    let _dog = watchdog("concurrent discards", WAITING);
    let drops = Arc::new(AtomicUsize::new(0));
    let made = Arc::new(AtomicUsize::new(0));
    let (d, m) = (Arc::clone(&drops), Arc::clone(&made));
    let pool = Pool::builder(move || {
        m.fetch_add(1, SeqCst);
        Counted(Arc::clone(&d), 0)
    })
    .capacity(4)
    .discard_if(|c: &Counted| c.1 % 2 == 1)
    .build()
    .unwrap();
    let rounds = if cfg!(miri) { 20 } else { 2_000 };
    thread::scope(|s| {
        for t in 0..4usize {
            let pool = &pool;
            s.spawn(move || {
                for i in 0..rounds {
                    let mut g = pool.acquire().unwrap();
                    g.1 = t + i;
                }
            });
        }
    });
    let stats = pool.stats();
    assert_eq!(stats.in_use, 0);
    assert_eq!(stats.available, 4);
    assert_eq!(stats.discarded as usize, drops.load(SeqCst));
    assert!(stats.discarded > 0);
    assert_eq!(made.load(SeqCst) - drops.load(SeqCst), stats.filled);
    drop(pool);
    assert_eq!(made.load(SeqCst), drops.load(SeqCst));
}

// ---------------------------------------------------------------------------
// retain_idle
// ---------------------------------------------------------------------------

#[test]
fn retain_idle_visits_idle_values_only_and_drops_the_refused() {
    for cache in [false, true] {
        let pool = Pool::builder(|| 0u32)
            .capacity(6)
            .thread_cache(cache)
            .build()
            .unwrap();
        let mut held = pool.try_acquire().unwrap();
        *held = 1; // odd, but held: never visited
        {
            let idle: Vec<_> = (0..5).map(|_| pool.try_acquire().unwrap()).collect();
            for (i, mut g) in idle.into_iter().enumerate() {
                *g = i as u32 + 10;
            }
        }
        let mut seen = Vec::new();
        let dropped = pool.retain_idle(|v| {
            seen.push(*v);
            *v % 2 == 0
        });
        seen.sort_unstable();
        assert_eq!(seen, [10, 11, 12, 13, 14]);
        assert_eq!(dropped, 2);
        let stats = pool.stats();
        assert_eq!((stats.filled, stats.available, stats.in_use), (4, 5, 1));
        assert_eq!(*held, 1);
        *held = 2;
        drop(held);
        // The kept values come first (on top), then refilled slots.
        let all: Vec<_> = (0..6).map(|_| pool.try_acquire().unwrap()).collect();
        let mut sorted: Vec<u32> = all.iter().map(|g| **g).collect();
        sorted.sort_unstable();
        assert_eq!(sorted, [0, 0, 2, 10, 12, 14]);
    }
}

#[test]
fn retain_idle_can_change_the_values_it_keeps() {
    let pool = Pool::new(3, || 0u32);
    assert_eq!(
        pool.retain_idle(|v| {
            *v += 1;
            true
        }),
        0
    );
    let all: Vec<_> = (0..3).map(|_| pool.try_acquire().unwrap()).collect();
    assert!(all.iter().all(|v| **v == 1));
}

#[test]
fn a_panicking_retain_idle_gives_every_slot_back() {
    let drops = Arc::new(AtomicUsize::new(0));
    let d = Arc::clone(&drops);
    let pool = Pool::builder(move || Counted(Arc::clone(&d), 0))
        .capacity(4)
        .thread_cache(false)
        .build()
        .unwrap();
    let mut visited = 0;
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.retain_idle(|_| {
            visited += 1;
            if visited == 2 {
                panic!("keep failed");
            }
            true
        })
    }));
    assert!(caught.is_err());
    assert_eq!(drops.load(SeqCst), 1, "the value it panicked on is dropped");
    let stats = pool.stats();
    assert_eq!((stats.available, stats.filled), (4, 3));
    let all: Vec<_> = (0..4).map(|_| pool.try_acquire().unwrap()).collect();
    assert_eq!(all.len(), 4);
}

#[test]
fn retain_idle_works_on_a_closed_pool() {
    let pool = Pool::new(2, || 1u8);
    pool.close();
    assert_eq!(pool.retain_idle(|_| false), 2);
    assert_eq!(pool.stats().filled, 0);
}

/// Acquires keep working while another thread sweeps idle values, and no
/// held value is ever visited.
#[test]
fn retain_idle_races_acquires() {
    let _dog = watchdog("retain_idle against acquires", WAITING);
    let pool = Pool::builder(|| (AtomicBool::new(false), 0u64))
        .capacity(8)
        .build()
        .unwrap();
    let stop = AtomicBool::new(false);
    let rounds = if cfg!(miri) { 20 } else { 5_000 };
    thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                for _ in 0..rounds {
                    let mut g = pool.acquire().unwrap();
                    assert!(!g.0.swap(true, SeqCst), "two parties hold a value");
                    g.1 += 1;
                    g.0.store(false, SeqCst);
                }
            });
        }
        s.spawn(|| {
            let mut i = 0u64;
            while !stop.load(SeqCst) || i < 10 {
                i += 1;
                pool.retain_idle(|v| {
                    assert!(!v.0.swap(true, SeqCst), "a held value was visited");
                    v.0.store(false, SeqCst);
                    (v.1 + i) % 3 != 0
                });
            }
        });
        thread::sleep(Duration::from_millis(if cfg!(miri) { 1 } else { 50 }));
        stop.store(true, SeqCst);
    });
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available), (0, 8));
    let all: Vec<_> = (0..8).map(|_| pool.try_acquire().unwrap()).collect();
    assert_eq!(all.len(), 8);
}

// ---------------------------------------------------------------------------
// try_builder
// ---------------------------------------------------------------------------

fn refused() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionRefused, "refused")
}

/// A lazy pool whose factory fails while `up` is false.
fn flaky(capacity: usize, up: &Arc<AtomicBool>) -> Pool<u32, io::Error> {
    let up = Arc::clone(up);
    Pool::try_builder(move || {
        if up.load(SeqCst) {
            Ok(7u32)
        } else {
            Err(refused())
        }
    })
    .capacity(capacity)
    .lazy()
    .build()
    .unwrap()
}

fn is_refused(err: &io::Error) -> bool {
    err.kind() == io::ErrorKind::ConnectionRefused
}

#[test]
fn every_acquire_surfaces_the_factorys_error_and_keeps_the_slot() {
    let up = Arc::new(AtomicBool::new(false));
    let pool = Arc::new(flaky(1, &up));
    let short = Duration::from_secs(5);
    match pool.try_acquire() {
        Err(TryAcquireError::Factory(e)) => assert!(is_refused(&e)),
        other => panic!("{:?}", other.map(|g| *g)),
    }
    match pool.acquire() {
        Err(AcquireError::Factory(e)) => assert!(is_refused(&e)),
        other => panic!("{:?}", other.map(|g| *g)),
    }
    match pool.acquire_timeout(short) {
        Err(AcquireTimeoutError::Factory(e)) => assert!(is_refused(&e)),
        other => panic!("{:?}", other.map(|g| *g)),
    }
    match pool.try_acquire_owned() {
        Err(TryAcquireError::Factory(e)) => assert!(is_refused(&e)),
        other => panic!("{:?}", other.map(|g| *g)),
    }
    match pool.acquire_owned() {
        Err(AcquireError::Factory(e)) => assert!(is_refused(&e)),
        other => panic!("{:?}", other.map(|g| *g)),
    }
    match pool.acquire_owned_timeout(short) {
        Err(AcquireTimeoutError::Factory(e)) => assert!(is_refused(&e)),
        other => panic!("{:?}", other.map(|g| *g)),
    }
    match executor::block_on(pool.acquire_async()) {
        Err(AcquireError::Factory(e)) => assert!(is_refused(&e)),
        other => panic!("{:?}", other.map(|g| *g)),
    }
    match executor::block_on(pool.acquire_owned_async()) {
        Err(AcquireError::Factory(e)) => assert!(is_refused(&e)),
        other => panic!("{:?}", other.map(|g| *g)),
    }
    {
        let frame = pool.scope();
        assert!(matches!(
            frame.try_acquire(),
            Err(TryAcquireError::Factory(_))
        ));
        assert!(matches!(frame.acquire(), Err(AcquireError::Factory(_))));
        assert!(frame.is_empty());
    }
    let stats = pool.stats();
    assert_eq!((stats.available, stats.in_use, stats.filled), (1, 0, 0));
    // The factory works again: the same slot is filled on the next acquire.
    up.store(true, SeqCst);
    assert_eq!(*pool.try_acquire().unwrap(), 7);
    assert_eq!(*pool.acquire_owned().unwrap(), 7);
    assert_eq!(pool.stats().filled, 1);
    assert_eq!(
        Arc::strong_count(&pool),
        1,
        "no future or guard kept a clone"
    );
}

/// The case: a lazy pool of 16 whose factory starts failing while
/// one thread's cache holds two idle values. Another thread is served those
/// values, by every form of acquire, before the factory runs; only when
/// both are held does an acquire reach the factory (and its error).
#[test]
fn idle_values_are_served_before_a_failing_factory_runs() {
    for (cache, fair) in [(0, false), (4, false), (0, true)] {
        let up = Arc::new(AtomicBool::new(true));
        let factory_up = Arc::clone(&up);
        let made = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&made);
        let mut builder = Pool::try_builder(move || {
            if factory_up.load(SeqCst) {
                Ok(counter.fetch_add(1, SeqCst) as u32)
            } else {
                Err(refused())
            }
        })
        .capacity(16)
        .lazy()
        .thread_cache_size(cache);
        if fair {
            builder = builder.fair();
        }
        let pool: Arc<Pool<u32, io::Error>> = Arc::new(builder.build().unwrap());
        // Two values made and released by one thread: in its cache, if the
        // pool has caches.
        let other = Arc::clone(&pool);
        thread::spawn(move || {
            let a = other.try_acquire().unwrap();
            let b = other.try_acquire().unwrap();
            assert_eq!((*a, *b), (0, 1));
        })
        .join()
        .unwrap();
        up.store(false, SeqCst);
        let setting = format!("cache {cache}, fair {fair}");
        // Four acquires, each released before the next: all served.
        for _ in 0..4 {
            let got = *pool.try_acquire().expect(&setting);
            assert!(got < 2, "{setting}: served a made value");
        }
        for _ in 0..2 {
            assert!(*pool.acquire().expect(&setting) < 2);
            assert!(
                *pool
                    .acquire_timeout(Duration::from_secs(5))
                    .expect(&setting)
                    < 2
            );
            assert!(*pool.try_acquire_owned().expect(&setting) < 2);
            assert!(*pool.acquire_owned().expect(&setting) < 2);
            assert!(*executor::block_on(pool.acquire_async()).expect(&setting) < 2);
            assert!(*executor::block_on(pool.acquire_owned_async()).expect(&setting) < 2);
            let frame = pool.scope();
            assert!(*frame.try_acquire().expect(&setting) < 2);
        }
        assert_eq!(
            made.load(SeqCst),
            2,
            "{setting}: the factory never ran again"
        );
        // Both values held: the next acquire has nothing idle to take.
        let held = (pool.try_acquire().unwrap(), pool.try_acquire().unwrap());
        assert_eq!(
            [*held.0, *held.1].iter().copied().max(),
            Some(1),
            "{setting}: the two values"
        );
        if cache == 0 {
            // Exact without caches: the second acquire held an empty slot
            // and the value it found for a moment, and counts one.
            assert_eq!(
                pool.stats().peak_in_use,
                2,
                "{setting}: one slot per acquire"
            );
        }
        match pool.try_acquire() {
            Err(TryAcquireError::Factory(e)) => assert!(is_refused(&e)),
            other => panic!("{setting}: {:?}", other.map(|g| *g)),
        }
        let stats = pool.stats();
        assert_eq!(
            (stats.in_use, stats.available, stats.filled),
            (2, 14, 2),
            "{setting}: nothing lost"
        );
        drop(held);
        up.store(true, SeqCst);
        // The factory works again: an acquire with idle values still takes
        // those; one more than them runs it.
        let three = (
            pool.try_acquire().unwrap(),
            pool.try_acquire().unwrap(),
            pool.try_acquire().unwrap(),
        );
        assert_eq!(*three.2, 2, "{setting}: a new value once both are held");
        drop(three);
    }
}

/// An empty slot on top of the free list (a discarded or detached value's)
/// no longer hides the values below it: they are served first, and the
/// factory runs only for the acquire that finds none idle.
#[test]
fn an_emptied_slot_on_top_does_not_hide_the_values_below_it() {
    let made = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&made);
    let doomed = Arc::new(AtomicUsize::new(usize::MAX));
    let check = Arc::clone(&doomed);
    let pool = Pool::builder(move || counter.fetch_add(1, SeqCst))
        .capacity(4)
        .thread_cache(false)
        .discard_if(move |v: &usize| *v == check.load(SeqCst))
        .build()
        .unwrap();
    assert_eq!(made.load(SeqCst), 4);
    let first = pool.try_acquire().unwrap();
    doomed.store(*first, SeqCst);
    drop(first);
    assert_eq!(
        pool.stats().filled,
        3,
        "discarded: its slot is empty, on top"
    );
    let held: Vec<usize> = (0..3)
        .map(|_| pool.try_acquire().unwrap())
        .map(|g| *g)
        .collect();
    assert_eq!(
        made.load(SeqCst),
        4,
        "each acquire took an idle value: {held:?}"
    );
    let guards: Vec<_> = (0..3).map(|_| pool.try_acquire().unwrap()).collect();
    let mut values: Vec<usize> = guards.iter().map(|g| **g).collect();
    values.sort_unstable();
    let mut expected: Vec<usize> = (0..4).filter(|&v| v != doomed.load(SeqCst)).collect();
    expected.sort_unstable();
    assert_eq!(values, expected, "the three values, held at once");
    assert_eq!(made.load(SeqCst), 4);
    let fourth = pool.try_acquire().unwrap();
    assert_eq!(
        (*fourth, made.load(SeqCst)),
        (4, 5),
        "nothing idle: the factory ran"
    );
    drop((guards, fourth));
    // A detach empties a slot: the next three acquires take the values
    // left, the fourth gets the factory's.
    let detached = PoolGuard::detach(pool.try_acquire().unwrap());
    let guards: Vec<_> = (0..3).map(|_| pool.try_acquire().unwrap()).collect();
    assert!(guards.iter().all(|g| **g != detached));
    assert_eq!(made.load(SeqCst), 5, "the three values left, served first");
    let last = pool.try_acquire().unwrap();
    assert_eq!((*last, made.load(SeqCst)), (5, 6));
    drop((guards, last));
    assert_eq!(pool.stats().filled, 4);
}

/// A scope that pops an empty slot and is served an idle value keeps the
/// slot of that value, not the empty one it gave back (a review found the
/// scope linking, and later pushing, the slot it had given back: two
/// owners of one slot, and the value's slot lost).
#[test]
fn a_scope_served_an_idle_value_keeps_that_values_slot() {
    for cache in [0, 2] {
        let made = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&made);
        let pool = Pool::builder(move || counter.fetch_add(1, SeqCst) + 100)
            .capacity(2)
            .lazy()
            .thread_cache_size(cache)
            .build()
            .unwrap();
        let a = pool.try_acquire().unwrap();
        let b = pool.try_acquire().unwrap();
        let (a_index, a_value) = (PoolGuard::index(&a), *a);
        drop(a);
        // `b`'s slot goes back empty, on top of `a`'s value.
        PoolGuard::detach(b);
        let held = {
            let scope = pool.scope();
            assert_eq!(
                *scope.try_acquire().unwrap(),
                a_value,
                "cache {cache}: the idle value"
            );
            let held = pool.try_acquire().unwrap();
            assert_ne!(
                PoolGuard::index(&held),
                a_index,
                "cache {cache}: the scope keeps a's slot"
            );
            assert!(
                pool.try_acquire().is_err(),
                "cache {cache}: both slots held"
            );
            held
        };
        // The scope gave back exactly a's slot.
        let again = pool.try_acquire().unwrap();
        assert_eq!(
            (PoolGuard::index(&again), *again),
            (a_index, a_value),
            "cache {cache}"
        );
        assert!(
            pool.try_acquire().is_err(),
            "cache {cache}: no slot handed out twice"
        );
        drop((held, again));
        let stats = pool.stats();
        assert_eq!(
            (stats.in_use, stats.available, stats.filled),
            (0, 2, 2),
            "cache {cache}"
        );
    }
}

/// One thread that never holds more than one value reads a peak of 1, with
/// caches or without, also when an acquire swapped an empty slot for an
/// idle value (a review found the swap counting the empty slot, parked in
/// the thread's cache, as held).
#[test]
fn serving_an_idle_value_adds_nothing_to_the_peak() {
    for cache in [0, 8] {
        let pool = Pool::builder(|| 7u32)
            .capacity(1024)
            .lazy()
            .thread_cache_size(cache)
            .build()
            .unwrap();
        drop(pool.try_acquire().unwrap());
        pool.attach(9).unwrap();
        PoolGuard::detach(pool.try_acquire().unwrap());
        let served = pool.try_acquire().unwrap();
        assert_eq!(
            pool.stats().filled,
            1,
            "cache {cache}: an idle value, no new one"
        );
        assert_eq!(
            pool.stats().peak_in_use,
            1,
            "cache {cache}: one value held at a time"
        );
        drop(served);
    }
}

#[test]
fn an_eager_build_returns_the_factorys_error() {
    let made = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(AtomicUsize::new(0));
    let (m, d) = (Arc::clone(&made), Arc::clone(&drops));
    let built = Pool::try_builder(move || {
        if m.fetch_add(1, SeqCst) == 2 {
            Err("third value")
        } else {
            Ok(Counted(Arc::clone(&d), 0))
        }
    })
    .capacity(5)
    .build();
    match built {
        Err(BuildError::Factory(err)) => {
            assert_eq!(err, "third value");
            assert_eq!(
                BuildError::Factory(err).to_string(),
                "the pool's factory failed: third value"
            );
        }
        other => panic!("{:?}", other.map(|p| p.capacity())),
    }
    assert_eq!(made.load(SeqCst), 3, "stopped at the first error");
    assert_eq!(drops.load(SeqCst), 2, "the values made were dropped");
}

#[test]
fn an_infallible_pool_never_reports_a_factory_error() {
    let pool = Pool::new(1, || 0u8);
    let held = pool.try_acquire().unwrap();
    assert_eq!(pool.try_acquire().unwrap_err(), TryAcquireError::Exhausted);
    drop(held);
    // `E = Infallible`: the errors are `Copy`, with no drop glue, so an
    // infallible pool's acquire pays nothing for the `Factory` variants.
    let err: TryAcquireError = TryAcquireError::Closed;
    let copied = err;
    assert_eq!(
        (copied, err),
        (TryAcquireError::Closed, TryAcquireError::Closed)
    );
    assert!(!std::mem::needs_drop::<TryAcquireError>());
    assert!(!std::mem::needs_drop::<AcquireError>());
    assert!(!std::mem::needs_drop::<AcquireTimeoutError>());
    assert!(!std::mem::needs_drop::<BuildError>());
}

#[test]
fn the_errors_carry_the_factorys_error_as_their_source() {
    fn refused_source(err: &(dyn std::error::Error + 'static)) -> bool {
        let source = err.source().expect("the factory's error");
        is_refused(source.downcast_ref::<io::Error>().expect("an io::Error"))
    }
    let errors: [Box<dyn std::error::Error>; 4] = [
        Box::new(TryAcquireError::Factory(refused())),
        Box::new(AcquireError::Factory(refused())),
        Box::new(AcquireTimeoutError::Factory(refused())),
        Box::new(BuildError::Factory(refused())),
    ];
    for err in &errors {
        assert_eq!(err.to_string(), "the pool's factory failed: refused");
        assert!(refused_source(&**err));
    }
    assert!(std::error::Error::source(&AcquireError::<io::Error>::Closed).is_none());
    // `Copy`, `Eq` and `Hash` where `E` is.
    let e = AcquireError::Factory(3u8);
    let copied = e;
    assert_eq!(copied, e);
    assert_eq!(
        AcquireTimeoutError::from(e),
        AcquireTimeoutError::Factory(3u8)
    );
    let set: std::collections::HashSet<_> = [e, copied, AcquireError::Closed].into_iter().collect();
    assert_eq!(set.len(), 2);
}

/// Two threads wait on an empty pool of one slot; the holder detaches, so
/// the slot goes back empty, and the first fill fails: the waiter that got
/// the slot returns the error and the slot reaches the other waiter, whose
/// fill succeeds. No waiter is left waiting for a slot that came and went.
#[test]
fn a_failed_fill_passes_the_slot_to_the_next_waiter() {
    let _dog = watchdog("a failed fill passes the slot on", WAITING);
    let runs = if cfg!(miri) { 2 } else { 50 };
    for fair in [false, true] {
        for _ in 0..runs {
            let calls = Arc::new(AtomicUsize::new(0));
            let c = Arc::clone(&calls);
            let mut builder = Pool::try_builder(move || {
                // Call 1 fills the holder's slot at build, call 2 fails.
                if c.fetch_add(1, SeqCst) == 1 {
                    Err("once")
                } else {
                    Ok(1u32)
                }
            })
            .capacity(1);
            if fair {
                builder = builder.fair();
            }
            let pool = builder.build().unwrap();
            let held = pool.try_acquire().unwrap();
            let ready = Barrier::new(3);
            let results: Vec<Result<u32, AcquireTimeoutError<&str>>> = thread::scope(|s| {
                let waiters: Vec<_> = (0..2)
                    .map(|_| {
                        s.spawn(|| {
                            ready.wait();
                            pool.acquire_timeout(WAITING).map(|g| *g)
                        })
                    })
                    .collect();
                ready.wait();
                while pool.stats().waiting_threads < 2 {
                    thread::yield_now();
                }
                PoolGuard::detach(held);
                waiters.into_iter().map(|w| w.join().unwrap()).collect()
            });
            let failed = results
                .iter()
                .filter(|r| matches!(r, Err(AcquireTimeoutError::Factory(_))))
                .count();
            let served = results.iter().filter(|r| **r == Ok(1)).count();
            assert_eq!((failed, served), (1, 1), "{results:?}");
            assert_eq!(calls.load(SeqCst), 3);
            assert_eq!(pool.stats().available, 1);
        }
    }
}

// ---------------------------------------------------------------------------
// from_values
// ---------------------------------------------------------------------------

#[test]
fn from_values_serves_exactly_its_values() {
    let pool = Pool::from_values(vec![1u32, 2, 3]);
    assert_eq!(pool.capacity(), 3);
    let all: Vec<_> = (0..3).map(|_| pool.try_acquire().unwrap()).collect();
    let mut got: Vec<u32> = all.iter().map(|g| **g).collect();
    got.sort_unstable();
    assert_eq!(got, [1, 2, 3]);
    assert_eq!(pool.try_acquire().unwrap_err(), TryAcquireError::Exhausted);
    drop(all);
    let collected: Pool<u32> = (0..5).collect();
    assert_eq!(collected.capacity(), 5);
    assert_eq!(collected.stats().filled, 5);
    assert!(format!("{collected:?}").contains("factory: false"));
}

#[test]
fn from_values_refuses_what_it_cannot_fill() {
    let err = Pool::builder_from_values(vec![1u8, 2])
        .capacity(3)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::NoFactory {
            values: 2,
            capacity: 3
        }
    );
    let err = Pool::builder_from_values(vec![1u8, 2])
        .initial(1)
        .build()
        .unwrap_err();
    assert!(matches!(err, BuildError::NoFactory { .. }));
    let err = Pool::builder_from_values(Vec::<u8>::new())
        .build()
        .unwrap_err();
    assert_eq!(err, BuildError::ZeroCapacity);
    let empty = panic::catch_unwind(|| Pool::from_values(Vec::<u8>::new()));
    assert!(empty.is_err());
}

/// Detach, discard, a reset's panic, trim and `retain_idle` each retire a
/// slot: it is never handed out empty, the pool serves one value fewer, and
/// `attach` brings it back.
#[test]
fn from_values_retires_every_slot_that_loses_its_value() {
    for cache in [false, true] {
        let pool = Pool::builder_from_values((0..8u32).collect())
            .thread_cache(cache)
            .reset(|v: &mut u32| {
                if *v == 100 {
                    panic!("reset failed");
                }
            })
            .discard_if(|v: &u32| *v == 200)
            .build()
            .unwrap();
        let serving = |pool: &Pool<u32>| {
            let all: Vec<_> = std::iter::from_fn(|| pool.try_acquire().ok()).collect();
            all.len()
        };
        assert_eq!(serving(&pool), 8);

        let detached = PoolGuard::detach(pool.try_acquire().unwrap());
        assert_eq!(pool.stats().retired, 1);
        assert_eq!(serving(&pool), 7);

        *pool.try_acquire().unwrap() = 200; // discarded
        assert_eq!((pool.stats().retired, pool.stats().discarded), (2, 1));
        assert_eq!(serving(&pool), 6);

        let mut g = pool.try_acquire().unwrap();
        *g = 100;
        assert!(panic::catch_unwind(AssertUnwindSafe(move || drop(g))).is_err());
        assert_eq!(pool.stats().retired, 3);
        assert_eq!(serving(&pool), 5);

        assert_eq!(pool.trim(4), 1);
        assert_eq!(pool.stats().retired, 4);
        let mut odd = 0;
        assert_eq!(
            pool.retain_idle(|_| {
                odd += 1;
                odd != 1
            }),
            1
        );
        let stats = pool.stats();
        assert_eq!(stats.retired, 5);
        assert_eq!(
            (stats.capacity, stats.available, stats.in_use, stats.filled),
            (8, 3, 0, 3)
        );
        assert_eq!(serving(&pool), 3);

        // A scope whose value is discarded retires its slot too.
        {
            let frame = pool.scope();
            *frame.try_acquire().unwrap() = 200;
            *frame.try_acquire().unwrap() = 5;
        }
        assert_eq!(pool.stats().retired, 6);
        assert_eq!(serving(&pool), 2);

        // Attach fills a retired slot, which serves again.
        pool.attach(detached).unwrap();
        assert_eq!(pool.stats().retired, 5);
        assert_eq!(serving(&pool), 3);
        for v in 0..5 {
            pool.attach(v).unwrap();
        }
        assert!(matches!(pool.attach(9), Err(AttachError::Full(9))));
        let stats = pool.stats();
        assert_eq!((stats.retired, stats.available, stats.filled), (0, 8, 8));
        assert_eq!(serving(&pool), 8);
    }
}

/// A waiting acquire on a pool whose every slot retired waits for an
/// attach.
#[test]
fn from_values_waiter_is_served_by_an_attach() {
    let _dog = watchdog("a waiter served by an attach", WAITING);
    let pool = Pool::from_values(vec![String::from("only")]);
    let value = PoolGuard::detach(pool.try_acquire().unwrap());
    assert!(pool.try_acquire().is_err());
    thread::scope(|s| {
        let waiter = s.spawn(|| pool.acquire().map(|g| g.clone()));
        while pool.stats().waiting_threads == 0 {
            thread::yield_now();
        }
        pool.attach(value).unwrap();
        assert_eq!(waiter.join().unwrap().unwrap(), "only");
    });
}

/// Owned guards of a pool without a factory release through the retired
/// list while the pool's handle goes.
#[test]
fn from_values_owned_guards_retire_after_the_pool_is_dropped() {
    let drops = Arc::new(AtomicUsize::new(0));
    let values: Vec<_> = (0..3).map(|i| Counted(Arc::clone(&drops), i)).collect();
    let pool = Arc::new(Pool::from_values(values));
    let a = pool.try_acquire_owned().unwrap();
    let b = pool.try_acquire_owned().unwrap();
    drop(pool);
    assert_eq!(drops.load(SeqCst), 0, "the guards keep the values alive");
    drop(tagpool::OwnedPoolGuard::detach(a));
    assert_eq!(drops.load(SeqCst), 1);
    drop(b); // the last guard: the state goes, with the idle value
    assert_eq!(drops.load(SeqCst), 3);
}
