//! Property tests of the handle pool against a single-threaded slot map: a
//! plain model that keeps, for every handle ever returned, whether it is
//! live, its value, its insertion order and how many `Ref`s read it.
//!
//! Random sequences of inserts, removes, reads, held `Ref`s and their
//! drops, on pools that never evict, evict the oldest value or the least
//! value. At every step the pool must answer as the model does: which
//! handles are live and what they hold, `len`, which inserts fail, which
//! value an eviction picks (the oldest, or one of the least, among those
//! nobody reads), that a remove while read is deferred to the last `Ref`,
//! and that every value is dropped exactly once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError};
use tagpool::{Handle, HandlePool, InsertError, Ref};

fn config(cases: u32) -> Config {
    let default = Config::default(); // reads `PROPTEST_CASES`
    let cases = if cfg!(miri) {
        4
    } else if std::env::var_os("PROPTEST_CASES").is_some() {
        default.cases
    } else {
        cases
    };
    Config {
        cases,
        max_shrink_iters: if cfg!(miri) { 16 } else { 1024 },
        failure_persistence: None,
        ..default
    }
}

/// A value: its key (for the least-value policy) and a unique id; counts
/// its drops.
struct Value {
    key: u8,
    id: usize,
    drops: Arc<Mutex<Vec<u32>>>,
}

impl Drop for Value {
    fn drop(&mut self) {
        self.drops.lock().unwrap()[self.id] += 1;
    }
}

#[derive(Clone, Copy, Debug)]
enum Policy {
    Never,
    Oldest,
    Least,
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u8),
    Remove(Index),
    Get(Index),
    Hold(Index),
    Unhold(Index),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..6).prop_map(Op::Insert),
        2 => any::<Index>().prop_map(Op::Remove),
        2 => any::<Index>().prop_map(Op::Get),
        1 => any::<Index>().prop_map(Op::Hold),
        1 => any::<Index>().prop_map(Op::Unhold),
    ]
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        Just(Policy::Never),
        Just(Policy::Oldest),
        Just(Policy::Least)
    ]
}

/// The model's record of one handle.
#[derive(Debug)]
struct Entry {
    id: usize,
    key: u8,
    /// Insertion order.
    order: usize,
    live: bool,
    /// `Ref`s held now.
    readers: usize,
}

impl Entry {
    /// Whether it still takes an entry of the pool: live, or removed and
    /// still read.
    fn occupies(&self) -> bool {
        self.live || self.readers > 0
    }
}

