//! Per-thread caches of free slot indices ("magazines") in front of the free
//! list, revocable by any thread so that the capacity stays exact.
//!
//! # Why
//!
//! Every operation on the free list takes its head's cache line for writing.
//! One thread pays two compare-exchanges per acquire + release; threads that
//! run in parallel also pay a cache-line transfer per operation. The fastest
//! pools keep the common case on a line the calling thread already owns, and
//! most of them give up exact capacity for it (folly's `IndexedMemPool`, Go's
//! `sync.Pool`, .NET's pools) or cap the thread count (sharded-slab). This
//! module keeps both promises: no thread limit, and a slot parked in any
//! thread's cache is still found by every acquire that needs it.
//!
//! # Protocol
//!
//! Each thread that uses the pool owns one [`Magazine`]: a small stack of
//! free indices and two words. `state` holds the stack's length and a
//! `BUSY` bit, and is written by the owner only; `revoked` is 0, the token
//! of a revoker that holds the magazine, or `DRAINED`.
//!
//! **Owner** (acquire and release, no locked instruction):
//!
//! 1. `enter`: read `state` (its own), store it back with `BUSY` set;
//!    [`barrier::light_with`]; load `revoked`. If it is not 0, skip to 3
//!    with the length unchanged; the slow path then uses the free list
//!    directly, or, for `DRAINED`, first records the stack as empty and
//!    stores `revoked = 0` itself.
//! 2. Pop an index off the stack (acquire) or push one onto it (release),
//!    with plain loads and stores. An empty stack refills with up to `batch`
//!    indices from the free list in one CAS ([`FreeList::pop_batch`]); a
//!    full one flushes its oldest `batch` indices in one CAS
//!    ([`FreeList::push_batch`]).
//! 3. `exit`: store `state` = the new length, `BUSY` clear (Release): one
//!    store publishes the stack and ends the operation;
//!    [`barrier::light_with`]; load the pool's count of waiting threads. If
//!    anyone waits, flush the whole stack to the free list (which wakes
//!    them), so that a cache never hides a slot from a waiter.
//!
//! While anyone waits, owners also skip their stacks (a `Relaxed` look at
//! the count before step 1, where a stale answer is harmless): a release
//! goes straight to the free list, where it wakes or serves a waiter, and
//! an acquire takes one slot from the free list instead of a batch it
//! would flush back at once. That spares a flush per operation, and a
//! flush that a sweeping waiter holds up (it yields until the revoker
//! lets go); the step-3 check still covers an owner whose look came too
//! early.
//!
//! **Revoker** (a thread whose own stack and the free list are both empty):
//!
//! 1. For each magazine that looks non-empty, CAS `revoked` from 0 to a
//!    token of its own (one revoker per magazine at a time; `DRAINED` means
//!    already empty).
//! 2. [`barrier::heavy`].
//! 3. For each magazine it claimed: load `state` (Acquire). If `BUSY` is
//!    clear and the stack is not empty, move the whole stack to the free
//!    list in one CAS and store `revoked = DRAINED`, else `revoked = 0`
//!    (Release). The revoker never writes `state`: the owner's plain stores
//!    to it could not be ordered with a revoker's, so the owner learns that
//!    its stack was emptied from `DRAINED` instead.
//!
//! A waiter first counts itself in the waiting count and sets the free
//! list's waiter flag, then runs a [`barrier::heavy`] *before* step 1, so
//! that its reads of the stacks' lengths are ordered after its registration.
//!
//! # Invariants
//!
//! - *Exclusive access.* A magazine's stack is accessed only by its owner
//!   between an `enter` that saw `revoked == 0` and the next `exit`, or by
//!   the revoker whose token is in `revoked` after it saw `BUSY` clear
//!   following its heavy barrier. These never overlap: the owner's
//!   `state |= BUSY; light; load revoked` and the revoker's
//!   `revoked = token; heavy; load state` are a Dekker pair, so at least one
//!   of them sees the other's store. The owner that sees `revoked` stays
//!   out; the revoker that sees `BUSY` leaves the stack alone.
//! - *A drained stack is empty.* While `revoked == DRAINED` no revoker
//!   claims the magazine (claims CAS from 0) and readers other than the
//!   owner count it as empty. The owner stores the empty `state` before it
//!   clears `DRAINED` (Release), so the next revoker to claim (Acquire)
//!   reads the empty stack.
//! - *Ownership of slots.* An index is in exactly one place: the free list,
//!   one magazine's stack (below its length, not drained), or one guard (or
//!   a thread between taking it and building the guard). Indices move
//!   between a stack and the free list only through the free list's head
//!   CAS, whose Acquire/Release pair publishes both the links and the slot
//!   values; within a magazine, `state`'s Release store and a revoker's
//!   Acquire load (or `revoked`'s Release store and the owner's Acquire
//!   load) publish the stack itself.
//! - *Nothing hides from waiters.* Every parked waiter counted itself and
//!   set the flag, then ran a heavy barrier, then looked at every stack. An
//!   index pushed onto a stack by an operation whose `exit` came before that
//!   barrier is seen by the look (and moved to the free list, or the owner
//!   was busy again and its next `exit` flushes); one whose `exit` came
//!   after sees the waiting count and flushes. A flush or a move pushes to
//!   the free list, which notifies a waiter (see `wait.rs`).
//!
//! # Linearization
//!
//! An acquire or release that only touches its own stack takes effect at
//! its store of `state`; one that moves indices to or from the free list
//! at that list's successful CAS. A failing `try_acquire` takes effect at
//! its last look at the stacks: if no operation was in flight then, every
//! stack's length it read was final (each owner's last `exit` happened-before
//! the look), every non-empty stack was moved, and the free list held them,
//! so it fails only when every slot is held by a guard. A release that
//! happens-before an acquire on another thread is therefore visible to it,
//! through the owner's stack, a move, or the free list.
//!
//! # The fast path, and what decided it
//!
//! The common acquire and release are inlined into the caller and touch
//! only the thread's memo (two thread-local loads) and its own magazine's
//! line: `state` load, `state` store with `BUSY`, a compiler fence, a
//! `revoked` load, the stack's slot, and the `state` store that ends the
//! operation, then a load of the waiting count. Their slow halves (refill,
//! flush, first use, revokers, pools without caches) are `#[cold]` and out
//! of line, so the fast path is straight-line code. The fast path runs only
//! for memoized magazines, and magazines are memoized only when the
//! asymmetric barrier is available (`membarrier`), so it needs no runtime
//! test of the barrier mode; without it every operation takes the slow
//! path with real fences.
//!
//! Measured on the 2-vCPU AMD EPYC CI machine type with a probe that runs
//! tagpool and lockfree-object-pool's `LinearObjectPool` in one process
//! (acquire, write one word, release; medians of 9 rounds of 3 million per
//! process, several processes per step; the machine alternates between a
//! fast and a slow state, hence the ranges), tagpool / lockfree-object-pool:
//!
//! | step | ratio |
//! |---|---:|
//! | separate `busy` and `len` words, barrier mode tested on the fast path | 0.79-1.44 |
//! | barrier mode folded into the memo, unchecked stack indexing | 0.79-1.21 |
//! | one `state` word (two stores fewer per operation) | 0.79-1.21 |
//! | slow paths `#[cold]` and out of line, no `Option` test before the memo | 0.61-0.83 |
//!
//! A plain stack with no revocation protocol at all measured 0.6-0.9 in the
//! same runs: what the protocol costs is within this machine's noise.
//!
//! # Sizing
//!
//! See [`Builder::thread_cache`](crate::Builder::thread_cache) for the rule
//! that sizes magazines from the capacity and switches them off for small
//! pools.

