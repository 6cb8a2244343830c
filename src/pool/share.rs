//! [`SharedPoolGuard`]: a pooled value shared by several owners, like an
//! `Arc<T>`, that goes back to its pool when the last one drops.

use core::fmt;
use core::mem::ManuallyDrop;
use core::ops::Deref;
use core::ptr::NonNull;
use std::panic::{RefUnwindSafe, UnwindSafe};

use super::OwnedPoolGuard;
use crate::engine::shared::Shared;
use crate::sync::{fence, AtomicU32, Ordering};

/// The most shares of one value: past it a clone aborts the process, as
/// `Arc`'s does past `isize::MAX` (only leaked clones get there).
const MAX_SHARES: u32 = u32::MAX / 2;

/// A pooled value with shared ownership: [`OwnedPoolGuard::share`] turns an
/// owned guard into one, and [`Clone`] makes more, each a
/// `Deref<Target = T>` that can go to another thread or task. When the last
/// one drops, the value goes back to its pool as the owned guard's release
/// would send it: reset (if the pool has a reset closure), checked by
/// `discard_if`, to a waiter if one waits. For a parsed request or a
/// decoded frame that several tasks read, as `Arc<T>` would share it but
/// without its allocation.
///
/// Clone and drop cost what `Arc`'s do: one atomic add (`Relaxed`), one
/// atomic subtract (`Release`, and an `Acquire` fence in the last drop).
/// The count lives in the slot's free-list link, which no one uses while
/// the slot is held, so sharing allocates nothing and adds no memory to
/// the pool.
///
/// `Send` and `Sync` exactly when `Arc<T>` is: `T: Send + Sync`. The value
/// is only ever read through a share (there is no `DerefMut`); to write it
/// again, take the guard back with [`try_unwrap`](Self::try_unwrap) once
/// no other share is left.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::thread;
/// use tagpool::{OwnedPoolGuard, Pool};
///
/// let pool = Arc::new(Pool::builder(String::new).capacity(2).reset(String::clear).build()?);
/// let mut frame = pool.acquire_owned()?;
/// frame.push_str("GET / HTTP/1.1");
/// let frame = OwnedPoolGuard::share(frame);
/// let readers: Vec<_> = (0..3)
///     .map(|_| {
///         let frame = frame.clone();
///         thread::spawn(move || frame.len())
///     })
///     .collect();
/// drop(frame);
/// for reader in readers {
///     assert_eq!(reader.join().unwrap(), 14);
/// }
/// // The last share went back to the pool, reset.
/// assert_eq!(pool.stats().in_use, 0);
/// assert!(pool.acquire()?.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A share is not `Send` for a `T` that is not `Sync`, as `Arc<T>` is not:
///
/// ```compile_fail
/// use std::cell::Cell;
/// use std::sync::Arc;
/// use tagpool::{OwnedPoolGuard, Pool};
///
/// let pool = Arc::new(Pool::new(1, || Cell::new(0)));
/// let shared = OwnedPoolGuard::share(pool.acquire_owned().unwrap());
/// std::thread::spawn(move || shared.get());
/// ```
///
/// nor `Sync` for a `T` that is not `Send`:
///
/// ```compile_fail
/// use std::rc::Rc;
/// use std::sync::Arc;
/// use tagpool::{OwnedPoolGuard, Pool, SharedPoolGuard};
///
/// fn is_sync<S: Sync>(_: &S) {}
/// let pool = Arc::new(Pool::new(1, || Rc::new(0)));
/// let shared: SharedPoolGuard<Rc<i32>> = OwnedPoolGuard::share(pool.acquire_owned().unwrap());
/// is_sync(&shared);
/// ```
#[must_use = "dropping the last share at once releases the value"]
#[clippy::has_significant_drop]
pub struct SharedPoolGuard<T> {
    /// The pool's state, kept alive by the owned guard's count that the
    /// shares hold together (see `Shared`'s Lifetime).
    pool: NonNull<Shared<T>>,
    /// The value, in its held slot: read-only while shared.
    value: NonNull<T>,
    /// The number of shares, in the slot's free-list link (see
    /// `FreeList::held_link`).
    count: NonNull<AtomicU32>,
    /// The slot, for the last share's release.
    index: u32,
}

// SAFETY: as `Arc<T>`: a share sent to another thread reads the value there
// while other shares read it elsewhere (`T: Sync`), and may be the last
// share, whose drop resets and releases the value on that thread, or
// returns it by `try_unwrap` (`T: Send`). The pool's state is reached only
// through the owned guard's share of it, as `OwnedPoolGuard` (`Send` for
// `T: Send`) reaches it.
unsafe impl<T: Send + Sync> Send for SharedPoolGuard<T> {}

// SAFETY: through `&SharedPoolGuard<T>` a thread reads the value
// (`T: Sync`) and can clone a share that it then owns, hence `Send`'s
// bounds too, as `Arc<T>`'s `Sync` asks.
unsafe impl<T: Send + Sync> Sync for SharedPoolGuard<T> {}

