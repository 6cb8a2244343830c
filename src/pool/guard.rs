//! RAII guards: [`PoolGuard`] borrows its pool, [`OwnedPoolGuard`] keeps
//! the pool's state alive on its own. Dropping either returns the slot.

use core::fmt;
use core::mem::ManuallyDrop;
use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;
use std::panic::{RefUnwindSafe, UnwindSafe};

use crate::engine::cache::Settle;
use crate::engine::shared::Shared;
use crate::engine::slot::Held;
#[cfg(doc)]
use crate::pool::Pool;

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
    pool: &'a Shared<T>,
    /// Always a live `Held`, except inside `drop` and `detach`.
    held: ManuallyDrop<Held<T>>,
}

// SAFETY: sending the guard sends exclusive access to the `T` (so `T: Send`)
// and a reference to the pool's state, through which the other thread only
// returns the slot, as `&Pool<T>` (which is `Send` because `Pool<T>: Sync`
// when `T: Send`) would. Dropping it on the other thread runs the
// `Send + Sync` reset closure there.
unsafe impl<T: Send> Send for PoolGuard<'_, T> {}

// SAFETY: a `&PoolGuard<T>` gives out only `&T` (through `Deref`) and the slot
// index, so sharing it is sharing `&T`: exactly `T: Sync`.
unsafe impl<T: Sync> Sync for PoolGuard<'_, T> {}

// Unwind safety, as for `Box<T>`: moving the guard into `catch_unwind` moves
// the value in (`T: UnwindSafe`) and a reference to a pool that stays
// consistent whatever panics (see `Pool`'s `RefUnwindSafe`, which asks
// `T: UnwindSafe` too); `&PoolGuard` gives out only `&T`
// (`T: RefUnwindSafe`).
impl<T: UnwindSafe> UnwindSafe for PoolGuard<'_, T> {}
impl<T: RefUnwindSafe> RefUnwindSafe for PoolGuard<'_, T> {}

impl<'a, T> PoolGuard<'a, T> {
    pub(crate) fn new(pool: &'a Shared<T>, held: Held<T>) -> Self {
        Self {
            pool,
            held: ManuallyDrop::new(held),
        }
    }

    /// Drops the value and gives the slot back empty, counted as a discard
    /// (`Stats::discarded`): for a face that checks values itself.
    pub(crate) fn discard(guard: Self) {
        let pool = guard.pool;
        let value = Self::detach(guard);
        pool.note_discarded();
        drop(value);
    }

    /// Takes the value out of the pool, returning its slot empty.
    ///
    /// The reset closure does not run: the value leaves as it is. The slot is
    /// free at once, and the factory refills it on the first acquire that
    /// takes it while no other value is idle, so the pool never loses
    /// capacity.
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
        let (value, (settle, woke)) = guard.pool.detach::<false>(held);
        debug_assert!(matches!(settle, Settle::Done));
        // A waker the release woke panicked: the slot is back all the same
        // (see `unwind.rs`).
        crate::engine::unwind::resume(woke);
        value
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
        // SAFETY: the guard's `Held` was claimed from its pool's slots.
        unsafe { guard.held.index(guard.pool.slots()) as usize }
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
        let (settle, panicked) = self.pool.release::<false>(held);
        debug_assert!(matches!(settle, Settle::Done));
        // A reset's or a woken waker's panic, resumed out of line, unless
        // this thread already unwinds (a second panic would abort): then
        // the first one goes on.
        crate::engine::unwind::resume(panicked);
    }
}

/// Borrows the value as a `U`, as the value itself does: a guard is an
/// exclusive reference to a pooled value, so it forwards `AsRef` to `T`
/// the way `&mut T` does (`Box` and `Arc` instead implement `AsRef<T>`, which
/// would not reach a `Vec`'s bytes). A guard of a `Vec<u8>` or a `String` is
/// then an `AsRef<[u8]>`, a guard of a `String` an `AsRef<str>`.
///
/// Guards implement no `Borrow`, as std's lock guards do not: `Borrow`
/// promises that `Eq`, `Ord` and `Hash` agree between the two types (for
/// lookups in maps and sets), and a guard, the loan of a slot, implements
/// none of them.
///
/// # Examples
///
/// ```
/// fn len_of(bytes: impl AsRef<[u8]>) -> usize {
///     bytes.as_ref().len()
/// }
///
/// let pool = tagpool::Pool::new(1, || String::from("pooled"));
/// let guard = pool.try_acquire().unwrap();
/// let text: &str = guard.as_ref();
/// assert_eq!(text, "pooled");
/// assert_eq!(len_of(guard), 6); // and the slot is back
/// assert_eq!(pool.stats().in_use, 0);
/// ```
impl<T, U> AsRef<U> for PoolGuard<'_, T>
where
    T: AsRef<U>,
    U: ?Sized,
{
    #[inline]
    fn as_ref(&self) -> &U {
        (**self).as_ref()
    }
}

