//! Storage in segments that never move: the first allocated when the pool
//! is built, the others when it grows.
//!
//! A pool of `capacity` slots whose first segment holds `first` of them
//! (`first == capacity` unless the pool was built with
//! [`Builder::initial`](crate::Builder::initial)) numbers its slots
//! `0..capacity` once and for all. Segment 0 covers `0..first`; segment
//! `k >= 1` covers `first * 2^(k-1) .. first * 2^k`, cut at the capacity. So
//! each growth doubles the slots the pool has, and the last one stops at the
//! bound. A capacity of at most `2^32 - 2` needs at most 33 segments.
//!
//! The same numbering serves the free list's links and the value cells (two
//! [`Segmented`] arrays), so an index names a link and a cell in segments of
//! the same number.
//!
//! Segment 0 is read on every operation of a pool that never grows: its
//! lookup is one compare against its length and an add. The others are a
//! leading-zero count, a compare against the segment's start and a load of
//! the segment's pointer, out of line; a guard's index (its value's address
//! minus its segment's start) is found by testing the segments' address
//! ranges, the largest first. Measured in the benchmark crate (`st`, one
//! thread, acquire + touch + release): 3.7 ns for a pool with one segment,
//! 7.4 ns for an elastic pool grown from 64 to 1024 slots.
//!
//! # Segments are never freed while the pool lives
//!
//! [`Pool::trim`](crate::Pool::trim) gives back the values' memory; the
//! segments themselves (a link and a cell per slot) stay until the pool is
//! dropped. Freeing an idle segment would need deferred reclamation: a pop
//! reads the link of the head it loaded, and a batch refill walks several,
//! speculatively, so another thread may read a segment's links after the
//! segment left the free list. `crossbeam-epoch` would defer the free, at
//! the price of a pin around every read of links: once per batch with
//! per-thread caches, once per acquire and release without them (fair and
//! small pools). Measured with the benchmark crate's `epoch` binary (one
//! thread, 2 million acquire + release, median of 15 rounds): 3.89 ns per
//! operation for the default pool, 8.13 ns with a pin per operation and
//! 5.60 ns with a pin per 32 operations (+44%); 11.20 ns with caches off,
//! 15.34 ns with a pin per operation (+37%). Both are far above noise, for
//! memory that is a small part of a pool's footprint once its values are
//! trimmed (a cell is `size_of::<Option<T>>()` bytes, the values' own heap
//! memory is what trimming returns), so segment release was left out.

use core::fmt;
use core::ptr::{self, NonNull};

use crate::sync::{AtomicPtr, Ordering};

mod growth;

pub(crate) use self::growth::{Claim, Growth};

/// The most segments a pool can have: segment 0 and one per doubling of a
/// first segment of one slot up to `2^32 - 2`.
pub(crate) const MAX_SEGMENTS: usize = 33;

/// Where each segment starts and ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// The length of segment 0: at least 1.
    first: u32,
    /// The bound: every index is below it.
    capacity: u32,
    /// How many segments cover `0..capacity`.
    segments: u32,
}

impl Geometry {
    /// The geometry of a pool of `capacity` slots whose segment 0 holds
    /// `first` (`1 <= first <= capacity`).
    pub(crate) fn new(first: u32, capacity: u32) -> Self {
        debug_assert!(1 <= first && first <= capacity);
        let mut segments = 1;
        while u64::from(first) << (segments - 1) < u64::from(capacity) {
            segments += 1;
        }
        debug_assert!(segments as usize <= MAX_SEGMENTS);
        Self {
            first,
            capacity,
            segments,
        }
    }

    /// How many segments cover the capacity.
    #[inline]
    pub(crate) fn segments(self) -> u32 {
        self.segments
    }

    /// The first index of segment `k`.
    #[inline]
    pub(crate) fn start(self, k: u32) -> u32 {
        if k == 0 {
            0
        } else {
            (u64::from(self.first) << (k - 1)).min(u64::from(self.capacity)) as u32
        }
    }

