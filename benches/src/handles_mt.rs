//! Multi-threaded keyed stores: tagpool's `HandlePool` against the
//! locked and concurrent stores a user would share between threads
//! instead, each read through `&self` from every thread (the
//! `handles_mt` binary).
//!
//! Every store holds [`LIVE`] `u64` values in room for [`CAPACITY`],
//! inserted up front. The workloads (see [`Workload`]), each run for a
//! fixed time by every thread at once ([`run`]):
//!
//! - `random_reads`: read the value of a random live key;
//! - `read_mostly`: 99% random reads, 1% remove one of the thread's own
//!   keys and insert a new value in its place;
//! - `hot8`: every thread reads the same 8 keys, round robin;
//! - `iter_churn`: every thread but the first sums every live value, per
//!   value visited, while the first removes and inserts values without a
//!   pause (one thread: it iterates, nobody churns).
//!
//! Reads come in batches of [`BATCH`] through one read section or one
//! lock where the store has them (tagpool's `read()`, the locks' guards),
//! as a game system's loop over its entities would take them; a store
//! without sections reads each key on its own. An iteration takes one
//! section or lock per whole pass.

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use sharded_slab::Slab;
use slotmap::{DefaultKey, Key as _, KeyData, SlotMap};
use tagpool::{Handle, HandlePool};

/// Entries of every store (tagpool: exactly that many; the others may grow
/// past it, never needed).
pub const CAPACITY: usize = 8192;

/// Values live in every store, inserted before the workloads.
pub const LIVE: usize = 4096;

/// Reads per read section or lock.
pub const BATCH: usize = 256;

/// `read_mostly`: one operation in this many is a remove + insert.
pub const WRITE_ONE_IN: u64 = 100;

/// An insert into a tagpool pool that has room: it can still be refused
/// for a moment, while every entry that has room awaits a grace period that
/// a section held open elsewhere blocks (a reader preempted inside its
/// section, on a machine with fewer CPUs than threads): yields until that
/// section ends, as a caller with room to spare would.
fn insert_retrying(pool: &HandlePool<u64>, mut value: u64) -> Handle {
    loop {
        match pool.insert(value) {
            Ok(key) => return key,
            Err(err) => {
                value = err.into_inner();
                std::thread::yield_now();
            }
        }
    }
}

/// The keys `hot8` reads, the first of the shared list.
pub const HOT: usize = 8;

/// `iter_churn`: the churner's remove + insert pairs between two looks at
/// the stop flag.
const CHURN_BATCH: usize = 64;

/// `iter_churn`'s pace: ns between the churner's remove + insert pairs, 0
/// for none (flat out, the row as defined). See [`set_churn_pace`].
static CHURN_PACE_NS: AtomicU64 = AtomicU64::new(0);

/// Paces `iter_churn`'s churner at `per_us` remove + insert pairs per
/// microsecond from here on (0: flat out, the default): it spins until
/// each pair is due, and catches up on the pairs it fell behind, so that
/// every store that can keep the pace does the same work, and one that
/// cannot shows it in the churner's column.
pub fn set_churn_pace(per_us: f64) {
    let ns = if per_us > 0.0 {
        (1_000.0 / per_us) as u64
    } else {
        0
    };
    CHURN_PACE_NS.store(ns.max(u64::from(per_us > 0.0)), Ordering::Relaxed);
}

