//! [`Pool`], its [`Builder`], the acquire family and [`Stats`].

mod builder;
mod fill;
mod future;
mod guard;
mod idle;
mod into_iter;
mod resize;
mod scope;
mod share;

pub use self::builder::Builder;
use self::fill::factory_error;
pub(crate) use self::future::{advance, finish, Step};
pub use self::future::{Acquire, AcquireOwned};
pub use self::guard::{OwnedPoolGuard, PoolGuard};
pub use self::into_iter::IntoIter;
pub use self::scope::Scope;
pub use self::share::SharedPoolGuard;

use core::convert::Infallible;
use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::panic::{RefUnwindSafe, UnwindSafe};
use std::task::{Context, Poll};
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::engine::barrier;
use crate::engine::free_list::MAX_INDEX_BITS;
use crate::engine::shared::{untimed, Failure, Shared};
use crate::engine::wait::AsyncWait;
use crate::error::{AcquireError, AcquireTimeoutError, TryAcquireError};
use crate::stats::Stats;
use crate::sync::Arc;

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
/// `E` is the error type of a factory that can fail ([`Pool::try_builder`]),
/// which the acquires return; it is [`Infallible`] for every other pool.
///
/// # Invariants
///
/// - Each slot index is owned by exactly one party at a time: the free list,
///   or one guard (or one thread between a pop and the guard it builds).
///   Ownership moves only through the free list's head CAS, whose
///   Acquire/Release pairs publish the value to its next owner.
/// - A slot outside the free list holds a value whenever a guard for it
///   exists; a slot on the free list may be empty and is refilled by the
///   factory when it is next acquired. A pool without a factory
///   ([`Pool::from_values`]) keeps no empty slot on the free list: it
///   retires them until an [`attach`](Pool::attach).
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
pub struct Pool<T, E = Infallible> {
    /// The pool's state, in its own allocation: it outlives this handle
    /// while [`OwnedPoolGuard`]s are alive (see [`Shared`]). Padded so that
    /// the pointer, read by every acquire, never shares a line with the
    /// counts of an [`Arc`] around the pool.
    shared: CachePadded<NonNull<Shared<T>>>,
    /// Owns a `Shared<T>` (and so `T`s), for drop check and auto traits.
    _owns: PhantomData<Shared<T>>,
    /// The error type of the factory ([`Pool::try_builder`]), which the
    /// acquires return: never stored in the pool (an error goes from the
    /// factory straight to the caller of the acquire that ran it, on that
    /// thread), hence `fn() -> E`, which owns no `E` and leaves the auto
    /// traits to `T`.
    _error: PhantomData<fn() -> E>,
}

// SAFETY: a `Pool<T, E>` owns its `T`s; sending the pool sends them, and they
// are dropped on whatever thread drops the pool, so `T: Send` is required and
// enough. The closures are `Send + Sync` by construction, and the atomics and
// the event are `Send`. The pool holds no `E`: a factory's error is made on
// the thread of the acquire that ran the factory and returned to that
// acquire's caller (the engine boxes it only on the way), so `E` needs
// nothing.
unsafe impl<T: Send, E> Send for Pool<T, E> {}

// SAFETY: through `&Pool<T>` a thread can take a value out of the pool (by a
// guard or `detach`), use it exclusively and give it back: values *move*
// between threads but are never shared by two (each slot has one owner at a
// time, see the invariants), so `T: Send` suffices and `T: Sync` is not
// needed. The factory and reset closures, called from any thread, are
// `Send + Sync`. No `E` is shared: each error stays on the thread whose
// acquire ran the factory, and goes to that acquire's caller.
unsafe impl<T: Send, E> Sync for Pool<T, E> {}

