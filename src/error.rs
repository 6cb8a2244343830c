//! Public error types.

use core::fmt;

/// Why [`Builder::build`](crate::Builder::build) refused to build a pool.
///
/// # Examples
///
/// ```
/// use tagpool::{BuildError, Pool};
///
/// let err = Pool::builder(|| 0u8).capacity(0).build().unwrap_err();
/// assert_eq!(err, BuildError::ZeroCapacity);
/// assert_eq!(err.to_string(), "pool capacity must be at least 1");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildError {
    /// The capacity was 0, or [`Builder::capacity`](crate::Builder::capacity)
    /// was never called.
    ZeroCapacity,
    /// The capacity was above [`MAX_CAPACITY`](crate::MAX_CAPACITY).
    CapacityTooLarge {
        /// The capacity asked for.
        requested: usize,
        /// The largest capacity a pool can have.
        max: usize,
    },
    /// [`Builder::thread_cache_size`](crate::Builder::thread_cache_size)
    /// was above the largest per-thread cache.
    ThreadCacheTooLarge {
        /// The size asked for.
        requested: usize,
        /// The largest per-thread cache: 64 slots.
        max: usize,
    },
    /// [`Builder::fair`](crate::Builder::fair) and a per-thread cache size
    /// above 0 were both asked for: fair pools have no per-thread caches.
    FairWithThreadCache,
    /// [`Builder::initial`](crate::Builder::initial) was 0: an elastic pool
    /// starts with at least one slot.
    ZeroInitial,
    /// [`Builder::initial`](crate::Builder::initial) was above the capacity,
    /// which is the hard bound.
    InitialAboveCapacity {
        /// The initial number of slots asked for.
        initial: usize,
        /// The pool's capacity.
        capacity: usize,
    },
    /// [`Builder::values`](crate::Builder::values) gave more values than
    /// the capacity.
    TooManyValues {
        /// How many values were given.
        values: usize,
        /// The pool's capacity.
        capacity: usize,
    },
    /// A pool without a factory ([`Pool::builder_from_values`](crate::Pool::builder_from_values))
    /// was given a capacity other than the number of its values, or made
    /// [elastic](crate::Builder::initial): it would have slots that nothing
    /// can fill.
    NoFactory {
        /// How many values were given.
        values: usize,
        /// The capacity asked for.
        capacity: usize,
    },
    /// The factory of a [`Pool::try_builder`](crate::Pool::try_builder)
    /// failed while `build` filled the slots; the values made so far were
    /// dropped.
    Factory(FactoryError),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroCapacity => f.write_str("pool capacity must be at least 1"),
            Self::CapacityTooLarge { requested, max } => {
                write!(f, "pool capacity {requested} is above the maximum of {max}")
            }
            Self::ThreadCacheTooLarge { requested, max } => write!(
                f,
                "thread cache size {requested} is above the maximum of {max}"
            ),
            Self::FairWithThreadCache => f.write_str("a fair pool cannot have per-thread caches"),
            Self::ZeroInitial => f.write_str("initial pool size must be at least 1"),
            Self::InitialAboveCapacity { initial, capacity } => write!(
                f,
                "initial pool size {initial} is above the capacity of {capacity}"
            ),
            Self::TooManyValues { values, capacity } => write!(
                f,
                "{values} initial values do not fit a pool capacity of {capacity}"
            ),
            Self::NoFactory { values, capacity } => write!(
                f,
                "a pool of {values} values without a factory cannot have a capacity of {capacity} or grow"
            ),
            Self::Factory(err) => fmt::Display::fmt(err, f),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Factory(err) => Some(err),
            _ => None,
        }
    }
}

/// Why [`Pool::try_acquire`](crate::Pool::try_acquire) (or
/// [`try_acquire_owned`](crate::Pool::try_acquire_owned)) returned no slot.
///
/// # Examples
///
/// ```
/// use tagpool::{Pool, TryAcquireError};
///
/// let pool = Pool::new(1, || 0u8);
/// let held = pool.try_acquire()?;
/// assert_eq!(pool.try_acquire().unwrap_err(), TryAcquireError::Exhausted);
/// pool.close();
/// assert_eq!(pool.try_acquire().unwrap_err(), TryAcquireError::Closed);
/// assert_eq!(TryAcquireError::Closed.to_string(), "pool is closed");
/// # drop(held);
/// # Ok::<(), TryAcquireError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TryAcquireError {
    /// Every slot is held: the pool may have a free slot later. Counted in
    /// [`Stats::failed_acquires`](crate::Stats::failed_acquires).
    Exhausted,
    /// The pool was [closed](crate::Pool::close): no acquire will succeed
    /// again.
    Closed,
    /// The slot taken was empty and the factory of a
    /// [`Pool::try_builder`](crate::Pool::try_builder) failed to fill it:
    /// the slot went back to the pool, still empty, and the next acquire
    /// that takes it tries the factory again.
    Factory(FactoryError),
}

