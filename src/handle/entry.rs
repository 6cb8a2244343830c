//! One entry of a [`HandlePool`](super::HandlePool): its state word, its
//! insertion stamp and its value cell, and every transition of the state.
//!
//! # The state word
//!
//! ```text
//!  63                24   23         22        21 .. 0
//! +--------------------+----------+---------+-------------+
//! | generation (40)    | OCCUPIED | REMOVED | readers (22)|
//! +--------------------+----------+---------+-------------+
//! ```
//!
//! | state | meaning | who owns the cell |
//! |---|---|---|
//! | `(g, -, -, 0)`, `g >= 1` | free, or owned by one inserter or evicter | the index's owner (free list, inserter) or the evicter |
//! | `(g, OCCUPIED, -, r)` | live under generation `g`, `r` [`Ref`](super::Ref)s | shared by the `r` readers; nobody writes |
//! | `(g, -, REMOVED, r)`, `r > 0` | removed while read; the last reader frees it | shared by the `r` readers |
//! | `(0, -, -, 0)` | retired: every generation is spent | nobody: its index never returns to the free list |
//! | `(g, -, -, all ones)` | reserved under `g` (`HandlePool::reserve`), no value | the holder of its `Reservation` (the fill or cancel that consumes it) |
//!
//! Transitions (each one CAS or RMW on the word):
//! - *publish* (inserter or evicter, owning the cell): store `(g, OCCUPIED,
//!   0)`, Release: the value written before it is visible to every reader.
//! - *read* (`get`): CAS `(g, OCCUPIED, r)` to `r + 1` only if `g` is the
//!   handle's generation; Acquire pairs with the publish.
//! - *unread* (`Ref` drop): `fetch_sub(1)`, Release; the reader that takes
//!   `(g, REMOVED, 1)` to zero owns the cell (Acquire fence) and frees it.
//! - *remove*: CAS `(g, OCCUPIED, r)` to `(next(g), -, 0)` if `r = 0` (the
//!   remover owns the cell), else to `(next(g), REMOVED, r)`.
//! - *evict*: CAS `(g, OCCUPIED, mine)` to `(next(g), -, 0)`, where `mine`
//!   is the evicter's own reads (0 or 1): an entry with any other reader is
//!   never taken (it is skipped).
//! - *retire*: whoever ends up owning a free entry whose word says
//!   generation 0 (the remover, the last reader, the evicter) takes its
//!   value out and keeps its index off the free list, for good. No word
//!   changes: the retirement is the absence of the push that would make the
//!   entry free for an insert.
//!
//! Every transition that ends an occupancy moves the generation to
//! `next(g)`: `g + 1` up to [`MAX_GENERATION`] (`2^40 - 1`), and 0, the
//! retired mark, after it. Generations start at 1. So a handle of
//! generation `g` matches the word only while that occupancy lasts, and
//! no generation is ever used twice by one entry: a stale handle never
//! names a later value. Each entry holds at most `2^40 - 1` occupancies
//! (see [`Handle`](super::Handle)).

use super::key::{Handle, FIRST_GENERATION, INDEX_BITS, INDEX_MASK, MAX_GENERATION};
use crate::sync::{AtomicU64, ConstPtr, MutPtr, Ordering, UnsafeCell};

/// The number of live `Ref`s of an entry, in the low bits.
pub(super) const READERS: u64 = (1 << 22) - 1;
/// The entry was removed while read: its last reader frees it.
pub(super) const REMOVED: u64 = 1 << 22;
/// The entry's value is live under the word's generation.
pub(super) const OCCUPIED: u64 = 1 << 23;
/// The generation's shift: the 40 bits above the flags.
const GENERATION: u32 = 24;
/// The generation of a retired entry: no handle has it.
pub(super) const RETIRED: u64 = 0;

/// The generation of a state word.
#[inline]
pub(super) fn generation(state: u64) -> u64 {
    state >> GENERATION
}

/// The readers of a state word.
#[inline]
pub(super) fn readers(state: u64) -> u64 {
    state & READERS
}

/// The word of a free entry of generation `generation`.
#[inline]
pub(super) fn free(generation: u64) -> u64 {
    debug_assert!(generation <= MAX_GENERATION);
    generation << GENERATION
}

/// The word of an entry reserved under generation `generation` (see
/// `reserve.rs`): no flag, every reader bit set, a word no other state has
/// (readers are counted only on an occupied word, and a removed word keeps
/// its flag while a reader is left).
#[inline]
pub(super) fn reserved(generation: u64) -> u64 {
    free(generation) | READERS
}

/// Whether `state` is a reservation's word (see [`reserved`]).
#[inline]
pub(super) fn is_reserved(state: u64) -> bool {
    state & (OCCUPIED | REMOVED | READERS) == READERS
}

