//! Reading a [`HandlePool`]'s values: the counted [`Ref`], its owned form
//! [`OwnedRef`], and the [`HandleIter`] over the live ones.

use core::fmt;
use core::iter::FusedIterator;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::Deref;
use std::sync::Arc;

use super::entry;
use super::{Handle, HandlePool, Key};
use crate::sync::{ConstPtr, Ordering};

/// A shared reference to a value of a [`HandlePool`], counted on its entry:
/// while it lives the value is neither dropped nor evicted (a `remove`
/// makes the value stale and leaves its drop to the last `Ref`).
///
/// Leaking a `Ref` (`mem::forget`) keeps its value from ever being evicted
/// or freed: the entry stays in use, as a leaked guard's slot does. An
/// entry counts at most 2^22 - 1 (4,194,303) live `Ref`s and [`OwnedRef`]s
/// at once: the read that would be one more panics (see
/// [`HandlePool::get`]).
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(1);
/// let h = pool.insert(String::from("hi")).unwrap();
/// let value = pool.get(h).unwrap();
/// assert_eq!(&*value, "hi");
/// ```
#[must_use = "a `Ref` dropped at once ends its read: use `HandlePool::contains` to test a key"]
#[clippy::has_significant_drop]
pub struct Ref<'a, T, K = Handle> {
    pub(super) pool: &'a HandlePool<T, K>,
    /// Dropped (ending loom's record of the read) just before the read is
    /// counted out, in `drop` or `into_owner`.
    pub(super) value: ManuallyDrop<ConstPtr<Option<T>>>,
    /// The handle the read was counted through.
    pub(super) handle: Handle,
    /// `Ref` shares a `&T`: `Send` and `Sync` come from the impls below.
    pub(super) _shared: PhantomData<&'a T>,
}

// SAFETY: a `Ref` shares `&T` with the threads that hold other `Ref`s (so
// `T: Sync`), and dropping it may drop the value, inserted on another
// thread (so `T: Send`).
unsafe impl<T: Send + Sync, K> Send for Ref<'_, T, K> {}
// SAFETY: `&Ref` gives out only `&T`: `T: Sync`.
unsafe impl<T: Sync, K> Sync for Ref<'_, T, K> {}

impl<T, K: Key> Ref<'_, T, K> {
    /// The key (the handle, by default) this reference was taken through.
    /// An associated function, so that it cannot shadow a method of `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(1);
    /// let h = pool.insert(0u8).unwrap();
    /// assert_eq!(tagpool::Ref::handle(&pool.get(h).unwrap()), h);
    /// ```
    pub fn handle(this: &Self) -> K {
        K::from_handle(this.handle)
    }
}

impl<T, K> Ref<'_, T, K> {
    /// Ends this read without counting it out: the caller's CAS turned it
    /// into ownership of the entry. Ends the access to the cell (loom
    /// tracks it until the pointer is dropped).
    pub(super) fn into_owner(this: Self) {
        let mut this = ManuallyDrop::new(this);
        // SAFETY: `this` is never dropped, so `value` is dropped once.
        unsafe { ManuallyDrop::drop(&mut this.value) };
    }
}

impl<T, K> Deref for Ref<'_, T, K> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: a counted reader: nobody writes the cell while this `Ref`
        // lives, and the value is present (occupied or removed entries hold
        // one).
        let value = self.value.with(|p| unsafe { &*p });
        // SAFETY: as above: a counted entry holds a value.
        unsafe { value.as_ref().unwrap_unchecked() }
    }
}

impl<T, K> Drop for Ref<'_, T, K> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: dropped only here (or in `into_owner`, which forgets the
        // `Ref`), and not used after: the access ends before the read is
        // counted out, after which the entry may be freed.
        unsafe { ManuallyDrop::drop(&mut self.value) };
        self.pool.unread(self.handle.index() as u32);
    }
}

impl<T: fmt::Debug, K> fmt::Debug for Ref<'_, T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T, K> HandlePool<T, K> {
    /// Counts a read of `handle`'s value and returns its cell, or `None` if
    /// the handle is stale: the start of a [`Ref`] or an [`OwnedRef`],
    /// whose drop counts the read out ([`unread`](Self::unread)).
    #[inline]
    pub(super) fn begin_read(&self, handle: Handle) -> Option<ConstPtr<Option<T>>> {
        let entry = self.entries.get(handle.index())?;
        if !entry.read(handle) {
            return None;
        }
        // SAFETY: this thread is a counted reader of the occupied entry
        // until the caller's `Ref` or `OwnedRef` drops: nobody writes the
        // cell meanwhile.
        Some(unsafe { entry.cell() })
    }
}

impl<T, K: Key> HandlePool<T, K> {
    /// [`get`](HandlePool::get) for a pool shared through an [`Arc`]: the
    /// reference holds a clone of the `Arc`, so it is `'static` and may
    /// move into a job or a task, as sharded-slab's `get_owned` does. It
    /// counts as a reader as a [`Ref`] does (the value is neither dropped
    /// nor evicted while it lives), and it keeps the pool alive.
    ///
    /// # Panics
    ///
    /// As [`get`](HandlePool::get): if the entry already has 2^22 - 1
    /// (4,194,303) live `Ref`s and `OwnedRef`s.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::HandlePool::new(4));
    /// let h = pool.insert(String::from("asset")).unwrap();
    /// let asset = pool.get_owned(h).unwrap();
    /// let job = std::thread::spawn(move || asset.len());
    /// assert!(pool.remove(h), "does not wait for the reader");
    /// assert_eq!(job.join().unwrap(), 5, "the reader still saw the value");
    /// assert!(pool.get_owned(h).is_none());
    /// ```
    #[inline]
    pub fn get_owned(self: &Arc<Self>, key: K) -> Option<OwnedRef<T, K>> {
        let handle = key.handle();
        let value = self.begin_read(handle)?;
        Some(OwnedRef {
            value: ManuallyDrop::new(value),
            handle,
            pool: Arc::clone(self),
        })
    }
}

