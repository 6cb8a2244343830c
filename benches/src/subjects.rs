//! The implementations under test, each behind [`Subject`] (borrowed use on
//! threads that share it) and, where it can, [`Handoff`] (a `'static` value
//! released on another thread), used the way their authors document.
//!
//! No pool has a reset closure or hook doing work: the [touch](Payload::touch)
//! itself leaves a payload ready for reuse, so every implementation does the
//! same work per operation.
//!
//! [`each_subject`] and [`each_handoff`] are the one list of implementations:
//! the bench target and the `latency` binary both walk it, so that a new peer
//! is added in one place. A peer that only exists for one payload (zeropool, a
//! pool of byte buffers) is listed by that payload's
//! [`Payload::own_subjects`] and [`Payload::own_handoffs`].

use std::fmt::Debug;
use std::hint::black_box;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};

use crossbeam_queue::ArrayQueue;

use crate::names;

/// The workloads never hold more than 260 of the 1024 values at once
/// (`burst256` holds 256, `asym` at most 4 × 64 in its channels plus one
/// per thread, `hold16` 16 × 9), about a quarter of the capacity, so a
/// fixed-capacity pool never runs out. (The `small` rows, on pools of their
/// own capacity, and every workload with threads sharing a pool acquire
/// through [`Subject::try_acquire`].)
const NEVER_EMPTY: &str = "workloads hold at most 260 of the 1024 values";

/// The value a pool holds.
pub trait Payload: Sized + Send + Sync + Debug + 'static {
    /// The payload column of the table.
    const NAME: &'static str;

    /// A fresh heap allocation of this payload, for the `alloc` peer.
    type Fresh: Send;

    /// A new value, as a pool's factory makes it.
    fn make() -> Self;

    /// A new value on the heap: what a program without a pool allocates.
    fn fresh() -> Self::Fresh;

    /// The payload in a fresh allocation.
    fn of_fresh(fresh: &mut Self::Fresh) -> &mut Self;

    /// The workloads' use of a value: one small write.
    fn touch(&mut self, v: u64);

    /// Visits the implementations that exist for this payload only, after
    /// the generic ones of [`each_subject`]. None by default.
    fn own_subjects(_each: &mut impl EachSubject<Self>) {}

    /// Visits the [`Handoff`] implementations that exist for this payload
    /// only, after the generic ones of [`each_handoff`]. None by default.
    fn own_handoffs(_each: &mut impl EachHandoff<Self>) {}
}

impl Payload for [u64; 8] {
    const NAME: &'static str = "64B";
    type Fresh = Box<Self>;

    fn make() -> Self {
        [0; 8]
    }

    fn fresh() -> Box<Self> {
        // `black_box` keeps the allocation: LLVM may remove a `Box` that
        // never escapes.
        black_box(Box::new([0; 8]))
    }

    #[inline]
    fn of_fresh(fresh: &mut Box<Self>) -> &mut Self {
        fresh
    }

    #[inline]
    fn touch(&mut self, v: u64) {
        self[0] = v;
    }
}

/// A buffer with capacity 4096.
impl Payload for Vec<u8> {
    const NAME: &'static str = "vec4096";
    type Fresh = Self;

    fn make() -> Self {
        Vec::with_capacity(4096)
    }

    fn fresh() -> Self {
        black_box(Vec::with_capacity(4096))
    }

    #[inline]
    fn of_fresh(fresh: &mut Self) -> &mut Self {
        fresh
    }

    /// Writes one byte at the start of the buffer; the clear keeps the
    /// length at most 1 and the capacity at 4096.
    #[inline]
    fn touch(&mut self, v: u64) {
        self.clear();
        self.push(v as u8);
    }

    /// zeropool, a pool of byte buffers.
    fn own_subjects(each: &mut impl EachSubject<Self>) {
        each.visit::<zeropool::ZeroPool>();
    }

    /// zeropool, from a `'static` pool.
    fn own_handoffs(each: &mut impl EachHandoff<Self>) {
        each.visit::<StaticZeroPool>();
    }
}

