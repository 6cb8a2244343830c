//! Keys reserved before their values exist, from any thread:
//! [`HandlePool::reserve`] returns a [`Reservation`], which
//! [`insert_reserved`](HandlePool::insert_reserved) fills or
//! [`cancel_reservation`](HandlePool::cancel_reservation) gives back.
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
//!   (in `len` it is not a value: the reservation counts below take it
//!   out);
//! - the key `(g, index)` reads `None`: every read checks `OCCUPIED` (the
//!   read CAS, a section's `is_live`);
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
//! `len` and [`HandleStats::reserved`](crate::HandleStats::reserved) need
//! the number of reservations alive. A shared counter would cost two
//! read-modify-writes per reservation, more than the insert itself, so
//! each thread counts in a record of its own (found through its memo, as
//! a cache's magazine): `+1` where it reserves, `-1` where it fills or
//! cancels, by a plain load and store that only the owner does. The sum
//! over the records is the count; a thread late in its exit, without a
//! record, counts in a shared counter instead. A reservation made on one
//! thread and filled on another leaves `+1` and `-1` in two records: the
//! sum is exact whenever no thread is between its claim and its count, and
//! a snapshot clamps a sum read mid-way.

use core::fmt;

use crossbeam_utils::CachePadded;

use super::entry::{self, Entry};
use super::{Handle, HandlePool, Key};
use crate::error::InsertError;
use crate::sync::{Ordering, PerThread, StatIsize};

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
    key: K,
    /// The reserving pool's [`Reservations::id`].
    pool: u64,
}

impl<K: Key> Reservation<K> {
    /// The reserved key: it reads `None` until the reservation is filled,
    /// then the value; stale once the reservation is cancelled.
    #[inline]
    pub fn key(&self) -> K {
        self.key
    }
}

impl<K: Key> fmt::Debug for Reservation<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Reservation").field(&self.key).finish()
    }
}

/// The ids of pools, for their reservations: each pool takes one, and no
/// id is ever taken twice. Std's atomic even under loom: a counter that is
/// no part of a protocol.
static NEXT_POOL: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(1);

/// One pool's count of live reservations (see the module docs,
/// "Counting"), and its id.
pub(super) struct Reservations {
    /// Names the pool in its [`Reservation`]s.
    id: u64,
    /// Each thread's reservations made less those it filled or cancelled.
    /// A statistic: written by the owner only (a load and a store).
    counts: PerThread<CachePadded<StatIsize>, 2>,
    /// The same, for threads late in their exit (no record).
    late: StatIsize,
}

impl Reservations {
    pub(super) fn new() -> Self {
        Self {
            // Relaxed: only uniqueness matters.
            id: NEXT_POOL.fetch_add(1, core::sync::atomic::Ordering::Relaxed),
            counts: PerThread::new(|| CachePadded::new(StatIsize::new(0)), true),
            late: StatIsize::new(0),
        }
    }

    /// Counts `n` reservations made (`n > 0`) or ended (`n < 0`) on this
    /// thread.
    #[inline]
    fn count(&self, n: isize) {
        match self.counts.remembered() {
            Some(count) => add(count, n),
            None => self.count_slow(n),
        }
    }

    /// [`count`](Self::count) for a thread whose memo holds another
    /// record: finds (or makes) its own.
    #[cold]
    #[inline(never)]
    fn count_slow(&self, n: isize) {
        match self.counts.get_or_make() {
            Some((count, _)) => add(count, n),
            // Late in thread exit: the shared counter (Relaxed: a
            // statistic).
            None => {
                self.late.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// The reservations alive (a snapshot: see the module docs).
    pub(super) fn alive(&self) -> usize {
        // Relaxed: statistics.
        let sum = self
            .counts
            .iter()
            .fold(self.late.load(Ordering::Relaxed), |sum, count| {
                sum.wrapping_add(count.load(Ordering::Relaxed))
            });
        sum.max(0) as usize
    }
}

/// Adds `n` to this thread's own record: a load and a store, no
/// read-modify-write (only the owner writes it).
#[inline(always)]
fn add(count: &StatIsize, n: isize) {
    // Relaxed: a statistic; readers sum the records.
    let now = count.load(Ordering::Relaxed);
    // Relaxed: as above.
    count.store(now.wrapping_add(n), Ordering::Relaxed);
}

impl fmt::Debug for Reservations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reservations")
            .field("alive", &self.alive())
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
    /// (as a key whose value was removed), is never evicted, and is not in
    /// `len` nor in any walk; [`is_reserved`](Self::is_reserved) says it is
    /// held.
    ///
    /// As bevy's `reserve_entity` or hecs' `reserve_entity`: systems that
    /// run in parallel spawn entities whose components are written at the
    /// frame's end. A reservation and its fill write nothing shared but
    /// the entry's own word (no read-modify-write: see [`Reservation`] for
    /// why it is a value of its own rather than a copyable key); the two
    /// cost about 1.6 inserts. A reservation that is dropped, neither
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
    /// assert_eq!(pool.len(), 0);
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
        // Before the mark, so that `len` never counts the entry as a value.
        self.reservations.count(1);
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
        // Relaxed: the mark only turns readers, evictions and walks away
        // (none of them reads anything of the entry but its word); the
        // fill or cancel that follows is ordered after this by the
        // reservation's move to its thread (see the module docs).
        entry.state.store(mark, Ordering::Relaxed);
        Some(Reservation {
            key: K::from_handle(Handle::new(index, generation)),
            pool: self.reservations.id,
        })
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
        // that takes any pool's reservation, so it writes the value of an
        // entry this pool's own reservation (or insert) holds.
        if reservation.pool != self.reservations.id && !cfg!(all(loom, tagpool_loom_fill_any_pool))
        {
            return Err(InsertError::NotReserved(value));
        }
        let handle = reservation.key.handle();
        debug_assert!(self.is_reserved(reservation.key) || cfg!(loom));
        self.reservations.count(-1);
        // Allocated (the reservation's claim did), under the high mark
        // (its `reserve` raised it).
        let entry = self.entries.at(handle.index() as u32);
        // SAFETY: the entry is the reservation's, so this thread's (see the
        // module docs); reserved, so no reader counts itself on it.
        unsafe { entry.put(value) };
        self.stamp(entry);
        // An insert's publish: from the reserved word to the occupied one
        // of its generation (the reader bits of the mark are dropped).
        let published = entry.publish();
        debug_assert_eq!(published, handle.generation());
        Ok(reservation.key)
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
        let handle = reservation.key.handle();
        let entry = self.entries.at(handle.index() as u32);
        self.reservations.count(-1);
        // Relaxed: the entry is the reservation's (see the module docs);
        // its new generation is published to the next inserter by the
        // push (Release) in `give_back`.
        entry.state.store(
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