/// A shared reference to a value of a [`HandlePool`] held through an
/// [`Arc`], from [`HandlePool::get_owned`]: a [`Ref`] that owns a clone of
/// the `Arc` instead of borrowing the pool, so it is `'static`.
///
/// Its value is neither dropped nor evicted while it lives, and the pool
/// lives at least as long: if it holds the last clone of the `Arc`, its
/// drop drops the pool, after counting its read out. Leaking one
/// (`mem::forget`) keeps the value and the pool alive for good.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// let pool = Arc::new(tagpool::HandlePool::new(1));
/// let h = pool.insert(7u32).unwrap();
/// let r: tagpool::OwnedRef<u32> = pool.get_owned(h).unwrap();
/// drop(pool);
/// assert_eq!(*r, 7, "the reference keeps the pool alive");
/// assert_eq!(tagpool::OwnedRef::handle(&r), h);
/// ```
#[must_use = "an `OwnedRef` dropped at once ends its read: use `HandlePool::contains` to test a key"]
#[clippy::has_significant_drop]
pub struct OwnedRef<T, K = Handle> {
    /// Dropped (ending loom's record of the read) just before the read is
    /// counted out, in `drop`.
    value: ManuallyDrop<ConstPtr<Option<T>>>,
    /// The handle the read was counted through.
    handle: Handle,
    /// Dropped after the read is counted out (fields drop after `drop`).
    pool: Arc<HandlePool<T, K>>,
}

// SAFETY: as `Ref`'s: an `OwnedRef` shares `&T` with the threads that hold
// other readers (so `T: Sync`), and dropping it may drop the value (if a
// remove left it to the last reader) or the whole pool (if it holds the
// last `Arc`), on whatever thread it was sent to (so `T: Send`).
unsafe impl<T: Send + Sync, K> Send for OwnedRef<T, K> {}
// SAFETY: `&OwnedRef` gives out only `&T` (the `Arc` is private): `T: Sync`.
unsafe impl<T: Sync, K> Sync for OwnedRef<T, K> {}

impl<T, K: Key> OwnedRef<T, K> {
    /// The key (the handle, by default) this reference was taken through.
    /// An associated function, so that it cannot shadow a method of `T`.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = std::sync::Arc::new(tagpool::HandlePool::new(1));
    /// let h = pool.insert(0u8).unwrap();
    /// assert_eq!(tagpool::OwnedRef::handle(&pool.get_owned(h).unwrap()), h);
    /// ```
    pub fn handle(this: &Self) -> K {
        K::from_handle(this.handle)
    }

    /// The pool this reference reads from.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::HandlePool::new(1));
    /// let r = pool.get_owned(pool.insert(0u8).unwrap()).unwrap();
    /// assert!(Arc::ptr_eq(tagpool::OwnedRef::pool(&r), &pool));
    /// ```
    pub fn pool(this: &Self) -> &Arc<HandlePool<T, K>> {
        &this.pool
    }
}

impl<T, K> Deref for OwnedRef<T, K> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: a counted reader, as a `Ref`: nobody writes the cell
        // while this `OwnedRef` lives, and the value is present.
        let value = self.value.with(|p| unsafe { &*p });
        // SAFETY: as above: a counted entry holds a value.
        unsafe { value.as_ref().unwrap_unchecked() }
    }
}

impl<T, K> Drop for OwnedRef<T, K> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: dropped only here, and not used after: the access ends
        // before the read is counted out, after which the entry may be
        // freed. The `Arc` drops after this body, with the other fields.
        unsafe { ManuallyDrop::drop(&mut self.value) };
        self.pool.unread(self.handle.index() as u32);
    }
}

impl<T: fmt::Debug, K> fmt::Debug for OwnedRef<T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

/// The iterator of [`HandlePool::iter`]: the live values, each as a
/// counted [`Ref`].
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(2);
/// pool.insert(5).unwrap();
/// assert_eq!(pool.iter().map(|r| *r).sum::<i32>(), 5);
/// ```
#[must_use = "iterators are lazy and do nothing unless consumed"]
pub struct HandleIter<'a, T, K = Handle> {
    pub(super) pool: &'a HandlePool<T, K>,
    pub(super) next: usize,
    /// The entries used when the iterator was made: an entry filled for
    /// the first time later is not visited (a concurrent insert's value
    /// may be missed anyway).
    pub(super) end: usize,
}

impl<'a, T, K: Key> Iterator for HandleIter<'a, T, K> {
    type Item = Ref<'a, T, K>;

    fn next(&mut self) -> Option<Ref<'a, T, K>> {
        while self.next < self.end {
            let index = self.next as u32;
            self.next += 1;
            // Not allocated, or not seen by this thread yet: no value this
            // thread could have been told of.
            let entry = match self.pool.entries.get(index as usize) {
                Some(entry) => entry,
                None => continue,
            };
            // Relaxed: a hint; `get` re-checks with Acquire.
            let state = entry.state.load(Ordering::Relaxed);
            if !entry::is_occupied(state) {
                continue;
            }
            if let Some(value) = self
                .pool
                .read_counted(Handle::new(index, entry::generation(state)))
            {
                return Some(value);
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.end - self.next))
    }
}

/// Once it returns `None` it has passed the last entry, and stays there.
impl<T, K: Key> FusedIterator for HandleIter<'_, T, K> {}

impl<T, K> fmt::Debug for HandleIter<'_, T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandleIter")
            .field("next", &self.next)
            .finish()
    }
}