/// A keyed store shared by threads through `&self`.
pub trait Store: Sync + Sized + 'static {
    /// Its key.
    type Key: Copy + Send + Sync + 'static;
    /// The report's column.
    const NAME: &'static str;
    /// Whether it can iterate through `&self` (sharded-slab cannot:
    /// `unique_iter` takes `&mut`).
    const ITERATES: bool = true;
    /// An empty store with room for `capacity` values.
    fn build(capacity: usize) -> Self;
    /// Stores `value` and returns its key.
    fn insert(&self, value: u64) -> Self::Key;
    /// Ends the value of `key`; whether it was live.
    fn remove(&self, key: Self::Key) -> bool;
    /// `key` as 64 bits, for the shared key table of `read_mostly`.
    fn to_bits(key: Self::Key) -> u64;
    /// The key whose [`to_bits`](Store::to_bits) are `bits`.
    fn from_bits(bits: u64) -> Self::Key;
    /// `n` reads of the keys that `next` gives, in one section or lock
    /// where the store has them: the sum of the values found (a stale key
    /// adds nothing).
    fn read_batch(&self, n: usize, next: impl FnMut() -> Self::Key) -> u64;
    /// One pass over every live value, in one section or lock: their sum
    /// and how many there were.
    fn sum_all(&self) -> (u64, u64);
}

/// tagpool's `HandlePool`, read through a read section: one `read()` per
/// batch of reads or per pass.
impl Store for HandlePool<u64> {
    type Key = Handle;
    const NAME: &'static str = "tagpool";

    fn build(capacity: usize) -> Self {
        HandlePool::new(capacity)
    }

    #[inline]
    fn insert(&self, value: u64) -> Handle {
        insert_retrying(self, value)
    }

    #[inline]
    fn remove(&self, key: Handle) -> bool {
        HandlePool::remove(self, key)
    }

    #[inline]
    fn to_bits(key: Handle) -> u64 {
        key.to_bits()
    }

    #[inline]
    fn from_bits(bits: u64) -> Handle {
        Handle::from_bits(bits).expect("the bits of a handle")
    }

    #[inline]
    fn read_batch(&self, n: usize, mut next: impl FnMut() -> Handle) -> u64 {
        let section = self.read();
        let mut sum = 0u64;
        for _ in 0..n {
            if let Some(v) = section.get(next()) {
                sum = sum.wrapping_add(*v);
            }
        }
        sum
    }

    #[inline]
    fn sum_all(&self) -> (u64, u64) {
        let section = self.read();
        let (mut sum, mut n) = (0u64, 0u64);
        for (_, v) in section.iter() {
            sum = sum.wrapping_add(*v);
            n += 1;
        }
        (sum, n)
    }
}

/// The same pool read through its counted reads: `get` (a `Ref`) per key
/// and `iter()` (a `Ref` per value).
#[derive(Debug)]
pub struct Counted(pub HandlePool<u64>);

impl Store for Counted {
    type Key = Handle;
    const NAME: &'static str = "tagpool_counted";

    fn build(capacity: usize) -> Self {
        Self(HandlePool::new(capacity))
    }

    #[inline]
    fn insert(&self, value: u64) -> Handle {
        self.0.insert(value).expect("the pool has room")
    }

    #[inline]
    fn remove(&self, key: Handle) -> bool {
        self.0.remove(key)
    }

    #[inline]
    fn to_bits(key: Handle) -> u64 {
        key.to_bits()
    }

    #[inline]
    fn from_bits(bits: u64) -> Handle {
        Handle::from_bits(bits).expect("the bits of a handle")
    }

    #[inline]
    fn read_batch(&self, n: usize, mut next: impl FnMut() -> Handle) -> u64 {
        let mut sum = 0u64;
        for _ in 0..n {
            if let Some(v) = self.0.get(next()) {
                sum = sum.wrapping_add(*v);
            }
        }
        sum
    }

    #[inline]
    fn sum_all(&self) -> (u64, u64) {
        let (mut sum, mut n) = (0u64, 0u64);
        for v in self.0.iter() {
            sum = sum.wrapping_add(*v);
            n += 1;
        }
        (sum, n)
    }
}

/// slotmap's keys through their FFI bits.
fn slot_bits(key: DefaultKey) -> u64 {
    key.data().as_ffi()
}

/// The slotmap key of `bits` from [`slot_bits`].
fn slot_key(bits: u64) -> DefaultKey {
    KeyData::from_ffi(bits).into()
}

