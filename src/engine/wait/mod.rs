//! The slow path: waiting for a slot when the pool is empty, blocking or
//! async, barging or fair, and closing.
//!
//! # Protocol
//!
//! Waiting adds one bit to the free list's head word, the *waiter flag*, and
//! an [`event_listener::Event`] that waiters listen on: parked threads, or
//! pending futures whose listener holds the task's waker.
//!
//! - A waiter first registers a listener, then sets the flag with a CAS that
//!   succeeds only while the list is empty ([`FreeList::register_waiter`]),
//!   and only then parks (or returns `Pending`). If the list is not empty it
//!   pops instead.
//! - A release pushes its slot with one CAS as always. If the head it
//!   replaced carried the flag, it notifies one more listener. If no listener
//!   was left to notify, it clears the flag with a CAS from the exact head it
//!   wrote, which fails (leaving the flag set) if anything happened since.
//!
//! No lost wake-up: a waiter parks only after its CAS set the flag on an
//! empty list. Every later push reads the flag from the value its own CAS
//! replaced (the flag is cleared only by a release that found every
//! listener notified) and sees the waiter's listener (see below). So each
//! push made while a thread is parked notifies a listener that has not been
//! notified yet, and a notified listener that is dropped without being used
//! (a timed-out waiter, a cancelled future) passes its notification on:
//! event-listener does that for every listener dropped after a
//! `notify_additional`. When nobody waits, a release does no work at all
//! beyond its CAS: the flag travels in the word the CAS already reads.
//!
//! # What orders a waiter's listener
//!
//! A push that sees the flag must see the listener the waiter registered
//! before setting it. event-listener guarantees that by itself: `listen`
//! emits a `SeqCst` fence after registering, and `notify_additional` one
//! before it looks for listeners (both documented). The notifier's fence
//! comes after its push CAS, which read the flag from the waiter's Release
//! CAS, so the fence synchronizes with that CAS and the registration before
//! it is visible; and a waiter that read the head after its own fence either
//! saw the push (and pops instead of parking) or the notifier's fenced look
//! finds its listener (the two fences make a Dekker pair).
//!
//! The protocol adds a second edge of its own: the push CAS's Acquire half
//! pairs with the flag CAS's Release half, and a waiter always CASes the
//! flag (never parks on a head it only loaded), so that the push reads from
//! its registration. Neither is needed while event-listener keeps its
//! fences: with the push CAS weakened to Release, or with a waiter that
//! parks on an already-set flag without a CAS, every loom model still
//! passes (measured 2026-11-24). They are kept because `listen`'s docs call
//! its fence an implementation detail "for now", and because on x86 they
//! cost nothing: every CAS is a full barrier there. The same pair is what
//! makes a starving waiter's count visible to a release (see "Starvation
//! bound"): for that, both halves are required.
//!
//! # With per-thread caches
//!
//! Slots parked in other threads' caches must reach a waiter too (see
//! `engine/cache`). A waiter counts itself in `waiting` (a SeqCst RMW on a line
//! that changes only when threads start or stop waiting) before it waits,
//! and after setting the flag it revokes every cache that holds slots,
//! moving them to the free list. A cache owner loads `waiting` after every
//! operation and, while it is not zero, flushes its cache to the free list.
//! The two sides are an asymmetric Dekker pair (the waiter's heavy barrier
//! against the owner's light one), so each slot parked before the waiter's
//! barrier is moved by the waiter and each one parked after it is flushed
//! by its owner; either way a push notifies the waiter. Nothing polls.
//!
//! One sweep covers a spell of waiting: a waiter whose sweep completed with
//! no magazine contended sets `COVERED` in `waiting`, and the count's last
//! decrement clears it in the same CAS. A counted waiter that finds the
//! mark skips its sweep (and its heavy barrier): since the covering
//! sweep's barrier the count has not been 0, so every owner operation that
//! ended after it saw a waiter and flushed, and every slot parked before it
//! was moved by that sweep or flushed by its busy owner. An exhausted pool
//! with a queue of waiters thus pays one heavy barrier per spell, not one
//! per waiting acquire (16 tasks on 4 slots, 2 vCPUs: 969 ns per
//! operation with one barrier per wait, 409 ns with the mark, 396 ns
//! without caches). Owners ignore the mark in their check, so that a mark
//! outliving its count would show as the lost slot it is: the loom model
//! `covered_mark_ends_with_its_waiters` deadlocks with such a mark
//! (`tagpool_loom_covered_stale`).
//!
//! # Fairness
//!
//! By default parked threads are notified in the order they registered
//! (FIFO), but a woken waiter competes with every thread that pops at that
//! moment, so a thread that just arrived can take the slot first (barging).
//! A waiter that loses registers again at the back of the queue. Barging
//! alone has no starvation bound (a steady stream of arriving threads can
//! keep a waiter waiting), so a blocked thread that has waited
//! [`STARVE_AFTER`] stops competing and queues for a hand-off instead (see
//! "Starvation bound" below). Waiting tasks queue for a hand-off from the
//! start (see "Async waits").
//!
//! A *fair* pool ([`Builder::fair`](crate::Builder::fair)) hands slots over
//! instead, through a queue of tickets under a lock (see `fair.rs`): the
//! waiter flag then means "tickets may be queued", a release that sees it
//! hands its slot to the first ticket, and an arriving thread can pop only
//! while no ticket waits. Fair pools have no per-thread caches (a cache is
//! a reserve its thread takes from first).
//!
//! # Starvation bound
//!
//! A barging pool has a ticket queue too ([`FairQueue`], the same as a fair
//! pool's), for its *starving* waiters only, and a count of them,
//! `starving`. A blocked thread starves once it has waited
//! [`STARVE_AFTER`] since its acquire found the pool empty: its listener
//! waits with that deadline, so it wakes in time even if nobody notifies
//! it. Then:
//!
//! - The waiter increments `starving`, and only then queues a ticket under
//!   the queue's lock with the flag CAS of [`FreeList::register_waiter`]
//!   (if a slot came free it pops instead, uncounting itself). It stays
//!   counted in `waiting`, so cache owners keep flushing, and sweeps the
//!   caches as a listener does. It spins briefly on its ticket, then
//!   parks on it; at its deadline it leaves the queue as a fair waiter does.
//!   Once its ticket has left the queue (served, or left) it decrements
//!   `starving`.
//! - A release whose push saw the flag reads `starving`. If it is not 0, it
//!   takes the lock and, while a ticket is queued, pops a slot off the free
//!   list (most likely the one it just pushed) and hands it to the first
//!   ticket as a fair pool does (outcome, then unpark, outside the lock);
//!   it notifies the event's listeners only for the slots it did not hand
//!   over. If the pop fails, another thread took the slot first, and the
//!   ticket stays first in line for that thread's release.
//! - A release that read `starving == 0` never serves tickets and may clear
//!   the flag as before (from the exact head it wrote, once no listener was
//!   left to notify). One that read a starving waiter never clears it, and
//!   neither does the ticket queue of a barging pool (a fair pool's clears
//!   it when it empties): the flag stands for the listeners too, and
//!   leaving it set costs only a spurious wake on the next release, which
//!   clears it once nobody listens and nobody starves.
//!
//! No lost ticket: once a ticket is queued, every push sees the flag and
//! `starving > 0`, so it serves the ticket or finds the slot already taken
//! (whose release comes later). The flag stays set: the ticket side never
//! clears it, and a release's clear needs `starving == 0`. A release can
//! read that only if the ticket's flag CAS is after the head its push
//! replaced (the count is incremented before that CAS, whose Release half
//! the push's Acquire half reads, directly or through later CASes of the
//! head's modification order), and then the flag CAS changed the head, so
//! the clear's CAS from the exact head it wrote fails. So a queued ticket
//! always has the flag set, and each later push serves it or races a pop
//! that took the slot. No lost slot: the pop happens under the lock with
//! the first ticket already taken out of the queue (it goes back to the
//! front if the pop fails), and nothing can take a ticket out meanwhile,
//! so a popped slot always has its taker; a ticket that leaves at its
//! deadline does so under the same lock, and takes the slot if it was
//! served meanwhile. No lost wake-up for listeners: a push that hands its
//! slot over notifies nobody, as if a barging thread had taken it, and a
//! listener registered meanwhile keeps the flag (above), so the new
//! holder's release notifies it.
//!
//! The bound: a thread waits at most [`STARVE_AFTER`], then one release
//! for each starving waiter queued before it (FIFO), plus the wake-up of
//! its own thread if it had parked. The cost: a hand-off to a parked
//! thread leaves the slot idle for that wake-up, where barging would have
//! let the releasing thread take it back at once. It is paid only for
//! waiters that already waited [`STARVE_AFTER`]: with short holds (slots
//! held for a few microseconds) few waiters get there, and those that do
//! are usually still spinning on their ticket when it is served. When
//! every waiter waits that long (eight threads on one slot, each holding
//! it about 20 µs), most releases become hand-offs to parked threads and
//! throughput falls to the fair pool's: measured about a third below
//! barging's on 2 vCPUs, with the p99.9 wait at 0.5 ms instead of 40 ms
//! (a `Mutex` + `Condvar` pool: barging's throughput, 40 ms). A per-pool
//! limit on how often a waiter may start to starve (parking_lot's eventual
//! fairness: a fair unlock at most every 0.5 ms on average) kept that
//! throughput (0.9 of barging's) but left the p99.9 wait at 12 ms there,
//! and at 1.8 ms with 2 µs holds (0.2 ms per waiter), so the bound is per
//! waiter. Loom models no time: there a waiter starves after its first
//! park as a listener instead (`Starve`).
//!
//! # Async waits
//!
//! A task that finds no slot queues a ticket with its `Waker` at once,
//! counted in `starving` as a starving thread is, and the protocol above
//! serves it: a task is never overtaken once it waits, only by acquires
//! that pop a slot between a release's push and the serve. Tasks never
//! listen on the event. Two reasons, both measured:
//!
//! - Under tokio, a task that releases a slot usually runs on and takes
//!   it back before the task its release woke is polled: a listening task
//!   would wake in vain at almost every release. With 16 tasks on 4
//!   buffers (the criterion row `async/scarce`, 2 vCPUs) listening cost
//!   540 ns per operation, 1.55 times a tokio `Semaphore` in front of a
//!   `Mutex<Vec>`; a ticket at once, with releases that skip the caches
//!   while anyone waits and hand their slot straight to a queued ticket
//!   (`FairQueue::hand_off_queued`, instead of a push and a pop back),
//!   320 ns, 0.9 of the semaphore's.
//! - event-listener calls a task's `Waker` inside `notify` and is not
//!   unwind-safe there (see `unwind.rs`); the pool calls a ticket's waker
//!   itself, and catches its panic.
//!
//! A waiting task is woken only to be handed its slot (or the close), so
//! a future dropped after its hand-off gives that slot back
//! ([`cancel`](WaitQueue::cancel)), and one leaked with `mem::forget`
//! keeps it, as a leaked guard does. Barging remains for threads, and for
//! a task's first try.
//!
//! # Closing
//!
//! [`close`](WaitQueue::close) sets a closed flag in the head word (a pop
//! that sees it fails, a waiter that sees it in its flag CAS stops), then
//! wakes every waiter: all listeners of the event, or every queued ticket,
//! served with the closed outcome under the fair queue's lock. A waiter
//! that registered before the close's CAS is seen by its notification, as
//! by a push's; one that comes later sees the flag. Cache owners see a permanent bit in `waiting`
//! and flush after every operation, so no closed pool hands out a cached
//! slot; releases go on as before.
//!
//! # Wakers that panic
//!
//! A task's waker is user code, and every protocol above wakes it in the
//! middle of steps that must complete (an owned release's tail, a sweep's
//! other wake-ups, a close's other wake-ups). No wake here ever unwinds: tasks never
//! listen on the event (event-listener's `notify` is not unwind-safe: it
//! counts a notification only after the wake returns), whose listeners are
//! blocked threads, woken by an unpark; the ticket queue calls a task's
//! waker through `unwind::catch`. The caught panic is resumed
//! by the release, close or cancel once it is complete (see `unwind.rs`).