    /// One past the last index of segment `k`.
    #[inline]
    pub(crate) fn end(self, k: u32) -> u32 {
        (u64::from(self.first) << k).min(u64::from(self.capacity)) as u32
    }

    /// The bound: every index is below it.
    #[inline]
    pub(crate) fn capacity(self) -> u32 {
        self.capacity
    }

    /// The length of segment 0.
    #[inline]
    pub(crate) fn first(self) -> u32 {
        self.first
    }

    /// Whether segment `k` of `E`s can be laid out: its size in bytes fits
    /// an `isize`.
    pub(crate) fn fits<E>(self, k: u32) -> bool {
        let len = self.end(k) - self.start(k);
        // Checked by hand: `Layout::array` checks `isize::MAX` only since
        // Rust 1.64 (before, only `usize` overflow).
        let limit = isize::MAX as usize - (core::mem::align_of::<E>() - 1);
        usize::try_from(len)
            .ok()
            .and_then(|len| core::mem::size_of::<E>().checked_mul(len))
            .map_or(false, |bytes| bytes <= limit)
    }

    /// The segment that holds `index` (not in segment 0, and below the
    /// capacity).
    #[inline]
    fn segment_past_first(self, index: u32) -> u32 {
        debug_assert!(self.first <= index && index < self.capacity);
        // With `2^a <= index < 2^(a+1)` and `2^c <= first < 2^(c+1)`, the
        // segment `k` (`first * 2^(k-1) <= index < first * 2^k`) is `a - c`
        // or `a - c + 1`; the start of the latter decides.
        let a = 31 - index.leading_zeros();
        let c = 31 - self.first.leading_zeros();
        if u64::from(self.first) << (a - c) <= u64::from(index) {
            a - c + 1
        } else {
            a - c
        }
    }

    /// The segment that holds `index` (not in segment 0, and below the
    /// capacity), and the index's position in it.
    #[inline]
    fn locate_past_first(self, index: u32) -> (u32, u32) {
        let k = self.segment_past_first(index);
        debug_assert!(self.start(k) <= index && index < self.end(k));
        (k, index - self.start(k))
    }
}

/// An array of `capacity` elements in segments (see the module docs): the
/// first allocated at construction, the others by [`grow`](Self::grow).
///
/// # Invariants
///
/// - `first` points to `geometry.first()` initialized elements, owned by
///   this array, for its whole life.
/// - `rest[k - 1].base` is null, or points to the `rest[k - 1].len`
///   initialized elements of segment `k` (indices from `rest[k - 1].start`),
///   owned by this array, and never changes again. It is written once,
///   with Release: by the one thread that grows segment `k` (the pool's
///   growth claim makes it one), or by the compare-and-swap of
///   [`get_or_grow`](Self::get_or_grow), which only one thread wins.
pub(crate) struct Segmented<E> {
    /// Segment 0, read on every operation: first, beside its length.
    first: NonNull<E>,
    geometry: Geometry,
    /// Segments `1..segments`, off the hot line (empty for a pool that
    /// never grows).
    rest: Box<[Grown<E>]>,
}

/// A segment past the first: where it is, once allocated, and which
/// indices it holds.
struct Grown<E> {
    base: AtomicPtr<E>,
    start: u32,
    len: u32,
}

// SAFETY: a `Segmented<E>` owns its elements like a `Box<[E]>`; sending it
// sends them.
unsafe impl<E: Send> Send for Segmented<E> {}

// SAFETY: through `&Segmented<E>` threads get `&E` (never `&mut E`), like
// through `&[E]`; `E: Sync` makes that sound. The segment pointers are
// atomics.
unsafe impl<E: Sync> Sync for Segmented<E> {}

