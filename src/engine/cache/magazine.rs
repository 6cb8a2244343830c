//! One thread's [`Magazine`]: its stack of free indices and the
//! `state`/`revoked` pair that lets a revoker take it (see `mod.rs`).

use core::ptr::NonNull;

use crossbeam_utils::CachePadded;

use super::{note_peak, Settle, MAX_THREAD_CACHE};
use crate::engine::barrier;
use crate::sync::{AtomicU32, AtomicU64, AtomicUsize, Ordering, StatU32, UnsafeCell};

/// The [`Magazine::state`] bit that says the owner is inside an operation.
pub(super) const BUSY: u32 = 1 << 31;

/// The [`Magazine::state`] bit that says the owner is in the tail of an
/// owned guard's release: past `exit`, still reading the pool (the waiting
/// count, maybe a flush). Revokers ignore it; the pool's drop waits for it
/// to clear before sealing, so that it never frees the pool under a tail.
/// Nothing in a tail unwinds: the wakes of its flush are caught, and their
/// panic is resumed after the tail ends (see `unwind.rs`).
pub(super) const TAIL: u32 = 1 << 30;

/// The stack's length in [`Magazine::state`].
pub(super) const LEN: u32 = TAIL - 1;

/// [`Magazine::revoked`] once a revoker has moved the whole stack to the
/// free list: the stack is empty, whatever `state` says, until the owner
/// records that and clears the mark. Claims are addresses of 8-byte-aligned
/// locals, so never one of the marks (see [`is_claim`]).
pub(super) const DRAINED: usize = 1;

/// [`Magazine::revoked`] for good once the pool's handle is dropped (see
/// [`Cache::seal`](super::Cache::seal)): the owner no longer uses the magazine, and counts its
/// owned guards' releases in the pool's shared count.
pub(super) const SEALED: usize = 2;

/// [`Magazine::revoked`] while a revoker that committed to the stack moves
/// it to the free list (see [`Cache::sweep`](super::Cache::sweep)): the
/// revoker alone accesses the stack, and stores [`DRAINED`] when it is
/// done. Nobody else writes `revoked` meanwhile.
pub(super) const MOVING: usize = 3;

/// [`Magazine::revoked`] while the pool's drop looks at the magazine to
/// seal it (see [`Cache::seal`](super::Cache::seal)). Unlike a revoker's
/// claim, an owner cannot take it back; the drop lets go at once.
pub(super) const SEALING: usize = 4;

/// Whether `revoked` is a revoker's claim: the address of one of its
/// locals, 8-byte aligned, so above every mark. A claim is not a hold: the
/// owner may take it back, and another revoker may take it over, until
/// the revoker commits to the stack (CAS to [`MOVING`]).
#[inline(always)]
pub(super) fn is_claim(revoked: usize) -> bool {
    revoked > SEALING
}

/// One thread's stack of free indices.
///
/// # Invariants
///
/// - `items[..len]` (`len` from `state`) is accessed only by whoever holds
///   the magazine: the owner between an `enter` that saw (or made, taking
///   back a claim) `revoked == 0` and the matching `exit`, or the revoker
///   whose CAS from its claim to [`MOVING`] succeeded after it saw `state`
///   without [`BUSY`], until it stores [`DRAINED`].
/// - `state` is written by the owner only; its length is at most the
///   cache's `size`, so at most `MAX_THREAD_CACHE`.
/// - While `revoked` is [`DRAINED`] the stack is empty and `state` is stale:
///   readers other than the owner count it as empty.
pub(crate) struct Magazine {
    /// The stack's length, with [`BUSY`] set while the owner is inside an
    /// operation (and [`TAIL`] in an owned release's tail). One word, so
    /// that an operation ends with the one store that publishes its length
    /// and clears `BUSY`.
    pub(super) state: AtomicU32,
    /// 0, a revoker's claim (its token), [`MOVING`], [`DRAINED`],
    /// [`SEALING`] or [`SEALED`]. Revokers CAS it from 0 (or from another
    /// revoker's claim) to their claim, then from their claim to 0 or to
    /// `MOVING`, and store `DRAINED` after a move; the owner CASes a claim
    /// back to 0, and alone stores 0 over `DRAINED`; the pool's drop CASes
    /// 0 or `DRAINED` to `SEALING`, and stores `SEALED` or the old value.
    pub(super) revoked: AtomicUsize,
    /// Owned guards acquired through this magazine minus those released
    /// through it, wrapping. Written by the owner only, while it holds the
    /// magazine; read by the pool's drop when it seals the magazine (see
    /// `Shared`'s Lifetime in `engine/shared`).
    pub(super) owned: AtomicU64,
    /// The stack: `items[..len]` are free slot indices, owned by this
    /// magazine; the top is `items[len - 1]`.
    pub(super) items: UnsafeCell<[u32; MAX_THREAD_CACHE]>,
    /// Statistics for `Stats::peak_in_use` (see [`Magazine::peak_bound`]):
    /// the slots out of the free list just after this magazine's last
    /// refill (0 before the first). Written by the owner at a refill, read
    /// by `stats`.
    pub(super) refilled_out: StatU32,
    /// The lowest length the owner has left the stack at after a take since
    /// that refill (the length the refill left, at first). Written by the
    /// owner only; read by `stats`.
    pub(super) low: StatU32,
}

