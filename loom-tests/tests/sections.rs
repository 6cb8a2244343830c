//! Models of the handle pool's read sections (`src/handle/read/`): a
//! section racing a remove and a re-insert of the same (only) entry, an
//! eviction, a `take`, the pool's drop, nested sections dropped out of
//! order, a forgotten section, the first section of a pool racing a
//! remove, an insert racing another thread's grace period, and a thread's
//! bag of removed entries racing a grace period.
//!
//! What a model checks: a section never reads a dropped value (each value
//! carries a loom atomic that its drop clears, so a read after the drop
//! sees it cleared in some execution) nor a successor's value (its id),
//! every value is dropped or handed to `on_evict` once (`Track` reports a
//! leak), and the pool's answers (a full pool's insert, `reclaim`,
//! `take`) are the ones the protocol promises. Under loom the barrier's two
//! halves are `SeqCst` fences, so the models check the protocol the
//! fence fallback runs; `membarrier` gives the light half's compiler fence
//! the same guarantee (`engine/barrier.rs`).

#![cfg(loom)]

use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::sync::Arc as StdArc;

use loom::alloc::Track;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;
use tagpool::{Handle, HandlePool, ReadSection, TakeError};
use tagpool_loom_tests::check;

/// A value whose drop a reader can see.
struct Val {
    id: usize,
    alive: AtomicBool,
}

impl Drop for Val {
    fn drop(&mut self) {
        self.alive.store(false, Ordering::Relaxed);
    }
}

fn val(id: usize) -> Track<Val> {
    Track::new(Val {
        id,
        alive: AtomicBool::new(true),
    })
}

/// The id `section` reads under `key`, checked alive.
fn seen(section: &ReadSection<'_, Track<Val>>, key: Handle) -> Option<usize> {
    section.get(key).map(id)
}

/// The id of `value`, checked alive.
fn id(value: &Track<Val>) -> usize {
    let value = value.get_ref();
    assert!(
        value.alive.load(Ordering::Relaxed),
        "a section read a dropped value"
    );
    value.id
}

/// What a reader does in its section: reads `key` (the value `expected`,
/// or nothing), then, after another thread had a chance to run, reads the
/// same reference again: still there, still `expected`.
fn read_twice(section: &ReadSection<'_, Track<Val>>, key: Handle, expected: usize) {
    let value = section.get(key);
    if let Some(value) = value {
        assert_eq!(id(value), expected);
    }
    thread::yield_now();
    if let Some(value) = value {
        assert_eq!(id(value), expected, "the value changed under the section");
    }
}

/// A section reads a key while the owner removes its value and inserts
/// another into the same (only) entry: the reader sees the old value,
/// alive, or nothing, never the new one; the insert fails while a section
/// that began before the removal may still read it, and succeeds once no
/// section is open. Faults: `tagpool_loom_section_never_defers` (removals
/// free at once), `tagpool_loom_section_epoch_ahead` (a reader announces
/// the next epoch), `tagpool_loom_section_no_barrier` (no barrier between a
/// reader's announcement and its loads), `tagpool_loom_grace_keeps_nothing`
/// (a grace period frees whatever it looks at),
/// `tagpool_loom_section_key_index_only` (a section's compare of the
/// entry's word leaves the generation out: the stale key passes the
/// successor's word). Two entries, one held by a value that stays, so
/// that the section looks the key up by its masked bits (a pool of one
/// entry has no such lookup) and the re-insert reuses the key's entry.
#[test]
fn section_races_remove_and_reinsert() {
    check("section_races_remove_and_reinsert", 3, || {
        let pool = Arc::new(HandlePool::new(2));
        // A section before the race, so that the pool defers from the
        // start (the first section's handshake is another model).
        drop(pool.read());
        let stays = pool.insert(val(0)).unwrap();
        let old = pool.insert(val(1)).unwrap();
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || read_twice(&pool.read(), old, 1))
        };
        // Lets loom start the reader first as well (its exploration
        // otherwise misses the schedules where the spawned thread leads).
        thread::yield_now();
        assert!(pool.remove(old));
        let new = pool.insert(val(2));
        reader.join().unwrap();
        let new = match new {
            Ok(new) => new,
            Err(full) => {
                // Only a section that could see the old value holds it.
                pool.insert(full.into_inner()).expect("no section is open")
            }
        };
        assert_ne!(new, old);
        assert_eq!(new.index(), old.index(), "the removed entry, reused");
        assert_eq!(seen(&pool.read(), new), Some(2));
        assert_eq!(seen(&pool.read(), stays), Some(0));
        assert!(pool.remove(new) && pool.remove(stays));
        assert_eq!(pool.reclaim(), 2);
        assert!(pool.is_empty());
    });
}

