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
//! cost nothing: every CAS is a full barrier there.
//!
//! # With per-thread caches
//!
//! Slots parked in other threads' caches must reach a waiter too (see
//! `cache.rs`). A waiter counts itself in `waiting` (a SeqCst RMW on a line
//! that changes only when threads start or stop waiting) before it waits,
//! and after setting the flag it revokes every cache that holds slots,
//! moving them to the free list. A cache owner loads `waiting` after every
//! operation and, while it is not zero, flushes its cache to the free list.
//! The two sides are an asymmetric Dekker pair (the waiter's heavy barrier
//! against the owner's light one), so each slot parked before the waiter's
//! barrier is moved by the waiter and each one parked after it is flushed
//! by its owner; either way a push notifies the waiter. Nothing polls.
//!
//! # Fairness
//!
//! By default parked waiters are notified in the order they registered
//! (FIFO), but a woken waiter competes with every thread that pops at that
//! moment, so a thread that just arrived can take the slot first (barging).
//! A waiter that loses registers again at the back of the queue. There is
//! no starvation bound: a steady stream of arriving threads can keep a
//! waiter waiting.
//!
//! A *fair* pool ([`Builder::fair`](crate::Builder::fair)) hands slots over
//! instead. Its waiters queue *tickets* under a lock, in arrival order, and
//! the waiter flag then means "tickets may be queued":
//!
//! - A waiter that finds the list empty takes the lock, sets the flag with
//!   the same CAS as above (which fails if a slot came free: it pops
//!   instead) and queues its ticket, all under the lock.
//! - A release pushes only onto a head without the flag
//!   ([`FreeList::push_unless_waiters`]: the flag is part of the word its
//!   CAS compares). Seeing the flag, it keeps the slot, takes the lock and
//!   hands the slot to the first ticket (clearing the flag when the queue
//!   empties), or, if every ticket has left, pushes it and clears the flag
//!   in one CAS.
//! - A ticket is woken through an event of its own, after its outcome (a
//!   slot index, or closed) is stored; a waiter that gives up (a timeout, a
//!   dropped future) takes the lock and leaves the queue, or, if its ticket
//!   was served meanwhile, takes the slot (a timeout) or hands it on (a
//!   dropped future).
//!
//! So the flag is set only while the list is empty, and tickets are queued
//! only while the flag is set: an arriving thread can pop only when no
//! ticket waits, and never takes a slot ahead of one. Fair pools have no
//! per-thread caches (a cache is a reserve its thread takes from first).
//!
//! # Closing
//!
//! [`close`](WaitQueue::close) sets a closed flag in the head word (a pop
//! that sees it fails, a waiter that sees it in its flag CAS stops), then
//! wakes every waiter: all listeners of the event, or every queued ticket,
//! with the closed outcome, under the lock. A waiter that registered before
//! the close's CAS is seen by its notification, as by a push's; one that
//! comes later sees the flag. Cache owners see a permanent bit in `waiting`
//! and flush after every operation, so no closed pool hands out a cached
//! slot; releases go on as before.

use core::ops::DerefMut;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use crossbeam_utils::{Backoff, CachePadded};
use event_listener::{Event, EventListener, Listener};

use crate::cache::{note_peak, Cache};
use crate::error::{AcquireError, AcquireTimeoutError};
use crate::free_list::{FreeList, Pushed, Register};
use crate::sync::{AtomicU32, AtomicU64, ModelArc as Arc, Mutex, Ordering, SPIN_BEFORE_PARK};

/// One blocked thread in [`WaitQueue::waiting`] (bits 0 to 31).
const THREAD: u64 = 1;
/// One pending future in [`WaitQueue::waiting`] (bits 32 to 62).
const TASK: u64 = 1 << 32;
/// In [`WaitQueue::waiting`] for good once the pool is closed: cache owners
/// then flush after every operation.
const CLOSED: u64 = 1 << 63;

/// [`Ticket::state`] while its waiter waits.
const WAITING: u32 = u32::MAX;
/// [`Ticket::state`] once the pool closed under it.
const TICKET_CLOSED: u32 = u32::MAX - 1;

