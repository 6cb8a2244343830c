//! Giving a guard's slot back: the reset closure and the discard check,
//! then a push to this thread's cache or the free list (or, emptied in a
//! pool without a factory, a retirement); and the fill counts both sides
//! keep.

use std::panic::{self, AssertUnwindSafe};

use super::{Discard, Recycle, Shared};
use crate::engine::cache::{Released, Settle};
use crate::engine::slot::Held;
use crate::sync::Ordering;

impl<T> Shared<T> {
    /// Gives a guard's slot back: resets the value, checks it for
    /// discarding, then pushes the slot. The caller must then
    /// [`finish`](Self::finish) with the `Settle`, once its reference to
    /// `self` is no longer used, and then resume the panic of the reset,
    /// the discard check or the discarded value's drop if there is one
    /// (see [`Released`]).
    #[inline(always)]
    pub(crate) fn release<const OWNED: bool>(&self, held: Held<T>) -> Released {
        match &self.recycle {
            None => {
                // SAFETY: a guard's `Held` is claimed from its own pool's
                // slots (`take`), and `self` is that pool.
                let index = unsafe { held.into_index(&self.slots) };
                self.push::<OWNED>(index)
            }
            Some(recycle) => self.recycle_and_release::<OWNED>(recycle, held),
        }
    }

    /// `release` with a reset or a discard check, kept out of line so that
    /// the common path inlines into the guard's `drop`.
    #[inline(never)]
    fn recycle_and_release<const OWNED: bool>(
        &self,
        recycle: &Recycle<T>,
        mut held: Held<T>,
    ) -> Released {
        #[cfg(all(loom, tagpool_loom_discard_late))]
        {
            // Loom-only fault injection: the slot goes back before its
            // value is checked and discarded, so the discard empties a slot
            // that another thread may hold already. The discard model must
            // report it.
            // SAFETY: as in `release`.
            let index = unsafe { held.into_index(&self.slots) };
            let released = self.push::<OWNED>(index);
            // SAFETY: none: this is the planted bug loom must catch.
            let mut late = unsafe { self.slots.claim(index) };
            let _ = self.recycle_held(recycle, &mut late, false);
            return released;
        }
        let panicked = self.recycle_held(recycle, &mut held, true);
        let emptied = held.is_empty();
        // SAFETY: as in `release`.
        let index = unsafe { held.into_index(&self.slots) };
        // Before the push: the next owner's start must not be overwritten.
        self.hold_ended(index);
        // The caller resumes a hook's panic after `finish`, unless its
        // thread already unwinds (a second panic would abort); a waker's
        // panic only if no hook panicked.
        if emptied {
            return self.release_emptied::<OWNED>(index, panicked);
        }
        let (settle, woke) = self.push::<OWNED>(index);
        (settle, crate::engine::unwind::first(panicked, woke))
    }

    /// The end of [`recycle_and_release`](Self::recycle_and_release) for a
    /// slot its hooks emptied, out of line: no two `Released` values meet
    /// on the common path (copying one through the stack cost a
    /// store-forwarding stall per release).
    #[cold]
    #[inline(never)]
    fn release_emptied<const OWNED: bool>(
        &self,
        index: u32,
        panicked: Option<Box<dyn core::any::Any + Send>>,
    ) -> Released {
        let (settle, woke) = self.push_emptied::<OWNED>(index);
        (settle, crate::engine::unwind::first(panicked, woke))
    }