impl fmt::Display for TryAcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exhausted => f.write_str("every slot of the pool is held"),
            Self::Closed => f.write_str("pool is closed"),
            Self::Factory(err) => fmt::Display::fmt(err, f),
        }
    }
}

impl std::error::Error for TryAcquireError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Factory(err) => Some(err),
            _ => None,
        }
    }
}

/// Why a waiting acquire ([`Pool::acquire`](crate::Pool::acquire),
/// [`Pool::acquire_async`](crate::Pool::acquire_async) and their owned
/// forms) returned no slot: the pool was closed, or a fallible factory
/// failed.
///
/// # Examples
///
/// ```
/// use tagpool::{AcquireError, Pool};
///
/// let pool = Pool::new(1, || 0u8);
/// pool.close();
/// assert_eq!(pool.acquire().unwrap_err(), AcquireError::Closed);
/// assert_eq!(AcquireError::Closed.to_string(), "pool is closed");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireError {
    /// The pool was [closed](crate::Pool::close), before or during the
    /// wait.
    Closed,
    /// The slot taken was empty and the factory of a
    /// [`Pool::try_builder`](crate::Pool::try_builder) failed to fill it
    /// (see [`TryAcquireError::Factory`]).
    Factory(FactoryError),
}

impl fmt::Display for AcquireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => f.write_str("pool is closed"),
            Self::Factory(err) => fmt::Display::fmt(err, f),
        }
    }
}

impl std::error::Error for AcquireError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Factory(err) => Some(err),
            Self::Closed => None,
        }
    }
}

/// Why [`Pool::acquire_timeout`](crate::Pool::acquire_timeout) (or
/// [`acquire_owned_timeout`](crate::Pool::acquire_owned_timeout)) returned
/// no slot.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tagpool::{AcquireTimeoutError, Pool};
///
/// let pool = Pool::new(1, || 0u8);
/// let held = pool.try_acquire().unwrap();
/// let err = pool.acquire_timeout(Duration::from_millis(1)).unwrap_err();
/// assert_eq!(err, AcquireTimeoutError::Timeout);
/// assert_eq!(err.to_string(), "timed out waiting for a slot");
/// # drop(held);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireTimeoutError {
    /// No slot came free in time. Counted in
    /// [`Stats::timeouts`](crate::Stats::timeouts).
    Timeout,
    /// The pool was [closed](crate::Pool::close), before or during the
    /// wait.
    Closed,
    /// The slot taken was empty and the factory of a
    /// [`Pool::try_builder`](crate::Pool::try_builder) failed to fill it
    /// (see [`TryAcquireError::Factory`]).
    Factory(FactoryError),
}

impl fmt::Display for AcquireTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout => f.write_str("timed out waiting for a slot"),
            Self::Closed => f.write_str("pool is closed"),
            Self::Factory(err) => fmt::Display::fmt(err, f),
        }
    }
}

impl std::error::Error for AcquireTimeoutError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Factory(err) => Some(err),
            _ => None,
        }
    }
}

impl From<AcquireError> for AcquireTimeoutError {
    fn from(err: AcquireError) -> Self {
        match err {
            AcquireError::Closed => Self::Closed,
            AcquireError::Factory(err) => Self::Factory(err),
        }
    }
}

/// The error of a fallible factory (see
/// [`Pool::try_builder`](crate::Pool::try_builder)), carried by the
/// `Factory` variant of every acquire error and of [`BuildError`].
///
/// It holds the factory's error, type-erased so that `Pool<T>` keeps one
/// type parameter: [`downcast_ref`](FactoryError::downcast_ref) gets it
/// back, [`source`](std::error::Error::source) and `Display` show it. It
/// is shared (cloning is a reference count), and two `FactoryError`s are
/// equal only if they are the same failure (clones of one another).
///
/// # Examples
///
/// ```
/// use std::io;
/// use tagpool::{Pool, TryAcquireError};
///
/// let pool = Pool::try_builder(|| Err::<u32, _>(io::Error::new(io::ErrorKind::Other, "refused")))
///     .capacity(1)
///     .lazy()
///     .build()?;
/// let err = match pool.try_acquire() {
///     Err(TryAcquireError::Factory(err)) => err,
///     _ => unreachable!("the factory fails"),
/// };
/// assert_eq!(err.downcast_ref::<io::Error>().unwrap().kind(), io::ErrorKind::Other);
/// assert_eq!(err.to_string(), "the pool's factory failed: refused");
/// assert_eq!(err.clone(), err);
/// # Ok::<(), tagpool::BuildError>(())
/// ```
#[derive(Clone)]
pub struct FactoryError {
    error: std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>,
}

