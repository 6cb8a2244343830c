//! [`IndexPool`]: the pool's free list, caches and waiting, handing out
//! slot indices instead of values, for callers who keep their own storage
//! (structure-of-arrays: positions in one array, velocities in another).
//!
//! It is a [`Pool<()>`](Pool) that never touches its value cells: an index
//! guard holds the index it popped and pushes it back on drop, through the
//! same `try_pop` and `push` as a `Pool`'s guards. There is no second copy
//! of the free list, the caches or the waiting protocols; everything proved
//! of them holds here.

mod future;
mod guard;
mod stats;

pub use self::future::{AcquireIndex, AcquireOwnedIndex};
pub use self::guard::{IndexGuard, OwnedIndexGuard};
pub use self::stats::IndexStats;

use core::fmt;
use std::time::Duration;

use crate::engine::shared::untimed;
use crate::engine::wait::AsyncWait;
use crate::error::{AcquireError, AcquireTimeoutError, BuildError, TryAcquireError};
use crate::pool::Step;
use crate::pool::{Builder, Pool};
use crate::sync::Arc;

/// A lock-free allocator of the indices `0..capacity`, with RAII guards that
/// free their index on drop.
///
/// It has a [`Pool`]'s free list, per-thread caches, waiting (blocking,
/// with a timeout, async, fair), [`close`](IndexPool::close), statistics
/// and owned guards, but no values: the caller keeps its data in arrays of
/// its own and uses the index a guard holds to address them. An index is
/// held by one guard at a time, so the guard's holder may treat the
/// entries at that index as its own.
///
/// # Examples
///
/// A structure-of-arrays particle system: positions and velocities in
/// separate arrays, a particle's index from the pool.
///
/// ```
/// use tagpool::IndexPool;
///
/// let pool = IndexPool::new(1024);
/// let mut position = vec![[0.0f32; 2]; pool.capacity()];
/// let mut velocity = vec![[0.0f32; 2]; pool.capacity()];
///
/// let spark = pool.try_acquire().expect("an index is free");
/// let i = spark.index();
/// position[i] = [1.0, 2.0];
/// velocity[i] = [0.5, 0.0];
/// for axis in 0..2 {
///     position[i][axis] += velocity[i][axis];
/// }
/// assert_eq!(position[i], [1.5, 2.0]);
/// drop(spark); // index `i` is free again
/// assert_eq!(pool.stats().in_use, 0);
/// ```
pub struct IndexPool {
    pool: Pool<()>,
}

impl IndexPool {
    /// Creates a pool of the indices `0..capacity`, with the defaults of
    /// [`Pool::new`] (per-thread caches sized from the capacity, barging
    /// waiters, all storage allocated now).
    ///
    /// # Panics
    ///
    /// If `capacity` is 0 or above [`MAX_CAPACITY`](crate::MAX_CAPACITY).
    /// Use [`builder`](IndexPool::builder) to get an error instead.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::new(3);
    /// assert_eq!(pool.capacity(), 3);
    /// ```
    pub fn new(capacity: usize) -> Self {
        match Self::builder().capacity(capacity).build() {
            Ok(pool) => pool,
            Err(err) => panic!("tagpool::IndexPool::new: {err}"),
        }
    }

    /// A builder, for the settings [`Pool`]'s builder has: capacity,
    /// initial size, per-thread caches and fairness.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::builder().capacity(1 << 20).initial(1024).build()?;
    /// assert_eq!(pool.stats().allocated, 1024);
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn builder() -> IndexBuilder {
        IndexBuilder {
            inner: Pool::builder(|| ()).lazy(),
        }
    }

    /// The number of indices: they are `0..capacity`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tagpool::IndexPool::new(7).capacity(), 7);
    /// ```
    pub fn capacity(&self) -> usize {
        self.pool.capacity()
    }

