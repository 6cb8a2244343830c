//! [`Pool`], its [`Builder`], the acquire family and [`Stats`].

use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::panic::{self, AssertUnwindSafe};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::cache::{note_peak, Cache, Magazine, MAX_THREAD_CACHE};
use crate::error::{AcquireError, AcquireTimeoutError, AttachError, BuildError, TryAcquireError};
use crate::free_list::{FreeList, Layout, MAX_INDEX_BITS};
use crate::future::{Acquire, AcquireOwned};
use crate::guard::{OwnedPoolGuard, PoolGuard};
use crate::scope::Scope;
use crate::segment::{Claim, Geometry};
use crate::slot::{Held, Slots};
use crate::sync::{Arc, AtomicU32, AtomicU64, Ordering};
use crate::wait::{AsyncWait, WaitQueue};

/// The largest capacity a pool can have: `2^32 - 2` (4,294,967,294) slots,
/// as folly's `IndexedMemPool`.
///
/// Slot indices are `u32`; the free list's head packs one, a waiter flag and
/// an ABA tag (and, up to 65,535 slots, the free count) into 64 bits, and
/// this bound keeps the tag at 31 bits or more (see [Safety and
/// correctness](crate#safety-and-correctness)). Such a pool should grow on
/// demand ([`Builder::initial`]): its storage is then allocated as it is
/// used.
pub const MAX_CAPACITY: usize = ((1u64 << MAX_INDEX_BITS) - 2) as usize;

type Factory<T> = Box<dyn Fn() -> T + Send + Sync>;
type Reset<T> = Box<dyn Fn(&mut T) + Send + Sync>;

/// A lock-free pool of at most `capacity` values of type `T`.
///
/// Values live in one allocation made at construction and never moved. Free
/// slots sit in per-thread caches and, behind them, a lock-free stack of
/// indices: [`try_acquire`](Pool::try_acquire) takes one from the calling
/// thread's cache (plain loads and stores) or from the stack (one
/// compare-exchange) and returns a guard that derefs to the value; dropping
/// the guard gives the slot back the same way. Neither takes a lock,
/// allocates (once the values exist) or runs user code inside a retry
/// loop. Only the waiting slow path does more: a waiter allocates and
/// registers a listener, and a release that finds waiters notifies one
/// through `event-listener`'s internal lock.
///
/// Share a pool by reference (scoped threads) for [`PoolGuard`]s, or through
/// an [`Arc`] for `'static` [`OwnedPoolGuard`]s that can move into jobs.
///
/// # Invariants
///
/// - Each slot index is owned by exactly one party at a time: the free list,
///   or one guard (or one thread between a pop and the guard it builds).
///   Ownership moves only through the free list's head CAS, whose
///   Acquire/Release pairs publish the value to its next owner.
/// - A slot outside the free list holds a value whenever a guard for it
///   exists; a slot on the free list may be empty and is refilled by the
///   factory when it is next acquired.
///
/// # Examples
///
/// ```
/// use tagpool::Pool;
///
/// let pool = Pool::new(2, || Vec::<u8>::with_capacity(64));
/// let mut a = pool.try_acquire().expect("a slot is free");
/// a.extend_from_slice(b"hello");
/// let _b = pool.try_acquire().expect("a second slot is free");
/// assert!(pool.try_acquire().is_err(), "both slots are held");
/// drop(a);
/// assert_eq!(pool.stats().in_use, 1);
/// ```
pub struct Pool<T> {
    /// The pool's state, in its own allocation: it outlives this handle
    /// while [`OwnedPoolGuard`]s are alive (see [`Shared`]). Padded so that
    /// the pointer, read by every acquire, never shares a line with the
    /// counts of an [`Arc`] around the pool.
    shared: CachePadded<NonNull<Shared<T>>>,
    /// Owns a `Shared<T>` (and so `T`s), for drop check and auto traits.
    _owns: PhantomData<Shared<T>>,
}

/// The state of a [`Pool`], allocated apart from the handle.
///
/// # Lifetime
///
/// The handle ([`Pool`]) and every [`OwnedPoolGuard`] keep it alive, without
/// a reference count per guard: an `Arc` clone and drop per guard would move
/// one shared cache line between the thread that acquires and the one that
/// releases, for every value handed over. Instead each magazine counts the
/// owned guards its thread acquired minus those it released (`owned`,
/// written by its owner only, inside the magazine's own operations), and
/// `owned` here counts the rest, plus [`HANDLE`] while the handle lives or
/// its drop is under way.
///
/// Dropping the handle seals every magazine (see `Cache::seal`): it waits
/// until the owner is outside its operation and its tail, reads the count,
/// and marks the magazine so that the owner's later releases count here.
/// Then it adds the magazines' counts and takes away [`HANDLE`] in one
/// read-modify-write: the result is the number of owned guards alive. The
/// thread whose read-modify-write brings `owned` to zero (the handle's drop,
/// or the last guard) frees this allocation. The sum is exact: at that
/// point no acquire can run (acquiring needs the handle), and every release
/// was counted once, in a magazine before its seal or here after it.
pub(crate) struct Shared<T> {
    /// Free slot indices; the head also carries the free count and the
    /// waiter flag. With caches on, the shared depot behind them.
    free: FreeList,
    /// Per-thread caches of free indices, possibly disabled (see
    /// `cache.rs`): use [`cache`](Self::cache) off the fast paths.
    cache: Cache,
    /// The values, indexed like the free list.
    slots: Slots<T>,
    factory: Factory<T>,
    reset: Option<Reset<T>>,
    waiters: WaitQueue,
    /// Statistics off the hot path's cache lines.
    counters: CachePadded<Counters>,
    /// Owned guards counted outside the magazines, plus [`HANDLE`] (see
    /// Lifetime above). Wrapping arithmetic: only the sum with the
    /// magazines' counts is meaningful.
    owned: CachePadded<AtomicU64>,
    /// Loom only: written when the allocation is freed and read at the end
    /// of every owned release, so that loom reports a release that can
    /// still touch the pool while another thread frees it.
    #[cfg(all(loom, feature = "loom"))]
    alive: crate::sync::UnsafeCell<()>,
}

/// [`Shared::owned`] while the handle lives: a bias far from zero, so that
/// guards released through the shared count before the handle's drop has
/// added the magazines' counts can never bring it to zero.
const HANDLE: u64 = 1 << 63;

/// What a release returns: what is left to do (see [`Settle`]), and the
/// reset closure's panic, to resume after that.
pub(crate) type Released = (Settle, Option<Box<dyn core::any::Any + Send>>);

/// What an owned guard's release leaves to do once no reference into the
/// pool's state is live (so that the state may be freed by another thread
/// meanwhile): see [`Shared::finish`].
#[must_use]
pub(crate) enum Settle {
    /// Nothing: a borrowed guard.
    Done,
    /// The release was counted in this magazine: end its tail.
    Tail(NonNull<Magazine>),
    /// The release was not counted: take one from [`Shared::owned`].
    Shared,
}

#[derive(Debug)]
struct Counters {
    /// The highest number of slots held at once. Written only when it grows.
    peak: AtomicU32,
    /// `try_acquire` calls that found the pool empty.
    failed: AtomicU64,
    /// Slots holding a value: made at build or by the factory, minus those
    /// detached, trimmed or dropped after a panic.
    filled: AtomicU64,
}

// SAFETY: a `Pool<T>` owns its `T`s; sending the pool sends them, and they are
// dropped on whatever thread drops the pool, so `T: Send` is required and
// enough. The closures are `Send + Sync` by construction, and the atomics and
// the event are `Send`.
unsafe impl<T: Send> Send for Pool<T> {}

// SAFETY: through `&Pool<T>` a thread can take a value out of the pool (by a
// guard or `detach`), use it exclusively and give it back: values *move*
// between threads but are never shared by two (each slot has one owner at a
// time, see the invariants), so `T: Send` suffices and `T: Sync` is not
// needed. The factory and reset closures, called from any thread, are
// `Send + Sync`.
unsafe impl<T: Send> Sync for Pool<T> {}

impl<T> Pool<T> {
    /// Creates a pool of `capacity` values, all made now by `factory`.
    ///
    /// The factory also refills slots whose value was
    /// [detached](PoolGuard::detach) or dropped after a reset panicked. Use
    /// [`Pool::builder`] for lazy filling, a reset closure, or an error
    /// instead of a panic.
    ///
    /// # Panics
    ///
    /// If `capacity` is 0 or above [`MAX_CAPACITY`]. If `factory` panics, the
    /// values made so far are dropped and the panic propagates.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(16, || [0u64; 8]);
    /// assert_eq!(pool.capacity(), 16);
    /// assert_eq!(pool.stats().available, 16);
    /// ```
    pub fn new<F>(capacity: usize, factory: F) -> Self
    where
        F: Fn() -> T + Send + Sync + 'static,
    {
        match Self::builder(factory).capacity(capacity).build() {
            Ok(pool) => pool,
            Err(err) => panic!("tagpool::Pool::new: {err}"),
        }
    }

    /// Starts building a pool whose values `factory` makes.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder(|| Vec::<u8>::with_capacity(4096))
    ///     .capacity(8)
    ///     .lazy()
    ///     .reset(|buf: &mut Vec<u8>| buf.clear())
    ///     .build()?;
    /// let mut buf = pool.try_acquire().unwrap();
    /// buf.push(1);
    /// drop(buf);
    /// let buf = pool.try_acquire().unwrap();
    /// assert!(buf.is_empty() && buf.capacity() >= 4096);
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn builder<F>(factory: F) -> Builder<T>
    where
        F: Fn() -> T + Send + Sync + 'static,
    {
        Builder {
            factory: Box::new(factory),
            capacity: 0,
            initial: None,
            values: Vec::new(),
            lazy: false,
            reset: None,
            thread_cache: ThreadCache::Auto,
            fair: false,
        }
    }

