//! Taking a free slot without waiting: this thread's cache, the free list,
//! the other caches, a growth; and filling an empty slot with the factory.

use core::ptr::NonNull;
use std::panic::{self, AssertUnwindSafe};

use super::{Failure, Shared};
use crate::engine::cache::{note_peak, Cache};
use crate::engine::slot::Held;
use crate::error::TryAcquireError;
use crate::sync::Ordering;

impl<T> Shared<T> {
    /// Takes a free slot index without waiting: this thread's cache (which
    /// refills from the free list), else the free list, else the slots that
    /// other threads' caches hold. `OWNED` counts the index as an owned
    /// guard's (see [Lifetime](Shared#lifetime)).
    #[inline]
    pub(crate) fn try_pop<const OWNED: bool>(&self) -> Option<u32> {
        self.take_free::<OWNED, true>()
    }

    /// [`try_pop`](Self::try_pop) for an acquire that waits if it finds
    /// nothing: while anyone waits already, it takes no slot from other
    /// threads' caches. The waiting protocol finds those (a counted
    /// waiter's sweep covers the caches, and their owners flush while
    /// anyone waits), and hands them to the waiters first; a sweep here
    /// would only read every other thread's magazine, lines that their
    /// owners write, for slots promised to the waiters ahead of it.
    #[inline]
    pub(crate) fn try_pop_before_wait<const OWNED: bool>(&self) -> Option<u32> {
        self.take_free::<OWNED, false>()
    }

    /// [`try_pop`](Self::try_pop), stealing from other caches while anyone
    /// waits only with `STEAL`.
    #[inline]
    fn take_free<const OWNED: bool, const STEAL: bool>(&self) -> Option<u32> {
        // The cache's inlined fast path, which a pool without caches fails
        // at its first check. An index from it is counted in the magazine.
        if let Some(index) = self.cache.acquire::<OWNED>(&self.free, &self.waiters) {
            return Some(index);
        }
        self.try_pop_slow::<OWNED, STEAL>()
    }

    /// [`try_pop`](Self::try_pop) past the cache's fast path; a pool
    /// without caches goes straight to the free list. Without `STEAL`, the
    /// other threads' caches are left to the waiters while anyone waits
    /// (see [`try_pop_before_wait`](Self::try_pop_before_wait)).
    #[cold]
    #[inline(never)]
    fn try_pop_slow<const OWNED: bool, const STEAL: bool>(&self) -> Option<u32> {
        let cache = match self.cache() {
            Some(cache) => cache,
            None => return self.counted::<OWNED>(self.pop_free().or_else(|| self.grow_taken())),
        };
        if self.exhausted(cache) {
            return None;
        }
        let peak = &self.counters.peak;
        // While anyone waits, a refill would only flush its batch back:
        // take one slot from the free list, or from another cache. This
        // thread's own stack goes to the free list first: its fast path may
        // have found the stack held by a waiter's sweep, which then left it
        // to this thread to flush (`acquire_slow` flushes too).
        if !self.waiters.waiting_hint() {
            if let Some(index) = cache.acquire_slow::<OWNED>(&self.free, &self.waiters, peak) {
                return Some(index);
            }
        } else {
            // Loom-only fault injection: an owner that skips this flush (a
            // waiter's sweep that saw it busy left the stack to it).
            if !cfg!(all(loom, tagpool_loom_wait_skips_flush)) {
                cache.flush_for_waiters(&self.free, &self.waiters);
            }
            if !STEAL {
                return self.counted::<OWNED>(self.pop_free().or_else(|| self.grow_taken()));
            }
        }
        self.counted::<OWNED>(self.steal(cache).or_else(|| self.grow_taken()))
    }

    /// Whether a pop of a pool with caches may fail at once, without the
    /// refill, sweep and growth steps of [`try_pop_slow`](Self::try_pop_slow):
    /// nobody waits, the free list is empty (or the pool closed), every
    /// segment exists, and every magazine, this thread's included, reads
    /// empty.
    ///
    /// These are the loads on which the full path's failure rests: the
    /// refill's look at the head (a failed `pop_batch` makes no CAS), the
    /// sweep's look at each magazine's length (it claims none that reads
    /// empty, and with none claimed it moves nothing and the steal gives
    /// up), and the growth claim's look at the segments. Given the values
    /// read here, the full path would fail too; the shortcut skips only
    /// the out-of-line steps around them (this thread's magazine entered
    /// and left, the refill, the sweep, the growth), which measured about
    /// two thirds of a refused insert into a full `HandlePool`. Where the
    /// full path could still succeed it does not answer: a magazine that
    /// reads non-empty (even one a revoker holds or drained), a waiter, a
    /// segment left to grow. So a refusal is as exact as before: with no
    /// operation in flight every length read is final (see `engine/cache`,
    /// Linearization), and `None` means every slot is held by a guard.
    #[inline]
    fn exhausted(&self, cache: &Cache) -> bool {
        // While anyone waits the full path hands slots to the waiters
        // first (it flushes this thread's stack, and steals only with
        // `STEAL`): no shortcut then. Relaxed look: as the fast paths'; a
        // waiter that registers after it sweeps the caches itself.
        !self.waiters.waiting_hint() && self.free.exhausted() && !cache.any_cached()
    }

