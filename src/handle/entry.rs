//! One entry of a [`HandlePool`](super::HandlePool): its state word, its
//! insertion stamp and its value cell, and every transition of the state.
//!
//! # The state word
//!
//! ```text
//!  63            32   31         30        29 .. 0
//! +----------------+----------+---------+-------------+
//! |   generation   | OCCUPIED | REMOVED |   readers   |
//! +----------------+----------+---------+-------------+
//! ```
//!
//! | state | meaning | who owns the cell |
//! |---|---|---|
//! | `(g, -, -, 0)` | free, or owned by one inserter or evicter | the index's owner (free list, inserter) or the evicter |
//! | `(g, OCCUPIED, -, r)` | live under generation `g`, `r` [`Ref`](super::Ref)s | shared by the `r` readers; nobody writes |
//! | `(g, -, REMOVED, r)`, `r > 0` | removed while read; the last reader frees it | shared by the `r` readers |
//!
//! Transitions (each one CAS or RMW on the word):
//! - *publish* (inserter or evicter, owning the cell): store `(g, OCCUPIED,
//!   0)`, Release: the value written before it is visible to every reader.
//! - *read* (`get`): CAS `(g, OCCUPIED, r)` to `r + 1` only if `g` is the
//!   handle's generation; Acquire pairs with the publish.
//! - *unread* (`Ref` drop): `fetch_sub(1)`, Release; the reader that takes
//!   `(g, REMOVED, 1)` to zero owns the cell (Acquire fence) and frees it.
//! - *remove*: CAS `(g, OCCUPIED, r)` to `(g + 1, -, 0)` if `r = 0` (the
//!   remover owns the cell), else to `(g + 1, REMOVED, r)`.
//! - *evict*: CAS `(g, OCCUPIED, mine)` to `(g + 1, -, 0)`, where `mine` is
//!   the evicter's own reads (0 or 1): an entry with any other reader is
//!   never taken (it is skipped).
//!
//! Every transition that ends an occupancy bumps the generation, so a
//! handle of generation `g` matches the word only while that occupancy
//! lasts; the generation is 32 bits and wraps after 2^32 occupancies of one
//! entry (see [`Handle`](super::Handle)).

use crate::sync::{AtomicU64, ConstPtr, MutPtr, Ordering, UnsafeCell};

/// The number of live `Ref`s of an entry, in the low bits.
pub(super) const READERS: u64 = (1 << 30) - 1;
/// The entry's value is live under the word's generation.
pub(super) const OCCUPIED: u64 = 1 << 31;
/// The entry was removed while read: its last reader frees it.
pub(super) const REMOVED: u64 = 1 << 30;
/// The generation's shift.
const GENERATION: u32 = 32;

/// The generation of a state word.
#[inline]
pub(super) fn generation(state: u64) -> u32 {
    (state >> GENERATION) as u32
}

/// The readers of a state word.
#[inline]
pub(super) fn readers(state: u64) -> u64 {
    state & READERS
}

/// The word of a free entry of generation `generation`.
#[inline]
pub(super) fn free(generation: u32) -> u64 {
    u64::from(generation) << GENERATION
}

/// The word after an occupancy of `state` ends: the next generation.
#[inline]
pub(super) fn ended(state: u64) -> u32 {
    #[cfg(all(loom, tagpool_loom_handle_no_generation))]
    {
        // Loom-only fault injection: an occupancy that ends without a new
        // generation, so old handles match the next value. The stale
        // handle model must see the successor's value.
        generation(state)
    }
    #[cfg(not(all(loom, tagpool_loom_handle_no_generation)))]
    {
        generation(state).wrapping_add(1)
    }
}

/// An entry of the handle pool.
pub(super) struct Entry<T> {
    /// See the module docs.
    pub(super) state: AtomicU64,
    /// The insertion order of the live value, for oldest-first eviction:
    /// written by the owner before the publish, read after an Acquire load
    /// of the published word.
    pub(super) stamp: AtomicU64,
    /// The value: `Some` exactly while the word is `OCCUPIED` or `REMOVED`
    /// (and while an inserter or evicter owns the entry between its writes).
    value: UnsafeCell<Option<T>>,
}

impl<T> Entry<T> {
    /// A free entry of generation 0.
    pub(super) fn new() -> Self {
        Self {
            state: AtomicU64::new(free(0)),
            stamp: AtomicU64::new(0),
            value: UnsafeCell::new(None),
        }
    }

    /// Exclusive access to the cell.
    ///
    /// # Safety
    ///
    /// The caller owns the entry (see the table in the module docs): no
    /// reader and no other owner can reach the cell while the pointer
    /// lives.
    #[inline]
    pub(super) unsafe fn cell_mut(&self) -> MutPtr<Option<T>> {
        self.value.get_mut()
    }

