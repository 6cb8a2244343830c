//! Pooled buffers handed to `bytes::Bytes` without a copy
//! (`Bytes::from_owner` of an owned guard): the buffer goes back to the
//! pool, reset once, on the thread that drops the last `Bytes` sharing it.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::thread::{self, ThreadId};

use bytes::Bytes;
use tagpool::{AcquireError, Pool, Stats, TryAcquireError};

mod support;
use support::executor::{block_on, counting, poll_once};
use support::{watchdog, WAITING};

/// The threads the reset closure ran on, one entry per reset.
type Resets = Arc<Mutex<Vec<ThreadId>>>;

/// A pool of `capacity` buffers of 64 bytes whose reset clears them and
/// records its thread.
fn buffers(capacity: usize) -> (Arc<Pool<Vec<u8>>>, Resets) {
    let resets = Resets::default();
    let seen = Arc::clone(&resets);
    let pool = Pool::builder(|| Vec::with_capacity(64))
        .capacity(capacity)
        .reset(move |buf: &mut Vec<u8>| {
            buf.clear();
            seen.lock().unwrap().push(thread::current().id());
        })
        .build()
        .unwrap();
    (Arc::new(pool), resets)
}

fn resets(resets: &Resets) -> Vec<ThreadId> {
    resets.lock().unwrap().clone()
}

/// `in_use` and `available` of `stats`, checked to add up to the capacity.
fn counts(stats: Stats) -> (usize, usize) {
    assert_eq!(stats.in_use + stats.available, stats.capacity, "{stats:?}");
    (stats.in_use, stats.available)
}

#[test]
fn the_buffer_comes_back_once_the_last_clone_drops_on_another_thread() {
    let _watchdog = watchdog("bytes clones dropped on other threads", WAITING);
    let (pool, reset) = buffers(1);
    let mut buf = pool.try_acquire_owned().unwrap();
    buf.extend_from_slice(b"pooled bytes");
    let data = buf.as_ptr();

    let bytes = Bytes::from_owner(buf);
    assert_eq!(bytes.as_ptr(), data, "no copy");
    assert_eq!(&bytes[..], b"pooled bytes");
    let tail = bytes.slice(7..);
    assert_eq!(
        (&tail[..], tail.as_ptr()),
        (&b"bytes"[..], data.wrapping_add(7))
    );

    // Three threads each take a clone and drop it when told to.
    let (done_tx, done) = mpsc::channel();
    let droppers: Vec<_> = (0..3)
        .map(|i| {
            let clone = if i == 0 { tail.clone() } else { bytes.clone() };
            let (go_tx, go) = mpsc::channel::<()>();
            let done_tx = done_tx.clone();
            let thread = thread::spawn(move || {
                assert!(clone.starts_with(b"pooled") || clone == "bytes");
                go.recv().unwrap();
                drop(clone);
                done_tx.send(thread::current().id()).unwrap();
            });
            (go_tx, thread)
        })
        .collect();
    drop((bytes, tail));
    assert_eq!(counts(pool.stats()), (1, 0), "the clones hold the buffer");
    assert_eq!(pool.try_acquire().unwrap_err(), TryAcquireError::Exhausted);

    let mut last = None;
    for (i, (go, thread)) in droppers.into_iter().enumerate() {
        go.send(()).unwrap();
        last = Some(done.recv().unwrap());
        thread.join().unwrap();
        if i < 2 {
            assert_eq!(counts(pool.stats()), (1, 0), "{} clones left", 2 - i);
            assert!(resets(&reset).is_empty(), "no reset while a clone lives");
        }
    }
    assert_eq!(counts(pool.stats()), (0, 1), "back after the last drop");
    assert_eq!(
        resets(&reset),
        [last.unwrap()],
        "reset once, by the last dropper"
    );

    let again = pool.try_acquire().unwrap();
    assert_eq!(again.as_ptr(), data, "the same buffer");
    assert!(again.is_empty() && again.capacity() >= 64);
    drop(again);
    let stats = pool.stats();
    assert_eq!((stats.peak_in_use, stats.failed_acquires), (1, 1));
    assert_eq!(resets(&reset).len(), 2);
}

#[test]
fn a_bytes_from_an_async_acquire_wakes_the_next_task_when_it_drops() {
    let (pool, reset) = buffers(1);
    block_on(async {
        let mut bytes = Bytes::from_owner(pool.acquire_owned_async().await?);
        assert!(bytes.is_empty());
        // The same slot, refilled through the guard before the `Bytes`:
        drop(bytes);
        let mut buf = pool.acquire_owned_async().await?;
        buf.extend_from_slice(b"reply");
        bytes = Bytes::from_owner(buf);

        let (wakes, waker) = counting();
        let mut next = pool.acquire_owned_async();
        assert!(poll_once(&mut next, &waker).is_pending());
        let clone = bytes.slice(..2);
        drop(bytes);
        assert!(
            poll_once(&mut next, &waker).is_pending(),
            "a slice holds it"
        );
        assert_eq!(wakes.wakes(), 0);
        assert_eq!(&clone[..], b"re");
        thread::spawn(move || drop(clone)).join().unwrap();
        assert!(wakes.wakes() >= 1, "the last drop woke the waiting task");
        match poll_once(&mut next, &waker) {
            Poll::Ready(Ok(buf)) => assert!(buf.is_empty(), "reset before it came back"),
            _ => panic!("the woken task gets the buffer"),
        }
        Ok::<(), AcquireError>(())
    })
    .unwrap();
    assert_eq!(resets(&reset).len(), 3);
    let stats = pool.stats();
    assert_eq!(counts(stats), (0, 1));
    assert_eq!((stats.async_waits, stats.waiting_tasks), (1, 0));
}

#[test]
fn buffers_handed_between_threads_as_bytes_all_come_back() {
    let _watchdog = watchdog("bytes handed between threads", WAITING);
    let rounds = if cfg!(miri) { 20 } else { 2_000 };
    let (pool, reset) = buffers(4);
    let (tx, rx) = mpsc::channel::<Bytes>();
    let producers: Vec<_> = (0..2u8)
        .map(|p| {
            let (pool, tx) = (Arc::clone(&pool), tx.clone());
            thread::spawn(move || {
                for round in 0..rounds {
                    // Waits while the consumer holds every buffer.
                    let mut buf = pool.acquire_owned().unwrap();
                    assert!(buf.is_empty(), "a buffer came back without its reset");
                    buf.extend_from_slice(&[p, round as u8, 1, 2, 3]);
                    let bytes = Bytes::from_owner(buf);
                    // One clone stays here a moment, one goes over.
                    tx.send(bytes.clone()).unwrap();
                    counts(pool.stats());
                    drop(bytes);
                }
            })
        })
        .collect();
    drop(tx);
    let mut received = 0;
    for bytes in rx {
        assert_eq!((bytes.len(), &bytes[2..]), (5, &[1, 2, 3][..]));
        received += 1;
    }
    for producer in producers {
        producer.join().unwrap();
    }
    assert_eq!(received, 2 * rounds);
    assert_eq!(counts(pool.stats()), (0, 4));
    assert_eq!(
        resets(&reset).len(),
        2 * rounds,
        "one reset per buffer used"
    );
    assert!(pool.stats().peak_in_use <= 4);
}
