//! Read sections on the handle pool (`HandlePool::read`): a value read in a
//! section stays in place, intact, until the section ends, however other
//! threads remove, insert, take and evict meanwhile; every removal in a pool
//! that has had a section (`read`, or `with`, which opens one) leaves its
//! value awaiting reuse until a grace period (`reclaim`, a batched remove, an
//! insert that finds no free entry, an eviction) finds no section open that
//! could still see it; then the value is dropped, or handed to `on_evict`,
//! exactly once. Also: nested sections, forgotten ones (and the takeover of
//! an exited thread's record), `take` refusing while a section is open, a
//! panicking drop during a grace period, the statistics and the `&mut self`
//! paths that free awaiting entries, typed keys and pools that allocate
//! their segments on demand.
//!
//! The concurrent tests are sized by time, not by the machine's cores, and
//! assert nothing that depends on how the threads were scheduled.

use std::mem;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tagpool::{Handle, HandlePool, TakeError};

mod support;
use support::{watchdog, WAITING};

/// How long the time-sized tests run: short under miri, which is slow.
fn run_time() -> Duration {
    if cfg!(miri) {
        Duration::from_millis(20)
    } else {
        Duration::from_millis(300)
    }
}

fn load(counter: &AtomicUsize) -> usize {
    counter.load(Ordering::SeqCst)
}

/// A value that counts its drops and can tell whether its content is
/// intact: every word is `id * 7919`.
#[derive(Debug)]
struct Tagged {
    id: u64,
    words: Box<[u64; 8]>,
    drops: Arc<AtomicUsize>,
}

impl Tagged {
    fn new(id: u64, drops: &Arc<AtomicUsize>) -> Self {
        Self {
            id,
            words: Box::new([id.wrapping_mul(7919); 8]),
            drops: Arc::clone(drops),
        }
    }

    fn intact(&self) -> bool {
        self.words.iter().all(|&w| w == self.id.wrapping_mul(7919))
    }
}

