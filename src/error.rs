//! Public error types.
//!
//! The acquire errors and [`BuildError`] take the error type `E` of a
//! fallible factory ([`Pool::try_builder`](crate::Pool::try_builder)) as a
//! parameter, which defaults to [`Infallible`]: a pool from
//! [`Pool::builder`](crate::Pool::builder) returns `TryAcquireError` (that
//! is, `TryAcquireError<Infallible>`), whose `Factory` variant cannot be
//! made. Such an error is `Copy`, has no drop glue, and a `match` on it
//! needs no `Factory` arm beyond the wildcard its `#[non_exhaustive]` asks
//! for.

use core::convert::Infallible;
use core::fmt;

/// Why [`Builder::build`](crate::Builder::build) refused to build a pool.
///
/// `E` is the error of the factory of a
/// [`Pool::try_builder`](crate::Pool::try_builder), returned by an eager
/// `build` whose factory failed ([`BuildError::Factory`]); it is
/// [`Infallible`] for every other builder, whose `BuildError` is `Copy`.
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BuildError<E = Infallible> {
    /// The capacity was 0, or [`Builder::capacity`](crate::Builder::capacity)
    /// was never called.
    ZeroCapacity,
    /// The capacity was above [`MAX_CAPACITY`](crate::MAX_CAPACITY), or
    /// above [`MAX_HANDLE_CAPACITY`](crate::MAX_HANDLE_CAPACITY) for a
    /// [`HandlePool`](crate::HandlePool).
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
    /// [`Builder::max_capacity`](crate::Builder::max_capacity) was below
    /// the capacity.
    MaxBelowCapacity {
        /// The maximum asked for.
        max: usize,
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
    /// [`Builder::min_idle`](crate::Builder::min_idle) is above `limit`: the
    /// slots allocated at build (the capacity, or the
    /// [`initial`](crate::Builder::initial) size), or 0 for a pool without
    /// a factory, which cannot make values.
    MinIdle {
        /// The floor asked for.
        min_idle: usize,
        /// The most the pool can keep filled from its build.
        limit: usize,
    },
    /// A [`BufferPool`](crate::BufferPool)'s sizes make no classes: a
    /// smallest size of 0, a largest below the smallest, or one whose
    /// buffers could not be allocated (see
    /// [`BufferPoolBuilder::sizes`](crate::BufferPoolBuilder::sizes)); or a
    /// class capacity given for a size outside the classes.
    BufferSizes {
        /// The smallest size asked for.
        min: usize,
        /// The largest size asked for.
        max: usize,
    },
    /// The factory of a [`Pool::try_builder`](crate::Pool::try_builder)
    /// failed while an eager `build` filled the slots (a
    /// [lazy](crate::Builder::lazy) build runs no factory): its error. The
    /// values made so far were dropped.
    Factory(E),
}

impl<E: fmt::Display> fmt::Display for BuildError<E> {
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
            Self::MaxBelowCapacity { max, capacity } => write!(
                f,
                "maximum capacity {max} is below the capacity of {capacity}"
            ),
            Self::TooManyValues { values, capacity } => write!(
                f,
                "{values} initial values do not fit a pool capacity of {capacity}"
            ),
            Self::NoFactory { values, capacity } => write!(
                f,
                "a pool of {values} values without a factory cannot have a capacity of {capacity} or grow"
            ),
            Self::MinIdle { min_idle, limit } => write!(
                f,
                "min_idle {min_idle} is above the {limit} values the pool can keep filled from its build"
            ),
            Self::BufferSizes { min, max } => write!(
                f,
                "buffer sizes {min} to {max} make no size classes (or a class capacity is outside them)"
            ),
            Self::Factory(err) => write!(f, "the pool's factory failed: {err}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for BuildError<E> {
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
/// `E` is the error of a fallible factory
/// ([`Pool::try_builder`](crate::Pool::try_builder)); it is [`Infallible`]
/// for every other pool, and then the error is `Copy` and the `Factory`
/// variant cannot occur.
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
/// // A bare variant names `E`, the default, by a type annotation.
/// let closed: TryAcquireError = TryAcquireError::Closed;
/// assert_eq!(closed.to_string(), "pool is closed");
/// # drop(held);
/// # Ok::<(), TryAcquireError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TryAcquireError<E = Infallible> {
    /// Every slot is held: the pool may have a free slot later. Counted in
    /// [`Stats::failed_acquires`](crate::Stats::failed_acquires).
    Exhausted,
    /// The pool was [closed](crate::Pool::close): no acquire will succeed
    /// again.
    Closed,
    /// The slot taken was empty and the factory of a
    /// [`Pool::try_builder`](crate::Pool::try_builder) failed to fill it,
    /// with this error: the slot went back to the pool, still empty, and
    /// the next acquire that takes it tries the factory again.
    Factory(E),
}

impl<E: fmt::Display> fmt::Display for TryAcquireError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exhausted => f.write_str("every slot of the pool is held"),
            Self::Closed => f.write_str("pool is closed"),
            Self::Factory(err) => write!(f, "the pool's factory failed: {err}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for TryAcquireError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Factory(err) => Some(err),
            _ => None,
        }
    }
}

