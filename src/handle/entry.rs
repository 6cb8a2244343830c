//! One entry of a [`HandlePool`](super::HandlePool): its state word, its
//! insertion stamp and its value cell, and every transition of the state.
//!
//! # The state word
//!
//! ```text
//!  63        62                24   23        22        21 .. 0
//! +---------+--------------------+---------+---------+---------------+
//! | NONLIVE | generation (39)    | COUNTED | REMOVED | readers (22)  |
//! +---------+--------------------+---------+---------+---------------+
//! ```
//!
//! | state (raw) | meaning | who owns the cell |
//! |---|---|---|
//! | `(-, g, -, -, 0)`, `g >= 1` | live under generation `g`, no [`Ref`](super::Ref) counted | shared by the readers (sections); nobody writes |
//! | `(NONLIVE, g, COUNTED, -, r)` | live under generation `g`, `r` `Ref`s (`r >= 0`: once counted, the word keeps this form until the occupancy ends) | shared by the readers; nobody writes |
//! | `(NONLIVE, g, -, REMOVED, r)`, `r > 0` | removed while read; the last reader frees it | shared by the `r` readers |
//! | `(NONLIVE, g, -, -, 0)`, `g >= 1` | free, or owned by one inserter or evicter | the index's owner (free list, inserter) or the evicter |
//! | `(NONLIVE, 0, -, -, 0)` | retired: every generation is spent | nobody: its index never returns to the free list |
//! | `(NONLIVE, g, COUNTED, REMOVED, 0)` | reserved under `g` (`HandlePool::reserve`), no value | the holder of its `Reservation` (the fill or cancel that consumes it) |
//!
//! A word is *occupied* ([`is_occupied`]) in either live form. The
//! uncounted one is the only word with `NONLIVE` clear, and no key a pool
//! makes has that bit set (generations stop at `2^39 - 1`): as
//! [`State`] stores it (with the entry's index in its low bits) it is the
//! bits of the live value's handle, which is what lets a read section
//! recognize a live key with one compare, and no other word of any entry
//! passes that compare for a key its entry could be looked up by (see
//! [`State`]).
//!
//! Transitions (each one CAS or RMW on the word):
//! - *publish* (inserter or evicter, owning the cell): store the
//!   uncounted live word of `g`, Release: the value written before it is
//!   visible to every reader.
//! - *read* (`get`): CAS an occupied word of the handle's generation to
//!   one more reader (from the uncounted form, to `COUNTED` with one);
//!   Acquire pairs with the publish.
//! - *unread* (`Ref` drop): `fetch_sub` of one reader, Release; the reader
//!   that takes `(g, REMOVED, 1)` to zero owns the cell (Acquire fence)
//!   and frees it.
//! - *remove*: CAS an occupied `(g, r)` to `(next(g), -, 0)` if `r = 0`
//!   (the remover owns the cell), else to `(next(g), REMOVED, r)`.
//! - *evict*: CAS an occupied `(g, mine)` to `(next(g), -, 0)`, where
//!   `mine` is the evicter's own reads (0 or 1): an entry with any other
//!   reader is never taken (it is skipped).
//! - *retire*: whoever ends up owning a free entry whose word says
//!   generation 0 (the remover, the last reader, the evicter) takes its
//!   value out and keeps its index off the free list, for good. No word
//!   changes: the retirement is the absence of the push that would make the
//!   entry free for an insert.
//!
//! Every transition that ends an occupancy moves the generation to
//! `next(g)`: `g + 1` up to [`MAX_GENERATION`] (`2^39 - 1`), and 0, the
//! retired mark, after it. Generations start at 1. So a handle of
//! generation `g` matches the word only while that occupancy lasts, and
//! no generation is ever used twice by one entry: a stale handle never
//! names a later value. Each entry holds at most `2^39 - 1` occupancies
//! (see [`Handle`](super::Handle)).

use super::key::{Handle, FIRST_GENERATION, INDEX_BITS, INDEX_MASK, MAX_GENERATION};
use crate::sync::{AtomicU64, ConstPtr, MutPtr, Ordering, UnsafeCell};

