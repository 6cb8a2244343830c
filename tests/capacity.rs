//! `Pool::set_capacity`: lowering takes free slots out at once and held
//! ones as they come back, raising puts them back (to waiters first) and
//! lets the pool grow up to `Builder::max_capacity`; exact throughout, with
//! caches on and off, barging and fair.

use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::task::Poll;
use std::thread;
use std::time::Duration;

use tagpool::{BuildError, CapacityError, Pool};

mod support;
use support::budget::Budget;
use support::executor::{counting, poll_once};
use support::{watchdog, WAITING};

/// Counts the values alive: made by the factory, not dropped yet.
#[derive(Debug)]
struct Counted(Arc<AtomicIsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Pools of `capacity` counting their values: caches off and on, fair.
fn pools(capacity: usize) -> Vec<(&'static str, Pool<Counted>, Arc<AtomicIsize>)> {
    let make = |name, cache: Option<usize>, fair: bool| {
        let alive = Arc::new(AtomicIsize::new(0));
        let a = Arc::clone(&alive);
        let mut builder = Pool::builder(move || {
            a.fetch_add(1, Ordering::SeqCst);
            Counted(Arc::clone(&a))
        })
        .capacity(capacity);
        if let Some(size) = cache {
            builder = builder.thread_cache_size(size);
        }
        if fair {
            builder = builder.fair();
        }
        (name, builder.build().unwrap(), alive)
    };
    vec![
        make("uncached", Some(0), false),
        make("cached", Some(2), false),
        make("fair", None, true),
    ]
}

/// Takes every slot `pool` serves now without waiting.
fn drain<T>(pool: &Pool<T>) -> Vec<tagpool::PoolGuard<'_, T>> {
    std::iter::from_fn(|| pool.try_acquire().ok()).collect()
}

#[test]
fn lowering_takes_free_slots_out_at_once_and_drops_their_values() {
    for (name, pool, alive) in pools(8) {
        pool.set_capacity(3).unwrap();
        let stats = pool.stats();
        assert_eq!(
            (
                stats.capacity,
                stats.available,
                stats.withdrawn,
                stats.withdrawing
            ),
            (3, 3, 5, 0),
            "{name}"
        );
        assert_eq!(
            alive.load(Ordering::SeqCst),
            3,
            "{name}: five values dropped"
        );
        assert_eq!((pool.capacity(), pool.max_capacity()), (3, 8), "{name}");
        assert_eq!(drain(&pool).len(), 3, "{name}");
    }
}

#[test]
fn held_slots_leave_service_as_they_come_back() {
    for (name, pool, alive) in pools(4) {
        let mut held = drain(&pool);
        assert_eq!(held.len(), 4);
        pool.set_capacity(2).unwrap();
        assert_eq!(pool.stats().withdrawing, 2, "{name}");
        held.pop();
        assert!(pool.try_acquire().is_err(), "{name}: 3 held, bound 2");
        held.pop();
        assert!(pool.try_acquire().is_err(), "{name}: 2 held, bound 2");
        let stats = pool.stats();
        assert_eq!(
            (stats.in_use, stats.withdrawing, stats.withdrawn),
            (2, 0, 2),
            "{name}"
        );
        held.pop();
        held.push(pool.try_acquire().expect("1 held, bound 2"));
        assert!(pool.try_acquire().is_err(), "{name}");
        drop(held);
        // The next call drops the values of the slots that left later.
        pool.set_capacity(2).unwrap();
        assert_eq!(alive.load(Ordering::SeqCst), 2, "{name}");
        assert_eq!(drain(&pool).len(), 2, "{name}");
    }
}

#[test]
fn raising_puts_slots_back_and_the_factory_refills_them() {
    for (name, pool, alive) in pools(6) {
        pool.set_capacity(1).unwrap();
        assert_eq!(alive.load(Ordering::SeqCst), 1, "{name}");
        pool.set_capacity(6).unwrap();
        let stats = pool.stats();
        assert_eq!((stats.available, stats.withdrawn), (6, 0), "{name}");
        assert_eq!(drain(&pool).len(), 6, "{name}");
        assert_eq!(alive.load(Ordering::SeqCst), 6, "{name}: refilled");
    }
}

#[test]
fn raising_pays_a_debt_off_first() {
    for (name, pool, _) in pools(4) {
        let mut held = drain(&pool);
        pool.set_capacity(1).unwrap();
        assert_eq!(pool.stats().withdrawing, 3, "{name}");
        held.pop();
        pool.set_capacity(3).unwrap();
        let stats = pool.stats();
        assert_eq!((stats.withdrawing, stats.withdrawn), (0, 1), "{name}");
        held.pop();
        held.push(pool.try_acquire().expect("2 held, bound 3"));
        assert!(pool.try_acquire().is_err(), "{name}: 3 held, bound 3");
    }
}

