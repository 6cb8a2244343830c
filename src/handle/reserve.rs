//! Keys reserved before their values exist, from any thread:
//! [`HandlePool::reserve`] returns a [`Reservation`], which
//! [`insert_reserved`](HandlePool::insert_reserved) fills or
//! [`cancel_reservation`](HandlePool::cancel_reservation) gives back.
//!
//! # Protocol
//!
//! A reservation claims a free entry as an insert does (the chain of
//! entries vacated through `&mut`, the free list, else an eviction), and
//! marks its word *reserved*: its generation `g` with both the `COUNTED`
//! and the `REMOVED` flag set ([`entry::reserved`]; the low bits keep the
//! free word's payload, so the mark is the free word it loaded with the two
//! flags added, see `State::mark_reserved`). No other word looks like it: a
//! counted live word is never removed, and a removed one never counted.
//! So:
//!
//! - the entry is out of the free list, and counts towards the capacity
//!   and in `len` (an entry in use), not as a value (see "Counting");
//! - the key `(g, index)` reads `None`: every read checks that the word is
//!   live under the key (the read CAS, a section's one compare or
//!   `is_live`), and a reserved word is not;
//! - an eviction takes only an occupied entry, never a reserved one;
//! - the walks (`iter`, the `&mut` API) skip it, as any entry that is not
//!   occupied, and `insert_at` refuses it.
//!
//! The entry belongs to the [`Reservation`], a value that is neither
//! `Clone` nor `Copy`: filling or cancelling consumes it, so exactly one
//! of them happens, and no word needs a compare-and-swap to decide which.
//! (A copyable key would need one: two threads filling one key would have
//! to race for the entry, a read-modify-write that costs as much as the
//! rest of the insert.) Nothing else changes a reserved word: every
//! transition of the other paths starts from an occupied or a removed
//! word. The reservation names its pool by an id no other pool ever has,
//! so a reservation of another pool (or of a pool since dropped) fills
//! nothing here.
//!
//! The fill writes the value and publishes it as an insert does (the
//! Release store that readers' Acquire CAS pairs with), from the reserved
//! word to the occupied word of the same generation. The cancel stores the
//! free word of the next generation and gives the entry back. Whatever the
//! reserving thread did to the entry (a segment it allocated, an evicted
//! value it took out) happens before the fill or the cancel on another
//! thread: the reservation moved there, and moving a value between
//! threads synchronizes (a channel, a join, a lock).
//!
//! # Counting
//!
//! Nothing counts reservations as they are made and ended: a count kept
//! by the fill would cost a thread-local lookup and a store, half an
//! insert again, or a shared read-modify-write, more than the insert
//! itself. A reservation is an entry in use, so `len` counts it as it
//! counts an entry an insert is filling (the free list's in-use count
//! has it); the reservations alive are the entries whose word is the
//! mark, and [`HandlePool::stats`] (`reserved`, and `live`, which leaves
//! them out) and the exact sizes of the `&mut` walks count them by
//! reading the entries' words below a bound that every reservation's
//! index is under ([`Reservations::bound`]). A pool that never reserved
//! reads none: the bound is 0 until a reservation raises it, and a count
//! under `&mut self` that finds none lowers it to 0 again. The bound costs
//! a reservation nothing that an insert does not pay: it is never above
//! the walks' high mark, so a reservation below it checks one mark, as an
//! insert checks the high mark.

use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;

use super::entry::{self, Entry};
use super::{Handle, HandlePool, Key};
use crate::error::InsertError;
use crate::sync::{AtomicU32, Ordering};

