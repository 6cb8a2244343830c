//! Per-frame scopes: values taken through a scope go back together, reset,
//! in one batch; panics in the factory or the reset lose nothing; waiters
//! of barging and fair pools are served by the batch.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use tagpool::{Pool, TryAcquireError};

mod support;
use support::{watchdog, WAITING};

#[test]
fn a_scope_returns_every_value_reset_when_dropped() {
    let resets = Arc::new(AtomicUsize::new(0));
    let counter = resets.clone();
    let pool = Pool::builder(Vec::<u32>::new)
        .capacity(8)
        .reset(move |v: &mut Vec<u32>| {
            v.clear();
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    for frame in 0..5u32 {
        let scope = pool.scope();
        let mut values = Vec::new();
        while let Ok(v) = scope.try_acquire() {
            assert!(v.is_empty(), "a value shows no past life");
            v.push(frame);
            values.push(v);
        }
        assert_eq!(scope.len(), 8);
        assert_eq!(pool.stats().in_use, 8);
        // Every lent value is distinct and still holds what was written.
        for v in &values {
            assert_eq!(**v, [frame]);
        }
        drop(values);
        assert_eq!(scope.try_acquire().unwrap_err(), TryAcquireError::Exhausted);
    }
    assert_eq!(resets.load(Ordering::SeqCst), 40);
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.filled), (0, 8));
    assert!(pool.scope().is_empty());
}

#[test]
fn scopes_and_guards_share_the_pool_exactly() {
    for caches in [0, 4] {
        let pool = Pool::builder(|| 0u8)
            .capacity(16)
            .thread_cache_size(caches)
            .build()
            .unwrap();
        let guard = pool.try_acquire().unwrap();
        {
            let scope = pool.scope();
            for _ in 0..15 {
                scope.try_acquire().unwrap();
            }
            assert!(pool.try_acquire().is_err());
        }
        drop(guard);
        let all: Vec<_> = (0..16).map(|_| pool.try_acquire().unwrap()).collect();
        assert_eq!(all.len(), 16);
    }
}

#[test]
fn a_panicking_reset_empties_its_slot_returns_the_rest_and_resumes() {
    let made = Arc::new(AtomicUsize::new(0));
    let counter = made.clone();
    let pool = Pool::builder(move || counter.fetch_add(1, Ordering::SeqCst))
        .capacity(4)
        .reset(|v: &mut usize| assert!(*v != 1, "reset refuses value 1"))
        .build()
        .unwrap();
    let panicked = panic::catch_unwind(AssertUnwindSafe(|| {
        let scope = pool.scope();
        for _ in 0..4 {
            scope.try_acquire().unwrap();
        }
    }));
    assert!(panicked.is_err());
    let stats = pool.stats();
    assert_eq!(
        (stats.in_use, stats.filled),
        (0, 3),
        "one slot went back empty"
    );
    let all: Vec<_> = (0..4).map(|_| pool.try_acquire().unwrap()).collect();
    assert_eq!(made.load(Ordering::SeqCst), 5, "the factory refilled it");
    drop(all);
}

#[test]
fn a_panicking_factory_inside_a_scope_gives_the_slot_back() {
    let calls = AtomicUsize::new(0);
    let pool = Pool::builder(move || {
        assert!(
            calls.fetch_add(1, Ordering::SeqCst) != 1,
            "second value fails"
        );
        0u8
    })
    .capacity(2)
    .lazy()
    .build()
    .unwrap();
    let scope = pool.scope();
    scope.try_acquire().unwrap();
    assert!(panic::catch_unwind(AssertUnwindSafe(|| scope.try_acquire().map(|_| ()))).is_err());
    assert_eq!(scope.len(), 1);
    *scope.try_acquire().unwrap() = 1;
    drop(scope);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn a_scope_batch_serves_waiters_of_barging_and_fair_pools() {
    let _watchdog = watchdog(
        "a_scope_batch_serves_waiters_of_barging_and_fair_pools",
        WAITING,
    );
    for fair in [false, true] {
        let builder = Pool::builder(|| 0u32).capacity(4).thread_cache(false);
        let pool = if fair { builder.fair() } else { builder }.build().unwrap();
        let scope = pool.scope();
        for _ in 0..4 {
            *scope.acquire().unwrap() += 1;
        }
        thread::scope(|s| {
            let waiters: Vec<_> = (0..3)
                .map(|_| s.spawn(|| pool.acquire().map(|g| *g)))
                .collect();
            while pool.stats().waiting_threads < 3 {
                thread::sleep(Duration::from_millis(1));
            }
            drop(scope);
            for w in waiters {
                assert_eq!(w.join().unwrap(), Ok(1));
            }
        });
        assert_eq!(pool.stats().in_use, 0);
    }
}

#[test]
fn a_scope_on_a_closed_pool_acquires_nothing_and_still_returns_its_values() {
    let pool = Pool::new(2, || 0u8);
    let scope = pool.scope();
    scope.try_acquire().unwrap();
    pool.close();
    assert_eq!(scope.try_acquire().unwrap_err(), TryAcquireError::Closed);
    assert!(scope.acquire().is_err());
    drop(scope);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn scopes_on_many_threads_keep_values_exclusive() {
    let _watchdog = watchdog("scopes_on_many_threads_keep_values_exclusive", WAITING);
    let frames = if cfg!(miri) { 10 } else { 5_000 };
    let pool = Pool::builder(|| 0u64)
        .capacity(32)
        .reset(|v: &mut u64| *v = 0)
        .build()
        .unwrap();
    thread::scope(|s| {
        for t in 1..=3u64 {
            let pool = &pool;
            s.spawn(move || {
                for frame in 0..frames {
                    let scope = pool.scope();
                    let mut mine = Vec::new();
                    for _ in 0..(frame % 12) {
                        match scope.try_acquire() {
                            Ok(v) => {
                                assert_eq!(*v, 0, "reset before reuse");
                                *v = t;
                                mine.push(v);
                            }
                            Err(_) => break,
                        }
                    }
                    thread::yield_now();
                    for v in &mine {
                        assert_eq!(**v, t, "a value lent to two scopes");
                    }
                }
            });
        }
    });
    assert_eq!(pool.stats().in_use, 0);
}