use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use event_listener::Event;

use crate::engine::cache::{note_peak, Cache};
use crate::engine::fair::{FairQueue, Ticket};
use crate::engine::free_list::{FreeList, Pushed};
use crate::sync::{AtomicU32, AtomicU64, ModelArc as Arc, Ordering, REAL_TIME};

mod task;
mod thread;
mod times;

use self::times::WaitTimes;

/// One blocked thread in [`WaitQueue::waiting`] (bits 0 to 31).
const THREAD: u64 = 1;
/// One pending future in [`WaitQueue::waiting`] (bits 32 to 60: at most
/// `2^29 - 1` waiting tasks).
const TASK: u64 = 1 << 32;
/// In [`WaitQueue::waiting`] while a lowered bound is owed slots that
/// caches could hide (see `shared/capacity.rs`): owners flush after every
/// operation and releases skip the caches, as while anyone waits.
const RETIRING: u64 = 1 << 61;
/// In [`WaitQueue::waiting`] while a sweep of the caches by a counted
/// waiter has completed (no magazine contended) since the count last left
/// 0: a waiter that sees it needs no sweep of its own (see "With per-thread
/// caches" in the module docs). Cleared with the count's last decrement.
const COVERED: u64 = 1 << 62;
/// In [`WaitQueue::waiting`] for good once the pool is closed: cache owners
/// then flush after every operation.
const CLOSED: u64 = 1 << 63;
/// The waiting threads and tasks in [`WaitQueue::waiting`].
const COUNTS: u64 = RETIRING - 1;

