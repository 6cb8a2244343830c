//! Wakers that panic where protocols meet: a cancelled waiter whose
//! waker's drop panics, and a waker that uses another pool while the
//! operation that woke it keeps an earlier waker's panic. Each of these
//! was a reproduced bug (issue 35): a phantom waiter that made every later
//! release skip the caches, and a caught panic resumed inside another
//! waker or dropped by its acquire.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, RawWaker, RawWakerVTable, Wake, Waker};
use std::time::Duration;

use tagpool::{OwnedPoolGuard, Pool};

mod support;
use support::executor::{counting, poll_once};
use support::{watchdog, WAITING};

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

/// A waker whose `wake` panics.
struct PanicsOnWake;

impl Wake for PanicsOnWake {
    fn wake(self: Arc<Self>) {
        panic!("a waker that panics");
    }
}

fn payload_text(payload: &(dyn std::any::Any + Send)) -> Option<&'static str> {
    payload.downcast_ref::<&str>().copied()
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    BargingCached,
    BargingUncached,
    Fair,
}

const KINDS: [Kind; 3] = [Kind::BargingCached, Kind::BargingUncached, Kind::Fair];

fn build(kind: Kind, capacity: usize) -> Pool<u32> {
    let builder = Pool::builder(|| 0u32).capacity(capacity);
    match kind {
        Kind::BargingCached => builder.thread_cache_size(8),
        Kind::BargingUncached => builder.thread_cache(false),
        Kind::Fair => builder.fair(),
    }
    .build()
    .unwrap()
}

/// Holds every slot, cancels a pending acquire whose ticket holds the only
/// clone of `waker`, then runs ten acquire + release pairs; returns the
/// slots cached at the end, and whether the cancel panicked.
fn cancel_then_pairs(kind: Kind, waker: Waker) -> (usize, Option<&'static str>) {
    let pool = build(kind, 64);
    let held: Vec<_> = std::iter::from_fn(|| pool.try_acquire().ok()).collect();
    let mut waiting = pool.acquire_async();
    assert!(poll_once(&mut waiting, &waker).is_pending());
    // The pool's ticket now holds the only clone.
    drop(waker);
    let cancelled = panic::catch_unwind(AssertUnwindSafe(move || drop(waiting)));
    let panicked = cancelled.err().map(|p| payload_text(&*p).unwrap_or("?"));
    let stats = pool.stats();
    assert_eq!(
        (stats.waiting_tasks, stats.queued_waiters),
        (0, 0),
        "{kind:?}: the cancelled task still counts as waiting: {stats:?}"
    );
    drop(held);
    for _ in 0..10 {
        drop(pool.try_acquire().unwrap());
    }
    (pool.stats().cached, panicked)
}

/// A cancelled waiter whose waker's drop panics ends its wait all the
/// same: the waiting count goes back to 0 (before the fix it stayed 1 for
/// good, and every release then skipped the caches: `cached` 0 where the
/// same steps without the panic leave 8), and the panic goes on from the
/// future's drop once the wait is over.
#[test]
fn a_cancelled_waiter_whose_waker_drop_panics_leaves_no_phantom_waiter() {
    let _watchdog = watchdog("cancels with a waker whose drop panics", WAITING);
    for kind in KINDS {
        let (control, quiet) = cancel_then_pairs(kind, counting().1);
        assert_eq!(quiet, None);
        let (cached, panicked) = cancel_then_pairs(kind, Waker::from(Arc::new(PanicsOnDrop)));
        assert_eq!(
            panicked,
            Some("a waker whose drop panics"),
            "{kind:?}: the drop's panic goes on from the cancel"
        );
        assert_eq!(cached, control, "{kind:?}: releases use the caches again");
        if matches!(kind, Kind::BargingCached) {
            assert!(control > 0, "the pairs leave slots cached");
        }
    }
}

/// A waker that, when woken, releases an owned guard of another pool on
/// which a task waits (so that release wakes someone and looks for a
/// caught panic), then records that it finished.
struct ReleasesAnotherPool {
    guard: Mutex<Option<OwnedPoolGuard<u32>>>,
    finished: AtomicBool,
}

impl Wake for ReleasesAnotherPool {
    fn wake(self: Arc<Self>) {
        drop(self.guard.lock().unwrap().take());
        self.finished.store(true, Ordering::SeqCst);
    }
}

/// A waker that, when woken, tries a zero-timeout acquire of another,
/// exhausted pool (an acquire that waits, and drops the panics of the
/// wakers it woke), then records that it finished.
struct WaitsOnAnotherPool {
    pool: Arc<Pool<u32>>,
    finished: AtomicBool,
}

impl Wake for WaitsOnAnotherPool {
    fn wake(self: Arc<Self>) {
        assert!(self.pool.acquire_timeout(Duration::ZERO).is_err());
        self.finished.store(true, Ordering::SeqCst);
    }
}

/// Two tasks wait on `pool`, the first with a waker that panics, the
/// second with `second`; closing the pool wakes both.
fn close_wakes(pool: &Pool<u32>, second: Waker) -> Option<&'static str> {
    let held = pool.try_acquire().unwrap();
    let mut first_task = pool.acquire_async();
    assert!(poll_once(&mut first_task, &Waker::from(Arc::new(PanicsOnWake))).is_pending());
    let mut second_task = pool.acquire_async();
    assert!(poll_once(&mut second_task, &second).is_pending());
    let closed = panic::catch_unwind(AssertUnwindSafe(|| pool.close()));
    drop((first_task, second_task, held));
    closed.err().map(|p| payload_text(&*p).unwrap_or("?"))
}

