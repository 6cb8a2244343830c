//! RAII guards: [`PoolGuard`] borrows its pool, [`OwnedPoolGuard`] holds an
//! `Arc` of it. Dropping either returns the slot.

use core::fmt;
use core::mem::ManuallyDrop;
use core::ops::{Deref, DerefMut};

use crate::pool::Pool;
use crate::slot::Held;
use crate::sync::Arc;

/// Exclusive access to one pooled value, borrowed from a [`Pool`].
///
/// Derefs to `T`. Dropping the guard runs the pool's reset closure (if any)
/// and returns the slot. Operations of the guard itself are associated
/// functions ([`PoolGuard::detach`], [`PoolGuard::index`]) so that they never
/// shadow methods of `T`.
///
/// Leaking a guard (`mem::forget`) is safe: its slot stays in use (visible in
/// [`Pool::stats`]) until the pool is dropped, which then drops the value.
///
/// `PoolGuard<T>` is `Send` when `T: Send` and `Sync` when `T: Sync`:
///
/// ```compile_fail
/// // A guard of a `Cell` cannot be shared across threads.
/// let pool = tagpool::Pool::new(1, || std::cell::Cell::new(0));
/// let guard = pool.try_acquire().unwrap();
/// std::thread::scope(|s| {
///     s.spawn(|| guard.set(1));
/// });
/// ```
///
/// # Examples
///
/// ```
/// let pool = tagpool::Pool::new(4, || [0u64; 8]);
/// let mut particle = pool.try_acquire().unwrap();
/// particle[0] = 42;
/// assert_eq!(particle[0], 42);
/// drop(particle); // the slot is free again
/// assert_eq!(pool.stats().available, 4);
/// ```
#[must_use = "dropping a guard at once releases the slot it just acquired"]
#[clippy::has_significant_drop]
pub struct PoolGuard<'a, T> {
    pool: &'a Pool<T>,
    /// Always a live `Held`, except inside `drop` and `detach`.
    held: ManuallyDrop<Held<T>>,
}

// SAFETY: sending the guard sends exclusive access to the `T` (so `T: Send`)
// and a `&Pool<T>`, which is `Send` because `Pool<T>: Sync` when `T: Send`.
// Dropping it on the other thread runs the `Send + Sync` reset closure there.
unsafe impl<T: Send> Send for PoolGuard<'_, T> {}

// SAFETY: a `&PoolGuard<T>` gives out only `&T` (through `Deref`) and the slot
// index, so sharing it is sharing `&T`: exactly `T: Sync`.
unsafe impl<T: Sync> Sync for PoolGuard<'_, T> {}

impl<'a, T> PoolGuard<'a, T> {
    pub(crate) fn new(pool: &'a Pool<T>, held: Held<T>) -> Self {
        Self {
            pool,
            held: ManuallyDrop::new(held),
        }
    }

    /// Takes the value out of the pool, returning its slot empty.
    ///
    /// The reset closure does not run: the value leaves as it is. The slot is
    /// free at once, and the factory refills it on its next acquire, so the
    /// pool never loses capacity.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(1, || vec![1, 2, 3]);
    /// let v: Vec<i32> = tagpool::PoolGuard::detach(pool.try_acquire().unwrap());
    /// assert_eq!(v, [1, 2, 3]);
    /// assert_eq!(pool.stats().available, 1);
    /// ```
    pub fn detach(guard: Self) -> T {
        let mut guard = ManuallyDrop::new(guard);
        // SAFETY: `guard` is never dropped, so `held` is taken exactly once.
        let held = unsafe { ManuallyDrop::take(&mut guard.held) };
        guard.pool.detach(held)
    }

    /// The index of the guard's slot, in `0..capacity`.
    ///
    /// Stable for the slot's lifetime: handy as a key into side tables
    /// (structure of arrays) while the guard is held.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(8, || 0u8);
    /// let guard = pool.try_acquire().unwrap();
    /// assert!(tagpool::PoolGuard::index(&guard) < 8);
    /// ```
    pub fn index(guard: &Self) -> usize {
        guard.held.index() as usize
    }
}

impl<T> Deref for PoolGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        self.held.get()
    }
}

impl<T> DerefMut for PoolGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        self.held.get_mut()
    }
}

impl<T> Drop for PoolGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `held` is taken only here and in `detach`, which never
        // drops the guard.
        let held = unsafe { ManuallyDrop::take(&mut self.held) };
        self.pool.release(held);
    }
}

impl<T> fmt::Debug for PoolGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolGuard")
            .field("index", &self.held.index())
            .finish_non_exhaustive()
    }
}

