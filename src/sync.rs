//! The loom/std shim: the only file that names `std::sync::atomic`, `loom`
//! or the per-thread storage.
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
    cell::{ConstPtr, MutPtr, UnsafeCell},
    sync::atomic::{
        fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
    },
};

/// A statistic's counter: std's in both flavours. Statistics are part of no
/// protocol a loom model proves, and every loom atomic operation would add
/// interleavings to the models of the paths that update them.
pub(crate) use std::sync::atomic::AtomicU32 as StatU32;

/// `Arc` stays std's in both flavours: `self: &Arc<Self>` receivers (the
/// `*_owned` methods) accept only std's `Arc`. Its reference count is not
/// ours to prove; loom still checks every atomic and cell the pool owns.
pub(crate) use std::sync::Arc;

/// An `Arc` whose reference count loom models: the fair queue's tickets,
/// which a releasing thread and the waiting one drop in either order. std's
/// outside loom.
#[cfg(all(loom, feature = "loom"))]
pub(crate) use loom::sync::Arc as ModelArc;
#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use std::sync::Arc as ModelArc;

/// Whether an `acquire` on an empty pool spins briefly before parking. Loom
/// models skip the spin: it adds nothing a model can check and multiplies the
/// interleavings.
pub(crate) const SPIN_BEFORE_PARK: bool = cfg!(not(all(loom, feature = "loom")));

/// Whether waiters read the clock to decide when they starve. Loom models
/// no time: there a waiter starves after its first park instead (see
/// `Starve` in `engine/wait`).
pub(crate) const REAL_TIME: bool = cfg!(not(all(loom, feature = "loom")));

#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use std::sync::atomic::{
    compiler_fence, fence, AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize,
    Ordering,
};

#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use self::std_cell::{ConstPtr, MutPtr, UnsafeCell};

/// The fair wait queue's lock (`engine/wait`): held only for short list
/// operations, never across user code or a wake-up.
#[cfg(all(loom, feature = "loom"))]
pub(crate) use loom::sync::{Mutex, MutexGuard};
#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use std::sync::{Mutex, MutexGuard};

/// Parking for the fair queue's blocked waiters (`engine/wait`).
#[cfg(all(loom, feature = "loom"))]
pub(crate) use loom::thread::{current, Thread};
#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use std::thread::{current, Thread};

/// Parks this thread until it is unparked or `deadline` passes (maybe
/// sooner: callers loop); returns whether the deadline has passed. Loom
/// models no time: there it parks until unparked.
#[cfg(not(all(loom, feature = "loom")))]
pub(crate) fn park_until(deadline: Option<std::time::Instant>) -> bool {
    match deadline {
        None => std::thread::park(),
        Some(deadline) => {
            let now = std::time::Instant::now();
            if now >= deadline {
                return true;
            }
            std::thread::park_timeout(deadline - now);
        }
    }
    false
}

/// See the std version. A deadline that has passed already (a zero
/// timeout: the only kind the models use) returns at once, so that a
/// model can race a waiter that gives up against a hand-off; any other
/// parks until unparked.
#[cfg(all(loom, feature = "loom"))]
pub(crate) fn park_until(deadline: Option<std::time::Instant>) -> bool {
    if deadline.map_or(false, |deadline| std::time::Instant::now() >= deadline) {
        return true;
    }
    loom::thread::park();
    false
}

#[cfg(all(loom, feature = "loom"))]
pub(crate) use loom::thread::yield_now;
/// Lets another thread run while this one waits for a revoker.
#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use std::thread::yield_now;

#[cfg(not(all(loom, feature = "loom")))]
pub(crate) use self::std_per_thread::PerThread;

#[cfg(all(loom, feature = "loom"))]
pub(crate) use self::loom_per_thread::PerThread;

