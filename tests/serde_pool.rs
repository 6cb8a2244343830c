//! The `serde` feature on a whole `HandlePool`: a save loads into a pool
//! where every saved key names its value, every stale key stays stale,
//! retired entries stay retired, the capacity and eviction come back, and
//! the next inserts (and every later operation) go as in the saved pool;
//! inconsistent input is an error, never a panic. Run with
//! `cargo test --features serde --test serde_pool`.
//!
//! The round trips go through a small self-describing format of the
//! tests' own (`support/format.rs`, `Value`: serde_test checks tokens, it
//! does not read them back), as a struct of named fields (JSON's way) and
//! as a sequence (bincode's).

#![cfg(feature = "serde")]

#[path = "support/format.rs"]
mod format;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tagpool::{Handle, HandleBuilder, HandlePool, InsertAtError, InsertError, Key};

use self::format::{Save, Value};

fn save<T: Serialize, K: Key>(pool: &HandlePool<T, K>, seq: bool) -> Value {
    pool.serialize(Save { seq }).expect("a pool saves")
}

fn load<T: DeserializeOwned, K: Key>(saved: Value) -> Result<HandlePool<T, K>, String> {
    HandlePool::deserialize(saved).map_err(|err| err.to_string())
}

/// The field `name` of a save made as a map.
fn field<'a>(saved: &'a mut Value, name: &str) -> &'a mut Value {
    match saved {
        Value::Map(fields) => {
            &mut fields
                .iter_mut()
                .find(|(n, _)| n == name)
                .expect("a field")
                .1
        }
        _ => panic!("a save as a map"),
    }
}

fn seq(value: &mut Value) -> &mut Vec<Value> {
    match value {
        Value::Seq(values) => values,
        other => panic!("a sequence, not {other:?}"),
    }
}

fn key(index: u64, generation: u64) -> Handle {
    Handle::from_bits(generation << 24 | index).unwrap()
}

tagpool::new_key_type! {
    struct NoteKey;
}

#[test]
fn every_saved_key_names_its_value_and_every_stale_key_stays_stale() {
    for seq_form in [false, true] {
        let mut pool: HandlePool<String, NoteKey> = HandlePool::builder_with_key()
            .capacity(8)
            .thread_cache(false)
            .build()
            .unwrap();
        let keys: Vec<_> = (0..6)
            .map(|i| pool.insert(format!("v{i}")).unwrap())
            .collect();
        assert!(pool.remove(keys[1]));
        assert_eq!(pool.remove_mut(keys[3]).as_deref(), Some("v3"));
        let again = pool.insert_mut("again".to_owned()).unwrap();
        assert_eq!((again.index(), again.generation()), (3, 2));
        let mut loaded: HandlePool<String, NoteKey> = load(save(&pool, seq_form)).unwrap();
        assert_eq!((loaded.capacity(), loaded.len()), (8, 5));
        for k in keys.iter().chain([&again]) {
            assert_eq!(
                loaded.get(*k).map(|v| v.clone()),
                pool.get(*k).map(|v| v.clone()),
                "{k:?}"
            );
        }
        assert!(loaded.get(keys[1]).is_none() && loaded.get(keys[3]).is_none());
        // The same next keys, and the same values behind them.
        for v in ["x", "y", "z"] {
            let (a, b) = (
                pool.insert_mut(v.to_owned()),
                loaded.insert_mut(v.to_owned()),
            );
            assert_eq!(a.map_err(|e| e.into_inner()), b.map_err(|e| e.into_inner()));
        }
        assert_eq!(
            pool.iter_mut()
                .map(|(k, v)| (k, v.clone()))
                .collect::<Vec<_>>(),
            loaded
                .iter_mut()
                .map(|(k, v)| (k, v.clone()))
                .collect::<Vec<_>>()
        );
    }
}

#[test]
fn a_fresh_pool_saves_no_free_key_however_large() {
    let pool = HandlePool::<u8>::new(if cfg!(miri) { 64 } else { 1 << 16 });
    let mut saved = save(&pool, false);
    assert_eq!(seq(field(&mut saved, "free")).len(), 0);
    assert_eq!(*field(&mut saved, "high"), Value::U64(0));
    let loaded: HandlePool<u8> = load(saved).unwrap();
    // As the saved pool would (its caches take a batch from the free list).
    assert_eq!(loaded.insert(1), pool.insert(1));
}

