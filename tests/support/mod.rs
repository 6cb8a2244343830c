//! Helpers shared by the integration tests that block.

use std::io::{self, Write as _};
use std::process;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::Duration;

/// How long a waiting test may take before its watchdog aborts the process.
/// Generous (sanitizers and a loaded CI machine are slow): a lost wake-up
/// waits forever, so any bound turns it into a failure.
const WATCHDOG: Duration = Duration::from_secs(120);

/// Aborts the test process, naming `test`, unless dropped within
/// [`WATCHDOG`]: a lost wake-up then fails `cargo test` instead of hanging
/// it. Not under miri, which is slower than any sensible bound.
#[must_use]
pub(crate) struct Watchdog {
    _done: mpsc::Sender<()>,
}

pub(crate) fn watchdog(test: &'static str) -> Watchdog {
    let (done, timer) = mpsc::channel::<()>();
    if !cfg!(miri) {
        thread::spawn(move || {
            // Dropping the `Watchdog` disconnects the channel and ends this.
            if timer.recv_timeout(WATCHDOG) == Err(RecvTimeoutError::Timeout) {
                // Past libtest's output capture, which an abort loses.
                let _ = writeln!(
                    io::stderr(),
                    "{test}: still waiting after {WATCHDOG:?}: a lost wake-up?"
                );
                process::abort();
            }
        });
    }
    Watchdog { _done: done }
}
