//! One pool's state, [`Shared`], and its lifetime: what every face's handle
//! points to, split by concern into the files below.
//!
//! - `take.rs`: taking a free slot without waiting, and filling it;
//! - `release.rs`: giving a guard's slot back (reset, discard, push);
//! - `retire.rs`: the empty slots of a pool without a factory;
//! - `growth.rs`: growing an elastic pool by a segment;
//! - `idle.rs`: what touches idle slots: trim, drain, attach, and a
//!   scope's batch return;
//! - `waiting.rs`: the glue to [`WaitQueue`] (blocking, timed and async
//!   acquires, close);
//! - `stats.rs`: the [`Stats`](crate::Stats) snapshot.
//!
//! This file holds the state, its construction and its lifetime (the
//! handle's drop, owned guards' `finish`).

use core::any::Any;
use core::ptr::NonNull;
use std::time::Duration;

use crossbeam_utils::CachePadded;

use crate::engine::cache::{Cache, Magazine, Settle};
use crate::engine::free_list::{FreeList, Layout};
use crate::engine::segment::Geometry;
use crate::engine::slot::Slots;
use crate::engine::wait::WaitQueue;
use crate::sync::{AtomicU32, AtomicU64, Mutex, Ordering, StatU32};

mod capacity;
mod growth;
mod holds;
mod idle;
mod release;
mod retire;
mod stats;
mod take;
mod waiting;

pub(crate) use self::waiting::untimed;

/// A fallible factory's error, type-erased so that the engine (and
/// `Shared<T>`) has no error type: `Pool::try_builder` boxes the factory's
/// `E` here, on the failure path only, and the face (`Pool<T, E>`, which
/// knows `E`) downcasts it back. It never leaves the thread whose acquire
/// ran the factory, so it needs no `Send`.
pub(crate) type Failure = Box<dyn Any>;

/// The factory that fills an empty slot: an infallible one always returns
/// `Ok` (see `Pool::builder`).
pub(crate) type Factory<T> = Box<dyn Fn() -> Result<T, Failure> + Send + Sync>;
/// The closure that resets a value given back.
pub(crate) type Reset<T> = Box<dyn Fn(&mut T) + Send + Sync>;
/// The predicate that discards a value given back (after its reset).
pub(crate) type Discard<T> = Box<dyn Fn(&T) -> bool + Send + Sync>;

/// What a release runs on the value given back, in this order: the reset,
/// then the discard check. Boxed behind one `Option` in [`Shared`], so that
/// a release without either tests one word.
pub(crate) struct Recycle<T> {
    pub(crate) reset: Option<Reset<T>>,
    pub(crate) discard: Option<Discard<T>>,
}

impl<T> Recycle<T> {
    /// The hooks, boxed, or `None` if there are none and no holds are
    /// tracked (`tracked`: a release then has to end its hold, so it takes
    /// the recycling path, hooks or not).
    pub(crate) fn boxed(
        reset: Option<Reset<T>>,
        discard: Option<Discard<T>>,
        tracked: bool,
    ) -> Option<Box<Self>> {
        if reset.is_none() && discard.is_none() && !tracked {
            return None;
        }
        Some(Box::new(Recycle { reset, discard }))
    }
}

/// The state of a [`Pool`](crate::Pool), allocated apart from the handle.
///
/// # Lifetime
///
/// The handle ([`Pool`](crate::Pool)) and every [`OwnedPoolGuard`](crate::OwnedPoolGuard) keep it alive, without
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
    /// `engine/cache`): use [`cache`](Self::cache) off the fast paths.
    cache: Cache,
    /// The values, indexed like the free list.
    slots: Slots<T>,
    /// `None` for a pool of given values: its emptied slots are retired
    /// (see `retire.rs`) instead of going back to the free list.
    factory: Option<Factory<T>>,
    /// The reset and discard hooks; `None` if the pool has neither and
    /// tracks no holds (a release with hold tracking on takes the
    /// recycling path, so the common release tests one word).
    recycle: Option<Box<Recycle<T>>>,
    /// Hold tracking ([`Builder::hold_limit`](crate::Builder::hold_limit)),
    /// if on.
    holds: Option<Box<self::holds::Holds>>,
    /// The floor of filled idle values ([`Builder::min_idle`](crate::Builder::min_idle));
    /// 0 is none.
    min_idle: u64,
    /// A pool without a factory: its empty slots, on no free list, until
    /// an attach fills one. Always empty in a pool with a factory.
    retired: Mutex<Vec<u32>>,
    /// The number of slots in service ([`Pool::set_capacity`](crate::Pool::set_capacity)):
    /// written under `resize`, read as a snapshot.
    bound: StatU32,
    /// Held by `set_capacity` (see `capacity.rs`).
    resize: Mutex<self::capacity::Resize>,
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

#[derive(Debug)]
struct Counters {
    /// The highest number of slots held at once. Written only when it grows.
    peak: AtomicU32,
    /// `try_acquire` calls that found the pool empty.
    failed: AtomicU64,
    /// Slots holding a value: made at build or by the factory, minus those
    /// detached, trimmed or dropped after a panic.
    filled: AtomicU64,
    /// Values dropped by the discard check on release.
    discarded: AtomicU64,
    /// The length of [`Shared::retired`], for statistics.
    retired: AtomicU64,
}

