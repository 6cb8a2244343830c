//! Hold tracking, opt-in ([`Builder::hold_limit`](crate::Builder::hold_limit)):
//! when each held slot was taken, for the age of the oldest hold and the
//! holds past a limit in [`Stats`](crate::Stats).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::Shared;

/// When each slot's current hold began. Plain std atomics even under loom:
/// statistics that no protocol reads.
#[derive(Debug)]
pub(crate) struct Holds {
    /// Holds longer than this count in `holds_over_limit`.
    limit: Duration,
    /// The clock's origin: each start is stored as nanoseconds after it.
    epoch: Instant,
    /// Per slot: 1 + the nanoseconds after `epoch` at which its hold began;
    /// 0 while it is not held. Written only by the slot's owner (the
    /// acquire that took it, the release that gives it back, before its
    /// push), read by snapshots.
    since: Box<[AtomicU64]>,
}

impl Holds {
    pub(crate) fn new(capacity: usize, limit: Duration) -> Self {
        Self {
            limit,
            epoch: Instant::now(),
            since: (0..capacity).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Now, as stored (never 0).
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    /// The age of the oldest hold, and how many are older than the limit.
    pub(crate) fn snapshot(&self) -> (Option<Duration>, usize) {
        let now = self.now();
        let mut oldest = None;
        let mut over = 0;
        for since in self.since.iter() {
            // Relaxed: statistics.
            let since = since.load(Ordering::Relaxed);
            if since == 0 {
                continue;
            }
            let age = Duration::from_nanos(now.saturating_sub(since));
            if age > self.limit {
                over += 1;
            }
            oldest = Some(oldest.map_or(age, |o: Duration| o.max(age)));
        }
        (oldest, over)
    }
}

impl<T> Shared<T> {
    /// Notes that slot `index`, just taken for a guard or a scope, is held
    /// from now (with hold tracking on).
    #[inline(always)]
    pub(crate) fn hold_started(&self, index: u32) {
        if self.slots.tracks_holds() {
            self.hold_started_tracked(index);
        }
    }

    /// [`hold_started`](Self::hold_started) with tracking on, out of line:
    /// the acquire's fast path keeps one test.
    #[cold]
    #[inline(never)]
    fn hold_started_tracked(&self, index: u32) {
        if let Some(holds) = &self.holds {
            // Relaxed: read only by snapshots; the owner's own release
            // clears it, in program order.
            holds.since[index as usize].store(holds.now(), Ordering::Relaxed);
        }
    }

    /// Notes that the hold of slot `index` ends (its owner gives it back;
    /// before the push that lets another thread take it).
    #[inline(always)]
    pub(crate) fn hold_ended(&self, index: u32) {
        if self.slots.tracks_holds() {
            self.hold_ended_tracked(index);
        }
    }

    /// [`hold_ended`](Self::hold_ended) with tracking on, out of line.
    #[cold]
    #[inline(never)]
    fn hold_ended_tracked(&self, index: u32) {
        if let Some(holds) = &self.holds {
            // Relaxed: as in `hold_started`; the push that follows
            // publishes it to the slot's next owner.
            holds.since[index as usize].store(0, Ordering::Relaxed);
        }
    }

    /// The age of the oldest hold and the holds past the limit: `(None,
    /// 0)` with tracking off.
    pub(crate) fn holds(&self) -> (Option<Duration>, usize) {
        self.holds.as_ref().map_or((None, 0), |h| h.snapshot())
    }
}