// SAFETY: a magazine is shared by its owner, revokers and `stats`. Its
// atomics are `Sync`; `items` is accessed only by the one party that holds
// the magazine (the invariant above, kept by the `state`/`revoked` Dekker
// pair), so sharing `&Magazine` never lets two threads touch it at once.
// The indices are plain `u32`s, so no `T` is shared through it.
unsafe impl Sync for Magazine {}

impl Magazine {
    pub(super) fn new() -> CachePadded<Self> {
        CachePadded::new(Self {
            state: AtomicU32::new(0),
            revoked: AtomicUsize::new(0),
            owned: AtomicU64::new(0),
            items: UnsafeCell::new([0; MAX_THREAD_CACHE]),
            refilled_out: StatU32::new(0),
            low: StatU32::new(0),
        })
    }

    /// Records, for the peak, that the owner took from the stack and left
    /// `len` on it: a load of the owner's own line and, when the stack is
    /// lower than ever since the refill, a plain store. No shared
    /// read-modify-write.
    #[inline(always)]
    pub(super) fn note_take(&self, len: u32) {
        // Relaxed: a statistic, written by the owner alone.
        if len < self.low.load(Ordering::Relaxed) {
            // Relaxed: as above.
            self.low.store(len, Ordering::Relaxed);
        }
    }

    /// The most slots guards can have held at once since this magazine's
    /// last refill, as far as that refill and this owner's takes since can
    /// tell: the slots out of the free list at the refill, minus the fewest
    /// this stack has kept since.
    ///
    /// Why it bounds the true figure: let the refill at `t` be the last pop
    /// from the free list (by any thread) before a moment `t'`. Slots out of
    /// the free list at `t'` are at most those at `t` (only pops add to
    /// them); so held at `t'` is at most `out(t)` minus what the caches hold
    /// at `t'`, at least this stack's length then, which is at least `low`
    /// unless a revoker or a flush took from it, and those pushed the slots
    /// back to the free list, lowering `out` by as many. Other threads'
    /// cached slots count as held: that is the over-count. A pop that is no
    /// refill keeps nothing in a cache and records `out` itself.
    pub(super) fn peak_bound(&self) -> u32 {
        // Relaxed: statistics; a snapshot racing a refill may pair one
        // refill's `refilled_out` with the other's `low`, briefly.
        let out = self.refilled_out.load(Ordering::Relaxed);
        // Relaxed: as above.
        out.saturating_sub(self.low.load(Ordering::Relaxed))
    }

    /// Records a refill that left `out` slots out of the free list and
    /// `kept` on this stack: folds the previous refill's bound into `peak`
    /// and starts the next one.
    pub(super) fn note_refill(&self, peak: &AtomicU32, out: u32, kept: u32) {
        note_peak(peak, self.peak_bound());
        // Relaxed: statistics, written by the owner alone (`low` first, so a
        // racing snapshot more likely under- than over-states the new
        // bound; `peak` already holds the previous one).
        self.low.store(kept, Ordering::Relaxed);
        // Relaxed: as above.
        self.refilled_out.store(out, Ordering::Relaxed);
    }

