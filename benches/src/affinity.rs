//! Pinning a workload's threads to distinct CPUs.
//!
//! `handoff` spawns its consumer thread for every criterion sample. Linux
//! places a new thread on the CPU its parent runs on about half the time on
//! the 2-vCPU machine the suite runs on, and then never moves it: both
//! threads stay runnable, so each is "cache hot" to the load balancer. Such
//! a sample measures two threads taking turns on one CPU (a context switch
//! every time the channel fills or drains, 4× slower) instead of a hand-off
//! between two CPUs, and the median of a benchmark's samples lands on
//! either side. Measured with an in-process probe (tagpool, `ArrayQueue`
//! and sharded-slab interleaved, 21 rounds of 100,000 values): 154–178 ns
//! per value with halves of the rounds on one CPU, against 39–83 ns with the
//! two threads pinned to different CPUs, for every implementation. So the
//! hand-off workload pins its producer and its consumer to the first two
//! CPUs the process may use, for every implementation alike.

/// A thread pinned to one CPU; dropping it restores the CPUs the thread was
/// allowed before.
#[derive(Debug)]
pub struct Pinned {
    #[cfg(target_os = "linux")]
    previous: Option<libc::cpu_set_t>,
}

impl Pinned {
    /// Pins the calling thread to the `nth` CPU (from 0) of the set the
    /// process could run on at the first call. Does nothing, and restores
    /// nothing, if that set has fewer than two CPUs or the OS has no such
    /// call.
    pub fn to(nth: usize) -> Self {
        #[cfg(target_os = "linux")]
        {
            Self {
                previous: linux::pin(nth),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = nth;
            Self {}
        }
    }
}

impl Drop for Pinned {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(previous) = self.previous.take() {
            linux::set(&previous);
        }
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::mem;
    use std::sync::OnceLock;

    /// The calling thread's allowed CPUs.
    fn get() -> Option<libc::cpu_set_t> {
        // SAFETY: an all-zero `cpu_set_t` is a valid (empty) set.
        let mut set: libc::cpu_set_t = unsafe { mem::zeroed() };
        // SAFETY: `set` is a writable `cpu_set_t` of the size passed.
        let rc = unsafe { libc::sched_getaffinity(0, mem::size_of::<libc::cpu_set_t>(), &mut set) };
        (rc == 0).then_some(set)
    }

    /// Restricts the calling thread to `set`.
    pub(super) fn set(set: &libc::cpu_set_t) {
        // SAFETY: `set` is a valid `cpu_set_t` of the size passed.
        let rc = unsafe { libc::sched_setaffinity(0, mem::size_of::<libc::cpu_set_t>(), set) };
        assert_eq!(
            rc,
            0,
            "sched_setaffinity: {}",
            std::io::Error::last_os_error()
        );
    }

    /// The CPUs the process could use when first asked, before any pin
    /// (a thread spawned by a pinned thread inherits its one CPU).
    fn allowed() -> &'static [usize] {
        static ALLOWED: OnceLock<Vec<usize>> = OnceLock::new();
        ALLOWED.get_or_init(|| match get() {
            Some(set) => (0..libc::CPU_SETSIZE as usize)
                // SAFETY: `cpu` is below `CPU_SETSIZE`.
                .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
                .collect(),
            None => Vec::new(),
        })
    }

    /// Pins the calling thread to the `nth` allowed CPU; returns the set it
    /// had, or `None` (and pins nothing) with fewer than two CPUs allowed.
    pub(super) fn pin(nth: usize) -> Option<libc::cpu_set_t> {
        let allowed = allowed();
        if allowed.len() < 2 {
            return None;
        }
        let previous = get()?;
        // SAFETY: an all-zero `cpu_set_t` is a valid (empty) set.
        let mut one: libc::cpu_set_t = unsafe { mem::zeroed() };
        // SAFETY: the CPU number comes from an allowed set, so it is below
        // `CPU_SETSIZE`.
        unsafe { libc::CPU_SET(allowed[nth % allowed.len()], &mut one) };
        set(&one);
        Some(previous)
    }
}
