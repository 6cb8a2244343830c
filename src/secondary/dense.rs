//! [`SecondaryMap`]: a secondary map stored densely, one cell per index
//! up to the largest index inserted.

use core::cmp::Ordering;
use core::mem;

use super::entry::{Entry, OccupiedEntry, VacantEntry};
use super::iter::{
    SecondaryDrain, SecondaryIter, SecondaryIterMut, SecondaryKeys, SecondaryValues,
    SecondaryValuesMut,
};
use crate::handle::Key;

/// A map from the keys of a [`HandlePool`](crate::HandlePool) to values of
/// your own, stored densely: a `Vec` with one cell per index, as slotmap's
/// `SecondaryMap`.
///
/// Use it for data that most of the pool's values have (an entity's
/// position, say): a lookup is an index and a generation check, and
/// iteration walks the cells in index order. Its memory follows the largest
/// index inserted (up to [`MAX_HANDLE_CAPACITY`](crate::MAX_HANDLE_CAPACITY)
/// cells of `Option<(K, V)>`), whatever its length, and iteration visits
/// every cell; for data that few values have, use a
/// [`SparseSecondaryMap`](crate::SparseSecondaryMap).
///
/// The map is not tied to a pool: it takes any key of type `K`. A key type
/// of the pool's own ([`new_key_type!`](crate::new_key_type)) keeps the keys
/// of other pools out. It is `Send` and `Sync` when `K` and `V` are.
///
#[doc = include_str!("generations.md")]
///
/// # Examples
///
/// Components of entities: the entities live in a pool, each component in
/// a map beside it, and a stale key reads and writes nothing.
///
/// ```
/// use tagpool::{HandlePool, Key, SecondaryMap, SparseSecondaryMap};
///
/// tagpool::new_key_type! { struct Entity; }
///
/// let entities: HandlePool<&str, Entity> = HandlePool::with_key(64);
/// let mut position: SecondaryMap<Entity, [i32; 2]> = SecondaryMap::new();
/// let mut velocity: SecondaryMap<Entity, [i32; 2]> = SecondaryMap::new();
/// let mut burning: SparseSecondaryMap<Entity, u32> = SparseSecondaryMap::new();
///
/// let ship = entities.insert("ship").unwrap();
/// let rock = entities.insert("rock").unwrap();
/// position.insert(ship, [0, 0]);
/// velocity.insert(ship, [2, 1]);
/// position.insert(rock, [5, 5]);
/// burning.insert(rock, 3); // few entities burn: a sparse map
///
/// // The movement system: every entity with a velocity and a position.
/// for (entity, v) in &velocity {
///     if let Some(p) = position.get_mut(entity) {
///         p[0] += v[0];
///         p[1] += v[1];
///     }
/// }
/// assert_eq!(position[ship], [2, 1]);
///
/// // The rock is destroyed, and a comet takes its entry over.
/// entities.remove(rock);
/// let comet = entities.insert("comet").unwrap();
/// assert_eq!(comet.index(), rock.index());
/// assert!(position.get(comet).is_none(), "the rock's position is not the comet's");
/// position.insert(comet, [9, 9]); // newer: drops the rock's position
/// assert_eq!(position.insert(rock, [0, 0]), None, "older: refused");
/// assert_eq!(position[comet], [9, 9]);
/// assert!(position.get(rock).is_none());
///
/// // Components of destroyed entities, pruned.
/// burning.retain(|entity, _| entities.contains(entity));
/// assert!(burning.is_empty());
/// ```
#[derive(Clone)]
pub struct SecondaryMap<K: Key, V> {
    /// Cell `i` holds the key (of index `i`) and the value stored there, or
    /// `None`. Cells past the end are `None`: the `Vec` grows on an insert
    /// (or an `entry`) past its end, and shrinks only on `clear` and
    /// `drain`.
    pub(super) cells: Vec<Option<(K, V)>>,
    /// The `Some` cells, kept with every change so that `len` is O(1).
    pub(super) len: usize,
}

impl<K: Key, V> SecondaryMap<K, V> {
    /// An empty map. It allocates nothing until the first insert.
    ///
    /// # Examples
    ///
    /// ```
    /// let map: tagpool::SecondaryMap<tagpool::Handle, u8> = tagpool::SecondaryMap::new();
    /// assert!(map.is_empty());
    /// ```
    pub fn new() -> Self {
        Self {
            cells: Vec::new(),
            len: 0,
        }
    }

