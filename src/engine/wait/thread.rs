//! Waiting threads: the blocking and timed waits, barging (a listener on
//! the event) or fair (a ticket in the FIFO queue), and the starvation
//! bound that turns a barging waiter into a queued one.

use std::time::Instant;

use crossbeam_utils::Backoff;
use event_listener::Listener;

use super::{earliest, Starve, Take, WaitQueue, THREAD};
use crate::engine::cache::{note_peak, Cache};
use crate::engine::fair::{Enqueue, Ticket, Wake};
use crate::engine::free_list::{FreeList, Register};
use crate::error::{AcquireError, AcquireTimeoutError};
use crate::sync::{ModelArc as Arc, Ordering, REAL_TIME, SPIN_BEFORE_PARK};

impl WaitQueue {
    /// Takes a slot, blocking until `deadline` (forever with `None`).
    #[cold]
    pub(crate) fn pop_waiting(
        &self,
        free: &FreeList,
        cache: Option<&Cache>,
        take: &Take<'_>,
        deadline: Option<Instant>,
    ) -> Result<u32, AcquireTimeoutError> {
        // Relaxed: a statistic.
        self.waits.fetch_add(1, Ordering::Relaxed);
        let since = Self::start_timing();
        let taken = if self.fair {
            self.wait_fair(free, take, deadline)
        } else {
            // SeqCst: the waiter's side of the pair in the module docs
            // (the heavy barrier in `Cache::sweep` follows before any
            // stack is read).
            self.waiting.fetch_add(THREAD, Ordering::SeqCst);
            let taken = self.wait_barging(free, cache, take, deadline);
            self.uncount(THREAD);
            taken
        };
        if taken == Err(AcquireTimeoutError::Timeout) {
            // Release: a statistic, published after the wait's count (see
            // `counts`).
            self.timeouts.fetch_add(1, Ordering::Release);
        }
        self.end_timing(since);
        taken
    }

