//! Waiting tasks: polling an async acquire, barging or fair, and cancelling
//! one (a dropped future).

use std::task::{Context, Poll};

use super::{AsyncWait, Take, WaitQueue, TASK};
use crate::engine::cache::{note_peak, Cache};
use crate::engine::fair::{Enqueue, Ticket, Wake};
use crate::engine::free_list::FreeList;
use crate::error::AcquireError;
use crate::sync::{ModelArc as Arc, Ordering};

impl WaitQueue {
    /// Polls an async acquire that found no slot on its first try.
    pub(crate) fn poll_wait(
        &self,
        wait: &mut AsyncWait,
        free: &FreeList,
        cache: Option<&Cache>,
        take: &Take<'_>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<u32, AcquireError>> {
        let polled = if self.fair {
            // Counts the task once it is queued (see `enqueue`).
            self.poll_fair(wait, free, take, cx)
        } else {
            if !wait.counted {
                wait.counted = true;
                wait.since = Self::start_timing();
                // Relaxed: a statistic.
                self.async_waits.fetch_add(1, Ordering::Relaxed);
                // SeqCst: as in `pop_waiting`.
                self.waiting.fetch_add(TASK, Ordering::SeqCst);
            }
            self.poll_barging(wait, free, cache, take, cx)
        };
        if polled.is_ready() {
            if wait.ticket.take().is_some() && !self.fair {
                // A starving task's ticket has left the queue: it was
                // served (or the pool closed under it).
                self.starving_left();
            }
            if wait.counted {
                wait.counted = false;
                self.uncount(TASK);
                self.end_timing(wait.since.take());
            }
        }
        polled
    }

    /// A barging pool's task that found no slot: it queues a ticket with
    /// its waker at once, counted as starving (see "Async waits" in the
    /// module docs), and is served by the releases that follow.
    pub(super) fn poll_barging(
        &self,
        wait: &mut AsyncWait,
        free: &FreeList,
        cache: Option<&Cache>,
        take: &Take<'_>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<u32, AcquireError>> {
        let outcome = match &wait.ticket {
            // Polled again before it was served (a spurious wake-up, or a
            // `select!` polling every branch), or after: keep the current
            // waker, or take the outcome.
            Some(ticket) => match ticket.outcome() {
                Some(outcome) => Some(outcome),
                None => self.tickets.register(ticket, cx.waker()),
            },
            None => {
                let mut fresh = None;
                let ticket = loop {
                    if let Some(taken) = take.pop(free) {
                        return Poll::Ready(Ok(taken));
                    }
                    // Made once, when a pop first fails (see `new_ticket`).
                    let ticket = fresh.get_or_insert_with(|| new_ticket(cx));
                    match self.enqueue_starving(free, ticket) {
                        Enqueue::Queued => break fresh.take().expect("just queued"),
                        Enqueue::Available => {}
                        Enqueue::Closed => return Poll::Ready(Err(AcquireError::Closed)),
                    }
                };
                let ticket = wait.ticket.insert(ticket);
                // Slots parked in caches go to the free list, and each push
                // serves the first ticket (as in `wait_ticket`); nothing to
                // do while a counted waiter's sweep covers the pool. One
                // sweep is enough: it takes over any other revoker's claim,
                // and a stack another revoker is moving reaches the free
                // list by a push that serves this ticket (see
                // `engine/cache`), so the task never needs to look again.
                if let Some(cache) = cache {
                    cache.sweep_waiter(free, self);
                }
                // Queued with this task's waker: a hand-off since then left
                // its outcome, else the next one wakes the task.
                ticket.outcome()
            }
        };
        match outcome {
            Some(Ok(index)) => {
                let ticket = wait.ticket.as_ref().expect("served through its ticket");
                note_peak(take.peak, ticket.in_use());
                Poll::Ready(Ok(index))
            }
            Some(Err(closed)) => Poll::Ready(Err(closed)),
            None => Poll::Pending,
        }
    }

