//! The standard traits of a `HandlePool` (issue 38, item 5): `Clone` (a
//! snapshot under the same keys, stale keys stale, settings shared),
//! `IntoIterator` by value and by `&mut`, double-ended walks that meet in
//! the middle, and one answer to a refused insert (`InsertError::Full`
//! with what was not inserted) from `insert`, `insert_mut` and
//! `insert_with_key`.

use std::collections::BTreeSet;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use tagpool::{Handle, HandlePool, InsertError, Key};

/// A value that counts its drops.
#[derive(Debug)]
struct Counted {
    id: u64,
    drops: Arc<AtomicUsize>,
}

impl Clone for Counted {
    fn clone(&self) -> Self {
        Counted {
            id: self.id,
            drops: Arc::clone(&self.drops),
        }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// A pool built with `initial(1)`: segments `[0]`, `[1]`, `[2, 4)`,
/// `[4, 8)`, ..., so that the walks cross segments.
fn segmented(capacity: usize) -> HandlePool<u64> {
    HandlePool::builder()
        .capacity(capacity)
        .initial(1)
        .thread_cache(false)
        .build()
        .unwrap()
}

/// `n` values in `pool`, every third one removed: live entries with
/// holes, in index order.
fn with_holes(pool: &mut HandlePool<u64>, n: u64) -> Vec<(Handle, u64)> {
    let keys: Vec<_> = (0..n).map(|v| pool.insert_mut(v).unwrap()).collect();
    let mut live = Vec::new();
    for (v, key) in (0..n).zip(keys) {
        if v % 3 == 1 {
            assert_eq!(pool.remove_mut(key), Some(v));
        } else {
            live.push((key, v));
        }
    }
    live.sort_by_key(|&(key, _)| key.index());
    live
}

#[test]
fn a_clone_holds_every_live_value_under_its_key_and_keeps_stale_keys_stale() {
    let pool = HandlePool::new(8);
    let a = pool.insert(String::from("a")).unwrap();
    let gone = pool.insert(String::from("gone")).unwrap();
    let b = pool.insert(String::from("b")).unwrap();
    assert!(pool.remove(gone));
    let copy = pool.clone();
    assert_eq!((copy.capacity(), copy.len()), (8, 2));
    assert_eq!(copy.with(a, |s| s.clone()).as_deref(), Some("a"));
    assert_eq!(copy.with(b, |s| s.clone()).as_deref(), Some("b"));
    assert!(!copy.contains(gone), "stale in the clone too");
    // The freed entry comes back in the clone under a later generation.
    let next = copy.insert(String::from("next")).unwrap();
    assert_eq!(next.index(), gone.index(), "the lowest free entry first");
    assert!(next.generation() > gone.generation());
    assert!(!copy.contains(gone));
    // Two pools from now on.
    assert!(pool.remove(a));
    assert!(copy.contains(a) && !pool.contains(a));
    let mut copy = copy;
    let mut left: Vec<_> = copy.drain().map(|(_, s)| s).collect();
    left.sort();
    assert_eq!(left, ["a", "b", "next"]);
}

/// Every entry of the clone's capacity is usable exactly once: no index
/// is lost or handed out twice, in a pool whose segments are allocated on
/// demand.
#[test]
fn a_clone_of_a_segmented_pool_uses_every_entry_once() {
    let mut pool = segmented(64);
    let live = with_holes(&mut pool, 37);
    let copy = pool.clone();
    assert_eq!(copy.len(), live.len());
    assert_eq!(copy.stats().allocated, pool.stats().allocated);
    for &(key, v) in &live {
        assert_eq!(copy.with(key, |x| *x), Some(v));
    }
    let mut keys: BTreeSet<_> = live.iter().map(|&(k, _)| k.index()).collect();
    let mut added = 0;
    while let Ok(key) = copy.insert(1000 + added) {
        assert!(keys.insert(key.index()), "index {} twice", key.index());
        added += 1;
    }
    assert_eq!(keys.len(), 64, "every entry of the capacity");
    assert_eq!(added as usize, 64 - live.len());
    for &(key, v) in &live {
        assert_eq!(copy.with(key, |x| *x), Some(v), "kept");
    }
}

/// The clone shares the key function and `on_evict`, and evicts in the
/// source's order (the insertion stamps are copied), not in index order.
#[test]
fn a_clone_shares_its_hooks_and_evicts_the_oldest_of_the_source() {
    let evicted = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&evicted);
    let pool = HandlePool::builder()
        .capacity(3)
        .evict_oldest()
        .thread_cache(false)
        .on_evict(move |_, v: &'static str| log.lock().unwrap().push(v))
        .build()
        .unwrap();
    let a = pool.insert("a").unwrap();
    pool.insert("b").unwrap();
    pool.insert("c").unwrap();
    assert!(pool.remove(a));
    let d = pool.insert("d").unwrap();
    assert_eq!(d.index(), a.index(), "d is in the lowest entry");
    let copy = pool.clone();
    copy.insert("e").unwrap();
    assert_eq!(
        *evicted.lock().unwrap(),
        ["b"],
        "the oldest, not the lowest"
    );
    let quiet = HandlePool::builder()
        .capacity(2)
        .evict_min_by_key(|v: &u32| *v)
        .build()
        .unwrap();
    quiet.insert(5).unwrap();
    let low = quiet.insert(1).unwrap();
    let copy = quiet.clone();
    copy.insert(9).unwrap();
    assert!(!copy.contains(low) && quiet.contains(low));
}

/// Removed values the source still holds (a section open, a `Ref`
/// alive) are stale in the clone and their entries free there.
#[test]
fn values_removed_while_read_or_awaiting_a_grace_period_are_free_in_the_clone() {
    let pool = HandlePool::builder()
        .capacity(3)
        .thread_cache(false)
        .build()
        .unwrap();
    let read = pool.insert(1u32).unwrap();
    let deferred = pool.insert(2).unwrap();
    let kept = pool.insert(3).unwrap();
    let reader = pool.get(read).unwrap();
    assert!(pool.remove(read));
    let copy = {
        let section = pool.read();
        assert!(pool.remove(deferred));
        let copy = pool.clone();
        drop(section);
        copy
    };
    drop(reader);
    assert_eq!(copy.len(), 1);
    assert!(!copy.contains(read) && !copy.contains(deferred));
    assert_eq!(copy.with(kept, |v| *v), Some(3));
    let a = copy.insert(10).unwrap();
    let b = copy.insert(20).unwrap();
    assert!(copy.insert(30).is_err(), "full: two free entries");
    assert!(a != read && b != deferred && a != deferred && b != read);
}

/// A `T::clone` that panics leaves the source as it was: no read is left
/// counted (a `take` succeeds), no value is lost or dropped twice.
#[test]
fn a_panicking_value_clone_leaves_the_source_as_it_was() {
    #[derive(Debug)]
    struct Fragile(u32);
    impl Clone for Fragile {
        fn clone(&self) -> Self {
            assert!(self.0 != 2, "this value does not clone");
            Fragile(self.0)
        }
    }
    let pool = HandlePool::new(4);
    let keys: Vec<_> = (1..=3).map(|v| pool.insert(Fragile(v)).unwrap()).collect();
    let caught = panic::catch_unwind(AssertUnwindSafe(|| pool.clone()));
    assert!(caught.is_err());
    assert_eq!(pool.len(), 3);
    for (v, &key) in (1..=3).zip(&keys) {
        assert_eq!(pool.take(key).map(|f| f.0), Ok(v), "no read left counted");
    }
}

/// Values live throughout a clone are in it, while other threads insert
/// and remove around them; every value the clone holds is one its key
/// named in the source.
#[test]
fn a_clone_taken_during_inserts_and_removes_holds_every_value_live_throughout() {
    let rounds = if cfg!(miri) { 3 } else { 200 };
    let pool = HandlePool::builder().capacity(64).build().unwrap();
    // Each value is its own key's bits: a clone can be checked alone. A
    // third of 48 values stay, spread over the entries; the others' go to
    // the threads that insert and remove.
    let mut stable: Vec<Handle> = (0..48)
        .map(|_| pool.insert_with_key(|key: Handle| key.to_bits()).unwrap())
        .collect();
    stable.sort_by_key(|key| key.index());
    assert_eq!(stable[47].index(), 47);
    let gone = stable.iter().skip(1).step_by(3);
    for key in gone.chain(stable.iter().step_by(3)) {
        assert!(pool.remove(*key));
    }
    stable.retain(|&key| pool.contains(key));
    assert_eq!(stable.len(), 16);
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut mine = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(key) = pool.insert_with_key(|key: Handle| key.to_bits()) {
                        mine.push(key);
                    }
                    if mine.len() > 8 {
                        assert!(pool.remove(mine.remove(0)));
                    }
                    if cfg!(miri) {
                        thread::yield_now();
                    }
                }
            });
        }
        // Stops the threads however this one ends (a failed assertion
        // included: the scope waits for them).
        struct Stop<'a>(&'a AtomicBool);
        impl Drop for Stop<'_> {
            fn drop(&mut self) {
                self.0.store(true, Ordering::Relaxed);
            }
        }
        let _stop = Stop(&stop);
        for _ in 0..rounds {
            let mut copy = pool.clone();
            for &key in &stable {
                assert_eq!(copy.with(key, |v| *v), Some(key.to_bits()));
            }
            for (key, v) in copy.iter_mut() {
                assert_eq!(*v, key.to_bits(), "a value under its own key");
            }
        }
    });
}

