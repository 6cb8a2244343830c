//! The free list's waiter flag: set by a waiter on an empty list, seen and
//! cleared by pushes, and the close that refuses pops for good.

use super::{cas_stats, FreeList, Pushed, Register, PUSH_SUCCESS};
use crate::sync::Ordering;

impl FreeList {
    /// Sets the waiter flag if the stack is empty and the pool open.
    ///
    /// The caller registers its listener *before* calling this: the CAS then
    /// orders the registration before any push that sees the flag.
    pub(crate) fn register_waiter(&self) -> Register {
        let layout = self.layout;
        // Acquire: a non-empty head is about to be popped (see `pop`).
        let mut head = self.head.word.load(Ordering::Acquire);
        loop {
            // Relaxed: as in `refuses_pop`: a CAS that succeeds read a head
            // at or after the close's tag bump, which orders the flag.
            if self.head.closed.load(Ordering::Relaxed) {
                return Register::Closed;
            }
            // Loom-only fault injection (`tagpool_loom_register_ignores_room`):
            // a waiter that parks whatever room a raise gave.
            let room = !cfg!(all(loom, tagpool_loom_register_ignores_room)) && self.room_to_grow();
            if !layout.is_empty(head) || room {
                // A slot is free, or the pool may grow (a raised bound:
                // see `bound.rs`): pop or grow instead of parking.
                return Register::Available;
            }
            // Always a real CAS, even when the flag is already set: the bumped
            // tag puts this registration in the head's modification order, so
            // the next push synchronizes with it (the second edge; see "What
            // orders a waiter's listener" in `engine/wait`).
            let new = layout.flagged(head, true);
            // AcqRel: Release pairs with the Acquire half of the CAS in `push`
            // (the second edge to the listener registered before this);
            // Acquire as for the load above.
            match self.head.word.compare_exchange_weak(
                head,
                new,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
                    return Register::Parked;
                }
                Err(actual) => {
                    cas_stats::note(cas_stats::OTHER);
                    head = actual;
                }
            }
        }
    }

    /// Clears the waiter flag if the head is still exactly `seen`.
    ///
    /// Called by a releaser whose notification found no listener left to
    /// wake: every parked waiter has been notified already. A failure leaves
    /// the flag set, which only costs a later release a spurious notify.
    ///
    /// While a debt is owed the flag stays (see `bound.rs`): `seen` is the
    /// word the caller's push CAS wrote, whose Acquire half ordered a
    /// lowering's debt before this check if the lowering's announcement
    /// came before; if it came after, the CAS below fails.
    #[cfg(not(all(loom, tagpool_loom_clear_any)))]
    pub(crate) fn clear_waiters(&self, seen: u64) {
        if self.in_debt() {
            return;
        }
        let new = self.layout.flagged(seen, false);
        // Relaxed: this publishes nothing; a waiter that registers meanwhile
        // changes the head and makes this CAS fail.
        let cleared =
            self.head
                .word
                .compare_exchange(seen, new, Ordering::Relaxed, Ordering::Relaxed);
        cas_stats::note(if cleared.is_ok() {
            cas_stats::DONE
        } else {
            cas_stats::OTHER
        });
    }

    /// Loom-only fault injection: clears the flag from whatever the head is
    /// now, losing a waiter that registered after `seen`. The waiting models
    /// must catch it.
    #[cfg(all(loom, tagpool_loom_clear_any))]
    pub(crate) fn clear_waiters(&self, _seen: u64) {
        let mut head = self.head.word.load(Ordering::Relaxed);
        while let Err(actual) = self.head.word.compare_exchange(
            head,
            self.layout.flagged(head, false),
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            head = actual;
        }
    }

    /// Fair mode: pushes `index` unless the waiter flag is set, in which
    /// case the caller keeps it and hands it to the first waiter (see
    /// `engine/wait`). `None` means the flag was set.
    ///
    /// The caller must own `index`.
    #[inline]
    pub(crate) fn push_unless_waiters(&self, index: u32) -> Option<Pushed> {
        let layout = self.layout;
        // Below the capacity: a growth pushes its slots before it publishes
        // them in `allocated`.
        debug_assert!(index < self.capacity());
        // Relaxed: only the value to link below `index`, and a first look at
        // the flag; the CAS decides.
        let mut head = self.head.word.load(Ordering::Relaxed);
        loop {
            if layout.waiters(head) {
                return None;
            }
            // Relaxed: published by the Release CAS below.
            self.link(index)
                .store(layout.index(head), Ordering::Relaxed);
            let new = layout.pushed(head, index);
            // Release: as in `push`. The CAS fails if a waiter set the flag
            // since the load: the flag is part of the word compared.
            match self
                .head
                .word
                .compare_exchange_weak(head, new, PUSH_SUCCESS, Ordering::Relaxed)
            {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
                    self.count_pushed(1);
                    return Some(Pushed {
                        waiters: false,
                        head: new,
                    });
                }
                Err(actual) => {
                    cas_stats::note(cas_stats::PUSH);
                    head = actual;
                }
            }
        }
    }

    /// Fair mode: pushes `index` and clears the waiter flag in one CAS. The
    /// caller holds the fair queue's lock and found it empty.
    ///
    /// The caller must own `index`.
    /// While a debt is owed (see `bound.rs`), the slot is withdrawn instead
    /// and the flag stays.
    pub(crate) fn push_clearing_waiters(&self, index: u32) {
        let layout = self.layout;
        // Acquire: as in `push`, for the debt.
        let mut head = self.head.word.load(Ordering::Acquire);
        loop {
            if self.in_debt() && self.withdraw(index) {
                return;
            }
            // Relaxed: published by the Release CAS below.
            self.link(index)
                .store(layout.index(head), Ordering::Relaxed);
            let new = layout.flagged(layout.pushed(head, index), false);
            // Release: as in `push`; Acquire on failure for the debt.
            match self
                .head
                .word
                .compare_exchange_weak(head, new, PUSH_SUCCESS, Ordering::Acquire)
            {
                Ok(_) => {
                    self.count_pushed(1);
                    return;
                }
                Err(actual) => head = actual,
            }
        }
    }

    /// Fair mode: clears the waiter flag, whatever the head is. The caller
    /// holds the fair queue's lock and has just emptied the queue: no
    /// waiter can register meanwhile (registering takes the lock).
    /// While a debt is owed the flag stays (see `bound.rs`).
    pub(crate) fn clear_waiters_locked(&self) {
        // Acquire: orders a lowering's debt before the check below (see
        // `clear_waiters`); the lock orders the clear with registrations.
        let mut head = self.head.word.load(Ordering::Acquire);
        while self.layout.waiters(head) {
            if self.in_debt() {
                return;
            }
            // Acquire on failure, as the load; on success too, only because
            // a failure ordering may not be stronger than the success one
            // before Rust 1.64 (the MSRV's `invalid_atomic_ordering`).
            // Publishes nothing.
            match self.head.word.compare_exchange_weak(
                head,
                self.layout.flagged(head, false),
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }

    /// Sets the closed flag: every later pop fails and no waiter parks.
    /// Returns whether this call set it (`false`: closed already).
    ///
    /// The flag is set first, then the tag bumped by a read-modify-write of
    /// the head. A pop (or a waiter's flag CAS) that read the head before
    /// the bump fails its CAS, reloads and sees the flag; one that read the
    /// bump or a later word synchronizes with it (the bump is Release, and
    /// later CASes continue its release sequence), so it sees the flag too.
    /// No pop succeeds after the bump: that is the close's linearization
    /// point. A waiter whose flag CAS came before the bump is in the
    /// modification order before it, so the bump's Acquire makes that
    /// waiter's listener visible to the close's notification.
    pub(crate) fn close(&self) -> bool {
        // Relaxed: ordered for pops by the tag bump below.
        if self.head.closed.swap(true, Ordering::Relaxed) {
            return false;
        }
        // AcqRel: Acquire pairs with a waiter's Release flag CAS, so the
        // listener it registered first is visible to the caller's
        // notification (as for a push, see `engine/wait`); Release publishes
        // the flag to the pops and waiters that read this word or a later
        // one.
        //
        // Without this bump (a mutant that survived, and survives
        // `close_races_a_release_and_waiters` at bound 3: 827,865 and
        // 64,814 iterations, checked 2026-11-25) nothing observable breaks
        // today, for the same reason as the push CAS's Acquire (see "What
        // orders a waiter's listener" in `engine/wait`): event-listener's
        // SeqCst fences after `listen` and before `notify` make a Dekker
        // pair with the waiter's load and the close's store of the flag,
        // so the waiter sees the flag or the close's notification finds it;
        // and a pop that read the head before the flag and whose CAS
        // lands after this point could not be told from one that came
        // first (a thread that the close happens-before sees the flag, so
        // none can order that pop after the close). The bump stays: it is the close's linearization point for
        // pops, and it keeps waiters safe should event-listener drop the
        // fence its docs call an implementation detail.
        self.head
            .word
            .fetch_add(self.layout.tag_one(), Ordering::AcqRel);
        true
    }
}
