//! A lock-free, fixed-capacity object pool.
//!
//! `tagpool` keeps up to `capacity` values in slots that never move (all
//! made at build, or in segments that double on demand up to the capacity)
//! and hands them out to any number of threads through RAII guards. Most
//! acquires and releases touch only a small per-thread cache of free
//! slots; behind the caches, a Treiber free list of slot indices whose
//! head is one tagged word takes one compare-exchange per batch. Acquiring
//! and releasing take no lock while nobody waits (see [Progress](#progress)
//! for where the pool locks or waits), allocate nothing once the values
//! exist, and have no thread-count limit.
//!
//! One engine has three faces: [`Pool<T>`](Pool) lends values through
//! guards; [`IndexPool`] lends indices into arrays of your own
//! (structure-of-arrays storage); [`HandlePool<T>`](HandlePool) keeps values
//! in place behind `Copy` generational handles, and can evict a live value
//! when full. All three keep their capacity exact: a slot parked in any
//! thread's cache is found by whoever needs it. A [`BufferPool`] puts
//! several `Pool`s together for buffers of every size (one per power-of-two
//! class), and an owned guard can become a [`SharedPoolGuard`], shared like
//! an `Arc` until its last clone sends the value back. How the engine is built, and
//! where each protocol's argument lives in the source, is in
//! [`implementation`].
//!
//! # When to use a pool (and when not)
//!
//! Use one when values are expensive to make or to drop (buffers with
//! capacity, objects holding resources), when allocation latency spikes or
//! fragmentation hurt (game frames, request handling), or when you need a
//! hard bound on how many values exist (backpressure). Particles, events,
//! entities, sounds, job payloads and I/O buffers are typical.
//!
//! Do not use one for small `Copy` values that are cheap to make: a local or
//! a `Vec` is faster. If one thread owns all the values, a plain `Vec` free
//! list beats any thread-safe pool. If you need the pool to grow without
//! any bound, this crate is not it: an elastic pool grows on demand, but
//! only up to its capacity.
//!
//! # Examples
//!
//! A borrowed guard:
//!
//! ```
//! use tagpool::Pool;
//!
//! let pool = Pool::builder(|| Vec::<u8>::with_capacity(4096))
//!     .capacity(64)
//!     .reset(|buf: &mut Vec<u8>| buf.clear()) // keeps the capacity
//!     .build()?;
//!
//! let mut buf = pool.try_acquire().expect("the pool is not exhausted");
//! buf.extend_from_slice(b"request");
//! assert_eq!(&buf[..], b"request");
//! drop(buf); // cleared and back in the pool
//! assert_eq!(pool.stats().in_use, 0);
//! # Ok::<(), tagpool::BuildError>(())
//! ```
//!
//! An owned guard moved into a job on another thread:
//!
//! ```
//! use std::sync::Arc;
//! use tagpool::Pool;
//!
//! let pool = Arc::new(Pool::new(8, || [0u64; 8]));
//! let handles: Vec<_> = (0..4u64)
//!     .map(|i| {
//!         let mut payload = pool.acquire_owned().expect("open"); // waits if all 8 are out
//!         std::thread::spawn(move || {
//!             payload[0] = i;
//!             payload.iter().sum::<u64>() // released on this thread
//!         })
//!     })
//!     .collect();
//! let total: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
//! assert_eq!(total, 6);
//! assert_eq!(pool.stats().in_use, 0);
//! ```
//!
//! # Capacity and exhaustion
//!
//! A pool has exactly the capacity it was built with: from 1 to
//! [`MAX_CAPACITY`] (`2^32 - 2`), or [`MAX_HANDLE_CAPACITY`] (`2^24`) for a
//! [`HandlePool`], whose handles keep 40 bits for the generation (a
//! handle pool's entry is retired, never reused, after `2^39 - 1` values:
//! see [`Handle`]). [`Pool::new`] panics outside that range;
//! [`Builder::build`] returns a [`BuildError`]. The capacity is a hard
//! bound: never more values live than that. By default the storage of every
//! slot is allocated at build; an *elastic* pool ([`Builder::initial`])
//! starts smaller and doubles its storage on demand up to the bound. The
//! bound moves while the pool serves ([`Pool::set_capacity`], up to
//! [`Builder::max_capacity`]), and stays exact as it moves. When
//! every slot is held, the classic object-pool literature lists these
//! strategies:
//!
//! | strategy | offered | how |
//! |----------|---------|-----|
//! | prevent it (size the pool for the worst case) | yes | [`Stats::peak_in_use`] and [`Stats::failed_acquires`] tell you the size you need |
//! | don't create the object | yes | [`Pool::try_acquire`] returns [`TryAcquireError::Exhausted`] at once |
//! | wait for a release (backpressure) | yes | [`Pool::acquire`], [`Pool::acquire_timeout`], [`Pool::acquire_async`] and their `_owned` forms |
//! | grow (up to the bound) | yes | [`Builder::initial`]: storage in segments that never move, doubling on demand; at the bound, one of the strategies above |
//! | forcibly reuse a live object (DESTROY) | yes, for [`HandlePool`] | [`HandleBuilder::evict_oldest`] or [`HandleBuilder::evict_min_by_key`] (the quietest sound): a full pool's insert ends a live value nobody is reading, makes its handles stale and hands it to [`on_evict`](HandleBuilder::on_evict); a value being read is skipped, never torn out. A [`Pool`]'s guards are exclusive and are never taken back |
//!
//! # Three ways to hold what the pool hands out
//!
//! | type | you get | lifetime of the value | for |
//! |------|---------|-----------------------|-----|
//! | [`Pool`] | a guard that derefs to `&mut T` | leaves the free list while the guard lives; [`Pool::scope`] lends many for a frame and returns them in one batch | events, buffers, job payloads, frame temporaries |
//! | [`IndexPool`] | an index guard: an index in `0..capacity`, exclusive | no values: your own arrays (structure of arrays) | particles as positions, velocities, lifetimes in separate arrays |
//! | [`HandlePool`] | a `Copy` [`Handle`] (index and generation, 8 bytes, and 8 in an `Option`), or a typed key of the pool's own ([`new_key_type!`]) | stays in the pool until removed or evicted; any thread reads it through a [read section](#read-sections) (`&T`, writing nothing shared) or a counted [`Ref`] | entities, sounds, anything referred to by id; a stale handle answers `None`, and never names a later value |
//!
//! ```
//! use tagpool::{HandlePool, IndexPool};
//!
//! // Structure of arrays: the pool hands out indices into your arrays.
//! let particles = IndexPool::new(256);
//! let mut position = vec![[0.0f32; 2]; particles.capacity()];
//! let p = particles.try_acquire().unwrap();
//! position[p.index()] = [1.0, 2.0];
//!
//! // Objects that never leave the pool, reached by handle.
//! let entities = HandlePool::new(256);
//! let player = entities.insert("player").unwrap();
//! assert_eq!(entities.with(player, |name| name.len()), Some(6));
//! entities.remove(player);
//! assert!(entities.get(player).is_none(), "a stale handle is refused");
//! ```
//!
//! # Read sections
//!
//! Systems that read many values of a [`HandlePool`] on many threads open
//! a section and read through it: [`HandlePool::read`] returns a
//! [`ReadSection`] whose [`get`](ReadSection::get) is one load of the
//! entry's word and returns a plain `&T`, and whose [`iter`](ReadSection::iter)
//! walks the live values the same way. Nothing a section does writes a
//! cache line that another thread reads (the thread announces itself in
//! its own record, with a compiler fence where Linux's `membarrier` is
//! available), so readers of one popular value do not slow each other
//! down, as counted reads ([`HandlePool::get`], a [`Ref`]) do.
//! [`HandlePool::with`] opens a section for its one read.
//!
//! The price is paid by removals, as in RCU: once a pool has had a section,
//! a `remove` (or `take`, an eviction, the last `Ref` of a removed value)
//! makes the key stale at once, but drops the value (or hands it to
//! `on_evict`) and reuses its entry only after a *grace period* shows that
//! no section that could see it is still open. The pool runs grace periods
//! in batches (a quarter of the capacity, 64 to 4096 removals), whenever
//! an insert finds no other free entry, and on
//! [`reclaim`](HandlePool::reclaim); each costs one process-wide barrier.
//! Entries awaiting one count against the capacity
//! ([`HandleStats::awaiting_reuse`]): an insert that finds only those runs
//! a grace period itself, and fails only while a section is open that may
//! still see them (one that began before their removal, or after it but
//! before the next grace period: the pool does not tell these apart).
//! Keep sections short (a system's pass, a frame) and hold values beyond
//! one through a counted [`Ref`] or [`OwnedRef`].
//!
//! ```
//! let entities = tagpool::HandlePool::new(64);
//! let keys: Vec<_> = (0..8).map(|i| entities.insert(i * 10).unwrap()).collect();
//! std::thread::scope(|s| {
//!     for _ in 0..2 {
//!         s.spawn(|| {
//!             let frame = entities.read();
//!             let sum: i32 = keys.iter().filter_map(|&k| frame.get(k)).sum();
//!             assert!(sum <= 280);
//!         });
//!     }
//!     entities.remove(keys[0]); // stale at once; dropped after the sections
//! });
//! assert_eq!(entities.read().iter().count(), 7);
//! ```
//!
//! # Waiting
//!
//! [`try_acquire`](Pool::try_acquire) never blocks. [`acquire`](Pool::acquire)
//! blocks the thread without a bound and
//! [`acquire_timeout`](Pool::acquire_timeout) up to a duration: a waiter
//! spins briefly, then parks on an
//! [`event_listener`](https://docs.rs/event-listener) event. A release costs
//! nothing extra while nobody waits: the "someone waits" flag lives in the
//! free list's head word, which the release's CAS reads anyway. In async
//! code, use [`acquire_async`](Pool::acquire_async) instead (see
//! [Async](#async)): a blocking acquire inside a task stalls the
//! executor's thread, perhaps the very thread whose task would release.
//!
//! **Fairness.** By default parked waiters are woken one per release in the
//! order they parked (FIFO), but a woken waiter races with any thread
//! acquiring at that moment, which may take the slot first (*barging*); the
//! loser parks again at the back. That keeps slots moving (no thread sleeps
//! while a slot sits free). Barging alone has no starvation bound, so the
//! default pool adds one for blocked threads (*eventual fairness*, as in
//! parking_lot's locks): a thread that has waited 100 µs stops competing
//! and queues, and the next release hands its slot straight to the first
//! such thread, ahead of any thread barging in. So a blocked thread waits
//! at most 100 µs, then one release per thread queued before it (plus its
//! own wake-up). [`Stats::handoffs`] counts these hand-offs and
//! [`Stats::queued_waiters`] the threads queued now. It costs nothing while
//! nobody has waited that long; when every waiter does (threads holding the
//! slot for tens of microseconds each, queued several deep), most releases
//! become hand-offs, each paying a thread wake-up with the slot idle, and
//! throughput falls toward the fair pool's (measured a third lower than
//! barging alone with eight threads holding one slot about 20 µs each, on 2
//! vCPUs, with a p99.9 wait of 0.5 ms instead of 40 ms). A task that
//! finds no slot queues at once instead: a task is polled only when woken,
//! and under tokio the task that releases a slot usually takes it back
//! before the task it woke runs, so a barging task would wake in vain at
//! almost every release. Waiting tasks are thus served in arrival order
//! in every pool, and only an acquire's first try barges.
//!
//! A pool built with [`Builder::fair`] hands each released slot straight to
//! the waiter that has waited longest, thread or task, and lets no acquire
//! take a slot while anyone waits: a waiter is served after exactly those
//! queued before it. Fair pools have no per-thread caches and take a lock on
//! a release that finds waiters; while nobody waits they cost one CAS per
//! acquire and per release.
//!
//! Which to pick, measured by the benchmark crate's `waiting` binary on the
//! 2-vCPU CI machine type (figures in `benches/RESULTS.md`):
//!
//! - **Async tasks on a scarce pool** (16 tasks, 4 buffers): `fair()` is
//!   the fastest of the pools measured (about 0.9 of a tokio `Semaphore`
//!   in front of a `Mutex<Vec>`, faster than deadpool) and has the lowest
//!   p99 wait (about 5 µs); the default barging pool is about 1.15 of the
//!   semaphore with a p99 near 100 µs, because a woken task usually finds
//!   its slot taken again by the task that released it. Waking a task is
//!   cheap, so handing slots over costs little: **use `fair()` for async
//!   servers whose pool runs dry.**
//! - **Blocked threads** (8 threads, capacity 1, about 200 ns of work per
//!   hold): the default pool moves about 2.7 times as many operations per
//!   second as a `Mutex` + `Condvar` pool and about 40 times as many as
//!   `fair()`, with a p99.9 wait below the `Condvar` pool's (about 0.17 ms,
//!   against 0.2; 0.55 ms before the starvation bound); one thread may
//!   still get half again as many operations as another. `fair()` serves
//!   every thread within 1% of the others, at one thread wake-up (a futex
//!   call and a context switch) per hand-off: keep the default unless
//!   strict arrival order matters more than throughput.
//! - **Plentiful pools**: nobody waits; the default pool, with its
//!   per-thread caches, is faster (about 0.5 of the semaphore pool with
//!   tasks, against 0.8 for `fair()`).
//!
//! # Async
//!
//! [`Pool::acquire_async`] and [`Pool::acquire_owned_async`] return futures
//! ([`Acquire`], [`AcquireOwned`]) that resolve to the same guards. They
//! work on any executor: the pending future's waker is registered with the
//! pool's wait queue, which blocking waiters share, and the crate depends on
//! no runtime. [`AcquireOwned`] is `'static` and `Send` (for `T: Send`),
//! so it fits `tokio::spawn`, and its guard can be held across `.await`s.
//!
//! - **Cancel-safe.** Dropping a pending future (a timeout, a `select!`
//!   that took another branch, an aborted task) takes no slot, and passes on
//!   the wake-up it had received (or, in a fair pool, the slot it had been
//!   handed), so no other waiter is stranded. [`Stats::cancelled_waits`]
//!   counts such drops.
//! - **Timeouts** come from the runtime: wrap the future in
//!   `tokio::time::timeout` (or your runtime's equivalent).
//! - **Shutdown:** [`Pool::close`] ends every wait with
//!   [`AcquireError::Closed`].
//!
//! ```
//! # let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! # rt.block_on(async {
//! use std::{sync::Arc, time::Duration};
//! use tagpool::{AcquireError, Pool};
//!
//! let pool = Arc::new(Pool::new(2, || vec![0u8; 16 * 1024]));
//! let mut buf = pool.acquire_owned_async().await?; // never blocks the thread
//! let task = tokio::spawn(async move {
//!     buf[0] = 1; // a `'static` guard moves into the task
//!     tokio::task::yield_now().await;
//! });
//!
//! // A bounded wait: the runtime's timeout, and the pool is left as it was.
//! match tokio::time::timeout(Duration::from_millis(50), pool.acquire_async()).await {
//!     Ok(Ok(buf)) => assert_eq!(buf.len(), 16 * 1024),
//!     Ok(Err(AcquireError::Closed)) => unreachable!("nobody closed it"),
//!     Ok(Err(_)) => unreachable!(),
//!     Err(_elapsed) => unreachable!("a slot is free"),
//! }
//! task.await.unwrap();
//!
//! // Shutdown: waiters and later acquires get `Closed`.
//! pool.close();
//! assert_eq!(pool.acquire_async().await.map(|_| ()), Err(AcquireError::Closed));
//! # Ok::<(), AcquireError>(())
//! # }).unwrap();
//! ```
//!
//! The repository's `examples/echo_server.rs` is a tokio TCP echo server
//! whose buffers come from a pool smaller than its number of connections,
//! that sends its replies as `Bytes` of pooled buffers (below), with a load
//! generator that checks every reply.
//!
//! # Buffers as `bytes::Bytes`
//!
//! Guards forward [`AsRef`] and [`AsMut`] to the value (as `&mut T` does),
//! so a guard of a `Vec<u8>` is an `AsRef<[u8]>`. An [`OwnedPoolGuard`] is
//! also `Send + 'static`, which is what `bytes::Bytes::from_owner` (bytes
//! 1.9 or newer) asks: a pooled buffer becomes a `Bytes` without a copy,
//! for tokio, hyper, tonic and tokio-util, which pass `Bytes` around. The
//! `Bytes`, its clones and its slices share the guard; the buffer goes back
//! to the pool when the last of them is dropped, and the reset closure runs
//! then, on the thread that drops it. tagpool does not depend on `bytes`.
//!
//! ```
//! # let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
//! # rt.block_on(async {
//! use std::sync::Arc;
//! use bytes::Bytes;
//! use tagpool::Pool;
//!
//! let pool = Arc::new(
//!     Pool::builder(|| Vec::<u8>::with_capacity(4096))
//!         .capacity(8)
//!         .reset(|buf: &mut Vec<u8>| buf.clear())
//!         .build()
//!         .unwrap(),
//! );
//! let mut buf = pool.acquire_owned_async().await?;
//! buf.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
//! let reply = Bytes::from_owner(buf);
//! let status = reply.slice(9..12); // shares the buffer
//! let sent = tokio::spawn(async move { reply.len() }).await.unwrap();
//! assert_eq!((sent, &status[..]), (17, &b"200"[..]));
//! assert_eq!(pool.stats().in_use, 1, "`status` holds the buffer");
//! drop(status); // the last one: reset and back
//! assert_eq!(pool.stats().in_use, 0);
//! # Ok::<(), tagpool::AcquireError>(())
//! # }).unwrap();
//! ```
//!
//! # Closing
//!
//! [`Pool::close`] is for graceful shutdown: every blocked and async waiter
//! returns [`AcquireError::Closed`] promptly, and every later acquire fails
//! the same way ([`TryAcquireError::Closed`] from `try_acquire`), even with
//! free slots. Guards already out are released as usual, and the values
//! stay in the pool until it is dropped, which drops each exactly once.
//! [`Stats::closed`] reports it. A closed pool cannot be reopened.
//!
//! # Per-thread caches
//!
//! By default each thread that uses a pool keeps a small cache of free
//! slots of its own (a *magazine*, after Bonwick and Adams' slab
//! allocator): an acquire takes the slot on top of it and a release puts
//! one back, with plain loads and stores on memory the thread owns. On
//! Linux the fast path has no locked instruction at all; elsewhere it pays
//! one fence per operation. A cache that runs empty takes a batch from the
//! shared free list in one CAS, and a full one gives a batch back.
//!
//! The capacity stays exact, which is what sets this apart from pools with
//! per-thread caches that lose track of slots:
//!
//! - never more than `capacity` values exist;
//! - a thread that finds its cache and the free list empty *revokes* every
//!   other thread's cache that holds slots, live, parked or exited, and
//!   takes them, so when no other operation is in flight
//!   [`try_acquire`](Pool::try_acquire) fails only if every slot is held by
//!   a guard; a release that happens-before an acquire on another thread is
//!   always visible to it;
//! - while any thread waits in [`acquire`](Pool::acquire), every cache
//!   flushes to the free list, so waiters find cached slots at once, without
//!   polling;
//! - [`Pool::stats`] counts cached slots as available
//!   ([`Stats::cached`]) and is exact whenever nothing is in flight.
//!
//! Revoking pays for the cheap fast path: it runs an asymmetric barrier
//! (Linux `membarrier`, a few microseconds) and touches every cache, so it
//! is meant to be rare. A `membarrier` the kernel refuses for want of
//! memory (`ENOMEM`) is retried, with a growing sleep, until it succeeds:
//! the revoking thread (or the pool's drop) waits, and no slot is ever
//! handed out twice. Only a permanent refusal after the process registered
//! for it (a seccomp filter installed later) aborts the process, with a
//! message: the caches' fast path cannot be ordered any more. Caches are sized from the capacity (an eighth of
//! it, between 2 and 64 slots per thread; none for a pool of one slot) and
//! shrink to each thread's share of the capacity as more threads use the
//! pool; see [`Builder::thread_cache`] for the rule, the figures that chose
//! it, and the switch. Per-pool cache memory grows with the threads that
//! used the pool (about 320 bytes each), and an exited thread's cache is
//! adopted by the next new thread. A thread's cache in a pool is made by
//! its first acquire or release there, so a consumer that only drops guards
//! sent to it caches too; a guard dropped by a thread-local destructor late
//! in thread exit, after the thread's cache bookkeeping is gone, goes
//! straight to the shared free list. The protocol and its proof sketch are
//! in the source, `src/engine/cache/`.
//!
//! A pool of 2 to 64 slots gives each value (of at most 128 bytes, cell
//! included) an aligned 128-byte block of its own, 8 KiB at most a pool, so
//! that threads holding neighbouring values never write to one cache line:
//! in such a pool every slot is in use at once, and with `Vec`s packed side
//! by side two threads on 16 slots ran 5 to 37 ns per operation from run to
//! run (as their first acquires happened to interleave the slots), 2.5 ns
//! spread. Larger pools pack their values (`size_of::<Option<T>>()` bytes
//! each).
//!
//! # Owned guards
//!
//! [`Pool::try_acquire_owned`] and friends take `self: &Arc<Pool<T>>` and
//! return an [`OwnedPoolGuard`]: `'static`, so it can move into a job or
//! another thread. It does **not** clone the `Arc`: a reference count
//! incremented by the thread that acquires and decremented by the one that
//! releases would move one cache line between them for every guard (in a
//! hand-off measured here, about a third of the time per value). The
//! pool's values live in an allocation of their own, and each thread's
//! cache counts the owned guards it gave out minus those it took back.
//! When the last `Arc` goes, the pool's drop seals every cache (yielding
//! while an owner is inside an operation or the tail of an owned release:
//! both are short and run no user code, though a release that finds
//! waiters notifies them through `event-listener`'s internal lock, and a
//! thread preempted there makes the drop wait for its next time slice),
//! adds up the counts, and frees the values at once if no owned
//! guard is left; otherwise the last owned guard to be dropped frees them,
//! on its thread. So:
//!
//! - dropping the last `Arc` while owned guards live is fine: their values
//!   stay valid, and every value is dropped exactly once, by whichever
//!   comes last;
//! - the `Arc` itself is gone at once ([`Arc::strong_count`](std::sync::Arc::strong_count)
//!   counts handles, not guards), and a guard gives no way back to the
//!   pool: keep an `Arc` where you acquire;
//! - leaking an owned guard (`mem::forget`) keeps the pool's values alive
//!   for good, as leaking an `Arc` would; leaking a borrowed guard leaks
//!   only its slot.
//!
//! ```
//! use std::sync::Arc;
//!
//! let pool = Arc::new(tagpool::Pool::new(8, || vec![0u8; 64]));
//! let mut guard = pool.try_acquire_owned().unwrap();
//! assert_eq!(Arc::strong_count(&pool), 1, "guards hold no Arc");
//! drop(pool); // the values stay: the guard keeps them
//! guard[0] = 1;
//! std::thread::spawn(move || drop(guard)).join().unwrap(); // frees the pool
//! ```
//!
//! # Reset and detach
//!
//! A [reset closure](Builder::reset) runs exactly once per release, on the
//! releasing thread, before the slot can be acquired again: a reused value
//! never shows a past life. [`PoolGuard::detach`] takes the value out of the
//! pool for good; the slot is refilled by the factory on its next acquire,
//! so capacity is never lost. The factory also fills lazy pools
//! ([`Builder::lazy`]) on each slot's first acquire.
//!
//! To keep the pool's values healthy, [`Builder::discard_if`] drops values
//! that fail a check on release (a buffer that grew too large), and
//! [`Pool::retain_idle`] drops idle values that fail a check (connections
//! idle too long); both leave the slot empty for the factory. A factory
//! that can fail ([`Pool::try_builder`]) makes a `Pool<T, E>`, whose
//! acquires return the factory's `E` in their error's `Factory` variant;
//! a `Pool<T>` is a `Pool<T, Infallible>`, whose errors cannot hold one.
//! A pool of values that cannot be made on demand ([`Pool::from_values`])
//! has no factory: a slot that loses its value is
//! [retired](Stats::retired) until [`Pool::attach`] refills it.
//!
//! User code (factory, reset, `Drop` of `T`) never runs inside a CAS retry
//! loop. If it panics, the pool stays usable and leaks nothing: see
//! [Panics in user code](#panics-in-user-code).
//!
//! Leaking a guard with `mem::forget` is safe: the slot stays in use (and
//! visible in [`Pool::stats`]) until the pool is dropped, which drops every
//! value it holds, leaked or not, exactly once. An [`OwnedPoolGuard`] keeps
//! its pool alive: the pool is dropped with the last guard or `Arc`.
//!
//! # Progress
//!
//! The free list and the caches' fast paths are lock-free: a thread
//! preempted in the middle of one delays nobody, and some thread always
//! completes its operation. A few paths lock or wait, all of them either
//! off the paths where a slot is free or bounded:
//!
//! - **Waiting**, by choice: [`acquire`](Pool::acquire) and its timed and
//!   async forms block or suspend until a slot is free. A release that
//!   finds waiters takes a lock: event-listener's (notifying a blocked
//!   thread) or the ticket queue's (handing the slot to a queued waiter:
//!   every waiter of a [fair](Builder::fair) pool, every waiting task, and
//!   threads past the starvation bound). Nothing runs under those locks
//!   but list operations; wakers run after unlocking.
//! - **Revoking caches** never waits for another thread. A thread that
//!   finds its cache and the free list empty runs an asymmetric barrier (a
//!   `membarrier` system call on Linux) and moves other threads' cached
//!   slots to the free list. An owner that finds such a revoker's claim on
//!   its own cache takes the claim back and goes on with its cache; a
//!   revoker that finds another's claim takes it over; a cache that
//!   another revoker is moving is left to it (its push wakes any waiter).
//!   So `try_acquire` never waits for another thread's cache operation,
//!   and neither does an owner's flush for a waiter (slots it moves to
//!   waiters take the waiting locks above for a moment). The one cost: while another operation is
//!   in flight (an owner inside its cache, a revoker moving one), a
//!   `try_acquire` may fail without the slots that operation has in hand
//!   at that moment; a `try_acquire` that races nothing fails only when
//!   every slot is held. [`close`](Pool::close) does wait (yielding) for a
//!   revoker that is moving a cache, so that it returns with no slot
//!   cached.
//! - **Idle values first** (see [`Pool::try_builder`]): an acquire that took
//!   an empty slot may pop idle slots, and sweep the caches, to find a value;
//!   those slots are out of the list for the moment of that pass, as in a
//!   [`trim`](Pool::trim), and a `try_acquire` racing it may fail without them.
//! - **Growing** an elastic pool: a thread that needs the segment another
//!   thread is allocating waits for it (spinning, then yielding).
//! - **Dropping the pool** waits for each thread that is inside an
//!   operation on its cache (a preempted owner delays the drop until it
//!   runs again) and for owned guards' releases in flight on other threads.
//! - A [`HandlePool`] never waits for readers: a `remove` while `Ref`s
//!   are alive defers the drop to the last one (and to a grace period
//!   after the sections that may see it, see [Read sections](#read-sections)),
//!   a `take` fails ([`TakeError::BeingRead`]) and leaves the value while
//!   a `Ref` or a section is alive, and eviction skips values being read.
//!   One exception: a `take` that starts with no section open waits for a
//!   section that another thread opens during the take itself (it may have
//!   read the value) to end.
//! - Read sections never wait, and nothing waits for them: a grace period
//!   frees what it can and leaves the rest for a later one.
//!
//! # Panics in user code
//!
//! The pool calls code it does not control: the factory, the reset
//! closure, `Drop` of `T`, a task's [`Waker`](std::task::Waker), and a
//! [`HandlePool`]'s `on_evict`, eviction key, `insert_with_key` and
//! `retain` closures. Any of them may panic.
//! None of them runs inside a CAS retry loop or under a lock, and a panic
//! never leaves the pool half way through a step: it stays usable, its
//! drop returns, and every value is dropped exactly once.
//!
//! | what panics | what happens |
//! |-------------|--------------|
//! | the factory, during an eager build | the values made so far are dropped; the panic propagates from `new`/`build` |
//! | the factory, filling a slot on acquire | the slot goes back empty; the panic propagates from the acquire |
//! | the reset closure | the value is dropped, the slot goes back empty (refilled later); the panic propagates from the guard's drop |
//! | the [`discard_if`](Builder::discard_if) predicate, or `Drop` of a value it discarded | as a reset's panic: the value is dropped, the slot goes back empty; the panic propagates from the guard's drop |
//! | the [`retain_idle`](Pool::retain_idle) predicate | the value it panicked on is dropped, the values not visited yet are kept, every slot goes back; the panic propagates from `retain_idle` |
//! | the holder, while it holds a guard | the guard is dropped during the unwind: with a reset closure or a discard predicate, the value is dropped without either (it may be half updated) and the slot goes back empty; without them, the value goes back as it is |
//! | a task's waker, woken by a release (a guard's drop or `detach`, a [`Scope`]'s drop) | the panic is caught, the release runs to its end (the slot reaches the woken task, an owned guard lets go of the pool), and then the panic propagates from the drop or `detach`; after a reset closure's panic, the waker's is dropped |
//! | a task's waker, woken by [`Pool::close`] | every other waiter is woken all the same; then the panic propagates from `close` |
//! | a task's waker, woken by a dropped async acquire (passing on its wake-up or its handed slot) | the wake-up or slot reaches the next waiter; then the panic propagates from the future's drop |
//! | a task's waker, woken by an acquire (moving slots out of other threads' caches, passing on a wake-up it did not use) or by [`Pool::attach`], `trim` and the like | caught and dropped: the acquire goes on and returns as if the waker had not panicked |
//! | a task's waker's `drop` | as its `wake` (the pool drops wakers it replaces or no longer needs inside the same steps); a dropped async acquire whose ticket held the waker ends its wait first (it no longer counts as waiting), then the panic propagates from the future's drop |
//! | a task's waker's `clone`, when an async acquire queues or re-registers it | the panic propagates from the poll before the poll queues or replaces anything; the future's drop then ends the wait |
//! | a task's waker that uses a pool itself (this one or another) while an earlier waker's panic is held | the held panic is set aside while the waker runs: the waker's own pool operations neither resume nor drop it, and the operation that caught it resumes it as above |
//! | `Drop` of `T`, run by `trim` or by the pool's drop | the panic propagates from that call; the pool's state is already consistent (values are taken out of their slots before they are dropped), and the pool's drop still drops every other value and frees every segment (a second panic among them aborts, as for any `Vec`) |
//! | `Drop` of `T`, for a value dropped because its reset panicked | dropped: the reset's panic goes on |
//! | a [`HandlePool`]'s eviction key or `on_evict` | the insert's value is dropped and the panic propagates from the insert; the evicted entry's slot is free (with `on_evict`), or the entries keep their values (a key) |
//! | a [`HandlePool::insert_with_key`] closure | the panic propagates; the entry goes back to the free list under a new generation, so the key the closure saw stays stale |
//! | a [`HandlePool::retain`] closure, or `Drop` of a value that `retain`, `clear` or a `Drain` removes | the panic propagates; the values removed so far are gone, the rest stay live |
//!
//! A panic that would propagate from a drop while its thread already
//! unwinds is dropped instead (a second panic aborts the process); the first
//! one goes on. A waker that panics when a guard dropped by such an unwind
//! wakes it is caught and dropped from Rust 1.71 on; older compilers abort
//! on any panic raised during an unwind, even inside `catch_unwind`.
//!
//! # Safety and correctness
//!
//! The free list is a Treiber stack of `u32` slot indices. Its head is one
//! `AtomicU64` packing the top index (`b` bits, the fewest that hold the
//! capacity plus a NIL value), the number of free slots (`b` bits, up to
//! 65,535 slots; above, a counter beside the word keeps it), a waiter flag
//! and an ABA tag (the other bits), bumped by every successful CAS. The tag
//! has 31 bits or more at every capacity: 41 at 1024, 43 at a million, 31
//! at 65,535 and at [`MAX_CAPACITY`]. A popping thread can only be fooled by
//! ABA if it is preempted between reading the head and its CAS for at least
//! `2^tag_bits` (two billion) head changes *and* resumes exactly when index,
//! count and tag all match again; with per-thread caches the head changes
//! once per batch, not once per operation. Links live in segments of
//! atomics apart from the values, allocated as the pool grows and freed
//! only with the pool, so the speculative read of a link is never a data
//! race or a use after free (a stale link may name a slot whose segment the
//! reader does not see yet: the read is then retried).
//!
//! Each slot has one owner at a time: the free list or one guard. Ownership
//! moves only through the head CAS; its Release (push) and Acquire (pop)
//! halves publish the value to its next owner.
//!
//! ## Atomic orderings
//!
//! Everything one thread did to a value before dropping its guard
//! happens-before everything the next acquirer of that slot does with it.
//! The reset closure's effects are included: it runs before the push.
//!
//! In a [`HandlePool`], an insert happens-before every read that sees its
//! value (counted or in a section), and every read in a section that saw a
//! value happens-before that value's drop (or `on_evict`) and the next
//! insert into its entry.
//!
//! ## How this is checked
//!
//! - Unit tests of the head packing (smallest and largest capacity, tag
//!   wrap-around) and integration tests of every public behaviour, including
//!   panicking closures, leaked guards, exhaustion and a counting allocator
//!   proving zero allocations per acquire and release.
//! - A multi-threaded stress test in which threads hold several guards and
//!   release them out of order (the pattern that exposes ABA), checking
//!   exclusivity with a per-value marker and conservation at the end.
//! - [loom](https://docs.rs/loom) models, in the repository's `loom-tests/`,
//!   explore every interleaving of small scenarios up to a preemption bound
//!   of 2 or 3: exclusivity and conservation (2 and 3 threads, capacities 1
//!   to 3), the ABA interleaving, exhaustion, owned guards dropped on other
//!   threads and dropping the pool, lazy fill and detach (with loom's leak
//!   tracking), reset exactly once, statistics, and waiting without lost
//!   wake-ups (one and two waiters). Value cells are loom cells, so a
//!   missing happens-before edge between two holders is reported. The
//!   models are shown to fail: `loom-tests/run.sh` reruns them with the tag
//!   frozen (the ABA model fails), with the push CAS weakened to `Relaxed`
//!   (the exclusivity models report a causality violation) and with a
//!   careless clear of the waiter flag (a waiting model deadlocks). The
//!   per-thread caches have their own models (an owner racing a revoker,
//!   slots recovered from parked and exited threads, waiting while the only
//!   free slots are cached, batch refills and flushes), and planted faults
//!   of that protocol (owner ignores `revoked`, revoker ignores `BUSY`,
//!   either barrier half missing, no flush for waiters, no sweep), as well
//!   as a tag computed once before the pop's retry loop, are shown caught.
//!   Async acquires, cancellation, fair hand-off and closing have models
//!   too (a task woken by a release, a cancelled waiter whose wake-up or
//!   handed slot must reach the other waiter, a fair hand-off between a
//!   thread and a task, a close racing a release and two waiters), run on
//!   loom's own executor, each with a planted fault shown caught (a future
//!   pending without its waker registered, a cancelled future that
//!   discards its wake-up, a cancelled fair waiter that drops its slot, a
//!   served ticket left queued, a close that wakes nobody). Run them with
//!   `loom-tests/run.sh`. The handle pool and scopes have models of their
//!   own (a stale handle racing a remove and a re-insert, an eviction by
//!   age or by key racing a reader, a scope's batch return racing an
//!   acquire, an entry retired at its last generation under a reader),
//!   each with a planted fault shown caught (a remove that keeps the
//!   generation, an eviction that ignores readers, a retired entry given
//!   back to the free list, a scope that resets its values after pushing
//!   them). The starvation bound has models of a
//!   starving waiter (a blocked thread, and a task whose wake-up found its
//!   slot taken) handed a slot while another thread barges, of a
//!   cancelled starving task passing its handed slot on, and of a
//!   hand-off that must keep a listener's waiter flag, each with a planted
//!   fault shown caught (a starving count taken after the flag CAS, a
//!   barging pool's ticket queue that clears the flag).
//! - A property test runs random sequences on the handle pool against a
//!   single-threaded slot map (eviction choice, deferred removal, drops).
//! - [miri](https://github.com/rust-lang/miri) runs the unit and
//!   integration tests with strict provenance, and ThreadSanitizer runs the
//!   multi-threaded ones, in the repository's CI (`.ci/run`).
//!
//! # Comparison with similar crates
//!
//! | crate | storage | thread-safe acquire | when empty | notes |
//! |-------|---------|---------------------|------------|-------|
//! | `tagpool` | slab in segments that never move: all at build, or doubling on demand up to the capacity | lock-free: per-thread caches, one CAS on a tagged index head behind them | `Err`, or wait: blocking (with timeout) or async, barging or fair | exact capacity up to `2^32 - 2`; owned guards; `close`; `trim`; runtime-agnostic async; loom-checked; no thread limit |
//! | [`deadpool`](https://docs.rs/deadpool) `unmanaged::Pool` | `Mutex<VecDeque>` of values behind a tokio `Semaphore` | locked | async `get().await` (FIFO, as the semaphore), `try_get`, `timeout_get` | async-first (timeouts need a runtime feature); `close`; values added with `add` and resizable; the managed pool creates and recycles connections |
//! | [`sharded-slab`](https://docs.rs/sharded-slab) `Pool` | per-thread shards of growing pages | lock-free | grows | keys instead of guards (release with `clear(key)`); panics past a fixed number of threads |
//! | [`sharded-slab`](https://docs.rs/sharded-slab) `Slab` (keys) | the same shards; `usize` keys packing thread id, page, slot and generation | lock-free; `get` is a counted shared read | `insert` → `None` only when the thread's shards are full | closest to [`HandlePool`]: deferred removal while read, `take` waits for readers; no eviction; fewer generation bits; panics past a fixed number of threads |
//! | [`slotmap`](https://docs.rs/slotmap) `SlotMap` | one `Vec` of slots; `Copy` keys of index and 32-bit version | single-threaded (`&mut self` to insert and remove; wrap it in a lock to share) | grows | the classic generational arena: stale keys answer `None`; no eviction, no capacity bound; [`HandlePool`] is its concurrent, bounded counterpart |
//! | [`lockfree-object-pool`](https://docs.rs/lockfree-object-pool) | linked list / spin lock | lock-free or spin lock | allocates a new value (grows without bound) | no `try_`; no capacity bound |
//! | [`object-pool`](https://docs.rs/object-pool) | `Vec` behind a `parking_lot::Mutex` | locked | `try_pull` → `None`, or `pull` with a fallback | values move in and out of the `Vec` |
//! | [`heapless`](https://docs.rs/heapless) `pool` | static memory, Treiber stack | lock-free (tagged pointers, LL/SC on ARM) | `None` | `no_std`; one static pool per type; tagged pointers need a 128-bit or offset trick on 64-bit targets |
//! | [`crossbeam-queue`](https://docs.rs/crossbeam-queue) `ArrayQueue` | bounded ring of values | lock-free | `None` | a queue, not a pool: values are copied in and out; a consumer can wait for a preempted producer; no guards |
//!
//! `opool` is an `ArrayQueue` of values with guards around it. The benchmark
//! crate in the repository measures all of them on the same workloads.
//!
#![doc = include_str!("docs/send_and_sync.md")]
//! # Unwind safety
//!
//! [`Pool`], [`IndexPool`] and [`HandlePool`] are
//! [`UnwindSafe`](std::panic::UnwindSafe) and
//! [`RefUnwindSafe`](std::panic::RefUnwindSafe), as crossbeam's
//! `ArrayQueue` and std's `Mutex` are, so `catch_unwind` takes a closure
//! that uses one without `AssertUnwindSafe`: whatever panics, user code
//! included, the pool's own state stays consistent (see [Panics in user
//! code](#panics-in-user-code)). What a panic can leave behind is a value:
//!
//! - A [`Pool`] lends each value to one holder at a time, so it asks only
//!   `T: UnwindSafe`, as `Sync` asks only `T: Send`. A holder that unwinds
//!   cannot pass a half-updated value on behind a [reset
//!   closure](Builder::reset): the value is dropped and the slot refilled,
//!   as a `Mutex` poisons. Without a reset closure every value comes back
//!   as its last holder left it, after an unwind as after any release.
//! - A [`HandlePool`] shares values by `&T`, so its `RefUnwindSafe` asks
//!   `T: RefUnwindSafe` too, as `Arc<T>` does: a `Cell` set half way by
//!   code that panicked would be seen by the next reader.
//! - Guards are unwind safe as a `Box<T>` is (`T: UnwindSafe`, and
//!   `T: RefUnwindSafe` for a shared one); index guards always are.
//!
//! ```
//! let pool = tagpool::Pool::builder(|| vec![0u8; 4])
//!     .capacity(1)
//!     .reset(|buf: &mut Vec<u8>| buf.fill(0))
//!     .build()?;
//! let caught = std::panic::catch_unwind(|| {
//!     let mut buf = pool.try_acquire().unwrap();
//!     buf[0] = 1;
//!     if buf[0] == 1 {
//!         panic!("half way through an update");
//!     }
//! });
//! assert!(caught.is_err());
//! assert_eq!(*pool.try_acquire().unwrap(), [0; 4], "dropped, made anew");
//! # Ok::<(), tagpool::BuildError>(())
//! ```
//!
//! ```compile_fail
//! // A `dyn FnMut` may hold a `&mut` or a `RefCell`: not `UnwindSafe`, so
//! // neither is a pool of boxed callbacks.
//! let pool = tagpool::Pool::new(1, || Box::new(|| ()) as Box<dyn FnMut() + Send>);
//! let _ = std::panic::catch_unwind(|| pool.try_acquire().is_ok());
//! ```
//!
//! ```compile_fail
//! // Two threads may read one value of a handle pool: of `Cell`s, it is
//! // not `RefUnwindSafe`.
//! let pool = tagpool::HandlePool::new(1);
//! let h = pool.insert(std::cell::Cell::new(0)).unwrap();
//! let _ = std::panic::catch_unwind(|| pool.with(h, |c| c.set(1)));
//! ```
//!
//! ```compile_fail
//! // A shared guard gives out `&T`: of a `Cell`, not `RefUnwindSafe`.
//! let pool = tagpool::Pool::new(1, || std::cell::Cell::new(0));
//! let guard = pool.try_acquire().unwrap();
//! let _ = std::panic::catch_unwind(|| guard.get());
//! ```
//!
//! # Feature flags
//!
//! - `serde` (off by default): `Serialize` and `Deserialize` for [`Handle`]
//!   and for the key types of [`new_key_type!`], as the handle's 64 bits
//!   ([`Handle::to_bits`]), a `u64`: to save a game, or send a handle over
//!   the network. Deserializing bits of generation 0, which no pool hands
//!   out, is an error. A whole [`HandlePool`] saves and loads (its values
//!   under their keys, stale keys staying stale, the order of reuse), and
//!   so do [`SecondaryMap`] and [`SparseSecondaryMap`]. It needs only
//!   `serde` without its `std` or `derive` features, and keeps the MSRV.
//! - `rayon` (off by default): parallel iteration over a [`HandlePool`]
//!   borrowed `&mut` (`par_iter`, `par_iter_mut`, `par_values`,
//!   `par_values_mut`), on rayon's thread
//!   pool. rayon 1.10 with rayon-core 1.12 support Rust 1.63; their newer
//!   releases need 1.80 (`cargo update -p rayon --precise 1.10.0` and
//!   `-p rayon-core --precise 1.12.1` on an older compiler).
//! - `loom`: for this crate's own model checking only. Together with
//!   `RUSTFLAGS="--cfg loom"` it swaps the atomics and value cells for loom's.
//!   The `loom` cfg alone does not switch tagpool.
//!
//! # Supported targets
//!
//! Any target with 64-bit atomics (`target_has_atomic = "64"`): the free
//! list's head is one 64-bit word (index, tag and flags, changed by one
//! compare-and-swap), and the statistics are 64-bit counters. That is
//! every 64-bit target, and 32-bit x86 and ARMv7 among others; CI
//! type-checks x86-64 and aarch64 Linux, ARMv7 and i686 Linux, Windows and
//! macOS (step `targets`). Targets without them (32-bit PowerPC, MIPS and
//! RISC-V, ARMv6-M and other microcontrollers) stop at a `compile_error!` that names the requirement:
//! emulating the head with a lock (as `portable-atomic` would there) would
//! make the pool neither lock-free nor fast. The per-thread caches' cheap
//! barrier needs Linux `membarrier`; elsewhere both halves are `SeqCst`
//! fences (correct, and a little slower).
//!
//! # Minimum supported Rust version
//!
//! Rust 1.63, the `rustc` that Debian 12 (bookworm) packages. CI builds the
//! crate with that very compiler and runs the whole test suite on it
//! (dependencies resolved to versions that support 1.63). Raising it is a
//! minor-version change.
//!
//! A fresh resolve by a cargo that ignores `rust-version` (Debian 12's, and
//! any before 1.84) picks the newest `libc`, which declares Rust 1.65 from
//! 0.2.184 on; with Rust 1.63 run once, after the first resolve:
//!
//! ```text
//! cargo update -p libc --precise 0.2.183
//! ```
//!
//! (with cargo 1.84 or newer,
//! `CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo update` picks
//! it by itself). The library's other dependencies support 1.63 at their
//! newest versions (checked in CI, step `msrv-fresh`).