/// Borrows the value mutably as a `U`, as the value itself does (see the
/// `AsRef` implementation).
///
/// # Examples
///
/// ```
/// fn zero(mut bytes: impl AsMut<[u8]>) {
///     bytes.as_mut().fill(0);
/// }
///
/// let pool = tagpool::Pool::new(1, || vec![7u8; 4]);
/// let mut guard = pool.try_acquire().unwrap();
/// zero(&mut guard);
/// assert_eq!(*guard, [0, 0, 0, 0]);
/// ```
impl<T, U> AsMut<U> for PoolGuard<'_, T>
where
    T: AsMut<U>,
    U: ?Sized,
{
    #[inline]
    fn as_mut(&mut self) -> &mut U {
        (**self).as_mut()
    }
}

/// Formats the value, as [`Ref`](crate::Ref), `Box` and std's lock guards
/// do; [`PoolGuard::index`] gives the slot.
///
/// # Examples
///
/// ```
/// let pool = tagpool::Pool::new(1, || vec![1, 2]);
/// let guard = pool.try_acquire().unwrap();
/// assert_eq!(format!("{guard:?}"), "[1, 2]");
/// ```
impl<T: fmt::Debug> fmt::Debug for PoolGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// Exclusive access to one pooled value of a [`Pool`] in an
/// [`Arc`](std::sync::Arc), that keeps the pool's values alive on its own.
///
/// Made by [`Pool::try_acquire_owned`] and friends. Like [`PoolGuard`], but
/// `'static`: it can move into a job or a thread, and it keeps the pool's
/// values alive even after the last `Arc` to the pool is gone: the pool is
/// then freed when its last owned guard is dropped. It does not hold a
/// clone of the `Arc` (a reference count moved between the acquiring and
/// the releasing thread for every guard would cost a cache-line transfer
/// each way); the pool counts its owned guards per thread instead (see
/// [Owned guards](crate#owned-guards)). It is `Send` when `T: Send` and
/// `Sync` when `T: Sync`:
///
/// ```compile_fail
/// // An owned guard of an `Rc` cannot move to another thread.
/// let pool = std::sync::Arc::new(tagpool::Pool::new(1, || std::rc::Rc::new(0)));
/// let guard = pool.try_acquire_owned().unwrap();
/// std::thread::spawn(move || drop(guard));
/// ```
///
/// ```compile_fail
/// // A `Cell` is `Send` but not `Sync`: an owned guard of one cannot be
/// // shared between threads.
/// fn assert_sync<X: Sync>() {}
/// assert_sync::<tagpool::OwnedPoolGuard<std::cell::Cell<u8>>>();
/// ```
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// let pool = Arc::new(tagpool::Pool::new(2, || 0u32));
/// let guard = pool.try_acquire_owned().unwrap();
/// drop(pool); // the guard keeps the pool's values alive
/// assert_eq!(*guard, 0);
/// drop(guard); // the last guard frees the pool
/// ```
#[must_use = "dropping a guard at once releases the slot it just acquired"]
#[clippy::has_significant_drop]
pub struct OwnedPoolGuard<T> {
    /// The pool's state, which this guard's count keeps alive (see
    /// `Shared`'s Lifetime).
    pool: NonNull<Shared<T>>,
    /// Always a live `Held`, except inside `drop` and `detach`.
    held: ManuallyDrop<Held<T>>,
}

// SAFETY: sending the guard sends exclusive access to the `T` (so `T: Send`)
// and a share of the pool's state: the other thread returns the slot
// through it (as through `&Pool<T>`, `Sync` when `T: Send`) and may be the
// one that frees the state and drops every value (as dropping a
// `Pool<T>`, `Send` when `T: Send`). The slot may be released on any
// thread.
unsafe impl<T: Send> Send for OwnedPoolGuard<T> {}

// SAFETY: a `&OwnedPoolGuard<T>` gives out only `&T` (through `Deref`) and
// the slot index: sharing it is sharing `&T`, exactly `T: Sync`. The pool's
// state is not reachable through it.
unsafe impl<T: Sync> Sync for OwnedPoolGuard<T> {}

// Unwind safety: as `PoolGuard`'s. The share of the pool's state it holds
// is reached only to return the slot (or to free the state, if it is the
// last share), steps that stay consistent whatever panics.
impl<T: UnwindSafe> UnwindSafe for OwnedPoolGuard<T> {}
impl<T: RefUnwindSafe> RefUnwindSafe for OwnedPoolGuard<T> {}

impl<T> OwnedPoolGuard<T> {
    /// A guard for `held`, an index counted as an owned guard's by the
    /// acquire that took it.
    pub(crate) fn new(pool: NonNull<Shared<T>>, held: Held<T>) -> Self {
        Self {
            pool,
            held: ManuallyDrop::new(held),
        }
    }