/// An implementation shared by reference between the threads of a workload.
pub trait Subject<P: Payload>: Sync + Sized {
    /// The benchmark name, from [`names`].
    const NAME: &'static str;

    /// What an acquire gives: a guard, or the value itself.
    type Item<'a>
    where
        Self: 'a;

    /// A pool of `capacity` values ([`CAPACITY`](crate::CAPACITY) in the
    /// suite, the row's own in the `small` rows), ready for use (pools that
    /// grow are pre-warmed to that size).
    fn build(capacity: usize) -> Self;

    /// Takes a value; panics if the pool refuses (the one-thread workloads
    /// that call it hold at most 256 of the 1024 values).
    fn acquire(&self) -> Self::Item<'_>;

    /// Takes a value if the pool gives one now, `None` if it refuses. The
    /// workloads with threads sharing the pool acquire through this and
    /// retry a refusal: in the `small` rows the threads hold the whole
    /// capacity between them, and with many threads a pool's per-thread
    /// caches may keep free values out of reach for a moment. The default
    /// is for pools that never refuse: they create a value when they have
    /// none free.
    fn try_acquire(&self) -> Option<Self::Item<'_>> {
        Some(self.acquire())
    }

    /// [Touches](Payload::touch) an acquired value with `v`: the payload's
    /// own touch, or for a pool with a buffer type of its own, the closest
    /// equivalent that type allows (said at the implementation).
    fn touch(item: &mut Self::Item<'_>, v: u64);

    /// Gives a value back.
    fn release(&self, item: Self::Item<'_>);
}

/// An implementation whose values can be acquired on one thread and released
/// on another: a `'static` owned guard, or the value itself.
pub trait Handoff<P: Payload>: Send + Sync + Sized {
    /// The benchmark name, from [`names`].
    const NAME: &'static str;

    /// What travels through the channel.
    type Owned: Send + 'static;

    /// A pool of `capacity` values, shared through an `Arc`.
    fn build(capacity: usize) -> Arc<Self>;

    /// Takes a value and [touches](Payload::touch) it with `v`, on the
    /// producing thread.
    fn produce(self: &Arc<Self>, v: u64) -> Self::Owned;

    /// Gives a value back, on the consuming thread.
    fn release_owned(&self, owned: Self::Owned);
}

/// A task run once per [`Subject`] implementation for payload `P`, by
/// [`each_subject`].
pub trait EachSubject<P: Payload> {
    /// Runs the task with the implementation `S`.
    fn visit<S: Subject<P>>(&mut self);
}

/// A task run once per [`Handoff`] implementation for payload `P`, by
/// [`each_handoff`].
pub trait EachHandoff<P: Payload> {
    /// Runs the task with the implementation `H`.
    fn visit<H: Handoff<P>>(&mut self);
}

/// Visits every thread-safe [`Subject`] for payload `P` (floors are no
/// `Subject`), in the table's column order: tagpool, the pools, the pools of
/// this payload only, then `alloc`.
pub fn each_subject<P: Payload>(each: &mut impl EachSubject<P>) {
    each.visit::<tagpool::Pool<P>>();
    each.visit::<Elastic<P>>();
    each.visit::<Mutex<Vec<P>>>();
    each.visit::<ArrayQueue<P>>();
    each.visit::<lockfree_object_pool::LinearObjectPool<P>>();
    each.visit::<lockfree_object_pool::SpinLockObjectPool<P>>();
    each.visit::<object_pool::Pool<P>>();
    each.visit::<sharded_slab::Pool<Slabbed<P>>>();
    each.visit::<Opool<P>>();
    each.visit::<deadpool::unmanaged::Pool<P>>();
    P::own_subjects(each);
    each.visit::<Alloc<P>>();
}

/// Visits every [`Handoff`] for payload `P`, in the table's column order.
pub fn each_handoff<P: Payload>(each: &mut impl EachHandoff<P>) {
    each.visit::<tagpool::Pool<P>>();
    each.visit::<Mutex<Vec<P>>>();
    each.visit::<ArrayQueue<P>>();
    each.visit::<lockfree_object_pool::LinearObjectPool<P>>();
    each.visit::<lockfree_object_pool::SpinLockObjectPool<P>>();
    each.visit::<object_pool::Pool<P>>();
    each.visit::<sharded_slab::Pool<Slabbed<P>>>();
    each.visit::<Opool<P>>();
    each.visit::<deadpool::unmanaged::Pool<P>>();
    P::own_handoffs(each);
    each.visit::<Alloc<P>>();
}

// ---------------------------------------------------------------- tagpool

impl<P: Payload> Subject<P> for tagpool::Pool<P> {
    const NAME: &'static str = names::TAGPOOL;
    type Item<'a> = tagpool::PoolGuard<'a, P>;

    fn build(capacity: usize) -> Self {
        tagpool::Pool::new(capacity, P::make)
    }

    #[inline]
    fn acquire(&self) -> Self::Item<'_> {
        tagpool::Pool::try_acquire(self).expect(NEVER_EMPTY)
    }

    /// `Exhausted` is the refusal; the pool is never closed.
    #[inline]
    fn try_acquire(&self) -> Option<Self::Item<'_>> {
        tagpool::Pool::try_acquire(self).ok()
    }

    #[inline]
    fn touch(item: &mut Self::Item<'_>, v: u64) {
        P::touch(item, v);
    }

    #[inline]
    fn release(&self, item: Self::Item<'_>) {
        drop(item);
    }
}

