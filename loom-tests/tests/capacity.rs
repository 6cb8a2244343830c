//! Models of the movable bound (`Pool::set_capacity`): a lowering racing a
//! release (caches off and on), a waiter that must not be served a slot
//! that leaves service (a blocked thread, a task, a fair pool's ticket;
//! waiting before the lowering or arriving after it), and a raise that
//! must wake a waiter (one waiting for a withdrawn slot, one arriving as
//! the raise gives an elastic pool room to grow).

#![cfg(loom)]

use std::sync::Arc;

use loom::future::block_on;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use tagpool::Pool;
use tagpool_loom_tests::{check, drain};

/// A pool of `capacity` slots, caches on (two per thread) or off, fair or
/// barging.
fn pool(capacity: usize, cached: bool, fair: bool) -> Pool<usize> {
    let builder = Pool::builder(|| 0usize)
        .capacity(capacity)
        .thread_cache_size(if cached { 2 } else { 0 });
    if fair { builder.fair() } else { builder }.build().unwrap()
}

/// Takes a slot as a blocked thread (`acquire`) or as a task
/// (`acquire_async` on loom's executor), waiting as long as it must.
fn acquire(pool: &Pool<usize>, task: bool) -> tagpool::PoolGuard<'_, usize> {
    if task {
        block_on(pool.acquire_async()).unwrap()
    } else {
        pool.acquire().unwrap()
    }
}

/// Two slots, both held; the bound goes to 1 while one holder gives its
/// slot back and tries to take one again. Once `set_capacity` has
/// returned, no acquire may succeed while the other slot is held: the
/// slot given back leaves service, whether its release came before the
/// lowering (the lowering finds it in the free list or in the releaser's
/// cache) or after it (the release withdraws it).
fn lowering_races_a_release(name: &str, cached: bool) {
    check(name, 3, move || {
        let pool = Arc::new(pool(2, cached, false));
        let lowered = Arc::new(AtomicBool::new(false));
        let mine = pool.try_acquire_owned().unwrap();
        let theirs = pool.try_acquire_owned().unwrap();
        let holder = {
            let (pool, lowered) = (Arc::clone(&pool), Arc::clone(&lowered));
            thread::spawn(move || {
                drop(theirs);
                let after = lowered.load(Ordering::SeqCst);
                if let Ok(again) = pool.try_acquire() {
                    assert!(!after, "a withdrawn slot served after the lowering");
                    drop(again);
                }
            })
        };
        pool.set_capacity(1).unwrap();
        lowered.store(true, Ordering::SeqCst);
        assert!(pool.try_acquire().is_err(), "2 slots held at bound 1");
        holder.join().unwrap();
        drop(mine);
        assert_eq!(pool.stats().withdrawing, 0);
        drain(&pool);
    });
}

#[test]
fn lowering_races_a_release_uncached() {
    lowering_races_a_release("lowering_races_a_release_uncached", false);
}

#[test]
fn lowering_races_a_release_cached() {
    lowering_races_a_release("lowering_races_a_release_cached", true);
}

/// Two slots held, the bound lowered to 1, and a waiter (a blocked thread,
/// or a task) waiting: the first slot given back leaves service, so the
/// waiter is served only by the second, and it must be served by it (a
/// waiter left asleep deadlocks the model).
fn waiter_waits_for_the_bound(name: &str, fair: bool, task: bool) {
    check(name, 2, move || {
        let pool = Arc::new(pool(2, false, fair));
        let first = pool.try_acquire_owned().unwrap();
        let second = pool.try_acquire_owned().unwrap();
        pool.set_capacity(1).unwrap();
        let released = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (pool, released) = (Arc::clone(&pool), Arc::clone(&released));
            thread::spawn(move || {
                let guard = acquire(&pool, task);
                assert!(
                    released.load(Ordering::SeqCst),
                    "served the slot that left service"
                );
                drop(guard);
            })
        };
        let releaser = thread::spawn(move || drop(first));
        releaser.join().unwrap();
        released.store(true, Ordering::SeqCst);
        drop(second);
        waiter.join().unwrap();
        drain(&pool);
    });
}