/// A key reserved by [`HandlePool::reserve`]: its entry, held with no
/// value, until [`insert_reserved`](HandlePool::insert_reserved) fills it
/// or [`cancel_reservation`](HandlePool::cancel_reservation) gives it back.
///
/// The reservation is the right to fill the key, so it is neither `Clone`
/// nor `Copy`: filling or cancelling consumes it, which makes exactly one
/// of them happen without a compare-and-swap (sharded-slab's
/// `VacantEntry` works the same way). Copy its [`key`](Self::key) freely
/// (into components, messages, other entities): until the fill the key
/// reads `None`, after it the value. The reservation is `Send` and `Sync`:
/// reserve on a worker thread, fill at the frame's end on another.
///
/// Dropping a reservation neither fills nor cancels it: its entry stays
/// reserved, out of service, until the pool drops (as a forgotten guard's
/// slot); `#[must_use]` warns of the common case.
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(4);
/// let reservation = pool.reserve().unwrap();
/// let key = reservation.key();
/// std::thread::scope(|s| {
///     s.spawn(|| pool.insert_reserved(reservation, "ship").unwrap());
/// });
/// assert_eq!(pool.with(key, |v| *v), Some("ship"));
/// ```
///
/// A reservation fills once: the second fill does not compile.
///
/// ```compile_fail
/// let pool = tagpool::HandlePool::new(2);
/// let reservation = pool.reserve().unwrap();
/// pool.insert_reserved(reservation, 1).unwrap();
/// pool.insert_reserved(reservation, 2).unwrap(); // used after its move
/// ```
#[must_use = "a reservation holds its entry until it is filled or cancelled"]
pub struct Reservation<K = Handle> {
    /// The reserved key's handle, as the pool made it: the fill and the
    /// cancel take the index and generation from here, never from a
    /// [`Key`] implementation, which need not round-trip (see [`Key`]).
    handle: Handle,
    /// The key type (`key()` makes one).
    key: PhantomData<K>,
    /// The reserving pool's [`Reservations::id`].
    pool: u64,
    /// The reserved entry (an `Entry<T>` of that pool, whose entries never
    /// move while it lives), so that the fill needs no lookup. Only the
    /// pool whose id is `pool` reads it (`insert_reserved`,
    /// `cancel_reservation`), through its `&self`.
    entry: NonNull<()>,
}

// SAFETY: the entry pointer is only dereferenced by the pool that made the
// reservation (its id checked first), through that pool's `&self`: a thread
// that fills on the reservation's behalf must hold `&HandlePool<T, K>`,
// which is shared across threads only when the pool is `Sync` (`T: Send +
// Sync`). Sending the reservation sends its key and the right to fill, so
// `Send` follows the key's bound.
unsafe impl<K: Send> Send for Reservation<K> {}
// SAFETY: `&Reservation` reads only the key (`key()`); the pointer is read
// only by the consuming fill or cancel, which take the reservation by value.
unsafe impl<K: Sync> Sync for Reservation<K> {}

impl<K: Key> Reservation<K> {
    /// The reserved key: it reads `None` until the reservation is filled,
    /// then the value; stale once the reservation is cancelled.
    #[inline]
    pub fn key(&self) -> K {
        K::from_handle(self.handle)
    }
}

impl<K: Key> fmt::Debug for Reservation<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Reservation").field(&self.key()).finish()
    }
}

/// The ids of pools, for their reservations: each pool takes one, and no
/// id is ever taken twice. Std's atomic even under loom: a counter that is
/// no part of a protocol.
static NEXT_POOL: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

/// One pool's id for its reservations, and the bound of their indices
/// (see the module docs, "Counting").
pub(super) struct Reservations {
    /// Names the pool in its [`Reservation`]s.
    id: u64,
    /// Above the index of every reservation alive: raised by a `reserve`
    /// past it, lowered to 0 under `&mut self` by a count that found none.
    /// The counts read the words below it, none while it is 0. Never above
    /// the walks' high mark (`HandlePool::high`), which a `reserve` raises
    /// first: a reserve whose index is below it skips both raises, in one
    /// check, as an insert checks the high mark.
    bound: AtomicU32,
}

impl Reservations {
    pub(super) fn new() -> Self {
        Self {
            // Relaxed: only uniqueness matters.
            id: NEXT_POOL.fetch_add(1, core::sync::atomic::Ordering::Relaxed),
            bound: AtomicU32::new(0),
        }
    }

