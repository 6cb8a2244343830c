//! `HandlePool::insert_at`: a value placed under exactly the key given,
//! its entry taken from wherever the pool keeps it free (the chain of
//! entries vacated through `&mut`, the free list, a thread's cache, the
//! entries awaiting a grace period, a segment not allocated yet) with the
//! other free entries in their order; refused, the pool unchanged, where
//! the entry is live, past the key's generation, retired, or beyond the
//! capacity. A property test checks that no sequence of inserts, removals
//! and placements loses an entry or hands one out twice.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use tagpool::{Handle, HandlePool, InsertAtError, InsertError, Key};

fn key(index: usize, generation: u64) -> Handle {
    Handle::from_bits(generation << 24 | index as u64).unwrap()
}

/// A pool of `capacity` without caches: its free list's order is its
/// inserts' order.
fn plain(capacity: usize) -> HandlePool<u32> {
    HandlePool::builder()
        .capacity(capacity)
        .thread_cache(false)
        .build()
        .unwrap()
}

#[test]
fn the_entries_popped_above_it_leave_no_peak() {
    // Without caches the peak is exact: the entries `insert_at` pops to
    // reach its own (and the segments it allocates) were never in use.
    let mut pool = HandlePool::builder()
        .capacity(8)
        .initial(1)
        .thread_cache(false)
        .build()
        .unwrap();
    pool.insert_at(key(6, 1), 60).unwrap();
    assert_eq!(pool.stats().peak_in_use, 1);
    let mut pool = plain(8);
    pool.insert_at(key(7, 3), 70).unwrap();
    pool.insert_at(key(0, 1), 0).unwrap();
    assert_eq!((pool.len(), pool.stats().peak_in_use), (2, 2));
}

#[test]
fn a_fresh_entry_takes_the_key_and_the_free_list_keeps_its_order() {
    let mut pool = plain(6);
    pool.insert_at(key(3, 1), 30).unwrap();
    pool.insert_at(key(1, 5), 10).unwrap();
    assert_eq!(pool.get_mut(key(3, 1)), Some(&mut 30));
    assert_eq!(pool.get_mut(key(1, 5)), Some(&mut 10));
    assert_eq!(pool.len(), 2);
    // Generations 1 to 4 of entry 1 were skipped: stale.
    assert!((1..5).all(|g| !pool.contains(key(1, g))));
    // The other entries in the free list's order.
    let next: Vec<_> = (0..4).map(|v| pool.insert(v).unwrap()).collect();
    assert_eq!(next, [key(0, 1), key(2, 1), key(4, 1), key(5, 1)]);
    assert_eq!(pool.insert(9), Err(InsertError::Full(9)));
    assert_eq!(
        pool.keys().collect::<Vec<_>>(),
        [
            key(0, 1),
            key(1, 5),
            key(2, 1),
            key(3, 1),
            key(4, 1),
            key(5, 1)
        ],
        "the walks reach the placed values"
    );
    // A removal moves the entry past the placed key.
    assert_eq!(pool.remove_mut(key(1, 5)), Some(10));
    assert_eq!(pool.insert(11), Ok(key(1, 6)));
}

#[test]
fn an_entry_on_the_vacated_chain_leaves_it_in_order() {
    let mut pool = plain(8);
    let keys: Vec<_> = (0..5).map(|v| pool.insert_mut(v).unwrap()).collect();
    for &k in &keys[..4] {
        pool.remove_mut(k);
    }
    // The chain: 3, 2, 1, 0 (generation 2). Take 2 out of its middle, then
    // the head.
    pool.insert_at(key(2, 2), 22).unwrap();
    pool.insert_at(key(3, 4), 33).unwrap();
    assert_eq!(pool.insert_mut(100), Ok(key(1, 2)));
    assert_eq!(pool.insert(101), Ok(key(0, 2)));
    assert_eq!(pool.insert(102), Ok(key(5, 1)), "then the free list");
    assert_eq!(pool.len(), 6);
}

#[test]
fn an_entry_in_a_threads_cache_is_found() {
    let mut pool = HandlePool::builder()
        .capacity(64)
        .thread_cache(true)
        .build()
        .unwrap();
    let keys: Vec<_> = (0..8).map(|v| pool.insert(v).unwrap()).collect();
    for &k in &keys {
        assert!(pool.remove(k), "into this thread's cache");
    }
    let cached = keys[5];
    let next = key(cached.index(), cached.generation() + 1);
    pool.insert_at(next, 55).unwrap();
    assert_eq!(pool.get_mut(next), Some(&mut 55));
    // Every entry is still there, once.
    let mut seen: HashSet<_> = [cached.index()].into_iter().collect();
    for v in 0..63 {
        let k = pool.insert_mut(v).unwrap();
        assert!(seen.insert(k.index()), "{k:?} twice");
    }
    assert!(pool.insert_mut(0).is_err());
}

