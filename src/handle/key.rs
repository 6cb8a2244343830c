//! [`Handle`]: a value's key, its index and the generation of its
//! occupancy in 64 bits.

use core::fmt;

#[cfg(doc)]
use super::HandlePool;

/// A key to a value of a [`HandlePool`]: its index and the generation of
/// the occupancy it names, in 64 bits. `Copy`: store it anywhere, send it
/// anywhere; it never keeps the value alive.
///
/// # Generations
///
/// Every [`remove`](HandlePool::remove) or eviction of an entry bumps its
/// 32-bit generation, so every copy of the handle then answers `None`, and
/// a later value in the same entry has a different handle. The generation
/// wraps after 2^32 occupancies of *one* entry: a handle kept across that
/// many removals and inserts at the same index would match again and reach
/// the value of that later occupancy (never freed memory and never a torn
/// value: only the wrong live value). At a million reuses of one index per
/// second that takes 71 minutes; slotmap and sharded-slab make the same
/// trade (sharded-slab with fewer bits). A handle of another pool may name
/// a live value of this one; one whose index is beyond the capacity names
/// nothing.
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
pub struct Handle(pub(super) u64);

impl Handle {
    pub(super) fn new(index: u32, generation: u32) -> Self {
        Self(u64::from(generation) << 32 | u64::from(index))
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
        self.0 as u32 as usize
    }

    /// The generation of the occupancy this handle names.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(1);
    /// let first = pool.insert(()).unwrap();
    /// pool.remove(first);
    /// let second = pool.insert(()).unwrap();
    /// assert_eq!(second.generation(), first.generation().wrapping_add(1));
    /// ```
    pub fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The handle as 64 bits (generation high, index low), to store or
    /// send where a Rust type cannot go.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(2);
    /// let handle = pool.insert(5).unwrap();
    /// let bits = handle.to_bits();
    /// assert_eq!(tagpool::Handle::from_bits(bits), handle);
    /// ```
    pub fn to_bits(self) -> u64 {
        self.0
    }

    /// The handle [`to_bits`](Handle::to_bits) gave. Any 64 bits make a
    /// handle: one that names nothing live answers `None`.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::<u8>::new(2);
    /// assert!(pool.get(tagpool::Handle::from_bits(u64::MAX)).is_none());
    /// ```
    pub fn from_bits(bits: u64) -> Self {
        Self(bits)
    }
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Handle({}v{})", self.index(), self.generation())
    }
}
