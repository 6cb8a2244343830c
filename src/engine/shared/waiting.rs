//! The glue between a pool and its [`WaitQueue`](crate::engine::wait::WaitQueue):
//! blocking, timed and async acquires, their cancellation, and close.

use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::Shared;
use crate::engine::wait::{AsyncWait, Take};
use crate::error::{AcquireError, AcquireTimeoutError};

/// A waiting acquire's error when it had no deadline: only a close.
/// The error of an untimed wait (it can only end closed).
pub(crate) fn untimed(err: AcquireTimeoutError) -> AcquireError {
    debug_assert_eq!(err, AcquireTimeoutError::Closed, "no deadline");
    AcquireError::Closed
}

impl<T> Shared<T> {
    /// Takes a free slot index, waiting until `deadline` (forever with
    /// `None`) if there is none.
    pub(crate) fn pop_waiting<const OWNED: bool>(
        &self,
        deadline: Option<Instant>,
    ) -> Result<u32, AcquireTimeoutError> {
        match self.try_pop_before_wait::<OWNED>() {
            Some(taken) => Ok(taken),
            None => self.wait_for_slot::<OWNED>(deadline),
        }
    }

    /// Takes a free slot index, waiting at most `timeout`. The clock is read
    /// only when the pool is empty.
    pub(crate) fn pop_timeout<const OWNED: bool>(
        &self,
        timeout: Duration,
    ) -> Result<u32, AcquireTimeoutError> {
        match self.try_pop_before_wait::<OWNED>() {
            Some(taken) => Ok(taken),
            None => self.wait_for_slot::<OWNED>(Instant::now().checked_add(timeout)),
        }
    }

    /// The waiting half of [`pop_waiting`](Self::pop_waiting) and
    /// [`pop_timeout`](Self::pop_timeout), counting an owned guard's index.
    #[cold]
    fn wait_for_slot<const OWNED: bool>(
        &self,
        deadline: Option<Instant>,
    ) -> Result<u32, AcquireTimeoutError> {
        if self.free.is_closed() {
            // Closed before it began: not a wait.
            return Err(AcquireTimeoutError::Closed);
        }
        let grow = || self.grow_taken();
        let take = Take {
            peak: &self.counters.peak,
            grow: &grow,
        };
        let waited = self
            .waiters
            .pop_waiting(&self.free, self.cache(), &take, deadline);
        // An acquire: the panic of a waker it woke (moving slots out of
        // caches, passing on a notification) is dropped (see `unwind.rs`).
        crate::engine::unwind::drop_caught();
        Ok(self.count::<OWNED>(waited?))
    }

    /// Polls an async acquire: the first poll tries as `try_acquire` does
    /// (but leaves other threads' caches to the waiters ahead of it),
    /// later ones wait (see `engine/wait`). An index it returns is counted as
    /// an owned guard's if `OWNED`.
    pub(crate) fn poll_acquire<const OWNED: bool>(
        &self,
        wait: &mut AsyncWait,
        first: bool,
        cx: &mut Context<'_>,
    ) -> Poll<Result<u32, AcquireError>> {
        let shared = self;
        if first {
            if let Some(taken) = shared.try_pop_before_wait::<OWNED>() {
                return Poll::Ready(Ok(taken));
            }
            if shared.free.is_closed() {
                // Closed before it began: not a wait.
                return Poll::Ready(Err(AcquireError::Closed));
            }
        }
        let grow = || shared.grow_taken();
        let take = Take {
            peak: &shared.counters.peak,
            grow: &grow,
        };
        let polled = shared
            .waiters
            .poll_wait(wait, &shared.free, shared.cache(), &take, cx);
        // An acquire: the panic of a waker it woke (passing on a
        // notification) is dropped (see `unwind.rs`).
        crate::engine::unwind::drop_caught();
        match polled {
            Poll::Ready(Ok(taken)) => Poll::Ready(Ok(shared.count::<OWNED>(taken))),
            other => other,
        }
    }

    /// Ends a dropped async acquire's wait; a slot it was handed meanwhile
    /// goes to the next waiter (see `WaitQueue::cancel`).
    pub(crate) fn cancel_acquire(&self, wait: &mut AsyncWait) {
        let shared = self;
        if let Some(handed) = shared.waiters.cancel(wait, &shared.free) {
            shared.push_free(handed);
        }
        // A waker woken by the cancel (a notification passed on, a slot
        // handed on) panicked: the wait is over all the same, so the panic
        // goes on now (see `unwind.rs`).
        crate::engine::unwind::resume(crate::engine::unwind::take());
    }

    /// See [`Pool::close`](crate::Pool::close).
    pub(crate) fn close(&self) -> bool {
        let closed_now = self.waiters.close(&self.free, self.cache());
        // A waker woken by the close panicked: every waiter was woken all
        // the same (see `unwind.rs`), so the panic goes on now.
        crate::engine::unwind::resume(crate::engine::unwind::take());
        closed_now
    }
}
