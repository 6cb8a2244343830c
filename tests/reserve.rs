//! Reserved keys (`HandlePool::reserve`): taken from any thread with no
//! value, counted towards the capacity, filled or cancelled once, never
//! evicted, and neither cloned nor saved as values.

use std::sync::Arc;
use std::thread;

use tagpool::{Handle, HandlePool, InsertAtError, InsertError};

#[test]
fn a_reservation_holds_an_entry_and_reads_nothing() {
    let pool = HandlePool::new(2);
    let key = pool.reserve().unwrap();
    assert!(pool.get(key).is_none() && !pool.contains(key) && pool.is_reserved(key));
    assert!(pool.read().get(key).is_none());
    let stats = pool.stats();
    assert_eq!((stats.live, stats.reserved), (0, 1));
    assert_eq!(pool.len(), 0);
    let other = pool.insert(1).unwrap();
    assert!(pool.insert(2).is_err(), "full: one value, one reservation");
    assert!(pool.read().iter().all(|(k, _)| k == other), "walks skip it");
    pool.insert_reserved(key, 3).unwrap();
    assert_eq!(pool.with(key, |v| *v), Some(3));
    assert_eq!((pool.len(), pool.stats().reserved), (2, 0));
}

#[test]
fn a_reservation_is_filled_or_cancelled_once() {
    let pool = HandlePool::new(1);
    let key = pool.reserve().unwrap();
    assert!(pool.cancel_reservation(key));
    assert_eq!(
        pool.insert_reserved(key, 1),
        Err(InsertError::NotReserved(1))
    );
    assert!(!pool.cancel_reservation(key));
    let next = pool.insert(2).unwrap();
    assert_eq!(next.index(), key.index());
    assert!(next.generation() > key.generation(), "the key went stale");
    assert!(pool.get(key).is_none());
    // A key of another generation names no reservation.
    let stale = pool.reserve();
    assert!(stale.is_none(), "full");
    let forged = Handle::from_bits(next.to_bits()).unwrap();
    assert!(
        !pool.cancel_reservation(forged),
        "a live value is no reservation"
    );
}

#[test]
fn reserve_many_is_all_or_nothing() {
    let pool = HandlePool::<u8>::new(3);
    assert!(pool.reserve_many(4).is_none());
    assert_eq!(pool.stats().reserved, 0, "the three taken went back");
    let keys = pool.reserve_many(3).unwrap();
    assert!(pool.reserve().is_none());
    for key in &keys {
        assert!(pool.cancel_reservation(*key));
    }
    assert_eq!(pool.reserve_many(3).map(|k| k.len()), Some(3));
}

#[test]
fn an_evicting_pool_never_evicts_a_reservation() {
    let pool = HandlePool::builder()
        .capacity(2)
        .evict_oldest()
        .build()
        .unwrap();
    let reserved = pool.reserve().unwrap();
    let a = pool.insert(1).unwrap();
    let b = pool.insert(2).unwrap(); // evicts `a`, not the reservation
    assert!(pool.get(a).is_none() && pool.is_reserved(reserved));
    // A reservation evicts a value when the pool is full, as an insert.
    let second = pool.reserve().unwrap();
    assert!(pool.get(b).is_none());
    assert!(
        pool.reserve().is_none(),
        "only reservations left: nothing to evict"
    );
    assert!(pool.insert(3).is_err());
    pool.insert_reserved(second, 4).unwrap();
    pool.insert_reserved(reserved, 5).unwrap();
}

#[test]
fn threads_reserve_and_fill_from_anywhere() {
    let pool = Arc::new(HandlePool::new(64));
    let keys: Vec<_> = (0..4)
        .map(|_| {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.reserve_many(16).unwrap())
        })
        .collect::<Vec<_>>()
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let mut indices: Vec<_> = keys.iter().map(|k| k.index()).collect();
    indices.sort_unstable();
    indices.dedup();
    assert_eq!(indices.len(), 64, "every key its own entry");
    // Filled on other threads than the ones that reserved them.
    thread::scope(|s| {
        for chunk in keys.chunks(16) {
            let pool = &pool;
            s.spawn(move || {
                for key in chunk {
                    pool.insert_reserved(*key, key.index()).unwrap();
                }
            });
        }
    });
    for key in &keys {
        assert_eq!(pool.with(*key, |v| *v), Some(key.index()));
    }
    assert_eq!(pool.len(), 64);
}

#[test]
fn a_reservation_at_the_last_generation_retires_when_cancelled() {
    let pool = HandlePool::new(1);
    // Spend the entry's generations quickly through `&mut`.
    let mut pool = pool;
    let mut last = pool.insert(0u8).unwrap();
    while last.generation() < Handle::MAX_GENERATION - 1 {
        // `insert_at` skips generations: jump near the end.
        pool.remove_mut(last);
        let target =
            Handle::from_bits((Handle::MAX_GENERATION - 1) << 24 | last.index() as u64).unwrap();
        pool.insert_at(target, 0).unwrap();
        last = target;
    }
    pool.remove_mut(last);
    let key = pool.reserve().unwrap();
    assert_eq!(key.generation(), Handle::MAX_GENERATION);
    assert!(pool.cancel_reservation(key));
    assert!(pool.reserve().is_none(), "retired");
    assert_eq!(pool.retired(), 1);
}

#[test]
fn insert_at_refuses_a_reserved_entry_and_clone_drops_reservations() {
    let mut pool = HandlePool::new(2);
    let key = pool.reserve().unwrap();
    assert!(matches!(
        pool.insert_at(key, 1),
        Err(InsertAtError::Occupied(1))
    ));
    let clone = pool.clone();
    assert!(
        !clone.is_reserved(key),
        "a clone holds values, not reservations"
    );
    let taken = clone.insert(2).unwrap();
    assert!(
        clone.get(key).is_none(),
        "the reserved key is stale in the clone"
    );
    assert_eq!(clone.with(taken, |v| *v), Some(2));
    assert!(pool.is_reserved(key));
}
