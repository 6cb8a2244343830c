//! Models of the handle pool: a stale handle racing a remove and a
//! re-insert, an eviction racing an access (oldest first, and least by
//! key), an evicting insert racing a remove, a handle sent to a reader
//! through a Relaxed atomic, an entry retired at its last generation (by a
//! remove and a reader, or by an eviction) while another thread reads it,
//! a `take` racing an access and a remove, and a key that
//! `insert_with_key` hands its closure reaching a reader before the value
//! is published, two inserts racing to allocate a segment of entries (a
//! pool built with `initial`), two inserts racing to take the entries
//! vacated through `&mut self`, and two inserts racing to raise the high
//! mark that the walks over the entries stop at.
//!
//! Value cells are loom cells: a `Ref` is a tracked shared access for as
//! long as it lives, and an eviction's take and put are tracked writes, so
//! an eviction that tears a value out from under a reader is reported.
//! `Track` reports a value leaked.

#![cfg(loom)]

use std::sync::Arc;

use loom::alloc::Track;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use tagpool::{Handle, HandlePool, TakeError};
use tagpool_loom_tests::{check, uncached_handles};

/// A counted read (`get`, a `Ref` for the closure's span): these models
/// are of the counted protocol. `HandlePool::with` opens a read section
/// instead, whose models are in `tests/sections.rs` (and a section would
/// switch the pool's removals to deferred ones).
fn counted<T, R>(pool: &HandlePool<T>, key: Handle, f: impl FnOnce(&T) -> R) -> Option<R> {
    pool.get(key).map(|value| f(&value))
}

/// A reader uses a handle while the owner removes its value and inserts
/// another in the same (only) entry: the reader sees the old value or
/// nothing, never the new one. Fault `tagpool_loom_handle_no_generation`:
/// a remove that keeps the generation, so the old handle matches the new
/// value.
#[test]
fn stale_handle_races_remove_and_reinsert() {
    check("stale_handle_races_remove_and_reinsert", 3, || {
        let pool = Arc::new(HandlePool::builder().capacity(1).build().unwrap());
        let old = pool.insert(1usize).unwrap();
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || counted(&pool, old, |v| *v))
        };
        assert!(pool.remove(old));
        // While the reader still holds the removed value, the entry is not
        // free yet: the insert finds the pool full.
        let new = pool.insert(2);
        let seen = reader.join().unwrap();
        assert!(
            seen.is_none() || seen == Some(1),
            "a stale handle saw {seen:?}"
        );
        assert!(pool.get(old).is_none());
        let new = match new {
            Ok(new) => new,
            Err(full) => pool.insert(full.into_inner()).expect("the reader is gone"),
        };
        assert_ne!(new, old);
        assert_eq!(counted(&pool, new, |v| *v), Some(2));
        assert!(pool.get(old).is_none());
    });
}

/// An insert into a full pool evicts the oldest value while another thread
/// reads it: the eviction either happens before the read (which then sees
/// nothing) or skips the value being read (the insert fails), and the
/// reader's value is never dropped or replaced under it. Fault
/// `tagpool_loom_evict_ignores_readers`: an eviction that takes the entry
/// whatever its readers.
#[test]
fn eviction_races_an_access() {
    check("eviction_races_an_access", 3, || {
        let pool = Arc::new(
            HandlePool::builder()
                .capacity(1)
                .evict_oldest()
                .build()
                .unwrap(),
        );
        let old = pool.insert(Track::new(1usize)).unwrap();
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || counted(&pool, old, |v| *v.get_ref()))
        };
        let new = pool.insert(Track::new(2));
        let seen = reader.join().unwrap();
        assert!(seen.is_none() || seen == Some(1), "the reader saw {seen:?}");
        match new {
            Ok(new) => {
                assert!(!pool.contains(old));
                assert_eq!(counted(&pool, new, |v| *v.get_ref()), Some(2));
            }
            Err(_full) => {
                assert_eq!(seen, Some(1), "only a reader makes the eviction skip");
                assert!(pool.contains(old));
            }
        }
    });
}

