//! What a pool reports for operators: the time waiting acquires waited
//! (`Stats::wait_time`, `Stats::wait_histogram`) and, with hold tracking on
//! (`Builder::hold_limit`), the age of the oldest hold and the holds past
//! the limit.

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use tagpool::{OwnedPoolGuard, Pool, PoolGuard, Stats, WaitHistogram};

mod support;
use support::executor::{block_on, counting, poll_once};
use support::{watchdog, WAITING};

/// The bucket a wait of `d` lands in, from the bounds alone.
fn bucket_for(d: Duration) -> usize {
    (0..WaitHistogram::BUCKETS)
        .find(|&k| WaitHistogram::upper_bound(k).map_or(true, |b| d < b))
        .unwrap()
}

#[test]
fn the_buckets_are_powers_of_two_microseconds() {
    assert_eq!(
        WaitHistogram::upper_bound(0),
        Some(Duration::from_micros(1))
    );
    for k in 1..WaitHistogram::BUCKETS - 1 {
        assert_eq!(
            WaitHistogram::upper_bound(k),
            Some(Duration::from_micros(1 << k)),
            "bucket {k}"
        );
    }
    assert_eq!(WaitHistogram::upper_bound(WaitHistogram::BUCKETS - 1), None);
    assert_eq!(WaitHistogram::upper_bound(WaitHistogram::BUCKETS), None);
    assert_eq!(bucket_for(Duration::ZERO), 0);
    assert_eq!(bucket_for(Duration::from_nanos(999)), 0);
    assert_eq!(bucket_for(Duration::from_micros(1)), 1);
    assert_eq!(bucket_for(Duration::from_micros(1023)), 10);
    assert_eq!(bucket_for(Duration::from_micros(1024)), 11);
    assert_eq!(
        bucket_for(Duration::from_secs(3600)),
        WaitHistogram::BUCKETS - 1
    );
}

#[test]
fn an_acquire_that_finds_a_slot_records_no_wait() {
    let pool = Pool::new(2, || 0u8);
    for _ in 0..10 {
        drop(pool.acquire().unwrap());
        drop(pool.acquire_timeout(Duration::from_secs(1)).unwrap());
        drop(block_on(pool.acquire_async()).unwrap());
    }
    let stats = pool.stats();
    assert_eq!(stats.wait_time, Duration::ZERO);
    assert_eq!(stats.wait_histogram, WaitHistogram::default());
    assert_eq!(stats.wait_histogram.count(), 0);
}

/// Every kind of wait that ends is timed: a timeout, a blocking wait
/// served by a release, an async wait served, an async wait cancelled.
#[test]
fn every_wait_that_ends_counts_its_time_once() {
    let _watchdog = watchdog("timed waits", WAITING);
    for fair in [false, true] {
        let mut builder = Pool::builder(|| 0u8).capacity(1);
        if fair {
            builder = builder.fair();
        }
        let pool = Arc::new(builder.build().unwrap());
        let held = pool.acquire().unwrap();
        let start = Instant::now();
        assert!(pool.acquire_timeout(Duration::from_millis(20)).is_err());
        let timed_out = start.elapsed();
        let stats = pool.stats();
        assert_eq!((stats.waits, stats.timeouts), (1, 1));
        // The deadline counts from the call, the wait from a little after
        // (how much later depends on the machine): only bounded above.
        assert!(stats.wait_time > Duration::ZERO, "fair {fair}");
        assert!(
            stats.wait_time <= timed_out,
            "fair {fair}: timed inside the call"
        );
        assert_eq!(stats.wait_histogram.count(), 1);
        let k = stats
            .wait_histogram
            .counts()
            .iter()
            .position(|&n| n == 1)
            .unwrap();
        assert_eq!(
            k,
            bucket_for(stats.wait_time),
            "fair {fair}: its own bucket"
        );

        // A blocking wait, served by a release 30 ms later.
        let waiter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || drop(pool.acquire().unwrap()))
        };
        while pool.stats().waiting_threads == 0 {
            thread::yield_now();
        }
        thread::sleep(Duration::from_millis(30));
        drop(held);
        waiter.join().unwrap();
        let after = pool.stats();
        assert_eq!(after.wait_histogram.count(), 2, "fair {fair}");
        assert!(after.wait_time >= stats.wait_time + Duration::from_millis(30));

        // An async wait served, and one cancelled.
        let held = pool.acquire().unwrap();
        let (_, waker) = counting();
        let mut served = Box::pin(pool.acquire_async());
        assert!(poll_once(&mut served, &waker).is_pending());
        let mut cancelled = Box::pin(pool.acquire_async());
        assert!(poll_once(&mut cancelled, &waker).is_pending());
        thread::sleep(Duration::from_millis(5));
        drop(cancelled);
        drop(held);
        let guard = match poll_once(&mut served, &waker) {
            std::task::Poll::Ready(guard) => guard.unwrap(),
            std::task::Poll::Pending => panic!("fair {fair}: the release served it"),
        };
        drop(guard);
        let last: Stats = pool.stats();
        assert_eq!(
            (last.async_waits, last.cancelled_waits),
            (2, 1),
            "fair {fair}"
        );
        assert_eq!(last.wait_histogram.count(), 4, "fair {fair}");
        assert!(last.wait_time >= after.wait_time + Duration::from_millis(10));
    }
}