/// A fair waiter's place in the queue.
#[derive(Debug)]
struct Ticket {
    /// [`WAITING`], then, written once under the queue's lock, a slot index
    /// handed over (owned by the ticket's waiter from then on) or
    /// [`TICKET_CLOSED`].
    state: AtomicU32,
    /// Notified once, after `state` is written.
    event: Event,
}

impl Ticket {
    fn new() -> Self {
        Self {
            state: AtomicU32::new(WAITING),
            event: Event::new(),
        }
    }

    /// The ticket's outcome, once it has one.
    fn outcome(&self) -> Option<Result<u32, AcquireError>> {
        // Acquire: pairs with the Release store in `hand_off` (the slot's
        // value, written by the releasing thread, is this waiter's now) or
        // in `close`.
        match self.state.load(Ordering::Acquire) {
            WAITING => None,
            TICKET_CLOSED => Some(Err(AcquireError::Closed)),
            index => Some(Ok(index)),
        }
    }
}

/// The fair queue: tickets in arrival order, every one [`WAITING`].
type Tickets = Mutex<VecDeque<Arc<Ticket>>>;

/// Threads and tasks waiting for a slot, and how often they had to.
#[derive(Debug)]
pub(crate) struct WaitQueue {
    /// The barging waiters' event. Unused by fair pools.
    event: Event,
    /// Fair pools only: the queue of tickets.
    tickets: Option<Tickets>,
    /// Blocked threads (bits 0 to 31) and pending futures (bits 32 to 62)
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
}

/// The waiting state of an async acquire, kept in its future.
#[derive(Debug, Default)]
pub(crate) struct AsyncWait {
    /// Counted in `waiting` (and in `async_waits`) and not finished.
    counted: bool,
    /// The listener registered before this task's flag CAS (barging), or on
    /// its ticket's event (fair).
    listener: Option<EventListener>,
    /// Fair pools: the queued ticket.
    ticket: Option<Arc<Ticket>>,
}

/// What a fair waiter's attempt to queue found.
enum Enqueue {
    Queued(Arc<Ticket>),
    Available,
    Closed,
}

impl WaitQueue {
    pub(crate) fn new(fair: bool) -> Self {
        Self {
            event: Event::new(),
            tickets: fair.then(|| Mutex::new(VecDeque::new())),
            waiting: CachePadded::new(AtomicU64::new(0)),
            waits: AtomicU64::new(0),
            async_waits: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
        }
    }

    /// Whether releases hand slots to waiters in arrival order.
    pub(crate) fn is_fair(&self) -> bool {
        self.tickets.is_some()
    }

    /// The statistics: `(waits, async_waits, timeouts, cancelled)`.
    pub(crate) fn counts(&self) -> (u64, u64, u64, u64) {
        // Relaxed: statistics.
        (
            self.waits.load(Ordering::Relaxed),
            self.async_waits.load(Ordering::Relaxed),
            self.timeouts.load(Ordering::Relaxed),
            self.cancelled.load(Ordering::Relaxed),
        )
    }

    /// Threads and tasks waiting now.
    pub(crate) fn waiting_now(&self) -> (usize, usize) {
        // Relaxed: a statistic.
        let waiting = self.waiting.load(Ordering::Relaxed);
        (
            (waiting & (TASK - 1)) as usize,
            ((waiting & !CLOSED) >> 32) as usize,
        )
    }

    /// Whether a thread or task is waiting now, or the pool is closed; the
    /// cache owners' side of the pair described in the module docs. The
    /// caller has just run a light barrier (`Magazine::exit_with`).
    #[inline(always)]
    pub(crate) fn waiting(&self) -> bool {
        // Relaxed: ordered after the caller's `state` store by its light
        // barrier; pairs with the waiter's increment and heavy barrier.
        self.waiting.load(Ordering::Relaxed) != 0
    }