    /// Starts an owner operation: sets [`BUSY`], runs `light_barrier`, and
    /// returns `revoked` and the stack's length. The owner holds the
    /// magazine if `revoked` is 0. Either way the caller must end the
    /// operation with [`exit_with`](Self::exit_with), passing the length
    /// unchanged unless it held the magazine and changed the stack.
    #[inline(always)]
    pub(super) fn enter_with(&self, light_barrier: impl FnOnce()) -> (usize, u32) {
        // Relaxed: only this thread, the owner, writes `state`. `TAIL` is
        // clear on the fast paths; a flush in a tail keeps it (see `exit`).
        let raw = self.state.load(Ordering::Relaxed);
        debug_assert_eq!(raw & BUSY, 0, "an owner operation is never nested");
        // Relaxed: ordered before the load below by the light barrier.
        self.state.store(raw | BUSY, Ordering::Relaxed);
        // Pairs with the heavy barrier in `Cache::sweep`: the revoker sees
        // `BUSY`, or this thread sees `revoked`.
        light_barrier();
        // Acquire: pairs with the revoker's Release store of 0 or `DRAINED`,
        // so a move it made is visible before this thread touches the stack
        // again.
        //
        // No loom model can tell this load from a Relaxed one (a mutant that
        // survived): an owner that reads `DRAINED` always runs `exit`, whose
        // light barrier is a SeqCst fence under loom, before it touches the
        // stack again, and an acquire fence after a load that read a Release
        // store synchronizes with it; one that reads 0 stored by a revoker
        // that left the stack alone (busy, or empty) finds a stack that
        // revoker never touched. On the
        // real fast path that barrier is a compiler fence only (with
        // `membarrier`), so this Acquire is the edge: keep it.
        let revoked = self.revoked.load(Ordering::Acquire);
        // Loom-only fault injection: an owner that never yields to a
        // revoker.
        #[cfg(all(loom, tagpool_loom_ignore_revoked))]
        let revoked = {
            let _ = revoked;
            0
        };
        (revoked, raw & LEN)
    }

    /// Ends an owner operation, leaving `len` indices on the stack (and
    /// [`TAIL`] if the caller sets it in `len`).
    #[inline(always)]
    pub(super) fn exit_with(&self, len: u32, light_barrier: impl FnOnce()) {
        debug_assert!((len & LEN) as usize <= MAX_THREAD_CACHE);
        // Release: pairs with the revoker's Acquire load of `state`: the
        // stack as this operation left it is what the revoker moves.
        self.state.store(len, Ordering::Release);
        // Pairs with the heavy barrier a waiter runs after counting itself:
        // the waiter sees this stack, or the caller sees the waiter.
        light_barrier();
    }