    /// The number of slots, fixed at construction.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tagpool::Pool::new(3, || 0u8).capacity(), 3);
    /// ```
    #[inline]
    pub fn capacity(&self) -> usize {
        self.shared().free.capacity() as usize
    }

    /// Takes a free slot, or fails at once if every slot is held or the
    /// pool is closed.
    ///
    /// Never blocks. With per-thread caches the common case is plain loads
    /// and stores on the calling thread's cache; without, one
    /// compare-exchange. A slot never filled (lazy pools) or emptied by
    /// [`detach`](PoolGuard::detach) is filled by the factory first, on
    /// this thread.
    ///
    /// # Errors
    ///
    /// [`TryAcquireError::Exhausted`] if every slot is held (counted in
    /// [`Stats::failed_acquires`]); [`TryAcquireError::Closed`] once the
    /// pool is [closed](Pool::close).
    ///
    /// # Panics
    ///
    /// If the factory panics while filling the slot. The slot goes back to
    /// the pool, still empty, and the pool stays usable.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::TryAcquireError;
    ///
    /// let pool = tagpool::Pool::new(1, || 7u32);
    /// let guard = pool.try_acquire().unwrap();
    /// assert_eq!(*guard, 7);
    /// assert_eq!(pool.try_acquire().unwrap_err(), TryAcquireError::Exhausted);
    /// assert_eq!(pool.stats().failed_acquires, 1);
    /// ```
    #[inline]
    pub fn try_acquire(&self) -> Result<PoolGuard<'_, T>, TryAcquireError> {
        let shared = self.shared();
        match shared.try_pop::<false>() {
            Some(taken) => Ok(PoolGuard::new(shared, shared.take::<false>(taken))),
            None => Err(shared.failure()),
        }
    }

    /// Takes a free slot, blocking the thread until one is free if every
    /// slot is held.
    ///
    /// Waits without a bound: use [`acquire_timeout`](Pool::acquire_timeout)
    /// when a release may never come. A thread that itself holds every slot
    /// (or a factory or reset closure that calls `acquire` on its own pool)
    /// waits forever. A waiting thread spins briefly, then parks until a
    /// release wakes it. See [Waiting](crate#waiting) for the order waiters
    /// are served in.
    ///
    /// **Do not call it from an async task**: it blocks the executor's
    /// thread, and the release it waits for may need that thread. Use
    /// [`acquire_async`](Pool::acquire_async) there.
    ///
    /// # Errors
    ///
    /// [`AcquireError::Closed`] if the pool is [closed](Pool::close) before
    /// a slot is free, or while this thread waits.
    ///
    /// # Panics
    ///
    /// If the factory panics while filling the slot (see
    /// [`try_acquire`](Pool::try_acquire)).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(1, || 0u32);
    /// std::thread::scope(|s| {
    ///     let held = pool.acquire().unwrap();
    ///     s.spawn(|| *pool.acquire().unwrap() += 1); // waits for `held`
    ///     drop(held);
    /// });
    /// assert_eq!(*pool.acquire()?, 1);
    /// # Ok::<(), tagpool::AcquireError>(())
    /// ```
    pub fn acquire(&self) -> Result<PoolGuard<'_, T>, AcquireError> {
        let shared = self.shared();
        let taken = shared.pop_waiting::<false>(None).map_err(untimed)?;
        Ok(PoolGuard::new(shared, shared.take::<false>(taken)))
    }

    /// Takes a free slot, blocking the thread at most `timeout` for one.
    ///
    /// A timeout too large to represent as an [`Instant`] waits without a
    /// bound. Like [`acquire`](Pool::acquire), not for async tasks: there,
    /// wrap [`acquire_async`](Pool::acquire_async) in the runtime's timeout
    /// (see [Async](crate#async)).
    ///
    /// # Errors
    ///
    /// [`AcquireTimeoutError::Timeout`] if no slot came free in time
    /// (counted in [`Stats::timeouts`]); [`AcquireTimeoutError::Closed`] if
    /// the pool is [closed](Pool::close) first.
    ///
    /// # Panics
    ///
    /// If the factory panics while filling the slot (see
    /// [`try_acquire`](Pool::try_acquire)).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    /// use tagpool::AcquireTimeoutError;
    ///
    /// let pool = tagpool::Pool::new(1, || 0u32);
    /// let held = pool.acquire_timeout(Duration::from_millis(10)).unwrap();
    /// let err = pool.acquire_timeout(Duration::from_millis(10)).unwrap_err();
    /// assert_eq!(err, AcquireTimeoutError::Timeout);
    /// assert_eq!(pool.stats().timeouts, 1);
    /// drop(held);
    /// ```
    pub fn acquire_timeout(
        &self,
        timeout: Duration,
    ) -> Result<PoolGuard<'_, T>, AcquireTimeoutError> {
        let shared = self.shared();
        let taken = shared.pop_timeout::<false>(timeout)?;
        Ok(PoolGuard::new(shared, shared.take::<false>(taken)))
    }

    /// Takes a free slot, waiting for one without blocking the thread: the
    /// future resolves once a release gives this task a slot.
    ///
    /// Runtime-agnostic: the future registers the task's waker with the
    /// pool's wait queue (`event-listener`), so any executor drives it, and
    /// blocking and async waiters share one queue. Like
    /// [`acquire`](Pool::acquire), it waits without a bound: use the
    /// runtime's timeout (`tokio::time::timeout`) for a bound, and
    /// [`close`](Pool::close) to end every wait at shutdown.
    ///
    /// Cancel-safe: dropping the future before it resolves takes no slot,
    /// and passes on any slot a release handed it, so no other waiter is
    /// left waiting for it. Counted in [`Stats::cancelled_waits`] if it was
    /// waiting.
    ///
    /// Leaking a pending future (`mem::forget`) is safe, but like leaking a
    /// guard it is not free: it stays counted in
    /// [`Stats::waiting_tasks`] (and per-thread caches keep flushing, as
    /// for any waiter), and the slot a release hands it stays in use for
    /// good.
    ///
    /// # Errors
    ///
    /// [`AcquireError::Closed`] if the pool is [closed](Pool::close) before
    /// a slot is free, or while the task waits.
    ///
    /// # Panics
    ///
    /// The future panics if the factory panics while filling the slot (see
    /// [`try_acquire`](Pool::try_acquire)), and if it is polled again after
    /// it resolved.
    ///
    /// # Examples
    ///
    /// ```
    /// # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    /// # rt.block_on(async {
    /// use std::time::Duration;
    ///
    /// let pool = tagpool::Pool::new(1, || Vec::<u8>::with_capacity(1024));
    /// let mut buf = pool.acquire_async().await?;
    /// buf.extend_from_slice(b"frame");
    ///
    /// // The only slot is held: a bounded wait times out, and the dropped
    /// // future leaves nothing behind.
    /// let waited = tokio::time::timeout(Duration::from_millis(5), pool.acquire_async()).await;
    /// assert!(waited.is_err());
    /// assert_eq!(pool.stats().cancelled_waits, 1);
    /// drop(buf);
    /// assert!(pool.acquire_async().await.is_ok());
    /// # Ok::<(), tagpool::AcquireError>(())
    /// # }).unwrap();
    /// ```
    pub fn acquire_async(&self) -> Acquire<'_, T> {
        Acquire::new(self)
    }

    /// Like [`acquire_async`](Pool::acquire_async), for a pool in an
    /// [`Arc`]: the future and the guard it resolves to are `'static` (and
    /// `Send` when `T: Send`), so they fit `tokio::spawn`. The future holds
    /// a clone of the `Arc` until it resolves or is dropped.
    ///
    /// # Errors
    ///
    /// As [`acquire_async`](Pool::acquire_async).
    ///
    /// # Panics
    ///
    /// As [`acquire_async`](Pool::acquire_async).
    ///
    /// # Examples
    ///
    /// ```
    /// # let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
    /// # rt.block_on(async {
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::Pool::new(2, || vec![0u8; 4096]));
    /// let tasks: Vec<_> = (0..8u8)
    ///     .map(|i| {
    ///         let pool = Arc::clone(&pool);
    ///         tokio::spawn(async move {
    ///             let mut buf = pool.acquire_owned_async().await?; // 2 at a time
    ///             buf[0] = i;
    ///             tokio::task::yield_now().await;
    ///             Ok::<u8, tagpool::AcquireError>(buf[0])
    ///         })
    ///     })
    ///     .collect();
    /// let mut sum = 0;
    /// for task in tasks {
    ///     sum += task.await.unwrap()?;
    /// }
    /// assert_eq!(sum, 28);
    /// assert_eq!(pool.stats().in_use, 0);
    /// # Ok::<(), tagpool::AcquireError>(())
    /// # }).unwrap();
    /// ```
    pub fn acquire_owned_async(self: &Arc<Self>) -> AcquireOwned<T> {
        AcquireOwned::new(Arc::clone(self))
    }

    /// Closes the pool: every waiting acquire, blocking or async, returns
    /// [`AcquireError::Closed`] promptly, and every later acquire fails the
    /// same way ([`TryAcquireError::Closed`] from `try_acquire`).
    ///
    /// For graceful shutdown, as `deadpool`'s and Stormpot's pools offer.
    /// Guards already out stay valid and are released as usual; the values
    /// stay in the pool until it is dropped, which drops each exactly once.
    /// [`Stats::closed`] tells that the pool is closed. Closing cannot be
    /// undone.
    ///
    /// Returns `true` if this call closed the pool, `false` if it was closed
    /// already. Either way, once it returns, the close is complete: no
    /// per-thread cache still offers a slot and every waiter has been woken.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tagpool::AcquireError;
    ///
    /// let pool = Arc::new(tagpool::Pool::new(1, || 0u8));
    /// let held = pool.acquire()?;
    /// let waiter = {
    ///     let pool = Arc::clone(&pool);
    ///     std::thread::spawn(move || pool.acquire().map(|_| ()))
    /// };
    /// assert!(pool.close());
    /// assert_eq!(waiter.join().unwrap(), Err(AcquireError::Closed));
    /// drop(held); // released as usual
    /// assert!(pool.stats().closed && pool.stats().in_use == 0);
    /// # Ok::<(), AcquireError>(())
    /// ```
    pub fn close(&self) -> bool {
        let shared = self.shared();
        let closed_now = shared.waiters.close(&shared.free, shared.cache());
        // A waker woken by the close panicked: every waiter was woken all
        // the same (see `unwind.rs`), so the panic goes on now.
        crate::unwind::resume(crate::unwind::take());
        closed_now
    }

    /// Drops the values of idle slots beyond the `keep` most recently
    /// released ones, and returns how many it dropped. The slots stay in the
    /// pool, empty: the factory refills each on its next acquire.
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
        count
    }

    /// Takes the values out of every idle slot and returns them; the slots
    /// stay in the pool, empty, and the factory refills each on its next
    /// acquire. Slots held by guards keep their values.
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

    /// Gives `value` to an empty slot of the pool (the reverse of
    /// [`PoolGuard::detach`]): a slot that was never filled, was detached
    /// or trimmed, or that an elastic pool has not allocated yet (then it
    /// grows). The value is idle in the pool afterwards, and the next
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

    /// A scope for frame-temporary values: values taken through it are
    /// given back together, reset, in one batch when it is dropped (see
    /// [`Scope`]).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(8, || [0.0f32; 16]);
    /// {
    ///     let frame = pool.scope();
    ///     for i in 0..4 {
    ///         frame.try_acquire().unwrap()[0] = i as f32;
    ///     }
    ///     assert_eq!(pool.stats().in_use, 4);
    /// }
    /// assert_eq!(pool.stats().in_use, 0);
    /// ```
    pub fn scope(&self) -> Scope<'_, T> {
        Scope::new(self.shared())
    }

    /// Whether the pool is [closed](Pool::close).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(1, || 0u8);
    /// assert!(!pool.is_closed());
    /// pool.close();
    /// assert!(pool.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.shared().free.is_closed()
    }

    /// Like [`try_acquire`](Pool::try_acquire), for a pool in an [`Arc`]: the
    /// guard keeps the pool alive and is `'static`, so it can move into a job
    /// on another thread.
    ///
    /// # Errors
    ///
    /// As [`try_acquire`](Pool::try_acquire).
    ///
    /// # Panics
    ///
    /// If the factory panics while filling the slot.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::Pool::new(4, || 0u64));
    /// let mut guard = pool.try_acquire_owned().unwrap();
    /// let job = std::thread::spawn(move || {
    ///     *guard += 1;
    ///     *guard // the guard is dropped here, on the job's thread
    /// });
    /// assert_eq!(job.join().unwrap(), 1);
    /// assert_eq!(pool.stats().in_use, 0);
    /// ```
    #[inline]
    pub fn try_acquire_owned(self: &Arc<Self>) -> Result<OwnedPoolGuard<T>, TryAcquireError> {
        let shared = self.shared();
        match shared.try_pop::<true>() {
            Some(taken) => Ok(self.owned_guard(taken)),
            None => Err(shared.failure()),
        }
    }

    /// Like [`acquire`](Pool::acquire), for a pool in an [`Arc`]. Not for
    /// async tasks: use [`acquire_owned_async`](Pool::acquire_owned_async).
    ///
    /// # Errors
    ///
    /// As [`acquire`](Pool::acquire).
    ///
    /// # Panics
    ///
    /// If the factory panics while filling the slot.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::Pool::new(1, || String::new()));
    /// let first = pool.acquire_owned();
    /// let waiter = {
    ///     let pool = Arc::clone(&pool);
    ///     std::thread::spawn(move || pool.acquire_owned().map(|s| s.len()))
    /// };
    /// drop(first);
    /// assert_eq!(waiter.join().unwrap(), Ok(0));
    /// ```
    pub fn acquire_owned(self: &Arc<Self>) -> Result<OwnedPoolGuard<T>, AcquireError> {
        let taken = self.shared().pop_waiting::<true>(None).map_err(untimed)?;
        Ok(self.owned_guard(taken))
    }

    /// Like [`acquire_timeout`](Pool::acquire_timeout), for a pool in an
    /// [`Arc`].
    ///
    /// # Errors
    ///
    /// As [`acquire_timeout`](Pool::acquire_timeout).
    ///
    /// # Panics
    ///
    /// If the factory panics while filling the slot.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::{sync::Arc, time::Duration};
    ///
    /// let pool = Arc::new(tagpool::Pool::new(1, || 0u8));
    /// let held = pool.acquire_owned_timeout(Duration::from_millis(5)).unwrap();
    /// assert!(pool.acquire_owned_timeout(Duration::from_millis(5)).is_err());
    /// drop(held);
    /// ```
    pub fn acquire_owned_timeout(
        self: &Arc<Self>,
        timeout: Duration,
    ) -> Result<OwnedPoolGuard<T>, AcquireTimeoutError> {
        let taken = self.shared().pop_timeout::<true>(timeout)?;
        Ok(self.owned_guard(taken))
    }

    /// A snapshot of the pool's counters.
    ///
    /// `in_use` and `available` always add up to the capacity, and are exact
    /// whenever no other thread is acquiring or releasing. With per-thread
    /// caches they sum the shared free list and every thread's cache, read
    /// one after another, so while other threads work they are a moment's
    /// estimate. The other counters are read separately.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::new(4, || 0u8);
    /// let a = pool.try_acquire().unwrap();
    /// let b = pool.try_acquire().unwrap();
    /// drop(a);
    /// let stats = pool.stats();
    /// assert_eq!((stats.in_use, stats.available, stats.peak_in_use), (1, 3, 2));
    /// # drop(b);
    /// ```
    pub fn stats(&self) -> Stats {
        self.shared().stats()
    }

    /// Polls an async acquire: the first poll tries as `try_acquire` does,
    /// later ones wait (see `wait.rs`). An index it returns is counted as
    /// an owned guard's if `OWNED`.
    pub(crate) fn poll_acquire<const OWNED: bool>(
        &self,
        wait: &mut AsyncWait,
        first: bool,
        cx: &mut Context<'_>,
    ) -> Poll<Result<u32, AcquireError>> {
        let shared = self.shared();
        if first {
            if let Some(taken) = shared.try_pop::<OWNED>() {
                return Poll::Ready(Ok(taken));
            }
            if shared.free.is_closed() {
                // Closed before it began: not a wait.
                return Poll::Ready(Err(AcquireError::Closed));
            }
        }
        let peak = &shared.counters.peak;
        let polled = shared
            .waiters
            .poll_wait(wait, &shared.free, shared.cache(), peak, cx);
        // An acquire: the panic of a waker it woke (passing on a
        // notification) is dropped (see `unwind.rs`).
        crate::unwind::drop_caught();
        match polled {
            Poll::Ready(Ok(taken)) => Poll::Ready(Ok(shared.count::<OWNED>(taken))),
            other => other,
        }
    }

    /// Ends a dropped async acquire's wait; a slot it was handed meanwhile
    /// goes to the next waiter (see `WaitQueue::cancel`).
    pub(crate) fn cancel_acquire(&self, wait: &mut AsyncWait) {
        let shared = self.shared();
        if let Some(handed) = shared.waiters.cancel(wait, &shared.free) {
            shared.push_free(handed);
        }
        // A waker woken by the cancel (a notification passed on, a slot
        // handed on) panicked: the wait is over all the same, so the panic
        // goes on now (see `unwind.rs`).
        crate::unwind::resume(crate::unwind::take());
    }

    /// A guard for `index`, taken by an async acquire.
    pub(crate) fn guard(&self, index: u32) -> PoolGuard<'_, T> {
        let shared = self.shared();
        PoolGuard::new(shared, shared.take::<false>(index))
    }

    /// Builds an owned guard for `index`, taken by `try_pop::<true>` (so
    /// counted as an owned guard).
    #[inline]
    pub(crate) fn owned_guard(&self, index: u32) -> OwnedPoolGuard<T> {
        let held = self.shared().take::<true>(index);
        OwnedPoolGuard::new(*self.shared, held)
    }

    /// The pool's state, for the index pool and scopes built on it.
    #[inline(always)]
    pub(crate) fn state(&self) -> &Shared<T> {
        self.shared()
    }

    /// The pool's state, for owned guards of the index pool.
    #[inline(always)]
    pub(crate) fn state_ptr(&self) -> NonNull<Shared<T>> {
        *self.shared
    }

    /// The pool's state.
    #[inline(always)]
    fn shared(&self) -> &Shared<T> {
        // SAFETY: the handle keeps the state alive (its `HANDLE` share of
        // `Shared::owned` is taken away only in `drop`).
        unsafe { self.shared.as_ref() }
    }
}

