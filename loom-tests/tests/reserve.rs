//! Models of reserved keys (`HandlePool::reserve`): a fill racing a stale
//! lookup (a counted read and a read section), a reservation racing an
//! evicting insert, and two fills racing for one key.
//!
//! Value cells are loom cells: a read of a value while its fill writes it,
//! or an eviction that takes a value never written, is reported. `Track`
//! reports a value leaked.

#![cfg(loom)]

use std::sync::Arc;

use loom::alloc::Track;
use loom::thread;
use tagpool::HandlePool;
use tagpool_loom_tests::check;

/// A reserved key is filled on one thread while another reads it, counted
/// and through a section: it reads nothing, or the value, never a value
/// being written. Fault `tagpool_loom_reserve_as_occupied`: a reservation
/// marked as a live value.
#[test]
fn fill_races_a_stale_lookup() {
    check("fill_races_a_stale_lookup", 3, || {
        let pool = Arc::new(
            HandlePool::<Track<usize>>::builder()
                .capacity(1)
                .build()
                .unwrap(),
        );
        let key = pool.reserve().unwrap();
        let reader = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let counted = pool.get(key).map(|v| *v.get_ref());
                let section = pool.read().get(key).map(|v| *v.get_ref());
                (counted, section)
            })
        };
        pool.insert_reserved(key, Track::new(5usize)).unwrap();
        let (counted, section) = reader.join().unwrap();
        for seen in [counted, section] {
            assert!(seen.is_none() || seen == Some(5), "read {seen:?}");
        }
        assert_eq!(pool.get(key).map(|v| *v.get_ref()), Some(5));
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
            (Some(key), inserted) => {
                // The reservation holds the only entry: the insert was
                // refused, or came first and lost its value to it.
                assert!(pool.is_reserved(key));
                if let Some(other) = inserted {
                    assert!(pool.get(other).is_none());
                }
                pool.insert_reserved(key, Track::new(3)).unwrap();
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

/// Two threads fill one reserved key: exactly one succeeds, and its value
/// is the key's. Fault `tagpool_loom_fill_reserved_store`: a fill that
/// takes the entry by a plain store (both write the value).
#[test]
fn fills_race_for_one_key() {
    check("fills_race_for_one_key", 3, || {
        let pool = Arc::new(
            HandlePool::<Track<usize>>::builder()
                .capacity(1)
                .build()
                .unwrap(),
        );
        let key = pool.reserve().unwrap();
        let other = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.insert_reserved(key, Track::new(1usize)).is_ok())
        };
        let mine = pool.insert_reserved(key, Track::new(2usize)).is_ok();
        let theirs = other.join().unwrap();
        assert!(
            mine ^ theirs,
            "fills that succeeded: {}",
            mine as u8 + theirs as u8
        );
        let value = pool.get(key).map(|v| *v.get_ref());
        assert_eq!(value, Some(if mine { 2 } else { 1 }));
        assert!(!pool.cancel_reservation(key), "filled");
    });
}
