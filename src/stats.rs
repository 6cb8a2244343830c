//! [`Stats`]: the snapshot of a pool's counters that every face reports.

use core::fmt;
use std::time::Duration;

#[cfg(doc)]
use crate::{Builder, Pool};

/// A snapshot of a pool's counters, from [`Pool::stats`].
///
/// # Exporting
///
/// Read a snapshot at every scrape and translate it: levels (`in_use`,
/// `available`, `oldest_hold`, `holds_over_limit`) are gauges, counts
/// (`waits`, `timeouts`, `handoffs`, ...) are counters, and
/// [`wait_histogram`](Stats::wait_histogram) with
/// [`wait_time`](Stats::wait_time) is a Prometheus histogram whose buckets
/// are the running sums of its counts under each
/// [`upper_bound`](WaitHistogram::upper_bound). The pool does the counting
/// itself, so the exporter adds nothing to its hot paths. The benchmarks
/// crate's `prometheus` example is a complete `prometheus::core::Collector`
/// (run in CI and checked against the pool's figures); with the `metrics`
/// crate, the same snapshot goes to `gauge!(..).set(..)` and
/// `counter!(..).absolute(..)`.
///
/// ```
/// use std::time::Duration;
///
/// let pool = tagpool::Pool::new(1, || 0u8);
/// let held = pool.acquire().unwrap();
/// let _ = pool.acquire_timeout(Duration::from_millis(1));
/// let stats = pool.stats();
/// // The exposition's `_bucket{le=...}` lines: cumulative counts.
/// let mut cumulative = 0;
/// let buckets: Vec<(f64, u64)> = stats
///     .wait_histogram
///     .buckets()
///     .map(|(bound, n)| {
///         cumulative += n;
///         (bound.map_or(f64::INFINITY, |b| b.as_secs_f64()), cumulative)
///     })
///     .collect();
/// assert_eq!(buckets.last(), Some(&(f64::INFINITY, 1)), "`+Inf`: every wait");
/// assert!(stats.wait_time >= Duration::from_millis(1), "`_sum`");
/// # drop(held);
/// ```
///
/// # Examples
///
/// ```
/// let pool = tagpool::Pool::new(2, || 0u8);
/// let held = pool.try_acquire().unwrap();
/// std::mem::forget(held); // leaks the slot: visible as in use forever
/// let stats = pool.stats();
/// assert_eq!((stats.capacity, stats.in_use, stats.available), (2, 1, 1));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// The pool's capacity: the slots in service, as
    /// [`set_capacity`](Pool::set_capacity) last set them.
    pub capacity: usize,
    /// Slots held by guards (including guards leaked with `mem::forget`).
    pub in_use: usize,
    /// Slots free to acquire, including those parked in per-thread caches;
    /// `in_use + available == capacity + withdrawing` in a pool with a
    /// factory (`withdrawing` is 0 unless a lowered capacity is still owed
    /// slots), and `in_use + available + retired == capacity` in a pool
    /// without one that was never lowered.
    pub available: usize,
    /// Of `available`, the slots parked in per-thread caches (0 with caches
    /// off). Any thread can still acquire them.
    pub cached: usize,
    /// Slots whose storage is allocated: the capacity, unless the pool is
    /// [elastic](Builder::initial) and has not grown to it yet. The slots
    /// above are available: acquiring one grows the pool.
    pub allocated: usize,
    /// Slots holding a value, whether idle or held by a guard: made at
    /// build, by [`values`](Builder::values) or by the factory, minus those
    /// detached, [trimmed](Pool::trim), [discarded](Builder::discard_if),
    /// refused by [`retain_idle`](Pool::retain_idle) or dropped after a
    /// panic. Exact whenever no other thread is acquiring, releasing or
    /// trimming.
    pub filled: usize,
    /// The most slots held by guards at once, as an upper bound that is
    /// exact without caches; never above the capacity (a slot whose fill
    /// panicked counts: it was taken before the factory ran). Size a pool
    /// from it.
    ///
    /// With caches off this is the most slots held at once. With caches
    /// on, a thread that refills its cache takes a batch but keeps most of
    /// it cached, and takes from its cache touch nothing shared; so the
    /// figure is the slots out of the free list at a refill *minus* the
    /// fewest the refilling thread's cache has held since (each thread's
    /// cache notes its own low mark; snapshots read every cache's). It is
    /// never below the most slots held at once, and above it by at most
    /// the slots that *other* threads' caches held meanwhile (and those a
    /// full cache flushed back to the free list since the refill). One
    /// thread alone reads exactly what it held: one acquire on a fresh
    /// pool of 1024 reads 1. A thread records a new peak just after its
    /// pop, so a snapshot taken in between may briefly show the previous
    /// peak. In a pool without a factory, slots [retired](Stats::retired)
    /// at the time of a pop count as held in this figure.
    ///
    /// One more over-count, even without caches: [`Pool::trim`],
    /// [`Pool::drain_idle`], [`Pool::retain_idle`], [`Pool::attach`] and an
    /// acquire that took an empty slot and looks for an idle value (see
    /// [`Pool::try_builder`]) take idle slots out of the free list for the
    /// moment of their pass,
    /// and an acquire that pops a slot meanwhile counts them as held (a
    /// pop sees only how many slots are out of the list). The figure can
    /// then exceed the most slots guards held by at most the slots such a
    /// pass had out; a waiter that such a pass hands a slot to (in a
    /// [fair](crate::Builder::fair) pool) records the slots held without
    /// them.
    pub peak_in_use: usize,
    /// `try_acquire` and `try_acquire_owned` calls that found every slot
    /// held (not those that found the pool closed).
    pub failed_acquires: u64,
    /// Blocking acquires (`acquire`, `acquire_timeout` and their owned
    /// forms) that found the pool empty and had to wait: spin, then park
    /// unless a slot came free first.
    pub waits: u64,
    /// Async acquires ([`Pool::acquire_async`] and
    /// [`Pool::acquire_owned_async`]) that found the pool empty and waited.
    pub async_waits: u64,
    /// Blocking waits that reached their timeout without a slot.
    pub timeouts: u64,
    /// Async waits whose future was dropped before it got a slot (a
    /// runtime's timeout, a `select!` that took another branch, a cancelled
    /// task).
    pub cancelled_waits: u64,
    /// Slots a release handed straight to a waiter instead of freeing
    /// them: in a [fair](Builder::fair) pool, every slot released while
    /// someone waited; in a barging pool, those given to a waiter past the
    /// starvation bound (see [Waiting](crate#waiting)).
    pub handoffs: u64,
    /// Waiters queued for a hand-off right now (a snapshot): in a fair
    /// pool, every waiter that found the pool empty; in a barging pool,
    /// those that waited past the starvation bound.
    pub queued_waiters: usize,
    /// Threads blocked in a waiting acquire right now.
    pub waiting_threads: usize,
    /// Futures of async acquires waiting right now (polled at least once,
    /// neither resolved nor dropped).
    pub waiting_tasks: usize,
    /// Whether the pool is [closed](Pool::close).
    pub closed: bool,
    /// Values that [`discard_if`](Builder::discard_if) dropped on release
    /// (their slots went back empty).
    pub discarded: u64,
    /// In a pool without a factory ([`Pool::from_values`]), the slots that
    /// lost their value (detached, discarded, trimmed, refused by
    /// [`retain_idle`](Pool::retain_idle), or dropped after a reset's
    /// panic): out of service, neither held nor available, until
    /// [`attach`](Pool::attach) gives one a value. The pool serves
    /// `capacity - retired` values (a [lowered](Pool::set_capacity)
    /// capacity counts retired slots as out of service first). Always 0 in
    /// a pool with a factory, which refills such slots.
    pub retired: usize,
    /// Slots out of service below the pool's
    /// [`max_capacity`](Pool::max_capacity), taken out by
    /// [`set_capacity`](Pool::set_capacity) (or grown past a lowered bound):
    /// neither held nor available, until the capacity is raised again.
    pub withdrawn: usize,
    /// Held slots that leave service when they are given back: guards held
    /// more slots than a lowered [`set_capacity`](Pool::set_capacity)
    /// allows, and until this many are back, no acquire succeeds.
    pub withdrawing: usize,
    /// The time that waiting acquires spent waiting, blocking and async, in
    /// total: every wait that ended (served, timed out, cancelled or closed
    /// under it), from the moment it found the pool empty. Waits still
    /// going on are not in it. Paid for only by the waits: an acquire that
    /// finds a slot reads no clock.
    pub wait_time: Duration,
    /// The same waits by duration, in powers of two: see [`WaitHistogram`].
    pub wait_histogram: WaitHistogram,
    /// With hold tracking on ([`Builder::hold_limit`]), how long the guard
    /// held longest right now has been held: the age of the oldest hold,
    /// leaked guards included. `None` when nothing is held, or with
    /// tracking off.
    pub oldest_hold: Option<Duration>,
    /// With hold tracking on ([`Builder::hold_limit`]), the guards held
    /// right now for longer than the limit set there: candidates for a
    /// leak (a guard forgotten, or kept by a stuck task). 0 with tracking
    /// off.
    pub holds_over_limit: usize,
}