    /// [`enter_with`](Self::enter_with) for the slow paths: `Some(len)` if
    /// the owner holds the magazine (then it must [`exit`](Self::exit)),
    /// `None`, with the operation already ended, if it cannot have it now:
    /// a revoker is moving the stack (it will be empty), or the pool's drop
    /// seals the magazine. Never waits for another thread: a drained
    /// magazine is taken back first, and a revoker's claim is taken back
    /// (see below). `light` as in [`barrier::light_with`].
    ///
    /// # Taking a claim back
    ///
    /// A revoker that claimed the magazine has not touched the stack: it
    /// commits to it only by a CAS from its claim to [`MOVING`], after its
    /// heavy barrier and its look at `state`. So an owner that reads a
    /// claim (with `BUSY` set) CASes it back to 0 and holds the magazine:
    /// the revoker's commit then fails, and it leaves the stack alone as
    /// if it had seen `BUSY`. Waiting for the revoker instead would make a
    /// `try_acquire` wait on another thread (through that thread's heavy
    /// barrier, which the kernel may take milliseconds to grant); giving
    /// up would let both fail with the slots of this very stack free.
    ///
    /// A waiter that claimed is then served by this owner: its claim CAS
    /// (Release) came after it counted itself, and the load here that
    /// read the claim is Acquire, so this owner's check of the waiting
    /// count after its operation sees the waiter and flushes.
    pub(super) fn enter(&self, light: bool) -> Option<u32> {
        loop {
            let (revoked, len) = self.enter_with(|| barrier::light_with(light));
            if revoked == 0 {
                return Some(len);
            }
            // Loom-only fault injection: an owner that gives up on its
            // stack while a revoker claims it (as if the revoker were
            // moving it). Harmless alone (a sweep takes the claim over);
            // with `tagpool_loom_no_claim_takeover` too, both can give up
            // on the slots in this stack.
            if is_claim(revoked) && !cfg!(all(loom, tagpool_loom_owner_gives_up)) {
                // Loom-only fault injection: an owner that takes the claim
                // back with a plain store, which can overwrite the
                // revoker's commit (`MOVING`) landed since the load above.
                if cfg!(all(loom, tagpool_loom_reclaim_store)) {
                    // Relaxed: the fault.
                    self.revoked.store(0, Ordering::Relaxed);
                    return Some(len);
                }
                // Acquire: as the load in `enter_with` (the claim's Release
                // half publishes the waiter's count). Relaxed on failure:
                // the loop enters again and loads it with Acquire.
                if self
                    .revoked
                    .compare_exchange(revoked, 0, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return Some(len);
                }
                // Committed, let go, or taken over meanwhile: look again.
                self.exit(len, light);
                continue;
            }
            if revoked != DRAINED {
                // `MOVING`, `SEALING` or `SEALED`.
                self.exit(len, light);
                return None;
            }
            // A revoker moved the whole stack: record it empty, then clear
            // the mark. Only the owner clears `DRAINED` (revokers claim from
            // 0), and in this order, so the next revoker to claim reads the
            // empty stack and moves nothing twice.
            //
            // The opposite order (a mutant that survived) would be safe as
            // well, which is why no model catches it: until the `exit`
            // below, `state` has `BUSY` set (stored before the light
            // barrier in `enter_with`), and a revoker that claims after the
            // mark is cleared reads `state` after its Acquire CAS read the
            // clearing (Release), so it sees `BUSY` or the empty length,
            // and never moves the stale one. Only `stats` could count the
            // stale length for a moment, as the snapshot it is. This order
            // keeps the invariant simple: a magazine not drained holds its
            // recorded length.
            // Loom-only fault injection: an owner that keeps the length of
            // a stack a revoker has emptied.
            let emptied = if cfg!(all(loom, tagpool_loom_keep_drained_len)) {
                len
            } else {
                0
            };
            self.exit(emptied, light);
            // Release: pairs with the next revoker's Acquire CAS. A CAS, not
            // a store: the pool's drop may have sealed the drained magazine
            // meanwhile, and `SEALED` is final.
            if cfg!(all(loom, tagpool_loom_drained_store)) {
                // Loom-only fault injection: a plain store, which can
                // overwrite a seal that landed since the load above.
                self.revoked.store(0, Ordering::Release);
            } else {
                let _ =
                    self.revoked
                        .compare_exchange(DRAINED, 0, Ordering::Release, Ordering::Relaxed);
            }
        }
    }

    /// Ends an owner operation begun by [`enter`](Self::enter), keeping
    /// [`TAIL`] as it was (a flush may run inside a tail).
    pub(super) fn exit(&self, len: u32, light: bool) {
        // Relaxed: only this thread, the owner, writes `state`.
        let tail = self.state.load(Ordering::Relaxed) & TAIL;
        self.exit_with(len | tail, || barrier::light_with(light));
    }

    /// Ends the tail of an owned release that counted itself in the
    /// magazine `mag` (see [`TAIL`]): the release's last access to the pool.
    ///
    /// # Safety
    ///
    /// The pool is alive (the tail keeps it so until this store), and the
    /// caller is the owner and uses no reference into the pool afterwards.
    pub(crate) unsafe fn end_tail(mag: NonNull<Self>) {
        // SAFETY: alive until the store below (the caller's contract). Only
        // the field is borrowed: once the store lands, the pool's drop may
        // free the magazine.
        let state = unsafe { &(*mag.as_ptr()).state };
        // Relaxed: only this thread, the owner, writes `state`.
        let raw = state.load(Ordering::Relaxed);
        debug_assert_eq!(raw & (BUSY | TAIL), TAIL);
        // Release: pairs with the Acquire load in `Cache::seal`, so this
        // release's every access to the pool happens-before its free.
        state.store(raw & !TAIL, Ordering::Release);
    }

