//! [`HandleStats`]: the snapshot of a [`HandlePool`]'s counters, and the
//! counters themselves, which only the cold paths (an eviction, a refused
//! insert, a remove while read) touch.

use super::{HandlePool, Key};
use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// A snapshot of a [`HandlePool`]'s counters, from [`HandlePool::stats`].
///
/// Each field is read on its own while other threads may insert and
/// remove, so the fields of one snapshot need not add up; they are exact
/// whenever no other thread uses the pool.
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::builder().capacity(1).evict_oldest().build()?;
/// let first = pool.insert(1).unwrap();
/// let read = pool.get(first).unwrap();
/// assert!(pool.insert(2).is_err(), "the only value is read: nothing can go");
/// drop(read);
/// pool.insert(3).unwrap(); // evicts `first`
/// let stats = pool.stats();
/// assert_eq!((stats.capacity, stats.live, stats.peak_in_use), (1, 1, 1));
/// assert_eq!((stats.evictions, stats.refused_inserts, stats.retired), (1, 1, 0));
/// # Ok::<(), tagpool::BuildError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HandleStats {
    /// The pool's capacity: its number of entries.
    pub capacity: usize,
    /// Entries allocated: the capacity, or fewer for a pool built with
    /// [`HandleBuilder::initial`](crate::HandleBuilder::initial) that has
    /// not needed them all yet.
    pub allocated: usize,
    /// Live values: those a key reaches (and entries an insert is filling
    /// right now), as [`HandlePool::len`] less `removed_while_read` and
    /// `reserved`.
    pub live: usize,
    /// Values removed while [`Ref`](crate::Ref)s read them: stale already,
    /// they hold their entry until their last `Ref` drops (for good, if a
    /// `Ref` was leaked with `mem::forget`).
    pub removed_while_read: usize,
    /// Keys [reserved](HandlePool::reserve) and not yet filled nor
    /// cancelled: each holds an entry, with no value. Nothing counts them as
    /// they come and go (that would cost each reservation half an insert
    /// again): `stats` reads the allocated entries' words to count them, a
    /// walk of the pool, in a pool that has reserved since `&mut self` last
    /// found none (0 at no cost otherwise).
    pub reserved: usize,
    /// The most entries in use at once (live, removed while read, being
    /// filled, reserved, or [retired](HandlePool::retired)): an upper bound, exact
    /// without per-thread caches, as
    /// [`Stats::peak_in_use`](crate::Stats::peak_in_use). Size a pool from
    /// it. (Entries vacated through `&mut` count as in use until an insert
    /// reuses them, which inserts do first; an
    /// [`insert_at`](HandlePool::insert_at) or a load that takes another
    /// entry meanwhile may count them above the true peak.)
    pub peak_in_use: usize,
    /// Live values ended by an evicting insert (each handed to `on_evict`,
    /// or dropped).
    pub evictions: u64,
    /// Inserts refused: [`insert`](HandlePool::insert),
    /// [`insert_mut`](HandlePool::insert_mut) and
    /// [`insert_with_key`](HandlePool::insert_with_key) calls that returned
    /// [`InsertError::Full`](crate::InsertError::Full). Exact on one thread; inserts refused on several threads at
    /// the same moment may count once (the count is kept off the atomic
    /// read-modify-write that would slow every refusal down).
    pub refused_inserts: u64,
    /// Entries retired, as [`HandlePool::retired`].
    pub retired: usize,
    /// Entries removed (their keys stale) in a pool read through
    /// [sections](HandlePool::read), whose values wait for a grace period:
    /// they are dropped, and the entries reused, once no section that could
    /// see them is open (see [`HandlePool::reclaim`]). They count against
    /// the capacity until then. A snapshot: a grace period in progress
    /// holds the ones it looks at for a moment.
    pub awaiting_reuse: usize,
}

