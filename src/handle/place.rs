//! [`HandlePool::insert_at`]: a value placed under a key of the caller's
//! choosing, through `&mut self` (replication, undo), and the exclusive
//! steps it shares with loading a saved pool: taking one free entry out of
//! wherever the pool keeps it, and filling an entry under a given
//! generation.
//!
//! A free entry is in one of four places: the chain of entries vacated
//! through `&mut self` (`HandlePool::vacant`), the index pool's free list,
//! a thread's cache of that free list, or (in a pool read through
//! sections) the limbo of entries awaiting a grace period. With `&mut
//! self` no grace period is needed (no section is open), and every cache
//! can be swept into the free list, so each place is reached by plain
//! exclusive steps.

use super::entry;
use super::key::FIRST_GENERATION;
use super::{HandlePool, Key, NIL};
use crate::engine::free_list::FreeList;
use crate::error::InsertAtError;
use crate::index::IndexPool;
use crate::sync::Ordering;

impl<T, K: Key> HandlePool<T, K> {
    /// Stores `value` under exactly `key`, through `&mut self`: for a
    /// replica that applies another pool's inserts under the keys that pool
    /// returned, or a pool rebuilt from a log of inserts (an undo history
    /// replayed up to a point). Unlike thunderdome's `insert_at`, it never
    /// replaces a value, and never brings a stale key back.
    ///
    /// The key's entry must be free, at a generation no later than the
    /// key's: a free entry at generation `g` has handed out keys up to
    /// `g - 1` (each stale now) and `key` may be `g` (the key the next
    /// insert into that entry would return) or any later one. The entry
    /// then holds `value` under the key's generation; keys of the
    /// generations in between were never handed out, and are stale. A
    /// later removal moves the entry past the key, as usual.
    ///
    /// The entry is taken out of wherever the pool keeps it free: the chain
    /// of entries vacated through `&mut self` (the others keep their
    /// order), or the free list, where the entries above it keep their
    /// order too. Taking it from the free list pops the entries above it and
    /// pushes them back: O(entries above it); entries that threads' caches
    /// held (see [`thread_cache`](crate::HandleBuilder::thread_cache)) may
    /// be moved to the free list. Entries that await a grace period (in a
    /// pool read through [sections](HandlePool::read)) are freed first, as
    /// [`clear`](HandlePool::clear) frees them.
    ///
    /// # Errors
    ///
    /// With the value, the pool unchanged:
    /// [`InsertAtError::OutOfRange`] if the key's index is at or above the
    /// capacity; [`InsertAtError::Occupied`] if the entry holds a value;
    /// [`InsertAtError::Stale`] if the entry's generation is past the
    /// key's; [`InsertAtError::Retired`] if the entry is
    /// [retired](HandlePool::retired).
    ///
    /// # Panics
    ///
    /// If the drop (or `on_evict`) of a value that awaited a grace period
    /// panics: after every such entry is free, `value` dropped. Likewise if
    /// the allocation of a segment of entries unwinds
    /// ([`initial`](crate::HandleBuilder::initial)): the pool keeps every
    /// entry.
    ///
    /// # Examples
    ///
    /// A replica places each value under the key the primary returned,
    /// whatever order its own free entries are in.
    ///
    /// ```
    /// use tagpool::HandlePool;
    ///
    /// let primary = HandlePool::new(8);
    /// let mut replica = HandlePool::new(8);
    /// let x = primary.insert('x').unwrap();
    /// let y = primary.insert('y').unwrap();
    /// primary.remove(x);
    /// let z = primary.insert('z').unwrap();
    /// assert_eq!((z.index(), z.generation()), (x.index(), 2));
    /// for (key, value) in [(y, 'y'), (z, 'z')] {
    ///     replica.insert_at(key, value).unwrap();
    /// }
    /// assert_eq!(replica.get_mut(z), Some(&mut 'z'));
    /// assert!(!replica.contains(x), "x's generation was skipped: stale");
    /// assert_eq!(replica.len(), 2);
    /// ```
    ///
    /// A live entry is refused, and a removed key stays stale.
    ///
    /// ```
    /// use tagpool::{HandlePool, InsertAtError};
    ///
    /// let mut pool = HandlePool::new(4);
    /// let a = pool.insert_mut("a").unwrap();
    /// assert_eq!(pool.insert_at(a, "b"), Err(InsertAtError::Occupied("b")));
    /// let removed = pool.remove_mut(a).unwrap();
    /// assert_eq!(pool.insert_at(a, removed), Err(InsertAtError::Stale("a")));
    /// assert!(pool.is_empty());
    /// ```
    pub fn insert_at(&mut self, key: K, value: T) -> Result<(), InsertAtError<T>> {
        let handle = key.handle();
        if handle.index() >= self.capacity() {
            return Err(InsertAtError::OutOfRange(value));
        }
        let index = handle.index() as u32;
        // Relaxed: `&mut self` orders everything. An entry never allocated
        // was never filled: free, at the first generation.
        let state = match self.entries.get(index as usize) {
            Some(entry) => entry.state.load(Ordering::Relaxed),
            None => entry::free(FIRST_GENERATION),
        };
        if !entry::is_free(state) {
            return Err(InsertAtError::Occupied(value));
        }
        let current = entry::generation(state);
        if entry::is_retired(current) {
            return Err(InsertAtError::Retired(value));
        }
        if handle.generation() < current {
            return Err(InsertAtError::Stale(value));
        }
        if !self.take_free(index) {
            // Unreachable: a free entry of a pool borrowed `&mut` is in one
            // of the places `take_free` looks.
            debug_assert!(false, "free entry {index} found nowhere");
            return Err(InsertAtError::Occupied(value));
        }
        self.fill_at(index, handle.generation(), value);
        Ok(())
    }