#![deny(unsafe_op_in_unsafe_fn)]
#![doc(test(attr(deny(warnings))))]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(not(target_has_atomic = "64"))]
compile_error!(
    "tagpool needs 64-bit atomics (target_has_atomic = \"64\"), which this target lacks: \
     see \"Supported targets\" in the crate docs"
);

mod buffer;
mod engine;
mod error;
mod handle;
pub mod implementation;
mod index;
mod pool;
mod secondary;
mod stats;
mod sync;

pub use crate::error::{
    AcquireError, AcquireTimeoutError, AttachError, BuildError, CapacityError, InsertAtError,
    InsertError, TryAcquireError,
};
pub use crate::pool::{Acquire, AcquireOwned};

/// Head CASes of the calling thread since the last call: `[failed pops,
/// failed pushes, successes, other failures]`.
///
/// Exists only in builds with `RUSTFLAGS="--cfg tagpool_cas_stats"`, for the
/// benchmark crate's contention measurements. Not part of the API.
#[cfg(tagpool_cas_stats)]
#[doc(hidden)]
pub fn __take_cas_retries() -> [u64; 4] {
    crate::engine::free_list::cas_stats::take()
}

/// Makes the pool's next segment allocation panic, in any pool: the fault
/// that the loom model `grow::unwound_growth_gives_its_claim_back` injects.
///
/// Exists only in loom builds (`--cfg loom` and the `loom` feature). Not
/// part of the API.
#[cfg(all(loom, feature = "loom"))]
#[doc(hidden)]
pub fn __loom_fail_next_growth() {
    crate::engine::segment::fault::fail_next_allocation();
}