/// The counters of a [`HandlePool`] that the free list does not keep.
/// Statistics: every access is Relaxed (nothing is read through them),
/// and none is on the path of an insert that finds a free entry, a read or
/// a remove of an unread value.
pub(super) struct Counters {
    /// Entries retired (every generation spent): their indices stay out
    /// of the free list, so the free list counts them as in use.
    pub(super) retired: AtomicUsize,
    /// Entries removed while read, whose last `Ref` has not dropped yet:
    /// the free list counts them as in use. The remove counts one in after
    /// its CAS, and the last reader may count it out first: the counter
    /// then wraps below 0 for a moment ([`removed_while_read`](Self::removed_while_read)
    /// reads such a moment as 0). Exact whenever no thread is removing.
    pub(super) removed_while_read: AtomicUsize,
    /// Values evicted.
    evictions: AtomicU64,
    /// Inserts refused (a load and a store: see `refused`).
    refused: AtomicU64,
}

impl Counters {
    /// Every counter at 0.
    pub(super) fn new() -> Self {
        Self {
            retired: AtomicUsize::new(0),
            removed_while_read: AtomicUsize::new(0),
            evictions: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Values removed while read, now: at most `capacity`.
    pub(super) fn removed_while_read(&self, capacity: usize) -> usize {
        // Relaxed: a statistic.
        let n = self.removed_while_read.load(Ordering::Relaxed);
        // Above the capacity: wrapped below 0 for a moment (see the field).
        if n > capacity {
            0
        } else {
            n
        }
    }

    /// Counts an eviction.
    #[cold]
    pub(super) fn evicted(&self) {
        // Relaxed: a statistic.
        self.evictions.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a refused insert: a load and a store, not a read-modify-write
    /// (which would add a fifth to the cost of a refused insert), so two
    /// threads refused at the same moment may count once.
    #[cold]
    pub(super) fn refused(&self) {
        // Relaxed: a statistic.
        let refused = self.refused.load(Ordering::Relaxed);
        // Relaxed: as above; a racing refusal's count may be overwritten.
        self.refused
            .store(refused.wrapping_add(1), Ordering::Relaxed);
    }
}

impl<T, K: Key> HandlePool<T, K> {
    /// A snapshot of the pool's counters: live values, the peak, evictions,
    /// refused inserts, retired entries. It reads the free list's counts
    /// (as [`IndexPool::stats`](crate::IndexPool::stats) does) and counters
    /// that only the cold paths write; it writes nothing. In a pool with
    /// [reservations](HandlePool::reserve), it also reads every allocated
    /// entry's word to count them (see [`HandleStats::reserved`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(1);
    /// let h = pool.insert("a").unwrap();
    /// assert!(pool.insert("b").is_err());
    /// pool.remove(h);
    /// let stats = pool.stats();
    /// assert_eq!((stats.live, stats.peak_in_use, stats.refused_inserts), (0, 1, 1));
    /// ```
    pub fn stats(&self) -> HandleStats {
        let indices = self.indices.stats();
        // Relaxed: statistics, see `Counters`.
        let retired = self.counters.retired.load(Ordering::Relaxed);
        let removed_while_read = self.counters.removed_while_read(self.capacity());
        let reserved = self.reserved_now();
        HandleStats {
            capacity: self.capacity(),
            allocated: self.entries.allocated(),
            live: indices
                .in_use
                .saturating_sub(retired)
                .saturating_sub(removed_while_read)
                .saturating_sub(reserved)
                .saturating_sub(self.vacant_len())
                .saturating_sub(self.awaiting_reuse()),
            removed_while_read,
            reserved,
            peak_in_use: indices.peak_in_use,
            // Relaxed: statistics.
            evictions: self.counters.evictions.load(Ordering::Relaxed),
            refused_inserts: self.counters.refused.load(Ordering::Relaxed),
            retired,
            awaiting_reuse: self.awaiting_reuse(),
        }
    }
}