    /// Stores `value` in entry `index`, free and out of every list, under
    /// `generation`, through `&mut self`: the entry's segment allocated if
    /// need be, the insertion stamp taken (oldest-first eviction), the
    /// high mark raised.
    pub(super) fn fill_at(&mut self, index: u32, generation: u64, value: T) {
        // If the allocation unwinds, the index goes back to the free list,
        // where it came from (an entry of the chain was filled before, so
        // its segment is allocated).
        let entry = self.entries.claim(index, &self.indices);
        // Relaxed, here and below: `&mut self` orders everything.
        entry
            .state
            .store(index, entry::free(generation), Ordering::Relaxed);
        // SAFETY: `&mut self`: this thread owns every entry, and this one
        // is free and on no list (the caller took it off).
        unsafe { entry.put(value) };
        self.stamp(entry);
        entry.publish_vacated(index);
        if index >= self.high.load(Ordering::Relaxed) {
            self.high.store(index + 1, Ordering::Relaxed);
        }
    }
}

impl<T, K> HandlePool<T, K> {
    /// Takes the free entry `index` off the chain of vacated entries, the
    /// free list or a thread's cache, through `&mut self`, freeing the
    /// entries that await a grace period first if it is not on the chain:
    /// `false` if it is in none of them.
    fn take_free(&mut self, index: u32) -> bool {
        if self.unlink_vacant(index) {
            return true;
        }
        if self.awaiting_reuse() != 0 {
            // Its value may still be in the cell: free it (and the others)
            // now, as `insert_mut` does when nothing else is free.
            self.reclaim_exclusive();
        }
        // The entries it pops above `index` go back at once: they were never
        // in use, so the peak forgets them (with thread caches it stays an
        // upper bound: a cache's own bound is not reset).
        let state = self.indices.pool().state();
        let peak = state.peak_exclusive();
        // SAFETY: `&mut self`: no other operation on the index pool runs.
        let taken = unsafe { take_index(&self.indices, index) };
        state.restore_peak(peak);
        // What it holds now (the chain of vacated entries included: an
        // upper bound, as inserts that take from the chain record nothing).
        state.note_held();
        taken
    }

    /// Takes entry `index` off the chain of vacated entries, whose other
    /// entries keep their order: `false` if it is not on it.
    fn unlink_vacant(&mut self, index: u32) -> bool {
        if index >= self.high.load(Ordering::Relaxed) {
            // Never filled, hence never vacated.
            return false;
        }
        // Relaxed, here and below: `&mut self` orders everything.
        let mut before = NIL;
        let mut at = self.vacant.load(Ordering::Relaxed);
        while at != NIL {
            let next = self.entries.at(at).stamp.load(Ordering::Relaxed);
            if at == index {
                if before == NIL {
                    self.vacant.store(next as u32, Ordering::Relaxed);
                } else {
                    self.entries.at(before).stamp.store(next, Ordering::Relaxed);
                }
                let len = self.vacant_len.load(Ordering::Relaxed);
                self.vacant_len.store(len - 1, Ordering::Relaxed);
                return true;
            }
            before = at;
            at = next as u32;
        }
        false
    }
}

/// Pops one index for a caller with exclusive access: the free list's top,
/// else (the list empty) what a `try_pop` finds in the threads' caches or
/// by growing the list; `None` if every index is out of the index pool.
///
/// # Safety
///
/// No other operation on `indices` runs until this returns, and the earlier
/// ones are ordered before it (a `&mut` borrow of the pool that owns it).
pub(super) unsafe fn pop_index(indices: &IndexPool) -> Option<u32> {
    let shared = indices.pool().state();
    // SAFETY: the caller's exclusive access (this function's contract).
    match unsafe { shared.free_list().pop_exclusive() } {
        Some(popped) => Some(popped.index),
        None => shared.try_pop::<false>(),
    }
}

/// Takes `index` out of the index pool, for a caller with exclusive access:
/// pops until it comes, and pushes the others back in their order (on top,
/// where they were, if they came from the free list); `false` if it never
/// comes.
///
/// # Safety
///
/// As [`pop_index`].
unsafe fn take_index(indices: &IndexPool, index: u32) -> bool {
    let mut above = Held {
        free: indices.pool().state().free_list(),
        chain: Vec::new(),
    };
    loop {
        // SAFETY: the caller's exclusive access (this function's contract).
        match unsafe { pop_index(indices) } {
            Some(popped) if popped == index => return true,
            Some(popped) => above.chain.push(popped),
            None => return false,
        }
    }
}

/// Indices popped by a caller with exclusive access, top first: pushed back
/// in that order when dropped (also if an allocation in a growth unwinds).
pub(super) struct Held<'a> {
    pub(super) free: &'a FreeList,
    pub(super) chain: Vec<u32>,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if !self.chain.is_empty() {
            // The first popped back on top.
            self.free.push_batch(&self.chain);
        }
    }
}
