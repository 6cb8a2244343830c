//! The loom/std shim: the only file that names `std::sync::atomic`, `loom`
//! or `thread_local`.
//!
//! Under `cfg(loom)` *and* the `loom` feature, every atomic, fence, value
//! cell and per-thread cache comes from loom (or is made of loom types), so
//! the models in `loom-tests/` check each access. The std side gives
//! [`UnsafeCell`] the same API as loom's (`get_mut` returning a [`MutPtr`]),
//! so the rest of the crate is written once.

/// A compiler fence has no runtime semantics for loom to model; loom runs
/// never take the branches that use it (see `barrier::light_with`).
#[cfg(all(loom, feature = "loom"))]
pub(crate) use std::sync::atomic::compiler_fence;

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

#[cfg(all(loom, feature = "loom"))]
pub(crate) use loom::thread::yield_now;
/// Lets another thread run while this one waits for a revoker.
#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use std::thread::yield_now;

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
/// thread iterate every entry. In front of it, each thread remembers the
/// last entry it used (a pool id and a pointer), so that a thread working
/// with one pool finds its entry with two thread-local loads and a compare.
#[cfg(not(all(loom, feature = "loom")))]
mod std_per_thread {
    use core::cell::Cell;
    use core::fmt;
    use core::sync::atomic::{AtomicU64, Ordering};

    use thread_local::ThreadLocal;

    /// This thread's state towards `thread_local`'s id allocator. No
    /// destructor, so readable at any point of thread exit.
    const FRESH: u8 = 0;
    /// [`ExitGuard`] is registered, after `thread_local`'s own id guard.
    const LIVE: u8 = 1;
    /// [`ExitGuard`] was dropped: the thread is running its thread-local
    /// destructors, and `thread_local` may free its id at any moment.
    const GONE: u8 = 2;

    /// Ids of `PerThread` instances; 0 is never used.
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);

    std::thread_local! {
        static STATE: Cell<u8> = const { Cell::new(FRESH) };
        /// The id of the `PerThread` this thread used last, and its entry.
        static MEMO: Cell<(u64, *const ())> = const { Cell::new((0, core::ptr::null())) };
        static EXIT: ExitGuard = const { ExitGuard };
    }

    /// Marks the thread [`GONE`] and forgets the memo when the thread's
    /// thread-local destructors run.
    ///
    /// Thread-local destructors run in reverse order of registration (std's
    /// own list and glibc's `__cxa_thread_atexit_impl` both do). This guard
    /// is registered only once the thread holds a `thread_local` id, so
    /// after that crate's id guard, and is dropped before it: the memo is
    /// gone before the id can pass to another thread, and `get_or` is never
    /// called once the id may be freed.
    struct ExitGuard;

    impl Drop for ExitGuard {
        fn drop(&mut self) {
            let _ = STATE.try_with(|s| s.set(GONE));
            let _ = MEMO.try_with(|m| m.set((0, core::ptr::null())));
        }
    }

    /// One `T` per thread that asked for one.
    ///
    /// # Invariants
    ///
    /// - `id` is unique among all `PerThread`s ever made, so a thread's memo
    ///   that carries it points at this thread's entry in `entries`, which
    ///   lives (and stays put) as long as `self`.
    pub(crate) struct PerThread<T: Send> {
        id: u64,
        entries: ThreadLocal<T>,
        make: fn() -> T,
    }

    impl<T: Send> PerThread<T> {
        pub(crate) fn new(make: fn() -> T) -> Self {
            Self {
                // Relaxed: only uniqueness matters.
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                entries: ThreadLocal::new(),
                make,
            }
        }

        /// The entry this thread remembers, if it is one of ours: the fast
        /// paths' lookup (two thread-local loads and a compare). `None`
        /// says nothing about whether the thread has an entry.
        #[inline(always)]
        pub(crate) fn remembered(&self) -> Option<&T> {
            // Miri's aliasing models (Stacked and Tree Borrows) invalidate a
            // pointer kept from an earlier `&T` once another thread writes
            // the entry's atomics through its own `&T` (a revoker): under
            // miri every call asks `thread_local` afresh.
            if cfg!(miri) {
                return None;
            }
            let (id, entry) = MEMO.with(Cell::get);
            if id != self.id {
                return None;
            }
            // SAFETY: the memo holds our id, so `entry` points at this
            // thread's entry of `self.entries` (invariant), alive as long as
            // `&self`; entries are only ever shared (`&T`).
            Some(unsafe { &*entry.cast::<T>() })
        }

        /// This thread's entry, if it has one. Never allocates, never
        /// panics, even during thread exit.
        #[inline(always)]
        pub(crate) fn get(&self) -> Option<&T> {
            match self.remembered() {
                Some(entry) => Some(entry),
                None => self.lookup(false),
            }
        }

        /// This thread's entry, made now if it has none; `None` while the
        /// thread runs its thread-local destructors (callers then bypass
        /// the cache).
        #[inline(always)]
        pub(crate) fn get_or_make(&self) -> Option<&T> {
            match self.remembered() {
                Some(entry) => Some(entry),
                None => self.lookup(true),
            }
        }

        /// This thread's entry, made now only if the thread already made
        /// an entry in some `PerThread` (it is [`LIVE`]): then its
        /// `thread_local` id exists and stays valid until this module's exit
        /// guard runs, so making an entry allocates no id and cannot panic,
        /// even inside another thread-local's destructor. A thread that
        /// never made one gets `get`'s answer.
        #[inline(always)]
        pub(crate) fn get_or_make_if_live(&self) -> Option<&T> {
            match self.remembered() {
                Some(entry) => Some(entry),
                None => self.lookup(STATE.with(Cell::get) == LIVE),
            }
        }

        #[cold]
        #[inline(never)]
        fn lookup(&self, make: bool) -> Option<&T> {
            let state = STATE.with(Cell::get);
            if state == GONE {
                // The id is still this thread's until `thread_local`'s
                // guard drops (then `get` answers `None`): use it, but
                // neither remember it nor make an entry.
                return self.entries.get();
            }
            let entry = match self.entries.get() {
                Some(entry) => entry,
                None if make => self.entries.get_or(self.make),
                None => return None,
            };
            if state == FRESH {
                // This thread holds a `thread_local` id now, so that crate's
                // guard is registered: register ours after it.
                EXIT.with(|_| ());
                STATE.with(|s| s.set(LIVE));
            }
            if !cfg!(miri) {
                MEMO.with(|m| m.set((self.id, core::ptr::from_ref(entry).cast())));
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
            f.debug_struct("PerThread")
                .field("id", &self.id)
                .finish_non_exhaustive()
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

        /// Loom has no memo: the same as [`get`](Self::get).
        pub(crate) fn remembered(&self) -> Option<&T> {
            self.get()
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

        /// Loom threads have no thread-local destructors to fear, but the
        /// models keep the std rule's common answer: no entry is made.
        pub(crate) fn get_or_make_if_live(&self) -> Option<&T> {
            self.get()
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
