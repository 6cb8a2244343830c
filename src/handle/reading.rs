//! Reading a [`HandlePool`]'s values: the counted [`Ref`] and the
//! [`HandleIter`] over the live ones.

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::Deref;

use super::entry::{self, OCCUPIED};
use super::{Handle, HandlePool, Key};
use crate::sync::{ConstPtr, Ordering};

/// A shared reference to a value of a [`HandlePool`], counted on its entry:
/// while it lives the value is neither dropped nor evicted (a `remove`
/// makes the value stale and leaves its drop to the last `Ref`).
///
/// Leaking a `Ref` (`mem::forget`) keeps its value from ever being evicted
/// or freed: the entry stays in use, as a leaked guard's slot does.
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
}

impl<'a, T, K: Key> Iterator for HandleIter<'a, T, K> {
    type Item = Ref<'a, T, K>;

    fn next(&mut self) -> Option<Ref<'a, T, K>> {
        while let Some(entry) = self.pool.entries.get(self.next) {
            let index = self.next as u32;
            self.next += 1;
            // Relaxed: a hint; `get` re-checks with Acquire.
            let state = entry.state.load(Ordering::Relaxed);
            if state & OCCUPIED == 0 {
                continue;
            }
            if let Some(value) = self.pool.read(Handle::new(index, entry::generation(state))) {
                return Some(value);
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.pool.entries.len() - self.next))
    }
}

impl<T, K> fmt::Debug for HandleIter<'_, T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandleIter")
            .field("next", &self.next)
            .finish()
    }
}
