//! [`HandleBuilder`]: a handle pool's capacity, eviction policy,
//! `on_evict` hook and per-thread caches.

use core::fmt;
use core::marker::PhantomData;
use std::sync::Arc;

use super::entries::Entries;
use super::{Handle, HandlePool, Key, OnEvict, Policy, MAX_HANDLE_CAPACITY};
use crate::error::BuildError;
use crate::sync::{AtomicU32, AtomicU64};

/// Settings for a [`HandlePool`]: [`HandlePool::builder`], or
/// [`HandlePool::builder_with_key`] for a pool of typed keys `K`.
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::builder()
///     .capacity(8)
///     .evict_min_by_key(|volume: &u32| *volume)
///     .on_evict(|handle, volume| println!("stopped {handle:?} at volume {volume}"))
///     .build()?;
/// assert_eq!(pool.capacity(), 8);
/// # Ok::<(), tagpool::BuildError>(())
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct HandleBuilder<T, K = Handle> {
    indices: crate::index::IndexBuilder,
    capacity: usize,
    /// The entries allocated at build: all of them unless set.
    initial: Option<usize>,
    policy: Policy<T>,
    on_evict: Option<OnEvict<T>>,
    _key: PhantomData<fn(K) -> K>,
}

impl<T, K> HandleBuilder<T, K> {
    /// The defaults: no capacity yet, no eviction, the index pool's caches.
    pub(super) fn new() -> Self {
        Self {
            indices: crate::index::IndexPool::builder(),
            capacity: 0,
            initial: None,
            policy: Policy::Never,
            on_evict: None,
            _key: PhantomData,
        }
    }

