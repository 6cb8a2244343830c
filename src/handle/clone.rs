//! `Clone` for a [`HandlePool`]: a new pool with the same settings, whose
//! keys name clones of the values live throughout the clone, and whose
//! stale keys stay stale.
//!
//! The copy reads the source through `&self`, so other threads may insert
//! and remove meanwhile: each value is read through a counted
//! [`Ref`](super::Ref), as [`get`](HandlePool::get) reads it (never racing
//! a drop), and copied with its entry's generation. The clone is built
//! by this thread alone, through its exclusive path: the indices below
//! the source's high mark come off its fresh free list, each entry takes
//! the source's generation (and value, if live), and the free ones go on
//! its chain of vacated entries (see `HandlePool::vacant`).

use std::sync::Arc;

use super::entry;
use super::key::FIRST_GENERATION;
use super::{Handle, HandleBuilder, HandlePool, Key, Policy, NIL};
use crate::index::IndexPool;
use crate::sync::Ordering;

/// What the clone's entry takes from the source's.
enum Copied<T> {
    /// A live value: its generation, a clone of it, its insertion stamp.
    Live(u64, T, u64),
    /// No value: the generation its next value will have (0, retired).
    Free(u64),
}

impl<T: Clone, K: Key> Clone for HandlePool<T, K> {
    /// A new pool with the same settings (capacity, entries allocated at
    /// build, eviction policy, `on_evict`, per-thread cache size) in which
    /// every key of the source names a clone of the value it names in the
    /// source, as the clone saw it, and every stale key of the source is
    /// stale (the generations are copied, retired entries included).
    ///
    /// A snapshot, not an atomic one: other threads may insert and remove
    /// while it is taken. A value live from the start of the clone to its
    /// end is in it; a value inserted or removed meanwhile may or may not
    /// be. Each value is read as [`get`](HandlePool::get) reads it, through
    /// a counted [`Ref`](super::Ref) for the span of its `T::clone`, so a
    /// concurrent [`take`](HandlePool::take) of it may fail with
    /// [`TakeError::BeingRead`](super::TakeError::BeingRead), and an
    /// eviction passes it over, as for any reader.
    ///
    /// The clone shares the source's eviction key function and `on_evict`
    /// (they are kept in `Arc`s). It has had no
    /// [read section](HandlePool::read); its statistics start at zero (its
    /// peak from the entries the copy took). Its free entries are reused
    /// lowest index first, then the entries never used, in the order of a
    /// new pool: the source's own order (its free list and per-thread
    /// caches) is not copied.
    ///
    /// # Panics
    ///
    /// If `T::clone` panics: the panic propagates, the clone made so far is
    /// dropped, and the source is as it was (the read is counted out).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let a = pool.insert(String::from("a")).unwrap();
    /// let gone = pool.insert(String::from("gone")).unwrap();
    /// pool.remove(gone);
    /// let copy = pool.clone();
    /// assert_eq!(copy.with(a, |s| s.clone()).as_deref(), Some("a"));
    /// assert!(!copy.contains(gone), "stale in the clone too");
    /// assert!(pool.remove(a) && copy.contains(a), "two pools from now on");
    /// ```
    fn clone(&self) -> Self {
        // Relaxed: see `fill`: the fills that happened before this clone
        // are below it.
        let used = self.used();
        let mut clone = self.empty_clone();
        clone.copy_from(self, used);
        clone
    }
}

impl<T: Clone, K: Key> HandlePool<T, K> {
    /// A new pool with the settings of this one, empty.
    fn empty_clone(&self) -> Self {
        let capacity = self.capacity();
        let mut builder: HandleBuilder<T, K> = HandlePool::builder_with_key().capacity(capacity);
        let first = self.entries.first_segment().len();
        if first < capacity {
            builder = builder.initial(first);
        }
        let cache = self.indices.pool().state().thread_cache_size();
        if cache != default_cache_size(capacity) {
            builder = builder.thread_cache_size(cache);
        }
        let mut clone = match builder.build() {
            Ok(clone) => clone,
            Err(err) => unreachable!("the settings of a pool that was built: {err}"),
        };
        clone.policy = match &self.policy {
            Policy::Never => Policy::Never,
            Policy::Oldest => Policy::Oldest,
            Policy::Least(compare) => Policy::Least(Arc::clone(compare)),
        };
        clone.on_evict = self.on_evict.clone();
        clone
    }