impl<E> Segmented<E> {
    /// An array of `geometry`'s capacity with segment 0 made by `make`
    /// (called with each index, in order) and no other segment.
    ///
    /// If `make` panics, the elements made so far are dropped and the panic
    /// propagates.
    pub(crate) fn new(geometry: Geometry, make: impl FnMut(u32) -> E) -> Self {
        let first = Self::allocate(0..geometry.first(), make);
        Self {
            first,
            geometry,
            rest: (1..geometry.segments())
                .map(|k| Grown {
                    base: AtomicPtr::new(ptr::null_mut()),
                    start: geometry.start(k),
                    len: geometry.end(k) - geometry.start(k),
                })
                .collect(),
        }
    }

    fn allocate(range: core::ops::Range<u32>, make: impl FnMut(u32) -> E) -> NonNull<E> {
        let boxed: Box<[E]> = range.map(make).collect();
        debug_assert!(!boxed.is_empty());
        // The allocation is owned by the array from here (its drop frees it).
        NonNull::from(Box::leak(boxed)).cast()
    }

    /// The geometry.
    #[inline]
    pub(crate) fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Where segment 0's elements start: valid for the array's life
    /// (invariant), for reads and, inside `UnsafeCell`s, for writes.
    pub(crate) fn first_ptr(&self) -> NonNull<E> {
        self.first
    }

    /// Segment 0's elements.
    #[inline]
    pub(crate) fn first(&self) -> &[E] {
        // SAFETY: `first` points to `geometry.first()` initialized elements
        // owned by `self` (invariant).
        unsafe { core::slice::from_raw_parts(self.first.as_ptr(), self.geometry.first() as usize) }
    }

    /// The element at `index`, whose segment must be published and
    /// visible to this thread: the caller owns `index` through the free
    /// list (an index is pushed there only after its segment is published,
    /// so owning it happens-after the publication).
    #[inline]
    pub(crate) fn get(&self, index: u32) -> &E {
        if index < self.geometry.first() {
            // SAFETY: in bounds of segment 0 (checked just above), which
            // `first` points to (invariant).
            let element = unsafe { self.first.as_ptr().add(index as usize) };
            // SAFETY: an initialized element owned by `self`, only shared.
            unsafe { &*element }
        } else {
            self.get_grown(index)
        }
    }

    /// [`get`](Self::get) past segment 0: out of line, so that `get` stays
    /// small enough to inline into every acquire and release of a pool that
    /// never grows, yet short (no `Option`, no slice).
    #[inline(never)]
    fn get_grown(&self, index: u32) -> &E {
        let k = self.geometry.segment_past_first(index);
        // SAFETY: `index` is below the capacity, so `1 <= k < segments`.
        let grown = unsafe { self.rest.get_unchecked(k as usize - 1) };
        // Acquire: pairs with the Release store in `grow`; the caller owns
        // `index`, so the store happened-before and the pointer is set.
        let base = grown.base.load(Ordering::Acquire);
        if base.is_null() {
            unpublished(index);
        }
        debug_assert!(grown.start <= index && index - grown.start < grown.len);
        // SAFETY: `base` points to the segment's `len` elements (invariant)
        // and `index - start` is below `len` (`segment_past_first`).
        let element = unsafe { base.add((index - grown.start) as usize) };
        // SAFETY: an initialized element owned by `self`, only shared.
        unsafe { &*element }
    }

    /// The element at `index` (below the capacity), or `None` if this
    /// thread does not see its segment yet: for speculative reads, which
    /// check what they read afterwards.
    #[inline]
    pub(crate) fn try_get(&self, index: u32) -> Option<&E> {
        if index < self.geometry.first() {
            // SAFETY: in bounds of segment 0 (checked just above).
            Some(unsafe { self.first().get_unchecked(index as usize) })
        } else {
            self.get_past_first(index)
        }
    }

    #[cold]
    #[inline(never)]
    fn get_past_first(&self, index: u32) -> Option<&E> {
        self.get_past_first_inline(index)
    }

