//! The loom/std shim: the only file that names `std::sync::atomic`, `loom`
//! or `thread_local`.
//!
//! Under `cfg(loom)` *and* the `loom` feature, every atomic, fence, value
//! cell and per-thread cache comes from loom (or is made of loom types), so
//! the models in `loom-tests/` check each access. The std side gives
//! [`UnsafeCell`] the same API as loom's (`get_mut` returning a [`MutPtr`]),
//! so the rest of the crate is written once.

#[cfg(all(loom, feature = "loom"))]
pub(crate) use loom::{
    cell::{MutPtr, UnsafeCell},
    sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering},
};

/// `Arc` stays std's in both flavours: `self: &Arc<Self>` receivers (the
/// `*_owned` methods) accept only std's `Arc`. Its reference count is not
/// ours to prove; loom still checks every atomic and cell the pool owns.
pub(crate) use std::sync::Arc;

/// Whether an `acquire` on an empty pool spins briefly before parking. Loom
/// models skip the spin: it adds nothing a model can check and multiplies the
/// interleavings.
pub(crate) const SPIN_BEFORE_PARK: bool = cfg!(not(all(loom, feature = "loom")));

#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use std::sync::atomic::{
    compiler_fence, fence, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};

#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use self::std_cell::{MutPtr, UnsafeCell};

#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use self::std_per_thread::PerThread;

#[cfg(all(loom, feature = "loom"))]
pub(crate) use self::loom_per_thread::PerThread;

#[cfg(not(all(loom, feature = "loom")))]
mod std_cell {
    /// `core::cell::UnsafeCell` with loom's API.
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        #[inline]
        pub(crate) const fn new(value: T) -> Self {
            Self(core::cell::UnsafeCell::new(value))
        }

        /// Returns a pointer for a mutable access that lasts as long as the
        /// returned `MutPtr` (loom tracks that span; std does not).
        #[inline]
        pub(crate) fn get_mut(&self) -> MutPtr<T> {
            MutPtr(self.0.get())
        }
    }

    /// A pointer to the inside of an [`UnsafeCell`], as loom's `MutPtr`.
    #[derive(Debug)]
    pub(crate) struct MutPtr<T: ?Sized>(*mut T);

    impl<T: ?Sized> MutPtr<T> {
        /// Runs `f` with the raw pointer.
        #[inline]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0)
        }
    }
}

/// Per-object thread-local storage: `thread_local::ThreadLocal`, which gives
/// each thread its own entry, reuses the ids of exited threads (a new thread
/// adopts the entry an exited one left), allocates in buckets and lets any
/// thread iterate every entry.
#[cfg(not(all(loom, feature = "loom")))]
mod std_per_thread {
    use core::cell::Cell;
    use core::fmt;

    use thread_local::ThreadLocal;

    /// This thread's state towards `thread_local`'s id allocator:
    /// [`FRESH`], [`LIVE`] or [`GONE`]. No destructor, so readable at any
    /// point of thread exit.
    const FRESH: u8 = 0;
    /// This thread holds a `thread_local` id, and [`ExitGuard`] is
    /// registered after the crate's own id guard.
    const LIVE: u8 = 1;
    /// [`ExitGuard`] was dropped: the thread is running its thread-local
    /// destructors, and `thread_local`'s id may be gone.
    const GONE: u8 = 2;

    std::thread_local! {
        static STATE: Cell<u8> = const { Cell::new(FRESH) };
        static EXIT: ExitGuard = const { ExitGuard };
    }

    /// Marks the thread [`GONE`] when its thread-local destructors run.
    ///
    /// Thread-local destructors run in reverse order of registration (std's
    /// own list and glibc's `__cxa_thread_atexit_impl` both do). This guard
    /// is registered just after the thread's first `ThreadLocal::get_or`,
    /// which registers `thread_local`'s id guard, so it is dropped before
    /// that one: while `STATE` is `LIVE`, `get_or` cannot meet a freed id.
    struct ExitGuard;

    impl Drop for ExitGuard {
        fn drop(&mut self) {
            let _ = STATE.try_with(|s| s.set(GONE));
        }
    }

    /// One `T` per thread that asked for one.
    pub(crate) struct PerThread<T: Send> {
        entries: ThreadLocal<T>,
        make: fn() -> T,
    }

    impl<T: Send> PerThread<T> {
        pub(crate) fn new(make: fn() -> T) -> Self {
            Self {
                entries: ThreadLocal::new(),
                make,
            }
        }

        /// This thread's entry, if it has one. Never allocates, never
        /// panics, even during thread exit.
        #[inline]
        pub(crate) fn get(&self) -> Option<&T> {
            self.entries.get()
        }

        /// This thread's entry, made now if it has none; `None` while the
        /// thread runs its thread-local destructors (callers then bypass
        /// the cache).
        #[cold]
        pub(crate) fn get_or_make(&self) -> Option<&T> {
            if STATE.with(Cell::get) == GONE {
                return None;
            }
            let entry = self.entries.get_or(self.make);
            if STATE.with(Cell::get) == FRESH {
                // After `get_or`: see `ExitGuard`.
                EXIT.with(|_| ());
                STATE.with(|s| s.set(LIVE));
            }
            Some(entry)
        }

        /// Every entry, of live and of exited threads.
        pub(crate) fn iter(&self) -> impl Iterator<Item = &T>
        where
            T: Sync,
        {
            self.entries.iter()
        }
    }

    impl<T: Send> fmt::Debug for PerThread<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("PerThread").finish_non_exhaustive()
        }
    }
}

/// Loom runs its threads on one OS thread, so `thread_local` would give them
/// all one entry. This stand-in makes an entry for each loom thread up front
/// (so every cell is created before the model's threads start) and maps
/// loom thread ids to them under a std mutex, which loom does not see: it
/// holds no loom operation, so it adds no interleavings.
#[cfg(all(loom, feature = "loom"))]
mod loom_per_thread {
    use core::fmt;
    use std::sync::Mutex;

    use loom::thread::ThreadId;

    /// loom's limit: the model's main thread and 4 spawned ones.
    const THREADS: usize = 5;

    pub(crate) struct PerThread<T: Send> {
        entries: Box<[T]>,
        owners: Mutex<Vec<ThreadId>>,
    }

    impl<T: Send> PerThread<T> {
        pub(crate) fn new(make: fn() -> T) -> Self {
            Self {
                entries: (0..THREADS).map(|_| make()).collect(),
                owners: Mutex::new(Vec::with_capacity(THREADS)),
            }
        }

        pub(crate) fn get(&self) -> Option<&T> {
            let me = loom::thread::current().id();
            let owners = self.owners.lock().expect("never poisoned");
            owners
                .iter()
                .position(|id| *id == me)
                .map(|i| &self.entries[i])
        }

        pub(crate) fn get_or_make(&self) -> Option<&T> {
            let me = loom::thread::current().id();
            let mut owners = self.owners.lock().expect("never poisoned");
            let i = match owners.iter().position(|id| *id == me) {
                Some(i) => i,
                None => {
                    owners.push(me);
                    owners.len() - 1
                }
            };
            Some(&self.entries[i])
        }

        pub(crate) fn iter(&self) -> impl Iterator<Item = &T>
        where
            T: Sync,
        {
            self.entries.iter()
        }
    }

    impl<T: Send> fmt::Debug for PerThread<T> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("PerThread").finish_non_exhaustive()
        }
    }
}
