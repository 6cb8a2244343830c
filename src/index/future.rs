//! [`AcquireIndex`] and [`AcquireOwnedIndex`]: the futures of an async index
//! acquire.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::{IndexGuard, IndexPool, OwnedIndexGuard};
use crate::engine::wait::AsyncWait;
use crate::error::AcquireError;
use crate::pool::{advance, finish, Step};
use crate::sync::Arc;

/// The future of [`IndexPool::acquire_async`]. Dropping it before it
/// resolves cancels the wait and loses nothing.
#[must_use = "futures do nothing unless polled"]
pub struct AcquireIndex<'a> {
    pub(super) pool: &'a IndexPool,
    pub(super) wait: AsyncWait,
    pub(super) step: Step,
}

impl<'a> Future for AcquireIndex<'a> {
    type Output = Result<IndexGuard<'a>, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `AcquireIndex` is `Unpin`: no field is pinned.
        let this = self.get_mut();
        let first = advance(&mut this.step);
        let polled = this
            .pool
            .pool
            .poll_acquire::<false>(&mut this.wait, first, cx);
        let shared = this.pool.pool.state();
        finish(&mut this.step, polled, |index| IndexGuard {
            pool: shared,
            index,
        })
    }
}

impl Drop for AcquireIndex<'_> {
    fn drop(&mut self) {
        if self.step == Step::Waiting {
            self.pool.pool.cancel_acquire(&mut self.wait);
        }
    }
}

impl fmt::Debug for AcquireIndex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireIndex")
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}

/// The future of [`IndexPool::acquire_owned_async`]. Dropping it before it
/// resolves cancels the wait and loses nothing.
#[must_use = "futures do nothing unless polled"]
pub struct AcquireOwnedIndex {
    pub(super) pool: Arc<IndexPool>,
    pub(super) wait: AsyncWait,
    pub(super) step: Step,
}

impl Future for AcquireOwnedIndex {
    type Output = Result<OwnedIndexGuard, AcquireError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // `AcquireOwnedIndex` is `Unpin`: no field is pinned.
        let this = self.get_mut();
        let first = advance(&mut this.step);
        let polled = this
            .pool
            .pool
            .poll_acquire::<true>(&mut this.wait, first, cx);
        let pool = &this.pool;
        finish(&mut this.step, polled, |index| pool.owned_guard(index))
    }
}

impl Drop for AcquireOwnedIndex {
    fn drop(&mut self) {
        if self.step == Step::Waiting {
            self.pool.pool.cancel_acquire(&mut self.wait);
        }
    }
}

impl fmt::Debug for AcquireOwnedIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AcquireOwnedIndex")
            .field("step", &self.step)
            .finish_non_exhaustive()
    }
}