    /// Takes a free index without waiting, as [`Pool::try_acquire`].
    ///
    /// # Errors
    ///
    /// [`TryAcquireError::Exhausted`] when every index is held (counted in
    /// [`IndexStats::failed_acquires`]), [`TryAcquireError::Closed`] after
    /// [`close`](IndexPool::close).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::new(1);
    /// let only = pool.try_acquire().unwrap();
    /// assert_eq!(only.index(), 0);
    /// assert!(pool.try_acquire().is_err());
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<IndexGuard<'_>, TryAcquireError> {
        let shared = self.pool.state();
        match shared.try_pop::<false>() {
            Some(index) => Ok(IndexGuard {
                pool: shared,
                index,
            }),
            None => Err(shared.failure()),
        }
    }

    /// Takes a free index, waiting as [`Pool::acquire`] does if every index
    /// is held.
    ///
    /// # Errors
    ///
    /// [`AcquireError::Closed`] if the pool is closed before or while
    /// waiting.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::new(1);
    /// let first = pool.acquire().unwrap();
    /// std::thread::scope(|s| {
    ///     let waiter = s.spawn(|| pool.acquire().map(|g| g.index()));
    ///     drop(first);
    ///     assert_eq!(waiter.join().unwrap(), Ok(0));
    /// });
    /// ```
    pub fn acquire(&self) -> Result<IndexGuard<'_>, AcquireError> {
        let shared = self.pool.state();
        let index = shared.pop_waiting::<false>(None).map_err(untimed)?;
        Ok(IndexGuard {
            pool: shared,
            index,
        })
    }

    /// Takes a free index, waiting at most `timeout`, as
    /// [`Pool::acquire_timeout`].
    ///
    /// # Errors
    ///
    /// [`AcquireTimeoutError::Timeout`] if none came free in time,
    /// [`AcquireTimeoutError::Closed`] if the pool is closed.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let pool = tagpool::IndexPool::new(1);
    /// let _held = pool.try_acquire().unwrap();
    /// assert!(pool.acquire_timeout(Duration::from_millis(1)).is_err());
    /// ```
    pub fn acquire_timeout(
        &self,
        timeout: Duration,
    ) -> Result<IndexGuard<'_>, AcquireTimeoutError> {
        let shared = self.pool.state();
        let index = shared.pop_timeout::<false>(timeout)?;
        Ok(IndexGuard {
            pool: shared,
            index,
        })
    }

    /// Takes a free index, waiting asynchronously, as
    /// [`Pool::acquire_async`] (cancel-safe: a dropped future loses
    /// nothing).
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let pool = tagpool::IndexPool::new(2);
    /// let guard = pool.acquire_async().await.unwrap();
    /// assert!(guard.index() < 2);
    /// # });
    /// ```
    pub fn acquire_async(&self) -> AcquireIndex<'_> {
        AcquireIndex {
            pool: self,
            wait: AsyncWait::default(),
            step: Step::First,
        }
    }

    /// Like [`try_acquire`](IndexPool::try_acquire), for a pool in an
    /// [`Arc`]: the guard is `'static` and may move to another thread.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](IndexPool::try_acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::IndexPool::new(4));
    /// let guard = pool.try_acquire_owned().unwrap();
    /// let index = std::thread::spawn(move || guard.index()).join().unwrap();
    /// assert!(index < 4);
    /// assert_eq!(pool.stats().in_use, 0);
    /// ```
    #[inline]
    pub fn try_acquire_owned(self: &Arc<Self>) -> Result<OwnedIndexGuard, TryAcquireError> {
        let shared = self.pool.state();
        match shared.try_pop::<true>() {
            Some(index) => Ok(self.owned_guard(index)),
            None => Err(shared.failure()),
        }
    }

    /// Like [`acquire`](IndexPool::acquire), for a pool in an [`Arc`].
    ///
    /// # Errors
    ///
    /// As [`acquire`](IndexPool::acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::IndexPool::new(1));
    /// let guard = pool.acquire_owned().unwrap();
    /// assert_eq!(guard.index(), 0);
    /// ```
    pub fn acquire_owned(self: &Arc<Self>) -> Result<OwnedIndexGuard, AcquireError> {
        let index = self
            .pool
            .state()
            .pop_waiting::<true>(None)
            .map_err(untimed)?;
        Ok(self.owned_guard(index))
    }

    /// Like [`acquire_timeout`](IndexPool::acquire_timeout), for a pool in
    /// an [`Arc`].
    ///
    /// # Errors
    ///
    /// As [`acquire_timeout`](IndexPool::acquire_timeout).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    ///
    /// let pool = Arc::new(tagpool::IndexPool::new(1));
    /// let held = pool.acquire_owned_timeout(Duration::from_millis(5)).unwrap();
    /// assert!(pool.acquire_owned_timeout(Duration::from_millis(1)).is_err());
    /// drop(held);
    /// ```
    pub fn acquire_owned_timeout(
        self: &Arc<Self>,
        timeout: Duration,
    ) -> Result<OwnedIndexGuard, AcquireTimeoutError> {
        let index = self.pool.state().pop_timeout::<true>(timeout)?;
        Ok(self.owned_guard(index))
    }

    /// Like [`acquire_async`](IndexPool::acquire_async), for a pool in an
    /// [`Arc`]: the future and its guard are `'static`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let pool = Arc::new(tagpool::IndexPool::new(1));
    /// let guard = pool.acquire_owned_async().await.unwrap();
    /// assert_eq!(guard.index(), 0);
    /// # });
    /// ```
    pub fn acquire_owned_async(self: &Arc<Self>) -> AcquireOwnedIndex {
        AcquireOwnedIndex {
            pool: Arc::clone(self),
            wait: AsyncWait::default(),
            step: Step::First,
        }
    }

    /// Closes the pool, as [`Pool::close`]: acquires fail from now on,
    /// waiters wake with an error, held guards stay valid and give their
    /// index back as usual. Returns `true` for the call that closed it.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::new(2);
    /// assert!(pool.close());
    /// assert!(pool.try_acquire().is_err());
    /// ```
    pub fn close(&self) -> bool {
        self.pool.close()
    }

    /// Whether [`close`](IndexPool::close) was called.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::new(2);
    /// assert!(!pool.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.pool.is_closed()
    }

    /// A snapshot of the pool's counters, as [`Pool::stats`]: those that
    /// mean something for indices.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::new(4);
    /// let _a = pool.try_acquire().unwrap();
    /// let stats = pool.stats();
    /// assert_eq!((stats.in_use, stats.available, stats.cached), (1, 3, 0));
    /// ```
    pub fn stats(&self) -> IndexStats {
        IndexStats::from(self.pool.stats())
    }

    /// The index allocator (for the handle pool).
    pub(crate) fn pool(&self) -> &Pool<()> {
        &self.pool
    }

    /// An owned guard for `index`, taken by `try_pop::<true>`.
    #[inline]
    fn owned_guard(&self, index: u32) -> OwnedIndexGuard {
        OwnedIndexGuard {
            pool: self.pool.state_ptr(),
            index,
        }
    }
}

