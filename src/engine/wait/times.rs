//! How long waiting acquires waited: a total and a histogram in powers of
//! two, written only by waits that end (the waiting path pays for them).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::stats::WaitHistogram;

/// The wait times of a pool's acquires. Plain std atomics even under
/// loom: statistics that no protocol reads, and loom models no time (no
/// wait is ever timed there, see `REAL_TIME`).
#[derive(Debug)]
pub(crate) struct WaitTimes {
    /// Nanoseconds waited by the waits that ended, in total (saturating).
    total: AtomicU64,
    /// Waits that ended, by duration: see [`WaitHistogram`].
    buckets: [AtomicU64; WaitHistogram::BUCKETS],
}

impl WaitTimes {
    pub(crate) fn new() -> Self {
        Self {
            total: AtomicU64::new(0),
            buckets: Default::default(),
        }
    }

    /// Records one wait that ended after `waited`.
    #[cold]
    pub(crate) fn record(&self, waited: Duration) {
        let nanos = u64::try_from(waited.as_nanos()).unwrap_or(u64::MAX);
        // Relaxed: statistics. A total past 584 years saturates.
        let _ = self
            .total
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_add(nanos))
            });
        self.buckets[WaitHistogram::bucket_of(waited)].fetch_add(1, Ordering::Relaxed);
    }

    /// The total waited and the histogram, as read now.
    pub(crate) fn snapshot(&self) -> (Duration, WaitHistogram) {
        // Relaxed: statistics.
        let total = Duration::from_nanos(self.total.load(Ordering::Relaxed));
        let mut counts = [0; WaitHistogram::BUCKETS];
        for (count, bucket) in counts.iter_mut().zip(&self.buckets) {
            *count = bucket.load(Ordering::Relaxed);
        }
        (total, WaitHistogram::from_counts(counts))
    }
}