#[test]
fn bad_capacities_are_refused_and_change_nothing() {
    let pool = Pool::new(4, || 0u8);
    assert_eq!(pool.set_capacity(0), Err(CapacityError::Zero));
    assert_eq!(
        pool.set_capacity(5),
        Err(CapacityError::AboveMax {
            requested: 5,
            max: 4
        })
    );
    assert_eq!(pool.capacity(), 4);
    assert_eq!(drain(&pool).len(), 4);

    let below = Pool::builder(|| 0u8).capacity(4).max_capacity(3).build();
    assert!(matches!(
        below.unwrap_err(),
        BuildError::MaxBelowCapacity {
            max: 3,
            capacity: 4
        }
    ));
    let huge = Pool::builder(|| 0u8)
        .capacity(4)
        .max_capacity(tagpool::MAX_CAPACITY + 1)
        .build();
    assert!(matches!(
        huge.unwrap_err(),
        BuildError::CapacityTooLarge { .. }
    ));
    let given = Pool::builder_from_values(vec![1u8, 2])
        .capacity(2)
        .max_capacity(4)
        .build();
    assert!(matches!(given.unwrap_err(), BuildError::NoFactory { .. }));
}

#[test]
fn a_pool_grows_to_a_raised_bound_and_no_further() {
    for cache in [0, 4] {
        let pool = Pool::builder(|| 0u64)
            .capacity(4)
            .max_capacity(64)
            .thread_cache_size(cache)
            .build()
            .unwrap();
        assert_eq!(pool.stats().allocated, 4);
        assert_eq!(drain(&pool).len(), 4, "cache {cache}");
        pool.set_capacity(20).unwrap();
        let held = drain(&pool);
        assert_eq!(held.len(), 20, "cache {cache}");
        let stats = pool.stats();
        assert!(stats.allocated >= 20, "cache {cache}: {stats:?}");
        // Grown past the bound in whole segments: the rest is withdrawn.
        assert_eq!(stats.allocated - stats.withdrawn, 20, "cache {cache}");
        drop(held);
        pool.set_capacity(64).unwrap();
        assert_eq!(drain(&pool).len(), 64, "cache {cache}");
    }
}

#[test]
fn a_given_values_pool_keeps_its_values_out_of_service() {
    let pool = Pool::from_values(vec![1u8, 2, 3]);
    pool.set_capacity(1).unwrap();
    assert_eq!(pool.stats().filled, 3, "nothing could make them again");
    pool.set_capacity(3).unwrap();
    let mut values: Vec<u8> = drain(&pool).iter().map(|g| **g).collect();
    values.sort_unstable();
    assert_eq!(values, [1, 2, 3]);
}

#[test]
fn a_blocked_waiter_is_served_by_a_raise_not_by_a_withdrawn_slot() {
    for (name, pool, _) in pools(2) {
        let pool = Arc::new(pool);
        let _watchdog = watchdog(format!("{name}: waiter"), WAITING);
        let mut held = drain(&pool);
        pool.set_capacity(1).unwrap();
        let (tx, rx) = mpsc::channel();
        let waiter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let guard = pool.acquire().unwrap();
                tx.send(()).unwrap();
                drop(guard);
            })
        };
        // Its slot leaves service: 1 held, bound 1, the waiter waits on.
        held.pop();
        thread::sleep(Duration::from_millis(20));
        assert!(rx.try_recv().is_err(), "{name}: served a withdrawn slot");
        pool.set_capacity(2).unwrap();
        rx.recv().unwrap();
        waiter.join().unwrap();
        drop(held);
        assert_eq!(drain(&pool).len(), 2, "{name}");
    }
}

#[test]
fn a_waiting_task_is_served_by_a_raise_that_grows_the_pool() {
    let pool = Pool::builder(|| 0u32)
        .capacity(1)
        .max_capacity(4)
        .build()
        .unwrap();
    let held = pool.try_acquire().unwrap();
    let (wakes, waker) = counting();
    let mut acquire = pool.acquire_async();
    assert!(poll_once(&mut acquire, &waker).is_pending());
    pool.set_capacity(2).unwrap();
    assert_eq!(wakes.wakes(), 1, "woken by the growth");
    match poll_once(&mut acquire, &waker) {
        Poll::Ready(Ok(guard)) => drop(guard),
        _ => panic!("not served"),
    }
    drop(held);
    assert_eq!(drain(&pool).len(), 2);
}