/// A number that no other thread of this process has had, made on first
/// use: tells an entry of a [`PerThread`] that this thread has adopted it
/// from an exited one (ids, and so entries, are reused). 0 only if this
/// thread's token can no longer be read (the caller then does without).
/// Under loom every thread's entry is its own, so there is nothing to
/// tell.
#[cfg(not(all(loom, feature = "loom")))]
pub(crate) fn thread_token() -> u64 {
    use core::cell::Cell;

    /// The last token handed out; 0 is never one.
    static LAST: AtomicU64 = AtomicU64::new(0);
    std::thread_local! {
        /// No destructor: readable at any point of thread exit.
        static TOKEN: Cell<u64> = const { Cell::new(0) };
    }
    TOKEN
        .try_with(|token| {
            if token.get() == 0 {
                // Relaxed: only uniqueness matters.
                token.set(LAST.fetch_add(1, Ordering::Relaxed) + 1);
            }
            token.get()
        })
        // Destroyed (never, for a `const` cell without a destructor, but
        // `try_with` says it could be): 0, "no token".
        .unwrap_or(0)
}

/// Loom: every loom thread's entry is its own (see `loom_per_thread`).
#[cfg(all(loom, feature = "loom"))]
pub(crate) fn thread_token() -> u64 {
    1
}

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

        /// Returns a pointer for a shared access that lasts as long as the
        /// returned `ConstPtr` (loom tracks that span; std does not).
        #[inline]
        pub(crate) fn get(&self) -> ConstPtr<T> {
            ConstPtr(self.0.get())
        }
    }

    /// A pointer to the inside of an [`UnsafeCell`] for shared access, as
    /// loom's `ConstPtr`.
    #[derive(Debug)]
    pub(crate) struct ConstPtr<T: ?Sized>(*const T);

    impl<T: ?Sized> ConstPtr<T> {
        /// Runs `f` with the raw pointer.
        #[inline]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0)
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

        /// The pointer, for its address only (loom's has no such method:
        /// callers keep what they need beside it under loom).
        #[inline]
        pub(crate) fn addr(&self) -> *const T {
            self.0
        }
    }
}

/// Per-object thread-local storage. Each thread gets a small id from one
/// process-wide allocator (the smallest free id first, so ids stay dense
/// and a new thread adopts the entry an exited one left); each
/// `PerThread` keeps its entries in buckets of doubling size indexed by
/// that id, allocated on first use and never moved, and any thread can
/// iterate every entry. In front of it, each thread remembers the last
/// entry it used (a pool id and a pointer), so that a thread working with
/// one pool finds its entry with two thread-local loads and a compare.
///
/// This is the layout of the `thread_local` crate, written out here for
/// one reason: a thread's id must be obtainable at any point of thread
/// exit, because a guard may be dropped by another thread-local's
/// destructor and its release wants this thread's cache. `thread_local`
/// panics there once its own id guard is gone (which aborts inside a
/// destructor), so with it a thread could only make a cache on acquire,
/// and a thread that only releases (a consumer of guards sent to it) paid a
/// free-list CAS per release: 2× slower hand-off. Here the id lives in a
/// std thread-local read with `try_with`: made on first use, even during
/// thread exit, and `None` only once this thread's registration itself has
/// been dropped; those late releases go to the free list.
#[cfg(not(all(loom, feature = "loom")))]
mod std_per_thread {
    use core::cell::{Cell, UnsafeCell};
    use core::fmt;
    use core::marker::PhantomData;
    use core::mem::MaybeUninit;
    use core::ptr;
    use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
    use std::sync::{Mutex, PoisonError};

    /// Ids of `PerThread` instances; 0 is never used.
    static NEXT_ID: AtomicU64 = AtomicU64::new(1);

    /// Thread ids in use are `0..next`, minus `free`.
    struct Ids {
        next: usize,
        /// Released ids, largest first: `pop` reuses the smallest, which
        /// keeps the ids, and so the buckets, dense. (A sorted `Vec`
        /// rather than a `BinaryHeap`, whose `new` is not `const` before
        /// Rust 1.80.)
        free: Vec<usize>,
    }

    /// The process-wide thread id allocator. Its lock also orders an exited
    /// thread's last use of its entries before the next owner's first.
    static IDS: Mutex<Ids> = Mutex::new(Ids {
        next: 0,
        free: Vec::new(),
    });