impl<P: Payload> Handoff<P> for tagpool::Pool<P> {
    const NAME: &'static str = names::TAGPOOL;
    type Owned = tagpool::OwnedPoolGuard<P>;

    fn build(capacity: usize) -> Arc<Self> {
        Arc::new(tagpool::Pool::new(capacity, P::make))
    }

    #[inline]
    fn produce(self: &Arc<Self>, v: u64) -> Self::Owned {
        let mut owned = self.try_acquire_owned().expect(NEVER_EMPTY);
        owned.touch(v);
        owned
    }

    #[inline]
    fn release_owned(&self, owned: Self::Owned) {
        drop(owned);
    }
}

/// tagpool's elastic pool, grown to its capacity before the benchmark: it
/// starts with a sixteenth of the slots and doubles (64, 128, 256, 512 and
/// 1024 at the suite's capacity), so most slots live past the first segment
/// and take the segmented lookup. Measures what elastic storage costs on the
/// fast path against [`names::TAGPOOL`] (all slots in one segment).
///
/// Its values are wrapped in a type of its own ([`Own`]) so that the pool's
/// functions are compiled apart from the `tagpool` column's: sharing them,
/// each gets two callers, and the compiler stops inlining `try_acquire` into
/// either benchmark loop (measured: 5.3 ns instead of 3.9 for `st/64B`).
#[derive(Debug)]
pub struct Elastic<P>(tagpool::Pool<Own<P>>);

/// A payload of the elastic subject only (see [`Elastic`]).
#[derive(Debug)]
#[repr(transparent)]
pub struct Own<P>(P);

impl<P: Payload> Subject<P> for Elastic<P> {
    const NAME: &'static str = names::TAGPOOL_ELASTIC;
    type Item<'a> = tagpool::PoolGuard<'a, Own<P>>;

    fn build(capacity: usize) -> Self {
        let pool = tagpool::Pool::builder(|| Own(P::make()))
            .capacity(capacity)
            .initial((capacity / 16).max(1))
            .build()
            .expect("a valid elastic pool");
        let all: Vec<_> = (0..capacity)
            .map(|_| pool.try_acquire().expect(NEVER_EMPTY))
            .collect();
        drop(all);
        assert_eq!(pool.stats().allocated, capacity);
        Elastic(pool)
    }