/// Set in every word but a live value's that no `Ref` counts: the top
/// bit, which no key has (generations stop below 2^39).
pub(super) const NONLIVE: u64 = 1 << 63;
/// One counted reader, in the reader bits.
pub(super) const ONE_READER: u64 = 1;
/// The number of live `Ref`s of an entry, in the low 22 bits of a counted
/// or removed word.
pub(super) const READERS: u64 = (1 << 22) - 1;
/// The most `Ref`s an entry counts: `2^22 - 1`.
pub(super) const MAX_READERS: u64 = READERS;
/// The entry was removed while read: its last reader frees it.
pub(super) const REMOVED: u64 = 1 << 22;
/// The entry's value is live under the word's generation, counted: `Ref`s
/// in the reader bits (0 or more).
pub(super) const COUNTED: u64 = 1 << 23;
/// The generation's shift: the 39 bits above the flags.
const GENERATION: u32 = 24;
/// The generation of a retired entry: no handle has it.
pub(super) const RETIRED: u64 = 0;

/// The generation of a state word.
#[inline]
pub(super) fn generation(state: u64) -> u64 {
    (state >> GENERATION) & MAX_GENERATION
}

/// Whether a word is a live value's, counted or not. Both tests, then
/// one branch (`|`, not `||`): a walk's loop keeps one exit.
#[inline]
pub(super) fn is_occupied(state: u64) -> bool {
    ((state as i64) >= 0) | (state & (COUNTED | REMOVED) == COUNTED)
}

/// Whether a word is a live value's with exactly `readers` `Ref`s: for 0,
/// the uncounted form or the counted one with none. Both tests, then one
/// branch.
#[inline]
pub(super) fn is_occupied_with(state: u64, readers: u64) -> bool {
    ((state as i64) >= 0) & (readers == 0)
        | (state & (NONLIVE | COUNTED | REMOVED | READERS) == NONLIVE | COUNTED | readers)
}

/// The generation of an occupied word, or `None` if the word is not
/// occupied.
#[inline]
pub(super) fn live_generation(state: u64) -> Option<u64> {
    is_occupied(state).then(|| generation(state))
}

/// Whether a word is a free entry's (or a retired one's): no value, not
/// reserved, no reader.
#[inline]
pub(super) fn is_free(state: u64) -> bool {
    state & (NONLIVE | COUNTED | REMOVED) == NONLIVE
}

/// The readers of a state word: the reader bits of a counted or removed
/// word, 0 for any other (whose low bits are no count: see [`State`]).
#[inline]
pub(super) fn readers(state: u64) -> u64 {
    if (state as i64) >= 0 {
        return 0;
    }
    let form = state & (COUNTED | REMOVED);
    if form == COUNTED || form == REMOVED {
        state & READERS
    } else {
        0
    }
}

/// The word of a live entry of generation `generation`, uncounted.
#[inline]
pub(super) fn live(generation: u64) -> u64 {
    debug_assert!(generation <= MAX_GENERATION);
    generation << GENERATION
}

/// An occupied word with one more reader counted (the unit tests').
#[cfg(test)]
fn counted_one_more(state: u64) -> u64 {
    debug_assert!(is_occupied(state));
    if state & NONLIVE == 0 {
        // The entry's index, in an uncounted word's low bits, left out.
        (state & !INDEX_MASK) | NONLIVE | COUNTED | ONE_READER
    } else {
        state + ONE_READER
    }
}

/// The word of an entry whose occupancy ended with `readers` `Ref`s
/// left, generation `ended` (from [`ended`]): free, or removed while read.
#[inline]
pub(super) fn removed(ended: u64, readers: u64) -> u64 {
    if readers == 0 {
        free(ended)
    } else {
        free(ended) | REMOVED | readers
    }
}

/// The word of a free entry of generation `generation`.
#[inline]
pub(super) fn free(generation: u64) -> u64 {
    debug_assert!(generation <= MAX_GENERATION);
    NONLIVE | generation << GENERATION
}

