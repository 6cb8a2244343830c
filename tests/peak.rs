//! `Stats::peak_in_use` where an idle operation of a fair pool hands a
//! slot to a waiter: the waiter records the slots held at its hand-off,
//! not counting the rest of the pass's chain, still out of the free list
//! for a moment but held by nobody.

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use tagpool::Pool;

mod support;
use support::{watchdog, WAITING};

/// A fair pool of two idle values; `retain_idle` takes both out of the
/// free list and, while its predicate runs, a thread queues for a slot.
/// The pass then gives both back, the first one to the waiter: the waiter
/// holds one slot, and no one else holds any, so the peak is 1. A hand-off
/// that counted the other slot of the chain (out of the list, not yet
/// given back) as held would read 2.
#[test]
fn a_fair_waiter_served_by_retain_idle_records_only_what_is_held() {
    let _watchdog = watchdog("retain_idle hands a slot to a fair waiter", WAITING);
    let pool = Pool::builder(|| 0u32).capacity(2).fair().build().unwrap();
    assert_eq!(pool.stats().peak_in_use, 0);
    let spawned = AtomicBool::new(false);
    thread::scope(|s| {
        let kept = pool.retain_idle(|_| {
            if !spawned.swap(true, Ordering::SeqCst) {
                s.spawn(|| {
                    let mut slot = pool.acquire().unwrap();
                    *slot += 1;
                });
                // Until the waiter has queued its ticket (the list is
                // empty: both slots are in this pass).
                while pool.stats().queued_waiters == 0 {
                    thread::yield_now();
                }
            }
            true
        });
        assert_eq!(kept, 0, "no value refused");
    });
    let stats = pool.stats();
    assert_eq!(stats.handoffs, 1, "the pass handed a slot to the waiter");
    assert_eq!(stats.peak_in_use, 1, "one slot held at a time: {stats:?}");
    assert_eq!((stats.in_use, stats.available), (0, 2));
}