    /// The guard's parts, its drop skipped: the state it keeps alive (its
    /// count goes with the parts) and its slot.
    pub(crate) fn into_parts(guard: Self) -> (NonNull<Shared<T>>, Held<T>) {
        let mut guard = ManuallyDrop::new(guard);
        // SAFETY: `guard` is never dropped, so `held` is taken exactly once.
        let held = unsafe { ManuallyDrop::take(&mut guard.held) };
        (guard.pool, held)
    }

    /// As [`PoolGuard`]'s `discard`. Counted before the detach, which may
    /// free the pool's state (the last owned guard of a dropped pool).
    pub(crate) fn discard(guard: Self) {
        // SAFETY: the guard's count keeps the state alive until `detach`.
        unsafe { guard.pool.as_ref() }.note_discarded();
        drop(Self::detach(guard));
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
        let ptr = guard.pool;
        // SAFETY: the guard's count keeps the state alive until `finish`.
        let (value, (settle, woke)) = unsafe { ptr.as_ref() }.detach::<true>(held);
        // SAFETY: the reference above is no longer used.
        unsafe { Shared::finish(ptr, settle) };
        // A waker the release woke panicked: caught, so the release ran to
        // its end (`finish` included) first (see `unwind.rs`).
        crate::engine::unwind::resume(woke);
        value
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
        // SAFETY: the guard's count keeps the state alive while it lives.
        let shared = unsafe { guard.pool.as_ref() };
        // SAFETY: the guard's `Held` was claimed from its pool's slots.
        unsafe { guard.held.index(shared.slots()) as usize }
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
        let ptr = self.pool;
        // SAFETY: the guard's count keeps the state alive until `finish`.
        let (settle, panicked) = unsafe { ptr.as_ref() }.release::<true>(held);
        // SAFETY: the reference above is no longer used.
        unsafe { Shared::finish(ptr, settle) };
        // As in `PoolGuard`'s drop.
        crate::engine::unwind::resume(panicked);
    }
}

/// Borrows the value as a `U`, as the value itself does (see
/// [`PoolGuard`]'s `AsRef`). With the guard `Send + 'static`, a pooled
/// buffer becomes a [`bytes::Bytes`](https://docs.rs/bytes) without a copy
/// (`Bytes::from_owner`, bytes 1.9 or newer): the `Bytes` and its clones
/// and slices share the guard, and the buffer goes back to the pool, reset,
/// when the last of them is dropped, on the thread that drops it.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use bytes::Bytes;
///
/// let pool = Arc::new(
///     tagpool::Pool::builder(|| Vec::<u8>::with_capacity(64))
///         .capacity(1)
///         .reset(|buf: &mut Vec<u8>| buf.clear())
///         .build()?,
/// );
/// let mut buf = pool.try_acquire_owned().unwrap();
/// buf.extend_from_slice(b"hello");
/// let hello = Bytes::from_owner(buf); // no copy
/// let ello = hello.slice(1..);
/// drop(hello);
/// assert_eq!(pool.stats().in_use, 1, "`ello` still holds the buffer");
/// assert_eq!(&ello[..], b"ello");
/// drop(ello);
/// assert_eq!(pool.stats().in_use, 0);
/// assert!(pool.try_acquire().unwrap().is_empty(), "reset");
/// # Ok::<(), tagpool::BuildError>(())
/// ```
impl<T, U> AsRef<U> for OwnedPoolGuard<T>
where
    T: AsRef<U>,
    U: ?Sized,
{
    #[inline]
    fn as_ref(&self) -> &U {
        (**self).as_ref()
    }
}

/// Borrows the value mutably as a `U`, as the value itself does.
///
/// # Examples
///
/// ```
/// let pool = std::sync::Arc::new(tagpool::Pool::new(1, || vec![7u8; 2]));
/// let mut guard = pool.try_acquire_owned().unwrap();
/// AsMut::<[u8]>::as_mut(&mut guard)[1] = 0;
/// assert_eq!(*guard, [7, 0]);
/// ```
impl<T, U> AsMut<U> for OwnedPoolGuard<T>
where
    T: AsMut<U>,
    U: ?Sized,
{
    #[inline]
    fn as_mut(&mut self) -> &mut U {
        (**self).as_mut()
    }
}

/// Formats the value, as [`PoolGuard`]'s `Debug` does.
///
/// # Examples
///
/// ```
/// let pool = std::sync::Arc::new(tagpool::Pool::new(1, || "pooled"));
/// let guard = pool.try_acquire_owned().unwrap();
/// assert_eq!(format!("{guard:?}"), "\"pooled\"");
/// ```
impl<T: fmt::Debug> fmt::Debug for OwnedPoolGuard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}
