//! The starvation bound of barging pools: a blocked thread that has waited
//! past the bound queues for a hand-off, and the next release gives it the
//! slot ahead of any thread that barges in.
//!
//! No test depends on timing luck. Each one holds the slot until the pool
//! reports the waiter queued (`Stats::queued_waiters`, which only waiting
//! past the bound can raise), however long that takes, and then asserts
//! what the protocol guarantees from that point on: the next release hands
//! the slot over.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use tagpool::{AcquireTimeoutError, Pool};

mod support;
use support::{watchdog, WAITING};

/// Polls `pool` until `n` waiters are queued for a hand-off. A waiter
/// queues only after waiting past the bound (a fraction of a millisecond),
/// so this takes as long as that, or as the machine needs; the watchdog
/// turns a waiter that never queues into a failure.
fn until_queued<T>(pool: &Pool<T>, n: usize) {
    while pool.stats().queued_waiters < n {
        thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn a_starved_waiter_is_handed_the_next_release() {
    let _watchdog = watchdog("a_starved_waiter_is_handed_the_next_release", WAITING);
    let pool = Pool::new(1, || 0u32);
    let held = pool.acquire().unwrap();
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            let mut slot = pool.acquire().unwrap();
            *slot += 1;
            slot
        });
        until_queued(&pool, 1);
        // The release pops its slot back off the free list and hands it
        // to the queued waiter before it returns: this thread, barging in
        // at once, finds nothing.
        drop(held);
        assert!(pool.try_acquire().is_err(), "the release was handed over");
        assert_eq!(*waiter.join().unwrap(), 1);
    });
    let stats = pool.stats();
    assert_eq!(stats.handoffs, 1);
    assert_eq!((stats.queued_waiters, stats.waiting_threads), (0, 0));
    assert_eq!((stats.in_use, stats.available), (0, 1));
    assert_eq!(stats.peak_in_use, 1);
}

#[test]
fn a_starved_waiter_goes_ahead_of_a_thread_that_loops_acquire_and_release() {
    let _watchdog = watchdog(
        "a_starved_waiter_goes_ahead_of_a_thread_that_loops_acquire_and_release",
        WAITING,
    );
    let pool = Pool::new(1, || 0usize);
    let stop = AtomicBool::new(false);
    let barged = AtomicUsize::new(0);
    let held = pool.acquire().unwrap();
    thread::scope(|s| {
        // Ends the barging thread's loop however this closure ends (a
        // failed assertion too: the scope waits for its threads).
        let _stop = StopOnDrop(&stop);
        // Every holder but the starved waiter counts itself in the value.
        let waiter = s.spawn(|| *pool.acquire().unwrap());
        until_queued(&pool, 1);
        let barger = s.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                let mut slot = pool.acquire().unwrap();
                *slot += 1;
                barged.fetch_add(1, Ordering::Relaxed);
            }
        });
        // The release hands the slot to the waiter queued first. A thread
        // that pops between the release's push and its hand-off takes it
        // first (the protocol allows that one pop, see `engine/wait`), and
        // its own release then hands the slot over: the barging thread
        // goes first at most once, however it loops.
        drop(held);
        let before = waiter.join().unwrap();
        assert!(before <= 1, "the barging thread went first {before} times");
        // The barging thread gets the slot afterwards, and keeps going.
        while barged.load(Ordering::Relaxed) < 100 {
            thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
        barger.join().unwrap();
    });
    let stats = pool.stats();
    assert!(stats.handoffs >= 1);
    assert_eq!(*pool.try_acquire().unwrap(), barged.load(Ordering::Relaxed));
    assert_eq!((stats.queued_waiters, stats.waiting_threads), (0, 0));
}

#[test]
fn starved_waiters_are_served_in_the_order_they_queued() {
    let _watchdog = watchdog(
        "starved_waiters_are_served_in_the_order_they_queued",
        WAITING,
    );
    let pool = Pool::new(1, || 0usize);
    let held = pool.acquire().unwrap();
    thread::scope(|s| {
        // Each waiter sees how many went before it, and keeps the slot
        // until the next one is queued behind it.
        let waiters: Vec<_> = (0..3)
            .map(|i| {
                let waiter = s.spawn(|| {
                    let mut slot = pool.acquire().unwrap();
                    let before = *slot;
                    *slot += 1;
                    before
                });
                until_queued(&pool, i + 1);
                waiter
            })
            .collect();
        drop(held);
        let order: Vec<usize> = waiters.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(order, [0, 1, 2]);
    });
    let stats = pool.stats();
    assert_eq!(stats.handoffs, 3);
    assert_eq!((stats.in_use, stats.queued_waiters), (0, 0));
}