    /// [`try_get`](Self::try_get) with no call: for a caller whose hot
    /// loop must not hold one (a call keeps the compiler from unrolling
    /// it), and which reaches this rarely.
    #[inline(always)]
    pub(crate) fn try_get_inline(&self, index: u32) -> Option<&E> {
        if index < self.geometry.first() {
            // SAFETY: in bounds of segment 0 (checked just above).
            Some(unsafe { self.first().get_unchecked(index as usize) })
        } else {
            self.get_past_first_inline(index)
        }
    }

    /// [`get_past_first`](Self::get_past_first)'s body.
    #[inline(always)]
    fn get_past_first_inline(&self, index: u32) -> Option<&E> {
        // A speculative read may hold any value a link ever held: past the
        // capacity there is no element (and no segment to locate).
        if index >= self.geometry.capacity() {
            return None;
        }
        let (k, offset) = self.geometry.locate_past_first(index);
        // In bounds: `locate_past_first` gives a position in segment `k`.
        self.segment(k).map(|segment| &segment[offset as usize])
    }

    /// Segment `k >= 1`, if this thread sees it published.
    #[inline]
    fn segment(&self, k: u32) -> Option<&[E]> {
        let grown = &self.rest[k as usize - 1];
        // Acquire: pairs with the Release store in `grow`, so the elements
        // are initialized before they are read.
        let base = grown.base.load(Ordering::Acquire);
        if base.is_null() {
            return None;
        }
        debug_assert_eq!(grown.len, self.geometry.end(k) - self.geometry.start(k));
        // SAFETY: a non-null segment pointer points to the segment's `len`
        // initialized elements, owned by `self` (invariant).
        Some(unsafe { core::slice::from_raw_parts(base, grown.len as usize) })
    }

    /// Whether segment `k` (`1 <= k < segments`) can be laid out: its size
    /// in bytes fits an `isize` (it may not on 32-bit targets, for a large
    /// pool's last segments). Checked before a thread claims the growth.
    pub(crate) fn fits(&self, k: u32) -> bool {
        self.geometry.fits::<E>(k)
    }

    /// Allocates segment `k` (`1 <= k < segments`) with `make` (called with
    /// each index of the segment), not yet published: nothing but the
    /// caller sees it, and dropping it frees it. The caller holds the
    /// pool's growth claim for `k` (see [`Growth`]), or publishes by
    /// [`get_or_grow`](Self::get_or_grow)'s compare-and-swap; an unwind
    /// from here (an allocation that panics) leaves nothing behind.
    pub(crate) fn prepare(&self, k: u32, make: impl FnMut(u32) -> E) -> Unpublished<E> {
        debug_assert!(k >= 1 && k < self.geometry.segments());
        #[cfg(any(test, all(loom, feature = "loom")))]
        fault::allocation();
        Unpublished {
            k,
            elements: (self.geometry.start(k)..self.geometry.end(k))
                .map(make)
                .collect(),
        }
    }

    /// Publishes a segment made by [`prepare`](Self::prepare) on this
    /// array. Never panics (the growth's last steps rely on it), beyond
    /// the debug check that nobody published the segment before.
    ///
    /// Only one thread may publish a given segment, once: the caller holds
    /// the pool's growth claim for it (see [`Growth`]).
    pub(crate) fn publish(&self, segment: Unpublished<E>) {
        let k = segment.k;
        debug_assert_eq!(
            segment.elements.len() as u32,
            self.geometry.end(k) - self.geometry.start(k)
        );
        debug_assert!(!segment.elements.is_empty());
        // The allocation is owned by the array from here (its drop frees it).
        let base = NonNull::from(Box::leak(segment.elements)).cast::<E>();
        // Loom-only fault injection: a segment published with a Relaxed
        // swap, so a stale walk that finds the pointer reads links whose
        // initialization it does not see.
        let publish = if cfg!(all(loom, tagpool_loom_grow_relaxed)) {
            Ordering::Relaxed
        } else {
            Ordering::Release
        };
        // Release: publishes the elements to every `get` and `try_get` that
        // loads this pointer (Acquire), a stale batch walk's included (it
        // has no other edge to the grower).
        let previous = self.rest[k as usize - 1].base.swap(base.as_ptr(), publish);
        debug_assert!(previous.is_null(), "segment {k} grown twice");
    }

