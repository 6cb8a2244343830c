//! [`HandlePool`]: values that never leave the pool, reached through
//! generational [`Handle`]s, with optional eviction of a live value when
//! the pool is full (the seeds' DESTROY).
//!
//! Indices come from an [`IndexPool`] (the crate's one free list, with its
//! caches); each index has an [`Entry`](entry::Entry) whose state word
//! carries the generation, an occupied flag and a reader count (see
//! `entry.rs`). No lock, and no user code inside a retry loop: the key
//! function of a priority eviction, `on_evict` and the values' drops run
//! between the state transitions, by the thread that owns the entry (or
//! holds a counted read of it).
//!
//! The files: `entry.rs` (the state word and its transitions), `key.rs`
//! and `typed.rs` (handles and typed keys), `reading.rs` (`Ref` and the
//! shared iterator), `evict.rs` (a full pool's insert), `take.rs`
//! (`insert_with_key`, `take`), `exclusive.rs` and `iter.rs` (the
//! `&mut self` methods and their iterators), `stats.rs` (the counters),
//! `builder.rs`.

mod builder;
mod clone;
mod entries;
mod entry;
mod evict;
mod exclusive;
mod into_iter;
mod iter;
mod key;
mod place;
#[cfg(feature = "rayon")]
mod rayon;
mod read;
mod reading;
mod reserve;
#[cfg(feature = "serde")]
mod save;
#[cfg(feature = "serde")]
mod serialize;
mod stats;
mod take;
mod typed;

pub use self::builder::HandleBuilder;
pub use self::exclusive::Exclusive;
pub use self::into_iter::HandleIntoIter;
pub use self::iter::{Drain, IterMut, Keys, Values, ValuesMut};
pub use self::key::{Handle, MAX_HANDLE_CAPACITY};
pub use self::read::{ReadSection, SectionIter};
pub use self::reading::{HandleIter, OwnedRef, Ref};
pub use self::reserve::Reservation;
pub use self::stats::HandleStats;
pub use self::take::TakeError;
pub use self::typed::Key;

use core::cmp::Ordering as CmpOrdering;
use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use std::panic::{RefUnwindSafe, UnwindSafe};

use self::entries::Entries;
use self::entry::{Entry, State};
use self::stats::Counters;
use crate::error::InsertError;
use crate::index::IndexPool;
use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// How a full [`HandlePool`] makes room for an insert.
enum Policy<T> {
    /// It does not: the insert fails.
    Never,
    /// The live value inserted first.
    Oldest,
    /// The least value by the comparator.
    Least(Compare<T>),
}

/// The end of the chain of vacated entries (no index is this high).
const NIL: u32 = u32::MAX;

// `Arc`s, so that a clone of the pool shares them (`clone.rs`).
type Compare<T> = std::sync::Arc<dyn Fn(&T, &T) -> CmpOrdering + Send + Sync>;
type OnEvict<T> = std::sync::Arc<dyn Fn(Handle, T) + Send + Sync>;

