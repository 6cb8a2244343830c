//! [`Builder`]: a pool's settings, checked and turned into its state.

use core::convert::Infallible;
use core::fmt;
use core::marker::PhantomData;
use core::ptr::NonNull;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use super::{factory_error, Pool, MAX_CAPACITY};
use crate::engine::cache::{Cache, MAX_THREAD_CACHE};
use crate::engine::segment::Geometry;
use crate::engine::shared::{Discard, Factory, Recycle, Reset, Shared};
use crate::engine::slot::Slots;
use crate::error::BuildError;

/// Configures and builds a [`Pool`]; made by [`Pool::builder`] (a
/// `Builder<T>`), or by [`Pool::try_builder`] for a fallible factory (a
/// `Builder<T, E>`, which builds a `Pool<T, E>`).
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
pub struct Builder<T, E = Infallible> {
    /// `None` for a pool of given values ([`Pool::builder_from_values`]).
    factory: Option<Factory<T>>,
    capacity: usize,
    /// The most slots [`Pool::set_capacity`] may put in service; `None`
    /// is the capacity.
    max_capacity: Option<usize>,
    initial: Option<usize>,
    values: Vec<T>,
    lazy: bool,
    reset: Option<Reset<T>>,
    discard: Option<Discard<T>>,
    thread_cache: ThreadCache,
    fair: bool,
    /// Hold tracking's limit, if on.
    hold_limit: Option<Duration>,
    /// The floor of filled idle values.
    min_idle: usize,
    /// The factory's error type (see `Pool`'s `_error`).
    _error: PhantomData<fn() -> E>,
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

impl<T, E> Builder<T, E> {
    /// A builder with no settings yet, for [`Pool::builder`].
    pub(super) fn new(factory: Option<Factory<T>>) -> Self {
        Builder {
            factory,
            capacity: 0,
            max_capacity: None,
            initial: None,
            values: Vec::new(),
            lazy: false,
            reset: None,
            discard: None,
            thread_cache: ThreadCache::Auto,
            fair: false,
            hold_limit: None,
            min_idle: 0,
            _error: PhantomData,
        }
    }

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