/// An insert into a full pool of 1 that evicts the oldest value races a
/// remove of that value: the insert evicts it (the remove then fails), or
/// the remove frees the entry and the insert fills it (or, while the
/// entry is between the two, finds it neither live nor free and fails).
/// An entry that is free is never a victim: its owner (the remover, then
/// the free list) may be using it. Fault `tagpool_loom_evict_free`: an
/// eviction that takes a free entry.
#[test]
fn eviction_races_a_remove() {
    check("eviction_races_a_remove", 3, || {
        let pool = Arc::new(
            HandlePool::builder()
                .capacity(1)
                .evict_oldest()
                .build()
                .unwrap(),
        );
        let old = pool.insert(Track::new(1usize)).unwrap();
        let remover = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.remove(old))
        };
        let new = pool.insert(Track::new(2));
        let removed = remover.join().unwrap();
        assert!(!pool.contains(old));
        match new {
            Ok(new) => {
                assert_ne!(new, old);
                assert_eq!(counted(&pool, new, |v| *v.get_ref()), Some(2));
            }
            Err(_full) => assert!(removed, "only a remove in flight fails the insert"),
        }
    });
}

/// A handle travels to a reader as bits through a Relaxed atomic, which
/// orders nothing: the reader's `get` alone must make the insert's value
/// visible to it (its Acquire load and CAS of the entry's word pair with
/// the insert's Release publish). Every other model inserts before it
/// spawns its readers, so the spawn orders the value for them. Fault
/// `tagpool_loom_read_relaxed`: a read whose load and CAS are Relaxed.
#[test]
fn handle_sent_through_a_relaxed_atomic() {
    check("handle_sent_through_a_relaxed_atomic", 3, || {
        const NONE: u64 = u64::MAX;
        let pool = Arc::new(HandlePool::builder().capacity(1).build().unwrap());
        let sent = Arc::new(AtomicU64::new(NONE));
        let reader = {
            let (pool, sent) = (Arc::clone(&pool), Arc::clone(&sent));
            thread::spawn(move || {
                // Relaxed: the point of the model; only the pool orders.
                let bits = sent.load(Ordering::Relaxed);
                if bits == NONE {
                    return None;
                }
                let h = Handle::from_bits(bits).expect("a handle's bits");
                counted(&pool, h, |v: &Track<usize>| *v.get_ref())
            })
        };
        let h = pool.insert(Track::new(7usize)).unwrap();
        // Relaxed: as above.
        sent.store(h.to_bits(), Ordering::Relaxed);
        let seen = reader.join().unwrap();
        assert!(seen.is_none() || seen == Some(7), "the reader saw {seen:?}");
        assert_eq!(counted(&pool, h, |v| *v.get_ref()), Some(7));
    });
}

/// As `eviction_races_an_access`, with a priority eviction: the evicter
/// reads every candidate (a counted read) to compare keys, then turns its
/// own read into ownership only if no other reader joined.
#[test]
fn priority_eviction_races_an_access() {
    check("priority_eviction_races_an_access", 3, || {
        let pool = Arc::new(
            HandlePool::builder()
                .capacity(1)
                .evict_min_by_key(|v: &Track<usize>| *v.get_ref())
                .build()
                .unwrap(),
        );
        let old = pool.insert(Track::new(1usize)).unwrap();
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || counted(&pool, old, |v| *v.get_ref()))
        };
        let new = pool.insert(Track::new(2));
        let seen = reader.join().unwrap();
        assert!(seen.is_none() || seen == Some(1), "the reader saw {seen:?}");
        match new {
            Ok(new) => assert_eq!(counted(&pool, new, |v| *v.get_ref()), Some(2)),
            Err(_) => assert!(pool.contains(old)),
        }
    });
}

/// Two threads remove the same handle while a third reads it and the main
/// thread inserts: exactly one remove succeeds, the read sees the old value
/// or nothing, and the insert (into the freed entry) gets a new handle that
/// no copy of the old one reaches.
#[test]
fn racing_removes_and_a_reader() {
    check("racing_removes_and_a_reader", 3, || {
        let pool = Arc::new(HandlePool::builder().capacity(1).build().unwrap());
        let old = pool.insert(Track::new(1usize)).unwrap();
        let threads: Vec<_> = (0..2)
            .map(|i| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    if i == 0 {
                        (pool.remove(old), None)
                    } else {
                        let seen = counted(&pool, old, |v| *v.get_ref());
                        (pool.remove(old), seen)
                    }
                })
            })
            .collect();
        let new = pool.insert(Track::new(2));
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let removed = results.iter().filter(|(removed, _)| *removed).count();
        assert_eq!(removed, 1, "exactly one remove ends the value");
        let seen = results[1].1;
        assert!(
            seen.is_none() || seen == Some(1),
            "a stale handle saw {seen:?}"
        );
        if let Ok(new) = new {
            // Inserted only after a remove freed the entry.
            assert_ne!(new, old);
            assert_eq!(counted(&pool, new, |v| *v.get_ref()), Some(2));
        }
        assert!(pool.get(old).is_none());
    });
}