/// A lock-free pool of at most `capacity` values that stay inside it,
/// reached through generational [`Handle`]s from any thread.
///
/// `K` is the pool's key type: [`Handle`] by default, or a type of your own
/// made with [`new_key_type!`](crate::new_key_type), so that the keys of one
/// pool do not type-check as keys of another (see [`Key`] and
/// [`with_key`](HandlePool::with_key)).
///
/// [`insert`](HandlePool::insert) stores a value and returns its handle;
/// [`get`](HandlePool::get) reads it through a [`Ref`] while it is live;
/// [`remove`](HandlePool::remove) ends it, and every copy of its handle
/// then answers `None`, even after the entry holds another value. When
/// the pool is full, an insert fails, or evicts a live value chosen by the
/// pool's policy ([`evict_oldest`](HandleBuilder::evict_oldest),
/// [`evict_min_by_key`](HandleBuilder::evict_min_by_key)).
///
/// # Access: shared references, counted
///
/// Values are shared, as in sharded-slab's `Slab`: [`get`](HandlePool::get)
/// returns a [`Ref`] (a `&T` and a count on the entry), any number of
/// threads may hold `Ref`s of one value at once, and mutation goes through
/// the value's own interior mutability (atomics, a `Mutex`), or through
/// [`get_mut`](HandlePool::get_mut) with `&mut HandlePool`. This keeps
/// aliasing sound without a lock per entry: a `&mut T` handed to one thread
/// while another reads would be undefined behaviour, and a per-entry
/// writer lock would make readers wait. Hence `HandlePool<T>` is `Sync`
/// only for `T: Send + Sync`.
///
/// - A `remove` while `Ref`s are alive does not wait: the value goes stale
///   at once (no new `Ref`), and the last `Ref` drops it and frees the
///   entry.
/// - A [`take`](HandlePool::take) while `Ref`s are alive does not wait
///   either: it fails ([`TakeError::BeingRead`]) and the value stays.
/// - Eviction never takes a value someone reads: an entry with a live
///   `Ref` is skipped. The insert retries its choice a few times when the
///   chosen entry is read or changed by another thread in the meantime,
///   and fails with [`InsertError::Full`] (it does not wait) when every
///   candidate is being read, or the choice kept being overtaken.
///
/// # Read sections: reads that write nothing shared
///
/// [`read`](HandlePool::read) opens a [`ReadSection`]: its `get` and
/// `iter` give plain `&T`s with one load per entry and no write another
/// thread reads, and [`with`](HandlePool::with) opens one for a single
/// read. Once the pool has had a section, removals (including the last
/// `Ref` of a removed value, and evictions) drop their values and reuse
/// their entries only after a grace period; see the
/// [crate docs](crate#read-sections) for the promise on capacity.
///
/// # Exclusive access: the slot-map methods
///
/// With `&mut HandlePool` (no other thread, no `Ref`), the pool is a slot
/// map: [`insert_mut`](HandlePool::insert_mut) and
/// [`remove_mut`](HandlePool::remove_mut) keep their own chain of free
/// entries with plain loads and stores, as slotmap does, and [`iter_mut`](HandlePool::iter_mut), [`values_mut`](HandlePool::values_mut),
/// [`keys`](HandlePool::keys), [`retain`](HandlePool::retain),
/// [`clear`](HandlePool::clear), [`drain`](HandlePool::drain),
/// [`get_disjoint_mut`](HandlePool::get_disjoint_mut), and indexing
/// through [`exclusive`](HandlePool::exclusive), reach the values without
/// counted reads.
///
/// # Examples
///
/// ```
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use tagpool::HandlePool;
///
/// struct Voice { volume: AtomicU32 }
///
/// let voices = HandlePool::new(2);
/// let a = voices.insert(Voice { volume: AtomicU32::new(10) }).unwrap();
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         if let Some(voice) = voices.get(a) {
///             voice.volume.store(5, Ordering::Relaxed);
///         }
///     });
/// });
/// assert_eq!(voices.with(a, |v| v.volume.load(Ordering::Relaxed)), Some(5));
/// assert!(voices.remove(a));
/// assert!(voices.get(a).is_none());
/// ```
#[doc = include_str!("docs/peers.md")]
pub struct HandlePool<T, K = Handle> {
    indices: IndexPool,
    entries: Entries<T>,
    policy: Policy<T>,
    on_evict: Option<OnEvict<T>>,
    /// Insertion order, for oldest-first eviction only.
    clock: AtomicU64,
    /// One above the highest index ever filled: no entry at or above it
    /// has held a value, so the walks over the entries (the iterators,
    /// `retain`, `clear`) stop there.
    high: AtomicU32,
    /// The chain of entries vacated through `&mut self` (`remove_mut`,
    /// `retain`, `clear`, `drain`): its first index, or [`NIL`], each
    /// entry's `stamp` holding the next. slotmap's free list, inside a
    /// pool whose other free list is the index pool's lock-free stack:
    /// pushed only through `&mut self`, popped first by every insert (by a
    /// plain load and store through `&mut self`, by a compare-and-swap
    /// through `&self`). See [`pop_vacant`](Self::pop_vacant).
    vacant: AtomicU32,
    /// How many entries the chain holds: the index pool counts them in
    /// use (they never went back to it), `len` and the stats do not.
    vacant_len: AtomicU32,
    /// Retired entries, values removed while read, evictions, refused
    /// inserts: off the hot paths' cache lines.
    counters: Counters,
    /// Read sections: who reads now, and the removed entries that wait for
    /// them (`read/`).
    sections: read::Sections,
    /// The pool's id for its reservations, and whether one may be alive
    /// (`reserve.rs`).
    reservations: reserve::Reservations,
    /// The key type: no `K` is stored, and `K` changes neither `Send` nor
    /// `Sync` (a key is plain bits).
    _key: PhantomData<fn(K) -> K>,
}

// SAFETY: the pool owns its `T`s; sending it sends them (`T: Send`). The
// closures are `Send + Sync`, the rest atomics.
unsafe impl<T: Send, K> Send for HandlePool<T, K> {}

// SAFETY: through `&HandlePool<T>` threads share `&T` at once (`get`), so
// `T: Sync`; a value inserted on one thread is dropped (removed, evicted, or
// by the last `Ref`) or handed to `on_evict` on another, so `T: Send`.
unsafe impl<T: Send + Sync, K> Sync for HandlePool<T, K> {}

// Unwind safety (as for `Pool`, which says more): the pool's state stays
// consistent whatever panics (an insert whose eviction key or `on_evict`
// panics leaves every entry as it was or free, a `Ref` dropped by an
// unwind counts itself out), so a `&HandlePool` is as usable after a
// caught panic as before. Through `&HandlePool` values move in (`insert`)
// and are dropped or handed to `on_evict` (`T: UnwindSafe`), and are
// shared by `&T` (`T: RefUnwindSafe`: a value mutated through its
// interior mutability by code that panicked is seen by the next reader, as
// through `Arc<T>`). `Ref` and `Iter` follow from these by themselves.
impl<T: UnwindSafe, K> UnwindSafe for HandlePool<T, K> {}
impl<T: UnwindSafe + RefUnwindSafe, K> RefUnwindSafe for HandlePool<T, K> {}

impl<T> HandlePool<T> {
    /// A pool of `capacity` entries that never evicts (a full pool refuses
    /// inserts), with the index pool's defaults.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0 or above [`MAX_HANDLE_CAPACITY`] (`2^24`);
    /// [`builder`](HandlePool::builder) returns an error instead.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(1);
    /// let _first = pool.insert(1).unwrap();
    /// assert_eq!(pool.insert(2).unwrap_err().into_inner(), 2);
    /// ```
    pub fn new(capacity: usize) -> Self {
        match Self::builder().capacity(capacity).build() {
            Ok(pool) => pool,
            Err(err) => panic!("tagpool::HandlePool::new: {err}"),
        }
    }

    /// A builder: capacity, eviction policy, `on_evict`, per-thread caches.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::builder().capacity(2).evict_oldest().build()?;
    /// let first = pool.insert("first").unwrap();
    /// pool.insert("second").unwrap();
    /// pool.insert("third").unwrap(); // evicts "first"
    /// assert!(pool.get(first).is_none());
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn builder() -> HandleBuilder<T> {
        HandleBuilder::new()
    }
}

impl<T, K: Key> HandlePool<T, K> {
    /// A pool of `capacity` entries whose keys are `K` (a type made with
    /// [`new_key_type!`](crate::new_key_type)), that never evicts: as
    /// [`new`](HandlePool::new), which gives [`Handle`]s.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0 or above [`MAX_HANDLE_CAPACITY`] (`2^24`);
    /// [`builder_with_key`](HandlePool::builder_with_key) returns an error
    /// instead.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::HandlePool;
    ///
    /// tagpool::new_key_type! { struct EnemyKey; }
    ///
    /// let enemies: HandlePool<&str, EnemyKey> = HandlePool::with_key(8);
    /// let orc: EnemyKey = enemies.insert("orc").unwrap();
    /// assert_eq!(enemies.with(orc, |name| name.len()), Some(3));
    /// ```
    pub fn with_key(capacity: usize) -> Self {
        match Self::builder_with_key().capacity(capacity).build() {
            Ok(pool) => pool,
            Err(err) => panic!("tagpool::HandlePool::with_key: {err}"),
        }
    }

    /// A builder of a pool whose keys are `K`: as
    /// [`builder`](HandlePool::builder), which gives [`Handle`]s.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::HandlePool;
    ///
    /// tagpool::new_key_type! { pub struct VoiceKey; }
    ///
    /// let voices: HandlePool<u32, VoiceKey> = HandlePool::builder_with_key()
    ///     .capacity(2)
    ///     .evict_min_by_key(|volume: &u32| *volume)
    ///     .on_evict(|key: VoiceKey, volume| println!("stopped {key:?} at {volume}"))
    ///     .build()?;
    /// let quiet = voices.insert(10).unwrap();
    /// voices.insert(90).unwrap();
    /// voices.insert(50).unwrap(); // evicts the quietest
    /// assert!(!voices.contains(quiet));
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn builder_with_key() -> HandleBuilder<T, K> {
        HandleBuilder::new()
    }

    /// The number of entries.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tagpool::HandlePool::<u8>::new(3).capacity(), 3);
    /// ```
    pub fn capacity(&self) -> usize {
        self.entries.capacity()
    }

    /// The number of entries in use: live values, plus values removed
    /// while read (until their last [`Ref`] drops), entries an insert is
    /// filling and [reservations](HandlePool::reserve) not yet filled nor
    /// cancelled; not the [retired](HandlePool::retired) ones, so the free
    /// entries are `capacity() - retired() - len()`. Exact whenever no other
    /// thread is inserting, removing, reserving or cancelling.
    /// [`HandleStats::live`](crate::HandleStats::live) counts values only.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(3);
    /// let h = pool.insert(1).unwrap();
    /// assert_eq!(pool.len(), 1);
    /// pool.remove(h);
    /// assert_eq!(pool.len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        // Relaxed: a snapshot, as the in-use count it corrects.
        let retired = self.counters.retired.load(Ordering::Relaxed);
        self.indices
            .stats()
            .in_use
            .saturating_sub(retired)
            .saturating_sub(self.vacant_len())
            .saturating_sub(self.awaiting_reuse())
    }

    /// How many entries the chain of entries vacated through `&mut self`
    /// holds (a snapshot).
    #[inline]
    fn vacant_len(&self) -> usize {
        // Relaxed: a counter, read as a snapshot.
        self.vacant_len.load(Ordering::Relaxed) as usize
    }

    /// The number of retired entries: entries that held [`Handle::MAX_GENERATION`]
    /// (`2^39 - 1`) values, one after another, and are never handed out
    /// again, so that no handle ever names two values. At most
    /// `capacity() - retired()` values can be live. 0 in any realistic
    /// program: see [Handle](Handle#generations-a-stale-handle-never-matches-again)
    /// for how long one hot entry takes.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(2);
    /// let h = pool.insert(1).unwrap();
    /// pool.remove(h);
    /// assert_eq!(pool.retired(), 0);
    /// ```
    pub fn retired(&self) -> usize {
        // Relaxed: a counter; see `len`.
        self.counters.retired.load(Ordering::Relaxed)
    }

    /// Whether [`len`](HandlePool::len) is 0: no entry in use, so no
    /// [reservation](HandlePool::reserve) either.
    ///
    /// # Examples
    ///
    /// ```
    /// assert!(tagpool::HandlePool::<u8>::new(3).is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stores `value` and returns its handle. When the pool is full, the
    /// pool's eviction policy (if any) picks a live value that nobody is
    /// reading, ends it (its handles go stale), hands it to `on_evict` or
    /// drops it, and stores `value` in its entry.
    ///
    /// # Errors
    ///
    /// [`InsertError::Full`], with the value, when every entry is in use
    /// (or [retired](HandlePool::retired)) and the pool does not evict, or
    /// every candidate for eviction is being read (or changed by another
    /// thread) at every try. In a pool read through
    /// [sections](HandlePool::read), entries that await a grace period are
    /// in use until the insert's own grace period frees them, and an
    /// evicting pool evicts nothing while a section is open.
    ///
    /// # Panics
    ///
    /// If the eviction's comparator, `on_evict` or the evicted value's drop
    /// panics, or a value's drop (or `on_evict`) in the grace period the
    /// insert runs: the panic propagates after the entries are freed (their
    /// values handed over or dropped) and `value` is dropped; the pool
    /// stays consistent and loses no entry. Likewise if the allocation of
    /// a segment of entries unwinds ([`initial`](HandleBuilder::initial)):
    /// the entry goes back to the free list first, and a later insert
    /// allocates the segment again.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(1);
    /// let h = pool.insert(String::from("x")).unwrap();
    /// assert_eq!(pool.get(h).as_deref().map(String::as_str), Some("x"));
    /// assert!(pool.insert(String::from("y")).is_err(), "full, no eviction");
    /// ```
    pub fn insert(&self, value: T) -> Result<K, InsertError<T>> {
        match self.claim() {
            Some(index) => Ok(K::from_handle(self.fill(index, value))),
            None => Err(InsertError::Full(value)),
        }
    }

    /// A free entry for an insert, owned by this thread: a free index, else
    /// an evicted entry; `None` (counted as refused) if the pool is full
    /// and nothing can be evicted.
    #[inline]
    fn claim(&self) -> Option<u32> {
        // The entries vacated through `&mut self` first, so that the index
        // pool's in-use count (which still holds them) grows only when the
        // chain is empty: its peak is then the pool's. A pool never used
        // through `&mut self` pays one load of a line `fill` reads anyway.
        // Relaxed: see `pop_vacant`.
        if self.vacant.load(Ordering::Relaxed) != NIL {
            if let Some(index) = self.pop_vacant() {
                return Some(index);
            }
        }
        match self.indices.pool().state().try_pop::<false>() {
            Some(index) => Some(index),
            None => {
                let evicted = self.evict();
                if evicted.is_none() {
                    self.counters.refused();
                }
                evicted
            }
        }
    }

    /// Pops the chain of vacated entries through `&self`: `None` if it is
    /// empty.
    ///
    /// Only `&mut self` pushes onto the chain, so while the pool is shared
    /// (while this can run) the chain only shrinks: the head moves down
    /// the chain and never comes back to an index it left. A pop whose
    /// compare-and-swap succeeds therefore read the link of an entry that
    /// was still on the chain, with no ABA tag: the index the head left
    /// is never its value again until the next `&mut` borrow, which
    /// cannot begin while this pop runs.
    #[cold]
    #[inline(never)]
    fn pop_vacant(&self) -> Option<u32> {
        // Relaxed: the chain and its links were written through `&mut
        // self`, ordered before this shared use by whatever ended that
        // borrow; the pops through `&self` write only the head.
        let mut head = self.vacant.load(Ordering::Relaxed);
        loop {
            if head == NIL {
                return None;
            }
            // On the chain, hence filled once: its segment is allocated,
            // and was before the `&mut` borrow that vacated it.
            let entry = self.entries.at(head);
            // Relaxed: see above. A racing pop that took `head` may have
            // written its stamp since (oldest-first eviction): the CAS
            // below then fails, the head having moved past `head`.
            let next = entry.stamp.load(Ordering::Relaxed) as u32;
            #[cfg(all(loom, tagpool_loom_vacant_pop_racy))]
            {
                // Loom-only fault injection: a pop by a plain load and
                // store, as through `&mut self`: two racing inserts can
                // take the same entry.
                self.vacant.store(next, Ordering::Relaxed);
                self.vacant_len.fetch_sub(1, Ordering::Relaxed);
                return Some(head);
            }
            // Relaxed: the CAS only decides which pop owns `head`; nothing
            // is published through the head while the pool is shared.
            match self.vacant.compare_exchange_weak(
                head,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    // Relaxed: a counter, read as a snapshot.
                    self.vacant_len.fetch_sub(1, Ordering::Relaxed);
                    return Some(head);
                }
                Err(actual) => head = actual,
            }
        }
    }

    /// Stores `value` in the entry `index`, which this thread popped from
    /// the free list or took by an eviction.
    #[inline]
    fn fill(&self, index: u32, value: T) -> Handle {
        // The first insert into a segment of a pool built with `initial`
        // allocates it, and gives `index` back if that unwinds (`entries.rs`).
        let entry = self.entries.claim(index, &self.indices);
        // Relaxed: a bound for the walks. A walk through `&mut self` is
        // ordered after every fill by its borrow; a shared `iter` sees the
        // fills that happened before it, and may miss concurrent ones, as
        // it may miss their values anyway. The load keeps the common case
        // to a read of a line every insert shares.
        if index >= self.high.load(Ordering::Relaxed) {
            // Loom-only fault injection: the mark raised by a plain store,
            // so a racing insert's lower index can overwrite it (`iter`
            // after both misses the higher one).
            #[cfg(all(loom, tagpool_loom_high_mark_store))]
            self.high.store(index + 1, Ordering::Relaxed);
            // Relaxed: as the load; the max keeps the highest of racing
            // raises, whatever their order.
            #[cfg(not(all(loom, tagpool_loom_high_mark_store)))]
            self.high.fetch_max(index + 1, Ordering::Relaxed);
        }
        // SAFETY: this thread popped `index` from the free list, or evicted
        // its value: a free entry (no reader can count itself: not
        // occupied) is its own.
        unsafe { entry.put(value) };
        self.stamp(entry);
        Handle::new(index, entry.publish(index))
    }

    /// Records the insertion order, for oldest-first eviction.
    #[inline]
    fn stamp(&self, entry: &Entry<T>) {
        if let Policy::Oldest = self.policy {
            // Relaxed: a counter; the order of two concurrent inserts is
            // either one. The stamp is published with the value.
            let now = self.clock.fetch_add(1, Ordering::Relaxed);
            entry.stamp.store(now, Ordering::Relaxed);
        }
    }

    /// A counted, shared reference to the value of `key`, or `None` if
    /// the key is stale (removed, evicted, a handle of another pool) or
    /// names nothing.
    ///
    /// While the [`Ref`] lives, the value is neither dropped nor evicted;
    /// a `remove` makes it stale at once and leaves the drop to the last
    /// `Ref`.
    ///
    /// # Panics
    ///
    /// If the entry already has 2^22 - 1 (4,194,303) live `Ref`s and
    /// [`OwnedRef`]s, the most it counts: only leaked ones get there.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(2);
    /// let h = pool.insert(vec![1, 2, 3]).unwrap();
    /// let r = pool.get(h).unwrap();
    /// assert_eq!(r.len(), 3);
    /// assert!(pool.remove(h), "does not wait for the reader");
    /// assert_eq!(r[0], 1, "the reader still sees the value");
    /// assert!(pool.get(h).is_none());
    /// ```
    #[inline]
    pub fn get(&self, key: K) -> Option<Ref<'_, T, K>> {
        self.read_counted(key.handle())
    }

    /// [`get`](HandlePool::get) by handle.
    #[inline]
    fn read_counted(&self, handle: Handle) -> Option<Ref<'_, T, K>> {
        let value = self.begin_read(handle)?;
        Some(Ref {
            pool: self,
            value: ManuallyDrop::new(value),
            handle,
            _shared: PhantomData,
        })
    }

    /// Calls `f` with the value of `key` and returns its result, or
    /// `None` if the key is stale: a [read section](HandlePool::read) for
    /// one read (no write to the entry; the pool has had a section from
    /// then on, so removals defer their drops to grace periods).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(2);
    /// let h = pool.insert(40).unwrap();
    /// assert_eq!(pool.with(h, |v| v + 2), Some(42));
    /// ```
    pub fn with<R>(&self, key: K, f: impl FnOnce(&T) -> R) -> Option<R> {
        // A section for one read: cheaper than a counted one, and the value
        // stays in place while `f` runs.
        self.read_once(key, f)
    }

    /// Whether `key` names a live value.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(2);
    /// let h = pool.insert(1).unwrap();
    /// assert!(pool.contains(h));
    /// pool.remove(h);
    /// assert!(!pool.contains(h));
    /// ```
    pub fn contains(&self, key: K) -> bool {
        let handle = key.handle();
        self.entries.get(handle.index()).map_or(false, |entry| {
            // Acquire: as a read's first load.
            let state = entry.state.load(Ordering::Acquire);
            entry::is_live(state, handle)
        })
    }

    /// Iterates over the live values, in index order, each as a counted
    /// [`Ref`] ([`Ref::handle`] gives its handle). Values inserted or
    /// removed by other threads meanwhile may or may not be seen; each one
    /// seen is live when its `Ref` is taken, and stays readable while the
    /// `Ref` lives.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{HandlePool, Ref};
    ///
    /// let pool = HandlePool::new(4);
    /// let a = pool.insert(1).unwrap();
    /// let b = pool.insert(2).unwrap();
    /// pool.remove(a);
    /// let live: Vec<_> = pool.iter().map(|r| (Ref::handle(&r), *r)).collect();
    /// assert_eq!(live, [(b, 2)]);
    /// ```
    pub fn iter(&self) -> HandleIter<'_, T, K> {
        HandleIter {
            pool: self,
            next: 0,
            end: self.used(),
        }
    }

    /// Exclusive access to the value of `key`, through exclusive access
    /// to the pool (no other thread can hold a [`Ref`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(2);
    /// let h = pool.insert(1).unwrap();
    /// *pool.get_mut(h).unwrap() += 1;
    /// assert_eq!(pool.with(h, |v| *v), Some(2));
    /// ```
    pub fn get_mut(&mut self, key: K) -> Option<&mut T> {
        let handle = key.handle();
        let entry = self.entries.get(handle.index())?;
        // Relaxed: `&mut self` orders everything.
        let state = entry.state.load(Ordering::Relaxed);
        if !entry::is_live(state, handle) {
            return None;
        }
        // SAFETY: `&mut self`: no `Ref` and no other operation is alive, so
        // this thread owns every entry; the reference lives as long as the
        // borrow of the pool.
        let cell = unsafe { entry.cell_mut() };
        // SAFETY: as above.
        let value = cell.with(|p| unsafe { (*p).as_mut() });
        // SAFETY: an occupied entry holds a value (`Some`: see the field).
        Some(unsafe { value.unwrap_unchecked() })
    }

    /// Ends the value of `key`: every copy of the key answers `None` from
    /// now on, and the entry is free for another insert once no
    /// [`Ref`] reads the value (the last `Ref` drops it) and, in a pool
    /// that has had [read sections](HandlePool::read), once a grace period
    /// shows that no section that could see it is open (the value is
    /// dropped then). `false` if the handle was stale already.
    ///
    /// # Panics
    ///
    /// In a pool read through sections, a remove that completes a batch of
    /// removals runs a grace period: if a value's drop or `on_evict` panics
    /// there, the panic propagates from the remove, after every entry that
    /// grace period freed is back (the removal itself is done).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(1);
    /// let h = pool.insert('a').unwrap();
    /// assert!(pool.remove(h));
    /// assert!(!pool.remove(h), "already removed");
    /// let next = pool.insert('b').unwrap();
    /// assert_eq!((next.index(), pool.get(h).is_none()), (h.index(), true));
    /// ```
    pub fn remove(&self, key: K) -> bool {
        let handle = key.handle();
        let entry = match self.entries.get(handle.index()) {
            Some(entry) => entry,
            None => return false,
        };
        // Acquire: as in an eviction's `end_occupancy`, for the read of
        // `readers` that decides who frees the value.
        let index = handle.index() as u32;
        let mut state = entry.state.load(Ordering::Acquire);
        loop {
            let (readers, new) = if state == handle.to_bits() {
                // Uncounted (as stored: the handle's bits), the common
                // case: free under the next generation, no reader.
                let ended = entry::free(entry::ended(entry::live(handle.generation())));
                (0, State::free_stored(index, ended))
            } else if state & !entry::READERS == entry::counted_base(handle) {
                // Counted: free if no reader is left, else removed (a
                // counted or removed word is stored as it is).
                let readers = state & entry::READERS;
                let ended = entry::removed(entry::ended(state), readers);
                let new = if readers == 0 {
                    State::free_stored(index, ended)
                } else {
                    ended
                };
                (readers, new)
            } else {
                return false;
            };
            // SeqCst: Acquire pairs with the readers' Release decrements
            // (when none is left, this thread drops the value after
            // them); SeqCst with the load in `free` pairs with the first
            // read section's store and fence (see `read/domain.rs`).
            match entry.state.compare_exchange_stored(
                state,
                new,
                Ordering::SeqCst,
                Ordering::Acquire,
            ) {
                Ok(_) if readers == 0 => {
                    if self.free(handle.index() as u32) {
                        self.reclaim();
                    }
                    return true;
                }
                Ok(_) => {
                    // Relaxed: a statistic. The last reader counts it out,
                    // maybe before this count (see `Counters`).
                    self.counters
                        .removed_while_read
                        .fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                Err(actual) => state = actual,
            }
        }
    }

    /// Sets the generation of entry `index`, free and never used, as if
    /// it had held `generation - 1` values: the loom model of retirement
    /// starts there (`2^39` occupancies cannot be run).
    ///
    /// Exists only in loom builds (`--cfg loom` and the `loom` feature).
    /// Not part of the API.
    #[cfg(all(loom, feature = "loom"))]
    #[doc(hidden)]
    pub fn __loom_age(&self, index: usize, generation: u64) {
        age(&self.entries[index], index as u32, generation);
    }
}

