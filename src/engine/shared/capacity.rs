//! The movable bound: [`Pool::set_capacity`](crate::Pool::set_capacity)
//! lowers or raises the number of slots in service, within the storage's
//! maximum (see `free_list/bound.rs` for the protocol that keeps it exact).
//!
//! - **Lowering** by `k`: subtracts `k` from the credit. Room an elastic
//!   pool had not grown into goes first; what is left is a debt of slots in
//!   service. Then the caches are told (the `RETIRING` bit of the wait
//!   queue's `waiting` word: owners flush, releases skip the caches), the
//!   debt is announced on the head, the caches are swept, and the free list
//!   is popped: every slot found while the debt lasts is withdrawn. What is
//!   still owed is paid by the next releases, each withdrawing its slot.
//! - **Raising** by `k`: adds `k` to the credit (paying off a debt first),
//!   then takes withdrawn slots back into service, each given back as a
//!   release would (to a waiter first); room left over lets an elastic
//!   pool grow, at once while anyone waits (a waiting task has no other
//!   way to see the room), else on demand.
//! - **Values.** A withdrawn slot's value is dropped by the next
//!   `set_capacity` call (this one included), outside every lock, in a pool
//!   with a factory (which refills the slot if it serves again); a pool
//!   built from given values keeps them, since nothing could make them
//!   again.
//!
//! The bookkeeping (the bound, the credit, the `RETIRING` bit, taking
//! withdrawn slots back or emptying them) is done under `Shared::resize`,
//! one call at a time; the sweeps, the slots given back (which wake
//! waiters, user code) and the values dropped come after it. The
//! `RETIRING` bit goes once the debt is paid: the call that finds it paid
//! removes it, as does a release that skips the caches for it and can
//! take the lock without waiting.

use super::Shared;
use crate::engine::slot::Held;
use crate::engine::unwind::{self, Payload};
use crate::sync::Ordering;

/// What the resize lock guards.
#[derive(Debug, Default)]
pub(crate) struct Resize {
    /// The wait queue's `RETIRING` bit is set by this pool (see the module
    /// docs).
    retiring: bool,
}

impl<T> Shared<T> {
    /// The number of slots in service: the bound that `set_capacity` moves.
    #[inline]
    pub(crate) fn bound(&self) -> usize {
        // Relaxed: a snapshot.
        self.bound.load(Ordering::Relaxed) as usize
    }

    /// Sets the bound before the pool is shared (a builder's
    /// `max_capacity`): the slots between it and the maximum are room.
    pub(crate) fn set_initial_bound(&mut self, bound: u32) {
        let max = self.free.capacity();
        debug_assert!(bound <= max);
        self.free.add_credit(-i64::from(max - bound));
        self.bound.store(bound, Ordering::Relaxed);
    }