    /// Copies the entries below `used` of `source` into this pool, this
    /// thread's alone, whose every index is free (a new pool).
    fn copy_from(&mut self, source: &Self, used: usize) {
        // Take the indices below `used` off the free list, and give back
        // the others that come off on the way (a new pool gives them in
        // order, its growths included, so there are none; nothing else
        // promises that order).
        let mut above = Vec::new();
        let mut taken = 0;
        while taken < used {
            let index = self.pop_fresh();
            if (index as usize) < used {
                taken += 1;
            } else {
                above.push(index);
            }
        }
        let mut clock = 0;
        let mut retired = 0;
        for index in 0..used {
            // Allocates the entry's segment in a pool built with
            // `initial`; the index is this thread's (popped above).
            let entry = self.entries.claim(index as u32, &self.indices);
            // User code (`T::clone`): a panic leaves this pool consistent
            // (entries free or filled), and it is dropped.
            match source.copy_entry(index) {
                Copied::Live(generation, value, stamp) => {
                    // Relaxed, here and below: this pool is this thread's
                    // alone; whatever hands it to another thread publishes
                    // it.
                    entry
                        .state
                        .store(index as u32, entry::free(generation), Ordering::Relaxed);
                    // SAFETY: the entry is this thread's: its index was
                    // popped above, and the pool is not shared yet.
                    unsafe { entry.put(value) };
                    entry.stamp.store(stamp, Ordering::Relaxed);
                    entry.publish(index as u32);
                    clock = clock.max(stamp.wrapping_add(1));
                }
                Copied::Free(generation) => {
                    entry
                        .state
                        .store(index as u32, entry::free(generation), Ordering::Relaxed);
                    if entry::is_retired(generation) {
                        retired += 1;
                    }
                }
            }
        }
        self.high.store(used as u32, Ordering::Relaxed);
        self.counters.retired.store(retired, Ordering::Relaxed);
        let clock = clock.max(source.clock.load(Ordering::Relaxed));
        self.clock.store(clock, Ordering::Relaxed);
        // The free entries onto the chain of vacated entries, the lowest
        // on top (the chain is a stack): inserts take them first.
        let mut head = NIL;
        let mut chained = 0;
        for index in (0..used as u32).rev() {
            let entry = self.entries.at(index);
            let state = entry.state.load(Ordering::Relaxed);
            if !entry::is_occupied(state) && !entry::is_retired(entry::generation(state)) {
                entry.stamp.store(u64::from(head), Ordering::Relaxed);
                head = index;
                chained += 1;
            }
        }
        self.vacant.store(head, Ordering::Relaxed);
        self.vacant_len.store(chained, Ordering::Relaxed);
        // The highest first, so that the free list gives the lowest first.
        above.sort_unstable();
        for &index in above.iter().rev() {
            let (settle, woke) = self.indices.pool().state().push::<false>(index);
            debug_assert!(matches!(settle, crate::engine::cache::Settle::Done));
            // Nobody waits for a handle pool's indices.
            crate::engine::unwind::discard(woke);
        }
    }

    /// An index off this pool's free list, which still holds one.
    fn pop_fresh(&mut self) -> u32 {
        let state = self.indices.pool().state();
        // SAFETY: `&mut self`: no other operation on the indices runs now
        // (the pool is new, and this thread's alone).
        let popped = unsafe { state.pop_exclusive() };
        // A segment to grow (a pool built with `initial`), or an index in
        // this thread's cache.
        match popped.or_else(|| state.try_pop::<false>()) {
            Some(index) => index,
            None => unreachable!("a new pool has every index free"),
        }
    }

