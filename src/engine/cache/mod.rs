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
//! `BUSY` bit, and is written by the owner only; `revoked` is 0, a
//! revoker's *claim* (its token), `MOVING` while a revoker that committed
//! moves the stack, or `DRAINED` once it has (and `SEALING`/`SEALED` for
//! the pool's drop).
//!
//! **Owner** (acquire and release, no locked instruction on the fast path):
//!
//! 1. `enter`: read `state` (its own), store it back with `BUSY` set;
//!    [`barrier::light_with`]; load `revoked`. If it is not 0, the fast
//!    path skips to 3 with the length unchanged, and the slow path
//!    ([`Magazine::enter`]) looks at it: for `DRAINED`, it records the
//!    stack as empty and stores `revoked = 0` itself; for a claim, it CASes
//!    the claim back to 0 and holds the magazine (the claiming revoker has
//!    not touched the stack, and its commit will fail); for `MOVING`, it
//!    leaves the stack to the revoker (a release uses the free list, an
//!    acquire looks elsewhere). No owner ever waits for a revoker.
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
//! would flush back at once (flushing its own stack first: its fast path
//! may have left the stack to a sweep that then saw it busy). That spares
//! a flush per operation; the step-3 check still covers an owner whose
//! look came too early.
//!
//! **Revoker** (a thread whose own stack and the free list are both empty,
//! or a waiter, a close, a trim):
//!
//! 1. For each magazine that looks non-empty, CAS `revoked` from 0, or
//!    from another revoker's claim (taking it over: that revoker's commit
//!    then fails), to a claim of its own (AcqRel). `DRAINED` means already
//!    empty; `MOVING` means another revoker is moving the stack (its push
//!    wakes the waiters): both are skipped, the latter reported as
//!    *contended*.
//! 2. [`barrier::heavy`].
//! 3. For each magazine it still claims: load `state` (Acquire). If `BUSY`
//!    is clear and the stack is not empty, commit with a CAS from its claim
//!    to `MOVING`; if that succeeds, move the whole stack to the free list
//!    in one CAS and store `revoked = DRAINED` (Release). Otherwise CAS its
//!    claim back to 0 (a failure means the owner took the claim back, or
//!    another revoker took it over: either now looks after the stack). The
//!    revoker never writes `state`: the owner's plain stores to it could
//!    not be ordered with a revoker's, so the owner learns that its stack
//!    was emptied from `DRAINED` instead.
//! 4. Only then, holding no magazine, wake the waiters its pushes found
//!    (user code runs in a waker: never while a revoker holds a claim or
//!    moves a stack, which another thread could be looking at).
//!
//! A waiter first counts itself in the waiting count and sets the free
//! list's waiter flag, then runs a [`barrier::heavy`] *before* step 1, so
//! that its reads of the stacks' lengths are ordered after its registration.
//!
//! # Invariants
//!
//! - *Exclusive access.* A magazine's stack is accessed only by its owner
//!   between an `enter` that saw (or made) `revoked == 0` and the next
//!   `exit`, or by the revoker whose commit CAS (claim to `MOVING`)
//!   succeeded, until its store of `DRAINED`. These never overlap. The
//!   owner's `state |= BUSY; light; load revoked` and the revoker's
//!   `revoked = claim; heavy; load state` are a Dekker pair, so at least
//!   one of them sees the other's store: the owner that sees the claim
//!   takes it back by CAS before it touches the stack, and then the
//!   revoker's commit CAS (from the same claim) fails; the revoker that
//!   sees `BUSY` does not commit. Every change of `revoked` between claims,
//!   0 and `MOVING` is a CAS from the value read, so exactly one of a
//!   take-back and a commit succeeds.
//! - *A drained stack is empty.* While `revoked == DRAINED` no revoker
//!   claims the magazine (claims CAS from 0 or a claim) and readers other
//!   than the owner count it as empty. The owner stores the empty `state`
//!   before it clears `DRAINED` (Release), so the next revoker to claim
//!   (Acquire) reads the empty stack.
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
//!   barrier is seen by the look (and moved to the free list; or the owner
//!   was busy again, or took the claim back, and its next `exit` flushes,
//!   since the claim's Release half made the waiter's count visible to it;
//!   or another revoker took the claim over, and its own look after its own
//!   barrier covers the stack the same way; or another revoker is moving
//!   it, and its push notifies); one whose `exit` came after sees the
//!   waiting count and flushes. A flush or a move pushes to the free list,
//!   which notifies a waiter (see `engine/wait`). No waiter ever needs to
//!   look again.
//! - *Progress.* No owner waits for a revoker, and no revoker for an owner
//!   or another revoker: every step is one CAS from the value just read,
//!   retried only when another thread's step succeeded.

