//! The asymmetric barrier: a free [`light_with`] half for the per-thread caches'
//! fast path, and an expensive [`heavy`] half for the rare thread that
//! revokes other threads' caches.
//!
//! Both halves order a store before a later load on their own thread, as a
//! `SeqCst` fence does (a Dekker pair: each side stores its flag, runs its
//! half, then loads the other side's flag; at least one of them sees the
//! other's store). [`heavy`] pays for both: on Linux it is the
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` system call, which makes
//! every running thread of the process execute a full memory barrier (an
//! inter-processor interrupt) before it returns, so [`light_with`] only has to
//! stop the compiler from reordering. The same technique is behind folly's
//! `asymmetricHeavyBarrier`, the `seize` crate and liburcu.
//!
//! Where `membarrier` is missing (other systems, kernels before 4.14,
//! seccomp filters, miri) both halves are `fence(SeqCst)`: correct, and the
//! fast path then pays one fence per barrier. Loom models the barrier the
//! same way (it supports `SeqCst` fences).
//!
//! The mode is decided once per process, before the first cache is used,
//! and only moves from "undecided" to one of the two modes. An undecided
//! [`light_with`] is a real fence, which pairs with either kind of [`heavy`].
//! Without `membarrier` the caches' inlined fast path never runs (only
//! light-mode caches memoize their magazines, see `cache.rs`): every
//! operation takes the out-of-line path with real fences.
//!
//! `fork()`: a child process inherits the mode but not the kernel's
//! registration. Its first [`heavy`] that fails registers again and
//! retries; if that is refused too, the process aborts with a message
//! rather than run a cache without its barrier.

#[cfg(not(all(loom, feature = "loom")))]
use crate::sync::AtomicU32;
use crate::sync::{fence, Ordering};

/// Not decided yet: [`light_with`] fences.
#[cfg(not(all(loom, feature = "loom")))]
const UNDECIDED: u32 = 0;
/// `membarrier` is registered: [`light_with`] is a compiler fence.
#[cfg(not(all(loom, feature = "loom")))]
const MEMBARRIER: u32 = 1;
/// No `membarrier`: both halves fence.
#[cfg(not(all(loom, feature = "loom")))]
const FENCES: u32 = 2;

/// The process-wide mode.
#[cfg(not(all(loom, feature = "loom")))]
static MODE: AtomicU32 = AtomicU32::new(UNDECIDED);

/// Decides the mode, if nobody has yet. Called when a pool with caches is
/// built, so that its fast path starts light.
pub(crate) fn init() {
    #[cfg(not(all(loom, feature = "loom")))]
    {
        // Relaxed: the mode is a plain fact, decided before any cache that
        // depends on it exists.
        if MODE.load(Ordering::Relaxed) == UNDECIDED {
            let mode = if sys::register() { MEMBARRIER } else { FENCES };
            // Relaxed: as above. The first decision wins for good, even if
            // racing threads' registrations disagreed (a per-thread seccomp
            // filter): the mode never moves once a cache may depend on it.
            let _ = MODE.compare_exchange(UNDECIDED, mode, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
}

/// The cheap half, on the fast path: orders this thread's earlier stores
/// before its later loads, given that the other side uses [`heavy`].
///
/// `compiler_only` must be [`is_light`] as read after [`init`] (the mode
/// never changes afterwards), or `false`, which is always valid. The caller
/// keeps the mode next to its own data, which saves the fast path a load of
/// a shared static.
#[inline(always)]
pub(crate) fn light_with(compiler_only: bool) {
    if compiler_only {
        // `heavy` makes this thread run a full barrier at some point
        // between its own two halves; the compiler must keep this thread's
        // store and load on their sides of that point.
        crate::sync::compiler_fence(Ordering::SeqCst);
        return;
    }
    // Loom-only fault injection: a fast path with no barrier at all.
    if cfg!(all(loom, tagpool_loom_no_light_barrier)) {
        return;
    }
    // SeqCst fence: pairs with the fence (or `membarrier`) in `heavy`.
    fence(Ordering::SeqCst);
}

/// The cheap half on the caches' inlined fast path, which runs only for a
/// memoized magazine: outside loom, magazines are memoized only when
/// [`is_light`] was true as their cache was made, so this is always a
/// compiler fence there. Under loom (no memo: the fast path runs for every
/// magazine, and the mode is never light) it is the real fence of
/// [`light_with`]`(false)`.
#[inline(always)]
pub(crate) fn light_fast() {
    #[cfg(not(all(loom, feature = "loom")))]
    {
        // As in `light_with(true)`: `heavy` is `membarrier` (the caller's
        // contract, see above).
        crate::sync::compiler_fence(Ordering::SeqCst);
    }
    #[cfg(all(loom, feature = "loom"))]
    light_with(false);
}

/// The expensive half, on the revoking slow path: after it returns, every
/// other thread has either made visible the stores it did before its last
/// [`light_with`], or will see this thread's earlier stores after its next one.
pub(crate) fn heavy() {
    #[cfg(not(all(loom, feature = "loom")))]
    {
        init();
        // Relaxed: see `init`.
        if MODE.load(Ordering::Relaxed) == MEMBARRIER {
            sys::barrier();
            return;
        }
    }
    // Loom-only fault injection: a revoker that does not wait for the
    // other threads' view to settle.
    if cfg!(all(loom, tagpool_loom_no_heavy_barrier)) {
        return;
    }
    // SeqCst fence: pairs with the fence in `light_with`.
    fence(Ordering::SeqCst);
}

/// Whether the fast path runs without a hardware fence: reported in the
/// pool's `Debug` output and in the docs' performance notes.
pub(crate) fn is_light() -> bool {
    #[cfg(not(all(loom, feature = "loom")))]
    {
        // Relaxed: see `init`.
        MODE.load(Ordering::Relaxed) == MEMBARRIER
    }
    #[cfg(all(loom, feature = "loom"))]
    false
}

#[cfg(all(target_os = "linux", not(miri), not(all(loom, feature = "loom"))))]
mod sys {
    use std::os::raw::{c_int, c_long};

    // From `linux/membarrier.h` (stable kernel ABI since Linux 4.14).
    const CMD_QUERY: c_int = 0;
    const CMD_PRIVATE_EXPEDITED: c_int = 1 << 3;
    const CMD_REGISTER_PRIVATE_EXPEDITED: c_int = 1 << 4;

    fn membarrier(cmd: c_int) -> c_long {
        // SAFETY: `membarrier` takes two integers (and a CPU id that is
        // ignored without `MEMBARRIER_CMD_FLAG_CPU`), touches no memory of
        // ours and has no effect on this process beyond the barrier.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as c_int, 0 as c_int) }
    }

    /// Registers the process for private expedited barriers; `false` if the
    /// kernel lacks them (or a seccomp filter forbids the call).
    pub(super) fn register() -> bool {
        let supported = membarrier(CMD_QUERY);
        if supported < 0 || supported & c_long::from(CMD_PRIVATE_EXPEDITED) == 0 {
            return false;
        }
        membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0
    }

    /// One process-wide barrier.
    pub(super) fn barrier() {
        if membarrier(CMD_PRIVATE_EXPEDITED) == 0 {
            return;
        }
        // A forked child inherits the mode but may need to register again.
        if membarrier(CMD_REGISTER_PRIVATE_EXPEDITED) == 0 && membarrier(CMD_PRIVATE_EXPEDITED) == 0
        {
            return;
        }
        // Threads already run their fast path with compiler fences only:
        // without the barrier the caches could hand one slot out twice.
        std::eprintln!("tagpool: membarrier failed after registration; aborting");
        std::process::abort();
    }
}

#[cfg(not(all(target_os = "linux", not(miri), not(all(loom, feature = "loom")))))]
#[cfg(not(all(loom, feature = "loom")))]
mod sys {
    pub(super) fn register() -> bool {
        false
    }

    pub(super) fn barrier() {
        unreachable!("the mode is FENCES without membarrier")
    }
}
