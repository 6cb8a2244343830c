//! The iterators of both secondary maps: [`SecondaryIter`],
//! [`SecondaryIterMut`], [`SecondaryKeys`], [`SecondaryValues`],
//! [`SecondaryValuesMut`], [`SecondaryDrain`] and [`SecondaryIntoIter`].
//! Each walks a [`SecondaryMap`]'s cells (skipping the empty ones) or a
//! [`SparseSecondaryMap`]'s pairs, and counts what is left, so that each is
//! an `ExactSizeIterator`.

use core::fmt;
use core::iter::FusedIterator;
use core::slice;
use std::collections::hash_map;
use std::vec;

use crate::handle::Key;

#[cfg(doc)]
use super::{SecondaryMap, SparseSecondaryMap};

/// What an iterator walks: a dense map's cells, or a sparse map's pairs.
#[derive(Clone)]
enum Walk<D, S> {
    Dense(D),
    Sparse(S),
}

/// A dense map's cell: a key and its value, or nothing.
type Cell<K, V> = Option<(K, V)>;

/// What a [`SecondaryIter`] walks.
type WalkRef<'a, K, V> = Walk<slice::Iter<'a, Cell<K, V>>, hash_map::Values<'a, u32, (K, V)>>;

/// What a [`SecondaryIterMut`] walks.
type WalkMut<'a, K, V> = Walk<slice::IterMut<'a, Cell<K, V>>, hash_map::ValuesMut<'a, u32, (K, V)>>;

/// What a [`SecondaryDrain`] walks.
type WalkDrain<'a, K, V> = Walk<vec::Drain<'a, Cell<K, V>>, hash_map::Drain<'a, u32, (K, V)>>;

/// What a [`SecondaryIntoIter`] walks.
type WalkOwned<K, V> = Walk<vec::IntoIter<Cell<K, V>>, hash_map::IntoIter<u32, (K, V)>>;

/// Iterates the keys and values of a [`SecondaryMap`] (in index order) or a
/// [`SparseSecondaryMap`] (in no particular order): their `iter` and
/// `&map`'s `into_iter`.
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(4);
/// let mut map = tagpool::SecondaryMap::new();
/// let a = pool.insert(()).unwrap();
/// map.insert(a, 1);
/// let mut iter = map.iter();
/// assert_eq!(iter.len(), 1);
/// assert_eq!(iter.next(), Some((a, &1)));
/// assert_eq!(iter.next(), None);
/// ```
pub struct SecondaryIter<'a, K, V> {
    walk: WalkRef<'a, K, V>,
    /// The pairs not yielded yet.
    left: usize,
}

/// Iterates the keys of a [`SecondaryMap`] or a [`SparseSecondaryMap`] and
/// `&mut`s to their values: their `iter_mut` and `&mut map`'s `into_iter`.
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(4);
/// let mut map = tagpool::SparseSecondaryMap::new();
/// let a = pool.insert(()).unwrap();
/// map.insert(a, 1);
/// for (_, value) in &mut map {
///     *value += 1;
/// }
/// assert_eq!(map[a], 2);
/// ```
pub struct SecondaryIterMut<'a, K, V> {
    walk: WalkMut<'a, K, V>,
    /// The pairs not yielded yet.
    left: usize,
}

/// Iterates the keys of a [`SecondaryMap`] or a [`SparseSecondaryMap`]:
/// their `keys`.
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(4);
/// let mut map = tagpool::SecondaryMap::new();
/// let a = pool.insert(()).unwrap();
/// map.insert(a, "a");
/// assert_eq!(map.keys().collect::<Vec<_>>(), [a]);
/// ```
pub struct SecondaryKeys<'a, K, V> {
    pub(super) inner: SecondaryIter<'a, K, V>,
}

/// Iterates the values of a [`SecondaryMap`] or a [`SparseSecondaryMap`]:
/// their `values`.
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(4);
/// let mut map = tagpool::SecondaryMap::new();
/// map.insert(pool.insert(()).unwrap(), 2);
/// map.insert(pool.insert(()).unwrap(), 3);
/// assert_eq!(map.values().product::<i32>(), 6);
/// ```
pub struct SecondaryValues<'a, K, V> {
    pub(super) inner: SecondaryIter<'a, K, V>,
}

