//! [`BufferPool`]: buffers (`Vec<T>`) by size class, each class an exact,
//! lock-free [`Pool`] of its own.

use core::fmt;
use core::marker::PhantomData;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{AcquireError, AcquireTimeoutError, BuildError, TryAcquireError};
use crate::{Pool, Stats};

mod guard;

pub use self::guard::{BufferGuard, OwnedBufferGuard};

/// Buffers of every size: power-of-two size classes between a minimum and
/// a maximum set at build, each class an exact, lock-free [`Pool`] of
/// `Vec<T>` with its own capacity (and per-thread caches), as Go's
/// `sync.Pool` users and zeropool arrange byte buffers by hand.
///
/// - [`acquire(len)`](Self::acquire) (and its [try](Self::try_acquire),
///   [timed](Self::acquire_timeout), [async](Self::acquire_async) and
///   [owned](Self::acquire_owned) forms) returns an empty buffer whose
///   capacity is at least `len`, from the smallest class that holds `len`
///   (a class of size `s` makes its buffers `Vec::with_capacity(s)`, on
///   first use: the classes fill lazily). With
///   [`fallback`](BufferPoolBuilder::fallback), a class whose every buffer
///   is held lends one of a larger class instead ([`BufferStats::fallbacks`]);
///   a waiting acquire waits on its own class.
/// - A request above the largest class gets a plain `Vec::with_capacity(len)`,
///   not pooled, freed when dropped ([`BufferStats::unpooled`] counts them):
///   the pool never keeps what it was not sized for.
/// - A buffer goes back cleared (`Vec::clear`); one whose capacity left its
///   class (grown to twice the class size or more, or shrunk below it) is
///   dropped instead, and its slot refilled later: a frame that grew a
///   small buffer never pins that memory in the small class (each class's
///   [`Stats::discarded`] counts them).
/// - [`trim`](Self::trim) gives the idle buffers of every class back to the
///   allocator beyond the most recent few, after a spike of large frames.
///
/// Sizes are in elements of `T` (bytes for `u8`).
///
/// # Examples
///
/// ```
/// use tagpool::BufferPool;
///
/// let pool = BufferPool::<u8>::builder()
///     .sizes(256, 1 << 20) // 256 B to 1 MiB: 13 classes
///     .capacity(16)        // 16 buffers per class at most
///     .fallback(true)
///     .build()?;
/// let mut frame = pool.acquire(1500)?;
/// assert_eq!(frame.class_size(), Some(2048));
/// frame.extend_from_slice(&[0u8; 1500]);
/// drop(frame); // back to the 2 KiB class, cleared
/// let huge = pool.acquire(8 << 20)?;
/// assert_eq!(huge.class_size(), None, "above the largest class: not pooled");
/// assert_eq!(pool.stats().unpooled, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BufferPool<T = u8> {
    /// The classes, smallest first: class `k` holds buffers of `min << k`.
    classes: Box<[Class<T>]>,
    /// `log2` of the smallest class's size.
    min_shift: u32,
    fallback: bool,
    /// Acquires above the largest class (served unpooled).
    unpooled: AtomicU64,
    /// Acquires served by a larger class than their own.
    fallbacks: AtomicU64,
}

/// What every acquire does before it may wait: serve an unpooled buffer
/// (above the largest class), a pooled one (with its class's size), or
/// name the class to wait on; or find the pool closed.
enum First<G, T> {
    Unpooled(Vec<T>),
    Pooled(G, usize),
    Wait(usize),
    Closed,
}

/// One size class.
struct Class<T> {
    size: usize,
    pool: Arc<Pool<Vec<T>>>,
}

/// A snapshot of a [`BufferPool`]'s counters, from [`BufferPool::stats`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BufferStats {
    /// Each class's size and statistics, smallest first.
    pub classes: Vec<ClassStats>,
    /// Acquires above the largest class, served by an unpooled buffer.
    pub unpooled: u64,
    /// Acquires served by a larger class than theirs, whose own had every
    /// buffer held (with [`fallback`](BufferPoolBuilder::fallback) on).
    pub fallbacks: u64,
}

/// One class of a [`BufferStats`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClassStats {
    /// The class's buffer size, in elements.
    pub size: usize,
    /// The class's pool's statistics: `in_use`, `available`, `filled`
    /// (buffers allocated and not dropped), `discarded` (buffers dropped on
    /// release because their capacity left the class), the waits...
    pub stats: Stats,
}