    /// What the entry `index` of this pool holds now, for its clone.
    fn copy_entry(&self, index: usize) -> Copied<T> {
        let entry = match self.entries.get(index) {
            Some(entry) => entry,
            // A segment this thread does not see: no handle of it can have
            // reached this thread, and no fill before the clone made it.
            None => return Copied::Free(FIRST_GENERATION),
        };
        // Relaxed: a first look; the counted read below orders the value.
        let state = entry.state.load(Ordering::Relaxed);
        if entry::is_reserved(state) {
            // A reservation (`reserve.rs`) is no value: the clone's entry
            // is free under the next generation, so the reserved key is
            // stale there.
            return Copied::Free(entry::ended(state));
        }
        if !entry::is_occupied(state) {
            // Free, removed while read or awaiting a grace period (its
            // generation the next one already), or retired (0).
            return Copied::Free(entry::generation(state));
        }
        let handle = Handle::new(index as u32, entry::generation(state));
        if let Some(value) = self.read_counted(handle) {
            // Relaxed: written before the publish, which the read's
            // Acquire ordered before this load.
            let stamp = entry.stamp.load(Ordering::Relaxed);
            let copy = T::clone(&value);
            return Copied::Live(handle.generation(), copy, stamp);
        }
        // Ended since the look: not live at the end of the clone.
        let state = entry.state.load(Ordering::Relaxed);
        if !entry::is_occupied(state) {
            Copied::Free(entry::generation(state))
        } else {
            // Another value, inserted during the clone: left out, and no
            // key of the clone names it.
            Copied::Free(entry::ended(state))
        }
    }
}

/// The per-thread cache size that a pool of `capacity` entries gets by
/// default: a clone of a pool that has it keeps the default rule (which
/// shrinks each thread's share as threads arrive) rather than a fixed size.
/// (A pool that set this very size itself gets the default rule too: it
/// differs in speed only, never in what the pool does.)
fn default_cache_size(capacity: usize) -> usize {
    match IndexPool::builder().capacity(capacity).initial(1).build() {
        Ok(probe) => probe.pool().state().thread_cache_size(),
        Err(_) => usize::MAX,
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::age;
    use crate::{Handle, HandlePool};

    /// The copy takes the indices it needs off a free list that gives
    /// them in any order, and gives back the others it took on the way:
    /// every entry of the capacity stays usable, once.
    #[test]
    fn a_copy_gives_back_the_indices_it_took_but_does_not_need() {
        let source = HandlePool::builder()
            .capacity(4)
            .thread_cache(false)
            .build()
            .unwrap();
        let kept = source.insert(7u32).unwrap();
        source.insert(8).unwrap();
        assert_eq!(source.used(), 2);
        // Every index free, the highest on top of the free list.
        let mut target: HandlePool<u32> = HandlePool::builder()
            .capacity(4)
            .thread_cache(false)
            .build()
            .unwrap();
        let taken: Vec<_> = (0..4).map(|v| target.insert(v).unwrap()).collect();
        for &key in &taken {
            assert!(target.remove(key));
        }
        source.remove(kept);
        target.copy_from(&source, source.used());
        assert_eq!(target.len(), 1);
        let mut indices: Vec<_> = (0..3).map(|v| target.insert(v).unwrap().index()).collect();
        assert!(target.insert(9).is_err(), "full");
        indices.sort_unstable();
        assert_eq!(indices, [0, 2, 3], "1 holds the copied value");
    }

    /// A retired entry stays retired in the clone (its index never comes
    /// back), and an entry one value short of retiring retires there after
    /// that value, as in the source.
    #[test]
    fn a_clone_keeps_retired_entries_retired_and_generations_as_they_are() {
        let pool = HandlePool::builder()
            .capacity(3)
            .thread_cache(false)
            .build()
            .unwrap();
        age(&pool.entries[0], 0, Handle::MAX_GENERATION);
        age(&pool.entries[1], 1, Handle::MAX_GENERATION);
        let a = pool.insert('a').unwrap();
        let b = pool.insert('b').unwrap();
        assert_eq!((a.index(), b.index()), (0, 1));
        assert!(pool.remove(a));
        assert_eq!(pool.retired(), 1);
        let copy = pool.clone();
        assert_eq!((copy.retired(), copy.len()), (1, 1));
        assert_eq!(copy.get(b).as_deref(), Some(&'b'));
        let c = copy.insert('c').unwrap();
        assert_eq!(c.index(), 2, "not the retired entry");
        assert!(copy.insert('d').is_err(), "full: one live, one retired");
        assert!(copy.remove(b));
        assert_eq!(copy.retired(), 2, "b's was the last generation");
        assert!(copy.insert('e').is_err());
    }
}