/// The README's example, compiled and run as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
pub use crate::handle::{
    Drain, Exclusive, Handle, HandleBuilder, HandleIter, HandlePool, HandleStats, IterMut, Key,
    Keys, OwnedRef, ReadSection, Ref, Reservation, SectionIter, TakeError, Values, ValuesMut,
    MAX_HANDLE_CAPACITY,
};

/// What the macros expand to (`new_key_type!`'s `serde` impls). Not part
/// of the API.
#[doc(hidden)]
pub mod __private {
    #[cfg(feature = "serde")]
    pub use serde;
}
pub use crate::buffer::{
    BufferGuard, BufferPool, BufferPoolBuilder, BufferStats, ClassStats, OwnedBufferGuard,
};
pub use crate::handle::HandleIntoIter;
pub use crate::index::{
    AcquireIndex, AcquireOwnedIndex, IndexBuilder, IndexGuard, IndexPool, IndexStats,
    OwnedIndexGuard,
};
pub use crate::pool::Scope;
pub use crate::pool::{Builder, IntoIter, Pool, MAX_CAPACITY};
pub use crate::pool::{OwnedPoolGuard, PoolGuard, SharedPoolGuard};
pub use crate::secondary::{
    Entry, OccupiedEntry, SecondaryDrain, SecondaryIntoIter, SecondaryIter, SecondaryIterMut,
    SecondaryKeys, SecondaryMap, SecondaryValues, SecondaryValuesMut, SparseSecondaryMap,
    VacantEntry,
};
pub use crate::stats::{Stats, WaitHistogram};
