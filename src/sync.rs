//! The loom/std shim: the only file that names `std::sync::atomic` or `loom`.
//!
//! Under `cfg(loom)` *and* the `loom` feature, every atomic and every value
//! cell comes from loom, so the models in `loom-tests/` check each access. The
//! std side gives [`UnsafeCell`] the same API as loom's (`with`, `with_mut`,
//! `get_mut` returning a [`MutPtr`]), so the rest of the crate is written once.

#[cfg(all(loom, feature = "loom"))]
pub(crate) use loom::{
    cell::{MutPtr, UnsafeCell},
    sync::atomic::{AtomicU32, AtomicU64, Ordering},
};

/// `Arc` stays std's in both flavours: `self: &Arc<Self>` receivers (the
/// `*_owned` methods) accept only std's `Arc`. Its reference count is not
/// ours to prove; loom still checks every atomic and cell the pool owns.
pub(crate) use std::sync::Arc;

/// Whether an `acquire` on an empty pool spins briefly before parking. Loom
/// models skip the spin: it adds nothing a model can check and multiplies the
/// interleavings.
pub(crate) const SPIN_BEFORE_PARK: bool = cfg!(not(all(loom, feature = "loom")));

#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use self::std_cell::{MutPtr, UnsafeCell};

#[cfg(not(all(loom, feature = "loom")))]
mod std_cell {
    /// `core::cell::UnsafeCell` with loom's API.
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        #[inline]
        pub(crate) const fn new(value: T) -> Self {
            Self(core::cell::UnsafeCell::new(value))
        }

        /// Returns a pointer for a mutable access that lasts as long as the
        /// returned `MutPtr` (loom tracks that span; std does not).
        #[inline]
        pub(crate) fn get_mut(&self) -> MutPtr<T> {
            MutPtr(self.0.get())
        }
    }

    /// A pointer to the inside of an [`UnsafeCell`], as loom's `MutPtr`.
    #[derive(Debug)]
    pub(crate) struct MutPtr<T: ?Sized>(*mut T);

    impl<T: ?Sized> MutPtr<T> {
        /// Runs `f` with the raw pointer.
        #[inline]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0)
        }
    }
}
