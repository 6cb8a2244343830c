//! The async implementations: pools a tokio user would pick, each used the
//! way its docs show, behind one trait so that the criterion group `async`
//! and the `waiting` binary run the same code on each.
//!
//! Every one holds `Vec<u8>` buffers of capacity 4096 (the touch clears the
//! buffer and pushes one byte), at most `capacity` of them, and makes a
//! task that finds none wait without blocking its thread.

use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The pooled buffer.
pub type Buffer = Vec<u8>;

/// A new pooled buffer.
pub fn buffer() -> Buffer {
    Vec::with_capacity(4096)
}

/// Writes to a buffer, as the synchronous workloads' `Vec<u8>` payload.
#[inline]
pub fn touch(buffer: &mut Buffer, v: u64) {
    buffer.clear();
    buffer.push(v as u8);
}

/// An async pool under test.
pub trait AsyncPool: Send + Sync + Sized + 'static {
    /// Its name in reports.
    const NAME: &'static str;
    /// What an acquire gives: a guard, or the value itself.
    type Item: DerefMut<Target = Buffer> + Send + 'static;

    /// A pool of `capacity` buffers, all made now.
    fn build(capacity: usize) -> Arc<Self>;

    /// Waits for a buffer.
    fn acquire(self: &Arc<Self>) -> impl Future<Output = Self::Item> + Send;

    /// Gives the buffer back.
    fn release(self: &Arc<Self>, item: Self::Item) -> impl Future<Output = ()> + Send;
}

/// Visits every [`AsyncPool`].
pub trait EachAsync {
    /// Called once per implementation.
    fn visit<A: AsyncPool>(&mut self);
}

/// Calls `each.visit` for every implementation, tagpool first.
pub fn each_async(each: &mut impl EachAsync) {
    each.visit::<Tagpool>();
    each.visit::<TagpoolFair>();
    each.visit::<Deadpool>();
    each.visit::<SemaphoreVec>();
    each.visit::<AsyncObjectPool>();
}

/// `tagpool::Pool` with `acquire_owned_async`, barging (the default). The
/// pool sits in an `Arc` of its own, as `acquire_owned_async` wants.
pub struct Tagpool(Arc<tagpool::Pool<Buffer>>);

impl AsyncPool for Tagpool {
    const NAME: &'static str = "tagpool";
    type Item = tagpool::OwnedPoolGuard<Buffer>;

    fn build(capacity: usize) -> Arc<Self> {
        Arc::new(Tagpool(Arc::new(tagpool::Pool::new(capacity, buffer))))
    }

    fn acquire(self: &Arc<Self>) -> impl Future<Output = Self::Item> + Send {
        let acquire = self.0.acquire_owned_async();
        async move { acquire.await.expect("never closed") }
    }

    fn release(self: &Arc<Self>, item: Self::Item) -> impl Future<Output = ()> + Send {
        drop(item);
        async {}
    }
}

/// `tagpool::Pool` built with `Builder::fair`.
pub struct TagpoolFair(Arc<tagpool::Pool<Buffer>>);

impl AsyncPool for TagpoolFair {
    const NAME: &'static str = "tagpool_fair";
    type Item = tagpool::OwnedPoolGuard<Buffer>;

    fn build(capacity: usize) -> Arc<Self> {
        let pool = tagpool::Pool::builder(buffer)
            .capacity(capacity)
            .fair()
            .build()
            .expect("a valid capacity");
        Arc::new(TagpoolFair(Arc::new(pool)))
    }

    fn acquire(self: &Arc<Self>) -> impl Future<Output = Self::Item> + Send {
        let acquire = self.0.acquire_owned_async();
        async move { acquire.await.expect("never closed") }
    }

    fn release(self: &Arc<Self>, item: Self::Item) -> impl Future<Output = ()> + Send {
        drop(item);
        async {}
    }
}

/// deadpool's unmanaged pool: `get().await`, the object returns on drop.
/// (A `Mutex<VecDeque>` behind a tokio `Semaphore`.)
pub struct Deadpool(deadpool::unmanaged::Pool<Buffer>);

impl AsyncPool for Deadpool {
    const NAME: &'static str = "deadpool";
    type Item = deadpool::unmanaged::Object<Buffer>;

    fn build(capacity: usize) -> Arc<Self> {
        let pool = deadpool::unmanaged::Pool::new(capacity);
        for _ in 0..capacity {
            pool.try_add(buffer()).expect("below max_size");
        }
        Arc::new(Deadpool(pool))
    }

    fn acquire(self: &Arc<Self>) -> impl Future<Output = Self::Item> + Send {
        let this = Arc::clone(self);
        async move { this.0.get().await.expect("never closed") }
    }

    fn release(self: &Arc<Self>, item: Self::Item) -> impl Future<Output = ()> + Send {
        drop(item);
        async {}
    }
}

/// What a tokio user writes without a pool crate: a `Semaphore` with one
/// permit per buffer in front of a `Mutex<Vec>` of them.
pub struct SemaphoreVec {
    permits: Arc<Semaphore>,
    buffers: Mutex<Vec<Buffer>>,
}

/// A buffer taken from a [`SemaphoreVec`] with its permit. The `Drop`
/// puts the buffer back *before* the permit (a field, dropped after the
/// body) lets the next task in.
pub struct SemaphoreGuard {
    buffer: Option<Buffer>,
    pool: Arc<SemaphoreVec>,
    _permit: OwnedSemaphorePermit,
}