/// A `SlotMap` behind a lock: `$read` takes the lock `$r` for reading (a
/// shared guard, or the mutex), `$write` takes `$w` exclusively.
macro_rules! locked_slotmap {
    ($ty:ty, $name:expr, $new:expr, |$r:ident| $read:expr, |$w:ident| $write:expr) => {
        impl Store for $ty {
            type Key = DefaultKey;
            const NAME: &'static str = $name;

            fn build(capacity: usize) -> Self {
                $new(SlotMap::with_capacity(capacity))
            }

            #[inline]
            fn insert(&self, value: u64) -> DefaultKey {
                let $w = self;
                let mut map = $write;
                map.insert(value)
            }

            #[inline]
            fn remove(&self, key: DefaultKey) -> bool {
                let $w = self;
                let mut map = $write;
                map.remove(key).is_some()
            }

            #[inline]
            fn to_bits(key: DefaultKey) -> u64 {
                slot_bits(key)
            }

            #[inline]
            fn from_bits(bits: u64) -> DefaultKey {
                slot_key(bits)
            }

            #[inline]
            fn read_batch(&self, n: usize, mut next: impl FnMut() -> DefaultKey) -> u64 {
                let $r = self;
                let map = $read;
                let mut sum = 0u64;
                for _ in 0..n {
                    if let Some(v) = map.get(next()) {
                        sum = sum.wrapping_add(*v);
                    }
                }
                sum
            }

            #[inline]
            fn sum_all(&self) -> (u64, u64) {
                let $r = self;
                let map = $read;
                let (mut sum, mut n) = (0u64, 0u64);
                for (_, v) in map.iter() {
                    sum = sum.wrapping_add(*v);
                    n += 1;
                }
                (sum, n)
            }
        }
    };
}

locked_slotmap!(
    RwLock<SlotMap<DefaultKey, u64>>,
    "rwlock_slotmap",
    RwLock::new,
    |l| l.read().unwrap_or_else(PoisonError::into_inner),
    |l| l.write().unwrap_or_else(PoisonError::into_inner)
);
locked_slotmap!(
    parking_lot::RwLock<SlotMap<DefaultKey, u64>>,
    "parking_lot_slotmap",
    parking_lot::RwLock::new,
    |l| l.read(),
    |l| l.write()
);
locked_slotmap!(
    Mutex<SlotMap<DefaultKey, u64>>,
    "mutex_slotmap",
    Mutex::new,
    |l| l.lock().unwrap_or_else(PoisonError::into_inner),
    |l| l.lock().unwrap_or_else(PoisonError::into_inner)
);

/// sharded-slab's `Slab`: a `get` (a guard) per read; no iteration through
/// `&self`.
impl Store for Slab<u64> {
    type Key = usize;
    const NAME: &'static str = "sharded_slab";
    const ITERATES: bool = false;

    fn build(_capacity: usize) -> Self {
        Slab::new()
    }

    #[inline]
    fn insert(&self, value: u64) -> usize {
        Slab::insert(self, value).expect("the slab has room")
    }

    #[inline]
    fn remove(&self, key: usize) -> bool {
        Slab::remove(self, key)
    }

    #[inline]
    fn to_bits(key: usize) -> u64 {
        key as u64
    }

    #[inline]
    fn from_bits(bits: u64) -> usize {
        bits as usize
    }

    #[inline]
    fn read_batch(&self, n: usize, mut next: impl FnMut() -> usize) -> u64 {
        let mut sum = 0u64;
        for _ in 0..n {
            if let Some(v) = self.get(next()) {
                sum = sum.wrapping_add(*v);
            }
        }
        sum
    }

    fn sum_all(&self) -> (u64, u64) {
        unreachable!("sharded-slab cannot iterate through `&self`")
    }
}

