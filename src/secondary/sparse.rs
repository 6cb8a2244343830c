//! [`SparseSecondaryMap`]: a secondary map stored sparsely, in a `HashMap`
//! from index to key and value.

use core::cmp::Ordering;
use core::hash::BuildHasher;
use core::mem;
use std::collections::hash_map::{self, HashMap, RandomState};

use super::entry::{Entry, OccupiedEntry, VacantEntry};
use super::iter::{
    SecondaryDrain, SecondaryIter, SecondaryIterMut, SecondaryKeys, SecondaryValues,
    SecondaryValuesMut,
};
use crate::handle::Key;

/// A map from the keys of a [`HandlePool`](crate::HandlePool) to values of
/// your own, stored sparsely: a `HashMap` from index to key and value, as
/// slotmap's `SparseSecondaryMap`.
///
/// Use it for data that few of the pool's values have (which entities
/// burn, say): its memory and its iteration follow its length, not the
/// largest index, for the cost of a hash per lookup. It follows the same
/// [generation rules](crate::SecondaryMap#generations) as the dense
/// [`SecondaryMap`](crate::SecondaryMap), and has the same methods, entry
/// API and iterators; it iterates in no particular order. `S` is the
/// `HashMap`'s hasher. It is `Send` and `Sync` when `K`, `V` and `S` are.
///
/// # Examples
///
/// ```
/// use tagpool::{HandlePool, SparseSecondaryMap};
///
/// let enemies = HandlePool::new(1024);
/// let mut targets = SparseSecondaryMap::new();
/// let orc = enemies.insert("orc").unwrap();
/// let troll = enemies.insert("troll").unwrap();
/// targets.insert(troll, orc); // only the troll has a target
///
/// assert_eq!(targets.get(troll), Some(&orc));
/// assert_eq!(targets.get(orc), None);
///
/// enemies.remove(troll);
/// let goblin = enemies.insert("goblin").unwrap(); // the troll's entry
/// assert_eq!(targets.get(goblin), None, "a newer generation");
/// targets.retain(|enemy, _| enemies.contains(enemy));
/// assert!(targets.is_empty());
/// ```
#[derive(Clone)]
pub struct SparseSecondaryMap<K: Key, V, S = RandomState> {
    /// The key and value under each index present, the key of that index.
    pub(super) pairs: HashMap<u32, (K, V), S>,
}

/// The hash map's key of `key`: its index, which fits 24 bits (see
/// [`MAX_HANDLE_CAPACITY`](crate::MAX_HANDLE_CAPACITY)).
pub(super) fn slot<K: Key>(key: K) -> u32 {
    key.index() as u32
}

impl<K: Key, V> SparseSecondaryMap<K, V, RandomState> {
    /// An empty map. It allocates nothing until the first insert.
    ///
    /// # Examples
    ///
    /// ```
    /// let map: tagpool::SparseSecondaryMap<tagpool::Handle, u8> =
    ///     tagpool::SparseSecondaryMap::new();
    /// assert!(map.is_empty());
    /// ```
    pub fn new() -> Self {
        Self::with_hasher(RandomState::new())
    }

    /// An empty map with room for `capacity` values without reallocating.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(128);
    /// let mut map = tagpool::SparseSecondaryMap::with_capacity(8);
    /// map.insert(pool.insert(()).unwrap(), 1);
    /// assert_eq!(map.len(), 1);
    /// ```
    pub fn with_capacity(capacity: usize) -> Self {
        Self::with_capacity_and_hasher(capacity, RandomState::new())
    }
}

impl<K: Key, V, S> SparseSecondaryMap<K, V, S> {
    /// An empty map whose `HashMap` hashes with `hasher`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::collections::hash_map::RandomState;
    ///
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::with_hasher(RandomState::new());
    /// map.insert(pool.insert(()).unwrap(), 1);
    /// assert_eq!(map.len(), 1);
    /// ```
    pub fn with_hasher(hasher: S) -> Self {
        let pairs = HashMap::with_hasher(hasher);
        Self { pairs }
    }

