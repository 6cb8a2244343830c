//! The idle values of a [`Pool`]: trim, drain, `retain_idle`, attach.

use super::Pool;
use crate::error::AttachError;
#[cfg(doc)]
use crate::{PoolGuard, Stats};

impl<T, E> Pool<T, E> {
    /// Drops the values of idle slots beyond the `keep` most recently
    /// released ones, and returns how many it dropped. The slots stay in the
    /// pool, empty: the factory refills each when an acquire takes it while
    /// no value is idle.
    ///
    /// This is how a pool gives the memory of a spike's values back to the
    /// allocator, as .NET's `ArrayPool` trims idle arrays: a server whose
    /// pool of buffers grew during a burst calls `trim(n)` when the burst is
    /// over. Slots held by guards are never touched: `trim` takes idle slots
    /// from the free list (after moving those parked in per-thread caches
    /// there), so each is its own while it looks at it, and gives them all
    /// back, the kept values on top, before it drops anything. The values'
    /// `Drop` runs on the calling thread, outside any retry loop and with no
    /// slot taken.
    ///
    /// While `trim` runs, other threads may find fewer free slots than there
    /// are (it holds them briefly); an acquire that waits is woken when they
    /// come back. Idle slots in a cache whose owner is in the middle of an
    /// operation are left alone. The storage of the slots themselves stays
    /// allocated until the pool is dropped. A [closed](Pool::close) pool is
    /// trimmed too.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder(|| Vec::<u8>::with_capacity(1 << 20))
    ///     .capacity(64)
    ///     .initial(4)
    ///     .build()?;
    /// let burst: Vec<_> = (0..64).map(|_| pool.try_acquire().unwrap()).collect();
    /// drop(burst);
    /// assert_eq!(pool.stats().filled, 64);
    /// assert_eq!(pool.trim(4), 60, "60 MiB back to the allocator");
    /// assert_eq!(pool.stats().filled, 4);
    /// assert!(pool.try_acquire().unwrap().capacity() >= 1 << 20);
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn trim(&self, keep: usize) -> usize {
        let trimmed = self.shared().take_idle(keep);
        let count = trimmed.len();
        drop(trimmed);
        // `Builder::min_idle`: the floor, made again.
        if let Some(payload) = self.shared().refill_idle() {
            std::panic::resume_unwind(payload);
        }
        count
    }

    /// Takes the values out of every idle slot and returns them; the slots
    /// stay in the pool, empty, and the factory refills each when an
    /// acquire takes it while no value is idle. Slots held by guards keep
    /// their values.
    ///
    /// [`trim(0)`](Pool::trim) that hands the values over instead of
    /// dropping them, with the same guarantees. To take the values and drop
    /// the pool, iterate over it (`Pool` is [`IntoIterator`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder(|| 0u32).capacity(3).values(vec![7, 8, 9]).build()?;
    /// let held = pool.try_acquire().unwrap();
    /// let mut idle = pool.drain_idle();
    /// idle.sort();
    /// assert_eq!((*held, idle), (7, vec![8, 9]));
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn drain_idle(&self) -> Vec<T> {
        self.shared().take_idle(0)
    }

    /// Visits the values of idle slots, drops those for which `keep`
    /// returns `false` and returns how many it dropped; their slots stay in
    /// the pool, empty, and the factory refills each when an acquire takes
    /// it while no value is idle (in a pool without a factory they are
    /// [retired](Stats::retired)).
    /// Slots held by guards are never visited.
    ///
    /// This is how a pool drops idle values that went bad or stale
    /// (deadpool's `retain`): closed connections, expired sessions, buffers
    /// idle too long. It has [`trim`](Pool::trim)'s guarantees: it takes
    /// the idle slots from the free list (after moving those parked in
    /// per-thread caches there), so each is its own while `keep` looks at
    /// it; `keep` runs on the calling thread, outside any retry loop; then
    /// it gives the slots back, the kept values on top in their order, and
    /// only then drops the refused values. While it runs, other threads
    /// find fewer free slots (an acquire that waits is woken when they come
    /// back): keep `keep` short. Idle slots in a cache whose owner is in
    /// the middle of an operation are left alone.
    ///
    /// # Panics
    ///
    /// If `keep` panics: the value it panicked on is dropped (as after a
    /// reset's panic), the slots not visited yet keep their values, every
    /// slot goes back, and the panic propagates.
    ///
    /// # Examples
    ///
    /// Drop values idle for longer than a bound: each value carries the
    /// time it was last given back, which the reset sets (here the value is
    /// just that time; a connection would keep it beside the socket).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    ///
    /// let pool = tagpool::Pool::builder(Instant::now)
    ///     .capacity(4)
    ///     .reset(|since: &mut Instant| *since = Instant::now())
    ///     .build()?;
    /// std::thread::sleep(Duration::from_millis(30)); // all four idle
    /// drop(pool.try_acquire().unwrap()); // one is used: its clock restarts
    /// let dropped = pool.retain_idle(|since| since.elapsed() < Duration::from_millis(20));
    /// assert_eq!(dropped, 3);
    /// assert_eq!(pool.stats().filled, 1);
    /// assert_eq!(pool.stats().available, 4, "the capacity stays");
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn retain_idle<F>(&self, keep: F) -> usize
    where
        F: FnMut(&mut T) -> bool,
    {
        let (refused, panicked) = self.shared().retain_idle(keep);
        let count = refused.len();
        drop(refused);
        if let Some(payload) = panicked {
            std::panic::resume_unwind(payload);
        }
        // `Builder::min_idle`: the floor, made again.
        if let Some(payload) = self.shared().refill_idle() {
            std::panic::resume_unwind(payload);
        }
        count
    }

    /// Gives `value` to an empty slot of the pool (the reverse of
    /// [`PoolGuard::detach`]): a slot that was never filled, was detached
    /// or trimmed, or that an elastic pool has not allocated yet (then it
    /// grows); in a pool without a factory, a [retired](Stats::retired)
    /// slot, which serves again. The value is idle in the pool afterwards, and the next
    /// acquire may get it.
    ///
    /// # Errors
    ///
    /// [`AttachError::Full`] when every slot holds a value (idle or held by
    /// a guard): the capacity is reached. [`AttachError::Closed`] once the
    /// pool is closed. Both give the value back.
    ///
    /// Looking for an empty slot takes idle slots from the free list until
    /// it finds one (after moving the slots parked in per-thread caches
    /// there), so it costs up to the number of idle slots that hold values;
    /// it is meant for setup and maintenance, not for every operation.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{AttachError, Pool, PoolGuard};
    ///
    /// let pool = Pool::new(2, || String::from("made"));
    /// let detached = PoolGuard::detach(pool.try_acquire().unwrap());
    /// assert_eq!(pool.stats().filled, 1);
    /// pool.attach(detached)?;
    /// assert_eq!(pool.stats().filled, 2);
    /// assert!(matches!(pool.attach(String::new()), Err(AttachError::Full(_))));
    /// # Ok::<(), AttachError<String>>(())
    /// ```
    pub fn attach(&self, value: T) -> Result<(), AttachError<T>> {
        self.shared().attach(value)
    }
}
