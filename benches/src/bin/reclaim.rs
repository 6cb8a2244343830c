//! Candidate grace-period mechanisms for read sections that write nothing
//! shared, measured on one model of a generational-key store, interleaved
//! round by round in one process.
//!
//! ```text
//! cargo run --release -p tagpool-benches --bin reclaim                      # every row
//! cargo run --release -p tagpool-benches --bin reclaim -- --rounds 3 --ms 50
//! cargo run --release -p tagpool-benches --bin reclaim -- read_section iterate
//! ```
//!
//! # The model
//!
//! An array of [`ENTRIES`] entries, each a state word (`generation << 1 |
//! occupied` for the grace-period candidates) and a value cell holding an
//! `Option<Box<u64>>`, so that a reclamation frees an allocation; [`LIVE`]
//! of them are live. A free stack (`Mutex<Vec<u32>>`, the same for every
//! candidate) holds the indices an insert may take.
//!
//! - A *read*: protect, load the state (Acquire), check occupied and the
//!   key's generation, read the value, unprotect.
//! - A *remove*: CAS the state to the next generation, unoccupied, then
//!   retire the entry: dropping its value and pushing its index wait until
//!   the mechanism says that no reader can still see it.
//! - An *insert*: pop a free index (reclaiming first if the stack is
//!   empty), write the value, publish the state (Release).
//!
//! # The candidates
//!
//! - `crossbeam_epoch`: a `crossbeam_epoch::Collector` per structure; each
//!   thread registers one `LocalHandle` (as a pool would keep it in its
//!   per-thread registration); read = `handle.pin()` + load + unpin;
//!   retire = `guard.defer_unchecked(..)`, a `flush()` every
//!   [`GRACE_BATCH`] retirements and while the free stack is empty.
//! - `seize`: a `seize::Collector` per structure; read =
//!   `collector.enter()`, a load (SeqCst, as its `protect` does), the drop
//!   of the `LocalGuard`;
//!   retire = `collector.retire(entry, reclaimer)` (the remover reads
//!   nothing, so it holds no guard); the reclaimer, a plain `fn` with no
//!   context, finds the structure from the `&Collector` it is given.
//! - `membarrier_rcu`: a minimal userspace RCU after liburcu's membarrier
//!   flavour: one cache-padded reader record per bench thread; read =
//!   `record.store(epoch | 1, Relaxed)` + compiler fence + load ... +
//!   `record.store(0, Release)`; retire = push to the thread's limbo list;
//!   a grace period every [`GRACE_BATCH`] retirements and while the free
//!   stack is empty = `epoch.fetch_add` + `membarrier(PRIVATE_EXPEDITED)` +
//!   a scan of the records.
//! - `counted`: the current scheme (`src/handle/entry.rs`): a read CASes a
//!   reader count into the state word and `fetch_sub`s it after; a remove
//!   while read leaves the entry to its last reader; nothing is deferred.
//!
//! # The rows
//!
//! ns per operation; each multi-threaded figure is the wall-clock time over
//! the operations of all its threads (the inverse of their total
//! throughput, as everywhere in this suite).
//!
//! - `read_one_shot`: protect, one read of a random live key, unprotect.
//! - `read_section`: one protection per [`SECTION`] reads.
//! - `iterate`: one protection per pass over all entries (ns per live value).
//! - `remove_insert`: remove a random live key of the thread's own
//!   partition and insert a new value (ns per pair, reclamation included).
//!
//! Each round runs every candidate of a row for about `--ms` milliseconds
//! (default 100), its threads started at a barrier, the candidates in a
//! different order each round; each figure is the median over `--rounds`
//! rounds (default 7).