    /// The element at `index` (below the capacity), allocating its segment
    /// with `make` (called with each index of the segment) if no thread has
    /// published it yet: for arrays beside a free list that grows, whose
    /// segments are made by the first thread to need one rather than by a
    /// growth claim (the handle pool's entries).
    ///
    /// Threads may race to make one segment: each allocates its own, one
    /// publishes it by a compare-and-swap, and the others drop theirs and
    /// use it. Nothing moves: a published segment is never replaced.
    ///
    /// If `make` (or the allocation) panics, nothing is published and the
    /// elements made so far are dropped.
    #[inline]
    pub(crate) fn get_or_grow(&self, index: u32, make: impl FnMut(u32) -> E) -> &E {
        if index < self.geometry.first() {
            // SAFETY: in bounds of segment 0 (checked just above).
            unsafe { self.first().get_unchecked(index as usize) }
        } else {
            self.get_or_grow_past_first(index, make)
        }
    }

    #[cold]
    #[inline(never)]
    fn get_or_grow_past_first(&self, index: u32, make: impl FnMut(u32) -> E) -> &E {
        let (k, offset) = self.geometry.locate_past_first(index);
        if let Some(segment) = self.segment(k) {
            return &segment[offset as usize];
        }
        let grown = &self.rest[k as usize - 1];
        let made = self.prepare(k, make).elements;
        let len = made.len();
        debug_assert_eq!(len, grown.len as usize);
        let base = Box::into_raw(made).cast::<E>();
        // Loom-only fault injection: a segment published by a plain swap
        // rather than a compare-and-swap, so that a thread that lost the
        // race replaces the winner's segment (and the value in it).
        let raced = if cfg!(all(loom, tagpool_loom_entries_overwrite)) {
            let previous = grown.base.swap(base, Ordering::AcqRel);
            if previous.is_null() {
                Ok(previous)
            } else {
                Err(base)
            }
        } else {
            // Release: publishes the elements to every thread that loads
            // this pointer (Acquire, in `segment`). Acquire on failure:
            // pairs with the winner's Release, so its elements are seen.
            // (AcqRel on success only because Rust before 1.64 refuses a
            // failure ordering stronger than the success one; the Acquire
            // half reads null and orders nothing.)
            grown
                .base
                .compare_exchange(ptr::null_mut(), base, Ordering::AcqRel, Ordering::Acquire)
        };
        let base = match raced {
            Ok(_) => base,
            Err(winner) => {
                if winner != base {
                    // SAFETY: `base` came from the `Box<[E]>` of `len`
                    // elements leaked just above, which no other thread
                    // saw (the compare-and-swap failed).
                    drop(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(base, len)) });
                }
                winner
            }
        };
        // SAFETY: `base` is the published segment `k` (ours, or the one
        // that won), `len` elements (invariant), and `offset` is a position
        // in it (`locate_past_first`).
        let element = unsafe { base.add(offset as usize) };
        // SAFETY: an initialized element owned by `self`, only shared.
        unsafe { &*element }
    }

    /// The element at `index` (below the capacity) through `&mut`, or
    /// `None` if its segment was never made.
    pub(crate) fn try_get_mut(&mut self, index: u32) -> Option<&mut E> {
        let element = if index < self.geometry.first() {
            // SAFETY: in bounds of segment 0 (checked just above).
            unsafe { self.first.as_ptr().add(index as usize) }
        } else {
            let (k, offset) = self.geometry.locate_past_first(index);
            // Relaxed: `&mut self` orders every publication before this.
            let base = self.rest[k as usize - 1].base.load(Ordering::Relaxed);
            if base.is_null() {
                return None;
            }
            // SAFETY: `base` points to segment `k`'s elements (invariant)
            // and `offset` is a position in it (`locate_past_first`).
            unsafe { base.add(offset as usize) }
        };
        // SAFETY: an initialized element owned by `self` (invariant), and
        // `&mut self` keeps every other reference to it out.
        Some(unsafe { &mut *element })
    }

    /// The published segments in index order, each cut at `end`, as
    /// mutable slices: the exclusive walk over the array.
    pub(crate) fn slices_mut(&mut self, end: u32) -> SlicesMut<'_, E> {
        SlicesMut {
            array: NonNull::from(&*self),
            k: 0,
            end: end.min(self.geometry.capacity()),
            _borrow: core::marker::PhantomData,
        }
    }

    /// [`prepare`](Self::prepare) and [`publish`](Self::publish) at once.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn grow(&self, k: u32, make: impl FnMut(u32) -> E) {
        self.publish(self.prepare(k, make));
    }

    /// The index of the element `element` points to, which must be an
    /// element of this array (the caller got it from `get`).
    #[inline]
    #[cfg_attr(all(loom, feature = "loom"), allow(dead_code))]
    pub(crate) fn index_of(&self, element: *const E) -> u32 {
        // The distance from segment 0's start, in elements, computed on
        // addresses: a pointer into another segment gives a number that is
        // no index of segment 0 (it fails the test), or wraps around to one
        // that is equally out of range.
        let offset = (element as usize).wrapping_sub(self.first.as_ptr() as usize)
            / core::mem::size_of::<E>();
        if offset < self.geometry.first() as usize {
            return offset as u32;
        }
        self.index_past_first(element)
    }

    #[cold]
    #[inline(never)]
    #[cfg_attr(all(loom, feature = "loom"), allow(dead_code))]
    fn index_past_first(&self, element: *const E) -> u32 {
        // The largest segments, which hold most slots, first.
        for grown in self.rest.iter().rev() {
            // Relaxed: the segment that holds `element` is visible to this
            // thread already (it got `element` from `get`); any other
            // pointer only fails the range test.
            let base = grown.base.load(Ordering::Relaxed);
            // As in `index_of`: an element of another segment fails.
            let offset = (element as usize).wrapping_sub(base as usize) / core::mem::size_of::<E>();
            if !base.is_null() && offset < grown.len as usize {
                return grown.start + offset as u32;
            }
        }
        unreachable!("an element pointer outside its array")
    }
}

