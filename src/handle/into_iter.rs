//! `IntoIterator` for a [`HandlePool`]: by value ([`HandleIntoIter`], each
//! live value with its key) and by `&mut` ([`IterMut`]).
//!
//! Not for `&HandlePool`: a shared pool's values may be removed by other
//! threads while an item lives, so its iterators yield counted
//! [`Ref`](super::Ref)s ([`HandlePool::iter`]) or borrow a
//! [`ReadSection`](super::ReadSection) ([`ReadSection::iter`](super::ReadSection::iter)),
//! whose items cannot outlive the section: neither fits `IntoIterator for
//! &HandlePool`, whose items would have to borrow the pool alone.

use core::fmt;
use core::iter::FusedIterator;

use super::iter::{IterMut, Span};
use super::{Handle, HandlePool, Key};

/// The iterator of a [`HandlePool`] taken by value (`for (key, value) in
/// pool`): each live value with its key, in index order (from the back
/// too), moved out of the pool.
///
/// Values it has not yielded are dropped with it, as the pool drops them
/// (values that awaited a grace period, or that a leaked
/// [`Ref`](super::Ref) kept after their removal, are never yielded: their
/// keys were stale already).
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(4);
/// let a = pool.insert(String::from("a")).unwrap();
/// let b = pool.insert(String::from("b")).unwrap();
/// let mut values = pool.into_iter();
/// assert_eq!(values.len(), 2);
/// assert_eq!(values.next_back(), Some((b, String::from("b"))));
/// assert_eq!(values.next(), Some((a, String::from("a"))));
/// assert_eq!(values.next(), None);
/// ```
#[must_use = "iterators are lazy and do nothing unless consumed"]
pub struct HandleIntoIter<T, K = Handle> {
    /// Owned: no other thread can reach it.
    pool: HandlePool<T, K>,
    span: Span,
}

impl<T, K: Key> IntoIterator for HandlePool<T, K> {
    type Item = (K, T);
    type IntoIter = HandleIntoIter<T, K>;

    /// Moves every live value out, with its key, in index order.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(2);
    /// let h = pool.insert('x').unwrap();
    /// assert_eq!(pool.into_iter().collect::<Vec<_>>(), [(h, 'x')]);
    /// ```
    fn into_iter(mut self) -> HandleIntoIter<T, K> {
        HandleIntoIter {
            span: Span::new(&mut self),
            pool: self,
        }
    }
}

impl<'a, T, K: Key> IntoIterator for &'a mut HandlePool<T, K> {
    type Item = (K, &'a mut T);
    type IntoIter = IterMut<'a, T, K>;

    /// [`iter_mut`](HandlePool::iter_mut).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(2);
    /// let h = pool.insert(1).unwrap();
    /// for (_, value) in &mut pool {
    ///     *value += 1;
    /// }
    /// assert_eq!(pool.get_mut(h), Some(&mut 2));
    /// ```
    fn into_iter(self) -> IterMut<'a, T, K> {
        self.iter_mut()
    }
}

impl<T, K: Key> Iterator for HandleIntoIter<T, K> {
    type Item = (K, T);

    fn next(&mut self) -> Option<(K, T)> {
        self.span.next(&mut self.pool)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.span.remaining(), Some(self.span.remaining()))
    }
}

impl<T, K: Key> DoubleEndedIterator for HandleIntoIter<T, K> {
    fn next_back(&mut self) -> Option<(K, T)> {
        self.span.next_back(&mut self.pool)
    }
}

impl<T, K: Key> ExactSizeIterator for HandleIntoIter<T, K> {}

impl<T, K: Key> FusedIterator for HandleIntoIter<T, K> {}

impl<T, K> fmt::Debug for HandleIntoIter<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandleIntoIter")
            .field("remaining", &self.span.remaining())
            .finish_non_exhaustive()
    }
}
