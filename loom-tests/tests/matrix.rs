//! The waiting protocol's matrix: every kind of pool (barging or fair,
//! per-thread caches off or on, storage plain or elastic) with every kind
//! of waiter (a blocked thread, an async task), in the three races where
//! the protocols meet:
//!
//! - `release`: a release races the waiter's registration;
//! - `cached`: the only free slot sits in another thread's cache while
//!   that thread is inside an operation and a third thread's sweep claims
//!   its magazine (the reproduction of issue 35's hang); caches only;
//! - `cancel`: a waiter gives up (a task's future dropped after one poll;
//!   a thread's `acquire_timeout(0)`, which under loom queues or listens
//!   and then gives up at once) while a release hands it the slot, and a
//!   second waiter must get it.
//!
//! Fair pools have no caches (a build error), so their `cached` cells do
//! not exist. Each model ends with the exact drain; loom reports a waiter
//! left waiting as a deadlock, and a slot held twice as a concurrent
//! access to its value. `run.sh` shows, for each cell that a planted fault
//! can break, the fault caught (see the table in `run.sh`).
//!
//! Tasks run on `loom::future::block_on`, whose waker is loom's: a task
//! whose wake-up is lost parks for good, which loom reports.

#![cfg(loom)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use loom::future::block_on;
use loom::thread;
use tagpool::{Pool, PoolGuard};
use tagpool_loom_tests::{check, drain};

/// One cell's pool and waiter.
#[derive(Clone, Copy, Debug)]
struct Cell {
    fair: bool,
    cached: bool,
    elastic: bool,
    task: bool,
}

impl Cell {
    fn name(self, race: &str) -> String {
        format!(
            "{race}/{}/{}/{}/{}",
            if self.fair { "fair" } else { "barging" },
            if self.cached { "cached" } else { "uncached" },
            if self.elastic { "elastic" } else { "plain" },
            if self.task { "task" } else { "thread" },
        )
    }

    /// A pool of `capacity` slots; elastic ones start with one slot and
    /// grow, so the model's acquires race a growth too.
    fn pool(self, capacity: usize) -> Arc<Pool<usize>> {
        let builder = Pool::builder(|| 0usize).capacity(capacity);
        let builder = if self.elastic {
            builder.initial(1)
        } else {
            builder
        };
        let builder = if self.cached {
            builder.thread_cache_size(capacity)
        } else {
            builder.thread_cache(false)
        };
        let builder = if self.fair { builder.fair() } else { builder };
        Arc::new(builder.build().expect("a valid pool"))
    }

    /// The smallest pool of the cell: one slot, or two for an elastic one
    /// (one grown, and one that only a growth makes).
    fn capacity(self) -> usize {
        if self.elastic {
            2
        } else {
            1
        }
    }

    /// Waits for a slot, the cell's way, and bumps its value.
    fn wait(self, pool: &Pool<usize>) {
        if self.task {
            block_on(async { *pool.acquire_async().await.unwrap() += 1 });
        } else {
            *pool.acquire().unwrap() += 1;
        }
    }

    /// Waits for a slot and gives up at once (see the module docs); bumps
    /// the value of a slot it got anyway.
    fn give_up(self, pool: &Pool<usize>) {
        if self.task {
            let mut acquire = pool.acquire_async();
            let mut cx = Context::from_waker(Waker::noop());
            if let Poll::Ready(got) = Pin::new(&mut acquire).poll(&mut cx) {
                *got.unwrap() += 1;
            }
            drop(acquire);
        } else if let Ok(mut got) = pool.acquire_timeout(Duration::ZERO) {
            *got += 1;
        }
    }
}

/// Holds every slot of `pool` (growing an elastic one).
fn hold_all(pool: &Pool<usize>) -> Vec<PoolGuard<'_, usize>> {
    (0..pool.capacity())
        .map(|_| pool.try_acquire().expect("nobody else holds a slot"))
        .collect()
}

fn spawn(
    pool: &Arc<Pool<usize>>,
    work: impl FnOnce(&Pool<usize>) + Send + 'static,
) -> thread::JoinHandle<()> {
    let pool = Arc::clone(pool);
    thread::spawn(move || work(&pool))
}

/// The race `release`: every slot held, one waiter, one release that
/// races its registration. The waiter gets the slot, whatever the order.
fn release_races_registration(cell: Cell) {
    check(&cell.name("release"), 2, move || {
        let pool = cell.pool(cell.capacity());
        let mut held = hold_all(&pool);
        let waiter = spawn(&pool, move |p| cell.wait(p));
        drop(held.pop());
        waiter.join().unwrap();
        drop(held);
        let stats = pool.stats();
        assert_eq!((stats.waiting_threads, stats.waiting_tasks), (0, 0));
        drain(&pool);
    });
}

