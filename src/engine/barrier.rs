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
//! light-mode caches memoize their magazines, see `engine/cache`): every
//! operation takes the out-of-line path with real fences.
//!
//! # When `membarrier` fails after registration
//!
//! Once the mode is `membarrier`, owners run their fast path with compiler
//! fences only, so a [`heavy`] that returned without a process-wide barrier
//! could let a revoker and an owner hand one slot out twice. Switching the
//! process back to fences would not help the owners already past their
//! compiler fence, and would need every owner to acknowledge the switch
//! (an idle one never does). So [`heavy`] never returns without a barrier
//! that succeeded, and handles each failure the kernel documents:
//!
//! - `ENOMEM` (the kernel could not allocate the CPU mask; also `EAGAIN`
//!   and `EINTR`, which it does not document for this command but which
//!   say "try again"): transient. [`heavy`] retries, yielding for the
//!   first tries and then sleeping from 1 ms, doubling to at most 64 ms
//!   between tries, for as long as the kernel keeps refusing. Only the
//!   revoking thread (or the pool's drop) waits; owners' fast paths never
//!   call [`heavy`]. Exactness is kept: nothing proceeds without a barrier.
//! - `EPERM` (not registered): a `fork()`ed child inherits the mode but
//!   not the kernel's registration. [`heavy`] registers again, once, and
//!   retries.
//! - Anything else (`ENOSYS`, `EINVAL`, or `EPERM` again after a successful
//!   registration: a seccomp filter installed after the registration,
//!   which the kernel will keep refusing): permanent. No barrier can order
//!   the owners' compiler fences any more, and every cache operation from
//!   then on could hand a slot out twice, so the process aborts with
//!   `tagpool: membarrier failed permanently after registration (errno N);
//!   aborting`. This is the only abort in the crate.

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
pub(crate) mod sys {
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

    /// One `membarrier` command; `Err(errno)` if it failed.
    fn call(cmd: c_int) -> Result<(), c_int> {
        #[cfg(test)]
        if cmd == CMD_PRIVATE_EXPEDITED && fault::take() {
            return Err(libc::ENOMEM);
        }
        if membarrier(cmd) == 0 {
            return Ok(());
        }
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    }

    /// One process-wide barrier (see "When `membarrier` fails after
    /// registration" in the module docs).
    pub(super) fn barrier() {
        if let Err(errno) = retrying(call, pause) {
            // Threads already run their fast path with compiler fences only:
            // without the barrier the caches could hand one slot out twice.
            std::eprintln!(
                "tagpool: membarrier failed permanently after registration (errno {errno}); aborting"
            );
            std::process::abort();
        }
    }