/// The word of an entry reserved under generation `generation` (see
/// `reserve.rs`): both flags, a word no other state has (a counted word
/// is never removed, a removed one never counted).
#[inline]
pub(super) fn reserved(generation: u64) -> u64 {
    free(generation) | COUNTED | REMOVED
}

/// Whether `state` is a reservation's word (see [`reserved`]).
#[inline]
pub(super) fn is_reserved(state: u64) -> bool {
    state & (NONLIVE | COUNTED | REMOVED) == NONLIVE | COUNTED | REMOVED
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

/// Whether `state` is live under `handle`'s generation: occupied (in
/// either form), of that generation, whatever its reader count (a removed
/// word is never occupied).
#[inline]
pub(super) fn is_live(state: u64, handle: Handle) -> bool {
    // The uncounted form as stored is the handle's bits (for the entry of
    // the handle's index, which is the only one asked about a handle);
    // the counted one is the handle's generation, the flags and a count.
    state == handle.to_bits() || state & !READERS == counted_base(handle)
}

/// The counted word of `handle`'s occupancy with no reader.
#[inline]
pub(super) fn counted_base(handle: Handle) -> u64 {
    NONLIVE | COUNTED | (handle.to_bits() & !INDEX_MASK)
}

// The generation sits at the same shift in a word and in a handle, below
// `NONLIVE`, and the flags and readers fill the handle's index bits.
const _: () = assert!(
    GENERATION == INDEX_BITS
        && COUNTED | REMOVED | READERS == INDEX_MASK
        && MAX_GENERATION << GENERATION | INDEX_MASK == !NONLIVE
);

/// Whether `generation`, an occupancy's successor from [`ended`], marks
/// the entry retired.
#[inline]
pub(super) fn is_retired(generation: u64) -> bool {
    // Loom-only fault injection: a retired entry treated as free, so its
    // index goes back to the free list. The retirement model must see an
    // insert succeed into it.
    !cfg!(all(loom, tagpool_loom_retire_reuses)) && generation == RETIRED
}

/// An entry's state word as it sits in memory: the word of the module
/// docs (the *raw* word, which every transition computes with) with a
/// payload in bits its form leaves 0, which only a read section's compare
/// looks at:
///
/// - a live word no `Ref` counts (`NONLIVE` clear) holds the entry's
///   index in its low 24 bits, so it is stored as the bits of its
///   handle, exactly: a read section compares the stored word with the
///   key's bits, one compare ([`State::is_key`]);
/// - a free or reserved word holds the entry's index plus one, modulo
///   2^21, in its low 21 bits (see below);
/// - a counted or removed word is stored as it is (its low 22 bits count
///   the readers, which `fetch_sub` counts down on the stored word).
///
/// Every predicate of the module reads a word with or without its payload
/// alike ([`is_occupied`], [`is_free`], [`is_reserved`], [`readers`],
/// [`generation`]), so loads return the stored word as it is; stores, and
/// the new word of a compare-and-swap, add the payload, given the entry's
/// index (the expected word of a compare-and-swap is one a load returned,
/// payload and all, or a counted word, which has none).
///
/// # Which keys pass the compare
///
/// A read section looks entry `e` up by the key's bits masked to a power
/// of two `P >= 2`, so `e` is the key's index modulo `P`, and compares the
/// whole stored word with the key's bits:
///
/// - A key whose generation fits (below 2^39, as every generation a pool
///   hands out) has the top bit clear, so it can only pass a live word no
///   `Ref` counts, whose low bits are `e`: it passes exactly when its
///   index is `e` and its generation the live one.
/// - A key with the top bit set (no pool made it: forged bits) can pass a
///   counted or removed word, whose value is there and stays until a
///   grace period (safe to read, the answer of a forged key), but no
///   free or reserved word, which has no value: its low 24 bits would
///   have to be that word's, whose low 21 bits are `(e + 1) mod 2^21`, yet
///   reduce to `e` modulo `P`. For `P <= 2^21` they reduce to `e + 1`
///   modulo `P`; for a larger `P`, the low 21 bits of `e` would have to be
///   those of `e + 1`.
///
/// With `P = 1` a forged key could pass entry 0's free word: a section
/// then looks up in an entry that no key passes (`Entries::fast`).
pub(super) struct State(AtomicU64);

/// The payload of a free or reserved word: its low 21 bits.
const PAYLOAD: u64 = (1 << 21) - 1;

impl State {
    /// Whether the raw or stored word `word` is free or reserved: both
    /// flags clear or both set (a live word counted is never removed).
    #[inline]
    fn is_vacant(word: u64) -> bool {
        (word >> 22 ^ word >> 23) & 1 == 0
    }

    /// The stored word of entry `index` whose raw word is `raw`.
    #[inline]
    fn stored(index: u32, raw: u64) -> u64 {
        if raw & NONLIVE == 0 {
            raw | u64::from(index)
        } else if Self::is_vacant(raw) {
            raw | (u64::from(index) + 1) & PAYLOAD
        } else {
            raw
        }
    }

    /// The raw word whose stored word is `stored` (the unit tests').
    #[cfg(test)]
    fn raw(stored: u64) -> u64 {
        if stored & NONLIVE == 0 {
            stored & !INDEX_MASK
        } else if Self::is_vacant(stored) {
            stored & !PAYLOAD
        } else {
            stored
        }
    }

    /// The word of entry `index`, raw `raw`.
    pub(super) fn new(index: u32, raw: u64) -> Self {
        Self(AtomicU64::new(Self::stored(index, raw)))
    }

    /// A stored word of 0: no key's bits (a key's generation is never 0).
    pub(super) fn never() -> Self {
        Self(AtomicU64::new(0))
    }

    /// Loads the stored word, payload and all (every predicate of the
    /// module reads it as it is).
    #[inline]
    pub(super) fn load(&self, order: Ordering) -> u64 {
        self.0.load(order)
    }

    /// Stores the raw word `raw` in entry `index`.
    #[inline]
    pub(super) fn store(&self, index: u32, raw: u64, order: Ordering) {
        self.0.store(Self::stored(index, raw), order);
    }

    /// Counts one reader out of a counted or removed word (stored as it
    /// is); returns the word before.
    #[inline]
    pub(super) fn fetch_sub_reader(&self, order: Ordering) -> u64 {
        let before = self.0.fetch_sub(ONE_READER, order);
        debug_assert!(before & NONLIVE != 0 && !Self::is_vacant(before));
        before
    }

    /// [`AtomicU64::compare_exchange`] of entry `index`'s word: `current`
    /// as a load returned it, `new` a raw word (its payload added).
    #[inline]
    pub(super) fn compare_exchange(
        &self,
        index: u32,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        self.0
            .compare_exchange(current, Self::stored(index, new), success, failure)
    }

    /// [`AtomicU64::compare_exchange_weak`], as
    /// [`compare_exchange`](Self::compare_exchange).
    #[inline]
    pub(super) fn compare_exchange_weak(
        &self,
        index: u32,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        self.0
            .compare_exchange_weak(current, Self::stored(index, new), success, failure)
    }

    /// The stored word of entry `index`'s free word `free` (from [`free`]):
    /// its payload added, the rest as it is.
    #[inline]
    pub(super) fn free_stored(index: u32, free: u64) -> u64 {
        debug_assert!(is_free(free) && free & PAYLOAD == 0);
        free | (u64::from(index) + 1) & PAYLOAD
    }

    /// Stores the reserved word of the generation of `free`, the entry's
    /// free word as a load returned it (payload and all): both forms carry
    /// the same payload, so the reservation's mark is `free` with both
    /// flags set, and needs no index.
    #[inline]
    pub(super) fn mark_reserved(&self, free: u64, order: Ordering) {
        debug_assert!(is_free(free));
        self.0.store(free | COUNTED | REMOVED, order);
    }

    /// [`AtomicU64::compare_exchange_weak`] of the stored words as they
    /// are: `current` as a load returned it, `new` a stored word
    /// ([`free_stored`](Self::free_stored), a counted or removed word, or
    /// a key's bits).
    #[inline]
    pub(super) fn compare_exchange_stored(
        &self,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        self.0.compare_exchange_weak(current, new, success, failure)
    }

    /// Whether the stored word is `bits`, a key's: for a key a pool made,
    /// its value is live with no `Ref` counted (see "Which keys pass the
    /// compare"); `false` for every other word (a counted live word among
    /// them: ask [`is_live`] of the raw word then). One load, one compare.
    #[inline]
    pub(super) fn is_key(&self, bits: u64, order: Ordering) -> bool {
        let stored = self.0.load(order);
        if cfg!(all(loom, tagpool_loom_section_key_index_only)) {
            // Loom-only fault injection: a compare of the index and the
            // form only, not the generation, so that a stale key passes
            // the live word of a later value in its entry. The model of a
            // section racing a remove and a re-insert must see the
            // successor's value.
            return stored & NONLIVE == 0 && stored & INDEX_MASK == bits & INDEX_MASK;
        }
        stored == bits
    }
}

/// An entry of the handle pool.
pub(super) struct Entry<T> {
    /// See the module docs and [`State`].
    pub(super) state: State,
    /// The insertion order of the live value, for oldest-first eviction:
    /// written by the owner before the publish, read after an Acquire load
    /// of the published word. While the entry is free on the pool's chain
    /// of entries vacated through `&mut` (see `HandlePool::vacant`), the
    /// next index on that chain.
    pub(super) stamp: AtomicU64,
    /// The value: `Some` exactly while the word is live (counted or not)
    /// or removed (and while an inserter or evicter owns the entry between
    /// its writes).
    value: UnsafeCell<Option<T>>,
}

impl<T> Entry<T> {
    /// An entry whose stored word no key passes ([`State::never`]), no
    /// value: only a read section's lookup compares its word, and never
    /// reads further (see `Entries::fast`).
    pub(super) fn never() -> Self {
        Self {
            state: State::never(),
            stamp: AtomicU64::new(0),
            value: UnsafeCell::new(None),
        }
    }

    /// A free entry of the first generation, of index `index`.
    pub(super) fn new(index: u32) -> Self {
        Self {
            state: State::new(index, free(FIRST_GENERATION)),
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
        let generation = live_generation(self.state.load(Ordering::Relaxed))?;
        // A leaked `Ref` left its count in the word, but its borrow, hence
        // its reference, has ended.
        // SAFETY: `&mut self`: no other reference to the entry, so no `Ref`
        // reads the cell and no other thread owns it.
        let cell = unsafe { self.cell_mut() };
        // SAFETY: as above, for as long as `self` is borrowed.
        let value = cell.with(|p| unsafe { &mut *p });
        // SAFETY: an occupied entry holds a value (`Some`: see the field).
        let value = unsafe { value.as_mut().unwrap_unchecked() };
        Some((generation, value))
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
    /// If the entry already has 2^22 - 1 readers ([`MAX_READERS`]), the most
    /// its word counts (only leaked `Ref`s can get there): the word is
    /// left as it was.
    #[inline]
    pub(super) fn read(&self, handle: Handle) -> bool {
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
        let bits = handle.to_bits();
        let state = self.state.load(acquire);
        let next = if state == bits {
            // Uncounted (as stored: the handle's bits): the first `Ref`.
            counted_base(handle) | ONE_READER
        } else if state & !READERS == counted_base(handle) && state & READERS < MAX_READERS {
            // Counted (the form stays once a `Ref` was counted).
            state + ONE_READER
        } else if state & !READERS == counted_base(handle) {
            // Every reader bit taken: the panic, out of line.
            return self.read_contended(handle, acquire);
        } else {
            return false;
        };
        // Acquire on success: as above. A counted word has no payload:
        // stored as it is.
        if self
            .state
            .compare_exchange_stored(state, next, acquire, acquire)
            .is_ok()
        {
            return true;
        }
        self.read_contended(handle, acquire)
    }

    /// [`read`](Self::read) past its first look: counted already, or its
    /// compare-and-swap lost.
    #[cold]
    #[inline(never)]
    fn read_contended(&self, handle: Handle, acquire: Ordering) -> bool {
        let bits = handle.to_bits();
        // The counted form of the handle's occupancy, no reader.
        let counted = counted_base(handle);
        let mut state = self.state.load(acquire);
        loop {
            let next = if state == bits {
                // Uncounted (as stored: the handle's bits): the first `Ref`.
                counted | ONE_READER
            } else if state & !READERS == counted {
                assert!(
                    state & READERS < MAX_READERS,
                    "tagpool: too many live `Ref`s of one handle pool entry"
                );
                state + ONE_READER
            } else {
                return false;
            };
            // Acquire on success: as above (the word read may be a later
            // reader's, which carries the publish along its RMW chain). A
            // counted word has no payload: stored as it is.
            match self
                .state
                .compare_exchange_stored(state, next, acquire, acquire)
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
        let before = self.state.fetch_sub_reader(Ordering::Release);
        debug_assert!(readers(before) > 0);
        // Removed, with this reader the last.
        if before & (NONLIVE | COUNTED | REMOVED | READERS) == NONLIVE | REMOVED | ONE_READER {
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
    pub(super) fn clear_removed(&self, index: u32) {
        // Relaxed: the entry is the caller's; the push of its index
        // (Release) publishes this store to the next inserter.
        let state = self.state.load(Ordering::Relaxed);
        debug_assert!(state & REMOVED != 0 && readers(state) == 0);
        self.state
            .store(index, free(generation(state)), Ordering::Relaxed);
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
        debug_assert!(is_free(state));
        is_retired(generation(state))
    }

    /// [`publish`](Self::publish) for an entry vacated through `&mut` (its
    /// word a free generation, no flag, no reader), by an owner with
    /// exclusive access to the pool: no mask.
    #[inline]
    pub(super) fn publish_vacated(&self, index: u32) -> u64 {
        // Relaxed: the caller's exclusive access orders everything.
        let state = self.state.load(Ordering::Relaxed);
        debug_assert!(is_free(state));
        // Release: as in `publish` (a plain store on x86).
        self.state
            .store(index, live(generation(state)), Ordering::Release);
        generation(state)
    }

    /// Publishes the value the owner of a reserved entry just stored (see
    /// `reserve.rs`): from the mark of `generation`, which the reservation
    /// carries, to the occupied word of that generation, with no load.
    #[inline]
    pub(super) fn publish_reserved(&self, index: u32, generation: u64) {
        debug_assert!(
            {
                let state = self.state.load(Ordering::Relaxed);
                is_reserved(state) && self::generation(state) == generation
            },
            "a reservation's own mark"
        );
        // Release: as in `publish`, which this is with the word known.
        self.state.store(index, live(generation), Ordering::Release);
    }

    /// Publishes the value the owner just stored, under the generation of
    /// the entry's free word: returns that generation.
    #[inline]
    pub(super) fn publish(&self, index: u32) -> u64 {
        // Relaxed: the owner's own last write (or the push/CAS that made
        // it the owner carried it).
        let generation = generation(self.state.load(Ordering::Relaxed));
        // Only retired entries have generation 0, and they are never
        // handed out (the loom fault above does, on purpose).
        debug_assert!(generation != RETIRED || cfg!(all(loom, tagpool_loom_retire_reuses)));
        // Release: the value and the stamp written before are visible to
        // every reader whose CAS reads this word (Acquire).
        self.state.store(index, live(generation), Ordering::Release);
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
        let word = free(MAX_GENERATION) | COUNTED | REMOVED | READERS;
        assert_eq!(generation(word), MAX_GENERATION);
        assert_eq!(readers(word & !REMOVED), (1 << 22) - 1, "counted");
        assert_eq!(readers(word & !COUNTED), (1 << 22) - 1, "removed");
        assert_eq!(readers(word), 0, "both flags: reserved, no count");
        assert_eq!(READERS & (COUNTED | REMOVED | NONLIVE), 0);
        assert_eq!(ended(word), RETIRED, "the last one retires");
        assert_eq!(ended(live(MAX_GENERATION - 1)), MAX_GENERATION);
        assert_eq!(word.count_ones(), 64, "every bit has a use");
        // The forms: each word is one of them, none two.
        let g = 5;
        let forms = [
            live(g),
            counted_one_more(live(g)),
            free(g),
            reserved(g),
            removed(g, 3),
        ];
        let occupied: Vec<bool> = forms.iter().map(|&w| is_occupied(w)).collect();
        assert_eq!(occupied, [true, true, false, false, false]);
        let vacant: Vec<bool> = forms.iter().map(|&w| is_free(w)).collect();
        assert_eq!(vacant, [false, false, true, false, false]);
        let reserved_: Vec<bool> = forms.iter().map(|&w| is_reserved(w)).collect();
        assert_eq!(reserved_, [false, false, false, true, false]);
        assert_eq!(forms.map(generation), [g; 5]);
        assert_eq!(forms.map(readers), [0, 1, 0, 0, 3]);
    }

    /// The stored word of every form of every entry round-trips, and the
    /// only stored word a key a pool made can equal is its own entry's
    /// live, uncounted one; a free or reserved word equals no key bits
    /// that mask to its entry (see `State`, "Which keys pass the compare").
    #[test]
    fn stored_words_round_trip_and_pass_only_their_own_key() {
        let g = 7;
        for index in [
            0u32,
            1,
            2,
            5,
            (1 << 20) - 1,
            1 << 20,
            (1 << 21) - 1,
            (1 << 24) - 1,
        ] {
            for raw in [
                live(g),
                counted_one_more(live(g)),
                free(g),
                reserved(g),
                removed(g, 2),
            ] {
                let stored = State::stored(index, raw);
                assert_eq!(State::raw(stored), raw, "index {index}, raw {raw:#x}");
                if raw == free(g) {
                    // A reservation marks the free word as loaded.
                    let state = State::new(index, raw);
                    state.mark_reserved(state.load(Ordering::Relaxed), Ordering::Relaxed);
                    let reserved_stored = State::stored(index, reserved(g));
                    assert_eq!(
                        state.load(Ordering::Relaxed),
                        reserved_stored,
                        "index {index}"
                    );
                }
                let key = Handle::new(index, g).to_bits();
                assert_eq!(stored == key, raw == live(g), "index {index}");
                if is_free(raw) || is_reserved(raw) {
                    // Forged bits (top bit set) that mask to `index` for
                    // every power of two: never the stored word.
                    for p in (1..=24).map(|k| 1u64 << k) {
                        let masks_here = stored & (p - 1) == u64::from(index) & (p - 1);
                        assert!(!masks_here || p == 1, "index {index}, P {p}");
                    }
                }
            }
        }
    }

    /// An entry counts 2^22 - 1 readers, the most its 22 bits hold; a read
    /// past them panics and leaves the word as it was.
    #[test]
    fn an_entry_counts_2_pow_22_minus_1_readers_and_panics_on_the_next() {
        assert_eq!(MAX_READERS, 4_194_303);
        let pool = HandlePool::new(1);
        let h = pool.insert(7u8).unwrap();
        let entry = &pool.entries[0];
        let live = free(FIRST_GENERATION) | COUNTED;
        // As if 2^22 - 2 `Ref`s had been leaked (a test that leaks them
        // takes seconds): the next `get` is the last one counted.
        entry
            .state
            .store(0, live | (READERS - ONE_READER), Ordering::Relaxed);
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
        assert_eq!(
            entry.state.load(Ordering::Relaxed),
            live | (READERS - ONE_READER)
        );
        // The leaked readers leave: the value is removed as usual.
        entry.state.store(0, live, Ordering::Relaxed);
        assert!(pool.remove(h));
        assert!(pool.is_empty());
    }
}
