//! The handle pool: generational handles, deferred removal, eviction
//! (oldest first, least by key, skipping values being read), `on_evict`,
//! panics in user code, and a multi-threaded check that a stale handle
//! never reaches its successor's value.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use tagpool::{BuildError, Handle, HandlePool, InsertError, OwnedRef, Ref};

mod support;
use support::{watchdog, WAITING};

/// A value that counts its drops.
struct Counted {
    id: u64,
    drops: Arc<AtomicUsize>,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted(id: u64, drops: &Arc<AtomicUsize>) -> Counted {
    Counted {
        id,
        drops: drops.clone(),
    }
}

#[test]
fn a_removed_handle_answers_none_everywhere_and_the_next_value_has_a_new_generation() {
    let pool = HandlePool::new(1);
    let first = pool.insert(10).unwrap();
    assert_eq!(pool.with(first, |v| *v), Some(10));
    assert!(pool.remove(first));
    let second = pool.insert(20).unwrap();
    assert_eq!(second.index(), first.index(), "one entry: reused");
    assert_ne!(second, first);
    assert_eq!(second.generation(), first.generation().wrapping_add(1));
    assert!(pool.get(first).is_none());
    assert_eq!(pool.with(first, |v| *v), None);
    assert!(!pool.contains(first));
    assert!(
        !pool.remove(first),
        "a stale remove must not end the successor"
    );
    assert_eq!(pool.with(second, |v| *v), Some(20));
    let mut pool = pool;
    assert!(pool.get_mut(first).is_none());
    *pool.get_mut(second).unwrap() += 1;
    assert_eq!(pool.with(second, |v| *v), Some(21));
}

#[test]
fn handles_beyond_the_capacity_or_made_of_any_bits_name_nothing() {
    let pool = HandlePool::new(2);
    let h = pool.insert(1u8).unwrap();
    for bits in [
        u64::MAX,
        2,
        1 << 32,
        h.to_bits() + 1,
        h.to_bits() ^ (1 << 40),
    ] {
        let other = match Handle::from_bits(bits) {
            Some(other) if other != h => other,
            _ => continue,
        };
        assert!(pool.get(other).is_none(), "{other:?}");
        assert!(!pool.remove(other), "{other:?}");
    }
    assert_eq!(Handle::from_bits(h.to_bits()), Some(h));
    for bits in [0, 1, 2, (1 << 24) - 1] {
        assert_eq!(Handle::from_bits(bits), None, "generation 0: {bits}");
    }
    assert_eq!(
        format!("{h:?}"),
        format!("Handle({}v{})", h.index(), h.generation())
    );
}

/// `contains` holds only for a live value: a free entry whose generation
/// matches the handle (generation 1 of a fresh pool, or the generation a
/// remove moved the entry to) is not contained.
#[test]
fn contains_is_false_for_a_free_entry_of_the_handles_generation() {
    let pool = HandlePool::<u8>::new(2);
    let fresh = Handle::from_bits(1 << 24).unwrap();
    assert_eq!((fresh.index(), fresh.generation()), (0, 1));
    assert!(!pool.contains(fresh), "a fresh pool contains nothing");
    let h = pool.insert(1).unwrap();
    assert_eq!(h, fresh, "the first handle of entry 0");
    assert!(pool.contains(h));
    assert!(pool.remove(h));
    let next = Handle::from_bits(h.to_bits() + (1 << 24)).unwrap();
    assert_eq!(
        (next.index(), next.generation()),
        (h.index(), h.generation() + 1)
    );
    assert!(
        !pool.contains(next),
        "the entry is free under that generation"
    );
    assert!(!pool.contains(h));
}

/// No handle is 0, so `Option<Handle>` takes the 8 bytes of a handle.
#[test]
fn an_optional_handle_is_8_bytes() {
    use std::mem::size_of;
    assert_eq!(size_of::<Handle>(), 8);
    assert_eq!(size_of::<Option<Handle>>(), 8);
    let pool = HandlePool::new(1);
    let h = Some(pool.insert(()).unwrap());
    assert_eq!(h.map(|h| (h.index(), h.generation())), Some((0, 1)));
}

#[test]
fn is_empty_follows_the_live_values() {
    let pool = HandlePool::new(2);
    assert!(pool.is_empty());
    let h = pool.insert(1u8).unwrap();
    assert!(!pool.is_empty());
    assert_eq!(pool.len(), 1);
    assert!(pool.remove(h));
    assert!(pool.is_empty());
}

/// `HandleIter::size_hint` keeps the `Iterator` contract at every step: the
/// lower bound never exceeds what is left, the upper bound never falls
/// below it.
#[test]
fn iter_size_hint_bounds_what_is_left() {
    let pool = HandlePool::new(4);
    let handles: Vec<_> = (0..3u8).map(|v| pool.insert(v).unwrap()).collect();
    assert!(pool.remove(handles[1]));
    for skip in 0..=3 {
        let mut iter = pool.iter();
        for _ in 0..skip {
            drop(iter.next());
        }
        let (lower, upper) = iter.size_hint();
        let left = iter.count();
        assert!(lower <= left, "skip {skip}: lower {lower} > {left} left");
        let upper = upper.expect("a pool has a bound");
        assert!(left <= upper, "skip {skip}: upper {upper} < {left} left");
        assert!(upper <= 4, "skip {skip}: upper {upper} above the capacity");
    }
    let mut iter = pool.iter();
    assert_eq!(
        iter.size_hint(),
        (0, Some(3)),
        "the entries ever used, not the capacity"
    );
    let first = iter.next().unwrap();
    assert_eq!(*first, 0);
    let (_, upper) = iter.size_hint();
    assert!(upper.unwrap() >= 1, "one value is left: {upper:?}");
    assert_eq!(iter.count(), 1);
}

#[test]
fn a_full_pool_without_a_policy_gives_the_value_back() {
    let pool = HandlePool::new(2);
    let a = pool.insert(String::from("a")).unwrap();
    let _b = pool.insert(String::from("b")).unwrap();
    let err = pool.insert(String::from("c")).unwrap_err();
    assert_eq!(err.to_string(), "every entry of the handle pool is in use");
    assert_eq!(err.into_inner(), "c");
    assert_eq!(pool.len(), 2);
    pool.remove(a);
    assert_eq!(pool.len(), 1);
    pool.insert(String::from("d")).unwrap();
}

#[test]
fn zero_and_oversized_capacities_are_build_errors() {
    assert_eq!(
        HandlePool::<u8>::builder().build().unwrap_err(),
        BuildError::ZeroCapacity
    );
    for capacity in [tagpool::MAX_HANDLE_CAPACITY + 1, tagpool::MAX_CAPACITY + 1] {
        assert_eq!(
            HandlePool::<u8>::builder()
                .capacity(capacity)
                .build()
                .unwrap_err(),
            BuildError::CapacityTooLarge {
                requested: capacity,
                max: 1 << 24
            }
        );
    }
    assert_eq!(tagpool::MAX_HANDLE_CAPACITY, 1 << 24);
    let panicked = panic::catch_unwind(|| HandlePool::<u8>::new(0)).unwrap_err();
    let message = panicked.downcast_ref::<String>().unwrap();
    assert!(message.contains("tagpool::HandlePool::new"), "{message}");
}

#[test]
fn a_remove_while_read_is_deferred_to_the_last_ref() {
    let drops = Arc::new(AtomicUsize::new(0));
    let pool = HandlePool::new(1);
    let h = pool.insert(counted(7, &drops)).unwrap();
    let r1 = pool.get(h).unwrap();
    let r2 = pool.get(h).unwrap();
    assert!(pool.remove(h));
    assert!(pool.get(h).is_none(), "stale at once");
    assert!(!pool.remove(h));
    assert_eq!((r1.id, r2.id), (7, 7), "readers keep the value");
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    assert_eq!(pool.len(), 1, "the entry is not free while read");
    assert!(matches!(
        pool.insert(counted(8, &drops)),
        Err(InsertError::Full(_))
    ));
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the refused value");
    drop(r1);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(r2);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        2,
        "the last reader dropped it"
    );
    assert_eq!(pool.len(), 0);
    let next = pool.insert(counted(9, &drops)).unwrap();
    assert_eq!(pool.with(next, |v| v.id), Some(9));
    assert_eq!(Ref::handle(&pool.get(next).unwrap()), next);
}

