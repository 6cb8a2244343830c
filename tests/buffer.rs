//! `BufferPool`: buffers by power-of-two size class, each class an exact
//! pool of its own.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tagpool::{
    AcquireError, AcquireTimeoutError, BufferGuard, BufferPool, BuildError, OwnedBufferGuard,
    TryAcquireError,
};

mod support;
use support::executor::block_on;
use support::{watchdog, WAITING};

fn pool(min: usize, max: usize, capacity: usize) -> BufferPool<u8> {
    BufferPool::builder()
        .sizes(min, max)
        .capacity(capacity)
        .build()
        .unwrap()
}

#[test]
fn requests_go_to_the_smallest_class_that_holds_them() {
    let pool = pool(64, 4096, 2);
    let sizes: Vec<usize> = pool.stats().classes.iter().map(|c| c.size).collect();
    assert_eq!(sizes, [64, 128, 256, 512, 1024, 2048, 4096]);
    for (len, class) in [
        (0, 64),
        (1, 64),
        (64, 64),
        (65, 128),
        (4095, 4096),
        (4096, 4096),
    ] {
        let buf = pool.try_acquire(len).unwrap();
        assert_eq!(buf.class_size(), Some(class), "len {len}");
        assert!(
            buf.is_empty() && buf.capacity() >= len.max(class),
            "len {len}"
        );
        assert_eq!(pool.class_size_for(len), Some(class));
    }
    let stats = pool.stats();
    assert_eq!(stats.unpooled, 0);
    assert!(
        stats.classes.iter().all(|c| c.stats.in_use == 0),
        "all back"
    );
}

#[test]
fn a_request_above_the_largest_class_is_served_unpooled_and_counted() {
    let owned = Arc::new(pool(64, 256, 1));
    let big = owned.acquire(257).unwrap();
    assert_eq!(big.class_size(), None);
    assert!(big.capacity() >= 257);
    let big2 = owned.try_acquire_owned(10_000).unwrap();
    assert_eq!(big2.class_size(), None);
    assert_eq!(owned.stats().unpooled, 2);
    assert!(
        owned.stats().classes.iter().all(|c| c.stats.filled == 0),
        "nothing pooled"
    );
    drop((big, big2));
    assert!(owned.stats().classes.iter().all(|c| c.stats.available == 1));
}

/// A buffer that grew out of its class, or shrank below it, is dropped on
/// release, never kept: the class refills with a buffer of its size.
#[test]
fn a_buffer_whose_capacity_left_its_class_is_dropped_on_release() {
    let pool = pool(64, 1024, 1);
    let mut buf = pool.acquire(64).unwrap();
    buf.extend_from_slice(&[1u8; 5000]);
    assert!(buf.capacity() >= 5000);
    drop(buf);
    let class = &pool.stats().classes[0];
    assert_eq!(
        (class.size, class.stats.discarded, class.stats.filled),
        (64, 1, 0)
    );
    let again = pool.acquire(64).unwrap();
    assert!(
        again.capacity() >= 64 && again.capacity() < 128,
        "a fresh 64"
    );
    drop(again);
    let mut shrunk = pool.acquire(200).unwrap();
    shrunk.shrink_to_fit();
    assert!(shrunk.capacity() < 256);
    drop(shrunk);
    assert_eq!(pool.stats().classes[2].stats.discarded, 1);
    // A buffer that stays in its class goes back, cleared.
    let mut kept = pool.acquire(100).unwrap();
    kept.extend_from_slice(&[7u8; 100]);
    drop(kept);
    let reused = pool.acquire(100).unwrap();
    assert!(reused.is_empty() && reused.capacity() == 128);
    assert_eq!(pool.stats().classes[1].stats.discarded, 0);
}

#[test]
fn fallback_lends_a_larger_class_only_when_asked() {
    let strict = pool(64, 256, 1);
    let held = strict.try_acquire(10).unwrap();
    assert_eq!(
        strict.try_acquire(10).unwrap_err(),
        TryAcquireError::Exhausted
    );
    drop(held);
    let lenient = BufferPool::<u8>::builder()
        .sizes(64, 256)
        .capacity(1)
        .fallback(true)
        .build()
        .unwrap();
    let a = lenient.try_acquire(10).unwrap();
    let b = lenient.try_acquire(10).unwrap();
    let c = lenient.try_acquire(10).unwrap();
    assert_eq!(
        [a.class_size(), b.class_size(), c.class_size()],
        [Some(64), Some(128), Some(256)]
    );
    assert_eq!(
        lenient.try_acquire(10).unwrap_err(),
        TryAcquireError::Exhausted
    );
    assert_eq!(lenient.stats().fallbacks, 2);
    // A fallback buffer goes back to its own (larger) class.
    drop(b);
    assert_eq!(lenient.stats().classes[1].stats.available, 1);
}