    /// Moves the bound to `n`, within `1..=capacity`: see the module docs.
    /// Resumes the first panic of a dropped value or of a waker woken by a
    /// slot given back, once the bound is set.
    ///
    /// The resize lock covers the bookkeeping only (the bound, the credit,
    /// the `RETIRING` bit, the withdrawn slots taken back or emptied); the
    /// sweeps, the pushes (which wake waiters: user code) and the drops
    /// run after it, so a waker or a `Drop` may call `set_capacity` again.
    pub(crate) fn set_capacity(&self, n: u32) {
        debug_assert!(n >= 1 && n <= self.free.capacity());
        let mut resize = self.lock_resize();
        let old = self.bound.load(Ordering::Relaxed);
        let mut reinstated = Vec::new();
        let mut owed = false;
        if n < old {
            owed = self.lower_locked(&mut resize, old - n);
        } else if n > old {
            self.free.add_credit(i64::from(n - old));
            while let Some(index) = self.free.reinstate() {
                reinstated.push(index);
            }
        }
        self.bound.store(n, Ordering::Relaxed);
        drop(resize);

        let mut caught = None;
        if owed {
            self.withdraw_free();
        }
        for index in reinstated {
            caught = unwind::first(caught, self.give_back(index));
        }
        if n > old {
            caught = unwind::first(caught, self.room_for_waiters());
        }
        // The values of the slots withdrawn so far (this call's included),
        // taken under the lock, dropped after it.
        let mut resize = self.lock_resize();
        let values = self.take_withdrawn_values();
        self.end_retiring_locked(&mut resize);
        drop(resize);
        for value in values {
            let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                drop(value);
            }));
            caught = unwind::first(caught, dropped.err());
        }
        unwind::resume(caught);
    }

    fn lock_resize(&self) -> crate::sync::MutexGuard<'_, Resize> {
        self.resize
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Lowers the bound by `k`, under the resize lock: takes the room and
    /// makes the debt, tells the caches and announces it (see the module
    /// docs). Returns whether slots in service are owed, for the caller to
    /// [`withdraw_free`](Self::withdraw_free) after the lock.
    fn lower_locked(&self, resize: &mut Resize, k: u32) -> bool {
        let before = self.free.add_credit(-i64::from(k));
        if before - i64::from(k) >= 0 {
            // Only room (an elastic pool's, a retired slot's).
            return false;
        }
        if self.cache().is_some() && !resize.retiring {
            // Before the sweep: its heavy barrier pairs with the owners'
            // light one, so every owner operation after it flushes.
            self.waiters.signal_retiring();
            resize.retiring = true;
        }
        self.free.announce_debt();
        true
    }

    /// The free slots a lowering owes: sweeps the caches (their slots go
    /// to the free list, where each push withdraws while the debt lasts),
    /// then pops the free list and withdraws what it pops.
    fn withdraw_free(&self) {
        // Loom-only fault injection (`tagpool_loom_lower_skips_sweep`): a
        // lowering that leaves the caches' slots in them.
        let sweep = !cfg!(all(loom, tagpool_loom_lower_skips_sweep));
        if let Some(cache) = self.cache().filter(|_| sweep) {
            while cache.sweep(&self.free, &self.waiters, true).contended {
                crate::sync::yield_now();
            }
        }
        let mut one = [0u32; 1];
        while self.free.in_debt_now() {
            // Even from a closed pool: its free slots leave service too.
            if self.free.pop_batch_if(&mut one, true).is_none() {
                break;
            }
            if !self.free.withdraw(one[0]) {
                // Paid meanwhile by a release: this slot serves on.
                unwind::discard(self.give_back(one[0]));
                break;
            }
        }
    }

    /// After a raise: the waiters that may have parked without seeing the
    /// room it gave are woken to grow, and the queued tickets (tasks, a
    /// fair pool's threads) are served by growths (see "Room" in
    /// `free_list/bound.rs`). Returns the panic of a waker it woke.
    fn room_for_waiters(&self) -> Option<Payload> {
        if !self.free.bump_for_room() || cfg!(all(loom, tagpool_loom_raise_forgets_waiters)) {
            // Loom-only fault injection: a raise that never looks at the
            // waiters.
            return None;
        }
        self.waiters.wake_for_room();
        let mut caught = None;
        while self.free.room_to_grow() && self.waiters.tickets_queued() {
            match self.grow() {
                Some(index) => caught = unwind::first(caught, self.give_back(index)),
                None => break,
            }
        }
        caught
    }

    /// Gives the owned slot `index` back as a release would: to a waiter, or
    /// to the free list. Returns the panic of a waker it woke.
    fn give_back(&self, index: u32) -> Option<Payload> {
        if cfg!(all(loom, tagpool_loom_raise_forgets_waiters)) {
            // Loom-only fault injection: a slot given back without a look
            // at the waiters.
            let _ = self.free.push(index);
            return None;
        }
        if self.push_free(index) {
            unwind::take()
        } else {
            None
        }
    }

    /// Takes the values out of the withdrawn slots, for the caller to drop
    /// outside every lock. The caller holds the resize lock, so no slot
    /// leaves the withdrawn list meanwhile: they are all its own. A pool
    /// without a factory keeps its values.
    fn take_withdrawn_values(&self) -> Vec<T> {
        if self.factory.is_none() {
            return Vec::new();
        }
        let mut values = Vec::new();
        for index in self.free.withdrawn() {
            // SAFETY: a withdrawn slot belongs to the withdrawn list, and
            // the resize lock, held by the caller, is the only way out of
            // it: this thread owns `index`, and no `Held` of it exists.
            let mut held: Held<T> = unsafe { self.slots.claim(index) };
            if let Some(value) = held.take() {
                self.note_emptied(1);
                values.push(value);
            }
            // SAFETY: claimed just above from this pool's slots.
            let _ = unsafe { held.into_index(&self.slots) };
        }
        values
    }

    /// Removes the `RETIRING` bit once the debt is paid. The caller holds
    /// the resize lock: no debt can start meanwhile.
    fn end_retiring_locked(&self, resize: &mut Resize) {
        if resize.retiring && !self.free.in_debt_now() {
            self.waiters.end_retiring();
            resize.retiring = false;
        }
    }

    /// For a release that skipped the caches while anyone waits: removes
    /// the `RETIRING` bit if the debt that set it is paid, when the resize
    /// lock is free (never waits for it: the `set_capacity` that holds it
    /// removes the bit itself).
    #[cold]
    pub(super) fn end_retiring_if_paid(&self) {
        if self.free.in_debt_now() {
            return;
        }
        if let Ok(mut resize) = self.resize.try_lock() {
            self.end_retiring_locked(&mut resize);
        }
    }
}