    /// An empty map with room for `capacity` values, whose `HashMap`
    /// hashes with `hasher`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::collections::hash_map::RandomState;
    ///
    /// let map = tagpool::SparseSecondaryMap::<tagpool::Handle, u8>::with_capacity_and_hasher(
    ///     16,
    ///     RandomState::new(),
    /// );
    /// assert!(map.is_empty());
    /// ```
    pub fn with_capacity_and_hasher(capacity: usize, hasher: S) -> Self {
        let pairs = HashMap::with_capacity_and_hasher(capacity, hasher);
        Self { pairs }
    }

    /// The number of values in the map.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// map.insert(pool.insert(()).unwrap(), "a");
    /// map.insert(pool.insert(()).unwrap(), "b");
    /// assert_eq!(map.len(), 2);
    /// ```
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether the map has no values.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// assert!(map.is_empty());
    /// map.insert(pool.insert(()).unwrap(), 1);
    /// assert!(!map.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Keeps only the values for which `f(key, &mut value)` returns `true`,
    /// and drops the others.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// for health in [0, 5, 0, 9] {
    ///     map.insert(pool.insert(()).unwrap(), health);
    /// }
    /// map.retain(|_, health| *health > 0);
    /// assert_eq!(map.values().sum::<i32>(), 14);
    /// assert_eq!(map.len(), 2);
    /// ```
    pub fn retain(&mut self, mut f: impl FnMut(K, &mut V) -> bool) {
        self.pairs.retain(|_, (key, value)| f(*key, value));
    }

    /// Removes and drops every value. The map keeps its allocation.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// map.clear();
    /// assert!(map.is_empty() && !map.contains_key(a));
    /// ```
    pub fn clear(&mut self) {
        self.pairs.clear();
    }

    /// Removes every value, and returns them with their keys. The map is
    /// empty even if the iterator is dropped before its end (the rest are
    /// dropped then). The map keeps its allocation.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// assert_eq!(map.drain().collect::<Vec<_>>(), [(a, 1)]);
    /// assert!(map.is_empty());
    /// ```
    pub fn drain(&mut self) -> SecondaryDrain<'_, K, V> {
        SecondaryDrain::sparse(self.pairs.drain())
    }

    /// The keys and values, in no particular order.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// let b = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// map.insert(b, 2);
    /// let mut pairs: Vec<_> = map.iter().collect();
    /// pairs.sort();
    /// assert_eq!(pairs, [(a, &1), (b, &2)]);
    /// ```
    pub fn iter(&self) -> SecondaryIter<'_, K, V> {
        SecondaryIter::sparse(self.pairs.values())
    }

    /// The keys and `&mut`s to the values, in no particular order.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// map.insert(pool.insert(()).unwrap(), 1);
    /// map.insert(pool.insert(()).unwrap(), 2);
    /// for (_, value) in map.iter_mut() {
    ///     *value *= 10;
    /// }
    /// assert_eq!(map.values().sum::<i32>(), 30);
    /// ```
    pub fn iter_mut(&mut self) -> SecondaryIterMut<'_, K, V> {
        SecondaryIterMut::sparse(self.pairs.values_mut())
    }

    /// The keys, in no particular order.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// assert_eq!(map.keys().collect::<Vec<_>>(), [a]);
    /// ```
    pub fn keys(&self) -> SecondaryKeys<'_, K, V> {
        SecondaryKeys { inner: self.iter() }
    }

    /// The values, in no particular order.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// map.insert(pool.insert(()).unwrap(), 2);
    /// map.insert(pool.insert(()).unwrap(), 3);
    /// assert_eq!(map.values().product::<i32>(), 6);
    /// ```
    pub fn values(&self) -> SecondaryValues<'_, K, V> {
        SecondaryValues { inner: self.iter() }
    }

    /// `&mut`s to the values, in no particular order.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
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