#[test]
fn into_iter_moves_every_value_out_with_its_key_and_drops_the_rest() {
    let drops = Arc::new(AtomicUsize::new(0));
    let pool = HandlePool::new(8);
    let keys: Vec<_> = (0..5)
        .map(|id| {
            pool.insert(Counted {
                id,
                drops: Arc::clone(&drops),
            })
            .unwrap()
        })
        .collect();
    assert!(pool.remove(keys[1]));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let mut iter = pool.into_iter();
    assert_eq!(iter.len(), 4);
    let (key, first) = iter.next().unwrap();
    assert_eq!((key, first.id), (keys[0], 0));
    let (key, last) = iter.next_back().unwrap();
    assert_eq!((key, last.id), (keys[4], 4));
    assert_eq!(iter.len(), 2);
    drop((first, last));
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    drop(iter);
    assert_eq!(drops.load(Ordering::SeqCst), 5, "the rest dropped with it");
}

#[test]
fn into_iter_skips_a_value_removed_while_a_leaked_ref_read_it() {
    let pool = HandlePool::new(4);
    let a = pool.insert(1).unwrap();
    let b = pool.insert(2).unwrap();
    std::mem::forget(pool.get(a).unwrap());
    assert!(pool.remove(a));
    let all: Vec<_> = pool.into_iter().collect();
    assert_eq!(all, [(b, 2)]);
}

