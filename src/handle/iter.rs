//! The iterators of a [`HandlePool`] borrowed `&mut`: [`IterMut`],
//! [`Values`], [`ValuesMut`], [`Keys`] and [`Drain`]. No other thread can
//! reach the pool meanwhile, so they read no reader counts, and know
//! exactly how many values they will yield.

use core::fmt;
use core::iter::FusedIterator;
use core::marker::PhantomData;
use core::slice;

use super::entry::{self, Entry, OCCUPIED};
use super::{Handle, HandlePool, Key};
use crate::engine::segment::SlicesMut;
use crate::sync::Ordering;

/// The live entries of a pool borrowed `&mut`, in index order: the walk
/// that the borrowing iterators share.
struct Live<'a, T> {
    /// The entries of the current segment not looked at yet.
    entries: slice::IterMut<'a, Entry<T>>,
    /// One past the index of the current segment's last entry: an entry's
    /// index is this less the entries left after it, computed only for the
    /// live ones (no counter in the loop over every entry).
    end: u32,
    /// The segments after it, cut at the entries ever used (see
    /// `HandlePool::used`): `None` when there are none left, and while
    /// `next_segment` has them.
    segments: Option<SlicesMut<'a, Entry<T>>>,
    /// The live values not yielded yet: exact, since nothing else changes
    /// the pool while it is borrowed.
    remaining: usize,
}

impl<'a, T> Live<'a, T> {
    fn new<K: Key>(pool: &'a mut HandlePool<T, K>) -> Self {
        let remaining = pool.live_exclusive();
        let used = pool.used();
        let mut segments = pool.entries.slices_mut(used);
        let (start, first) = segments.next().unwrap_or((0, &mut []));
        Self {
            end: start + first.len() as u32,
            entries: first.iter_mut(),
            // `None` at once for a pool allocated at build (or one whose
            // values all sit in its first segment): its walk ends with the
            // first slice, without a call.
            segments: if segments.is_done() {
                None
            } else {
                Some(segments)
            },
            remaining,
        }
    }

