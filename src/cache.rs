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
//! free indices, its length, and two flags, `busy` (written by the owner
//! only) and `revoked` (written by revokers only).
//!
//! **Owner** (acquire and release, no locked instruction):
//!
//! 1. `enter`: store `busy = true`; [`barrier::light`]; load `revoked`. If a
//!    revoker holds the magazine, skip to 3 and use the free list directly.
//! 2. Pop an index off the stack (acquire) or push one onto it (release),
//!    with plain loads and stores. An empty stack refills with up to `batch`
//!    indices from the free list in one CAS ([`FreeList::pop_batch`]); a
//!    full one flushes its oldest `batch` indices in one CAS
//!    ([`FreeList::push_batch`]).
//! 3. `exit`: store `busy = false` (Release); [`barrier::light`]; load the
//!    pool's count of waiting threads. If anyone waits, flush the whole
//!    stack to the free list (which wakes them), so that a cache never
//!    hides a slot from a waiter.
//!
//! **Revoker** (a thread whose own stack and the free list are both empty):
//!
//! 1. For each magazine that looks non-empty, CAS `revoked` from 0 to a
//!    token of its own (one revoker per magazine at a time).
//! 2. [`barrier::heavy`].
//! 3. For each magazine it claimed: if `busy` is false (Acquire), move its
//!    whole stack to the free list in one CAS; then store `revoked = 0`
//!    (Release).
//!
//! A waiter first counts itself in the waiting count and sets the free
//! list's waiter flag, then runs a [`barrier::heavy`] *before* step 1, so
//! that its reads of the stacks' lengths are ordered after its registration.
//!
//! # Invariants
//!
//! - *Exclusive access.* A magazine's stack is accessed only by its owner
//!   between an `enter` that saw `revoked == 0` and the next `exit`, or by
//!   the revoker whose token is in `revoked` after it saw `busy == false`
//!   following its heavy barrier. These never overlap: the owner's
//!   `busy = true; light; load revoked` and the revoker's
//!   `revoked = token; heavy; load busy` are a Dekker pair, so at least one
//!   of them sees the other's store. The owner that sees `revoked` stays
//!   out; the revoker that sees `busy` leaves the stack alone.
//! - *Ownership of slots.* An index is in exactly one place: the free list,
//!   one magazine's stack (below its `len`), or one guard (or a thread
//!   between taking it and building the guard). Indices move between a
//!   stack and the free list only through the free list's head CAS, whose
//!   Acquire/Release pair publishes both the links and the slot values;
//!   within a magazine, `busy`'s Release store and a revoker's Acquire load
//!   (or `revoked`'s Release clear and the owner's Acquire load) publish the
//!   stack itself.
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
//! its plain store of `len`; one that moves indices to or from the free list
//! at that list's successful CAS. A failing `try_acquire` takes effect at
//! its last look at the stacks: if no operation was in flight then, every
//! stack's `len` it read was final (each owner's last `exit` happened-before
//! the look), every non-empty stack was moved, and the free list held them,
//! so it fails only when every slot is held by a guard. A release that
//! happens-before an acquire on another thread is therefore visible to it,
//! through the owner's stack, a move, or the free list.
//!
//! # Sizing
//!
//! See [`Builder::thread_cache`](crate::Builder::thread_cache) for the rule
//! that sizes magazines from the capacity and switches them off for small
//! pools.

use core::fmt;

use crossbeam_utils::CachePadded;

use crate::barrier;
use crate::free_list::FreeList;
use crate::sync::{AtomicBool, AtomicU32, AtomicUsize, Ordering, PerThread, UnsafeCell};
use crate::wait::WaitQueue;

/// The most indices one magazine holds.
pub(crate) const MAX_THREAD_CACHE: usize = 64;

/// Records `in_use` slots out of the free list in `peak` (see
/// `Stats::peak_in_use`).
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

