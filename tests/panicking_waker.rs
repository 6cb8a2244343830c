//! A task's `Waker` that panics when a release, a close or a cancel wakes
//! it: the panic reaches the thread that woke it, and nothing else
//! happens to the pool. It keeps working, `drop(pool)` returns, and every
//! value is dropped exactly once. Barging and fair pools, with and without
//! per-thread caches, borrowed and owned guards.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Poll, Wake, Waker};
use std::time::Duration;

use tagpool::{AcquireError, IndexPool, Pool};

mod support;
use support::executor::{counting, poll_once};
use support::{watchdog, WAITING};

/// Large enough for per-thread caches under the default sizing rule.
const CAPACITY: usize = 64;

/// How long a `drop(pool)` may take before the test aborts: it takes
/// microseconds; one that spins on a stranded tail never returns.
const DROP_LIMIT: Duration = WAITING;

/// A waker whose `wake` panics.
struct Panicking;

impl Wake for Panicking {
    fn wake(self: Arc<Self>) {
        panic!("a waker that panics");
    }
}

fn panicking() -> Waker {
    Waker::from(Arc::new(Panicking))
}

/// A pooled value that counts its drops.
struct Value {
    drops: Arc<AtomicUsize>,
}

impl Drop for Value {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Values made and dropped.
#[derive(Clone, Default)]
struct Counts {
    made: Arc<AtomicUsize>,
    drops: Arc<AtomicUsize>,
}

impl Counts {
    fn assert_all_dropped_once(&self) {
        let made = self.made.load(Ordering::SeqCst);
        assert!(made >= CAPACITY);
        assert_eq!(
            self.drops.load(Ordering::SeqCst),
            made,
            "every value made is dropped exactly once"
        );
    }
}

#[derive(Clone, Copy, Debug)]
struct Kind {
    cached: bool,
    fair: bool,
}

const BARGING_CACHED: Kind = Kind {
    cached: true,
    fair: false,
};
const BARGING_UNCACHED: Kind = Kind {
    cached: false,
    fair: false,
};
const FAIR: Kind = Kind {
    cached: false,
    fair: true,
};

fn build(kind: Kind, counts: &Counts) -> Arc<Pool<Value>> {
    let made = Arc::clone(&counts.made);
    let drops = Arc::clone(&counts.drops);
    let builder = Pool::builder(move || {
        made.fetch_add(1, Ordering::SeqCst);
        Value {
            drops: Arc::clone(&drops),
        }
    })
    .capacity(CAPACITY)
    .thread_cache(kind.cached);
    let builder = if kind.fair { builder.fair() } else { builder };
    let pool = builder.build().unwrap();
    let debug = format!("{pool:?}");
    assert_eq!(
        !debug.contains("thread_cache: 0"),
        kind.cached,
        "{kind:?}: {debug}"
    );
    Arc::new(pool)
}

/// Drops `pool`, the last handle, under a watchdog.
fn drop_pool(pool: Arc<Pool<Value>>, kind: Kind) {
    assert_eq!(Arc::strong_count(&pool), 1);
    let _watchdog = watchdog(format!("drop(pool) of a {kind:?} pool"), DROP_LIMIT);
    drop(pool);
}

/// Runs `release` and checks that it panicked with the waker's panic.
fn assert_waker_panic(what: &str, release: impl FnOnce()) {
    let caught = panic::catch_unwind(AssertUnwindSafe(release));
    let payload = caught.expect_err("the waker's panic reaches the thread that woke it");
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("a waker that panics"),
        "{what}"
    );
}

/// A borrowed guard's release wakes a task whose waker panics.
fn borrowed_release(kind: Kind) {
    let counts = Counts::default();
    let pool = build(kind, &counts);
    {
        let mut held: Vec<_> = std::iter::from_fn(|| pool.try_acquire().ok()).collect();
        assert_eq!(held.len(), CAPACITY);
        let mut waiting = pool.acquire_async();
        assert!(poll_once(&mut waiting, &panicking()).is_pending());
        let released = held.pop().unwrap();
        assert_waker_panic("borrowed release", move || drop(released));

        // The released slot went to the waiting task all the same.
        let (wakes, waker) = counting();
        match poll_once(&mut waiting, &waker) {
            Poll::Ready(Ok(guard)) => held.push(guard),
            other => panic!(
                "{kind:?}: the woken task has no slot: {:?}",
                other.is_ready()
            ),
        }
        drop(waiting);

        // The pool keeps working: wake-ups, cancels.
        let mut next = pool.acquire_async();
        assert!(poll_once(&mut next, &waker).is_pending());
        let mut cancelled = pool.acquire_async();
        assert!(poll_once(&mut cancelled, &waker).is_pending());
        drop(cancelled);
        drop(held.pop());
        assert!(
            wakes.wakes() >= 1,
            "{kind:?}: a release wakes the next task"
        );
        match poll_once(&mut next, &waker) {
            Poll::Ready(Ok(guard)) => held.push(guard),
            other => panic!(
                "{kind:?}: the next task has no slot: {:?}",
                other.is_ready()
            ),
        }
        drop(held);
        assert_eq!(pool.stats().in_use, 0);
        assert!(pool.try_acquire().is_ok());
    }
    drop_pool(pool, kind);
    counts.assert_all_dropped_once();
}

