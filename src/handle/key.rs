//! [`Handle`]: a value's key, its index and the generation of its
//! occupancy in 64 bits.

use core::fmt;
use core::num::NonZeroU64;

#[cfg(doc)]
use super::HandlePool;

/// The bits of a handle's index: the low 24.
pub(super) const INDEX_BITS: u32 = 24;
/// The index's mask.
pub(super) const INDEX_MASK: u64 = (1 << INDEX_BITS) - 1;

/// The most entries a [`HandlePool`] can have: `2^24` (16,777,216), the
/// indices a [`Handle`]'s 24 index bits can name. The other 40 bits of the
/// handle are its generation.
///
/// # Examples
///
/// ```
/// use tagpool::{BuildError, HandlePool, MAX_HANDLE_CAPACITY};
///
/// let too_many = MAX_HANDLE_CAPACITY + 1;
/// let err = HandlePool::<u8>::builder().capacity(too_many).build().unwrap_err();
/// assert_eq!(err, BuildError::CapacityTooLarge { requested: too_many, max: 1 << 24 });
/// ```
pub const MAX_HANDLE_CAPACITY: usize = 1 << INDEX_BITS;

/// The first generation of every entry.
pub(super) const FIRST_GENERATION: u64 = 1;
/// The last generation of every entry: `2^39 - 1`. A handle's generation
/// field has 40 bits, but an entry's state word keeps its top bit for a
/// flag (`entry::NONLIVE`), so no generation a pool hands out sets it.
pub(super) const MAX_GENERATION: u64 = (1 << (63 - INDEX_BITS)) - 1;

/// A key to a value of a [`HandlePool`]: its index and the generation of
/// the occupancy it names, in 64 bits. `Copy`: store it anywhere, send it
/// anywhere; it never keeps the value alive.
///
/// # Layout
///
/// The generation in the high 40 bits (of which a pool's handles use the
/// low 39: [`Handle::MAX_GENERATION`]), the index in the low 24
/// ([`to_bits`](Handle::to_bits)); hence
/// [`MAX_HANDLE_CAPACITY`](crate::MAX_HANDLE_CAPACITY) = `2^24`. No
/// handle is 0 (generations start at 1), so `Option<Handle>` is 8 bytes
/// too, as are the typed keys of [`new_key_type!`](crate::new_key_type)
/// and their `Option`s:
///
/// ```
/// use std::mem::size_of;
/// assert_eq!(size_of::<Option<tagpool::Handle>>(), 8);
/// ```
///
/// # Generations: a stale handle never matches again
///
/// Every [`remove`](HandlePool::remove) or eviction of an entry moves it to
/// its next generation, so every copy of the handle then answers `None`,
/// and a later value in the same entry has a different handle. Generations
/// run from 1 to [`Handle::MAX_GENERATION`] (`2^39 - 1`) and never wrap:
/// an entry whose last occupancy (its `2^39 - 1`th) ends is *retired*,
/// never handed out again. So a handle stays stale across any number of
/// reuses of its entry, and never names another value, at every capacity.
///
/// The price is capacity, and only after a very long time: a pool loses one
/// usable entry for each entry that has held `2^39 - 1` values
/// ([`HandlePool::retired`] counts them). The free list hands out the most
/// recently freed entry first, so one hot entry takes most of the churn of
/// a pool that inserts and removes one value at a time: at 6 ns per insert
/// and remove, back to back on one thread without pause, that entry
/// retires after 55 minutes of nothing else, and the next one takes over; at
/// a million reuses of one entry per second, after 6.4 days; at 60,000 per
/// second (1,000 a frame at 60 frames per second), after 106 days. (slotmap
/// and thunderdome wrap a 32-bit version instead: their stale keys match
/// again after `2^31` to `2^32` reuses, under half a minute at 6 ns.)
///
/// A handle of another pool may name a live value of this one (typed keys,
/// [`new_key_type!`](crate::new_key_type), prevent that); one whose index is
/// beyond the capacity names nothing.
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(4);
/// let handle = pool.insert("a").unwrap();
/// let copy = handle;
/// assert!(pool.remove(handle));
/// assert!(pool.get(copy).is_none(), "every copy goes stale");
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(NonZeroU64);

