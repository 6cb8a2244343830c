//! Keys reserved before their values exist, from any thread:
//! [`HandlePool::reserve`], filled later by
//! [`insert_reserved`](HandlePool::insert_reserved) or given back by
//! [`cancel_reservation`](HandlePool::cancel_reservation).
//!
//! # Protocol
//!
//! A reservation claims a free entry as an insert does (the chain of
//! entries vacated through `&mut`, the free list, else an eviction), and
//! marks its word *reserved*: its generation `g`, no flag, every reader bit
//! set ([`entry::reserved`]). No other word looks like it: readers are
//! counted only on an occupied word, and a removed word keeps its
//! `REMOVED` flag while a reader is left. So:
//!
//! - the entry is out of the free list, and counts towards the capacity
//!   (in `len` it is not a value: `Counters::reserved` takes it out);
//! - the key `(g, index)` reads `None`: every read checks `OCCUPIED` (the
//!   read CAS, a section's `is_live`);
//! - an eviction takes only an occupied entry, never a reserved one;
//! - the walks (`iter`, the `&mut` API) skip it, as any entry that is not
//!   occupied.
//!
//! Filling and cancelling race through one CAS of the word from
//! `reserved(g)`, which only the key's generation matches: the fill's to
//! `free(g)`, after which the filling thread owns a free entry and fills
//! it as an insert does (the value, the stamp, the high mark, the Release
//! publish that readers' Acquire CAS pairs with); the cancel's to
//! `free(ended(g))`, after which the cancelling thread owns it and gives it
//! back (or retires it, if `g` was its last generation). A key of another
//! generation, or a second fill or cancel, finds another word and fails.
//! The reserving thread's store of the mark is Release, the CAS Acquire:
//! whatever the reserver did to the entry (a segment it allocated, an
//! evicted value it took out) happens before the winner's use of it.

use super::entry::{self, Entry};
use super::{Handle, HandlePool, Key};
use crate::error::InsertError;
use crate::sync::Ordering;

impl<T, K: Key> HandlePool<T, K> {
    /// Reserves a key with no value yet, from any thread: the entry is
    /// taken as an insert takes one (evicting a value if the pool is full
    /// and evicts), and counts towards the capacity until
    /// [`insert_reserved`](Self::insert_reserved) publishes a value under
    /// the key or [`cancel_reservation`](Self::cancel_reservation) gives
    /// the entry back. Until then the key reads `None` (as a key whose value
    /// was removed), is never evicted, and is not in `len` nor in any walk;
    /// [`is_reserved`](Self::is_reserved) says it is held.
    ///
    /// As bevy's `reserve_entity` or hecs' `reserve_entity`: systems that
    /// run in parallel spawn entities whose components are written at the
    /// frame's end. A reservation that is neither filled nor cancelled
    /// (its key lost) keeps its entry until the pool drops, as a forgotten
    /// guard keeps its slot.
    ///
    /// Returns `None` when every entry is in use and nothing can be
    /// evicted (counted in
    /// [`HandleStats::refused_inserts`](crate::HandleStats::refused_inserts)).
    ///
    /// # Panics
    ///
    /// As [`insert`](Self::insert), if an eviction's user code panics or
    /// the allocation of a segment of entries unwinds.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(2);
    /// let key = pool.reserve().unwrap();
    /// assert!(pool.get(key).is_none() && pool.is_reserved(key));
    /// assert_eq!(pool.len(), 0);
    /// pool.insert(1).unwrap();
    /// assert!(pool.insert(2).is_err(), "the reservation holds an entry");
    /// pool.insert_reserved(key, 7).unwrap();
    /// assert_eq!(pool.with(key, |v| *v), Some(7));
    /// ```
    pub fn reserve(&self) -> Option<K> {
        let index = self.claim()?;
        let entry = self.entries.claim(index, &self.indices);
        // Relaxed: this thread owns the free entry (the pop or the
        // eviction's CAS that made it the owner carried its word).
        let state = entry.state.load(Ordering::Relaxed);
        let generation = entry::generation(state);
        // Relaxed: a count, read as a snapshot (`len`, `stats`); before the
        // mark, so that `len` never counts the entry as a value.
        self.counters.reserved.fetch_add(1, Ordering::Relaxed);
        // The walks (a clone's, a save's) stop at the high mark: the
        // reserved entry's generation must be below it, as a filled one's
        // (Relaxed: as in `fill`).
        if index >= self.high.load(Ordering::Relaxed) {
            self.high.fetch_max(index + 1, Ordering::Relaxed);
        }
        // Loom-only fault injection (`tagpool_loom_reserve_as_occupied`):
        // a reservation marked as a live value (a read then reads a value
        // never written, an eviction drops one).
        let mark = if cfg!(all(loom, tagpool_loom_reserve_as_occupied)) {
            entry::free(generation) | entry::OCCUPIED
        } else {
            entry::reserved(generation)
        };
        // Release: hands the entry to whoever fills or cancels the key
        // (their Acquire CAS reads this word).
        entry.state.store(mark, Ordering::Release);
        Some(K::from_handle(Handle::new(index, generation)))
    }