impl Deref for SemaphoreGuard {
    type Target = Buffer;
    fn deref(&self) -> &Buffer {
        self.buffer.as_ref().expect("taken only in drop")
    }
}

impl DerefMut for SemaphoreGuard {
    fn deref_mut(&mut self) -> &mut Buffer {
        self.buffer.as_mut().expect("taken only in drop")
    }
}

impl Drop for SemaphoreGuard {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.pool
                .buffers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(buffer);
        }
    }
}

impl AsyncPool for SemaphoreVec {
    const NAME: &'static str = "semaphore_vec";
    type Item = SemaphoreGuard;

    fn build(capacity: usize) -> Arc<Self> {
        Arc::new(SemaphoreVec {
            permits: Arc::new(Semaphore::new(capacity)),
            buffers: Mutex::new((0..capacity).map(|_| buffer()).collect()),
        })
    }

    fn acquire(self: &Arc<Self>) -> impl Future<Output = Self::Item> + Send {
        let this = Arc::clone(self);
        async move {
            let permit = Arc::clone(&this.permits)
                .acquire_owned()
                .await
                .expect("never closed");
            let buffer = this
                .buffers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop()
                .expect("a permit means a buffer");
            SemaphoreGuard {
                buffer: Some(buffer),
                pool: this,
                _permit: permit,
            }
        }
    }

    fn release(self: &Arc<Self>, item: Self::Item) -> impl Future<Output = ()> + Send {
        drop(item);
        async {}
    }
}

/// The `async-object-pool` crate: `take_or_create(..).await`, then
/// `put(value).await` by hand (it has no guard).
pub struct AsyncObjectPool(async_object_pool::Pool<Buffer>);

/// The value taken from an [`AsyncObjectPool`], owned until `put`.
pub struct Taken(Buffer);

impl Deref for Taken {
    type Target = Buffer;
    fn deref(&self) -> &Buffer {
        &self.0
    }
}

impl DerefMut for Taken {
    fn deref_mut(&mut self) -> &mut Buffer {
        &mut self.0
    }
}

impl AsyncPool for AsyncObjectPool {
    const NAME: &'static str = "async_object_pool";
    type Item = Taken;

    fn build(capacity: usize) -> Arc<Self> {
        // It creates its values on demand, up to `capacity`: the warm-up
        // fills it.
        Arc::new(AsyncObjectPool(async_object_pool::Pool::new(capacity)))
    }

    fn acquire(self: &Arc<Self>) -> impl Future<Output = Self::Item> + Send {
        let this = Arc::clone(self);
        async move { Taken(this.0.take_or_create(buffer).await) }
    }

    fn release(self: &Arc<Self>, item: Self::Item) -> impl Future<Output = ()> + Send {
        let this = Arc::clone(self);
        async move { this.0.put(item.0).await }
    }
}

/// Runs `tasks` tasks on `runtime`, each doing `ops` cycles of acquire,
/// touch, one `yield_now` while holding the buffer (the task's own await
/// point, as a handler awaiting I/O), and release. With fewer buffers than
/// tasks, tasks wait for buffers. `observe` gets each acquire's wait.
pub fn cycles<A: AsyncPool>(
    runtime: &tokio::runtime::Runtime,
    pool: &Arc<A>,
    tasks: usize,
    ops: u64,
    observe: fn(&mut Vec<std::time::Duration>, std::time::Duration),
) -> Vec<std::time::Duration> {
    runtime.block_on(async {
        let handles: Vec<_> = (0..tasks)
            .map(|_| {
                let pool = Arc::clone(pool);
                tokio::spawn(async move {
                    let mut waits = Vec::new();
                    for i in 0..ops {
                        let start = std::time::Instant::now();
                        let mut item = pool.acquire().await;
                        observe(&mut waits, start.elapsed());
                        touch(&mut item, std::hint::black_box(i));
                        tokio::task::yield_now().await;
                        pool.release(item).await;
                    }
                    waits
                })
            })
            .collect();
        let mut all = Vec::new();
        for handle in handles {
            all.extend(handle.await.expect("a task panicked"));
        }
        all
    })
}

/// For [`cycles`]: keep nothing.
pub fn ignore(_: &mut Vec<std::time::Duration>, _: std::time::Duration) {}

/// For [`cycles`]: keep every wait.
pub fn record(waits: &mut Vec<std::time::Duration>, wait: std::time::Duration) {
    waits.push(wait);
}

/// The tokio runtime of the async measurements: multi-threaded, two
/// workers (the machine's two CPUs).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .expect("a tokio runtime")
}

/// `Debug` by name: the pools' own types do not all implement it.
macro_rules! debug_by_name {
    ($($ty:ty => $name:expr),* $(,)?) => {$(
        impl std::fmt::Debug for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($name)
            }
        }
    )*};
}

debug_by_name! {
    Tagpool => Tagpool::NAME,
    TagpoolFair => TagpoolFair::NAME,
    Deadpool => Deadpool::NAME,
    SemaphoreVec => SemaphoreVec::NAME,
    SemaphoreGuard => "SemaphoreGuard",
    AsyncObjectPool => AsyncObjectPool::NAME,
    Taken => "Taken",
}
