//! The [`Stats`] snapshot of a pool's counters.

use super::Shared;
use crate::engine::cache::Cache;
use crate::stats::Stats;
use crate::sync::Ordering;

impl<T> Shared<T> {
    /// See [`Pool::stats`](crate::Pool::stats).
    pub(crate) fn stats(&self) -> Stats {
        let capacity = self.bound();
        let allocated = self.free.allocated() as usize;
        let cached = self.cache().map_or(0, |c| c.cached() as usize);
        // The bound's credit, read once (see `free_list/bound.rs`): owed
        // slots when negative (held ones that leave service when they come
        // back); when positive, room an elastic pool may grow into, or room
        // that retired slots (a pool without a factory) left unused.
        let credit = self.free.credit();
        let withdrawing = (-credit).max(0) as usize;
        let (room, unused) = if self.free.growth_complete() {
            (0, credit.max(0) as usize)
        } else {
            (credit.max(0) as usize, 0)
        };
        let withdrawn = self.free.withdrawn_count() as usize;
        let retired = self.retired_count() as usize;
        // While threads move slots between caches and the free list, or a
        // growth pushes a segment, a slot can be counted twice: clamp, and
        // derive `in_use` from `available`, so that the two always add up
        // (`in_use + available == capacity + withdrawing - unused`).
        let available = (self.free.free_count() as usize + cached + room).min(capacity);
        let in_use = (capacity + withdrawing).saturating_sub(available + unused);
        // Relaxed: statistics; no data is read through them.
        let peak = self.counters.peak.load(Ordering::Relaxed);
        let peak = peak.max(self.cache().map_or(0, Cache::peak_bound)) as usize;
        let (waits, async_waits, timeouts, cancelled_waits, handoffs) = self.waiters.counts();
        let (waiting_threads, waiting_tasks) = self.waiters.waiting_now();
        let (wait_time, wait_histogram) = self.waiters.times();
        let (oldest_hold, holds_over_limit) = self.holds();
        Stats {
            capacity,
            in_use,
            available,
            cached: cached.min(available),
            allocated,
            // Relaxed: a statistic.
            filled: (self.counters.filled.load(Ordering::Relaxed) as usize).min(allocated),
            // A thread between its pop and its peak update may be counted in
            // `in_use` already.
            peak_in_use: peak.max(in_use).min(self.max_capacity()),
            // Relaxed: a statistic.
            failed_acquires: self.counters.failed.load(Ordering::Relaxed),
            waits,
            async_waits,
            timeouts,
            cancelled_waits,
            handoffs,
            queued_waiters: self.waiters.queued_now(),
            waiting_threads,
            waiting_tasks,
            closed: self.free.is_closed(),
            // Relaxed: a statistic.
            discarded: self.counters.discarded.load(Ordering::Relaxed),
            retired,
            withdrawn,
            withdrawing,
            wait_time,
            wait_histogram,
            oldest_hold,
            holds_over_limit,
        }
    }
}
