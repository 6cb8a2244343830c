//! Single-threaded keyed stores: tagpool's `HandlePool` against slotmap's
//! `SlotMap` and `DenseSlotMap` and thunderdome's `Arena`,
//! each used the way its users would on one thread, through `&mut` where
//! its API allows (issue 26, item 6).
//!
//! The workloads, each returning the wall-clock time of `ops` operations on
//! a store of [`CAPACITY`](crate::handles::CAPACITY) entries holding
//! [`LIVE`](crate::handles::LIVE) values:
//!
//! - [`insert_remove`]: insert a value and remove it by its key;
//! - [`get`]: read a live value through its key (tagpool: a counted `Ref`
//!   through `&self`, its only read);
//! - [`get_mut`]: add 1 to a live value through its key and `&mut`;
//! - [`iter`]: visit every live value, read it (one operation per value);
//! - [`iter_mut`]: visit every live value through `&mut`, add 1 to it;
//! - [`reserve_fill`] (tagpool only): `reserve` + `insert_reserved`
//!   through `&self`, against [`shared_insert`], one shared `insert`, each
//!   key removed again outside the timing (issue 38, item 7).
//!
//! The secondary maps keyed by these stores' keys are in
//! [`secondary`](crate::secondary).
//!
//! tagpool's store uses its `&mut self` forms (`insert_mut`, `remove_mut`,
//! `get_mut`, `iter_mut`), as a single-threaded user would; its `get` and
//! `iter` are the shared, counted reads (it has no other).
//!
//! Shared by the bench target `handles` (groups `handles_st_*`) and the
//! `keyed` binary, which interleaves the stores round by round in one
//! process and prints the ratios.

use std::hint::black_box;
use std::time::{Duration, Instant};

use slotmap::{DefaultKey, DenseSlotMap, SlotMap};
use tagpool::{Handle, HandlePool};
use thunderdome::{Arena, Index};

use crate::handles::{self, CAPACITY, LIVE};

/// A keyed store used by one thread.
pub trait Store: Sized {
    /// Its key.
    type Key: Copy;
    /// The function id in criterion's benchmark id and the report's column.
    const NAME: &'static str;
    /// An empty store with room for `capacity` values (tagpool: exactly
    /// that many; the others grow past it).
    fn build(capacity: usize) -> Self;
    /// Stores `value` and returns its key.
    fn insert(&mut self, value: u64) -> Self::Key;
    /// Ends the value of `key`; whether it was live.
    fn remove(&mut self, key: Self::Key) -> bool;
    /// A copy of the value of `key`.
    fn get(&self, key: Self::Key) -> Option<u64>;
    /// The value of `key`, exclusively.
    fn get_mut(&mut self, key: Self::Key) -> Option<&mut u64>;
    /// The sum of every live value, by the store's shared iterator.
    fn sum(&self) -> u64;
    /// Adds 1 to every live value by the store's `&mut` iterator; returns
    /// how many it visited.
    fn bump_all(&mut self) -> u64;
}

impl Store for HandlePool<u64> {
    type Key = Handle;
    const NAME: &'static str = handles::TAGPOOL;

    fn build(capacity: usize) -> Self {
        HandlePool::new(capacity)
    }

    #[inline]
    fn insert(&mut self, value: u64) -> Handle {
        HandlePool::insert_mut(self, value).expect("the pool has room")
    }

    #[inline]
    fn remove(&mut self, key: Handle) -> bool {
        HandlePool::remove_mut(self, key).is_some()
    }

    #[inline]
    fn get(&self, key: Handle) -> Option<u64> {
        HandlePool::get(self, key).map(|v| *v)
    }

    #[inline]
    fn get_mut(&mut self, key: Handle) -> Option<&mut u64> {
        HandlePool::get_mut(self, key)
    }

    #[inline]
    fn sum(&self) -> u64 {
        self.iter().map(|v| *v).fold(0, u64::wrapping_add)
    }

    #[inline]
    fn bump_all(&mut self) -> u64 {
        let mut n = 0;
        for (_, value) in self.iter_mut() {
            *value += 1;
            n += 1;
        }
        n
    }
}