use std::cell::UnsafeCell;
use std::fmt::Write as _;
use std::hint::black_box;
use std::mem::offset_of;
use std::sync::atomic::{compiler_fence, fence, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use tagpool_benches::median;

const USAGE: &str = "usage: reclaim [--rounds N] [--ms MS] [ROW...]";

/// Entries of the model store.
const ENTRIES: usize = 8192;
/// Live values in it.
const LIVE: usize = 4096;
/// Reads per protection in `read_section`.
const SECTION: usize = 256;
/// Retirements between two grace periods of `membarrier_rcu` (and between
/// two `flush`es of `crossbeam_epoch`).
const GRACE_BATCH: usize = 1024;
/// Bench threads at most: the size of `membarrier_rcu`'s record registry.
const MAX_THREADS: usize = 2;

/// A key: an index and the generation of the occupancy it names.
#[derive(Clone, Copy, Debug)]
struct Key {
    index: u32,
    generation: u64,
}

/// One entry: its state word and its value cell.
struct Entry {
    state: AtomicU64,
    value: UnsafeCell<Option<Box<u64>>>,
}

// SAFETY: the cell is written only by the entry's owner (the inserter that
// popped its index, before it publishes the state with Release; the
// reclaimer, once no reader can see the occupancy), and read only by
// readers that saw it published (Acquire) and are protected by the
// candidate's mechanism, which keeps the owner out until they leave.
unsafe impl Sync for Entry {}

/// The entries and the free stack, shared by every candidate.
struct Table {
    entries: Box<[Entry]>,
    free: Mutex<Vec<u32>>,
}

/// State words of the grace-period candidates: `generation << 1 | occupied`.
mod rcu_word {
    pub(super) const OCCUPIED: u64 = 1;

    pub(super) fn live(generation: u64) -> u64 {
        generation << 1 | OCCUPIED
    }

    pub(super) fn free(generation: u64) -> u64 {
        generation << 1
    }

    pub(super) fn generation(state: u64) -> u64 {
        state >> 1
    }
}

/// State words of `counted`, the layout of `src/handle/entry.rs`:
/// `generation (40) | OCCUPIED | REMOVED | readers (22)`.
mod counted_word {
    pub(super) const READERS: u64 = (1 << 22) - 1;
    pub(super) const REMOVED: u64 = 1 << 22;
    pub(super) const OCCUPIED: u64 = 1 << 23;
    const SHIFT: u32 = 24;

    pub(super) fn live(generation: u64) -> u64 {
        generation << SHIFT | OCCUPIED
    }

    pub(super) fn free(generation: u64) -> u64 {
        generation << SHIFT
    }

    pub(super) fn generation(state: u64) -> u64 {
        state >> SHIFT
    }

    pub(super) fn readers(state: u64) -> u64 {
        state & READERS
    }
}

impl Table {
    /// Every entry free, with state `free_state`; the free stack pops 0 first.
    fn new(free_state: u64) -> Self {
        let entries = (0..ENTRIES)
            .map(|_| Entry {
                state: AtomicU64::new(free_state),
                value: UnsafeCell::new(None),
            })
            .collect();
        Self {
            entries,
            free: Mutex::new((0..ENTRIES as u32).rev().collect()),
        }
    }

    fn pop(&self) -> Option<u32> {
        self.free.lock().expect("no panic holds the lock").pop()
    }

    fn push(&self, index: u32) {
        self.free
            .lock()
            .expect("no panic holds the lock")
            .push(index);
    }

    /// The value of entry `index`.
    ///
    /// # Safety
    ///
    /// The caller saw the entry's occupancy published (Acquire) and the
    /// entry's owner cannot write its cell until the caller is done.
    #[inline]
    unsafe fn value(&self, index: usize) -> u64 {
        // SAFETY: no one writes the cell while the caller reads it (this
        // function's contract).
        let cell = unsafe { &*self.entries[index].value.get() };
        cell.as_deref().copied().unwrap_or(0)
    }

    /// Writes `value` into entry `index`.
    ///
    /// # Safety
    ///
    /// The caller owns the entry: it popped its index, and no reader can see
    /// an occupancy of it.
    #[inline]
    unsafe fn put(&self, index: usize, value: u64) {
        // SAFETY: the caller owns the entry (this function's contract).
        unsafe { *self.entries[index].value.get() = Some(Box::new(value)) };
    }

    /// Drops entry `index`'s value and pushes its index.
    ///
    /// # Safety
    ///
    /// The caller owns the entry: its occupancy ended and no reader can
    /// still see it.
    #[inline]
    unsafe fn reclaim(&self, index: u32) {
        // SAFETY: the caller owns the entry (this function's contract).
        drop(unsafe { (*self.entries[index as usize].value.get()).take() });
        self.push(index);
    }

    /// Fills `LIVE` entries with `live(generation)` words; their keys.
    fn populate(&self, generation_of: fn(u64) -> u64, live: fn(u64) -> u64) -> Vec<Key> {
        (0..LIVE as u64)
            .map(|v| {
                let index = self.pop().expect("the store has room");
                // SAFETY: popped, so owned; not yet published.
                unsafe { self.put(index as usize, v) };
                let entry = &self.entries[index as usize];
                let generation = generation_of(entry.state.load(Ordering::Relaxed));
                entry.state.store(live(generation), Ordering::Release);
                Key { index, generation }
            })
            .collect()
    }

    // The grace-period candidates' operations (`rcu_word` states).

    /// A protected read of `key`'s value; `order` is the candidate's load.
    #[inline]
    fn read_key(&self, key: Key, order: Ordering) -> Option<u64> {
        let entry = &self.entries[key.index as usize];
        if entry.state.load(order) != rcu_word::live(key.generation) {
            return None;
        }
        // SAFETY: the load saw the occupancy published (Acquire or
        // stronger), and the caller's protection keeps the reclaimer out.
        Some(unsafe { self.value(key.index as usize) })
    }

    /// A protected read of whatever entry `index` holds.
    #[inline]
    fn read_index(&self, index: usize, order: Ordering) -> Option<u64> {
        if self.entries[index].state.load(order) & rcu_word::OCCUPIED == 0 {
            return None;
        }
        // SAFETY: as in `read_key`.
        Some(unsafe { self.value(index) })
    }

    /// Ends `key`'s occupancy: the caller must retire the entry.
    #[inline]
    fn unpublish(&self, key: Key) {
        let entry = &self.entries[key.index as usize];
        let ended = entry.state.compare_exchange(
            rcu_word::live(key.generation),
            rcu_word::free(key.generation + 1),
            Ordering::AcqRel,
            Ordering::Relaxed,
        );
        assert!(ended.is_ok(), "a thread removes only its own live keys");
    }

    /// Fills entry `index` with `value` and publishes it.
    ///
    /// # Safety
    ///
    /// The caller popped `index`.
    #[inline]
    unsafe fn publish(&self, index: u32, value: u64) -> Key {
        // SAFETY: popped, so owned (this function's contract).
        unsafe { self.put(index as usize, value) };
        let entry = &self.entries[index as usize];
        let generation = rcu_word::generation(entry.state.load(Ordering::Relaxed));
        entry
            .state
            .store(rcu_word::live(generation), Ordering::Release);
        Key { index, generation }
    }
}

/// One candidate mechanism on its own model store.
trait Scheme: Sync + Sized + 'static {
    const NAME: &'static str;
    /// A thread's registration, made once per bench thread.
    type Local<'a>
    where
        Self: 'a;
    /// A populated store, and the live keys.
    fn build() -> (Self, Vec<Key>);
    /// Registers bench thread `thread` (from 0).
    fn local(&self, thread: usize) -> Self::Local<'_>;
    /// Runs `f` in one read section.
    fn section<R>(&self, local: &mut Self::Local<'_>, f: impl FnOnce() -> R) -> R;
    /// One read of `key` inside a section.
    fn read(&self, key: Key) -> Option<u64>;
    /// One read of entry `index` inside a section, if it is live.
    fn read_index(&self, index: usize) -> Option<u64>;
    /// Removes `key` (live, of this thread's partition) and inserts `value`.
    fn remove_insert(&self, local: &mut Self::Local<'_>, key: Key, value: u64) -> Key;
}

/// `crossbeam_epoch`: a collector per structure, a handle per thread.
struct Crossbeam {
    // Declared first, so dropped first: its deferred functions, run when
    // the last handle and the collector are gone, reach `table`.
    collector: crossbeam_epoch::Collector,
    table: Table,
}

struct CrossbeamLocal {
    handle: crossbeam_epoch::LocalHandle,
    retired: usize,
}

impl Scheme for Crossbeam {
    const NAME: &'static str = "crossbeam_epoch";
    type Local<'a> = CrossbeamLocal;

    fn build() -> (Self, Vec<Key>) {
        let table = Table::new(rcu_word::free(1));
        let keys = table.populate(rcu_word::generation, rcu_word::live);
        let scheme = Self {
            collector: crossbeam_epoch::Collector::new(),
            table,
        };
        (scheme, keys)
    }

    fn local(&self, _thread: usize) -> CrossbeamLocal {
        CrossbeamLocal {
            handle: self.collector.register(),
            retired: 0,
        }
    }

    #[inline]
    fn section<R>(&self, local: &mut CrossbeamLocal, f: impl FnOnce() -> R) -> R {
        let guard = local.handle.pin();
        let r = f();
        drop(guard);
        r
    }

    #[inline]
    fn read(&self, key: Key) -> Option<u64> {
        self.table.read_key(key, Ordering::Acquire)
    }

    #[inline]
    fn read_index(&self, index: usize) -> Option<u64> {
        self.table.read_index(index, Ordering::Acquire)
    }

    fn remove_insert(&self, local: &mut CrossbeamLocal, key: Key, value: u64) -> Key {
        let mut guard = local.handle.pin();
        self.table.unpublish(key);
        let table: *const Table = &self.table;
        let index = key.index;
        let reclaim = move || {
            // SAFETY: crossbeam runs this once every thread pinned now has
            // unpinned, so no reader still sees the ended occupancy and the
            // entry is ours; or when the collector's global state drops,
            // which `Crossbeam`'s field order puts before `table`'s drop:
            // `table` is alive whenever this runs.
            unsafe { (*table).reclaim(index) }
        };
        // SAFETY: `reclaim` is sound to run whenever crossbeam runs it (see
        // inside); it captures 16 bytes, stored inline (no allocation), and
        // need not be `Send`: it touches only the entry and the free stack.
        unsafe { guard.defer_unchecked(reclaim) };
        local.retired += 1;
        if local.retired.is_multiple_of(GRACE_BATCH) {
            guard.flush();
        }
        let index = loop {
            if let Some(index) = self.table.pop() {
                break index;
            }
            // Seal the bag, try to advance the epoch and collect; repin so
            // that this thread's own pin does not hold the epoch back.
            guard.flush();
            guard.repin();
        };
        drop(guard);
        // SAFETY: popped.
        unsafe { self.table.publish(index, value) }
    }
}

/// `seize`: a collector per structure; threads get their slot lazily.
struct Seize {
    // Declared first, so dropped first: its drop runs the reclaimers of
    // the values still retired, which reach `table`.
    collector: seize::Collector,
    table: Table,
}

/// seize's reclaimer for an entry: a plain `fn`, given the collector only.
///
/// # Safety
///
/// `collector` is the `collector` field of a live [`Seize`] whose `table`
/// is alive, `entry` points into that table's entries, and the entry's
/// occupancy ended and no reader can still see it.
unsafe fn reclaim_seize(entry: *mut Entry, collector: &seize::Collector) {
    let scheme = (collector as *const seize::Collector)
        .wrapping_byte_sub(offset_of!(Seize, collector))
        .cast::<Seize>();
    // SAFETY: `collector` is `Seize::collector` of a `Seize` whose `table`
    // is alive (this function's contract; its field order keeps `table`
    // alive while the collector drops), so `scheme` points to it. (Stepping
    // from a field to its container is what Tree Borrows allows and
    // Stacked Borrows does not.)
    let table = unsafe { &(*scheme).table };
    let index = (entry as usize - table.entries.as_ptr() as usize) / size_of::<Entry>();
    // SAFETY: the entry is ours (this function's contract).
    unsafe { table.reclaim(index as u32) };
}

impl Scheme for Seize {
    const NAME: &'static str = "seize";
    type Local<'a> = ();

    fn build() -> (Self, Vec<Key>) {
        let table = Table::new(rcu_word::free(1));
        let keys = table.populate(rcu_word::generation, rcu_word::live);
        let scheme = Self {
            collector: seize::Collector::new(),
            table,
        };
        (scheme, keys)
    }

    fn local(&self, _thread: usize) {}

    #[inline]
    fn section<R>(&self, _local: &mut (), f: impl FnOnce() -> R) -> R {
        let guard = self.collector.enter();
        let r = f();
        drop(guard);
        r
    }

    #[inline]
    fn read(&self, key: Key) -> Option<u64> {
        // SeqCst: what seize's `Guard::protect` uses for its loads (the
        // same instruction as Acquire on x86-64 and AArch64).
        self.table.read_key(key, Ordering::SeqCst)
    }

    #[inline]
    fn read_index(&self, index: usize) -> Option<u64> {
        self.table.read_index(index, Ordering::SeqCst)
    }

    fn remove_insert(&self, _local: &mut (), key: Key, value: u64) -> Key {
        self.table.unpublish(key);
        let entry = (&self.table.entries[key.index as usize] as *const Entry).cast_mut();
        // SAFETY: the CAS above made the occupancy unreachable to any thread
        // that enters from now on; `reclaim_seize`'s contract holds: the
        // collector is this `Seize`'s, which lives in a box that stays put
        // while any of its retirements is pending (it is dropped, and its
        // collector runs the last reclaimers, only when no thread uses it).
        unsafe { self.collector.retire(entry, reclaim_seize) };
        let index = loop {
            if let Some(index) = self.table.pop() {
                break index;
            }
            // Start the reclamation of this thread's batch; the guard's drop
            // frees it if no other thread is inside a section.
            let guard = self.collector.enter();
            seize::Guard::flush(&guard);
            drop(guard);
        };
        // SAFETY: popped.
        unsafe { self.table.publish(index, value) }
    }
}

/// `membarrier_rcu`: per-thread reader records, membarrier grace periods.
struct MembarrierRcu {
    /// The grace-period epoch: even, from 2, by 2.
    epoch: Padded<AtomicU64>,
    /// One record per bench thread: 0 outside a section, else the epoch
    /// the section saw at its start, `| 1`.
    records: [Padded<AtomicU64>; MAX_THREADS],
    /// One limbo list per bench thread, taken by the thread for its run.
    limbos: [Mutex<Vec<Retired>>; MAX_THREADS],
    /// `membarrier(PRIVATE_EXPEDITED)` is registered; else the readers
    /// and the grace periods use SeqCst fences (liburcu's `mb` flavour).
    membarrier: bool,
    table: Table,
}

/// A retired entry of `membarrier_rcu`; `tag` is 0 until a grace period
/// covers it, then that grace period's new epoch.
#[derive(Debug)]
struct Retired {
    index: u32,
    tag: u64,
}

struct RcuLocal<'a> {
    record: &'a AtomicU64,
    limbo: MutexGuard<'a, Vec<Retired>>,
    retired: usize,
}

/// A cache line of its own.
#[repr(align(128))]
#[derive(Default)]
struct Padded<T>(T);

impl<T> std::ops::Deref for Padded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// Registers this process for `MEMBARRIER_CMD_PRIVATE_EXPEDITED`, once:
/// whether it is available.
fn membarrier_registered() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        #[cfg(target_os = "linux")]
        {
            const QUERY: libc::c_long = 0;
            const PRIVATE_EXPEDITED: libc::c_long = 8;
            const REGISTER_PRIVATE_EXPEDITED: libc::c_long = 16;
            // SAFETY: membarrier takes (cmd, flags, cpu_id) and reads no memory.
            let supported = unsafe { libc::syscall(libc::SYS_membarrier, QUERY, 0, 0) };
            if supported < 0
                || supported & PRIVATE_EXPEDITED == 0
                || supported & REGISTER_PRIVATE_EXPEDITED == 0
            {
                return false;
            }
            // SAFETY: as above.
            unsafe { libc::syscall(libc::SYS_membarrier, REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0 }
        }
        #[cfg(not(target_os = "linux"))]
        {
            false
        }
    })
}