    /// The number of entries, from 1 to
    /// [`MAX_HANDLE_CAPACITY`](crate::MAX_HANDLE_CAPACITY) (`2^24`).
    /// Required. Every entry is allocated at build, unless
    /// [`initial`](HandleBuilder::initial) says otherwise.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::<u8>::builder().capacity(4).build().unwrap();
    /// assert_eq!(pool.capacity(), 4);
    /// ```
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self.indices = self.indices.capacity(capacity);
        self
    }

    /// When full, an insert evicts the live value inserted first (libgdx's
    /// DESTROY on the oldest object; first in, first out). The choice scans
    /// every entry: O(capacity) per eviction, nothing on other inserts but
    /// one shared counter.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::builder().capacity(1).evict_oldest().build()?;
    /// let old = pool.insert(1).unwrap();
    /// let new = pool.insert(2).unwrap();
    /// assert_eq!((pool.get(old).is_none(), pool.with(new, |v| *v)), (true, Some(2)));
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn evict_oldest(mut self) -> Self {
        self.policy = Policy::Oldest;
        self
    }

    /// When full, an insert evicts the live value with the smallest key
    /// (the quietest sound, the farthest particle). The key function runs
    /// on the inserting thread during the eviction, on values other
    /// threads may be reading (hence `&T`): O(capacity) calls per eviction.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::builder().capacity(2).evict_min_by_key(|v: &u32| *v).build()?;
    /// let loud = pool.insert(90).unwrap();
    /// let quiet = pool.insert(10).unwrap();
    /// pool.insert(50).unwrap();
    /// assert!(pool.contains(loud) && !pool.contains(quiet));
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn evict_min_by_key<O, F>(mut self, key: F) -> Self
    where
        O: Ord,
        F: Fn(&T) -> O + Send + Sync + 'static,
    {
        self.policy = Policy::Least(Arc::new(move |a, b| key(a).cmp(&key(b))));
        self
    }

    /// Called with the stale key and the value of every evicted entry,
    /// on the inserting thread, before the entry takes the new value
    /// (without it, the evicted value is dropped). Use it to reset and
    /// recycle the value, or to tell whoever held the handle.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    ///
    /// let stopped = Arc::new(Mutex::new(Vec::new()));
    /// let log = Arc::clone(&stopped);
    /// let pool = tagpool::HandlePool::builder()
    ///     .capacity(1)
    ///     .evict_oldest()
    ///     .on_evict(move |_, name: &str| log.lock().unwrap().push(name))
    ///     .build()?;
    /// pool.insert("a").unwrap();
    /// pool.insert("b").unwrap();
    /// assert_eq!(*stopped.lock().unwrap(), ["a"]);
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn on_evict<F>(mut self, on_evict: F) -> Self
    where
        F: Fn(K, T) + Send + Sync + 'static,
        K: Key,
    {
        // Keyed here, where `K: Key` is known, so that the pool can hand
        // values over from code that knows only handles (a grace period
        // that ends in a `Ref`'s drop, the pool's drop).
        self.on_evict = Some(Arc::new(move |handle, value| {
            on_evict(K::from_handle(handle), value)
        }));
        self
    }

    /// Allocates the entries of the first `initial` indices at build, and
    /// the others as inserts need them, in segments that double the
    /// entries each time, up to the capacity, as
    /// [`Builder::initial`](crate::Builder::initial) does for a `Pool`'s
    /// slots. An entry is a state word, an insertion stamp and an
    /// `Option<T>`: a pool of capacity 2^20 for `u64` values allocates
    /// 32 MiB at build without this option, 32 KiB with `initial(1024)`.
    ///
    /// The guarantees stay those of a pool allocated at build: nothing
    /// moves (a value's entry keeps its address while the pool lives), an
    /// insert fails (or evicts) only when every entry of the capacity is
    /// in use, and handles, reads and the walks behave the same. The
    /// segments are given back when the pool drops, not before.
    ///
    /// Which insert allocates: the index pool grows its free list (one
    /// thread per segment, as a `Pool` grows); the first insert that
    /// takes an index of a new segment allocates that segment's entries,
    /// and if two inserts race to do it, one's allocation is published
    /// and the other's dropped. An insert that allocates runs in time
    /// proportional to the segment's size.
    ///
    /// An insert whose allocation unwinds (under `-Z oom=panic`; by
    /// default Rust aborts on allocation failure) gives its entry back to
    /// the free list before the panic propagates (its value is dropped):
    /// the pool keeps every entry of its capacity, and the next insert
    /// that takes an index of that segment allocates it again.
    ///
    /// # Errors
    ///
    /// [`build`](HandleBuilder::build) returns
    /// [`BuildError::InitialAboveCapacity`](crate::BuildError::InitialAboveCapacity)
    /// if `initial` is above the capacity, or
    /// [`BuildError::ZeroInitial`](crate::BuildError::ZeroInitial) if it
    /// is 0.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::builder().capacity(1 << 20).initial(1024).build()?;
    /// assert_eq!(pool.stats().allocated, 1024);
    /// let handles: Vec<_> = (0..1500).map(|i| pool.insert(i).unwrap()).collect();
    /// assert_eq!(pool.stats().allocated, 2048, "grew once, doubling");
    /// assert_eq!(pool.with(handles[1499], |v| *v), Some(1499));
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn initial(mut self, initial: usize) -> Self {
        self.initial = Some(initial);
        self.indices = self.indices.initial(initial);
        self
    }

    /// Per-thread caches of free indices on or off (on by default from 2
    /// entries), as [`Builder::thread_cache`](crate::Builder::thread_cache).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::<u8>::builder().capacity(64).thread_cache(false).build();
    /// assert!(pool.is_ok());
    /// ```
    pub fn thread_cache(mut self, enabled: bool) -> Self {
        self.indices = self.indices.thread_cache(enabled);
        self
    }

    /// The per-thread cache size: at most `size` free entries cached per
    /// thread, 0 for none, as
    /// [`Builder::thread_cache_size`](crate::Builder::thread_cache_size).
    ///
    /// The caches are the index pool's: an insert takes a free entry from
    /// its thread's cache and a remove gives one back there, so these are
    /// the options of [`Builder`](crate::Builder) and
    /// [`IndexBuilder`](crate::IndexBuilder) that apply. Their waiting
    /// options do not: a handle pool never waits (a full pool evicts or
    /// refuses at once), so it has no `fair`.
    ///
    /// # Errors
    ///
    /// [`build`](HandleBuilder::build) returns
    /// [`BuildError::ThreadCacheTooLarge`] above 64.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::builder().capacity(64).thread_cache_size(8).build()?;
    /// let h = pool.insert(1).unwrap();
    /// assert!(pool.remove(h));
    /// let err = tagpool::HandlePool::<u8>::builder().capacity(64).thread_cache_size(65).build();
    /// assert!(matches!(err, Err(tagpool::BuildError::ThreadCacheTooLarge { .. })));
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn thread_cache_size(mut self, size: usize) -> Self {
        self.indices = self.indices.thread_cache_size(size);
        self
    }

    /// Builds the pool, allocating every entry (or the `initial` ones).
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroCapacity`], [`BuildError::CapacityTooLarge`]
    /// above [`MAX_HANDLE_CAPACITY`](crate::MAX_HANDLE_CAPACITY) (or, on
    /// 32-bit targets, for values so large that the entries' memory
    /// would overflow an `isize`), and for
    /// [`initial`](HandleBuilder::initial), [`BuildError::ZeroInitial`] or
    /// [`BuildError::InitialAboveCapacity`].
    ///
    /// # Examples
    ///
    /// ```
    /// let err = tagpool::HandlePool::<u8>::builder().build().unwrap_err();
    /// assert_eq!(err, tagpool::BuildError::ZeroCapacity);
    /// ```
    pub fn build(self) -> Result<HandlePool<T, K>, BuildError>
    where
        K: Key,
    {
        // A handle has 24 bits for its index (the rest is its generation).
        if self.capacity > MAX_HANDLE_CAPACITY {
            return Err(BuildError::CapacityTooLarge {
                requested: self.capacity,
                max: MAX_HANDLE_CAPACITY,
            });
        }
        // The index pool checks the capacity and `initial` against it.
        let indices = self.indices.build()?;
        let capacity = self.capacity as u32;
        let initial = self.initial.map_or(capacity, |initial| initial as u32);
        if !Entries::<T>::fit(initial, capacity) {
            // Only for huge values on 32-bit targets.
            let entry = core::mem::size_of::<super::entry::Entry<T>>().max(1);
            return Err(BuildError::CapacityTooLarge {
                requested: self.capacity,
                max: (isize::MAX as usize / entry).min(MAX_HANDLE_CAPACITY),
            });
        }
        let entries = Entries::new(initial, capacity);
        Ok(HandlePool {
            indices,
            entries,
            policy: self.policy,
            on_evict: self.on_evict,
            clock: AtomicU64::new(0),
            high: AtomicU32::new(0),
            vacant: AtomicU32::new(super::NIL),
            vacant_len: AtomicU32::new(0),
            counters: super::stats::Counters::new(),
            sections: super::read::Sections::new(capacity),
            reservations: super::reserve::Reservations::new(),
            _key: PhantomData,
        })
    }
}

impl<T, K> fmt::Debug for HandleBuilder<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let policy = match self.policy {
            Policy::Never => "never",
            Policy::Oldest => "oldest",
            Policy::Least(_) => "min by key",
        };
        f.debug_struct("HandleBuilder")
            .field("capacity", &self.capacity)
            .field("initial", &self.initial)
            .field("evict", &policy)
            .field("on_evict", &self.on_evict.is_some())
            .finish()
    }
}
