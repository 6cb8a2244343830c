//! [`Stats`]: the snapshot of a pool's counters that every face reports.

#[cfg(doc)]
use crate::{Builder, Pool};

/// A snapshot of a pool's counters, from [`Pool::stats`].
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
    /// The pool's capacity.
    pub capacity: usize,
    /// Slots held by guards (including guards leaked with `mem::forget`).
    pub in_use: usize,
    /// Slots free to acquire, including those parked in per-thread caches;
    /// `in_use + available + retired == capacity` (`retired` is 0 in a
    /// pool with a factory).
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
    /// `capacity - retired` values. Always 0 in a pool with a factory,
    /// which refills such slots.
    pub retired: usize,
}
