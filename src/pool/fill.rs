//! A fallible factory's error on its way out of the engine: the fills
//! that return it, still boxed, and [`factory_error`], which unboxes it.

use super::{OwnedPoolGuard, Pool, PoolGuard};
use crate::engine::shared::Failure;
use crate::engine::slot::Held;

/// A fallible factory's error, back from the engine's [`Failure`] box: out
/// of line, on the failure path only, so that an acquire's fast path moves
/// no box and has no drop glue for it (and for `E = Infallible`, the
/// compiler knows the call never returns).
#[cold]
#[inline(never)]
pub(super) fn factory_error<E: 'static>(failure: Failure) -> E {
    // Cannot fail: the only factory that returns an `Err` is the one
    // `Pool::try_builder` made for this pool, which boxes an `E` (the
    // builder's, hence the pool's); `Pool::builder`'s factory never fails
    // and a pool of given values has none.
    *failure
        .downcast::<E>()
        .expect("tagpool: a factory's error is the pool's `E`")
}

impl<T, E: 'static> Pool<T, E> {
    /// [`try_acquire`](Pool::try_acquire) for an empty slot `index`, taken
    /// by it: fills it, out of line. Returns the bare `Held` (for
    /// `E = Infallible`, `Result<Held<T>, E>` is a `Held`, returned in
    /// registers): a returned `Result<PoolGuard, TryAcquireError>` goes
    /// through the stack, and the frame it needs kept the acquire's fast
    /// path from inlining.
    #[cold]
    #[inline(never)]
    pub(super) fn try_fill(&self, index: u32) -> Result<Held<T>, E> {
        self.shared().fill::<false>(index).map_err(factory_error)
    }

    /// A guard for `index`, taken by an async acquire, or the factory's
    /// error, still boxed (the slot is back in the pool then).
    pub(crate) fn guard(&self, index: u32) -> Result<PoolGuard<'_, T>, Failure> {
        let shared = self.shared();
        Ok(PoolGuard::new(shared, shared.take::<false>(index)?))
    }

    /// Builds an owned guard for `index`, taken by `try_pop::<true>` (so
    /// counted as an owned guard), or returns the factory's error, still
    /// boxed (the slot is back in the pool then, its count settled).
    #[inline]
    pub(crate) fn owned_guard(&self, index: u32) -> Result<OwnedPoolGuard<T>, Failure> {
        let held = self.shared().take::<true>(index)?;
        Ok(OwnedPoolGuard::new(*self.shared, held))
    }
}