#[test]
fn a_starved_waiter_that_times_out_leaves_nothing_behind() {
    let _watchdog = watchdog(
        "a_starved_waiter_that_times_out_leaves_nothing_behind",
        WAITING,
    );
    let pool = Pool::new(1, || ());
    let held = pool.acquire().unwrap();
    let queued = AtomicBool::new(false);
    // The timeout is far beyond the bound (a fraction of a millisecond), so
    // the waiter queues first; on a machine too loaded for this thread to
    // see it queued in time, the round is run again with a longer timeout
    // (the wait must be seen queued, never assumed to be).
    let mut timeout = Duration::from_millis(250);
    let mut rounds = 0u64;
    while !queued.load(Ordering::Relaxed) {
        assert!(timeout < WAITING, "never saw the waiter queued");
        let done = AtomicBool::new(false);
        thread::scope(|s| {
            let waiter = s.spawn(|| {
                let got = pool.acquire_timeout(timeout).err();
                done.store(true, Ordering::Relaxed);
                got
            });
            while !queued.load(Ordering::Relaxed) && !done.load(Ordering::Relaxed) {
                if pool.stats().queued_waiters == 1 {
                    queued.store(true, Ordering::Relaxed);
                }
                thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(waiter.join().unwrap(), Some(AcquireTimeoutError::Timeout));
        });
        rounds += 1;
        timeout *= 4;
    }
    // Seen queued (the poll above ended), then gone.
    let stats = pool.stats();
    assert_eq!((stats.queued_waiters, stats.waiting_threads), (0, 0));
    assert_eq!((stats.timeouts, stats.handoffs), (rounds, 0));
    // No ticket is left to hand the next release to.
    drop(held);
    assert!(pool.try_acquire().is_ok());
}

#[test]
fn close_ends_the_wait_of_a_starved_waiter() {
    let _watchdog = watchdog("close_ends_the_wait_of_a_starved_waiter", WAITING);
    let pool = Pool::new(1, || ());
    let held = pool.acquire().unwrap();
    thread::scope(|s| {
        let waiter = s.spawn(|| pool.acquire().err());
        until_queued(&pool, 1);
        pool.close();
        assert_eq!(waiter.join().unwrap(), Some(tagpool::AcquireError::Closed));
    });
    drop(held);
    let stats = pool.stats();
    assert!(stats.closed);
    assert_eq!(
        (stats.in_use, stats.available, stats.queued_waiters),
        (0, 1, 0)
    );
}

#[test]
fn a_release_into_a_thread_cache_reaches_a_starved_waiter() {
    let _watchdog = watchdog(
        "a_release_into_a_thread_cache_reaches_a_starved_waiter",
        WAITING,
    );
    // Caches on: a release goes to its thread's cache unless someone
    // waits. The starved waiter stays counted, so the releasing thread
    // flushes, and the flush's push hands the slot over.
    let pool = Arc::new(
        Pool::builder(|| 0u32)
            .capacity(8)
            .thread_cache_size(4)
            .build()
            .unwrap(),
    );
    let held: Vec<_> = (0..8).map(|_| pool.acquire_owned().unwrap()).collect();
    let waiter = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || {
            let mut slot = pool.acquire().unwrap();
            *slot += 1;
        })
    };
    until_queued(&pool, 1);
    // Released on a thread of its own: into that thread's cache.
    let mut held = held.into_iter();
    let first = held.next().unwrap();
    thread::spawn(move || drop(first)).join().unwrap();
    waiter.join().unwrap();
    drop(held);
    let stats = pool.stats();
    assert_eq!(stats.handoffs, 1);
    assert_eq!(
        (stats.in_use, stats.available, stats.queued_waiters),
        (0, 8, 0)
    );
}