    /// [`grow`](Self::grow) for an acquire: the slot it takes counts
    /// towards the peak. When every segment is grown, the free list once
    /// more: the last growth may have ended after this thread found the
    /// list empty, and its slots are there now (`grow` saw the growth over
    /// by an Acquire load, which pairs with the end of the growth, after
    /// its push). A pool that never grows has nothing new to find.
    #[cold]
    pub(super) fn grow_taken(&self) -> Option<u32> {
        let index = self.grow().or_else(|| {
            if cfg!(all(loom, tagpool_loom_grow_full_no_pop))
                || self.free.capacity() == self.free.first_segment_len()
            {
                // Loom-only fault injection (`tagpool_loom_grow_full_no_pop`):
                // the old behaviour, a refusal with the last growth's slots
                // free.
                None
            } else {
                self.pop_free()
            }
        })?;
        note_peak(
            &self.counters.peak,
            self.free.in_use(self.free.free_count()),
        );
        Some(index)
    }

    /// Counts `taken`, an index that no magazine counted, in
    /// [`owned`](Self::owned) if it is an owned guard's.
    #[inline]
    fn counted<const OWNED: bool>(&self, taken: Option<u32>) -> Option<u32> {
        taken.map(|index| self.count::<OWNED>(index))
    }

    /// [`counted`](Self::counted) for an index known to be taken.
    #[inline]
    pub(super) fn count<const OWNED: bool>(&self, index: u32) -> u32 {
        if OWNED {
            // Relaxed: the handle is alive (this is an acquire), so the
            // count is far from zero; the decrement that reaches zero is
            // AcqRel and orders everything before it.
            self.owned.fetch_add(1, Ordering::Relaxed);
        }
        index
    }

    /// [`pop_free`](Self::pop_free) for a caller with exclusive access: a
    /// plain load and store of the free list's head (see
    /// [`FreeList::pop_exclusive`](crate::engine::free_list::FreeList::pop_exclusive)).
    /// `None` if the free list is empty: the slots in thread caches and the
    /// growth are left to [`try_pop`](Self::try_pop).
    ///
    /// # Safety
    ///
    /// As `FreeList::pop_exclusive`: no other operation on the pool runs
    /// meanwhile, and the earlier ones are ordered before this call.
    #[inline]
    pub(crate) unsafe fn pop_exclusive(&self) -> Option<u32> {
        // SAFETY: the caller's exclusivity, this function's contract.
        let popped = unsafe { self.free.pop_exclusive() }?;
        note_peak(&self.counters.peak, self.free.in_use(popped.free));
        Some(popped.index)
    }

    /// The peak statistic now, for a caller with exclusive access that is
    /// about to pop slots it gives back at once: see
    /// [`restore_peak`](Self::restore_peak).
    pub(crate) fn peak_exclusive(&self) -> u32 {
        // Relaxed: the caller's exclusive access orders everything.
        self.counters.peak.load(Ordering::Relaxed)
    }

    /// Sets the peak statistic back to `peak` (from
    /// [`peak_exclusive`](Self::peak_exclusive)), for a caller with
    /// exclusive access whose pops since then held slots only to give
    /// them back: those moments are no use of the pool's. The caller then
    /// records what it kept ([`note_held`](Self::note_held)).
    pub(crate) fn restore_peak(&self, peak: u32) {
        // Relaxed: as above; no other thread touches the pool meanwhile.
        self.counters.peak.store(peak, Ordering::Relaxed);
    }

    /// Records the slots held now in the peak, for a caller with exclusive
    /// access that took slots off the free list without recording it
    /// (`FreeList::pop_exclusive`) and gave some of them back.
    pub(crate) fn note_held(&self) {
        note_peak(
            &self.counters.peak,
            self.free.in_use(self.free.free_count()),
        );
    }

    /// Pops the free list, recording the peak.
    #[inline]
    pub(super) fn pop_free(&self) -> Option<u32> {
        let popped = self.free.pop()?;
        note_peak(&self.counters.peak, self.free.in_use(popped.free));
        Some(popped.index)
    }

    /// The free list, then the other threads' caches, until a slot is found
    /// or no cache holds any: with no operation in flight, `None` means
    /// every slot is held by a guard.
    #[cold]
    fn steal(&self, cache: &Cache) -> Option<u32> {
        loop {
            if let Some(index) = self.pop_free() {
                return Some(index);
            }
            if self.free.is_closed() {
                // Pops fail for good; the close has emptied the caches.
                return None;
            }
            // Each round that moved slots is progress: some thread took them.
            // A contended magazine belongs to an operation in flight.
            let moved = cache.sweep(&self.free, &self.waiters, false).moved;
            // An acquire: a waker's panic is dropped (see `unwind.rs`).
            crate::engine::unwind::drop_caught();
            if moved == 0 {
                return None;
            }
        }
    }

