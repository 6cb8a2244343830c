//! Slot storage: one contiguous allocation of value cells, and the exclusive
//! access a popped index grants to its cell.

use core::fmt;
use core::ptr::NonNull;

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
    /// Segment 0, read on every acquire and release (see [`First`]).
    first: First,
    /// The cells, owned: segment 0 (which `first` views), and the
    /// segments of growth.
    cells: Cells<T>,
}

// SAFETY: `first` views memory owned by `cells` (invariant of `First`), so
// sending the storage sends what `cells` owns, no more: `T`s, as a
// `Box<[Option<T>]>` would. (No `Sync`: the cells are `UnsafeCell`s, as
// before the view was added.)
unsafe impl<T: Send> Send for Slots<T> {}

/// Segment 0's cells as an address and a layout, so that the hot path
/// finds a cell from its index, and an index from its cell, without a
/// `match` on [`Cells`]: a shift or a multiply by a constant, chosen by a
/// flag that never changes (a branch always predicted the same way).
/// Measured in the benchmark crate (`st`, one thread, acquire + touch +
/// release, capacity 1024, so packed cells): +0.05 ns for 64-byte values and
/// +0.13 ns for `Vec`s (about 2.6 and 2.9 ns), against +0.8 ns for a
/// `match` on the two segment types and +0.7 ns for a stride read at run
/// time (a multiply, and an exact division by multiply, on the path from
/// the popped index to the value).
///
/// # Invariants
///
/// - `base` points to segment 0 of the owning [`Slots`]' cells, `len`
///   cells in `bytes` bytes: [`Line`]s if `spread`, else `Cell<T>`s side
///   by side.
#[derive(Debug)]
struct First {
    base: NonNull<u8>,
    /// Segment 0's length, in cells.
    len: u32,
    /// Segment 0's length, in bytes.
    bytes: usize,
    spread: bool,
    /// The pool tracks holds (`Shared::hold_started`): kept here, beside
    /// what every claim reads, so that an acquire's test of it touches no
    /// other cache line.
    tracked: bool,
}

impl First {
    /// The view of `first`, `len` elements of type `E`: `Line`s if
    /// `spread`, cells otherwise.
    fn new<E>(first: NonNull<E>, len: u32, spread: bool) -> Self {
        Self {
            base: first.cast(),
            len,
            bytes: core::mem::size_of::<E>() * len as usize,
            spread,
            tracked: false,
        }
    }
}

/// One slot's value: `None` until the factory fills it.
type Cell<T> = UnsafeCell<Option<T>>;

/// The cells, side by side or a [`Line`] apart (see [`Slots::new`]). The
/// choice is made once, at build.
enum Cells<T> {
    /// `size_of::<Option<T>>()` bytes apart: large pools.
    Packed(Segmented<Cell<T>>),
    /// On lines of their own: small pools (see [`SPREAD_UP_TO`]).
    Spread(Segmented<Line<Cell<T>>>),
}

/// A cell alone on an aligned 128-byte block: two 64-byte cache lines, the
/// pair that x86's adjacent-line prefetcher pulls in together (the reason
/// crossbeam's `CachePadded` is 128 bytes on x86_64 and aarch64). Only
/// cells of at most 128 bytes are spread, so a `Line` is exactly
/// `1 << LINE_SHIFT` bytes. `repr(C)`: the cell is at offset 0, so a
/// pointer to the cell is a pointer to its `Line` (see [`Held::index`]).
#[repr(C, align(128))]
struct Line<C>(C);

/// `log2` of a [`Line`]'s size.
const LINE_SHIFT: u32 = 7;

/// The largest capacity whose cells are spread one per [`Line`].
///
/// Threads that hold neighbouring slots of a small pool write to the same
/// cache line whenever they touch their values (a `Vec`'s length, say): two
/// cores then pass the line back and forth on every write (false sharing).
/// In a small pool every slot is in use all the time, so that is the common
/// case: the benchmark crate's `small16x2` (2 threads, 16 slots, each thread
/// keeping 8 `Vec<u8>`s and replacing the oldest) measured 5 to 37 ns per
/// operation from run to run on 2 CPUs, depending on how the threads' first
/// acquires had interleaved the slots, and 2.5 ns in every run with the
/// cells spread. Spreading costs at most `64 * 128` bytes (8 KiB) a pool;
/// in a large pool, where slots sit in per-thread caches and few
/// neighbours are held by different threads at once, it would multiply the
/// memory of small values for little gain.
pub(crate) const SPREAD_UP_TO: usize = 64;