#[test]
fn waiting_acquires_wait_for_their_own_class() {
    let _watchdog = watchdog("buffer waits", WAITING);
    let pool = Arc::new(pool(64, 128, 1));
    let held = pool.acquire(100).unwrap();
    assert_eq!(
        pool.acquire_timeout(100, Duration::from_millis(5))
            .unwrap_err(),
        AcquireTimeoutError::Timeout
    );
    assert!(
        pool.acquire_timeout(10, Duration::from_millis(5)).is_ok(),
        "another class"
    );
    let waiter = {
        let pool = Arc::clone(&pool);
        thread::spawn(move || pool.acquire_owned(100).map(|b| b.class_size()))
    };
    while pool.stats().classes[1].stats.waiting_threads == 0 {
        thread::yield_now();
    }
    drop(held);
    assert_eq!(waiter.join().unwrap(), Ok(Some(128)));
    // Async: borrowed and owned.
    let held = pool.acquire(100).unwrap();
    let released = AtomicBool::new(false);
    thread::scope(|s| {
        s.spawn(|| {
            thread::sleep(Duration::from_millis(10));
            released.store(true, SeqCst);
            drop(held);
        });
        let buf = block_on(pool.acquire_async(100)).unwrap();
        assert!(released.load(SeqCst));
        assert_eq!(buf.class_size(), Some(128));
    });
    let owned = block_on(pool.acquire_owned_async(100)).unwrap();
    assert_eq!(owned.class_size(), Some(128));
}

#[test]
fn an_owned_buffer_is_an_owner_for_bytes_and_goes_back_cleared() {
    let pool = Arc::new(pool(64, 1024, 1));
    let mut buf = pool.acquire_owned(500).unwrap();
    buf.extend_from_slice(b"hello, frame");
    let bytes = Bytes::from_owner(buf);
    let word = bytes.slice(7..12);
    drop(bytes);
    assert_eq!(&word[..], b"frame");
    assert_eq!(pool.stats().classes[3].stats.in_use, 1, "a slice keeps it");
    drop(word);
    let again = pool.try_acquire(500).unwrap();
    assert!(again.is_empty(), "cleared");
    assert_eq!(pool.stats().classes[3].stats.filled, 1, "the same buffer");
}

#[test]
fn close_refuses_every_class_and_unpooled_requests() {
    let pool = Arc::new(pool(64, 128, 1));
    let held = pool.acquire(1).unwrap();
    assert!(pool.close());
    assert!(!pool.close());
    assert_eq!(pool.try_acquire(100).unwrap_err(), TryAcquireError::Closed);
    assert_eq!(pool.acquire(1).unwrap_err(), AcquireError::Closed);
    assert_eq!(
        pool.acquire(1 << 20).unwrap_err(),
        AcquireError::Closed,
        "unpooled too"
    );
    assert_eq!(
        pool.acquire_owned_timeout(1, Duration::from_secs(1))
            .unwrap_err(),
        AcquireTimeoutError::Closed
    );
    assert_eq!(
        block_on(pool.acquire_async(1)).unwrap_err(),
        AcquireError::Closed
    );
    assert_eq!(pool.stats().unpooled, 0);
    drop(held);
}

#[test]
fn trim_gives_a_spikes_buffers_back() {
    let pool = pool(64, 1 << 16, 8);
    let spike: Vec<BufferGuard<'_, u8>> = (0..8).map(|_| pool.acquire(1 << 16).unwrap()).collect();
    drop(spike);
    assert_eq!(pool.stats().classes[10].stats.filled, 8);
    assert_eq!(pool.trim(2), 6);
    assert_eq!(pool.stats().classes[10].stats.filled, 2);
}