/// dashmap's `DashMap`, keyed by a counter: an insert takes the next
/// number as its key. A `get` (a shard's read guard) per read, `iter()`
/// for a pass.
#[derive(Debug)]
pub struct Dash {
    map: DashMap<u64, u64>,
    next: AtomicU64,
}

impl Store for Dash {
    type Key = u64;
    const NAME: &'static str = "dashmap";

    fn build(capacity: usize) -> Self {
        Self {
            map: DashMap::with_capacity(capacity),
            next: AtomicU64::new(0),
        }
    }

    #[inline]
    fn insert(&self, value: u64) -> u64 {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        self.map.insert(key, value);
        key
    }

    #[inline]
    fn remove(&self, key: u64) -> bool {
        self.map.remove(&key).is_some()
    }

    #[inline]
    fn to_bits(key: u64) -> u64 {
        key
    }

    #[inline]
    fn from_bits(bits: u64) -> u64 {
        bits
    }

    #[inline]
    fn read_batch(&self, n: usize, mut next: impl FnMut() -> u64) -> u64 {
        let mut sum = 0u64;
        for _ in 0..n {
            if let Some(v) = self.map.get(&next()) {
                sum = sum.wrapping_add(*v);
            }
        }
        sum
    }

    #[inline]
    fn sum_all(&self) -> (u64, u64) {
        let (mut sum, mut n) = (0u64, 0u64);
        for entry in self.map.iter() {
            sum = sum.wrapping_add(*entry.value());
            n += 1;
        }
        (sum, n)
    }
}

/// A thread's xorshift64* generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for thread `thread` of round `round`: distinct nonzero
    /// seeds.
    pub fn new(thread: usize, round: usize) -> Self {
        let seed = (thread as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (round as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
        Self(seed | 1)
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A random index below [`LIVE`] (a power of two).
    #[inline]
    pub fn live_index(&mut self) -> usize {
        (self.next_u64() >> 32) as usize & (LIVE - 1)
    }
}

/// The workloads, in table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Random reads of live keys.
    RandomReads,
    /// 99% random reads, 1% remove + insert of the thread's own keys.
    ReadMostly,
    /// Every thread reads the same [`HOT`] keys.
    Hot8,
    /// Iterate while one thread churns; per value visited.
    IterChurn,
}

impl Workload {
    /// Every workload, in table order.
    pub const ALL: [Workload; 4] = [
        Workload::RandomReads,
        Workload::ReadMostly,
        Workload::Hot8,
        Workload::IterChurn,
    ];

    /// Its row name.
    pub fn name(self) -> &'static str {
        match self {
            Workload::RandomReads => "random_reads",
            Workload::ReadMostly => "read_mostly",
            Workload::Hot8 => "hot8",
            Workload::IterChurn => "iter_churn",
        }
    }
}

/// A store with its [`LIVE`] values and their keys, shared by a row's
/// threads across its rounds.
#[derive(Debug)]
pub struct Populated<S: Store> {
    /// The store.
    pub store: S,
    /// The keys of the values inserted up front, in insertion order; the
    /// read-only workloads read through them.
    pub keys: Box<[S::Key; LIVE]>,
    /// `read_mostly`'s keys, as [`Store::to_bits`]: slot `i` belongs to
    /// thread `i % threads`, which replaces the key there after each of
    /// its remove + insert pairs; the others read it at any time (a key
    /// just removed reads as stale).
    pub table: Box<[AtomicU64; LIVE]>,
}

impl<S: Store> Populated<S> {
    /// A fresh store with [`LIVE`] values in room for [`CAPACITY`].
    pub fn new() -> Self {
        let store = S::build(CAPACITY);
        let keys: Vec<S::Key> = (0..LIVE as u64).map(|i| store.insert(i)).collect();
        let table: Vec<AtomicU64> = keys
            .iter()
            .map(|k| AtomicU64::new(S::to_bits(*k)))
            .collect();
        Self {
            store,
            keys: live_array(keys),
            table: live_array(table),
        }
    }
}

