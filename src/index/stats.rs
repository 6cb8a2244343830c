//! [`IndexStats`]: the counters of an [`IndexPool`](super::IndexPool),
//! which are those of a [`Stats`] that mean something without values.

use crate::stats::Stats;

#[cfg(doc)]
use super::{IndexBuilder, IndexPool};

/// A snapshot of an [`IndexPool`]'s counters, from [`IndexPool::stats`]:
/// the fields of a pool's [`Stats`] that mean something for indices, each
/// documented there. An index pool has no values, so it has nothing like
/// [`Stats::filled`].
///
/// # Examples
///
/// ```
/// let pool = tagpool::IndexPool::new(4);
/// let _held = pool.try_acquire().unwrap();
/// let stats = pool.stats();
/// assert_eq!((stats.capacity, stats.in_use, stats.available), (4, 1, 3));
/// assert_eq!(stats.peak_in_use, 1);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexStats {
    /// The pool's capacity: the indices are `0..capacity`.
    pub capacity: usize,
    /// Indices held by guards (including guards leaked with `mem::forget`),
    /// as [`Stats::in_use`].
    pub in_use: usize,
    /// Indices free to acquire, including those parked in per-thread
    /// caches; `in_use + available == capacity` ([`Stats::available`]).
    pub available: usize,
    /// Of `available`, the indices parked in per-thread caches, as
    /// [`Stats::cached`].
    pub cached: usize,
    /// Indices whose free-list links are allocated: the capacity, unless the
    /// pool is elastic ([`IndexBuilder::initial`]) and has not grown to it
    /// yet ([`Stats::allocated`]).
    pub allocated: usize,
    /// The most indices held at once, an upper bound that is exact without
    /// caches, as [`Stats::peak_in_use`].
    pub peak_in_use: usize,
    /// `try_acquire` and `try_acquire_owned` calls that found every index
    /// held ([`Stats::failed_acquires`]).
    pub failed_acquires: u64,
    /// Blocking acquires that had to wait ([`Stats::waits`]).
    pub waits: u64,
    /// Async acquires that waited ([`Stats::async_waits`]).
    pub async_waits: u64,
    /// Blocking waits that timed out ([`Stats::timeouts`]).
    pub timeouts: u64,
    /// Async waits dropped before they got an index
    /// ([`Stats::cancelled_waits`]).
    pub cancelled_waits: u64,
    /// Indices a release handed straight to a waiter
    /// ([`Stats::handoffs`]).
    pub handoffs: u64,
    /// Waiters queued for a hand-off now ([`Stats::queued_waiters`]).
    pub queued_waiters: usize,
    /// Threads blocked in a waiting acquire now
    /// ([`Stats::waiting_threads`]).
    pub waiting_threads: usize,
    /// Async acquires waiting now ([`Stats::waiting_tasks`]).
    pub waiting_tasks: usize,
    /// Whether the pool is closed ([`Stats::closed`]).
    pub closed: bool,
}

impl From<Stats> for IndexStats {
    /// The fields that mean something for indices.
    fn from(stats: Stats) -> Self {
        Self {
            capacity: stats.capacity,
            in_use: stats.in_use,
            available: stats.available,
            cached: stats.cached,
            allocated: stats.allocated,
            peak_in_use: stats.peak_in_use,
            failed_acquires: stats.failed_acquires,
            waits: stats.waits,
            async_waits: stats.async_waits,
            timeouts: stats.timeouts,
            cancelled_waits: stats.cancelled_waits,
            handoffs: stats.handoffs,
            queued_waiters: stats.queued_waiters,
            waiting_threads: stats.waiting_threads,
            waiting_tasks: stats.waiting_tasks,
            closed: stats.closed,
        }
    }
}