/// The generation after an occupancy of `state` ends: the next one, or
/// [`RETIRED`] after [`MAX_GENERATION`].
#[inline]
pub(super) fn ended(state: u64) -> u64 {
    #[cfg(all(loom, tagpool_loom_handle_no_generation))]
    {
        // Loom-only fault injection: an occupancy that ends without a new
        // generation, so old handles match the next value. The stale
        // handle model must see the successor's value.
        generation(state)
    }
    #[cfg(not(all(loom, tagpool_loom_handle_no_generation)))]
    {
        if cfg!(all(loom, tagpool_loom_generation_wraps)) && generation(state) == MAX_GENERATION {
            // Loom-only fault injection: the generation wraps to the first
            // one instead of retiring the entry (the old 32-bit behaviour),
            // so the entry is reused. The retirement models must see an
            // insert succeed into it.
            return FIRST_GENERATION;
        }
        // `MAX_GENERATION` is all ones: its successor masks to `RETIRED`.
        (generation(state) + 1) & MAX_GENERATION
    }
}

/// The generation whose occupancy ended in `ended` (its successor from
/// [`ended`]): the key of the value that occupancy held.
#[inline]
pub(super) fn generation_before(ended: u64) -> u64 {
    if ended == RETIRED {
        MAX_GENERATION
    } else {
        // At least the first (only the loom fault that keeps generations
        // makes `ended` the first).
        (ended - 1).max(FIRST_GENERATION)
    }
}

/// Whether `state` is live under `handle`'s generation: occupied, of that
/// generation, whatever its reader count (a removed word is never
/// occupied). Two ORs and one compare: the bits below `OCCUPIED` set in
/// the word, the index bits set in the handle, the two agree exactly when
/// the generations do and `OCCUPIED` is set (the generation sits at the
/// same shift in both).
#[inline]
pub(super) fn is_live(state: u64, handle: Handle) -> bool {
    state | (REMOVED | READERS) == handle.to_bits() | INDEX_MASK
}

// `is_live` lines the word's generation up with the handle's, and the
// flags and readers up with the handle's index bits below `OCCUPIED`.
const _: () = assert!(GENERATION == INDEX_BITS && OCCUPIED | REMOVED | READERS == INDEX_MASK);

/// Whether `generation`, an occupancy's successor from [`ended`], marks
/// the entry retired.
#[inline]
pub(super) fn is_retired(generation: u64) -> bool {
    // Loom-only fault injection: a retired entry treated as free, so its
    // index goes back to the free list. The retirement model must see an
    // insert succeed into it.
    !cfg!(all(loom, tagpool_loom_retire_reuses)) && generation == RETIRED
}

/// An entry of the handle pool.
pub(super) struct Entry<T> {
    /// See the module docs.
    pub(super) state: AtomicU64,
    /// The insertion order of the live value, for oldest-first eviction:
    /// written by the owner before the publish, read after an Acquire load
    /// of the published word. While the entry is free on the pool's chain
    /// of entries vacated through `&mut` (see `HandlePool::vacant`), the
    /// next index on that chain.
    pub(super) stamp: AtomicU64,
    /// The value: `Some` exactly while the word is `OCCUPIED` or `REMOVED`
    /// (and while an inserter or evicter owns the entry between its writes).
    value: UnsafeCell<Option<T>>,
}

