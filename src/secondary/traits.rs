//! The std traits of both secondary maps: `Default`, `Debug`, `PartialEq`
//! and `Eq`, `Index` and `IndexMut` (which panic without a value),
//! `FromIterator` and `Extend` (which insert by the generation rules), and
//! `IntoIterator` for the map, `&map` and `&mut map`.

use core::fmt;
use core::hash::BuildHasher;
use core::ops::{Index, IndexMut};

use super::iter::{SecondaryIntoIter, SecondaryIter, SecondaryIterMut};
use super::{SecondaryMap, SparseSecondaryMap};
use crate::handle::Key;

impl<K: Key, V> Default for SecondaryMap<K, V> {
    /// An empty map, as [`new`](SecondaryMap::new).
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Key, V, S: Default> Default for SparseSecondaryMap<K, V, S> {
    /// An empty map, with `S::default()` for a hasher.
    fn default() -> Self {
        Self::with_hasher(S::default())
    }
}

impl<K: Key, V: fmt::Debug> fmt::Debug for SecondaryMap<K, V> {
    /// The map as `{key: value, ...}`, in index order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Key, V: fmt::Debug, S> fmt::Debug for SparseSecondaryMap<K, V, S> {
    /// The map as `{key: value, ...}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Key, V: PartialEq> PartialEq for SecondaryMap<K, V> {
    /// Whether both maps have the same keys, with equal values (however
    /// long their storage).
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|(key, value)| other.get(key) == Some(value))
    }
}

impl<K: Key, V: Eq> Eq for SecondaryMap<K, V> {}

impl<K: Key, V: PartialEq, S: BuildHasher> PartialEq for SparseSecondaryMap<K, V, S> {
    /// Whether both maps have the same keys, with equal values.
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len()
            && self
                .iter()
                .all(|(key, value)| other.get(key) == Some(value))
    }
}

impl<K: Key, V: Eq, S: BuildHasher> Eq for SparseSecondaryMap<K, V, S> {}

impl<K: Key, V> Index<K> for SecondaryMap<K, V> {
    type Output = V;

    /// The value under `key`.
    ///
    /// # Panics
    ///
    /// If the map has no value under `key` (see [`get`](SecondaryMap::get)
    /// for an `Option`).
    #[track_caller]
    fn index(&self, key: K) -> &V {
        match self.get(key) {
            Some(value) => value,
            None => super::absent(key),
        }
    }
}

impl<K: Key, V> IndexMut<K> for SecondaryMap<K, V> {
    /// The value under `key`, mutably.
    ///
    /// # Panics
    ///
    /// If the map has no value under `key` (see
    /// [`get_mut`](SecondaryMap::get_mut) for an `Option`).
    #[track_caller]
    fn index_mut(&mut self, key: K) -> &mut V {
        match self.get_mut(key) {
            Some(value) => value,
            None => super::absent(key),
        }
    }
}

impl<K: Key, V, S: BuildHasher> Index<K> for SparseSecondaryMap<K, V, S> {
    type Output = V;

    /// The value under `key`.
    ///
    /// # Panics
    ///
    /// If the map has no value under `key` (see
    /// [`get`](SparseSecondaryMap::get) for an `Option`).
    #[track_caller]
    fn index(&self, key: K) -> &V {
        match self.get(key) {
            Some(value) => value,
            None => super::absent(key),
        }
    }
}

impl<K: Key, V, S: BuildHasher> IndexMut<K> for SparseSecondaryMap<K, V, S> {
    /// The value under `key`, mutably.
    ///
    /// # Panics
    ///
    /// If the map has no value under `key` (see
    /// [`get_mut`](SparseSecondaryMap::get_mut) for an `Option`).
    #[track_caller]
    fn index_mut(&mut self, key: K) -> &mut V {
        match self.get_mut(key) {
            Some(value) => value,
            None => super::absent(key),
        }
    }
}

impl<K: Key, V> Extend<(K, V)> for SecondaryMap<K, V> {
    /// Inserts each pair in turn, by the [generation
    /// rules](SecondaryMap#generations): a later pair of the same key
    /// replaces an earlier one, an older key than the one stored is
    /// refused.
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, pairs: I) {
        for (key, value) in pairs {
            self.insert(key, value);
        }
    }
}

impl<K: Key, V, S: BuildHasher> Extend<(K, V)> for SparseSecondaryMap<K, V, S> {
    /// Inserts each pair in turn, by the [generation
    /// rules](SecondaryMap#generations).
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, pairs: I) {
        for (key, value) in pairs {
            self.insert(key, value);
        }
    }
}

impl<K: Key, V> FromIterator<(K, V)> for SecondaryMap<K, V> {
    /// A map of the pairs, inserted in turn as [`Extend`] does.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let mut map = Self::new();
        map.extend(pairs);
        map
    }
}

impl<K: Key, V, S: BuildHasher + Default> FromIterator<(K, V)> for SparseSecondaryMap<K, V, S> {
    /// A map of the pairs, inserted in turn as [`Extend`] does.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(pairs: I) -> Self {
        let mut map = Self::default();
        map.extend(pairs);
        map
    }
}

impl<K: Key, V> IntoIterator for SecondaryMap<K, V> {
    type Item = (K, V);
    type IntoIter = SecondaryIntoIter<K, V>;

    /// The keys and values, by value, in index order.
    fn into_iter(self) -> Self::IntoIter {
        SecondaryIntoIter::dense(self.cells.into_iter(), self.len)
    }
}

impl<K: Key, V, S> IntoIterator for SparseSecondaryMap<K, V, S> {
    type Item = (K, V);
    type IntoIter = SecondaryIntoIter<K, V>;

    /// The keys and values, by value, in no particular order.
    fn into_iter(self) -> Self::IntoIter {
        SecondaryIntoIter::sparse(self.pairs.into_iter())
    }
}

impl<'a, K: Key, V> IntoIterator for &'a SecondaryMap<K, V> {
    type Item = (K, &'a V);
    type IntoIter = SecondaryIter<'a, K, V>;

    /// [`iter`](SecondaryMap::iter).
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, K: Key, V, S> IntoIterator for &'a SparseSecondaryMap<K, V, S> {
    type Item = (K, &'a V);
    type IntoIter = SecondaryIter<'a, K, V>;

    /// [`iter`](SparseSecondaryMap::iter).
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl<'a, K: Key, V> IntoIterator for &'a mut SecondaryMap<K, V> {
    type Item = (K, &'a mut V);
    type IntoIter = SecondaryIterMut<'a, K, V>;

    /// [`iter_mut`](SecondaryMap::iter_mut).
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}

impl<'a, K: Key, V, S> IntoIterator for &'a mut SparseSecondaryMap<K, V, S> {
    type Item = (K, &'a mut V);
    type IntoIter = SecondaryIterMut<'a, K, V>;

    /// [`iter_mut`](SparseSecondaryMap::iter_mut).
    fn into_iter(self) -> Self::IntoIter {
        self.iter_mut()
    }
}
