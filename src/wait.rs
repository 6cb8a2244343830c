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
//! notified) and sees the waiter's listener (see below). So each push made while a thread is parked notifies a
//! listener that has not been notified yet, and a notified listener that is
//! dropped without being used (a timed-out waiter) passes its notification
//! on. When nobody waits, a release does no work at all beyond its CAS: the
//! flag travels in the word the CAS already reads.
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
//! that changes only when threads start or stop waiting) before its spin,
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
//! Parked waiters are notified in the order they registered (FIFO), but a
//! woken waiter competes with every thread that pops at that moment, so a
//! thread that just arrived can take the slot first (barging). A waiter that
//! loses registers again at the back of the queue. There is no starvation
//! bound: a steady stream of arriving threads can keep a waiter waiting.

use std::time::Instant;

use crossbeam_utils::Backoff;
use event_listener::{Event, Listener};

use crossbeam_utils::CachePadded;

use crate::cache::{note_peak, Cache};
use crate::free_list::{FreeList, Pushed, Register};
use crate::sync::{AtomicU32, AtomicU64, Ordering, SPIN_BEFORE_PARK};

/// Threads waiting for a slot, and how often they had to.
#[derive(Debug)]
pub(crate) struct WaitQueue {
    event: Event,
    /// Threads inside a waiting acquire right now. Cache owners read it
    /// after every operation, so it sits on a line of its own that changes
    /// only when a thread starts or stops waiting.
    waiting: CachePadded<AtomicU32>,
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
            waiting: CachePadded::new(AtomicU32::new(0)),
            waits: AtomicU64::new(0),
            timeouts: AtomicU64::new(0),
        }
    }

    pub(crate) fn waits(&self) -> u64 {
        // Relaxed: a statistic.
        self.waits.load(Ordering::Relaxed)
    }

    /// Whether a thread is waiting now; the cache owners' side of the pair
    /// described in the module docs. The caller has just run a light
    /// barrier (`Magazine::exit_with`).
    #[inline(always)]
    pub(crate) fn waiting(&self) -> bool {
        // Relaxed: ordered after the caller's `state` store by its light
        // barrier; pairs with the waiter's increment and heavy barrier.
        self.waiting.load(Ordering::Relaxed) != 0
    }

    pub(crate) fn timeouts(&self) -> u64 {
        // Relaxed: a statistic.
        self.timeouts.load(Ordering::Relaxed)
    }

    /// Takes a slot, waiting until `deadline` (forever with `None`).
    ///
    /// Returns `None` only when the deadline passed.
    #[cold]
    pub(crate) fn pop_waiting(
        &self,
        free: &FreeList,
        cache: Option<&Cache>,
        peak: &AtomicU32,
        deadline: Option<Instant>,
    ) -> Option<u32> {
        // Relaxed: a statistic.
        self.waits.fetch_add(1, Ordering::Relaxed);
        // Only cache owners read the count: a pool without caches skips it.
        let Some(counted) = cache else {
            return self.wait_for_slot(free, None, peak, deadline);
        };
        // SeqCst: the waiter's side of the pair in the module docs (the heavy
        // barrier in `Cache::sweep` follows before any stack is read).
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let taken = self.wait_for_slot(free, Some(counted), peak, deadline);
        // Release: nothing to publish; owners stop flushing once it is 0.
        self.waiting.fetch_sub(1, Ordering::Release);
        taken
    }

    fn wait_for_slot(
        &self,
        free: &FreeList,
        cache: Option<&Cache>,
        peak: &AtomicU32,
        deadline: Option<Instant>,
    ) -> Option<u32> {
        let pop = || {
            free.pop().map(|p| {
                note_peak(peak, free.capacity() - p.free);
                p.index
            })
        };
        if SPIN_BEFORE_PARK {
            // A short, bounded spin: a slot released within a few hundred
            // nanoseconds is taken without the cost of parking. Cache owners
            // flush to the free list while this thread is counted.
            let backoff = Backoff::new();
            while !backoff.is_completed() {
                if let Some(taken) = pop() {
                    return Some(taken);
                }
                backoff.snooze();
            }
        }
        loop {
            if let Some(taken) = pop() {
                return Some(taken);
            }
            // Register before setting the flag: see the module docs.
            let listener = self.event.listen();
            if free.register_waiter() == Register::Available {
                // Dropping the listener passes on any notification it got.
                continue;
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
                        let last = pop();
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

    /// Wakes up to `pushed_count` more waiters after a push of that many
    /// slots that saw the waiter flag (`pushed.waiters`); nothing otherwise.
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
}
