//! Giving a guard's slot back: the reset closure, then a push to this
//! thread's cache or the free list; and the fill counts both sides keep.

use std::panic::{self, AssertUnwindSafe};

use super::{Reset, Shared};
use crate::engine::cache::{Released, Settle};
use crate::engine::slot::Held;
use crate::sync::Ordering;

impl<T> Shared<T> {
    /// Gives a guard's slot back: resets the value, then pushes the slot.
    /// The caller must then [`finish`](Self::finish) with the `Settle`, once
    /// its reference to `self` is no longer used, and then resume the reset
    /// closure's panic if there is one (see [`Released`]).
    #[inline(always)]
    pub(crate) fn release<const OWNED: bool>(&self, held: Held<T>) -> Released {
        match &self.reset {
            None => {
                // SAFETY: a guard's `Held` is claimed from its own pool's
                // slots (`take`), and `self` is that pool.
                let index = unsafe { held.into_index(&self.slots) };
                self.push::<OWNED>(index)
            }
            Some(reset) => self.reset_and_release::<OWNED>(reset, held),
        }
    }

    /// `release` with a reset closure, kept out of line so that the common
    /// path inlines into the guard's `drop`.
    #[inline(never)]
    fn reset_and_release<const OWNED: bool>(
        &self,
        reset: &Reset<T>,
        mut held: Held<T>,
    ) -> Released {
        let panicked = self.reset_held(reset, &mut held);
        // SAFETY: as in `release`.
        let index = unsafe { held.into_index(&self.slots) };
        // The caller resumes a reset's panic after `finish`, unless its
        // thread already unwinds (a second panic would abort); a waker's
        // panic only if the reset did not panic.
        let (settle, woke) = self.push::<OWNED>(index);
        (settle, crate::engine::unwind::first(panicked, woke))
    }

    /// Resets the value of a slot this thread holds before it is given
    /// back, or empties the slot: returns the reset closure's panic.
    ///
    /// No user code may run between an owned release's push and its
    /// `finish` (its tail is open then), so everything here runs before
    /// the push.
    pub(crate) fn reset_held(
        &self,
        reset: &Reset<T>,
        held: &mut Held<T>,
    ) -> Option<Box<dyn core::any::Any + Send>> {
        if std::thread::panicking() {
            // The holder's thread is unwinding: the value may be half
            // updated, and a reset that panicked now would panic during an
            // unwind, which aborts the process (even inside `catch_unwind`
            // before Rust 1.71). Drop the value instead, without the reset,
            // and return the slot empty (the factory refills it). A panic
            // in that drop aborts, as for any value dropped while unwinding.
            drop(held.take());
            self.note_emptied(1);
            return None;
        }
        let value = held.get_mut();
        match panic::catch_unwind(AssertUnwindSafe(|| reset(value))) {
            Ok(()) => None,
            Err(payload) => {
                // The value may be half reset: drop it and return the slot
                // empty (the factory refills it). A panic in that drop is
                // dropped too: the reset's goes on.
                let value = held.take();
                self.note_emptied(1);
                let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(value)));
                Some(payload)
            }
        }
    }

    /// Takes a guard's value and gives its slot back empty; the caller
    /// finishes as after [`release`](Self::release), resuming the panic
    /// of a waker the release woke.
    pub(crate) fn detach<const OWNED: bool>(&self, mut held: Held<T>) -> (T, Released) {
        let value = held.take().expect("a guard's slot is always filled");
        self.note_emptied(1);
        // SAFETY: as in `release`.
        let index = unsafe { held.into_index(&self.slots) };
        (value, self.push::<OWNED>(index))
    }

    /// Gives back the slot `index`, owned by this thread: to this thread's
    /// cache if it has one, else to the free list. `OWNED` counts the end
    /// of an owned guard.
    ///
    /// Returns, with the `Settle`, the panic of a waker the release woke:
    /// caught, and for the caller to resume after `finish` (see
    /// `unwind.rs`).
    #[inline]
    pub(crate) fn push<const OWNED: bool>(&self, index: u32) -> Released {
        // The cache's inlined fast path, which a pool without caches fails
        // at its first check.
        match self
            .cache
            .release::<OWNED>(index, &self.free, &self.waiters)
        {
            Some(released) => {
                self.touch();
                released
            }
            None => self.push_slow::<OWNED>(index),
        }
    }

    /// [`push`](Self::push) past the cache's fast path; a pool without
    /// caches goes straight to the free list.
    #[cold]
    #[inline(never)]
    fn push_slow<const OWNED: bool>(&self, index: u32) -> Released {
        let mut caught = None;
        // While anyone waits, the slot goes straight to the free list (see
        // `Cache::release`).
        if let Some(cache) = self.cache().filter(|_| !self.waiters.waiting_hint()) {
            let (settle, woke) = cache.release_slow::<OWNED>(index, &self.free, &self.waiters);
            if let Some(settle) = settle {
                self.touch();
                return (settle, woke);
            }
            caught = woke;
        }
        let woke = self.push_free(index);
        self.touch();
        let settle = if OWNED { Settle::Shared } else { Settle::Done };
        // A waker woken by the push may have panicked: caught (see
        // `unwind.rs`), so the push completed; the caller resumes the panic
        // after `finish`. The thread-local is read only after a wake-up.
        if woke {
            caught = crate::engine::unwind::first(caught, crate::engine::unwind::take());
        }
        (settle, caught)
    }

    /// Counts `n` slots that received a value.
    #[inline]
    pub(super) fn note_filled(&self, n: u64) {
        // Relaxed: a statistic.
        self.counters.filled.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `n` slots whose value was taken out or dropped.
    #[inline]
    pub(super) fn note_emptied(&self, n: u64) {
        // Relaxed: a statistic.
        self.counters.filled.fetch_sub(n, Ordering::Relaxed);
    }

    /// Pushes `index`, owned by this thread, to the free list and wakes a
    /// waiter if one waits (or hands it to the first, in a fair pool).
    /// Returns whether it woke anyone (see `WaitQueue::release`).
    #[inline]
    pub(super) fn push_free(&self, index: u32) -> bool {
        self.waiters.release(&self.free, index)
    }
}