/// A full barrier on every CPU running a thread of this process.
#[cfg(target_os = "linux")]
fn membarrier() {
    const PRIVATE_EXPEDITED: libc::c_long = 8;
    // SAFETY: membarrier takes (cmd, flags, cpu_id) and reads no memory;
    // the process registered for this command (`membarrier_registered`).
    let done = unsafe { libc::syscall(libc::SYS_membarrier, PRIVATE_EXPEDITED, 0, 0) };
    assert_eq!(done, 0, "membarrier(PRIVATE_EXPEDITED) failed");
}

#[cfg(not(target_os = "linux"))]
fn membarrier() {
    unreachable!("only registered on Linux");
}

impl MembarrierRcu {
    /// One grace period: frees every limbo entry no reader can see.
    ///
    /// Sections that started after the `fetch_add` see the removals
    /// before it (their epoch load synchronizes with it, along the RMW
    /// chain of the epoch): a record of 0, or with an epoch at least an
    /// entry's tag, cannot see that entry. The membarrier makes every
    /// reader's record store visible if that reader's section loads came
    /// before it (liburcu's argument: it runs a full barrier on each CPU
    /// that runs a thread of this process, pairing with the readers'
    /// compiler fences).
    fn grace_period(&self, limbo: &mut Vec<Retired>) {
        let epoch = self.epoch.fetch_add(2, Ordering::AcqRel) + 2;
        if self.membarrier {
            membarrier();
        } else {
            fence(Ordering::SeqCst);
        }
        let oldest = self
            .records
            .iter()
            // Acquire: pairs with a reader's Release store of 0, so its
            // section's reads happen before the frees below.
            .map(|record| record.load(Ordering::Acquire))
            .filter(|&record| record != 0)
            .map(|record| record & !1)
            .min()
            .unwrap_or(u64::MAX);
        limbo.retain_mut(|retired| {
            if retired.tag == 0 {
                retired.tag = epoch;
            }
            if retired.tag > oldest {
                return true;
            }
            // SAFETY: retired before this grace period's `fetch_add`, and
            // every section that could still see it has ended (see above).
            unsafe { self.table.reclaim(retired.index) };
            false
        });
    }
}