#[test]
fn the_oldest_value_is_evicted_first_after_a_load() {
    let pool = HandlePool::builder()
        .capacity(3)
        .evict_oldest()
        .build()
        .unwrap();
    let keys: Vec<_> = (0..3u32).map(|v| pool.insert(v).unwrap()).collect();
    pool.remove(keys[0]);
    let fourth = pool.insert(3).unwrap(); // index 0 again: the newest
    let loaded: HandlePool<u32> = load(save(&pool, false)).unwrap();
    // Oldest first: 1, 2, then 3 (in index 0).
    for (evicted, v) in [(keys[1], 4), (keys[2], 5), (fourth, 6)] {
        assert!(loaded.contains(evicted));
        loaded.insert(v).unwrap();
        assert!(!loaded.contains(evicted), "{evicted:?} evicted by {v}");
    }
}

#[test]
fn a_key_function_comes_from_the_builder() {
    let pool = HandlePool::builder()
        .capacity(2)
        .evict_min_by_key(|v: &u32| *v)
        .build()
        .unwrap();
    let loud = pool.insert(90).unwrap();
    let quiet = pool.insert(10).unwrap();
    let saved = save(&pool, false);
    let err = load::<u32, Handle>(saved.clone()).unwrap_err();
    assert!(err.contains("evicts by a key function"), "{err}");
    let evicted = Arc::new(AtomicBool::new(false));
    let seen = evicted.clone();
    let loaded = HandlePool::builder()
        .evict_min_by_key(|v: &u32| *v)
        .on_evict(move |k, v| {
            assert_eq!((k, v), (quiet, 10));
            seen.store(true, Ordering::SeqCst);
        })
        .deserialize_pool(saved.clone())
        .unwrap();
    loaded.insert(50).unwrap();
    assert!(evicted.load(Ordering::SeqCst) && loaded.contains(loud));
    // A builder of another policy is refused; one of none takes `oldest`.
    let err = HandlePool::<u32>::builder()
        .evict_oldest()
        .deserialize_pool(saved);
    assert_eq!(
        err.unwrap_err().to_string(),
        "the saved pool evicts `min_by_key`, the builder's `oldest`"
    );
}

#[test]
fn the_builder_sets_what_no_save_holds() {
    let pool = HandlePool::builder()
        .capacity(64)
        .evict_oldest()
        .thread_cache(false)
        .build()
        .unwrap();
    let k = pool.insert(7u64).unwrap();
    let loaded = HandlePool::builder()
        .capacity(3) // replaced by the saved 64
        .initial(1)
        .thread_cache(false)
        .deserialize_pool(save(&pool, true))
        .unwrap();
    assert_eq!((loaded.capacity(), loaded.stats().allocated), (64, 1));
    assert_eq!(loaded.with(k, |v| *v), Some(7));
    let err = HandlePool::<u64>::builder()
        .initial(100)
        .deserialize_pool(save(&pool, false))
        .unwrap_err();
    assert!(err.to_string().contains("initial"), "{err}");
}

#[test]
fn retired_entries_and_values_removed_while_read_come_back_as_they_were() {
    let mut pool = HandlePool::builder()
        .capacity(4)
        .thread_cache(false)
        .build()
        .unwrap();
    let last = key(2, Handle::MAX_GENERATION);
    pool.insert_at(last, 'r').unwrap();
    assert_eq!(pool.remove_mut(last), Some('r'));
    assert_eq!(pool.retired(), 1);
    let read = pool.insert('a').unwrap();
    let reader = pool.get(read).unwrap();
    assert!(pool.remove(read), "removed while read: freed by the reader");
    let saved = save(&pool, false);
    drop(reader);
    let mut loaded: HandlePool<char> = load(saved).unwrap();
    assert_eq!((loaded.retired(), loaded.len()), (1, 0));
    assert_eq!(
        loaded.insert_at(last, 'x'),
        Err(InsertAtError::Retired('x'))
    );
    assert!(!loaded.contains(read));
    let keys: Vec<_> = (0..3).map(|_| loaded.insert('n').unwrap()).collect();
    assert!(keys.iter().all(|k| k.index() != 2) && keys.contains(&key(read.index() as u64, 2)));
    assert_eq!(loaded.insert('n'), Err(InsertError::Full('n')));
}