/// A close wakes W1, whose waker panics, then W2, whose waker releases a
/// guard of another pool with a waiting task: that release must neither
/// resume W1's panic inside W2 (W2 never finished) nor keep it; the close
/// resumes it once every waiter is woken.
#[test]
fn a_waker_that_releases_into_another_pool_sees_no_earlier_panic() {
    let _watchdog = watchdog("a close whose wakers release into another pool", WAITING);
    for kind in KINDS {
        let other = Arc::new(build(Kind::BargingUncached, 1));
        let guard = other.try_acquire_owned().unwrap();
        let (other_wakes, other_waker) = counting();
        let mut other_task = other.acquire_async();
        assert!(poll_once(&mut other_task, &other_waker).is_pending());
        let second = Arc::new(ReleasesAnotherPool {
            guard: Mutex::new(Some(guard)),
            finished: AtomicBool::new(false),
        });
        let pool = build(kind, 1);
        let closed = close_wakes(&pool, Waker::from(Arc::clone(&second)));
        assert!(
            second.finished.load(Ordering::SeqCst),
            "{kind:?}: W2's release resumed W1's panic inside W2"
        );
        assert_eq!(closed, Some("a waker that panics"), "{kind:?}");
        assert_eq!(
            other_wakes.wakes(),
            1,
            "{kind:?}: the other pool's task woke"
        );
        let served = matches!(poll_once(&mut other_task, &other_waker), Poll::Ready(Ok(_)));
        assert!(served, "{kind:?}: the other pool's task got no slot");
    }
}

/// As above, with a W2 that makes a zero-timeout acquire of an exhausted
/// pool: that acquire must not drop W1's panic (the close then never
/// panicked).
#[test]
fn a_waker_that_waits_on_another_pool_keeps_no_earlier_panic_from_its_waker() {
    let _watchdog = watchdog("a close whose wakers wait on another pool", WAITING);
    for kind in KINDS {
        let other = Arc::new(build(kind, 1));
        let _held = other.try_acquire().unwrap();
        let second = Arc::new(WaitsOnAnotherPool {
            pool: Arc::clone(&other),
            finished: AtomicBool::new(false),
        });
        let pool = build(kind, 1);
        let closed = close_wakes(&pool, Waker::from(Arc::clone(&second)));
        assert!(second.finished.load(Ordering::SeqCst), "{kind:?}");
        assert_eq!(
            closed,
            Some("a waker that panics"),
            "{kind:?}: the nested acquire dropped the close's caught panic"
        );
    }
}

/// The state behind [`releasing_clone_waker`]: a guard its clone drops.
struct CloneReleases {
    guard: Mutex<Option<OwnedPoolGuard<u32>>>,
    clones: AtomicBool,
}

static RELEASING_VTABLE: RawWakerVTable = RawWakerVTable::new(
    releasing_clone,
    releasing_noop,
    releasing_noop_by_ref,
    releasing_noop,
);

unsafe fn releasing_clone(data: *const ()) -> RawWaker {
    // SAFETY: `data` is the `CloneReleases` of `releasing_clone_waker`,
    // alive until the test frees it after the last clone is gone.
    let state = unsafe { &*(data as *const CloneReleases) };
    state.clones.store(true, Ordering::SeqCst);
    // User code in a clone: a release of the same pool, which hands its
    // slot to a queued ticket under the fair queue's lock.
    drop(state.guard.lock().unwrap().take());
    RawWaker::new(data, &RELEASING_VTABLE)
}

unsafe fn releasing_noop(_: *const ()) {}

unsafe fn releasing_noop_by_ref(_: *const ()) {}

/// A waker whose clone releases `guard` (its wakes do nothing), and its
/// state, which the caller frees once no clone of the waker is left.
fn releasing_clone_waker(guard: OwnedPoolGuard<u32>) -> (*mut CloneReleases, Waker) {
    let state = Box::into_raw(Box::new(CloneReleases {
        guard: Mutex::new(Some(guard)),
        clones: AtomicBool::new(false),
    }));
    let raw = RawWaker::new(state as *const (), &RELEASING_VTABLE);
    // SAFETY: the vtable's functions keep `RawWaker`'s contract: the data
    // pointer stays valid until the caller frees it after the last clone,
    // and every function is thread-safe.
    (state, unsafe { Waker::from_raw(raw) })
}

/// A task polled again with a new waker: the fair queue clones it to keep
/// it, and the clone is user code, so it runs outside the queue's lock.
/// Here the clone releases a guard of the same fair pool, whose hand-off
/// takes that lock (and serves this very task): under the lock that was
/// a deadlock.
#[test]
fn a_waker_clone_that_releases_into_its_own_fair_pool() {
    let _watchdog = watchdog("a waker clone that takes the queue's lock", WAITING);
    let pool = Arc::new(build(Kind::Fair, 2));
    let _first = pool.try_acquire_owned().unwrap();
    let second = pool.try_acquire_owned().unwrap();
    let mut waiting = pool.acquire_async();
    let (_, waker) = counting();
    assert!(poll_once(&mut waiting, &waker).is_pending());
    let (state, releasing) = releasing_clone_waker(second);
    // Polled with another waker: the queue clones it, the clone releases
    // `second`, and the release hands that slot to this task's ticket.
    let polled = poll_once(&mut waiting, &releasing);
    // SAFETY: `state` is alive (freed below).
    let cloned = unsafe { &*state }.clones.load(Ordering::SeqCst);
    assert!(cloned, "the waker was cloned");
    assert!(
        matches!(polled, Poll::Ready(Ok(_))),
        "served by the release in its own waker's clone"
    );
    assert_eq!(pool.stats().handoffs, 1);
    drop((polled, waiting, releasing));
    // SAFETY: the clone the queue kept was woken (consumed) by the
    // hand-off, and `releasing` is dropped: no waker uses `state` now.
    drop(unsafe { Box::from_raw(state) });
}
