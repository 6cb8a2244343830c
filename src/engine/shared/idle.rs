//! What touches idle slots: trim, drain and `retain_idle` (take their
//! values), attach (fill an empty one), and a scope's batch return.

use std::panic::{self, AssertUnwindSafe};

use super::Shared;
use crate::engine::cache::note_peak;
use crate::engine::slot::Held;
use crate::error::AttachError;
use crate::sync::Ordering;

/// The most idle slots an acquire that took an empty slot pops in search
/// of a value ([`Shared::idle_instead`]): one batch. The search puts the
/// values it passes above the empty slots, and empty slots land on top of
/// idle values only when an acquire found none of them idle, so a value
/// sits this deep under empty ones only after such races; a bound keeps a
/// search that races another pass holding the values from walking the
/// whole free list.
pub(super) const IDLE_SEARCH: usize = 64;

impl<T> Shared<T> {
    /// Moves the slots parked in per-thread caches (those whose owner is
    /// not in an operation) to the free list.
    pub(crate) fn sweep_caches(&self) {
        if let Some(cache) = self.cache() {
            cache.sweep(&self.free, &self.waiters, false);
            // Not a release: a waker's panic is dropped (see `unwind.rs`).
            crate::engine::unwind::drop_caught();
        }
    }

    /// Pops idle slots and hands each to `visit`, which may take its value,
    /// until the free list is empty or `visit` returns `false`. Returns the
    /// popped indices, top first, and the one `visit` stopped at (not in
    /// the list). The caller owns them all and must give them back
    /// ([`release_chain`](Self::release_chain)).
    ///
    /// It pops at most `limit` slots (`usize::MAX`: no limit).
    fn pop_idle(
        &self,
        limit: usize,
        mut visit: impl FnMut(&mut Held<T>) -> bool,
    ) -> (Vec<u32>, Option<u32>) {
        let mut popped = Vec::new();
        let mut batch = [0u32; 64];
        loop {
            let room = limit.saturating_sub(popped.len()).min(batch.len());
            if room == 0 {
                break;
            }
            let taken = match self.free.pop_batch_if(&mut batch[..room], true) {
                Some(taken) => taken,
                None => break,
            };
            let batch = &batch[..taken.count as usize];
            for (at, &index) in batch.iter().enumerate() {
                // SAFETY: popped just above, so this thread owns `index`,
                // and no other `Held` for it exists.
                let mut held = unsafe { self.slots.claim(index) };
                if !visit(&mut held) {
                    // The rest of this batch is owned too: it goes back
                    // with the others.
                    popped.extend_from_slice(&batch[at + 1..]);
                    return (popped, Some(index));
                }
                popped.push(index);
            }
        }
        (popped, None)
    }

    /// Gives back `chain`, owned by this thread, in one push (or one by one
    /// to the first waiters of a fair pool).
    ///
    /// `still_held` is how many other slots this thread holds for the
    /// moment of its pass (an attach's target), not counted as held.
    fn release_chain(&self, chain: &[u32], still_held: u32) {
        if chain.is_empty() {
            return;
        }
        // A fair pool hands slots to queued waiters without a pop: slots
        // that were idle before this pass may now be held, and no pop
        // recorded them. Each served waiter records the slots held at its
        // hand-off (not counting the rest of the chain, nor `still_held`),
        // before it can release any: the record below, made after the
        // hand-offs, could miss a waiter that held two slots for a moment
        // and let one go. (A barging pool's waiters pop, and record.)
        self.waiters.release_batch(&self.free, chain, still_held);
        // Idle slots going back, no guard's release: a waker's panic is
        // dropped (see `unwind.rs`).
        crate::engine::unwind::drop_caught();
        if self.waiters.is_fair() {
            // The slots out of the list once the pass is over, as a pop
            // would count them: retired slots of a pool without a factory
            // count as held (see `Stats::peak_in_use`). Without a hand-off
            // this records nothing new otherwise: a fair pool has no
            // caches, so every held slot was counted by a pop.
            let in_use = self.free.in_use(self.free.free_count());
            note_peak(&self.counters.peak, in_use.saturating_sub(still_held));
        }
    }

