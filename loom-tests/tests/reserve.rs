//! Models of reserved keys (`HandlePool::reserve`): a fill racing a stale
//! lookup (a counted read and a read section), a reservation racing an
//! evicting insert, a fill racing a reservation of another pool, and a
//! clone after a reservation that skipped the high mark.
//!
//! Value cells are loom cells: a read of a value while its fill writes it,
//! or an eviction that takes a value never written, is reported. `Track`
//! reports a value leaked.

#![cfg(loom)]

use std::sync::Arc;

use loom::alloc::Track;
use loom::thread;
use tagpool::{HandlePool, InsertError};
use tagpool_loom_tests::{check, uncached_handles};

/// A key reserved on one thread is filled on another (the reservation
/// moves there) while the first reads it, counted and through a section:
/// it reads nothing, or the value, never a value being written. Fault
/// `tagpool_loom_reserve_as_occupied`: a reservation marked as a live
/// value.
#[test]
fn fill_races_a_stale_lookup() {
    check("fill_races_a_stale_lookup", 3, || {
        let pool = Arc::new(
            HandlePool::<Track<usize>>::builder()
                .capacity(1)
                .build()
                .unwrap(),
        );
        let reservation = pool.reserve().unwrap();
        let key = reservation.key();
        let filler = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                pool.insert_reserved(reservation, Track::new(5usize))
                    .is_ok()
            })
        };
        let counted = pool.get(key).map(|v| *v.get_ref());
        let section = pool.read().get(key).map(|v| *v.get_ref());
        assert!(filler.join().unwrap());
        for seen in [counted, section] {
            assert!(seen.is_none() || seen == Some(5), "read {seen:?}");
        }
        assert_eq!(pool.get(key).map(|v| *v.get_ref()), Some(5));
        assert_eq!(pool.stats().reserved, 0);
        assert!(pool.insert(Track::new(6)).is_err(), "one entry, filled");
    });
}

/// A pool of one entry, full, that evicts the oldest value: a reservation
/// and an insert race to evict it. The reservation is never evicted (it is
/// no value): whichever comes second either evicts the first's value (an
/// insert's) or is refused (a reservation holds the entry). Fault
/// `tagpool_loom_reserve_as_occupied`: the insert's eviction takes the
/// reservation's entry and the value it never had.
#[test]
fn reserve_races_an_eviction() {
    check("reserve_races_an_eviction", 3, || {
        let pool = Arc::new(
            HandlePool::<Track<usize>>::builder()
                .capacity(1)
                .evict_oldest()
                .build()
                .unwrap(),
        );
        let first = pool.insert(Track::new(1usize)).unwrap();
        let inserter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.insert(Track::new(2usize)).ok())
        };
        let reserved = pool.reserve();
        let inserted = inserter.join().unwrap();
        assert!(pool.get(first).is_none(), "evicted by one of them");
        match (reserved, inserted) {
            (Some(reservation), inserted) => {
                // The reservation holds the only entry: the insert was
                // refused, or came first and lost its value to it.
                let key = reservation.key();
                assert!(pool.is_reserved(key));
                if let Some(other) = inserted {
                    assert!(pool.get(other).is_none());
                }
                pool.insert_reserved(reservation, Track::new(3)).unwrap();
                assert_eq!(pool.get(key).map(|v| *v.get_ref()), Some(3));
            }
            (None, Some(other)) => {
                // Evicting needs a value nobody reads: the reservation
                // found the insert's value being published, or none.
                assert_eq!(pool.get(other).map(|v| *v.get_ref()), Some(2));
            }
            (None, None) => panic!("neither the reservation nor the insert"),
        }
    });
}

/// Two pools of one entry, each with a reservation of it: one thread
/// fills its own pool's, another hands the other pool's reservation to the
/// same pool. That fill is refused and changes nothing; the pool holds the
/// right value. Fault `tagpool_loom_fill_any_pool`: a fill that takes any
/// pool's reservation (its index is the same), so two fills write one
/// entry.
#[test]
fn fill_races_a_reservation_of_another_pool() {
    check("fill_races_a_reservation_of_another_pool", 3, || {
        let pool = || {
            Arc::new(
                HandlePool::<Track<usize>>::builder()
                    .capacity(1)
                    .build()
                    .unwrap(),
            )
        };
        let (mine, other) = (pool(), pool());
        let own = mine.reserve().unwrap();
        let foreign = other.reserve().unwrap();
        let key = own.key();
        let stranger = {
            let mine = Arc::clone(&mine);
            thread::spawn(
                move || match mine.insert_reserved(foreign, Track::new(1usize)) {
                    Err(InsertError::NotReserved(_)) => true,
                    _ => false,
                },
            )
        };
        assert_eq!(
            mine.insert_reserved(own, Track::new(2usize)).ok(),
            Some(key)
        );
        assert!(stranger.join().unwrap(), "another pool's reservation");
        assert_eq!(mine.get(key).map(|v| *v.get_ref()), Some(2));
        assert_eq!((mine.len(), mine.stats().reserved), (1, 0));
    });
}

/// A reservation whose index is under the reservations' bound skips the
/// raise of the walks' high mark: another reservation, of a higher index,
/// raised both. A clone made after it, on the same thread, must still see
/// its entry, so the reserved key stays stale in the clone (no insert into
/// the clone returns it). Fault `tagpool_loom_reserve_bound_relaxed`: the
/// bound read Relaxed, which does not carry the other thread's raise of
/// the high mark: the clone walks too few entries and gives the reserved
/// key to a value.
#[test]
fn a_clone_sees_a_reservation_that_skipped_the_high_mark() {
    check(
        "a_clone_sees_a_reservation_that_skipped_the_high_mark",
        3,
        || {
            let pool = Arc::new(uncached_handles(2));
            let other = {
                let pool = Arc::clone(&pool);
                thread::spawn(move || pool.reserve().unwrap())
            };
            let mine = pool.reserve().unwrap();
            let clone = (*pool).clone();
            for value in 0..2 {
                if let Ok(key) = clone.insert(value) {
                    assert_ne!(key, mine.key(), "the clone gave a reserved key a value");
                }
            }
            let theirs = other.join().unwrap();
            assert!(pool.cancel_reservation(mine) && pool.cancel_reservation(theirs));
            assert!(pool.is_empty());
        },
    );
}
