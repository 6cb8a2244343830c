//! The iterators of a [`HandlePool`] borrowed `&mut`: [`IterMut`],
//! [`Values`], [`ValuesMut`], [`Keys`] and [`Drain`]. No other thread can
//! reach the pool meanwhile, so they read no reader counts, know exactly
//! how many values they will yield, and walk from either end
//! ([`DoubleEndedIterator`]).

use core::fmt;
use core::iter::FusedIterator;
use core::marker::PhantomData;
use core::ops::Range;
use core::slice;
use std::collections::VecDeque;

use super::entry::{self, Entry};
use super::{Handle, HandlePool, Key};
use crate::engine::segment::SlicesMut;
use crate::sync::Ordering;

/// The entries of one segment not looked at yet, from either end.
struct Run<'a, T> {
    entries: slice::IterMut<'a, Entry<T>>,
    /// One past the index of the last entry of `entries`: the index of an
    /// entry is this less the entries left after it, computed only for
    /// the live ones (no counter in the forward loop over every entry).
    /// A step from the back lowers it by one per entry.
    end: u32,
}

impl<'a, T> Run<'a, T> {
    /// The entries of a segment whose first index is `start`.
    fn new((start, entries): (u32, &'a mut [Entry<T>])) -> Self {
        Self {
            end: start + entries.len() as u32,
            entries: entries.iter_mut(),
        }
    }

    fn empty() -> Self {
        Self {
            entries: [].iter_mut(),
            end: 0,
        }
    }

    /// The next live entry from the front.
    #[inline]
    fn next(&mut self) -> Option<(Handle, &'a mut T)> {
        for entry in &mut self.entries {
            if let Some((generation, value)) = entry.live_mut() {
                let index = self.end - self.entries.len() as u32 - 1;
                // SAFETY: the generation of an occupied word: never 0 (see
                // `Handle::occupied`).
                return Some((unsafe { Handle::occupied(index, generation) }, value));
            }
        }
        None
    }

    /// The next live entry from the back.
    #[inline]
    fn next_back(&mut self) -> Option<(Handle, &'a mut T)> {
        while let Some(entry) = self.entries.next_back() {
            self.end -= 1;
            if let Some((generation, value)) = entry.live_mut() {
                // SAFETY: as in `next`.
                return Some((unsafe { Handle::occupied(self.end, generation) }, value));
            }
        }
        None
    }
}

/// The live entries of a pool borrowed `&mut`, in index order: the walk
/// that the borrowing iterators share.
///
/// Three parts, disjoint, in index order: the `front` run, the segments
/// between (`segments`, then `stash`), the `back` run. The front walks
/// into the middle and, once the middle is empty, takes the back run
/// over; the back walks into the middle and, once it is empty, into the
/// front run from its end. So the two ends meet without ever reaching an
/// entry twice.
struct Live<'a, T> {
    /// The segment the front is in.
    front: Run<'a, T>,
    /// The segment the back is in, once `next_back` left the front's:
    /// empty until then.
    back: Run<'a, T>,
    /// The segments after the front's, cut at the entries ever used (see
    /// `HandlePool::used`), not looked at yet: `None` when there are none
    /// left, while `next_segment` has them, and once a step from the back
    /// moved them to `stash`.
    segments: Option<SlicesMut<'a, Entry<T>>>,
    /// The segments between the two ends, in index order, once a step
    /// from the back needed the last of them (`SlicesMut` walks forward
    /// only): empty, and unallocated, for a walk that never goes back past
    /// the front's segment, and for a pool allocated at build.
    stash: VecDeque<(u32, &'a mut [Entry<T>])>,
    /// The live values not yielded yet: exact, since nothing else changes
    /// the pool while it is borrowed.
    remaining: usize,
}

impl<'a, T> Live<'a, T> {
    fn new<K: Key>(pool: &'a mut HandlePool<T, K>) -> Self {
        let remaining = pool.live_exclusive();
        let used = pool.used();
        let mut segments = pool.entries.slices_mut(used);
        let first = segments.next().unwrap_or((0, &mut []));
        Self {
            front: Run::new(first),
            back: Run::empty(),
            // `None` at once for a pool allocated at build (or one whose
            // values all sit in its first segment): its walk ends with the
            // first slice, without a call.
            segments: if segments.is_done() {
                None
            } else {
                Some(segments)
            },
            stash: VecDeque::new(),
            remaining,
        }
    }