    #[inline]
    fn acquire(&self) -> Self::Item<'_> {
        self.0.try_acquire().expect(NEVER_EMPTY)
    }

    #[inline]
    fn try_acquire(&self) -> Option<Self::Item<'_>> {
        self.0.try_acquire().ok()
    }

    #[inline]
    fn touch(item: &mut Self::Item<'_>, v: u64) {
        P::touch(&mut item.0, v);
    }

    #[inline]
    fn release(&self, item: Self::Item<'_>) {
        drop(item);
    }
}

// ---------------------------------------------------------------- Mutex<Vec<T>>

/// Pop and push under `std::sync::Mutex`; a poisoned lock cannot happen (no
/// code that panics runs under it), and would not harm a `Vec` of values.
impl<P: Payload> Subject<P> for Mutex<Vec<P>> {
    const NAME: &'static str = names::MUTEX_VEC;
    type Item<'a> = P;

    fn build(capacity: usize) -> Self {
        Mutex::new((0..capacity).map(|_| P::make()).collect())
    }

    #[inline]
    fn acquire(&self) -> P {
        let value = self.lock().unwrap_or_else(PoisonError::into_inner).pop();
        value.expect(NEVER_EMPTY)
    }

    #[inline]
    fn try_acquire(&self) -> Option<P> {
        self.lock().unwrap_or_else(PoisonError::into_inner).pop()
    }

    #[inline]
    fn touch(item: &mut P, v: u64) {
        item.touch(v);
    }

    #[inline]
    fn release(&self, item: P) {
        self.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(item);
    }
}

impl<P: Payload> Handoff<P> for Mutex<Vec<P>> {
    const NAME: &'static str = names::MUTEX_VEC;
    type Owned = P;

    fn build(capacity: usize) -> Arc<Self> {
        Arc::new(<Self as Subject<P>>::build(capacity))
    }

    #[inline]
    fn produce(self: &Arc<Self>, v: u64) -> P {
        let mut owned = Subject::acquire(&**self);
        owned.touch(v);
        owned
    }

    #[inline]
    fn release_owned(&self, owned: P) {
        Subject::release(self, owned);
    }
}

// ---------------------------------------------------------------- ArrayQueue<T>

impl<P: Payload> Subject<P> for ArrayQueue<P> {
    const NAME: &'static str = names::ARRAY_QUEUE;
    type Item<'a> = P;

    fn build(capacity: usize) -> Self {
        let queue = ArrayQueue::new(capacity);
        for _ in 0..capacity {
            queue
                .push(P::make())
                .expect("the queue has room for its capacity");
        }
        queue
    }

    #[inline]
    fn acquire(&self) -> P {
        self.pop().expect(NEVER_EMPTY)
    }

    #[inline]
    fn try_acquire(&self) -> Option<P> {
        self.pop()
    }

    #[inline]
    fn touch(item: &mut P, v: u64) {
        item.touch(v);
    }

    #[inline]
    fn release(&self, item: P) {
        self.push(item)
            .expect("a value taken from the queue fits back in");
    }
}

impl<P: Payload> Handoff<P> for ArrayQueue<P> {
    const NAME: &'static str = names::ARRAY_QUEUE;
    type Owned = P;

    fn build(capacity: usize) -> Arc<Self> {
        Arc::new(<Self as Subject<P>>::build(capacity))
    }

    #[inline]
    fn produce(self: &Arc<Self>, v: u64) -> P {
        let mut owned = Subject::acquire(&**self);
        owned.touch(v);
        owned
    }

    #[inline]
    fn release_owned(&self, owned: P) {
        Subject::release(self, owned);
    }
}

// ---------------------------------------------------------------- lockfree-object-pool

/// The reset callback both lockfree-object-pool pools require: nothing to do,
/// the touch resets.
fn no_reset<P>(_: &mut P) {}

/// Pulls `capacity` values at once and drops them, so that a pool that grows
/// on demand holds the same number of values as the fixed-capacity ones.
fn prewarm<G>(capacity: usize, mut pull: impl FnMut() -> G) {
    let held: Vec<G> = (0..capacity).map(|_| pull()).collect();
    drop(held);
}