#[test]
fn an_entry_awaiting_a_grace_period_is_freed_first() {
    let drops = Arc::new(AtomicUsize::new(0));
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let mut pool = HandlePool::new(4);
    let k = pool.insert(Counted(drops.clone())).unwrap();
    assert!(pool.with(k, |_| ()).is_some(), "the pool has had a section");
    let section = pool.read();
    assert!(pool.remove(k));
    drop(section);
    assert_eq!(drops.load(Ordering::SeqCst), 0, "awaits a grace period");
    pool.insert_at(key(k.index(), 2), Counted(drops.clone()))
        .map_err(|e| e.to_string())
        .unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the removed value dropped");
    assert!(pool.contains(key(k.index(), 2)));
    assert_eq!(pool.len(), 1);
}

#[test]
fn an_entry_of_a_segment_not_allocated_yet_is_allocated() {
    let mut pool = HandlePool::builder()
        .capacity(64)
        .initial(1)
        .build()
        .unwrap();
    assert_eq!(pool.stats().allocated, 1);
    pool.insert_at(key(40, 3), 'x').unwrap();
    assert_eq!(
        pool.stats().allocated,
        1 + 32,
        "the entry's segment, 32..64"
    );
    assert_eq!(pool.get_mut(key(40, 3)), Some(&mut 'x'));
    let mut seen = HashSet::new();
    for _ in 0..63 {
        assert!(seen.insert(pool.insert_mut('y').unwrap().index()));
    }
    assert!(!seen.contains(&40) && pool.insert_mut('z').is_err());
}

#[test]
fn a_refusal_names_its_reason_and_leaves_the_pool_as_it_was() {
    let mut pool = plain(3);
    let a = pool.insert_mut(1).unwrap();
    let b = pool.insert_mut(2).unwrap();
    pool.remove_mut(b); // entry 1 at generation 2
    let errors = [
        (
            key(0, 1),
            InsertAtError::Occupied(7),
            "the key's entry holds a value",
        ),
        (
            key(0, 2),
            InsertAtError::Occupied(7),
            "the key's entry holds a value",
        ),
        (
            b,
            InsertAtError::Stale(7),
            "the key is older than its entry's generation",
        ),
        (
            key(3, 1),
            InsertAtError::OutOfRange(7),
            "the key's index is beyond the pool's capacity",
        ),
    ];
    for (k, err, message) in errors {
        assert_eq!(pool.insert_at(k, 7), Err(err));
        assert_eq!(err.to_string(), message);
    }
    assert_eq!((pool.len(), pool.get_mut(a)), (1, Some(&mut 1)));
    assert_eq!(pool.insert_mut(3), Ok(key(1, 2)), "the chain as it was");
    assert_eq!(pool.insert_mut(4), Ok(key(2, 1)));
}

#[test]
fn a_key_of_the_last_generation_retires_its_entry_on_removal() {
    let mut pool = plain(2);
    let last = key(1, Handle::MAX_GENERATION);
    pool.insert_at(last, 1).unwrap();
    assert_eq!(pool.remove_mut(last), Some(1));
    assert_eq!(pool.retired(), 1);
    assert_eq!(pool.insert_at(last, 2), Err(InsertAtError::Retired(2)));
    assert_eq!(pool.insert_at(key(1, 1), 2).unwrap_err().into_inner(), 2);
    assert_eq!(pool.insert_mut(3), Ok(key(0, 1)));
    assert!(pool.insert_mut(4).is_err(), "the retired entry is gone");
}

#[test]
fn a_placed_value_is_the_newest_for_oldest_first_eviction() {
    let mut pool = HandlePool::builder()
        .capacity(2)
        .evict_oldest()
        .build()
        .unwrap();
    let first = pool.insert(1).unwrap();
    pool.insert_at(key(1, 1), 2).unwrap();
    pool.insert(3).unwrap();
    assert!(!pool.contains(first) && pool.contains(key(1, 1)));
}

tagpool::new_key_type! {
    struct ItemKey;
}

#[test]
fn typed_keys_place_as_handles_do() {
    let mut pool: HandlePool<&str, ItemKey> = HandlePool::with_key(2);
    let k = ItemKey::from_handle(key(1, 9));
    pool.insert_at(k, "sword").unwrap();
    assert_eq!(pool.get_mut(k), Some(&mut "sword"));
}

fn config(cases: u32) -> Config {
    Config {
        cases: if cfg!(miri) { 4 } else { cases },
        failure_persistence: None,
        ..Config::default()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert,
    InsertMut,
    Remove(usize),
    RemoveMut(usize),
    /// At an index (mod the capacity), its generation the entry's next one
    /// plus the number (0 to 2), or a key handed out before.
    InsertAt(usize, u64),
    InsertAtOld(usize),
    Clear,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::Insert),
        3 => Just(Op::InsertMut),
        2 => any::<usize>().prop_map(Op::Remove),
        2 => any::<usize>().prop_map(Op::RemoveMut),
        3 => (any::<usize>(), 0..3u64).prop_map(|(i, g)| Op::InsertAt(i, g)),
        1 => any::<usize>().prop_map(Op::InsertAtOld),
        1 => Just(Op::Clear),
    ]
}