impl<T> Slots<T> {
    /// Storage of `geometry`'s capacity whose first segment is filled by
    /// `fill`, called with each index in order: a value, or `None` for a
    /// slot the factory fills on its first acquire.
    ///
    /// A pool of 2 to [`SPREAD_UP_TO`] slots spreads its cells a [`Line`]
    /// apart, unless `T` is zero-sized (an [`IndexPool`](crate::IndexPool)'s
    /// cells are never written once filled) or a cell is over 128 bytes (it
    /// shares at most its first and last line); others pack them.
    ///
    /// If `fill` panics, the values made so far are dropped as the
    /// partially built segment unwinds, and the panic propagates.
    pub(crate) fn new(geometry: Geometry, mut fill: impl FnMut(u32) -> Option<T>) -> Self {
        let capacity = geometry.capacity() as usize;
        let spread = (2..=SPREAD_UP_TO).contains(&capacity)
            && core::mem::size_of::<T>() != 0
            && core::mem::size_of::<Cell<T>>() <= 1 << LINE_SHIFT;
        let len = geometry.first();
        let (first, cells) = if spread {
            let cells = Segmented::new(geometry, |i| Line(UnsafeCell::new(fill(i))));
            (
                First::new(cells.first_ptr(), len, true),
                Cells::Spread(cells),
            )
        } else {
            let cells = Segmented::new(geometry, |i| UnsafeCell::new(fill(i)));
            (
                First::new(cells.first_ptr(), len, false),
                Cells::Packed(cells),
            )
        };
        Self { first, cells }
    }

    /// Whether the cells are spread a [`Line`] apart.
    #[cfg(test)]
    pub(crate) fn is_spread(&self) -> bool {
        matches!(self.cells, Cells::Spread(_))
    }

    /// Marks the pool as tracking holds (see `First::tracked`).
    pub(crate) fn track_holds(&mut self) {
        self.first.tracked = true;
    }

    /// Whether the pool tracks holds.
    #[inline(always)]
    pub(crate) fn tracks_holds(&self) -> bool {
        self.first.tracked
    }

    /// Whether segment `k`'s cells can be laid out on this target.
    pub(crate) fn fits(&self, k: u32) -> bool {
        match &self.cells {
            Cells::Packed(cells) => cells.fits(k),
            Cells::Spread(cells) => cells.fits(k),
        }
    }

    /// Allocates segment `k`'s cells, empty, unpublished (see
    /// [`Segmented::prepare`]). The caller holds the growth claim for `k`.
    pub(crate) fn prepare_growth(&self, k: u32) -> GrownCells<T> {
        match &self.cells {
            Cells::Packed(cells) => {
                GrownCells(Grown::Packed(cells.prepare(k, |_| UnsafeCell::new(None))))
            }
            Cells::Spread(cells) => GrownCells(Grown::Spread(
                cells.prepare(k, |_| Line(UnsafeCell::new(None))),
            )),
        }
    }

    /// Publishes the cells made by [`prepare_growth`](Self::prepare_growth).
    /// Never panics.
    pub(crate) fn publish(&self, grown: GrownCells<T>) {
        if cfg!(all(loom, tagpool_loom_grow_moves)) {
            // Loom-only fault injection: a growth that moves the values it
            // has (a `Vec`-style reallocation) reads every cell of segment 0,
            // held or not. The guard model must report the access.
            for i in 0..self.geometry().first() {
                let moved = self.cell(i).get_mut();
                // SAFETY: none: this is the planted bug loom must catch.
                moved.with(|p| unsafe { core::ptr::read_volatile(p.cast::<u8>()) });
            }
        }
        match (&self.cells, grown.0) {
            (Cells::Packed(cells), Grown::Packed(grown)) => cells.publish(grown),
            (Cells::Spread(cells), Grown::Spread(grown)) => cells.publish(grown),
            // `prepare_growth` made `grown` for these cells.
            _ => unreachable!("cells grown for another layout"),
        }
    }

    /// The geometry.
    fn geometry(&self) -> Geometry {
        match &self.cells {
            Cells::Packed(cells) => cells.geometry(),
            Cells::Spread(cells) => cells.geometry(),
        }
    }

    /// The cell at `index`, whose segment is published and visible (see
    /// [`Segmented::get`]).
    #[inline]
    fn cell(&self, index: u32) -> &Cell<T> {
        if index < self.first.len {
            let at = if self.first.spread {
                (index as usize) << LINE_SHIFT
            } else {
                index as usize * core::mem::size_of::<Cell<T>>()
            };
            // SAFETY: `at` is the offset of cell `index` of segment 0, which
            // `base` points to (invariant of `First`), so in bounds.
            let cell = unsafe { self.first.base.as_ptr().add(at) };
            // SAFETY: an initialized cell owned by `self`, at offset 0 of its
            // `Line` if spread (`repr(C)`); only shared references are made.
            return unsafe { &*cell.cast::<Cell<T>>() };
        }
        self.grown_cell(index)
    }

