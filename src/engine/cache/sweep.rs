//! Revoking caches: a thread's flush of its own stack, and the sweep that
//! moves other threads' stacks to the free list through the asymmetric
//! barrier. A flush wakes waiters and waiters sweep caches: the one circle
//! between `cache` and `wait`, which is the protocol's (see `wait`'s
//! "With per-thread caches").

use super::magazine::{is_claim, BUSY, DRAINED, LEN, MOVING, SEALED, SEALING};
use super::{Cache, Magazine, Swept, MAX_THREAD_CACHE};
use crate::engine::barrier;
use crate::engine::free_list::{FreeList, Pushed};
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

    /// Moves this thread's stack to the free list for waiters, if it holds
    /// any slot, on a release that skips its cache while anyone waits (see
    /// `Shared::push_slow`); returns the panic of a waker it woke, for the
    /// release to resume. Enabled caches only.
    #[cold]
    #[inline(never)]
    pub(crate) fn flush_own(&self, free: &FreeList, waiters: &WaitQueue) -> Option<Payload> {
        // The memo first (two thread-local loads): this runs on every
        // release while anyone waits.
        let mag = match self.magazines.remembered() {
            Some(mag) => &**mag,
            None => self.magazine()?,
        };
        // The owner's own length (or `DRAINED`): nothing to flush at 0.
        if mag.len_hint() == 0 {
            return None;
        }
        self.flush_caught(mag, free, waiters)
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
        // Cold: a real fence is always a valid light barrier. `enter`
        // takes a revoker's claim back (it may have seen this thread busy
        // and left the stack alone); `None` means a revoker is moving the
        // stack (its push wakes the waiters) or the pool's drop has begun
        // (no thread waits then: waiting needs the pool). No waiting for
        // another thread either way.
        let len = match mag.enter(false) {
            Some(len) => len,
            None => return,
        };
        let mut pushed = None;
        if len > 0 {
            // SAFETY: this thread holds the magazine (it entered and saw, or
            // made, `revoked == 0`).
            let p = unsafe { mag.with_items(|stack| free.push_batch(&stack[..len as usize])) };
            pushed = Some((p, len));
        }
        mag.exit(0, false);
        if let Some((p, n)) = pushed {
            waiters.wake_after(free, p, n);
        }
    }

    /// Revokes every other magazine that holds indices and moves them to the
    /// free list; returns how many it moved, and whether a non-empty
    /// magazine was being moved by another revoker (contended: this sweep
    /// could not look at it; that revoker's push wakes the waiters).
    ///
    /// `registered` is true for a waiter that has counted itself and set the
    /// waiter flag: it then runs a heavy barrier first, so that the lengths
    /// it reads are ordered after its registration (see the module docs).
    ///
    /// Never waits for another thread, and calls no user code while it
    /// claims a magazine: the waiters its pushes found are woken at the
    /// end, once it holds none.
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
        // aligned so that it is never one of the marks (`is_claim`).
        let marker = 0u64;
        let token = core::ptr::addr_of!(marker) as usize;
        debug_assert!(is_claim(token));
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
            match self.claim(mag, token) {
                Claim::Claimed => claimed = true,
                Claim::Empty => {}
                Claim::Moving => contended = true,
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
        let mut woke = Woke::default();
        for mag in self.magazines.iter() {
            // Relaxed: only this thread stores `token`; a value read from
            // another thread means the claim was taken back or over.
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
            if busy || len == 0 {
                // Release: pairs with the owner's Acquire load in
                // `enter_with`. A CAS: the owner may have taken the claim
                // back, or another revoker over, and a store would undo
                // their step. Either way the stack is theirs to look after.
                let _ =
                    mag.revoked
                        .compare_exchange(token, 0, Ordering::Release, Ordering::Relaxed);
                continue;
            }
            if !Self::commit(mag, token) {
                // The owner took the claim back (it holds the stack, and
                // flushes it if anyone waits) or another revoker took it
                // over (its own look after its own barrier covers it).
                continue;
            }
            let drain =
                |stack: &mut [u32; MAX_THREAD_CACHE]| free.push_batch(&stack[..len as usize]);
            // The commit CAS moved `revoked` from this sweep's claim to
            // `MOVING` after it saw the owner not busy following its heavy
            // barrier: the owner stays out (it sees the claim, whose
            // take-back CAS now fails, or `MOVING`), and nobody else writes
            // `revoked` until the store below.
            // SAFETY: this thread holds the magazine (see above).
            let p = unsafe { mag.with_items(drain) };
            woke.add(p, len);
            moved += len;
            // Release: pairs with the owner's Acquire load in `enter_with`
            // (which then takes the drained magazine back as empty).
            mag.revoked.store(DRAINED, Ordering::Release);
        }
        // Every magazine is let go: now the waiters' wakers may run.
        woke.wake(free, waiters);
        Swept { moved, contended }
    }

    /// Claims `mag` for the sweep whose token is `token`: from 0, or from
    /// another revoker's claim (taking it over: a waiter never needs to
    /// look again because a sweep that will leave a busy owner's stack
    /// alone held it when it looked).
    fn claim(&self, mag: &Magazine, token: usize) -> Claim {
        // Relaxed: the CAS below reads the value it replaces.
        let mut current = mag.revoked.load(Ordering::Relaxed);
        loop {
            let claimable = current == 0
                // Loom-only fault injection: the old behaviour, a sweep that
                // finds another revoker's claim contended instead of taking
                // it over.
                || (is_claim(current) && !cfg!(all(loom, tagpool_loom_no_claim_takeover)));
            if !claimable {
                return match current {
                    // Moved by an earlier revoker: empty. (Sealed ones are
                    // seen only by a pool's drop, when no sweep can run.)
                    DRAINED | SEALED | SEALING => Claim::Empty,
                    _ => Claim::Moving,
                };
            }
            // AcqRel: Acquire pairs with the previous revoker's Release
            // store; Release publishes this thread's registration (its
            // waiting count) to an owner that takes the claim back (its
            // Acquire load in `enter_with`), which then flushes for it.
            match mag
                .revoked
                .compare_exchange(current, token, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Claim::Claimed,
                Err(actual) => current = actual,
            }
        }
    }

    /// Commits the sweep whose claim `token` is in `mag` to moving its
    /// stack: CAS claim to `MOVING`. Fails if the owner took the claim back
    /// or another revoker took it over.
    pub(super) fn commit(mag: &Magazine, token: usize) -> bool {
        // Loom-only fault injection: a commit by plain store, which undoes
        // an owner's take-back (both then use the stack).
        if cfg!(all(loom, tagpool_loom_commit_store)) {
            // Relaxed: the fault.
            mag.revoked.store(MOVING, Ordering::Relaxed);
            return true;
        }
        // Acquire: the stack's contents were published by the owner's
        // Release store of `state`, read with Acquire just before; this
        // orders nothing more, but keeps the commit an acquire of the
        // magazine. Relaxed on failure: the stack is not touched.
        mag.revoked
            .compare_exchange(token, MOVING, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
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

/// What [`Cache::claim`] found.
enum Claim {
    /// The magazine is this sweep's claim now.
    Claimed,
    /// Drained (or sealed): empty.
    Empty,
    /// Another revoker is moving its stack (`MOVING`).
    Moving,
}

/// The pushes of one sweep that found the waiter flag, woken together once
/// the sweep holds no magazine (see [`Cache::sweep`]).
#[derive(Default)]
struct Woke {
    /// Slots pushed onto a head with the waiter flag.
    n: u32,
    /// The head word the last of those pushes wrote.
    head: u64,
}

impl Woke {
    /// Records a push of `n` slots.
    fn add(&mut self, pushed: Pushed, n: u32) {
        if pushed.waiters {
            self.n += n;
            self.head = pushed.head;
        }
    }

    /// Wakes as many waiters as slots were pushed onto the flag. The head
    /// given for clearing the flag is the last such push's: a clear from it
    /// fails if anything happened since (another push of this sweep
    /// included), leaving the flag set, which costs a spurious wake at most.
    fn wake(self, free: &FreeList, waiters: &WaitQueue) {
        if self.n > 0 {
            let pushed = Pushed {
                waiters: true,
                head: self.head,
            };
            waiters.wake_after(free, pushed, self.n);
        }
    }
}