/// How long a blocked thread waits in a barging pool before it stops
/// competing for released slots and queues for a hand-off instead (see
/// "Starvation bound" in the module docs).
///
/// Chosen with the `waiting` benchmark (eight threads on one slot, 2
/// vCPUs): 100 µs keeps the p99.9 wait below a `Mutex` + `Condvar` pool's;
/// at 250 µs it was above it in some runs, and at 500 µs in every run.
pub(crate) const STARVE_AFTER: Duration = Duration::from_micros(100);

/// Threads and tasks waiting for a slot, and how often they had to.
#[derive(Debug)]
pub(crate) struct WaitQueue {
    /// The barging waiters' event. Unused by fair pools.
    event: Event,
    /// The queue of tickets: every waiter's in a fair pool; in a barging
    /// pool, the starving waiters'.
    tickets: FairQueue,
    /// Whether releases hand slots to queued tickets in arrival order.
    fair: bool,
    /// Barging pools: starving waiters whose ticket may be queued. Counted
    /// before the flag CAS that queues the ticket and uncounted after it
    /// has left the queue, so that it is at least 1 while the ticket is
    /// queued (see "Starvation bound" in the module docs).
    starving: AtomicU32,

    /// Blocked threads (bits 0 to 31) and pending futures (bits 32 to 60)
    /// waiting right now, and [`CLOSED`]. Cache owners read it after every
    /// operation and flush while it is not zero, so it sits on a line of
    /// its own that changes only when a waiter starts or stops waiting.
    waiting: CachePadded<AtomicU64>,
    /// Blocking acquires that found the pool empty (and so spun, then
    /// parked unless a slot came free first).
    waits: AtomicU64,
    /// Async acquires that found the pool empty and waited.
    async_waits: AtomicU64,
    /// Blocking waits that ended at their deadline without a slot.
    timeouts: AtomicU64,
    /// Async waits whose future was dropped before it got a slot.
    cancelled: AtomicU64,
    /// How long the waits that ended waited.
    times: WaitTimes,
}