/// The race `cached`: the main thread, the owner, parks both slots of a
/// pool of two in its cache (before the race), then takes one back with
/// its fast acquire and keeps it, while another thread's `try_acquire`
/// sweeps the caches (it may claim the owner's magazine, see it busy and
/// leave it) and a waiter waits: the waiter must get the other slot, by
/// its own sweep (which takes over a claim it finds) or by the owner's
/// flush once it sees the waiter. Nothing else would wake the waiter: the
/// owner keeps its guard until the waiter is done.
fn cached_slot_found_by_waiter(cell: Cell) {
    assert!(cell.cached);
    check(&cell.name("cached"), 2, move || {
        let pool = cell.pool(2);
        drop(hold_all(&pool));
        assert_eq!(pool.stats().cached, 2, "both slots are parked here");
        let revoker = spawn(&pool, |p| {
            if let Ok(mut got) = p.try_acquire() {
                *got += 1;
            }
        });
        let waiter = spawn(&pool, move |p| cell.wait(p));
        // May fail while a sweep moves its stack.
        let kept = pool.try_acquire().ok().map(|mut g| {
            *g += 1;
            g
        });
        // Kept until the waiter is done (a join, so that loom sees a
        // waiter left waiting as a deadlock at once).
        waiter.join().unwrap();
        drop(kept);
        revoker.join().unwrap();
        let stats = pool.stats();
        assert_eq!((stats.waiting_threads, stats.waiting_tasks), (0, 0));
        drain(&pool);
    });
}

/// The race `cancel`: every slot held, a waiter that gives up, a second
/// waiter, and one release that may be handed to the first as it gives
/// up: the slot goes on to the second (or the first keeps it and gives it
/// back), never lost, never held twice.
fn cancel_races_hand_off(cell: Cell) {
    check(&cell.name("cancel"), 2, move || {
        let pool = cell.pool(cell.capacity());
        let mut held = hold_all(&pool);
        let quitter = spawn(&pool, move |p| cell.give_up(p));
        let waiter = spawn(&pool, move |p| cell.wait(p));
        drop(held.pop());
        quitter.join().unwrap();
        waiter.join().unwrap();
        drop(held);
        let stats = pool.stats();
        assert_eq!(
            (stats.in_use, stats.waiting_threads, stats.waiting_tasks),
            (0, 0, 0)
        );
        drain(&pool);
    });
}

macro_rules! cell_tests {
    ($($name:ident: $race:ident, $fair:literal, $cached:literal, $elastic:literal, $task:literal;)*) => {
        $(
            #[test]
            fn $name() {
                $race(Cell { fair: $fair, cached: $cached, elastic: $elastic, task: $task });
            }
        )*
    };
}

cell_tests! {
    release_barging_uncached_plain_thread: release_races_registration, false, false, false, false;
    release_barging_uncached_plain_task: release_races_registration, false, false, false, true;
    release_barging_uncached_elastic_thread: release_races_registration, false, false, true, false;
    release_barging_uncached_elastic_task: release_races_registration, false, false, true, true;
    release_barging_cached_plain_thread: release_races_registration, false, true, false, false;
    release_barging_cached_plain_task: release_races_registration, false, true, false, true;
    release_barging_cached_elastic_thread: release_races_registration, false, true, true, false;
    release_barging_cached_elastic_task: release_races_registration, false, true, true, true;
    release_fair_plain_thread: release_races_registration, true, false, false, false;
    release_fair_plain_task: release_races_registration, true, false, false, true;
    release_fair_elastic_thread: release_races_registration, true, false, true, false;
    release_fair_elastic_task: release_races_registration, true, false, true, true;

    cached_barging_plain_thread: cached_slot_found_by_waiter, false, true, false, false;
    cached_barging_plain_task: cached_slot_found_by_waiter, false, true, false, true;
    cached_barging_elastic_thread: cached_slot_found_by_waiter, false, true, true, false;
    cached_barging_elastic_task: cached_slot_found_by_waiter, false, true, true, true;

    cancel_barging_uncached_plain_thread: cancel_races_hand_off, false, false, false, false;
    cancel_barging_uncached_plain_task: cancel_races_hand_off, false, false, false, true;
    cancel_barging_uncached_elastic_thread: cancel_races_hand_off, false, false, true, false;
    cancel_barging_uncached_elastic_task: cancel_races_hand_off, false, false, true, true;
    cancel_barging_cached_plain_thread: cancel_races_hand_off, false, true, false, false;
    cancel_barging_cached_plain_task: cancel_races_hand_off, false, true, false, true;
    cancel_barging_cached_elastic_thread: cancel_races_hand_off, false, true, true, false;
    cancel_barging_cached_elastic_task: cancel_races_hand_off, false, true, true, true;
    cancel_fair_plain_thread: cancel_races_hand_off, true, false, false, false;
    cancel_fair_plain_task: cancel_races_hand_off, true, false, false, true;
    cancel_fair_elastic_thread: cancel_races_hand_off, true, false, true, false;
    cancel_fair_elastic_task: cancel_races_hand_off, true, false, true, true;
}
