//! The `serde` feature: a secondary map serializes as a sequence of
//! `(key, value)` pairs, each key as its [`Handle`] does (its 64 bits, a
//! `u64`), and deserializes from one, refusing a key of generation 0 and
//! two pairs at one index.

use core::fmt;
use core::hash::BuildHasher;
use core::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, Error, SeqAccess, Visitor};
use serde::ser::{Serialize, Serializer};

use super::{SecondaryMap, SparseSecondaryMap};
use crate::handle::{Handle, Key};

impl<K: Key, V: Serialize> Serialize for SecondaryMap<K, V> {
    /// The `(key, value)` pairs, in index order, as a sequence of pairs.
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        serializer.collect_seq(self.iter().map(|(key, value)| (key.handle(), value)))
    }
}

impl<K: Key, V: Serialize, S> Serialize for SparseSecondaryMap<K, V, S> {
    /// The `(key, value)` pairs, in the map's order, as a sequence of
    /// pairs.
    fn serialize<Ser: Serializer>(&self, serializer: Ser) -> Result<Ser::Ok, Ser::Error> {
        serializer.collect_seq(self.iter().map(|(key, value)| (key.handle(), value)))
    }
}

impl<'de, K: Key, V: Deserialize<'de>> Deserialize<'de> for SecondaryMap<K, V> {
    /// A sequence of `(key, value)` pairs, each key a [`Handle`]'s `u64`:
    /// an error for a key of generation 0, or two pairs at one index.
    ///
    /// The map's memory follows the largest index (up to `2^24` cells): to
    /// read a few values from an untrusted source, deserialize a
    /// [`SparseSecondaryMap`].
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(Pairs(PhantomData))
    }
}

impl<'de, K, V, S> Deserialize<'de> for SparseSecondaryMap<K, V, S>
where
    K: Key,
    V: Deserialize<'de>,
    S: BuildHasher + Default,
{
    /// A sequence of `(key, value)` pairs, each key a [`Handle`]'s `u64`:
    /// an error for a key of generation 0, or two pairs at one index.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_seq(Pairs(PhantomData))
    }
}

/// A map that a sequence of pairs fills.
trait Fill<K>: Sized {
    /// The values the map holds.
    type Value;

    /// An empty map, for about `pairs` pairs.
    fn empty(pairs: usize) -> Self;

    /// Stores `value` under `key`, or returns `false` (storing nothing) if
    /// the map has a value at `key`'s index already.
    fn fill(&mut self, key: K, value: Self::Value) -> bool;
}

impl<K: Key, V> Fill<K> for SecondaryMap<K, V> {
    type Value = V;

    fn empty(_: usize) -> Self {
        // The pairs tell nothing of the largest index: the cells grow.
        Self::new()
    }

    fn fill(&mut self, key: K, value: V) -> bool {
        if self.cells.get(key.index()).map_or(false, Option::is_some) {
            return false;
        }
        self.insert(key, value);
        true
    }
}

impl<K: Key, V, S: BuildHasher + Default> Fill<K> for SparseSecondaryMap<K, V, S> {
    type Value = V;

    fn empty(pairs: usize) -> Self {
        Self::with_capacity_and_hasher(pairs, S::default())
    }

    fn fill(&mut self, key: K, value: V) -> bool {
        if self.pairs.contains_key(&super::sparse::slot(key)) {
            return false;
        }
        self.insert(key, value);
        true
    }
}

/// The most pairs that a sequence's size hint reserves room for, before
/// they arrive (a hint is not to be trusted with memory).
const MAX_RESERVED: usize = 4096;

/// The `Visitor` of a map `M` of keys `K`.
struct Pairs<M, K>(PhantomData<fn() -> (M, K)>);

impl<'de, M, K> Visitor<'de> for Pairs<M, K>
where
    M: Fill<K>,
    M::Value: Deserialize<'de>,
    K: Key,
{
    type Value = M;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a sequence of (key, value) pairs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<M, A::Error> {
        let mut map = M::empty(seq.size_hint().unwrap_or(0).min(MAX_RESERVED));
        while let Some((handle, value)) = seq.next_element::<(Handle, M::Value)>()? {
            let key = K::from_handle(handle);
            if !map.fill(key, value) {
                let index = key.index();
                return Err(A::Error::custom(format_args!(
                    "two pairs at index {} of a secondary map",
                    index
                )));
            }
        }
        Ok(map)
    }
}