impl Handle {
    /// The last generation of an entry, `2^39 - 1`: the entry retires when
    /// the occupancy of this generation ends (see [Generations](Handle#generations-a-stale-handle-never-matches-again)).
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tagpool::Handle::MAX_GENERATION, (1 << 39) - 1);
    /// ```
    pub const MAX_GENERATION: u64 = MAX_GENERATION;

    /// The handle of entry `index` (below `MAX_HANDLE_CAPACITY`) under
    /// `generation` (at most `MAX_GENERATION`).
    #[inline]
    pub(super) fn new(index: u32, generation: u64) -> Self {
        debug_assert!(u64::from(index) <= INDEX_MASK && generation <= MAX_GENERATION);
        let bits = generation << INDEX_BITS | u64::from(index);
        // A pool's generations start at 1: the bits are never 0.
        match NonZeroU64::new(bits) {
            Some(bits) => Self(bits),
            None => generation_zero(),
        }
    }

    /// [`new`](Self::new) without its check, for the walks over occupied
    /// entries (one test and branch less per value of `iter_mut`).
    ///
    /// # Safety
    ///
    /// `generation` is that of an occupied entry's word, which is never
    /// 0: generations run from 1, and a retired entry (generation 0) is
    /// never handed out, so never published (`Entry::publish` asserts it in
    /// debug builds). So the bits are not 0.
    #[inline]
    pub(super) unsafe fn occupied(index: u32, generation: u64) -> Self {
        debug_assert!(generation != 0, "an occupied entry of generation 0");
        debug_assert!(u64::from(index) <= INDEX_MASK && generation <= MAX_GENERATION);
        let bits = generation << INDEX_BITS | u64::from(index);
        // SAFETY: `generation >= 1` (this function's contract), so `bits`
        // has a bit set above the index.
        Self(unsafe { NonZeroU64::new_unchecked(bits) })
    }

    /// The entry's index, in `0..capacity`: stable for the life of the
    /// value, so it can address arrays of the caller's beside the pool.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(1);
    /// assert_eq!(pool.insert(()).unwrap().index(), 0);
    /// ```
    pub fn index(self) -> usize {
        (self.0.get() & INDEX_MASK) as usize
    }

    /// The generation of the occupancy this handle names: from 1 to
    /// [`MAX_GENERATION`](Handle::MAX_GENERATION).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(1);
    /// let first = pool.insert(()).unwrap();
    /// pool.remove(first);
    /// let second = pool.insert(()).unwrap();
    /// assert_eq!((first.generation(), second.generation()), (1, 2));
    /// ```
    pub fn generation(self) -> u64 {
        self.0.get() >> INDEX_BITS
    }

    /// The handle as 64 bits (the generation in the high 40, the index in
    /// the low 24), to store or send where a Rust type cannot go.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(2);
    /// let handle = pool.insert(5).unwrap();
    /// let bits = handle.to_bits();
    /// assert_eq!(tagpool::Handle::from_bits(bits), Some(handle));
    /// ```
    pub fn to_bits(self) -> u64 {
        self.0.get()
    }

    /// The handle whose [`to_bits`](Handle::to_bits) are `bits`, or `None`
    /// for bits that no pool hands out: those of generation 0 (the high 40
    /// bits all 0; `0` among them). Any other 64 bits make a handle, and
    /// one that names nothing live answers `None` from every pool.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::Handle;
    ///
    /// let pool = tagpool::HandlePool::<u8>::new(2);
    /// let any = Handle::from_bits(u64::MAX).unwrap();
    /// assert!(pool.get(any).is_none());
    /// assert_eq!(Handle::from_bits(0), None);
    /// assert_eq!(Handle::from_bits(5), None, "index 5, generation 0");
    /// ```
    pub fn from_bits(bits: u64) -> Option<Self> {
        if bits >> INDEX_BITS == 0 {
            return None;
        }
        NonZeroU64::new(bits).map(Self)
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Handle({}v{})", self.index(), self.generation())
    }
}

/// [`Handle::new`] of a retired entry (generation 0): a bug, never reached
/// (the loom fault `tagpool_loom_retire_reuses` reaches it on purpose).
#[cold]
#[inline(never)]
fn generation_zero() -> ! {
    panic!("tagpool: a handle of generation 0")
}