#[test]
fn entries_awaiting_a_grace_period_are_saved_free_and_stale() {
    let pool = HandlePool::new(4);
    let keys: Vec<_> = (0..3u32).map(|v| pool.insert(v).unwrap()).collect();
    let section = pool.read();
    assert!(pool.remove(keys[0]) && pool.remove(keys[1]));
    let loaded: HandlePool<u32> = load(save(&pool, false)).unwrap();
    drop(section);
    assert_eq!(loaded.len(), 1);
    assert!(!loaded.contains(keys[0]) && !loaded.contains(keys[1]));
    let next: Vec<_> = (0..3).map(|v| loaded.insert(v).unwrap()).collect();
    for k in &keys[..2] {
        assert!(next.contains(&key(k.index() as u64, 2)), "{k:?} reused");
    }
}

#[test]
fn a_save_taken_while_threads_insert_and_remove_loads_and_holds_the_steady_values() {
    let pool = HandlePool::new(64);
    let steady: Vec<_> = (0..16u32).map(|v| pool.insert(v).unwrap()).collect();
    let stop = AtomicBool::new(false);
    /// Stops the threads, also if an assertion fails (the scope joins).
    struct Stop<'a>(&'a AtomicBool);
    impl Drop for Stop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let rounds = if cfg!(miri) { 2 } else { 200 };
    std::thread::scope(|s| {
        for t in 0..2 {
            let (pool, stop) = (&pool, &stop);
            s.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Ok(k) = pool.insert(1000 + t) {
                        pool.remove(k);
                    }
                }
            });
        }
        let _stop = Stop(&stop);
        for _ in 0..rounds {
            let loaded: HandlePool<u32> = load(save(&pool, false)).unwrap();
            for (v, k) in (0..).zip(&steady) {
                assert_eq!(loaded.with(*k, |x| *x), Some(v));
            }
            assert!(loaded.len() >= 16 && loaded.len() <= 18);
        }
    });
}

/// Saves whose values are edited by `edit`, each refused with `message`.
fn refused(edit: impl Fn(&mut Value), message: &str) {
    let mut pool = HandlePool::builder()
        .capacity(4)
        .thread_cache(false)
        .build()
        .unwrap();
    let a = pool.insert(1u32).unwrap();
    let b = pool.insert(2).unwrap();
    pool.insert(3).unwrap();
    pool.remove_mut(b);
    pool.remove(a);
    let mut saved = save(&pool, false);
    // high 3; values [(2v1, 3)]; vacant [1v2]; free [0v2].
    assert_eq!(*field(&mut saved, "high"), Value::U64(3));
    edit(&mut saved);
    assert_eq!(load::<u32, Handle>(saved).unwrap_err(), message);
}