    /// Waits before try `tries + 1` of a barrier the kernel refused for
    /// want of memory: a yield for the first 8 tries, then a sleep of 1 ms,
    /// doubling to at most 64 ms.
    fn pause(tries: u32) {
        if tries < 8 {
            std::thread::yield_now();
        } else {
            let ms = 1u64 << (tries - 8).min(6);
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
    }

    /// The barrier's retry policy, apart from the kernel (`call` runs a
    /// command, `pause` waits before a retry) for its tests: `Ok` once a
    /// barrier succeeded, `Err(errno)` for a permanent failure.
    fn retrying(
        mut call: impl FnMut(c_int) -> Result<(), c_int>,
        mut pause: impl FnMut(u32),
    ) -> Result<(), c_int> {
        let mut registered_again = false;
        let mut tries = 0u32;
        loop {
            match call(CMD_PRIVATE_EXPEDITED) {
                Ok(()) => return Ok(()),
                Err(libc::ENOMEM | libc::EAGAIN | libc::EINTR) => {
                    pause(tries);
                    tries = tries.saturating_add(1);
                }
                // A forked child inherits the mode but not the registration.
                Err(libc::EPERM) if !registered_again => {
                    registered_again = true;
                    call(CMD_REGISTER_PRIVATE_EXPEDITED)?;
                }
                Err(errno) => return Err(errno),
            }
        }
    }

    /// Test-only fault injection: the next `n` barriers fail with `ENOMEM`.
    #[cfg(test)]
    pub(crate) mod fault {
        use std::sync::atomic::{AtomicU32, Ordering};

        /// std's atomic: a test switch, outside the protocol.
        static FAILURES: AtomicU32 = AtomicU32::new(0);

        /// The next `n` barrier commands (of any thread) fail.
        pub(crate) fn fail_next_barriers(n: u32) {
            // Relaxed: a counter; nothing is published through it.
            FAILURES.store(n, Ordering::Relaxed);
        }

        /// Injected failures not consumed yet.
        pub(crate) fn pending() -> u32 {
            // Relaxed: as above.
            FAILURES.load(Ordering::Relaxed)
        }

        /// Whether this barrier command fails (consuming one failure).
        pub(super) fn take() -> bool {
            // Relaxed: as above.
            FAILURES
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn transient_failures_are_retried_until_a_barrier_succeeds() {
            let mut fails = 20;
            let mut pauses = Vec::new();
            let calls = |cmd| {
                assert_eq!(cmd, CMD_PRIVATE_EXPEDITED);
                if fails == 0 {
                    return Ok(());
                }
                fails -= 1;
                Err([libc::ENOMEM, libc::EAGAIN, libc::EINTR][fails % 3])
            };
            assert_eq!(retrying(calls, |t| pauses.push(t)), Ok(()));
            assert_eq!(pauses, (0..20).collect::<Vec<_>>());
        }

        #[test]
        fn an_unregistered_child_registers_again_once() {
            let mut log = Vec::new();
            let mut registered = false;
            let result = retrying(
                |cmd| {
                    log.push(cmd);
                    match cmd {
                        CMD_REGISTER_PRIVATE_EXPEDITED => {
                            registered = true;
                            Ok(())
                        }
                        _ if registered => Ok(()),
                        _ => Err(libc::EPERM),
                    }
                },
                |_| panic!("no pause"),
            );
            assert_eq!(result, Ok(()));
            let expected = [
                CMD_PRIVATE_EXPEDITED,
                CMD_REGISTER_PRIVATE_EXPEDITED,
                CMD_PRIVATE_EXPEDITED,
            ];
            assert_eq!(log, expected);
        }

        #[test]
        fn permanent_failures_are_reported() {
            let no_pause = |_| panic!("no pause");
            assert_eq!(retrying(|_| Err(libc::ENOSYS), no_pause), Err(libc::ENOSYS));
            // Refused again after registering again: a seccomp filter.
            let perm = |cmd| match cmd {
                CMD_REGISTER_PRIVATE_EXPEDITED => Ok(()),
                _ => Err(libc::EPERM),
            };
            assert_eq!(retrying(perm, no_pause), Err(libc::EPERM));
            let refused = |_| Err(libc::EPERM);
            assert_eq!(retrying(refused, no_pause), Err(libc::EPERM));
        }
    }
}

#[cfg(not(all(target_os = "linux", not(miri), not(all(loom, feature = "loom")))))]
#[cfg(not(all(loom, feature = "loom")))]
pub(crate) mod sys {
    pub(super) fn register() -> bool {
        false
    }

    pub(super) fn barrier() {
        unreachable!("the mode is FENCES without membarrier")
    }
}

#[cfg(all(test, target_os = "linux", not(miri), not(all(loom, feature = "loom"))))]
mod tests {
    use super::*;

    #[test]
    fn a_pool_drop_retries_barriers_the_kernel_refuses() {
        let pool = crate::Pool::builder(|| 0u8)
            .capacity(1024)
            .thread_cache(true)
            .build()
            .unwrap();
        drop(pool.try_acquire().unwrap());
        if !is_light() {
            eprintln!("no membarrier on this machine: nothing to inject into");
            return;
        }
        // Before the fix: `tagpool: membarrier failed after registration;
        // aborting`, and the test process died.
        sys::fault::fail_next_barriers(12);
        drop(pool);
        assert_eq!(sys::fault::pending(), 0, "the drop ran a barrier");
    }
}