/// The waiting state of an async acquire, kept in its future.
#[derive(Debug, Default)]
pub(crate) struct AsyncWait {
    /// Counted in `waiting` (and in `async_waits`) and not finished.
    counted: bool,
    /// The queued ticket: a fair pool's, or a barging pool's (counted in
    /// `starving` while it is here).
    ticket: Option<Arc<Ticket>>,
    /// When it was counted (with a clock: never under loom), for its
    /// wait's time.
    since: Option<Instant>,
}

/// When a blocked waiter of a barging pool starves: [`STARVE_AFTER`] after
/// it began to wait. Loom models no time: there a waiter starves once it
/// has parked as a listener and woken without a slot (the first-park
/// rule), so that a model reaches the ticket path in a few steps.
#[derive(Clone, Copy, Debug)]
struct Starve {
    /// The moment it starves (always `None` under loom).
    at: Option<Instant>,
}

impl Starve {
    fn start() -> Self {
        Self {
            at: REAL_TIME.then(|| Instant::now() + STARVE_AFTER),
        }
    }

    /// Whether a waiter that has parked `rounds` times as a listener
    /// starves now.
    fn reached(self, rounds: u32) -> bool {
        match self.at {
            Some(at) => Instant::now() >= at,
            None => !REAL_TIME && rounds >= 1,
        }
    }
}