/// An owned guard's release wakes a task whose waker panics; the pool's
/// handle goes first, its last owned guard frees it.
fn owned_release(kind: Kind) {
    let counts = Counts::default();
    let pool = build(kind, &counts);
    let mut held: Vec<_> = std::iter::from_fn(|| pool.try_acquire_owned().ok()).collect();
    assert_eq!(held.len(), CAPACITY);
    let mut waiting = pool.acquire_owned_async();
    assert!(poll_once(&mut waiting, &panicking()).is_pending());
    let released = held.pop().unwrap();
    assert_waker_panic("owned release", move || drop(released));

    let (wakes, waker) = counting();
    match poll_once(&mut waiting, &waker) {
        Poll::Ready(Ok(guard)) => held.push(guard),
        other => panic!(
            "{kind:?}: the woken task has no slot: {:?}",
            other.is_ready()
        ),
    }
    drop(waiting);

    let mut next = pool.acquire_owned_async();
    assert!(poll_once(&mut next, &waker).is_pending());
    let mut cancelled = pool.acquire_owned_async();
    assert!(poll_once(&mut cancelled, &waker).is_pending());
    drop(cancelled);
    drop(held.pop());
    assert!(
        wakes.wakes() >= 1,
        "{kind:?}: a release wakes the next task"
    );
    match poll_once(&mut next, &waker) {
        Poll::Ready(Ok(guard)) => held.push(guard),
        other => panic!(
            "{kind:?}: the next task has no slot: {:?}",
            other.is_ready()
        ),
    }
    drop(next);

    // A second panicking wake, then the handle goes while guards are out:
    // the pool's drop must not wait for a tail that never ends.
    let mut waiting = pool.acquire_owned_async();
    assert!(poll_once(&mut waiting, &panicking()).is_pending());
    let released = held.pop().unwrap();
    assert_waker_panic("owned release", move || drop(released));
    match poll_once(&mut waiting, &waker) {
        Poll::Ready(Ok(guard)) => held.push(guard),
        other => panic!(
            "{kind:?}: the woken task has no slot: {:?}",
            other.is_ready()
        ),
    }
    drop(waiting);
    drop_pool(pool, kind);
    assert_eq!(
        counts.drops.load(Ordering::SeqCst),
        0,
        "the guards hold them"
    );
    // The last guard frees the pool: every value is dropped.
    drop(held);
    counts.assert_all_dropped_once();
}

/// A close wakes every waiting task, the one after a panicking waker too.
fn close(kind: Kind) {
    let counts = Counts::default();
    let pool = build(kind, &counts);
    {
        let held: Vec<_> = std::iter::from_fn(|| pool.try_acquire().ok()).collect();
        assert_eq!(held.len(), CAPACITY);
        let mut first = pool.acquire_async();
        assert!(poll_once(&mut first, &panicking()).is_pending());
        let (wakes, waker) = counting();
        let mut second = pool.acquire_async();
        assert!(poll_once(&mut second, &waker).is_pending());
        assert_waker_panic("close", || {
            pool.close();
        });
        assert_eq!(wakes.wakes(), 1, "{kind:?}: the close woke the second task");
        assert!(matches!(
            poll_once(&mut second, &waker),
            Poll::Ready(Err(AcquireError::Closed))
        ));
        assert!(matches!(
            poll_once(&mut first, &waker),
            Poll::Ready(Err(AcquireError::Closed))
        ));
        drop(held);
        assert_eq!(pool.stats().in_use, 0);
    }
    drop_pool(pool, kind);
    counts.assert_all_dropped_once();
}

