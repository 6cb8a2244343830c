//! [`IntoIter`]: a [`Pool`] turned into an iterator over its idle values.

use core::fmt;
use core::iter::FusedIterator;

use crate::pool::Pool;
#[cfg(doc)]
use crate::pool::{OwnedPoolGuard, PoolGuard};

/// Takes the values of every idle slot and drops the pool: as object-pool's
/// `Pool` is iterated. Values held by [`OwnedPoolGuard`]s still out (the
/// pool may have been unwrapped from its `Arc` while they live) stay with
/// them, and are dropped when they are.
///
/// The values are taken at once (as [`Pool::drain_idle`] takes them), so
/// the iterator knows its length.
///
/// # Examples
///
/// ```
/// let pool = tagpool::Pool::builder(|| 0u8).capacity(4).lazy().values(vec![1, 2]).build()?;
/// let mut values: Vec<u8> = pool.into_iter().collect();
/// values.sort();
/// assert_eq!(values, [1, 2], "the slots never filled yield nothing");
/// # Ok::<(), tagpool::BuildError>(())
/// ```
impl<T, E> IntoIterator for Pool<T, E> {
    type Item = T;
    type IntoIter = IntoIter<T>;

    fn into_iter(self) -> IntoIter<T> {
        IntoIter {
            values: self.drain_idle().into_iter(),
        }
    }
}

/// The idle values of a [`Pool`], by value: the iterator of its
/// [`IntoIterator`] implementation.
///
/// The pool is gone by the time this exists, and the values are in no
/// particular order. Every value is yielded exactly once; those not
/// yielded are dropped with the iterator. A value that a [`PoolGuard`] or
/// [`OwnedPoolGuard`] held when the pool was turned into an iterator is
/// not yielded: it stays with its guard.
///
/// # Examples
///
/// ```
/// let pool = tagpool::Pool::builder(|| String::new())
///     .capacity(3)
///     .lazy() // the third slot stays empty
///     .values(vec!["a".into(), "b".into()])
///     .build()?;
/// let mut values = pool.into_iter();
/// assert_eq!(values.len(), 2);
/// let first = values.next().unwrap();
/// assert_eq!(values.len(), 1);
/// assert!(first == "a" || first == "b");
/// assert_eq!(values.count(), 1);
/// # Ok::<(), tagpool::BuildError>(())
/// ```
pub struct IntoIter<T> {
    /// The values not yielded yet.
    values: std::vec::IntoIter<T>,
}

impl<T> Iterator for IntoIter<T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        self.values.next()
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.values.size_hint()
    }

    #[inline]
    fn count(self) -> usize {
        self.values.len()
    }
}

impl<T> ExactSizeIterator for IntoIter<T> {
    #[inline]
    fn len(&self) -> usize {
        self.values.len()
    }
}

impl<T> FusedIterator for IntoIter<T> {}

/// Lists the values not yielded yet, as `std::vec::IntoIter` does.
///
/// # Examples
///
/// ```
/// let pool = tagpool::Pool::new(1, || 7u8);
/// assert_eq!(format!("{:?}", pool.into_iter()), "IntoIter([7])");
/// ```
impl<T: fmt::Debug> fmt::Debug for IntoIter<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("IntoIter")
            .field(&self.values.as_slice())
            .finish()
    }
}