#[test]
fn the_pool_drops_every_value_once() {
    let drops = Arc::new(AtomicUsize::new(0));
    {
        let pool = HandlePool::builder()
            .capacity(8)
            .evict_oldest()
            .build()
            .unwrap();
        let mut handles = Vec::new();
        for id in 0..20 {
            handles.push(pool.insert(counted(id, &drops)).unwrap());
        }
        assert_eq!(drops.load(Ordering::SeqCst), 12, "12 evicted and dropped");
        pool.remove(handles[19]);
        assert_eq!(drops.load(Ordering::SeqCst), 13);
    }
    assert_eq!(drops.load(Ordering::SeqCst), 20);
}

#[test]
fn evict_oldest_takes_values_in_insertion_order() {
    let evicted = Arc::new(Mutex::new(Vec::new()));
    let log = evicted.clone();
    let pool = HandlePool::builder()
        .capacity(3)
        .evict_oldest()
        .on_evict(move |handle, value: u32| log.lock().unwrap().push((handle, value)))
        .build()
        .unwrap();
    let handles: Vec<Handle> = (0..3).map(|v| pool.insert(v).unwrap()).collect();
    pool.remove(handles[1]);
    let h3 = pool.insert(3).unwrap(); // a free entry: no eviction
    assert!(evicted.lock().unwrap().is_empty());
    let h4 = pool.insert(4).unwrap(); // evicts 0
    let h5 = pool.insert(5).unwrap(); // evicts 2
    let h6 = pool.insert(6).unwrap(); // evicts 3
    assert_eq!(
        *evicted.lock().unwrap(),
        [(handles[0], 0), (handles[2], 2), (h3, 3)]
    );
    for stale in [handles[0], handles[2], h3] {
        assert!(pool.get(stale).is_none());
    }
    for (h, v) in [(h4, 4), (h5, 5), (h6, 6)] {
        assert_eq!(pool.with(h, |x| *x), Some(v));
    }
}

#[test]
fn evict_min_by_key_takes_the_least_value_and_skips_one_being_read() {
    let pool = HandlePool::builder()
        .capacity(4)
        .evict_min_by_key(|volume: &u32| *volume)
        .build()
        .unwrap();
    let handles: Vec<Handle> = [40, 10, 30, 20]
        .iter()
        .map(|&v| pool.insert(v).unwrap())
        .collect();
    // The quietest (10) is being read: skipped, the next quietest (20) goes.
    let reading = pool.get(handles[1]).unwrap();
    let h = pool.insert(50).unwrap();
    assert!(pool.contains(handles[1]));
    assert!(!pool.contains(handles[3]));
    assert_eq!(*reading, 10, "the read value was not torn out");
    drop(reading);
    // Now the quietest goes.
    pool.insert(60).unwrap();
    assert!(!pool.contains(handles[1]));
    assert!(pool.contains(h));
}

#[test]
fn an_insert_fails_when_every_candidate_is_being_read() {
    for oldest in [true, false] {
        let builder = HandlePool::builder().capacity(2);
        let pool = if oldest {
            builder.evict_oldest().build().unwrap()
        } else {
            builder.evict_min_by_key(|v: &u32| *v).build().unwrap()
        };
        let a = pool.insert(1).unwrap();
        let b = pool.insert(2).unwrap();
        let (ra, rb) = (pool.get(a).unwrap(), pool.get(b).unwrap());
        assert_eq!(pool.insert(3), Err(InsertError::Full(3)));
        assert_eq!((*ra, *rb), (1, 2));
        drop(rb);
        pool.insert(3).unwrap();
        assert!(!pool.contains(b) && pool.contains(a));
        drop(ra);
    }
}