#[test]
fn hold_tracking_is_off_by_default() {
    let pool = Pool::new(2, || 0u8);
    let held = pool.acquire().unwrap();
    thread::sleep(Duration::from_millis(2));
    let stats = pool.stats();
    assert_eq!((stats.oldest_hold, stats.holds_over_limit), (None, 0));
    drop(held);
}

/// Every way of holding a slot is tracked, and every way of giving it back
/// ends the hold: guards (borrowed, owned, shared), scope values, detach,
/// a value served by the factory or idle. The limit is 1 ns and every count
/// comes after a sleep, so that which holds are over it never depends on
/// the machine's speed.
#[test]
fn hold_tracking_follows_every_hold() {
    let settle = || thread::sleep(Duration::from_millis(2));
    for cache in [0, 4] {
        let pool = Arc::new(
            Pool::builder(|| 0u32)
                .capacity(8)
                .lazy()
                .thread_cache_size(cache)
                .hold_limit(Duration::from_nanos(1))
                .build()
                .unwrap(),
        );
        assert_eq!(pool.stats().oldest_hold, None);
        let a = pool.acquire().unwrap();
        let b = pool.acquire_owned().unwrap();
        thread::sleep(Duration::from_millis(15));
        let c = OwnedPoolGuard::share(pool.acquire_owned().unwrap());
        settle();
        let stats = pool.stats();
        assert!(
            stats.oldest_hold.unwrap() >= Duration::from_millis(15),
            "cache {cache}"
        );
        assert_eq!(stats.holds_over_limit, 3, "cache {cache}: a, b and c");
        drop(a);
        drop(b);
        assert_eq!(pool.stats().holds_over_limit, 1, "cache {cache}: c");
        // A share keeps the hold of its value until its last clone drops.
        let c2 = c.clone();
        drop(c);
        assert_eq!(pool.stats().holds_over_limit, 1, "cache {cache}: the share");
        drop(c2);
        assert_eq!(pool.stats().oldest_hold, None, "cache {cache}");
        // Scope values and detach.
        {
            let scope = pool.scope();
            let _v = scope.acquire().unwrap();
            settle();
            assert_eq!(
                pool.stats().holds_over_limit,
                1,
                "cache {cache}: the scope's"
            );
        }
        assert_eq!(
            pool.stats().oldest_hold,
            None,
            "cache {cache}: the scope gave it back"
        );
        let d = pool.acquire().unwrap();
        PoolGuard::detach(d);
        assert_eq!(pool.stats().oldest_hold, None, "cache {cache}: detached");
        // A leak stays.
        std::mem::forget(pool.acquire().unwrap());
        thread::sleep(Duration::from_millis(12));
        let stats = pool.stats();
        assert_eq!(stats.holds_over_limit, 1, "cache {cache}: the leaked guard");
        assert!(stats.oldest_hold.unwrap() >= Duration::from_millis(12));
    }
    // With a limit no test outlives, nothing is ever over it.
    let pool = Pool::builder(|| 0u32)
        .capacity(2)
        .hold_limit(Duration::from_secs(3600))
        .build()
        .unwrap();
    let held = pool.acquire().unwrap();
    settle();
    let stats = pool.stats();
    assert!(stats.oldest_hold.unwrap() >= Duration::from_millis(2));
    assert_eq!(stats.holds_over_limit, 0);
    drop(held);
}

/// Hold tracking races acquires and releases on several threads: at the
/// end nothing is held, whatever interleaving happened.
#[test]
fn hold_tracking_ends_at_zero_after_concurrent_use() {
    let _watchdog = watchdog("hold tracking, concurrent", WAITING);
    let pool = Arc::new(
        Pool::builder(|| 0u64)
            .capacity(16)
            .thread_cache_size(2)
            .hold_limit(Duration::from_secs(60))
            .build()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_millis(if cfg!(miri) { 10 } else { 200 });
    thread::scope(|s| {
        for _ in 0..4 {
            let pool = Arc::clone(&pool);
            s.spawn(move || {
                while Instant::now() < deadline {
                    let a = pool.acquire().unwrap();
                    let b = pool.try_acquire_owned().ok();
                    let stats = pool.stats();
                    assert!(stats.oldest_hold.is_some(), "a is held");
                    assert_eq!(stats.holds_over_limit, 0);
                    drop((a, b));
                }
            });
        }
    });
    let stats = pool.stats();
    assert_eq!((stats.oldest_hold, stats.in_use), (None, 0));
}
