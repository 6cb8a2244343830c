//! Revoking caches: a thread's flush of its own stack, and the sweep that
//! moves other threads' stacks to the free list through the asymmetric
//! barrier. A flush wakes waiters and waiters sweep caches: the one circle
//! between `cache` and `wait`, which is the protocol's (see `wait`'s
//! "With per-thread caches").

use super::magazine::{BUSY, DRAINED, LEN, SEALED};
use super::{Cache, Magazine, Swept, MAX_THREAD_CACHE};
use crate::engine::barrier;
use crate::engine::free_list::FreeList;
use crate::engine::unwind::Payload;
use crate::engine::wait::WaitQueue;
use crate::sync::Ordering;

impl Cache {
    /// Pushes the `n` oldest indices of the `len` on `stack` to the free
    /// list and moves the rest down (`1 <= n <= len`).
    #[inline(never)]
    pub(super) fn flush_oldest(
        &self,
        stack: &mut [u32; MAX_THREAD_CACHE],
        len: u32,
        n: u32,
        free: &FreeList,
    ) -> (crate::engine::free_list::Pushed, u32) {
        debug_assert!(1 <= n && n <= len && len as usize <= MAX_THREAD_CACHE);
        let pushed = free.push_batch(&stack[..n as usize]);
        stack.copy_within(n as usize..len as usize, 0);
        (pushed, n)
    }

    /// Moves this thread's stack to the free list for waiters, on an
    /// acquire that skips its cache while anyone waits (see
    /// `Shared::try_pop_slow`). Enabled caches only.
    #[cold]
    #[inline(never)]
    pub(crate) fn flush_for_waiters(&self, free: &FreeList, waiters: &WaitQueue) {
        if let Some(mag) = self.magazine() {
            self.flush_discarding(mag, free, waiters);
        }
    }

    /// [`flush`](Self::flush) for an acquire, which drops the panic of a
    /// waker it woke (see `unwind.rs`): one out-of-line call, so that the
    /// inlined fast path stays small enough to inline into its callers.
    #[cold]
    #[inline(never)]
    pub(super) fn flush_discarding(&self, mag: &Magazine, free: &FreeList, waiters: &WaitQueue) {
        crate::engine::unwind::discard(self.flush_caught(mag, free, waiters));
    }

    /// [`flush`](Self::flush), and then takes the panic of a waker it
    /// woke, for the caller to resume once its release is complete (see
    /// `unwind.rs`).
    #[cold]
    #[inline(never)]
    pub(super) fn flush_caught(
        &self,
        mag: &Magazine,
        free: &FreeList,
        waiters: &WaitQueue,
    ) -> Option<Payload> {
        self.flush(mag, free, waiters);
        crate::engine::unwind::take()
    }

    /// Moves this thread's whole magazine to the free list, because threads
    /// are waiting.
    #[cold]
    #[inline(never)]
    pub(super) fn flush(&self, mag: &Magazine, free: &FreeList, waiters: &WaitQueue) {
        if cfg!(all(loom, tagpool_loom_no_waiter_flush)) {
            // Loom-only fault injection: caches that hide slots from waiters.
            return;
        }
        let pushed = loop {
            // Cold: a real fence is always a valid light barrier.
            if let Some(len) = mag.enter(false) {
                let mut pushed = None;
                if len > 0 {
                    // SAFETY: this thread holds the magazine (see `acquire`).
                    let p =
                        unsafe { mag.with_items(|stack| free.push_batch(&stack[..len as usize])) };
                    pushed = Some((p, len));
                }
                mag.exit(0, false);
                break pushed;
            }
            // Sealed: the pool's drop has begun, so no thread waits (waiting
            // needs the pool), and the stack is the drop's to free.
            if mag.sealed() {
                break None;
            }
            // A revoker holds the magazine. It may have seen this thread
            // busy and left the stack alone: wait for it to let go and flush
            // ourselves, or a waiter could be left with the slots hidden
            // here. The revoker holds no lock and lets go promptly.
            while mag.held_by_revoker() {
                crate::sync::yield_now();
            }
        };
        if let Some((p, n)) = pushed {
            waiters.wake_after(free, p, n);
        }
    }