use core::fmt;
use core::ptr::NonNull;

use crossbeam_utils::CachePadded;

use crate::barrier;
use crate::free_list::FreeList;
use crate::pool::Settle;
use crate::sync::{
    fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering, PerThread, StatU32, UnsafeCell,
};
use crate::unwind::Payload;
use crate::wait::WaitQueue;

/// The most indices one magazine holds.
pub(crate) const MAX_THREAD_CACHE: usize = 64;

/// The share rule: the most indices each of `threads` magazines keeps in a
/// pool of `capacity` slots whose caches hold `size` each: `size`, or the
/// thread's even share of the capacity if that is smaller, but never below 2
/// (a magazine of 2 still turns a release followed by an acquire into two
/// plain stores; below that it would hold nothing). So caches together hold
/// at most about the capacity, however many threads use the pool: a
/// magazine of 4 per thread on 32 threads sharing 16 slots measured 9 times
/// slower than 2 on 16 cores (see `Builder::thread_cache`).
pub(crate) fn share_limit(size: u32, capacity: u32, threads: u32) -> u32 {
    let share = (capacity / threads.max(1)) & !1;
    share.max(2).min(size)
}

/// Records `in_use` slots held (or bounding those held) in `peak` (see
/// `Stats::peak_in_use` and [`Magazine::peak_bound`]).
#[inline]
pub(crate) fn note_peak(peak: &AtomicU32, in_use: u32) {
    // Relaxed: a statistic. The load keeps the common case to a read of a
    // line every thread shares; the RMW runs only when the peak grows.
    if in_use > peak.load(Ordering::Relaxed) {
        raise_peak(peak, in_use);
    }
}

