//! A minimal executor for the async tests: no runtime, so miri runs them.
#![allow(dead_code)] // each test file uses some of it

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

/// A waker that counts its wake-ups and unparks a thread.
pub(crate) struct Counting {
    wakes: AtomicUsize,
    thread: Thread,
}

impl Wake for Counting {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
        self.thread.unpark();
    }
}

/// A counting waker for the current thread: the count, and the waker.
pub(crate) fn counting() -> (Arc<Counting>, Waker) {
    let counting = Arc::new(Counting {
        wakes: AtomicUsize::new(0),
        thread: thread::current(),
    });
    (Arc::clone(&counting), Waker::from(counting))
}

impl Counting {
    /// How many times the waker was woken.
    pub(crate) fn wakes(&self) -> usize {
        self.wakes.load(Ordering::SeqCst)
    }
}

/// Polls `future` once with `waker`.
pub(crate) fn poll_once<F: Future + Unpin>(future: &mut F, waker: &Waker) -> Poll<F::Output> {
    std::pin::Pin::new(future).poll(&mut Context::from_waker(waker))
}

/// Runs `future` to completion on this thread, parking between polls.
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let (count, waker) = counting();
    let mut future = Box::pin(future);
    let mut seen = 0;
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut Context::from_waker(&waker)) {
            return out;
        }
        // A wake-up that came during the poll is not lost: the count moved.
        while count.wakes() == seen {
            thread::park();
        }
        seen = count.wakes();
    }
}