/// The steps that end an occupancy, which `Ref`'s drop reaches too: they
/// need no key type.
impl<T, K> HandlePool<T, K> {
    /// Frees entry `index`, owned by this thread, whose occupancy a
    /// `SeqCst` read-modify-write ended: takes its value out, gives the
    /// index back (or retires the entry, if its last generation just
    /// ended), then drops the value (user code, after the pool is
    /// consistent). In a pool that has had read sections, defers all that
    /// to a grace period instead, and returns whether the caller should
    /// run one (see `read/limbo.rs`).
    fn free(&self, index: u32) -> bool {
        if self.sections.domain.used() {
            return self.defer(index, false);
        }
        let entry = &self.entries[index as usize];
        // SAFETY: the caller owns the entry.
        let value = unsafe { entry.take() };
        let woke = self.give_back(index);
        drop(value);
        // A waker the push woke panicked: caught, so the index is back
        // first (see `unwind.rs`).
        crate::engine::unwind::resume(woke);
        false
    }

    /// Gives back entry `index`, owned by this thread and free (its word
    /// ended, its value out): pushes the index, or retires the entry if
    /// its last generation ended. Returns the panic of a waker the push
    /// woke (nobody waits for a handle pool's indices), for the caller to
    /// resume or drop once it is done with the pool.
    fn give_back(&self, index: u32) -> Option<crate::engine::unwind::Payload> {
        if self.entries[index as usize].retired() {
            self.retire();
            return None;
        }
        let (settle, woke) = self.indices.pool().state().push::<false>(index);
        debug_assert!(matches!(settle, crate::engine::cache::Settle::Done));
        woke
    }