    /// Lets [`Pool::set_capacity`] raise the pool's capacity up to `max`
    /// later: the capacity set by [`capacity`](Builder::capacity) is where
    /// the bound starts, and the storage grows past it, segment by segment
    /// as an [elastic](Builder::initial) pool's does, only once the bound
    /// is raised and the slots are needed. Without this option the maximum
    /// is the capacity: `set_capacity` can lower the bound and raise it
    /// back, no further.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder(|| vec![0u8; 1024])
    ///     .capacity(16)
    ///     .max_capacity(256)
    ///     .build()?;
    /// assert_eq!((pool.capacity(), pool.max_capacity()), (16, 256));
    /// assert_eq!(pool.stats().allocated, 16);
    /// pool.set_capacity(64).unwrap();
    /// let held: Vec<_> = (0..64).map(|_| pool.try_acquire().unwrap()).collect();
    /// assert!(pool.try_acquire().is_err(), "the bound is 64");
    /// # drop(held);
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn max_capacity(mut self, max: usize) -> Self {
        self.max_capacity = Some(max);
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
    /// references it does not need. [`detach`](crate::PoolGuard::detach) does not
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

    /// Drops the values for which `discard` returns `true` as their guards
    /// are dropped, instead of keeping them: checked after the
    /// [reset](Builder::reset), on the dropping thread, before the slot can
    /// be acquired again.
    ///
    /// This keeps a pool healthy: a buffer that grew past what the pool is
    /// for, a connection that saw an error. The value is dropped on the
    /// releasing thread, outside any retry loop, and its slot goes back
    /// empty: the factory refills it on its next acquire, so the capacity
    /// stays. (In a pool without a factory, [`Pool::from_values`], the slot
    /// is [retired](crate::Stats::retired) instead.) Each discard is
    /// counted in [`Stats::discarded`](crate::Stats::discarded).
    ///
    /// A panic in `discard` is handled as a reset's: the value is dropped,
    /// the slot goes back empty and the panic propagates from the guard's
    /// drop, after the slot is back. A panic in the discarded value's own
    /// drop propagates the same way. A guard dropped while its thread
    /// unwinds runs neither the reset nor `discard` (see
    /// [`reset`](Builder::reset)): its value is dropped. Scopes' batch
    /// returns check their values too; [`detach`](crate::PoolGuard::detach)
    /// does not.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder(|| Vec::<u8>::with_capacity(4096))
    ///     .capacity(2)
    ///     .reset(Vec::clear)
    ///     .discard_if(|buf: &Vec<u8>| buf.capacity() > 64 * 1024)
    ///     .build()?;
    /// pool.try_acquire().unwrap().resize(1 << 20, 0); // a request grew it
    /// assert_eq!(pool.stats().discarded, 1);
    /// assert!(pool.try_acquire().unwrap().capacity() < 64 * 1024);
    /// assert_eq!(pool.stats().available, 2, "the capacity stays");
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn discard_if<D>(mut self, discard: D) -> Self
    where
        D: Fn(&T) -> bool + Send + Sync + 'static,
    {
        self.discard = Some(Box::new(discard));
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

    /// Turns hold tracking on, for leak detection: the pool notes when each
    /// guard (or [`Scope`](crate::Scope) value) was acquired, and
    /// [`Stats::oldest_hold`](crate::Stats::oldest_hold) reports the age of
    /// the oldest one held and [`Stats::holds_over_limit`](crate::Stats::holds_over_limit)
    /// how many are held longer than `limit` (a guard leaked with
    /// `mem::forget`, or kept by a stuck task, stays there).
    ///
    /// Off by default, and then free: an acquire pays one test of a word
    /// and a release nothing. On, each acquire and release reads the clock
    /// once and writes one word of the slot's own, and
    /// [`stats`](Pool::stats) walks every slot.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let pool = tagpool::Pool::builder(|| 0u8)
    ///     .capacity(4)
    ///     .hold_limit(Duration::from_millis(1))
    ///     .build()?;
    /// assert_eq!(pool.stats().oldest_hold, None);
    /// std::mem::forget(pool.acquire().unwrap()); // a leak
    /// let kept = pool.acquire().unwrap();
    /// std::thread::sleep(Duration::from_millis(5));
    /// let stats = pool.stats();
    /// assert!(stats.oldest_hold.unwrap() >= Duration::from_millis(5));
    /// assert_eq!(stats.holds_over_limit, 2);
    /// drop(kept);
    /// assert_eq!(pool.stats().holds_over_limit, 1, "the leaked guard");
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn hold_limit(mut self, limit: Duration) -> Self {
        self.hold_limit = Some(limit);
        self
    }

    /// Keeps at least `n` values filled and idle, as bb8's and r2d2's
    /// `min_idle` keep connections warm: a [lazy](Builder::lazy) pool makes
    /// `n` values at build, and whenever a discard
    /// ([`discard_if`](Builder::discard_if)), a [`trim`](Pool::trim) or a
    /// [`retain_idle`](Pool::retain_idle) leaves fewer than `n` idle, the
    /// pool makes new ones with the factory, right away, on the thread that
    /// did it, outside any retry loop: the discarded slot goes back with a
    /// fresh value, and a trim or `retain_idle` fills empty idle slots
    /// after its pass. Values held by guards do not count (the floor is of
    /// idle ones, as bb8's), so acquires do not trigger it. A factory error
    /// stops the refill (the next trigger tries again); a factory panic
    /// propagates from the call that triggered it, the pool consistent.
    /// [`drain_idle`](Pool::drain_idle), which hands the values over,
    /// does not refill, and a closed pool refills nothing. The floor is a
    /// target, not a promise: a factory error, or empty slots out of reach
    /// (parked in a cache whose owner is inside an operation, or none left
    /// to grow), leave it short until the next trigger; under concurrent
    /// use the count is a snapshot, and the floor may be overshot. A trim
    /// of an elastic pool whose values are held may grow it to refill.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::Pool::builder(String::new)
    ///     .capacity(8)
    ///     .lazy()
    ///     .min_idle(2)
    ///     .build()?;
    /// assert_eq!(pool.stats().filled, 2, "made at build");
    /// pool.trim(0);
    /// assert_eq!(pool.stats().filled, 2, "refilled after the trim");
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn min_idle(mut self, n: usize) -> Self {
        self.min_idle = n;
        self
    }

    /// Builds the pool, filling every slot now unless [`lazy`](Builder::lazy)
    /// was asked for.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroCapacity`] if the capacity is 0 or was not set;
    /// [`BuildError::CapacityTooLarge`] if it (or the
    /// [`max_capacity`](Builder::max_capacity)) is above [`MAX_CAPACITY`];
    /// [`BuildError::MaxBelowCapacity`] if the
    /// [`max_capacity`](Builder::max_capacity) is below the capacity;
    /// [`BuildError::ThreadCacheTooLarge`] if
    /// [`thread_cache_size`](Builder::thread_cache_size) is above 64;
    /// [`BuildError::FairWithThreadCache`] if a [fair](Builder::fair) pool
    /// was given a per-thread cache size above 0;
    /// [`BuildError::ZeroInitial`] and [`BuildError::InitialAboveCapacity`]
    /// if [`initial`](Builder::initial) is 0 or above the capacity;
    /// [`BuildError::TooManyValues`] if [`values`](Builder::values) gave
    /// more values than the capacity;
    /// [`BuildError::NoFactory`] if a pool without a factory
    /// ([`Pool::builder_from_values`]) was given another capacity than its
    /// number of values, or an [`initial`](Builder::initial) size;
    /// [`BuildError::MinIdle`] if [`min_idle`](Builder::min_idle) is above
    /// the slots allocated at build (the capacity, or the
    /// [`initial`](Builder::initial) size) or given to a pool without a
    /// factory;
    /// [`BuildError::Factory`] if the factory of a
    /// [`Pool::try_builder`] failed during an eager fill, or while a lazy
    /// pool made its [`min_idle`](Builder::min_idle) values (the values made
    /// so far are dropped).
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
    pub fn build(self) -> Result<Pool<T, E>, BuildError<E>>
    where
        E: 'static,
    {
        let capacity = self.capacity;
        if capacity == 0 {
            return Err(BuildError::ZeroCapacity);
        }
        let max = self.max_capacity.unwrap_or(capacity);
        if capacity.max(max) > MAX_CAPACITY {
            return Err(BuildError::CapacityTooLarge {
                requested: capacity.max(max),
                max: MAX_CAPACITY,
            });
        }
        if max < capacity {
            return Err(BuildError::MaxBelowCapacity { max, capacity });
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
        if self.factory.is_none()
            && (capacity != self.values.len() || self.initial.is_some() || max != capacity)
        {
            return Err(BuildError::NoFactory {
                values: self.values.len(),
                capacity,
            });
        }
        let first = first.max(self.values.len());
        let min_idle = self.min_idle;
        if min_idle > first || (min_idle > 0 && self.factory.is_none()) {
            return Err(BuildError::MinIdle {
                min_idle,
                limit: if self.factory.is_none() { 0 } else { first },
            });
        }
        let geometry = Geometry::new(first as u32, max as u32);
        let filled = if self.lazy {
            self.values.len().max(min_idle)
        } else {
            first
        };
        let (lazy, factory) = (self.lazy, self.factory.as_deref());
        let mut values = self.values.into_iter();
        let mut failed = None;
        // A lazy pool fills its first `min_idle` slots now.
        let slots = Slots::new(geometry, |index| {
            values.next().or_else(|| match factory {
                Some(factory) if (!lazy || (index as usize) < min_idle) && failed.is_none() => {
                    factory().map_err(|err| failed = Some(err)).ok()
                }
                _ => None,
            })
        });
        if let Some(err) = failed {
            // Dropping `slots` drops the values made so far.
            return Err(BuildError::Factory(factory_error(err)));
        }
        let cache = if cache_size > 0 {
            Cache::new(cache_size, capacity, share)
        } else {
            Cache::disabled()
        };
        let mut shared = Box::new(Shared::new(
            geometry,
            cache,
            slots,
            self.factory,
            Recycle::boxed(self.reset, self.discard, self.hold_limit.is_some()),
            self.fair,
            filled as u64,
            self.hold_limit,
        ));
        shared.set_min_idle(min_idle);
        if max > capacity {
            shared.set_initial_bound(capacity as u32);
        }
        Ok(Pool {
            shared: CachePadded::new(NonNull::from(Box::leak(shared))),
            _owns: PhantomData,
            _error: PhantomData,
        })
    }
}

impl<T, E> fmt::Debug for Builder<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("capacity", &self.capacity)
            .field("max_capacity", &self.max_capacity)
            .field("initial", &self.initial)
            .field("values", &self.values.len())
            .field("lazy", &self.lazy)
            .field("factory", &self.factory.is_some())
            .field("reset", &self.reset.is_some())
            .field("discard_if", &self.discard.is_some())
            .field("thread_cache", &self.thread_cache)
            .field("fair", &self.fair)
            .field("hold_limit", &self.hold_limit)
            .field("min_idle", &self.min_idle)
            .finish_non_exhaustive()
    }
}