impl<K: Key, V, S: BuildHasher> SparseSecondaryMap<K, V, S> {
    /// Whether the map has a value under `key`: stored under this very
    /// key, not under another generation of its index.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
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
    /// rules](crate::SecondaryMap#generations): `Some(old)` if the map had a
    /// value under this key; `None` if it had none, or one of an older
    /// generation (that value is dropped); `None`, storing nothing and
    /// dropping `value`, if `key` is older than the key stored at its index.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
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
        match self.pairs.entry(slot(key)) {
            hash_map::Entry::Vacant(place) => {
                place.insert((key, value));
                None
            }
            hash_map::Entry::Occupied(mut place) => {
                let (stored, old) = place.get_mut();
                match key.generation().cmp(&stored.generation()) {
                    Ordering::Less => None,
                    Ordering::Equal => Some(mem::replace(old, value)),
                    Ordering::Greater => {
                        place.insert((key, value));
                        None
                    }
                }
            }
        }
    }

    /// Removes and returns the value under `key`, or `None` if the map has
    /// none under this key (a value of another generation stays).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 1);
    /// assert_eq!(map.remove(a), Some(1));
    /// assert_eq!(map.remove(a), None);
    /// ```
    pub fn remove(&mut self, key: K) -> Option<V> {
        match self.pairs.entry(slot(key)) {
            hash_map::Entry::Occupied(place) if same(place.get(), key) => Some(place.remove().1),
            _ => None,
        }
    }

    /// The value under `key`, or `None` if the map has none under this key.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, "health");
    /// assert_eq!(map.get(a), Some(&"health"));
    /// pool.remove(a);
    /// let b = pool.insert(()).unwrap();
    /// assert_eq!(map.get(b), None, "another generation of the index");
    /// ```
    pub fn get(&self, key: K) -> Option<&V> {
        match self.pairs.get(&slot(key)) {
            Some(pair) if same(pair, key) => Some(&pair.1),
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
    /// let mut map = tagpool::SparseSecondaryMap::new();
    /// let a = pool.insert(()).unwrap();
    /// map.insert(a, 10);
    /// if let Some(health) = map.get_mut(a) {
    ///     *health -= 3;
    /// }
    /// assert_eq!(map[a], 7);
    /// ```
    pub fn get_mut(&mut self, key: K) -> Option<&mut V> {
        match self.pairs.get_mut(&slot(key)) {
            Some(pair) if same(pair, key) => Some(&mut pair.1),
            _ => None,
        }
    }

    /// `&mut`s to the values of `N` keys at once, in the keys' order, or
    /// `None` if the map has no value under one of them or two of them
    /// share an index. It looks each key up, then walks the whole map (the
    /// one way to several `&mut`s into a `HashMap` without `unsafe` at the
    /// MSRV): O(len), where the dense map's is O(N log N).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut map = tagpool::SparseSecondaryMap::new();
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
        if !keys.iter().all(|&key| self.contains_key(key)) {
            return None;
        }
        let mut found: [Option<&mut V>; N] = core::array::from_fn(|_| None);
        let mut left = N;
        for (index, (_, value)) in self.pairs.iter_mut() {
            if left == 0 {
                break;
            }
            // Every key's pair is present and under that key (checked
            // above): the pair at a key's index is that key's value.
            let at = order.binary_search_by_key(index, |&position| slot(keys[position]));
            if let Ok(at) = at {
                found[order[at]] = Some(value);
                left -= 1;
            }
        }
        // Each key's index is in the map, and the indices are distinct.
        Some(found.map(|value| value.expect("every key's value was found")))
    }

    /// The entry of `key`, to read, insert, change or remove its value in
    /// place, or `None` if `key` is older than the key stored at its index
    /// (the [generation rules](crate::SecondaryMap#generations): an older
    /// key reaches nothing). A key newer than the stored one has a vacant
    /// entry, whose insert drops the stored value.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let mut hits = tagpool::SparseSecondaryMap::new();
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
        let place = self.pairs.entry(slot(key));
        let age = match &place {
            hash_map::Entry::Occupied(pair) => key.generation().cmp(&pair.get().0.generation()),
            hash_map::Entry::Vacant(_) => Ordering::Greater,
        };
        Some(match (age, place) {
            (Ordering::Less, _) => return None,
            (Ordering::Equal, hash_map::Entry::Occupied(pair)) => {
                Entry::Occupied(OccupiedEntry::sparse(key, pair))
            }
            (_, place) => Entry::Vacant(VacantEntry::sparse(key, place)),
        })
    }
}

/// Whether `pair` is stored under `key` (the pair at `key`'s index).
fn same<K: Key, V>(pair: &(K, V), key: K) -> bool {
    pair.0.generation() == key.generation()
}