impl TryAcquireError {
    /// The same error, for a pool whose factory's error is `E`: the
    /// engine's errors, which no factory's error reaches, become the
    /// face's.
    #[inline(always)]
    pub(crate) fn widen<E>(self) -> TryAcquireError<E> {
        match self {
            Self::Exhausted => TryAcquireError::Exhausted,
            Self::Closed => TryAcquireError::Closed,
            Self::Factory(never) => match never {},
        }
    }
}

/// Why a waiting acquire ([`Pool::acquire`](crate::Pool::acquire),
/// [`Pool::acquire_async`](crate::Pool::acquire_async) and their owned
/// forms) returned no slot: the pool was closed, or a fallible factory
/// failed.
///
/// `E` is the error of a fallible factory, [`Infallible`] by default (see
/// [`TryAcquireError`]).
///
/// # Examples
///
/// ```
/// use tagpool::{AcquireError, Pool};
///
/// let pool = Pool::new(1, || 0u8);
/// pool.close();
/// assert_eq!(pool.acquire().unwrap_err(), AcquireError::Closed);
/// assert_eq!(pool.acquire().unwrap_err().to_string(), "pool is closed");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireError<E = Infallible> {
    /// The pool was [closed](crate::Pool::close), before or during the
    /// wait.
    Closed,
    /// The slot taken was empty and the factory of a
    /// [`Pool::try_builder`](crate::Pool::try_builder) failed to fill it,
    /// with this error (see [`TryAcquireError::Factory`]).
    Factory(E),
}

impl<E: fmt::Display> fmt::Display for AcquireError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => f.write_str("pool is closed"),
            Self::Factory(err) => write!(f, "the pool's factory failed: {err}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for AcquireError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Factory(err) => Some(err),
            Self::Closed => None,
        }
    }
}

impl AcquireError {
    /// The same error, for a pool whose factory's error is `E` (see
    /// [`TryAcquireError::widen`]).
    #[inline(always)]
    pub(crate) fn widen<E>(self) -> AcquireError<E> {
        match self {
            Self::Closed => AcquireError::Closed,
            Self::Factory(never) => match never {},
        }
    }
}

/// Why [`Pool::acquire_timeout`](crate::Pool::acquire_timeout) (or
/// [`acquire_owned_timeout`](crate::Pool::acquire_owned_timeout)) returned
/// no slot.
///
/// `E` is the error of a fallible factory, [`Infallible`] by default (see
/// [`TryAcquireError`]).
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
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AcquireTimeoutError<E = Infallible> {
    /// No slot came free in time. Counted in
    /// [`Stats::timeouts`](crate::Stats::timeouts).
    Timeout,
    /// The pool was [closed](crate::Pool::close), before or during the
    /// wait.
    Closed,
    /// The slot taken was empty and the factory of a
    /// [`Pool::try_builder`](crate::Pool::try_builder) failed to fill it,
    /// with this error (see [`TryAcquireError::Factory`]).
    Factory(E),
}

impl<E: fmt::Display> fmt::Display for AcquireTimeoutError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Timeout => f.write_str("timed out waiting for a slot"),
            Self::Closed => f.write_str("pool is closed"),
            Self::Factory(err) => write!(f, "the pool's factory failed: {err}"),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for AcquireTimeoutError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Factory(err) => Some(err),
            _ => None,
        }
    }
}

impl AcquireTimeoutError {
    /// The same error, for a pool whose factory's error is `E` (see
    /// [`TryAcquireError::widen`]).
    #[inline(always)]
    pub(crate) fn widen<E>(self) -> AcquireTimeoutError<E> {
        match self {
            Self::Timeout => AcquireTimeoutError::Timeout,
            Self::Closed => AcquireTimeoutError::Closed,
            Self::Factory(never) => match never {},
        }
    }
}

impl<E> From<AcquireError<E>> for AcquireTimeoutError<E> {
    fn from(err: AcquireError<E>) -> Self {
        match err {
            AcquireError::Closed => Self::Closed,
            AcquireError::Factory(err) => Self::Factory(err),
        }
    }
}

/// Why [`Pool::attach`](crate::Pool::attach) refused a value; holds the
/// value, which [`into_inner`](AttachError::into_inner) gives back.
///
/// Like every error enum of the crate, it is `#[non_exhaustive]`: a `match`
/// on it needs a wildcard arm, and `into_inner` gives the value back
/// whatever the variant.
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
#[non_exhaustive]
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
/// holds the value (or, from
/// [`insert_with_key`](crate::HandlePool::insert_with_key), the closure,
/// never called), which [`into_inner`](InsertError::into_inner) gives
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
    /// [`HandlePool::insert_reserved`](crate::HandlePool::insert_reserved)
    /// was given a [`Reservation`](crate::Reservation) of another pool
    /// (a pool's own reservation is always filled).
    NotReserved(T),
}