/// Iterates `&mut`s to the values of a [`SecondaryMap`] or a
/// [`SparseSecondaryMap`]: their `values_mut`.
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(4);
/// let mut map = tagpool::SecondaryMap::new();
/// let a = pool.insert(()).unwrap();
/// map.insert(a, 2);
/// map.values_mut().for_each(|value| *value *= 2);
/// assert_eq!(map[a], 4);
/// ```
pub struct SecondaryValuesMut<'a, K, V> {
    pub(super) inner: SecondaryIterMut<'a, K, V>,
}

/// Removes and yields the keys and values of a [`SecondaryMap`] (in index
/// order) or a [`SparseSecondaryMap`]: their `drain`. Dropped before its
/// end, it drops the values left; the map is empty in any case.
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(4);
/// let mut map = tagpool::SecondaryMap::new();
/// map.insert(pool.insert(()).unwrap(), 1);
/// map.insert(pool.insert(()).unwrap(), 2);
/// let mut drain = map.drain();
/// assert_eq!(drain.next().map(|(_, value)| value), Some(1));
/// drop(drain); // drops the 2
/// assert!(map.is_empty());
/// ```
pub struct SecondaryDrain<'a, K, V> {
    walk: WalkDrain<'a, K, V>,
    /// The pairs not yielded yet.
    left: usize,
}

/// Yields the keys and values of a [`SecondaryMap`] (in index order) or a
/// [`SparseSecondaryMap`], by value: the map's `into_iter`.
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(4);
/// let mut map = tagpool::SecondaryMap::new();
/// let a = pool.insert(()).unwrap();
/// map.insert(a, String::from("a"));
/// let pairs: Vec<_> = map.into_iter().collect();
/// assert_eq!(pairs, [(a, String::from("a"))]);
/// ```
pub struct SecondaryIntoIter<K, V> {
    walk: WalkOwned<K, V>,
    /// The pairs not yielded yet.
    left: usize,
}

impl<'a, K, V> SecondaryIter<'a, K, V> {
    pub(super) fn dense(cells: slice::Iter<'a, Option<(K, V)>>, len: usize) -> Self {
        let walk = Walk::Dense(cells);
        Self { walk, left: len }
    }

    pub(super) fn sparse(pairs: hash_map::Values<'a, u32, (K, V)>) -> Self {
        let left = pairs.len();
        let walk = Walk::Sparse(pairs);
        Self { walk, left }
    }
}

impl<'a, K, V> SecondaryIterMut<'a, K, V> {
    pub(super) fn dense(cells: slice::IterMut<'a, Option<(K, V)>>, len: usize) -> Self {
        let walk = Walk::Dense(cells);
        Self { walk, left: len }
    }

    pub(super) fn sparse(pairs: hash_map::ValuesMut<'a, u32, (K, V)>) -> Self {
        let left = pairs.len();
        let walk = Walk::Sparse(pairs);
        Self { walk, left }
    }
}

impl<'a, K, V> SecondaryDrain<'a, K, V> {
    pub(super) fn dense(cells: vec::Drain<'a, Option<(K, V)>>, len: usize) -> Self {
        let walk = Walk::Dense(cells);
        Self { walk, left: len }
    }

    pub(super) fn sparse(pairs: hash_map::Drain<'a, u32, (K, V)>) -> Self {
        let left = pairs.len();
        let walk = Walk::Sparse(pairs);
        Self { walk, left }
    }
}

impl<K, V> SecondaryIntoIter<K, V> {
    pub(super) fn dense(cells: vec::IntoIter<Option<(K, V)>>, len: usize) -> Self {
        let walk = Walk::Dense(cells);
        Self { walk, left: len }
    }

    pub(super) fn sparse(pairs: hash_map::IntoIter<u32, (K, V)>) -> Self {
        let left = pairs.len();
        let walk = Walk::Sparse(pairs);
        Self { walk, left }
    }
}