impl<T> Shared<T> {
    /// See [`Pool::stats`].
    fn stats(&self) -> Stats {
        let capacity = self.free.capacity() as usize;
        let allocated = self.free.allocated() as usize;
        let cached = self.cache().map_or(0, |c| c.cached() as usize);
        // While threads move slots between caches and the free list, or a
        // growth pushes a segment, a slot can be counted twice: clamp to the
        // capacity. Slots not allocated yet are available.
        let available =
            (self.free.free_count() as usize + cached + (capacity - allocated)).min(capacity);
        let in_use = capacity - available;
        // Relaxed: statistics; no data is read through them.
        let peak = self.counters.peak.load(Ordering::Relaxed);
        let peak = peak.max(self.cache().map_or(0, Cache::peak_bound)) as usize;
        let (waits, async_waits, timeouts, cancelled_waits, handoffs) = self.waiters.counts();
        let (waiting_threads, waiting_tasks) = self.waiters.waiting_now();
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
            peak_in_use: peak.max(in_use).min(capacity),
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
        }
    }
}

impl<T> Shared<T> {
    /// Moves the slots parked in per-thread caches (those whose owner is
    /// not in an operation) to the free list.
    fn sweep_caches(&self) {
        if let Some(cache) = self.cache() {
            cache.sweep(&self.free, &self.waiters, false);
            // Not a release: a waker's panic is dropped (see `unwind.rs`).
            crate::unwind::drop_caught();
        }
    }