#[test]
fn a_panicking_on_evict_frees_the_entry_and_loses_nothing_else() {
    let drops = Arc::new(AtomicUsize::new(0));
    let pool = HandlePool::builder()
        .capacity(2)
        .evict_oldest()
        .on_evict(|_, value: Counted| {
            if value.id == 0 {
                panic!("on_evict refuses value 0");
            }
        })
        .build()
        .unwrap();
    let a = pool.insert(counted(0, &drops)).unwrap();
    let b = pool.insert(counted(1, &drops)).unwrap();
    let panicked = panic::catch_unwind(AssertUnwindSafe(|| pool.insert(counted(2, &drops))));
    assert!(panicked.is_err());
    assert_eq!(
        drops.load(Ordering::SeqCst),
        2,
        "the evicted and the new value"
    );
    assert!(!pool.contains(a), "the evicted handle is stale");
    assert!(pool.contains(b));
    assert_eq!(pool.len(), 1, "the entry went back free");
    let c = pool.insert(counted(3, &drops)).unwrap();
    assert_eq!(c.index(), a.index());
    assert_eq!(pool.with(c, |v| v.id), Some(3));
}

#[test]
fn a_panicking_key_function_leaves_the_pool_as_it_was() {
    let pool = HandlePool::builder()
        .capacity(2)
        .evict_min_by_key(|v: &u32| {
            assert!(*v != 13, "unlucky");
            *v
        })
        .build()
        .unwrap();
    let a = pool.insert(13).unwrap();
    let b = pool.insert(14).unwrap();
    let panicked = panic::catch_unwind(AssertUnwindSafe(|| pool.insert(15)));
    assert!(panicked.is_err());
    assert!(pool.contains(a) && pool.contains(b));
    assert_eq!(pool.len(), 2);
    pool.remove(a);
    pool.insert(16).unwrap();
    assert_eq!(pool.len(), 2);
}

#[test]
fn a_handle_pool_with_caches_uses_every_entry_exactly() {
    // 64 entries: per-thread caches are on. Handles inserted on one thread
    // and removed on another; the pool is full exactly at its capacity.
    let pool = HandlePool::new(64);
    let handles: Vec<Handle> = (0..64).map(|v| pool.insert(v).unwrap()).collect();
    assert!(pool.insert(64).is_err());
    thread::scope(|s| {
        s.spawn(|| {
            for &h in &handles[..32] {
                assert!(pool.remove(h));
            }
        });
    });
    for v in 0..32 {
        pool.insert(100 + v).unwrap();
    }
    assert!(pool.insert(0).is_err());
    assert_eq!(pool.len(), 64);
}

/// Threads insert values that carry their own handle's bits, read through
/// every handle they ever saw (live or stale), and remove; a reader must
/// never see a value whose handle is not the one it asked with.
#[test]
fn a_stale_handle_never_reaches_the_successor_under_contention() {
    let _watchdog = watchdog(
        "a_stale_handle_never_reaches_the_successor_under_contention",
        WAITING,
    );
    let rounds = if cfg!(miri) { 40 } else { 20_000 };
    for oldest in [false, true] {
        let builder = HandlePool::builder().capacity(4).thread_cache(false);
        let pool: HandlePool<AtomicU64> = if oldest {
            builder.evict_oldest().build().unwrap()
        } else {
            builder.build().unwrap()
        };
        let seen = Mutex::new(Vec::<Handle>::new());
        let stop = AtomicBool::new(false);
        let hits = AtomicUsize::new(0);
        thread::scope(|s| {
            for t in 0..3u64 {
                let (pool, seen, stop, hits) = (&pool, &seen, &stop, &hits);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    let mut x = t + 1;
                    for round in 0..rounds {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        if let Ok(h) = pool.insert(AtomicU64::new(u64::MAX)) {
                            // Only this thread knows `h` until it publishes
                            // it: it stamps the value with its handle.
                            pool.with(h, |v| v.store(h.to_bits(), Ordering::SeqCst));
                            mine.push(h);
                            if round % 8 == 0 {
                                seen.lock().unwrap().push(h);
                            }
                        }
                        let probe = {
                            let seen = seen.lock().unwrap();
                            (!seen.is_empty()).then(|| seen[x as usize % seen.len()])
                        };
                        for h in probe.into_iter().chain(mine.last().copied()) {
                            if let Some(v) = pool.get(h) {
                                let bits = v.load(Ordering::SeqCst);
                                // Every handle this thread knows was stamped
                                // before it was shared: only the successor
                                // of a stale one could show other bits.
                                assert!(
                                    bits == h.to_bits(),
                                    "{h:?} reached the value of {:?}",
                                    Handle::from_bits(bits)
                                );
                                hits.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        if mine.len() > 1 || x % 3 == 0 {
                            if let Some(h) = mine.pop() {
                                pool.remove(h);
                            }
                        }
                    }
                    for h in mine {
                        pool.remove(h);
                    }
                    stop.store(true, Ordering::SeqCst);
                });
            }
        });
        assert!(hits.load(Ordering::Relaxed) > 0);
        assert_eq!(pool.len(), 0, "every entry freed");
        for h in seen.into_inner().unwrap() {
            assert!(pool.get(h).is_none());
        }
    }
}