// Unwind safety as `Arc<T>`'s: a share only reads the value, so a panic
// while one is shared leaves it as it was; the count's steps stay
// consistent whatever panics.
impl<T: RefUnwindSafe> UnwindSafe for SharedPoolGuard<T> {}
impl<T: RefUnwindSafe> RefUnwindSafe for SharedPoolGuard<T> {}

impl<T> OwnedPoolGuard<T> {
    /// Turns the guard into the first share of its value: see
    /// [`SharedPoolGuard`]. An associated function (call it as
    /// `OwnedPoolGuard::share(guard)`), so that it never shadows a method
    /// of `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tagpool::{OwnedPoolGuard, Pool, SharedPoolGuard};
    ///
    /// let pool = Arc::new(Pool::new(1, || vec![0u8; 4]));
    /// let a = OwnedPoolGuard::share(pool.acquire_owned()?);
    /// let b = a.clone();
    /// assert_eq!(SharedPoolGuard::strong_count(&a), 2);
    /// assert!(SharedPoolGuard::ptr_eq(&a, &b));
    /// drop(a);
    /// assert!(pool.try_acquire().is_err(), "still shared");
    /// drop(b);
    /// assert!(pool.try_acquire().is_ok(), "back in the pool");
    /// # Ok::<(), tagpool::AcquireError>(())
    /// ```
    pub fn share(guard: Self) -> SharedPoolGuard<T> {
        let (pool, held) = Self::into_parts(guard);
        let value = NonNull::from(held.get());
        // SAFETY: the owned guard's count keeps the state alive, and every
        // share after it holds that count.
        let shared = unsafe { pool.as_ref() };
        // SAFETY: `held` was claimed from this pool's slots.
        let index = unsafe { held.into_index(shared.slots()) };
        let count = shared.free_list().held_link(index);
        // Relaxed: this thread holds the slot, and nobody else writes its
        // link while it is held; the shares made from this one carry the
        // store to other threads by whatever sends them.
        count.store(1, Ordering::Relaxed);
        SharedPoolGuard {
            pool,
            value,
            count: NonNull::from(count),
            index,
        }
    }
}

impl<T> SharedPoolGuard<T> {
    /// The count of the shares of this value.
    #[inline]
    fn count(&self) -> &AtomicU32 {
        // SAFETY: the link lives in the pool's state, which the shares keep
        // alive (the owned guard's count).
        unsafe { self.count.as_ref() }
    }

    /// How many shares of this value exist (this one among them). As
    /// `Arc::strong_count`, a snapshot: another thread may clone or drop
    /// one meanwhile.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tagpool::{OwnedPoolGuard, Pool, SharedPoolGuard};
    ///
    /// let pool = Arc::new(Pool::new(1, || 7));
    /// let a = OwnedPoolGuard::share(pool.acquire_owned().unwrap());
    /// assert_eq!(SharedPoolGuard::strong_count(&a), 1);
    /// let b = a.clone();
    /// assert_eq!(SharedPoolGuard::strong_count(&b), 2);
    /// ```
    pub fn strong_count(this: &Self) -> usize {
        // Relaxed: a snapshot, as `Arc::strong_count`'s.
        this.count().load(Ordering::Relaxed) as usize
    }

    /// Whether two shares are of the same value.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tagpool::{OwnedPoolGuard, Pool, SharedPoolGuard};
    ///
    /// let pool = Arc::new(Pool::new(2, || 0));
    /// let a = OwnedPoolGuard::share(pool.acquire_owned().unwrap());
    /// let b = OwnedPoolGuard::share(pool.acquire_owned().unwrap());
    /// assert!(SharedPoolGuard::ptr_eq(&a, &a.clone()));
    /// assert!(!SharedPoolGuard::ptr_eq(&a, &b));
    /// ```
    pub fn ptr_eq(this: &Self, other: &Self) -> bool {
        this.value == other.value
    }

    /// The slot's index in its pool, as [`OwnedPoolGuard::index`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tagpool::{OwnedPoolGuard, Pool, SharedPoolGuard};
    ///
    /// let pool = Arc::new(Pool::new(1, || 0));
    /// let shared = OwnedPoolGuard::share(pool.acquire_owned().unwrap());
    /// assert_eq!(SharedPoolGuard::index(&shared), 0);
    /// ```
    pub fn index(this: &Self) -> usize {
        this.index as usize
    }

    /// The owned guard back, if this is the only share left; else the share
    /// itself, unchanged. As `Arc::try_unwrap`: to write the value again,
    /// or to keep it beyond the shares.
    ///
    /// # Errors
    ///
    /// `this`, if other shares exist.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tagpool::{OwnedPoolGuard, Pool, SharedPoolGuard};
    ///
    /// let pool = Arc::new(Pool::new(1, || 1));
    /// let a = OwnedPoolGuard::share(pool.acquire_owned().unwrap());
    /// let b = a.clone();
    /// let a = SharedPoolGuard::try_unwrap(a).unwrap_err();
    /// drop(b);
    /// let mut guard = SharedPoolGuard::try_unwrap(a).unwrap();
    /// *guard += 1;
    /// assert_eq!(*guard, 2);
    /// ```
    pub fn try_unwrap(this: Self) -> Result<OwnedPoolGuard<T>, Self> {
        // Acquire: pairs with the Release decrements of the shares dropped
        // on other threads, whose reads of the value end before this
        // thread may write it. One share left means no other thread can
        // make another (a clone needs a share). Loom-only fault injection
        // (`tagpool_loom_share_unwrap_relaxed`): a Relaxed load, so the
        // guard's writes may race another share's last reads.
        let order = if cfg!(all(loom, tagpool_loom_share_unwrap_relaxed)) {
            Ordering::Relaxed
        } else {
            Ordering::Acquire
        };
        if this.count().load(order) != 1 {
            return Err(this);
        }
        Ok(Self::into_guard(ManuallyDrop::new(this)))
    }