    /// Pops idle slots and hands each to `visit`, which may take its value,
    /// until the free list is empty or `visit` returns `false`. Returns the
    /// popped indices, top first, and the one `visit` stopped at (not in
    /// the list). The caller owns them all and must give them back
    /// ([`release_chain`](Self::release_chain)).
    fn pop_idle(&self, mut visit: impl FnMut(&mut Held<T>) -> bool) -> (Vec<u32>, Option<u32>) {
        let mut popped = Vec::new();
        let mut batch = [0u32; 64];
        while let Some(taken) = self.free.pop_batch_if(&mut batch, true) {
            let batch = &batch[..taken.count as usize];
            for (at, &index) in batch.iter().enumerate() {
                // SAFETY: popped just above, so this thread owns `index`,
                // and no other `Held` for it exists.
                let mut held = unsafe { self.slots.claim(index) };
                if !visit(&mut held) {
                    // The rest of this batch is owned too: it goes back
                    // with the others.
                    popped.extend_from_slice(&batch[at + 1..]);
                    return (popped, Some(index));
                }
                popped.push(index);
            }
        }
        (popped, None)
    }

    /// Gives back `chain`, owned by this thread, in one push (or one by one
    /// to the first waiters of a fair pool).
    ///
    /// `still_held` is how many other slots this thread holds for the
    /// moment of its pass (an attach's target), not counted as held.
    fn release_chain(&self, chain: &[u32], still_held: u32) {
        if chain.is_empty() {
            return;
        }
        self.waiters.release_batch(&self.free, chain);
        // Idle slots going back, no guard's release: a waker's panic is
        // dropped (see `unwind.rs`).
        crate::unwind::drop_caught();
        if self.waiters.is_fair() {
            // A fair release hands slots to queued waiters without a pop:
            // slots that were idle before this pass may now be held, and
            // no pop recorded them. (A barging pool's waiters pop, and
            // record.) Without a hand-off this records nothing new: a fair
            // pool has no caches, so every held slot was counted by a pop.
            let in_use = self.free.in_use(self.free.free_count());
            note_peak(&self.counters.peak, in_use.saturating_sub(still_held));
        }
    }

    /// See [`Pool::trim`] and [`Pool::drain_idle`]: takes the values of
    /// idle slots beyond the first `keep` filled ones and returns them.
    fn take_idle(&self, keep: usize) -> Vec<T> {
        self.sweep_caches();
        let mut kept = 0;
        let mut taken = Vec::new();
        #[cfg(all(loom, tagpool_loom_trim_unowned))]
        {
            // Loom-only fault injection: a trim that takes the value of
            // every slot it finds filled, without owning the slot. The trim
            // model must report the access to a held value.
            let _ = keep;
            for index in 0..self.free.allocated() {
                // SAFETY: none: this is the planted bug loom must catch.
                let mut held = unsafe { self.slots.claim(index) };
                taken.extend(held.take());
            }
            self.note_emptied(taken.len() as u64);
            return taken;
        }
        let mut emptied = Vec::new();
        let (popped, _) = self.pop_idle(|held| {
            if !held.is_empty() {
                if kept < keep {
                    kept += 1;
                    return true;
                }
                taken.extend(held.take());
            }
            true
        });
        // Kept values on top, so the next acquires reuse them; the emptied
        // slots below. Nothing of the user's runs before the push.
        let mut chain = Vec::with_capacity(popped.len());
        for index in popped {
            // SAFETY: this thread popped `index` and has not pushed it; the
            // `Held` the visitor saw is gone.
            let held = unsafe { self.slots.claim(index) };
            if held.is_empty() {
                emptied.push(index);
            } else {
                chain.push(index);
            }
        }
        chain.extend_from_slice(&emptied);
        self.release_chain(&chain, 0);
        self.note_emptied(taken.len() as u64);
        taken
    }

    /// See [`Pool::attach`].
    fn attach(&self, value: T) -> Result<(), AttachError<T>> {
        if self.free.is_closed() {
            return Err(AttachError::Closed(value));
        }
        // Relaxed: a statistic, exact at quiescence; an empty slot exists
        // whenever fewer than `capacity` slots hold values.
        if self.counters.filled.load(Ordering::Relaxed) >= u64::from(self.free.capacity()) {
            return Err(AttachError::Full(value));
        }
        self.sweep_caches();
        let mut held = loop {
            let (popped, empty) = self.pop_idle(|held| !held.is_empty());
            self.release_chain(&popped, u32::from(empty.is_some()));
            let target = match empty.or_else(|| self.grow()) {
                Some(target) => target,
                None if self.free.is_closed() => return Err(AttachError::Closed(value)),
                None => return Err(AttachError::Full(value)),
            };
            // SAFETY: `target` was popped (or grown) by this thread and not
            // pushed since.
            let held = unsafe { self.slots.claim(target) };
            if held.is_empty() {
                break held;
            }
            // `grow` waited for another thread's growth and popped a slot
            // that holds a value: give it back, and look again (the grown
            // segment's empty slots are on the free list now).
            // SAFETY: claimed from `self.slots` just above.
            let index = unsafe { held.into_index(&self.slots) };
            self.push_free(index);
        };
        held.fill(value);
        self.note_filled(1);
        // SAFETY: claimed from `self.slots` just above.
        let index = unsafe { held.into_index(&self.slots) };
        self.push_free(index);
        // No guard's release: a waker's panic is dropped (see `unwind.rs`),
        // here and from the pushes above.
        crate::unwind::drop_caught();
        Ok(())
    }
}

/// A waiting acquire's error when it had no deadline: only a close.
/// The error of an untimed wait (it can only end closed).
pub(crate) fn untimed(err: AcquireTimeoutError) -> AcquireError {
    debug_assert_eq!(err, AcquireTimeoutError::Closed, "no deadline");
    AcquireError::Closed
}

/// The growth claim of segment `k`, held while the segment is allocated:
/// dropped only if the allocation unwinds (the grower forgets it once the
/// allocations are done), and then gives the growth back, so that the
/// threads waiting in `wait_for_growth` go on and a later one may try again.
struct GrowthClaim<'a> {
    free: &'a FreeList,
    k: u32,
}

impl Drop for GrowthClaim<'_> {
    fn drop(&mut self) {
        self.free.abandon_growth(self.k);
    }
}

/// A growth refused before its claim: segment `k` would not fit an `isize`.
#[cold]
#[inline(never)]
fn too_large(k: u32, capacity: u32) -> ! {
    panic!(
        "tagpool: cannot grow the pool to its capacity of {capacity} slots: \
         segment {k} is larger than `isize::MAX` bytes on this target"
    )
}

impl<T> Drop for Pool<T> {
    fn drop(&mut self) {
        let ptr = *self.shared;
        // No acquire can run from here on (acquiring needs the handle):
        // only owned guards' releases, on other threads.
        let counted = self.shared().cache.seal();
        // SAFETY: `ptr` is the state this handle kept alive, and `counted`
        // is the sum of the sealed magazines' counts.
        unsafe { Shared::settle(ptr, counted.wrapping_sub(HANDLE)) };
    }
}

impl<T> Shared<T> {
    /// The caches, if the pool has them.
    fn cache(&self) -> Option<&Cache> {
        self.cache.enabled().then_some(&self.cache)
    }

    /// Takes a free slot index without waiting: this thread's cache (which
    /// refills from the free list), else the free list, else the slots that
    /// other threads' caches hold. `OWNED` counts the index as an owned
    /// guard's (see [Lifetime](Shared#lifetime)).
    #[inline]
    pub(crate) fn try_pop<const OWNED: bool>(&self) -> Option<u32> {
        // The cache's inlined fast path, which a pool without caches fails
        // at its first check. An index from it is counted in the magazine.
        if let Some(index) = self.cache.acquire::<OWNED>(&self.free, &self.waiters) {
            return Some(index);
        }
        self.try_pop_slow::<OWNED>()
    }

    /// [`try_pop`](Self::try_pop) past the cache's fast path; a pool
    /// without caches goes straight to the free list.
    #[cold]
    #[inline(never)]
    fn try_pop_slow<const OWNED: bool>(&self) -> Option<u32> {
        let cache = match self.cache() {
            Some(cache) => cache,
            None => return self.counted::<OWNED>(self.pop_free().or_else(|| self.grow_taken())),
        };
        let peak = &self.counters.peak;
        // While anyone waits, a refill would only flush its batch back:
        // take one slot from the free list, or from another cache. This
        // thread's own stack goes to the free list first: its fast path may
        // have found the stack held by a waiter's sweep, which then left it
        // to this thread to flush (`acquire_slow` flushes too).
        if !self.waiters.waiting_hint() {
            if let Some(index) = cache.acquire_slow::<OWNED>(&self.free, &self.waiters, peak) {
                return Some(index);
            }
        } else {
            cache.flush_for_waiters(&self.free, &self.waiters);
        }
        self.counted::<OWNED>(self.steal(cache).or_else(|| self.grow_taken()))
    }

    /// [`grow`](Self::grow) for an acquire: the slot it takes counts
    /// towards the peak.
    #[cold]
    fn grow_taken(&self) -> Option<u32> {
        let index = self.grow()?;
        note_peak(
            &self.counters.peak,
            self.free.in_use(self.free.free_count()),
        );
        Some(index)
    }