// Unwind safety (not `unsafe`: a promise that a panic caught with
// `catch_unwind` leaves nothing broken behind for the code after it), as
// crossbeam's `ArrayQueue` and std's `Mutex` make it. The pool's own state
// stays consistent whatever panics and wherever: it runs no user code
// inside a CAS loop or under a lock, catches the panics of the closures
// it calls (factory, reset, wakers) and restores every step they
// interrupt with a drop guard before letting them go on (crate docs,
// "Panics in user code"). So a `&Pool` shared with code that panicked
// is as usable as before. The values: through `&Pool` they move in and
// out (`attach`, `detach`, `drain_idle`) and are lent to one holder at a
// time, never shared, so `T: UnwindSafe` is the bound, as `Sync` asks
// `T: Send` only. A holder that unwinds cannot hand a half-updated value
// to the next one behind a reset closure: its guard's drop then drops
// the value and empties the slot instead of resetting it, the pool's
// form of `Mutex`'s poisoning. Without a reset closure, every value
// comes back as its last holder left it, unwind or not, and the pool
// promises nothing more about a reacquired value. The boxed closures
// (`dyn Fn`) are neither `UnwindSafe` nor `RefUnwindSafe`, and would deny
// both traits to every pool: the pool calls them only as above, and state
// they capture and change through shared references (a counter, a
// `Mutex`) is theirs to keep consistent if they panic, as the pool cannot
// see it.
impl<T: UnwindSafe> UnwindSafe for Pool<T> {}
impl<T: UnwindSafe> RefUnwindSafe for Pool<T> {}

impl<T> Pool<T> {
    /// Creates a pool of `capacity` values, all made now by `factory`.
    ///
    /// The factory also refills slots whose value was
    /// [detached](PoolGuard::detach) or dropped after a reset panicked, once
    /// an acquire takes such a slot while no other value is idle (idle
    /// values are served first, see [`Pool::try_builder`]). Use
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
        Builder::new(Some(Box::new(move || Ok(factory()))))
    }

    /// A pool of `values`, which the caller already has, and no factory:
    /// its capacity is the number of values.
    ///
    /// For values that cannot be made on demand (as deadpool's unmanaged
    /// pool). With nothing to refill a slot that loses its value, such a
    /// slot is [retired](Stats::retired): a [detached](PoolGuard::detach)
    /// value, one [discarded](Builder::discard_if) on release, one dropped
    /// because its reset panicked (or its guard was dropped during an
    /// unwind), [trimmed](Pool::trim) or refused by
    /// [`retain_idle`](Pool::retain_idle) leaves its slot empty and out of
    /// service, and the pool serves one value fewer: `Stats::capacity`
    /// stays, `Stats::retired` counts them. [`attach`](Pool::attach) gives
    /// a retired slot a value and puts it back in service. Use
    /// [`builder_from_values`](Pool::builder_from_values) for other
    /// settings.
    ///
    /// # Panics
    ///
    /// If `values` is empty or holds more than [`MAX_CAPACITY`] values.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{Pool, PoolGuard};
    ///
    /// let pool = Pool::from_values(vec![String::from("a"), String::from("b")]);
    /// assert_eq!(pool.capacity(), 2);
    /// let a = PoolGuard::detach(pool.try_acquire().unwrap()); // leaves the pool
    /// let stats = pool.stats();
    /// assert_eq!((stats.retired, stats.available, stats.in_use), (1, 1, 0));
    /// let b = pool.try_acquire().unwrap();
    /// assert!(pool.try_acquire().is_err(), "one value left to serve");
    /// drop(b);
    /// pool.attach(a).unwrap(); // back in service
    /// assert_eq!(pool.stats().available, 2);
    /// ```
    pub fn from_values(values: Vec<T>) -> Self {
        match Self::builder_from_values(values).build() {
            Ok(pool) => pool,
            Err(err) => panic!("tagpool::Pool::from_values: {err}"),
        }
    }

    /// Starts building a pool of `values` and no factory (see
    /// [`from_values`](Pool::from_values)): its capacity is the number of
    /// values, and it cannot be [elastic](Builder::initial).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder_from_values(vec![vec![0u8; 16]; 3])
    ///     .reset(Vec::clear)
    ///     .discard_if(|buf: &Vec<u8>| buf.capacity() > 1024)
    ///     .build()?;
    /// pool.try_acquire().unwrap().reserve(4096);
    /// let stats = pool.stats();
    /// assert_eq!((stats.discarded, stats.retired, stats.available), (1, 1, 2));
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn builder_from_values(values: Vec<T>) -> Builder<T> {
        let capacity = values.len();
        Builder::new(None).capacity(capacity).values(values)
    }
}