fn run(capacity: usize, policy: Policy, ops: &[Op]) -> Result<(), TestCaseError> {
    let drops = Arc::new(Mutex::new(Vec::<u32>::new()));
    let evicted = Arc::new(Mutex::new(Vec::<(Handle, usize)>::new()));
    {
        let builder = HandlePool::builder().capacity(capacity);
        let builder = match policy {
            Policy::Never => builder,
            Policy::Oldest => builder.evict_oldest(),
            Policy::Least => builder.evict_min_by_key(|v: &Value| v.key),
        };
        let log = evicted.clone();
        let pool = builder
            .on_evict(move |h, v: Value| log.lock().unwrap().push((h, v.id)))
            .build()
            .unwrap();
        let mut model: HashMap<Handle, Entry> = HashMap::new();
        let mut handles: Vec<Handle> = Vec::new();
        let mut held: Vec<Ref<'_, Value>> = Vec::new();
        let mut order = 0;
        for op in ops {
            match op {
                Op::Insert(key) => {
                    let id = {
                        let mut drops = drops.lock().unwrap();
                        drops.push(0);
                        drops.len() - 1
                    };
                    let value = Value {
                        key: *key,
                        id,
                        drops: drops.clone(),
                    };
                    let occupied = model.values().filter(|e| e.occupies()).count();
                    let candidates: Vec<&Entry> = model
                        .values()
                        .filter(|e| e.live && e.readers == 0)
                        .collect();
                    // What the model expects of a full pool.
                    let victim: Option<Vec<usize>> = match policy {
                        _ if occupied < capacity => None,
                        Policy::Never => Some(Vec::new()),
                        Policy::Oldest => Some(
                            candidates
                                .iter()
                                .min_by_key(|e| e.order)
                                .map(|e| e.id)
                                .into_iter()
                                .collect(),
                        ),
                        Policy::Least => {
                            let least = candidates.iter().map(|e| e.key).min();
                            Some(
                                candidates
                                    .iter()
                                    .filter(|e| Some(e.key) == least)
                                    .map(|e| e.id)
                                    .collect(),
                            )
                        }
                    };
                    let before = evicted.lock().unwrap().len();
                    match (pool.insert(value), victim) {
                        (Ok(h), None) => {
                            prop_assert!(!model.get(&h).map_or(false, |e| e.occupies()));
                            prop_assert_eq!(evicted.lock().unwrap().len(), before);
                            model.insert(
                                h,
                                Entry {
                                    id,
                                    key: *key,
                                    order,
                                    live: true,
                                    readers: 0,
                                },
                            );
                            handles.push(h);
                        }
                        (Ok(h), Some(allowed)) => {
                            let log = evicted.lock().unwrap();
                            prop_assert_eq!(log.len(), before + 1, "one eviction");
                            let (gone, gone_id) = log[before];
                            prop_assert!(
                                allowed.contains(&gone_id),
                                "evicted {} of {:?}",
                                gone_id,
                                allowed
                            );
                            let entry = model.get_mut(&gone).expect("a known handle");
                            prop_assert!(entry.live && entry.readers == 0 && entry.id == gone_id);
                            entry.live = false;
                            prop_assert_eq!(h.index(), gone.index(), "the evicted entry is reused");
                            model.insert(
                                h,
                                Entry {
                                    id,
                                    key: *key,
                                    order,
                                    live: true,
                                    readers: 0,
                                },
                            );
                            handles.push(h);
                        }
                        (Err(err), Some(allowed)) => {
                            prop_assert!(allowed.is_empty(), "refused, but {:?} could go", allowed);
                            prop_assert!(matches!(err, InsertError::Full(_)));
                            prop_assert_eq!(err.into_inner().id, id);
                        }
                        (Err(err), None) => {
                            return Err(TestCaseError::fail(format!(
                                "{err} with {occupied} of {capacity} entries used"
                            )))
                        }
                    }
                    order += 1;
                }
                Op::Remove(i) if !handles.is_empty() => {
                    let h = *i.get(&handles);
                    let entry = model.get_mut(&h).unwrap();
                    prop_assert_eq!(pool.remove(h), entry.live);
                    entry.live = false;
                }
                Op::Get(i) if !handles.is_empty() => {
                    let h = *i.get(&handles);
                    let entry = &model[&h];
                    let seen = pool.with(h, |v| v.id);
                    prop_assert_eq!(seen, entry.live.then_some(entry.id), "{:?}", h);
                    prop_assert_eq!(pool.contains(h), entry.live);
                }
                Op::Hold(i) if !handles.is_empty() => {
                    let h = *i.get(&handles);
                    let entry = model.get_mut(&h).unwrap();
                    match pool.get(h) {
                        Some(r) => {
                            prop_assert!(entry.live);
                            prop_assert_eq!(r.id, entry.id);
                            entry.readers += 1;
                            held.push(r);
                        }
                        None => prop_assert!(!entry.live),
                    }
                }
                Op::Unhold(i) if !held.is_empty() => {
                    let r = held.swap_remove(i.index(held.len()));
                    let h = Ref::handle(&r);
                    let entry = model.get_mut(&h).unwrap();
                    prop_assert_eq!(r.id, entry.id, "a held value never changes");
                    drop(r);
                    entry.readers -= 1;
                }
                _ => {}
            }
            // After every step: `len`, and the drops so far.
            let occupied = model.values().filter(|e| e.occupies()).count();
            prop_assert_eq!(pool.len(), occupied);
            let drops = drops.lock().unwrap();
            for entry in model.values() {
                let expected = if entry.occupies() { 0 } else { 1 };
                prop_assert_eq!(
                    drops[entry.id],
                    expected,
                    "value {} ({:?})",
                    entry.id,
                    entry
                );
            }
        }
        drop(held);
    }
    // The pool is gone: every value was dropped exactly once (refused and
    // evicted values included).
    for (id, &n) in drops.lock().unwrap().iter().enumerate() {
        prop_assert_eq!(n, 1, "value {} dropped {} times", id, n);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn the_handle_pool_matches_a_slot_map(
        capacity in 1usize..6,
        policy in policy(),
        ops in prop::collection::vec(op(), 1..80),
    ) {
        run(capacity, policy, &ops)?;
    }
}
