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

use core::mem;
use core::ops::Index;

use super::entry::Entry;
use crate::engine::segment::{Geometry, Segmented, SlicesMut};
use crate::index::IndexPool;

pub(super) struct Entries<T> {
    segments: Segmented<Entry<T>>,
    /// The read sections' lookup ([`fast`](Self::fast)): the first
    /// segment's first `2^k` entries, the most a power of two holds, or,
    /// for a first segment of one entry, [`never`](Self::never).
    fast: usize,
    /// An entry no key passes ([`Entry::never`]): the sections' lookup
    /// when the first segment is too short for one (`2^k >= 2`).
    never: Entry<T>,
}

impl<T> Entries<T> {
    /// `capacity` entries, the first `initial` of them allocated now.
    pub(super) fn new(initial: u32, capacity: u32) -> Self {
        let segments = Segmented::new(Geometry::new(initial, capacity), Entry::new);
        let first = segments.first().len();
        Self {
            segments,
            // The highest power of two at most `first` (which is at least 1).
            fast: 1 << (usize::BITS - 1 - first.leading_zeros()),
            never: Entry::never(),
        }
    }

    /// The entries a read section looks a key up in, by its bits masked
    /// with the length minus one (a power of two): the first segment's
    /// first `2^k >= 2` entries, or a one-entry slice of an entry that no
    /// key passes (see [`State`](super::entry::State), "Which keys pass
    /// the compare", for why `2^k` must be at least 2).
    #[inline]
    pub(super) fn fast(&self) -> &[Entry<T>] {
        if self.fast >= 2 {
            &self.segments.first()[..self.fast]
        } else {
            core::slice::from_ref(&self.never)
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

    /// [`get`](Self::get) with no call (see `Segmented::try_get_inline`).
    #[inline(always)]
    pub(super) fn get_inline(&self, index: usize) -> Option<&Entry<T>> {
        if index < self.capacity() {
            self.segments.try_get_inline(index as u32)
        } else {
            None
        }
    }

    /// The entries of the first segment (allocated at build): a walk's
    /// common case, with no per-index segment lookup.
    #[inline]
    pub(super) fn first_segment(&self) -> &[Entry<T>] {
        self.segments.first()
    }

    /// The entry of `index` if it is in the first segment (allocated at
    /// build): `None` for any other index, `NIL` included.
    #[inline]
    pub(super) fn first(&self, index: u32) -> Option<&Entry<T>> {
        self.segments.first().get(index as usize)
    }

    /// The entry of `index`, which an insert owns (popped from `indices`,
    /// taken from the chain of vacated entries or by an eviction):
    /// allocates its segment if no thread has.
    ///
    /// If that allocation unwinds (an allocation failure that panics, as
    /// under `-Z oom=panic`), `index` goes back to `indices` before the
    /// panic goes on, so the pool keeps every entry of its capacity.
    #[inline]
    pub(super) fn claim(&self, index: u32, indices: &IndexPool) -> &Entry<T> {
        match self.first(index) {
            Some(entry) => entry,
            None => self.claim_past_first(index, indices),
        }
    }

    /// [`claim`](Self::claim) past the first segment, whose entries may not
    /// be allocated yet.
    #[cold]
    #[inline(never)]
    fn claim_past_first(&self, index: u32, indices: &IndexPool) -> &Entry<T> {
        let popped = Popped { indices, index };
        let entry = self.segments.get_or_grow(index, Entry::new);
        mem::forget(popped);
        entry
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

/// An index that an insert popped, whose entry's segment it is allocating:
/// dropped only if that allocation unwinds, it gives the index back.
///
/// Only an index popped from the free list can meet a segment that is not
/// allocated (the vacated and evicted entries were filled, hence
/// allocated), and such an index was never filled: the segment is made
/// by the first insert that takes one of its indices, and an index goes
/// back to the free list only after its fill, or here. So its entry,
/// allocated or not, is fresh (first generation, never retired), and the
/// index goes back as it came, with no entry to reset (nor one to read:
/// `HandlePool::give_back` would look at it).
struct Popped<'a> {
    indices: &'a IndexPool,
    index: u32,
}

impl Drop for Popped<'_> {
    #[cold]
    fn drop(&mut self) {
        let (settle, woke) = self.indices.pool().state().push::<false>(self.index);
        debug_assert!(matches!(settle, crate::engine::cache::Settle::Done));
        // The allocation's panic goes on; a waker's is dropped (nobody
        // waits for a handle pool's indices).
        crate::engine::unwind::discard(woke);
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
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::Arc;

    use super::*;
    use crate::engine::segment::fault;
    use crate::HandlePool;

    /// An insert (or `insert_with_key`) whose allocation of a segment of
    /// entries unwinds gives its index back before the panic goes on: its
    /// value is dropped, nothing is published, the pool keeps every entry
    /// of its capacity, and the next insert allocates the segment.
    #[test]
    fn an_insert_whose_segment_allocation_unwinds_gives_its_index_back() {
        for (cache, with_key) in [(false, false), (false, true), (true, false), (true, true)] {
            // Segments: [0], [1], [2, 3].
            let pool = HandlePool::builder()
                .capacity(4)
                .initial(1)
                .thread_cache(cache)
                .build()
                .unwrap();
            let first = pool.insert(Arc::new(0)).unwrap();
            // The index pool grows segment 1 (its links, not the entries),
            // so that the injected fault meets the entries' allocation.
            drop(pool.indices.try_acquire().unwrap());
            assert_eq!(pool.stats().allocated, 1);
            let value = Arc::new(1);
            let moved = Arc::clone(&value);
            fault::fail_next_allocation();
            let caught = catch_unwind(AssertUnwindSafe(|| {
                if with_key {
                    let _ = pool
                        .insert_with_key(|_| -> Arc<i32> { unreachable!("the entry came first") });
                } else {
                    let _ = pool.insert(moved);
                }
            }));
            assert!(caught.is_err(), "the injected fault unwinds the insert");
            assert_eq!(Arc::strong_count(&value), 1, "the value was dropped");
            assert_eq!(pool.stats().allocated, 1, "nothing was published");
            assert_eq!(pool.len(), 1, "the index is back");
            // Every entry of the capacity, the segments allocated now.
            let rest: Vec<_> = (1..4).map(|v| pool.insert(Arc::new(v)).unwrap()).collect();
            assert_eq!((pool.len(), pool.stats().allocated), (4, 4));
            assert!(pool.insert(Arc::new(4)).is_err(), "full");
            assert_eq!(pool.with(first, |v| **v), Some(0));
            for (v, h) in (1..).zip(rest) {
                assert_eq!(
                    pool.with(h, |v| **v),
                    Some(v),
                    "cache {cache}, with_key {with_key}"
                );
            }
        }
    }

    #[test]
    fn segments_too_large_for_an_isize_are_refused_before_any_allocation() {
        assert!(Entries::<u64>::fit(1, 1 << 24));
        // 2^40-byte values: 2^23 of them (the last segment) overflow.
        assert!(!Entries::<[u8; 1 << 40]>::fit(1, 1 << 24));
        assert!(!Entries::<[u8; 1 << 40]>::fit(1 << 24, 1 << 24));
    }
}
