//! The slow path: waiting for a slot when the pool is empty.
//!
//! # Protocol
//!
//! Waiting adds one bit to the free list's head word, the *waiter flag*, and
//! an [`event_listener::Event`] that parked threads listen on.
//!
//! - A waiter first registers a listener, then sets the flag with a CAS that
//!   succeeds only while the list is empty ([`FreeList::register_waiter`]),
//!   and only then parks. If the list is not empty it pops instead.
//! - A release pushes its slot with one CAS as always. If the head it
//!   replaced carried the flag, it notifies one more listener. If no listener
//!   was left to notify, it clears the flag with a CAS from the exact head it
//!   wrote, which fails (leaving the flag set) if anything happened since.
//!
//! No lost wake-up: a waiter parks only after its CAS set the flag on an
//! empty list. Every later push reads the flag from the value its own CAS
//! replaced (the flag is cleared only by a release that found every listener
//! notified) and, through the AcqRel pair of the two CASes, sees the
//! waiter's listener. So each push made while a thread is parked notifies a
//! listener that has not been notified yet, and a notified listener that is
//! dropped without being used (a timed-out waiter) passes its notification
//! on. When nobody waits, a release does no work at all beyond its CAS: the
//! flag travels in the word the CAS already reads.
//!
//! # Fairness
//!
//! Parked waiters are notified in the order they registered (FIFO), but a
//! woken waiter competes with every thread that pops at that moment, so a
//! thread that just arrived can take the slot first (barging). A waiter that
//! loses registers again at the back of the queue. There is no starvation
//! bound: a steady stream of arriving threads can keep a waiter waiting.

use std::time::Instant;

use crossbeam_utils::Backoff;
use event_listener::{Event, Listener};

use crate::free_list::{FreeList, Popped, Register};
use crate::sync::{AtomicU64, Ordering, SPIN_BEFORE_PARK};

/// Threads waiting for a slot, and how often they had to.
#[derive(Debug)]
pub(crate) struct WaitQueue {
    event: Event,
    /// Waiting acquires that found the pool empty (and so spun, then parked
    /// unless a slot came free first).
    waits: AtomicU64,
    /// Waits that ended at their deadline without a slot.
    timeouts: AtomicU64,
}

impl WaitQueue {
    pub(crate) fn new() -> Self {
        Self {
            event: Event::new(),
            waits: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
        }
    }

    pub(crate) fn waits(&self) -> u64 {
        // Relaxed: a statistic.
        self.waits.load(Ordering::Relaxed)
    }

    pub(crate) fn timeouts(&self) -> u64 {
        // Relaxed: a statistic.
        self.timeouts.load(Ordering::Relaxed)
    }

    /// Pops a slot, waiting until `deadline` (forever with `None`).
    ///
    /// Returns `None` only when the deadline passed.
    #[cold]
    pub(crate) fn pop_waiting(&self, free: &FreeList, deadline: Option<Instant>) -> Option<Popped> {
        // Relaxed: a statistic.
        self.waits.fetch_add(1, Ordering::Relaxed);
        if SPIN_BEFORE_PARK {
            // A short, bounded spin: a slot released within a few hundred
            // nanoseconds is taken without the cost of parking.
            let backoff = Backoff::new();
            while !backoff.is_completed() {
                if let Some(popped) = free.pop() {
                    return Some(popped);
                }
                backoff.snooze();
            }
        }
        loop {
            if let Some(popped) = free.pop() {
                return Some(popped);
            }
            // Register before setting the flag: see the module docs.
            let listener = self.event.listen();
            if free.register_waiter() == Register::Available {
                // Dropping the listener passes on any notification it got.
                continue;
            }
            match deadline {
                None => listener.wait(),
                Some(deadline) => {
                    if listener.wait_deadline(deadline).is_none() {
                        // One last look: a slot may have been freed just now.
                        let last = free.pop();
                        if last.is_none() {
                            // Relaxed: a statistic.
                            self.timeouts.fetch_add(1, Ordering::Relaxed);
                        }
                        return last;
                    }
                }
            }
        }
    }

    /// Wakes one more waiter after a push that saw the waiter flag; `head` is
    /// the word that push wrote.
    #[cold]
    pub(crate) fn wake_one(&self, free: &FreeList, head: u64) {
        // `notify_additional` wakes a listener that was not notified yet, and
        // with event-listener's `std` feature its count is exact. A waiter's
        // listener is visible here through the AcqRel pair of its flag CAS
        // and this thread's push; the call's own SeqCst fence is extra.
        if self.event.notify_additional(1) == 0 {
            // Every parked waiter was notified already: the flag can go.
            free.clear_waiters(head);
        }
    }
}