impl<T> Entry<T> {
    /// A free entry of the first generation.
    pub(super) fn new() -> Self {
        Self {
            state: AtomicU64::new(free(FIRST_GENERATION)),
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
    /// The caller is a counted reader of an occupied (or removed) entry, or
    /// has a read section open on the pool that it opened before it read the
    /// entry's word occupied (see `read/domain.rs`), for as long as the
    /// pointer (and any reference made from it) lives: nobody writes the
    /// cell meanwhile.
    #[inline]
    pub(super) unsafe fn cell(&self) -> ConstPtr<Option<T>> {
        self.value.get()
    }

    /// The generation and the value of a live entry, through `&mut`; `None`
    /// if the entry is not occupied.
    #[inline]
    pub(super) fn live_mut(&mut self) -> Option<(u64, &mut T)> {
        // Relaxed: `&mut self` (from `&mut HandlePool`) orders everything.
        let state = self.state.load(Ordering::Relaxed);
        if state & OCCUPIED == 0 {
            return None;
        }
        // A leaked `Ref` left its count in the word, but its borrow, hence
        // its reference, has ended.
        // SAFETY: `&mut self`: no other reference to the entry, so no `Ref`
        // reads the cell and no other thread owns it.
        let cell = unsafe { self.cell_mut() };
        // SAFETY: as above, for as long as `self` is borrowed.
        let value = cell.with(|p| unsafe { &mut *p });
        // SAFETY: an occupied entry holds a value (`Some`: see the field).
        let value = unsafe { value.as_mut().unwrap_unchecked() };
        Some((generation(state), value))
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
    /// If the entry already has 2^22 - 1 readers ([`READERS`]), the most
    /// its word counts (only leaked `Ref`s can get there): the word is
    /// left as it was.
    #[inline]
    pub(super) fn read(&self, generation_of_handle: u64) -> bool {
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
            // this reader frees the value. SeqCst: the remove's SeqCst CAS,
            // which this fence synchronizes with, precedes in the single
            // total order this thread's SeqCst loads of the read sections'
            // `used` flag and epoch (see `handle/read/domain.rs`).
            crate::sync::fence(Ordering::SeqCst);
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

    /// Whether the entry, which the caller owns now that an occupancy of it
    /// ended, is retired: its generation is spent, and its index must never
    /// go back to the free list.
    #[inline]
    pub(super) fn retired(&self) -> bool {
        // Relaxed: the caller's own CAS (remove, evict) or store
        // (`clear_removed`) wrote this word, and nobody else writes a word
        // that is neither occupied nor read.
        let state = self.state.load(Ordering::Relaxed);
        debug_assert!(state & (OCCUPIED | REMOVED | READERS) == 0);
        is_retired(generation(state))
    }

    /// [`publish`](Self::publish) for an entry vacated through `&mut` (its
    /// word a free generation, no flag, no reader), by an owner with
    /// exclusive access to the pool: no mask.
    #[inline]
    pub(super) fn publish_vacated(&self) -> u64 {
        // Relaxed: the caller's exclusive access orders everything.
        let state = self.state.load(Ordering::Relaxed);
        debug_assert_eq!(state & (OCCUPIED | REMOVED | READERS), 0);
        // Release: as in `publish` (a plain store on x86).
        self.state.store(state | OCCUPIED, Ordering::Release);
        generation(state)
    }

    /// Publishes the value the owner of a reserved entry just stored (see
    /// `reserve.rs`): from the mark of `generation`, which the reservation
    /// carries, to the occupied word of that generation, with no load.
    #[inline]
    pub(super) fn publish_reserved(&self, generation: u64) {
        debug_assert_eq!(
            self.state.load(Ordering::Relaxed),
            reserved(generation),
            "a reservation's own mark"
        );
        // Release: as in `publish`, which this is with the word known.
        self.state
            .store(free(generation) | OCCUPIED, Ordering::Release);
    }

    /// Publishes the value the owner just stored, under the generation of
    /// the entry's free word: returns that generation.
    #[inline]
    pub(super) fn publish(&self) -> u64 {
        // Relaxed: the owner's own last write (or the push/CAS that made
        // it the owner carried it).
        let generation = generation(self.state.load(Ordering::Relaxed));
        // Only retired entries have generation 0, and they are never
        // handed out (the loom fault above does, on purpose).
        debug_assert!(generation != RETIRED || cfg!(all(loom, tagpool_loom_retire_reuses)));
        // Release: the value and the stamp written before are visible to
        // every reader whose CAS reads this word (Acquire).
        self.state
            .store(free(generation) | OCCUPIED, Ordering::Release);
        generation
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::panic::{catch_unwind, AssertUnwindSafe};

    use super::*;
    use crate::HandlePool;

    #[test]
    fn the_state_word_packs_generation_flags_and_readers_apart() {
        let word = free(MAX_GENERATION) | OCCUPIED | REMOVED | READERS;
        assert_eq!(generation(word), MAX_GENERATION);
        assert_eq!(readers(word), (1 << 22) - 1);
        assert_eq!(READERS & (OCCUPIED | REMOVED), 0);
        assert_eq!(ended(word), RETIRED, "the last one retires");
        assert_eq!(ended(free(MAX_GENERATION - 1) | OCCUPIED), MAX_GENERATION);
        assert_eq!(word.count_ones(), 64, "every bit has a use");
    }

    /// An entry counts 2^22 - 1 readers, the most its 22 bits hold; a read
    /// past them panics and leaves the word as it was.
    #[test]
    fn an_entry_counts_2_pow_22_minus_1_readers_and_panics_on_the_next() {
        assert_eq!(READERS, 4_194_303);
        let pool = HandlePool::new(1);
        let h = pool.insert(7u8).unwrap();
        let entry = &pool.entries[0];
        let live = free(FIRST_GENERATION) | OCCUPIED;
        // As if 2^22 - 2 `Ref`s had been leaked (a test that leaks them
        // takes seconds): the next `get` is the last one counted.
        entry.state.store(live | (READERS - 1), Ordering::Relaxed);
        let last = pool.get(h).expect("the 2^22 - 1th reader is counted");
        assert_eq!(*last, 7);
        assert_eq!(entry.state.load(Ordering::Relaxed), live | READERS);
        let past = catch_unwind(AssertUnwindSafe(|| pool.get(h).map(drop)));
        let message = past.expect_err("the 2^22th reader panics");
        assert_eq!(
            message.downcast_ref::<&str>(),
            Some(&"tagpool: too many live `Ref`s of one handle pool entry")
        );
        assert_eq!(
            entry.state.load(Ordering::Relaxed),
            live | READERS,
            "unchanged"
        );
        drop(last);
        assert_eq!(entry.state.load(Ordering::Relaxed), live | (READERS - 1));
        // The leaked readers leave: the value is removed as usual.
        entry.state.store(live, Ordering::Relaxed);
        assert!(pool.remove(h));
        assert!(pool.is_empty());
    }
}
