//! [`Entry`]: one key's place in a [`SecondaryMap`] or a
//! [`SparseSecondaryMap`], occupied or vacant, to act on in place.

use core::fmt;
use std::collections::hash_map;

use crate::handle::Key;

#[cfg(doc)]
use super::{SecondaryMap, SparseSecondaryMap};

/// A key's place in a [`SecondaryMap`] or a [`SparseSecondaryMap`], from
/// their `entry` methods: [`Occupied`](Entry::Occupied) when the map has a
/// value under this very key, [`Vacant`](Entry::Vacant) when it has none at
/// the key's index or one of an older generation (which an insert drops).
///
/// # Examples
///
/// ```
/// use tagpool::{Entry, SecondaryMap};
///
/// let pool = tagpool::HandlePool::new(4);
/// let mut map = SecondaryMap::new();
/// let a = pool.insert(()).unwrap();
/// match map.entry(a).unwrap() {
///     Entry::Occupied(_) => unreachable!(),
///     Entry::Vacant(vacant) => {
///         vacant.insert(1);
///     }
/// }
/// assert!(matches!(map.entry(a), Some(Entry::Occupied(_))));
/// ```
pub enum Entry<'a, K: Key, V> {
    /// The map has a value under the key.
    Occupied(OccupiedEntry<'a, K, V>),
    /// The map has no value under the key.
    Vacant(VacantEntry<'a, K, V>),
}

/// An [`Entry`] whose key has a value in the map.
///
/// # Examples
///
/// ```
/// use tagpool::Entry;
///
/// let pool = tagpool::HandlePool::new(4);
/// let mut map = tagpool::SecondaryMap::new();
/// let a = pool.insert(()).unwrap();
/// map.insert(a, 1);
/// if let Some(Entry::Occupied(mut occupied)) = map.entry(a) {
///     *occupied.get_mut() += 1;
/// }
/// assert_eq!(map[a], 2);
/// ```
pub struct OccupiedEntry<'a, K: Key, V> {
    /// The key; the value stored is under this very key.
    key: K,
    place: Occupied<'a, K, V>,
}

/// Where an occupied entry's value is.
enum Occupied<'a, K, V> {
    /// A `SecondaryMap`'s cell, which is `Some` (with the entry's key) for
    /// as long as the entry lives, and the map's count of `Some` cells.
    Dense {
        cell: &'a mut Option<(K, V)>,
        len: &'a mut usize,
    },
    /// A `SparseSecondaryMap`'s pair, under the entry's key.
    Sparse(hash_map::OccupiedEntry<'a, u32, (K, V)>),
}

/// An [`Entry`] whose key has no value in the map: inserting through it
/// stores one (dropping a value of an older generation at its index).
///
/// # Examples
///
/// ```
/// use tagpool::Entry;
///
/// let pool = tagpool::HandlePool::new(4);
/// let mut map = tagpool::SparseSecondaryMap::new();
/// let a = pool.insert(()).unwrap();
/// if let Some(Entry::Vacant(vacant)) = map.entry(a) {
///     assert_eq!(vacant.key(), a);
///     *vacant.insert(1) += 1;
/// }
/// assert_eq!(map[a], 2);
/// ```
pub struct VacantEntry<'a, K: Key, V> {
    /// The key, which no value in the map is under.
    key: K,
    place: Vacant<'a, K, V>,
}

/// Where a vacant entry's value goes.
enum Vacant<'a, K, V> {
    /// A `SecondaryMap`'s cell (`None`, or a key older than the entry's),
    /// and the map's count of `Some` cells.
    Dense {
        cell: &'a mut Option<(K, V)>,
        len: &'a mut usize,
    },
    /// A `SparseSecondaryMap`'s place: vacant, or a pair under a key older
    /// than the entry's.
    Sparse(hash_map::Entry<'a, u32, (K, V)>),
}