    /// The next live entry's handle and value.
    #[inline]
    fn next(&mut self) -> Option<(Handle, &'a mut T)> {
        loop {
            if let Some(found) = self.front.next() {
                self.remaining = self.remaining.saturating_sub(1);
                return Some(found);
            }
            // Out of line: the loop's own state stays in registers.
            if !self.advance_front() {
                return None;
            }
        }
    }

    /// Moves the front to the next segment: the middle's first, else the
    /// back's run; `false` if there is none.
    #[cold]
    #[inline(never)]
    fn advance_front(&mut self) -> bool {
        if let Some(segments) = self.segments.take() {
            // Given only the segments, by value: no pointer into `Live`
            // escapes.
            let (segments, next) = next_segment(segments);
            if let Some(next) = next {
                self.segments = Some(segments);
                self.front = Run::new(next);
                return true;
            }
        }
        if let Some(next) = self.stash.pop_front() {
            self.front = Run::new(next);
            return true;
        }
        if self.back.entries.len() == 0 {
            return false;
        }
        self.front = core::mem::replace(&mut self.back, Run::empty());
        true
    }

    /// The last live entry not yielded yet: its handle and value.
    fn next_back(&mut self) -> Option<(Handle, &'a mut T)> {
        loop {
            if let Some(found) = self.back.next_back() {
                self.remaining = self.remaining.saturating_sub(1);
                return Some(found);
            }
            if let Some(segments) = self.segments.take() {
                // Into the middle from its end: its segments are stashed.
                self.stash.extend(segments);
            }
            match self.stash.pop_back() {
                Some(last) => self.back = Run::new(last),
                None => {
                    // The middle is empty: the front's run is all that is
                    // left.
                    let found = self.front.next_back()?;
                    self.remaining = self.remaining.saturating_sub(1);
                    return Some(found);
                }
            }
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

        impl<'a, T, K: Key> DoubleEndedIterator for $name<'a, T, K> {
            fn next_back(&mut self) -> Option<$item> {
                let (handle, $value) = self.live.next_back()?;
                let $key = K::from_handle(handle);
                Some($map)
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
    /// a `&mut` to it, in index order (from the back too).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(3);
    /// let a = pool.insert(1).unwrap();
    /// let b = pool.insert(2).unwrap();
    /// let mut iter = pool.iter_mut();
    /// assert_eq!(iter.len(), 2);
    /// assert_eq!(iter.next_back(), Some((b, &mut 2)));
    /// assert_eq!(iter.next(), Some((a, &mut 1)));
    /// assert_eq!(iter.next(), None);
    /// ```
    IterMut, (K, &'a mut T), |key, value| (key, value)
}

live_iterator! {
    /// The iterator of [`HandlePool::values`]: a `&` to each live value, in
    /// index order (from the back too).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(2);
    /// pool.insert(1).unwrap();
    /// pool.insert(2).unwrap();
    /// assert_eq!(pool.values().rev().copied().collect::<Vec<_>>(), [2, 1]);
    /// ```
    Values, &'a T, |_key, value| &*value
}

live_iterator! {
    /// The iterator of [`HandlePool::values_mut`]: a `&mut` to each live
    /// value, in index order (from the back too).
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
    /// index order (from the back too).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(2);
    /// let h = pool.insert(1).unwrap();
    /// assert_eq!(pool.keys().collect::<Vec<_>>(), [h]);
    /// assert_eq!(pool.keys().next_back(), Some(h));
    /// ```
    Keys, K, |key, _value| key
}

/// The entries a draining walk has not looked at yet, `next..end`, taken
/// from either end: the walk of [`Drain`] and of
/// [`HandleIntoIter`](super::HandleIntoIter).
pub(super) struct Span {
    /// The entries not looked at yet.
    range: Range<usize>,
    /// The live values among them: exact, as in [`Live`].
    remaining: usize,
}

impl Span {
    /// Every entry ever used of `pool`, borrowed `&mut` (or owned).
    pub(super) fn new<T, K>(pool: &mut HandlePool<T, K>) -> Self {
        Self {
            remaining: pool.live_exclusive(),
            range: 0..pool.used(),
        }
    }

    /// The entries not looked at yet.
    pub(super) fn rest(&self) -> Range<usize> {
        self.range.clone()
    }

    pub(super) fn remaining(&self) -> usize {
        self.remaining
    }

    /// Removes the first live value of the span from `pool`, with its key.
    pub(super) fn next<T, K: Key>(&mut self, pool: &mut HandlePool<T, K>) -> Option<(K, T)> {
        while let Some(index) = self.range.next() {
            if let Some(taken) = self.take(pool, index) {
                return Some(taken);
            }
        }
        None
    }

    /// Removes the last live value of the span from `pool`, with its key.
    pub(super) fn next_back<T, K: Key>(&mut self, pool: &mut HandlePool<T, K>) -> Option<(K, T)> {
        while let Some(index) = self.range.next_back() {
            if let Some(taken) = self.take(pool, index) {
                return Some(taken);
            }
        }
        None
    }

    /// Removes the value of entry `index`, if it is live.
    fn take<T, K: Key>(&mut self, pool: &mut HandlePool<T, K>, index: usize) -> Option<(K, T)> {
        let entry = pool.entries.get(index)?;
        // Relaxed: `&mut` of the pool orders everything.
        let state = entry.state.load(Ordering::Relaxed);
        if !entry::is_occupied(state) {
            return None;
        }
        let value = pool.vacate(index as u32);
        self.remaining = self.remaining.saturating_sub(1);
        let key = K::from_handle(Handle::new(index as u32, entry::generation(state)));
        Some((key, value))
    }
}

/// The iterator of [`HandlePool::drain`]: removes each live value and
/// yields it with its (now stale) key, in index order (from the back
/// too).
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
/// let c = pool.insert('c').unwrap();
/// let mut drain = pool.drain();
/// assert_eq!(drain.len(), 3);
/// assert_eq!(drain.next(), Some((a, 'a')));
/// assert_eq!(drain.next_back(), Some((c, 'c')));
/// drop(drain); // removes 'b' too
/// assert!(pool.is_empty());
/// ```
#[must_use = "a `Drain` removes only the values it reaches: drop it to remove the rest"]
pub struct Drain<'a, T, K = Handle> {
    pool: &'a mut HandlePool<T, K>,
    span: Span,
}

impl<'a, T, K> Drain<'a, T, K> {
    pub(super) fn new(pool: &'a mut HandlePool<T, K>) -> Self {
        Self {
            span: Span::new(pool),
            pool,
        }
    }
}

impl<T, K: Key> Iterator for Drain<'_, T, K> {
    type Item = (K, T);

    fn next(&mut self) -> Option<(K, T)> {
        self.span.next(self.pool)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.span.remaining(), Some(self.span.remaining()))
    }
}

impl<T, K: Key> DoubleEndedIterator for Drain<'_, T, K> {
    fn next_back(&mut self) -> Option<(K, T)> {
        self.span.next_back(self.pool)
    }
}

impl<T, K: Key> ExactSizeIterator for Drain<'_, T, K> {}

impl<T, K: Key> FusedIterator for Drain<'_, T, K> {}

impl<T, K> Drop for Drain<'_, T, K> {
    fn drop(&mut self) {
        // Each value is out of the pool (its entry free) before its drop
        // runs: a panicking drop leaves the rest in the pool, live.
        self.pool.clear_range(self.span.rest());
    }
}

impl<T, K> fmt::Debug for Drain<'_, T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Drain")
            .field("remaining", &self.span.remaining())
            .finish_non_exhaustive()
    }
}