    pub(super) fn wait_barging(
        &self,
        free: &FreeList,
        cache: Option<&Cache>,
        take: &Take<'_>,
        deadline: Option<Instant>,
    ) -> Result<u32, AcquireTimeoutError> {
        let starve = Starve::start();
        if SPIN_BEFORE_PARK {
            // A short, bounded spin: a slot released within a few hundred
            // nanoseconds is taken without the cost of parking. Cache owners
            // flush to the free list while this thread is counted.
            let backoff = Backoff::new();
            while !backoff.is_completed() {
                if let Some(taken) = take.pop(free) {
                    return Ok(taken);
                }
                backoff.snooze();
            }
        }
        // Times this thread parked as a listener (the loom rule of `Starve`).
        let mut rounds = 0;
        loop {
            if let Some(taken) = take.pop(free) {
                return Ok(taken);
            }
            if starve.reached(rounds) {
                // Waited long enough: queue for a hand-off instead.
                return self.wait_starving(free, cache, take, deadline);
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
            // perhaps this one) before this thread parks. One sweep is
            // enough: it takes over any other revoker's claim, and a stack
            // another revoker is moving reaches the free list by a push
            // that notifies (see `engine/cache`).
            if let Some(cache) = cache {
                if cache.sweep_waiter(free, self).moved > 0 {
                    continue;
                }
            }
            rounds += 1;
            // Until notified, or until this thread starves or times out.
            match earliest(deadline, starve.at) {
                None => listener.wait(),
                Some(until) => {
                    // Under loom, event-listener cannot wait with a
                    // deadline; one that has passed (a zero timeout, the
                    // only kind the models use) needs no wait anyway.
                    let passed = !REAL_TIME && Instant::now() >= until;
                    let notified = !passed && listener.wait_deadline(until).is_some();
                    let timed_out =
                        !notified && deadline.map_or(false, |deadline| Instant::now() >= deadline);
                    if timed_out {
                        // One last look: a slot may have been freed just now.
                        return take.pop(free).ok_or(if free.is_closed() {
                            AcquireTimeoutError::Closed
                        } else {
                            AcquireTimeoutError::Timeout
                        });
                    }
                    // Dropping a listener that was not notified changes
                    // nothing; the loop looks again, and this thread
                    // starves if its time has come.
                }
            }
        }
    }

    /// A blocked waiter of a barging pool that has starved: queues a
    /// ticket, which the next release serves (see "Starvation bound" in
    /// the module docs). The thread stays counted in `waiting`, so cache
    /// owners keep flushing to the free list.
    #[cold]
    pub(super) fn wait_starving(
        &self,
        free: &FreeList,
        cache: Option<&Cache>,
        take: &Take<'_>,
        deadline: Option<Instant>,
    ) -> Result<u32, AcquireTimeoutError> {
        let ticket = Ticket::new(Wake::Thread(crate::sync::current()));
        loop {
            if let Some(taken) = take.pop(free) {
                return Ok(taken);
            }
            match self.enqueue_starving(free, &ticket) {
                Enqueue::Queued => break,
                Enqueue::Available => {}
                Enqueue::Closed => return Err(AcquireTimeoutError::Closed),
            }
        }
        let outcome = self.wait_ticket(&ticket, free, cache, deadline);
        self.starving_left();
        match outcome {
            Some(Ok(index)) => {
                note_peak(take.peak, ticket.in_use());
                Ok(index)
            }
            Some(Err(closed)) => Err(closed.into()),
            // Left the queue at the deadline: one last look.
            None => take.pop(free).ok_or(if free.is_closed() {
                AcquireTimeoutError::Closed
            } else {
                AcquireTimeoutError::Timeout
            }),
        }
    }

    /// Queues the ticket of a starving waiter of a barging pool, counted in
    /// `starving` first (see "Starvation bound" in the module docs). On
    /// `Queued`, the caller ends with [`starving_left`](Self::starving_left)
    /// once the ticket has left the queue; otherwise it is uncounted here.
    pub(super) fn enqueue_starving(&self, free: &FreeList, ticket: &Arc<Ticket>) -> Enqueue {
        // Loom-only fault injection (`tagpool_loom_starving_late`): a count
        // taken after the flag CAS, which a release may miss.
        let late = cfg!(all(loom, tagpool_loom_starving_late));
        if !late {
            // Relaxed: counted before the flag CAS in `enqueue`, whose
            // Release half publishes it to any release whose push CAS reads
            // the flag from that CAS or a later word (Acquire).
            self.starving.fetch_add(1, Ordering::Relaxed);
        }
        let queued = self.tickets.enqueue(free, ticket);
        if late {
            // Relaxed: the fault above.
            self.starving.fetch_add(1, Ordering::Relaxed);
        }
        if !matches!(queued, Enqueue::Queued) {
            // Relaxed: no ticket was queued.
            self.starving.fetch_sub(1, Ordering::Relaxed);
        }
        queued
    }

    /// Uncounts a starving waiter whose ticket has left the queue (it was
    /// served, or left under the lock).
    pub(super) fn starving_left(&self) {
        // Release: a release that reads this no longer needs to look for
        // the ticket; nothing else to publish.
        self.starving.fetch_sub(1, Ordering::Release);
    }

    /// Waits for the queued `ticket` of a starving waiter to be served, or
    /// leaves the queue at `deadline` (`None` then).
    pub(super) fn wait_ticket(
        &self,
        ticket: &Arc<Ticket>,
        free: &FreeList,
        cache: Option<&Cache>,
        deadline: Option<Instant>,
    ) -> Option<Result<u32, AcquireError>> {
        // Slots parked in caches go to the free list, and each push serves
        // the first ticket. One sweep is enough (as in `wait_barging`).
        if let Some(cache) = cache {
            if ticket.outcome().is_none() {
                cache.sweep_waiter(free, self);
            }
        }
        if SPIN_BEFORE_PARK {
            // The thread is running, and the slot's holder releases it soon
            // (it holds it while others starve): a spin here takes the
            // hand-off without the wake-up that a parked ticket would cost.
            let backoff = Backoff::new();
            while !backoff.is_completed() {
                if let Some(outcome) = ticket.outcome() {
                    return Some(outcome);
                }
                backoff.snooze();
            }
        }
        loop {
            // `serve` stores the outcome, then unparks this thread; a
            // spurious wake-up just looks again.
            if let Some(outcome) = ticket.outcome() {
                return Some(outcome);
            }
            if crate::sync::park_until(deadline) {
                // Leave the queue, unless the ticket was served meanwhile:
                // then the slot (or the close) is ours.
                return self.tickets.leave(free, ticket);
            }
        }
    }

    pub(super) fn wait_fair(
        &self,
        free: &FreeList,
        take: &Take<'_>,
        deadline: Option<Instant>,
    ) -> Result<u32, AcquireTimeoutError> {
        let ticket = Ticket::new(Wake::Thread(crate::sync::current()));
        loop {
            if let Some(taken) = take.pop(free) {
                return Ok(taken);
            }
            match self.tickets.enqueue(free, &ticket) {
                Enqueue::Queued => break,
                Enqueue::Available => continue,
                Enqueue::Closed => return Err(AcquireTimeoutError::Closed),
            }
        }
        // Relaxed: a statistic (fair pools have no caches).
        self.waiting.fetch_add(THREAD, Ordering::Relaxed);
        let outcome = loop {
            // `hand_off` and `close` store the outcome, then unpark this
            // thread; a spurious wake-up just looks again.
            if let Some(outcome) = ticket.outcome() {
                break outcome.map_err(Into::into);
            }
            if crate::sync::park_until(deadline) {
                // Leave the queue, unless the ticket was served meanwhile:
                // then the slot (or the close) is ours.
                break match self.tickets.leave(free, &ticket) {
                    // Loom-only fault injection: a timed-out waiter that
                    // drops the slot its ticket was handed as it left.
                    Some(Ok(_)) if cfg!(all(loom, tagpool_loom_timeout_drops_slot)) => {
                        Err(AcquireTimeoutError::Timeout)
                    }
                    Some(outcome) => outcome.map_err(Into::into),
                    None => Err(AcquireTimeoutError::Timeout),
                };
            }
        };
        // Relaxed: as above.
        self.waiting.fetch_sub(THREAD, Ordering::Relaxed);
        if outcome.is_ok() {
            // A hand-off took nothing out of the list: the slots held
            // then, as the serving thread counted them.
            note_peak(take.peak, ticket.in_use());
        }
        outcome
    }
}