    /// The bound (see `bound`).
    #[inline]
    pub(super) fn bound(&self) -> u32 {
        // Loom-only fault injection (`tagpool_loom_reserve_bound_relaxed`):
        // the bound read Relaxed, so a reservation under it may not see the
        // high mark raised above its entry (a clone then misses it).
        if cfg!(all(loom, tagpool_loom_reserve_bound_relaxed)) {
            return self.bound.load(Ordering::Relaxed);
        }
        // Acquire: pairs with the Release raise in `HandlePool::raise_marks`,
        // so that the walks' high mark raised before it is visible to this
        // thread (and to every thread this one synchronizes with), as if it
        // had read the high mark itself.
        self.bound.load(Ordering::Acquire)
    }

    /// Lowers the bound to 0: under `&mut self`, after a count found no
    /// reservation.
    pub(super) fn none_alive(&mut self) {
        // Relaxed: `&mut self` orders everything.
        self.bound.store(0, Ordering::Relaxed);
    }
}

impl fmt::Debug for Reservations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservations")
            .field("bound", &self.bound())
            .finish_non_exhaustive()
    }
}

impl<T, K: Key> HandlePool<T, K> {
    /// Reserves a key with no value yet, from any thread: the entry is
    /// taken as an insert takes one (evicting a value if the pool is full
    /// and evicts), and counts towards the capacity until
    /// [`insert_reserved`](Self::insert_reserved) publishes a value under
    /// the key or [`cancel_reservation`](Self::cancel_reservation) gives
    /// the entry back. Until then the [key](Reservation::key) reads `None`
    /// (as a key whose value was removed), is never evicted, and is in no
    /// walk; [`is_reserved`](Self::is_reserved) says it is held. It counts
    /// in [`len`](Self::len), the entries in use, as bevy's `Entities::len`
    /// counts reserved entities, and in
    /// [`HandleStats::reserved`](crate::HandleStats::reserved), not in
    /// [`HandleStats::live`](crate::HandleStats::live).
    ///
    /// As bevy's `reserve_entity` or hecs' `reserve_entity`: systems that
    /// run in parallel spawn entities whose components are written at the
    /// frame's end. A reservation and its fill write nothing shared but
    /// the entry's own word (no read-modify-write: see [`Reservation`] for
    /// why it is a value of its own rather than a copyable key), and count
    /// nothing: the two cost one insert and one more store of the entry's
    /// word. A reservation that is dropped, neither
    /// filled nor cancelled, keeps its entry until the pool drops, as a
    /// forgotten guard keeps its slot.
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
    /// let reservation = pool.reserve().unwrap();
    /// let key = reservation.key();
    /// assert!(pool.get(key).is_none() && pool.is_reserved(key));
    /// assert_eq!((pool.len(), pool.stats().live), (1, 0));
    /// pool.insert(1).unwrap();
    /// assert!(pool.insert(2).is_err(), "the reservation holds an entry");
    /// assert_eq!(pool.insert_reserved(reservation, 7), Ok(key));
    /// assert_eq!(pool.with(key, |v| *v), Some(7));
    /// ```
    pub fn reserve(&self) -> Option<Reservation<K>> {
        let index = self.claim()?;
        let entry = self.entries.claim(index, &self.indices);
        // Relaxed: this thread owns the free entry (the pop or the
        // eviction's CAS that made it the owner carried its word).
        let state = entry.state.load(Ordering::Relaxed);
        let generation = entry::generation(state);
        // The walks (a clone's, a save's) stop at the high mark: the
        // reserved entry's generation must be below it, as a filled one's;
        // the counts of reservations stop at their bound. Below the bound,
        // below both.
        if index >= self.reservations.bound() {
            self.raise_marks(index);
        }
        // Loom-only fault injection (`tagpool_loom_reserve_as_occupied`):
        // a reservation marked as a live value (a read then reads a value
        // never written, an eviction drops one).
        // Relaxed: the mark only turns readers, evictions and walks away
        // (none of them reads anything of the entry but its word); the
        // fill or cancel that follows is ordered after this by the
        // reservation's move to its thread (see the module docs).
        if cfg!(all(loom, tagpool_loom_reserve_as_occupied)) {
            entry
                .state
                .store(index, entry::live(generation), Ordering::Relaxed);
        } else {
            debug_assert!(entry::is_free(state));
            entry.state.mark_reserved(state, Ordering::Relaxed);
        }
        Some(Reservation {
            handle: Handle::new(index, generation),
            key: PhantomData,
            pool: self.reservations.id,
            entry: NonNull::from(entry).cast(),
        })
    }