/// One thread's stack of free indices.
///
/// # Invariants
///
/// See the module docs: `items[..len]` is accessed only by whoever holds the
/// magazine (the owner inside `enter`/`exit` with `revoked == 0`, or the
/// revoker whose token is in `revoked`, after seeing `busy == false`).
pub(crate) struct Magazine {
    /// The owner is inside an operation. Written by the owner only.
    busy: AtomicBool,
    /// 0, or the token of the revoker that holds the magazine. Written by
    /// revokers only.
    revoked: AtomicUsize,
    /// How many indices `items` holds. Written by the holder; read without
    /// holding by `stats` and by revokers choosing what to revoke.
    len: AtomicU32,
    /// The stack: `items[..len]` are free slot indices, owned by this
    /// magazine; the top is `items[len - 1]`.
    items: UnsafeCell<[u32; MAX_THREAD_CACHE]>,
}

// SAFETY: a magazine is shared by its owner, revokers and `stats`. Its
// atomics are `Sync`; `items` is accessed only by the one party that holds
// the magazine (the invariant above, kept by the `busy`/`revoked` Dekker
// pair), so sharing `&Magazine` never lets two threads touch it at once.
// The indices are plain `u32`s, so no `T` is shared through it.
unsafe impl Sync for Magazine {}

impl Magazine {
    fn new() -> CachePadded<Self> {
        CachePadded::new(Self {
            busy: AtomicBool::new(false),
            revoked: AtomicUsize::new(0),
            len: AtomicU32::new(0),
            items: UnsafeCell::new([0; MAX_THREAD_CACHE]),
        })
    }

    /// Starts an owner operation; `true` if the owner holds the magazine
    /// until [`exit`](Self::exit), `false` if a revoker holds it. Either way
    /// the caller must call `exit`.
    #[inline(always)]
    fn enter(&self, light: bool) -> bool {
        // Relaxed: ordered before the load below by the light barrier.
        self.busy.store(true, Ordering::Relaxed);
        // Pairs with the heavy barrier in `Cache::sweep`: the revoker sees
        // `busy`, or this thread sees `revoked`.
        barrier::light_with(light);
        // Acquire: pairs with the revoker's Release clear, so a move it made
        // is visible before this thread touches the stack again.
        #[cfg(not(all(loom, tagpool_loom_ignore_revoked)))]
        return self.revoked.load(Ordering::Acquire) == 0;
        // Loom-only fault injection: an owner that never yields to a
        // revoker.
        #[cfg(all(loom, tagpool_loom_ignore_revoked))]
        {
            let _ = self.revoked.load(Ordering::Acquire);
            true
        }
    }

    /// Runs `f` on the stack. Under loom the access spans the call, so loom
    /// reports any other access to the stack meanwhile.
    ///
    /// # Safety
    ///
    /// - The caller holds the magazine: it is the owner between an `enter`
    ///   that returned `true` and its `exit`, or the revoker whose token is
    ///   in `revoked` and that saw `busy == false` after its heavy barrier.
    #[inline(always)]
    unsafe fn with_items<R>(&self, f: impl FnOnce(&mut [u32; MAX_THREAD_CACHE]) -> R) -> R {
        let items = self.items.get_mut();
        // SAFETY: the caller holds the magazine, so no other reference to
        // the stack exists while `f` runs.
        items.with(|p| f(unsafe { &mut *p }))
    }

    /// Ends an owner operation.
    #[inline(always)]
    fn exit(&self, light: bool) {
        // Release: pairs with the revoker's Acquire load of `busy`: the
        // stack as this operation left it is what the revoker moves.
        self.busy.store(false, Ordering::Release);
        // Pairs with the heavy barrier a waiter runs after counting itself:
        // the waiter sees this stack, or the caller sees the waiter.
        barrier::light_with(light);
    }
}