    /// Reserves `n` keys at once (see [`reserve`](Self::reserve)): all of
    /// them, or none (the ones taken go back) if the pool runs out first.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let keys = pool.reserve_many(3).unwrap();
    /// assert!(pool.reserve_many(2).is_none(), "one entry left");
    /// assert_eq!(pool.stats().reserved, 3);
    /// for (n, key) in keys.into_iter().enumerate() {
    ///     pool.insert_reserved(key, n).unwrap();
    /// }
    /// assert_eq!(pool.len(), 3);
    /// ```
    pub fn reserve_many(&self, n: usize) -> Option<Vec<K>> {
        let mut keys = Vec::with_capacity(n);
        for _ in 0..n {
            match self.reserve() {
                Some(key) => keys.push(key),
                None => {
                    for key in keys {
                        self.cancel_reservation(key);
                    }
                    return None;
                }
            }
        }
        Some(keys)
    }

    /// Publishes `value` under the reserved `key`, from any thread: from
    /// here on the key reads it, as the key of an insert.
    ///
    /// # Errors
    ///
    /// [`InsertError::NotReserved`], with the value, if `key` names no
    /// reservation: filled or cancelled already (by this thread or
    /// another: exactly one fill or cancel of a reservation succeeds), or a
    /// key of another generation.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{HandlePool, InsertError};
    ///
    /// let pool = HandlePool::new(2);
    /// let key = pool.reserve().unwrap();
    /// let filler = std::thread::scope(|s| s.spawn(|| pool.insert_reserved(key, "a")).join());
    /// assert_eq!(filler.unwrap(), Ok(()));
    /// assert_eq!(pool.insert_reserved(key, "b"), Err(InsertError::NotReserved("b")));
    /// assert_eq!(pool.with(key, |v| *v), Some("a"));
    /// ```
    pub fn insert_reserved(&self, key: K, value: T) -> Result<(), InsertError<T>> {
        let handle = key.handle();
        let entry = match self.reserved_entry(handle) {
            Some(entry) => entry,
            None => return Err(InsertError::NotReserved(value)),
        };
        let free = entry::free(handle.generation());
        // Loom-only fault injection (`tagpool_loom_fill_reserved_store`): a
        // fill that takes the entry by a plain store, so two fills of one
        // key both write its value.
        let taken = if cfg!(all(loom, tagpool_loom_fill_reserved_store)) {
            entry.state.store(free, Ordering::Relaxed);
            true
        } else {
            // Acquire: the reserver's Release store of the mark; the entry
            // is this thread's from here (see the module docs).
            entry
                .state
                .compare_exchange(
                    entry::reserved(handle.generation()),
                    free,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_ok()
        };
        if !taken {
            return Err(InsertError::NotReserved(value));
        }
        // Relaxed: a count (see `reserve`).
        self.counters.reserved.fetch_sub(1, Ordering::Relaxed);
        let published = self.fill(handle.index() as u32, value);
        debug_assert_eq!(published, handle);
        Ok(())
    }

    /// Gives back the entry of the reserved `key` without a value: the key
    /// goes stale (every copy of it: the entry's next value has a new
    /// generation). Returns whether it did; `false` if `key` names no
    /// reservation (filled or cancelled already, or another generation).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(1);
    /// let key = pool.reserve().unwrap();
    /// assert!(pool.cancel_reservation(key));
    /// assert!(!pool.cancel_reservation(key) && !pool.is_reserved(key));
    /// let other = pool.insert(5).unwrap();
    /// assert!(pool.insert_reserved(key, 6).is_err());
    /// assert_ne!(other, key, "the same entry, a new generation");
    /// ```
    pub fn cancel_reservation(&self, key: K) -> bool {
        let handle = key.handle();
        let entry = match self.reserved_entry(handle) {
            Some(entry) => entry,
            None => return false,
        };
        let reserved = entry::reserved(handle.generation());
        // Acquire: as in `insert_reserved`; the entry is this thread's if
        // the CAS succeeds. Its new generation is published to the next
        // inserter by the push (Release) in `give_back`.
        if entry
            .state
            .compare_exchange(
                reserved,
                entry::free(entry::ended(reserved)),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return false;
        }
        // Relaxed: a count (see `reserve`).
        self.counters.reserved.fetch_sub(1, Ordering::Relaxed);
        // Nobody waits for a handle pool's entries: a waker's panic cannot
        // come of it, but is dropped as everywhere else.
        crate::engine::unwind::discard(self.give_back(handle.index() as u32));
        true
    }

    /// Whether `key` names a reservation not yet filled nor cancelled (a
    /// snapshot, as [`contains`](Self::contains)).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(1);
    /// let key = pool.reserve().unwrap();
    /// assert!(pool.is_reserved(key));
    /// pool.insert_reserved(key, ()).unwrap();
    /// assert!(!pool.is_reserved(key) && pool.contains(key));
    /// ```
    pub fn is_reserved(&self, key: K) -> bool {
        self.reserved_entry(key.handle()).map_or(false, |entry| {
            // Relaxed: a snapshot.
            entry.state.load(Ordering::Relaxed) == entry::reserved(key.generation())
        })
    }

    /// The entry a reservation of `handle` would hold: `None` past the
    /// entries allocated. Only its word says whether it is reserved.
    fn reserved_entry(&self, handle: Handle) -> Option<&Entry<T>> {
        self.entries.get(handle.index())
    }
}
