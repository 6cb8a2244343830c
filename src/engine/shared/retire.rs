//! The empty slots of a pool without a factory: retired from the free list
//! until an attach gives one a value.
//!
//! A pool built from given values (`Pool::from_values`) has nothing to fill
//! an empty slot with, so it never hands one out. A slot that loses its
//! value (a detach, a discard on release, a reset's panic, a trim or a
//! `retain_idle`) is not pushed back: its owner (the releasing or trimming
//! thread, which popped it) moves it to `Shared::retired`, a list under a
//! lock, and the pool serves with one slot fewer. `attach` takes a retired
//! slot first, fills it and pushes it, so it serves again.
//!
//! A retired slot is out of service: retiring gives a unit of room under
//! the bound (`set_capacity`), and an attach takes one back, or finds no
//! retired slot it may fill.
//!
//! Every operation here is off the fast paths: a pool with a factory never
//! retires a slot, and its releases never look at the list. The lock is
//! held for a `Vec` push or pop only, never across user code.

use super::Shared;
use crate::sync::Ordering;

impl<T> Shared<T> {
    /// Retires the empty slot `index`, owned by this thread: it leaves the
    /// free list for good, until [`unretire`](Self::unretire) takes it.
    pub(super) fn retire(&self, index: u32) {
        debug_assert!(self.factory.is_none(), "a pool with a factory refills");
        let mut retired = self
            .retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        retired.push(index);
        // Relaxed: a statistic; the lock orders the list itself.
        self.counters.retired.fetch_add(1, Ordering::Relaxed);
        drop(retired);
        // Out of service: room under the bound, for an attach (or a debt
        // paid, if a lowered bound is owed slots; see `capacity.rs`).
        self.free.add_credit(1);
    }

    /// Takes a retired slot, which this thread then owns (empty), if there
    /// is one.
    pub(super) fn unretire(&self) -> Option<u32> {
        if self.factory.is_some() {
            return None;
        }
        let mut retired = self
            .retired
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if retired.is_empty() || self.free.take_room(1) == 0 {
            // None, or the bound has no room for it (see `capacity.rs`).
            return None;
        }
        let index = retired.pop()?;
        // Relaxed: a statistic; the lock orders the list itself.
        self.counters.retired.fetch_sub(1, Ordering::Relaxed);
        Some(index)
    }

    /// How many slots are retired (a snapshot).
    pub(super) fn retired_count(&self) -> u64 {
        // Relaxed: a statistic.
        self.counters.retired.load(Ordering::Relaxed)
    }
}
