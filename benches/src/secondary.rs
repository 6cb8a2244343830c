//! Secondary maps on one thread: tagpool's `SecondaryMap` and
//! `SparseSecondaryMap` keyed by a `HandlePool`'s keys, against slotmap's
//! `SecondaryMap` and `SparseSecondaryMap` keyed by a `SlotMap`'s (issue 38,
//! item 7).
//!
//! Each primary store is [`populated`](crate::keyed::populated) as the
//! `keyed` rows' stores are ([`LIVE`] values inserted in order into room for
//! [`CAPACITY`]); its keys are the maps' keys, in
//! insertion order on both sides, and the maps hold `u64` values. The
//! workloads, each returning the time of `ops` operations:
//!
//! - [`insert`]: fill a fresh map with a value for every live key, in
//!   insertion order (timed per insert; each pass builds the map, pre-sized,
//!   outside the timing);
//! - [`get`]: copy a value out through a live key, the keys in a [shuffled]
//!   order;
//! - [`remove`]: remove every key's value, in the shuffled order (the map
//!   refilled after each pass, outside the timing);
//! - [`iter`]: visit every value by the map's shared iterator (one
//!   operation per value).
//!
//! Both sides pre-size their maps the same way (the dense maps for the
//! primary's [`CAPACITY`] indices, the sparse ones
//! for [`LIVE`] values) and hash with std's `RandomState`, so no timed loop
//! allocates.

use std::hint::black_box;
use std::time::{Duration, Instant};

use slotmap::{DefaultKey, SlotMap};
use tagpool::{Handle, HandlePool};

use crate::handles::{self, CAPACITY, LIVE};
use crate::keyed::{self, Store};

/// A secondary map from the keys of its primary store to `u64` values.
pub trait Map: Sized {
    /// The primary store whose keys the map takes.
    type Primary: Store;
    /// The column name in the `keyed` binary's table.
    const NAME: &'static str;
    /// An empty map, pre-sized for the primary's keys.
    fn build() -> Self;
    /// Stores `value` under `key`; the value it replaced.
    fn insert(&mut self, key: Key<Self>, value: u64) -> Option<u64>;
    /// Removes the value under `key`.
    fn remove(&mut self, key: Key<Self>) -> Option<u64>;
    /// A copy of the value under `key`.
    fn get(&self, key: Key<Self>) -> Option<u64>;
    /// The sum of every value, by the map's shared iterator.
    fn sum(&self) -> u64;
}

/// The key of `M`'s primary store.
pub type Key<M> = <<M as Map>::Primary as Store>::Key;

/// The four maps differ only in their types and sizes: one implementation
/// for them all.
macro_rules! map {
    ($ty:ty, $primary:ty, $name:expr, $build:expr) => {
        impl Map for $ty {
            type Primary = $primary;
            const NAME: &'static str = $name;

            fn build() -> Self {
                $build
            }

            #[inline]
            fn insert(&mut self, key: Key<Self>, value: u64) -> Option<u64> {
                <$ty>::insert(self, key, value)
            }

            #[inline]
            fn remove(&mut self, key: Key<Self>) -> Option<u64> {
                <$ty>::remove(self, key)
            }

            #[inline]
            fn get(&self, key: Key<Self>) -> Option<u64> {
                <$ty>::get(self, key).copied()
            }

            #[inline]
            fn sum(&self) -> u64 {
                self.iter().map(|(_, v)| *v).fold(0, u64::wrapping_add)
            }
        }
    };
}

map!(
    tagpool::SecondaryMap<Handle, u64>,
    HandlePool<u64>,
    handles::TAGPOOL,
    tagpool::SecondaryMap::with_capacity(CAPACITY)
);
map!(
    tagpool::SparseSecondaryMap<Handle, u64>,
    HandlePool<u64>,
    handles::TAGPOOL,
    tagpool::SparseSecondaryMap::with_capacity(LIVE)
);
map!(
    slotmap::SecondaryMap<DefaultKey, u64>,
    SlotMap<DefaultKey, u64>,
    handles::SLOTMAP,
    slotmap::SecondaryMap::with_capacity(CAPACITY)
);
map!(
    slotmap::SparseSecondaryMap<DefaultKey, u64>,
    SlotMap<DefaultKey, u64>,
    handles::SLOTMAP,
    slotmap::SparseSecondaryMap::with_capacity(LIVE)
);