#[test]
fn inconsistent_saves_are_errors_not_panics() {
    let bits = |index, generation| Value::U64(key(index, generation).to_bits());
    refused(
        |s| *field(s, "capacity") = Value::U64(0),
        "capacity 0 is not between 1 and 16777216",
    );
    refused(
        |s| *field(s, "capacity") = Value::U64((1 << 24) + 1),
        "capacity 16777217 is not between 1 and 16777216",
    );
    refused(
        |s| *field(s, "high") = Value::U64(5),
        "high mark 5 is above the capacity 4",
    );
    refused(
        |s| seq(field(s, "values")).push(Value::Seq(vec![bits(2, 9), Value::U64(0)])),
        "two values at index 2",
    );
    refused(
        |s| seq(field(s, "values")).push(Value::Seq(vec![bits(9, 1), Value::U64(0)])),
        "a value at index 9 is beyond the capacity 4",
    );
    refused(
        |s| seq(field(s, "values")).push(Value::Seq(vec![bits(3, 1), Value::U64(0)])),
        "a value at index 3 is at or above the high mark 3",
    );
    refused(
        |s| seq(field(s, "free")).push(bits(1, 2)),
        "index 1 is saved twice",
    );
    refused(
        |s| seq(field(s, "retired")).push(Value::U64(0)),
        "index 0 is saved twice",
    );
    refused(
        |s| seq(field(s, "vacant")).clear(),
        "index 1, below the high mark, is saved nowhere",
    );
    refused(
        |s| seq(field(s, "free")).push(bits(3, 2)),
        "the free entry at index 3, above the high mark, has generation 2, not 1",
    );
    refused(
        |s| seq(field(s, "free")).extend([bits(3, 1), bits(3, 1)]),
        "index 3 is saved twice",
    );
    refused(
        |s| seq(field(s, "free")).push(bits(4, 1)),
        "a free entry at index 4 is beyond the capacity 4",
    );
    refused(
        |s| seq(field(s, "vacant")).push(bits(3, 1)),
        "a vacated entry at index 3 is at or above the high mark 3",
    );
    refused(
        |s| seq(field(s, "free")).push(Value::U64(3)),
        "invalid value: integer `3`, expected the bits of a handle (generation 1 or above)",
    );
    refused(
        |s| *field(s, "evict") = Value::Variant("newest"),
        "unknown eviction kind, expected `never`, `oldest` or `min_by_key`",
    );
    refused(
        |s| *field(s, "high") = Value::U64(1 << 32),
        "invalid value: integer `4294967296`, expected u32",
    );
    refused(
        |s| match s {
            Value::Map(fields) => fields.retain(|(n, _)| n != "free"),
            _ => unreachable!(),
        },
        "missing field `free`",
    );
    refused(
        |s| match s {
            Value::Map(fields) => fields.push(("high".to_owned(), Value::U64(3))),
            _ => unreachable!(),
        },
        "duplicate field `high`",
    );
}

fn config(cases: u32) -> Config {
    let default = Config::default(); // reads `PROPTEST_CASES`
    Config {
        cases: if cfg!(miri) { 4 } else { cases },
        failure_persistence: None,
        ..default
    }
}

/// A step of the round-trip property test: keys are picked among those
/// handed out so far (`usize` mod their number).
#[derive(Clone, Debug)]
enum Op {
    Insert(u32),
    InsertMut(u32),
    Remove(usize),
    RemoveMut(usize),
    Get(usize),
    /// `retain`, keeping the values not divisible by the number.
    Retain(u32),
    /// `insert_at` under a key handed out, its generation moved by the
    /// second number (0 to 2).
    InsertAt(usize, u64, u32),
    /// `insert_at` at an index (mod the capacity) under its last
    /// generation: a removal then retires the entry.
    InsertAtLast(usize, u32),
}

fn op(exclusive_only: bool) -> impl Strategy<Value = Op> {
    let shared = prop_oneof![
        any::<u32>().prop_map(Op::Insert),
        any::<usize>().prop_map(Op::Remove),
    ];
    let exclusive = prop_oneof![
        4 => any::<u32>().prop_map(Op::InsertMut),
        3 => any::<usize>().prop_map(Op::RemoveMut),
        2 => any::<usize>().prop_map(Op::Get),
        1 => (2..5u32).prop_map(Op::Retain),
        2 => (any::<usize>(), 0..3u64, any::<u32>()).prop_map(|(k, g, v)| Op::InsertAt(k, g, v)),
        1 => (any::<usize>(), any::<u32>()).prop_map(|(i, v)| Op::InsertAtLast(i, v)),
    ];
    if exclusive_only {
        exclusive.boxed()
    } else {
        prop_oneof![3 => shared, 5 => exclusive].boxed()
    }
}

/// What an operation answered: compared between the two pools.
#[derive(Debug, PartialEq)]
enum Answer {
    Key(Result<Handle, InsertError<u32>>),
    Removed(Option<u32>),
    Read(Option<u32>),
    Kept(Vec<(Handle, u32)>),
    Placed(Result<(), InsertAtError<u32>>),
}