impl<S: Store> Default for Populated<S> {
    fn default() -> Self {
        Self::new()
    }
}

/// `items`, [`LIVE`] of them, as an array.
fn live_array<T>(items: Vec<T>) -> Box<[T; LIVE]> {
    match items.into_boxed_slice().try_into() {
        Ok(array) => array,
        Err(_) => panic!("not {LIVE} items"),
    }
}

/// The stop flag on a cache line of its own, so that the threads' polls of
/// it share nothing else.
#[repr(align(128))]
struct Stop(AtomicBool);

/// One round of `workload` on `threads` threads for about `duration`: all
/// start at a barrier, and each runs until the stop flag is raised after
/// `duration`. Returns ns per operation per thread: the time from the
/// start to the last thread's end, times the threads that count, over
/// their operations (`iter_churn`: values visited by the iterating
/// threads, the churner not counted).
pub fn run<S: Store>(
    populated: &Populated<S>,
    workload: Workload,
    threads: usize,
    duration: Duration,
    round: usize,
) -> Round {
    let stop = Stop(AtomicBool::new(false));
    let barrier = Barrier::new(threads + 1);
    let (start, results) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, barrier) = (&stop.0, &barrier);
                s.spawn(move || {
                    let mut rng = Rng::new(t, round);
                    barrier.wait();
                    let ops = match workload {
                        Workload::RandomReads => random_reads(populated, &mut rng, stop),
                        Workload::ReadMostly => read_mostly(populated, &mut rng, t, threads, stop),
                        Workload::Hot8 => hot8(populated, t, stop),
                        Workload::IterChurn if t == 0 && threads > 1 => {
                            let pairs = churn(populated, stop);
                            return (0, pairs, Instant::now());
                        }
                        Workload::IterChurn => iterate(populated, stop),
                    };
                    (ops, 0, Instant::now())
                })
            })
            .collect();
        barrier.wait();
        let start = Instant::now();
        std::thread::sleep(duration);
        stop.0.store(true, Ordering::Relaxed);
        let results: Vec<(u64, u64, Instant)> = handles
            .into_iter()
            .map(|h| h.join().expect("a benchmark thread panicked"))
            .collect();
        (start, results)
    });
    let end = results.iter().map(|r| r.2).max().expect("a thread");
    let ops: u64 = results.iter().map(|r| r.0).sum();
    let pairs: u64 = results.iter().map(|r| r.1).sum();
    let counted = if workload == Workload::IterChurn && threads > 1 {
        threads - 1
    } else {
        threads
    };
    let ns = end.duration_since(start).as_nanos() as f64;
    Round {
        ns_per_op: ns * counted as f64 / ops.max(1) as f64,
        churned_per_us: pairs as f64 * 1_000.0 / ns,
    }
}

/// What one round of a row measured.
#[derive(Clone, Copy, Debug)]
pub struct Round {
    /// ns per operation per thread (see [`run`]).
    pub ns_per_op: f64,
    /// `iter_churn`: the churner's remove + insert pairs per microsecond
    /// (a store that makes its writer wait while others iterate churns
    /// less); 0 in the other rows.
    pub churned_per_us: f64,
}

/// `random_reads`: batches of [`BATCH`] reads of random initial keys.
fn random_reads<S: Store>(p: &Populated<S>, rng: &mut Rng, stop: &AtomicBool) -> u64 {
    let keys = &*p.keys;
    let mut ops = 0;
    let mut sum = 0u64;
    while !stop.load(Ordering::Relaxed) {
        sum = sum.wrapping_add(p.store.read_batch(BATCH, || keys[rng.live_index()]));
        ops += BATCH as u64;
    }
    black_box(sum);
    ops
}