/// A cancelled task that was notified passes its notification on to the
/// next, whose waker panics: the panic reaches the future's drop, and the
/// slot still reaches the next task.
fn cancel(kind: Kind) {
    let counts = Counts::default();
    let pool = build(kind, &counts);
    {
        let mut held: Vec<_> = std::iter::from_fn(|| pool.try_acquire().ok()).collect();
        let (wakes, waker) = counting();
        let mut first = pool.acquire_async();
        assert!(poll_once(&mut first, &waker).is_pending());
        let mut second = pool.acquire_async();
        assert!(poll_once(&mut second, &panicking()).is_pending());
        drop(held.pop());
        assert_eq!(
            wakes.wakes(),
            1,
            "{kind:?}: the release woke the first task"
        );
        assert_waker_panic("cancel", move || drop(first));
        match poll_once(&mut second, &waker) {
            Poll::Ready(Ok(guard)) => held.push(guard),
            other => panic!(
                "{kind:?}: the second task has no slot: {:?}",
                other.is_ready()
            ),
        }
        drop(second);
        drop(held);
        assert_eq!(pool.stats().in_use, 0);
    }
    drop_pool(pool, kind);
    counts.assert_all_dropped_once();
}

/// A scope's batch return wakes a task whose waker panics.
fn scope(kind: Kind) {
    let counts = Counts::default();
    let pool = build(kind, &counts);
    {
        let scope = pool.scope();
        for _ in 0..2 {
            scope.try_acquire().unwrap();
        }
        let held: Vec<_> = std::iter::from_fn(|| pool.try_acquire().ok()).collect();
        assert_eq!(held.len(), CAPACITY - 2);
        let mut waiting = pool.acquire_async();
        assert!(poll_once(&mut waiting, &panicking()).is_pending());
        assert_waker_panic("scope", move || drop(scope));
        let (_, waker) = counting();
        match poll_once(&mut waiting, &waker) {
            Poll::Ready(Ok(guard)) => drop(guard),
            other => panic!(
                "{kind:?}: the woken task has no slot: {:?}",
                other.is_ready()
            ),
        }
        drop(waiting);
        drop(held);
        assert_eq!(pool.stats().in_use, 0);
    }
    drop_pool(pool, kind);
    counts.assert_all_dropped_once();
}

/// An index pool's owned guard wakes a task whose waker panics; the
/// handle goes first, the last guard frees the pool.
fn owned_index_release(kind: Kind) {
    let builder = IndexPool::builder()
        .capacity(CAPACITY)
        .thread_cache(kind.cached);
    let builder = if kind.fair { builder.fair() } else { builder };
    let pool = Arc::new(builder.build().unwrap());
    let mut held: Vec<_> = std::iter::from_fn(|| pool.try_acquire_owned().ok()).collect();
    assert_eq!(held.len(), CAPACITY);
    let mut waiting = pool.acquire_owned_async();
    assert!(poll_once(&mut waiting, &panicking()).is_pending());
    let released = held.pop().unwrap();
    assert_waker_panic("owned index release", move || drop(released));
    let (_, waker) = counting();
    match poll_once(&mut waiting, &waker) {
        Poll::Ready(Ok(guard)) => held.push(guard),
        other => panic!(
            "{kind:?}: the woken task has no index: {:?}",
            other.is_ready()
        ),
    }
    drop(waiting);
    assert_eq!(pool.stats().in_use, CAPACITY);
    {
        let _watchdog = watchdog(format!("drop(index pool) of a {kind:?} pool"), DROP_LIMIT);
        drop(pool);
    }
    drop(held);
}

#[test]
fn owned_index_release_survives_a_panicking_waker_barging_cached() {
    owned_index_release(BARGING_CACHED);
}

#[test]
fn owned_index_release_survives_a_panicking_waker_barging_uncached() {
    owned_index_release(BARGING_UNCACHED);
}

#[test]
fn owned_index_release_survives_a_panicking_waker_fair() {
    owned_index_release(FAIR);
}

#[test]
fn scope_survives_a_panicking_waker_barging_cached() {
    scope(BARGING_CACHED);
}

#[test]
fn scope_survives_a_panicking_waker_barging_uncached() {
    scope(BARGING_UNCACHED);
}

#[test]
fn scope_survives_a_panicking_waker_fair() {
    scope(FAIR);
}

#[test]
fn borrowed_release_survives_a_panicking_waker_barging_cached() {
    borrowed_release(BARGING_CACHED);
}

#[test]
fn borrowed_release_survives_a_panicking_waker_barging_uncached() {
    borrowed_release(BARGING_UNCACHED);
}

#[test]
fn borrowed_release_survives_a_panicking_waker_fair() {
    borrowed_release(FAIR);
}

#[test]
fn owned_release_survives_a_panicking_waker_barging_cached() {
    owned_release(BARGING_CACHED);
}

#[test]
fn owned_release_survives_a_panicking_waker_barging_uncached() {
    owned_release(BARGING_UNCACHED);
}

#[test]
fn owned_release_survives_a_panicking_waker_fair() {
    owned_release(FAIR);
}

#[test]
fn close_wakes_every_task_past_a_panicking_waker_barging_cached() {
    close(BARGING_CACHED);
}