/// The rare half of [`note_peak`], out of line (a CAS loop on x86).
#[cold]
#[inline(never)]
fn raise_peak(peak: &AtomicU32, in_use: u32) {
    // Relaxed: a statistic.
    peak.fetch_max(in_use, Ordering::Relaxed);
}

/// What a [`Cache::sweep`] did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Swept {
    /// Indices moved to the free list.
    pub(crate) moved: u32,
    /// A non-empty magazine was held by another revoker.
    pub(crate) contended: bool,
}

/// The [`Magazine::state`] bit that says the owner is inside an operation.
const BUSY: u32 = 1 << 31;

/// The [`Magazine::state`] bit that says the owner is in the tail of an
/// owned guard's release: past `exit`, still reading the pool (the waiting
/// count, maybe a flush). Revokers ignore it; the pool's drop waits for it
/// to clear before sealing, so that it never frees the pool under a tail.
/// Nothing in a tail unwinds: the wakes of its flush are caught, and their
/// panic is resumed after the tail ends (see `unwind.rs`).
const TAIL: u32 = 1 << 30;

/// The stack's length in [`Magazine::state`].
const LEN: u32 = TAIL - 1;

/// [`Magazine::revoked`] once a revoker has moved the whole stack to the
/// free list: the stack is empty, whatever `state` says, until the owner
/// records that and clears the mark. Tokens are addresses of 8-byte-aligned
/// locals, so never 0, 1 nor 2.
const DRAINED: usize = 1;

/// [`Magazine::revoked`] for good once the pool's handle is dropped (see
/// [`Cache::seal`]): the owner no longer uses the magazine, and counts its
/// owned guards' releases in the pool's shared count.
const SEALED: usize = 2;

/// One thread's stack of free indices.
///
/// # Invariants
///
/// - `items[..len]` (`len` from `state`) is accessed only by whoever holds
///   the magazine: the owner between an `enter` that saw `revoked == 0` and
///   the matching `exit`, or the revoker whose token is in `revoked`, after
///   it saw `state` without [`BUSY`].
/// - `state` is written by the owner only; its length is at most the
///   cache's `size`, so at most `MAX_THREAD_CACHE`.
/// - While `revoked` is [`DRAINED`] the stack is empty and `state` is stale:
///   readers other than the owner count it as empty.
pub(crate) struct Magazine {
    /// The stack's length, with [`BUSY`] set while the owner is inside an
    /// operation (and [`TAIL`] in an owned release's tail). One word, so
    /// that an operation ends with the one store that publishes its length
    /// and clears `BUSY`.
    state: AtomicU32,
    /// 0, the token of the revoker that holds the magazine, [`DRAINED`], or
    /// [`SEALED`]. Revokers CAS it from 0 to their token and store 0 or
    /// `DRAINED` back; the owner alone stores 0 over `DRAINED`; the pool's
    /// drop stores `SEALED`.
    revoked: AtomicUsize,
    /// Owned guards acquired through this magazine minus those released
    /// through it, wrapping. Written by the owner only, while it holds the
    /// magazine; read by the pool's drop when it seals the magazine (see
    /// `Shared`'s Lifetime in `pool.rs`).
    owned: AtomicU64,
    /// The stack: `items[..len]` are free slot indices, owned by this
    /// magazine; the top is `items[len - 1]`.
    items: UnsafeCell<[u32; MAX_THREAD_CACHE]>,
    /// Statistics for `Stats::peak_in_use` (see [`Magazine::peak_bound`]):
    /// the slots out of the free list just after this magazine's last
    /// refill (0 before the first). Written by the owner at a refill, read
    /// by `stats`.
    refilled_out: StatU32,
    /// The lowest length the owner has left the stack at after a take since
    /// that refill (the length the refill left, at first). Written by the
    /// owner only; read by `stats`.
    low: StatU32,
}