    /// No id yet.
    const NO_ID: usize = usize::MAX;

    /// This thread's id; frees it when the thread's thread-locals are
    /// destroyed.
    struct Registration {
        id: Cell<usize>,
    }

    impl Drop for Registration {
        fn drop(&mut self) {
            // First forget the memo: once the id is free, another thread may
            // own the entries it points at. (Freeing the id first would do
            // no harm as such: this thread uses no entry between the two
            // steps. What matters is that the memo is gone before any later
            // destructor of this thread releases a guard: that release must
            // find no entry and use the free list. Tested by
            // `a_guard_released_after_the_thread_freed_its_id_bypasses_its_old_cache`.)
            let _ = MEMO.try_with(|m| {
                for slot in m {
                    slot.set((0, ptr::null()));
                }
            });
            let id = self.id.get();
            if id != NO_ID {
                // A panic elsewhere while holding the lock leaves the list
                // intact (pushes, inserts and pops do not unwind halfway).
                let mut ids = IDS.lock().unwrap_or_else(PoisonError::into_inner);
                let at = ids.free.partition_point(|&free| free > id);
                ids.free.insert(at, id);
            }
        }
    }

    std::thread_local! {
        static REGISTRATION: Registration = const { Registration { id: Cell::new(NO_ID) } };
        /// The id of the `PerThread` this thread used last, and its entry.
        /// No destructor: readable at any point of thread exit.
        /// One memo per kind of user (`PerThread`'s `SLOT`), so that a
        /// thread that alternates between a pool's cache and its read
        /// sections finds each with the fast lookup.
        static MEMO: [Cell<(u64, *const ())>; MEMO_SLOTS] =
            const { [Cell::new((0, ptr::null())), Cell::new((0, ptr::null()))] };
    }

    /// This thread's id, allocated on first use (registering its release
    /// at thread exit); `None` once that release has run.
    fn thread_id() -> Option<usize> {
        REGISTRATION
            .try_with(|r| {
                if r.id.get() == NO_ID {
                    let mut ids = IDS.lock().unwrap_or_else(PoisonError::into_inner);
                    let id = match ids.free.pop() {
                        Some(id) => id,
                        None => {
                            ids.next += 1;
                            ids.next - 1
                        }
                    };
                    r.id.set(id);
                }
                r.id.get()
            })
            .ok()
    }

    /// Buckets: bucket `b` holds the entries of ids `2^b - 1 .. 2^(b+1) - 1`.
    const BUCKETS: usize = usize::BITS as usize;

    /// Which bucket holds `id`, and where in it.
    fn locate(id: usize) -> (usize, usize) {
        let n = id + 1;
        let bucket = (usize::BITS - 1 - n.leading_zeros()) as usize;
        (bucket, n - (1 << bucket))
    }

    /// One thread's slot in a `PerThread`.
    struct Entry<T> {
        /// `value` is initialized. Set once, by the thread that owns the id.
        present: AtomicBool,
        value: UnsafeCell<MaybeUninit<T>>,
    }

    impl<T> Entry<T> {
        /// The value, shared.
        ///
        /// # Safety
        ///
        /// `present` was seen set (Acquire), or the caller initialized the
        /// value itself: the value is initialized and only ever shared.
        unsafe fn value(&self) -> &T {
            // SAFETY: no `&mut` to the value exists once it is initialized
            // (the caller's contract), so a shared borrow is sound.
            let cell = unsafe { &*self.value.get() };
            // SAFETY: initialized (the caller's contract).
            unsafe { cell.assume_init_ref() }
        }
    }

    /// How many memos a thread keeps (see `MEMO`).
    const MEMO_SLOTS: usize = 2;