/// Evictions race readers: a value being read is never dropped under the
/// reader (each value checks, on drop, that no reader is inside it).
#[test]
fn eviction_never_takes_a_value_being_read() {
    let _watchdog = watchdog("eviction_never_takes_a_value_being_read", WAITING);
    struct Guarded {
        readers: AtomicUsize,
        dropped: AtomicBool,
    }
    impl Drop for Guarded {
        fn drop(&mut self) {
            assert_eq!(self.readers.load(Ordering::SeqCst), 0, "dropped while read");
            self.dropped.store(true, Ordering::SeqCst);
        }
    }
    let rounds = if cfg!(miri) { 30 } else { 10_000 };
    let evictions = Arc::new(AtomicUsize::new(0));
    let counter = evictions.clone();
    let pool = HandlePool::builder()
        .capacity(3)
        .evict_min_by_key(|g: &Guarded| g.readers.load(Ordering::Relaxed))
        .on_evict(move |_, _| {
            counter.fetch_add(1, Ordering::Relaxed);
        })
        .build()
        .unwrap();
    let handles = Mutex::new(Vec::<Handle>::new());
    let new = || Guarded {
        readers: AtomicUsize::new(0),
        dropped: AtomicBool::new(false),
    };
    thread::scope(|s| {
        for t in 0..2 {
            let (pool, handles) = (&pool, &handles);
            s.spawn(move || {
                for i in 0..rounds {
                    if (i + t) % 2 == 0 {
                        if let Ok(h) = pool.insert(new()) {
                            handles.lock().unwrap().push(h);
                        }
                    } else {
                        let h = {
                            let handles = handles.lock().unwrap();
                            handles.get(i % handles.len().max(1)).copied()
                        };
                        if let Some(v) = h.and_then(|h| pool.get(h)) {
                            v.readers.fetch_add(1, Ordering::SeqCst);
                            assert!(!v.dropped.load(Ordering::SeqCst));
                            thread::yield_now();
                            assert!(!v.dropped.load(Ordering::SeqCst));
                            v.readers.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                }
            });
        }
    });
    assert!(evictions.load(Ordering::Relaxed) > 0);
}

#[test]
fn iter_visits_the_live_values_and_holds_each_while_its_ref_lives() {
    let drops = Arc::new(AtomicUsize::new(0));
    let pool = HandlePool::new(5);
    let handles: Vec<Handle> = (0..5)
        .map(|id| pool.insert(counted(id, &drops)).unwrap())
        .collect();
    pool.remove(handles[1]);
    pool.remove(handles[3]);
    let seen: Vec<(Handle, u64)> = pool.iter().map(|r| (Ref::handle(&r), r.id)).collect();
    assert_eq!(seen, [(handles[0], 0), (handles[2], 2), (handles[4], 4)]);
    // A value removed while the iterator's `Ref` reads it stays readable.
    let first = pool.iter().next().unwrap();
    assert!(pool.remove(handles[0]));
    assert_eq!(first.id, 0);
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    drop(first);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    assert_eq!(pool.iter().count(), 2);
}

tagpool::new_key_type! {
    /// The key of an enemy.
    pub struct EnemyKey;
    /// The key of a bullet.
    struct BulletKey;
}

/// A pool of typed keys takes and returns its own key type: every
/// operation, `on_evict` and `Ref::handle` included. The key is its
/// handle under another name (the same bits), 8 bytes in an `Option`.
#[test]
fn a_pool_of_typed_keys_takes_and_gives_its_own_keys() {
    use std::mem::size_of;
    use tagpool::Key;

    assert_eq!(size_of::<EnemyKey>(), 8);
    assert_eq!(size_of::<Option<EnemyKey>>(), 8);
    assert_eq!(size_of::<Option<BulletKey>>(), 8);

    let evicted = Arc::new(Mutex::new(Vec::new()));
    let log = evicted.clone();
    let enemies: HandlePool<&str, EnemyKey> = HandlePool::builder_with_key()
        .capacity(2)
        .evict_oldest()
        .on_evict(move |key: EnemyKey, name| log.lock().unwrap().push((key, name)))
        .build()
        .unwrap();
    let orc = enemies.insert("orc").unwrap();
    let elf = enemies.insert("elf").unwrap();
    assert_eq!(enemies.with(orc, |e| *e), Some("orc"));
    assert_eq!(Ref::handle(&enemies.get(elf).unwrap()), elf);
    let keys: Vec<EnemyKey> = enemies.iter().map(|r| Ref::handle(&r)).collect();
    let mut both = vec![orc, elf];
    both.sort_by_key(|key| key.index());
    assert_eq!(keys, both, "in index order");
    let troll = enemies.insert("troll").unwrap(); // evicts the orc
    assert_eq!(*evicted.lock().unwrap(), [(orc, "orc")]);
    assert!(!enemies.contains(orc) && enemies.contains(troll));
    assert_eq!((troll.index(), troll.generation()), (orc.index(), 2));
    assert!(enemies.remove(elf));
    let mut enemies = enemies;
    *enemies.get_mut(troll).unwrap() = "ogre";
    assert_eq!(enemies.with(troll, |e| *e), Some("ogre"));

    // Conversions: the same bits as the handle, both ways.
    let handle: Handle = troll.into();
    assert_eq!(handle, troll.handle());
    assert_eq!(EnemyKey::from(handle), troll);
    assert_eq!(EnemyKey::from_handle(handle), troll);
    assert_eq!(troll.to_bits(), handle.to_bits());
    assert_eq!(EnemyKey::from_bits(troll.to_bits()), Some(troll));
    assert_eq!(EnemyKey::from_bits(0), None);
    assert_eq!(
        format!("{troll:?}"),
        format!("EnemyKey({}v2)", troll.index())
    );

    let bullets: HandlePool<u32, BulletKey> = HandlePool::with_key(1);
    let shot = bullets.insert(7).unwrap();
    // Another pool's key only by an explicit trip through its handle.
    let forged = BulletKey::from_handle(troll.handle());
    assert!(
        bullets.get(forged).is_none(),
        "{forged:?} names another entry"
    );
    assert_eq!(bullets.with(shot, |v| *v), Some(7));
    assert_eq!(
        format!("{bullets:?}"),
        "HandlePool { capacity: 1, len: 1, retired: 0, .. }"
    );
}

/// `HandleBuilder::thread_cache_size` sizes the index caches; the capacity
/// stays exact: entries freed on another thread (into its cache) are found
/// by this one's inserts.
#[test]
fn thread_cache_size_keeps_the_capacity_exact() {
    for size in [0, 1, 2, 8] {
        let pool = HandlePool::builder()
            .capacity(8)
            .thread_cache_size(size)
            .build()
            .unwrap();
        let all: Vec<Handle> = (0..8).map(|v| pool.insert(v).unwrap()).collect();
        assert!(pool.insert(8).is_err(), "size {size}: full");
        thread::scope(|s| {
            s.spawn(|| {
                for &h in &all {
                    assert!(pool.remove(h));
                }
            });
        });
        for v in 0..8 {
            assert!(pool.insert(v).is_ok(), "size {size}: entry {v} lost");
        }
        assert!(pool.insert(8).is_err(), "size {size}: full again");
    }
}

#[test]
fn insert_with_key_gives_the_value_its_own_key_and_its_closure_back_when_full() {
    let pool = HandlePool::new(2);
    let a = pool.insert_with_key(|me| (me, "a")).unwrap();
    let b = pool.insert_with_key(|me| (me, "b")).unwrap();
    assert_eq!(pool.with(a, |v| *v), Some((a, "a")));
    assert_eq!(pool.with(b, |v| *v), Some((b, "b")));
    let mut called = false;
    let refused = pool.insert_with_key(|me| {
        called = true;
        (me, "c")
    });
    let make = match refused {
        Err(err @ InsertError::Full(_)) => err.into_inner(),
        _ => panic!("a full pool took a value"),
    };
    assert_eq!(pool.stats().refused_inserts, 1);
    assert!(pool.remove(a));
    let c = pool.insert_with_key(make).expect("room now");
    assert!(called, "the closure came back uncalled, and ran here");
    assert_eq!(pool.with(c, |v| *v), Some((c, "c")));
}

#[test]
fn insert_with_key_evicts_before_it_calls_the_closure() {
    let evicted = Arc::new(Mutex::new(Vec::new()));
    let log = evicted.clone();
    let pool = HandlePool::builder()
        .capacity(1)
        .evict_oldest()
        .on_evict(move |h, v: (Handle, u32)| log.lock().unwrap().push((h, v)))
        .build()
        .unwrap();
    let old = pool.insert_with_key(|me| (me, 1)).unwrap();
    let new = pool
        .insert_with_key(|me| {
            assert_eq!(me.index(), old.index());
            assert_ne!(me, old);
            (me, 2)
        })
        .unwrap();
    assert_eq!(*evicted.lock().unwrap(), [(old, (old, 1))]);
    assert_eq!(pool.with(new, |v| *v), Some((new, 2)));
    assert_eq!(pool.stats().evictions, 1);
}

/// A closure that panics after it stored its key: the entry goes back
/// under a new generation, so the stored key never names a later value.
#[test]
fn a_panicking_insert_with_key_gives_the_entry_back_and_its_key_stays_stale() {
    let pool = HandlePool::new(1);
    let mut stored = None;
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        let _ = pool.insert_with_key(|me| {
            stored = Some(me);
            panic!("the closure panics");
        });
    }));
    assert!(caught.is_err());
    let stored = stored.unwrap();
    assert_eq!((pool.len(), pool.stats().live), (0, 0));
    let next = pool.insert(5).expect("the entry came back");
    assert_eq!(next.index(), stored.index());
    assert_ne!(next, stored);
    assert!(pool.get(stored).is_none() && !pool.contains(stored));
    assert_eq!(pool.take(stored), Err(tagpool::TakeError::Stale));
    assert_eq!(pool.take(next), Ok(5));
}