//! # Linearization
//!
//! An acquire or release that only touches its own stack takes effect at
//! its store of `state`; one that moves indices to or from the free list
//! at that list's successful CAS. A failing `try_acquire` takes effect at
//! its last look at the stacks: if no operation was in flight then, every
//! stack's length it read was final (each owner's last `exit` happened-before
//! the look), every non-empty stack was moved, and the free list held them,
//! so it fails only when every slot is held by a guard. A pop that finds
//! nobody waiting, the free list empty, every segment grown and every
//! magazine reading empty fails at once, at that look (`Shared::exhausted`,
//! [`Cache::any_cached`]): the sweep would claim nothing on those lengths,
//! so the shortcut answers only where the full path, reading the same
//! words, fails too. A release that
//! happens-before an acquire on another thread is therefore visible to it,
//! through the owner's stack, a move, or the free list. While another
//! operation is in flight, a failing `try_acquire` may miss the slots that
//! operation holds for a moment (an owner inside its stack, a revoker
//! between its commit and its push): it does not wait for that operation
//! to end (see *Progress*), and the slots are not lost: the owner keeps or
//! flushes them, the revoker's push puts them in the free list.
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

use crate::engine::barrier;
use crate::engine::free_list::FreeList;
use crate::engine::unwind::Payload;
use crate::engine::wait::WaitQueue;
use crate::sync::{fence, AtomicBool, AtomicU32, Ordering, PerThread};

mod magazine;
mod sweep;
#[cfg(test)]
mod tests;

pub(crate) use self::magazine::Magazine;
use self::magazine::{settle_tail, tail, BUSY, DRAINED, SEALED, SEALING, TAIL};

/// What a release returns: what is left to do (see [`Settle`]), and the
/// reset closure's panic, to resume after that.
pub(crate) type Released = (Settle, Option<Box<dyn core::any::Any + Send>>);

/// What an owned guard's release leaves to do once no reference into the
/// pool's state is live (so that the state may be freed by another thread
/// meanwhile): see `Shared::finish`.
#[must_use]
pub(crate) enum Settle {
    /// Nothing: a borrowed guard.
    Done,
    /// The release was counted in this magazine: end its tail.
    Tail(NonNull<Magazine>),
    /// The release was not counted: take one from the state's shared count (`Shared::owned`).
    Shared,
}

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
    /// A non-empty magazine was being moved by another revoker (its push
    /// wakes the waiters; nobody needs to look at it again).
    pub(crate) contended: bool,
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
    /// `engine/shared`. Runs once no acquire can run any more; releases of owned
    /// guards may run on other threads.
    ///
    /// Sealing a magazine is a revocation that keeps it: CAS `revoked` to
    /// `SEALING` (not a claim: the owner cannot take it back), heavy
    /// barrier, load `state`. If the owner is outside any operation and
    /// tail, the count is final (the owner stays out from now on: it sees
    /// `SEALING`, then `SEALED`), so read it and store
    /// `SEALED`; else give the magazine back and try again (the owner's
    /// operation is short and takes no lock).
    pub(crate) fn seal(&self) -> u64 {
        if !self.enabled() {
            return 0;
        }
        // SeqCst store and fence: pair with `magazine`'s fence and load.
        self.sealing.store(true, Ordering::SeqCst);
        fence(Ordering::SeqCst);
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
                // the heavy barrier below. `SEALING`, not a claim: the owner
                // must not take it back (see `Magazine::enter`).
                if mag
                    .revoked
                    .compare_exchange(before, SEALING, Ordering::Relaxed, Ordering::Relaxed)
                    .is_err()
                {
                    continue;
                }
                // Pairs with the light barrier in `Magazine::enter_with`, as
                // in `sweep`: the owner sees `SEALING`, or this thread sees
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
            crate::engine::unwind::discard(self.flush_caught(mag, free, waiters));
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
            crate::engine::unwind::take()
        } else {
            None
        };
        (done.then(|| settle_tail::<OWNED>(mag)), caught)
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