/// The earlier of two optional deadlines.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, None) => a,
        (None, b) => b,
    }
}

impl WaitQueue {
    pub(crate) fn new(fair: bool) -> Self {
        Self {
            event: Event::new(),
            tickets: FairQueue::new(fair),
            fair,
            starving: AtomicU32::new(0),

            waiting: CachePadded::new(AtomicU64::new(0)),
            waits: AtomicU64::new(0),
            async_waits: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            times: WaitTimes::new(),
        }
    }

    /// The total time waited and its histogram (see [`WaitTimes`]).
    pub(crate) fn times(&self) -> (Duration, crate::stats::WaitHistogram) {
        self.times.snapshot()
    }

    /// The moment a wait begins, if time is real (not under loom).
    #[inline]
    fn start_timing() -> Option<Instant> {
        REAL_TIME.then(Instant::now)
    }

    /// Records the time of a wait that began at `since` and ends now.
    #[inline]
    fn end_timing(&self, since: Option<Instant>) {
        if let Some(since) = since {
            self.times.record(since.elapsed());
        }
    }

    /// Whether releases hand slots to waiters in arrival order.
    pub(crate) fn is_fair(&self) -> bool {
        self.fair
    }

    /// The statistics: `(waits, async_waits, timeouts, cancelled,
    /// handoffs)`.
    pub(crate) fn counts(&self) -> (u64, u64, u64, u64, u64) {
        // Acquire, read first: pairs with the Release increments of the
        // timeouts and cancellations, so that the counts of the waits they
        // end (incremented before them, on their thread) read at least as
        // high: a snapshot never shows more timeouts than waits (miri's
        // weak memory emulation showed one with every load Relaxed).
        let timeouts = self.timeouts.load(Ordering::Acquire);
        let cancelled = self.cancelled.load(Ordering::Acquire);
        // Relaxed: statistics, ordered by the loads above.
        (
            self.waits.load(Ordering::Relaxed),
            self.async_waits.load(Ordering::Relaxed),
            timeouts,
            cancelled,
            self.tickets.served(),
        )
    }

    /// Waiters queued for a hand-off now: every waiter of a fair pool, the
    /// starving ones of a barging pool.
    pub(crate) fn queued_now(&self) -> usize {
        self.tickets.len() as usize
    }

    /// Threads and tasks waiting now.
    pub(crate) fn waiting_now(&self) -> (usize, usize) {
        // Relaxed: a statistic.
        let waiting = self.waiting.load(Ordering::Relaxed);
        (
            (waiting & (TASK - 1)) as usize,
            ((waiting & COUNTS) >> 32) as usize,
        )
    }

    /// Whether a thread or task is waiting now, or the pool is closed; the
    /// cache owners' side of the pair described in the module docs. The
    /// caller has just run a light barrier (`Magazine::exit_with`).
    #[inline(always)]
    pub(crate) fn waiting(&self) -> bool {
        // Relaxed: ordered after the caller's `state` store by its light
        // barrier; pairs with the waiter's increment and heavy barrier.
        // `COVERED` alone is no waiter (it never outlives the count; masked
        // so that a mark that did would show as the bug it is).
        self.waiting.load(Ordering::Relaxed) & !COVERED != 0
    }

