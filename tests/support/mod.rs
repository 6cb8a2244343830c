//! Helpers shared by the integration tests that block.

pub(crate) mod budget;
pub(crate) mod executor;

use std::io::{self, Write as _};
use std::process;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

/// How long a test that waits for slots may take before its watchdog aborts
/// the process. Generous (sanitizers and a loaded CI machine are slow): a
/// lost wake-up waits forever, so any bound turns it into a failure.
pub(crate) const WAITING: Duration = Duration::from_secs(120);

/// Aborts the test process, naming `what`, unless dropped within `limit`: a
/// lost slot or wake-up then fails `cargo test` instead of hanging it. Not
/// under miri, which is slower than any sensible bound.
#[must_use]
pub(crate) struct Watchdog {
    _done: mpsc::Sender<()>,
}

pub(crate) fn watchdog(what: impl Into<String>, limit: Duration) -> Watchdog {
    watchdog_reporting(what, limit, String::new)
}

/// As [`watchdog`], and prints `report()` (the test's progress, the pool's
/// statistics) when it fires, and again a second later: what moved in
/// between was still working, what did not is stuck.
pub(crate) fn watchdog_reporting(
    what: impl Into<String>,
    limit: Duration,
    report: impl Fn() -> String + Send + 'static,
) -> Watchdog {
    let (done, timer) = mpsc::channel::<()>();
    if !cfg!(miri) {
        let what = what.into();
        thread::spawn(move || {
            // Dropping the `Watchdog` disconnects the channel and ends this.
            if timer.recv_timeout(limit) == Err(RecvTimeoutError::Timeout) {
                // Past libtest's output capture, which an abort loses.
                let mut err = io::stderr();
                let _ = writeln!(
                    err,
                    "{what}: still running after {limit:?}, far past the few \
                     seconds it takes: a waiter never woken (a lost wake-up \
                     or a lost slot), or a machine too slow for the bound"
                );
                let first = report();
                if !first.is_empty() {
                    let _ = writeln!(err, "  at {limit:?}: {first}");
                    thread::sleep(Duration::from_secs(1));
                    let _ = writeln!(err, "  1 s later: {}", report());
                }
                process::abort();
            }
        });
    }
    Watchdog { _done: done }
}