#[test]
fn iterating_a_pool_borrowed_mut_is_iter_mut() {
    let mut pool = HandlePool::new(4);
    let keys: Vec<_> = (0..3).map(|v| pool.insert(v).unwrap()).collect();
    let mut seen = Vec::new();
    for (key, value) in &mut pool {
        *value *= 10;
        seen.push(key);
    }
    assert_eq!(seen, keys);
    assert_eq!(pool.values().copied().collect::<Vec<_>>(), [0, 10, 20]);
}

/// Walks `iter` with `next` where `pattern` has a 1 bit and `next_back`
/// where it has a 0 (the lowest bit first), and checks that the ends meet: every item once, the front in order, the
/// back in reverse, `len` exact on the way.
fn meets_in_the_middle<I, T>(mut iter: I, expected: &[T], pattern: u32)
where
    I: DoubleEndedIterator<Item = T> + ExactSizeIterator,
    T: PartialEq + std::fmt::Debug,
{
    let (mut front, mut back) = (Vec::new(), Vec::new());
    let mut bits = pattern;
    for step in 0..=expected.len() {
        assert_eq!(iter.len(), expected.len() - step, "pattern {pattern:b}");
        let item = if bits & 1 == 1 {
            iter.next().map(|item| front.push(item))
        } else {
            iter.next_back().map(|item| back.push(item))
        };
        assert_eq!(item.is_some(), step < expected.len(), "pattern {pattern:b}");
        bits >>= 1;
    }
    assert!(iter.next().is_none() && iter.next_back().is_none(), "fused");
    back.reverse();
    front.extend(back);
    assert_eq!(front, expected, "pattern {pattern:b}");
}