    /// Grows the pool by its next segment, for a thread that found no free
    /// slot, and takes the segment's first slot; `None` when the pool has
    /// all its segments or is closed.
    ///
    /// One thread grows each segment: the one whose claim succeeds (see
    /// `segment.rs`). It allocates the segment's links and cells (empty:
    /// the factory fills them on their first acquire, outside any retry
    /// loop), publishes both, pushes all but the first slot to the free
    /// list as one chain and keeps the first. A thread that finds another
    /// one growing waits for it to finish, then takes from the free list, or
    /// grows the next segment if the first growth's slots are all taken
    /// already.
    ///
    /// A growth never leaves the claim set: a segment whose size in bytes
    /// overflows an `isize` (32-bit targets only) is refused before the
    /// claim, and an allocation that unwinds (under `-Z oom=panic`, or the
    /// tests' injected fault) drops a [`GrowthClaim`] that gives the claim
    /// back, before anything of the segment was published.
    ///
    /// # Panics
    ///
    /// If the next segment cannot be laid out on this target; every later
    /// growth panics the same way, and the pool keeps working at its
    /// current size for the threads that do not need to grow it.
    #[cold]
    #[inline(never)]
    fn grow(&self) -> Option<u32> {
        loop {
            if self.free.is_closed() {
                return None;
            }
            match self.free.claim_growth(|k| self.slots.fits(k)) {
                Claim::Full => return None,
                Claim::TooLarge(k) => too_large(k, self.free.capacity()),
                Claim::Busy => {
                    self.free.wait_for_growth();
                    if let Some(index) = self.pop_free() {
                        return Some(index);
                    }
                }
                Claim::Grow(k) => {
                    let claim = GrowthClaim {
                        free: &self.free,
                        k,
                    };
                    // The steps that may unwind (allocations): the claim's
                    // drop gives the growth back.
                    let links = self.free.prepare_growth(k);
                    let cells = self.slots.prepare_growth(k);
                    // From here nothing unwinds: publish, push, end the
                    // growth.
                    core::mem::forget(claim);
                    let new = self.free.publish_links(k, links);
                    self.slots.publish(cells);
                    let mine = new.start;
                    if new.len() > 1 {
                        self.waiters.release_linked(
                            &self.free,
                            mine + 1,
                            new.end - 1,
                            new.end - mine - 1,
                        );
                        // An acquire: a waker's panic is dropped (see
                        // `unwind.rs`).
                        crate::unwind::drop_caught();
                    }
                    self.free.grown(k);
                    return Some(mine);
                }
            }
        }
    }

    /// Counts `taken`, an index that no magazine counted, in
    /// [`owned`](Self::owned) if it is an owned guard's.
    #[inline]
    fn counted<const OWNED: bool>(&self, taken: Option<u32>) -> Option<u32> {
        taken.map(|index| self.count::<OWNED>(index))
    }

    /// [`counted`](Self::counted) for an index known to be taken.
    #[inline]
    fn count<const OWNED: bool>(&self, index: u32) -> u32 {
        if OWNED {
            // Relaxed: the handle is alive (this is an acquire), so the
            // count is far from zero; the decrement that reaches zero is
            // AcqRel and orders everything before it.
            self.owned.fetch_add(1, Ordering::Relaxed);
        }
        index
    }

    /// Pops the free list, recording the peak.
    #[inline]
    fn pop_free(&self) -> Option<u32> {
        let popped = self.free.pop()?;
        note_peak(&self.counters.peak, self.free.in_use(popped.free));
        Some(popped.index)
    }

    /// The free list, then the other threads' caches, until a slot is found
    /// or no cache holds any: with no operation in flight, `None` means
    /// every slot is held by a guard.
    #[cold]
    fn steal(&self, cache: &Cache) -> Option<u32> {
        loop {
            if let Some(index) = self.pop_free() {
                return Some(index);
            }
            if self.free.is_closed() {
                // Pops fail for good; the close has emptied the caches.
                return None;
            }
            // Each round that moved slots is progress: some thread took them.
            // A contended magazine belongs to an operation in flight.
            let moved = cache.sweep(&self.free, &self.waiters, false).moved;
            // An acquire: a waker's panic is dropped (see `unwind.rs`).
            crate::unwind::drop_caught();
            if moved == 0 {
                return None;
            }
        }
    }

    /// Takes a free slot index, waiting until `deadline` (forever with
    /// `None`) if there is none.
    pub(crate) fn pop_waiting<const OWNED: bool>(
        &self,
        deadline: Option<Instant>,
    ) -> Result<u32, AcquireTimeoutError> {
        match self.try_pop::<OWNED>() {
            Some(taken) => Ok(taken),
            None => self.wait_for_slot::<OWNED>(deadline),
        }
    }

    /// Takes a free slot index, waiting at most `timeout`. The clock is read
    /// only when the pool is empty.
    pub(crate) fn pop_timeout<const OWNED: bool>(
        &self,
        timeout: Duration,
    ) -> Result<u32, AcquireTimeoutError> {
        match self.try_pop::<OWNED>() {
            Some(taken) => Ok(taken),
            None => self.wait_for_slot::<OWNED>(Instant::now().checked_add(timeout)),
        }
    }

    /// The waiting half of [`pop_waiting`](Self::pop_waiting) and
    /// [`pop_timeout`](Self::pop_timeout), counting an owned guard's index.
    #[cold]
    fn wait_for_slot<const OWNED: bool>(
        &self,
        deadline: Option<Instant>,
    ) -> Result<u32, AcquireTimeoutError> {
        if self.free.is_closed() {
            // Closed before it began: not a wait.
            return Err(AcquireTimeoutError::Closed);
        }
        let waited =
            self.waiters
                .pop_waiting(&self.free, self.cache(), &self.counters.peak, deadline);
        // An acquire: the panic of a waker it woke (moving slots out of
        // caches, passing on a notification) is dropped (see `unwind.rs`).
        crate::unwind::drop_caught();
        Ok(self.count::<OWNED>(waited?))
    }

    /// Why a `try_pop` found nothing: closed, or exhausted (counted).
    #[cold]
    pub(crate) fn failure(&self) -> TryAcquireError {
        if self.free.is_closed() {
            return TryAcquireError::Closed;
        }
        // Relaxed: a statistic.
        self.counters.failed.fetch_add(1, Ordering::Relaxed);
        TryAcquireError::Exhausted
    }

    /// Turns a taken index into a filled slot, running the factory if the
    /// slot is empty. `OWNED` as given to the `try_pop` that took it.
    #[inline]
    pub(crate) fn take<const OWNED: bool>(&self, index: u32) -> Held<T> {
        // SAFETY: `index` came from a successful pop (of the free list or of
        // this thread's cache), so this thread owns it, and the slot has no
        // other `Held`.
        let held = unsafe { self.slots.claim(index) };
        if held.is_empty() {
            // SAFETY: `held` was claimed from `self.slots` just above.
            let index = unsafe { held.into_index(&self.slots) };
            return self.fill::<OWNED>(index);
        }
        held
    }

    /// Fills the empty slot `index`, owned by this thread.
    #[cold]
    #[inline(never)]
    fn fill<const OWNED: bool>(&self, index: u32) -> Held<T> {
        // No user code while the slot is claimed: if the factory panics, the
        // slot goes back empty and the panic propagates.
        let value = match panic::catch_unwind(AssertUnwindSafe(|| (self.factory)())) {
            Ok(value) => value,
            Err(payload) => {
                let (settle, woke) = self.push::<OWNED>(index);
                // SAFETY: this is an acquire, so the handle is alive and
                // keeps the state alive whatever `finish` does.
                unsafe { Self::finish(NonNull::from(self), settle) };
                // The factory's panic goes on; a waker's is dropped.
                crate::unwind::discard(woke);
                panic::resume_unwind(payload);
            }
        };
        // SAFETY: this thread still owns `index` (it popped it and has not
        // pushed it), and the `Held` consumed by `take` is gone.
        let mut held = unsafe { self.slots.claim(index) };
        held.fill(value);
        self.note_filled(1);
        held
    }

    /// Gives a guard's slot back: resets the value, then pushes the slot.
    /// The caller must then [`finish`](Self::finish) with the `Settle`, once
    /// its reference to `self` is no longer used, and then resume the reset
    /// closure's panic if there is one (see [`Released`]).
    #[inline(always)]
    pub(crate) fn release<const OWNED: bool>(&self, held: Held<T>) -> Released {
        match &self.reset {
            None => {
                // SAFETY: a guard's `Held` is claimed from its own pool's
                // slots (`take`), and `self` is that pool.
                let index = unsafe { held.into_index(&self.slots) };
                self.push::<OWNED>(index)
            }
            Some(reset) => self.reset_and_release::<OWNED>(reset, held),
        }
    }

    /// `release` with a reset closure, kept out of line so that the common
    /// path inlines into the guard's `drop`.
    #[inline(never)]
    fn reset_and_release<const OWNED: bool>(
        &self,
        reset: &Reset<T>,
        mut held: Held<T>,
    ) -> Released {
        let panicked = self.reset_held(reset, &mut held);
        // SAFETY: as in `release`.
        let index = unsafe { held.into_index(&self.slots) };
        // The caller resumes a reset's panic after `finish`, unless its
        // thread already unwinds (a second panic would abort); a waker's
        // panic only if the reset did not panic.
        let (settle, woke) = self.push::<OWNED>(index);
        (settle, crate::unwind::first(panicked, woke))
    }