impl<T, E> Pool<T, E> {
    /// Starts building a pool whose values `factory` makes, or fails to:
    /// for resources that cannot always be made (a connection to a server
    /// that is down).
    ///
    /// The factory's error type `E` becomes the pool's second type
    /// parameter, `Pool<T, E>`, and the factory's error reaches the caller
    /// of the acquire that needed a value, as is, in the `Factory` variant
    /// of its error ([`TryAcquireError::Factory`], [`AcquireError::Factory`],
    /// [`AcquireTimeoutError::Factory`]; [`BuildError::Factory`](crate::BuildError::Factory)
    /// from an eager `build`), as deadpool's `PoolError<E>` and bb8's
    /// `RunError<E>` carry theirs. `E` needs no bound but `'static`; those
    /// errors implement [`Error`](std::error::Error) (with the factory's
    /// error as their `source`) where `E` does, and `Clone`, `PartialEq`
    /// and the like where `E` does.
    ///
    /// The slot taken goes back to the pool, still empty, and a waiter it
    /// wakes is not left waiting; the next acquire that takes the slot runs
    /// the factory again (a [lazy](Builder::lazy) pool retries on every
    /// acquire of an empty slot), so the capacity stays.
    ///
    /// Idle values come first, in every pool with a factory (this one or
    /// [`Pool::builder`]'s), as deadpool and bb8 serve idle objects before
    /// they create new ones: an acquire that takes an empty slot while a
    /// value is idle anywhere in the pool (on the free list or in any
    /// thread's cache) is served that value, and the factory runs only when
    /// none is idle. So a connection pool whose server refuses new
    /// connections keeps serving the connections it has; its acquires fail
    /// with the factory's error only once every value is held. The search
    /// runs only when the pool's counts say a value may be idle, and looks
    /// at the top 64 idle slots (after moving the caches' slots on top of
    /// them, if the list alone has none): it puts the values it passes
    /// above the empty slots, and an empty slot lands above an idle value
    /// only when an acquire found nothing idle. It is exact when nothing
    /// else runs meanwhile: a value another thread is releasing or filling
    /// at that moment, or one in a cache whose owner is inside an
    /// operation, may be missed, and a closed pool does not search.
    ///
    /// A pool from [`Pool::builder`] pays nothing for the error type: its
    /// `E` is [`Infallible`], so the `Factory` variants cannot be made, and
    /// its errors are `Copy` and have no drop glue.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::io;
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// use tagpool::{AcquireError, Pool};
    ///
    /// let up = Arc::new(AtomicBool::new(false));
    /// let server = Arc::clone(&up);
    /// let pool: Pool<String, io::Error> = Pool::try_builder(move || {
    ///     if server.load(Ordering::Relaxed) {
    ///         Ok(String::from("connection"))
    ///     } else {
    ///         Err(io::Error::new(io::ErrorKind::ConnectionRefused, "refused"))
    ///     }
    /// })
    /// .capacity(4)
    /// .lazy()
    /// .build()?;
    /// match pool.acquire() {
    ///     Err(AcquireError::Factory(err)) => {
    ///         assert_eq!(err.kind(), io::ErrorKind::ConnectionRefused)
    ///     }
    ///     other => panic!("{:?}", other.map(|c| c.len())),
    /// }
    /// up.store(true, Ordering::Relaxed); // the server is back: retried
    /// assert_eq!(*pool.acquire()?, "connection");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_builder<F>(factory: F) -> Builder<T, E>
    where
        F: Fn() -> Result<T, E> + Send + Sync + 'static,
        E: 'static,
    {
        Builder::new(Some(Box::new(move || {
            factory().map_err(|error| Box::new(error) as Failure)
        })))
    }