    /// Counts one owned guard more (`+1`) or fewer (`-1`, wrapping).
    ///
    /// # Safety
    ///
    /// The caller holds the magazine as its owner.
    #[inline(always)]
    pub(super) unsafe fn count_owned(&self, delta: u64) {
        // Relaxed, load and store: only the owner writes `owned`, while it
        // holds the magazine; `exit`'s Release store publishes it to the
        // pool's drop (see `Cache::seal`).
        let owned = self.owned.load(Ordering::Relaxed);
        self.owned
            .store(owned.wrapping_add(delta), Ordering::Relaxed);
    }

    /// How many indices the stack holds, as `stats` and revokers see it
    /// without holding the magazine: exact when no operation is in flight.
    pub(super) fn len_hint(&self) -> u32 {
        // Relaxed: a hint (see above).
        if self.revoked.load(Ordering::Relaxed) == DRAINED {
            return 0;
        }
        // Relaxed: as above.
        self.state.load(Ordering::Relaxed) & LEN
    }

    /// Runs `f` on the stack. Under loom the access spans the call, so loom
    /// reports any other access to the stack meanwhile.
    ///
    /// # Safety
    ///
    /// The caller holds the magazine: it is the owner between an `enter`
    /// that saw `revoked == 0` and its `exit`, or the revoker whose token is
    /// in `revoked` and that saw `state` without `BUSY` after its heavy
    /// barrier.
    #[inline(always)]
    pub(super) unsafe fn with_items<R>(
        &self,
        f: impl FnOnce(&mut [u32; MAX_THREAD_CACHE]) -> R,
    ) -> R {
        let items = self.items.get_mut();
        // SAFETY: the caller holds the magazine, so no other reference to
        // the stack exists while `f` runs.
        items.with(|p| f(unsafe { &mut *p }))
    }

    /// The index at `position` on the stack.
    ///
    /// # Safety
    ///
    /// As [`with_items`](Self::with_items), and `position` is below the
    /// stack's length (so below `MAX_THREAD_CACHE`).
    #[inline(always)]
    pub(super) unsafe fn item(&self, position: u32) -> u32 {
        debug_assert!((position as usize) < MAX_THREAD_CACHE);
        let read = |stack: &mut [u32; MAX_THREAD_CACHE]| {
            // SAFETY: `position` is in bounds (the caller's contract).
            unsafe { *stack.get_unchecked(position as usize) }
        };
        // SAFETY: the caller holds the magazine (the caller's contract).
        unsafe { self.with_items(read) }
    }

    /// Writes `index` at `position` on the stack.
    ///
    /// # Safety
    ///
    /// As [`with_items`](Self::with_items), and `position` is below the
    /// cache's `size` (so below `MAX_THREAD_CACHE`).
    #[inline(always)]
    pub(super) unsafe fn set_item(&self, position: u32, index: u32) {
        debug_assert!((position as usize) < MAX_THREAD_CACHE);
        let write = |stack: &mut [u32; MAX_THREAD_CACHE]| {
            // SAFETY: `position` is in bounds (the caller's contract).
            unsafe { *stack.get_unchecked_mut(position as usize) = index };
        };
        // SAFETY: the caller holds the magazine (the caller's contract).
        unsafe { self.with_items(write) };
    }
}

/// [`TAIL`] for an owned release, nothing for a borrowed one.
#[inline(always)]
pub(super) fn tail<const OWNED: bool>() -> u32 {
    // Loom-only fault injection: an owned release whose tail the pool's
    // drop does not wait for.
    if OWNED && !cfg!(all(loom, tagpool_loom_no_tail)) {
        TAIL
    } else {
        0
    }
}

/// What a release that held `mag` leaves to its caller: the tail to end, for
/// an owned one.
#[inline(always)]
pub(super) fn settle_tail<const OWNED: bool>(mag: &Magazine) -> Settle {
    if OWNED && !cfg!(all(loom, tagpool_loom_no_tail)) {
        Settle::Tail(NonNull::from(mag))
    } else {
        Settle::Done
    }
}