impl Scheme for MembarrierRcu {
    const NAME: &'static str = "membarrier_rcu";
    type Local<'a> = RcuLocal<'a>;

    fn build() -> (Self, Vec<Key>) {
        let table = Table::new(rcu_word::free(1));
        let keys = table.populate(rcu_word::generation, rcu_word::live);
        let scheme = Self {
            epoch: Padded(AtomicU64::new(2)),
            records: Default::default(),
            limbos: Default::default(),
            membarrier: membarrier_registered(),
            table,
        };
        (scheme, keys)
    }

    fn local(&self, thread: usize) -> RcuLocal<'_> {
        RcuLocal {
            record: &self.records[thread],
            limbo: self.limbos[thread]
                .lock()
                .expect("one bench thread per limbo"),
            retired: 0,
        }
    }

    #[inline]
    fn section<R>(&self, local: &mut RcuLocal<'_>, f: impl FnOnce() -> R) -> R {
        // Acquire: the removals before the grace period that made this
        // epoch are visible to this section.
        let epoch = self.epoch.load(Ordering::Acquire);
        local.record.store(epoch | 1, Ordering::Relaxed);
        if self.membarrier {
            compiler_fence(Ordering::SeqCst);
        } else {
            fence(Ordering::SeqCst);
        }
        let r = f();
        // Release: this section's reads happen before a grace period that
        // sees the 0 frees anything.
        local.record.store(0, Ordering::Release);
        r
    }

    #[inline]
    fn read(&self, key: Key) -> Option<u64> {
        self.table.read_key(key, Ordering::Acquire)
    }

    #[inline]
    fn read_index(&self, index: usize) -> Option<u64> {
        self.table.read_index(index, Ordering::Acquire)
    }

    fn remove_insert(&self, local: &mut RcuLocal<'_>, key: Key, value: u64) -> Key {
        self.table.unpublish(key);
        local.limbo.push(Retired {
            index: key.index,
            tag: 0,
        });
        local.retired += 1;
        if local.retired.is_multiple_of(GRACE_BATCH) {
            self.grace_period(&mut local.limbo);
        }
        let index = loop {
            if let Some(index) = self.table.pop() {
                break index;
            }
            self.grace_period(&mut local.limbo);
        };
        // SAFETY: popped.
        unsafe { self.table.publish(index, value) }
    }
}