#[test]
fn thread_waits_for_the_bound() {
    waiter_waits_for_the_bound("thread_waits_for_the_bound", false, false);
}

#[test]
fn task_waits_for_the_bound() {
    waiter_waits_for_the_bound("task_waits_for_the_bound", false, true);
}

#[test]
fn fair_waiter_waits_for_the_bound() {
    waiter_waits_for_the_bound("fair_waiter_waits_for_the_bound", true, false);
}

/// A pool lowered to 1 slot, held; a waiter (a thread or a task) waits.
/// Raising the bound puts the withdrawn slot back, and the waiter must be
/// woken for it: a raise that only pushes leaves it asleep (deadlock).
fn raise_serves_a_waiter(name: &str, task: bool) {
    check(name, 3, move || {
        let pool = Arc::new(pool(2, false, false));
        pool.set_capacity(1).unwrap();
        let held = pool.try_acquire().unwrap();
        let waiter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let guard = acquire(&pool, task);
                drop(guard);
            })
        };
        pool.set_capacity(2).unwrap();
        waiter.join().unwrap();
        drop(held);
        drain(&pool);
    });
}

#[test]
fn raise_serves_a_waiting_thread() {
    raise_serves_a_waiter("raise_serves_a_waiting_thread", false);
}

#[test]
fn raise_serves_a_waiting_task() {
    raise_serves_a_waiter("raise_serves_a_waiting_task", true);
}

/// Two slots held; one holder gives its slot back while the bound goes to
/// 1; a waiter that starts after `set_capacity` returned (a fair pool's
/// thread, or a barging pool's task: both queue a ticket) must not be
/// handed that slot: it waits for the other one. A release that checked
/// the debt before taking the ticket queue's lock could hand it over.
fn waiter_after_the_lowering(name: &str, fair: bool, task: bool) {
    check(name, 3, move || {
        let pool = Arc::new(pool(2, false, fair));
        let first = pool.try_acquire_owned().unwrap();
        let second = pool.try_acquire_owned().unwrap();
        let released = Arc::new(AtomicBool::new(false));
        let releaser = thread::spawn(move || drop(first));
        pool.set_capacity(1).unwrap();
        let waiter = {
            let (pool, released) = (Arc::clone(&pool), Arc::clone(&released));
            thread::spawn(move || {
                let guard = acquire(&pool, task);
                assert!(released.load(Ordering::SeqCst), "served past the bound");
                drop(guard);
            })
        };
        releaser.join().unwrap();
        released.store(true, Ordering::SeqCst);
        drop(second);
        waiter.join().unwrap();
        drain(&pool);
    });
}

#[test]
fn fair_thread_after_the_lowering() {
    waiter_after_the_lowering("fair_thread_after_the_lowering", true, false);
}

#[test]
fn task_after_the_lowering() {
    waiter_after_the_lowering("task_after_the_lowering", false, true);
}

/// A pool of 1 slot, held, that may grow to 2; a waiter arrives while the
/// bound is raised to 2. Whether the waiter looked for room before the
/// raise or after, it must get the second slot: a waiter that parked
/// without seeing the room, unseen by the raise, deadlocks the model.
fn raise_races_an_arriving_waiter(name: &str, fair: bool, task: bool) {
    check(name, 3, move || {
        let builder = Pool::builder(|| 0usize)
            .capacity(1)
            .max_capacity(2)
            .thread_cache_size(0);
        let pool = Arc::new(if fair { builder.fair() } else { builder }.build().unwrap());
        let held = pool.try_acquire_owned().unwrap();
        let waiter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let guard = acquire(&pool, task);
                drop(guard);
            })
        };
        pool.set_capacity(2).unwrap();
        waiter.join().unwrap();
        drop(held);
        drain(&pool);
    });
}

#[test]
fn raise_races_an_arriving_thread() {
    raise_races_an_arriving_waiter("raise_races_an_arriving_thread", false, false);
}

#[test]
fn raise_races_an_arriving_task() {
    raise_races_an_arriving_waiter("raise_races_an_arriving_task", false, true);
}

#[test]
fn raise_races_an_arriving_fair_thread() {
    raise_races_an_arriving_waiter("raise_races_an_arriving_fair_thread", true, false);
}