    /// Resets the value of a slot this thread holds before it is given
    /// back, or empties the slot: returns the reset closure's panic.
    ///
    /// No user code may run between an owned release's push and its
    /// `finish` (its tail is open then), so everything here runs before
    /// the push.
    pub(crate) fn reset_held(
        &self,
        reset: &Reset<T>,
        held: &mut Held<T>,
    ) -> Option<Box<dyn core::any::Any + Send>> {
        if std::thread::panicking() {
            // The holder's thread is unwinding: the value may be half
            // updated, and a reset that panicked now would panic during an
            // unwind, which aborts the process (even inside `catch_unwind`
            // before Rust 1.71). Drop the value instead, without the reset,
            // and return the slot empty (the factory refills it). A panic
            // in that drop aborts, as for any value dropped while unwinding.
            drop(held.take());
            self.note_emptied(1);
            return None;
        }
        let value = held.get_mut();
        match panic::catch_unwind(AssertUnwindSafe(|| reset(value))) {
            Ok(()) => None,
            Err(payload) => {
                // The value may be half reset: drop it and return the slot
                // empty (the factory refills it). A panic in that drop is
                // dropped too: the reset's goes on.
                let value = held.take();
                self.note_emptied(1);
                let _ = panic::catch_unwind(AssertUnwindSafe(move || drop(value)));
                Some(payload)
            }
        }
    }

    /// Takes a guard's value and gives its slot back empty; the caller
    /// finishes as after [`release`](Self::release), resuming the panic
    /// of a waker the release woke.
    pub(crate) fn detach<const OWNED: bool>(&self, mut held: Held<T>) -> (T, Released) {
        let value = held.take().expect("a guard's slot is always filled");
        self.note_emptied(1);
        // SAFETY: as in `release`.
        let index = unsafe { held.into_index(&self.slots) };
        (value, self.push::<OWNED>(index))
    }

    /// Links the held slot `index` above `below`: a [`Scope`]'s chain,
    /// built in the links its slots do not use while held.
    #[inline]
    pub(crate) fn link_held(&self, index: u32, below: u32) {
        self.free.set_link(index, below);
    }

    /// Gives back a [`Scope`]'s `n` slots, linked from `top` down to
    /// `last` and held by this thread: resets each value (or empties the
    /// slot, as a guard's release does), then returns all of them in one
    /// push. Returns the first reset panic, for the caller to resume.
    pub(crate) fn release_scope(
        &self,
        top: u32,
        last: u32,
        n: u32,
    ) -> Option<Box<dyn core::any::Any + Send>> {
        #[cfg(all(loom, tagpool_loom_scope_reset_late))]
        {
            // Loom-only fault injection: the batch goes back before the
            // values are reset, so the reset writes slots that another
            // thread may hold already. The scope model must report it.
            let mut below = Vec::new();
            let mut index = top;
            for _ in 0..n {
                below.push(index);
                index = self.free.link_of(index);
            }
            self.waiters.release_linked(&self.free, top, last, n);
            for index in below {
                // SAFETY: none: this is the planted bug loom must catch.
                let mut held = unsafe { self.slots.claim(index) };
                if let Some(reset) = &self.reset {
                    let _ = self.reset_held(reset, &mut held);
                }
            }
            return None;
        }
        let mut panicked = None;
        if let Some(reset) = &self.reset {
            let mut index = top;
            for _ in 0..n {
                // Read before the reset: the link is the chain's own.
                let below = self.free.link_of(index);
                // SAFETY: the scope popped `index` and has not pushed it;
                // the values it lent are no longer borrowed (the scope is
                // being dropped).
                let mut held = unsafe { self.slots.claim(index) };
                let reset_panic = self.reset_held(reset, &mut held);
                panicked = panicked.or(reset_panic);
                index = below;
            }
        }
        let woke = self.waiters.release_linked(&self.free, top, last, n);
        // A reset's panic first, else a waker's (see `unwind.rs`). The
        // thread-local is read only after a wake-up.
        let caught = if woke { crate::unwind::take() } else { None };
        crate::unwind::first(panicked, caught)
    }

    /// Gives back the slot `index`, owned by this thread: to this thread's
    /// cache if it has one, else to the free list. `OWNED` counts the end
    /// of an owned guard.
    ///
    /// Returns, with the `Settle`, the panic of a waker the release woke:
    /// caught, and for the caller to resume after `finish` (see
    /// `unwind.rs`).
    #[inline]
    pub(crate) fn push<const OWNED: bool>(&self, index: u32) -> Released {
        // The cache's inlined fast path, which a pool without caches fails
        // at its first check.
        match self
            .cache
            .release::<OWNED>(index, &self.free, &self.waiters)
        {
            Some(released) => {
                self.touch();
                released
            }
            None => self.push_slow::<OWNED>(index),
        }
    }

    /// [`push`](Self::push) past the cache's fast path; a pool without
    /// caches goes straight to the free list.
    #[cold]
    #[inline(never)]
    fn push_slow<const OWNED: bool>(&self, index: u32) -> Released {
        let mut caught = None;
        // While anyone waits, the slot goes straight to the free list (see
        // `Cache::release`).
        if let Some(cache) = self.cache().filter(|_| !self.waiters.waiting_hint()) {
            let (settle, woke) = cache.release_slow::<OWNED>(index, &self.free, &self.waiters);
            if let Some(settle) = settle {
                self.touch();
                return (settle, woke);
            }
            caught = woke;
        }
        let woke = self.push_free(index);
        self.touch();
        let settle = if OWNED { Settle::Shared } else { Settle::Done };
        // A waker woken by the push may have panicked: caught (see
        // `unwind.rs`), so the push completed; the caller resumes the panic
        // after `finish`. The thread-local is read only after a wake-up.
        if woke {
            caught = crate::unwind::first(caught, crate::unwind::take());
        }
        (settle, caught)
    }

    /// Counts `n` slots that received a value.
    #[inline]
    fn note_filled(&self, n: u64) {
        // Relaxed: a statistic.
        self.counters.filled.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts `n` slots whose value was taken out or dropped.
    #[inline]
    fn note_emptied(&self, n: u64) {
        // Relaxed: a statistic.
        self.counters.filled.fetch_sub(n, Ordering::Relaxed);
    }

    /// Pushes `index`, owned by this thread, to the free list and wakes a
    /// waiter if one waits (or hands it to the first, in a fair pool).
    /// Returns whether it woke anyone (see `WaitQueue::release`).
    #[inline]
    fn push_free(&self, index: u32) -> bool {
        self.waiters.release(&self.free, index)
    }

    /// Loom only: a read of the state's liveness marker, the last access of
    /// a release to the state before it settles (see [`Shared::alive`]).
    #[inline(always)]
    fn touch(&self) {
        #[cfg(all(loom, feature = "loom"))]
        self.alive.with(|_| ());
    }

    /// Ends an owned guard's release, after [`release`](Self::release) or
    /// [`detach`](Self::detach): ends the magazine's tail, or takes the
    /// guard's count from [`owned`](Self::owned) and frees the state if it
    /// was the last. A borrowed guard's `Settle::Done` does nothing.
    ///
    /// # Safety
    ///
    /// `ptr` is the state the guard kept alive, and the caller holds no
    /// reference into it that it uses again: the state may be freed (by
    /// this call, or by another thread as soon as this call's store lands).
    #[inline]
    pub(crate) unsafe fn finish(ptr: NonNull<Self>, settle: Settle) {
        match settle {
            Settle::Done => {}
            // SAFETY: the magazine is part of the state, alive until this
            // store (the caller's contract): `end_tail` touches only it.
            Settle::Tail(mag) => unsafe { Magazine::end_tail(mag) },
            // SAFETY: the caller's contract.
            Settle::Shared => unsafe { Self::settle(ptr, 1u64.wrapping_neg()) },
        }
    }

    /// Adds `delta` to [`owned`](Self::owned) and frees the state if that
    /// brings it to zero.
    ///
    /// # Safety
    ///
    /// As [`finish`](Self::finish); `delta` takes away the caller's share.
    unsafe fn settle(ptr: NonNull<Self>, delta: u64) {
        // SAFETY: alive until this RMW (the caller's contract). Only the
        // field is borrowed: after the RMW another thread may free the
        // state, which must not invalidate a reference still in use here.
        let owned = unsafe { &(*ptr.as_ptr()).owned };
        // AcqRel: Release publishes this thread's use of the state to the
        // thread that frees it; Acquire, in the thread that reaches zero,
        // takes every other thread's.
        let after = owned.fetch_add(delta, Ordering::AcqRel).wrapping_add(delta);
        if after == 0 {
            // SAFETY: zero means the handle is gone and no owned guard is
            // left (see Lifetime): no other thread can reach the state.
            unsafe { Self::destroy(ptr) };
        }
    }

    /// Frees the state: drops every value, the caches and the closures.
    ///
    /// # Safety
    ///
    /// No other thread uses the state, now or later.
    #[cold]
    unsafe fn destroy(ptr: NonNull<Self>) {
        // SAFETY: made by `Box::new` in `Builder::build` (the caller's
        // contract: this is its only release).
        let shared = unsafe { Box::from_raw(ptr.as_ptr()) };
        #[cfg(all(loom, feature = "loom"))]
        shared.alive.with_mut(|_| ());
        drop(shared);
    }

    /// The value storage (a guard's index is its offset in it).
    #[inline]
    pub(crate) fn slots(&self) -> &Slots<T> {
        &self.slots
    }

    /// The free list's head layout (for the docs' tag-width statements).
    pub(crate) fn layout(&self) -> Layout {
        self.free.layout()
    }
}

/// Takes the values of every idle slot and drops the pool: as object-pool's
/// `Pool` is iterated. Values held by [`OwnedPoolGuard`]s still out (the
/// pool may have been unwrapped from its `Arc` while they live) stay with
/// them, and are dropped when they are.
///
/// # Examples
///
/// ```
/// let pool = tagpool::Pool::builder(|| 0u8).capacity(4).lazy().values(vec![1, 2]).build()?;
/// let mut values: Vec<u8> = pool.into_iter().collect();
/// values.sort();
/// assert_eq!(values, [1, 2], "the slots never filled yield nothing");
/// # Ok::<(), tagpool::BuildError>(())
/// ```
impl<T> IntoIterator for Pool<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;