    /// Shared access to the cell.
    ///
    /// # Safety
    ///
    /// The caller is a counted reader of an occupied (or removed) entry,
    /// for as long as the pointer lives: nobody writes the cell meanwhile.
    #[inline]
    pub(super) unsafe fn cell(&self) -> ConstPtr<Option<T>> {
        self.value.get()
    }

    /// Takes the value out of an entry the caller owns.
    ///
    /// # Safety
    ///
    /// As [`cell_mut`](Self::cell_mut).
    #[inline]
    pub(super) unsafe fn take(&self) -> Option<T> {
        // SAFETY: the caller owns the entry (this function's contract).
        let cell = unsafe { self.cell_mut() };
        // SAFETY: exclusive access for the span of `cell`; the mutable
        // reference ends inside the closure.
        cell.with(|p| unsafe { (*p).take() })
    }

    /// Stores `value` in an entry the caller owns.
    ///
    /// # Safety
    ///
    /// As [`cell_mut`](Self::cell_mut).
    #[inline]
    pub(super) unsafe fn put(&self, value: T) {
        // SAFETY: the caller owns the entry (this function's contract).
        let cell = unsafe { self.cell_mut() };
        // SAFETY: as in `take`.
        cell.with(|p| unsafe { *p = Some(value) });
    }

    /// Tries to count one more reader of the occupancy `generation`:
    /// `false` if the entry does not hold it (free, removed, or another
    /// generation).
    ///
    /// # Panics
    ///
    /// If the entry already has 2^30 - 1 readers (only leaked `Ref`s can
    /// get there).
    #[inline]
    pub(super) fn read(&self, generation_of_handle: u32) -> bool {
        // Loom-only fault injection: a read whose load and CAS are Relaxed,
        // so nothing orders the publish before this thread's use of the
        // value. The model of a handle sent through a Relaxed atomic must
        // report the read of the cell.
        let acquire = if cfg!(all(loom, tagpool_loom_read_relaxed)) {
            Ordering::Relaxed
        } else {
            Ordering::Acquire
        };
        // Acquire: pairs with the publish (Release) of the value this read
        // will see.
        let mut state = self.state.load(acquire);
        loop {
            if state & OCCUPIED == 0 || generation(state) != generation_of_handle {
                return false;
            }
            assert!(
                readers(state) < READERS,
                "tagpool: too many live `Ref`s of one handle pool entry"
            );
            // Acquire on success: as above (the word read may be a later
            // reader's, which carries the publish along its RMW chain).
            match self
                .state
                .compare_exchange_weak(state, state + 1, acquire, acquire)
            {
                Ok(_) => return true,
                Err(actual) => state = actual,
            }
        }
    }

    /// Ends a reader's access: `true` if it was the last reader of a
    /// removed entry, which the caller now owns and must free.
    #[inline]
    pub(super) fn unread(&self) -> bool {
        // Release: this reader's accesses to the value happen before the
        // drop or reuse by whoever takes the entry next (the remover or
        // evicter's Acquire CAS, or the last reader's fence below).
        let before = self.state.fetch_sub(1, Ordering::Release);
        debug_assert!(readers(before) > 0);
        if before & REMOVED != 0 && readers(before) == 1 {
            // Acquire: the other readers' Release decrements happen before
            // this reader frees the value.
            crate::sync::fence(Ordering::Acquire);
            return true;
        }
        false
    }

    /// Frees an entry whose last reader left after a remove: clears the
    /// removed flag (same generation: the remove bumped it). The caller
    /// owns the entry, and takes its value out before it pushes the index.
    #[inline]
    pub(super) fn clear_removed(&self) {
        // Relaxed: the entry is the caller's; the push of its index
        // (Release) publishes this store to the next inserter.
        let state = self.state.load(Ordering::Relaxed);
        debug_assert!(state & REMOVED != 0 && readers(state) == 0);
        self.state.store(free(generation(state)), Ordering::Relaxed);
    }

    /// Publishes the value the owner just stored, under the generation of
    /// the entry's free word: returns that generation.
    #[inline]
    pub(super) fn publish(&self) -> u32 {
        // Relaxed: the owner's own last write (or the push/CAS that made
        // it the owner carried it).
        let generation = generation(self.state.load(Ordering::Relaxed));
        // Release: the value and the stamp written before are visible to
        // every reader whose CAS reads this word (Acquire).
        self.state
            .store(free(generation) | OCCUPIED, Ordering::Release);
        generation
    }
}