#[test]
fn take_fails_while_read_and_leaves_the_value_live() {
    use tagpool::TakeError;
    let drops = Arc::new(AtomicUsize::new(0));
    let pool = HandlePool::new(2);
    let h = pool.insert(counted(7, &drops)).unwrap();
    let read = pool.get(h).unwrap();
    assert_eq!(pool.take(h).err(), Some(TakeError::BeingRead));
    assert!(pool.contains(h));
    assert_eq!(read.id, 7);
    assert_eq!(drops.load(Ordering::SeqCst), 0);
    drop(read);
    let value = pool.take(h).unwrap();
    assert_eq!((value.id, pool.len()), (7, 0));
    assert_eq!(pool.take(h).err(), Some(TakeError::Stale));
    drop(value);
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    let next = pool.insert(counted(8, &drops)).unwrap();
    assert_ne!(next, h);
    let err: Box<dyn std::error::Error> = Box::new(TakeError::Stale);
    assert_eq!(err.to_string(), "the key is stale");
}

/// A `Ref` leaked with `mem::forget` leaves its count in the entry, but
/// its borrow has ended: the `&mut self` methods reach the value, and
/// count exactly.
#[test]
fn the_exclusive_methods_count_exactly_past_leaked_refs() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut pool = HandlePool::new(4);
    let a = pool.insert(counted(1, &drops)).unwrap();
    let b = pool.insert(counted(2, &drops)).unwrap();
    let c = pool.insert(counted(3, &drops)).unwrap();
    std::mem::forget(pool.get(a).unwrap()); // a stays live, one leaked read
    std::mem::forget(pool.get(b).unwrap());
    assert!(pool.remove(b)); // b: removed while read, for good
    let stats = pool.stats();
    assert_eq!((stats.live, stats.removed_while_read), (2, 1));
    assert_eq!(pool.len(), 3);
    assert_eq!(pool.iter_mut().len(), 2);
    assert_eq!(pool.keys().collect::<Vec<_>>(), [a, c]);
    assert_eq!(pool.values().map(|v| v.id).collect::<Vec<_>>(), [1, 3]);
    pool.get_mut(a).unwrap().id = 10;
    assert_eq!(
        pool.drain().map(|(k, v)| (k, v.id)).collect::<Vec<_>>(),
        [(a, 10), (c, 3)]
    );
    assert_eq!(drops.load(Ordering::SeqCst), 2, "b's value is leaked");
    assert_eq!((pool.len(), pool.stats().live), (1, 0));
    // Three entries are free: the removed one keeps its own.
    for v in 0..3 {
        pool.insert(counted(v, &drops)).unwrap();
    }
    assert!(pool.insert(counted(9, &drops)).is_err());
}

