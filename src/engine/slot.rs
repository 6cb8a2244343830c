//! Slot storage: one contiguous allocation of value cells, and the exclusive
//! access a popped index grants to its cell.

use core::fmt;

use crate::engine::segment::{Geometry, Segmented, Unpublished};
use crate::sync::{MutPtr, UnsafeCell};

/// The pool's values: `capacity` cells in segments (see `segment.rs`), each
/// allocated once and never moved.
///
/// # Invariants
///
/// - A cell is accessed only by the party that owns its index (see
///   [`FreeList`](crate::engine::free_list::FreeList)): the free list, which never
///   touches values, or the one [`Held`] created from the pop that took it.
/// - A cell holds `None` when its value was never made (lazy pools), was
///   detached, or was dropped because a reset closure panicked; the next
///   acquirer fills it with the factory.
pub(crate) struct Slots<T> {
    cells: Segmented<UnsafeCell<Option<T>>>,
}

impl<T> Slots<T> {
    /// Storage of `geometry`'s capacity whose first segment is filled by
    /// `fill`, called with each index in order: a value, or `None` for a
    /// slot the factory fills on its first acquire.
    ///
    /// If `fill` panics, the values made so far are dropped as the
    /// partially built segment unwinds, and the panic propagates.
    pub(crate) fn new(geometry: Geometry, mut fill: impl FnMut(u32) -> Option<T>) -> Self {
        Self {
            cells: Segmented::new(geometry, |i| UnsafeCell::new(fill(i))),
        }
    }

    /// Whether segment `k`'s cells can be laid out on this target.
    pub(crate) fn fits(&self, k: u32) -> bool {
        self.cells.fits(k)
    }

    /// Allocates segment `k`'s cells, empty, unpublished (see
    /// [`Segmented::prepare`]). The caller holds the growth claim for `k`.
    pub(crate) fn prepare_growth(&self, k: u32) -> Unpublished<UnsafeCell<Option<T>>> {
        self.cells.prepare(k, |_| UnsafeCell::new(None))
    }

    /// Publishes the cells made by [`prepare_growth`](Self::prepare_growth).
    /// Never panics.
    pub(crate) fn publish(&self, cells: Unpublished<UnsafeCell<Option<T>>>) {
        if cfg!(all(loom, tagpool_loom_grow_moves)) {
            // Loom-only fault injection: a growth that moves the values it
            // has (a `Vec`-style reallocation) reads every cell of segment 0,
            // held or not. The guard model must report the access.
            for i in 0..self.cells.geometry().first() {
                let moved = self.cells.get(i).get_mut();
                // SAFETY: none: this is the planted bug loom must catch.
                moved.with(|p| unsafe { core::ptr::read_volatile(p.cast::<u8>()) });
            }
        }
        self.cells.publish(cells);
    }

    /// Claims the cell at `index`.
    ///
    /// # Safety
    ///
    /// - The caller owns `index`: it popped it from the free list and has not
    ///   pushed it back, and no other `Held` for `index` is alive.
    #[inline]
    pub(crate) unsafe fn claim(&self, index: u32) -> Held<T> {
        // The caller owns `index`, so its segment is published and visible
        // (see `Segmented::get`).
        let cell = self.cells.get(index);
        Held {
            value: cell.get_mut(),
            #[cfg(all(loom, feature = "loom"))]
            index,
        }
    }
}

impl<T> fmt::Debug for Slots<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slots")
            .field("cells", &self.cells)
            .finish_non_exhaustive()
    }
}