/// The published segments of a [`Segmented`] borrowed `&mut`, from
/// [`Segmented::slices_mut`]: disjoint slices, each yielded once.
pub(crate) struct SlicesMut<'a, E> {
    array: NonNull<Segmented<E>>,
    /// The next segment.
    k: u32,
    /// No slice reaches past this index.
    end: u32,
    _borrow: core::marker::PhantomData<&'a mut Segmented<E>>,
}

// SAFETY: a `SlicesMut<'a, E>` hands out `&'a mut [E]`s of an array it
// borrows `&'a mut` (its pointer is that borrow): as `&'a mut [E]`, it may
// move to another thread where `E: Send`, and be shared where `E: Sync`.
unsafe impl<E: Send> Send for SlicesMut<'_, E> {}

// SAFETY: as above; through `&SlicesMut` nothing but the geometry is read.
unsafe impl<E: Sync> Sync for SlicesMut<'_, E> {}

impl<E> SlicesMut<'_, E> {
    /// Whether no segment is left to look at (a published one or not).
    pub(crate) fn is_done(&self) -> bool {
        // SAFETY: as in `next`: only the geometry is read.
        let geometry = unsafe { self.array.as_ref() }.geometry;
        self.k >= geometry.segments() || geometry.start(self.k) >= self.end
    }
}