/// Configures a [`BufferPool`]: from [`BufferPool::builder`].
pub struct BufferPoolBuilder<T> {
    min: usize,
    max: usize,
    capacity: usize,
    class_capacity: Vec<(usize, usize)>,
    fallback: bool,
    thread_cache: Option<usize>,
    _values: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for BufferPoolBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufferPoolBuilder")
            .field("min", &self.min)
            .field("max", &self.max)
            .field("capacity", &self.capacity)
            .field("class_capacity", &self.class_capacity)
            .field("fallback", &self.fallback)
            .field("thread_cache", &self.thread_cache)
            .finish()
    }
}

impl<T: Send + 'static> BufferPoolBuilder<T> {
    /// The smallest and the largest class, each rounded up to a power of
    /// two: classes `min`, `2 * min`, ... `max`. Default: 64 to 65,536.
    ///
    /// [`build`](Self::build) refuses a `min` of 0, a `max` below `min`, and
    /// a `max` whose buffers could not be allocated (`max` elements of `T`
    /// above `isize::MAX` bytes), with [`BuildError::BufferSizes`].
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder().sizes(100, 1000).capacity(1).build()?;
    /// let sizes: Vec<usize> = pool.stats().classes.iter().map(|c| c.size).collect();
    /// assert_eq!(sizes, [128, 256, 512, 1024]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sizes(mut self, min: usize, max: usize) -> Self {
        self.min = min;
        self.max = max;
        self
    }

    /// The most buffers each class holds (its pool's capacity): from 1 to
    /// [`MAX_CAPACITY`](crate::MAX_CAPACITY). Required, as a [`Pool`]'s.
    /// The classes fill lazily, so this bounds the memory a class keeps, not
    /// what it allocates up front.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder().sizes(64, 128).capacity(3).build()?;
    /// assert!(pool.stats().classes.iter().all(|c| c.stats.capacity == 3));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// The capacity of the class that holds `size` (rounded up to its
    /// class), instead of [`capacity`](Self::capacity)'s: fewer large
    /// buffers than small ones, say. A `size` outside the classes is refused
    /// at [`build`](Self::build) ([`BuildError::BufferSizes`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder()
    ///     .sizes(64, 1 << 20)
    ///     .capacity(64)
    ///     .class_capacity(1 << 20, 4) // at most 4 MiB kept in 1 MiB buffers
    ///     .build()?;
    /// assert_eq!(pool.stats().classes.last().unwrap().stats.capacity, 4);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn class_capacity(mut self, size: usize, capacity: usize) -> Self {
        self.class_capacity.push((size, capacity));
        self
    }

    /// Whether an acquire whose class has every buffer held takes one of a
    /// larger class (the smallest that has one) rather than failing or
    /// waiting at once. Off by default.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder()
    ///     .sizes(64, 128)
    ///     .capacity(1)
    ///     .fallback(true)
    ///     .build()?;
    /// let small = pool.try_acquire(10)?;
    /// let next = pool.try_acquire(10)?;
    /// assert_eq!((small.class_size(), next.class_size()), (Some(64), Some(128)));
    /// assert_eq!(pool.stats().fallbacks, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn fallback(mut self, fallback: bool) -> Self {
        self.fallback = fallback;
        self
    }

    /// The per-thread cache size of every class (see
    /// [`Builder::thread_cache_size`](crate::Builder::thread_cache_size));
    /// by default each class follows the [`Pool`] rule for its capacity.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder()
    ///     .sizes(64, 64)
    ///     .capacity(8)
    ///     .thread_cache_size(0)
    ///     .build()?;
    /// drop(pool.acquire(1)?);
    /// assert_eq!(pool.stats().classes[0].stats.cached, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn thread_cache_size(mut self, size: usize) -> Self {
        self.thread_cache = Some(size);
        self
    }

    /// Builds the pool: one lazily filled [`Pool`] per class.
    ///
    /// # Errors
    ///
    /// [`BuildError::BufferSizes`] for sizes that make no classes (see
    /// [`sizes`](Self::sizes) and [`class_capacity`](Self::class_capacity));
    /// any error of a class's [`Builder::build`](crate::Builder::build)
    /// ([`BuildError::ZeroCapacity`] if no capacity was set, ...).
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{BufferPool, BuildError};
    ///
    /// let err = BufferPool::<u8>::builder().sizes(0, 64).capacity(1).build().unwrap_err();
    /// assert_eq!(err, BuildError::BufferSizes { min: 0, max: 64 });
    /// let err = BufferPool::<u8>::builder().sizes(64, 32).capacity(1).build().unwrap_err();
    /// assert_eq!(err, BuildError::BufferSizes { min: 64, max: 32 });
    /// let err = BufferPool::<u8>::builder().sizes(64, 128).build().unwrap_err();
    /// assert_eq!(err, BuildError::ZeroCapacity);
    /// ```
    pub fn build(self) -> Result<BufferPool<T>, BuildError> {
        let refused = BuildError::BufferSizes {
            min: self.min,
            max: self.max,
        };
        let element = core::mem::size_of::<T>().max(1);
        let fits = |size: usize| {
            size.checked_next_power_of_two()
                .and_then(|s| s.checked_mul(element))
                .map_or(false, |bytes| bytes <= isize::MAX as usize)
        };
        if self.min == 0 || self.max < self.min || !fits(self.max) {
            return Err(refused);
        }
        let min = self.min.next_power_of_two();
        let max = self.max.next_power_of_two();
        let min_shift = min.trailing_zeros();
        let count = (max.trailing_zeros() - min_shift + 1) as usize;
        let mut capacities = vec![self.capacity; count];
        for &(size, capacity) in &self.class_capacity {
            if size == 0 || size > max {
                return Err(refused);
            }
            let k = size.max(min).next_power_of_two().trailing_zeros() - min_shift;
            capacities[k as usize] = capacity;
        }
        let mut classes = Vec::with_capacity(count);
        for (k, &capacity) in capacities.iter().enumerate() {
            let size = min << k;
            // No reset nor discard hook: the guards clear their buffer, or
            // discard it, themselves (inline, without the two calls through
            // boxed closures that the hooks cost on every release).
            let mut builder = Pool::builder(move || Vec::with_capacity(size))
                .capacity(capacity)
                .lazy();
            if let Some(cache) = self.thread_cache {
                builder = builder.thread_cache_size(cache);
            }
            let pool = builder.build().map_err(|err| match err {
                BuildError::Factory(never) => match never {},
                other => other,
            })?;
            classes.push(Class {
                size,
                pool: Arc::new(pool),
            });
        }
        Ok(BufferPool {
            classes: classes.into_boxed_slice(),
            min_shift,
            fallback: self.fallback,
            unpooled: AtomicU64::new(0),
            fallbacks: AtomicU64::new(0),
        })
    }
}