    fn lock(tickets: &Tickets) -> impl DerefMut<Target = VecDeque<Arc<Ticket>>> + '_ {
        // No code that can panic runs under the lock (no user code, no
        // wake-up): a poisoned lock still holds a consistent queue.
        tickets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a slot, blocking until `deadline` (forever with `None`).
    #[cold]
    pub(crate) fn pop_waiting(
        &self,
        free: &FreeList,
        cache: Option<&Cache>,
        peak: &AtomicU32,
        deadline: Option<Instant>,
    ) -> Result<u32, AcquireTimeoutError> {
        // Relaxed: a statistic.
        self.waits.fetch_add(1, Ordering::Relaxed);
        let taken = match &self.tickets {
            None => {
                // SeqCst: the waiter's side of the pair in the module docs
                // (the heavy barrier in `Cache::sweep` follows before any
                // stack is read).
                self.waiting.fetch_add(THREAD, Ordering::SeqCst);
                let taken = self.wait_barging(free, cache, peak, deadline);
                // Release: nothing to publish; owners stop flushing once it
                // is 0.
                self.waiting.fetch_sub(THREAD, Ordering::Release);
                taken
            }
            Some(tickets) => self.wait_fair(tickets, free, peak, deadline),
        };
        if taken == Err(AcquireTimeoutError::Timeout) {
            // Relaxed: a statistic.
            self.timeouts.fetch_add(1, Ordering::Relaxed);
        }
        taken
    }

    fn wait_barging(
        &self,
        free: &FreeList,
        cache: Option<&Cache>,
        peak: &AtomicU32,
        deadline: Option<Instant>,
    ) -> Result<u32, AcquireTimeoutError> {
        if SPIN_BEFORE_PARK {
            // A short, bounded spin: a slot released within a few hundred
            // nanoseconds is taken without the cost of parking. Cache owners
            // flush to the free list while this thread is counted.
            let backoff = Backoff::new();
            while !backoff.is_completed() {
                if let Some(taken) = pop(free, peak) {
                    return Ok(taken);
                }
                backoff.snooze();
            }
        }
        loop {
            if let Some(taken) = pop(free, peak) {
                return Ok(taken);
            }
            // Register before setting the flag: see the module docs.
            let listener = self.event.listen();
            match free.register_waiter() {
                // Dropping the listener passes on any notification it got.
                Register::Available => continue,
                Register::Closed => return Err(AcquireTimeoutError::Closed),
                Register::Parked => {}
            }
            // Slots parked in caches go to the free list (waking a waiter,
            // perhaps this one) before this thread parks.
            if let Some(cache) = cache {
                let swept = cache.sweep(free, self, true);
                if swept.moved > 0 {
                    continue;
                }
                if swept.contended {
                    // Another revoker held a non-empty cache, and may leave
                    // it alone (its owner was busy) after this thread's
                    // barrier: look again instead of parking.
                    crate::sync::yield_now();
                    continue;
                }
            }
            match deadline {
                None => listener.wait(),
                Some(deadline) => {
                    if listener.wait_deadline(deadline).is_none() {
                        // One last look: a slot may have been freed just now.
                        return pop(free, peak).ok_or(if free.is_closed() {
                            AcquireTimeoutError::Closed
                        } else {
                            AcquireTimeoutError::Timeout
                        });
                    }
                }
            }
        }
    }

    fn wait_fair(
        &self,
        tickets: &Tickets,
        free: &FreeList,
        peak: &AtomicU32,
        deadline: Option<Instant>,
    ) -> Result<u32, AcquireTimeoutError> {
        let ticket = loop {
            if let Some(taken) = pop(free, peak) {
                return Ok(taken);
            }
            match self.enqueue(tickets, free, THREAD) {
                Enqueue::Queued(ticket) => break ticket,
                Enqueue::Available => continue,
                Enqueue::Closed => return Err(AcquireTimeoutError::Closed),
            }
        };
        let outcome = self.wait_ticket(tickets, free, &ticket, deadline);
        // Release: a statistic here (fair pools have no caches).
        self.waiting.fetch_sub(THREAD, Ordering::Release);
        outcome
    }

