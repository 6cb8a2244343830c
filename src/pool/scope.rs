//! [`Scope`]: many values for one frame, given back together.

use core::cell::Cell;
use core::convert::Infallible;
use core::fmt;
use core::marker::PhantomData;
use std::time::Instant;

use super::factory_error;
use crate::engine::shared::{untimed, Failure, Shared};
use crate::error::{AcquireError, TryAcquireError};

/// Values of a [`Pool`](crate::Pool) taken for a frame and given back all
/// at once when the scope is dropped: [`Pool::scope`](crate::Pool::scope).
///
/// Each acquire through the scope costs what a guard's does (the thread's
/// cache, else the free list) and returns `&mut T` for as long as the
/// scope is borrowed; nothing is given back one by one. Dropping the scope
/// resets every value (with the pool's reset closure, if any) and returns
/// all the slots to the shared free list in **one** compare-exchange (a
/// chain pre-linked through the free list's own links, which a held slot
/// does not use: no allocation), waking as many waiters. The Java
/// article's "reset all" at the end of a frame, without a second pool.
///
/// A scope belongs to the thread that made it (it is neither `Send` nor
/// `Sync`). Leaking it (`mem::forget`) leaks its slots, as leaking guards
/// does. If a reset panics, the slot goes back empty (the factory refills
/// it), the other slots go back as usual, and the first panic is resumed
/// after the batch is returned.
///
/// # Examples
///
/// ```
/// let pool = tagpool::Pool::builder(Vec::<f32>::new)
///     .capacity(64)
///     .reset(|v: &mut Vec<f32>| v.clear())
///     .build()?;
/// for _frame in 0..3 {
///     let frame = pool.scope();
///     let a = frame.try_acquire().unwrap();
///     let b = frame.try_acquire().unwrap();
///     a.push(1.0);
///     b.extend_from_slice(a);
///     assert_eq!((a.len(), b.len(), frame.len()), (1, 1, 2));
/// } // every frame's values go back here, cleared, in one batch
/// assert_eq!(pool.stats().in_use, 0);
/// # Ok::<(), tagpool::BuildError>(())
/// ```
#[must_use = "a scope dropped at once lends nothing: keep it for the frame"]
pub struct Scope<'a, T, E = Infallible> {
    pool: &'a Shared<T>,
    /// The chain of held slots: the top (the latest taken) and the last
    /// (the first taken), linked through the free list's links.
    chain: Cell<Option<(u32, u32)>>,
    len: Cell<u32>,
    /// The factory's error type, which the acquires return (see `Pool`'s
    /// `_error`).
    _error: PhantomData<fn() -> E>,
}

impl<'a, T, E> Scope<'a, T, E> {
    pub(crate) fn new(pool: &'a Shared<T>) -> Self {
        Self {
            pool,
            chain: Cell::new(None),
            len: Cell::new(0),
            _error: PhantomData,
        }
    }

    /// Takes a value for the rest of the scope without waiting, as
    /// [`Pool::try_acquire`](crate::Pool::try_acquire).
    ///
    /// # Errors
    ///
    /// As [`Pool::try_acquire`](crate::Pool::try_acquire).
    ///
    /// # Panics
    ///
    /// If the factory panics while filling the slot (the slot goes back).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(1, || 0u32);
    /// let frame = pool.scope();
    /// *frame.try_acquire().unwrap() = 7;
    /// assert!(frame.try_acquire().is_err(), "the scope holds the only slot");
    /// ```
    #[allow(clippy::mut_from_ref)] // each call lends a different slot
    #[inline]
    pub fn try_acquire(&self) -> Result<&mut T, TryAcquireError<E>>
    where
        E: 'static,
    {
        match self.pool.try_pop::<false>() {
            Some(index) => self
                .keep(index)
                .map_err(|failure| TryAcquireError::Factory(factory_error(failure))),
            None => Err(self.pool.failure().widen()),
        }
    }

    /// Takes a value for the rest of the scope, waiting if the pool is
    /// empty, as [`Pool::acquire`](crate::Pool::acquire). A scope that
    /// holds every slot itself waits until another thread releases one.
    ///
    /// # Errors
    ///
    /// As [`Pool::acquire`](crate::Pool::acquire).
    ///
    /// # Panics
    ///
    /// If the factory panics while filling the slot.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(2, String::new);
    /// let frame = pool.scope();
    /// frame.acquire().unwrap().push_str("hi");
    /// ```
    #[allow(clippy::mut_from_ref)] // each call lends a different slot
    pub fn acquire(&self) -> Result<&mut T, AcquireError<E>>
    where
        E: 'static,
    {
        let index = self
            .pool
            .pop_waiting::<false>(None::<Instant>)
            .map_err(|err| untimed(err).widen())?;
        self.keep(index)
            .map_err(|failure| AcquireError::Factory(factory_error(failure)))
    }

    /// The number of values the scope holds.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(4, || 0u8);
    /// let frame = pool.scope();
    /// frame.try_acquire().unwrap();
    /// assert_eq!(frame.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.len.get() as usize
    }

    /// Whether the scope holds no value.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(4, || 0u8);
    /// assert!(pool.scope().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len.get() == 0
    }

    /// Fills the slot `index`, popped by this scope, links it on top of the
    /// scope's chain and lends its value; or returns the factory's error
    /// (the slot went back to the pool). The slot kept may be another one:
    /// an empty slot goes back for an idle value (see `Shared::fill`).
    #[allow(clippy::mut_from_ref)]
    fn keep(&self, index: u32) -> Result<&mut T, Failure> {
        let mut held = self.pool.take::<false>(index)?;
        // The slot `take` handed back, not necessarily `index` (which may
        // be on the free list again).
        // SAFETY: `held` was claimed from this pool's slots.
        let index = unsafe { held.index(self.pool.slots()) };
        let value: *mut T = held.get_mut();
        // End the `Held` (and loom's record of the access) here: the value
        // is reached through `value` from now on.
        #[allow(clippy::drop_non_drop)] // `Held` is `Drop` under loom
        drop(held);
        let chain = match self.chain.get() {
            None => (index, index),
            Some((top, last)) => {
                self.pool.link_held(index, top);
                (index, last)
            }
        };
        self.chain.set(Some(chain));
        self.len.set(self.len.get() + 1);
        // The scope owns slot `index` (popped, not pushed) until its drop,
        // which the returned borrow of `self` outlasts; each call lends a
        // different slot; cells never move while the pool (`'a`) lives.
        // SAFETY: exclusive, live, unaliased cell for the borrow (above).
        Ok(unsafe { &mut *value })
    }
}

impl<T, E> Drop for Scope<'_, T, E> {
    fn drop(&mut self) {
        let (top, last) = match self.chain.get() {
            Some(chain) => chain,
            None => return,
        };
        if let Some(payload) = self.pool.release_scope(top, last, self.len.get()) {
            if !std::thread::panicking() {
                std::panic::resume_unwind(payload);
            }
        }
    }
}

impl<T, E> fmt::Debug for Scope<'_, T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scope").field("len", &self.len()).finish()
    }
}
