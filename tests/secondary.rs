//! The secondary maps, `SecondaryMap` and `SparseSecondaryMap`: the
//! generation rules (an older key is refused, a newer one replaces, a
//! stale key reads nothing), the entry API in every branch, retain, drain,
//! `get_disjoint_mut`, the std traits, and a map beside a real
//! `HandlePool`. The behaviour both maps share is tested on both, through
//! `both_maps!`.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;

use tagpool::{
    Entry, Handle, HandlePool, Key, OccupiedEntry, SecondaryDrain, SecondaryIntoIter,
    SecondaryIter, SecondaryIterMut, SecondaryKeys, SecondaryMap, SecondaryValues,
    SecondaryValuesMut, SparseSecondaryMap, VacantEntry,
};

/// The key of `index` under `generation` (at least 1).
fn key(index: u64, generation: u64) -> Handle {
    Handle::from_bits(generation << 24 | index).expect("generation 1 or above")
}

/// A value that counts its drops.
#[derive(Debug)]
struct Counted(Rc<Cell<usize>>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

/// A drop counter, and a maker of values that count into it.
fn counter() -> (Rc<Cell<usize>>, impl Fn() -> Counted) {
    let drops = Rc::new(Cell::new(0));
    let make = {
        let drops = Rc::clone(&drops);
        move || Counted(Rc::clone(&drops))
    };
    (drops, make)
}

/// The tests of what both maps do alike, for the map type `$map` (as
/// `$map<K, V>`).
macro_rules! both_maps {
    ($module:ident, $map:ident) => {
        mod $module {
            use super::*;

            type Map<V> = $map<Handle, V>;

            #[test]
            fn an_insert_of_the_same_key_replaces_and_returns_the_old_value() {
                let mut map = Map::new();
                assert_eq!(map.insert(key(3, 1), "a"), None);
                assert_eq!(map.insert(key(3, 1), "b"), Some("a"));
                assert_eq!(map.get(key(3, 1)), Some(&"b"));
                assert_eq!(map.len(), 1);
            }

            #[test]
            fn a_newer_key_replaces_the_stored_one_and_drops_its_value() {
                let (drops, make) = counter();
                let mut map = Map::new();
                map.insert(key(3, 1), make());
                assert!(
                    map.insert(key(3, 2), make()).is_none(),
                    "None, not the old value"
                );
                assert_eq!(drops.get(), 1, "the older value is dropped");
                assert_eq!(map.len(), 1);
                assert!(map.contains_key(key(3, 2)));
                assert!(!map.contains_key(key(3, 1)));
                assert_eq!(map.keys().collect::<Vec<_>>(), [key(3, 2)]);
            }

            #[test]
            fn an_older_key_is_refused_and_its_value_dropped() {
                let (drops, make) = counter();
                let mut map = Map::new();
                map.insert(key(3, 5), make());
                assert!(map.insert(key(3, 4), make()).is_none());
                assert_eq!(drops.get(), 1, "the refused value, not the stored one");
                assert_eq!(map.len(), 1);
                assert!(map.contains_key(key(3, 5)));
                assert_eq!(map.keys().collect::<Vec<_>>(), [key(3, 5)]);
            }

            #[test]
            fn keys_of_other_generations_read_nothing() {
                let mut map = Map::new();
                map.insert(key(2, 7), 70);
                for other in [key(2, 6), key(2, 8)] {
                    assert_eq!(map.get(other), None);
                    assert_eq!(map.get_mut(other), None);
                    assert!(!map.contains_key(other));
                    assert_eq!(map.remove(other), None);
                    assert!(map.get_disjoint_mut([other]).is_none());
                }
                assert_eq!(map[key(2, 7)], 70, "still there");
                assert_eq!(map.len(), 1);
            }

            #[test]
            fn a_removed_key_reads_nothing_and_an_older_key_may_insert_again() {
                let mut map = Map::new();
                map.insert(key(1, 2), "b");
                assert_eq!(map.remove(key(1, 2)), Some("b"));
                assert_eq!(map.remove(key(1, 2)), None);
                assert_eq!(map.get(key(1, 2)), None);
                assert!(map.is_empty());
                // Nothing is stored at the index: no generation to refuse.
                assert_eq!(map.insert(key(1, 1), "a"), None);
                assert_eq!(map[key(1, 1)], "a");
            }

            #[test]
            fn an_index_far_past_the_others_reads_nothing_until_inserted() {
                let mut map = Map::new();
                map.insert(key(0, 1), 0);
                let far = key((1 << 24) - 1, 1);
                assert_eq!(map.get(far), None);
                assert_eq!(map.get_mut(far), None);
                assert_eq!(map.remove(far), None);
                assert!(!map.contains_key(far));
                assert!(map.get_disjoint_mut([far]).is_none());
                assert_eq!(map.insert(key(1000, 3), 1000), None);
                assert_eq!(map.len(), 2);
                assert_eq!(map[key(1000, 3)], 1000);
                assert_eq!(map.remove(key(1000, 3)), Some(1000));
                assert_eq!(map.iter().collect::<Vec<_>>(), [(key(0, 1), &0)]);
            }

            #[test]
            #[should_panic(expected = "no value for Handle(4v2) in the secondary map")]
            fn indexing_with_a_stale_key_panics() {
                let mut map = Map::new();
                map.insert(key(4, 3), 1);
                let _ = map[key(4, 2)];
            }

            #[test]
            #[should_panic(expected = "no value for Handle(9v1) in the secondary map")]
            fn indexing_mutably_without_a_value_panics() {
                let mut map = Map::<u8>::new();
                map[key(9, 1)] = 1;
            }

            #[test]
            fn an_entry_is_none_for_an_older_key_and_keeps_the_value() {
                let mut map = Map::new();
                map.insert(key(5, 3), "c");
                assert!(map.entry(key(5, 2)).is_none());
                assert_eq!(map[key(5, 3)], "c");
                assert_eq!(map.len(), 1);
            }

            #[test]
            fn a_vacant_entry_inserts_and_counts_its_value() {
                let mut map = Map::new();
                let entry = map.entry(key(2, 1)).unwrap();
                assert_eq!(entry.key(), key(2, 1));
                let vacant = match entry {
                    Entry::Vacant(vacant) => vacant,
                    Entry::Occupied(_) => panic!("occupied"),
                };
                assert_eq!(vacant.key(), key(2, 1));
                *vacant.insert(1) += 1;
                assert_eq!(map[key(2, 1)], 2);
                assert_eq!(map.len(), 1);
            }

            #[test]
            fn a_newer_keys_entry_is_vacant_and_its_insert_drops_the_older_value() {
                let (drops, make) = counter();
                let mut map = Map::new();
                map.insert(key(2, 1), make());
                match map.entry(key(2, 2)).unwrap() {
                    Entry::Vacant(vacant) => {
                        vacant.insert(make());
                    }
                    Entry::Occupied(_) => panic!("occupied"),
                }
                assert_eq!(drops.get(), 1);
                assert_eq!(map.len(), 1, "replaced, not added");
                assert!(map.contains_key(key(2, 2)) && !map.contains_key(key(2, 1)));
            }

            #[test]
            fn a_dropped_vacant_entry_changes_nothing() {
                let mut map = Map::new();
                map.insert(key(2, 1), 1);
                assert!(matches!(map.entry(key(2, 2)), Some(Entry::Vacant(_))));
                assert!(matches!(map.entry(key(7, 1)), Some(Entry::Vacant(_))));
                assert_eq!(map.len(), 1);
                assert_eq!(map[key(2, 1)], 1);
                assert_eq!(map.iter().count(), 1);
            }

            #[test]
            fn an_occupied_entry_reads_changes_and_removes_its_value() {
                let mut map = Map::new();
                map.insert(key(6, 4), 10);
                let mut occupied = match map.entry(key(6, 4)).unwrap() {
                    Entry::Occupied(occupied) => occupied,
                    Entry::Vacant(_) => panic!("vacant"),
                };
                assert_eq!(occupied.key(), key(6, 4));
                assert_eq!(*occupied.get(), 10);
                *occupied.get_mut() += 1;
                assert_eq!(occupied.insert(20), 11);
                assert_eq!(
                    format!("{occupied:?}"),
                    "OccupiedEntry { key: Handle(6v4), value: 20 }"
                );
                *occupied.into_mut() += 1;
                assert_eq!(map[key(6, 4)], 21);

                match map.entry(key(6, 4)).unwrap() {
                    Entry::Occupied(occupied) => assert_eq!(occupied.remove(), 21),
                    Entry::Vacant(_) => panic!("vacant"),
                }
                assert!(map.is_empty());
                assert_eq!(map.get(key(6, 4)), None);
                assert_eq!(map.iter().count(), 0);
            }

            #[test]
            fn the_entry_shortcuts_insert_only_when_vacant() {
                let mut map = Map::new();
                let a = key(1, 1);
                assert_eq!(*map.entry(a).unwrap().or_insert(1), 1);
                assert_eq!(*map.entry(a).unwrap().or_insert(2), 1);
                assert_eq!(*map.entry(a).unwrap().or_insert_with(|| unreachable!()), 1);
                assert_eq!(
                    *map.entry(a).unwrap().or_insert_with_key(|_| unreachable!()),
                    1
                );

                let b = key(2, 3);
                let made = map
                    .entry(b)
                    .unwrap()
                    .or_insert_with_key(|k| k.generation() * 10);
                assert_eq!(*made, 30);
                let c = key(3, 1);
                assert_eq!(*map.entry(c).unwrap().or_insert_with(|| 4), 4);
                let d = key(4, 1);
                assert_eq!(*map.entry(d).unwrap().or_default(), 0);
                assert_eq!(*map.entry(d).unwrap().or_default(), 0);
                assert_eq!(map.len(), 4);
            }

            #[test]
            fn and_modify_runs_on_an_occupied_entry_only() {
                let mut map = Map::new();
                let a = key(1, 1);
                let calls = Cell::new(0);
                let modify = |n: &mut u64| {
                    calls.set(calls.get() + 1);
                    *n += 10;
                };
                map.entry(a).unwrap().and_modify(modify).or_insert(1);
                assert_eq!((map[a], calls.get()), (1, 0));
                let entry = map.entry(a).unwrap().and_modify(modify);
                assert_eq!(entry.key(), a);
                assert_eq!(*entry.or_insert(100), 11);
                assert_eq!(calls.get(), 1);
            }

            #[test]
            fn debug_of_entries_shows_their_keys() {
                let mut map = Map::new();
                map.insert(key(1, 1), 5);
                let occupied = format!("{:?}", map.entry(key(1, 1)).unwrap());
                assert_eq!(
                    occupied,
                    "Occupied(OccupiedEntry { key: Handle(1v1), value: 5 })"
                );
                let vacant = format!("{:?}", map.entry(key(2, 1)).unwrap());
                assert_eq!(vacant, "Vacant(VacantEntry { key: Handle(2v1) })");
            }

            #[test]
            fn retain_keeps_what_the_closure_keeps_and_sees_every_key() {
                let (drops, make) = counter();
                let mut map = Map::new();
                for index in 0..6 {
                    map.insert(key(index, 2), (index, make()));
                }
                let mut seen = Vec::new();
                map.retain(|k, (index, _)| {
                    seen.push(k);
                    *index += 100;
                    *index % 2 == 0
                });
                seen.sort();
                assert_eq!(seen, (0..6).map(|i| key(i, 2)).collect::<Vec<_>>());
                assert_eq!(drops.get(), 3);
                assert_eq!(map.len(), 3);
                let mut kept: Vec<_> = map.iter().map(|(k, (i, _))| (k, *i)).collect();
                kept.sort();
                assert_eq!(kept, [(key(0, 2), 100), (key(2, 2), 102), (key(4, 2), 104)]);
            }

            #[test]
            fn a_panic_in_retain_leaves_the_length_right() {
                let mut map = Map::new();
                for index in 0..6 {
                    map.insert(key(index, 1), index);
                }
                let mut calls = 0;
                let caught = catch_unwind(AssertUnwindSafe(|| {
                    map.retain(|_, _| {
                        calls += 1;
                        if calls == 4 {
                            panic!("in retain");
                        }
                        false
                    })
                }));
                assert!(caught.is_err());
                assert_eq!(map.len(), 3);
                assert_eq!(map.iter().count(), 3);
            }

            #[test]
            fn drain_yields_every_pair_and_empties_the_map() {
                let mut map = Map::new();
                for index in [4, 1, 7] {
                    map.insert(key(index, 1), index);
                }
                let drain = map.drain();
                assert_eq!(drain.len(), 3);
                let mut pairs: Vec<_> = drain.collect();
                pairs.sort();
                assert_eq!(pairs, [(key(1, 1), 1), (key(4, 1), 4), (key(7, 1), 7)]);
                assert!(map.is_empty());
                assert_eq!(map.iter().count(), 0);
                map.insert(key(4, 2), 40);
                assert_eq!(map.len(), 1, "usable after a drain");
            }

            #[test]
            fn a_drain_dropped_half_way_drops_and_removes_the_rest() {
                let (drops, make) = counter();
                let mut map = Map::new();
                for index in 0..5 {
                    map.insert(key(index, 1), make());
                }
                let mut drain = map.drain();
                let first = drain.next().unwrap();
                let second = drain.next().unwrap();
                assert_eq!(drain.len(), 3);
                drop(drain);
                assert_eq!(drops.get(), 3, "the three not yielded");
                assert!(map.is_empty());
                assert_eq!(map.iter().count(), 0);
                assert!(!map.contains_key(first.0) && !map.contains_key(second.0));
                drop((first, second));
                assert_eq!(drops.get(), 5);
            }

            #[test]
            fn clear_drops_every_value_and_the_map_works_after() {
                let (drops, make) = counter();
                let mut map = Map::new();
                for index in 0..4 {
                    map.insert(key(index, 1), make());
                }
                map.clear();
                assert_eq!(drops.get(), 4);
                assert!(map.is_empty());
                assert!(!map.contains_key(key(0, 1)));
                assert_eq!(map.iter().count(), 0);
                map.insert(key(0, 1), make());
                assert_eq!(map.len(), 1);
            }

            #[test]
            fn get_disjoint_mut_gives_values_in_the_keys_order() {
                let mut map = Map::new();
                for index in 0..5 {
                    map.insert(key(index, 2), index * 10);
                }
                let [c, a, e] = map
                    .get_disjoint_mut([key(2, 2), key(0, 2), key(4, 2)])
                    .unwrap();
                assert_eq!((*c, *a, *e), (20, 0, 40));
                *c += 1;
                *a += 2;
                *e += 3;
                assert_eq!(map[key(2, 2)], 21);
                assert_eq!(map[key(0, 2)], 2);
                assert_eq!(map[key(4, 2)], 43);
                let none: [&mut u64; 0] = map.get_disjoint_mut([]).unwrap();
                assert!(none.is_empty());
            }

            #[test]
            fn get_disjoint_mut_refuses_a_duplicate_or_an_absent_key() {
                let mut map = Map::new();
                map.insert(key(0, 1), 0);
                map.insert(key(1, 1), 1);
                assert!(
                    map.get_disjoint_mut([key(0, 1), key(0, 1)]).is_none(),
                    "twice"
                );
                assert!(
                    map.get_disjoint_mut([key(1, 1), key(0, 1), key(1, 2)])
                        .is_none(),
                    "one index twice, under two generations"
                );
                assert!(
                    map.get_disjoint_mut([key(0, 1), key(2, 1)]).is_none(),
                    "absent"
                );
                assert!(
                    map.get_disjoint_mut([key(0, 1), key(900, 1)]).is_none(),
                    "past the end"
                );
                assert!(
                    map.get_disjoint_mut([key(0, 2), key(1, 1)]).is_none(),
                    "newer"
                );
                assert!(map.get_disjoint_mut([key(0, 1), key(1, 1)]).is_some());
            }

            #[test]
            fn from_iter_and_extend_insert_by_the_generation_rules() {
                let mut map: Map<&str> = [
                    (key(0, 1), "a"),
                    (key(1, 3), "b"),
                    (key(1, 2), "older: refused"),
                    (key(0, 1), "a again"),
                ]
                .into_iter()
                .collect();
                assert_eq!(map.len(), 2);
                assert_eq!((map[key(0, 1)], map[key(1, 3)]), ("a again", "b"));
                map.extend([(key(1, 4), "newer"), (key(2, 1), "c")]);
                assert_eq!(map.len(), 3);
                assert_eq!(map[key(1, 4)], "newer");
                assert!(!map.contains_key(key(1, 3)));
            }

            #[test]
            fn the_iterators_yield_every_pair_and_know_their_length() {
                let mut map = Map::new();
                for index in [3, 0, 9] {
                    map.insert(key(index, 1), index);
                }
                let iter = map.iter();
                assert_eq!(iter.size_hint(), (3, Some(3)));
                let mut pairs: Vec<_> = iter.map(|(k, v)| (k, *v)).collect();
                pairs.sort();
                assert_eq!(pairs, [(key(0, 1), 0), (key(3, 1), 3), (key(9, 1), 9)]);
                assert_eq!(map.keys().len(), 3);
                assert_eq!(map.values().sum::<u64>(), 12);
                for value in map.values_mut() {
                    *value *= 2;
                }
                for (k, value) in map.iter_mut() {
                    *value += k.index() as u64;
                }
                for (_, value) in &mut map {
                    *value += 1;
                }
                assert_eq!((&map).into_iter().map(|(_, v)| *v).sum::<u64>(), 3 * 12 + 3);
                let mut owned: Vec<_> = map.into_iter().collect();
                owned.sort();
                assert_eq!(owned, [(key(0, 1), 1), (key(3, 1), 10), (key(9, 1), 28)]);
            }

            #[test]
            fn an_iterator_is_fused_and_counts_down() {
                let mut map = Map::new();
                map.insert(key(1, 1), 1);
                map.insert(key(2, 1), 2);
                let mut iter = map.iter();
                let copy = iter.clone();
                iter.next();
                assert_eq!(iter.len(), 1);
                iter.next();
                assert_eq!((iter.len(), iter.next(), iter.next()), (0, None, None));
                assert_eq!(copy.len(), 2, "a clone walks on its own");
                assert_eq!(format!("{:?}", map.keys()), "SecondaryKeys { left: 2 }");
            }

            #[test]
            fn maps_are_equal_with_the_same_keys_and_values() {
                let mut a = Map::new();
                let mut b = Map::new();
                a.insert(key(0, 1), 1);
                b.insert(key(50, 1), 50);
                b.insert(key(0, 1), 1);
                assert_ne!(a, b);
                b.remove(key(50, 1));
                assert_eq!(a, b, "however long their storage");
                b.insert(key(0, 2), 1);
                assert_ne!(a, b, "the same value under another generation");
                let c = a.clone();
                assert_eq!(a, c);
                assert_eq!(Map::<u8>::default(), Map::new());
                assert_eq!(format!("{a:?}"), "{Handle(0v1): 1}");
            }

            #[test]
            fn typed_keys_work_as_handles_do() {
                tagpool::new_key_type! { struct Unit; }
                let units: HandlePool<&str, Unit> = HandlePool::with_key(4);
                let archer = units.insert("archer").unwrap();
                let mut range: $map<Unit, u32> = $map::new();
                range.insert(archer, 30);
                assert_eq!(range[archer], 30);
                assert_eq!(format!("{range:?}"), "{Unit(0v1): 30}");
                let stale = Unit::from_handle(key(0, 2));
                range.insert(stale, 10);
                assert_eq!(range.get(archer), None, "replaced by the newer key");
                assert_eq!(range.keys().collect::<Vec<_>>(), [stale]);
            }
        }
    };
}

both_maps!(dense, SecondaryMap);
both_maps!(sparse, SparseSecondaryMap);

#[test]
fn a_dense_map_iterates_in_index_order() {
    let mut map = SecondaryMap::new();
    for index in [7, 2, 9, 0, 4] {
        map.insert(key(index, 1), index);
    }
    map.remove(key(9, 1));
    let indices: Vec<_> = map.keys().map(|k| k.index()).collect();
    assert_eq!(indices, [0, 2, 4, 7]);
    let values: Vec<_> = map.values().copied().collect();
    assert_eq!(values, [0, 2, 4, 7]);
    let drained: Vec<_> = map.clone().drain().map(|(k, _)| k.index()).collect();
    assert_eq!(drained, [0, 2, 4, 7]);
    let owned: Vec<_> = map.into_iter().map(|(_, v)| v).collect();
    assert_eq!(owned, [0, 2, 4, 7]);
}

#[test]
fn a_leaked_dense_drain_leaves_the_map_empty() {
    let mut map = SecondaryMap::new();
    map.insert(key(0, 1), 1);
    map.insert(key(1, 1), 2);
    std::mem::forget(map.drain());
    assert!(map.is_empty());
    assert_eq!(map.iter().count(), 0);
    assert_eq!(map.get(key(0, 1)), None);
}

#[test]
fn with_capacity_makes_empty_maps() {
    let dense: SecondaryMap<Handle, u8> = SecondaryMap::with_capacity(64);
    let sparse: SparseSecondaryMap<Handle, u8> = SparseSecondaryMap::with_capacity(64);
    assert!(dense.is_empty() && sparse.is_empty());
    let hashed = SparseSecondaryMap::<Handle, u8, _>::with_capacity_and_hasher(
        4,
        std::collections::hash_map::RandomState::new(),
    );
    assert_eq!(hashed.len(), 0);
}

#[test]
fn beside_a_handle_pool_a_stale_key_is_refused() {
    let pool = HandlePool::new(4);
    let mut names = SecondaryMap::new();
    let mut tags = SparseSecondaryMap::new();

    let first = pool.insert(1).unwrap();
    names.insert(first, "first");
    tags.insert(first, "tagged");
    assert!(pool.remove(first));

    // The pool gives the entry out again, under a newer generation.
    let second = pool.insert(2).unwrap();
    assert_eq!(second.index(), first.index());
    assert!(second.generation() > first.generation());

    // The stale key and the new one see each other's values in neither map.
    assert_eq!(names.get(second), None);
    assert_eq!(tags.get(second), None);
    assert_eq!(names.insert(second, "second"), None);
    assert_eq!(tags.insert(second, "retagged"), None);
    assert_eq!(names.insert(first, "stale"), None, "refused");
    assert_eq!(tags.insert(first, "stale"), None, "refused");
    assert!(names.entry(first).is_none() && tags.entry(first).is_none());
    assert_eq!(names.remove(first), None);
    assert_eq!(tags.remove(first), None);
    assert_eq!((names[second], tags[second]), ("second", "retagged"));
    assert_eq!((names.len(), tags.len()), (1, 1));

    // Components of values the pool no longer holds, pruned.
    let third = pool.insert(3).unwrap();
    names.insert(third, "third");
    pool.remove(second);
    names.retain(|k, _| pool.contains(k));
    tags.retain(|k, _| pool.contains(k));
    assert_eq!(names.keys().collect::<Vec<_>>(), [third]);
    assert!(tags.is_empty());
}

#[test]
fn the_maps_iterators_and_entries_are_send_and_sync_as_their_contents() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<SecondaryMap<Handle, String>>();
    send_sync::<SparseSecondaryMap<Handle, String>>();
    send_sync::<SecondaryIter<'_, Handle, String>>();
    send_sync::<SecondaryIterMut<'_, Handle, String>>();
    send_sync::<SecondaryKeys<'_, Handle, String>>();
    send_sync::<SecondaryValues<'_, Handle, String>>();
    send_sync::<SecondaryValuesMut<'_, Handle, String>>();
    send_sync::<SecondaryDrain<'_, Handle, String>>();
    send_sync::<SecondaryIntoIter<Handle, String>>();
    send_sync::<Entry<'_, Handle, String>>();
    send_sync::<OccupiedEntry<'_, Handle, String>>();
    send_sync::<VacantEntry<'_, Handle, String>>();
}