    /// See [`Pool::trim`](crate::Pool::trim) and
    /// [`Pool::drain_idle`](crate::Pool::drain_idle): takes the values of
    /// idle slots beyond the first `keep` filled ones and returns them.
    pub(crate) fn take_idle(&self, keep: usize) -> Vec<T> {
        self.sweep_caches();
        let mut kept = 0;
        let mut taken = Vec::new();
        #[cfg(all(loom, tagpool_loom_trim_unowned))]
        {
            // Loom-only fault injection: a trim that takes the value of
            // every slot it finds filled, without owning the slot. The trim
            // model must report the access to a held value.
            let _ = keep;
            for index in 0..self.free.allocated() {
                // SAFETY: none: this is the planted bug loom must catch.
                let mut held = unsafe { self.slots.claim(index) };
                taken.extend(held.take());
            }
            self.note_emptied(taken.len() as u64);
            return taken;
        }
        let (popped, _) = self.pop_idle(usize::MAX, |held| {
            if !held.is_empty() {
                if kept < keep {
                    kept += 1;
                    return true;
                }
                taken.extend(held.take());
            }
            true
        });
        self.return_idle(popped, 0);
        self.note_emptied(taken.len() as u64);
        taken
    }

    /// See [`Pool::retain_idle`](crate::Pool::retain_idle): takes the
    /// values of idle slots that `keep` refuses and returns them, with the
    /// panic of `keep` if it panicked (the value it panicked on is among
    /// those returned; the slots after it were not visited).
    pub(crate) fn retain_idle(
        &self,
        mut keep: impl FnMut(&mut T) -> bool,
    ) -> (Vec<T>, Option<Box<dyn core::any::Any + Send>>) {
        self.sweep_caches();
        let mut taken = Vec::new();
        let mut panicked = None;
        // `keep` runs on slots this thread popped and owns: between batch
        // pops, with no retry loop open.
        let (mut popped, stopped) = self.pop_idle(usize::MAX, |held| {
            if held.is_empty() {
                return true;
            }
            match panic::catch_unwind(AssertUnwindSafe(|| keep(held.get_mut()))) {
                Ok(true) => true,
                Ok(false) => {
                    taken.extend(held.take());
                    true
                }
                Err(payload) => {
                    // As a reset's panic: the value may be half updated, so
                    // it goes, and the walk stops here.
                    taken.extend(held.take());
                    panicked = Some(payload);
                    false
                }
            }
        });
        popped.extend(stopped);
        self.return_idle(popped, 0);
        self.note_emptied(taken.len() as u64);
        (taken, panicked)
    }

    /// Gives back the idle slots `popped` (top first), owned by this thread:
    /// those holding values on top, in their order, so that the next
    /// acquires reuse them; the empty ones below (or retired, in a pool
    /// without a factory). Nothing of the user's runs before the push.
    /// `still_held` as for [`release_chain`](Self::release_chain).
    fn return_idle(&self, popped: Vec<u32>, still_held: u32) {
        let mut chain = Vec::with_capacity(popped.len());
        let mut emptied = Vec::new();
        for index in popped {
            // SAFETY: this thread popped `index` and has not pushed it; the
            // `Held` the visitor saw is gone.
            let held = unsafe { self.slots.claim(index) };
            if held.is_empty() {
                emptied.push(index);
            } else {
                chain.push(index);
            }
        }
        if self.factory.is_some() {
            chain.extend_from_slice(&emptied);
        } else {
            for index in emptied {
                self.retire(index);
            }
        }
        self.release_chain(&chain, still_held);
    }

