//! How long the concurrent tests run: by the clock, not by a count.
//!
//! How many operations a second holds depends on how many threads truly run
//! at once: a count tuned on 2 CPUs takes seconds on 2 and minutes on 16
//! where threads that wait for each other really do meet. A test loop asks
//! its [`Budget`] whether to go on; it stops at a deadline, after a floor of
//! rounds that every run does. Under miri (thousands of times slower, on
//! a clock of its own) a loop runs exactly its floor, as the counts did
//! before.
//!
//! `TAGPOOL_STRESS_MS` sets every deadline (in milliseconds) for a longer
//! soak, e.g. `TAGPOOL_STRESS_MS=20000 cargo test --release --test stress`.
#![allow(dead_code)] // each test file uses some of it

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The time a stress loop runs: `default`, or `TAGPOOL_STRESS_MS`.
pub(crate) fn stress_time(default: Duration) -> Duration {
    match std::env::var("TAGPOOL_STRESS_MS") {
        Ok(ms) => Duration::from_millis(
            ms.trim()
                .parse()
                .unwrap_or_else(|_| panic!("TAGPOOL_STRESS_MS={ms:?} is not a number")),
        ),
        Err(_) => default,
    }
}

/// When a stress loop stops: after `floor` rounds under miri, otherwise
/// at a deadline once `floor` rounds are done; or after exactly `n` rounds
/// ([`Budget::rounds`]) for an inner loop whose outer loop has the deadline.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Budget {
    deadline: Option<Instant>,
    floor: u64,
}

impl Budget {
    /// A budget of [`stress_time`]`(time)` from now, and at least `floor`
    /// rounds.
    pub(crate) fn new(time: Duration, floor: u64) -> Self {
        Budget {
            deadline: Some(Instant::now() + stress_time(time)),
            floor,
        }
    }

    /// Exactly `n` rounds.
    pub(crate) fn rounds(n: u64) -> Self {
        Budget {
            deadline: None,
            floor: n,
        }
    }

    /// Whether the loop runs round `round` (counted from 0). The clock is
    /// read every 32nd round only, so that it costs the loop nothing.
    pub(crate) fn more(&self, round: u64) -> bool {
        if round < self.floor {
            return true;
        }
        match self.deadline {
            Some(deadline) if !cfg!(miri) => round % 32 != 0 || Instant::now() < deadline,
            _ => false,
        }
    }
}

/// The CPUs this process may run on (`taskset` narrows it).
pub(crate) fn cpus() -> usize {
    thread::available_parallelism().map_or(2, |n| n.get())
}

/// Threads for a test that needs more threads than CPUs, so that threads
/// are preempted in the middle of their operations (a cache owner's, when
/// a revoker comes): twice the CPUs, at least 8, at most 256.
pub(crate) fn more_threads_than_cpus() -> usize {
    (2 * cpus()).clamp(8, 256)
}

/// Marks a finished thread's count in [`Progress`].
const DONE: u64 = 1 << 63;

/// Rounds done by each thread of a test, for a watchdog's report: a thread
/// whose count no longer moves is the one that is stuck.
#[derive(Debug)]
pub(crate) struct Progress {
    rounds: Vec<AtomicU64>,
}

impl Progress {
    pub(crate) fn new(threads: usize) -> Self {
        Progress {
            rounds: (0..threads).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Thread `t` has done `rounds` rounds.
    pub(crate) fn set(&self, t: usize, rounds: u64) {
        // Relaxed: a report, read by the watchdog only.
        self.rounds[t].store(rounds, Ordering::Relaxed);
    }

    /// Thread `t` is done, after `rounds` rounds.
    pub(crate) fn done(&self, t: usize, rounds: u64) {
        self.set(t, rounds | DONE);
    }

    /// `rounds by thread: [12034, 11920 done, ..]`.
    pub(crate) fn report(&self) -> String {
        let mut out = String::from("rounds by thread: [");
        for (t, rounds) in self.rounds.iter().enumerate() {
            let sep = if t == 0 { "" } else { ", " };
            // Relaxed: see `set`.
            let rounds = rounds.load(Ordering::Relaxed);
            let done = if rounds & DONE != 0 { " done" } else { "" };
            let _ = write!(out, "{sep}{}{done}", rounds & !DONE);
        }
        out.push(']');
        out
    }
}

/// Threads that sleep a few microseconds at a time until dropped: each
/// wake-up may preempt a running thread at an arbitrary instruction, far
/// more often than the scheduler's time slices do, and preemption inside
/// a compare-and-swap window is what ABA needs. Two per CPU, so that they
/// reach every CPU the test's threads run on (measured on 2 CPUs: they
/// doubled how often a planted ABA fault was caught). None under miri,
/// which schedules its threads itself.
pub(crate) struct Preempters {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Preempters {
    pub(crate) fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let n = if cfg!(miri) { 0 } else { 2 * cpus() };
        let threads = (0..n)
            .map(|_| {
                let stop = Arc::clone(&stop);
                thread::spawn(move || {
                    // Relaxed: a flag that orders nothing.
                    while !stop.load(Ordering::Relaxed) {
                        thread::sleep(Duration::from_micros(5));
                    }
                })
            })
            .collect();
        Preempters { stop, threads }
    }
}

impl Drop for Preempters {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