    /// The number of slots in service: the capacity the pool was built
    /// with, until [`set_capacity`](Pool::set_capacity) moves it.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(tagpool::Pool::new(3, || 0u8).capacity(), 3);
    /// ```
    #[inline]
    pub fn capacity(&self) -> usize {
        self.shared().capacity()
    }

    /// Takes a free slot, or fails at once if every slot is held or the
    /// pool is closed.
    ///
    /// Never blocks: it never waits for a slot, nor for another thread's
    /// cache operation (see [Progress](crate#progress)). With per-thread caches the common
    /// case is plain loads and stores on the calling thread's cache;
    /// without, one compare-exchange. A slot never filled (lazy pools) or
    /// emptied by [`detach`](PoolGuard::detach) is filled by the factory
    /// first, on this thread.
    ///
    /// # Errors
    ///
    /// [`TryAcquireError::Exhausted`] if every slot is held, or, while
    /// another thread's operation on the caches is in flight, without the
    /// slots that operation has in hand for that moment (see
    /// [Progress](crate#progress)) (counted in
    /// [`Stats::failed_acquires`]); [`TryAcquireError::Closed`] once the
    /// pool is [closed](Pool::close); [`TryAcquireError::Factory`] if the
    /// slot was empty and the factory of a [`try_builder`](Pool::try_builder)
    /// pool failed (never for `E = Infallible`).
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
    pub fn try_acquire(&self) -> Result<PoolGuard<'_, T>, TryAcquireError<E>>
    where
        E: 'static,
    {
        let shared = self.shared();
        match shared.try_pop::<false>() {
            Some(taken) => match shared.take_filled(taken) {
                Some(held) => Ok(PoolGuard::new(shared, held)),
                None => match self.try_fill(taken) {
                    Ok(held) => Ok(PoolGuard::new(shared, held)),
                    Err(err) => Err(TryAcquireError::Factory(err)),
                },
            },
            None => Err(shared.failure().widen()),
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
    /// a slot is free, or while this thread waits; [`AcquireError::Factory`]
    /// as [`try_acquire`](Pool::try_acquire).
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
    pub fn acquire(&self) -> Result<PoolGuard<'_, T>, AcquireError<E>>
    where
        E: 'static,
    {
        let shared = self.shared();
        let taken = shared
            .pop_waiting::<false>(None)
            .map_err(|err| untimed(err).widen())?;
        let held = shared
            .take::<false>(taken)
            .map_err(|failure| AcquireError::Factory(factory_error(failure)))?;
        Ok(PoolGuard::new(shared, held))
    }

    /// Takes a free slot, blocking the thread at most `timeout` for one.
    ///
    /// A timeout too large to represent as an
    /// [`Instant`](std::time::Instant) waits without a bound. Like
    /// [`acquire`](Pool::acquire), not for async tasks: there,
    /// wrap [`acquire_async`](Pool::acquire_async) in the runtime's timeout
    /// (see [Async](crate#async)).
    ///
    /// # Errors
    ///
    /// [`AcquireTimeoutError::Timeout`] if no slot came free in time
    /// (counted in [`Stats::timeouts`]); [`AcquireTimeoutError::Closed`] if
    /// the pool is [closed](Pool::close) first; `Factory` as
    /// [`try_acquire`](Pool::try_acquire).
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
    ) -> Result<PoolGuard<'_, T>, AcquireTimeoutError<E>>
    where
        E: 'static,
    {
        let shared = self.shared();
        let taken = shared
            .pop_timeout::<false>(timeout)
            .map_err(AcquireTimeoutError::widen)?;
        let held = shared
            .take::<false>(taken)
            .map_err(|failure| AcquireTimeoutError::Factory(factory_error(failure)))?;
        Ok(PoolGuard::new(shared, held))
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
    /// a slot is free, or while the task waits; `Factory` as
    /// [`try_acquire`](Pool::try_acquire).
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
    pub fn acquire_async(&self) -> Acquire<'_, T, E>
    where
        E: 'static,
    {
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
    pub fn acquire_owned_async(self: &Arc<Self>) -> AcquireOwned<T, E>
    where
        E: 'static,
    {
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
        self.shared().close()
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
    pub fn scope(&self) -> Scope<'_, T, E>
    where
        E: 'static,
    {
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
        self.shared().is_closed()
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
    pub fn try_acquire_owned(self: &Arc<Self>) -> Result<OwnedPoolGuard<T>, TryAcquireError<E>>
    where
        E: 'static,
    {
        let shared = self.shared();
        match shared.try_pop::<true>() {
            Some(taken) => self
                .owned_guard(taken)
                .map_err(|failure| TryAcquireError::Factory(factory_error(failure))),
            None => Err(shared.failure().widen()),
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
    pub fn acquire_owned(self: &Arc<Self>) -> Result<OwnedPoolGuard<T>, AcquireError<E>>
    where
        E: 'static,
    {
        let taken = self
            .shared()
            .pop_waiting::<true>(None)
            .map_err(|err| untimed(err).widen())?;
        self.owned_guard(taken)
            .map_err(|failure| AcquireError::Factory(factory_error(failure)))
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
    ) -> Result<OwnedPoolGuard<T>, AcquireTimeoutError<E>>
    where
        E: 'static,
    {
        let taken = self
            .shared()
            .pop_timeout::<true>(timeout)
            .map_err(AcquireTimeoutError::widen)?;
        self.owned_guard(taken)
            .map_err(|failure| AcquireTimeoutError::Factory(factory_error(failure)))
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

    /// Polls an async acquire: see
    /// [`Shared::poll_acquire`](crate::engine::shared::Shared::poll_acquire).
    pub(crate) fn poll_acquire<const OWNED: bool>(
        &self,
        wait: &mut AsyncWait,
        first: bool,
        cx: &mut Context<'_>,
    ) -> Poll<Result<u32, AcquireError>> {
        self.shared().poll_acquire::<OWNED>(wait, first, cx)
    }

    /// Ends a dropped async acquire's wait: see
    /// [`Shared::cancel_acquire`](crate::engine::shared::Shared::cancel_acquire).
    pub(crate) fn cancel_acquire(&self, wait: &mut AsyncWait) {
        self.shared().cancel_acquire(wait);
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

impl<T, E> Drop for Pool<T, E> {
    fn drop(&mut self) {
        // SAFETY: `shared` is the state this handle kept alive, and no
        // acquire can run from here on (acquiring needs the handle).
        unsafe { Shared::drop_handle(*self.shared) };
    }
}

/// A pool of the iterator's values and no factory, as
/// [`Pool::from_values`].
///
/// # Panics
///
/// If the iterator yields no value or more than [`MAX_CAPACITY`].
///
/// # Examples
///
/// ```
/// let pool: tagpool::Pool<u32> = (1..=3).collect();
/// assert_eq!(pool.capacity(), 3);
/// assert_eq!(pool.stats().filled, 3);
/// ```
impl<T> FromIterator<T> for Pool<T> {
    fn from_iter<I: IntoIterator<Item = T>>(values: I) -> Self {
        Self::from_values(values.into_iter().collect())
    }
}

impl<T, E> fmt::Debug for Pool<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = self.shared();
        f.debug_struct("Pool")
            .field("capacity", &self.capacity())
            .field("tag_bits", &shared.layout().tag_bits())
            .field("thread_cache", &shared.thread_cache_size())
            .field("light_barrier", &barrier::is_light())
            .field("factory", &shared.has_factory())
            .field("reset", &shared.has_reset())
            .field("discard_if", &shared.has_discard())
            .field("fair", &shared.is_fair())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::panic::{self, AssertUnwindSafe};
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;
    use crate::engine::segment::fault;

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