/// Exclusive access to one pooled value, holding the [`Pool`] through an
/// [`Arc`].
///
/// Made by [`Pool::try_acquire_owned`] and friends. Like [`PoolGuard`], but
/// `'static`: it can move into a job or a thread, and it keeps the pool alive
/// even after every other `Arc` to it is gone. It is `Send` when `T: Send`
/// and `Sync` when `T: Send + Sync` (a shared guard also shares its pool,
/// through [`OwnedPoolGuard::pool`]):
///
/// ```compile_fail
/// // An owned guard of an `Rc` cannot move to another thread.
/// let pool = std::sync::Arc::new(tagpool::Pool::new(1, || std::rc::Rc::new(0)));
/// let guard = pool.try_acquire_owned().unwrap();
/// std::thread::spawn(move || drop(guard));
/// ```
///
/// ```compile_fail
/// // `MutexGuard` is `Sync` but not `Send`: sharing an owned guard of it
/// // would let another thread take such values out of the pool.
/// fn assert_sync<X: Sync>() {}
/// assert_sync::<tagpool::OwnedPoolGuard<std::sync::MutexGuard<'static, ()>>>();
/// ```
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// let pool = Arc::new(tagpool::Pool::new(2, || 0u32));
/// let guard = pool.try_acquire_owned().unwrap();
/// drop(pool); // the guard keeps the pool alive
/// assert_eq!(*guard, 0);
/// ```
#[must_use = "dropping a guard at once releases the slot it just acquired"]
#[clippy::has_significant_drop]
pub struct OwnedPoolGuard<T> {
    pool: ManuallyDrop<Arc<Pool<T>>>,
    /// Always a live `Held`, except inside `drop` and `detach`.
    held: ManuallyDrop<Held<T>>,
}

// SAFETY: sending the guard sends exclusive access to the `T` (so `T: Send`)
// and an `Arc<Pool<T>>`, which is `Send` because `Pool<T>: Send + Sync` when
// `T: Send`. The slot may be released on any thread.
unsafe impl<T: Send> Send for OwnedPoolGuard<T> {}

// SAFETY: a `&OwnedPoolGuard<T>` gives out `&T` (so `T: Sync`), the slot
// index, and `&Arc<Pool<T>>` through `OwnedPoolGuard::pool`. Another thread
// can clone that `Arc` and take values out of the pool by value, so the `Arc`
// must be `Sync`, which needs `Pool<T>: Send + Sync`, that is `T: Send`.
unsafe impl<T: Send + Sync> Sync for OwnedPoolGuard<T> {}

impl<T> OwnedPoolGuard<T> {
    pub(crate) fn new(pool: Arc<Pool<T>>, held: Held<T>) -> Self {
        Self {
            pool: ManuallyDrop::new(pool),
            held: ManuallyDrop::new(held),
        }
    }

    /// Takes the value out of the pool, returning its slot empty; see
    /// [`PoolGuard::detach`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::Pool::new(1, || String::from("hi")));
    /// let s = tagpool::OwnedPoolGuard::detach(pool.try_acquire_owned().unwrap());
    /// assert_eq!(s, "hi");
    /// assert_eq!(pool.stats().in_use, 0);
    /// ```
    pub fn detach(guard: Self) -> T {
        let mut guard = ManuallyDrop::new(guard);
        // SAFETY: `guard` is never dropped, so `held` is taken exactly once.
        let held = unsafe { ManuallyDrop::take(&mut guard.held) };
        // SAFETY: as above, for `pool`.
        let pool = unsafe { ManuallyDrop::take(&mut guard.pool) };
        pool.detach(held)
    }

    /// The index of the guard's slot, in `0..capacity`.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = std::sync::Arc::new(tagpool::Pool::new(1, || 0u8));
    /// let guard = pool.try_acquire_owned().unwrap();
    /// assert_eq!(tagpool::OwnedPoolGuard::index(&guard), 0);
    /// ```
    pub fn index(guard: &Self) -> usize {
        guard.held.index() as usize
    }

    /// The pool this guard's value came from.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::Pool::new(3, || 0u8));
    /// let guard = pool.try_acquire_owned().unwrap();
    /// assert!(Arc::ptr_eq(tagpool::OwnedPoolGuard::pool(&guard), &pool));
    /// ```
    pub fn pool(guard: &Self) -> &Arc<Pool<T>> {
        &guard.pool
    }
}

impl<T> Deref for OwnedPoolGuard<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        self.held.get()
    }
}

impl<T> DerefMut for OwnedPoolGuard<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        self.held.get_mut()
    }
}

impl<T> Drop for OwnedPoolGuard<T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: `held` is taken only here and in `detach`, which never
        // drops the guard.
        let held = unsafe { ManuallyDrop::take(&mut self.held) };
        // Take the `Arc` out so that it is dropped after the release, even if
        // the reset closure panics.
        // SAFETY: as above, for `pool`.
        let pool = unsafe { ManuallyDrop::take(&mut self.pool) };
        pool.release(held);
    }
}

impl<T> fmt::Debug for OwnedPoolGuard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPoolGuard")
            .field("index", &self.held.index())
            .finish_non_exhaustive()
    }
}