    /// Runs the release hooks on the value of a slot this thread holds
    /// before it is given back: the reset, then the discard check, which
    /// may empty the slot. Returns the panic of the reset, of the discard
    /// check or of the discarded value's drop.
    ///
    /// No user code may run between an owned release's push and its
    /// `finish` (its tail is open then), so everything here runs before
    /// the push, and no retry loop is open.
    #[inline]
    ///
    /// With `refill`, a discard below [`min_idle`](crate::Builder::min_idle)
    /// gives the slot a fresh value (see `refill_discarded`); a caller that
    /// releases several slots at once refills after them instead.
    pub(crate) fn recycle_held(
        &self,
        recycle: &Recycle<T>,
        held: &mut Held<T>,
        refill: bool,
    ) -> Option<Box<dyn core::any::Any + Send>> {
        if std::thread::panicking() {
            self.drop_unwinding(held);
            return None;
        }
        if let Some(reset) = &recycle.reset {
            let value = held.get_mut();
            if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| reset(value))) {
                // The value may be half reset: drop it and return the slot
                // empty (the factory refills it). A panic in that drop is
                // dropped too: the reset's goes on.
                self.empty_quietly(held);
                return Some(payload);
            }
        }
        match &recycle.discard {
            None => None,
            Some(discard) => self.check_discard(discard, held, refill),
        }
    }

    /// The holder's thread is unwinding: the value may be half updated,
    /// and a hook that panicked now would panic during an unwind, which
    /// aborts the process (even inside `catch_unwind` before Rust 1.71).
    /// Drops the value instead, without the hooks, and leaves the slot
    /// empty (the factory refills it). A panic in that drop aborts, as for
    /// any value dropped while unwinding.
    #[cold]
    #[inline(never)]
    fn drop_unwinding(&self, held: &mut Held<T>) {
        drop(held.take());
        self.note_emptied(1);
    }

    /// The discard check of `recycle_held`: empties the slot if `discard`
    /// refuses the value (or panics).
    fn check_discard(
        &self,
        discard: &Discard<T>,
        held: &mut Held<T>,
        refill: bool,
    ) -> Option<Box<dyn core::any::Any + Send>> {
        let value = held.get();
        match panic::catch_unwind(AssertUnwindSafe(|| discard(value))) {
            Ok(false) => None,
            Ok(true) => self.discard_held(held, refill),
            Err(payload) => {
                // As a reset's panic: the value is dropped, the slot goes
                // back empty, the panic goes on.
                self.empty_quietly(held);
                Some(payload)
            }
        }
    }

    /// Discards the value of `held`: the slot goes back empty, and the
    /// value is dropped here, on the releasing thread, before the push.
    /// Returns the panic of its drop.
    #[cold]
    fn discard_held(
        &self,
        held: &mut Held<T>,
        refill: bool,
    ) -> Option<Box<dyn core::any::Any + Send>> {
        let value = held.take();
        self.note_emptied(1);
        // Relaxed: a statistic.
        self.counters.discarded.fetch_add(1, Ordering::Relaxed);
        let dropped = panic::catch_unwind(AssertUnwindSafe(move || drop(value))).err();
        // Below `min_idle`, the slot goes back with a fresh value.
        let refilled = if refill {
            self.refill_discarded(held)
        } else {
            None
        };
        crate::engine::unwind::first(dropped, refilled)
    }

    /// Drops the value of `held` after a hook panicked, and counts the
    /// slot emptied; a panic in that drop is dropped: the hook's goes on.
    #[cold]
    fn empty_quietly(&self, held: &mut Held<T>) {
        let value = held.take();
        self.note_emptied(1);
        let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(value)));
    }

    /// Takes a guard's value and gives its slot back empty; the caller
    /// finishes as after [`release`](Self::release), resuming the panic
    /// of a waker the release woke.
    pub(crate) fn detach<const OWNED: bool>(&self, mut held: Held<T>) -> (T, Released) {
        let value = held.take().expect("a guard's slot is always filled");
        self.note_emptied(1);
        // SAFETY: as in `release`.
        let index = unsafe { held.into_index(&self.slots) };
        self.hold_ended(index);
        (value, self.push_emptied::<OWNED>(index))
    }

    /// Gives back the empty slot `index`, owned by this thread: pushed, for
    /// the factory to refill on its next acquire, or, in a pool without a
    /// factory, retired (see `retire.rs`) until an attach fills it. As
    /// [`push`](Self::push), for the caller to finish.
    pub(crate) fn push_emptied<const OWNED: bool>(&self, index: u32) -> Released {
        if self.factory.is_some() {
            return self.push::<OWNED>(index);
        }
        self.retire(index);
        self.touch();
        // An owned guard ends through the shared count, as after a push to
        // the free list; retiring wakes nobody.
        let settle = if OWNED { Settle::Shared } else { Settle::Done };
        (settle, None)
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
        let mut retiring = false;
        // While anyone waits, the slot goes straight to the free list (see
        // `Cache::release`).
        if let Some(cache) = self.cache() {
            if !self.waiters.waiting_hint() {
                let (settle, woke) = cache.release_slow::<OWNED>(index, &self.free, &self.waiters);
                if let Some(settle) = settle {
                    self.touch();
                    return (settle, woke);
                }
                caught = woke;
            } else {
                if !cfg!(all(loom, tagpool_loom_release_skips_flush)) {
                    // This thread's stack goes to the free list first: the
                    // fast path may have entered it, found it full or
                    // claimed, and left it without its flush, while a
                    // waiter's sweep saw it busy and left it to this thread
                    // (the acquire's side does the same, see
                    // `Shared::try_pop_slow`). Loom-only fault injection
                    // (`tagpool_loom_release_skips_flush`): a release that
                    // skips this flush.
                    caught = cache.flush_own(&self.free, &self.waiters);
                }
                retiring = self.waiters.retiring_hint();
            }
        }
        let woke = self.push_free(index);
        if retiring {
            // A lowered bound bypasses the caches until its debt is paid
            // (see `capacity.rs`), maybe by this push.
            self.end_retiring_if_paid();
        }
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

    /// Counts one value dropped as a discard (see `Stats::discarded`) by a
    /// face that checks its values itself (a `BufferPool`'s guards).
    pub(crate) fn note_discarded(&self) {
        // Relaxed: a statistic.
        self.counters.discarded.fetch_add(1, Ordering::Relaxed);
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