#[test]
fn a_fair_pool_counts_its_hand_offs_and_queued_waiters() {
    let _watchdog = watchdog(
        "a_fair_pool_counts_its_hand_offs_and_queued_waiters",
        WAITING,
    );
    let pool = Pool::builder(|| ()).capacity(1).fair().build().unwrap();
    let held = pool.acquire().unwrap();
    thread::scope(|s| {
        let waiter = s.spawn(|| drop(pool.acquire().unwrap()));
        // A fair pool queues every waiter at once.
        until_queued(&pool, 1);
        drop(held);
        waiter.join().unwrap();
    });
    let stats = pool.stats();
    assert_eq!((stats.handoffs, stats.queued_waiters), (1, 0));
}

/// Sets its flag when dropped.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Polls `future` once with a waker that counts its wake-ups.
fn poll_once<F: std::future::Future + Unpin>(
    future: &mut F,
    wakes: &Arc<WakeCount>,
) -> std::task::Poll<F::Output> {
    let waker = std::task::Waker::from(Arc::clone(wakes));
    let mut cx = std::task::Context::from_waker(&waker);
    std::pin::Pin::new(future).poll(&mut cx)
}

/// A waker that counts how often it was woken.
#[derive(Default)]
struct WakeCount(AtomicUsize);

impl std::task::Wake for WakeCount {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_waiting_task_is_handed_the_next_release_ahead_of_a_barging_thread() {
    // Deterministic, on one thread: a task that finds the pool empty
    // queues a ticket at once, and the next release hands it the slot,
    // which an acquire arriving after that release cannot take.
    let pool = Pool::new(1, || 0u32);
    let wakes = Arc::new(WakeCount::default());
    let held = pool.acquire().unwrap();
    let mut acquire = pool.acquire_async();
    assert!(poll_once(&mut acquire, &wakes).is_pending());
    assert_eq!(pool.stats().queued_waiters, 1, "the task queued");
    drop(held);
    assert_eq!(
        wakes.0.load(Ordering::SeqCst),
        1,
        "the release wakes the task"
    );
    assert!(pool.try_acquire().is_err(), "the slot was handed over");
    let mut slot = match poll_once(&mut acquire, &wakes) {
        std::task::Poll::Ready(slot) => slot.unwrap(),
        std::task::Poll::Pending => panic!("the handed slot is ready"),
    };
    *slot += 1;
    let stats = pool.stats();
    assert_eq!(
        (stats.handoffs, stats.queued_waiters, stats.waiting_tasks),
        (1, 0, 0)
    );
    drop(slot);
    assert_eq!(*pool.try_acquire().unwrap(), 1);
}

#[test]
fn a_waiting_task_polled_again_keeps_its_place_and_its_new_waker() {
    let pool = Pool::new(1, || 0u32);
    let (first, second) = (
        Arc::new(WakeCount::default()),
        Arc::new(WakeCount::default()),
    );
    let held = pool.acquire().unwrap();
    let mut acquire = pool.acquire_async();
    assert!(poll_once(&mut acquire, &first).is_pending());
    // Polled again with another waker (a task that moved): the ticket
    // stays queued once, and the release wakes the new waker.
    assert!(poll_once(&mut acquire, &second).is_pending());
    assert_eq!(pool.stats().queued_waiters, 1);
    drop(held);
    assert_eq!(first.0.load(Ordering::SeqCst), 0);
    assert_eq!(second.0.load(Ordering::SeqCst), 1);
    assert!(poll_once(&mut acquire, &second).is_ready());
}

#[test]
fn a_waiting_task_dropped_after_its_hand_off_gives_the_slot_back() {
    let pool = Pool::new(1, || 0u32);
    let wakes = Arc::new(WakeCount::default());
    let held = pool.acquire().unwrap();
    let mut acquire = pool.acquire_async();
    assert!(poll_once(&mut acquire, &wakes).is_pending());
    drop(held); // handed to the task's ticket
    assert!(pool.try_acquire().is_err());
    drop(acquire); // cancelled: the handed slot goes back
    let stats = pool.stats();
    assert_eq!(
        (stats.in_use, stats.queued_waiters, stats.waiting_tasks),
        (0, 0, 0)
    );
    assert_eq!(stats.cancelled_waits, 1);
    assert!(pool.try_acquire().is_ok());
}