/// `read_mostly`: each operation a read of a random slot of the shared
/// table or, one in [`WRITE_ONE_IN`], a remove of the key in a random slot
/// of this thread's own (`t`, `t + n`, ...) and an insert whose key takes
/// its place. Reads run in batches of up to [`BATCH`], a batch ending
/// early at a write (done outside any section or lock).
fn read_mostly<S: Store>(
    p: &Populated<S>,
    rng: &mut Rng,
    t: usize,
    threads: usize,
    stop: &AtomicBool,
) -> u64 {
    let table = &*p.table;
    let own: Vec<usize> = (t..LIVE).step_by(threads).collect();
    let mut ops = 0;
    let mut sum = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut reads = 0;
        let mut write = false;
        while reads < BATCH {
            if rng.next_u64().is_multiple_of(WRITE_ONE_IN) {
                write = true;
                break;
            }
            reads += 1;
        }
        if reads > 0 {
            sum = sum.wrapping_add(p.store.read_batch(reads, || {
                S::from_bits(table[rng.live_index()].load(Ordering::Relaxed))
            }));
        }
        if write {
            let slot = &table[own[(rng.next_u64() >> 32) as usize % own.len()]];
            let old = S::from_bits(slot.load(Ordering::Relaxed));
            assert!(p.store.remove(old), "only this thread removes its keys");
            let new = p.store.insert(rng.next_u64());
            slot.store(S::to_bits(new), Ordering::Relaxed);
        }
        ops += reads as u64 + u64::from(write);
    }
    black_box(sum);
    ops
}

/// `hot8`: batches of [`BATCH`] reads cycling over the first [`HOT`] keys,
/// each thread starting at its own.
fn hot8<S: Store>(p: &Populated<S>, t: usize, stop: &AtomicBool) -> u64 {
    let hot: &[S::Key; HOT] = p.keys[..HOT].try_into().expect("HOT keys");
    let mut i = t;
    let mut ops = 0;
    let mut sum = 0u64;
    while !stop.load(Ordering::Relaxed) {
        sum = sum.wrapping_add(p.store.read_batch(BATCH, || {
            i += 1;
            hot[i % HOT]
        }));
        ops += BATCH as u64;
    }
    black_box(sum);
    ops
}

/// `iter_churn`'s iterating threads: whole passes; returns the values
/// visited.
fn iterate<S: Store>(p: &Populated<S>, stop: &AtomicBool) -> u64 {
    let mut values = 0;
    while !stop.load(Ordering::Relaxed) {
        let (sum, n) = p.store.sum_all();
        black_box(sum);
        values += n;
    }
    values
}

/// `iter_churn`'s churner: removes the values in turn, each replaced by a
/// new one at once; the only writer, so it owns every key.
/// Returns the remove + insert pairs it made.
fn churn<S: Store>(p: &Populated<S>, stop: &AtomicBool) -> u64 {
    let table = &*p.table;
    let mut keys: Vec<S::Key> = table
        .iter()
        .map(|slot| S::from_bits(slot.load(Ordering::Relaxed)))
        .collect();
    let mut i = 0usize;
    let mut value = 0u64;
    let pace = CHURN_PACE_NS.load(Ordering::Relaxed);
    let start = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let pairs = if pace == 0 {
            CHURN_BATCH
        } else {
            let due = (start.elapsed().as_nanos() / u128::from(pace)) as usize;
            if due <= i {
                std::hint::spin_loop();
                continue;
            }
            (due - i).min(CHURN_BATCH)
        };
        for _ in 0..pairs {
            let key = &mut keys[i % LIVE];
            assert!(p.store.remove(*key), "the churner owns every key");
            value = value.wrapping_add(1);
            *key = p.store.insert(value);
            i = i.wrapping_add(1);
        }
    }
    // Leave the table naming the live values, for the next round.
    for (slot, key) in table.iter().zip(&keys) {
        slot.store(S::to_bits(*key), Ordering::Relaxed);
    }
    i as u64
}