impl Magazine {
    /// Pops the top index, if any.
    ///
    /// # Safety
    ///
    /// As [`with_items`](Self::with_items): the caller holds the magazine.
    #[inline(always)]
    unsafe fn pop_held(&self) -> Option<u32> {
        // Relaxed: only the holder writes `len`; the caller holds it.
        let len = self.len.load(Ordering::Relaxed);
        if len == 0 {
            return None;
        }
        // SAFETY: the caller holds the magazine.
        let index = unsafe { self.with_items(|stack| stack[len as usize - 1]) };
        // Relaxed: published to revokers by `exit`'s Release store.
        self.len.store(len - 1, Ordering::Relaxed);
        Some(index)
    }

    /// Pushes `index` if fewer than `size` are held; `false` if full.
    ///
    /// # Safety
    ///
    /// As [`with_items`](Self::with_items): the caller holds the magazine.
    #[inline(always)]
    unsafe fn push_held(&self, index: u32, size: u32) -> bool {
        // Relaxed: only the holder writes `len`; the caller holds it.
        let len = self.len.load(Ordering::Relaxed);
        if len >= size {
            return false;
        }
        // SAFETY: the caller holds the magazine.
        unsafe { self.with_items(|stack| stack[len as usize] = index) };
        // Relaxed: published to revokers by `exit`'s Release store.
        self.len.store(len + 1, Ordering::Relaxed);
        true
    }
}

/// The per-thread caches of one pool.
pub(crate) struct Cache {
    magazines: PerThread<CachePadded<Magazine>>,
    /// The most indices a magazine holds: `2..=MAX_THREAD_CACHE` in normal
    /// use, 1 allowed.
    size: u32,
    /// How many indices a refill takes and a flush gives back.
    batch: u32,
    /// The barrier mode, fixed when the cache is made: whether the fast
    /// path's light barrier is a compiler fence only (`membarrier`).
    light: bool,
}

impl Cache {
    /// Caches of `size` indices per thread (`1..=MAX_THREAD_CACHE`).
    pub(crate) fn new(size: usize) -> Self {
        debug_assert!((1..=MAX_THREAD_CACHE).contains(&size));
        barrier::init();
        Self {
            magazines: PerThread::new(Magazine::new),
            size: size as u32,
            batch: (size as u32 / 2).max(1),
            light: barrier::is_light(),
        }
    }

    pub(crate) fn size(&self) -> usize {
        self.size as usize
    }

    /// This thread's magazine, made on first use; `None` late in thread
    /// exit, once the thread's id is released.
    #[inline(always)]
    fn magazine(&self) -> Option<&Magazine> {
        self.magazines.get_or_make().map(|m| &**m)
    }

    /// Takes a free index from this thread's magazine, refilling it from the
    /// free list when empty. `None` if both are empty (or the magazine is
    /// being revoked): the caller then revokes others with [`sweep`].
    ///
    /// The common case (the thread's remembered magazine, not empty, no
    /// revoker) is inlined into the caller; everything else is
    /// [`acquire_slow`](Self::acquire_slow).
    ///
    /// [`sweep`]: Self::sweep
    #[inline(always)]
    pub(crate) fn acquire(
        &self,
        free: &FreeList,
        waiters: &WaitQueue,
        peak: &AtomicU32,
    ) -> Option<u32> {
        // Read once: the barriers below would make the compiler read it again.
        let light = self.light;
        if let Some(mag) = self.magazines.remembered() {
            let mut taken = None;
            if mag.enter(light) {
                // SAFETY: this thread holds the magazine: it entered and saw
                // no revoker.
                taken = unsafe { mag.pop_held() };
            }
            mag.exit(light);
            if let Some(index) = taken {
                if waiters.waiting() {
                    self.flush(mag, free, waiters);
                }
                return Some(index);
            }
        }
        self.acquire_slow(free, waiters, peak)
    }