/// Threads take and give back slots while the bound moves. Every acquire
/// that succeeds leaves no more slots held than the bound published
/// around it (raised before the call, lowered after it returns); at the
/// end, with everything given back, exactly the bound is served.
#[test]
fn the_bound_is_exact_while_it_moves() {
    for (name, pool, alive) in pools(8) {
        let pool = Arc::new(pool);
        let bound = Arc::new(AtomicUsize::new(8));
        let held = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (pool, bound, held, stop) = (
                    Arc::clone(&pool),
                    Arc::clone(&bound),
                    Arc::clone(&held),
                    Arc::clone(&stop),
                );
                thread::spawn(move || {
                    let mut mine = Vec::new();
                    let mut round = 0u64;
                    while stop.load(Ordering::SeqCst) == 0 || round < 64 {
                        round += 1;
                        let before = bound.load(Ordering::SeqCst);
                        if let Ok(guard) = pool.try_acquire() {
                            let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                            let after = bound.load(Ordering::SeqCst);
                            assert!(
                                now <= before.max(after),
                                "{now} held, bound {before} then {after}"
                            );
                            mine.push(guard);
                        }
                        if mine.len() > 2 || round % 3 == 0 {
                            while let Some(guard) = mine.pop() {
                                held.fetch_sub(1, Ordering::SeqCst);
                                drop(guard);
                            }
                        }
                    }
                    for _ in mine.drain(..) {
                        held.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        let budget = Budget::new(Duration::from_millis(300), 64);
        let mut round = 0u64;
        while budget.more(round) {
            let n = 1 + (round as usize * 5) % 8;
            if n > bound.load(Ordering::SeqCst) {
                bound.store(n, Ordering::SeqCst);
                pool.set_capacity(n).unwrap();
            } else {
                pool.set_capacity(n).unwrap();
                bound.store(n, Ordering::SeqCst);
            }
            round += 1;
        }
        stop.store(1, Ordering::SeqCst);
        for thread in threads {
            thread.join().unwrap();
        }
        pool.set_capacity(5).unwrap();
        let stats = pool.stats();
        assert_eq!(
            (stats.in_use, stats.withdrawing, stats.available),
            (0, 0, 5),
            "{name}: {stats:?}"
        );
        assert_eq!(drain(&pool).len(), 5, "{name}");
        assert!(alive.load(Ordering::SeqCst) <= 5, "{name}: values dropped");
    }
}

#[test]
fn retired_slots_of_a_given_values_pool_are_out_of_service() {
    // 4 values, 2 detached (retired): the pool serves 2, and a bound of 2
    // takes none of them out.
    let pool = Pool::from_values(vec![1u8, 2, 3, 4]);
    tagpool::PoolGuard::detach(pool.try_acquire().unwrap());
    tagpool::PoolGuard::detach(pool.try_acquire().unwrap());
    pool.set_capacity(2).unwrap();
    let stats = pool.stats();
    assert_eq!((stats.withdrawn, stats.available), (0, 2), "{stats:?}");
    let held = drain(&pool);
    assert_eq!(held.len(), 2);
    // At the bound, an attach has no room for a third value.
    assert!(matches!(pool.attach(5), Err(tagpool::AttachError::Full(5))));
    drop(held);
    pool.set_capacity(3).unwrap();
    pool.attach(5).unwrap();
    assert_eq!(drain(&pool).len(), 3);
}

#[test]
fn min_idle_counts_no_withdrawn_slot_as_idle_or_held() {
    let made = Arc::new(AtomicUsize::new(0));
    let m = Arc::clone(&made);
    let pool = Pool::builder(move || m.fetch_add(1, Ordering::SeqCst))
        .capacity(8)
        .lazy()
        .min_idle(2)
        .build()
        .unwrap();
    pool.set_capacity(4).unwrap();
    for _ in 0..3 {
        pool.trim(8);
        let stats = pool.stats();
        assert!(stats.filled <= 2, "refilled past the floor: {stats:?}");
    }
}

/// A waker called by a raise's hand-off may use the pool, `set_capacity`
/// included: the resize lock is not held then.
#[test]
fn a_waker_woken_by_a_raise_may_move_the_bound() {
    use std::future::Future;
    use std::sync::Mutex;
    use std::task::{Context, Wake, Waker};

    struct Resizer(Arc<Pool<u8>>, Mutex<bool>);
    impl Wake for Resizer {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.set_capacity(2).unwrap();
            *self.1.lock().unwrap() = true;
        }
    }

    let _watchdog = watchdog("a waker that moves the bound", WAITING);
    let pool = Arc::new(
        Pool::builder(|| 0u8)
            .capacity(2)
            .thread_cache(false)
            .build()
            .unwrap(),
    );
    let held = pool.try_acquire_owned().unwrap();
    let other = pool.try_acquire_owned().unwrap();
    pool.set_capacity(1).unwrap();
    drop(held); // withdrawn
    let resizer = Arc::new(Resizer(Arc::clone(&pool), Mutex::new(false)));
    let waker = Waker::from(Arc::clone(&resizer));
    let mut acquire = Box::pin(pool.acquire_async());
    assert!(acquire
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    pool.set_capacity(2).unwrap(); // the withdrawn slot goes to the task
    assert!(*resizer.1.lock().unwrap(), "woken");
    match acquire.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(Ok(guard)) => drop(guard),
        _ => panic!("not served"),
    }
    drop(other);
}

#[test]
fn a_raise_grows_for_the_waiters_not_to_the_bound() {
    let pool = Pool::builder(|| 0u8)
        .capacity(1)
        .max_capacity(1 << 16)
        .thread_cache(false)
        .build()
        .unwrap();
    let held = pool.try_acquire().unwrap();
    let (wakes, waker) = counting();
    let mut acquire = pool.acquire_async();
    assert!(poll_once(&mut acquire, &waker).is_pending());
    pool.set_capacity(1 << 16).unwrap();
    assert_eq!(wakes.wakes(), 1);
    assert!(
        pool.stats().allocated <= 4,
        "grew for one task: {:?}",
        pool.stats()
    );
    drop(acquire);
    drop(held);
}