/// `counted`: readers counted in the state word, as `src/handle/entry.rs`.
struct Counted {
    table: Table,
}

impl Counted {
    /// Counts one more reader of an occupied `state` of entry `index` whose
    /// generation passes `wanted`: whether it did.
    #[inline]
    fn count_in(&self, index: usize, wanted: impl Fn(u64) -> bool) -> bool {
        let word = &self.table.entries[index].state;
        let mut state = word.load(Ordering::Acquire);
        loop {
            if state & counted_word::OCCUPIED == 0 || !wanted(counted_word::generation(state)) {
                return false;
            }
            match word.compare_exchange_weak(state, state + 1, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => return true,
                Err(actual) => state = actual,
            }
        }
    }

    /// Ends a counted read of entry `index`; the last reader of a removed
    /// entry frees it.
    #[inline]
    fn count_out(&self, index: usize) {
        let word = &self.table.entries[index].state;
        let before = word.fetch_sub(1, Ordering::Release);
        if before & counted_word::REMOVED != 0 && counted_word::readers(before) == 1 {
            fence(Ordering::Acquire);
            let generation = counted_word::generation(before);
            word.store(counted_word::free(generation), Ordering::Relaxed);
            // SAFETY: the last reader of a removed entry owns it.
            unsafe { self.table.reclaim(index as u32) };
        }
    }