    /// Whether a thread or task is waiting now, or the pool is closed, read
    /// without a barrier: for a cache owner deciding whether to skip its
    /// cache, where a stale answer either way is safe (a slot pushed to the
    /// free list is never hidden, and one put in a cache is still covered
    /// by the check after the operation's light barrier).
    #[inline(always)]
    pub(crate) fn waiting_hint(&self) -> bool {
        // Relaxed: a hint, see above.
        self.waiting.load(Ordering::Relaxed) & !COVERED != 0
    }

    /// Uncounts one waiting thread (`THREAD`) or task (`TASK`) of a barging
    /// pool, clearing [`COVERED`] with the last one.
    fn uncount(&self, unit: u64) {
        // Relaxed: the CAS below reads the value it replaces.
        let mut current = self.waiting.load(Ordering::Relaxed);
        loop {
            let mut new = current - unit;
            // Loom-only fault injection: a mark that outlives the waiting
            // that made it.
            if new & COUNTS == 0 && !cfg!(all(loom, tagpool_loom_covered_stale)) {
                new &= !COVERED;
            }
            // Release: nothing to publish; owners stop flushing once the
            // count is 0. One CAS for both, so that no waiter counts itself
            // between them and takes the old period's mark for its own.
            match self.waiting.compare_exchange_weak(
                current,
                new,
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => current = actual,
            }
        }
    }

    /// Sets the `RETIRING` bit (see [`RETIRING`]); the caller then sweeps the
    /// caches with a heavy barrier, as a waiter does.
    pub(crate) fn signal_retiring(&self) {
        // SeqCst: as a waiter's count (see `pop_waiting`): the owners' side
        // of the pair is their light barrier and load of `waiting`.
        self.waiting.fetch_add(RETIRING, Ordering::SeqCst);
    }

    /// Removes the `RETIRING` bit, set by the caller's pool before.
    pub(crate) fn end_retiring(&self) {
        // Release: nothing to publish; owners stop flushing for it.
        self.waiting.fetch_sub(RETIRING, Ordering::Release);
    }

    /// Whether the `RETIRING` bit is set (a hint, read off the fast paths).
    pub(crate) fn retiring_hint(&self) -> bool {
        // Relaxed: a hint; the bit's owner removes it under its lock.
        self.waiting.load(Ordering::Relaxed) & RETIRING != 0
    }

    /// Wakes the waiters for the room a raise gave (see "Room" in
    /// `free_list/bound.rs`): every listener, to look again and grow; the
    /// queued tickets are served by the caller's growths.
    pub(crate) fn wake_for_room(&self) {
        self.event.notify(usize::MAX);
    }

    /// Whether a ticket is queued now, read under the queue's lock: a
    /// ticket whose flag CAS a raise's read is queued by then.
    pub(crate) fn tickets_queued(&self) -> bool {
        self.tickets.len_locked() > 0
    }

    /// Whether a counted waiter's complete sweep covers the pool (see
    /// [`COVERED`]). The caller is counted, so the mark it reads is of its
    /// own period: the count cannot reach 0 while the caller is in it.
    pub(crate) fn covered(&self) -> bool {
        // Acquire: pairs with the Release `fetch_or` in `cover`: the sweep's
        // moves happen-before the caller skips its own.
        self.waiting.load(Ordering::Acquire) & COVERED != 0
    }

    /// Marks the pool covered after a complete sweep by a counted waiter.
    pub(crate) fn cover(&self) {
        // Release: pairs with the Acquire load in `covered`.
        self.waiting.fetch_or(COVERED, Ordering::Release);
    }

    /// Gives back the slot `index`, owned by the caller: pushes it and
    /// wakes a waiter if one waits, or, in a fair pool with waiters, hands
    /// it to the first.
    ///
    /// Returns whether it woke (or handed the slot to) anyone: only then
    /// may a waker's panic have been caught (see `unwind.rs`).
    #[inline]
    pub(crate) fn release(&self, free: &FreeList, index: u32) -> bool {
        self.release_among(free, index, 0)
    }