/// How long waiting acquires waited ([`Stats::wait_histogram`]), in
/// [`BUCKETS`](Self::BUCKETS) buckets of powers of two microseconds: bucket
/// 0 counts the waits shorter than 1 µs, bucket `k` those from
/// `2^(k-1)` µs up to (not including) `2^k` µs, and the last one every wait
/// of `2^(BUCKETS - 2)` µs (about 9 minutes) or more.
///
/// Export it as a Prometheus histogram with cumulative counts under
/// [`upper_bound`](Self::upper_bound) (`le`): see the
/// `prometheus` example of the benchmarks crate.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use tagpool::WaitHistogram;
///
/// assert_eq!(WaitHistogram::upper_bound(0), Some(Duration::from_micros(1)));
/// assert_eq!(WaitHistogram::upper_bound(10), Some(Duration::from_micros(1024)));
/// assert_eq!(WaitHistogram::upper_bound(WaitHistogram::BUCKETS - 1), None);
///
/// let pool = tagpool::Pool::new(1, || 0u8);
/// let held = pool.acquire().unwrap();
/// assert!(pool.acquire_timeout(Duration::from_millis(2)).is_err());
/// let histogram = pool.stats().wait_histogram;
/// assert_eq!(histogram.count(), 1);
/// let (bound, _) = histogram.buckets().find(|&(_, n)| n == 1).unwrap();
/// assert!(bound.map_or(true, |b| b > Duration::from_millis(2)));
/// # drop(held);
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct WaitHistogram {
    counts: [u64; WaitHistogram::BUCKETS],
}