    /// An idle value to serve instead of running the factory on `empty`, the
    /// empty slot this thread just took for an acquire: a slot holding a
    /// value, idle on the free list or in any thread's cache. `None` if none
    /// is found: the caller fills `empty`, still its own.
    ///
    /// Looks only where [`may_hold_idle_values`](Self::may_hold_idle_values)
    /// says a value may be idle, and not in a closed pool. Then it pops idle
    /// slots, top down, until one holds a value, looking at [`IDLE_SEARCH`]
    /// of them at most, and if none does (in a pool with caches) moves the
    /// caches' slots to the free list and looks again. The slots popped on
    /// the way go back with the values above the empty ones (so the next
    /// search finds a value on top), and `empty` goes back to the free list
    /// (or to a waiter, if one waits). The slots popped are out of the list
    /// for the moment of the pass, as in a trim: a `try_acquire` racing it
    /// may fail without them (see the crate docs, "Progress"). Wakers woken
    /// by the pushes run meanwhile; their panics are caught and dropped.
    #[cold]
    pub(super) fn idle_instead(&self, empty: u32) -> Option<Held<T>> {
        if cfg!(all(loom, tagpool_loom_factory_before_idle))
            || self.free.is_closed()
            || !self.may_hold_idle_values()
        {
            // Loom-only fault injection (`tagpool_loom_factory_before_idle`):
            // the old behaviour, the factory runs on an empty slot whatever
            // is idle elsewhere.
            return None;
        }
        // The free list first; then, if the pool has caches, once more after
        // moving their slots to it (on top, where the pass finds them).
        let mut found = self.search_idle();
        if found.is_none() && self.cache().is_some() {
            self.sweep_caches();
            found = self.search_idle();
        }
        let found = found?;
        // `found` replaces `empty` one for one: the acquire's counts (the
        // pop or cache take that noted its peak, an owned guard's count)
        // stay with the slot it now holds. `empty` goes straight to the free
        // list (or to a waiter), past this thread's cache, so that the free
        // list's count is what it was before the pass took `found` and no
        // cache's accounting moves: the peak stays exact (a push to the
        // cache would hide `found` from it, a record here would count
        // `empty` too).
        if self.push_free(empty) {
            // An acquire: a waker's panic is dropped (see `unwind.rs`).
            crate::engine::unwind::drop_caught();
        }
        self.hold_started(found);
        // SAFETY: `found` was popped by this thread's pass and not pushed
        // since (`pop_idle` leaves the slot it stops at out of the list);
        // the visitor's `Held` is gone.
        Some(unsafe { self.slots.claim(found) })
    }

    /// One pass of [`idle_instead`](Self::idle_instead) over the free list:
    /// the first slot holding a value among the top [`IDLE_SEARCH`] idle
    /// ones, taken; the others go back, values above empty slots.
    fn search_idle(&self) -> Option<u32> {
        let (popped, found) = self.pop_idle(IDLE_SEARCH, |held| held.is_empty());
        // While the pass held them, this thread's empty slot and `found`
        // were both out of the list: one of them is not held by a guard.
        self.return_idle(popped, u32::from(found.is_some()));
        found
    }

    /// Whether a value may be idle while this thread holds an empty slot:
    /// more slots hold values than guards can hold, counting the slots out
    /// of the free list and the caches as held (this thread's among them).
    /// A hint: exact when no other thread acquires, releases or fills
    /// meanwhile; another thread's fill in flight hides one value from it.
    fn may_hold_idle_values(&self) -> bool {
        // Relaxed: a statistic, which a release that happened before this
        // acquire has updated (its fill came before it).
        if self.counters.filled.load(Ordering::Relaxed) == 0 {
            return false;
        }
        // This thread's slot is empty.
        self.idle_values(1) > 0
    }

    /// How many values are idle, from the counts: the slots holding values,
    /// less those out of the free list and the caches, of which
    /// `empty_held` (this thread's) hold none. A hint: exact when no other
    /// thread acquires, releases or fills meanwhile.
    fn idle_values(&self, empty_held: u32) -> u64 {
        // Relaxed: statistics.
        let filled = self.counters.filled.load(Ordering::Relaxed);
        let cached = self.cache().map_or(0, |c| c.cached());
        // Withdrawn slots (see `capacity.rs`) are out of the free list
        // too, but serve nobody.
        let out = self.free.allocated().saturating_sub(
            self.free
                .free_count()
                .saturating_add(cached)
                .saturating_add(self.free.withdrawn_count()),
        );
        filled.saturating_sub(u64::from(out.saturating_sub(empty_held)))
    }