    /// The next live entry's handle and value.
    #[inline]
    fn next(&mut self) -> Option<(Handle, &'a mut T)> {
        loop {
            for entry in &mut self.entries {
                if let Some((generation, value)) = entry.live_mut() {
                    let index = self.end - self.entries.len() as u32 - 1;
                    self.remaining = self.remaining.saturating_sub(1);
                    // SAFETY: the generation of an occupied word: never 0
                    // (see `Handle::occupied`).
                    return Some((unsafe { Handle::occupied(index, generation) }, value));
                }
            }
            // Out of line, and given only the segments: the loop's own
            // state stays in registers.
            let (segments, next) = next_segment(self.segments.take()?);
            self.segments = Some(segments);
            let (start, entries) = next?;
            self.end = start + entries.len() as u32;
            self.entries = entries.iter_mut();
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

/// The next segment of entries (a pool built with `initial`), if any.
#[cold]
#[inline(never)]
fn next_segment<'a, T>(mut segments: SlicesMut<'a, Entry<T>>) -> NextSegment<'a, T> {
    let next = segments.next();
    (segments, next)
}

/// What [`next_segment`] returns: the walk's state, passed by value so that
/// no pointer into [`Live`] escapes the loop, and the segment it found.
type NextSegment<'a, T> = (SlicesMut<'a, Entry<T>>, Option<(u32, &'a mut [Entry<T>])>);

/// Defines a borrowing iterator over [`Live`], mapping each live entry.
macro_rules! live_iterator {
    (
        $(#[$doc:meta])*
        $name:ident, $item:ty, |$key:ident, $value:ident| $map:expr
    ) => {
        $(#[$doc])*
        #[must_use = "iterators are lazy and do nothing unless consumed"]
        pub struct $name<'a, T, K = Handle> {
            live: Live<'a, T>,
            _key: PhantomData<fn(K) -> K>,
        }

        impl<'a, T, K: Key> $name<'a, T, K> {
            pub(super) fn new(pool: &'a mut HandlePool<T, K>) -> Self {
                Self {
                    live: Live::new(pool),
                    _key: PhantomData,
                }
            }
        }

        impl<'a, T, K: Key> Iterator for $name<'a, T, K> {
            type Item = $item;

            #[inline]
            fn next(&mut self) -> Option<$item> {
                let (handle, $value) = self.live.next()?;
                let $key = K::from_handle(handle);
                Some($map)
            }

            fn size_hint(&self) -> (usize, Option<usize>) {
                self.live.size_hint()
            }
        }

        impl<T, K: Key> ExactSizeIterator for $name<'_, T, K> {}

        impl<T, K: Key> FusedIterator for $name<'_, T, K> {}

        impl<T, K> fmt::Debug for $name<'_, T, K> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("remaining", &self.live.remaining)
                    .finish_non_exhaustive()
            }
        }
    };
}

live_iterator! {
    /// The iterator of [`HandlePool::iter_mut`]: each live value's key and
    /// a `&mut` to it, in index order.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(2);
    /// let h = pool.insert(1).unwrap();
    /// let mut iter = pool.iter_mut();
    /// assert_eq!(iter.len(), 1);
    /// assert_eq!(iter.next(), Some((h, &mut 1)));
    /// assert_eq!(iter.next(), None);
    /// ```
    IterMut, (K, &'a mut T), |key, value| (key, value)
}

live_iterator! {
    /// The iterator of [`HandlePool::values`]: a `&` to each live value, in
    /// index order.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(2);
    /// pool.insert(1).unwrap();
    /// assert_eq!(pool.values().copied().collect::<Vec<_>>(), [1]);
    /// ```
    Values, &'a T, |_key, value| &*value
}

live_iterator! {
    /// The iterator of [`HandlePool::values_mut`]: a `&mut` to each live
    /// value, in index order.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(2);
    /// pool.insert(1).unwrap();
    /// pool.values_mut().for_each(|v| *v *= 10);
    /// assert_eq!(pool.values().copied().collect::<Vec<_>>(), [10]);
    /// ```
    ValuesMut, &'a mut T, |_key, value| value
}

live_iterator! {
    /// The iterator of [`HandlePool::keys`]: each live value's key, in
    /// index order.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(2);
    /// let h = pool.insert(1).unwrap();
    /// assert_eq!(pool.keys().collect::<Vec<_>>(), [h]);
    /// ```
    Keys, K, |key, _value| key
}

/// The iterator of [`HandlePool::drain`]: removes each live value and
/// yields it with its (now stale) key, in index order.
///
/// Dropping it part-way removes (and drops) the values it has not yielded
/// yet, as std's and slotmap's `drain` do. If it is leaked instead
/// (`mem::forget`), the values not yielded yet stay in the pool, live;
/// nothing is lost either way.
///
/// # Examples
///
/// ```
/// let mut pool = tagpool::HandlePool::new(3);
/// let a = pool.insert('a').unwrap();
/// pool.insert('b').unwrap();
/// let mut drain = pool.drain();
/// assert_eq!(drain.len(), 2);
/// assert_eq!(drain.next(), Some((a, 'a')));
/// drop(drain); // removes 'b' too
/// assert!(pool.is_empty());
/// ```
#[must_use = "a `Drain` removes only the values it reaches: drop it to remove the rest"]
pub struct Drain<'a, T, K = Handle> {
    pub(super) pool: &'a mut HandlePool<T, K>,
    /// The next entry to look at.
    pub(super) next: usize,
    /// The live values not yielded yet.
    pub(super) remaining: usize,
}

impl<T, K: Key> Iterator for Drain<'_, T, K> {
    type Item = (K, T);

    fn next(&mut self) -> Option<(K, T)> {
        while self.next < self.pool.used() {
            let index = self.next as u32;
            self.next += 1;
            let entry = match self.pool.entries.get(index as usize) {
                Some(entry) => entry,
                None => continue,
            };
            // Relaxed: `&mut` of the pool orders everything.
            let state = entry.state.load(Ordering::Relaxed);
            if state & OCCUPIED == 0 {
                continue;
            }
            let value = self.pool.vacate(index);
            self.remaining = self.remaining.saturating_sub(1);
            let key = K::from_handle(Handle::new(index, entry::generation(state)));
            return Some((key, value));
        }
        None
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<T, K: Key> ExactSizeIterator for Drain<'_, T, K> {}

impl<T, K: Key> FusedIterator for Drain<'_, T, K> {}

impl<T, K> Drop for Drain<'_, T, K> {
    fn drop(&mut self) {
        // Each value is out of the pool (its entry free) before its drop
        // runs: a panicking drop leaves the rest in the pool, live.
        self.pool.clear_from(self.next);
    }
}

impl<T, K> fmt::Debug for Drain<'_, T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Drain")
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}