impl<'a, K: Key, V> Iterator for SecondaryIter<'a, K, V> {
    type Item = (K, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        // At 0, a dense walk stops without looking at the empty cells left.
        if self.left == 0 {
            return None;
        }
        let (key, value) = match &mut self.walk {
            Walk::Dense(cells) => cells.find_map(Option::as_ref),
            Walk::Sparse(pairs) => pairs.next(),
        }?;
        self.left -= 1;
        Some((*key, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<'a, K: Key, V> Iterator for SecondaryIterMut<'a, K, V> {
    type Item = (K, &'a mut V);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let (key, value) = match &mut self.walk {
            Walk::Dense(cells) => cells.find_map(Option::as_mut),
            Walk::Sparse(pairs) => pairs.next(),
        }?;
        self.left -= 1;
        Some((*key, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<K: Key, V> Iterator for SecondaryDrain<'_, K, V> {
    type Item = (K, V);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let pair = match &mut self.walk {
            Walk::Dense(cells) => cells.flatten().next(),
            Walk::Sparse(pairs) => pairs.next().map(|(_, pair)| pair),
        }?;
        self.left -= 1;
        Some(pair)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<K: Key, V> Iterator for SecondaryIntoIter<K, V> {
    type Item = (K, V);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let pair = match &mut self.walk {
            Walk::Dense(cells) => cells.flatten().next(),
            Walk::Sparse(pairs) => pairs.next().map(|(_, pair)| pair),
        }?;
        self.left -= 1;
        Some(pair)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<'a, K: Key, V> Iterator for SecondaryKeys<'a, K, V> {
    type Item = K;

    fn next(&mut self) -> Option<K> {
        self.inner.next().map(|(key, _)| key)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<'a, K: Key, V> Iterator for SecondaryValues<'a, K, V> {
    type Item = &'a V;

    fn next(&mut self) -> Option<&'a V> {
        self.inner.next().map(|(_, value)| value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

impl<'a, K: Key, V> Iterator for SecondaryValuesMut<'a, K, V> {
    type Item = &'a mut V;

    fn next(&mut self) -> Option<&'a mut V> {
        self.inner.next().map(|(_, value)| value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.inner.size_hint()
    }
}

/// `ExactSizeIterator` and `FusedIterator`: each yields exactly `left`
/// more items, then `None` for good.
macro_rules! exact_and_fused {
    ($($iter:ident $(<$a:lifetime>)?),*) => {$(
        impl<$($a,)? K: Key, V> ExactSizeIterator for $iter<$($a,)? K, V> {}
        impl<$($a,)? K: Key, V> FusedIterator for $iter<$($a,)? K, V> {}
    )*};
}

exact_and_fused!(
    SecondaryIter<'a>,
    SecondaryIterMut<'a>,
    SecondaryKeys<'a>,
    SecondaryValues<'a>,
    SecondaryValuesMut<'a>,
    SecondaryDrain<'a>,
    SecondaryIntoIter
);

impl<K, V> Clone for SecondaryIter<'_, K, V> {
    fn clone(&self) -> Self {
        let walk = self.walk.clone();
        Self { walk, ..*self }
    }
}

impl<K, V> Clone for SecondaryKeys<'_, K, V> {
    fn clone(&self) -> Self {
        let inner = self.inner.clone();
        Self { inner }
    }
}

impl<K, V> Clone for SecondaryValues<'_, K, V> {
    fn clone(&self) -> Self {
        let inner = self.inner.clone();
        Self { inner }
    }
}

/// The `Debug` of an iterator: its name and how many items it has left
/// (not the items: that would ask `V: Debug` of iterators over `&mut V`,
/// and of a drain, items it may never yield).
macro_rules! debug_left {
    ($($iter:ident $(<$a:lifetime>)? => $($left:ident).+),*) => {$(
        impl<$($a,)? K, V> fmt::Debug for $iter<$($a,)? K, V> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($iter)).field("left", &self.$($left).+).finish()
            }
        }
    )*};
}

debug_left!(
    SecondaryIter<'a> => left,
    SecondaryIterMut<'a> => left,
    SecondaryKeys<'a> => inner.left,
    SecondaryValues<'a> => inner.left,
    SecondaryValuesMut<'a> => inner.left,
    SecondaryDrain<'a> => left,
    SecondaryIntoIter => left
);