impl<T> Shared<T> {
    /// The state of a pool built from these parts, its handle's share
    /// counted (see [Lifetime](Shared#lifetime)).
    // The builder's settings, each used once here: a struct for them would
    // only be unpacked again.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        geometry: Geometry,
        cache: Cache,
        slots: Slots<T>,
        factory: Option<Factory<T>>,
        recycle: Option<Box<Recycle<T>>>,
        fair: bool,
        filled: u64,
        hold_limit: Option<Duration>,
    ) -> Self {
        let capacity = geometry.capacity() as usize;
        let mut slots = slots;
        if hold_limit.is_some() {
            slots.track_holds();
        }
        Shared {
            free: FreeList::new(geometry),
            cache,
            slots,
            factory,
            recycle,
            holds: hold_limit.map(|limit| Box::new(self::holds::Holds::new(capacity, limit))),
            min_idle: 0,
            retired: Mutex::new(Vec::new()),
            bound: StatU32::new(geometry.capacity()),
            resize: Mutex::new(self::capacity::Resize::default()),
            waiters: WaitQueue::new(fair),
            counters: CachePadded::new(Counters {
                peak: AtomicU32::new(0),
                failed: AtomicU64::new(0),
                filled: AtomicU64::new(filled),
                discarded: AtomicU64::new(0),
                retired: AtomicU64::new(0),
            }),
            owned: CachePadded::new(AtomicU64::new(HANDLE)),
            #[cfg(all(loom, feature = "loom"))]
            alive: crate::sync::UnsafeCell::new(()),
        }
    }

    /// Sets the floor of filled idle values, before the pool is shared.
    pub(crate) fn set_min_idle(&mut self, min_idle: usize) {
        self.min_idle = min_idle as u64;
    }

    /// The caches, enabled or not, for the unit tests of their protocol.
    #[cfg(test)]
    pub(crate) fn cache_for_tests(&self) -> &Cache {
        &self.cache
    }

    /// The caches, if the pool has them.
    fn cache(&self) -> Option<&Cache> {
        self.cache.enabled().then_some(&self.cache)
    }

    /// The number of slots in service: the bound (see `capacity.rs`).
    #[inline]
    pub(crate) fn capacity(&self) -> usize {
        self.bound()
    }

    /// The most slots the pool can have in service: its storage's size.
    #[inline]
    pub(crate) fn max_capacity(&self) -> usize {
        self.free.capacity() as usize
    }

    /// Whether the pool is closed.
    pub(crate) fn is_closed(&self) -> bool {
        self.free.is_closed()
    }

    /// The per-thread cache size, 0 without caches (for `Debug`).
    pub(crate) fn thread_cache_size(&self) -> usize {
        self.cache().map_or(0, Cache::size)
    }

    /// Whether the pool resets values given back (for `Debug`).
    pub(crate) fn has_reset(&self) -> bool {
        self.recycle.as_ref().map_or(false, |r| r.reset.is_some())
    }

    /// Whether the pool checks values given back for discarding (for
    /// `Debug`).
    pub(crate) fn has_discard(&self) -> bool {
        self.recycle.as_ref().map_or(false, |r| r.discard.is_some())
    }

    /// Whether the pool has a factory (for `Debug`).
    pub(crate) fn has_factory(&self) -> bool {
        self.factory.is_some()
    }

    /// Whether the pool hands slots to waiters in FIFO order (for `Debug`).
    pub(crate) fn is_fair(&self) -> bool {
        self.waiters.is_fair()
    }

    /// Loom only: a read of the state's liveness marker, the last access of
    /// a release to the state before it settles (see [`Shared::alive`]).
    #[inline(always)]
    fn touch(&self) {
        #[cfg(all(loom, feature = "loom"))]
        self.alive.with(|_| ());
    }

    /// Ends the handle's share of the state: seals every magazine and frees
    /// the state if no owned guard is left (see [Lifetime](Shared#lifetime)).
    ///
    /// # Safety
    ///
    /// `ptr` is the state the dropped handle kept alive; no acquire can run
    /// from here on (acquiring needs the handle).
    pub(crate) unsafe fn drop_handle(ptr: NonNull<Self>) {
        // No acquire can run from here on (acquiring needs the handle):
        // only owned guards' releases, on other threads.
        // SAFETY: alive until the `settle` below (the caller's contract).
        let counted = unsafe { ptr.as_ref() }.cache.seal();
        // SAFETY: `ptr` is the state this handle kept alive, and `counted`
        // is the sum of the sealed magazines' counts.
        unsafe { Self::settle(ptr, counted.wrapping_sub(HANDLE)) };
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

    /// The free list, whose link of an index is free for the index's
    /// owner to use while the index is out of the list: a handle pool's
    /// chain of entries awaiting a grace period links through it
    /// ([`FreeList::set_link`], [`FreeList::link_of`]).
    pub(crate) fn free_list(&self) -> &FreeList {
        &self.free
    }

    /// The free list's head layout (for the docs' tag-width statements).
    pub(crate) fn layout(&self) -> Layout {
        self.free.layout()
    }
}
