//! The futures of the async acquires: [`Acquire`] and [`AcquireOwned`].

use core::convert::Infallible;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use crate::engine::shared::Failure;
use crate::engine::wait::AsyncWait;
use crate::error::AcquireError;
use crate::pool::guard::{OwnedPoolGuard, PoolGuard};
use crate::pool::{factory_error, Pool};
use crate::sync::Arc;

/// Where an async acquire is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Never polled: the first poll tries the fast path.
    First,
    /// Polled, not resolved.
    Waiting,
    /// Resolved: polling again panics.
    Done,
}

/// The future of [`Pool::acquire_async`]: resolves to a [`PoolGuard`] once a
/// slot is free, or to an [`AcquireError<E>`](AcquireError) (`E`: the
/// factory's error, see [`Pool::try_builder`]).
///
/// Cancel-safe: dropping it before it resolves takes no slot and passes on
/// any wake-up it received. `Send` when `T: Send`.
///
/// # Examples
///
/// ```
/// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// # rt.block_on(async {
/// let pool = tagpool::Pool::new(1, || 5u8);
/// let acquire: tagpool::Acquire<'_, u8> = pool.acquire_async();
/// assert_eq!(*acquire.await.unwrap(), 5);
/// # });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a, T, E = Infallible> {
    pool: &'a Pool<T, E>,
    wait: AsyncWait,
    step: Step,
}

impl<'a, T, E> Acquire<'a, T, E> {
    pub(crate) fn new(pool: &'a Pool<T, E>) -> Self {
        Self {
            pool,
            wait: AsyncWait::default(),
            step: Step::First,
        }
    }
}

impl<'a, T, E: 'static> Future for Acquire<'a, T, E> {
    type Output = Result<PoolGuard<'a, T>, AcquireError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `Acquire` is `Unpin`: no field is pinned.
        let this = self.get_mut();
        let first = advance(&mut this.step);
        let polled = this.pool.poll_acquire::<false>(&mut this.wait, first, cx);
        let pool = this.pool;
        finish(&mut this.step, polled, |index| pool.guard(index)).map(factory_failed)
    }
}

impl<T, E> Drop for Acquire<'_, T, E> {
    fn drop(&mut self) {
        if self.step == Step::Waiting {
            self.pool.cancel_acquire(&mut self.wait);
        }
    }
}

impl<T, E> fmt::Debug for Acquire<'_, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

/// The future of [`Pool::acquire_owned_async`]: resolves to an
/// [`OwnedPoolGuard`] once a slot is free, or to an
/// [`AcquireError<E>`](AcquireError).
///
/// `'static`, and `Send` when `T: Send`, so it can be spawned; it holds a
/// clone of the pool's [`Arc`] until it resolves or is dropped. Cancel-safe
/// as [`Acquire`].
///
/// # Examples
///
/// ```
/// # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// # rt.block_on(async {
/// use std::sync::Arc;
///
/// let pool = Arc::new(tagpool::Pool::new(1, || 5u8));
/// let guard = tokio::spawn(pool.acquire_owned_async()).await.unwrap().unwrap();
/// assert_eq!(*guard, 5);
/// # });
/// ```
#[must_use = "futures do nothing unless polled"]
pub struct AcquireOwned<T, E = Infallible> {
    pool: Arc<Pool<T, E>>,
    wait: AsyncWait,
    step: Step,
}

impl<T, E> AcquireOwned<T, E> {
    pub(crate) fn new(pool: Arc<Pool<T, E>>) -> Self {
        Self {
            pool,
            wait: AsyncWait::default(),
            step: Step::First,
        }
    }
}

impl<T, E: 'static> Future for AcquireOwned<T, E> {
    type Output = Result<OwnedPoolGuard<T>, AcquireError<E>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `AcquireOwned` is `Unpin`: no field is pinned.
        let this = self.get_mut();
        let first = advance(&mut this.step);
        let polled = this.pool.poll_acquire::<true>(&mut this.wait, first, cx);
        let pool = &this.pool;
        finish(&mut this.step, polled, |index| pool.owned_guard(index)).map(factory_failed)
    }
}

impl<T, E> Drop for AcquireOwned<T, E> {
    fn drop(&mut self) {
        if self.step == Step::Waiting {
            self.pool.cancel_acquire(&mut self.wait);
        }
    }
}

impl<T, E> fmt::Debug for AcquireOwned<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireOwned")
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

/// A resolved acquire's result, with a fallible factory's error (the slot
/// went back to the pool) as [`AcquireError::Factory`].
fn factory_failed<G, E: 'static>(
    result: Result<Result<G, Failure>, AcquireError>,
) -> Result<G, AcquireError<E>> {
    match result {
        Ok(Ok(guard)) => Ok(guard),
        Ok(Err(failure)) => Err(AcquireError::Factory(factory_error(failure))),
        Err(err) => Err(err.widen()),
    }
}

/// Moves `step` on for a poll; returns whether it is the first.
pub(crate) fn advance(step: &mut Step) -> bool {
    match *step {
        Step::First => {
            *step = Step::Waiting;
            true
        }
        Step::Waiting => false,
        Step::Done => panic!("tagpool: an acquire future was polled after it resolved"),
    }
}

/// Ends a poll: on `Ready`, marks the future done *before* building the
/// guard (the factory may panic in `guard`, and the slot is then given back
/// by the fill, not by the future's drop).
pub(crate) fn finish<G>(
    step: &mut Step,
    polled: Poll<Result<u32, AcquireError>>,
    guard: impl FnOnce(u32) -> G,
) -> Poll<Result<G, AcquireError>> {
    match polled {
        Poll::Pending => Poll::Pending,
        Poll::Ready(result) => {
            *step = Step::Done;
            Poll::Ready(result.map(guard))
        }
    }
}
