//! The entries of a [`HandlePool`](super::HandlePool): one per index, in
//! segments that never move ([`Segmented`]), laid out as the index pool's
//! free list lays out its links.
//!
//! A pool built with [`HandleBuilder::initial`](super::HandleBuilder::initial)
//! allocates the entries of its first `initial` indices at build. The
//! index pool grows its free list as `Pool` does (one thread per segment,
//! doubling); the entries of a new segment are allocated by the first
//! insert that pops one of its indices ([`Segmented::get_or_grow`]: a
//! compare-and-swap publishes them, a thread that lost the race drops its
//! own). So an entry is allocated before any handle can name it, and a
//! reader that does not see an entry's segment yet answers as for a
//! stale handle: no handle of it can have reached that reader.

use core::ops::Index;

use super::entry::Entry;
use crate::engine::segment::{Geometry, Segmented, SlicesMut};

pub(super) struct Entries<T> {
    segments: Segmented<Entry<T>>,
}

impl<T> Entries<T> {
    /// `capacity` entries, the first `initial` of them allocated now.
    pub(super) fn new(initial: u32, capacity: u32) -> Self {
        Self {
            segments: Segmented::new(Geometry::new(initial, capacity), |_| Entry::new()),
        }
    }

    /// Whether every segment of `capacity` entries whose first holds
    /// `initial` can be laid out (its size in bytes fits an `isize`): false
    /// only for huge values on 32-bit targets. Checked at build, so that no
    /// insert meets a segment it cannot allocate after it took an index.
    pub(super) fn fit(initial: u32, capacity: u32) -> bool {
        let geometry = Geometry::new(initial, capacity);
        (0..geometry.segments()).all(|k| geometry.fits::<Entry<T>>(k))
    }

    /// The number of entries, allocated or not.
    #[inline]
    pub(super) fn capacity(&self) -> usize {
        self.segments.geometry().capacity() as usize
    }

    /// The number of entries allocated, as this thread sees them.
    pub(super) fn allocated(&self) -> usize {
        let geometry = self.segments.geometry();
        (0..geometry.segments())
            .filter(|&k| k == 0 || self.segments.try_get(geometry.start(k)).is_some())
            .map(|k| (geometry.end(k) - geometry.start(k)) as usize)
            .sum()
    }

    /// The entry of a handle's index: `None` past the capacity, or if this
    /// thread does not see the entry's segment (no handle of it was
    /// published to this thread: the answer of a stale handle).
    #[inline]
    pub(super) fn get(&self, index: usize) -> Option<&Entry<T>> {
        let first = self.segments.first();
        if index < first.len() {
            // SAFETY: in bounds (checked just above).
            Some(unsafe { first.get_unchecked(index) })
        } else {
            self.get_past_first(index)
        }
    }

    /// [`get`](Self::get) past the first segment: one compare less on the
    /// path of a pool allocated at build.
    #[cold]
    #[inline(never)]
    fn get_past_first(&self, index: usize) -> Option<&Entry<T>> {
        if index < self.capacity() {
            self.segments.try_get(index as u32)
        } else {
            None
        }
    }

    /// The entry of `index` if it is in the first segment (allocated at
    /// build): `None` for any other index, `NIL` included.
    #[inline]
    pub(super) fn first(&self, index: u32) -> Option<&Entry<T>> {
        self.segments.first().get(index as usize)
    }

    /// The entry of `index`, popped from the free list by an insert:
    /// allocates its segment if no thread has.
    #[inline]
    pub(super) fn claim(&self, index: u32) -> &Entry<T> {
        self.segments.get_or_grow(index, |_| Entry::new())
    }

    /// The entry of `index`, which this thread reached before: it owns it
    /// (popped it, took it from a reader count it held), or read its word
    /// through [`get`](Self::get).
    #[inline]
    pub(super) fn at(&self, index: u32) -> &Entry<T> {
        self.segments.get(index)
    }

    /// The entry of `index` through `&mut`: `None` past the capacity or if
    /// it was never allocated.
    #[inline]
    pub(super) fn get_mut(&mut self, index: usize) -> Option<&mut Entry<T>> {
        if index < self.capacity() {
            self.segments.try_get_mut(index as u32)
        } else {
            None
        }
    }

    /// The allocated entries below `end`, in index order, as mutable
    /// slices with their first index.
    pub(super) fn slices_mut(&mut self, end: usize) -> SlicesMut<'_, Entry<T>> {
        self.segments.slices_mut(end as u32)
    }
}

impl<T> Index<usize> for Entries<T> {
    type Output = Entry<T>;

    /// [`at`](Entries::at).
    #[inline]
    fn index(&self, index: usize) -> &Entry<T> {
        self.at(index as u32)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn segments_too_large_for_an_isize_are_refused_before_any_allocation() {
        assert!(Entries::<u64>::fit(1, 1 << 24));
        // 2^40-byte values: 2^23 of them (the last segment) overflow.
        assert!(!Entries::<[u8; 1 << 40]>::fit(1, 1 << 24));
        assert!(!Entries::<[u8; 1 << 40]>::fit(1 << 24, 1 << 24));
    }
}