#[test]
fn detach_keeps_the_buffer_and_the_class_refills() {
    let pool = Arc::new(pool(64, 64, 1));
    let mut buf = pool.acquire(1).unwrap();
    buf.push(9);
    assert_eq!(BufferGuard::detach(buf), [9]);
    let owned = pool.acquire_owned(1).unwrap();
    assert!(OwnedBufferGuard::detach(owned).is_empty());
    let unpooled = pool.acquire(1000).unwrap();
    assert!(BufferGuard::detach(unpooled).capacity() >= 1000);
    assert_eq!(pool.stats().classes[0].stats.available, 1);
}

#[test]
fn bad_sizes_are_refused_at_build() {
    let err = |min, max| {
        BufferPool::<u8>::builder()
            .sizes(min, max)
            .capacity(1)
            .build()
            .unwrap_err()
    };
    assert_eq!(err(0, 64), BuildError::BufferSizes { min: 0, max: 64 });
    assert_eq!(err(128, 64), BuildError::BufferSizes { min: 128, max: 64 });
    assert_eq!(
        err(64, usize::MAX),
        BuildError::BufferSizes {
            min: 64,
            max: usize::MAX
        }
    );
    let too_big = BufferPool::<u64>::builder()
        .sizes(1, isize::MAX as usize / 4)
        .capacity(1)
        .build()
        .unwrap_err();
    assert!(
        matches!(too_big, BuildError::BufferSizes { .. }),
        "bytes, not elements"
    );
    let outside = BufferPool::<u8>::builder()
        .sizes(64, 128)
        .capacity(1)
        .class_capacity(1024, 2)
        .build()
        .unwrap_err();
    assert_eq!(outside, BuildError::BufferSizes { min: 64, max: 128 });
    assert_eq!(
        BufferPool::<u8>::builder()
            .sizes(64, 128)
            .build()
            .unwrap_err(),
        BuildError::ZeroCapacity
    );
    let message = err(0, 64).to_string();
    assert!(message.contains("make no size classes"), "{message}");
    // Sizes round up to powers of two; a class capacity may name any size
    // in its class.
    let pool = BufferPool::<u8>::builder()
        .sizes(100, 1000)
        .capacity(4)
        .class_capacity(300, 1)
        .build()
        .unwrap();
    let caps: Vec<(usize, usize)> = pool
        .stats()
        .classes
        .iter()
        .map(|c| (c.size, c.stats.capacity))
        .collect();
    assert_eq!(caps, [(128, 4), (256, 4), (512, 1), (1024, 4)]);
}

/// Threads take buffers of random sizes (some above the largest class),
/// write them whole and give them back, racing each other on every class:
/// each buffer has at least the capacity asked for and is never shared,
/// and at the end every buffer is back.
#[test]
fn concurrent_mixed_sizes_keep_every_class_exact() {
    let _watchdog = watchdog("buffer stress", WAITING);
    for cache in [0, 2] {
        let pool = Arc::new(
            BufferPool::<u8>::builder()
                .sizes(64, 1 << 14)
                .capacity(4)
                .thread_cache_size(cache)
                .fallback(true)
                .build()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_millis(if cfg!(miri) { 20 } else { 300 });
        let served: Vec<usize> = thread::scope(|s| {
            let threads: Vec<_> = (0..4u64)
                .map(|t| {
                    let pool = &pool;
                    s.spawn(move || {
                        let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ t;
                        let mut served = 0;
                        // At least one round per thread, however slow the
                        // machine (miri). A thread holds one buffer at a
                        // time and each class has room for all four, so a
                        // waiting acquire always gets one.
                        while served == 0 || Instant::now() < deadline {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let len = (x % (1 << 15)) as usize;
                            if x % 3 == 0 {
                                let b = pool.acquire_owned(len).expect("never closed");
                                assert!(b.is_empty() && b.capacity() >= len);
                                drop(OwnedBufferGuard::detach(b));
                            } else {
                                let mut b = pool.acquire(len).expect("never closed");
                                assert!(b.is_empty() && b.capacity() >= len);
                                b.resize(len, t as u8);
                                assert!(b.iter().all(|&v| v == t as u8));
                            }
                            served += 1;
                        }
                        served
                    })
                })
                .collect();
            threads.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(
            served.iter().all(|&n| n >= 1),
            "every thread served: {served:?}"
        );
        let stats = pool.stats();
        for class in &stats.classes {
            assert_eq!(class.stats.in_use, 0, "cache {cache}, class {}", class.size);
            assert!(class.stats.filled <= class.stats.capacity);
        }
    }
}