/// Exclusive access to one cell, from a pop until the matching push.
///
/// One pointer wide outside loom: the slot's index is the pointer's offset
/// into [`Slots`], computed when it is needed (a subtraction and a multiply
/// by the stride's inverse). That keeps every guard two words, which Rust
/// passes and stores as a pair of registers. A third word (the index)
/// made a guard a 24-byte aggregate that the compiler built on the stack
/// and copied out with a 16-byte load spanning two 8-byte stores, which the
/// CPU cannot forward from its store buffer: a stall of a dozen cycles
/// every time a guard was moved into a collection (measured in `burst256`).
///
/// # Invariants
///
/// - `value` points into the pool's `Slots`, at `index`, and the creator of
///   this `Held` owns `index` (the safety contract of [`Slots::claim`]).
/// - Under loom, the `MutPtr` marks the whole span of the access, so loom
///   reports any other access to the cell while this `Held` lives; loom's
///   pointer does not show its address, so the index is kept beside it.
pub(crate) struct Held<T> {
    value: MutPtr<Option<T>>,
    #[cfg(all(loom, feature = "loom"))]
    index: u32,
}

impl<T> Held<T> {
    /// The cell's index in `slots`.
    ///
    /// # Safety
    ///
    /// - `slots` is the storage this `Held` was claimed from (the pool's
    ///   own: every `Held` comes from its pool's [`Slots::claim`]).
    #[inline]
    pub(crate) unsafe fn index(&self, slots: &Slots<T>) -> u32 {
        #[cfg(all(loom, feature = "loom"))]
        {
            let _ = slots;
            self.index
        }
        #[cfg(not(all(loom, feature = "loom")))]
        {
            // `UnsafeCell` is `repr(transparent)`, so a cell and the value
            // in it share an address, and the cells' stride is the value's.
            // `value` points at a cell of `slots` (the invariant, and the
            // caller's contract that `slots` is where it was claimed).
            slots
                .cells
                .index_of(self.value.addr().cast::<UnsafeCell<Option<T>>>())
        }
    }

    /// Ends the access to the cell, returning the index to push. Until the
    /// push, the caller still owns the index.
    ///
    /// # Safety
    ///
    /// As [`index`](Self::index).
    #[inline]
    pub(crate) unsafe fn into_index(self, slots: &Slots<T>) -> u32 {
        // Dropping `self.value` ends loom's record of the access here, before
        // the slot can have a new owner.
        // SAFETY: the caller's contract.
        unsafe { self.index(slots) }
    }

    /// Whether the cell holds no value yet.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        // SAFETY: this `Held` has exclusive access to the cell (invariant);
        // the shared reference ends before this function returns.
        self.value.with(|p| unsafe { (*p).is_none() })
    }

    /// Stores `value` in the cell.
    #[inline]
    pub(crate) fn fill(&mut self, value: T) {
        // SAFETY: exclusive access (invariant); `&mut self` rules out any
        // reference handed out by `get`/`get_mut` still being alive.
        self.value.with(|p| unsafe { *p = Some(value) });
    }

    /// Takes the value out, leaving the cell empty.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<T> {
        // SAFETY: as for `fill`.
        self.value.with(|p| unsafe { (*p).take() })
    }

    /// The value. The cell must be filled.
    #[inline]
    pub(crate) fn get(&self) -> &T {
        // SAFETY: exclusive access (invariant), and only shared references
        // are created through `&self`.
        let value = self.value.with(|p| unsafe { &*p });
        debug_assert!(value.is_some(), "a guard's slot is always filled");
        // SAFETY: guards hold filled cells: `Pool` fills a cell before it
        // builds a guard, and empties it only while consuming the guard.
        unsafe { value.as_ref().unwrap_unchecked() }
    }

    /// The value, mutably. The cell must be filled.
    #[inline]
    pub(crate) fn get_mut(&mut self) -> &mut T {
        // SAFETY: exclusive access (invariant); `&mut self` rules out any
        // other reference derived from this `Held`.
        let value = self.value.with(|p| unsafe { &mut *p });
        debug_assert!(value.is_some(), "a guard's slot is always filled");
        // SAFETY: as in `get`.
        unsafe { value.as_mut().unwrap_unchecked() }
    }
}

impl<T> fmt::Debug for Held<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Held").finish_non_exhaustive()
    }
}