    /// [`release`](Self::release) of one slot of a chain the caller gives
    /// back, with `pending` other slots of it (or held for the caller's
    /// own pass) still out of the free list: a fair hand-off does not
    /// count them as held (see [`FairQueue::hand_off`]).
    ///
    /// A slot handed straight to a waiter is withdrawn instead while a debt
    /// is owed (see `free_list/bound.rs`): the ticket queue checks under its
    /// lock, a push by itself.
    #[inline]
    fn release_among(&self, free: &FreeList, index: u32, pending: u32) -> bool {
        if !crate::engine::fair::debt_checked_here() && free.in_debt() && free.withdraw(index) {
            // Loom-only fault injection: see `debt_checked_here`.
            return false;
        }
        if !self.fair {
            // Relaxed: a hint. A ticket counted and queued after this load
            // (or not yet queued under the lock below) is served through
            // the push's flag, by `wake`, as the module docs show; handing
            // the slot straight to one already queued saves the push and
            // the pop back.
            if self.starving.load(Ordering::Relaxed) != 0
                && self.tickets.hand_off_queued(free, index)
            {
                return true;
            }
            let pushed = free.push(index);
            self.wake_after(free, pushed, 1)
        } else if cfg!(all(loom, tagpool_loom_fair_push_over_waiters)) {
            // Loom-only fault injection: a fair release that pushes its
            // slot whether tickets wait or not (none of them is served).
            let _ = free.push(index);
            false
        } else if free.push_unless_waiters(index).is_none() {
            self.tickets.hand_off(free, index, pending);
            true
        } else {
            false
        }
    }

    /// Gives back the slots of `chain`, owned by the caller, `chain[0]` on
    /// top: one push that wakes as many waiters, or, in a fair pool, one
    /// release per slot (each hands its slot to the first waiter, if any).
    /// `still_held` is how many other slots the caller keeps out of the
    /// list without a guard meanwhile (an attach's target).
    pub(crate) fn release_batch(&self, free: &FreeList, chain: &[u32], still_held: u32) {
        if self.fair {
            // Last first, so that `chain[0]` ends on top, as in one push;
            // the slots before `at` are still out of the list.
            // Loom-only fault injection: the attach's target counted as
            // held by the waiter a slot of the chain is handed to.
            let still_held = if cfg!(all(loom, tagpool_loom_attach_target_held)) {
                0
            } else {
                still_held
            };
            chain.iter().enumerate().rev().for_each(|(at, &index)| {
                self.release_among(free, index, at as u32 + still_held);
            });
        } else {
            let pushed = free.push_batch(chain);
            self.wake_after(free, pushed, chain.len() as u32);
        }
    }

    /// Gives back a chain of `n` slots owned by the caller and already
    /// linked from `top` down to `last` (a segment the caller grew, a
    /// scope's slots): pushes them as one chain and wakes as many waiters,
    /// or, in a fair pool with waiters, hands them to the first waiters one
    /// by one, from the top, until none is left and pushes the rest.
    /// Returns whether it woke anyone (see [`release`](Self::release)).
    pub(crate) fn release_linked(
        &self,
        free: &FreeList,
        mut top: u32,
        last: u32,
        mut n: u32,
    ) -> bool {
        let mut woke = false;
        while n > 0 {
            let unless_waiters = self.fair;
            match free.push_linked(top, last, n, unless_waiters) {
                Some(pushed) => return self.wake_after(free, pushed, n) || woke,
                None => {
                    // A fair pool with queued tickets: serve the first. The
                    // link below `top` is read before `top` is given away.
                    let below = free.link_of(top);
                    woke |= self.release_among(free, top, n - 1);
                    top = below;
                    n -= 1;
                }
            }
        }
        woke
    }