    /// [`Builder::min_idle`](crate::Builder::min_idle) after a trim or a
    /// `retain_idle`: fills empty idle slots (or grows) with the factory's
    /// values until `min_idle` values are idle, one at a time, outside any
    /// retry loop. Stops at a factory error (the slot goes back empty: the
    /// next trigger tries again), at a closed pool, or when no empty slot
    /// is left; returns a factory's panic, for the caller to resume, after
    /// its slot went back empty.
    pub(crate) fn refill_idle(&self) -> Option<Box<dyn core::any::Any + Send>> {
        let factory = self.factory.as_ref()?;
        // At most `min_idle` fills a call: threads that keep taking values
        // meanwhile cannot keep it going.
        let mut fills = 0;
        while fills < self.min_idle && !self.free.is_closed() && self.idle_values(0) < self.min_idle
        {
            fills += 1;
            // An empty idle slot: the values above it go back on top.
            let (popped, empty) = self.pop_idle(usize::MAX, |held| !held.is_empty());
            self.return_idle(popped, u32::from(empty.is_some()));
            let target = empty.or_else(|| self.grow())?;
            // SAFETY: popped (or grown) by this thread and not pushed since.
            let mut held = unsafe { self.slots.claim(target) };
            let outcome = if held.is_empty() {
                Some(panic::catch_unwind(AssertUnwindSafe(factory)))
            } else {
                // A growth that waited for another's popped a filled slot:
                // nothing to fill.
                None
            };
            let stop = match outcome {
                Some(Ok(Ok(value))) => {
                    held.fill(value);
                    self.note_filled(1);
                    None
                }
                Some(Ok(Err(_))) => Some(None),
                Some(Err(payload)) => Some(Some(payload)),
                None => Some(None),
            };
            // SAFETY: claimed from `self.slots` just above.
            let index = unsafe { held.into_index(&self.slots) };
            self.push_free(index);
            // Not a guard's release: a waker's panic is dropped.
            crate::engine::unwind::drop_caught();
            if let Some(panicked) = stop {
                return panicked;
            }
        }
        None
    }

    /// [`Builder::min_idle`](crate::Builder::min_idle) after a discard: the
    /// slot `held`, just emptied by this thread's release, is refilled with
    /// the factory's value if fewer than `min_idle` values are idle
    /// (counting this slot out). Returns the factory's panic; its error
    /// leaves the slot empty.
    pub(crate) fn refill_discarded(
        &self,
        held: &mut Held<T>,
    ) -> Option<Box<dyn core::any::Any + Send>> {
        let factory = self.factory.as_ref()?;
        if self.min_idle == 0 || self.free.is_closed() || self.idle_values(1) >= self.min_idle {
            return None;
        }
        match panic::catch_unwind(AssertUnwindSafe(factory)) {
            Ok(Ok(value)) => {
                held.fill(value);
                self.note_filled(1);
                None
            }
            Ok(Err(_)) => None,
            Err(payload) => Some(payload),
        }
    }

    /// See [`Pool::attach`](crate::Pool::attach).
    pub(crate) fn attach(&self, value: T) -> Result<(), AttachError<T>> {
        if self.free.is_closed() {
            return Err(AttachError::Closed(value));
        }
        // Relaxed: a statistic, exact at quiescence; an empty slot exists
        // whenever fewer than `capacity` slots hold values.
        if self.counters.filled.load(Ordering::Relaxed) >= u64::from(self.free.capacity()) {
            return Err(AttachError::Full(value));
        }
        if let Some(index) = self.unretire() {
            // A pool without a factory: its empty slots are retired.
            // SAFETY: taken from the retired list, so this thread owns
            // `index`; a retired slot has no other `Held`.
            let held = unsafe { self.slots.claim(index) };
            self.fill_attached(held, value);
            return Ok(());
        }
        self.sweep_caches();
        let held = loop {
            let (popped, empty) = self.pop_idle(usize::MAX, |held| !held.is_empty());
            self.release_chain(&popped, u32::from(empty.is_some()));
            let target = match empty.or_else(|| self.grow()) {
                Some(target) => target,
                None if self.free.is_closed() => return Err(AttachError::Closed(value)),
                None => return Err(AttachError::Full(value)),
            };
            // SAFETY: `target` was popped (or grown) by this thread and not
            // pushed since.
            let held = unsafe { self.slots.claim(target) };
            if held.is_empty() {
                break held;
            }
            // `grow` waited for another thread's growth and popped a slot
            // that holds a value: give it back, and look again (the grown
            // segment's empty slots are on the free list now).
            // SAFETY: claimed from `self.slots` just above.
            let index = unsafe { held.into_index(&self.slots) };
            self.push_free(index);
        };
        self.fill_attached(held, value);
        Ok(())
    }