    /// Counts an entry retired by this thread.
    #[cold]
    fn retire(&self) {
        // Relaxed: a counter, read as a snapshot.
        self.counters.retired.fetch_add(1, Ordering::Relaxed);
    }

    /// The entries that have ever held a value, a prefix of `entries`:
    /// the walks need not look past it (see [`high`](Self::high)).
    #[inline]
    fn used(&self) -> usize {
        // Relaxed: see `fill`.
        self.high.load(Ordering::Relaxed) as usize
    }

    /// Ends a [`Ref`] of entry `index`; frees it if it was the last reader
    /// of a removed value.
    #[inline]
    fn unread(&self, index: u32) {
        let entry = &self.entries[index as usize];
        if entry.unread() {
            self.free_removed(index);
        }
    }

    /// [`unread`](Self::unread)'s rare path.
    #[cold]
    fn free_removed(&self, index: u32) {
        // Relaxed: a statistic, counted by the remove.
        self.counters
            .removed_while_read
            .fetch_sub(1, Ordering::Relaxed);
        self.entries[index as usize].clear_removed(index);
        // No grace period here, even if one is due: this runs in a `Ref`'s
        // drop, maybe during an unwind, where the values' drops and
        // `on_evict` must not run (a panic there would abort). The next
        // remove or insert runs it.
        let _ = self.free(index);
    }
}

/// Sets the generation of a free entry that no thread uses (tests start
/// an entry near its last generation this way).
#[cfg(any(test, all(loom, feature = "loom")))]
fn age<T>(entry: &Entry<T>, index: u32, generation: u64) {
    // Relaxed: the entry is free and no other thread touches it; the
    // caller publishes it (a spawn, or the insert's pop and publish).
    let state = entry.state.load(Ordering::Relaxed);
    assert!(entry::is_free(state), "a free entry");
    assert!((1..=Handle::MAX_GENERATION).contains(&generation));
    entry
        .state
        .store(index, entry::free(generation), Ordering::Relaxed);
}

impl<T, K: Key> fmt::Debug for HandlePool<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandlePool")
            .field("capacity", &self.capacity())
            .field("len", &self.len())
            .field("retired", &self.retired())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(all(loom, feature = "loom"))))]
mod tests;