impl<'a, K: Key, V> Entry<'a, K, V> {
    /// The value, inserting `default` first if the entry is vacant.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// *map.entry(a).unwrap().or_insert(10) += 1;
    /// *map.entry(a).unwrap().or_insert(10) += 1;
    /// assert_eq!(map[a], 12);
    /// ```
    pub fn or_insert(self, default: V) -> &'a mut V {
        self.or_insert_with(|| default)
    }

    /// The value, inserting `default()` first if the entry is vacant (only
    /// then is `default` called).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.entry(a).unwrap().or_insert_with(Vec::new).push(1);
    /// map.entry(a).unwrap().or_insert_with(|| unreachable!()).push(2);
    /// assert_eq!(map[a], [1, 2]);
    /// ```
    pub fn or_insert_with(self, default: impl FnOnce() -> V) -> &'a mut V {
        match self {
            Entry::Occupied(occupied) => occupied.into_mut(),
            Entry::Vacant(vacant) => vacant.insert(default()),
        }
    }

    /// The value, inserting `default(key)` first if the entry is vacant.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// let name = map.entry(a).unwrap().or_insert_with_key(|key| format!("#{}", key.index()));
    /// assert_eq!(name, "#0");
    /// ```
    pub fn or_insert_with_key(self, default: impl FnOnce(K) -> V) -> &'a mut V {
        match self {
            Entry::Occupied(occupied) => occupied.into_mut(),
            Entry::Vacant(vacant) => {
                let value = default(vacant.key);
                vacant.insert(value)
            }
        }
    }

    /// The value, inserting `V::default()` first if the entry is vacant.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::<_, u32>::new();
    /// let a = pool.insert(()).unwrap();
    /// *map.entry(a).unwrap().or_default() += 5;
    /// assert_eq!(map[a], 5);
    /// ```
    pub fn or_default(self) -> &'a mut V
    where
        V: Default,
    {
        self.or_insert_with(V::default)
    }

    /// Calls `f` on the value if the entry is occupied, and returns the
    /// entry.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// for _ in 0..3 {
    ///     map.entry(a).unwrap().and_modify(|n| *n += 1).or_insert(0);
    /// }
    /// assert_eq!(map[a], 2);
    /// ```
    pub fn and_modify(mut self, f: impl FnOnce(&mut V)) -> Self {
        if let Entry::Occupied(occupied) = &mut self {
            f(occupied.get_mut());
        }
        self
    }

    /// The entry's key.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::<_, u8>::new();
    /// let a = pool.insert(()).unwrap();
    /// assert_eq!(map.entry(a).unwrap().key(), a);
    /// ```
    pub fn key(&self) -> K {
        match self {
            Entry::Occupied(occupied) => occupied.key,
            Entry::Vacant(vacant) => vacant.key,
        }
    }
}

impl<'a, K: Key, V> OccupiedEntry<'a, K, V> {
    /// The entry of `key` at `cell`, which holds a value under `key`.
    pub(super) fn dense(key: K, cell: &'a mut Option<(K, V)>, len: &'a mut usize) -> Self {
        debug_assert!(matches!(cell, Some((stored, _)) if *stored == key));
        let place = Occupied::Dense { cell, len };
        Self { key, place }
    }

    /// The entry of `key` at `pair`, a pair under `key`.
    pub(super) fn sparse(key: K, pair: hash_map::OccupiedEntry<'a, u32, (K, V)>) -> Self {
        let place = Occupied::Sparse(pair);
        Self { key, place }
    }

    /// The entry's key.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::Entry;
    ///
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// if let Some(Entry::Occupied(occupied)) = map.entry(a) {
    ///     assert_eq!(occupied.key(), a);
    /// }
    /// ```
    pub fn key(&self) -> K {
        self.key
    }

    /// The value.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::Entry;
    ///
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// if let Some(Entry::Occupied(occupied)) = map.entry(a) {
    ///     assert_eq!(occupied.get(), &1);
    /// }
    /// ```
    pub fn get(&self) -> &V {
        match &self.place {
            Occupied::Dense { cell, .. } => &occupied(cell).1,
            Occupied::Sparse(pair) => &pair.get().1,
        }
    }

    /// The value, mutably, for as long as the entry lives (see
    /// [`into_mut`](OccupiedEntry::into_mut) for longer).
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::Entry;
    ///
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// if let Some(Entry::Occupied(mut occupied)) = map.entry(a) {
    ///     *occupied.get_mut() += 1;
    ///     assert_eq!(occupied.get(), &2);
    /// }
    /// ```
    pub fn get_mut(&mut self) -> &mut V {
        match &mut self.place {
            Occupied::Dense { cell, .. } => &mut occupied_mut(cell).1,
            Occupied::Sparse(pair) => &mut pair.get_mut().1,
        }
    }