/// An insert into a full pool that evicts the oldest value while a
/// section reads it: the reader never sees the value dropped; an insert
/// that sees a section open evicts nothing; `on_evict` gets each evicted
/// value once, after the sections that may see it (at the insert's grace
/// period, or at the pool's drop if a section that opened meanwhile kept
/// it). Faults:
/// `tagpool_loom_section_never_defers` (the eviction hands the value over
/// at once), `tagpool_loom_drop_forgets_limbo` (the pool's drop leaves the
/// evicted value to its entry: `on_evict` never gets it).
#[test]
fn section_races_an_eviction() {
    check("section_races_an_eviction", 3, || {
        let handed = StdArc::new(StdAtomicUsize::new(0));
        let count = StdArc::clone(&handed);
        let pool = Arc::new(
            HandlePool::builder()
                .capacity(1)
                .evict_oldest()
                .on_evict(move |_, value: Track<Val>| {
                    assert!(value.get_ref().alive.load(Ordering::Relaxed));
                    count.fetch_add(1, StdOrdering::Relaxed);
                })
                .build()
                .unwrap(),
        );
        drop(pool.read());
        let old = pool.insert(val(1)).unwrap();
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || read_twice(&pool.read(), old, 1))
        };
        thread::yield_now();
        let inserted = pool.insert(val(2));
        reader.join().unwrap();
        // Evicted, unless the insert saw the section open (it then evicts
        // nothing); a section that opened after that look may keep the
        // victim, and the insert fails.
        let evicted = pool.stats().evictions;
        assert_eq!(evicted == 1, !pool.contains(old));
        match inserted {
            Ok(new) => {
                assert_eq!(evicted, 1);
                assert_eq!(seen(&pool.read(), new), Some(2));
            }
            Err(full) => drop(full),
        }
        drop(pool);
        assert_eq!(
            handed.load(StdOrdering::Relaxed) as u64,
            evicted,
            "`on_evict` once per eviction"
        );
    });
}

/// A `take` races a section reading the same key: the take fails while
/// the section may read the value, or succeeds and moves the value out
/// only once no section that could see it is open. Fault
/// `tagpool_loom_take_skips_grace`: a take that trusts its look before the
/// removal.
#[test]
fn take_races_a_section() {
    check("take_races_a_section", 3, || {
        let pool = Arc::new(HandlePool::new(1));
        drop(pool.read());
        let key = pool.insert(val(1)).unwrap();
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || read_twice(&pool.read(), key, 1))
        };
        thread::yield_now();
        let taken = pool.take(key);
        // The value moved out is dropped here, maybe under the reader.
        match taken {
            Ok(value) => assert_eq!(value.get_ref().id, 1),
            Err(err) => assert_eq!(err, TakeError::BeingRead),
        }
        reader.join().unwrap();
        if pool.contains(key) {
            assert_eq!(pool.take(key).unwrap().get_ref().id, 1);
        }
        assert!(pool.is_empty());
    });
}

/// A section on a thread that holds the last-but-one `Arc` of the pool
/// races a remove and the owner's drop of its `Arc`: whichever drop is
/// last frees the pool and the removed value, once, after the section.
/// Fault `tagpool_loom_section_never_defers`.
#[test]
fn section_races_the_pools_drop() {
    check("section_races_the_pools_drop", 3, || {
        let pool = Arc::new(HandlePool::new(2));
        drop(pool.read());
        let key = pool.insert(val(1)).unwrap();
        let kept = pool.insert(val(2)).unwrap();
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                read_twice(&pool.read(), key, 1);
                assert_eq!(seen(&pool.read(), kept), Some(2));
            })
        };
        thread::yield_now();
        assert!(pool.remove(key));
        drop(pool);
        reader.join().unwrap();
    });
}

/// An insert into a full pool whose only free entry awaits a grace period
/// races another thread's grace period (`reclaim`), with no section open:
/// the insert succeeds, whether it runs the grace period itself, finds the
/// entry freed, or meets the other walk (it waits for its push). Fault
/// `tagpool_loom_insert_skips_walk`: an insert that gives up on an entry
/// another thread's grace period holds.
#[test]
fn insert_races_a_grace_period() {
    check("insert_races_a_grace_period", 3, || {
        let pool = Arc::new(HandlePool::new(1));
        drop(pool.read());
        let old = pool.insert(val(1)).unwrap();
        assert!(pool.remove(old));
        let reclaimer = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.reclaim())
        };
        thread::yield_now();
        let new = pool.insert(val(2)).expect("no section is open");
        let freed = reclaimer.join().unwrap();
        assert!(freed <= 1);
        assert_eq!(seen(&pool.read(), new), Some(2));
    });
}

