//! An exhausted pool refuses at once (the shortcut of a failing pop:
//! nothing on the free list, nothing in any cache, nothing left to grow),
//! and still finds every slot that comes free afterwards, wherever it is
//! parked: the caches of live threads, a cache a sweep drained, the free
//! list.

use std::sync::{mpsc, Arc};
use std::thread;

use tagpool::{HandlePool, Pool, TryAcquireError};

/// Caches are on by default from 32 slots: a pool of 64 has them.
const CAPACITY: usize = 64;

#[test]
fn a_full_handle_pool_refuses_then_finds_a_value_removed_into_another_threads_cache() {
    let pool = HandlePool::new(CAPACITY);
    assert!(format!("{pool:?}").starts_with("HandlePool"));
    let mut handles: Vec<_> = (0..CAPACITY as u64)
        .map(|v| pool.insert(v).expect("room"))
        .collect();
    for (round, slot) in handles.iter_mut().enumerate().take(3) {
        assert_eq!(pool.insert(99).unwrap_err().into_inner(), 99, "full");
        let (removed_tx, removed_rx) = mpsc::channel();
        let (done_tx, done_rx) = mpsc::channel::<()>();
        let again = thread::scope(|s| {
            let pool = &pool;
            let handle = *slot;
            s.spawn(move || {
                // The freed index goes to this thread's cache, and the
                // thread stays alive (its cache is not flushed at exit).
                assert!(pool.remove(handle));
                removed_tx.send(()).unwrap();
                done_rx.recv().unwrap();
            });
            removed_rx.recv().unwrap();
            let again = pool.insert(round as u64);
            // Let the thread go before any assertion (a panic here would
            // leave it waiting, and the scope with it).
            done_tx.send(()).unwrap();
            again
        });
        let again = again.expect("the removed value's entry is free");
        assert_eq!(pool.with(again, |v| *v), Some(round as u64));
        assert!(pool.insert(100).is_err(), "full again");
        assert!(pool.remove(again));
        // The entry is free again, in the main thread's cache: one insert
        // takes it (and the pool is full again), the next is refused.
        *slot = pool.insert(7).expect("room for one");
        assert!(pool.insert(8).is_err());
    }
}

#[test]
fn an_exhausted_pool_refuses_then_finds_slots_parked_by_a_live_thread() {
    let pool = Arc::new(Pool::new(CAPACITY, || 0u64));
    let mut held: Vec<_> = (0..CAPACITY)
        .map(|_| pool.try_acquire_owned().expect("room"))
        .collect();
    assert!(matches!(
        pool.try_acquire_owned(),
        Err(TryAcquireError::Exhausted)
    ));
    // Another thread releases 3 into its own cache and stays alive.
    let given: Vec<_> = held.drain(..3).collect();
    let (parked_tx, parked_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel::<()>();
    let releaser = thread::spawn(move || {
        drop(given);
        parked_tx.send(()).unwrap();
        done_rx.recv().unwrap();
    });
    parked_rx.recv().unwrap();
    assert_eq!(pool.stats().cached, 3, "parked in the releaser's cache");
    for _ in 0..3 {
        held.push(pool.try_acquire_owned().expect("a slot parked in a cache"));
    }
    assert!(pool.try_acquire().is_err(), "every slot held");
    done_tx.send(()).unwrap();
    releaser.join().unwrap();
    // The releaser's drained cache reads empty; the slots released here
    // are found by the next acquires, and nothing more.
    held.truncate(CAPACITY - 2);
    let a = pool.try_acquire().expect("released here");
    let b = pool.try_acquire().expect("released here");
    assert!(pool.try_acquire().is_err());
    drop((a, b, held));
    assert_eq!(pool.stats().in_use, 0);
}
