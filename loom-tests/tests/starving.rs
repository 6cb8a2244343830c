//! Models of the starvation bound of barging pools: a waiter that has
//! starved queues a ticket, and the next release pops its slot back off the
//! free list and hands it over, while other threads barge and listen.
//!
//! Loom models no time, so a waiter starves by the first-park rule (see
//! `Starve` in `src/engine/wait/`): once it has parked as a listener and woken
//! without a slot. A waiter starves in a model when the slot its wake-up
//! announced was taken by a barging thread first. loom reports a deadlock
//! if a ticket or a listener is left parked with nobody to wake it; value
//! cells report a slot held twice; each model ends with the exact drain.

#![cfg(loom)]

use std::sync::Arc;

use loom::future::block_on;
use loom::thread;
use tagpool::Pool;
use tagpool_loom_tests::{check, drain};

/// Takes the slot if it is free, bumps its value and gives it back: a
/// thread that barges in on whoever waits. Returns whether it got it.
fn barge(pool: &Pool<usize>) -> bool {
    match pool.try_acquire() {
        Ok(mut slot) => {
            *slot += 1;
            true
        }
        Err(_) => false,
    }
}

/// One slot: the main thread holds it, releases it and barges in twice,
/// while one waiter waits. When the waiter's wake-up finds the slot taken
/// again, it starves and queues a ticket; the main thread's next release
/// must hand the slot to it (a release that missed the ticket would leave
/// it parked: a deadlock), and only to it (the value cell). `run.sh`
/// proves this model fails when the starving count is taken after the
/// flag CAS that queues the ticket (`tagpool_loom_starving_late`): a
/// release that reads the flag from that CAS then sees no ticket and
/// clears the flag.
#[test]
fn starving_waiter_is_served_while_another_barges() {
    check("starving_waiter_is_served_while_another_barges", 3, || {
        let pool = Arc::new(Pool::new(1, || 0usize));
        let held = pool.acquire().unwrap();
        let waiter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || *pool.acquire().unwrap() += 1)
        };
        // Until the waiter waits (counted before it registers),
        // without spending a preemption on it.
        while pool.stats().waits == 0 {
            thread::yield_now();
        }
        drop(held);
        let barged = (0..2).filter(|_| barge(&pool)).count();
        waiter.join().unwrap();
        assert_eq!(*pool.try_acquire().unwrap(), 1 + barged);
        let stats = pool.stats();
        assert_eq!((stats.waiting_threads, stats.in_use), (0, 0));
        assert!(stats.handoffs <= 1);
        drain(&pool);
    });
}

/// One slot, two waiters: one starves (its wake-up found the slot taken by
/// the barging main thread) while the other still listens. (No wait for
/// the waiters to register: the free order keeps the model at 20 s.) The hand-off
/// to the ticket notifies nobody, so the waiter flag must stay set for the
/// listener: the starving waiter's own release then wakes it. `run.sh`
/// proves this model fails when the ticket queue of a barging pool clears
/// the flag as a fair pool's does once it is empty
/// (`tagpool_loom_ticket_clears_flag`): the listener is never woken.
#[test]
fn hand_off_keeps_a_listeners_flag() {
    check("hand_off_keeps_a_listeners_flag", 2, || {
        let pool = Arc::new(Pool::new(1, || 0usize));
        let held = pool.acquire().unwrap();
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || *pool.acquire().unwrap() += 1)
            })
            .collect();
        drop(held);
        let barged = usize::from(barge(&pool));
        for waiter in waiters {
            waiter.join().unwrap();
        }
        assert_eq!(*pool.try_acquire().unwrap(), 2 + barged);
        drain(&pool);
    });
}

/// One slot, one task waiting in `acquire_async` (loom's `block_on`: a
/// task never woken is a deadlock): the main thread releases the slot and
/// barges in twice. A task that finds no slot queues a ticket with its
/// waker at once, counted as starving; a release must hand the slot to it
/// and wake it, or find the slot taken by a barging acquire whose release
/// comes later. `run.sh` proves this model fails with the starving count
/// taken after the flag CAS (`tagpool_loom_starving_late`), as the
/// blocked waiter's model does.
#[test]
fn waiting_task_is_served_while_another_barges() {
    check("waiting_task_is_served_while_another_barges", 3, || {
        let pool = Arc::new(Pool::new(1, || 0usize));
        let held = pool.acquire().unwrap();
        let task = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || block_on(async { *pool.acquire_async().await.unwrap() += 1 }))
        };
        // Until the task waits (counted before it registers).
        while pool.stats().waiting_tasks == 0 {
            thread::yield_now();
        }
        drop(held);
        let barged = (0..2).filter(|_| barge(&pool)).count();
        task.join().unwrap();
        assert_eq!(*pool.try_acquire().unwrap(), 1 + barged);
        let stats = pool.stats();
        assert_eq!((stats.waiting_tasks, stats.in_use), (0, 0));
        assert!(stats.handoffs <= 1);
        drain(&pool);
    });
}

/// One slot, two tasks queued for it: each release hands the slot to the
/// first queued ticket, straight from the releasing thread, and takes that
/// ticket out of the queue. `run.sh` proves this model fails when the
/// direct hand-off leaves the served ticket queued
/// (`tagpool_loom_fair_keep_ticket`): the second release then serves the
/// first task's ticket again, and the second task is never woken.
/// Preemption bound 1: the spin until both tickets are queued makes bound
/// 2 explore 1.5 million interleavings (94 s); the fault fails at once.
#[test]
fn queued_tasks_are_each_handed_the_slot_once() {
    check("queued_tasks_are_each_handed_the_slot_once", 1, || {
        let pool = Arc::new(Pool::new(1, || 0usize));
        let held = pool.acquire().unwrap();
        let tasks: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || block_on(async { *pool.acquire_async().await.unwrap() += 1 }))
            })
            .collect();
        // Until both tasks are queued, without spending preemptions.
        while pool.stats().queued_waiters < 2 {
            thread::yield_now();
        }
        drop(held);
        for task in tasks {
            task.join().unwrap();
        }
        assert_eq!(*pool.try_acquire().unwrap(), 2);
        assert_eq!(pool.stats().handoffs, 2);
        drain(&pool);
    });
}