/// The live keys of a populated primary store, in insertion order, and a
/// map holding value `i` under the `i`th of them. The primary itself is
/// dropped: neither side's map refers to it.
pub fn filled<M: Map>() -> (Vec<Key<M>>, M) {
    let (_primary, keys) = keyed::populated::<M::Primary>();
    let mut map = M::build();
    fill(&mut map, &keys);
    (keys, map)
}

/// `keys` in a shuffled order, the same for every store (a fixed seed).
pub fn shuffled<K: Copy>(keys: &[K]) -> Vec<K> {
    let mut keys = keys.to_vec();
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    // Fisher–Yates, with an xorshift generator.
    for i in (1..keys.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        keys.swap(i, (state % (i as u64 + 1)) as usize);
    }
    keys
}

/// Value `i` under the `i`th key.
fn fill<M: Map>(map: &mut M, keys: &[Key<M>]) {
    for (i, &key) in keys.iter().enumerate() {
        map.insert(key, i as u64);
    }
}

/// Whole passes, each filling a fresh, pre-sized map with a value for
/// every key of `keys` in their order, until at least `ops` inserts; the
/// time of the inserts alone (not the build, nor the drop), scaled to
/// `ops`.
pub fn insert<M: Map>(keys: &[Key<M>], ops: u64) -> Duration {
    let passes = ops.div_ceil(keys.len() as u64).max(1);
    let mut took = Duration::ZERO;
    for _ in 0..passes {
        let mut map = M::build();
        let start = Instant::now();
        for (i, &key) in keys.iter().enumerate() {
            black_box(map.insert(black_box(key), i as u64));
        }
        took += start.elapsed();
        black_box(&map);
    }
    keyed::scaled(took, passes * keys.len() as u64, ops)
}

/// `ops` reads, cycling over `keys` (a [shuffled] order).
pub fn get<M: Map>(map: &M, keys: &[Key<M>], ops: u64) -> Duration {
    let start = Instant::now();
    for i in 0..ops as usize {
        let key = keys[i % keys.len()];
        black_box(map.get(black_box(key)));
    }
    start.elapsed()
}

/// Whole passes, each removing the value of every key of `order` (a
/// [shuffled] order of `keys`) from the full `map`, then filling it again
/// from `keys`, until at least `ops` removes; the time of the removes
/// alone, scaled to `ops`.
pub fn remove<M: Map>(map: &mut M, keys: &[Key<M>], order: &[Key<M>], ops: u64) -> Duration {
    let passes = ops.div_ceil(order.len() as u64).max(1);
    let mut took = Duration::ZERO;
    for _ in 0..passes {
        let start = Instant::now();
        for &key in order {
            black_box(map.remove(black_box(key)));
        }
        took += start.elapsed();
        fill(map, keys);
    }
    keyed::scaled(took, passes * order.len() as u64, ops)
}

/// Whole passes of the map's shared iterator until at least `ops` values
/// were visited; the time scaled to `ops` values.
pub fn iter<M: Map>(map: &M, ops: u64) -> Duration {
    let passes = ops.div_ceil(LIVE as u64).max(1);
    let start = Instant::now();
    for _ in 0..passes {
        black_box(map.sum());
    }
    keyed::scaled(start.elapsed(), passes * LIVE as u64, ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each map holds the value of every key after [`filled`], and the
    /// workloads leave it so.
    fn workloads_keep_every_value<M: Map>() {
        let (keys, mut map) = filled::<M>();
        let order = shuffled(&keys);
        let all = (0..LIVE as u64).sum::<u64>();
        assert_eq!(map.sum(), all);
        insert::<M>(&keys, 1);
        get(&map, &order, 2 * LIVE as u64);
        remove(&mut map, &keys, &order, 1);
        iter(&map, 1);
        assert_eq!(map.sum(), all);
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(map.get(key), Some(i as u64));
        }
    }

    #[test]
    fn every_map_keeps_every_value() {
        workloads_keep_every_value::<tagpool::SecondaryMap<Handle, u64>>();
        workloads_keep_every_value::<tagpool::SparseSecondaryMap<Handle, u64>>();
        workloads_keep_every_value::<slotmap::SecondaryMap<DefaultKey, u64>>();
        workloads_keep_every_value::<slotmap::SparseSecondaryMap<DefaultKey, u64>>();
    }

    #[test]
    fn shuffled_is_a_permutation() {
        let keys: Vec<usize> = (0..LIVE).collect();
        let mut order = shuffled(&keys);
        assert_ne!(order, keys);
        order.sort_unstable();
        assert_eq!(order, keys);
    }
}