    /// [`acquire`](Self::acquire) when the fast path could not: no
    /// remembered magazine, an empty one (refill), or a revoker in it.
    #[inline(never)]
    fn acquire_slow(&self, free: &FreeList, waiters: &WaitQueue, peak: &AtomicU32) -> Option<u32> {
        let mag = self.magazine()?;
        let mut taken = None;
        if mag.enter(self.light) {
            // SAFETY: this thread holds the magazine: it entered and saw no
            // revoker.
            taken = unsafe { mag.pop_held() };
            if taken.is_none() {
                taken = self.refill(mag, free, peak);
            }
        }
        mag.exit(self.light);
        if waiters.waiting() {
            self.flush(mag, free, waiters);
        }
        taken
    }

    /// Refills the held, empty magazine `mag` with one batch from the free
    /// list and takes the last index of it.
    #[inline(never)]
    fn refill(&self, mag: &Magazine, free: &FreeList, peak: &AtomicU32) -> Option<u32> {
        // SAFETY: the caller holds the magazine (see `acquire`).
        let got = unsafe {
            mag.with_items(|stack| {
                let taken = free.pop_batch(&mut stack[..self.batch as usize])?;
                let kept = taken.count - 1;
                Some((stack[kept as usize], kept, taken.free))
            })
        };
        let (index, kept, left) = got?;
        // Relaxed: published to revokers by `exit`'s Release store.
        mag.len.store(kept, Ordering::Relaxed);
        // The slots out of the free list, this thread's new cache included:
        // that count only grows at pops, so sampling it at every pop bounds
        // the most slots ever held from above.
        note_peak(peak, free.capacity() - left);
        Some(index)
    }

    /// Puts `index`, owned by the caller, into this thread's magazine,
    /// flushing a batch to the free list when it is full. `false` if the
    /// magazine is unavailable (being revoked, or the thread is exiting):
    /// the caller pushes `index` to the free list itself.
    ///
    /// The common case (the thread's remembered magazine, not full, no
    /// revoker) is inlined into the caller; everything else is
    /// [`release_slow`](Self::release_slow).
    #[inline(always)]
    pub(crate) fn release(&self, index: u32, free: &FreeList, waiters: &WaitQueue) -> bool {
        // Read once: the barriers below would make the compiler read it again.
        let light = self.light;
        if let Some(mag) = self.magazines.remembered() {
            let mut done = false;
            if mag.enter(light) {
                // SAFETY: this thread holds the magazine (see `acquire`).
                done = unsafe { mag.push_held(index, self.size) };
            }
            mag.exit(light);
            if done {
                if waiters.waiting() {
                    self.flush(mag, free, waiters);
                }
                return true;
            }
        }
        self.release_slow(index, free, waiters)
    }

    /// [`release`](Self::release) when the fast path could not: no
    /// remembered magazine, a full one (flush a batch), or a revoker in it.
    #[inline(never)]
    fn release_slow(&self, index: u32, free: &FreeList, waiters: &WaitQueue) -> bool {
        // `None` only late in thread exit: the thread then uses the free
        // list directly.
        let Some(mag) = self.magazine() else {
            return false;
        };
        let mut done = false;
        let mut flushed = None;
        if mag.enter(self.light) {
            // Relaxed: only the holder writes `len`; this thread holds it.
            let mut len = mag.len.load(Ordering::Relaxed);
            // SAFETY: this thread holds the magazine (see `acquire`).
            unsafe {
                mag.with_items(|stack| {
                    if len == self.size {
                        flushed = Some(self.flush_oldest(stack, len, free));
                        len -= self.batch;
                    }
                    stack[len as usize] = index;
                });
            }
            // Relaxed: published to revokers by `exit`'s Release store.
            mag.len.store(len + 1, Ordering::Relaxed);
            done = true;
        }
        mag.exit(self.light);
        if let Some((pushed, n)) = flushed {
            waiters.wake_after(free, pushed, n);
        }
        if waiters.waiting() {
            self.flush(mag, free, waiters);
        }
        done
    }

