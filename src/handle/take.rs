//! Values that move with their keys: [`insert_with_key`](HandlePool::insert_with_key)
//! hands the value its key before it is stored, and [`take`](HandlePool::take)
//! ends a key and gives its value back, unless it is being read
//! ([`TakeError`]).

use core::fmt;
use core::mem;

use super::entry;
use super::{Handle, HandlePool, Key};
use crate::error::InsertError;
use crate::sync::Ordering;

/// Why [`HandlePool::take`] returned no value.
///
/// # Examples
///
/// ```
/// use tagpool::{HandlePool, TakeError};
///
/// let pool = HandlePool::new(1);
/// let h = pool.insert(7).unwrap();
/// let read = pool.get(h).unwrap();
/// assert_eq!(pool.take(h), Err(TakeError::BeingRead));
/// drop(read);
/// assert_eq!(pool.take(h), Ok(7));
/// assert_eq!(pool.take(h), Err(TakeError::Stale));
/// assert_eq!(TakeError::BeingRead.to_string(), "the value is being read");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TakeError {
    /// The key names no live value: removed, taken, evicted, or a key of
    /// another pool.
    Stale,
    /// The value is being read ([`Ref`](crate::Ref)s of it are alive): it
    /// stays in the pool, live, and its key stays valid.
    BeingRead,
}

impl fmt::Display for TakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TakeError::Stale => "the key is stale",
            TakeError::BeingRead => "the value is being read",
        })
    }
}

impl std::error::Error for TakeError {}

impl<T, K: Key> HandlePool<T, K> {
    /// Stores the value that `f` makes from its own key, and returns the
    /// key: for a value that must know its key (an entity that registers
    /// itself). `f` runs once an entry is this thread's (popped, or freed
    /// by an eviction, as for [`insert`](HandlePool::insert)), before the
    /// value is published: no other thread can reach the key until this
    /// returns.
    ///
    /// # Errors
    ///
    /// As [`insert`](HandlePool::insert), with `f` in the place of the
    /// value: [`InsertError::Full`] with `f`, not called, when every entry
    /// is in use (or [retired](HandlePool::retired)) and the pool does not
    /// evict, or every candidate for eviction is being read at every try.
    ///
    /// # Panics
    ///
    /// If `f` panics: the entry goes back to the free list under a new
    /// generation (the key `f` was given is stale, wherever `f` stored it),
    /// and the panic propagates. As `insert` if an eviction's user code
    /// panics, or the allocation of a segment of entries unwinds (then `f`
    /// is not called, and the entry goes back to the free list as it was).
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{Handle, HandlePool};
    ///
    /// struct Entity { me: Handle, name: &'static str }
    ///
    /// let world = HandlePool::new(8);
    /// let player = world.insert_with_key(|me| Entity { me, name: "player" }).unwrap();
    /// assert_eq!(world.with(player, |e| (e.me, e.name)), Some((player, "player")));
    ///
    /// let full = HandlePool::new(1);
    /// let first = full.insert_with_key(|me| me).unwrap();
    /// let refused = full.insert_with_key(|me| me).unwrap_err();
    /// assert!(matches!(refused, tagpool::InsertError::Full(_)));
    /// full.remove(first);
    /// // The closure comes back uncalled: try it again.
    /// let again = full.insert_with_key(refused.into_inner()).unwrap();
    /// assert_eq!(full.with(again, |me| *me), Some(again));
    /// ```
    pub fn insert_with_key<F>(&self, f: F) -> Result<K, InsertError<F>>
    where
        F: FnOnce(K) -> T,
    {
        let index = match self.claim() {
            Some(index) => index,
            None => return Err(InsertError::Full(f)),
        };
        let entry = self.entries.claim(index, &self.indices);
        // Relaxed: this thread owns the free entry (the pop or the
        // eviction's CAS that made it the owner carried its word).
        let generation = entry::generation(entry.state.load(Ordering::Relaxed));
        let key = K::from_handle(Handle::new(index, generation));
        let unfilled = Unfilled { pool: self, index };
        // User code, outside any retry loop: the entry is this thread's
        // and free (no reader can count itself), and the key is not
        // published until the value is.
        let value = f(key);
        mem::forget(unfilled);
        let handle = self.fill(index, value);
        debug_assert_eq!(handle, key.handle());
        Ok(key)
    }