/// The three others differ only in their types and in what `remove`
/// returns: one implementation for them all.
macro_rules! store {
    ($ty:ty, $key:ty, $name:expr, $build:expr) => {
        impl Store for $ty {
            type Key = $key;
            const NAME: &'static str = $name;

            fn build(capacity: usize) -> Self {
                $build(capacity)
            }

            #[inline]
            fn insert(&mut self, value: u64) -> $key {
                <$ty>::insert(self, value)
            }

            #[inline]
            fn remove(&mut self, key: $key) -> bool {
                <$ty>::remove(self, key).is_some()
            }

            #[inline]
            fn get(&self, key: $key) -> Option<u64> {
                <$ty>::get(self, key).copied()
            }

            #[inline]
            fn get_mut(&mut self, key: $key) -> Option<&mut u64> {
                <$ty>::get_mut(self, key)
            }

            #[inline]
            fn sum(&self) -> u64 {
                self.iter().map(|(_, v)| *v).fold(0, u64::wrapping_add)
            }

            #[inline]
            fn bump_all(&mut self) -> u64 {
                let mut n = 0;
                for (_, v) in self.iter_mut() {
                    *v += 1;
                    n += 1;
                }
                n
            }
        }
    };
}

store!(
    SlotMap<DefaultKey, u64>,
    DefaultKey,
    handles::SLOTMAP,
    SlotMap::with_capacity
);
store!(
    DenseSlotMap<DefaultKey, u64>,
    DefaultKey,
    handles::SLOTMAP_DENSE,
    DenseSlotMap::with_capacity
);
store!(
    Arena<u64>,
    Index,
    handles::THUNDERDOME,
    Arena::with_capacity
);

/// A store of [`CAPACITY`] entries with [`LIVE`] values, and their keys in
/// insertion order.
pub fn populated<S: Store>() -> (S, Vec<S::Key>) {
    let mut store = S::build(CAPACITY);
    let keys = (0..LIVE as u64).map(|i| store.insert(i)).collect();
    (store, keys)
}

/// `ops` inserts, each followed by the remove of its key, on `store`.
pub fn insert_remove<S: Store>(store: &mut S, ops: u64) -> Duration {
    let start = Instant::now();
    for i in 0..ops {
        let key = store.insert(black_box(i));
        black_box(store.remove(key));
    }
    start.elapsed()
}

/// `ops` reads, cycling over `keys`.
pub fn get<S: Store>(store: &S, keys: &[S::Key], ops: u64) -> Duration {
    let start = Instant::now();
    for i in 0..ops as usize {
        let key = keys[i % keys.len()];
        black_box(store.get(black_box(key)));
    }
    start.elapsed()
}

/// `ops` increments through `get_mut`, cycling over `keys`.
pub fn get_mut<S: Store>(store: &mut S, keys: &[S::Key], ops: u64) -> Duration {
    let start = Instant::now();
    for i in 0..ops as usize {
        let key = keys[i % keys.len()];
        if let Some(v) = store.get_mut(black_box(key)) {
            *v += 1;
        }
    }
    start.elapsed()
}

/// Whole passes of the shared iterator until at least `ops` values were
/// visited; the time scaled to `ops` values.
pub fn iter<S: Store>(store: &S, ops: u64) -> Duration {
    let passes = ops.div_ceil(LIVE as u64).max(1);
    let start = Instant::now();
    for _ in 0..passes {
        black_box(store.sum());
    }
    scaled(start.elapsed(), passes * LIVE as u64, ops)
}

/// [`iter`] through the `&mut` iterator, adding 1 to each value.
pub fn iter_mut<S: Store>(store: &mut S, ops: u64) -> Duration {
    let passes = ops.div_ceil(LIVE as u64).max(1);
    let start = Instant::now();
    for _ in 0..passes {
        black_box(store.bump_all());
    }
    scaled(start.elapsed(), passes * LIVE as u64, ops)
}

