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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
        }
    }
}

impl std::error::Error for BuildError {}