impl WaitHistogram {
    /// The number of buckets.
    pub const BUCKETS: usize = 32;

    /// A histogram of these counts, bucket by bucket.
    pub(crate) fn from_counts(counts: [u64; Self::BUCKETS]) -> Self {
        Self { counts }
    }

    /// The bucket a wait of `waited` falls in.
    pub(crate) fn bucket_of(waited: Duration) -> usize {
        let micros = waited.as_micros();
        if micros == 0 {
            return 0;
        }
        // `micros` in `2^(k-1)..2^k` is bucket `k`.
        let k = (128 - micros.leading_zeros()) as usize;
        k.min(Self::BUCKETS - 1)
    }

    /// The waits in bucket `bucket` are shorter than this; `None` for the
    /// last bucket, which has no bound (nor for a bucket past the last).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// assert_eq!(tagpool::WaitHistogram::upper_bound(3), Some(Duration::from_micros(8)));
    /// ```
    pub fn upper_bound(bucket: usize) -> Option<Duration> {
        (bucket < Self::BUCKETS - 1).then(|| Duration::from_micros(1 << bucket))
    }

    /// The number of waits in each bucket.
    ///
    /// # Examples
    ///
    /// ```
    /// let stats = tagpool::Pool::new(1, || 0u8).stats();
    /// assert_eq!(stats.wait_histogram.counts(), &[0; tagpool::WaitHistogram::BUCKETS]);
    /// ```
    pub fn counts(&self) -> &[u64; Self::BUCKETS] {
        &self.counts
    }

    /// Every bucket as its upper bound ([`upper_bound`](Self::upper_bound))
    /// and its count, shortest first.
    ///
    /// # Examples
    ///
    /// ```
    /// let stats = tagpool::Pool::new(1, || 0u8).stats();
    /// assert_eq!(stats.wait_histogram.buckets().count(), tagpool::WaitHistogram::BUCKETS);
    /// ```
    pub fn buckets(&self) -> impl Iterator<Item = (Option<Duration>, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .map(|(k, &n)| (Self::upper_bound(k), n))
    }

    /// The number of waits counted.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tagpool::Pool::new(1, || 0u8).stats().wait_histogram.count(), 0);
    /// ```
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }
}

impl fmt::Debug for WaitHistogram {
    /// The buckets that counted a wait, as `< bound: count`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut map = f.debug_map();
        for (bound, n) in self.buckets().filter(|&(_, n)| n > 0) {
            match bound {
                Some(bound) => map.entry(&format_args!("<{bound:?}"), &n),
                None => map.entry(&"longer", &n),
            };
        }
        map.finish()
    }
}
