//! Shared pooled values (`OwnedPoolGuard::share`, `SharedPoolGuard`): an
//! `Arc`-like share of a pooled value that goes back to its pool, reset,
//! when the last share drops.

use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tagpool::{OwnedPoolGuard, Pool, SharedPoolGuard};

mod support;
use support::{watchdog, WAITING};

/// A value that counts its drops and resets.
#[derive(Debug)]
struct Frame {
    id: usize,
    body: Vec<u8>,
    drops: Arc<AtomicUsize>,
}

impl Drop for Frame {
    fn drop(&mut self) {
        self.drops.fetch_add(1, SeqCst);
    }
}

/// A pool of `capacity` frames, caches of `cache` (0: off), whose reset
/// clears the body and counts.
fn frames(capacity: usize, cache: usize) -> (Arc<Pool<Frame>>, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let drops = Arc::new(AtomicUsize::new(0));
    let resets = Arc::new(AtomicUsize::new(0));
    let made = AtomicUsize::new(0);
    let (d, r) = (Arc::clone(&drops), Arc::clone(&resets));
    let pool = Pool::builder(move || Frame {
        id: made.fetch_add(1, SeqCst),
        body: Vec::new(),
        drops: Arc::clone(&d),
    })
    .capacity(capacity)
    .thread_cache_size(cache)
    .reset(move |f: &mut Frame| {
        f.body.clear();
        r.fetch_add(1, SeqCst);
    })
    .build()
    .unwrap();
    (Arc::new(pool), drops, resets)
}

#[test]
fn the_last_share_returns_the_value_reset_on_the_thread_that_drops_it() {
    for cache in [0, 4] {
        let (pool, drops, resets) = frames(2, cache);
        let mut frame = pool.acquire_owned().unwrap();
        frame.body.extend_from_slice(b"hello");
        let id = frame.id;
        let shared = OwnedPoolGuard::share(frame);
        let (tx, rx) = mpsc::channel::<SharedPoolGuard<Frame>>();
        let reader = thread::spawn(move || {
            let mut lens = Vec::new();
            for share in rx {
                lens.push(share.body.len());
                assert_eq!(&share.body, b"hello");
            }
            lens
        });
        for _ in 0..3 {
            tx.send(shared.clone()).unwrap();
        }
        assert!(SharedPoolGuard::strong_count(&shared) >= 1);
        assert_eq!(pool.stats().in_use, 1, "one slot, however many shares");
        drop(tx);
        assert_eq!(reader.join().unwrap(), [5, 5, 5]);
        assert_eq!(resets.load(SeqCst), 0, "a share is still alive");
        assert_eq!(SharedPoolGuard::strong_count(&shared), 1);
        drop(shared);
        assert_eq!(resets.load(SeqCst), 1, "reset once, by the last share");
        assert_eq!(pool.stats().in_use, 0);
        let again = pool.try_acquire().unwrap();
        assert_eq!(
            (again.id, again.body.len()),
            (id, 0),
            "the same value, reset"
        );
        drop(again);
        drop(pool);
        assert_eq!(drops.load(SeqCst), 2);
    }
}

#[test]
fn try_unwrap_gives_the_guard_back_only_to_the_last_share() {
    let (pool, _, resets) = frames(1, 0);
    let a = OwnedPoolGuard::share(pool.acquire_owned().unwrap());
    let b = a.clone();
    let a = SharedPoolGuard::try_unwrap(a).expect_err("b is alive");
    assert_eq!(
        SharedPoolGuard::strong_count(&a),
        2,
        "a failed unwrap changes nothing"
    );
    drop(b);
    let mut guard = SharedPoolGuard::try_unwrap(a).unwrap_or_else(|_| panic!("the last share"));
    guard.body.push(1);
    assert_eq!(resets.load(SeqCst), 0, "not released");
    // The guard can be shared again.
    let again = OwnedPoolGuard::share(guard);
    assert_eq!(SharedPoolGuard::strong_count(&again), 1);
    assert_eq!(again.body, [1]);
    drop(again);
    assert_eq!((resets.load(SeqCst), pool.stats().in_use), (1, 0));
}