impl<P: Payload> Subject<P> for lockfree_object_pool::LinearObjectPool<P> {
    const NAME: &'static str = names::LOCKFREE_LINEAR;
    type Item<'a> = lockfree_object_pool::LinearReusable<'a, P>;

    fn build(capacity: usize) -> Self {
        let pool = lockfree_object_pool::LinearObjectPool::new(P::make, no_reset);
        prewarm(capacity, || pool.pull());
        pool
    }

    #[inline]
    fn acquire(&self) -> Self::Item<'_> {
        self.pull()
    }

    #[inline]
    fn touch(item: &mut Self::Item<'_>, v: u64) {
        P::touch(item, v);
    }

    #[inline]
    fn release(&self, item: Self::Item<'_>) {
        drop(item);
    }
}

impl<P: Payload> Handoff<P> for lockfree_object_pool::LinearObjectPool<P> {
    const NAME: &'static str = names::LOCKFREE_LINEAR;
    type Owned = lockfree_object_pool::LinearOwnedReusable<P>;

    fn build(capacity: usize) -> Arc<Self> {
        Arc::new(<Self as Subject<P>>::build(capacity))
    }

    #[inline]
    fn produce(self: &Arc<Self>, v: u64) -> Self::Owned {
        let mut owned = self.pull_owned();
        owned.touch(v);
        owned
    }

    #[inline]
    fn release_owned(&self, owned: Self::Owned) {
        drop(owned);
    }
}

impl<P: Payload> Subject<P> for lockfree_object_pool::SpinLockObjectPool<P> {
    const NAME: &'static str = names::LOCKFREE_SPINLOCK;
    type Item<'a> = lockfree_object_pool::SpinLockReusable<'a, P>;

    fn build(capacity: usize) -> Self {
        let pool = lockfree_object_pool::SpinLockObjectPool::new(P::make, no_reset);
        prewarm(capacity, || pool.pull());
        pool
    }

    #[inline]
    fn acquire(&self) -> Self::Item<'_> {
        self.pull()
    }

    #[inline]
    fn touch(item: &mut Self::Item<'_>, v: u64) {
        P::touch(item, v);
    }

    #[inline]
    fn release(&self, item: Self::Item<'_>) {
        drop(item);
    }
}

impl<P: Payload> Handoff<P> for lockfree_object_pool::SpinLockObjectPool<P> {
    const NAME: &'static str = names::LOCKFREE_SPINLOCK;
    type Owned = lockfree_object_pool::SpinLockOwnedReusable<P>;

    fn build(capacity: usize) -> Arc<Self> {
        Arc::new(<Self as Subject<P>>::build(capacity))
    }

    #[inline]
    fn produce(self: &Arc<Self>, v: u64) -> Self::Owned {
        let mut owned = self.pull_owned();
        owned.touch(v);
        owned
    }

    #[inline]
    fn release_owned(&self, owned: Self::Owned) {
        drop(owned);
    }
}

// ---------------------------------------------------------------- object-pool

impl<P: Payload> Subject<P> for object_pool::Pool<P> {
    const NAME: &'static str = names::OBJECT_POOL;
    type Item<'a> = object_pool::Reusable<'a, P>;

    fn build(capacity: usize) -> Self {
        object_pool::Pool::new(capacity, P::make)
    }

    #[inline]
    fn acquire(&self) -> Self::Item<'_> {
        self.try_pull().expect(NEVER_EMPTY)
    }

    #[inline]
    fn try_acquire(&self) -> Option<Self::Item<'_>> {
        self.try_pull()
    }

    #[inline]
    fn touch(item: &mut Self::Item<'_>, v: u64) {
        P::touch(item, v);
    }

    #[inline]
    fn release(&self, item: Self::Item<'_>) {
        drop(item);
    }
}

impl<P: Payload> Handoff<P> for object_pool::Pool<P> {
    const NAME: &'static str = names::OBJECT_POOL;
    type Owned = object_pool::ReusableOwned<P>;