#[test]
fn the_borrowing_iterators_meet_in_the_middle_from_either_end() {
    // Segments [0], [1], [2, 4), [4, 8), [8, 16), [16, 20).
    let mut pool = segmented(20);
    let live = with_holes(&mut pool, 20);
    let keys: Vec<_> = live.iter().map(|&(k, _)| k).collect();
    let values: Vec<_> = live.iter().map(|&(_, v)| v).collect();
    assert_eq!(live.len(), 13);
    // Every way to mix the 13 steps (a few under miri).
    let patterns: Vec<u32> = if cfg!(miri) {
        vec![0, !0, 0b0101_0101_0101, 0b1100_0011_1001]
    } else {
        (0..1 << 13).collect()
    };
    for pattern in patterns {
        meets_in_the_middle(pool.keys(), &keys, pattern);
        meets_in_the_middle(pool.values().copied(), &values, pattern);
        meets_in_the_middle(pool.values_mut().map(|v| *v), &values, pattern);
        meets_in_the_middle(pool.iter_mut().map(|(k, v)| (k, *v)), &live, pattern);
    }
}

#[test]
fn drain_and_into_iter_meet_in_the_middle_from_either_end() {
    let patterns: Vec<u32> = if cfg!(miri) {
        vec![0, !0, 0b0110, 0b1001_1010]
    } else {
        (0..256).collect()
    };
    for pattern in patterns {
        let mut pool = segmented(20);
        let live = with_holes(&mut pool, 20);
        meets_in_the_middle(pool.drain(), &live, pattern);
        assert!(pool.is_empty());
        assert!(live.iter().all(|&(key, _)| !pool.contains(key)), "stale");
        let live = with_holes(&mut pool, 20);
        meets_in_the_middle(pool.into_iter(), &live, pattern);
    }
}

/// A `Drain` dropped after steps from both ends removes what lies between.
#[test]
fn a_drain_dropped_between_its_ends_removes_the_middle() {
    let mut pool = segmented(20);
    let live = with_holes(&mut pool, 20);
    let mut drain = pool.drain();
    assert_eq!(drain.next(), Some(live[0]));
    assert_eq!(drain.next_back(), Some(live[live.len() - 1]));
    drop(drain);
    assert!(pool.is_empty());
    assert_eq!(pool.keys().count(), 0);
    let fresh = pool.insert_mut(7).unwrap();
    assert!(live.iter().all(|&(key, _)| key != fresh));
}

/// `insert`, `insert_mut` and `insert_with_key` refuse the same way: an
/// `InsertError::Full` holding what was not inserted, counted alike.
#[test]
fn a_refused_insert_answers_the_same_way_everywhere() {
    let mut pool = HandlePool::new(1);
    pool.insert(0).unwrap();
    let err: InsertError<i32> = pool.insert(1).unwrap_err();
    assert_eq!(err, InsertError::Full(1));
    assert_eq!(pool.insert_mut(2).unwrap_err().into_inner(), 2);
    let mut called = false;
    let err = pool
        .insert_with_key(|key| {
            called = true;
            key.index() as i32
        })
        .unwrap_err();
    assert!(matches!(err, InsertError::Full(_)));
    assert_eq!(err.to_string(), "every entry of the handle pool is in use");
    assert_eq!(format!("{err:?}"), "Full(..)");
    let make = err.into_inner();
    assert_eq!(make(Handle::from_bits(1 << 24).unwrap()), 0);
    assert!(called, "handed back uncalled");
    assert_eq!(pool.stats().refused_inserts, 3);
}

/// A key type of the pool's own is kept by a clone and an owning walk.
#[test]
fn typed_keys_survive_clone_and_into_iter() {
    tagpool::new_key_type! { struct ShipKey; }
    let pool: HandlePool<&str, ShipKey> = HandlePool::with_key(4);
    let ship = pool.insert("ship").unwrap();
    let copy = pool.clone();
    assert_eq!(copy.with(ship, |s| *s), Some("ship"));
    let all: Vec<(ShipKey, &str)> = copy.into_iter().collect();
    assert_eq!(all, [(ship, "ship")]);
    assert_eq!(ShipKey::from_handle(ship.handle()), ship);
}