/// A thread's removals go to its bag (plain stores) while another thread's
/// grace period takes the bag's entries: every removed entry is freed
/// exactly once, none is lost, and the pool takes exactly its capacity
/// again. Faults: `tagpool_loom_bag_ignores_claim` (an owner that pushes
/// into a bag a grace period is reading, and keeps its drained entries),
/// `tagpool_loom_bag_ignores_busy` (a grace period that reads a bag its
/// owner is pushing into).
#[test]
fn a_bag_races_a_grace_period() {
    check("a_bag_races_a_grace_period", 3, || {
        let pool = Arc::new(HandlePool::new(2));
        drop(pool.read());
        let a = pool.insert(val(1)).unwrap();
        let b = pool.insert(val(2)).unwrap();
        let remover = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                assert!(pool.remove(a));
                assert!(pool.remove(b));
            })
        };
        thread::yield_now();
        let freed = pool.reclaim();
        remover.join().unwrap();
        let rest = pool.reclaim();
        // A third grace period: a bag whose owner was busy at the second
        // one's look is left for the next (the owner is gone now).
        let last = pool.reclaim();
        assert_eq!(freed + rest + last, 2, "{freed} + {rest} + {last}");
        assert_eq!(pool.stats().awaiting_reuse, 0);
        let c = pool.insert(val(3)).unwrap();
        let d = pool.insert(val(4)).unwrap();
        assert_ne!(c.index(), d.index());
        assert!(pool.insert(val(5)).is_err(), "exactly the capacity");
        assert_eq!(seen(&pool.read(), c), Some(3));
        assert_eq!(seen(&pool.read(), d), Some(4));
    });
}

/// Nested sections on the reader's thread, the outer dropped first, race a
/// remove, a grace period and a re-insert: the inner section still
/// protects what it reads. Fault `tagpool_loom_section_exit_clears`: the
/// end of any section ends the thread's announcement.
#[test]
fn nested_sections_race_a_remove() {
    check("nested_sections_race_a_remove", 3, || {
        let pool = Arc::new(HandlePool::new(1));
        drop(pool.read());
        let key = pool.insert(val(1)).unwrap();
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let outer = pool.read();
                let inner = pool.read();
                let value = inner.get(key);
                drop(outer);
                read_twice(&inner, key, 1);
                if let Some(value) = value {
                    assert_eq!(id(value), 1, "the outer section's end freed it");
                }
            })
        };
        thread::yield_now();
        assert!(pool.remove(key));
        pool.reclaim();
        let _ = pool.insert(val(2));
        reader.join().unwrap();
    });
}

/// Two threads race the first section of a pool (the reader) and a remove
/// whose occupancy ends before the pool has had a section: either the
/// remove sees `used` and defers, or the reader's loads see the removal.
/// Faults: `tagpool_loom_section_never_defers`.
#[test]
fn first_section_races_a_remove() {
    check("first_section_races_a_remove", 3, || {
        let pool = Arc::new(HandlePool::new(1));
        let key = pool.insert(val(1)).unwrap();
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || read_twice(&pool.read(), key, 1))
        };
        thread::yield_now();
        assert!(pool.remove(key));
        let _ = pool.insert(val(2));
        reader.join().unwrap();
    });
}

/// A section forgotten on a thread that then exits (loom's records are
/// never taken over): entries removed before it began (in an earlier
/// epoch) are freed by a grace period, those removed after it stay (their
/// values in place) and cost nothing else; the pool's drop frees them.
/// Fault `tagpool_loom_grace_keeps_nothing`.
#[test]
fn a_forgotten_section_keeps_only_later_removals() {
    check("a_forgotten_section_keeps_only_later_removals", 2, || {
        let pool = Arc::new(HandlePool::new(3));
        drop(pool.read());
        let before = pool.insert(val(1)).unwrap();
        let after = pool.insert(val(2)).unwrap();
        assert!(pool.remove(before));
        {
            // A grace period while a section that began before the removal
            // is open: it keeps `before`, and bumps the epoch, so that the
            // forgotten section below begins in a later one.
            let _open = pool.read();
            assert_eq!(pool.reclaim(), 0);
        }
        let forgetter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || std::mem::forget(pool.read()))
        };
        forgetter.join().unwrap();
        assert!(pool.remove(after));
        assert_eq!(pool.reclaim(), 1, "the removal before the section");
        assert_eq!(pool.stats().awaiting_reuse, 1, "the one after it waits");
        // Two free entries: the pool still takes two values.
        let a = pool.insert(val(3)).unwrap();
        let b = pool.insert(val(4)).unwrap();
        assert_eq!(seen(&pool.read(), a), Some(3));
        assert_eq!(seen(&pool.read(), b), Some(4));
    });
}