/// `ops` reads of tagpool's values through read sections, cycling over
/// `keys`: one section per pass over the keys, as a system's loop over its
/// entities would open one (the peers' row is [`get`]).
pub fn section_get(pool: &HandlePool<u64>, keys: &[Handle], ops: u64) -> Duration {
    let start = Instant::now();
    let mut done = 0;
    while done < ops {
        let section = pool.read();
        let n = (ops - done).min(keys.len() as u64) as usize;
        for &key in &keys[..n] {
            black_box(section.get(black_box(key)).copied());
        }
        done += n as u64;
    }
    start.elapsed()
}

/// `ops` one-shot reads of tagpool's values (`with`, which opens a section
/// of its own), cycling over `keys` (the peers' row is [`get`]).
pub fn with(pool: &HandlePool<u64>, keys: &[Handle], ops: u64) -> Duration {
    let start = Instant::now();
    for i in 0..ops as usize {
        let key = keys[i % keys.len()];
        black_box(pool.with(black_box(key), |v| *v));
    }
    start.elapsed()
}

/// [`iter`] through a read section, one per pass (the peers' row is
/// [`iter`]).
pub fn section_iter(pool: &HandlePool<u64>, ops: u64) -> Duration {
    let passes = ops.div_ceil(LIVE as u64).max(1);
    let start = Instant::now();
    for _ in 0..passes {
        let section = pool.read();
        black_box(section.values().fold(0u64, |sum, v| sum.wrapping_add(*v)));
    }
    scaled(start.elapsed(), passes * LIVE as u64, ops)
}

/// Keys per timed batch of [`reserve_fill`] and [`shared_insert`]: the
/// removes that follow each batch stay out of the timing, and a batch
/// amortizes the clock reads (it fits the room left by the populated
/// store).
pub const BATCH: usize = 256;

/// `ops` reservations, each filled at once: `reserve` + `insert_reserved`
/// through `&self`, in batches of [`BATCH`] timed together; after each
/// batch its keys are removed (`remove`, untimed), so that the pool keeps
/// its size. The peer row is [`shared_insert`].
pub fn reserve_fill(pool: &HandlePool<u64>, ops: u64) -> Duration {
    batched(pool, ops, |pool, value| {
        let reservation = pool.reserve().expect("the pool has room");
        pool.insert_reserved(reservation, value)
            .expect("a reservation of this pool")
    })
}

/// [`reserve_fill`]'s workload with one shared `insert` per key.
pub fn shared_insert(pool: &HandlePool<u64>, ops: u64) -> Duration {
    batched(pool, ops, |pool, value| {
        pool.insert(value).expect("the pool has room")
    })
}

/// `ops` calls of `insert` in batches of [`BATCH`], each batch timed, its
/// keys removed after it, untimed.
#[inline(always)]
fn batched(
    pool: &HandlePool<u64>,
    ops: u64,
    insert: impl Fn(&HandlePool<u64>, u64) -> Handle,
) -> Duration {
    debug_assert!(pool.len() + BATCH <= pool.capacity());
    let mut keys = Vec::with_capacity(BATCH);
    let mut took = Duration::ZERO;
    let mut done = 0;
    while done < ops {
        let n = (ops - done).min(BATCH as u64);
        let start = Instant::now();
        for i in done..done + n {
            keys.push(insert(pool, black_box(i)));
        }
        took += start.elapsed();
        for key in keys.drain(..) {
            black_box(pool.remove(key));
        }
        done += n;
    }
    took
}

/// `elapsed` for `done` operations, scaled to `wanted`.
pub(crate) fn scaled(elapsed: Duration, done: u64, wanted: u64) -> Duration {
    elapsed.mul_f64(wanted as f64 / done as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_fill_and_shared_insert_keep_the_pool_at_its_size() {
        let (pool, _) = populated::<HandlePool<u64>>();
        let ops = 3 * BATCH as u64 + 5;
        reserve_fill(&pool, ops);
        shared_insert(&pool, ops);
        assert_eq!(pool.len(), LIVE);
        assert_eq!(pool.stats().reserved, 0);
    }
}