    fn into_iter(self) -> Self::IntoIter {
        self.drain_idle().into_iter()
    }
}

impl<T> fmt::Debug for Pool<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = self.shared();
        f.debug_struct("Pool")
            .field("capacity", &self.capacity())
            .field("tag_bits", &shared.layout().tag_bits())
            .field("thread_cache", &shared.cache().map_or(0, Cache::size))
            .field("light_barrier", &crate::barrier::is_light())
            .field("reset", &shared.reset.is_some())
            .field("fair", &shared.waiters.is_fair())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// Configures and builds a [`Pool`]; made by [`Pool::builder`].
///
/// # Examples
///
/// ```
/// let pool = tagpool::Pool::builder(|| String::with_capacity(32))
///     .capacity(100)
///     .lazy()
///     .reset(|s: &mut String| s.clear())
///     .build()
///     .expect("capacity is valid");
/// assert_eq!(pool.capacity(), 100);
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct Builder<T> {
    factory: Factory<T>,
    capacity: usize,
    initial: Option<usize>,
    values: Vec<T>,
    lazy: bool,
    reset: Option<Reset<T>>,
    thread_cache: ThreadCache,
    fair: bool,
}

/// The per-thread cache setting of a [`Builder`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ThreadCache {
    /// Sized from the capacity (see [`Builder::thread_cache`]).
    Auto,
    /// This many slots per thread; 0 is off.
    Size(usize),
}

/// The default per-thread cache size for `capacity`: an eighth of the
/// capacity, even, from 2 to [`MAX_THREAD_CACHE`]; off (0) for a pool of
/// one slot, which a cache could only hide from the other threads. The
/// share rule then shrinks it as threads arrive (see
/// [`Builder::thread_cache`] for both rules and the figures that chose them).
fn default_thread_cache(capacity: usize) -> usize {
    if capacity < 2 {
        return 0;
    }
    ((capacity / 8).min(MAX_THREAD_CACHE) & !1).max(2)
}

impl<T> Builder<T> {
    /// Sets the number of slots: from 1 to [`MAX_CAPACITY`]. Required.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder(|| 0u8).capacity(5).build().unwrap();
    /// assert_eq!(pool.capacity(), 5);
    /// ```
    pub fn capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity;
        self
    }

    /// Makes the pool elastic: it starts with storage for `initial` slots
    /// and grows, on demand, up to its [capacity](Builder::capacity), which
    /// stays the hard bound.
    ///
    /// A thread that finds no free slot (none in the free list nor in any
    /// thread's cache) allocates the next segment of storage, as large as
    /// all the slots the pool has so far: the pool doubles (`initial`,
    /// `2 * initial`, `4 * initial`, …), and the last segment stops at the
    /// capacity. Segments never move, so a guard's value keeps its address
    /// while the pool grows, and are kept until the pool is dropped
    /// ([`trim`](Pool::trim) gives back the values' own memory). Growing
    /// runs no user code: slots of a new segment are empty, and the factory
    /// fills each on its first acquire, like a [lazy](Builder::lazy) pool's.
    /// The first `initial` slots are filled at `build` unless the pool is
    /// lazy.
    ///
    /// One thread allocates each segment; another thread that finds the
    /// pool exhausted meanwhile waits for that segment instead of
    /// allocating one too (a `try_acquire` may so wait for another thread's
    /// allocation, never for a release). Once the pool has all its
    /// segments, exhaustion behaves as without this option.
    ///
    /// A growth that cannot allocate its segment never blocks the pool: if
    /// the allocation unwinds (under `-Z oom=panic`; by default Rust aborts
    /// on allocation failure), the growth is given back and a later
    /// acquire tries again. A segment whose size in bytes overflows an
    /// `isize` (possible only on 32-bit targets, for pools of hundreds of
    /// millions of slots) is refused before any thread claims it: the
    /// acquire that needs it panics with a message naming the segment, and
    /// the pool keeps serving its current slots.
    ///
    /// Without this option every slot's storage is allocated at `build`.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder(|| [0u8; 64])
    ///     .capacity(1 << 24)
    ///     .initial(1024)
    ///     .build()?;
    /// assert_eq!(pool.stats().allocated, 1024);
    /// let guards: Vec<_> = (0..1500).map(|_| pool.try_acquire().unwrap()).collect();
    /// assert_eq!(pool.stats().allocated, 2048, "grew once, doubling");
    /// # drop(guards);
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn initial(mut self, initial: usize) -> Self {
        self.initial = Some(initial);
        self
    }

    /// Starts the pool with `values`, which the caller already has: slot
    /// `i` holds `values[i]`, and the factory makes only the others (at
    /// `build`, or on first acquire in a [lazy](Builder::lazy) or
    /// [elastic](Builder::initial) pool). An elastic pool starts with at
    /// least as many slots as there are values.
    ///
    /// # Examples
    ///
    /// ```
    /// let buffers = vec![vec![1u8; 16], vec![2u8; 16]];
    /// let pool = tagpool::Pool::builder(|| vec![0u8; 16])
    ///     .capacity(4)
    ///     .lazy()
    ///     .values(buffers)
    ///     .build()?;
    /// assert_eq!(pool.stats().filled, 2);
    /// assert_eq!(pool.try_acquire().unwrap()[0], 1);
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn values(mut self, values: Vec<T>) -> Self {
        self.values = values;
        self
    }

    /// Makes each value on its slot's first acquire instead of at `build`.
    ///
    /// For expensive resources of which only a few may ever be needed. The
    /// factory then runs on the acquiring thread, outside any retry loop.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// static MADE: AtomicUsize = AtomicUsize::new(0);
    /// let pool = tagpool::Pool::builder(|| MADE.fetch_add(1, Ordering::Relaxed))
    ///     .capacity(10)
    ///     .lazy()
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(MADE.load(Ordering::Relaxed), 0);
    /// drop(pool.try_acquire());
    /// assert_eq!(MADE.load(Ordering::Relaxed), 1);
    /// ```
    pub fn lazy(mut self) -> Self {
        self.lazy = true;
        self
    }

    /// Runs `reset` on every value as its guard is dropped, on the dropping
    /// thread, exactly once, before the slot can be acquired again.
    ///
    /// A reused value never shows its past life, and an idle value holds no
    /// references it does not need. [`detach`](PoolGuard::detach) does not
    /// reset: the value leaves the pool as it is.
    ///
    /// If `reset` panics, the value is dropped, the slot returns empty (the
    /// factory refills it on its next acquire) and the panic propagates from
    /// the guard's drop.
    ///
    /// A guard dropped while its thread is already unwinding from a panic
    /// (its holder failed) does not run `reset`: its value, perhaps left
    /// half updated, is dropped and the slot returns empty, to be refilled
    /// by the factory. So a reset never panics during an unwind, which
    /// would abort the process.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder(Vec::<u32>::new)
    ///     .capacity(1)
    ///     .reset(Vec::clear)
    ///     .build()
    ///     .unwrap();
    /// pool.try_acquire().unwrap().push(9);
    /// assert!(pool.try_acquire().unwrap().is_empty());
    /// ```
    pub fn reset<R>(mut self, reset: R) -> Self
    where
        R: Fn(&mut T) + Send + Sync + 'static,
    {
        self.reset = Some(Box::new(reset));
        self
    }

    /// Switches the per-thread caches on (the default) or off.
    ///
    /// With caches on, each thread that uses the pool keeps a small stack of
    /// free slots of its own: most acquires and releases then touch only
    /// memory that the thread already owns, with no locked instruction on
    /// Linux, and exchange slots with the shared free list in batches. The
    /// capacity stays exact: a thread that finds no free slot revokes other
    /// threads' caches (live, parked or exited) and takes their slots, and a
    /// waiting thread makes every cache flush. See
    /// [Per-thread caches](crate#per-thread-caches).
    ///
    /// # The default rule
    ///
    /// - **Size from the capacity:** an eighth of the capacity, rounded down
    ///   to an even number, from 2 to 64 slots per thread. A pool of one
    ///   slot gets no caches: a cache could only hide that slot from the
    ///   other threads.
    /// - **Shrunk by the thread count:** once `n` threads have used the
    ///   pool, each thread's cache keeps at most its even share of the
    ///   capacity, `capacity / n`, but never fewer than 2 slots. Caches then
    ///   hold about the capacity together however many threads arrive, and
    ///   a thread that finds no free slot rarely has to revoke. (The count
    ///   is of threads that used the pool at once: an exited thread's cache
    ///   goes to the next new thread.)
    ///
    /// A cache of 2 is enough for the commonest small-pool pattern, a
    /// release followed by an acquire on the same thread, which it turns
    /// into plain loads and stores; refills and flushes then move one slot.
    /// Measured with `benches/src/bin/small.rs` (ns per acquire + release,
    /// median of 9 rounds; `ringC/T`: `T` threads share `C` slots, each
    /// keeping `C / T` and replacing the oldest; `mtC/T`: `T` threads
    /// acquire, waiting if need be, and release), on a 16-core Xeon:
    ///
    /// | row | caches off | 2 per thread | 4 | 8 |
    /// |---|---:|---:|---:|---:|
    /// | `ring16/2` | 314 | 9.0 | 5.3 | 7.1 |
    /// | `ring64/16` | 844 | 0.9 | 1.2 | 1.3 |
    /// | `mt2/2` | 347 | 4.2 | 4.1 | 4.1 |
    /// | `mt4/8` | 751 | 16.5 | 25.8 | 28.5 |
    /// | `mt16/16` | 1,182 | 0.6 | 0.6 | 0.7 |
    /// | `mt16/32` | 493 | 2.6 | 22.7 | 39.6 |
    /// | `mt64/128` | 791 | 0.8 | 0.8 | 1.4 |
    /// | `mt1/2` | 83 | 221 | 204 | 211 |
    ///
    /// Without caches every operation takes the shared free list's line,
    /// and on many cores that costs hundreds of nanoseconds; more slots per
    /// thread than its share (the last columns of `mt16/32`) make threads
    /// revoke each other's caches. A pool of one slot is the exception,
    /// hence no caches there. One pattern loses: a producer that acquires
    /// and a consumer that releases on a pool so small that the producer
    /// waits for nearly every slot (capacity 4: about 2 µs per value
    /// against 1 µs with caches off), because each wait first revokes the
    /// consumer's cache; from 16 slots up the two are even. Switch caches
    /// off for that pattern, or where slots are mostly acquired on one
    /// thread and released on another with few slots in flight;
    /// [`thread_cache_size`](Builder::thread_cache_size) sets a size of
    /// your own, which the thread count does not shrink.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder(|| 0u8)
    ///     .capacity(1024)
    ///     .thread_cache(false)
    ///     .build()
    ///     .unwrap();
    /// drop(pool.try_acquire());
    /// assert_eq!(pool.stats().cached, 0, "the slot went straight back");
    /// ```
    pub fn thread_cache(mut self, enabled: bool) -> Self {
        self.thread_cache = if enabled {
            ThreadCache::Auto
        } else {
            ThreadCache::Size(0)
        };
        self
    }

    /// Sets how many free slots each thread's cache holds at most; 0
    /// switches caches off. Refills and flushes move half of that at a time.
    /// Unlike the default rule, a size set here is kept however many
    /// threads use the pool.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder(|| 0u8)
    ///     .capacity(16)
    ///     .thread_cache_size(4)
    ///     .build()
    ///     .unwrap();
    /// drop(pool.try_acquire());
    /// assert_eq!(pool.stats().cached, 2, "a refill took 2, one came back");
    /// # assert_eq!(pool.stats().available, 16);
    /// ```
    pub fn thread_cache_size(mut self, size: usize) -> Self {
        self.thread_cache = ThreadCache::Size(size);
        self
    }

    /// Serves waiters strictly in arrival order: a release that finds
    /// threads or tasks waiting hands its slot to the one that has waited
    /// longest, and no acquire takes a slot while anyone waits (no
    /// barging).
    ///
    /// The default pool lets a newly arriving acquire take a released slot
    /// ahead of a woken waiter (barging), which keeps slots moving. It
    /// bounds how long a blocked thread can be overtaken: one that has
    /// waited 100 µs queues, and the next release hands it the slot, so it
    /// waits at most 100 µs plus one release per thread queued before it.
    /// That costs nothing until waiters wait that long, and when they all
    /// do (slots held tens of microseconds, several threads deep) it costs
    /// what a fair pool does: a thread wake-up per hand-off. Tasks that
    /// wait queue for a hand-off at once in the default pool too.
    ///
    /// A fair pool serves every waiter after exactly the waiters queued
    /// before it, threads and tasks. Use it for async tasks on a pool that
    /// runs dry, where it is both the faster and the steadier choice, and
    /// for threads when strict arrival order matters more than throughput:
    /// handing every slot to a parked thread costs a wake-up each (see
    /// [Waiting](crate#waiting) for measurements).
    ///
    /// A fair pool has no per-thread caches (a cache is a reserve its thread
    /// would take from ahead of the queue), so while nobody waits each
    /// acquire and release is one compare-exchange on the shared free list;
    /// a release that finds waiters takes the queue's lock.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder(|| 0u32).capacity(1).fair().build()?;
    /// std::thread::scope(|s| {
    ///     let held = pool.acquire().unwrap();
    ///     let waiter = s.spawn(|| pool.acquire().unwrap()); // keeps the guard
    ///     while pool.stats().waiting_threads == 0 {
    ///         std::thread::yield_now();
    ///     }
    ///     drop(held); // handed straight to the waiter, so:
    ///     assert!(pool.try_acquire().is_err(), "no barging");
    ///     assert_eq!(*waiter.join().unwrap(), 0);
    /// });
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn fair(mut self) -> Self {
        self.fair = true;
        self
    }

    /// Builds the pool, filling every slot now unless [`lazy`](Builder::lazy)
    /// was asked for.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroCapacity`] if the capacity is 0 or was not set;
    /// [`BuildError::CapacityTooLarge`] if it is above [`MAX_CAPACITY`];
    /// [`BuildError::ThreadCacheTooLarge`] if
    /// [`thread_cache_size`](Builder::thread_cache_size) is above 64;
    /// [`BuildError::FairWithThreadCache`] if a [fair](Builder::fair) pool
    /// was given a per-thread cache size above 0;
    /// [`BuildError::ZeroInitial`] and [`BuildError::InitialAboveCapacity`]
    /// if [`initial`](Builder::initial) is 0 or above the capacity;
    /// [`BuildError::TooManyValues`] if [`values`](Builder::values) gave
    /// more values than the capacity.
    ///
    /// # Panics
    ///
    /// If the factory panics during an eager fill; the values made so far are
    /// dropped first.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{BuildError, Pool, MAX_CAPACITY};
    ///
    /// let err = Pool::builder(|| 0u8).capacity(MAX_CAPACITY + 1).build().unwrap_err();
    /// assert!(matches!(err, BuildError::CapacityTooLarge { .. }));
    /// ```
    pub fn build(self) -> Result<Pool<T>, BuildError> {
        let capacity = self.capacity;
        if capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        if capacity > MAX_CAPACITY {
            return Err(BuildError::CapacityTooLarge {
                requested: capacity,
                max: MAX_CAPACITY,
            });
        }
        let share = self.thread_cache == ThreadCache::Auto;
        let cache_size = match self.thread_cache {
            ThreadCache::Auto if self.fair => 0,
            ThreadCache::Size(size) if self.fair && size > 0 => {
                return Err(BuildError::FairWithThreadCache)
            }
            ThreadCache::Auto => default_thread_cache(capacity),
            ThreadCache::Size(size) if size > MAX_THREAD_CACHE => {
                return Err(BuildError::ThreadCacheTooLarge {
                    requested: size,
                    max: MAX_THREAD_CACHE,
                })
            }
            ThreadCache::Size(size) => size,
        };
        let first = match self.initial {
            None => capacity,
            Some(0) => return Err(BuildError::ZeroInitial),
            Some(initial) if initial > capacity => {
                return Err(BuildError::InitialAboveCapacity { initial, capacity })
            }
            Some(initial) => initial,
        };
        if self.values.len() > capacity {
            return Err(BuildError::TooManyValues {
                values: self.values.len(),
                capacity,
            });
        }
        let first = first.max(self.values.len());
        let geometry = Geometry::new(first as u32, capacity as u32);
        let filled = if self.lazy { self.values.len() } else { first };
        let (lazy, factory) = (self.lazy, &*self.factory);
        let mut values = self.values.into_iter();
        let slots = Slots::new(geometry, |_| {
            values
                .next()
                .or_else(|| if lazy { None } else { Some(factory()) })
        });
        let shared = Box::new(Shared {
            free: FreeList::new(geometry),
            cache: if cache_size > 0 {
                Cache::new(cache_size, capacity, share)
            } else {
                Cache::disabled()
            },
            slots,
            factory: self.factory,
            reset: self.reset,
            waiters: WaitQueue::new(self.fair),
            counters: CachePadded::new(Counters {
                peak: AtomicU32::new(0),
                failed: AtomicU64::new(0),
                filled: AtomicU64::new(filled as u64),
            }),
            owned: CachePadded::new(AtomicU64::new(HANDLE)),
            #[cfg(all(loom, feature = "loom"))]
            alive: crate::sync::UnsafeCell::new(()),
        });
        Ok(Pool {
            shared: CachePadded::new(NonNull::from(Box::leak(shared))),
            _owns: PhantomData,
        })
    }
}