#[test]
fn shares_outlive_the_pool_handle_and_the_last_one_drops_every_value() {
    let (pool, drops, _) = frames(3, 2);
    let shared = OwnedPoolGuard::share(pool.acquire_owned().unwrap());
    let other = shared.clone();
    drop(pool);
    assert_eq!(drops.load(SeqCst), 0, "the shares keep the pool's state");
    let t = thread::spawn(move || drop(other));
    t.join().unwrap();
    assert_eq!(drops.load(SeqCst), 0);
    drop(shared);
    assert_eq!(drops.load(SeqCst), 3, "every value, once");
}

#[test]
fn a_waiter_gets_the_value_when_the_last_share_drops() {
    let _watchdog = watchdog("a waiter on a shared value", WAITING);
    let (pool, _, _) = frames(1, 0);
    let shared = OwnedPoolGuard::share(pool.acquire_owned().unwrap());
    let clone = shared.clone();
    let waiter = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || pool.acquire().map(|g| g.id).unwrap())
    };
    drop(shared);
    thread::sleep(Duration::from_millis(20));
    assert!(pool.try_acquire().is_err(), "one share is left");
    drop(clone);
    assert_eq!(waiter.join().unwrap(), 0);
}

#[test]
fn the_last_share_runs_the_discard_check() {
    let pool = Arc::new(
        Pool::builder(Vec::<u8>::new)
            .capacity(1)
            .discard_if(|v: &Vec<u8>| v.capacity() > 64)
            .build()
            .unwrap(),
    );
    let mut big = pool.acquire_owned().unwrap();
    big.reserve(1024);
    let shared = OwnedPoolGuard::share(big);
    drop(shared.clone());
    drop(shared);
    assert_eq!(pool.stats().discarded, 1, "too big to keep");
    assert!(pool.acquire().unwrap().capacity() <= 64, "refilled");
}

#[test]
fn a_reset_that_panics_in_the_last_drop_propagates_and_the_slot_comes_back() {
    let pool = Arc::new(
        Pool::builder(|| 0u32)
            .capacity(1)
            .reset(|v: &mut u32| assert!(*v != 7, "reset failure"))
            .build()
            .unwrap(),
    );
    let mut guard = pool.acquire_owned().unwrap();
    *guard = 7;
    let shared = OwnedPoolGuard::share(guard);
    let clone = shared.clone();
    drop(shared);
    let caught = panic::catch_unwind(AssertUnwindSafe(move || drop(clone)));
    assert!(caught.is_err(), "the reset's panic propagates");
    assert_eq!(
        *pool.try_acquire().unwrap(),
        0,
        "the slot came back, refilled"
    );
}

#[test]
fn a_shared_buffer_is_an_owner_for_bytes() {
    let pool = Arc::new(
        Pool::builder(|| Vec::<u8>::with_capacity(16))
            .capacity(1)
            .reset(Vec::clear)
            .build()
            .unwrap(),
    );
    let mut buf = pool.acquire_owned().unwrap();
    buf.extend_from_slice(b"frame");
    let shared = OwnedPoolGuard::share(buf);
    let bytes = Bytes::from_owner(shared.clone());
    assert_eq!(&bytes[..], b"frame");
    drop(shared);
    let slice = bytes.slice(1..3);
    drop(bytes);
    assert!(pool.try_acquire().is_err(), "a Bytes slice still shares it");
    assert_eq!(&slice[..], b"ra");
    drop(slice);
    assert!(pool.try_acquire().unwrap().is_empty(), "back, reset");
}