/// An entry on its last generation is removed while another thread reads
/// it: whichever of the remover and the reader frees it last retires it
/// (its index stays off the free list), so no later insert gets it, and
/// the value is dropped once. Faults: `tagpool_loom_generation_wraps`, a
/// generation that wraps to 1 instead of retiring the entry (an insert
/// then succeeds into it: the assertions below fail), and
/// `tagpool_loom_retire_reuses`, a retired entry's index given back to the
/// free list (an insert takes it, and the pool's check that no handle has
/// generation 0 panics).
#[test]
fn last_generation_retires_under_a_reader() {
    check("last_generation_retires_under_a_reader", 3, || {
        let pool = Arc::new(HandlePool::builder().capacity(1).build().unwrap());
        pool.__loom_age(0, Handle::MAX_GENERATION);
        let last = pool.insert(Track::new(1usize)).unwrap();
        assert_eq!(last.generation(), Handle::MAX_GENERATION);
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || counted(&pool, last, |v| *v.get_ref()))
        };
        assert!(pool.remove(last));
        let early = pool.insert(Track::new(2));
        let seen = reader.join().unwrap();
        assert!(seen.is_none() || seen == Some(1), "the reader saw {seen:?}");
        assert!(early.is_err(), "an insert got the retired entry");
        assert!(
            pool.insert(Track::new(3)).is_err(),
            "an insert got the retired entry after the reader left"
        );
        assert_eq!((pool.len(), pool.retired()), (0, 1));
        assert!(pool.get(last).is_none());
    });
}

/// An evicting insert into a full pool of 1 whose only value is on its
/// entry's last generation races a reader of that value: the eviction
/// skips the value being read (the insert fails, the value stays), or
/// evicts it and retires the entry, and then finds no other entry (the
/// insert fails, its value comes back). Either way no insert ever gets the
/// entry after its last value. Faults `tagpool_loom_generation_wraps` and
/// `tagpool_loom_retire_reuses`, as above.
#[test]
fn eviction_retires_the_last_generation_under_a_reader() {
    check(
        "eviction_retires_the_last_generation_under_a_reader",
        3,
        || {
            let pool = Arc::new(
                HandlePool::builder()
                    .capacity(1)
                    .evict_oldest()
                    .build()
                    .unwrap(),
            );
            pool.__loom_age(0, Handle::MAX_GENERATION);
            let last = pool.insert(Track::new(1usize)).unwrap();
            let reader = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || counted(&pool, last, |v| *v.get_ref()))
            };
            let new = pool.insert(Track::new(2));
            let seen = reader.join().unwrap();
            assert!(seen.is_none() || seen == Some(1), "the reader saw {seen:?}");
            assert!(new.is_err(), "an insert got the entry after its last value");
            if pool.contains(last) {
                // The reader made the eviction skip: remove it now.
                assert_eq!(seen, Some(1));
                assert!(pool.remove(last));
            }
            assert_eq!((pool.len(), pool.retired()), (0, 1));
            assert!(pool.insert(Track::new(3)).is_err());
        },
    );
}

