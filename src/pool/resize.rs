//! The movable bound: [`Pool::set_capacity`] and [`Pool::max_capacity`].

use super::Pool;
use crate::error::CapacityError;

impl<T, E> Pool<T, E> {
    /// The most slots the pool can have in service: the
    /// [`max_capacity`](crate::Builder::max_capacity) set at build, or the
    /// capacity it was built with.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(8, || 0u8);
    /// pool.set_capacity(2).unwrap();
    /// assert_eq!((pool.capacity(), pool.max_capacity()), (2, 8));
    /// ```
    #[inline]
    pub fn max_capacity(&self) -> usize {
        self.shared().max_capacity()
    }

    /// Moves the bound on the slots in service to `capacity`, between 1 and
    /// [`max_capacity`](Pool::max_capacity), while the pool serves.
    ///
    /// **Raising** puts slots back in service: slots this call's
    /// predecessors took out come back first, each handed to a waiter if
    /// one waits, as a release would hand it; then an elastic pool (or one
    /// built with [`max_capacity`](crate::Builder::max_capacity)) may grow
    /// into the room, on demand, or at once for the threads and tasks
    /// waiting now.
    ///
    /// **Lowering** takes slots out of service: every free slot above the
    /// new bound at once (from the free list and from every thread's
    /// cache), and, if guards hold more slots than the new bound, the next
    /// slots given back, one per release, until the pool holds no more
    /// than the bound. Until then no acquire succeeds: a release's slot
    /// leaves service instead of reaching a waiter, and
    /// [`Stats::withdrawing`](crate::Stats::withdrawing) counts the slots
    /// still owed.
    ///
    /// The bound is exact at every moment: once this returns, the slots
    /// held by guards never rise above it, and an acquire that fails or
    /// waits does so because that many are held (or owed). An acquire that
    /// runs at the same time as this call may see either bound. While a
    /// lowered bound is still owed slots, the per-thread caches are
    /// bypassed, as while anyone waits.
    ///
    /// The values of slots out of service are dropped (on this thread, by
    /// this call, or by the next `set_capacity` for slots that leave later,
    /// when their guard is dropped); a slot that comes back into service
    /// is refilled by the factory on its next acquire. A pool built from
    /// given values ([`Pool::builder_from_values`]) keeps them: nothing
    /// could make them again.
    ///
    /// # Errors
    ///
    /// [`CapacityError::Zero`] for 0, and [`CapacityError::AboveMax`] above
    /// the maximum; the bound is unchanged.
    ///
    /// # Panics
    ///
    /// If a dropped value's `Drop`, or the waker of a task handed a slot,
    /// panics: once the bound is set and every other value is dropped, the
    /// first such panic is resumed here.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(4, || 0u8);
    /// let a = pool.try_acquire().unwrap();
    /// let b = pool.try_acquire().unwrap();
    ///
    /// pool.set_capacity(1).unwrap();
    /// assert_eq!(pool.stats().withdrawing, 1, "two held, one too many");
    /// drop(a); // its slot leaves service
    /// assert!(pool.try_acquire().is_err(), "b holds the one slot");
    /// drop(b);
    /// let c = pool.try_acquire().unwrap();
    /// assert!(pool.try_acquire().is_err());
    ///
    /// pool.set_capacity(3).unwrap();
    /// let d = pool.try_acquire().unwrap();
    /// let e = pool.try_acquire().unwrap();
    /// assert!(pool.try_acquire().is_err());
    /// # drop((c, d, e));
    /// ```
    pub fn set_capacity(&self, capacity: usize) -> Result<(), CapacityError> {
        let max = self.max_capacity();
        if capacity == 0 {
            return Err(CapacityError::Zero);
        }
        if capacity > max {
            return Err(CapacityError::AboveMax {
                requested: capacity,
                max,
            });
        }
        self.shared().set_capacity(capacity as u32);
        Ok(())
    }
}