    /// The owned guard of the last share, which ends here.
    fn into_guard(this: ManuallyDrop<Self>) -> OwnedPoolGuard<T> {
        // SAFETY: as in `count`.
        let shared = unsafe { this.pool.as_ref() };
        // SAFETY: the last share owns the slot alone now: every other share
        // was dropped (their Release decrements ordered before this by the
        // caller's Acquire), and nothing else reaches a held slot.
        let held = unsafe { shared.slots().claim(this.index) };
        OwnedPoolGuard::new(this.pool, held)
    }

    /// The last share's drop: the value goes back through its owned guard.
    #[cold]
    #[inline(never)]
    fn release_last(&mut self) {
        // SAFETY: the caller's drop is the last use of `self`.
        let this = ManuallyDrop::new(unsafe { core::ptr::read(self) });
        drop(Self::into_guard(this));
    }
}

impl<T> Clone for SharedPoolGuard<T> {
    /// One more share of the value.
    ///
    /// # Aborts
    ///
    /// Aborts the process if the value already has more than 2^31 - 1
    /// shares (only leaked ones can get there), as `Arc`'s clone aborts.
    #[inline]
    fn clone(&self) -> Self {
        // Relaxed: as `Arc`'s clone, a share made from a live one: the
        // slot stays held whatever the order, and nothing is published.
        let old = self.count().fetch_add(1, Ordering::Relaxed);
        if old > MAX_SHARES {
            std::process::abort();
        }
        Self { ..*self }
    }
}

impl<T> Drop for SharedPoolGuard<T> {
    #[inline]
    fn drop(&mut self) {
        // Loom-only fault injection: a Relaxed decrement and no fence, so
        // the last share's reset may run before another share's reads have
        // ended. The sharing model must report the race on the value.
        let release = if cfg!(all(loom, tagpool_loom_share_relaxed_drop)) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        // Release: this share's reads of the value happen-before the
        // decrement that the last share's fence acquires.
        if self.count().fetch_sub(1, release) != 1 {
            return;
        }
        if !cfg!(all(loom, tagpool_loom_share_relaxed_drop)) {
            // Acquire: pairs with every other share's Release decrement, so
            // their reads end before the reset and the release below.
            fence(Ordering::Acquire);
        }
        self.release_last();
    }
}

impl<T> Deref for SharedPoolGuard<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the slot stays held, filled and unwritten while any share
        // lives (only the last one, or `try_unwrap` with no other left,
        // gets write access back), and `value` points at its value.
        unsafe { self.value.as_ref() }
    }
}

/// Borrows the value as a `U`, as the value itself does (see
/// [`OwnedPoolGuard`]'s `AsRef`): with `T = Vec<u8>`, a share is an owner
/// for `bytes::Bytes::from_owner`.
impl<T, U> AsRef<U> for SharedPoolGuard<T>
where
    T: AsRef<U>,
    U: ?Sized,
{
    fn as_ref(&self) -> &U {
        (**self).as_ref()
    }
}

impl<T: fmt::Debug> fmt::Debug for SharedPoolGuard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// Formats the value, as `Arc<T>` does.
impl<T: fmt::Display> fmt::Display for SharedPoolGuard<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&**self, f)
    }
}

/// The value, borrowed: with `Eq` and `Hash` below, a share can key a map
/// looked up by `&T`, as an `Arc<T>` can.
impl<T> core::borrow::Borrow<T> for SharedPoolGuard<T> {
    fn borrow(&self) -> &T {
        self
    }
}

/// Compares the values, as `Arc<T>` does (not the slots: see
/// [`ptr_eq`](SharedPoolGuard::ptr_eq)).
impl<T: PartialEq> PartialEq for SharedPoolGuard<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Eq> Eq for SharedPoolGuard<T> {}

/// Hashes the value, as `Arc<T>` does.
impl<T: core::hash::Hash> core::hash::Hash for SharedPoolGuard<T> {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

/// [`OwnedPoolGuard::share`], as a conversion.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use tagpool::SharedPoolGuard;
///
/// let pool = Arc::new(tagpool::Pool::new(1, || String::from("frame")));
/// let shared: SharedPoolGuard<String> = pool.acquire_owned().unwrap().into();
/// assert_eq!(shared.to_string(), "frame");
/// ```
impl<T> From<OwnedPoolGuard<T>> for SharedPoolGuard<T> {
    fn from(guard: OwnedPoolGuard<T>) -> Self {
        OwnedPoolGuard::share(guard)
    }
}