// SAFETY: a magazine is shared by its owner, revokers and `stats`. Its
// atomics are `Sync`; `items` is accessed only by the one party that holds
// the magazine (the invariant above, kept by the `state`/`revoked` Dekker
// pair), so sharing `&Magazine` never lets two threads touch it at once.
// The indices are plain `u32`s, so no `T` is shared through it.
unsafe impl Sync for Magazine {}

impl Magazine {
    fn new() -> CachePadded<Self> {
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
    fn note_take(&self, len: u32) {
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
    fn peak_bound(&self) -> u32 {
        // Relaxed: statistics; a snapshot racing a refill may pair one
        // refill's `refilled_out` with the other's `low`, briefly.
        let out = self.refilled_out.load(Ordering::Relaxed);
        // Relaxed: as above.
        out.saturating_sub(self.low.load(Ordering::Relaxed))
    }

    /// Records a refill that left `out` slots out of the free list and
    /// `kept` on this stack: folds the previous refill's bound into `peak`
    /// and starts the next one.
    fn note_refill(&self, peak: &AtomicU32, out: u32, kept: u32) {
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
    fn enter_with(&self, light_barrier: impl FnOnce()) -> (usize, u32) {
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
    fn exit_with(&self, len: u32, light_barrier: impl FnOnce()) {
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
    /// `None`, with the operation already ended, if a revoker holds it. A
    /// drained magazine is taken back first. `light` as in
    /// [`barrier::light_with`].
    fn enter(&self, light: bool) -> Option<u32> {
        loop {
            let (revoked, len) = self.enter_with(|| barrier::light_with(light));
            if revoked == 0 {
                return Some(len);
            }
            if revoked != DRAINED {
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
    fn exit(&self, len: u32, light: bool) {
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

    /// Whether `revoked` holds a revoker's token (not 0, [`DRAINED`] nor
    /// [`SEALED`]).
    fn held_by_revoker(&self) -> bool {
        // Relaxed: a hint for the caller's retry loop, which synchronizes
        // through `enter`.
        let revoked = self.revoked.load(Ordering::Relaxed);
        revoked > SEALED
    }

    /// Whether the pool's drop sealed the magazine.
    fn sealed(&self) -> bool {
        // Relaxed: a hint, as above; `SEALED` is final.
        self.revoked.load(Ordering::Relaxed) == SEALED
    }

    /// Counts one owned guard more (`+1`) or fewer (`-1`, wrapping).
    ///
    /// # Safety
    ///
    /// The caller holds the magazine as its owner.
    #[inline(always)]
    unsafe fn count_owned(&self, delta: u64) {
        // Relaxed, load and store: only the owner writes `owned`, while it
        // holds the magazine; `exit`'s Release store publishes it to the
        // pool's drop (see `Cache::seal`).
        let owned = self.owned.load(Ordering::Relaxed);
        self.owned
            .store(owned.wrapping_add(delta), Ordering::Relaxed);
    }

    /// How many indices the stack holds, as `stats` and revokers see it
    /// without holding the magazine: exact when no operation is in flight.
    fn len_hint(&self) -> u32 {
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
    unsafe fn with_items<R>(&self, f: impl FnOnce(&mut [u32; MAX_THREAD_CACHE]) -> R) -> R {
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
    unsafe fn item(&self, position: u32) -> u32 {
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
    unsafe fn set_item(&self, position: u32, index: u32) {
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
fn tail<const OWNED: bool>() -> u32 {
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
fn settle_tail<const OWNED: bool>(mag: &Magazine) -> Settle {
    if OWNED && !cfg!(all(loom, tagpool_loom_no_tail)) {
        Settle::Tail(NonNull::from(mag))
    } else {
        Settle::Done
    }
}

/// The per-thread caches of one pool.
pub(crate) struct Cache {
    magazines: PerThread<CachePadded<Magazine>>,
    /// Set by the pool's drop before it seals the magazines: a thread that
    /// makes its magazine afterwards does not use it (see
    /// [`magazine`](Self::magazine)).
    sealing: AtomicBool,
    /// The most indices a magazine holds: `2..=MAX_THREAD_CACHE` in normal
    /// use, 1 allowed; 0 for no caches.
    size: u32,
    /// The pool's capacity, for the share rule (see [`limit`](Self::limit)).
    capacity: u32,
    /// Whether the share rule applies: the size was chosen by the default
    /// rule, not given by the user.
    share: bool,
    /// Threads that made a magazine of this pool (see
    /// [`magazine`](Self::magazine)).
    threads: AtomicU32,
    /// The most indices a magazine keeps now: `size`, or less once so many
    /// threads use the pool that `size` each would hide more than their
    /// share of the capacity (see [`share_limit`]). Only ever decreases.
    /// Refills take half of it; a release that finds a magazine at or above
    /// it flushes down to the other half.
    limit: AtomicU32,
    /// The barrier mode, fixed when the cache is made: whether the slow
    /// paths' light barrier may be a compiler fence only (`membarrier`).
    /// The inlined fast paths need no such test: they run only for
    /// magazines memoized in that mode (see `Cache::new`).
    light: bool,
}

impl Cache {
    /// Caches of at most `size` indices per thread (`1..=MAX_THREAD_CACHE`)
    /// for a pool of `capacity` slots; with `share`, each thread's cache
    /// also stays within its share of the capacity as threads arrive (see
    /// [`share_limit`]).
    pub(crate) fn new(size: usize, capacity: usize, share: bool) -> Self {
        debug_assert!((1..=MAX_THREAD_CACHE).contains(&size));
        barrier::init();
        let light = barrier::is_light();
        Self {
            // The inlined fast paths run for memoized magazines only, and
            // their `barrier::light_fast` is a compiler fence outside loom:
            // only a light barrier mode may memoize (see there). Under loom
            // the fast path is real fences, and runs for every magazine.
            magazines: PerThread::new(Magazine::new, light || cfg!(all(loom, feature = "loom"))),
            sealing: AtomicBool::new(false),
            size: size as u32,
            capacity: u32::try_from(capacity).unwrap_or(u32::MAX),
            share,
            threads: AtomicU32::new(0),
            limit: AtomicU32::new(size as u32),
            light,
        }
    }

    /// No caches: the fast paths find no magazine, and callers must not use
    /// the slow paths (see [`enabled`](Self::enabled)). Kept in the pool in
    /// place of an `Option`, so that the fast paths start with the memo
    /// check and nothing else.
    pub(crate) fn disabled() -> Self {
        Self {
            magazines: PerThread::new(Magazine::new, false),
            sealing: AtomicBool::new(false),
            size: 0,
            capacity: 0,
            share: false,
            threads: AtomicU32::new(0),
            limit: AtomicU32::new(0),
            light: false,
        }
    }

    /// Whether the pool has caches.
    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.size > 0
    }

    pub(crate) fn size(&self) -> usize {
        self.size as usize
    }

    /// The most indices a magazine keeps now (see [`limit`](Self::limit)).
    #[inline(always)]
    fn limit(&self) -> u32 {
        // Relaxed: a sizing hint, not a protocol step. Any value from
        // `1..=size` is safe: the stack holds `MAX_THREAD_CACHE`, and
        // exactness never depends on how many indices a magazine keeps.
        self.limit.load(Ordering::Relaxed)
    }

    /// How many indices a refill takes and a flush of a full magazine gives
    /// back, for the magazine limit `limit`.
    #[inline(always)]
    fn batch(limit: u32) -> u32 {
        (limit / 2).max(1)
    }

    /// Counts a thread that made its magazine, shrinking the limit if the
    /// share rule applies.
    #[cold]
    fn count_thread(&self) {
        // Relaxed: a statistic feeding a sizing hint.
        let threads = self.threads.fetch_add(1, Ordering::Relaxed) + 1;
        if self.share {
            let share = share_limit(self.size, self.capacity, threads);
            // Relaxed: a sizing hint (see `limit`). `fetch_min`, so that
            // racing arrivals leave the smallest limit.
            self.limit.fetch_min(share, Ordering::Relaxed);
        }
    }

    /// This thread's magazine, made on first use; `None` late in thread
    /// exit, once the thread's id is released, and for a magazine made
    /// after the pool's drop began sealing (which may not have seen it).
    #[inline(always)]
    fn magazine(&self) -> Option<&Magazine> {
        let (mag, made) = self.magazines.get_or_make()?;
        if made {
            self.count_thread();
            // SeqCst fence, then the load: pairs with the SeqCst store and
            // fence in `seal`. Either the seal's walk sees this new
            // magazine, or this thread sees `sealing` and stays out of it.
            fence(Ordering::SeqCst);
            if self.sealing.load(Ordering::Relaxed) {
                // Seal it ourselves (the lookup may have remembered it for
                // the fast paths). If the pool's drop holds it now, its
                // CAS won and it seals it: this thread is in no operation.
                // Relaxed: the magazine was never used.
                let _ =
                    mag.revoked
                        .compare_exchange(0, SEALED, Ordering::Relaxed, Ordering::Relaxed);
                return None;
            }
        }
        Some(&**mag)
    }

    /// Seals every magazine for the pool's drop, and returns the sum of
    /// their owned-guard counts (wrapping): see `Shared`'s Lifetime in
    /// `pool.rs`. Runs once no acquire can run any more; releases of owned
    /// guards may run on other threads.
    ///
    /// Sealing a magazine is a revocation that keeps it: CAS `revoked` to a
    /// token, heavy barrier, load `state`. If the owner is outside any
    /// operation and tail, the count is final (the owner stays out from now
    /// on: it sees the token, then `SEALED`), so read it and store
    /// `SEALED`; else give the magazine back and try again (the owner's
    /// operation is short and takes no lock).
    pub(crate) fn seal(&self) -> u64 {
        if !self.enabled() {
            return 0;
        }
        // SeqCst store and fence: pair with `magazine`'s fence and load.
        self.sealing.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let marker = 0u64;
        let token = core::ptr::addr_of!(marker) as usize;
        let mut sum = 0u64;
        for mag in self.magazines.iter() {
            loop {
                // Acquire: pairs with the Release stores of `revoked` (an
                // earlier revoker's, or the owner's clearing of `DRAINED`).
                let before = mag.revoked.load(Ordering::Acquire);
                if before == SEALED {
                    // Made after `sealing` was set, and sealed by its owner
                    // unused (see `magazine`): it counts nothing.
                    break;
                }
                debug_assert!(before == 0 || before == DRAINED, "no revoker runs now");
                // Relaxed: as the load above; the owner's side is ordered by
                // the heavy barrier below.
                if mag
                    .revoked
                    .compare_exchange(before, token, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                // Pairs with the light barrier in `Magazine::enter_with`, as
                // in `sweep`: the owner sees the token, or this thread sees
                // its `BUSY`.
                barrier::heavy();
                // Acquire: pairs with the owner's Release stores in
                // `exit_with` and `end_tail`: its count, and all its uses
                // of the pool, happen-before what follows.
                let state = mag.state.load(Ordering::Acquire);
                if state & (BUSY | TAIL) == 0 || cfg!(all(loom, tagpool_loom_seal_busy)) {
                    // Relaxed: ordered by the Acquire load above.
                    sum = sum.wrapping_add(mag.owned.load(Ordering::Relaxed));
                    // Release: pairs with the owner's Acquire load of
                    // `revoked` (it then counts in the pool's shared count).
                    mag.revoked.store(SEALED, Ordering::Release);
                    break;
                }
                // Release: as above; the owner may go on with its stack.
                mag.revoked.store(before, Ordering::Release);
                crate::sync::yield_now();
            }
        }
        sum
    }

    /// Takes a free index from this thread's remembered magazine: the common
    /// case, inlined into the caller. `None` if there is no remembered
    /// magazine (always, for a disabled cache), it is empty, or a revoker
    /// holds it: the caller then goes on with
    /// [`acquire_slow`](Self::acquire_slow).
    ///
    /// `OWNED` counts the index as an owned guard's in the magazine.
    #[inline(always)]
    pub(crate) fn acquire<const OWNED: bool>(
        &self,
        free: &FreeList,
        waiters: &WaitQueue,
    ) -> Option<u32> {
        if let Some(mag) = self.magazines.remembered() {
            let (revoked, len) = mag.enter_with(barrier::light_fast);
            if revoked == 0 && len > 0 {
                // SAFETY: this thread holds the magazine (it entered and saw
                // no revoker), and `len - 1` is below the length.
                let index = unsafe { mag.item(len - 1) };
                if OWNED {
                    // SAFETY: this thread holds the magazine.
                    unsafe { mag.count_owned(1) };
                }
                mag.note_take(len - 1);
                mag.exit_with(len - 1, barrier::light_fast);
                // Loom-only fault injection: a fast acquire that leaves the
                // rest of its stack to a waiter whose sweep saw it busy.
                if waiters.waiting() && !cfg!(all(loom, tagpool_loom_acquire_no_flush)) {
                    self.flush_discarding(mag, free, waiters);
                }
                return Some(index);
            }
            mag.exit_with(len, barrier::light_fast);
        }
        None
    }

    /// Takes a free index from this thread's magazine, refilling it from the
    /// free list when empty, when [`acquire`](Self::acquire) could not. `None`
    /// if both are empty (or a revoker holds the magazine): the caller then
    /// revokes others with [`sweep`](Self::sweep). Enabled caches only.
    /// `OWNED` as in [`acquire`](Self::acquire): a `Some` is counted.
    #[cold]
    #[inline(never)]
    pub(crate) fn acquire_slow<const OWNED: bool>(
        &self,
        free: &FreeList,
        waiters: &WaitQueue,
        peak: &AtomicU32,
    ) -> Option<u32> {
        let mag = self.magazine()?;
        let mut taken = None;
        if let Some(mut len) = mag.enter(self.light) {
            if len > 0 {
                len -= 1;
                // SAFETY: this thread holds the magazine, and `len` is below
                // the stack's length.
                taken = Some(unsafe { mag.item(len) });
                mag.note_take(len);
            } else if let Some((index, kept)) = self.refill(mag, free, peak) {
                taken = Some(index);
                len = kept;
            }
            if OWNED && taken.is_some() {
                // SAFETY: this thread holds the magazine.
                unsafe { mag.count_owned(1) };
            }
            mag.exit(len, self.light);
        }
        if waiters.waiting() {
            // An acquire: a waker's panic is dropped (`unwind.rs`).
            crate::unwind::discard(self.flush_caught(mag, free, waiters));
        }
        taken
    }

    /// Refills the held, empty magazine `mag` with one batch from the free
    /// list and takes the last index of it; returns that index and how many
    /// the stack keeps.
    #[inline(never)]
    fn refill(&self, mag: &Magazine, free: &FreeList, peak: &AtomicU32) -> Option<(u32, u32)> {
        // SAFETY: the caller holds the magazine (see `acquire_slow`).
        let got = unsafe {
            mag.with_items(|stack| {
                let batch = Self::batch(self.limit());
                let taken = free.pop_batch(&mut stack[..batch as usize])?;
                let kept = taken.count - 1;
                Some((stack[kept as usize], kept, taken.free))
            })
        };
        let (index, kept, left) = got?;
        // The slots out of the free list, less those this thread keeps
        // cached: held by guards, or cached by other threads. The takes
        // from the kept ones are counted by `note_take`, and the bound
        // they give (`Magazine::peak_bound`) is folded into `peak` at the
        // next refill and read by every snapshot.
        let out = free.in_use(left);
        mag.note_refill(peak, out, kept);
        note_peak(peak, out.saturating_sub(kept));
        Some((index, kept))
    }

    /// Puts `index`, owned by the caller, into this thread's remembered
    /// magazine: the common case, inlined into the caller. `false` if there
    /// is no remembered magazine (always, for a disabled cache), it is full,
    /// or a revoker holds it: the caller then goes on with
    /// [`release_slow`](Self::release_slow).
    ///
    /// `OWNED` counts the end of an owned guard in the magazine, and then
    /// leaves the operation's tail (the waiting check) open under [`TAIL`]:
    /// the caller ends it with the `Settle` returned, once it no longer
    /// uses the pool (see `Shared::finish`).
    #[inline(always)]
    pub(crate) fn release<const OWNED: bool>(
        &self,
        index: u32,
        free: &FreeList,
        waiters: &WaitQueue,
    ) -> Option<(Settle, Option<Payload>)> {
        if let Some(mag) = self.magazines.remembered() {
            if waiters.waiting_hint() {
                // Threads or tasks wait: the caller pushes the slot to the
                // free list, where it wakes or serves them, instead of a
                // round through the magazine and a flush that a sweeping
                // waiter may hold up.
                return None;
            }
            let (revoked, len) = mag.enter_with(barrier::light_fast);
            if revoked == 0 && len < self.limit() {
                // SAFETY: this thread holds the magazine (see `acquire`), and
                // `len < size`.
                unsafe { mag.set_item(len, index) };
                if OWNED {
                    // SAFETY: this thread holds the magazine.
                    unsafe { mag.count_owned(1u64.wrapping_neg()) };
                }
                mag.exit_with((len + 1) | tail::<OWNED>(), barrier::light_fast);
                let woke = if waiters.waiting() {
                    self.flush_caught(mag, free, waiters)
                } else {
                    None
                };
                return Some((settle_tail::<OWNED>(mag), woke));
            }
            mag.exit_with(len, barrier::light_fast);
        }
        None
    }

    /// Puts `index`, owned by the caller, into this thread's magazine,
    /// flushing a batch to the free list when it is full, when
    /// [`release`](Self::release) could not. `None` if the magazine is
    /// unavailable (a revoker holds it, the pool's drop sealed it, or the
    /// thread is exiting): the caller pushes `index` to the free list itself.
    /// Enabled caches only. `OWNED` as in [`release`](Self::release): a
    /// `Some` is counted. Either way, also returns the panic of a waker it
    /// woke (see `unwind.rs`).
    #[cold]
    #[inline(never)]
    pub(crate) fn release_slow<const OWNED: bool>(
        &self,
        index: u32,
        free: &FreeList,
        waiters: &WaitQueue,
    ) -> (Option<Settle>, Option<Payload>) {
        // `None` late in thread exit, or once the pool's drop has begun:
        // the thread then uses the free list directly.
        let mag = match self.magazine() {
            Some(mag) => mag,
            None => return (None, None),
        };
        let mut flushed = None;
        let done = match mag.enter(self.light) {
            Some(mut len) => {
                let limit = self.limit();
                if len >= limit {
                    // Keep the newest `limit - batch` (the limit may have
                    // shrunk below `len` since the last flush).
                    let n = len - (limit - Self::batch(limit));
                    // SAFETY: this thread holds the magazine.
                    flushed =
                        Some(unsafe { mag.with_items(|s| self.flush_oldest(s, len, n, free)) });
                    len -= n;
                }
                // SAFETY: this thread holds the magazine, and `len < limit`,
                // so below `size`.
                unsafe { mag.set_item(len, index) };
                if OWNED {
                    // SAFETY: this thread holds the magazine.
                    unsafe { mag.count_owned(1u64.wrapping_neg()) };
                }
                mag.exit((len + 1) | tail::<OWNED>(), self.light);
                true
            }
            None => false,
        };
        let mut woke = false;
        if let Some((pushed, n)) = flushed {
            woke = waiters.wake_after(free, pushed, n);
        }
        // The thread-local is read only after a wake-up.
        let caught = if waiters.waiting() {
            self.flush_caught(mag, free, waiters)
        } else if woke {
            crate::unwind::take()
        } else {
            None
        };
        (done.then(|| settle_tail::<OWNED>(mag)), caught)
    }

    /// Pushes the `n` oldest indices of the `len` on `stack` to the free
    /// list and moves the rest down (`1 <= n <= len`).
    #[inline(never)]
    fn flush_oldest(
        &self,
        stack: &mut [u32; MAX_THREAD_CACHE],
        len: u32,
        n: u32,
        free: &FreeList,
    ) -> (crate::free_list::Pushed, u32) {
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
    fn flush_discarding(&self, mag: &Magazine, free: &FreeList, waiters: &WaitQueue) {
        crate::unwind::discard(self.flush_caught(mag, free, waiters));
    }

    /// [`flush`](Self::flush), and then takes the panic of a waker it
    /// woke, for the caller to resume once its release is complete (see
    /// `unwind.rs`).
    #[cold]
    #[inline(never)]
    fn flush_caught(
        &self,
        mag: &Magazine,
        free: &FreeList,
        waiters: &WaitQueue,
    ) -> Option<Payload> {
        self.flush(mag, free, waiters);
        crate::unwind::take()
    }

    /// Moves this thread's whole magazine to the free list, because threads
    /// are waiting.
    #[cold]
    #[inline(never)]
    fn flush(&self, mag: &Magazine, free: &FreeList, waiters: &WaitQueue) {
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

    /// How many indices all magazines hold: exact when no operation is in
    /// flight.
    pub(crate) fn cached(&self) -> u32 {
        self.magazines.iter().map(|m| m.len_hint()).sum()
    }

    /// The largest of the magazines' peak bounds (see
    /// [`Magazine::peak_bound`]), not yet folded into the pool's peak.
    pub(crate) fn peak_bound(&self) -> u32 {
        self.magazines
            .iter()
            .map(|m| m.peak_bound())
            .max()
            .unwrap_or(0)
    }
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("size", &self.size)
            .field("limit", &self.limit())
            .finish_non_exhaustive()
    }
}