    pub(super) fn poll_fair(
        &self,
        wait: &mut AsyncWait,
        free: &FreeList,
        take: &Take<'_>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<u32, AcquireError>> {
        if wait.ticket.is_none() {
            let mut fresh = None;
            loop {
                if let Some(taken) = take.pop(free) {
                    return Poll::Ready(Ok(taken));
                }
                // Made once, when a pop first fails (see `new_ticket`).
                let ticket = fresh.get_or_insert_with(|| new_ticket(cx));
                match self.tickets.enqueue(free, ticket) {
                    Enqueue::Queued => {
                        wait.counted = true;
                        wait.since = Self::start_timing();
                        // Relaxed: statistics (fair pools have no caches).
                        self.async_waits.fetch_add(1, Ordering::Relaxed);
                        self.waiting.fetch_add(TASK, Ordering::Relaxed);
                        wait.ticket = fresh.take();
                        // Queued with this task's waker: nothing to look at
                        // until it is woken.
                        return Poll::Pending;
                    }
                    Enqueue::Available => {}
                    Enqueue::Closed => return Poll::Ready(Err(AcquireError::Closed)),
                }
            }
        }
        let ticket = wait.ticket.as_ref().expect("queued on an earlier poll");
        // Polled again before it was served (a spurious wake-up, or a
        // `select!` polling every branch): keep the current waker.
        let outcome = match ticket.outcome() {
            Some(outcome) => outcome,
            None => match self.tickets.register(ticket, cx.waker()) {
                Some(outcome) => outcome,
                None => return Poll::Pending,
            },
        };
        if outcome.is_ok() {
            // A hand-off took nothing out of the list: the slots held
            // then, as the serving thread counted them.
            note_peak(take.peak, ticket.in_use());
        }
        Poll::Ready(outcome)
    }

    /// Ends the wait of an async acquire whose future is dropped before it
    /// got a slot. Returns a slot that a hand-off to its ticket (a fair
    /// pool's, or a starving task's) gave it meanwhile,
    /// which the caller must give back ([`release`](Self::release)): so a
    /// cancelled waiter never strands a slot or a wake-up.
    pub(crate) fn cancel(&self, wait: &mut AsyncWait, free: &FreeList) -> Option<u32> {
        if !wait.counted {
            return None;
        }
        wait.counted = false;
        // Release: a statistic, published after the wait's count (see
        // `counts`).
        self.cancelled.fetch_add(1, Ordering::Release);
        self.end_timing(wait.since.take());
        let handed = match wait.ticket.take() {
            Some(ticket) => {
                let outcome = self.tickets.leave(free, &ticket);
                if !self.fair {
                    // A barging pool's task: its ticket has left the queue.
                    self.starving_left();
                }
                match outcome {
                    // Loom-only fault injection: a cancelled waiter that
                    // drops the slot its ticket was handed.
                    Some(Ok(_)) if cfg!(all(loom, tagpool_loom_cancel_drops_slot)) => None,
                    Some(Ok(index)) => Some(index),
                    _ => None,
                }
            }
            _ => None,
        };
        self.uncount(TASK);
        handed
    }
}

/// A ticket for the polling task, with a clone of its waker: made only
/// once a pop has failed, so that a poll that finds a slot clones and
/// allocates nothing. The clone is user code (see
/// [`unwind::clone_waker`](crate::engine::unwind::clone_waker)); its panic
/// unwinds from the poll with nothing queued, at most the task counted as
/// waiting, which the future's drop uncounts (`cancel`).
fn new_ticket(cx: &Context<'_>) -> Arc<Ticket> {
    Ticket::new(Wake::Task(task_waker(cx)))
}

/// The waker a task's ticket keeps: a clone of the poll's.
fn task_waker(cx: &Context<'_>) -> std::task::Waker {
    let waker = crate::engine::unwind::clone_waker(cx.waker());
    // Loom-only fault injection: a ticket that holds no waker of this
    // task, so nothing wakes it.
    #[cfg(all(loom, tagpool_loom_async_ticket_no_waker))]
    let waker = {
        drop(waker);
        std::task::Waker::noop().clone()
    };
    waker
}