    /// The value, mutably, for as long as the map is borrowed.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::Entry;
    ///
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// let value = match map.entry(a) {
    ///     Some(Entry::Occupied(occupied)) => occupied.into_mut(),
    ///     _ => unreachable!(),
    /// };
    /// *value = 5;
    /// assert_eq!(map[a], 5);
    /// ```
    pub fn into_mut(self) -> &'a mut V {
        match self.place {
            Occupied::Dense { cell, .. } => &mut occupied_mut(cell).1,
            Occupied::Sparse(pair) => &mut pair.into_mut().1,
        }
    }

    /// Replaces the value with `value`, and returns the old one.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::Entry;
    ///
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, "old");
    /// if let Some(Entry::Occupied(mut occupied)) = map.entry(a) {
    ///     assert_eq!(occupied.insert("new"), "old");
    /// }
    /// assert_eq!(map[a], "new");
    /// ```
    pub fn insert(&mut self, value: V) -> V {
        core::mem::replace(self.get_mut(), value)
    }

    /// Removes the value from the map, and returns it.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::Entry;
    ///
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// if let Some(Entry::Occupied(occupied)) = map.entry(a) {
    ///     assert_eq!(occupied.remove(), 1);
    /// }
    /// assert!(map.is_empty());
    /// ```
    pub fn remove(self) -> V {
        match self.place {
            Occupied::Dense { cell, len } => {
                let (_, value) = take_occupied(cell);
                *len -= 1;
                value
            }
            Occupied::Sparse(pair) => pair.remove().1,
        }
    }
}

impl<'a, K: Key, V> VacantEntry<'a, K, V> {
    /// The entry of `key` at `cell`, which holds nothing or a pair under a
    /// key older than `key`.
    pub(super) fn dense(key: K, cell: &'a mut Option<(K, V)>, len: &'a mut usize) -> Self {
        debug_assert!(cell
            .as_ref()
            .map_or(true, |(stored, _)| stored.generation() < key.generation()));
        let place = Vacant::Dense { cell, len };
        Self { key, place }
    }

    /// The entry of `key` at `place`: vacant, or a pair under a key older
    /// than `key`.
    pub(super) fn sparse(key: K, place: hash_map::Entry<'a, u32, (K, V)>) -> Self {
        let place = Vacant::Sparse(place);
        Self { key, place }
    }

    /// The entry's key.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::Entry;
    ///
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::<_, u8>::new();
    /// let a = pool.insert(()).unwrap();
    /// if let Some(Entry::Vacant(vacant)) = map.entry(a) {
    ///     assert_eq!(vacant.key(), a);
    /// }
    /// ```
    pub fn key(&self) -> K {
        self.key
    }

    /// Stores `value` under the entry's key (dropping a value of an older
    /// generation at its index), and returns it, mutably.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::Entry;
    ///
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let old = pool.insert(()).unwrap();
    /// map.insert(old, "the old value");
    /// pool.remove(old);
    /// let new = pool.insert(()).unwrap();
    /// if let Some(Entry::Vacant(vacant)) = map.entry(new) {
    ///     vacant.insert("the new value"); // drops the old one
    /// }
    /// assert_eq!(map.len(), 1);
    /// assert_eq!(map[new], "the new value");
    /// ```
    pub fn insert(self, value: V) -> &'a mut V {
        let pair = (self.key, value);
        match self.place {
            Vacant::Dense { cell, len } => {
                if cell.is_none() {
                    *len += 1;
                }
                &mut cell.insert(pair).1
            }
            Vacant::Sparse(hash_map::Entry::Vacant(place)) => &mut place.insert(pair).1,
            Vacant::Sparse(hash_map::Entry::Occupied(mut stale)) => {
                stale.insert(pair);
                &mut stale.into_mut().1
            }
        }
    }
}

/// The pair of an occupied entry's cell.
fn occupied<K, V>(cell: &Option<(K, V)>) -> &(K, V) {
    match cell {
        Some(pair) => pair,
        None => vacated(),
    }
}

/// The pair of an occupied entry's cell, mutably.
fn occupied_mut<K, V>(cell: &mut Option<(K, V)>) -> &mut (K, V) {
    match cell {
        Some(pair) => pair,
        None => vacated(),
    }
}

/// The pair of an occupied entry's cell, taken out of it.
fn take_occupied<K, V>(cell: &mut Option<(K, V)>) -> (K, V) {
    match cell.take() {
        Some(pair) => pair,
        None => vacated(),
    }
}

/// An occupied entry's cell found empty: a bug (only `remove`, which
/// consumes the entry, empties it).
#[cold]
#[inline(never)]
fn vacated() -> ! {
    unreachable!("tagpool: the cell of an occupied secondary map entry is empty")
}

impl<K: Key, V: fmt::Debug> fmt::Debug for Entry<'_, K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Occupied(occupied) => f.debug_tuple("Occupied").field(occupied).finish(),
            Entry::Vacant(vacant) => f.debug_tuple("Vacant").field(vacant).finish(),
        }
    }
}

impl<K: Key, V: fmt::Debug> fmt::Debug for OccupiedEntry<'_, K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OccupiedEntry")
            .field("key", &self.key)
            .field("value", self.get())
            .finish()
    }
}

impl<K: Key, V> fmt::Debug for VacantEntry<'_, K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VacantEntry")
            .field("key", &self.key)
            .finish()
    }
}