#[test]
fn a_panicking_retain_leaves_the_pool_consistent() {
    let drops = Arc::new(AtomicUsize::new(0));
    let mut pool = HandlePool::new(4);
    let keys: Vec<Handle> = (0..4)
        .map(|i| pool.insert(counted(i, &drops)).unwrap())
        .collect();
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        pool.retain(|_, v| {
            assert!(v.id != 2, "the closure panics");
            v.id == 1
        })
    }));
    assert!(caught.is_err());
    // 0 removed, 1 kept, 2 (whose closure panicked) and 3 untouched.
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(pool.keys().collect::<Vec<_>>(), &keys[1..]);
    assert_eq!(pool.len(), 3);
    pool.clear();
    assert_eq!((pool.len(), drops.load(Ordering::SeqCst)), (0, 4));
    for i in 0..4 {
        pool.insert(counted(i, &drops)).unwrap();
    }
}

#[test]
fn an_exclusive_view_panics_on_a_stale_key_with_a_clear_message() {
    let mut pool = HandlePool::new(2);
    let h = pool.insert(1).unwrap();
    pool.remove(h);
    let view = pool.exclusive();
    let caught = panic::catch_unwind(AssertUnwindSafe(|| view[h])).unwrap_err();
    let message = caught.downcast_ref::<String>().unwrap();
    assert!(message.contains("stale key"), "{message}");
    assert!(format!("{view:?}").starts_with("Exclusive(HandlePool {"));
}

/// Takers and readers race over shared handles: each value is taken at
/// most once, a read through a handle sees only the value it names (each
/// value knows its own key), and every value is dropped exactly once.
#[test]
fn take_races_readers_and_loses_nothing() {
    struct Me {
        me: Handle,
        drops: Arc<AtomicUsize>,
    }
    impl Drop for Me {
        fn drop(&mut self) {
            self.drops.fetch_add(1, Ordering::SeqCst);
        }
    }
    let _watchdog = watchdog("take_races_readers_and_loses_nothing", WAITING);
    const SLOTS: usize = 8;
    let rounds = if cfg!(miri) { 20 } else { 50_000 };
    let drops = Arc::new(AtomicUsize::new(0));
    let pool: HandlePool<Me> = HandlePool::new(SLOTS);
    let slots: Vec<AtomicU64> = (0..SLOTS).map(|_| AtomicU64::new(0)).collect();
    let inserted = AtomicUsize::new(0);
    let taken = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    thread::scope(|s| {
        for t in 0..2 {
            let (pool, slots, drops) = (&pool, &slots, &drops);
            let (inserted, taken, done) = (&inserted, &taken, &done);
            s.spawn(move || {
                for i in 0..rounds {
                    let slot = &slots[(i * 2 + t) % SLOTS];
                    let bits = slot.load(Ordering::Acquire);
                    if let Some(h) = Handle::from_bits(bits) {
                        match pool.take(h) {
                            Ok(value) => {
                                assert_eq!(value.me, h);
                                taken.fetch_add(1, Ordering::SeqCst);
                                slot.store(0, Ordering::Release);
                            }
                            Err(tagpool::TakeError::BeingRead) => continue,
                            Err(tagpool::TakeError::Stale) => panic!("only its taker ends it"),
                            Err(_) => unreachable!(),
                        }
                    }
                    let h = pool.insert_with_key(|me| Me {
                        me,
                        drops: drops.clone(),
                    });
                    if let Ok(h) = h {
                        inserted.fetch_add(1, Ordering::SeqCst);
                        slot.store(h.to_bits(), Ordering::Release);
                    }
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
        for _ in 0..2 {
            let (pool, slots, stop) = (&pool, &slots, &stop);
            s.spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::Relaxed) {
                    i += 1;
                    if let Some(h) = Handle::from_bits(slots[i % SLOTS].load(Ordering::Acquire)) {
                        if let Some(value) = pool.get(h) {
                            assert_eq!(value.me, h, "a handle reached another value");
                        }
                    }
                }
            });
        }
        while done.load(Ordering::SeqCst) < 2 {
            thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
    });
    let (inserted, taken) = (inserted.into_inner(), taken.into_inner());
    assert_eq!(drops.load(Ordering::SeqCst), taken);
    assert_eq!(pool.len(), inserted - taken);
    drop(pool);
    assert_eq!(drops.load(Ordering::SeqCst), inserted);
}

/// An owned read moves into a job: it counts as a reader (a remove leaves
/// the value to it, an eviction skips it), keeps the pool alive, and its
/// drop drops the value, then the pool, on the job's thread.
#[test]
fn an_owned_read_moves_into_a_job_and_keeps_value_and_pool_alive() {
    let drops = Arc::new(AtomicUsize::new(0));
    let pool = Arc::new(
        HandlePool::builder()
            .capacity(2)
            .evict_oldest()
            .build()
            .unwrap(),
    );
    let read = pool.insert(counted(1, &drops)).unwrap();
    let other = pool.insert(counted(2, &drops)).unwrap();
    let owned: OwnedRef<Counted> = pool.get_owned(read).unwrap();
    assert_eq!(OwnedRef::handle(&owned), read);
    assert!(pool
        .get_owned(Handle::from_bits(u64::MAX).unwrap())
        .is_none());
    // Full: the eviction skips the value being read and takes the other.
    let third = pool.insert(counted(3, &drops)).unwrap();
    assert!(!pool.contains(other) && pool.contains(read));
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the evicted value");
    // A remove makes the handle stale and leaves the drop to the reader.
    assert!(pool.remove(read));
    assert!(pool.get_owned(read).is_none());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(owned.id, 1, "the reader still sees its value");
    // The job holds the last `Arc` too: its drop frees the value, then
    // the pool (and the value of `third`).
    drop(pool);
    let job = {
        let drops = Arc::clone(&drops);
        thread::spawn(move || {
            assert_eq!(owned.id, 1);
            drop(owned);
            drops.load(Ordering::SeqCst)
        })
    };
    assert_eq!(job.join().unwrap(), 3, "the read value and the pool's");
    let _ = third;
}

/// Many threads hold owned reads of one value while others remove and
/// reinsert: every read sees the value it was taken for, and every value
/// is dropped exactly once.
#[test]
fn owned_reads_race_removes_and_every_value_drops_once() {
    let _watchdog = watchdog("owned_reads_race_removes", WAITING);
    let drops = Arc::new(AtomicUsize::new(0));
    let made = Arc::new(AtomicUsize::new(0));
    {
        let pool: Arc<HandlePool<Counted>> = Arc::new(HandlePool::new(32));
        let current = Arc::new(AtomicU64::new(0));
        let first = pool
            .insert_with_key(|h| counted(h.to_bits(), &drops))
            .unwrap();
        made.fetch_add(1, Ordering::SeqCst);
        current.store(first.to_bits(), Ordering::SeqCst);
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let (pool, current, stop) = (pool.clone(), current.clone(), stop.clone());
                thread::spawn(move || {
                    let mut held = Vec::new();
                    while !stop.load(Ordering::SeqCst) {
                        let h = Handle::from_bits(current.load(Ordering::SeqCst)).unwrap();
                        if let Some(r) = pool.get_owned(h) {
                            assert_eq!(r.id, h.to_bits(), "the value the handle named");
                            held.push(r);
                        }
                        if held.len() > 8 {
                            drop(held.remove(0));
                        }
                    }
                    held
                })
            })
            .collect();
        for _ in 0..2000 {
            let old = Handle::from_bits(current.load(Ordering::SeqCst)).unwrap();
            let next = pool
                .insert_with_key(|h| counted(h.to_bits(), &drops))
                .expect("32 entries: 2 readers hold at most 9 removed ones each");
            made.fetch_add(1, Ordering::SeqCst);
            current.store(next.to_bits(), Ordering::SeqCst);
            assert!(pool.remove(old));
        }
        stop.store(true, Ordering::SeqCst);
        for reader in readers {
            drop(reader.join().unwrap());
        }
    }
    assert_eq!(drops.load(Ordering::SeqCst), made.load(Ordering::SeqCst));
}