/// A `take` races a reader of its value: the take moves the value out
/// before the read (which then sees nothing), or fails with `BeingRead`
/// while the reader holds it (the value stays live, and a take after the
/// reader left gets it), or comes after the read. The value is never moved
/// out from under a `Ref`, and the entry comes back. Fault
/// `tagpool_loom_take_ignores_readers`: a take that ignores the readers
/// (loom reports the move racing the read).
#[test]
fn take_races_an_access() {
    check("take_races_an_access", 3, || {
        let pool = Arc::new(HandlePool::builder().capacity(1).build().unwrap());
        let h = pool.insert(Track::new(1usize)).unwrap();
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || counted(&pool, h, |v| *v.get_ref()))
        };
        let taken = pool.take(h);
        let seen = reader.join().unwrap();
        assert!(seen.is_none() || seen == Some(1), "the reader saw {seen:?}");
        let value = match taken {
            Ok(value) => value,
            Err(TakeError::BeingRead) => {
                assert_eq!(seen, Some(1), "only a reader makes a take fail");
                assert!(pool.contains(h), "a failed take leaves the value");
                pool.take(h).expect("the reader is gone")
            }
            Err(err) => panic!("take: {err}"),
        };
        assert_eq!(*value.get_ref(), 1);
        assert!(pool.get(h).is_none());
        assert_eq!(pool.take(h).err(), Some(TakeError::Stale));
        let new = pool.insert(Track::new(2)).expect("the entry came back");
        assert_ne!(new, h);
    });
}

/// A `take` races a `remove` of the same value: exactly one of them ends
/// it, and the value is dropped once (by the remover, or by the taker's
/// caller); the entry comes back.
#[test]
fn take_races_a_remove() {
    check("take_races_a_remove", 3, || {
        let pool = Arc::new(HandlePool::builder().capacity(1).build().unwrap());
        let h = pool.insert(Track::new(1usize)).unwrap();
        let remover = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.remove(h))
        };
        let taken = pool.take(h);
        let removed = remover.join().unwrap();
        match taken {
            Ok(value) => {
                assert!(!removed, "taken and removed");
                assert_eq!(*value.get_ref(), 1);
            }
            Err(err) => {
                assert_eq!(err, TakeError::Stale);
                assert!(removed, "neither taken nor removed");
            }
        }
        assert!(!pool.contains(h));
        pool.insert(Track::new(2)).expect("the entry came back");
    });
}

/// The closure of `insert_with_key` sends its key to a reader through a
/// Relaxed atomic before the value is stored: the reader finds nothing
/// until the insert publishes the value, and then the value itself (its
/// read pairs with the publish). A reader that counted itself on the
/// entry before the publish would race the store (loom reports it). Fault
/// `tagpool_loom_read_relaxed`, as for `handle_sent_through_a_relaxed_atomic`:
/// a read that does not pair with the publish.
#[test]
fn insert_with_key_sends_its_key_before_the_value_is_published() {
    check(
        "insert_with_key_sends_its_key_before_the_value_is_published",
        3,
        || {
            let pool = Arc::new(HandlePool::builder().capacity(1).build().unwrap());
            let bits = Arc::new(AtomicU64::new(0));
            let reader = {
                let (pool, bits) = (Arc::clone(&pool), Arc::clone(&bits));
                thread::spawn(move || {
                    // Relaxed: orders nothing; the read must.
                    let h = Handle::from_bits(bits.load(Ordering::Relaxed))?;
                    counted(&pool, h, |v: &Track<(Handle, usize)>| *v.get_ref())
                })
            };
            let h = pool
                .insert_with_key(|me| {
                    // Relaxed: as above.
                    bits.store(me.to_bits(), Ordering::Relaxed);
                    Track::new((me, 7))
                })
                .unwrap();
            let seen = reader.join().unwrap();
            assert!(
                seen.is_none() || seen == Some((h, 7)),
                "the reader saw {seen:?}"
            );
            assert_eq!(pool.take(h).map(|v| *v.get_ref()), Ok((h, 7)));
        },
    );
}