impl<T> InsertError<T> {
    /// The value that was not inserted.
    pub fn into_inner(self) -> T {
        match self {
            Self::Full(value) | Self::NotReserved(value) => value,
        }
    }
}

impl<T> fmt::Debug for InsertError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("Full(..)"),
            Self::NotReserved(_) => f.write_str("NotReserved(..)"),
        }
    }
}

impl<T> fmt::Display for InsertError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(_) => f.write_str("every entry of the handle pool is in use"),
            Self::NotReserved(_) => f.write_str("the reservation is another pool's"),
        }
    }
}

impl<T> std::error::Error for InsertError<T> {}

/// Why [`Pool::set_capacity`](crate::Pool::set_capacity) refused a
/// capacity: zero, or above the maximum fixed at build
/// ([`Builder::max_capacity`](crate::Builder::max_capacity)). The bound is
/// unchanged.
///
/// # Examples
///
/// ```
/// use tagpool::{CapacityError, Pool};
///
/// let pool = Pool::new(4, || 0u8);
/// assert_eq!(pool.set_capacity(0), Err(CapacityError::Zero));
/// let err = pool.set_capacity(5).unwrap_err();
/// assert_eq!(err, CapacityError::AboveMax { requested: 5, max: 4 });
/// assert_eq!(err.to_string(), "capacity 5 is above the pool's maximum of 4");
/// assert_eq!(pool.capacity(), 4);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CapacityError {
    /// A capacity of zero: a pool serves at least one slot (to stop
    /// serving, [`close`](crate::Pool::close) it).
    Zero,
    /// A capacity above the pool's maximum, `max`.
    AboveMax {
        /// The capacity asked for.
        requested: usize,
        /// The pool's maximum
        /// ([`Pool::max_capacity`](crate::Pool::max_capacity)).
        max: usize,
    },
}

impl fmt::Display for CapacityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Zero => f.write_str("a pool's capacity cannot be zero"),
            Self::AboveMax { requested, max } => write!(
                f,
                "capacity {requested} is above the pool's maximum of {max}"
            ),
        }
    }
}

impl std::error::Error for CapacityError {}

/// Why [`HandlePool::insert_at`](crate::HandlePool::insert_at) refused a
/// value; holds the value, which [`into_inner`](InsertAtError::into_inner)
/// gives back. The pool is unchanged.
///
/// # Examples
///
/// ```
/// use tagpool::{Handle, HandlePool, InsertAtError};
///
/// let mut pool = HandlePool::new(2);
/// let a = pool.insert_mut("a").unwrap();
/// let err = pool.insert_at(a, "b").unwrap_err();
/// assert_eq!(err, InsertAtError::Occupied("b"));
/// assert_eq!(err.to_string(), "the key's entry holds a value");
/// assert_eq!(err.into_inner(), "b");
/// let far = Handle::from_bits(1 << 24 | 7).unwrap(); // index 7, generation 1
/// assert_eq!(pool.insert_at(far, "c"), Err(InsertAtError::OutOfRange("c")));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InsertAtError<T> {
    /// The key's entry holds a value: a live one, under this key or
    /// another generation (remove it first), or one removed while a leaked
    /// [`Ref`](crate::Ref) still counts it.
    Occupied(T),
    /// The key is older than its entry: the entry has moved past the key's
    /// generation (the key's value was removed, or a later key of the entry
    /// was handed out), and a stale key never names a value again.
    Stale(T),
    /// The key's entry is retired: it held its last generation
    /// ([`Handle::MAX_GENERATION`](crate::Handle::MAX_GENERATION)) and
    /// never holds a value again.
    Retired(T),
    /// The key's index is at or above the pool's capacity.
    OutOfRange(T),
}

impl<T> InsertAtError<T> {
    /// The value that was not inserted.
    pub fn into_inner(self) -> T {
        match self {
            Self::Occupied(value)
            | Self::Stale(value)
            | Self::Retired(value)
            | Self::OutOfRange(value) => value,
        }
    }
}

impl<T> fmt::Debug for InsertAtError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Occupied(_) => "Occupied(..)",
            Self::Stale(_) => "Stale(..)",
            Self::Retired(_) => "Retired(..)",
            Self::OutOfRange(_) => "OutOfRange(..)",
        })
    }
}

impl<T> fmt::Display for InsertAtError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Occupied(_) => "the key's entry holds a value",
            Self::Stale(_) => "the key is older than its entry's generation",
            Self::Retired(_) => "the key's entry is retired",
            Self::OutOfRange(_) => "the key's index is beyond the pool's capacity",
        })
    }
}

impl<T> std::error::Error for InsertAtError<T> {}