impl<T> fmt::Debug for Builder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("capacity", &self.capacity)
            .field("initial", &self.initial)
            .field("values", &self.values.len())
            .field("lazy", &self.lazy)
            .field("reset", &self.reset.is_some())
            .field("thread_cache", &self.thread_cache)
            .field("fair", &self.fair)
            .finish_non_exhaustive()
    }
}

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
    /// `in_use + available == capacity`.
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
    /// detached, [trimmed](Pool::trim) or dropped after a panic. Exact
    /// whenever no other thread is acquiring, releasing or trimming.
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
    /// peak.
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
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::segment::fault;

    /// Runs `body` on its own thread and fails if it takes more than a few
    /// seconds: a growth claim left set makes acquires spin forever.
    fn with_watchdog(body: impl FnOnce() + Send + 'static) {
        let (done, finished) = mpsc::channel();
        let worker = std::thread::spawn(move || {
            body();
            let _ = done.send(());
        });
        match finished.recv_timeout(Duration::from_secs(5)) {
            Ok(()) => worker.join().unwrap(),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                panic::resume_unwind(worker.join().unwrap_err());
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("an acquire still waits for a growth that unwound")
            }
        }
    }

    #[test]
    fn a_growth_whose_allocation_unwinds_gives_its_claim_back() {
        for cache in [false, true] {
            with_watchdog(move || {
                let pool = Pool::builder(|| 7u32)
                    .capacity(1024)
                    .initial(1)
                    .thread_cache(cache)
                    .build()
                    .unwrap();
                let first = pool.try_acquire().unwrap();
                fault::fail_next_allocation();
                let failed = panic::catch_unwind(AssertUnwindSafe(|| pool.try_acquire()));
                assert!(failed.is_err(), "the injected fault unwinds the acquire");
                assert_eq!(pool.stats().allocated, 1, "nothing was published");
                // Another thread, then this one, grow the same segment again.
                std::thread::scope(|s| {
                    s.spawn(|| assert_eq!(*pool.try_acquire().unwrap(), 7));
                });
                let second = pool.try_acquire().unwrap();
                assert_eq!((*first, *second), (7, 7));
                assert!(pool.stats().allocated >= 2);
            });
        }
    }
}