    #[inline]
    fn counted_read(&self, index: usize, wanted: impl Fn(u64) -> bool) -> Option<u64> {
        if !self.count_in(index, wanted) {
            return None;
        }
        // SAFETY: counted in: nobody frees or writes the cell until the count
        // is out, and the Acquire CAS saw the publish.
        let value = unsafe { self.table.value(index) };
        self.count_out(index);
        Some(value)
    }
}

impl Scheme for Counted {
    const NAME: &'static str = "counted";
    type Local<'a> = ();

    fn build() -> (Self, Vec<Key>) {
        let table = Table::new(counted_word::free(1));
        let keys = table.populate(counted_word::generation, counted_word::live);
        (Self { table }, keys)
    }

    fn local(&self, _thread: usize) {}

    #[inline]
    fn section<R>(&self, _local: &mut (), f: impl FnOnce() -> R) -> R {
        f()
    }

    #[inline]
    fn read(&self, key: Key) -> Option<u64> {
        self.counted_read(key.index as usize, |g| g == key.generation)
    }

    #[inline]
    fn read_index(&self, index: usize) -> Option<u64> {
        self.counted_read(index, |_| true)
    }

    fn remove_insert(&self, _local: &mut (), key: Key, value: u64) -> Key {
        let word = &self.table.entries[key.index as usize].state;
        let mut state = word.load(Ordering::Relaxed);
        let owned = loop {
            assert!(
                state & counted_word::OCCUPIED != 0
                    && counted_word::generation(state) == key.generation,
                "a thread removes only its own live keys"
            );
            let readers = counted_word::readers(state);
            let next = counted_word::free(key.generation + 1);
            let new = if readers == 0 {
                next
            } else {
                next | counted_word::REMOVED | readers
            };
            // Acquire: the readers' Release decrements happen before the free.
            match word.compare_exchange_weak(state, new, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => break readers == 0,
                Err(actual) => state = actual,
            }
        };
        if owned {
            // SAFETY: removed with no reader: the remover owns the entry.
            unsafe { self.table.reclaim(key.index) };
        }
        let index = loop {
            if let Some(index) = self.table.pop() {
                break index;
            }
            // Only entries removed while read are missing: their last
            // readers free them.
            std::thread::yield_now();
        };
        // SAFETY: popped, so owned.
        unsafe { self.table.put(index as usize, value) };
        let entry = &self.table.entries[index as usize];
        let generation = counted_word::generation(entry.state.load(Ordering::Relaxed));
        entry
            .state
            .store(counted_word::live(generation), Ordering::Release);
        Key { index, generation }
    }
}