impl FactoryError {
    /// Wraps a factory's error.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = tagpool::FactoryError::new("no route to host");
    /// assert_eq!(err.to_string(), "the pool's factory failed: no route to host");
    /// ```
    pub fn new<E>(error: E) -> Self
    where
        E: Into<Box<dyn std::error::Error + Send + Sync + 'static>>,
    {
        FactoryError {
            error: std::sync::Arc::from(error.into()),
        }
    }

    /// The factory's error.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = tagpool::FactoryError::new("busy");
    /// assert_eq!(err.get_ref().to_string(), "busy");
    /// ```
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.error
    }

    /// The factory's error, if it is an `E`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::fmt;
    ///
    /// #[derive(Debug)]
    /// struct Refused(u16);
    /// impl fmt::Display for Refused {
    ///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    ///         write!(f, "refused by port {}", self.0)
    ///     }
    /// }
    /// impl std::error::Error for Refused {}
    ///
    /// let err = tagpool::FactoryError::new(Refused(5432));
    /// assert_eq!(err.downcast_ref::<Refused>().unwrap().0, 5432);
    /// assert!(err.downcast_ref::<std::io::Error>().is_none());
    /// ```
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.error.downcast_ref::<E>()
    }

    /// The factory's error, shared.
    ///
    /// # Examples
    ///
    /// ```
    /// let err = tagpool::FactoryError::new("busy");
    /// let inner = err.clone().into_inner();
    /// assert_eq!(inner.to_string(), "busy");
    /// ```
    pub fn into_inner(self) -> std::sync::Arc<dyn std::error::Error + Send + Sync + 'static> {
        self.error
    }
}

impl fmt::Debug for FactoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("FactoryError").field(&self.error).finish()
    }
}

impl fmt::Display for FactoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the pool's factory failed: {}", self.error)
    }
}

impl std::error::Error for FactoryError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.error)
    }
}

/// The same failure: one error and its clones.
impl PartialEq for FactoryError {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.error, &other.error)
    }
}

impl Eq for FactoryError {}

impl core::hash::Hash for FactoryError {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        // The address: equal errors are clones, which share it.
        (std::sync::Arc::as_ptr(&self.error) as *const () as usize).hash(state);
    }
}

/// Why [`Pool::attach`](crate::Pool::attach) refused a value; holds the
/// value, which [`into_inner`](AttachError::into_inner) gives back.
///
/// # Examples
///
/// ```
/// use tagpool::{AttachError, Pool};
///
/// let pool = Pool::new(1, || 0u8); // its one slot holds a value
/// let err = pool.attach(7).unwrap_err();
/// assert_eq!(err, AttachError::Full(7));
/// assert_eq!(err.to_string(), "every slot of the pool holds a value");
/// assert_eq!(err.into_inner(), 7);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttachError<T> {
    /// Every slot holds a value, idle or in use: the capacity is reached.
    Full(T),
    /// The pool is [closed](crate::Pool::close).
    Closed(T),
}

impl<T> AttachError<T> {
    /// The value that was not attached.
    pub fn into_inner(self) -> T {
        match self {
            Self::Full(value) | Self::Closed(value) => value,
        }
    }
}

impl<T> fmt::Debug for AttachError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("Full(..)"),
            Self::Closed(_) => f.write_str("Closed(..)"),
        }
    }
}

impl<T> fmt::Display for AttachError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("every slot of the pool holds a value"),
            Self::Closed(_) => f.write_str("pool is closed"),
        }
    }
}

impl<T> std::error::Error for AttachError<T> {}

/// Why [`HandlePool::insert`](crate::HandlePool::insert) refused a value;
/// holds the value, which [`into_inner`](InsertError::into_inner) gives
/// back.
///
/// # Examples
///
/// ```
/// use tagpool::{HandlePool, InsertError};
///
/// let pool = HandlePool::new(1);
/// pool.insert(1).unwrap();
/// let err = pool.insert(2).unwrap_err();
/// assert_eq!(err, InsertError::Full(2));
/// assert_eq!(err.to_string(), "every entry of the handle pool is in use");
/// assert_eq!(err.into_inner(), 2);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InsertError<T> {
    /// Every entry is in use, and the pool does not evict, or every
    /// candidate for eviction was being read at each try.
    Full(T),
}

impl<T> InsertError<T> {
    /// The value that was not inserted.
    pub fn into_inner(self) -> T {
        match self {
            Self::Full(value) => value,
        }
    }
}

impl<T> fmt::Debug for InsertError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("Full(..)"),
        }
    }
}

impl<T> fmt::Display for InsertError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("every entry of the handle pool is in use"),
        }
    }
}

impl<T> std::error::Error for InsertError<T> {}