impl Drop for Tagged {
    fn drop(&mut self) {
        // Scribble over the content: a reader that still reaches it (a
        // use after drop) then finds it torn.
        self.words.fill(u64::MAX);
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

/// Inserts `Tagged::new(id, drops)`, which must succeed.
fn put<K: tagpool::Key>(pool: &HandlePool<Tagged, K>, id: u64, drops: &Arc<AtomicUsize>) -> K {
    match pool.insert(Tagged::new(id, drops)) {
        Ok(key) => key,
        Err(err) => panic!("insert of {} refused", err.into_inner().id),
    }
}

// 1. A value read in a section survives removal and reuse of the pool.

#[test]
fn a_value_read_in_a_section_stays_intact_while_another_thread_removes_it_and_refills_the_pool_then_drops_once(
) {
    // No per-thread caches: every free entry is the writer's to take, so
    // the count of inserts below is exact.
    let pool = HandlePool::builder()
        .capacity(64)
        .thread_cache(false)
        .build()
        .unwrap();
    let mine = Arc::new(AtomicUsize::new(0));
    let others = Arc::new(AtomicUsize::new(0));
    let key = put(&pool, 7, &mine);
    let rounds: u64 = if cfg!(miri) { 100 } else { 5_000 };

    let section = pool.read();
    let value = section.get(key).expect("live");
    assert!(value.intact());
    let (inserted, removed, refused) = thread::scope(|s| {
        let writer = s.spawn(|| {
            assert!(pool.remove(key));
            let (mut inserted, mut removed, mut refused) = (0u64, 0u64, 0u64);
            for i in 0..rounds {
                match pool.insert(Tagged::new(1_000 + i, &others)) {
                    Ok(new) => {
                        assert_ne!(
                            new.index(),
                            key.index(),
                            "the entry of a value an open section read was reused"
                        );
                        inserted += 1;
                        // Keep one value in three live, remove the others.
                        if i % 3 != 0 {
                            assert!(pool.remove(new));
                            removed += 1;
                        }
                    }
                    Err(err) => {
                        let back = err.into_inner();
                        assert!(back.intact() && back.id == 1_000 + i);
                        refused += 1;
                    }
                }
                if i % 64 == 0 {
                    // A grace period cannot free what the section may see.
                    pool.reclaim();
                }
            }
            (inserted, removed, refused)
        });
        // Read the value all the while the writer runs.
        while !writer.is_finished() {
            assert!(value.intact(), "a value read in an open section was torn");
            assert_eq!(load(&mine), 0, "dropped while a section reads it");
            thread::yield_now();
        }
        writer.join().unwrap()
    });
    // Every entry but the removed value's was filled once, and none came
    // back: the removals all happened under the section.
    assert_eq!(inserted, 63);
    assert_eq!(refused, rounds - 63);
    assert!(section.get(key).is_none(), "stale since the removal");
    assert!(value.intact());
    assert_eq!(value.id, 7);
    assert_eq!(load(&mine), 0);
    drop(section);
    assert_eq!(
        load(&mine),
        0,
        "no grace period has run since the section ended"
    );
    assert_eq!(pool.stats().awaiting_reuse as u64, 1 + removed);
    assert_eq!(pool.reclaim() as u64, 1 + removed);
    assert_eq!(load(&mine), 1, "dropped once, at the grace period");
    assert_eq!(load(&others) as u64, refused + removed);
    assert_eq!(pool.stats().awaiting_reuse, 0);
    assert_eq!(pool.reclaim(), 0);
    drop(pool);
    assert_eq!(load(&mine), 1);
    assert_eq!(load(&others) as u64, refused + inserted);
}

// 2. Stress: readers in sections against removing, taking and evicting
// writers; conservation at the end.

/// What became of the stress test's values.
#[derive(Debug, Default)]
struct Ledger {
    created: AtomicUsize,
    dropped: AtomicUsize,
    /// Drops of a value already dropped.
    double_drops: AtomicUsize,
    /// Values handed to `on_evict`.
    evicted: AtomicUsize,
    /// ... with a key other than the value's own.
    evicted_wrong_key: AtomicUsize,
    /// ... already dropped.
    evicted_dead: AtomicUsize,
}

/// A stress value: its id, a check word (`id * 7919`), its own key, and a
/// flag that its drop clears (kept alive by a side table, so that reading
/// it through a dropped value reads `false`, not freed memory).
struct Tracked {
    id: u64,
    check: u64,
    key: Handle,
    alive: Arc<AtomicBool>,
    ledger: Arc<Ledger>,
}

impl Tracked {
    fn new(id: u64, key: Handle, ledger: &Arc<Ledger>, flags: &mut Vec<Arc<AtomicBool>>) -> Self {
        let alive = Arc::new(AtomicBool::new(true));
        flags.push(Arc::clone(&alive));
        ledger.created.fetch_add(1, Ordering::SeqCst);
        Self {
            id,
            check: id.wrapping_mul(7919),
            key,
            alive,
            ledger: Arc::clone(ledger),
        }
    }

    /// Asserts that this is the live, untorn value of `key`.
    fn assert_sound(&self, key: Handle) {
        assert_eq!(self.check, self.id.wrapping_mul(7919), "a torn value");
        assert!(
            self.alive.load(Ordering::SeqCst),
            "read value {} after its drop",
            self.id
        );
        assert_eq!(self.key, key, "read another value than the key's");
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if !self.alive.swap(false, Ordering::SeqCst) {
            self.ledger.double_drops.fetch_add(1, Ordering::SeqCst);
        }
        self.ledger.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

/// A xorshift generator: the writers' choices.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn readers_in_sections_never_see_a_dropped_or_torn_value_while_writers_remove_take_and_evict_and_every_value_ends_once(
) {
    const READERS: usize = 3;
    const WRITERS: usize = 2;
    // Keys each writer keeps (`slots_per_writer`): together more than the capacity,
    // so that inserts evict.
    let (capacity, slots_per_writer) = if cfg!(miri) { (16, 12) } else { (256, 160) };
    let _watchdog = watchdog("the sections stress test", WAITING);
    let ledger = Arc::new(Ledger::default());
    let evict_ledger = Arc::clone(&ledger);
    let pool = HandlePool::builder()
        .capacity(capacity)
        .evict_oldest()
        .on_evict(move |key: Handle, value: Tracked| {
            if value.key != key {
                evict_ledger
                    .evicted_wrong_key
                    .fetch_add(1, Ordering::SeqCst);
            }
            if !value.alive.load(Ordering::SeqCst) {
                evict_ledger.evicted_dead.fetch_add(1, Ordering::SeqCst);
            }
            evict_ledger.evicted.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let slots: Vec<AtomicU64> = (0..WRITERS * slots_per_writer)
        .map(|_| AtomicU64::new(0))
        .collect();
    let mut flags = Vec::new();
    // Prefill: a third of each writer's slots.
    let mut prefilled = 0;
    for w in 0..WRITERS {
        for i in 0..slots_per_writer / 3 {
            let id = (w * slots_per_writer + i) as u64;
            let key = pool
                .insert_with_key(|key| Tracked::new(id, key, &ledger, &mut flags))
                .expect("room");
            slots[w * slots_per_writer + i].store(key.to_bits(), Ordering::SeqCst);
            prefilled += 1;
        }
    }
    // Each reader's first pass happens before any writer starts.
    let start = Barrier::new(READERS + WRITERS);
    let stop = AtomicBool::new(false);
    let duration = run_time();

    let (writer_flags, reads) = thread::scope(|s| {
        let readers: Vec<_> = (0..READERS)
            .map(|_| {
                let (pool, slots, start, stop) = (&pool, &slots, &start, &stop);
                s.spawn(move || {
                    let mut passes = 0u64;
                    let mut reads = 0u64;
                    loop {
                        let last = stop.load(Ordering::SeqCst);
                        let section = pool.read();
                        let mut held = Vec::new();
                        for slot in slots {
                            let key = match Handle::from_bits(slot.load(Ordering::Acquire)) {
                                Some(key) => key,
                                None => continue,
                            };
                            if let Some(value) = section.get(key) {
                                value.assert_sound(key);
                                held.push((key, value));
                            }
                        }
                        if passes == 0 {
                            assert_eq!(held.len(), prefilled, "no writer has started");
                        }
                        let mut walked = 0;
                        for (key, value) in section.iter() {
                            value.assert_sound(key);
                            walked += 1;
                        }
                        assert!(walked <= capacity);
                        assert!(section.values().count() <= capacity);
                        // Now and then keep the section open a while, so
                        // that writers remove, reuse and evict under it.
                        let linger = if passes % 8 == 0 {
                            if cfg!(miri) {
                                2
                            } else {
                                20
                            }
                        } else {
                            1
                        };
                        for _ in 0..linger {
                            for &(key, value) in &held {
                                value.assert_sound(key);
                            }
                            thread::yield_now();
                        }
                        reads += (held.len() + walked) as u64;
                        drop(held);
                        drop(section);
                        passes += 1;
                        if passes == 1 {
                            start.wait();
                        }
                        if last {
                            break;
                        }
                    }
                    reads
                })
            })
            .collect();
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (pool, slots, start, ledger) = (&pool, &slots, &start, &ledger);
                s.spawn(move || {
                    let mine = &slots[w * slots_per_writer..(w + 1) * slots_per_writer];
                    let mut flags = Vec::new();
                    let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (w as u64 + 1);
                    let mut id = ((w + 1) as u64) << 40;
                    let mut ops = 0u64;
                    start.wait();
                    let deadline = Instant::now() + duration;
                    while Instant::now() < deadline && !(cfg!(miri) && ops >= 60) {
                        ops += 1;
                        let slot = &mine[next(&mut rng) as usize % slots_per_writer];
                        let key = match Handle::from_bits(slot.load(Ordering::Relaxed)) {
                            Some(key) => key,
                            None => {
                                id += 1;
                                let made = pool.insert_with_key(|key| {
                                    Tracked::new(id, key, ledger, &mut flags)
                                });
                                if let Ok(key) = made {
                                    slot.store(key.to_bits(), Ordering::Release);
                                }
                                continue;
                            }
                        };
                        match next(&mut rng) % 8 {
                            // Remove (false if evicted meanwhile).
                            0..=3 => {
                                pool.remove(key);
                            }
                            // Take: refused while any section is open.
                            4 => match pool.take(key) {
                                Ok(value) => value.assert_sound(key),
                                Err(TakeError::BeingRead) => continue,
                                Err(_) => {}
                            },
                            // Remove while read: the last `Ref` ends it.
                            5 => {
                                if let Some(read) = pool.get(key) {
                                    read.assert_sound(key);
                                    assert!(pool.remove(key));
                                    read.assert_sound(key);
                                } else {
                                    pool.remove(key);
                                }
                            }
                            6 => {
                                // `with` reads in a section of its own.
                                pool.with(key, |value| value.assert_sound(key));
                                continue;
                            }
                            _ => {
                                pool.reclaim();
                                continue;
                            }
                        }
                        slot.store(0, Ordering::Release);
                    }
                    flags
                })
            })
            .collect();
        let mut writer_flags = Vec::new();
        for writer in writers {
            writer_flags.extend(writer.join().unwrap());
        }
        stop.store(true, Ordering::SeqCst);
        let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
        (writer_flags, reads)
    });
    assert!(reads >= (READERS * prefilled) as u64);
    flags.extend(writer_flags);

    let stats = pool.stats();
    println!(
        "{} values, {} reads, {} evictions, {} refused inserts",
        load(&ledger.created),
        reads,
        stats.evictions,
        stats.refused_inserts
    );
    drop(pool);
    assert_eq!(load(&ledger.double_drops), 0, "a value dropped twice");
    assert_eq!(
        load(&ledger.evicted_wrong_key),
        0,
        "on_evict got a wrong key"
    );
    assert_eq!(
        load(&ledger.evicted_dead),
        0,
        "on_evict got a dropped value"
    );
    assert_eq!(
        load(&ledger.dropped),
        load(&ledger.created),
        "every value created is dropped once (on_evict drops its own)"
    );
    assert_eq!(flags.len(), load(&ledger.created));
    assert!(flags.iter().all(|alive| !alive.load(Ordering::SeqCst)));
    assert_eq!(
        load(&ledger.evicted) as u64,
        stats.evictions,
        "every eviction reaches on_evict once"
    );
}

// 3. Nested sections.

#[test]
fn nested_sections_dropped_out_of_order_keep_values_removed_under_the_outer_one_until_both_end() {
    let pool = HandlePool::new(8);
    let drops = Arc::new(AtomicUsize::new(0));
    let a = put(&pool, 1, &drops);
    let b = put(&pool, 2, &drops);
    let c = put(&pool, 3, &drops);

    let outer = pool.read();
    assert!(pool.remove(a), "removed while only the outer section lives");
    let inner = pool.read();
    let vb = inner.get(b).expect("live");
    assert!(pool.remove(b), "removed while both live");
    assert_eq!(pool.reclaim(), 0);
    drop(outer);
    assert_eq!(pool.reclaim(), 0, "the inner section still holds both");
    assert_eq!(load(&drops), 0);
    assert!(vb.intact() && vb.id == 2);
    assert!(inner.get(a).is_none() && inner.get(b).is_none());
    assert_eq!(inner.iter().map(|(_, v)| v.id).collect::<Vec<_>>(), [3]);
    drop(inner);
    assert_eq!(pool.reclaim(), 2);
    assert_eq!(load(&drops), 2);

    // The depth came back to 0: a later section and removal go as usual.
    let again = pool.read();
    let vc = again.get(c).expect("live");
    assert!(pool.remove(c));
    assert_eq!(pool.reclaim(), 0);
    assert!(vc.intact());
    drop(again);
    assert_eq!(pool.reclaim(), 1);
    assert_eq!(load(&drops), 3);
    assert_eq!(pool.stats().awaiting_reuse, 0);
}

// 4. Forgotten sections.

/// A section forgotten on a thread that then exits stays open for good:
/// its record is never taken over (a section kept in a thread-local can
/// outlive its thread's id, and the two cannot be told apart), so what is
/// removed after it waits for the pool's drop. The threads that get the
/// exited thread's id read without a record, correctly.
#[test]
fn a_section_forgotten_by_a_thread_that_exited_keeps_later_removals_until_the_pools_drop() {
    let _watchdog = watchdog("sections after a forgotten one", WAITING);
    let pool = HandlePool::new(8);
    let drops = Arc::new(AtomicUsize::new(0));
    let kept = put(&pool, 1, &drops);
    let late = put(&pool, 2, &drops);
    thread::scope(|s| {
        // Joined explicitly: the thread has exited (its id is free) once
        // `join` returns.
        s.spawn(|| {
            let section = pool.read();
            assert!(section.get(kept).expect("live").intact());
            mem::forget(section);
        })
        .join()
        .unwrap();
    });
    assert!(
        pool.remove(late),
        "removed after the forgotten section began"
    );
    assert_eq!(pool.reclaim(), 0, "the forgotten section may still read it");
    assert_eq!(pool.stats().awaiting_reuse, 1);
    assert!(matches!(pool.take(kept), Err(TakeError::BeingRead)));
    assert_eq!(load(&drops), 0);

    // Threads that open sections, all alive at once so that each holds a
    // distinct id (one of them, likely, the exited thread's): each reads
    // correctly, and the late value stays.
    let batch = if cfg!(miri) { 4 } else { 16 };
    let ready = Barrier::new(batch);
    thread::scope(|s| {
        for _ in 0..batch {
            s.spawn(|| {
                let section = pool.read();
                assert!(section.get(kept).expect("live").intact());
                assert!(section.get(late).is_none());
                drop(section);
                ready.wait();
            });
        }
    });
    assert_eq!(pool.reclaim(), 0);
    assert_eq!(load(&drops), 0);
    drop(pool);
    assert_eq!(load(&drops), 2, "the pool's drop drops both, once");
}

#[test]
fn a_forgotten_section_keeps_entries_removed_after_it_awaiting_but_frees_those_removed_before_an_earlier_grace_period(
) {
    let pool = HandlePool::new(8);
    let (a_drops, b_drops, c_drops) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
        Arc::new(AtomicUsize::new(0)),
    );
    let a = put(&pool, 1, &a_drops);
    let b = put(&pool, 2, &b_drops);
    let c = put(&pool, 3, &c_drops);
    // On a thread of its own: the harness's thread is shared.
    thread::scope(|s| {
        s.spawn(|| {
            let first = pool.read();
            assert!(pool.remove(a));
            assert_eq!(
                pool.reclaim(),
                0,
                "a section older than the removal is open"
            );
            drop(first);
            mem::forget(pool.read());
            assert!(pool.remove(b));
            assert_eq!(
                pool.reclaim(),
                1,
                "a's grace period began before the forgotten section"
            );
            assert_eq!(load(&a_drops), 1);
            for _ in 0..3 {
                assert_eq!(
                    pool.reclaim(),
                    0,
                    "b was removed under the forgotten section"
                );
            }
            assert_eq!(pool.stats().awaiting_reuse, 1);
            assert_eq!(load(&b_drops), 0);
            assert!(matches!(pool.take(c), Err(TakeError::BeingRead)));
            // A later section on this thread nests in the forgotten one.
            let nested = pool.read();
            assert!(nested.get(c).expect("live").intact());
            assert!(nested.get(b).is_none());
            drop(nested);
            assert_eq!(pool.reclaim(), 0);
        })
        .join()
        .unwrap();
    });
    // The thread exited; no thread has taken over its record: b waits.
    assert_eq!(pool.reclaim(), 0);
    assert_eq!(pool.stats().awaiting_reuse, 1);
    assert_eq!(pool.len(), 1);
    assert_eq!(load(&b_drops), 0);
    drop(pool);
    assert_eq!(
        (load(&a_drops), load(&b_drops), load(&c_drops)),
        (1, 1, 1),
        "the pool's drop frees what waited"
    );
}

/// What the tags cannot tell apart (`ReadSection`'s and `reclaim`'s
/// docs): a section that begins after a removal but before the next grace
/// period announces the same epoch as one that began just before it, so a
/// forgotten one keeps that entry too, with every later one, until its
/// thread's record is taken over; the pool's drop frees them all.
#[test]
fn a_forgotten_section_keeps_entries_removed_since_the_grace_period_before_it() {
    let pool = HandlePool::new(8);
    let (a_drops, b_drops) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let a = put(&pool, 1, &a_drops);
    let b = put(&pool, 2, &b_drops);
    thread::scope(|s| {
        s.spawn(|| {
            drop(pool.read()); // the pool has had a section: removals wait
            assert!(pool.remove(a));
            mem::forget(pool.read());
            assert!(pool.remove(b));
            assert_eq!(pool.reclaim(), 0, "no grace period since a's removal");
            assert_eq!(pool.stats().awaiting_reuse, 2);
            assert_eq!((load(&a_drops), load(&b_drops)), (0, 0));
        })
        .join()
        .unwrap();
    });
    drop(pool);
    assert_eq!(
        (load(&a_drops), load(&b_drops)),
        (1, 1),
        "the drop frees them"
    );
}

// 5. A full pool whose free entries await reuse.

#[test]
fn a_full_pool_whose_free_entries_await_reuse_inserts_after_a_grace_period_and_refuses_while_an_older_section_is_open(
) {
    let pool = HandlePool::new(4);
    let drops = Arc::new(AtomicUsize::new(0));
    drop(pool.read()); // from now on removals wait for grace periods
    let keys: Vec<_> = (0..4).map(|i| put(&pool, i, &drops)).collect();

    // No section open: the insert runs a grace period itself.
    assert!(pool.remove(keys[0]));
    assert_eq!((pool.len(), pool.stats().awaiting_reuse), (3, 1));
    assert_eq!(load(&drops), 0);
    let k4 = put(&pool, 4, &drops);
    assert_eq!(k4.index(), keys[0].index(), "the awaiting entry, reused");
    assert_eq!(load(&drops), 1);
    assert_eq!(pool.stats().awaiting_reuse, 0);

    // A section of this thread, older than the removal: refused, the value
    // given back, until it ends.
    let section = pool.read();
    let v1 = section.get(keys[1]).expect("live");
    assert!(pool.remove(keys[1]));
    match pool.insert(Tagged::new(5, &drops)) {
        Err(err) => assert!(err.into_inner().id == 5),
        Ok(_) => panic!("an entry a section may read was reused"),
    }
    assert_eq!(load(&drops), 2, "the refused value, given back and dropped");
    assert!(v1.intact() && v1.id == 1);
    assert_eq!(pool.stats().awaiting_reuse, 1);
    assert_eq!(pool.stats().refused_inserts, 1);
    drop(section);
    let k5 = put(&pool, 5, &drops);
    assert_eq!(k5.index(), keys[1].index());
    assert_eq!(load(&drops), 3);

    // The same with the section on another thread.
    let (opened_tx, opened) = mpsc::channel();
    let (end, end_rx) = mpsc::channel::<()>();
    thread::scope(|s| {
        let (pool, keys) = (&pool, &keys);
        let reader = s.spawn(move || {
            let section = pool.read();
            let value = section.get(keys[2]).expect("live");
            opened_tx.send(()).unwrap();
            end_rx.recv().unwrap();
            assert!(value.intact() && value.id == 2, "torn under its section");
        });
        opened.recv().unwrap();
        assert!(pool.remove(keys[2]));
        match pool.insert(Tagged::new(6, &drops)) {
            Err(err) => assert_eq!(err.into_inner().id, 6),
            Ok(_) => panic!("an entry another thread's section may read was reused"),
        }
        assert_eq!(pool.reclaim(), 0);
        end.send(()).unwrap();
        reader.join().unwrap();
    });
    assert_eq!(load(&drops), 4);
    let k6 = put(&pool, 6, &drops);
    assert_eq!(k6.index(), keys[2].index());
    assert_eq!(load(&drops), 5);
    assert_eq!((pool.len(), pool.stats().awaiting_reuse), (4, 0));
}

/// Inserts into a pool whose free entries all await reuse, on two threads
/// at once, with no section open: each insert that finds no free entry runs
/// a grace period, which frees them all, so none may be refused (a pool
/// that never had a section refuses none of the same inserts).
#[test]
fn concurrent_inserts_are_not_refused_while_entries_await_reuse_and_no_section_is_open() {
    const CAPACITY: usize = 64;
    const PER_THREAD: u64 = 30;
    // Under miri, one round.
    let time = if cfg!(miri) {
        Duration::ZERO
    } else {
        Duration::from_secs(1)
    };
    let deadline = Instant::now() + time;
    let mut rounds = 0;
    while rounds == 0 || Instant::now() < deadline {
        let pool = HandlePool::new(CAPACITY);
        drop(pool.read()); // removals wait for grace periods
        let keys: Vec<Handle> = (0..CAPACITY as u64)
            .map(|i| pool.insert(i).unwrap())
            .collect();
        for &key in &keys[1..] {
            assert!(pool.remove(key));
        }
        assert_eq!(pool.stats().awaiting_reuse, CAPACITY - 1);
        let start = Barrier::new(2);
        let refused: usize = thread::scope(|s| {
            let inserters: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        (0..PER_THREAD).filter(|&i| pool.insert(i).is_err()).count()
                    })
                })
                .collect();
            inserters.into_iter().map(|t| t.join().unwrap()).sum()
        });
        assert_eq!(
            refused,
            0,
            "round {rounds}: inserts refused with {} entries reusable and no section open",
            CAPACITY - 1
        );
        rounds += 1;
    }
}