    /// Blocks on a queued ticket until it is served or `deadline` passes.
    fn wait_ticket(
        &self,
        tickets: &Tickets,
        free: &FreeList,
        ticket: &Arc<Ticket>,
        deadline: Option<Instant>,
    ) -> Result<u32, AcquireTimeoutError> {
        loop {
            if let Some(outcome) = ticket.outcome() {
                return outcome.map_err(Into::into);
            }
            // Listen, then look again: `hand_off` and `close` store the
            // outcome before they notify.
            let listener = ticket.event.listen();
            if let Some(outcome) = ticket.outcome() {
                return outcome.map_err(Into::into);
            }
            match deadline {
                None => listener.wait(),
                Some(deadline) => {
                    if listener.wait_deadline(deadline).is_none() {
                        // Leave the queue, unless the ticket was served
                        // meanwhile: then the slot (or the close) is ours.
                        return match self.leave(tickets, free, ticket) {
                            Some(outcome) => outcome.map_err(Into::into),
                            None => Err(AcquireTimeoutError::Timeout),
                        };
                    }
                }
            }
        }
    }

    /// Fair pools: queues a new ticket if the list is empty and the pool
    /// open, and then counts the waiter (`THREAD` or `TASK`) in `waiting`
    /// until it leaves (so the live counts never show a fair waiter that is
    /// not queued yet).
    fn enqueue(&self, tickets: &Tickets, free: &FreeList, waiter: u64) -> Enqueue {
        // Allocated before the lock, so that the lock is held only for the
        // CAS and the push.
        let ticket = Arc::new(Ticket::new());
        let mut queue = Self::lock(tickets);
        match free.register_waiter() {
            Register::Available => Enqueue::Available,
            Register::Closed => Enqueue::Closed,
            Register::Parked => {
                queue.push_back(Arc::clone(&ticket));
                // Relaxed: a statistic (fair pools have no caches), ordered
                // with the queue by the lock.
                self.waiting.fetch_add(waiter, Ordering::Relaxed);
                Enqueue::Queued(ticket)
            }
        }
    }

    /// Fair pools: takes `ticket` out of the queue for a waiter that gives
    /// up. `None` if it was still waiting (it is gone now); its outcome if
    /// it was served meanwhile, which the caller now owns.
    fn leave(
        &self,
        tickets: &Tickets,
        free: &FreeList,
        ticket: &Arc<Ticket>,
    ) -> Option<Result<u32, AcquireError>> {
        let mut queue = Self::lock(tickets);
        // Under the lock the outcome is final: it is written under it.
        if let Some(outcome) = ticket.outcome() {
            return Some(outcome);
        }
        let position = queue.iter().position(|t| Arc::ptr_eq(t, ticket));
        debug_assert!(position.is_some(), "a waiting ticket is queued");
        if let Some(position) = position {
            queue.remove(position);
        }
        if queue.is_empty() {
            free.clear_waiters_locked();
        }
        None
    }

    /// Gives back the slot `index`, owned by the caller: pushes it and
    /// wakes a waiter if one waits, or, in a fair pool with waiters, hands
    /// it to the first.
    #[inline]
    pub(crate) fn release(&self, free: &FreeList, index: u32) {
        match &self.tickets {
            None => {
                let pushed = free.push(index);
                self.wake_after(free, pushed, 1);
            }
            Some(tickets) => {
                if free.push_unless_waiters(index).is_none() {
                    self.hand_off(tickets, free, index);
                }
            }
        }
    }

    /// Fair pools: gives `index` to the first queued ticket, or pushes it if
    /// none is left.
    #[cold]
    fn hand_off(&self, tickets: &Tickets, free: &FreeList, index: u32) {
        let mut queue = Self::lock(tickets);
        let first = if cfg!(all(loom, tagpool_loom_fair_keep_ticket)) {
            // Loom-only fault injection: the ticket stays queued after it
            // is served, and is served again.
            queue.front().cloned()
        } else {
            queue.pop_front()
        };
        match first {
            Some(ticket) => {
                if queue.is_empty() {
                    free.clear_waiters_locked();
                }
                // Release: pairs with the Acquire load in `Ticket::outcome`:
                // the slot and its value are the waiter's from here on.
                ticket.state.store(index, Ordering::Release);
                drop(queue);
                // Outside the lock: the wake-up may run a task's waker.
                ticket.event.notify(1);
            }
            None => free.push_clearing_waiters(index),
        }
    }