fn apply(pool: &mut HandlePool<u32>, keys: &mut Vec<Handle>, op: &Op) -> Answer {
    let pick = |i: usize, keys: &Vec<Handle>| keys.get(i % keys.len().max(1)).copied();
    let answer = match *op {
        Op::Insert(v) => Answer::Key(pool.insert(v)),
        Op::InsertMut(v) => Answer::Key(pool.insert_mut(v)),
        Op::Remove(i) => Answer::Removed(pick(i, keys).filter(|&k| pool.remove(k)).map(|_| 0)),
        Op::RemoveMut(i) => Answer::Removed(pick(i, keys).and_then(|k| pool.remove_mut(k))),
        Op::Get(i) => Answer::Read(pick(i, keys).and_then(|k| pool.get(k).map(|v| *v))),
        Op::Retain(m) => {
            pool.retain(|_, v| *v % m != 0);
            Answer::Kept(pool.iter_mut().map(|(k, v)| (k, *v)).collect())
        }
        Op::InsertAt(i, bump, v) => {
            let k = pick(i, keys).unwrap_or_else(|| key(0, 1));
            let k = key(
                k.index() as u64,
                (k.generation() + bump).min(Handle::MAX_GENERATION),
            );
            keys.push(k);
            Answer::Placed(pool.insert_at(k, v))
        }
        Op::InsertAtLast(i, v) => {
            let k = key((i % pool.capacity()) as u64, Handle::MAX_GENERATION);
            keys.push(k);
            Answer::Placed(pool.insert_at(k, v))
        }
    };
    if let Answer::Key(Ok(k)) = answer {
        keys.push(k);
    }
    answer
}

#[derive(Clone, Copy, Debug)]
enum Evict {
    Never,
    Oldest,
    Least,
}

fn builder(evict: Evict, cache: bool, initial: bool, capacity: usize) -> HandleBuilder<u32> {
    let builder = HandlePool::builder().thread_cache(cache);
    let builder = if initial { builder.initial(1) } else { builder };
    match evict {
        Evict::Never => builder,
        Evict::Oldest => builder.evict_oldest(),
        Evict::Least => builder.evict_min_by_key(|v: &u32| *v % 7),
    }
    .capacity(capacity)
}

fn evict() -> impl Strategy<Value = Evict> {
    prop_oneof![Just(Evict::Never), Just(Evict::Oldest), Just(Evict::Least)]
}

/// Runs `before` on a pool, saves it, loads the save, then runs `after` on
/// both and compares every answer and the pools' contents.
fn round_trip(
    (evict, cache, initial, capacity, seq_form): (Evict, bool, bool, usize, bool),
    before: &[Op],
    after: &[Op],
) -> Result<(), TestCaseError> {
    let mut pool = builder(evict, cache, initial, capacity).build().unwrap();
    let mut keys = Vec::new();
    for op in before {
        apply(&mut pool, &mut keys, op);
    }
    let saved = save(&pool, seq_form);
    // The builder's own caches; no policy but a key function, which it
    // must give: `oldest` comes from the save. Its capacity (1) and
    // `initial` are the loaded pool's business.
    let policy = if let Evict::Least = evict {
        evict
    } else {
        Evict::Never
    };
    let loaded = builder(policy, cache, !initial, 1).deserialize_pool(saved);
    let mut loaded = loaded.map_err(|err| TestCaseError::fail(err.to_string()))?;
    prop_assert_eq!(
        (loaded.len(), loaded.retired()),
        (pool.len(), pool.retired())
    );
    for &k in &keys {
        prop_assert_eq!(
            loaded.get_mut(k).copied(),
            pool.get_mut(k).copied(),
            "{:?}",
            k
        );
    }
    let mut their_keys = keys.clone();
    for (step, op) in after.iter().enumerate() {
        let mine = apply(&mut pool, &mut keys, op);
        let theirs = apply(&mut loaded, &mut their_keys, op);
        prop_assert_eq!(mine, theirs, "step {} after the load: {:?}", step, op);
    }
    let live = |p: &mut HandlePool<u32>| p.iter_mut().map(|(k, v)| (k, *v)).collect::<Vec<_>>();
    prop_assert_eq!(live(&mut pool), live(&mut loaded));
    Ok(())
}

fn setting(
    cache: impl Strategy<Value = bool>,
) -> impl Strategy<Value = (Evict, bool, bool, usize, bool)> {
    (evict(), cache, any::<bool>(), 1..10usize, any::<bool>())
}