    /// Pushes the `batch` oldest indices of the full `stack` to the free
    /// list and moves the rest down.
    #[inline(never)]
    fn flush_oldest(
        &self,
        stack: &mut [u32; MAX_THREAD_CACHE],
        len: u32,
        free: &FreeList,
    ) -> (crate::free_list::Pushed, u32) {
        let batch = self.batch as usize;
        let pushed = free.push_batch(&stack[..batch]);
        stack.copy_within(batch..len as usize, 0);
        (pushed, self.batch)
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
            if mag.enter(false) {
                // Relaxed: only the holder writes `len`; this thread holds it.
                let len = mag.len.load(Ordering::Relaxed);
                let mut pushed = None;
                if len > 0 {
                    // SAFETY: this thread holds the magazine (see `acquire`).
                    let p =
                        unsafe { mag.with_items(|stack| free.push_batch(&stack[..len as usize])) };
                    // Relaxed: published to revokers by `exit`'s Release store.
                    mag.len.store(0, Ordering::Relaxed);
                    pushed = Some((p, len));
                }
                mag.exit(false);
                break pushed;
            }
            mag.exit(false);
            // A revoker holds the magazine. It may have seen this thread
            // busy and left the stack alone: wait for its clear and flush
            // ourselves, or a waiter could be left with the slots hidden
            // here. The revoker holds no lock and clears promptly.
            // Relaxed: the retried `enter` synchronizes.
            while mag.revoked.load(Ordering::Relaxed) != 0 {
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
        // A token no other live sweep holds: the address of a local.
        let marker = 0u8;
        let token = core::ptr::addr_of!(marker).addr();
        let mut claimed = false;
        let mut contended = false;
        for mag in self.magazines.iter() {
            // Relaxed: a hint. With no operation in flight it is exact: the
            // owner's last `exit` happened-before this sweep.
            if mag.len.load(Ordering::Relaxed) == 0 {
                continue;
            }
            // Acquire: pairs with the previous revoker's Release clear.
            match mag
                .revoked
                .compare_exchange(0, token, Ordering::Acquire, Ordering::Relaxed)
            {
                Ok(_) => claimed = true,
                Err(_) => contended = true,
            }
        }
        if !claimed {
            return Swept {
                moved: 0,
                contended,
            };
        }
        // Pairs with the light barrier in `Magazine::enter`: each owner sees
        // its `revoked`, or this thread sees its `busy`.
        barrier::heavy();
        let mut moved = 0;
        for mag in self.magazines.iter() {
            // Relaxed: only this thread stores `token`.
            if mag.revoked.load(Ordering::Relaxed) != token {
                continue;
            }
            // Acquire: pairs with the owner's Release in `exit`.
            let busy = mag.busy.load(Ordering::Acquire);
            if !busy || cfg!(all(loom, tagpool_loom_ignore_busy)) {
                // Relaxed: ordered by the Acquire load of `busy`.
                let len = mag.len.load(Ordering::Relaxed);
                if len > 0 {
                    let drain = |stack: &mut [u32; MAX_THREAD_CACHE]| {
                        free.push_batch(&stack[..len as usize])
                    };
                    // SAFETY: this thread holds the magazine: its token is in
                    // `revoked`, and the owner was not busy after the heavy
                    // barrier, so the owner stays out until the clear below.
                    let p = unsafe { mag.with_items(drain) };
                    // Relaxed: published by the Release clear below.
                    mag.len.store(0, Ordering::Relaxed);
                    waiters.wake_after(free, p, len);
                    moved += len;
                }
            }
            // Release: pairs with the owner's Acquire load in `enter`.
            mag.revoked.store(0, Ordering::Release);
        }
        Swept { moved, contended }
    }

    /// How many indices all magazines hold: exact when no operation is in
    /// flight.
    pub(crate) fn cached(&self) -> u32 {
        self.magazines
            .iter()
            // Relaxed: a statistic.
            .map(|m| m.len.load(Ordering::Relaxed))
            .sum()
    }
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("size", &self.size)
            .field("batch", &self.batch)
            .finish_non_exhaustive()
    }
}