    /// Wakes up to `pushed_count` more waiters after a push of that many
    /// slots that saw the waiter flag (`pushed.waiters`); nothing otherwise.
    /// Barging pools only: a fair pool never pushes onto the flag.
    #[inline]
    pub(crate) fn wake_after(&self, free: &FreeList, pushed: Pushed, pushed_count: u32) {
        if pushed.waiters {
            self.wake(free, pushed.head, pushed_count);
        }
    }

    /// Wakes `n` more waiters; `head` is the word the push wrote.
    #[cold]
    fn wake(&self, free: &FreeList, head: u64, n: u32) {
        // `notify_additional` wakes listeners that were not notified yet, and
        // with event-listener's `std` feature its count is exact. Its SeqCst
        // fence makes a waiter's listener visible here, and so does the
        // AcqRel pair of its flag CAS and this thread's push (see "What
        // orders a waiter's listener" in the module docs).
        if self.event.notify_additional(n as usize) < n as usize {
            // Every parked waiter was notified already: the flag can go.
            free.clear_waiters(head);
        }
    }

    /// Polls an async acquire that found no slot on its first try.
    pub(crate) fn poll_wait(
        &self,
        wait: &mut AsyncWait,
        free: &FreeList,
        cache: Option<&Cache>,
        peak: &AtomicU32,
        cx: &mut Context<'_>,
    ) -> Poll<Result<u32, AcquireError>> {
        let polled = match &self.tickets {
            None => {
                if !wait.counted {
                    wait.counted = true;
                    // Relaxed: a statistic.
                    self.async_waits.fetch_add(1, Ordering::Relaxed);
                    // SeqCst: as in `pop_waiting`.
                    self.waiting.fetch_add(TASK, Ordering::SeqCst);
                }
                self.poll_barging(wait, free, cache, peak, cx)
            }
            // Counts the task once it is queued (see `enqueue`).
            Some(tickets) => self.poll_fair(wait, tickets, free, peak, cx),
        };
        if polled.is_ready() {
            wait.listener = None;
            wait.ticket = None;
            if wait.counted {
                wait.counted = false;
                // Release: as in `pop_waiting`.
                self.waiting.fetch_sub(TASK, Ordering::Release);
            }
        }
        polled
    }

    fn poll_barging(
        &self,
        wait: &mut AsyncWait,
        free: &FreeList,
        cache: Option<&Cache>,
        peak: &AtomicU32,
        cx: &mut Context<'_>,
    ) -> Poll<Result<u32, AcquireError>> {
        loop {
            if let Some(listener) = wait.listener.as_mut() {
                // Registers the task's waker, or finds the notification.
                if Pin::new(listener).poll(cx).is_pending() {
                    return Poll::Pending;
                }
                wait.listener = None;
            }
            if let Some(taken) = pop(free, peak) {
                return Poll::Ready(Ok(taken));
            }
            // Register before setting the flag: see the module docs.
            let listener = self.event.listen();
            match free.register_waiter() {
                // Dropping the listener passes on any notification it got.
                Register::Available => continue,
                Register::Closed => return Poll::Ready(Err(AcquireError::Closed)),
                Register::Parked => {}
            }
            if let Some(cache) = cache {
                let swept = cache.sweep(free, self, true);
                if swept.moved > 0 {
                    continue;
                }
                if swept.contended {
                    // As in `wait_barging`: look again, after letting the
                    // executor run something else.
                    drop(listener);
                    cx.waker().wake_by_ref();
                    return Poll::Pending;
                }
            }
            wait.listener = Some(listener);
            if cfg!(all(loom, tagpool_loom_async_no_poll_listener)) {
                // Loom-only fault injection: pending without registering
                // the task's waker.
                return Poll::Pending;
            }
        }
    }