    /// One `T` per thread that asked for one. `SLOT` picks the thread's memo
    /// (see `MEMO`): users that a thread alternates between take different
    /// slots.
    ///
    /// # Invariants
    ///
    /// - `id` is unique among all `PerThread`s ever made, so a thread's memo
    ///   that carries it points at this thread's entry, which lives (and
    ///   stays put) as long as `self`.
    /// - `buckets[b]` is null or a leaked `Box<[Entry<T>]>` of `2^b` entries,
    ///   set once; an entry's `value` is written only by the thread that
    ///   holds its id, before `present` is set (Release), and only shared
    ///   (`&T`) after.
    pub(crate) struct PerThread<T: Send, const SLOT: usize = 0> {
        id: u64,
        /// Whether lookups set the thread's memo (see [`remembered`]).
        ///
        /// [`remembered`]: Self::remembered
        memo: bool,
        buckets: [AtomicPtr<Entry<T>>; BUCKETS],
        /// One past the highest bucket installed: `iter` looks no further
        /// (a sweep of a pool used by a few threads then reads a few
        /// buckets, not all 64).
        high: AtomicUsize,
        make: fn() -> T,
        /// Owns `T`s: `Send`/`Sync` follow `T`'s.
        _owns: PhantomData<T>,
    }

    impl<T: Send, const SLOT: usize> PerThread<T, SLOT> {
        /// Entries made by `make`. With `memo` false, [`remembered`] never
        /// finds one (callers that keep their fast path for memoized entries
        /// then always take their slow path).
        ///
        /// [`remembered`]: Self::remembered
        pub(crate) fn new(make: fn() -> T, memo: bool) -> Self {
            Self {
                // Relaxed: only uniqueness matters.
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                memo,
                buckets: core::array::from_fn(|_| AtomicPtr::new(ptr::null_mut())),
                high: AtomicUsize::new(0),
                make,
                _owns: PhantomData,
            }
        }

        /// The entry this thread remembers, if it is one of ours: the fast
        /// paths' lookup (two thread-local loads and a compare). `None`
        /// says nothing about whether the thread has an entry, and is
        /// always the answer when made with `memo` false.
        #[inline(always)]
        pub(crate) fn remembered(&self) -> Option<&T> {
            // Miri's aliasing models (Stacked and Tree Borrows) invalidate a
            // pointer kept from an earlier `&T` once another thread writes
            // the entry's atomics through its own `&T` (a revoker): under
            // miri every call looks the entry up afresh.
            if cfg!(miri) {
                return None;
            }
            let (id, entry) = MEMO.with(|m| m[SLOT].get());
            if id != self.id {
                return None;
            }
            // SAFETY: the memo holds our id, so `entry` points at this
            // thread's entry (invariant), alive as long as `&self`; entries
            // are only ever shared (`&T`).
            Some(unsafe { &*entry.cast::<T>() })
        }

        /// Clears this thread's memo if it remembers an entry of ours (a
        /// caller that found the entry is not its own to use).
        pub(crate) fn forget_memo(&self) {
            let _ = MEMO.try_with(|m| {
                if m[SLOT].get().0 == self.id {
                    m[SLOT].set((0, ptr::null()));
                }
            });
        }

        /// This thread's entry, made now if it has none; `None` only late in
        /// thread exit, once the thread's id is released (callers then
        /// bypass the cache).
        #[inline(always)]
        pub(crate) fn get_or_make(&self) -> Option<(&T, bool)> {
            match self.remembered() {
                Some(entry) => Some((entry, false)),
                None => self.lookup(),
            }
        }

        #[cold]
        #[inline(never)]
        fn lookup(&self) -> Option<(&T, bool)> {
            let id = thread_id()?;
            let (entry, made) = match self.entry(id) {
                Some(entry) => (entry, false),
                None => (self.make(id), true),
            };
            if self.memo && !cfg!(miri) {
                MEMO.with(|m| m[SLOT].set((self.id, (entry as *const T).cast())));
            }
            Some((entry, made))
        }

        /// The entry of `id`, if it was made.
        fn entry(&self, id: usize) -> Option<&T> {
            let (bucket, index) = locate(id);
            // Acquire: pairs with the Release CAS that installed the bucket.
            let entries = self.buckets[bucket].load(Ordering::Acquire);
            if entries.is_null() {
                return None;
            }
            // SAFETY: a non-null bucket holds `2^bucket` entries
            // (invariant) and `index < 2^bucket`: in bounds, initialized.
            let entry = unsafe { entries.add(index) };
            // SAFETY: as above; entries are only ever shared.
            let entry = unsafe { &*entry };
            // Acquire: pairs with the Release store that made the value.
            if !entry.present.load(Ordering::Acquire) {
                return None;
            }
            // SAFETY: `present` is set, so the value is initialized and only
            // shared from now on (invariant).
            Some(unsafe { entry.value() })
        }