impl<'a, E> Iterator for SlicesMut<'a, E> {
    /// A segment's first index and its elements below `end`.
    type Item = (u32, &'a mut [E]);

    fn next(&mut self) -> Option<Self::Item> {
        // SAFETY: the array is borrowed `&mut` for `'a` (`slices_mut`);
        // this shared reference reads only its geometry and pointers.
        let array = unsafe { self.array.as_ref() };
        let geometry = array.geometry;
        while self.k < geometry.segments() {
            let k = self.k;
            let start = geometry.start(k);
            if start >= self.end {
                break;
            }
            self.k += 1;
            let base = if k == 0 {
                array.first.as_ptr()
            } else {
                // Relaxed: the array is borrowed `&mut`, which orders every
                // publication before this walk.
                array.rest[k as usize - 1].base.load(Ordering::Relaxed)
            };
            if base.is_null() {
                // Never made: a later segment may have been.
                continue;
            }
            let len = (geometry.end(k).min(self.end) - start) as usize;
            // `base` points to segment `k`'s initialized elements, at least
            // `len` of them (invariant); each segment is yielded once, so
            // the `&mut` slices are disjoint.
            // SAFETY: as above; the array's `&mut` borrow for `'a` keeps
            // every other access out.
            let slice = unsafe { core::slice::from_raw_parts_mut(base, len) };
            return Some((start, slice));
        }
        None
    }
}

/// A segment allocated by [`Segmented::prepare`] and not yet published:
/// owned by the growing thread, freed if dropped (a growth that unwinds).
pub(crate) struct Unpublished<E> {
    k: u32,
    elements: Box<[E]>,
}

impl<E> fmt::Debug for Unpublished<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Unpublished")
            .field("k", &self.k)
            .finish_non_exhaustive()
    }
}

/// Test-only fault injection: makes the next segment allocation panic, as
/// an allocation over `isize::MAX` bytes (or one that fails under
/// `-Z oom=panic`) does. Per OS thread: under loom every thread of a model
/// runs on the test's OS thread, so the switch is per model (armed through
/// `tagpool::__loom_fail_next_growth`) and adds no interleavings.
#[cfg(any(test, all(loom, feature = "loom")))]
pub(crate) mod fault {
    use std::cell::Cell;

    std::thread_local! {
        static FAIL_NEXT: Cell<bool> = const { Cell::new(false) };
    }

    /// The next [`allocation`] on this OS thread panics.
    pub(crate) fn fail_next_allocation() {
        FAIL_NEXT.with(|f| f.set(true));
    }

    /// Panics once if [`fail_next_allocation`] was called on this OS thread.
    pub(crate) fn allocation() {
        if FAIL_NEXT.with(|f| f.replace(false)) {
            panic!("tagpool test: injected segment allocation failure");
        }
    }
}

/// A segment pointer read as null for an index its reader owns: a broken
/// invariant, never a recoverable state.
#[cold]
#[inline(never)]
fn unpublished(index: u32) -> ! {
    panic!("slot {index} is owned, yet its segment is not published")
}

impl<E> Drop for Segmented<E> {
    fn drop(&mut self) {
        // Every array is taken back first and dropped in one `Vec`, which
        // goes on with the others if an element's drop (a pooled value's,
        // user code) panics: dropping them one after the other would leak
        // the segments after the one that panicked.
        let mut arrays = Vec::with_capacity(self.geometry.segments() as usize);
        let len = self.geometry.first() as usize;
        // SAFETY: `first` came from a leaked `Box<[E]>` of `len` elements,
        // freed only here.
        arrays.push(unsafe {
            Box::from_raw(ptr::slice_from_raw_parts_mut(self.first.as_ptr(), len))
        });
        for grown in self.rest.iter() {
            // Relaxed: `&mut self`, so no other thread uses the array.
            let base = grown.base.load(Ordering::Relaxed);
            if !base.is_null() {
                let len = grown.len as usize;
                // SAFETY: as for `first`, from `grow`.
                arrays.push(unsafe { Box::from_raw(ptr::slice_from_raw_parts_mut(base, len)) });
            }
        }
        drop(arrays);
    }
}