/// A xorshift64* generator: the same sequence for every candidate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number below `n` (`n` < 2^32).
    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Row {
    ReadOneShot,
    ReadSection,
    Iterate,
    RemoveInsert,
}

const ROWS: [(&str, Row); 4] = [
    ("read_one_shot", Row::ReadOneShot),
    ("read_section", Row::ReadSection),
    ("iterate", Row::Iterate),
    ("remove_insert", Row::RemoveInsert),
];

/// One bench thread's run: its operations and its time.
fn worker<S: Scheme>(
    scheme: &S,
    thread: usize,
    keys: &[Key],
    partition: &mut [Key],
    row: Row,
    barrier: &Barrier,
    duration: Duration,
) -> (u64, Duration) {
    let mut local = scheme.local(thread);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (thread as u64 + 1));
    let mut sum = 0u64;
    let mut misses = 0u64;
    let mut ops = 0u64;
    barrier.wait();
    let start = Instant::now();
    let elapsed = loop {
        match row {
            Row::ReadOneShot => {
                for _ in 0..1024 {
                    let key = keys[rng.below(keys.len())];
                    match scheme.section(&mut local, || scheme.read(key)) {
                        Some(v) => sum = sum.wrapping_add(v),
                        None => misses += 1,
                    }
                }
                ops += 1024;
            }
            Row::ReadSection => {
                for _ in 0..4 {
                    let (s, m) = scheme.section(&mut local, || {
                        let (mut s, mut m) = (0u64, 0u64);
                        for _ in 0..SECTION {
                            match scheme.read(keys[rng.below(keys.len())]) {
                                Some(v) => s = s.wrapping_add(v),
                                None => m += 1,
                            }
                        }
                        (s, m)
                    });
                    sum = sum.wrapping_add(s);
                    misses += m;
                }
                ops += 4 * SECTION as u64;
            }
            Row::Iterate => {
                let (s, n) = scheme.section(&mut local, || {
                    let (mut s, mut n) = (0u64, 0u64);
                    for index in 0..ENTRIES {
                        if let Some(v) = scheme.read_index(index) {
                            s = s.wrapping_add(v);
                            n += 1;
                        }
                    }
                    (s, n)
                });
                sum = sum.wrapping_add(s);
                misses += LIVE as u64 - n;
                ops += n;
            }
            Row::RemoveInsert => {
                for _ in 0..64 {
                    let slot = rng.below(partition.len());
                    let value = rng.next();
                    partition[slot] = scheme.remove_insert(&mut local, partition[slot], value);
                }
                ops += 64;
            }
        }
        let elapsed = start.elapsed();
        if elapsed >= duration {
            break elapsed;
        }
    };
    black_box(sum);
    assert_eq!(misses, 0, "{}: every read finds its value", S::NAME);
    (ops, elapsed)
}