// 6. `take` and open sections.

#[test]
fn take_fails_being_read_while_this_thread_has_a_section_open_and_returns_the_value_intact_after() {
    let pool = HandlePool::new(4);
    let drops = Arc::new(AtomicUsize::new(0));
    let key = put(&pool, 9, &drops);
    let section = pool.read();
    assert!(matches!(pool.take(key), Err(TakeError::BeingRead)));
    let value = section.get(key).expect("still live, under the same key");
    assert!(value.intact());
    // Even a section that never read it: any section may read any value.
    drop(section);
    let other = pool.read();
    assert!(matches!(pool.take(key), Err(TakeError::BeingRead)));
    drop(other);
    let taken = pool.take(key).expect("no section open");
    assert!(taken.intact() && taken.id == 9);
    assert_eq!(load(&drops), 0);
    assert!(!pool.contains(key));
    assert!(matches!(pool.take(key), Err(TakeError::Stale)));
    assert_eq!((pool.len(), pool.stats().awaiting_reuse), (0, 0));
    drop(taken);
    assert_eq!(load(&drops), 1);
}

#[test]
fn take_fails_being_read_while_another_thread_has_a_section_open_and_succeeds_after_it_ends() {
    let pool = HandlePool::new(4);
    let drops = Arc::new(AtomicUsize::new(0));
    let key = put(&pool, 11, &drops);
    let (opened_tx, opened) = mpsc::channel();
    let (end, end_rx) = mpsc::channel::<()>();
    thread::scope(|s| {
        let pool = &pool;
        let reader = s.spawn(move || {
            let section = pool.read();
            opened_tx.send(()).unwrap();
            end_rx.recv().unwrap();
            drop(section);
        });
        opened.recv().unwrap();
        for _ in 0..3 {
            assert!(matches!(pool.take(key), Err(TakeError::BeingRead)));
        }
        assert!(pool.contains(key), "a refused take leaves the value live");
        end.send(()).unwrap();
        // Joined: the section has ended.
        reader.join().unwrap();
    });
    let taken = pool.take(key).expect("the section ended");
    assert!(taken.intact() && taken.id == 11);
    assert_eq!(load(&drops), 0);
}