impl<E> fmt::Debug for Segmented<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segmented")
            .field("geometry", &self.geometry)
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn segments_double_the_slots_and_stop_at_the_capacity() {
        let g = Geometry::new(3, 20);
        assert_eq!(g.segments(), 4);
        let spans: Vec<_> = (0..g.segments()).map(|k| (g.start(k), g.end(k))).collect();
        assert_eq!(spans, [(0, 3), (3, 6), (6, 12), (12, 20)]);
        assert_eq!(Geometry::new(20, 20).segments(), 1);
        assert_eq!(Geometry::new(1, 1).segments(), 1);
        let max = u32::MAX - 1;
        assert_eq!(Geometry::new(1, max).segments() as usize, MAX_SEGMENTS);
        assert_eq!(Geometry::new(1, max).end(32), max);
    }

    #[test]
    fn every_index_is_located_in_its_segment() {
        for (first, capacity) in [(1, 1000), (3, 1000), (7, 777), (64, 4096), (1000, 1001)] {
            let g = Geometry::new(first, capacity);
            for index in first..capacity {
                let (k, offset) = g.locate_past_first(index);
                assert!(g.start(k) <= index && index < g.end(k), "{first} {index}");
                assert_eq!(g.start(k) + offset, index);
            }
        }
        let g = Geometry::new(1, u32::MAX - 1);
        for index in [1, 2, 3, 1 << 31, (1 << 31) - 1, u32::MAX - 2] {
            let (k, offset) = g.locate_past_first(index);
            assert_eq!(g.start(k) + offset, index);
        }
    }

    #[test]
    fn grown_segments_are_found_and_indexed() {
        let g = Geometry::new(2, 11);
        let a = Segmented::new(g, |i| i * 10);
        assert_eq!(a.try_get(5), None, "not grown yet");
        a.grow(1, |i| i * 10);
        a.grow(2, |i| i * 10);
        a.grow(3, |i| i * 10);
        for i in 0..11 {
            let e = a.get(i);
            assert_eq!(*e, i * 10);
            assert_eq!(a.index_of(e), i);
        }
    }

    #[test]
    fn the_growth_claim_goes_to_one_thread() {
        let growth = Growth::new(3);
        let fits = |_| true;
        assert_eq!(growth.claim(fits), Claim::Grow(1));
        assert_eq!(growth.claim(fits), Claim::Busy);
        growth.publish(1);
        assert_eq!(growth.published(), 2);
        assert_eq!(growth.claim(fits), Claim::Grow(2));
        growth.abandon(2);
        assert_eq!(growth.published(), 2);
        assert_eq!(growth.claim(|k| k != 2), Claim::TooLarge(2));
        assert_eq!(growth.claim(fits), Claim::Grow(2));
        growth.publish(2);
        assert_eq!(growth.published(), 3);
        assert_eq!(growth.claim(fits), Claim::Full);
    }

    #[test]
    #[cfg(target_pointer_width = "64")]
    fn a_segment_over_isize_max_bytes_does_not_fit() {
        // The last of 33 segments holds 2^31 - 2 slots: 32 GiB of `u128`
        // fits a 64-bit `isize`; as many 2^33-byte elements do not.
        let g = Geometry::new(1, u32::MAX - 1);
        assert!(g.fits::<u128>(1) && g.fits::<u128>(32));
        assert!(g.fits::<[u8; 1 << 33]>(1));
        assert!(!g.fits::<[u8; 1 << 33]>(32));
    }
}
