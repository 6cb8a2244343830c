//! The owner's side of a revocation, driven by hand: a revoker's claim
//! and a move in progress, as a sweep on another thread leaves them in
//! this thread's magazine. An owner never waits for either.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use super::magazine::MOVING;
use super::{Cache, Magazine};
use crate::sync::Ordering;
use crate::Pool;

/// Runs `test` on a thread of its own and fails if it has not returned
/// within a minute: the old protocol made these owners wait for a revoker
/// that, here, never comes back.
fn within_a_minute(test: impl FnOnce() + Send + 'static) {
    let (done, finished) = mpsc::channel();
    let runner = thread::spawn(move || {
        test();
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(60)) {
        Ok(()) => runner.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The test panicked: report its panic.
            runner.join().unwrap();
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("the owner waited for a revoker that never lets go")
        }
    }
}

/// A pool of 8 with caches of 4, with slots parked in this thread's cache.
fn pool_with_parked_slots() -> Pool<u32> {
    let pool = Pool::builder(|| 0u32)
        .capacity(8)
        .thread_cache_size(4)
        .build()
        .unwrap();
    let held: Vec<_> = (0..3).map(|_| pool.try_acquire().unwrap()).collect();
    drop(held);
    pool
}

/// This thread's magazine of `pool` and how many slots it holds (some).
fn parked_magazine(pool: &Pool<u32>) -> (&Magazine, u32) {
    let cache: &Cache = pool.state().cache_for_tests();
    let mag = cache.magazine().expect("this thread's magazine");
    let parked = mag.len_hint();
    assert!(parked > 0, "slots are parked here");
    (mag, parked)
}

#[test]
fn an_owner_takes_a_revokers_claim_back_instead_of_waiting() {
    within_a_minute(|| {
        let pool = pool_with_parked_slots();
        let (mag, parked) = parked_magazine(&pool);
        // A revoker's claim, as its sweep leaves it before its heavy
        // barrier and its look at `state` (its local's address).
        let marker = 0u64;
        let claim = core::ptr::addr_of!(marker) as usize;
        mag.revoked.store(claim, Ordering::SeqCst);
        let got = pool
            .try_acquire()
            .expect("a slot from this thread's own stack");
        assert_eq!(
            mag.revoked.load(Ordering::SeqCst),
            0,
            "the owner took the claim back"
        );
        assert_eq!(mag.len_hint(), parked - 1, "taken from the stack");
        // The revoker's commit (claim to `MOVING`) now fails: it leaves
        // the stack alone, as if it had seen the owner busy.
        assert!(!Cache::commit(mag, claim));
        assert_eq!(mag.revoked.load(Ordering::SeqCst), 0);
        drop(got);
        assert_eq!(pool.stats().in_use, 0);
    });
}

#[test]
fn an_owner_leaves_a_stack_in_transit_alone_without_waiting() {
    within_a_minute(|| {
        let pool = pool_with_parked_slots();
        let (mag, parked) = parked_magazine(&pool);
        // A revoker committed to this stack and is moving it.
        mag.revoked.store(MOVING, Ordering::SeqCst);
        // The owner neither touches its stack nor waits: a try_acquire
        // takes a slot from the free list instead, a release goes there.
        let got = pool.try_acquire().expect("the free list has slots");
        assert_eq!(mag.revoked.load(Ordering::SeqCst), MOVING);
        assert_eq!(mag.len_hint(), parked, "the stack is left to the mover");
        drop(got);
        assert_eq!(mag.len_hint(), parked, "released to the free list");
        // No mover moves anything here: give the stack back to its owner
        // as it was, for the pool's drop to find its slots.
        mag.revoked.store(0, Ordering::SeqCst);
        assert_eq!(pool.stats().in_use, 0);
    });
}