impl fmt::Debug for IndexPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexPool")
            .field("stats", &self.stats())
            .finish()
    }
}

/// Settings for an [`IndexPool`]: [`IndexPool::builder`].
///
/// # Examples
///
/// ```
/// let pool = tagpool::IndexPool::builder()
///     .capacity(64)
///     .thread_cache(false)
///     .fair()
///     .build()?;
/// assert_eq!(pool.capacity(), 64);
/// # Ok::<(), tagpool::BuildError>(())
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct IndexBuilder {
    inner: Builder<()>,
}

impl IndexBuilder {
    /// The number of indices, from 1 to [`MAX_CAPACITY`](crate::MAX_CAPACITY),
    /// as [`Builder::capacity`]. Required.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::builder().capacity(5).build().unwrap();
    /// assert_eq!(pool.capacity(), 5);
    /// ```
    pub fn capacity(self, capacity: usize) -> Self {
        Self {
            inner: self.inner.capacity(capacity),
        }
    }

    /// Allocates the free list's links for `initial` indices now and the
    /// rest in doubling segments as they are needed, as
    /// [`Builder::initial`].
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::builder().capacity(100).initial(10).build().unwrap();
    /// assert_eq!(pool.stats().allocated, 10);
    /// ```
    pub fn initial(self, initial: usize) -> Self {
        Self {
            inner: self.inner.initial(initial),
        }
    }

    /// Per-thread caches on or off, as [`Builder::thread_cache`].
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::builder().capacity(64).thread_cache(false).build().unwrap();
    /// assert_eq!(pool.stats().cached, 0);
    /// ```
    pub fn thread_cache(self, enabled: bool) -> Self {
        Self {
            inner: self.inner.thread_cache(enabled),
        }
    }

    /// The per-thread cache size, as [`Builder::thread_cache_size`].
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::builder().capacity(64).thread_cache_size(8).build().unwrap();
    /// assert_eq!(pool.capacity(), 64);
    /// ```
    pub fn thread_cache_size(self, size: usize) -> Self {
        Self {
            inner: self.inner.thread_cache_size(size),
        }
    }

    /// First come, first served waiting, as [`Builder::fair`].
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::builder().capacity(4).fair().build().unwrap();
    /// assert_eq!(pool.capacity(), 4);
    /// ```
    pub fn fair(self) -> Self {
        Self {
            inner: self.inner.fair(),
        }
    }

    /// Builds the pool.
    ///
    /// # Errors
    ///
    /// As [`Builder::build`]: a missing, zero or too large capacity, an
    /// initial size of 0 or above the capacity, a cache too large, or a
    /// fair pool with caches.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{BuildError, IndexPool};
    ///
    /// assert_eq!(IndexPool::builder().build().unwrap_err(), BuildError::ZeroCapacity);
    /// ```
    pub fn build(self) -> Result<IndexPool, BuildError> {
        Ok(IndexPool {
            pool: self.inner.build()?,
        })
    }
}

impl fmt::Debug for IndexBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexBuilder")
            .field("inner", &self.inner)
            .finish()
    }
}
