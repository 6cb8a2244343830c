//! Reserved keys (`HandlePool::reserve`): taken from any thread with no
//! value, counted towards the capacity, filled or cancelled once (the
//! `Reservation` is consumed), never evicted, and neither cloned nor saved
//! as values.

use std::sync::Arc;
use std::thread;

use tagpool::{Handle, HandlePool, InsertAtError, InsertError, Reservation};

#[test]
fn a_reservation_holds_an_entry_and_reads_nothing() {
    let pool = HandlePool::new(2);
    let reservation = pool.reserve().unwrap();
    let key = reservation.key();
    assert!(pool.get(key).is_none() && !pool.contains(key) && pool.is_reserved(key));
    assert!(pool.read().get(key).is_none());
    let stats = pool.stats();
    assert_eq!((stats.live, stats.reserved), (0, 1));
    assert_eq!(pool.len(), 1, "an entry in use");
    let other = pool.insert(1).unwrap();
    assert!(pool.insert(2).is_err(), "full: one value, one reservation");
    assert!(pool.read().iter().all(|(k, _)| k == other), "walks skip it");
    assert_eq!(pool.insert_reserved(reservation, 3), Ok(key));
    assert_eq!(pool.with(key, |v| *v), Some(3));
    assert!(!pool.is_reserved(key));
    assert_eq!((pool.len(), pool.stats().reserved), (2, 0));
}

#[test]
fn a_cancelled_reservation_leaves_its_key_stale() {
    let pool = HandlePool::new(1);
    let reservation = pool.reserve().unwrap();
    let key = reservation.key();
    assert_eq!(format!("{reservation:?}"), format!("Reservation({key:?})"));
    assert!(pool.cancel_reservation(reservation));
    assert!(!pool.is_reserved(key) && pool.get(key).is_none());
    assert_eq!(pool.stats().reserved, 0);
    let next = pool.insert(2).unwrap();
    assert_eq!(next.index(), key.index());
    assert!(next.generation() > key.generation(), "the key went stale");
    assert!(pool.get(key).is_none());
    assert!(!pool.is_reserved(next), "a live value is no reservation");
}

#[test]
fn a_reservation_of_another_pool_changes_neither() {
    let (pool, other) = (HandlePool::<i32>::new(1), HandlePool::<i32>::new(1));
    let theirs = other.reserve().unwrap();
    let key = theirs.key();
    let mine = pool.reserve().unwrap();
    assert_eq!(mine.key(), key, "the same index and generation");
    assert_eq!(
        pool.insert_reserved(theirs, 1),
        Err(InsertError::NotReserved(1))
    );
    let theirs = other.reserve();
    assert!(theirs.is_none(), "the refused one stays reserved there");
    assert!(pool.is_reserved(key) && other.is_reserved(key));
    assert_eq!(pool.insert_reserved(mine, 2), Ok(key));
    assert_eq!(pool.with(key, |v| *v), Some(2));
    assert!(other.is_reserved(key) && other.get(key).is_none());
    // Cancelling in the wrong pool: refused as well.
    let pool = HandlePool::<u8>::new(1);
    let foreign = HandlePool::<u8>::new(1).reserve().unwrap();
    assert!(!pool.cancel_reservation(foreign));
    assert_eq!(pool.stats().reserved, 0);
    assert!(pool.insert(0).is_ok());
}

#[test]
fn a_dropped_reservation_keeps_its_entry() {
    let pool = HandlePool::new(1);
    let key = pool.reserve().map(|r| r.key()).unwrap();
    assert!(pool.is_reserved(key));
    assert_eq!((pool.len(), pool.stats().reserved), (1, 1));
    assert!(
        pool.insert(1).is_err(),
        "out of service until the pool drops"
    );
}

#[test]
fn reserve_many_is_all_or_nothing() {
    let pool = HandlePool::<u8>::new(3);
    assert!(pool.reserve_many(4).is_none());
    assert_eq!(pool.stats().reserved, 0, "the three taken went back");
    let reservations = pool.reserve_many(3).unwrap();
    assert!(pool.reserve().is_none());
    assert_eq!(pool.stats().reserved, 3);
    for reservation in reservations {
        assert!(pool.cancel_reservation(reservation));
    }
    assert_eq!(pool.reserve_many(3).map(|r| r.len()), Some(3));
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
    assert!(pool.get(a).is_none() && pool.is_reserved(reserved.key()));
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
    assert_eq!(pool.len(), 2);
}

