//! The full-pool path of an insert: the eviction policy picks a live value
//! nobody reads, takes its entry (one CAS), hands the value to `on_evict`
//! (or drops it), and gives the inserter the entry, free and its own.

use core::cmp::Ordering as CmpOrdering;
use std::panic::{self, AssertUnwindSafe};

use super::entry;
use super::{Handle, HandlePool, Key, Policy, Ref};
use crate::sync::Ordering;

impl<T, K: Key> HandlePool<T, K> {
    /// An entry that a grace period frees for an insert, in a pool that has
    /// had sections: this insert's own, or one that another thread's runs
    /// (waited for: its walk is short, no user code and no waiting, and
    /// ends with the pushes this insert needs to see).
    #[cold]
    #[inline(never)]
    fn claim_freed(&self) -> Option<u32> {
        if self.may_free_entries() && self.reclaim() == 0 {
            self.sections.limbo.wait_for_walks();
        }
        // Entries freed by this grace period, or by another thread's since
        // this insert's first pop (its walk ended before the look above):
        // they went to the free list, where another thread may have taken
        // them since.
        self.indices.pool().state().try_pop::<false>()
    }

    /// An entry for an insert that found no free one: one freed by a grace
    /// period (in a pool read through sections, when removed entries wait
    /// for one), else an evicted one (a free entry this thread owns: a
    /// victim's, its value handed over, or one freed meanwhile); `None` if
    /// the pool does not evict or nothing could go. Out of line, with the
    /// look at the sections first, so that a full pool's refused insert
    /// pays one call, as before sections existed.
    ///
    /// # Panics
    ///
    /// If the comparator, `on_evict` or the evicted value's drop panics:
    /// the evicted entry is given back first (see [`hand_over`](Self::hand_over)).
    #[cold]
    pub(super) fn evict(&self) -> Option<u32> {
        // Loom-only fault injection: an insert that gives up when another
        // thread's grace period holds the entries it needs.
        if self.sections.domain.used_hint() && !cfg!(all(loom, tagpool_loom_insert_skips_walk)) {
            if let Some(index) = self.claim_freed() {
                return Some(index);
            }
        }
        if let Policy::Never = self.policy {
            return None;
        }
        // Each failed try means another thread changed an entry (read it,
        // removed it, evicted it) or freed one, or the victim's entry
        // retired: retry a few times, then give up rather than wait for
        // readers.
        for _ in 0..4 {
            let sections = self.sections.domain.used();
            // In a pool read through sections, a victim's entry is reused
            // only once no section that may see it is open, and every open
            // section may (its tag is above every announced epoch): while
            // one is open, evicting would end a value for nothing.
            if sections && self.sections.domain.oldest_reader() != u64::MAX {
                return None;
            }
            if let Some((index, old)) = self.take_victim() {
                if sections {
                    return self.evict_deferred(index);
                }
                if self.hand_over(index, old) {
                    return Some(index);
                }
                // The victim's entry retired: the value needs another.
                continue;
            }
            // No victim: every value is read, or changing; an entry may
            // have come free meanwhile.
            if let Some(index) = self.indices.pool().state().try_pop::<false>() {
                return Some(index);
            }
        }
        None
    }

    /// Picks a victim by the policy and takes it: on success this thread
    /// owns the entry `index` (its generation bumped, its value still in
    /// it), whose ended occupancy had handle `old`.
    fn take_victim(&self) -> Option<(u32, Handle)> {
        match &self.policy {
            Policy::Never => None,
            Policy::Oldest => {
                let mut best: Option<(u64, u32, u64)> = None;
                for index in 0..self.used() {
                    // Not allocated yet (`initial`): nothing to evict there.
                    let entry = match self.entries.get(index) {
                        Some(entry) => entry,
                        None => continue,
                    };
                    // Acquire: the stamp read next is the one published
                    // with this word (or a later one: then the CAS fails).
                    let state = entry.state.load(Ordering::Acquire);
                    if !evictable(state, 0) {
                        continue;
                    }
                    let stamp = entry.stamp.load(Ordering::Relaxed);
                    if best.map_or(true, |(oldest, _, _)| stamp < oldest) {
                        best = Some((stamp, index as u32, state));
                    }
                }
                let (_, index, state) = best?;
                self.end_occupancy(index, state)
            }
            Policy::Least(cmp) => {
                let mut best: Option<Ref<'_, T, K>> = None;
                for index in 0..self.used() as u32 {
                    let entry = match self.entries.get(index as usize) {
                        Some(entry) => entry,
                        None => continue,
                    };
                    // Relaxed: a hint; `read` re-checks with Acquire.
                    let state = entry.state.load(Ordering::Relaxed);
                    if !evictable(state, 0) {
                        continue;
                    }
                    let candidate =
                        match self.read_counted(Handle::new(index, entry::generation(state))) {
                            Some(candidate) => candidate,
                            None => continue,
                        };
                    // User code, outside any retry loop: this thread holds
                    // counted reads of both values, so neither can be
                    // dropped or replaced meanwhile.
                    let better = match &best {
                        None => true,
                        Some(current) => cmp(&candidate, current) == CmpOrdering::Less,
                    };
                    if better {
                        best = Some(candidate);
                    }
                }
                let best = best?;
                let (index, generation) = (best.handle.index() as u32, best.handle.generation());
                // Our own read is the one reader the CAS may see.
                let state = entry::free(generation) | entry::COUNTED | entry::ONE_READER;
                let taken = self.end_occupancy(index, state);
                match taken {
                    // The read became ownership: the `Ref` must not count
                    // itself out of a word it no longer is in.
                    Some(_) => Ref::into_owner(best),
                    None => drop(best),
                }
                taken
            }
        }
    }