    fn poll_fair(
        &self,
        wait: &mut AsyncWait,
        tickets: &Tickets,
        free: &FreeList,
        peak: &AtomicU32,
        cx: &mut Context<'_>,
    ) -> Poll<Result<u32, AcquireError>> {
        loop {
            let ticket = match &wait.ticket {
                Some(ticket) => ticket,
                None => {
                    if let Some(taken) = pop(free, peak) {
                        return Poll::Ready(Ok(taken));
                    }
                    match self.enqueue(tickets, free, TASK) {
                        Enqueue::Queued(ticket) => {
                            wait.counted = true;
                            // Relaxed: a statistic.
                            self.async_waits.fetch_add(1, Ordering::Relaxed);
                            wait.ticket = Some(ticket);
                        }
                        Enqueue::Available => {}
                        Enqueue::Closed => return Poll::Ready(Err(AcquireError::Closed)),
                    }
                    continue;
                }
            };
            if let Some(outcome) = ticket.outcome() {
                return Poll::Ready(outcome);
            }
            match wait.listener.as_mut() {
                // Listen, then look again (see `wait_fair`).
                None => wait.listener = Some(ticket.event.listen()),
                Some(listener) => {
                    if Pin::new(listener).poll(cx).is_pending() {
                        return Poll::Pending;
                    }
                    wait.listener = None;
                }
            }
        }
    }

    /// Ends the wait of an async acquire whose future is dropped before it
    /// got a slot. Returns a slot that a fair hand-off gave it meanwhile,
    /// which the caller must give back ([`release`](Self::release)): so a
    /// cancelled waiter never strands a slot or a wake-up.
    pub(crate) fn cancel(&self, wait: &mut AsyncWait, free: &FreeList) -> Option<u32> {
        if !wait.counted {
            return None;
        }
        wait.counted = false;
        // Relaxed: a statistic.
        self.cancelled.fetch_add(1, Ordering::Relaxed);
        if let Some(listener) = wait.listener.take() {
            if cfg!(all(loom, tagpool_loom_cancel_discards)) {
                // Loom-only fault injection: a cancelled waiter that keeps
                // the wake-up it received.
                let _ = listener.discard();
            } else {
                // Dropping a notified listener passes its notification on
                // to the next listener.
                drop(listener);
            }
        }
        let handed = match (wait.ticket.take(), &self.tickets) {
            (Some(ticket), Some(tickets)) => match self.leave(tickets, free, &ticket) {
                // Loom-only fault injection: a cancelled fair waiter that
                // drops the slot it was handed.
                Some(Ok(_)) if cfg!(all(loom, tagpool_loom_cancel_drops_slot)) => None,
                Some(Ok(index)) => Some(index),
                _ => None,
            },
            _ => None,
        };
        // Release: as in `pop_waiting`.
        self.waiting.fetch_sub(TASK, Ordering::Release);
        handed
    }

    /// Closes the pool: see "Closing" in the module docs. Returns whether
    /// this call closed it. Every call returns only once the close is
    /// complete: no cache holds a slot and every waiter is woken.
    pub(crate) fn close(&self, free: &FreeList, cache: Option<&Cache>) -> bool {
        let closed_now = match &self.tickets {
            None => free.close(),
            Some(tickets) => {
                let mut queue = Self::lock(tickets);
                let closed_now = free.close();
                let served: Vec<Arc<Ticket>> = queue.drain(..).collect();
                free.clear_waiters_locked();
                for ticket in &served {
                    // Release: pairs with the Acquire load in
                    // `Ticket::outcome`.
                    ticket.state.store(TICKET_CLOSED, Ordering::Release);
                }
                drop(queue);
                for ticket in served {
                    if !cfg!(all(loom, tagpool_loom_close_no_notify)) {
                        ticket.event.notify(1);
                    }
                }
                closed_now
            }
        };
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

/// Pops the free list, recording the peak.
fn pop(free: &FreeList, peak: &AtomicU32) -> Option<u32> {
    free.pop().map(|p| {
        note_peak(peak, free.capacity() - p.free);
        p.index
    })
}
