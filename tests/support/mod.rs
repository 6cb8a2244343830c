//! Helpers shared by the integration tests that block.

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
    let (done, timer) = mpsc::channel::<()>();
    if !cfg!(miri) {
        let what = what.into();
        thread::spawn(move || {
            // Dropping the `Watchdog` disconnects the channel and ends this.
            if timer.recv_timeout(limit) == Err(RecvTimeoutError::Timeout) {
                // Past libtest's output capture, which an abort loses.
                let _ = writeln!(
                    io::stderr(),
                    "{what}: still running after {limit:?}: a lost slot or wake-up?"
                );
                process::abort();
            }
        });
    }
    Watchdog { _done: done }
}