impl<T: Send + 'static> BufferPool<T> {
    /// Starts building a buffer pool: see [`BufferPoolBuilder`].
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder().capacity(8).build()?;
    /// assert_eq!(pool.stats().classes.len(), 11, "64 B to 64 KiB by default");
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn builder() -> BufferPoolBuilder<T> {
        BufferPoolBuilder {
            min: 64,
            max: 1 << 16,
            capacity: 0,
            class_capacity: Vec::new(),
            fallback: false,
            thread_cache: None,
            _values: PhantomData,
        }
    }

    /// The class that serves `len`: its index, or `None` above the largest.
    #[inline]
    fn class_of(&self, len: usize) -> Option<usize> {
        let k = match len.checked_next_power_of_two() {
            Some(size) => size.trailing_zeros().saturating_sub(self.min_shift) as usize,
            None => return None,
        };
        (k < self.classes.len()).then_some(k)
    }

    /// The size of the class that serves a request of `len`, or `None` if
    /// `len` is above the largest class (such a request is served unpooled).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder().sizes(64, 1024).capacity(1).build()?;
    /// assert_eq!(pool.class_size_for(0), Some(64));
    /// assert_eq!(pool.class_size_for(65), Some(128));
    /// assert_eq!(pool.class_size_for(1024), Some(1024));
    /// assert_eq!(pool.class_size_for(1025), None);
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn class_size_for(&self, len: usize) -> Option<usize> {
        self.class_of(len).map(|k| self.classes[k].size)
    }

    /// An unpooled buffer for a request above the largest class, or
    /// `None` once the pool is closed (a closed pool serves nothing).
    #[cold]
    fn unpooled(&self, len: usize) -> Option<Vec<T>> {
        if self.classes[0].pool.is_closed() {
            return None;
        }
        // Relaxed: a statistic.
        self.unpooled.fetch_add(1, Ordering::Relaxed);
        Some(Vec::with_capacity(len))
    }

    /// A buffer of class `k`, or (with fallback) of the smallest larger
    /// class that has one, without waiting: `take` tries one class.
    fn try_from<'s, G>(
        &'s self,
        k: usize,
        take: impl Fn(&'s Class<T>) -> Result<G, TryAcquireError>,
    ) -> Result<(G, usize), TryAcquireError> {
        match take(&self.classes[k]) {
            Ok(g) => return Ok((g, self.classes[k].size)),
            Err(TryAcquireError::Exhausted) if self.fallback => {}
            Err(err) => return Err(err),
        }
        for class in &self.classes[k + 1..] {
            if let Ok(g) = take(class) {
                // Relaxed: a statistic.
                self.fallbacks.fetch_add(1, Ordering::Relaxed);
                return Ok((g, class.size));
            }
        }
        Err(TryAcquireError::Exhausted)
    }

    /// The first step of every acquire of `len`: see [`First`]. `take` tries
    /// one class without waiting (borrowed or owned).
    fn first<'s, G>(
        &'s self,
        len: usize,
        take: impl Fn(&'s Class<T>) -> Result<G, TryAcquireError>,
    ) -> First<G, T> {
        let k = match self.class_of(len) {
            Some(k) => k,
            None => return self.unpooled(len).map_or(First::Closed, First::Unpooled),
        };
        match self.try_from(k, take) {
            Ok((g, size)) => First::Pooled(g, size),
            Err(TryAcquireError::Closed) => First::Closed,
            Err(_) => First::Wait(k),
        }
    }

    /// A buffer of capacity at least `len`, without waiting: see
    /// [`BufferPool`].
    ///
    /// # Errors
    ///
    /// [`TryAcquireError::Exhausted`] if the class of `len` (and, with
    /// fallback, every larger one) has every buffer held;
    /// [`TryAcquireError::Closed`] after [`close`](Self::close) (also for a
    /// request above the largest class).
    ///
    /// # Panics
    ///
    /// For a `len` above the largest class whose unpooled `Vec` cannot be
    /// allocated (above `isize::MAX` bytes), as `Vec::with_capacity`.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder().sizes(64, 64).capacity(1).build()?;
    /// let _held = pool.try_acquire(64)?;
    /// assert!(pool.try_acquire(64).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire(&self, len: usize) -> Result<BufferGuard<'_, T>, TryAcquireError> {
        match self.first(len, |c| c.pool.try_acquire()) {
            First::Unpooled(buf) => Ok(BufferGuard::unpooled(buf)),
            First::Pooled(g, size) => Ok(BufferGuard::pooled(g, size)),
            First::Wait(_) => Err(TryAcquireError::Exhausted),
            First::Closed => Err(TryAcquireError::Closed),
        }
    }

    /// A buffer of capacity at least `len`, waiting for one of its class if
    /// every buffer is held (after the fallback, if on).
    ///
    /// # Errors
    ///
    /// [`AcquireError::Closed`] after [`close`](Self::close).
    ///
    /// # Panics
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder().capacity(4).build()?;
    /// assert!(pool.acquire(1000)?.capacity() >= 1000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire(&self, len: usize) -> Result<BufferGuard<'_, T>, AcquireError> {
        match self.first(len, |c| c.pool.try_acquire()) {
            First::Unpooled(buf) => Ok(BufferGuard::unpooled(buf)),
            First::Pooled(g, size) => Ok(BufferGuard::pooled(g, size)),
            First::Wait(k) => {
                let class = &self.classes[k];
                let g = class.pool.acquire()?;
                Ok(BufferGuard::pooled(g, class.size))
            }
            First::Closed => Err(AcquireError::Closed),
        }
    }

    /// [`acquire`](Self::acquire), waiting at most `timeout`.
    ///
    /// # Errors
    ///
    /// [`AcquireTimeoutError::Timeout`] if no buffer of its class came
    /// free in time; [`AcquireTimeoutError::Closed`] after
    /// [`close`](Self::close).
    ///
    /// # Panics
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let pool = tagpool::BufferPool::<u8>::builder().sizes(64, 64).capacity(1).build()?;
    /// let _held = pool.acquire(1)?;
    /// assert!(pool.acquire_timeout(1, Duration::from_millis(1)).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_timeout(
        &self,
        len: usize,
        timeout: Duration,
    ) -> Result<BufferGuard<'_, T>, AcquireTimeoutError> {
        match self.first(len, |c| c.pool.try_acquire()) {
            First::Unpooled(buf) => Ok(BufferGuard::unpooled(buf)),
            First::Pooled(g, size) => Ok(BufferGuard::pooled(g, size)),
            First::Wait(k) => {
                let class = &self.classes[k];
                let g = class.pool.acquire_timeout(timeout)?;
                Ok(BufferGuard::pooled(g, class.size))
            }
            First::Closed => Err(AcquireTimeoutError::Closed),
        }
    }

    /// [`acquire`](Self::acquire) for async code: the future waits for a
    /// buffer of its class without blocking the thread (any executor;
    /// dropping it cancels the wait, see [`Pool::acquire_async`]).
    ///
    /// # Errors
    ///
    /// [`AcquireError::Closed`] after [`close`](Self::close).
    ///
    /// # Panics
    ///
    /// As [`try_acquire`](Self::try_acquire), when polled.
    ///
    /// # Examples
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let pool = tagpool::BufferPool::<u8>::builder().capacity(4).build()?;
    /// let buf = pool.acquire_async(512).await?;
    /// assert_eq!(buf.class_size(), Some(512));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn acquire_async(&self, len: usize) -> Result<BufferGuard<'_, T>, AcquireError> {
        match self.first(len, |c| c.pool.try_acquire()) {
            First::Unpooled(buf) => Ok(BufferGuard::unpooled(buf)),
            First::Pooled(g, size) => Ok(BufferGuard::pooled(g, size)),
            First::Wait(k) => {
                let class = &self.classes[k];
                let g = class.pool.acquire_async().await?;
                Ok(BufferGuard::pooled(g, class.size))
            }
            First::Closed => Err(AcquireError::Closed),
        }
    }

    /// [`try_acquire`](Self::try_acquire) for a pool in an [`Arc`]: the
    /// buffer is `'static` ([`OwnedBufferGuard`]).
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Panics
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::BufferPool::<u8>::builder().capacity(2).build()?);
    /// let buf = pool.try_acquire_owned(100)?;
    /// std::thread::spawn(move || assert!(buf.capacity() >= 100)).join().unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_acquire_owned(
        self: &Arc<Self>,
        len: usize,
    ) -> Result<OwnedBufferGuard<T>, TryAcquireError> {
        match self.first(len, |c| c.pool.try_acquire_owned()) {
            First::Unpooled(buf) => Ok(OwnedBufferGuard::unpooled(buf)),
            First::Pooled(g, size) => Ok(OwnedBufferGuard::pooled(g, size)),
            First::Wait(_) => Err(TryAcquireError::Exhausted),
            First::Closed => Err(TryAcquireError::Closed),
        }
    }

    /// [`acquire`](Self::acquire) for a pool in an [`Arc`].
    ///
    /// # Errors
    ///
    /// As [`acquire`](Self::acquire).
    ///
    /// # Panics
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::BufferPool::<u8>::builder().capacity(2).build()?);
    /// let buf = pool.acquire_owned(100)?;
    /// assert_eq!(buf.class_size(), Some(128));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_owned(
        self: &Arc<Self>,
        len: usize,
    ) -> Result<OwnedBufferGuard<T>, AcquireError> {
        match self.first(len, |c| c.pool.try_acquire_owned()) {
            First::Unpooled(buf) => Ok(OwnedBufferGuard::unpooled(buf)),
            First::Pooled(g, size) => Ok(OwnedBufferGuard::pooled(g, size)),
            First::Wait(k) => {
                let class = &self.classes[k];
                let g = class.pool.acquire_owned()?;
                Ok(OwnedBufferGuard::pooled(g, class.size))
            }
            First::Closed => Err(AcquireError::Closed),
        }
    }

    /// [`acquire_timeout`](Self::acquire_timeout) for a pool in an [`Arc`].
    ///
    /// # Errors
    ///
    /// As [`acquire_timeout`](Self::acquire_timeout).
    ///
    /// # Panics
    ///
    /// As [`try_acquire`](Self::try_acquire).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let pool = Arc::new(tagpool::BufferPool::<u8>::builder().capacity(2).build()?);
    /// assert!(pool.acquire_owned_timeout(10, Duration::from_secs(1)).is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire_owned_timeout(
        self: &Arc<Self>,
        len: usize,
        timeout: Duration,
    ) -> Result<OwnedBufferGuard<T>, AcquireTimeoutError> {
        match self.first(len, |c| c.pool.try_acquire_owned()) {
            First::Unpooled(buf) => Ok(OwnedBufferGuard::unpooled(buf)),
            First::Pooled(g, size) => Ok(OwnedBufferGuard::pooled(g, size)),
            First::Wait(k) => {
                let class = &self.classes[k];
                let g = class.pool.acquire_owned_timeout(timeout)?;
                Ok(OwnedBufferGuard::pooled(g, class.size))
            }
            First::Closed => Err(AcquireTimeoutError::Closed),
        }
    }

    /// [`acquire_async`](Self::acquire_async) for a pool in an [`Arc`]: the
    /// future holds a clone of the `Arc` and is `'static` (and `Send` for
    /// `T: Send`), so it fits `tokio::spawn`.
    ///
    /// # Errors
    ///
    /// As [`acquire_async`](Self::acquire_async).
    ///
    /// # Panics
    ///
    /// As [`try_acquire`](Self::try_acquire), when polled.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
    /// let pool = Arc::new(tagpool::BufferPool::<u8>::builder().capacity(2).build()?);
    /// let task = tokio::spawn(pool.acquire_owned_async(300));
    /// assert_eq!(task.await??.class_size(), Some(512));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn acquire_owned_async(
        self: &Arc<Self>,
        len: usize,
    ) -> impl Future<Output = Result<OwnedBufferGuard<T>, AcquireError>> + 'static {
        let this = Arc::clone(self);
        async move {
            match this.first(len, |c| c.pool.try_acquire_owned()) {
                First::Unpooled(buf) => Ok(OwnedBufferGuard::unpooled(buf)),
                First::Pooled(g, size) => Ok(OwnedBufferGuard::pooled(g, size)),
                First::Wait(k) => {
                    let class = &this.classes[k];
                    let g = class.pool.acquire_owned_async().await?;
                    Ok(OwnedBufferGuard::pooled(g, class.size))
                }
                First::Closed => Err(AcquireError::Closed),
            }
        }
    }

    /// Drops the idle buffers of every class beyond the `keep` most
    /// recently released in each (see [`Pool::trim`]), and returns how many
    /// it dropped: the memory of a spike of large frames goes back to the
    /// allocator.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder().sizes(64, 128).capacity(4).build()?;
    /// let spike: Vec<_> = (0..4).map(|_| pool.acquire(100).unwrap()).collect();
    /// drop(spike);
    /// assert_eq!(pool.trim(1), 3);
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn trim(&self, keep: usize) -> usize {
        self.classes.iter().map(|c| c.pool.trim(keep)).sum()
    }

    /// Closes every class: see [`Pool::close`]. Returns `true` if this call
    /// closed the pool.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder().capacity(1).build()?;
    /// assert!(pool.close());
    /// assert!(pool.try_acquire(1).is_err());
    /// assert!(!pool.close());
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn close(&self) -> bool {
        self.classes
            .iter()
            .fold(false, |closed, c| c.pool.close() | closed)
    }

    /// A snapshot of every class's statistics and of the pool's own
    /// counts.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder().sizes(64, 128).capacity(2).build()?;
    /// let _held = pool.acquire(100)?;
    /// let stats = pool.stats();
    /// assert_eq!(stats.classes[1].size, 128);
    /// assert_eq!(stats.classes[1].stats.in_use, 1);
    /// assert_eq!(stats.classes[0].stats.filled, 0, "filled on first use");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stats(&self) -> BufferStats {
        BufferStats {
            classes: self
                .classes
                .iter()
                .map(|c| ClassStats {
                    size: c.size,
                    stats: c.pool.stats(),
                })
                .collect(),
            // Relaxed: statistics.
            unpooled: self.unpooled.load(Ordering::Relaxed),
            fallbacks: self.fallbacks.load(Ordering::Relaxed),
        }
    }
}

impl<T> fmt::Debug for BufferPool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sizes: Vec<usize> = self.classes.iter().map(|c| c.size).collect();
        f.debug_struct("BufferPool")
            .field("classes", &sizes)
            .field("fallback", &self.fallback)
            .finish_non_exhaustive()
    }
}