/// `insert_mut` takes a free entry off the free list; with the free
/// entries all in a thread's cache, or none left, it is `insert` (the
/// cache, then the eviction). `remove_mut` hands the value back and gives
/// its entry to the next `insert_mut`.
#[test]
fn insert_mut_falls_back_to_the_caches_and_the_eviction() {
    let mut pool: HandlePool<u64> = HandlePool::builder()
        .capacity(64)
        .evict_oldest()
        .build()
        .unwrap();
    // Shared inserts and removes park freed entries in this thread's cache.
    let shared: Vec<_> = (0..64).map(|v| pool.insert(v).unwrap()).collect();
    for &h in &shared[..8] {
        assert!(pool.remove(h));
    }
    assert!(pool.stats().live == 56);
    let again: Vec<_> = (0..8).map(|v| pool.insert_mut(100 + v).unwrap()).collect();
    assert_eq!(pool.len(), 64, "the cached entries were found");
    // Full: the oldest live value is evicted.
    let newest = pool.insert_mut(200).unwrap();
    assert!(pool.get(shared[8]).is_none(), "the oldest went");
    assert_eq!(pool.stats().evictions, 1);
    // `remove_mut` gives values back; their keys go stale everywhere.
    assert_eq!(pool.remove_mut(newest), Some(200));
    assert_eq!(pool.remove_mut(newest), None);
    assert!(pool.get(newest).is_none() && !pool.remove(newest));
    assert_eq!(pool.remove_mut(again[0]), Some(100));
    let reused = pool.insert_mut(300).unwrap();
    assert_eq!(reused.index(), again[0].index(), "the entry just freed");
    assert_ne!(reused, again[0]);
    let sum: u64 = pool.values().sum();
    assert_eq!(pool.len(), 63);
    assert_eq!(
        sum,
        (9..64).sum::<u64>() + (101..108).sum::<u64>() + 300,
        "every other value is where it was"
    );
}

#[test]
fn initial_allocates_entries_as_inserts_need_them_and_nothing_moves() {
    let mut pool = HandlePool::builder()
        .capacity(100)
        .initial(10)
        .build()
        .unwrap();
    assert_eq!((pool.capacity(), pool.stats().allocated), (100, 10));
    let first = pool.insert(0u64).unwrap();
    let address = address_of(&pool, first);
    let handles: Vec<Handle> = std::iter::once(first)
        .chain((1..100).map(|i| pool.insert(i).unwrap()))
        .collect();
    assert_eq!(
        pool.stats().allocated,
        100,
        "every segment, up to the capacity"
    );
    assert_eq!(address_of(&pool, first), address, "not moved");
    assert_eq!(pool.insert(100).unwrap_err().into_inner(), 100, "full");
    for (i, &h) in handles.iter().enumerate() {
        assert_eq!(pool.with(h, |v| *v), Some(i as u64));
    }
    // Every walk reaches the entries of every segment.
    assert_eq!(pool.iter().map(|r| *r).sum::<u64>(), 4950);
    pool.iter_mut().for_each(|(_, v)| *v += 1);
    assert_eq!(pool.values().sum::<u64>(), 5050);
    let mut by_index = handles.clone();
    by_index.sort_by_key(|h| h.index());
    assert_eq!(pool.keys().collect::<Vec<_>>(), by_index, "in index order");
    pool.retain(|_, v| *v % 2 == 0);
    assert_eq!(pool.len(), 50);
    let drained: Vec<(Handle, u64)> = pool.drain().collect();
    assert_eq!(drained.len(), 50);
    assert!(drained
        .iter()
        .all(|&(h, v)| v % 2 == 0 && handles[v as usize - 1] == h));
    assert!(pool.is_empty());
}

fn address_of(pool: &HandlePool<u64>, h: Handle) -> *const u64 {
    let value = pool.get(h).unwrap();
    &*value as *const u64
}

#[test]
fn initial_is_checked_against_the_capacity() {
    let err = HandlePool::<u8>::builder()
        .capacity(4)
        .initial(5)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::InitialAboveCapacity {
            initial: 5,
            capacity: 4
        }
    );
    let err = HandlePool::<u8>::builder()
        .capacity(4)
        .initial(0)
        .build()
        .unwrap_err();
    assert_eq!(err, BuildError::ZeroInitial);
    let pool = HandlePool::<u8>::builder()
        .capacity(4)
        .initial(4)
        .build()
        .unwrap();
    assert_eq!(pool.stats().allocated, 4);
}