    /// Why a `try_pop` found nothing: closed, or exhausted (counted). Out
    /// of line, to keep `try_acquire` small enough to inline.
    #[cold]
    #[inline(never)]
    pub(crate) fn failure(&self) -> TryAcquireError {
        if self.free.is_closed() {
            return TryAcquireError::Closed;
        }
        // Relaxed: a statistic.
        self.counters.failed.fetch_add(1, Ordering::Relaxed);
        TryAcquireError::Exhausted
    }

    /// Turns a taken index into a filled slot, running the factory if the
    /// slot is empty. `OWNED` as given to the `try_pop` that took it.
    ///
    /// # Errors
    ///
    /// The factory's error: the slot went back to the pool, empty (see
    /// [`fill`](Self::fill)).
    #[inline]
    pub(crate) fn take<const OWNED: bool>(&self, index: u32) -> Result<Held<T>, Failure> {
        // SAFETY: `index` came from a successful pop (of the free list or of
        // this thread's cache), so this thread owns it, and the slot has no
        // other `Held`.
        let held = unsafe { self.slots.claim(index) };
        if held.is_empty() {
            // SAFETY: `held` was claimed from `self.slots` just above.
            let index = unsafe { held.into_index(&self.slots) };
            return self.fill::<OWNED>(index);
        }
        self.hold_started(index);
        Ok(held)
    }

    /// [`take`](Self::take) for the fast path: the slot if it holds a
    /// value, else `None`, and the caller fills it ([`fill`](Self::fill))
    /// out of line. Keeps the factory's error, and the registers it needs,
    /// off the acquire's hot path.
    ///
    /// A pool that tracks holds takes the out-of-line branch for every
    /// slot (one test of both words, no taken jump on the common path).
    #[inline(always)]
    pub(crate) fn take_filled(&self, index: u32) -> Option<Held<T>> {
        // SAFETY: as in `take`.
        let held = unsafe { self.slots.claim(index) };
        // `|`, not `||`: one branch, which the common case does not take.
        if held.is_empty() | self.slots.tracks_holds() {
            return self.take_filled_slow(held, index);
        }
        Some(held)
    }

    /// [`take_filled`](Self::take_filled) of an empty slot, or in a pool
    /// that tracks holds.
    #[cold]
    #[inline(never)]
    fn take_filled_slow(&self, held: Held<T>, index: u32) -> Option<Held<T>> {
        if held.is_empty() {
            // End this `Held` before `fill` claims the slot again.
            // SAFETY: `held` was claimed from `self.slots` by the caller.
            let _ = unsafe { held.into_index(&self.slots) };
            return None;
        }
        self.hold_started(index);
        Some(held)
    }

    /// Fills the empty slot `index`, owned by this thread: with an idle
    /// value if one is found anywhere in the pool (see
    /// [`idle_instead`](Self::idle_instead)), else with the factory's.
    ///
    /// No user code runs while a retry loop is open: the factory runs
    /// between the pop that took the slot and the guard. If it fails or
    /// panics, the slot goes back empty through the release path (to a
    /// waiter, if one waits: none is left waiting for a slot that came and
    /// went), and the next acquire that takes it tries again.
    #[cold]
    #[inline(never)]
    pub(crate) fn fill<const OWNED: bool>(&self, index: u32) -> Result<Held<T>, Failure> {
        let factory = match &self.factory {
            Some(factory) => factory,
            // A pool without a factory retires its empty slots (see
            // `retire.rs`): none is ever on the free list.
            None => unreachable!("tagpool: an empty slot in a pool without a factory"),
        };
        // Idle values first: the factory runs only when none is idle (a
        // connection pool whose server refuses new connections still
        // serves the ones it has).
        if let Some(held) = self.idle_instead(index) {
            return Ok(held);
        }
        let made = panic::catch_unwind(AssertUnwindSafe(factory));
        let value = match made {
            Ok(Ok(value)) => value,
            Ok(Err(error)) => {
                self.give_back_unfilled::<OWNED>(index);
                return Err(error);
            }
            Err(payload) => {
                // The factory's panic goes on.
                self.give_back_unfilled::<OWNED>(index);
                panic::resume_unwind(payload);
            }
        };
        // SAFETY: this thread still owns `index` (it popped it and has not
        // pushed it), and the `Held` consumed by `take` is gone.
        let mut held = unsafe { self.slots.claim(index) };
        held.fill(value);
        self.note_filled(1);
        self.hold_started(index);
        Ok(held)
    }

    /// Gives back the slot `index`, still empty, after its fill failed.
    #[cold]
    fn give_back_unfilled<const OWNED: bool>(&self, index: u32) {
        let (settle, woke) = self.push::<OWNED>(index);
        // SAFETY: this is an acquire, so the handle is alive and keeps the
        // state alive whatever `finish` does.
        unsafe { Self::finish(NonNull::from(self), settle) };
        // An acquire: a waker's panic is dropped (see `unwind.rs`).
        crate::engine::unwind::discard(woke);
    }
}