proptest! {
    #![proptest_config(config(256))]

    /// Without caches, any operations before and after the save.
    #[test]
    fn a_loaded_pool_answers_every_later_operation_as_the_saved_one(
        setting in setting(Just(false)),
        before in prop::collection::vec(op(false), 0..40),
        after in prop::collection::vec(op(false), 0..40),
    ) {
        round_trip(setting, &before, &after)?;
    }

    /// With caches (on or off) and removals through `&mut` only: no free
    /// entry in a cache when the save is taken.
    #[test]
    fn a_pool_used_through_mut_reloads_exactly_with_caches_on(
        setting in setting(any::<bool>()),
        before in prop::collection::vec(op(true), 0..40),
        after in prop::collection::vec(op(true), 0..40),
    ) {
        round_trip(setting, &before, &after)?;
    }

    /// Any edit of a save's numbers or sequences loads or is refused, never
    /// panics; a loaded pool is whole (every entry usable once).
    #[test]
    fn an_edited_save_loads_whole_or_is_refused(
        setting in setting(any::<bool>()),
        before in prop::collection::vec(op(false), 0..30),
        edits in prop::collection::vec((any::<usize>(), 0..4u8, 0..12u64), 1..4),
    ) {
        let (evict, cache, initial, capacity, _) = setting;
        let evict = if let Evict::Least = evict { Evict::Never } else { evict };
        let mut pool = builder(evict, cache, initial, capacity).build().unwrap();
        let mut keys = Vec::new();
        for op in &before {
            apply(&mut pool, &mut keys, op);
        }
        let mut saved = save(&pool, false);
        for (at, how, n) in edits {
            edit(&mut saved, at, how, n);
        }
        if let Ok(mut loaded) = load::<u32, Handle>(saved) {
            let live = loaded.len();
            let free = loaded.capacity() - live - loaded.retired();
            let mut fresh: std::collections::HashSet<_> = loaded.keys().map(|k| k.index()).collect();
            prop_assert_eq!(fresh.len(), live);
            for v in 0..free {
                let k = loaded.insert_mut(v as u32).map_err(|_| TestCaseError::fail("a free entry lost"))?;
                prop_assert!(fresh.insert(k.index()), "{:?} handed out twice", k);
            }
            prop_assert_eq!(loaded.len(), loaded.capacity() - loaded.retired());
            if let Evict::Never = evict {
                prop_assert!(loaded.insert_mut(0).is_err());
            }
        }
    }
}

/// Edits the `at`th number or sequence of `saved` (in a walk of the tree,
/// a struct's fields not counted themselves): sets a number to `n`, or a
/// key's generation or index to `n`; drops, duplicates or adds an element
/// of a sequence, or empties it.
fn edit(saved: &mut Value, at: usize, how: u8, n: u64) {
    fn count(value: &Value) -> usize {
        match value {
            Value::Map(fields) => fields.iter().map(|(_, v)| count(v)).sum(),
            Value::Seq(values) => 1 + values.iter().map(count).sum::<usize>(),
            _ => 1,
        }
    }
    fn visit(value: &mut Value, at: &mut usize, how: u8, n: u64) -> bool {
        if let Value::Map(fields) = value {
            return fields.iter_mut().any(|(_, v)| visit(v, at, how, n));
        }
        if *at > 0 {
            *at -= 1;
            return match value {
                Value::Seq(values) => values.iter_mut().any(|v| visit(v, at, how, n)),
                _ => false,
            };
        }
        match value {
            Value::U64(x) => {
                *x = match how {
                    0 => n,
                    1 => *x & 0xff_ffff | n << 24,
                    2 => *x & !0xff_ffff | n,
                    _ => x.wrapping_add(n),
                }
            }
            Value::Seq(values) if !values.is_empty() && how < 2 => {
                let i = n as usize % values.len();
                if how == 0 {
                    values.remove(i);
                } else {
                    let copy = values[i].clone();
                    values.push(copy);
                }
            }
            Value::Seq(values) if how == 2 => values.clear(),
            Value::Seq(values) => values.push(Value::U64(n)),
            _ => {}
        }
        true
    }
    let mut at = at % count(saved);
    visit(saved, &mut at, how, n);
}