        /// Makes the entry of `id`, held by the calling thread, which has
        /// none yet.
        #[cold]
        fn make(&self, id: usize) -> &T {
            let (bucket, index) = locate(id);
            let slot = &self.buckets[bucket];
            // Acquire: as in `entry`.
            let mut entries = slot.load(Ordering::Acquire);
            if entries.is_null() {
                let fresh: Box<[Entry<T>]> = (0..1usize << bucket)
                    .map(|_| Entry {
                        present: AtomicBool::new(false),
                        value: UnsafeCell::new(MaybeUninit::uninit()),
                    })
                    .collect();
                let fresh = Box::into_raw(fresh).cast::<Entry<T>>();
                // AcqRel: publishes the new bucket (Release) or sees the
                // winner's (Acquire).
                match slot.compare_exchange(
                    ptr::null_mut(),
                    fresh,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => entries = fresh,
                    Err(winner) => {
                        // SAFETY: `fresh` came from `Box::into_raw` of a
                        // slice of that length just above and was never
                        // shared.
                        drop(unsafe {
                            Box::from_raw(ptr::slice_from_raw_parts_mut(fresh, 1 << bucket))
                        });
                        entries = winner;
                    }
                }
            }
            // Release: after the bucket's install in this thread's order,
            // so a reader that sees this mark sees the bucket (and the
            // entry published below is published after both).
            self.high.fetch_max(bucket + 1, Ordering::Release);
            // SAFETY: the bucket holds `2^bucket` entries and `index` is
            // below that (invariant of `locate`).
            let entry = unsafe { entries.add(index) };
            // SAFETY: as above; entries are only ever shared.
            let entry = unsafe { &*entry };
            // SAFETY: the calling thread holds `id`, so it alone writes this
            // entry, and `present` is false, so nobody reads the value yet.
            let cell = unsafe { &mut *entry.value.get() };
            cell.write((self.make)());
            // Release: publishes the value to `entry` and `iter` readers.
            entry.present.store(true, Ordering::Release);
            // SAFETY: initialized just above; shared only from now on.
            unsafe { entry.value() }
        }

        /// Every entry, of live and of exited threads.
        pub(crate) fn iter(&self) -> impl Iterator<Item = &T>
        where
            T: Sync,
        {
            // Acquire: pairs with the Release `fetch_max` in `make`; every
            // entry made before it is in the buckets below the mark.
            let high = self.high.load(Ordering::Acquire);
            self.buckets[..high]
                .iter()
                .enumerate()
                .flat_map(|(bucket, slot)| {
                    // Acquire: as in `entry`.
                    let entries = slot.load(Ordering::Acquire);
                    let len = if entries.is_null() {
                        0
                    } else {
                        1usize << bucket
                    };
                    (0..len).filter_map(move |index| {
                        // SAFETY: a non-null bucket holds `2^bucket` entries.
                        let entry = unsafe { entries.add(index) };
                        // SAFETY: as above; entries are only ever shared.
                        let entry = unsafe { &*entry };
                        // Acquire: pairs with the Release store in `make`.
                        entry.present.load(Ordering::Acquire).then(|| {
                            // SAFETY: present, so initialized and shared only.
                            unsafe { entry.value() }
                        })
                    })
                })
        }
    }

