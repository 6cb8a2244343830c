//! [`IndexGuard`] and [`OwnedIndexGuard`]: an index held, pushed back on drop.

use core::fmt;
use core::ptr::NonNull;
use std::panic::{RefUnwindSafe, UnwindSafe};

#[cfg(doc)]
use super::IndexPool;
use crate::engine::cache::Settle;
use crate::engine::shared::Shared;

/// An index of an [`IndexPool`], held until the guard is dropped.
///
/// # Examples
///
/// ```
/// let pool = tagpool::IndexPool::new(2);
/// let a = pool.try_acquire().unwrap();
/// let b = pool.try_acquire().unwrap();
/// assert_ne!(a.index(), b.index());
/// ```
#[must_use = "dropping a guard at once frees the index it just acquired"]
#[clippy::has_significant_drop]
pub struct IndexGuard<'a> {
    pub(super) pool: &'a Shared<()>,
    pub(super) index: u32,
}

// SAFETY: an index guard carries no value, only the right to push `index`
// back to the pool's state, which every thread may do through `&IndexPool`
// (the state holds only atomics, the caches' per-thread storage and `()`
// cells it never touches): sending or sharing the guard is sending or
// sharing a `&IndexPool`. No type parameter, so no bound.
unsafe impl Send for IndexGuard<'_> {}
// SAFETY: `&IndexGuard` gives out only the index.
unsafe impl Sync for IndexGuard<'_> {}

// Unwind safety: the guard carries no value, only the right to push its
// index back, a step that stays consistent whatever panics (a waker's
// panic is caught until the push is done); as `IndexPool`, which is
// unwind safe through its `Pool<()>`.
impl UnwindSafe for IndexGuard<'_> {}
impl RefUnwindSafe for IndexGuard<'_> {}

impl IndexGuard<'_> {
    /// The index this guard holds, in `0..capacity`.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::IndexPool::new(1);
    /// assert_eq!(pool.try_acquire().unwrap().index(), 0);
    /// ```
    #[inline]
    pub fn index(&self) -> usize {
        self.index as usize
    }
}

impl Drop for IndexGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        // This guard owns `index` (popped by its acquire, not pushed since).
        let (settle, woke) = self.pool.push::<false>(self.index);
        debug_assert!(matches!(settle, Settle::Done));
        // A waker the release woke panicked: the slot is back all the same
        // (see `unwind.rs`).
        crate::engine::unwind::resume(woke);
    }
}

impl fmt::Debug for IndexGuard<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexGuard")
            .field("index", &self.index)
            .finish()
    }
}

/// An index of an [`IndexPool`] in an [`Arc`](std::sync::Arc), held until the guard is
/// dropped: `'static`, it may move into jobs and be dropped on any thread.
///
/// It keeps the pool's state alive without holding the `Arc` (as
/// [`OwnedPoolGuard`](crate::OwnedPoolGuard)): the last guard frees it
/// if the pool was dropped first.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// let pool = Arc::new(tagpool::IndexPool::new(2));
/// let guard = pool.try_acquire_owned().unwrap();
/// drop(pool); // the guard still holds its index
/// assert!(guard.index() < 2);
/// ```
#[must_use = "dropping a guard at once frees the index it just acquired"]
#[clippy::has_significant_drop]
pub struct OwnedIndexGuard {
    pub(super) pool: NonNull<Shared<()>>,
    pub(super) index: u32,
}

// SAFETY: as `IndexGuard`, plus a share of the pool's state: the thread
// that drops the last share frees the state, which holds no value (`()`
// cells), only closures that are `Send + Sync`. No type parameter.
unsafe impl Send for OwnedIndexGuard {}
// SAFETY: `&OwnedIndexGuard` gives out only the index.
unsafe impl Sync for OwnedIndexGuard {}

// Unwind safety: as `IndexGuard`'s; freeing the state, if this is its last
// share, drops no value.
impl UnwindSafe for OwnedIndexGuard {}
impl RefUnwindSafe for OwnedIndexGuard {}

impl OwnedIndexGuard {
    /// The index this guard holds, in `0..capacity`.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = std::sync::Arc::new(tagpool::IndexPool::new(1));
    /// assert_eq!(pool.try_acquire_owned().unwrap().index(), 0);
    /// ```
    #[inline]
    pub fn index(&self) -> usize {
        self.index as usize
    }
}

impl Drop for OwnedIndexGuard {
    #[inline]
    fn drop(&mut self) {
        let ptr = self.pool;
        // SAFETY: the guard's count keeps the state alive until `finish`;
        // the guard owns `index`.
        let (settle, woke) = unsafe { ptr.as_ref() }.push::<true>(self.index);
        // SAFETY: the reference above is no longer used.
        unsafe { Shared::finish(ptr, settle) };
        // A waker the release woke panicked: caught, so the release ran to
        // its end (`finish` included) first (see `unwind.rs`).
        crate::engine::unwind::resume(woke);
    }
}

impl fmt::Debug for OwnedIndexGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedIndexGuard")
            .field("index", &self.index)
            .finish()
    }
}