    /// Raises the walks' high mark, then the reservations' bound, above
    /// `index`.
    #[inline]
    fn raise_marks(&self, index: u32) {
        // Relaxed: as in `fill`.
        if index >= self.high.load(Ordering::Relaxed) {
            // Relaxed: as in `fill`.
            self.high.fetch_max(index + 1, Ordering::Relaxed);
        }
        // Release: a reserve that reads this bound (Acquire) and skips the
        // high mark is ordered after the raise of the high mark above.
        self.reservations
            .bound
            .fetch_max(index + 1, Ordering::Release);
    }

    /// Reserves `n` keys at once (see [`reserve`](Self::reserve)): all of
    /// them, or none (the ones taken go back) if the pool runs out first.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let reservations = pool.reserve_many(3).unwrap();
    /// assert!(pool.reserve_many(2).is_none(), "one entry left");
    /// assert_eq!(pool.stats().reserved, 3);
    /// for (n, reservation) in reservations.into_iter().enumerate() {
    ///     pool.insert_reserved(reservation, n).unwrap();
    /// }
    /// assert_eq!(pool.len(), 3);
    /// ```
    pub fn reserve_many(&self, n: usize) -> Option<Vec<Reservation<K>>> {
        let mut reservations = Vec::with_capacity(n);
        for _ in 0..n {
            match self.reserve() {
                Some(reservation) => reservations.push(reservation),
                None => {
                    for reservation in reservations {
                        self.cancel_reservation(reservation);
                    }
                    return None;
                }
            }
        }
        Some(reservations)
    }

    /// Publishes `value` under the reserved key, from any thread: from
    /// here on the key reads it, as the key of an insert. Returns the key.
    ///
    /// # Errors
    ///
    /// [`InsertError::NotReserved`], with the value, if `reservation` is
    /// another pool's (nothing changes in either pool).
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{HandlePool, InsertError};
    ///
    /// let (pool, other) = (HandlePool::<&str>::new(2), HandlePool::<u8>::new(2));
    /// let reservation = pool.reserve().unwrap();
    /// let elsewhere = other.reserve().unwrap();
    /// let key = std::thread::scope(|s| s.spawn(|| pool.insert_reserved(reservation, "a")).join());
    /// assert_eq!(pool.with(key.unwrap().unwrap(), |v| *v), Some("a"));
    /// assert_eq!(pool.insert_reserved(elsewhere, "b"), Err(InsertError::NotReserved("b")));
    /// ```
    pub fn insert_reserved(
        &self,
        reservation: Reservation<K>,
        value: T,
    ) -> Result<K, InsertError<T>> {
        // Loom-only fault injection (`tagpool_loom_fill_any_pool`): a fill
        // that takes any pool's reservation, and finds the entry by its
        // index here, so it writes the value of an entry this pool's own
        // reservation (or insert) holds.
        let any_pool = cfg!(all(loom, tagpool_loom_fill_any_pool));
        if reservation.pool != self.reservations.id && !any_pool {
            return Err(InsertError::NotReserved(value));
        }
        let handle = reservation.handle;
        debug_assert!(self.holds_reservation(handle) || cfg!(loom));
        let entry = if any_pool {
            self.entries.at(handle.index() as u32)
        } else {
            // SAFETY: this pool's reservation (the id above: no other pool
            // ever has it), so the pointer is to one of its entries, which
            // never move while it lives (`&self`).
            unsafe { reservation.entry.cast::<Entry<T>>().as_ref() }
        };
        // SAFETY: the entry is the reservation's, so this thread's (see the
        // module docs); reserved, so no reader counts itself on it.
        unsafe { entry.put(value) };
        self.stamp(entry);
        // An insert's publish, from the reserved word to the occupied one of
        // the key's generation (the reader bits of the mark dropped); the
        // reservation carries the generation, so the word needs no load.
        entry.publish_reserved(handle.index() as u32, handle.generation());
        Ok(reservation.key())
    }