    /// Ends the occupancy `state` of entry `index` if the word still is
    /// `state`: this thread then owns the entry.
    fn end_occupancy(&self, index: u32, state: u64) -> Option<(u32, Handle)> {
        let entry = &self.entries[index as usize];
        let ended = entry::free(entry::ended(state));
        #[cfg(all(loom, tagpool_loom_evict_ignores_readers))]
        let state = {
            // Loom-only fault injection: an eviction that takes the entry
            // whatever its readers. The eviction model must report the
            // write under a live `Ref`.
            let now = entry.state.load(Ordering::Acquire);
            if entry::is_occupied(now) && entry::generation(now) == entry::generation(state) {
                now
            } else {
                state
            }
        };
        // SeqCst: Acquire pairs with the readers' Release decrements (their
        // reads happen before this thread drops or replaces the value);
        // SeqCst with the load of `used` after it pairs with the first
        // read section's store and fence (see `read/domain.rs`).
        entry
            .state
            .compare_exchange(index, state, ended, Ordering::SeqCst, Ordering::Relaxed)
            .ok()
            .map(|_| (index, Handle::new(index, entry::generation(state))))
    }

    /// The end of an eviction in a pool read through sections, which saw
    /// no section open: the victim's entry `index` goes to the limbo (its
    /// value to `on_evict` once no section that could see it is open), and
    /// a grace period runs at once. Returns an entry it freed: the
    /// victim's, unless a section opened since the look (then the insert
    /// fails, and the victim's value goes to `on_evict` at a later grace
    /// period).
    ///
    /// # Panics
    ///
    /// As [`reclaim`](HandlePool::reclaim), after every entry it freed is
    /// back.
    fn evict_deferred(&self, index: u32) -> Option<u32> {
        self.counters.evicted();
        let _ = self.defer(index, true);
        self.reclaim();
        self.indices.pool().state().try_pop::<false>()
    }

    /// Takes the value out of entry `index`, taken by this thread from the
    /// occupancy `old`, and hands it to `on_evict` or drops it. `true` if
    /// the entry is free for the insert; `false` if that occupancy was the
    /// entry's last and the entry retired.
    ///
    /// # Panics
    ///
    /// If `on_evict` or the value's drop panics: the entry is given back to
    /// the free list first (unless it retired), so that nothing is lost.
    fn hand_over(&self, index: u32, old: Handle) -> bool {
        let entry = &self.entries[index as usize];
        // SAFETY: `end_occupancy` made this thread the entry's owner.
        let evicted = unsafe { entry.take() }.expect("an occupied entry holds a value");
        let retired = entry.retired();
        if retired {
            // Before any user code: the count is right however it ends.
            self.retire();
        }
        self.counters.evicted();
        let handed = panic::catch_unwind(AssertUnwindSafe(|| match &self.on_evict {
            Some(on_evict) => on_evict(old, evicted),
            None => drop(evicted),
        }));
        if let Err(payload) = handed {
            // The entry is free and empty: give its index back (unless it
            // retired), then let the panic go on (the insert's value is
            // dropped as it unwinds).
            if !retired {
                let (settle, woke) = self.indices.pool().state().push::<false>(index);
                debug_assert!(matches!(settle, crate::engine::cache::Settle::Done));
                // `on_evict`'s panic goes on; a waker's is dropped.
                crate::engine::unwind::discard(woke);
            }
            panic::resume_unwind(payload);
        }
        !retired
    }
}

/// Whether a word is a live value with `mine` readers (the caller's own).
#[inline]
fn evictable(state: u64, mine: u64) -> bool {
    #[cfg(all(loom, tagpool_loom_evict_ignores_readers))]
    {
        let _ = mine;
        entry::is_occupied(state)
    }
    #[cfg(not(all(loom, tagpool_loom_evict_ignores_readers)))]
    {
        if cfg!(all(loom, tagpool_loom_evict_free)) {
            // Loom-only fault injection: a free entry (no readers) taken
            // as a victim, under its remover or a racing inserter. The
            // model of a remove racing an evicting insert must fail.
            return entry::is_occupied(state) || entry::readers(state) == mine;
        }
        entry::is_occupied_with(state, mine)
    }
}