#[test]
fn close_wakes_every_task_past_a_panicking_waker_barging_uncached() {
    close(BARGING_UNCACHED);
}

#[test]
fn close_wakes_every_task_past_a_panicking_waker_fair() {
    close(FAIR);
}

#[test]
fn cancel_passes_a_notification_on_to_a_panicking_waker_barging_cached() {
    cancel(BARGING_CACHED);
}

#[test]
fn cancel_passes_a_notification_on_to_a_panicking_waker_barging_uncached() {
    cancel(BARGING_UNCACHED);
}

#[test]
fn cancel_hands_a_slot_on_to_a_panicking_waker_fair() {
    cancel(FAIR);
}

/// A guard dropped by its holder's panic wakes a task whose waker panics:
/// the holder's panic goes on, the waker's is dropped. Before Rust 1.71 a
/// panic raised during an unwind aborts even inside `catch_unwind`, so the
/// MSRV job (`--cfg tagpool_msrv`, see `.ci/run`) skips these.
fn unwinding_release(kind: Kind) {
    let counts = Counts::default();
    let pool = build(kind, &counts);
    let mut held: Vec<_> = std::iter::from_fn(|| pool.try_acquire_owned().ok()).collect();
    let mut waiting = pool.acquire_owned_async();
    assert!(poll_once(&mut waiting, &panicking()).is_pending());
    let released = held.pop().unwrap();
    let caught = panic::catch_unwind(AssertUnwindSafe(move || {
        let _guard = released;
        panic!("the holder panics");
    }));
    let payload = caught.expect_err("the holder's panic goes on");
    assert_eq!(
        payload.downcast_ref::<&str>().copied(),
        Some("the holder panics")
    );
    let (_, waker) = counting();
    match poll_once(&mut waiting, &waker) {
        Poll::Ready(Ok(guard)) => held.push(guard),
        other => panic!(
            "{kind:?}: the woken task has no slot: {:?}",
            other.is_ready()
        ),
    }
    drop(waiting);
    drop_pool(pool, kind);
    drop(held);
    counts.assert_all_dropped_once();
}

#[test]
#[cfg_attr(
    tagpool_msrv,
    ignore = "a panic during an unwind aborts before Rust 1.71"
)]
fn a_release_during_an_unwind_survives_a_panicking_waker_barging_cached() {
    unwinding_release(BARGING_CACHED);
}

#[test]
#[cfg_attr(
    tagpool_msrv,
    ignore = "a panic during an unwind aborts before Rust 1.71"
)]
fn a_release_during_an_unwind_survives_a_panicking_waker_barging_uncached() {
    unwinding_release(BARGING_UNCACHED);
}

#[test]
#[cfg_attr(
    tagpool_msrv,
    ignore = "a panic during an unwind aborts before Rust 1.71"
)]
fn a_release_during_an_unwind_survives_a_panicking_waker_fair() {
    unwinding_release(FAIR);
}

/// A waker whose last drop panics.
struct PanicsOnDrop;

impl Wake for PanicsOnDrop {
    fn wake(self: Arc<Self>) {}
}

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("a waker whose drop panics");
        }
    }
}

/// A task polled again with another waker: the pool drops the one it held,
/// whose drop panics. The poll goes on, and the new waker is woken.
fn replaced_waker(kind: Kind) {
    let counts = Counts::default();
    let pool = build(kind, &counts);
    {
        let mut held: Vec<_> = std::iter::from_fn(|| pool.try_acquire().ok()).collect();
        let mut waiting = pool.acquire_async();
        // The pool holds the only clones left of this waker.
        assert!(poll_once(&mut waiting, &Waker::from(Arc::new(PanicsOnDrop))).is_pending());
        let (wakes, waker) = counting();
        assert!(poll_once(&mut waiting, &waker).is_pending());
        drop(held.pop());
        assert_eq!(wakes.wakes(), 1, "{kind:?}: the new waker is woken");
        match poll_once(&mut waiting, &waker) {
            Poll::Ready(Ok(guard)) => held.push(guard),
            other => panic!(
                "{kind:?}: the woken task has no slot: {:?}",
                other.is_ready()
            ),
        }
        drop(waiting);
        drop(held);
        assert_eq!(pool.stats().in_use, 0);
    }
    drop_pool(pool, kind);
    counts.assert_all_dropped_once();
}

#[test]
fn a_replaced_waker_whose_drop_panics_barging_cached() {
    replaced_waker(BARGING_CACHED);
}

#[test]
fn a_replaced_waker_whose_drop_panics_barging_uncached() {
    replaced_waker(BARGING_UNCACHED);
}

#[test]
fn a_replaced_waker_whose_drop_panics_fair() {
    replaced_waker(FAIR);
}