    /// Gives back the entry of the reservation without a value: its key
    /// goes stale (every copy of it: the entry's next value has a new
    /// generation). Returns whether it did; `false` if `reservation` is
    /// another pool's (nothing changes in either pool).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(1);
    /// let reservation = pool.reserve().unwrap();
    /// let key = reservation.key();
    /// assert!(pool.cancel_reservation(reservation));
    /// assert!(!pool.is_reserved(key) && pool.get(key).is_none());
    /// let other = pool.insert(5).unwrap();
    /// assert_ne!(other, key, "the same entry, a new generation");
    /// ```
    pub fn cancel_reservation(&self, reservation: Reservation<K>) -> bool {
        if reservation.pool != self.reservations.id {
            return false;
        }
        let handle = reservation.handle;
        // SAFETY: as in `insert_reserved`.
        let entry = unsafe { reservation.entry.cast::<Entry<T>>().as_ref() };
        // Relaxed: the entry is the reservation's (see the module docs);
        // its new generation is published to the next inserter by the
        // push (Release) in `give_back`.
        entry.state.store(
            handle.index() as u32,
            entry::free(entry::ended(entry::reserved(handle.generation()))),
            Ordering::Relaxed,
        );
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
    /// let reservation = pool.reserve().unwrap();
    /// let key = reservation.key();
    /// assert!(pool.is_reserved(key));
    /// pool.insert_reserved(reservation, ()).unwrap();
    /// assert!(!pool.is_reserved(key) && pool.contains(key));
    /// ```
    pub fn is_reserved(&self, key: K) -> bool {
        self.holds_reservation(key.handle())
    }

    /// [`is_reserved`](Self::is_reserved) of a handle.
    fn holds_reservation(&self, handle: Handle) -> bool {
        self.reserved_entry(handle).map_or(false, |entry| {
            // Relaxed: a snapshot.
            let state = entry.state.load(Ordering::Relaxed);
            entry::is_reserved(state) && entry::generation(state) == handle.generation()
        })
    }

    /// The entry a reservation of `handle` would hold: `None` past the
    /// entries allocated. Only its word says whether it is reserved.
    fn reserved_entry(&self, handle: Handle) -> Option<&Entry<T>> {
        self.entries.get(handle.index())
    }
}

/// The count of reservations, which needs no key type (the `&mut` walks'
/// sizes use it).
impl<T, K> HandlePool<T, K> {
    /// The reservations alive, counted from the entries' words when a
    /// reservation may be alive (see the module docs, "Counting"): a
    /// snapshot, which a racing reserve, fill or cancel may or may not
    /// change.
    pub(super) fn reserved_now(&self) -> usize {
        // 0 when no reservation may be alive: no word read.
        let bound = self.reservations.bound() as usize;
        (0..bound)
            .filter_map(|index| self.entries.get(index))
            // Relaxed: a snapshot.
            .filter(|entry| entry::is_reserved(entry.state.load(Ordering::Relaxed)))
            .count()
    }

    /// [`reserved_now`](Self::reserved_now) under `&mut self`, where it is
    /// exact: lowers the bound to 0 when it finds none, so that the next
    /// counts read no word until the next reservation.
    pub(super) fn reserved_exclusive(&mut self) -> usize {
        let reserved = self.reserved_now();
        if reserved == 0 {
            self.reservations.none_alive();
        }
        reserved
    }
}
