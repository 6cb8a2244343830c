//! Reading a [`HandlePool`]'s values: the counted [`Ref`] and the [`Iter`]
//! over the live ones.

use core::fmt;
use core::marker::PhantomData;
use core::mem::ManuallyDrop;
use core::ops::Deref;

use super::entry::{self, OCCUPIED};
use super::{Handle, HandlePool};
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
#[clippy::has_significant_drop]
pub struct Ref<'a, T> {
    pub(super) pool: &'a HandlePool<T>,
    /// Dropped (ending loom's record of the read) just before the read is
    /// counted out, in `drop` or `into_owner`.
    pub(super) value: ManuallyDrop<ConstPtr<Option<T>>>,
    pub(super) index: u32,
    pub(super) generation: u64,
    /// `Ref` shares a `&T`: `Send` and `Sync` come from the impls below.
    pub(super) _shared: PhantomData<&'a T>,
}

// SAFETY: a `Ref` shares `&T` with the threads that hold other `Ref`s (so
// `T: Sync`), and dropping it may drop the value, inserted on another
// thread (so `T: Send`).
unsafe impl<T: Send + Sync> Send for Ref<'_, T> {}
// SAFETY: `&Ref` gives out only `&T`: `T: Sync`.
unsafe impl<T: Sync> Sync for Ref<'_, T> {}

impl<T> Ref<'_, T> {
    /// The handle this reference was taken through.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(1);
    /// let h = pool.insert(0u8).unwrap();
    /// assert_eq!(tagpool::Ref::handle(&pool.get(h).unwrap()), h);
    /// ```
    pub fn handle(this: &Self) -> Handle {
        Handle::new(this.index, this.generation)
    }
}

impl<T> Ref<'_, T> {
    /// Ends this read without counting it out: the caller's CAS turned it
    /// into ownership of the entry. Ends the access to the cell (loom
    /// tracks it until the pointer is dropped).
    pub(super) fn into_owner(this: Self) {
        let mut this = ManuallyDrop::new(this);
        // SAFETY: `this` is never dropped, so `value` is dropped once.
        unsafe { ManuallyDrop::drop(&mut this.value) };
    }
}

impl<T> Deref for Ref<'_, T> {
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

impl<T> Drop for Ref<'_, T> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: dropped only here (or in `into_owner`, which forgets the
        // `Ref`), and not used after: the access ends before the read is
        // counted out, after which the entry may be freed.
        unsafe { ManuallyDrop::drop(&mut self.value) };
        self.pool.unread(self.index);
    }
}

impl<T: fmt::Debug> fmt::Debug for Ref<'_, T> {
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
pub struct Iter<'a, T> {
    pub(super) pool: &'a HandlePool<T>,
    pub(super) next: usize,
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = Ref<'a, T>;

    fn next(&mut self) -> Option<Ref<'a, T>> {
        while let Some(entry) = self.pool.entries.get(self.next) {
            let index = self.next as u32;
            self.next += 1;
            // Relaxed: a hint; `get` re-checks with Acquire.
            let state = entry.state.load(Ordering::Relaxed);
            if state & OCCUPIED == 0 {
                continue;
            }
            if let Some(value) = self.pool.get(Handle::new(index, entry::generation(state))) {
                return Some(value);
            }
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.pool.entries.len() - self.next))
    }
}

impl<T> fmt::Debug for Iter<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Iter").field("next", &self.next).finish()
    }
}
