//! Unit tests of the handle pool's generations and retirement (they age
//! entries through private helpers).

use super::*;

const LAST: u64 = Handle::MAX_GENERATION;

#[test]
fn generations_start_at_1_and_end_at_2_pow_39_minus_1() {
    assert_eq!(LAST, (1 << 39) - 1);
    let pool = HandlePool::new(1);
    let first = pool.insert(1).unwrap();
    assert_eq!(first.generation(), 1);
    pool.remove(first);
    age(&pool.entries[0], 0, LAST - 1);
    let a = pool.insert(2).unwrap();
    assert_eq!((a.index(), a.generation()), (0, LAST - 1));
    pool.remove(a);
    let b = pool.insert(3).unwrap();
    assert_eq!(b.generation(), LAST);
    for stale in [first, a] {
        assert!(pool.get(stale).is_none(), "{stale:?}");
    }
    assert_eq!(pool.with(b, |v| *v), Some(3));
}

/// `insert_mut` and `remove_mut` keep the same bound: the last
/// generation's `remove_mut` retires the entry, and `insert_mut` never
/// hands it out again.
#[test]
fn remove_mut_retires_the_last_generation() {
    let mut pool = HandlePool::new(2);
    let first = pool.insert_mut(0).unwrap();
    age(&pool.entries[1], 1, LAST);
    let last = pool.insert_mut(1).unwrap();
    assert_eq!((last.index(), last.generation()), (1, LAST));
    assert_eq!(pool.remove_mut(last), Some(1));
    assert_eq!((pool.len(), pool.retired()), (1, 1));
    assert_eq!(pool.remove_mut(last), None, "stale");
    assert_eq!(pool.insert_mut(2).unwrap_err().into_inner(), 2);
    assert_eq!(pool.remove_mut(first), Some(0));
    let again = pool.insert_mut(3).unwrap();
    assert_eq!((again.index(), again.generation()), (0, 2));
}

/// The bound: after its `2^39 - 1`th occupancy an entry is never
/// handed out again, so no handle of it ever matches a later value (a
/// wrap to generation 1 would make the first handle match again).
#[test]
fn an_entry_retires_after_its_last_generation_instead_of_wrapping() {
    let pool = HandlePool::new(2);
    let first = pool.insert(0).unwrap();
    assert_eq!((first.index(), first.generation()), (0, 1));
    // Entry 1 is free and unused: age it to its last generation.
    age(&pool.entries[1], 1, LAST);
    let last = pool.insert(1).unwrap();
    assert_eq!((last.index(), last.generation()), (1, LAST));
    assert!(pool.remove(last));
    assert_eq!((pool.len(), pool.retired()), (1, 1));
    // Entry 1 is gone for good: the pool holds one value at most now.
    let mut live = first;
    for v in 2..10 {
        let err = pool.insert(v).unwrap_err();
        assert_eq!(err.into_inner(), v, "entry 0 is live, entry 1 retired");
        assert!(pool.remove(live));
        live = pool.insert(v).unwrap();
        assert_eq!((live.index(), live.generation()), (0, v as u64));
    }
    assert!(pool.remove(live));
    assert!(pool.get(last).is_none() && !pool.contains(last) && !pool.remove(last));
    assert!(pool.is_empty());
    assert_eq!(
        format!("{pool:?}"),
        "HandlePool { capacity: 2, len: 0, retired: 1, .. }"
    );
}

/// The last reader of a value removed while read frees the entry, and
/// retires it if that was its last generation.
#[test]
fn the_last_reader_of_a_removed_value_retires_its_entry() {
    let pool = HandlePool::new(1);
    age(&pool.entries[0], 0, LAST);
    let last = pool.insert(String::from("last")).unwrap();
    let read = pool.get(last).unwrap();
    assert!(pool.remove(last));
    assert_eq!(pool.retired(), 0, "the reader frees it");
    assert_eq!(&*read, "last");
    drop(read);
    assert_eq!((pool.retired(), pool.len()), (1, 0));
    assert!(pool.insert(String::from("next")).is_err());
}

/// An eviction that ends an entry's last generation evicts the value
/// (to `on_evict`), retires the entry and places the new value in
/// another entry, or fails when none is left.
#[test]
fn an_eviction_of_the_last_generation_retires_the_entry_and_looks_again() {
    let evicted = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = evicted.clone();
    let pool = HandlePool::builder()
        .capacity(2)
        .evict_oldest()
        .on_evict(move |h, v: u32| log.lock().unwrap().push((h, v)))
        .build()
        .unwrap();
    age(&pool.entries[0], 0, LAST);
    let old = pool.insert(1).unwrap(); // entry 0, the oldest
    let other = pool.insert(2).unwrap(); // entry 1
    assert_eq!((old.index(), old.generation()), (0, LAST));
    // Full: evicts `old`, whose entry retires; then evicts `other`.
    let new = pool.insert(3).unwrap();
    assert_eq!((new.index(), new.generation()), (1, 2));
    assert_eq!(*evicted.lock().unwrap(), [(old, 1), (other, 2)]);
    assert_eq!((pool.len(), pool.retired()), (1, 1));
    // With every entry retired, an insert fails.
    let single = HandlePool::builder()
        .capacity(1)
        .evict_oldest()
        .build()
        .unwrap();
    age(&single.entries[0], 0, LAST);
    let last = single.insert(1).unwrap();
    assert_eq!(single.insert(2).unwrap_err().into_inner(), 2);
    assert!(!single.contains(last));
    assert_eq!((single.len(), single.retired()), (0, 1));
}

/// A retired entry's index stays out of the free list even when
/// `on_evict` panics while the entry retires.
#[test]
fn a_panicking_on_evict_of_the_last_generation_still_retires() {
    let pool = HandlePool::builder()
        .capacity(1)
        .evict_oldest()
        .on_evict(|_, _: u32| panic!("on_evict"))
        .build()
        .unwrap();
    age(&pool.entries[0], 0, LAST);
    pool.insert(1).unwrap();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| pool.insert(2)));
    assert!(caught.is_err());
    assert_eq!((pool.len(), pool.retired()), (0, 1));
    assert!(pool.insert(3).is_err());
}

/// `take`, `clear` (and `retain`, `drain`, which share its step) and
/// a panicking `insert_with_key` end an entry's last generation as a
/// remove does: the entry retires.
#[test]
fn take_clear_and_a_panicking_insert_with_key_retire_the_last_generation() {
    let mut pool = HandlePool::new(3);
    for index in 0..3 {
        age(&pool.entries[index], index as u32, LAST);
    }
    let a = pool.insert(1).unwrap();
    assert_eq!(pool.take(a), Ok(1));
    assert_eq!(pool.retired(), 1);
    let b = pool.insert(2).unwrap();
    pool.clear();
    assert!(!pool.contains(b));
    assert_eq!(pool.retired(), 2);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.insert_with_key(|_| -> i32 { panic!("the closure panics") })
    }));
    assert!(caught.is_err());
    let stats = pool.stats();
    assert_eq!((stats.retired, stats.live, pool.len()), (3, 0, 0));
    assert!(pool.insert(3).is_err(), "every entry retired");
    assert_eq!(pool.iter_mut().len(), 0);
}