    fn build(capacity: usize) -> Arc<Self> {
        Arc::new(object_pool::Pool::new(capacity, P::make))
    }

    #[inline]
    fn produce(self: &Arc<Self>, v: u64) -> Self::Owned {
        let mut owned = self.try_pull_owned().expect(NEVER_EMPTY);
        owned.touch(v);
        owned
    }

    #[inline]
    fn release_owned(&self, owned: Self::Owned) {
        drop(owned);
    }
}

// ---------------------------------------------------------------- sharded-slab

/// sharded-slab makes values with `Default` and resets them with `Clear`;
/// this wrapper gives a payload both. `Clear` does nothing, like every other
/// pool's reset here.
#[derive(Debug)]
pub struct Slabbed<P>(P);

impl<P: Payload> Default for Slabbed<P> {
    fn default() -> Self {
        Self(P::make())
    }
}

impl<P> sharded_slab::Clear for Slabbed<P> {
    fn clear(&mut self) {}
}

/// sharded-slab's pool is keyed: `create` checks a slot out (per-thread
/// shards, growing pages), dropping the `RefMut` ends the write access, and
/// `clear(key)` returns the slot, which keeps its value for the next
/// `create`. This is the release its docs show.
impl<P: Payload> Subject<P> for sharded_slab::Pool<Slabbed<P>> {
    const NAME: &'static str = names::SHARDED_SLAB;
    type Item<'a> = sharded_slab::pool::RefMut<'a, Slabbed<P>>;

    fn build(capacity: usize) -> Self {
        let pool: Self = sharded_slab::Pool::new();
        let keys: Vec<usize> = (0..capacity)
            .map(|_| pool.create().expect("sharded-slab grows").key())
            .collect();
        for key in keys {
            pool.clear(key);
        }
        pool
    }

    #[inline]
    fn acquire(&self) -> Self::Item<'_> {
        self.create().expect("sharded-slab grows")
    }

    #[inline]
    fn touch(item: &mut Self::Item<'_>, v: u64) {
        item.0.touch(v);
    }

    #[inline]
    fn release(&self, item: Self::Item<'_>) {
        let key = item.key();
        drop(item);
        self.clear(key);
    }
}

/// Handoff sends the key: `create` and the touch on the producer, `clear`
/// (a remote free into the producer's shard) on the consumer.
impl<P: Payload> Handoff<P> for sharded_slab::Pool<Slabbed<P>> {
    const NAME: &'static str = names::SHARDED_SLAB;
    type Owned = usize;

    fn build(capacity: usize) -> Arc<Self> {
        Arc::new(<Self as Subject<P>>::build(capacity))
    }

    #[inline]
    fn produce(self: &Arc<Self>, v: u64) -> usize {
        let mut item = self.create().expect("sharded-slab grows");
        item.0.touch(v);
        item.key()
    }

    #[inline]
    fn release_owned(&self, key: usize) {
        self.clear(key);
    }
}

// ---------------------------------------------------------------- opool

/// opool's factory: makes payloads, no reset, every value is valid.
#[derive(Debug)]
pub struct Maker<P>(PhantomData<fn() -> P>);

impl<P: Payload> opool::PoolAllocator<P> for Maker<P> {
    fn allocate(&self) -> P {
        P::make()
    }
}

/// The opool pool type for a payload.
pub type Opool<P> = opool::Pool<Maker<P>, P>;

impl<P: Payload> Subject<P> for Opool<P> {
    const NAME: &'static str = names::OPOOL;
    type Item<'a> = opool::RefGuard<'a, Maker<P>, P>;

    fn build(capacity: usize) -> Self {
        opool::Pool::new_prefilled(capacity, Maker(PhantomData))
    }

    #[inline]
    fn acquire(&self) -> Self::Item<'_> {
        self.try_get().expect(NEVER_EMPTY)
    }

    #[inline]
    fn try_acquire(&self) -> Option<Self::Item<'_>> {
        self.try_get()
    }

    #[inline]
    fn touch(item: &mut Self::Item<'_>, v: u64) {
        P::touch(item, v);
    }

    #[inline]
    fn release(&self, item: Self::Item<'_>) {
        drop(item);
    }
}