#[test]
fn a_section_on_another_pool_does_not_stop_a_take() {
    let pool = HandlePool::new(2);
    let elsewhere = HandlePool::<u8>::new(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let key = put(&pool, 3, &drops);
    drop(pool.read());
    let section = elsewhere.read();
    let taken = pool.take(key).expect("sections are per pool");
    assert_eq!(taken.id, 3);
    drop(section);
}

// 7. Eviction with sections.

type EvictLog = Arc<Mutex<Vec<(Handle, u64)>>>;

/// A pool of `capacity` that evicts the oldest value and logs `on_evict`.
fn evicting(capacity: usize) -> (HandlePool<Tagged>, EvictLog) {
    let log = EvictLog::default();
    let sink = Arc::clone(&log);
    let pool = HandlePool::builder()
        .capacity(capacity)
        .evict_oldest()
        .on_evict(move |key: Handle, value: Tagged| {
            assert!(value.intact(), "on_evict got a torn value");
            sink.lock().unwrap().push((key, value.id));
        })
        .build()
        .unwrap();
    (pool, log)
}

fn logged(log: &EvictLog) -> Vec<(Handle, u64)> {
    log.lock().unwrap().clone()
}

#[test]
fn an_eviction_hands_the_value_to_on_evict_only_once_no_section_that_could_see_it_is_open() {
    let (pool, log) = evicting(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let first = put(&pool, 1, &drops);
    let second = put(&pool, 2, &drops);

    // A section open on another thread, which read the oldest value.
    let (opened_tx, opened) = mpsc::channel();
    let (end, end_rx) = mpsc::channel::<()>();
    thread::scope(|s| {
        let pool = &pool;
        let reader = s.spawn(move || {
            let section = pool.read();
            let value = section.get(first).expect("live");
            opened_tx.send(()).unwrap();
            end_rx.recv().unwrap();
            assert!(
                value.intact() && value.id == 1,
                "evicted from under its section"
            );
            assert!(section.contains(first), "never evicted under it");
        });
        opened.recv().unwrap();
        // An eviction now could not free an entry before the section
        // ends: the insert evicts nothing, and is refused.
        match pool.insert(Tagged::new(3, &drops)) {
            Err(err) => assert_eq!(err.into_inner().id, 3),
            Ok(_) => panic!("an entry a section may read was reused"),
        }
        assert!(pool.contains(first), "not evicted");
        assert!(logged(&log).is_empty());
        assert_eq!(pool.stats().evictions, 0);
        end.send(()).unwrap();
        reader.join().unwrap();
    });
    assert_eq!(load(&drops), 1, "the refused value");
    // The section ended: the next insert evicts the oldest, and its own
    // grace period hands the value over.
    let third = put(&pool, 3, &drops);
    assert_eq!(logged(&log), [(first, 1)]);
    assert_eq!(third.index(), first.index());
    assert_eq!(pool.stats().evictions, 1);
    assert_eq!(load(&drops), 2, "on_evict's value, dropped after it");
    assert!(pool.contains(second));

    // No section open: an eviction runs its grace period at once.
    let fourth = put(&pool, 4, &drops);
    assert_eq!(logged(&log), [(first, 1), (second, 2)]);
    assert_eq!(fourth.index(), second.index());
    assert_eq!(pool.stats().evictions, 2);
    assert_eq!(pool.stats().awaiting_reuse, 0);
    drop(pool);
    assert_eq!(logged(&log).len(), 2, "live values drop, not evicted");
    assert_eq!(load(&drops), 5);
}

/// An evicting insert while a section is open evicts nothing: the
/// victim's entry could not be reused before the section ends (every open
/// section may see it), so the insert fails at once, giving its value back,
/// and every value stays live.
#[test]
fn an_evicting_insert_under_an_open_section_evicts_nothing_and_gives_the_value_back() {
    let (pool, log) = evicting(2);
    let drops = Arc::new(AtomicUsize::new(0));
    let first = put(&pool, 1, &drops);
    let second = put(&pool, 2, &drops);
    let section = pool.read();
    for id in 3..10 {
        let refused = pool.insert(Tagged::new(id, &drops)).unwrap_err();
        assert_eq!(refused.into_inner().id, id);
    }
    assert!(section.contains(first) && section.contains(second));
    assert_eq!(pool.stats().evictions, 0);
    assert!(logged(&log).is_empty());
    drop(section);
    // No section open: the insert evicts the oldest, whose grace period
    // is the insert's own.
    let third = put(&pool, 3, &drops);
    assert_eq!(third.index(), first.index());
    assert_eq!(logged(&log), [(first, 1)]);
    drop(pool);
    assert_eq!(load(&drops), 7 + 3, "the refused values, then the pool's");
}

#[test]
fn an_eviction_by_key_waits_for_the_open_sections_then_hands_over_the_least_value() {
    let log = EvictLog::default();
    let sink = Arc::clone(&log);
    let pool = HandlePool::builder()
        .capacity(3)
        .evict_min_by_key(|value: &Tagged| value.id)
        .on_evict(move |key: Handle, value: Tagged| {
            assert!(value.intact());
            sink.lock().unwrap().push((key, value.id));
        })
        .build()
        .unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    put(&pool, 5, &drops);
    let least = put(&pool, 1, &drops);
    put(&pool, 9, &drops);
    let section = pool.read();
    let value = section.get(least).expect("live");
    assert!(pool.insert(Tagged::new(7, &drops)).is_err());
    assert!(section.contains(least), "not evicted under a section");
    assert!(value.intact() && value.id == 1);
    drop(section);
    let seven = put(&pool, 7, &drops);
    assert_eq!(seven.index(), least.index());
    assert_eq!(logged(&log), [(least, 1)]);
    assert_eq!(pool.stats().evictions, 1);
    drop(pool);
    assert_eq!(logged(&log).len(), 1);
    assert_eq!(load(&drops), 5);
}

// 8. A panicking drop during a grace period.

/// A value whose drop panics when armed.
#[derive(Debug)]
struct Bomb {
    id: u64,
    armed: bool,
    drops: Arc<AtomicUsize>,
}

impl Drop for Bomb {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.armed && !thread::panicking() {
            panic!("bomb {}", self.id);
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Fills a pool of 8 with bombs (those of `armed` ids armed), removes them
/// all, and runs a `reclaim` whose drops panic: it must propagate a panic
/// of an armed bomb once every entry is back, every value dropped once.
fn reclaim_with_bombs(armed: &[u64]) {
    const CAPACITY: usize = 8;
    let pool = HandlePool::new(CAPACITY);
    let drops = Arc::new(AtomicUsize::new(0));
    drop(pool.read());
    let keys: Vec<Handle> = (0..CAPACITY as u64)
        .map(|id| {
            pool.insert(Bomb {
                id,
                armed: armed.contains(&id),
                drops: Arc::clone(&drops),
            })
            .unwrap()
        })
        .collect();
    for &key in &keys {
        assert!(pool.remove(key));
    }
    assert_eq!((pool.len(), pool.stats().awaiting_reuse), (0, CAPACITY));
    assert_eq!(load(&drops), 0);

    let payload =
        panic::catch_unwind(AssertUnwindSafe(|| pool.reclaim())).expect_err("a drop panicked");
    let message = panic_message(&*payload);
    assert!(
        armed.iter().any(|id| message == format!("bomb {id}")),
        "the panic of an armed bomb, not {message:?}"
    );
    assert_eq!(load(&drops), CAPACITY, "every value dropped, once");
    let stats = pool.stats();
    assert_eq!((pool.len(), stats.live, stats.awaiting_reuse), (0, 0, 0));
    assert_eq!(pool.reclaim(), 0);
    // Every entry is back: the pool fills to its capacity again.
    let again: Vec<Handle> = (0..CAPACITY as u64)
        .map(|id| {
            pool.insert(Bomb {
                id: 100 + id,
                armed: false,
                drops: Arc::clone(&drops),
            })
            .expect("every entry is back")
        })
        .collect();
    assert!(pool
        .insert(Bomb {
            id: 200,
            armed: false,
            drops: Arc::clone(&drops),
        })
        .is_err());
    assert_eq!(pool.len(), CAPACITY);
    for key in again {
        assert!(!keys.contains(&key), "a fresh generation");
    }
    drop(pool);
    assert_eq!(load(&drops), 2 * CAPACITY + 1);
}

#[test]
fn a_drop_that_panics_in_reclaim_propagates_after_every_other_entry_is_back() {
    reclaim_with_bombs(&[3]);
}

#[test]
fn two_drops_that_panic_in_one_reclaim_propagate_one_panic_and_lose_nothing() {
    reclaim_with_bombs(&[0, 5]);
}

#[test]
fn an_on_evict_that_panics_at_a_grace_period_propagates_from_the_insert_after_the_entry_is_back() {
    let drops = Arc::new(AtomicUsize::new(0));
    let pool = HandlePool::builder()
        .capacity(2)
        .evict_oldest()
        .on_evict(|_, value: Tagged| {
            if value.id == 1 {
                panic!("on_evict {}", value.id);
            }
        })
        .build()
        .unwrap();
    let first = put(&pool, 1, &drops);
    let second = put(&pool, 2, &drops);
    drop(pool.read()); // the pool has had a section
    let payload = panic::catch_unwind(AssertUnwindSafe(|| pool.insert(Tagged::new(4, &drops))))
        .expect_err("on_evict panicked");
    assert_eq!(panic_message(&*payload), "on_evict 1");
    assert!(!pool.contains(first));
    assert_eq!(load(&drops), 2, "the evicted value and the insert's");
    let stats = pool.stats();
    assert_eq!(
        (pool.len(), stats.awaiting_reuse, stats.evictions),
        (1, 0, 1)
    );
    // The evicted entry is back: the next insert takes it, evicting nothing.
    let fifth = put(&pool, 5, &drops);
    assert_eq!(fifth.index(), first.index());
    assert!(pool.contains(second));
    assert_eq!(pool.stats().evictions, 1);
}

// 9. Statistics and the paths that free awaiting entries.

#[test]
fn removals_await_reuse_outside_len_once_the_pool_has_had_a_section_and_reclaim_frees_them() {
    let pool = HandlePool::new(8);
    let drops = Arc::new(AtomicUsize::new(0));
    let keys: Vec<_> = (0..4).map(|i| put(&pool, i, &drops)).collect();

    // No section ever: a removal drops at once.
    assert!(pool.remove(keys[0]));
    assert_eq!(load(&drops), 1);
    assert_eq!((pool.len(), pool.stats().awaiting_reuse), (3, 0));

    // `with` opens a section: from then on removals wait.
    assert_eq!(pool.with(keys[1], |v| v.intact()), Some(true));
    assert!(pool.remove(keys[1]));
    assert!(pool.remove(keys[2]));
    assert_eq!(load(&drops), 1);
    let stats = pool.stats();
    assert_eq!((pool.len(), stats.live, stats.awaiting_reuse), (1, 1, 2));
    assert!(!pool.contains(keys[1]) && pool.with(keys[2], |_| ()).is_none());
    assert_eq!(pool.reclaim(), 2);
    assert_eq!(load(&drops), 3);
    let stats = pool.stats();
    assert_eq!((pool.len(), stats.live, stats.awaiting_reuse), (1, 1, 0));
    assert_eq!(pool.reclaim(), 0);
}

#[test]
fn removals_batch_a_grace_period_once_the_limbo_reaches_64() {
    // The batch is max(64, min(capacity / 4, 4096)): 64 here.
    let pool = HandlePool::new(128);
    let drops = Arc::new(AtomicUsize::new(0));
    drop(pool.read());
    let keys: Vec<_> = (0..64).map(|i| put(&pool, i, &drops)).collect();
    for (n, &key) in keys.iter().enumerate().take(63) {
        assert!(pool.remove(key));
        assert_eq!(pool.stats().awaiting_reuse, n + 1);
    }
    assert_eq!(load(&drops), 0);
    assert!(pool.remove(keys[63]));
    assert_eq!(
        pool.stats().awaiting_reuse,
        0,
        "the 64th removal ran a grace period"
    );
    assert_eq!(load(&drops), 64);
}

#[test]
fn the_last_ref_of_a_removed_value_leaves_it_awaiting_reuse_until_a_grace_period() {
    let pool = HandlePool::new(4);
    let drops = Arc::new(AtomicUsize::new(0));
    let key = put(&pool, 5, &drops);
    let read = pool.get(key).expect("live");
    let section = pool.read();
    let value = section.get(key).expect("live");
    assert!(pool.remove(key));
    let stats = pool.stats();
    assert_eq!((stats.removed_while_read, stats.awaiting_reuse), (1, 0));
    drop(read);
    let stats = pool.stats();
    assert_eq!((stats.removed_while_read, stats.awaiting_reuse), (0, 1));
    assert_eq!(load(&drops), 0);
    assert!(value.intact() && value.id == 5);
    assert_eq!(pool.reclaim(), 0);
    drop(section);
    assert_eq!(pool.reclaim(), 1);
    assert_eq!(load(&drops), 1);
    assert_eq!(pool.len(), 0);
}

#[test]
fn the_last_owned_ref_of_a_removed_value_leaves_it_awaiting_reuse_until_a_grace_period() {
    let pool = Arc::new(HandlePool::new(4));
    let drops = Arc::new(AtomicUsize::new(0));
    let key = put(&pool, 6, &drops);
    let owned = pool.get_owned(key).expect("live");
    drop(pool.read());
    assert!(pool.remove(key));
    assert_eq!(pool.stats().removed_while_read, 1);
    // Dropped on another thread, as an owned read may be.
    thread::spawn(move || drop(owned)).join().unwrap();
    let stats = pool.stats();
    assert_eq!((stats.removed_while_read, stats.awaiting_reuse), (0, 1));
    assert_eq!(load(&drops), 0);
    assert_eq!(pool.reclaim(), 1);
    assert_eq!(load(&drops), 1);
}

#[test]
fn clear_frees_entries_awaiting_reuse() {
    let mut pool = HandlePool::new(8);
    let drops = Arc::new(AtomicUsize::new(0));
    let keys: Vec<_> = (0..6).map(|i| put(&pool, i, &drops)).collect();
    drop(pool.read());
    for &key in &keys[..3] {
        assert!(pool.remove(key));
    }
    assert_eq!((pool.len(), pool.stats().awaiting_reuse), (3, 3));
    assert_eq!(load(&drops), 0);
    pool.clear();
    assert_eq!(load(&drops), 6);
    let stats = pool.stats();
    assert_eq!((pool.len(), stats.live, stats.awaiting_reuse), (0, 0, 0));
    for i in 0..8 {
        put(&pool, 10 + i, &drops);
    }
    assert_eq!(pool.len(), 8, "every entry is back");
}

#[test]
fn insert_mut_into_a_full_pool_frees_entries_awaiting_reuse() {
    let mut pool = HandlePool::new(4);
    let drops = Arc::new(AtomicUsize::new(0));
    let keys: Vec<_> = (0..4).map(|i| put(&pool, i, &drops)).collect();
    drop(pool.read());
    assert!(pool.remove(keys[0]));
    assert!(pool.remove(keys[3]));
    assert_eq!(pool.stats().awaiting_reuse, 2);
    let new = match pool.insert_mut(Tagged::new(7, &drops)) {
        Ok(key) => key,
        Err(_) => panic!("the awaiting entries are free under &mut"),
    };
    assert_eq!(pool.stats().awaiting_reuse, 0);
    assert_eq!(load(&drops), 2);
    assert!([keys[0].index(), keys[3].index()].contains(&new.index()));
    assert!(pool.insert_mut(Tagged::new(8, &drops)).is_ok());
    assert!(pool.insert_mut(Tagged::new(9, &drops)).is_err());
    assert_eq!(pool.len(), 4);
    assert_eq!(load(&drops), 3);
}

// 10. Typed keys, and pools whose segments are allocated on demand.

tagpool::new_key_type! {
    struct MonsterKey;
}

#[test]
fn sections_read_a_pool_of_typed_keys() {
    let pool: HandlePool<String, MonsterKey> = HandlePool::with_key(8);
    let orc = pool.insert("orc".to_string()).unwrap();
    let elf = pool.insert("elf".to_string()).unwrap();
    let imp = pool.insert("imp".to_string()).unwrap();
    let section = pool.read();
    assert!(std::ptr::eq(section.pool(), &pool));
    assert_eq!(section.get(orc).map(String::as_str), Some("orc"));
    assert!(section.contains(elf));
    let elf_name = section.get(elf).expect("live");
    assert!(pool.remove(elf));
    assert!(!section.contains(elf) && section.get(elf).is_none());
    assert_eq!(elf_name, "elf", "still readable in the section");
    let walked: Vec<(MonsterKey, &str)> = section.iter().map(|(k, v)| (k, v.as_str())).collect();
    assert_eq!(walked, [(orc, "orc"), (imp, "imp")]);
    assert_eq!(section.values().map(String::len).sum::<usize>(), 6);
    assert_eq!(pool.with(imp, |v| v.clone()).as_deref(), Some("imp"));
    drop(section);
    assert_eq!(pool.reclaim(), 1);
    assert_eq!(pool.len(), 2);
}

/// A value that knows its key.
#[derive(Debug)]
struct Keyed {
    key: MonsterKey,
    n: u64,
}

#[test]
fn sections_reach_values_past_the_first_segment_of_a_pool_built_with_initial() {
    let (capacity, initial, count) = if cfg!(miri) {
        (256, 4, 40)
    } else {
        (4096, 16, 600)
    };
    let pool: HandlePool<Keyed, MonsterKey> = HandlePool::builder_with_key()
        .capacity(capacity)
        .initial(initial)
        .build()
        .unwrap();
    assert_eq!(pool.stats().allocated, initial);
    let keys: Vec<MonsterKey> = (0..count)
        .map(|n| pool.insert_with_key(|key| Keyed { key, n }).expect("room"))
        .collect();
    assert!(pool.stats().allocated > initial);
    let section = pool.read();
    let walked: Vec<(MonsterKey, u64)> = section.iter().map(|(k, v)| (k, v.n)).collect();
    // In index order, whichever entries the inserts got.
    let mut expected: Vec<(MonsterKey, u64)> = keys.iter().copied().zip(0..).collect();
    expected.sort_by_key(|&(key, _)| Handle::from(key).index());
    assert_eq!(walked, expected, "every value, in index order");
    assert!(section.iter().all(|(k, v)| v.key == k));
    let last = *keys.last().unwrap();
    let held = section.get(last).expect("live, past the first segment");
    assert!(pool.remove(last));
    assert_eq!(held.n, count - 1);
    assert_eq!(section.iter().count() as u64, count - 1);
    assert_eq!(section.values().map(|v| v.n).max(), Some(count - 2));
    drop(section);
    assert_eq!(pool.reclaim(), 1);
}

#[test]
fn sections_walk_a_pool_while_another_thread_grows_it_segment_by_segment() {
    let (capacity, initial, count) = if cfg!(miri) {
        (64, 2, 40)
    } else {
        (4096, 2, 4000)
    };
    let pool: HandlePool<Keyed, MonsterKey> = HandlePool::builder_with_key()
        .capacity(capacity)
        .initial(initial)
        .build()
        .unwrap();
    let done = AtomicBool::new(false);
    let walks = thread::scope(|s| {
        s.spawn(|| {
            for n in 0..count {
                let key = pool.insert_with_key(|key| Keyed { key, n }).expect("room");
                if n % 5 == 0 {
                    assert!(pool.remove(key));
                }
            }
            done.store(true, Ordering::SeqCst);
        });
        let mut walks = 0u64;
        loop {
            let last = done.load(Ordering::SeqCst);
            let section = pool.read();
            let mut previous = None;
            for (key, value) in section.iter() {
                assert_eq!(value.key, key, "a value under another key");
                if last {
                    assert!(value.n % 5 != 0, "a value removed before the walk");
                }
                let index = Handle::from(key).index();
                assert!(previous < Some(index), "index order");
                previous = Some(index);
            }
            drop(section);
            walks += 1;
            if last {
                break;
            }
        }
        walks
    });
    assert!(walks >= 1);
    let section = pool.read();
    let live = section.iter().count() as u64;
    assert_eq!(live, count - (count + 4) / 5);
    assert_eq!(pool.len() as u64, live);
}

#[test]
fn a_section_iterator_names_each_value_by_its_own_key_across_holes() {
    let pool: HandlePool<Keyed, MonsterKey> = HandlePool::with_key(16);
    let keys: Vec<MonsterKey> = (0..16)
        .map(|n| pool.insert_with_key(|key| Keyed { key, n }).expect("room"))
        .collect();
    // Holes at the start, in the middle, in runs and at the end.
    for i in [0, 3, 4, 5, 9, 15] {
        assert!(pool.remove(keys[i]));
    }
    let section = pool.read();
    let mut iter = section.iter();
    assert_eq!(iter.size_hint(), (0, Some(16)));
    let walked: Vec<(MonsterKey, u64)> = iter.by_ref().map(|(k, v)| (k, v.n)).collect();
    let expected: Vec<(MonsterKey, u64)> = [1, 2, 6, 7, 8, 10, 11, 12, 13, 14]
        .iter()
        .map(|&i| (keys[i], i as u64))
        .collect();
    assert_eq!(walked, expected);
    assert!(iter.next().is_none(), "fused");
    assert!(section.iter().all(|(k, v)| v.key == k));
    assert_eq!(
        section.values().map(|v| v.n).sum::<u64>(),
        expected.iter().map(|e| e.1).sum::<u64>()
    );
}