#[test]
fn handles_into_entries_never_allocated_name_nothing() {
    let pool = HandlePool::<u8>::builder()
        .capacity(64)
        .initial(1)
        .build()
        .unwrap();
    for index in [1u64, 2, 40, 63] {
        // Generation 1 at `index`: the bits of a first value's handle.
        let forged = Handle::from_bits(1 << 24 | index).unwrap();
        assert_eq!(forged.index(), index as usize);
        assert!(pool.get(forged).is_none() && !pool.contains(forged) && !pool.remove(forged));
        assert_eq!(pool.take(forged).unwrap_err(), tagpool::TakeError::Stale);
    }
    assert_eq!(pool.stats().allocated, 1, "reads allocate nothing");
}

#[test]
fn eviction_reaches_the_entries_of_grown_segments() {
    let pool = HandlePool::builder()
        .capacity(8)
        .initial(1)
        .evict_min_by_key(|v: &u32| *v)
        .build()
        .unwrap();
    let handles: Vec<_> = [5u32, 6, 7, 8, 9, 1, 10, 11]
        .iter()
        .map(|&v| pool.insert(v).unwrap())
        .collect();
    assert_eq!(handles[5].index(), 5, "in a grown segment");
    pool.insert(12).unwrap();
    assert!(
        !pool.contains(handles[5]),
        "the least value, in segment 3, went"
    );
    assert_eq!(pool.stats().evictions, 1);
}

#[test]
fn threads_inserting_into_new_segments_each_see_their_values() {
    // Threads race to allocate each segment: one allocation is kept, and
    // every value lands in it (a lost value would read `None` or another).
    const THREADS: u64 = 4;
    // Miri interprets every step: a smaller pool still grows through
    // segments of several entries.
    const EACH: u64 = if cfg!(miri) { 16 } else { 1024 };
    const ROUNDS: usize = if cfg!(miri) { 1 } else { 8 };
    let _watchdog = watchdog("threads_inserting_into_new_segments", WAITING);
    let drops = Arc::new(AtomicUsize::new(0));
    let mut refused = 0;
    for _round in 0..ROUNDS {
        let pool = HandlePool::builder()
            .capacity((THREADS * EACH) as usize)
            .initial(1)
            .build()
            .unwrap();
        let handles: Vec<Vec<Handle>> = thread::scope(|s| {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let (pool, drops) = (&pool, &drops);
                    s.spawn(move || {
                        // An insert may be refused while another thread's
                        // is in flight (its cache busy): the guarantee is
                        // at quiescence, checked after the join.
                        (0..EACH)
                            .map_while(|i| {
                                let id = t * EACH + i;
                                let h = pool.insert(counted(id, drops)).ok()?;
                                assert_eq!(pool.with(h, |v| v.id), Some(id));
                                Some(h)
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let mut handles: Vec<Vec<Handle>> =
                workers.into_iter().map(|w| w.join().unwrap()).collect();
            // A thread stops at its first refusal, whose value dropped.
            refused += handles
                .iter()
                .filter(|mine| mine.len() < EACH as usize)
                .count();
            // Alone now: every entry a thread left free is found.
            for (t, mine) in handles.iter_mut().enumerate() {
                for i in mine.len() as u64..EACH {
                    let id = t as u64 * EACH + i;
                    mine.push(pool.insert(counted(id, &drops)).unwrap());
                }
            }
            handles
        });
        assert!(pool.insert(counted(u64::MAX, &drops)).is_err(), "full");
        let stats = pool.stats();
        assert_eq!(
            (stats.live, stats.allocated),
            ((THREADS * EACH) as usize, (THREADS * EACH) as usize)
        );
        for (t, mine) in handles.iter().enumerate() {
            for (i, &h) in mine.iter().enumerate() {
                assert_eq!(pool.with(h, |v| v.id), Some(t as u64 * EACH + i as u64));
            }
        }
    }
    // Each round's values and its refused one, and the threads' refused.
    assert_eq!(
        drops.load(Ordering::Relaxed),
        ROUNDS * (THREADS * EACH + 1) as usize + refused
    );
}

#[test]
fn entries_vacated_through_mut_are_taken_first_and_counted_free() {
    let mut pool = HandlePool::builder().capacity(64).build().unwrap();
    let handles: Vec<Handle> = (0..64).map(|i| pool.insert_mut(i).unwrap()).collect();
    for &h in &handles[..40] {
        assert!(pool.remove_mut(h).is_some());
    }
    let stats = pool.stats();
    assert_eq!((pool.len(), stats.live, stats.peak_in_use), (24, 24, 64));
    assert_eq!(pool.iter_mut().len(), 24);
    // The last vacated entry first, as slotmap's free list.
    let again = pool.insert_mut(100).unwrap();
    assert_eq!(again.index(), handles[39].index());
    assert_ne!(again, handles[39], "a new generation");
    // Threads through `&self` take the other 39 (and no entry twice).
    let pool = Arc::new(pool);
    let taken: Vec<Vec<Handle>> = thread::scope(|s| {
        let workers: Vec<_> = (0..3)
            .map(|t| {
                let pool = &pool;
                s.spawn(move || {
                    (0..13)
                        .map(|i| pool.insert(1000 * (t + 1) + i).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut indices: Vec<usize> = taken.iter().flatten().map(|h| h.index()).collect();
    indices.sort_unstable();
    indices.dedup();
    assert_eq!(indices.len(), 39, "distinct entries");
    let mut vacated: Vec<usize> = handles[..39].iter().map(|h| h.index()).collect();
    vacated.sort_unstable();
    assert_eq!(
        indices, vacated,
        "the vacated entries, not the index pool's"
    );
    assert_eq!((pool.len(), pool.stats().peak_in_use), (64, 64));
    assert!(pool.insert(0).is_err(), "full");
}