impl<P: Payload> Handoff<P> for Opool<P> {
    const NAME: &'static str = names::OPOOL;
    type Owned = opool::RcGuard<Maker<P>, P>;

    fn build(capacity: usize) -> Arc<Self> {
        <Self as Subject<P>>::build(capacity).to_rc()
    }

    #[inline]
    fn produce(self: &Arc<Self>, v: u64) -> Self::Owned {
        // opool's owned acquire consumes an `Arc`.
        let mut owned = Arc::clone(self).try_get_rc().expect(NEVER_EMPTY);
        owned.touch(v);
        owned
    }

    #[inline]
    fn release_owned(&self, owned: Self::Owned) {
        drop(owned);
    }
}

// ---------------------------------------------------------------- deadpool

/// deadpool's unmanaged pool, used synchronously: built from `CAPACITY`
/// values (`Pool::from` an exact-size iterator), `try_get` takes one without
/// waiting (a tokio `Semaphore` permit, then a pop from a `Mutex<Vec<T>>`),
/// and dropping the `Object` pushes it back and returns the permit. The
/// `Object` holds a `Weak` to the pool, so it is `'static` and serves as the
/// owned form too.
impl<P: Payload> Subject<P> for deadpool::unmanaged::Pool<P> {
    const NAME: &'static str = names::DEADPOOL;
    type Item<'a> = deadpool::unmanaged::Object<P>;

    fn build(capacity: usize) -> Self {
        deadpool::unmanaged::Pool::from((0..capacity).map(|_| P::make()))
    }

    #[inline]
    fn acquire(&self) -> Self::Item<'_> {
        self.try_get().expect(NEVER_EMPTY)
    }

    /// Without a permit `try_get` answers `PoolError::Timeout` at once (no
    /// timeout is set); the pool is never closed.
    #[inline]
    fn try_acquire(&self) -> Option<Self::Item<'_>> {
        self.try_get().ok()
    }

    #[inline]
    fn touch(item: &mut Self::Item<'_>, v: u64) {
        P::touch(item, v);
    }

    #[inline]
    fn release(&self, item: Self::Item<'_>) {
        drop(item);
    }
}

impl<P: Payload> Handoff<P> for deadpool::unmanaged::Pool<P> {
    const NAME: &'static str = names::DEADPOOL;
    type Owned = deadpool::unmanaged::Object<P>;

    fn build(capacity: usize) -> Arc<Self> {
        Arc::new(<Self as Subject<P>>::build(capacity))
    }

    #[inline]
    fn produce(self: &Arc<Self>, v: u64) -> Self::Owned {
        let mut owned = self.try_get().expect(NEVER_EMPTY);
        owned.touch(v);
        owned
    }

    #[inline]
    fn release_owned(&self, owned: Self::Owned) {
        drop(owned);
    }
}

// ---------------------------------------------------------------- zeropool

/// The buffer size asked of zeropool: the capacity of the `Vec<u8>` payload,
/// and exactly zeropool's smallest size class.
const ZEROPOOL_BUFFER: usize = 4096;

/// A zeropool configured like the other pools: its shared 4 KiB class holds
/// `capacity` buffers and is pre-warmed with as many, so that a burst of 256
/// is served from the pool, not from fresh allocations that its default
/// shared capacity (32 per class on up to 16 CPUs) would discard on return.
/// The per-thread caches keep zeropool's CPU-count default.
fn zeropool(capacity: usize) -> zeropool::ZeroPool {
    let pool = zeropool::ZeroPool::new().max_buffers_per_class(capacity);
    pool.warm(capacity, ZEROPOOL_BUFFER);
    pool
}