    /// Removes the value of `key` and returns it, if nobody reads it: the
    /// key (every copy of it) goes stale, and the entry is free for another
    /// insert. Never waits for a reader it can see (a `Ref`, a section open
    /// when it starts): it fails instead; see below for the one wait.
    ///
    /// # Errors
    ///
    /// - [`TakeError::Stale`] if `key` names no live value.
    /// - [`TakeError::BeingRead`] if [`Ref`](crate::Ref)s of the value are
    ///   alive, or if the pool is read through [sections](HandlePool::read)
    ///   and one is open on any thread (any section may read any value):
    ///   the value stays, live, under the same key; take it again once they
    ///   end, or [`remove`](HandlePool::remove) it (which does not wait
    ///   either: the last `Ref` drops the value, a grace period after the
    ///   last section that could see it).
    ///
    /// In a pool that has had read sections, a successful take runs a
    /// grace period (a process-wide barrier, microseconds), and waits for
    /// a section that another thread opened while the take was under way
    /// (it may have read the value), which is the one case where `take`
    /// waits: do not call it while holding a lock that such a section may
    /// wait for, nor while another thread may be forgetting a section (a
    /// forgotten section never ends; a `take` that starts after it fails).
    ///
    /// Why not wait for the readers: a thread that holds a `Ref` of the
    /// value (up its own stack, say) would wait for itself forever. Why not
    /// hand the value over when the last `Ref` drops: the last reader, on
    /// its own thread, has nobody to hand it to; `remove` is that choice,
    /// and the last `Ref` drops the value. A `take` that fails leaves
    /// everything as it was, and a caller that can wait retries.
    /// (sharded-slab's `Slab::take` spins until the readers leave.)
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{HandlePool, TakeError};
    ///
    /// let pool = HandlePool::new(2);
    /// let h = pool.insert(String::from("sword")).unwrap();
    /// assert_eq!(pool.take(h).as_deref(), Ok("sword"));
    /// assert!(pool.get(h).is_none());
    /// assert_eq!(pool.take(h), Err(TakeError::Stale));
    /// ```
    pub fn take(&self, key: K) -> Result<T, TakeError> {
        let handle = key.handle();
        let entry = match self.entries.get(handle.index()) {
            Some(entry) => entry,
            None => return Err(TakeError::Stale),
        };
        // Acquire: as the CAS below, for the first check of the readers.
        let mut state = entry.state.load(Ordering::Acquire);
        loop {
            if !entry::is_live(state, handle) {
                return Err(TakeError::Stale);
            }
            if !takeable(state) {
                return Err(TakeError::BeingRead);
            }
            if self.sections_open() {
                return Err(TakeError::BeingRead);
            }
            // SeqCst: Acquire pairs with the publish (the value this thread
            // moves out) and with the last readers' Release decrements
            // (their reads happen before the move); SeqCst with the load of
            // `used` after it pairs with the first read section's store
            // and fence (see `read/domain.rs`).
            match entry.state.compare_exchange_weak(
                handle.index() as u32,
                state,
                entry::free(entry::ended(state)),
                Ordering::SeqCst,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(actual) => state = actual,
            }
        }
        if self.sections.domain.used() {
            self.wait_for_sections();
        }
        // SAFETY: the CAS ended the occupancy with no reader counted (and
        // none can count itself on a free word): this thread owns the
        // entry.
        let value = unsafe { entry.take() }.expect("a live entry holds a value");
        // A waker's panic (nobody waits for a handle pool's indices) would
        // propagate, the pool consistent and the value dropped.
        crate::engine::unwind::resume(self.give_back(handle.index() as u32));
        Ok(value)
    }
}

/// Whether a `take` may end a live word: no reader.
impl<T, K> HandlePool<T, K> {
    /// Whether a read section may be open on the pool now (a hint: one that
    /// opens after this look is waited for after the take's grace period).
    fn sections_open(&self) -> bool {
        let domain = &self.sections.domain;
        domain.used() && (domain.open_here() || domain.oldest_reader() != u64::MAX)
    }

    /// Waits until no section that could have read a value whose occupancy
    /// this thread just ended is open: a grace period, then, if a section
    /// opened during the take (before its look in `sections_open` saw it),
    /// a wait for its end (never one of this thread's: `take` fails while
    /// this thread has one open).
    #[cold]
    fn wait_for_sections(&self) {
        let domain = &self.sections.domain;
        let epoch = domain.begin_grace(|_| {});
        // Loom-only fault injection: a take that trusts its look before the
        // removal and moves the value out under a section that opened
        // meanwhile.
        if cfg!(all(loom, tagpool_loom_take_skips_grace)) {
            return;
        }
        // A later scan on this thread reads every word as recent as the
        // first, or more (see `domain.rs`): no second barrier.
        while domain.oldest_reader() < epoch {
            crate::sync::yield_now();
        }
    }
}

#[inline]
fn takeable(state: u64) -> bool {
    // Loom-only fault injection: a take that ignores the readers, moving
    // the value out from under a `Ref`. The model of a take racing a read
    // must report the write under the read.
    cfg!(all(loom, tagpool_loom_take_ignores_readers)) || entry::readers(state) == 0
}

/// An entry that [`insert_with_key`](HandlePool::insert_with_key) owns
/// while its closure runs: dropped only if the closure panics, it gives
/// the entry back under a new generation.
struct Unfilled<'a, T, K> {
    pool: &'a HandlePool<T, K>,
    index: u32,
}

impl<T, K> Drop for Unfilled<'_, T, K> {
    fn drop(&mut self) {
        let entry = &self.pool.entries[self.index as usize];
        // Relaxed: the entry is this thread's (free, owned).
        let state = entry.state.load(Ordering::Relaxed);
        // A new generation: the key the closure had (and may have stored)
        // never names a later value. The push (Release) publishes it.
        entry.state.store(
            self.index,
            entry::free(entry::ended(state)),
            Ordering::Relaxed,
        );
        // The closure's panic goes on; a waker's is dropped.
        crate::engine::unwind::discard(self.pool.give_back(self.index));
    }
}