#[test]
fn threads_reserve_and_fill_from_anywhere() {
    let pool = Arc::new(HandlePool::new(64));
    let reservations: Vec<Reservation> = (0..4)
        .map(|_| {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.reserve_many(16).unwrap())
        })
        .collect::<Vec<_>>()
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    let keys: Vec<Handle> = reservations.iter().map(Reservation::key).collect();
    let mut indices: Vec<_> = keys.iter().map(|k| k.index()).collect();
    indices.sort_unstable();
    indices.dedup();
    assert_eq!(indices.len(), 64, "every key its own entry");
    // Reserved on threads all exited now.
    let stats = pool.stats();
    assert_eq!((pool.len(), stats.live, stats.reserved), (64, 0, 64));
    // Filled on other threads than the ones that reserved them.
    let mut reservations = reservations.into_iter();
    thread::scope(|s| {
        for _ in 0..4 {
            let chunk: Vec<_> = reservations.by_ref().take(16).collect();
            let pool = &pool;
            s.spawn(move || {
                for reservation in chunk {
                    let index = reservation.key().index();
                    pool.insert_reserved(reservation, index).unwrap();
                }
            });
        }
    });
    for key in &keys {
        assert_eq!(pool.with(*key, |v| *v), Some(key.index()));
    }
    assert_eq!((pool.len(), pool.stats().reserved), (64, 0));
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
    let reservation = pool.reserve().unwrap();
    assert_eq!(reservation.key().generation(), Handle::MAX_GENERATION);
    assert!(pool.cancel_reservation(reservation));
    assert!(pool.reserve().is_none(), "retired");
    assert_eq!((pool.retired(), pool.stats().reserved), (1, 0));
}

#[test]
fn insert_at_refuses_a_reserved_entry_and_clone_drops_reservations() {
    let mut pool = HandlePool::new(2);
    let reservation = pool.reserve().unwrap();
    let key = reservation.key();
    assert!(matches!(
        pool.insert_at(key, 1),
        Err(InsertAtError::Occupied(1))
    ));
    // The `&mut` walks leave it alone.
    pool.clear();
    pool.retain(|_, _| false);
    assert!(pool.is_reserved(key));
    let clone = pool.clone();
    assert!(
        !clone.is_reserved(key),
        "a clone holds values, not reservations"
    );
    assert_eq!((clone.len(), clone.stats().reserved), (0, 0));
    let taken = clone.insert(2).unwrap();
    assert!(
        clone.get(key).is_none(),
        "the reserved key is stale in the clone"
    );
    assert_eq!(clone.with(taken, |v| *v), Some(2));
    assert_eq!(
        clone.insert_reserved(reservation, 3),
        Err(InsertError::NotReserved(3)),
        "the clone is another pool"
    );
    assert!(pool.is_reserved(key));
}

#[test]
fn the_mut_walks_size_values_only_and_counts_stop_once_none_is_left() {
    let mut pool = HandlePool::new(8);
    let values: Vec<_> = (0..3).map(|v| pool.insert(v).unwrap()).collect();
    let reservations = pool.reserve_many(2).unwrap();
    assert_eq!(pool.len(), 5, "three values, two reservations");
    assert_eq!(pool.iter_mut().len(), 3, "a walk's size counts values");
    assert_eq!(pool.values_mut().count(), 3);
    let first = reservations[0].key();
    for reservation in reservations {
        pool.insert_reserved(reservation, 10).unwrap();
    }
    assert_eq!(pool.iter_mut().len(), 5);
    assert_eq!(pool.stats().reserved, 0);
    // A reservation made after a count that found none is counted again.
    let again = pool.reserve().unwrap();
    let stats = pool.stats();
    assert_eq!((pool.len(), stats.live, stats.reserved), (6, 5, 1));
    assert_eq!(pool.drain().len(), 5, "the drain leaves the reservation");
    assert!(pool.is_reserved(again.key()));
    assert!(pool.cancel_reservation(again));
    assert!(pool.is_empty() && !pool.contains(first) && !pool.contains(values[0]));
}

/// A hand-written key whose `handle` does not invert `from_handle`: it
/// always names entry 0. The fill and the cancel act on the reserved entry
/// all the same (the reservation keeps the pool's own handle), so a value
/// the lying key happens to name stays, and no entry is freed twice.
#[test]
fn a_key_that_does_not_round_trip_fills_and_cancels_the_reserved_entry() {
    #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
    struct Liar(Handle);
    impl tagpool::Key for Liar {
        fn from_handle(handle: Handle) -> Self {
            Liar(handle)
        }
        fn handle(self) -> Handle {
            Handle::from_bits(1 << 24).unwrap() // entry 0, generation 1
        }
    }
    let pool = HandlePool::<String, Liar>::builder_with_key()
        .capacity(3)
        .thread_cache(false)
        .build()
        .unwrap();
    let first = pool.insert(String::from("kept")).unwrap();
    assert_eq!(first.0.index(), 0);
    let cancelled = pool.reserve().unwrap();
    let filled = pool.reserve().unwrap();
    assert_eq!((cancelled.key().0.index(), filled.key().0.index()), (1, 2));
    assert!(pool.cancel_reservation(cancelled));
    assert!(pool.insert_reserved(filled, String::from("filled")).is_ok());
    assert_eq!(pool.with(first, String::clone).as_deref(), Some("kept"));
    let values: Vec<String> = pool.read().iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(values, ["kept", "filled"]);
    // Entry 1 alone is free: one more insert fits, the next does not.
    assert!(pool.insert(String::from("third")).is_ok());
    assert!(pool.insert(String::from("fourth")).is_err());
    assert_eq!(pool.len(), 3);
    let mut values: Vec<String> = pool.read().iter().map(|(_, v)| v.clone()).collect();
    values.sort();
    assert_eq!(
        values,
        ["filled", "kept", "third"],
        "entry 0 kept its value"
    );
}