/// The closest equivalent of the `Vec<u8>` payload's touch (clear, push one
/// byte) that zeropool's `Buf` allows: it derefs to `[u8]`, not `Vec<u8>`,
/// so its length is fixed at the 4096 asked for; the touch writes the first
/// byte. `alloc(4096)` has already zeroed the 4096 visible bytes, zeropool's
/// safe default (`alloc_uninit` forbids any safe access before every byte
/// is written): a memset per acquire the other pools do not pay.
#[inline]
fn zeropool_touch(buf: &mut zeropool::Buf<'_>, v: u64) {
    buf[0] = v as u8;
}

/// zeropool, for the 4 KiB `Vec<u8>` payload only: a byte-buffer pool with
/// per-thread caches over lock-free shared queues per size class.
/// `alloc(4096)` takes a zeroed buffer, dropping the `Buf` gives it back
/// (to this thread's cache, spilling to the shared queue when full).
impl Subject<Vec<u8>> for zeropool::ZeroPool {
    const NAME: &'static str = names::ZEROPOOL;
    type Item<'a> = zeropool::Buf<'a>;

    fn build(capacity: usize) -> Self {
        zeropool(capacity)
    }

    #[inline]
    fn acquire(&self) -> Self::Item<'_> {
        self.alloc(ZEROPOOL_BUFFER)
    }

    #[inline]
    fn touch(item: &mut Self::Item<'_>, v: u64) {
        zeropool_touch(item, v);
    }

    #[inline]
    fn release(&self, item: Self::Item<'_>) {
        drop(item);
    }
}

/// zeropool with a `'static` pool, for [`Handoff`]: its `Buf` borrows the
/// pool and it has no owned guard, so a buffer that outlives the scope it
/// was taken in needs a pool that lives for the whole program, as a
/// `static LazyLock<ZeroPool>` would. Each build leaks one pool; dropping
/// the handle drains the pool's shared queues, so only the empty pool (and
/// the few buffers left in thread caches) stays behind.
#[derive(Debug)]
pub struct StaticZeroPool(&'static zeropool::ZeroPool);

impl Drop for StaticZeroPool {
    fn drop(&mut self) {
        self.0.drain();
    }
}

impl Handoff<Vec<u8>> for StaticZeroPool {
    const NAME: &'static str = names::ZEROPOOL;
    type Owned = zeropool::Buf<'static>;

    fn build(capacity: usize) -> Arc<Self> {
        Arc::new(Self(Box::leak(Box::new(zeropool(capacity)))))
    }

    #[inline]
    fn produce(self: &Arc<Self>, v: u64) -> Self::Owned {
        let mut owned = self.0.alloc(ZEROPOOL_BUFFER);
        zeropool_touch(&mut owned, v);
        owned
    }

    #[inline]
    fn release_owned(&self, owned: Self::Owned) {
        drop(owned);
    }
}

// ---------------------------------------------------------------- no pool

/// No pool at all: every acquire allocates a fresh payload, every release
/// frees it.
#[derive(Debug)]
pub struct Alloc<P>(PhantomData<fn() -> P>);

impl<P: Payload> Subject<P> for Alloc<P> {
    const NAME: &'static str = names::ALLOC;
    type Item<'a> = P::Fresh;

    fn build(_: usize) -> Self {
        Self(PhantomData)
    }

    #[inline]
    fn acquire(&self) -> P::Fresh {
        P::fresh()
    }

    #[inline]
    fn touch(item: &mut P::Fresh, v: u64) {
        P::of_fresh(item).touch(v);
    }

    #[inline]
    fn release(&self, item: P::Fresh) {
        drop(black_box(item));
    }
}

impl<P: Payload> Handoff<P> for Alloc<P> {
    const NAME: &'static str = names::ALLOC;
    type Owned = P::Fresh;

    fn build(_: usize) -> Arc<Self> {
        Arc::new(Self(PhantomData))
    }

    #[inline]
    fn produce(self: &Arc<Self>, v: u64) -> P::Fresh {
        let mut owned = P::fresh();
        P::of_fresh(&mut owned).touch(v);
        owned
    }

    #[inline]
    fn release_owned(&self, owned: P::Fresh) {
        drop(black_box(owned));
    }
}