    /// An empty map with room for the indices below `capacity` (the
    /// pool's capacity, typically) without reallocating.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(128);
    /// let mut map = tagpool::SecondaryMap::with_capacity(pool.capacity());
    /// map.insert(pool.insert("a").unwrap(), 1);
    /// assert_eq!(map.len(), 1);
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            cells: Vec::with_capacity(capacity),
            len: 0,
        }
    }

    /// The number of values in the map, in O(1).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// map.insert(pool.insert(()).unwrap(), "a");
    /// map.insert(pool.insert(()).unwrap(), "b");
    /// assert_eq!(map.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the map has no values.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// assert!(map.is_empty());
    /// map.insert(pool.insert(()).unwrap(), 1);
    /// assert!(!map.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the map has a value under `key`: stored under this very
    /// key, not under another generation of its index.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// assert!(map.contains_key(a));
    /// pool.remove(a);
    /// let b = pool.insert(()).unwrap(); // the same index, a newer generation
    /// assert!(!map.contains_key(b));
    /// ```
    pub fn contains_key(&self, key: K) -> bool {
        self.get(key).is_some()
    }

    /// Stores `value` under `key`, following the [generation
    /// rules](SecondaryMap#generations): `Some(old)` if the map had a value
    /// under this key; `None` if it had none, or one of an older generation
    /// (that value is dropped); `None`, storing nothing and dropping
    /// `value`, if `key` is older than the key stored at its index.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let old = pool.insert(()).unwrap();
    /// assert_eq!(map.insert(old, "a"), None);
    /// assert_eq!(map.insert(old, "b"), Some("a"));
    ///
    /// pool.remove(old);
    /// let new = pool.insert(()).unwrap(); // the same index, a newer generation
    /// assert_eq!(map.insert(new, "c"), None, "drops \"b\"");
    /// assert_eq!(map.insert(old, "d"), None, "refused: `old` is older");
    /// assert_eq!(map[new], "c");
    /// assert_eq!(map.len(), 1);
    /// ```
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        let index = key.index();
        if index >= self.cells.len() {
            self.cells.resize_with(index + 1, || None);
        }
        let cell = &mut self.cells[index];
        match cell {
            None => {
                *cell = Some((key, value));
                self.len += 1;
                None
            }
            Some((stored, old)) => match key.generation().cmp(&stored.generation()) {
                Ordering::Less => None,
                Ordering::Equal => Some(mem::replace(old, value)),
                Ordering::Greater => {
                    *cell = Some((key, value));
                    None
                }
            },
        }
    }

    /// Removes and returns the value under `key`, or `None` if the map has
    /// none under this key (a value of another generation stays).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// assert_eq!(map.remove(a), Some(1));
    /// assert_eq!(map.remove(a), None);
    /// ```
    pub fn remove(&mut self, key: K) -> Option<V> {
        let cell = self.cells.get_mut(key.index())?;
        let same = matches!(cell, Some((stored, _)) if stored.generation() == key.generation());
        if !same {
            return None;
        }
        self.len -= 1;
        cell.take().map(|(_, value)| value)
    }

    /// The value under `key`, or `None` if the map has none under this key.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, "health");
    /// assert_eq!(map.get(a), Some(&"health"));
    /// pool.remove(a);
    /// let b = pool.insert(()).unwrap();
    /// assert_eq!(map.get(b), None, "another generation of the index");
    /// ```
    pub fn get(&self, key: K) -> Option<&V> {
        match self.cells.get(key.index()) {
            Some(Some((stored, value))) if stored.generation() == key.generation() => Some(value),
            _ => None,
        }
    }

    /// The value under `key`, mutably, or `None` if the map has none under
    /// this key.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 10);
    /// if let Some(health) = map.get_mut(a) {
    ///     *health -= 3;
    /// }
    /// assert_eq!(map[a], 7);
    /// ```
    pub fn get_mut(&mut self, key: K) -> Option<&mut V> {
        match self.cells.get_mut(key.index()) {
            Some(Some((stored, value))) if stored.generation() == key.generation() => Some(value),
            _ => None,
        }
    }

    /// `&mut`s to the values of `N` keys at once, in the keys' order, or
    /// `None` if the map has no value under one of them or two of them
    /// share an index (as std's `slice::get_disjoint_mut`).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// let b = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// map.insert(b, 2);
    /// if let Some([x, y]) = map.get_disjoint_mut([b, a]) {
    ///     std::mem::swap(x, y);
    /// }
    /// assert_eq!((map[a], map[b]), (2, 1));
    /// assert!(map.get_disjoint_mut([a, a]).is_none(), "the same value twice");
    /// map.remove(b);
    /// assert!(map.get_disjoint_mut([a, b]).is_none(), "no value under `b`");
    /// ```
    pub fn get_disjoint_mut<const N: usize>(&mut self, keys: [K; N]) -> Option<[&mut V; N]> {
        let order = super::disjoint_order(&keys)?;
        let mut found: [Option<&mut V>; N] = core::array::from_fn(|_| None);
        // The cells after the last one taken, and the index of the first.
        let mut rest: &mut [Option<(K, V)>] = &mut self.cells;
        let mut start = 0;
        for position in order {
            let key = keys[position];
            // Indices ascend strictly (no two are equal), so the key's cell
            // is in `rest`, unless it is past the end.
            let offset = key.index() - start;
            if offset >= rest.len() {
                return None;
            }
            let (head, tail) = mem::take(&mut rest).split_at_mut(offset + 1);
            match &mut head[offset] {
                Some((stored, value)) if stored.generation() == key.generation() => {
                    found[position] = Some(value);
                }
                _ => return None,
            }
            rest = tail;
            start = key.index() + 1;
        }
        // `order` holds every position once, and each one was filled.
        Some(found.map(|value| value.expect("every key's value was found")))
    }

    /// The entry of `key`, to read, insert, change or remove its value in
    /// place, or `None` if `key` is older than the key stored at its index
    /// (the [generation rules](SecondaryMap#generations): an older key
    /// reaches nothing). A key newer than the stored one has a vacant
    /// entry, whose insert drops the stored value. A key past the end of
    /// the storage grows it to the key's index, as an insert would, even if
    /// the entry is dropped unused.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut hits = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// for _ in 0..3 {
    ///     *hits.entry(a).unwrap().or_insert(0) += 1;
    /// }
    /// assert_eq!(hits[a], 3);
    ///
    /// pool.remove(a);
    /// let b = pool.insert(()).unwrap();
    /// hits.insert(b, 0);
    /// assert!(hits.entry(a).is_none(), "`a` is older than `b`");
    /// ```
    pub fn entry(&mut self, key: K) -> Option<Entry<'_, K, V>> {
        let index = key.index();
        if index >= self.cells.len() {
            self.cells.resize_with(index + 1, || None);
        }
        let cell = &mut self.cells[index];
        let age = cell
            .as_ref()
            .map(|(stored, _)| key.generation().cmp(&stored.generation()));
        let len = &mut self.len;
        Some(match age {
            Some(Ordering::Less) => return None,
            Some(Ordering::Equal) => Entry::Occupied(OccupiedEntry::dense(key, cell, len)),
            Some(Ordering::Greater) | None => Entry::Vacant(VacantEntry::dense(key, cell, len)),
        })
    }

    /// Keeps only the values for which `f(key, &mut value)` returns `true`,
    /// in index order, and drops the others.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// for health in [0, 5, 0, 9] {
    ///     map.insert(pool.insert(()).unwrap(), health);
    /// }
    /// map.retain(|_, health| *health > 0);
    /// assert_eq!(map.values().copied().collect::<Vec<_>>(), [5, 9]);
    /// ```
    pub fn retain(&mut self, mut f: impl FnMut(K, &mut V) -> bool) {
        for cell in &mut self.cells {
            if let Some((key, value)) = cell {
                if !f(*key, value) {
                    *cell = None;
                    self.len -= 1;
                }
            }
        }
    }

    /// Removes and drops every value. The map keeps its allocation.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// map.clear();
    /// assert!(map.is_empty() && !map.contains_key(a));
    /// ```
    pub fn clear(&mut self) {
        // Before the drops, which may panic: the cells go in any case.
        self.len = 0;
        self.cells.clear();
    }

    /// Removes every value, and returns them with their keys in index
    /// order. The map is empty even if the iterator is dropped before its
    /// end (the rest are dropped then) or leaked. The map keeps its
    /// allocation.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// let b = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// map.insert(b, 2);
    /// assert_eq!(map.drain().collect::<Vec<_>>(), [(a, 1), (b, 2)]);
    /// assert!(map.is_empty());
    /// ```
    pub fn drain(&mut self) -> SecondaryDrain<'_, K, V> {
        let len = mem::replace(&mut self.len, 0);
        SecondaryDrain::dense(self.cells.drain(..), len)
    }

    /// The keys and values, in index order.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// let b = pool.insert(()).unwrap();
    /// map.insert(b, "b");
    /// map.insert(a, "a");
    /// assert_eq!(map.iter().collect::<Vec<_>>(), [(a, &"a"), (b, &"b")]);
    /// ```
    pub fn iter(&self) -> SecondaryIter<'_, K, V> {
        SecondaryIter::dense(self.cells.iter(), self.len)
    }

    /// The keys and `&mut`s to the values, in index order.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// map.insert(pool.insert(()).unwrap(), 1);
    /// map.insert(pool.insert(()).unwrap(), 2);
    /// for (_, value) in map.iter_mut() {
    ///     *value *= 10;
    /// }
    /// assert_eq!(map.values().sum::<i32>(), 30);
    /// ```
    pub fn iter_mut(&mut self) -> SecondaryIterMut<'_, K, V> {
        SecondaryIterMut::dense(self.cells.iter_mut(), self.len)
    }

    /// The keys, in index order.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// assert_eq!(map.keys().collect::<Vec<_>>(), [a]);
    /// ```
    pub fn keys(&self) -> SecondaryKeys<'_, K, V> {
        SecondaryKeys { inner: self.iter() }
    }

    /// The values, in index order.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// map.insert(pool.insert(()).unwrap(), 1);
    /// map.insert(pool.insert(()).unwrap(), 2);
    /// assert_eq!(map.values().collect::<Vec<_>>(), [&1, &2]);
    /// ```
    pub fn values(&self) -> SecondaryValues<'_, K, V> {
        SecondaryValues { inner: self.iter() }
    }

    /// `&mut`s to the values, in index order.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, String::from("orc"));
    /// for name in map.values_mut() {
    ///     name.make_ascii_uppercase();
    /// }
    /// assert_eq!(map[a], "ORC");
    /// ```
    pub fn values_mut(&mut self) -> SecondaryValuesMut<'_, K, V> {
        SecondaryValuesMut {
            inner: self.iter_mut(),
        }
    }
}