    /// [`cell`](Self::cell) past segment 0, out of line.
    #[inline(never)]
    fn grown_cell(&self, index: u32) -> &Cell<T> {
        match &self.cells {
            Cells::Packed(cells) => cells.get(index),
            Cells::Spread(cells) => &cells.get(index).0,
        }
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
        let cell = self.cell(index);
        Held {
            value: cell.get_mut(),
            #[cfg(all(loom, feature = "loom"))]
            index,
        }
    }
}

impl<T> Slots<T> {
    /// The index of `cell`, a cell past segment 0: out of line.
    #[cfg(not(all(loom, feature = "loom")))]
    #[cold]
    #[inline(never)]
    fn grown_index(&self, cell: *const Option<T>) -> u32 {
        match &self.cells {
            Cells::Packed(cells) => cells.index_of(cell.cast::<Cell<T>>()),
            Cells::Spread(cells) => cells.index_of(cell.cast::<Line<Cell<T>>>()),
        }
    }
}

/// A segment of cells allocated by [`Slots::prepare_growth`], not yet
/// published.
pub(crate) struct GrownCells<T>(Grown<T>);

/// [`GrownCells`]' layouts, as [`Cells`].
enum Grown<T> {
    Packed(Unpublished<Cell<T>>),
    Spread(Unpublished<Line<Cell<T>>>),
}

impl<T> fmt::Debug for Cells<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cells::Packed(cells) => f.debug_tuple("Packed").field(cells).finish(),
            Cells::Spread(cells) => f.debug_tuple("Spread").field(cells).finish(),
        }
    }
}

impl<T> fmt::Debug for Slots<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slots")
            .field("spread", &self.first.spread)
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
            // in it share an address; a spread cell is at offset 0 of its
            // `Line` (`repr(C)`). `value` points at a cell of `slots` (the
            // invariant, and the caller's contract that `slots` is where it
            // was claimed): in segment 0 its distance from `base` is a
            // multiple of the stride, so the exact division is right.
            let first = &slots.first;
            let cell = self.value.addr();
            let at = (cell as usize).wrapping_sub(first.base.as_ptr() as usize);
            if at < first.bytes {
                return if first.spread {
                    (at >> LINE_SHIFT) as u32
                } else {
                    (at / core::mem::size_of::<Cell<T>>()) as u32
                };
            }
            slots.grown_index(cell)
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Storage of `capacity` slots, `first` in segment 0, filled with their
    /// indices.
    fn slots(first: u32, capacity: u32) -> Slots<u64> {
        Slots::new(Geometry::new(first, capacity), |i| Some(u64::from(i)))
    }

    #[test]
    fn small_pools_spread_their_cells_and_others_pack_them() {
        assert!(
            !slots(1, 1).is_spread(),
            "one slot: nothing to share a line with"
        );
        assert!(slots(2, 2).is_spread());
        let top = SPREAD_UP_TO as u32;
        assert!(slots(top, top).is_spread());
        assert!(slots(1, top).is_spread(), "elastic pools too");
        assert!(!slots(top + 1, top + 1).is_spread());
        let unit: Slots<()> = Slots::new(Geometry::new(8, 8), |_| Some(()));
        assert!(!unit.is_spread(), "zero-sized values are never written");
    }

    #[test]
    fn spread_cells_are_a_line_apart_and_give_their_index_back() {
        for (first, capacity) in [(16, 16), (64, 64), (3, 40), (1, 64), (100, 100)] {
            let slots = slots(first, capacity);
            let mut k = 1;
            while slots.geometry().start(k) < capacity && k < slots.geometry().segments() {
                slots.publish(slots.prepare_growth(k));
                k += 1;
            }
            let mut previous: Option<usize> = None;
            for index in 0..capacity {
                // SAFETY: this test is the only owner of every index, and
                // each `Held` is dropped before the next claim.
                let mut held = unsafe { slots.claim(index) };
                if held.is_empty() {
                    held.fill(u64::from(index));
                }
                assert_eq!(*held.get(), u64::from(index));
                let address = slots.cell(index) as *const Cell<u64> as usize;
                if slots.is_spread() {
                    assert_eq!(address % 128, 0, "each spread cell starts a line");
                    if let Some(previous) = previous.filter(|_| index < first) {
                        assert_eq!(address - previous, 128, "segment 0 is one line per slot");
                    }
                }
                previous = Some(address);
                // SAFETY: `held` was claimed from `slots`.
                assert_eq!(unsafe { held.into_index(&slots) }, index);
            }
        }
    }
}