    /// Fills the empty slot `held`, owned by this thread, with an attached
    /// value and pushes it.
    fn fill_attached(&self, mut held: Held<T>, value: T) {
        held.fill(value);
        self.note_filled(1);
        // SAFETY: claimed from `self.slots` by the caller.
        let index = unsafe { held.into_index(&self.slots) };
        self.push_free(index);
        // No guard's release: a waker's panic is dropped (see `unwind.rs`),
        // here and from the pushes before.
        crate::engine::unwind::drop_caught();
    }

    /// Links the held slot `index` above `below`: a [`Scope`](crate::Scope)'s chain,
    /// built in the links its slots do not use while held.
    #[inline]
    pub(crate) fn link_held(&self, index: u32, below: u32) {
        self.free.set_link(index, below);
    }

    /// Gives back a [`Scope`](crate::Scope)'s `n` slots, linked from `top` down to
    /// `last` and held by this thread: resets each value (or empties the
    /// slot, as a guard's release does), then returns all of them in one
    /// push. Returns the first reset panic, for the caller to resume.
    pub(crate) fn release_scope(
        &self,
        top: u32,
        last: u32,
        n: u32,
    ) -> Option<Box<dyn core::any::Any + Send>> {
        #[cfg(all(loom, tagpool_loom_scope_reset_late))]
        {
            // Loom-only fault injection: the batch goes back before the
            // values are reset, so the reset writes slots that another
            // thread may hold already. The scope model must report it.
            let mut below = Vec::new();
            let mut index = top;
            for _ in 0..n {
                below.push(index);
                index = self.free.link_of(index);
            }
            self.waiters.release_linked(&self.free, top, last, n);
            for index in below {
                // SAFETY: none: this is the planted bug loom must catch.
                let mut held = unsafe { self.slots.claim(index) };
                if let Some(recycle) = &self.recycle {
                    let _ = self.recycle_held(recycle, &mut held, false);
                }
            }
            return None;
        }
        let mut panicked = None;
        let mut emptied = false;
        if let Some(recycle) = &self.recycle {
            let mut index = top;
            for _ in 0..n {
                // Read before the hooks: the link is the chain's own.
                let below = self.free.link_of(index);
                // SAFETY: the scope popped `index` and has not pushed it;
                // the values it lent are no longer borrowed (the scope is
                // being dropped).
                let mut held = unsafe { self.slots.claim(index) };
                // No refill per slot: the scope's other slots are out of
                // the list and would count as holding values; one refill
                // follows the push below.
                let hook_panic = self.recycle_held(recycle, &mut held, false);
                emptied |= held.is_empty();
                panicked = crate::engine::unwind::first(panicked, hook_panic);
                // Before the push below.
                self.hold_ended(index);
                index = below;
            }
        }
        if emptied && self.factory.is_none() {
            // A pool without a factory retires its emptied slots: the
            // chain goes back without them.
            return crate::engine::unwind::first(panicked, self.release_scope_split(top, n));
        }
        let woke = self.waiters.release_linked(&self.free, top, last, n);
        // A hook's panic first, else a waker's (see `unwind.rs`). The
        // thread-local is read only after a wake-up.
        let caught = if woke {
            crate::engine::unwind::take()
        } else {
            None
        };
        let panicked = crate::engine::unwind::first(panicked, caught);
        // `Builder::min_idle`, after discards: the chain is back, so the
        // count sees every slot where it is.
        if emptied && self.min_idle > 0 && !std::thread::panicking() {
            return crate::engine::unwind::first(panicked, self.refill_idle());
        }
        panicked
    }

    /// Gives back a scope's `n` slots linked from `top`, held by this
    /// thread, in a pool without a factory where some were emptied: the
    /// filled ones in one push, the empty ones retired. Returns a waker's
    /// panic.
    #[cold]
    fn release_scope_split(&self, top: u32, n: u32) -> Option<Box<dyn core::any::Any + Send>> {
        let mut popped = Vec::with_capacity(n as usize);
        let mut index = top;
        for _ in 0..n {
            popped.push(index);
            index = self.free.link_of(index);
        }
        self.return_idle(popped, 0);
        None
    }
}