    impl<T: Send, const SLOT: usize> Drop for PerThread<T, SLOT> {
        fn drop(&mut self) {
            for (bucket, slot) in self.buckets.iter_mut().enumerate() {
                let entries = *slot.get_mut();
                if entries.is_null() {
                    continue;
                }
                let raw = ptr::slice_from_raw_parts_mut(entries, 1 << bucket);
                // SAFETY: a non-null bucket is a leaked box of `2^bucket`
                // entries (invariant), and `&mut self` means no `&T` to them
                // is alive (memos are only read through `&self`).
                let mut entries = unsafe { Box::from_raw(raw) };
                for entry in entries.iter_mut() {
                    if *entry.present.get_mut() {
                        // SAFETY: present, so initialized; dropped once, here.
                        unsafe { entry.value.get_mut().assume_init_drop() };
                    }
                }
            }
        }
    }

    impl<T: Send, const SLOT: usize> fmt::Debug for PerThread<T, SLOT> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("PerThread")
                .field("id", &self.id)
                .finish_non_exhaustive()
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn ids_map_to_doubling_buckets() {
            let expected = [(0, 0), (1, 0), (1, 1), (2, 0), (2, 3), (3, 0)];
            for (id, at) in [0, 1, 2, 3, 6, 7].into_iter().zip(expected) {
                assert_eq!(locate(id), at, "id {id}");
            }
            assert_eq!(
                locate(usize::MAX - 1),
                (BUCKETS - 1, (1 << (BUCKETS - 1)) - 1)
            );
        }

        #[test]
        fn exited_threads_ids_and_entries_are_reused() {
            let per: PerThread<_> = PerThread::new(|| AtomicU64::new(0), true);
            for round in 1..=50 {
                std::thread::scope(|s| {
                    s.spawn(|| {
                        let (mine, _) = per.get_or_make().unwrap();
                        // Some earlier thread's entry, or a new one.
                        mine.fetch_add(1, Ordering::Relaxed);
                        assert!(core::ptr::eq(mine, per.get_or_make().unwrap().0));
                    });
                });
                // Other tests' threads may hold ids too; still far fewer
                // entries than threads that used this one.
                let entries = per.iter().count();
                assert!(entries <= 1 + 8, "{entries} entries after {round} threads");
                let total: u64 = per.iter().map(|e| e.load(Ordering::Relaxed)).sum();
                assert_eq!(total, round);
            }
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

    pub(crate) struct PerThread<T: Send, const SLOT: usize = 0> {
        entries: Box<[T]>,
        owners: Mutex<Vec<ThreadId>>,
        /// As in the std version: `false` makes `remembered` always `None`.
        memo: bool,
    }

    impl<T: Send, const SLOT: usize> PerThread<T, SLOT> {
        pub(crate) fn new(make: fn() -> T, memo: bool) -> Self {
            Self {
                entries: (0..THREADS).map(|_| make()).collect(),
                owners: Mutex::new(Vec::with_capacity(THREADS)),
                memo,
            }
        }

        /// Loom has no memo: the same as [`get`](Self::get), or `None`
        /// when made with `memo` false.
        pub(crate) fn remembered(&self) -> Option<&T> {
            if !self.memo {
                return None;
            }
            self.get()
        }

        /// Loom has no memo.
        pub(crate) fn forget_memo(&self) {}

        pub(crate) fn get(&self) -> Option<&T> {
            let me = loom::thread::current().id();
            let owners = self.owners.lock().expect("never poisoned");
            owners
                .iter()
                .position(|id| *id == me)
                .map(|i| &self.entries[i])
        }

        /// The entry and whether it is new, as in the std version; the
        /// entries all exist from the start, so `iter` always sees them.
        pub(crate) fn get_or_make(&self) -> Option<(&T, bool)> {
            let me = loom::thread::current().id();
            let mut owners = self.owners.lock().expect("never poisoned");
            let (i, made) = match owners.iter().position(|id| *id == me) {
                Some(i) => (i, false),
                None => {
                    owners.push(me);
                    (owners.len() - 1, true)
                }
            };
            Some((&self.entries[i], made))
        }

        pub(crate) fn iter(&self) -> impl Iterator<Item = &T>
        where
            T: Sync,
        {
            self.entries.iter()
        }
    }

    impl<T: Send, const SLOT: usize> fmt::Debug for PerThread<T, SLOT> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("PerThread").finish_non_exhaustive()
        }
    }
}