    /// Revokes every other magazine that holds indices and moves them to the
    /// free list; returns how many it moved, and whether a non-empty
    /// magazine was held by another revoker (then this sweep could not look
    /// at it, and a waiter must sweep again rather than park).
    ///
    /// `registered` is true for a waiter that has counted itself and set the
    /// waiter flag: it then runs a heavy barrier first, so that the lengths
    /// it reads are ordered after its registration (see the module docs).
    #[cold]
    pub(crate) fn sweep(&self, free: &FreeList, waiters: &WaitQueue, registered: bool) -> Swept {
        if cfg!(all(loom, tagpool_loom_no_sweep)) {
            // Loom-only fault injection: slots parked in other threads'
            // caches are never recovered.
            return Swept::default();
        }
        if registered {
            barrier::heavy();
        }
        // A token no other live sweep holds: the address of a local, 8-byte
        // aligned so that it is never `DRAINED`.
        let marker = 0u64;
        let token = core::ptr::addr_of!(marker) as usize;
        let mut claimed = false;
        let mut contended = false;
        for mag in self.magazines.iter() {
            // Relaxed: a hint. With no operation in flight it is exact: the
            // owner's last `exit` happened-before this sweep.
            let hint = mag.state.load(Ordering::Relaxed);
            if hint & LEN == 0 {
                continue;
            }
            // Loom-only fault injection: a revoker that checks `BUSY` only
            // here, before it claims, and not again after its heavy barrier
            // (see `tagpool_loom_busy_before_claim` below).
            if cfg!(all(loom, tagpool_loom_busy_before_claim)) && hint & BUSY != 0 {
                contended = true;
                continue;
            }
            // Acquire: pairs with the previous revoker's Release store.
            match mag
                .revoked
                .compare_exchange(0, token, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => claimed = true,
                // Moved by an earlier revoker: empty. (Sealed ones are seen
                // only by a pool's drop, when no sweep can run.)
                Err(DRAINED | SEALED) => {}
                Err(_) => contended = true,
            }
        }
        if !claimed {
            return Swept {
                moved: 0,
                contended,
            };
        }
        // Pairs with the light barrier in `Magazine::enter_with`: each owner
        // sees its `revoked`, or this thread sees its `BUSY`.
        barrier::heavy();
        let mut moved = 0;
        for mag in self.magazines.iter() {
            // Relaxed: only this thread stores `token`.
            if mag.revoked.load(Ordering::Relaxed) != token {
                continue;
            }
            // Acquire: pairs with the owner's Release store in `exit_with`.
            let state = mag.state.load(Ordering::Acquire);
            // Loom-only fault injection: a revoker that ignores `BUSY`
            // (`ignore_busy`), or looked at it only before claiming
            // (`busy_before_claim`): an owner that set it after that look
            // is inside the stack now.
            let busy = state & BUSY != 0
                && !cfg!(all(loom, tagpool_loom_ignore_busy))
                && !cfg!(all(loom, tagpool_loom_busy_before_claim));
            let len = state & LEN;
            let mut release = 0;
            if !busy && len > 0 {
                let drain =
                    |stack: &mut [u32; MAX_THREAD_CACHE]| free.push_batch(&stack[..len as usize]);
                // SAFETY: this thread holds the magazine: its token is in
                // `revoked`, and the owner was not busy after the heavy
                // barrier, so the owner stays out until the store below.
                let p = unsafe { mag.with_items(drain) };
                waiters.wake_after(free, p, len);
                moved += len;
                release = DRAINED;
            }
            // Release: pairs with the owner's Acquire load in `enter_with`
            // (which then takes the drained magazine back as empty).
            mag.revoked.store(release, Ordering::Release);
        }
        Swept { moved, contended }
    }

    /// Whether some magazine may hold indices: its length reads non-zero
    /// and it is not drained ([`Magazine::len_hint`]). The look of
    /// [`sweep`](Self::sweep)'s first loop at every magazine, without its
    /// claims: a sweep skips a magazine whose length reads 0 and cannot
    /// claim a drained one, so `false` means that a sweep reading the same
    /// words would claim nothing and move nothing (see `Shared::exhausted`).
    pub(crate) fn any_cached(&self) -> bool {
        if cfg!(all(loom, tagpool_loom_exhausted_ignores_caches)) {
            // Loom-only fault injection: an exhausted pop that never looks
            // at the caches, so a slot parked in another thread's is lost
            // to it.
            return false;
        }
        // Relaxed loads (in `len_hint`): hints, as the sweep's own look.
        // With no operation in flight they are exact: the owner's last
        // `exit` and a revoker's last store happened-before them, and a
        // load reads the store that happened-before it or a later one.
        self.magazines.iter().any(|mag| mag.len_hint() != 0)
    }

    /// [`sweep`](Self::sweep) for a waiter counted in `waiters`: nothing
    /// to do while an earlier counted waiter's complete sweep covers the
    /// pool, else a registered sweep that marks the pool covered if no
    /// magazine was contended.
    ///
    /// Why a covered pool needs no sweep: since that sweep's heavy barrier
    /// the waiting count has not been 0 (the mark goes with the count's
    /// last decrement), so every owner operation that ended after the
    /// barrier saw a waiter and flushed, and every slot parked before it
    /// was moved by that sweep or flushed by its busy owner. No slot can be
    /// hiding in a cache. So an exhausted pool with waiters runs one heavy
    /// barrier per spell of waiting rather than one per waiting acquire.
    #[cold]
    pub(crate) fn sweep_waiter(&self, free: &FreeList, waiters: &WaitQueue) -> Swept {
        if waiters.covered() {
            return Swept::default();
        }
        let swept = self.sweep(free, waiters, true);
        if !swept.contended {
            waiters.cover();
        }
        swept
    }
}