    /// Wakes up to `pushed_count` more waiters after a push of that many
    /// slots that saw the waiter flag (`pushed.waiters`); nothing otherwise.
    /// Barging pools only: a fair pool never pushes onto the flag.
    /// Returns whether it tried to wake anyone (`pushed.waiters`).
    #[inline]
    pub(crate) fn wake_after(&self, free: &FreeList, pushed: Pushed, pushed_count: u32) -> bool {
        if pushed.waiters {
            self.wake(free, pushed.head, pushed_count);
        }
        pushed.waiters
    }

    /// Wakes `n` more waiters; `head` is the word the push wrote. Starving
    /// waiters' tickets come first: each gets a slot popped back off the
    /// list, and the listeners are notified for the rest.
    #[cold]
    fn wake(&self, free: &FreeList, head: u64, n: u32) {
        // Relaxed: a starving waiter counts itself before the flag CAS that
        // queues its ticket; if that CAS is at or before the head this
        // thread's push replaced (so the ticket may be queued), the push
        // CAS read from it or a later word, and its Acquire half makes the
        // count visible here. A ticket whose CAS comes later changes the
        // head, which makes the clear below fail.
        let starving = self.starving.load(Ordering::Relaxed) != 0;
        let mut left = n;
        if starving {
            while left > 0 && self.tickets.serve_from_list(free) {
                left -= 1;
            }
            if left == 0 {
                return;
            }
        }
        // `notify_additional` wakes listeners that were not notified yet, and
        // with event-listener's `std` feature its count is exact. Its SeqCst
        // fence makes a waiter's listener visible here, and so does the
        // AcqRel pair of its flag CAS and this thread's push (see "What
        // orders a waiter's listener" in the module docs).
        if self.event.notify_additional(left as usize) < left as usize && !starving {
            // Every parked waiter was notified already and no ticket waits:
            // the flag can go.
            free.clear_waiters(head);
        }
    }

    /// Closes the pool: see "Closing" in the module docs. Returns whether
    /// this call closed it. Every call returns only once the close is
    /// complete: no cache holds a slot and every waiter is woken.
    pub(crate) fn close(&self, free: &FreeList, cache: Option<&Cache>) -> bool {
        // Sets the closed flag and serves every queued ticket (a fair
        // pool's, or a barging pool's starving waiters') with `Closed`.
        let closed_now = self.tickets.close(free);
        // SeqCst: as a waiter's count (see `pop_waiting`), for good: every
        // cache owner flushes after its operations from now on. The sweep
        // moves what the caches hold now.
        self.waiting.fetch_or(CLOSED, Ordering::SeqCst);
        if let Some(cache) = cache {
            while cache.sweep(free, self, true).contended {
                crate::sync::yield_now();
            }
        }
        // Loom-only fault injection (`tagpool_loom_close_no_notify`): a close
        // that wakes nobody.
        if !cfg!(all(loom, tagpool_loom_close_no_notify)) {
            // Every barging waiter wakes, finds the flag and stops. Its
            // SeqCst fence sees every listener registered before a flag CAS
            // that the close's CAS read (see `FreeList::close`).
            self.event.notify(usize::MAX);
        }
        closed_now
    }
}

/// How a waiter takes a slot when it looks for one: a pop of the free list,
/// recording the peak, else a growth into the room a raised bound gave
/// (see "Room" in `free_list/bound.rs`), which only the pool can make.
pub(crate) struct Take<'a> {
    /// The pool's peak statistic.
    pub(crate) peak: &'a AtomicU32,
    /// Grows the pool and takes a slot of the new segment (the peak noted).
    pub(crate) grow: &'a dyn Fn() -> Option<u32>,
}

impl Take<'_> {
    /// Pops the free list, else grows into the room if there is any.
    fn pop(&self, free: &FreeList) -> Option<u32> {
        pop(free, self.peak).or_else(|| {
            if free.room_to_grow() {
                (self.grow)()
            } else {
                None
            }
        })
    }
}

/// Pops the free list, recording the peak.
fn pop(free: &FreeList, peak: &AtomicU32) -> Option<u32> {
    free.pop().map(|p| {
        note_peak(peak, free.in_use(p.free));
        p.index
    })
}