proptest! {
    #![proptest_config(config(256))]

    /// Against a model of every entry's generation and value: every
    /// answer as the model says (which keys are live, what they hold,
    /// which placements are refused and why), and the pool whole at the
    /// end (every free entry handed out once).
    #[test]
    fn placements_keep_every_entry_once(
        capacity in 1..12usize,
        cache in any::<bool>(),
        ops in prop::collection::vec(op(), 0..60),
    ) {
        let mut pool = HandlePool::builder().capacity(capacity).thread_cache(cache).build().unwrap();
        // The model: each entry's next generation (0 for retired) and value.
        let mut model: Vec<(u64, Option<u32>)> = vec![(1, None); capacity];
        let mut keys: Vec<Handle> = Vec::new();
        let mut value = 0u32;
        let pick = |i: usize, keys: &Vec<Handle>| keys.get(i % keys.len().max(1)).copied();
        for op in &ops {
            value += 1;
            match *op {
                Op::Insert | Op::InsertMut => {
                    let got = if let Op::Insert = op { pool.insert(value) } else { pool.insert_mut(value) };
                    let free = model.iter().any(|&(g, v)| g != 0 && v.is_none());
                    prop_assert_eq!(got.is_ok(), free);
                    if let Ok(k) = got {
                        let entry = &mut model[k.index()];
                        prop_assert_eq!((entry.0, entry.1), (k.generation(), None), "{:?}", k);
                        entry.1 = Some(value);
                        keys.push(k);
                    }
                }
                Op::Remove(i) | Op::RemoveMut(i) => {
                    if let Some(k) = pick(i, &keys) {
                        let entry = &mut model[k.index()];
                        let live = entry.1.is_some() && entry.0 == k.generation();
                        let got = if let Op::Remove(_) = op { pool.remove(k).then_some(0) } else { pool.remove_mut(k) };
                        prop_assert_eq!(got.is_some(), live);
                        if live {
                            entry.1 = None;
                            entry.0 = if entry.0 == Handle::MAX_GENERATION { 0 } else { entry.0 + 1 };
                        }
                    }
                }
                Op::InsertAt(i, bump) => {
                    let index = i % capacity;
                    let g = (model[index].0.max(1) + bump).min(Handle::MAX_GENERATION);
                    place(&mut pool, &mut model, &mut keys, key(index, g), value)?;
                }
                Op::InsertAtOld(i) => {
                    match pick(i, &keys) {
                        Some(k) => place(&mut pool, &mut model, &mut keys, k, value)?,
                        None => place(&mut pool, &mut model, &mut keys, key(i % capacity, Handle::MAX_GENERATION), value)?,
                    }
                }
                Op::Clear => {
                    pool.clear();
                    for entry in model.iter_mut().filter(|e| e.1.is_some()) {
                        entry.1 = None;
                        entry.0 = if entry.0 == Handle::MAX_GENERATION { 0 } else { entry.0 + 1 };
                    }
                }
            }
            prop_assert_eq!(pool.len(), model.iter().filter(|e| e.1.is_some()).count());
        }
        for &k in &keys {
            let entry = model[k.index()];
            let expected = entry.1.filter(|_| entry.0 == k.generation());
            prop_assert_eq!(pool.get_mut(k).copied(), expected, "{:?}", k);
        }
        let retired = model.iter().filter(|e| e.0 == 0).count();
        prop_assert_eq!(pool.retired(), retired);
        let mut seen: HashSet<usize> = pool.keys().map(|k| k.index()).collect();
        while let Ok(k) = pool.insert_mut(0) {
            prop_assert!(seen.insert(k.index()), "{:?} handed out twice", k);
        }
        prop_assert_eq!(seen.len(), capacity - retired);
    }
}

/// `insert_at(k, value)` on the pool and the model, answers compared.
fn place(
    pool: &mut HandlePool<u32>,
    model: &mut [(u64, Option<u32>)],
    keys: &mut Vec<Handle>,
    k: Handle,
    value: u32,
) -> Result<(), TestCaseError> {
    let entry = &mut model[k.index()];
    let expected = if entry.1.is_some() {
        Err(InsertAtError::Occupied(value))
    } else if entry.0 == 0 {
        Err(InsertAtError::Retired(value))
    } else if k.generation() < entry.0 {
        Err(InsertAtError::Stale(value))
    } else {
        Ok(())
    };
    prop_assert_eq!(pool.insert_at(k, value), expected, "{:?}", k);
    if expected.is_ok() {
        *entry = (k.generation(), Some(value));
        keys.push(k);
    }
    Ok(())
}
