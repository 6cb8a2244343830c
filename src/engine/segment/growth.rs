//! [`Growth`]: the claim that makes one thread grow each segment of a
//! [`Segmented`](super::Segmented) array, and the end of each growth that
//! publishes it.

use crate::sync::{AtomicU32, Ordering};

/// The pool's growth: how many segments are published, and whether a
/// thread is allocating the next one.
///
/// # Invariants
///
/// - `state` is `2 * n` when segments `0..n` are published and nobody
///   grows, or `2 * n + 1` while one thread (the one whose CAS set the low
///   bit) allocates segment `n`. It only increases, except when a growth
///   is abandoned: a grower that unwinds before it published anything
///   (see [`Growth::abandon`]) takes it back from `2 * n + 1` to `2 * n`.
#[derive(Debug)]
pub(crate) struct Growth {
    state: AtomicU32,
    segments: u32,
}

/// What [`Growth::claim`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// This thread must allocate segment `k`, then [`Growth::publish`] it.
    Grow(u32),
    /// Another thread is allocating a segment.
    Busy,
    /// Every segment is allocated: the pool is at its bound.
    Full,
    /// Segment `k` is next, but cannot be laid out on this target (its
    /// size in bytes overflows an `isize`): nothing was claimed.
    TooLarge(u32),
}

impl Growth {
    /// A pool with segment 0 allocated, out of `segments`.
    pub(crate) fn new(segments: u32) -> Self {
        Self {
            state: AtomicU32::new(2),
            segments,
        }
    }

    /// How many segments are published (a snapshot).
    #[inline]
    pub(crate) fn published(&self) -> u32 {
        // Acquire: pairs with the Release store in `publish`.
        self.state.load(Ordering::Acquire) / 2
    }

    /// Whether every segment is published, so that [`claim`](Self::claim)
    /// answers [`Claim::Full`] (a snapshot; final once `true`).
    #[inline]
    pub(crate) fn complete(&self) -> bool {
        self.published() == self.segments
    }

    /// Claims the growth of the next segment, if `fits` says it can be
    /// laid out (it is asked before the claim, so a segment that never can
    /// is refused without ever setting the claim).
    pub(crate) fn claim(&self, fits: impl FnOnce(u32) -> bool) -> Claim {
        // Acquire: pairs with `publish` (Release), which follows the push
        // of the segment's slots: a thread that finds every segment grown
        // then sees those slots in the free list (see `Shared::grow`).
        // Otherwise the CAS decides, and nothing is read through the state.
        let state = self.state.load(Ordering::Acquire);
        if state / 2 == self.segments {
            return Claim::Full;
        }
        if state & 1 == 0 && !fits(state / 2) {
            return Claim::TooLarge(state / 2);
        }
        if state & 1 == 1 {
            if cfg!(all(loom, tagpool_loom_grow_unclaimed)) {
                // Loom-only fault injection: a thread that finds another
                // one growing grows the same segment too.
                return Claim::Grow(state / 2);
            }
            return Claim::Busy;
        }
        // Relaxed: the claim orders nothing; the segment's publication does
        // (`publish` and the free list's push).
        match self
            .state
            .compare_exchange(state, state | 1, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => Claim::Grow(state / 2),
            Err(_) => Claim::Busy,
        }
    }

    /// Ends the growth of segment `k`, claimed by this thread and now
    /// allocated and published.
    pub(crate) fn publish(&self, k: u32) {
        // Release: pairs with the Acquire loads in `published`, `claim` and
        // `wait_while_busy`. The grower pushed the segment's slots before
        // this store, so a thread that then finds the growth over (every
        // segment grown, or the claim free again) and pops the free list
        // sees them: it does not report the pool exhausted with those slots
        // free. (The segment's elements are published by their own pointer,
        // `Segmented::publish`, Release.)
        self.state.store(2 * (k + 1), Ordering::Release);
    }

    /// Gives up the growth of segment `k`, claimed by this thread, of which
    /// nothing was published: another thread may claim it again.
    pub(crate) fn abandon(&self, k: u32) {
        if cfg!(all(loom, tagpool_loom_grow_claim_kept)) {
            // Loom-only fault injection: the claim outlives the unwound
            // growth, and every thread that finds the pool exhausted waits
            // for it forever.
            return;
        }
        // Release: nothing was published, so nothing needs ordering; the
        // waiters in `wait_while_busy` (Acquire, for `publish`) only need
        // to see the low bit clear here, and the next claimant's CAS
        // starts from this value.
        self.state.store(2 * k, Ordering::Release);
    }

    /// Waits until no thread is growing the pool.
    pub(crate) fn wait_while_busy(&self) {
        // Acquire: pairs with `publish` (Release): the caller then pops the
        // free list and sees the slots the growth pushed.
        while self.state.load(Ordering::Acquire) & 1 == 1 {
            crate::sync::yield_now();
        }
    }
}