#[test]
fn shares_in_a_growing_pool_use_every_segment() {
    let pool = Arc::new(
        Pool::builder(|| 0usize)
            .capacity(64)
            .initial(2)
            .build()
            .unwrap(),
    );
    let shares: Vec<SharedPoolGuard<usize>> = (0..64)
        .map(|i| {
            let mut g = pool.acquire_owned().unwrap();
            *g = i;
            OwnedPoolGuard::share(g)
        })
        .collect();
    let clones: Vec<_> = shares.iter().map(Clone::clone).collect();
    assert!(shares
        .iter()
        .zip(&clones)
        .all(|(a, b)| SharedPoolGuard::ptr_eq(a, b)));
    assert!(shares.iter().enumerate().all(|(i, s)| **s == i));
    drop(shares);
    assert_eq!(pool.stats().in_use, 64);
    drop(clones);
    assert_eq!(pool.stats().in_use, 0);
    assert_eq!(pool.stats().available, 64);
}

/// Threads clone, read and drop shares of a few values while others
/// acquire and release the rest of the pool: every value goes back exactly
/// once per sharing, never while a share reads it (the reset poisons it).
#[test]
fn shares_race_clones_drops_and_other_acquires() {
    let _watchdog = watchdog("shares racing", WAITING);
    for cache in [0, 2] {
        let resets = Arc::new(AtomicUsize::new(0));
        let r = Arc::clone(&resets);
        let pool = Arc::new(
            Pool::builder(|| (AtomicBool::new(true), 0u64))
                .capacity(8)
                .thread_cache_size(cache)
                .reset(move |v: &mut (AtomicBool, u64)| {
                    v.0.store(false, SeqCst);
                    v.1 = 0;
                    r.fetch_add(1, SeqCst);
                })
                .build()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_millis(if cfg!(miri) { 20 } else { 300 });
        let sharings = AtomicUsize::new(0);
        thread::scope(|s| {
            for t in 0..4 {
                let (pool, sharings) = (&pool, &sharings);
                s.spawn(move || {
                    while Instant::now() < deadline {
                        let mut g = match pool.acquire_timeout(Duration::from_millis(50)) {
                            Ok(g) => g,
                            Err(_) => continue,
                        };
                        g.0.store(true, SeqCst);
                        g.1 = t;
                        drop(g);
                        let mut owned = pool.acquire_owned().unwrap();
                        owned.0.store(true, SeqCst);
                        owned.1 = 100 + t;
                        let shared = OwnedPoolGuard::share(owned);
                        sharings.fetch_add(1, SeqCst);
                        thread::scope(|inner| {
                            for _ in 0..2 {
                                let share = shared.clone();
                                inner.spawn(move || {
                                    for _ in 0..10 {
                                        let copy = share.clone();
                                        assert!(copy.0.load(SeqCst), "read after its reset");
                                        assert_eq!(copy.1, 100 + t);
                                    }
                                });
                            }
                        });
                        drop(shared);
                    }
                });
            }
        });
        let stats = pool.stats();
        assert_eq!((stats.in_use, stats.available), (0, 8), "cache {cache}");
        assert!(
            resets.load(SeqCst) >= 2 * sharings.load(SeqCst),
            "cache {cache}"
        );
    }
}

#[test]
fn shares_compare_hash_and_format_as_their_values() {
    use std::collections::HashSet;
    let pool = Arc::new(Pool::new(2, String::new));
    let mut a = pool.acquire_owned().unwrap();
    a.push('a');
    let a: SharedPoolGuard<String> = a.into();
    let mut b = pool.acquire_owned().unwrap();
    b.push('a');
    let b = OwnedPoolGuard::share(b);
    assert_eq!(a, b, "equal values");
    assert!(!SharedPoolGuard::ptr_eq(&a, &b), "different slots");
    assert_eq!(format!("{a} {b:?}"), "a \"a\"");
    let set: HashSet<SharedPoolGuard<String>> = [a.clone(), b].into_iter().collect();
    assert_eq!(set.len(), 1);
    assert!(
        set.contains(&String::from("a")),
        "looked up by the value (`Borrow`)"
    );
}