/// Two inserts race into a segment of entries that no thread has
/// allocated yet (`initial`): both allocate it, one allocation is
/// published, and both values land in it, each readable through its
/// handle by the other thread and after the join. Fault
/// `tagpool_loom_entries_overwrite`: a segment published by a plain swap,
/// so the loser replaces the winner's segment and the winner's value is
/// lost.
#[test]
fn inserts_race_to_allocate_a_segment_of_entries() {
    check("inserts_race_to_allocate_a_segment_of_entries", 3, || {
        // Segments: [0], [1], [2, 3]; the first two filled here.
        let pool = Arc::new(
            HandlePool::builder()
                .capacity(4)
                .initial(1)
                // Without caches an insert is refused only when the pool
                // is full, in flight or not (a busy cache can refuse).
                .thread_cache(false)
                .build()
                .unwrap(),
        );
        let _first = pool.insert(0usize).unwrap();
        let _second = pool.insert(1usize).unwrap();
        let other = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let h = pool.insert(2usize).unwrap();
                assert_eq!(counted(&pool, h, |v| *v), Some(2));
                h
            })
        };
        let mine = pool.insert(3usize).unwrap();
        assert_eq!(counted(&pool, mine, |v| *v), Some(3));
        let theirs = other.join().unwrap();
        assert_eq!(
            counted(&pool, theirs, |v| *v),
            Some(2),
            "the other insert's value"
        );
        assert_eq!(counted(&pool, mine, |v| *v), Some(3), "this insert's value");
        assert_eq!(pool.stats().allocated, 4);
    });
}

/// Two inserts through `&self` race to take the entries that `remove_mut`
/// vacated through `&mut self` (the chain the index pool does not hold):
/// each takes its own, by a compare-and-swap on the chain's head, and the
/// pool is then full. Fault `tagpool_loom_vacant_pop_racy`: the chain
/// popped by a plain load and store, as through `&mut self`, so both
/// inserts can take the same entry (loom reports the two writes to its
/// cell, or the values collide).
#[test]
fn inserts_race_to_take_entries_vacated_through_mut() {
    check(
        "inserts_race_to_take_entries_vacated_through_mut",
        3,
        || {
            let mut pool = uncached_handles(2);
            let a = pool.insert_mut(0usize).unwrap();
            let b = pool.insert_mut(1usize).unwrap();
            assert_eq!(pool.remove_mut(a), Some(0));
            assert_eq!(pool.remove_mut(b), Some(1));
            let pool = Arc::new(pool);
            let other = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    let h = pool.insert(2usize).unwrap();
                    assert_eq!(counted(&pool, h, |v| *v), Some(2));
                    h
                })
            };
            let mine = pool.insert(3usize).unwrap();
            assert_eq!(counted(&pool, mine, |v| *v), Some(3));
            let theirs = other.join().unwrap();
            assert_ne!(mine.index(), theirs.index(), "one entry taken twice");
            assert_eq!(counted(&pool, theirs, |v| *v), Some(2));
            assert_eq!(counted(&pool, mine, |v| *v), Some(3));
            assert_eq!(pool.len(), 2);
            assert!(pool.insert(4usize).is_err(), "both entries are live");
        },
    );
}

/// Two inserts race into an empty pool, each into its own entry, and each
/// raises the pool's high mark (one above the highest index filled, where
/// `iter`, the `&mut` walks and eviction stop): after both joined, `iter`
/// and `drain` reach both values, whichever insert raised the mark last.
/// Fault `tagpool_loom_high_mark_store`: the mark raised by a plain store
/// instead of `fetch_max`, so the insert of index 0 can overwrite the mark
/// of index 1 with 1, and the walks miss the value at index 1.
#[test]
fn racing_inserts_raise_the_high_mark() {
    check("racing_inserts_raise_the_high_mark", 3, || {
        let pool = Arc::new(uncached_handles(2));
        let other = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.insert(1usize).unwrap())
        };
        let mine = pool.insert(2usize).unwrap();
        let theirs = other.join().unwrap();
        assert_ne!(mine.index(), theirs.index());
        let mut seen: Vec<usize> = pool.iter().map(|value| *value).collect();
        seen.sort_unstable();
        assert_eq!(seen, [1, 2], "iter after both inserts joined");
        assert_eq!(pool.len(), 2);
        let mut pool = Arc::try_unwrap(pool)
            .ok()
            .expect("the other thread is gone");
        let mut drained: Vec<usize> = pool.drain().map(|(_, value)| value).collect();
        drained.sort_unstable();
        assert_eq!(drained, [1, 2], "drain after both inserts joined");
        // Every entry is free again, and there are exactly two.
        assert!(pool.is_empty());
        let a = pool.insert(3usize).unwrap();
        let b = pool.insert(4usize).unwrap();
        assert_ne!(a.index(), b.index());
        assert!(pool.insert(5usize).is_err(), "exactly the capacity");
    });
}