/// One round of `S` on `threads` threads: ns per operation over all of them.
fn run<S: Scheme>(
    scheme: &S,
    keys: &[Key],
    partitions: &mut [Vec<Key>],
    row: Row,
    duration: Duration,
) -> f64 {
    let barrier = Barrier::new(partitions.len());
    let runs: Vec<(u64, Duration)> = std::thread::scope(|scope| {
        let threads: Vec<_> = partitions
            .iter_mut()
            .enumerate()
            .map(|(thread, partition)| {
                let barrier = &barrier;
                scope.spawn(move || worker(scheme, thread, keys, partition, row, barrier, duration))
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("a bench thread"))
            .collect()
    });
    let ops: u64 = runs.iter().map(|r| r.0).sum();
    let wall = runs.iter().map(|r| r.1).max().unwrap_or_default();
    wall.as_nanos() as f64 / ops as f64
}

/// A candidate's store for one row and thread count, and its figures.
struct Column {
    name: &'static str,
    measure: Box<dyn FnMut(Duration) -> f64>,
    figures: Vec<f64>,
}

fn column<S: Scheme>(row: Row, threads: usize) -> Column {
    let (scheme, keys) = S::build();
    // Boxed: `seize`'s reclaimers find the store from its collector, so it
    // must not move while retirements are pending.
    let scheme = Box::new(scheme);
    let mut partitions: Vec<Vec<Key>> = (0..threads)
        .map(|t| keys.iter().skip(t).step_by(threads).copied().collect())
        .collect();
    Column {
        name: S::NAME,
        measure: Box::new(move |duration| run(&*scheme, &keys, &mut partitions, row, duration)),
        figures: Vec::new(),
    }
}

fn main() {
    let mut rounds = 7;
    let mut ms = 100u64;
    let mut filters = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let number = |v: Option<String>| v.and_then(|v| v.parse::<u64>().ok()).filter(|n| *n > 0);
        match arg.as_str() {
            "--rounds" => rounds = number(args.next()).expect(USAGE) as usize,
            "--ms" => ms = number(args.next()).expect(USAGE),
            "-h" | "--help" => return println!("{USAGE}"),
            _ => filters.push(arg),
        }
    }
    let duration = Duration::from_millis(ms);
    let machine = tagpool_benches::Machine::current();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "`reclaim` binary, {} on {}, {} logical CPUs: median of {rounds} rounds of about {ms} ms \
         per candidate, the candidates in rotating order; a store of {ENTRIES} entries, {LIVE} \
         live `Box<u64>` values; ns per operation (iterate: per live value; remove_insert: per \
         remove + insert), over all threads' operations. membarrier: {}.\n",
        machine.date,
        machine.cpu,
        machine.cpus,
        if membarrier_registered() {
            "PRIVATE_EXPEDITED"
        } else {
            "unavailable, SeqCst fences instead"
        },
    );
    out.push_str("| row | threads | candidate | ns |\n|---|---:|---|---:|\n");
    print!("{out}");
    for (name, row) in ROWS {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        for threads in 1..=MAX_THREADS {
            let mut columns = vec![
                column::<Crossbeam>(row, threads),
                column::<Seize>(row, threads),
                column::<MembarrierRcu>(row, threads),
                column::<Counted>(row, threads),
            ];
            // A warm-up round, not counted.
            for column in &mut columns {
                (column.measure)(duration / 4);
            }
            let n = columns.len();
            for r in 0..rounds {
                for k in 0..n {
                    let column = &mut columns[(r + k) % n];
                    let ns = (column.measure)(duration);
                    column.figures.push(ns);
                }
            }
            for column in &mut columns {
                println!(
                    "| {name} | {threads} | {} | {:.2} |",
                    column.name,
                    median(&mut column.figures)
                );
            }
        }
    }
}
