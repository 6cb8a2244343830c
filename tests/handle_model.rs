//! Property tests of the handle pool against a single-threaded slot map: a
//! plain model that keeps, for every handle ever returned, whether it is
//! live or reserved, its value, its insertion order and how many `Ref`s
//! read it.
//!
//! Random sequences of inserts (`insert` and `insert_with_key`), removes,
//! takes, reads, held `Ref`s and their drops, on pools that never evict,
//! evict the oldest value or the least value, with threads' caches of
//! free entries on or off. At every step the pool must answer as the
//! model does: which handles are live and what they hold, `len`, which
//! inserts fail, which value an eviction picks (the oldest, or one of the
//! least, among those nobody reads), that a remove while read is deferred
//! to the last `Ref`, that a take while read fails and leaves the value,
//! that every value is dropped exactly once, and that a key handed out is
//! never handed out again (each entry's generations only grow).
//!
//! Reservations among them (`reserve`, `reserve_many`, `insert_reserved`,
//! `cancel_reservation`, `is_reserved`): a reserved entry holds no value
//! (its key reads `None`, the walks leave it out, `len` counts it as an
//! entry in use, `stats` as `reserved`, not `live`), counts towards the capacity, is never
//! evicted, takes one fill or one cancel (after which its key is stale),
//! and `reserve_many` takes all its keys or none (the evictions of those
//! it took before it ran out stay done).
//!
//! Read sections (`read`, `with`) are held across steps too: once a pool
//! has had one, every removal (remove, the last `Ref` of a removed value,
//! an eviction) leaves its value in place, stale, until a grace period
//! (an explicit `reclaim`, an insert that finds no other free entry, an
//! eviction's) finds no section open that began before the grace period
//! that first looked at it; the model keeps the pool's epochs and tags and
//! predicts every drop, every `on_evict` and every refusal. A
//! second run mixes in the `&mut self` methods (`iter_mut`, `values`,
//! `values_mut`, `keys`, `retain`, `clear`, `drain` dropped part-way,
//! `get_disjoint_mut`, indexing) and checks `stats`.
//!
//! Beside the pool, a `SecondaryMap` and a `SparseSecondaryMap` take the
//! same inserts, reads, removes, `entry` calls and `retain`s, under keys
//! the model knows (live, reserved and stale), and must hold what a model
//! of at most one key and value per index holds (an older key never reads
//! or overwrites a newer value; a newer key replaces an older one).
//!
//! With the `serde` feature (`cargo test --features serde --test
//! handle_model`), a step saves the pool and both maps (in the tests'
//! format, `support/format.rs`), drops them, loads the saves, and the run
//! goes on with the loaded ones: every live key names a copy of its value,
//! every other key (a reserved one too: saves hold no reservations) is
//! stale, and where the save promises it (every free entry on the pool's
//! chain or free list: see `Model::exact`) the saved pool's next keys are
//! the loaded one's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError};
use tagpool::{
    Handle, HandleBuilder, HandlePool, InsertAtError, InsertError, OwnedRef, ReadSection, Ref,
    Reservation, SecondaryMap, SparseSecondaryMap, TakeError,
};

#[cfg(feature = "serde")]
#[path = "support/format.rs"]
mod format;

/// The most operations in one case: fewer under miri, whose cases are few
/// and slow (the sections' grace periods look at every thread's record).
fn ops_len() -> usize {
    if cfg!(miri) {
        40
    } else {
        80
    }
}

fn config(cases: u32) -> Config {
    let default = Config::default(); // reads `PROPTEST_CASES`
    let cases = if cfg!(miri) {
        4
    } else if std::env::var_os("PROPTEST_CASES").is_some() {
        default.cases
    } else {
        cases
    };
    Config {
        cases,
        max_shrink_iters: if cfg!(miri) { 16 } else { 1024 },
        failure_persistence: None,
        ..default
    }
}

/// A value: its key (for the least-value policy) and a unique id; counts
/// its drops.
struct Value {
    key: u8,
    id: usize,
    drops: Arc<Mutex<Vec<u32>>>,
}

impl Drop for Value {
    fn drop(&mut self) {
        self.drops.lock().unwrap()[self.id] += 1;
    }
}

#[derive(Clone, Copy, Debug)]
enum Policy {
    Never,
    Oldest,
    Least,
}

/// How a case builds its pool.
#[derive(Clone, Copy, Debug)]
struct Setting {
    capacity: usize,
    /// `HandleBuilder::initial`, if set.
    initial: Option<usize>,
    policy: Policy,
    /// Threads' caches of free entries: the default (on from 2 entries),
    /// or off.
    cache: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u8),
    /// `insert_with_key`.
    InsertWithKey(u8),
    /// `insert_mut` (the second run only).
    InsertMut(u8),
    /// `insert_at` (the second run only) of a value of this key (the `u8`
    /// last) into the entry the `Index` picks, one past the capacity
    /// included, at a generation the first `u8` picks around the entry's
    /// next one (see [`Model::insert_at`]).
    InsertAt(Index, u8, u8),
    /// `remove_mut` (the second run only).
    RemoveMut(Index),
    Remove(Index),
    Take(Index),
    Get(Index),
    Hold(Index),
    Unhold(Index),
    /// `get_owned` (the pool is in an `Arc`), the `OwnedRef` held.
    HoldOwned(Index),
    UnholdOwned(Index),
    // The `&mut self` methods (the second run only: no `Ref` is held).
    IterMut(u8),
    Values,
    Keys,
    /// `retain`, keeping the values whose key (of `Value`) is at most this.
    Retain(u8),
    Clear,
    /// `drain`, dropped after this many items.
    Drain(usize),
    GetDisjointMut(Index, Index),
    IndexMut(Index),
    /// `with`: a one-shot read section.
    With(Index),
    /// `read`: a section held across steps (the first run only).
    Open,
    /// Drops a held section, not necessarily the last opened.
    Close(Index),
    /// `get` and `contains` through the newest held section (or a new one).
    SectionGet(Index),
    /// `iter` through the newest held section (or a new one).
    SectionIter,
    /// `reclaim`.
    Reclaim,
    /// `reserve`.
    Reserve,
    /// `reserve_many` of this many keys.
    ReserveMany(usize),
    /// `insert_reserved` of a value of this key (of `Value`), under a
    /// reserved key (with `true`, if there is one) or any key.
    Fill(Index, bool, u8),
    /// `cancel_reservation` of a reserved key (with `true`, if there is
    /// one) or any key.
    Cancel(Index, bool),
    /// `insert` into both secondary maps.
    MapInsert(Index, u32),
    /// `get`, `get_mut` and `contains_key` on both maps.
    MapGet(Index),
    /// `remove` from both maps.
    MapRemove(Index),
    /// `entry` on both maps, used as the `u8` says (see [`use_entry`]).
    MapEntry(Index, u32, u8),
    /// `retain` on both maps, keeping the values of keys the pool holds.
    MapRetain,
    /// `iter_mut` on both maps, adding this to every value.
    MapIterMut(u32),
    /// `drain` on both maps.
    MapDrain,
    /// `get_disjoint_mut` of two keys on both maps, swapping their values.
    MapDisjoint(Index, Index),
    /// Saves the pool and the maps (structs as sequences with `true`),
    /// drops them, loads the saves and goes on with the loaded ones.
    #[cfg(feature = "serde")]
    Save(bool),
}

/// The steps both runs take: reservations and the secondary maps.
fn common_op() -> BoxedStrategy<Op> {
    let common = prop_oneof![
        2 => Just(Op::Reserve),
        1 => (0usize..4).prop_map(Op::ReserveMany),
        2 => (any::<Index>(), any::<bool>(), 0u8..6).prop_map(|(i, r, k)| Op::Fill(i, r, k)),
        1 => (any::<Index>(), any::<bool>()).prop_map(|(i, r)| Op::Cancel(i, r)),
        2 => (any::<Index>(), 0u32..100).prop_map(|(i, v)| Op::MapInsert(i, v)),
        1 => any::<Index>().prop_map(Op::MapGet),
        1 => any::<Index>().prop_map(Op::MapRemove),
        2 => (any::<Index>(), 0u32..100, 0u8..4).prop_map(|(i, v, how)| Op::MapEntry(i, v, how)),
        1 => Just(Op::MapRetain),
        1 => (1u32..5).prop_map(Op::MapIterMut),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Op::MapDisjoint(a, b)),
    ];
    // Rarer: a drain empties both maps.
    let common = prop_oneof![40 => common, 1 => Just(Op::MapDrain)];
    // About one step in twelve of these: a save or two in a case.
    #[cfg(feature = "serde")]
    let common = prop_oneof![12 => common, 1 => any::<bool>().prop_map(Op::Save)];
    common.boxed()
}

/// The steps of the first run. The steps of [`common_op`] come as one
/// alternative after the others (not as more alternatives of one union):
/// a union makes a generator for each alternative before the one it picks,
/// which in a debug build costs more than the rest of a case.
fn op() -> impl Strategy<Value = Op> {
    let own = prop_oneof![
        3 => (0u8..6).prop_map(Op::Insert),
        1 => (0u8..6).prop_map(Op::InsertWithKey),
        2 => any::<Index>().prop_map(Op::Remove),
        1 => any::<Index>().prop_map(Op::Take),
        2 => any::<Index>().prop_map(Op::Get),
        1 => any::<Index>().prop_map(Op::Hold),
        1 => any::<Index>().prop_map(Op::Unhold),
        1 => any::<Index>().prop_map(Op::HoldOwned),
        1 => any::<Index>().prop_map(Op::UnholdOwned),
        1 => any::<Index>().prop_map(Op::With),
        1 => Just(Op::Open),
        1 => any::<Index>().prop_map(Op::Close),
        1 => any::<Index>().prop_map(Op::SectionGet),
        1 => Just(Op::SectionIter),
        1 => Just(Op::Reclaim),
    ];
    prop_oneof![19 => own, 7 => common_op()]
}

/// The steps of the second run (see [`op`]).
fn exclusive_op() -> impl Strategy<Value = Op> {
    let own = prop_oneof![
        6 => (0u8..6).prop_map(Op::Insert),
        2 => (0u8..6).prop_map(Op::InsertWithKey),
        4 => (0u8..6).prop_map(Op::InsertMut),
        2 => (any::<Index>(), 0u8..4, 0u8..6).prop_map(|(i, g, k)| Op::InsertAt(i, g, k)),
        3 => any::<Index>().prop_map(Op::RemoveMut),
        2 => any::<Index>().prop_map(Op::Remove),
        2 => any::<Index>().prop_map(Op::Take),
        1 => any::<Index>().prop_map(Op::Get),
        1 => (1u8..4).prop_map(Op::IterMut),
        1 => Just(Op::Values),
        1 => Just(Op::Keys),
        1 => (0u8..6).prop_map(Op::Retain),
        1 => Just(Op::Clear),
        1 => (0usize..4).prop_map(Op::Drain),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Op::GetDisjointMut(a, b)),
        1 => any::<Index>().prop_map(Op::IndexMut),
        1 => any::<Index>().prop_map(Op::With),
    ];
    prop_oneof![29 => own, 9 => common_op()]
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        Just(Policy::Never),
        Just(Policy::Oldest),
        Just(Policy::Least)
    ]
}

fn setting() -> impl Strategy<Value = Setting> {
    (
        1usize..6,
        prop::option::of(1usize..6),
        policy(),
        any::<bool>(),
    )
        .prop_map(|(capacity, initial, policy, cache)| Setting {
            capacity,
            initial,
            policy,
            cache,
        })
}

/// An insert's result as the model takes it: the handle, or `None` for a
/// refusal, which must give back the value it was given (of id `id`).
fn refused_gives_back(
    result: Result<Handle, InsertError<Value>>,
    id: usize,
) -> Result<Option<Handle>, TestCaseError> {
    match result {
        Ok(h) => Ok(Some(h)),
        Err(err) => {
            prop_assert!(matches!(err, InsertError::Full(_)));
            prop_assert_eq!(err.into_inner().id, id);
            Ok(None)
        }
    }
}

/// The `id` of an entry that never held a value: a reservation.
const NO_VALUE: usize = usize::MAX;

/// The model's record of one handle.
#[derive(Debug)]
struct Entry {
    /// Its value's id; [`NO_VALUE`] for a reservation not filled.
    id: usize,
    key: u8,
    /// Insertion order (of the fill, for a reservation).
    order: usize,
    live: bool,
    /// Reserved, not yet filled nor cancelled: no value, not `live`.
    reserved: bool,
    /// `Ref`s held now.
    readers: usize,
    /// Removed from a pool that has had sections, awaiting a grace period:
    /// its tag (the epoch at its removal, plus one), and whether it was
    /// evicted (`on_evict` gets it then).
    limbo: Option<(u64, bool)>,
}

impl Entry {
    /// A live value's record: value `id` of key `key`, inserted `order`th.
    fn value(id: usize, key: u8, order: usize) -> Self {
        Self {
            id,
            key,
            order,
            live: true,
            reserved: false,
            readers: 0,
            limbo: None,
        }
    }

    /// A reservation's record.
    fn reservation() -> Self {
        Self {
            id: NO_VALUE,
            key: 0,
            order: 0,
            live: false,
            reserved: true,
            readers: 0,
            limbo: None,
        }
    }

    /// Whether it still takes an entry of the pool: live, reserved,
    /// removed and still read, or awaiting a grace period.
    fn occupies(&self) -> bool {
        self.live || self.reserved || self.readers > 0 || self.limbo.is_some()
    }
}

/// What the model expects of a claim of an entry (an insert, a
/// reservation).
#[derive(Debug)]
enum Expect {
    /// A free entry (or one a grace period freed, or, in a pool that has
    /// had sections, an evicted one).
    Free,
    /// The pool is full and evicts one of these values (by id).
    Evict(Vec<usize>),
    /// The pool is full and nothing can go: refused.
    Full,
}

/// A claim as the pool answered it.
#[derive(Debug)]
enum Claimed {
    Key(Handle),
    Refused,
    /// Taken by a `reserve_many` that ran out later, and given back: its
    /// key is never seen.
    Undone,
}

/// The model: every handle ever returned, and the values' drop counts.
struct Model {
    capacity: usize,
    /// `HandleBuilder::initial`, if set: entries allocated as needed.
    initial: Option<usize>,
    policy: Policy,
    cache: bool,
    drops: Arc<Mutex<Vec<u32>>>,
    evicted: Arc<Mutex<Vec<(Handle, usize)>>>,
    entries: HashMap<Handle, Entry>,
    handles: Vec<Handle>,
    /// By index, the newest generation handed out: a key handed out again,
    /// or an older one, is a bug.
    generations: HashMap<usize, u64>,
    order: usize,
    /// The most entries occupied at once so far.
    peak: std::cell::Cell<usize>,
    /// A section was ever opened: removals defer from then on.
    sections_used: bool,
    /// The pool's epoch (bumped by every grace period).
    epoch: u64,
    /// The epoch of the outermost held section, and how many are held.
    section: Option<(u64, usize)>,
    /// Evictions so far, and the `on_evict` calls expected so far.
    evictions: usize,
    handed: Vec<(Handle, usize)>,
    /// Entries taken or freed through `&self` since the pool was built or
    /// loaded: a thread's cache may hold free entries.
    shared: bool,
    /// Entries a `reserve_many` took, whose keys it gives back unseen when
    /// it runs out (only while the model replays one).
    undone: usize,
    /// The `Reservation` of every reserved key: the right to fill or
    /// cancel it (after a load, the old pool's: another pool's now).
    reservations: HashMap<Handle, Reservation>,
    /// A `reserve_many` ran out and gave back entries under keys nobody
    /// saw (see [`insert_at`](Self::insert_at)).
    gave_back_unseen: bool,
    /// An `insert_at` filled an entry (perhaps past those allocated).
    placed: bool,
}

impl Model {
    fn new(setting: Setting) -> Self {
        let Setting {
            capacity,
            initial,
            policy,
            cache,
        } = setting;
        Self {
            capacity,
            initial: initial.map(|initial| initial.min(capacity)),
            policy,
            cache,
            drops: Arc::new(Mutex::new(Vec::new())),
            evicted: Arc::new(Mutex::new(Vec::new())),
            entries: HashMap::new(),
            handles: Vec::new(),
            generations: HashMap::new(),
            order: 0,
            peak: std::cell::Cell::new(0),
            sections_used: false,
            epoch: 1,
            section: None,
            evictions: 0,
            handed: Vec::new(),
            shared: false,
            undone: 0,
            reservations: HashMap::new(),
            gave_back_unseen: false,
            placed: false,
        }
    }

    /// An entry whose occupancy just ended unread: dropped now, or into
    /// the limbo if the pool has had sections.
    fn ended(&mut self, h: Handle, evicted: bool) {
        let used = self.sections_used;
        let entry = self.entries.get_mut(&h).unwrap();
        debug_assert!(!entry.live && entry.readers == 0);
        if used {
            entry.limbo = Some((self.epoch + 1, evicted));
        } else if evicted {
            self.handed.push((h, entry.id));
        }
    }

    /// A grace period as the pool runs it: if anything awaits one, bump
    /// the epoch, free those tagged at or below the oldest held section's
    /// epoch. Returns how many it freed.
    fn grace(&mut self) -> usize {
        if !self.entries.values().any(|e| e.limbo.is_some()) {
            return 0;
        }
        self.epoch += 1;
        let oldest = self.section.map_or(u64::MAX, |(e, _)| e);
        let mut freed = 0;
        for (h, entry) in self.entries.iter_mut() {
            if let Some((tag, evicted)) = entry.limbo {
                if tag <= oldest {
                    entry.limbo = None;
                    freed += 1;
                    if evicted {
                        self.handed.push((*h, entry.id));
                    }
                }
            }
        }
        freed
    }

    /// Frees everything awaiting a grace period (`&mut self` paths, the
    /// pool's drop).
    fn free_all(&mut self) {
        for (h, entry) in self.entries.iter_mut() {
            if let Some((_, evicted)) = entry.limbo.take() {
                if evicted {
                    self.handed.push((*h, entry.id));
                }
            }
        }
    }

    /// The builder of the case's pools: that of the first, and of every
    /// load.
    fn builder(&self) -> HandleBuilder<Value> {
        let builder = HandlePool::builder().capacity(self.capacity);
        let builder = if self.cache {
            builder
        } else {
            builder.thread_cache(false)
        };
        let builder = match self.initial {
            Some(initial) => builder.initial(initial),
            None => builder,
        };
        let builder = match self.policy {
            Policy::Never => builder,
            Policy::Oldest => builder.evict_oldest(),
            Policy::Least => builder.evict_min_by_key(|v: &Value| v.key),
        };
        let log = self.evicted.clone();
        builder.on_evict(move |h, v: Value| log.lock().unwrap().push((h, v.id)))
    }

    fn pool(&self) -> HandlePool<Value> {
        self.builder().build().unwrap()
    }

    /// A new value of key `key`, and its id.
    fn value(&mut self, key: u8) -> (Value, usize) {
        let id = {
            let mut drops = self.drops.lock().unwrap();
            drops.push(0);
            drops.len() - 1
        };
        let value = Value {
            key,
            id,
            drops: self.drops.clone(),
        };
        (value, id)
    }

    fn occupied(&self) -> usize {
        self.entries.values().filter(|e| e.occupies()).count() + self.undone
    }

    fn live(&self) -> usize {
        self.entries.values().filter(|e| e.live).count()
    }

    fn reserved(&self) -> usize {
        self.entries.values().filter(|e| e.reserved).count()
    }

    /// Values removed while counted `Ref`s read them.
    fn removed_while_read(&self) -> usize {
        self.entries
            .values()
            .filter(|e| !e.live && e.readers > 0)
            .count()
    }

    /// Whether a save now promises the pool's next keys (the `Serialize`
    /// docs of `HandlePool`): every free entry is on the pool's chain or
    /// free list (a save moves the threads' cached entries there first).
    /// Not so where an entry in use holds no live value: one awaiting a
    /// grace period, removed while read, or reserved is free in the save,
    /// among the entries off the free list, in index order (in a pool
    /// built with `initial`, before those never allocated, which the
    /// saved pool takes first).
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    fn exact(&self) -> bool {
        self.entries.values().all(|e| e.live || !e.occupies())
    }

    /// A handle ever returned, if any.
    fn pick(&self, i: &Index) -> Option<Handle> {
        (!self.handles.is_empty()).then(|| *i.get(&self.handles))
    }

    /// A reserved handle (with `reserved`, if there is one), else any.
    fn pick_reserved(&self, i: &Index, reserved: bool) -> Option<Handle> {
        if reserved {
            let held: Vec<Handle> = self
                .handles
                .iter()
                .copied()
                .filter(|h| self.entries[h].reserved)
                .collect();
            if !held.is_empty() {
                return Some(*i.get(&held));
            }
        }
        self.pick(i)
    }

    /// `insert`, or `insert_with_key` (whose closure must get the key the
    /// insert returns).
    fn insert(
        &mut self,
        pool: &HandlePool<Value>,
        key: u8,
        with_key: bool,
    ) -> Result<(), TestCaseError> {
        self.shared = true;
        self.insert_by(key, false, |value, id| {
            if with_key {
                let mut given = None;
                match pool.insert_with_key(|k| {
                    given = Some(k);
                    value
                }) {
                    Ok(got) => {
                        prop_assert_eq!(given, Some(got), "the closure gets the key");
                        Ok(Some(got))
                    }
                    Err(err) => {
                        prop_assert!(matches!(err, InsertError::Full(_)));
                        // The closure comes back uncalled, with the value.
                        let make = err.into_inner();
                        let key = Handle::from_bits(1 << 24).unwrap();
                        prop_assert_eq!(make(key).id, id);
                        prop_assert_eq!(given, Some(key), "called only here");
                        Ok(None)
                    }
                }
            } else {
                refused_gives_back(pool.insert(value), id)
            }
        })
    }

    /// `insert_mut`: as `insert`, through `&mut`.
    fn insert_mut(&mut self, pool: &mut HandlePool<Value>, key: u8) -> Result<(), TestCaseError> {
        self.insert_by(key, true, |value, id| {
            refused_gives_back(pool.insert_mut(value), id)
        })
    }

    /// An insert done by `op`, given the value and its id: the model's
    /// expectations (a free entry, an eviction, a refusal) checked. With
    /// `exclusive` (`insert_mut`), a full pool first frees every entry
    /// awaiting a grace period (no section outlives `&mut`).
    fn insert_by(
        &mut self,
        key: u8,
        exclusive: bool,
        op: impl FnOnce(Value, usize) -> Result<Option<Handle>, TestCaseError>,
    ) -> Result<(), TestCaseError> {
        let (value, id) = self.value(key);
        let fresh = Entry::value(id, key, self.order);
        self.order += 1;
        let deferring = self.sections_used;
        let mut logged = self.evicted.lock().unwrap().len();
        let inserted = op(value, id)?;
        let expect = self.expect(exclusive);
        let claimed = inserted.map_or(Claimed::Refused, Claimed::Key);
        self.settle(expect, claimed, fresh, &mut logged)?;
        self.all_logged(deferring, logged)
    }

    /// `reserve`: claims an entry as an insert does, for no value.
    fn reserve(&mut self, pool: &HandlePool<Value>) -> Result<(), TestCaseError> {
        self.shared = true;
        let deferring = self.sections_used;
        let mut logged = self.evicted.lock().unwrap().len();
        let reserved = pool.reserve();
        let key = reserved.as_ref().map(Reservation::key);
        let expect = self.expect(false);
        let claimed = key.map_or(Claimed::Refused, Claimed::Key);
        self.settle(expect, claimed, Entry::reservation(), &mut logged)?;
        prop_assert!(key.map_or(true, |k| pool.is_reserved(k) && !pool.contains(k)));
        if let Some(reservation) = reserved {
            self.reservations.insert(reservation.key(), reservation);
        }
        self.all_logged(deferring, logged)
    }

    /// `reserve_many(n)`: `n` claims in a row, all kept, or, if one is
    /// refused, the ones before it given back (what they evicted stays
    /// evicted).
    fn reserve_many(&mut self, pool: &HandlePool<Value>, n: usize) -> Result<(), TestCaseError> {
        self.shared = true;
        let deferring = self.sections_used;
        let mut logged = self.evicted.lock().unwrap().len();
        match pool.reserve_many(n) {
            Some(reservations) => {
                prop_assert_eq!(reservations.len(), n);
                for reservation in reservations {
                    let expect = self.expect(false);
                    let k = reservation.key();
                    self.settle(expect, Claimed::Key(k), Entry::reservation(), &mut logged)?;
                    self.reservations.insert(k, reservation);
                    // Held now, before the next claim's grace period may
                    // free entries that awaited one.
                    self.peak.set(self.peak.get().max(self.occupied()));
                }
            }
            None => {
                let mut refused = false;
                for _ in 0..n {
                    let expect = self.expect(false);
                    if let Expect::Full = expect {
                        refused = true;
                        break;
                    }
                    self.settle(expect, Claimed::Undone, Entry::reservation(), &mut logged)?;
                    // Held now (see the branch above).
                    self.peak.set(self.peak.get().max(self.occupied()));
                }
                prop_assert!(refused, "reserve_many({}) refused with room", n);
                // The entries it took were held, for a moment.
                self.peak.set(self.peak.get().max(self.occupied()));
                // Cancelled: straight back, no grace period (nobody reads a
                // reservation).
                self.undone = 0;
            }
        }
        self.all_logged(deferring, logged)
    }

    /// `insert_reserved`: `Ok` for a reservation of this pool, whose key
    /// then reads the value; for another pool's (a key that is not
    /// reserved here: the reservation of a pool of its own, or of the pool
    /// before a load) the value comes back.
    fn fill(&mut self, pool: &HandlePool<Value>, h: Handle, key: u8) -> Result<(), TestCaseError> {
        let (value, id) = self.value(key);
        let order = self.order;
        self.order += 1;
        let entry = self.entries.get_mut(&h).unwrap();
        let reservation = match self.reservations.remove(&h) {
            Some(reservation) => reservation,
            None => HandlePool::<()>::new(1).reserve().unwrap(),
        };
        match pool.insert_reserved(reservation, value) {
            Ok(filled) => {
                prop_assert_eq!(filled, h);
                prop_assert!(entry.reserved, "filled {:?} ({:?})", h, entry);
                entry.reserved = false;
                entry.live = true;
                entry.id = id;
                entry.key = key;
                entry.order = order;
            }
            Err(err) => {
                prop_assert!(!entry.reserved, "{:?} refused", h);
                prop_assert!(matches!(err, InsertError::NotReserved(_)));
                prop_assert_eq!(err.into_inner().id, id);
            }
        }
        Ok(())
    }

    /// `cancel_reservation`: `true` once for a reservation, whose key is
    /// stale from then on (its entry is free at once).
    fn cancel(&mut self, pool: &HandlePool<Value>, h: Handle) -> Result<(), TestCaseError> {
        self.shared = true;
        let entry = self.entries.get_mut(&h).unwrap();
        let reservation = match self.reservations.remove(&h) {
            Some(reservation) => reservation,
            None => HandlePool::<()>::new(1).reserve().unwrap(),
        };
        prop_assert_eq!(
            pool.cancel_reservation(reservation),
            entry.reserved,
            "{:?}",
            h
        );
        entry.reserved = false;
        prop_assert!(!pool.is_reserved(h));
        Ok(())
    }

    /// What the pool must do to claim an entry now. In a pool that has had
    /// sections (see [`expect_deferring`](Self::expect_deferring)), the
    /// model runs the claim's grace periods and eviction here.
    fn expect(&mut self, exclusive: bool) -> Expect {
        if self.sections_used {
            return self.expect_deferring(exclusive);
        }
        if self.occupied() < self.capacity {
            return Expect::Free;
        }
        let candidates: Vec<&Entry> = self
            .entries
            .values()
            .filter(|e| e.live && e.readers == 0)
            .collect();
        let allowed: Vec<usize> = match self.policy {
            Policy::Never => Vec::new(),
            Policy::Oldest => candidates
                .iter()
                .min_by_key(|e| e.order)
                .map(|e| e.id)
                .into_iter()
                .collect(),
            Policy::Least => {
                let least = candidates.iter().map(|e| e.key).min();
                candidates
                    .iter()
                    .filter(|e| Some(e.key) == least)
                    .map(|e| e.id)
                    .collect()
            }
        };
        if allowed.is_empty() {
            Expect::Full
        } else {
            Expect::Evict(allowed)
        }
    }

    /// [`expect`](Self::expect) in a pool that has had sections: a full
    /// pool runs a grace period (or, through `&mut`, frees every entry
    /// awaiting one), and evicts only if that freed nothing and no
    /// section is open: its victim awaits a grace period too, which runs
    /// at once.
    fn expect_deferring(&mut self, exclusive: bool) -> Expect {
        let mut room = self.occupied() < self.capacity;
        if !room && exclusive {
            let awaiting = self.entries.values().filter(|e| e.limbo.is_some()).count();
            self.free_all();
            room = awaiting > 0;
        }
        if !room {
            room = self.grace() > 0;
        }
        // While a section is open, the victim's entry could not be reused:
        // the pool evicts nothing.
        if !room && self.section.is_none() {
            // The victim: the pool walks the entries in index order and
            // keeps the first strictly better one.
            let mut candidates: Vec<(Handle, usize, u8, usize)> = self
                .entries
                .iter()
                .filter(|(_, e)| e.live && e.readers == 0)
                .map(|(h, e)| (*h, e.order, e.key, e.id))
                .collect();
            candidates.sort_by_key(|(h, ..)| h.index());
            let victim = match self.policy {
                Policy::Never => None,
                Policy::Oldest => candidates.iter().min_by_key(|c| c.1).copied(),
                Policy::Least => candidates.iter().min_by_key(|c| c.2).copied(),
            };
            if let Some((gone, ..)) = victim {
                self.entries.get_mut(&gone).unwrap().live = false;
                self.evictions += 1;
                self.ended(gone, true);
                room = self.grace() > 0;
            }
        }
        if room {
            Expect::Free
        } else {
            Expect::Full
        }
    }

    /// Checks a claim against what the model expected of it, and records
    /// it: the eviction (the next one in the `on_evict` log from
    /// `logged`), the new key as `fresh`.
    fn settle(
        &mut self,
        expect: Expect,
        claimed: Claimed,
        fresh: Entry,
        logged: &mut usize,
    ) -> Result<(), TestCaseError> {
        match (expect, claimed) {
            (Expect::Full, Claimed::Refused) => Ok(()),
            (Expect::Full, claimed) => {
                Err(TestCaseError::fail(format!("{claimed:?} from a full pool")))
            }
            (Expect::Free, Claimed::Refused) => Err(TestCaseError::fail(format!(
                "refused with {} of {} entries used",
                self.occupied(),
                self.capacity
            ))),
            (Expect::Evict(allowed), Claimed::Refused) => Err(TestCaseError::fail(format!(
                "refused, but {allowed:?} could go"
            ))),
            (Expect::Free, claimed) => self.claimed(claimed, fresh),
            (Expect::Evict(allowed), claimed) => {
                let (gone, gone_id) = {
                    let log = self.evicted.lock().unwrap();
                    prop_assert!(log.len() > *logged, "no eviction, of {:?}", allowed);
                    log[*logged]
                };
                *logged += 1;
                prop_assert!(
                    allowed.contains(&gone_id),
                    "evicted {} of {:?}",
                    gone_id,
                    allowed
                );
                let entry = self.entries.get_mut(&gone).expect("a known handle");
                prop_assert!(entry.live && entry.readers == 0 && entry.id == gone_id);
                entry.live = false;
                if let Claimed::Key(h) = claimed {
                    prop_assert_eq!(h.index(), gone.index(), "the evicted entry is reused");
                }
                self.evictions += 1;
                self.handed.push((gone, gone_id));
                self.claimed(claimed, fresh)
            }
        }
    }

    /// Records a claimed entry: a key never handed out before (a newer
    /// generation of its entry), or one of a `reserve_many` that ran out.
    fn claimed(&mut self, claimed: Claimed, fresh: Entry) -> Result<(), TestCaseError> {
        match claimed {
            Claimed::Key(h) => {
                prop_assert!(h.index() < self.capacity, "{:?}", h);
                let newest = self.generations.entry(h.index()).or_insert(0);
                prop_assert!(
                    h.generation() > *newest,
                    "{:?} after generation {} of its entry",
                    h,
                    newest
                );
                *newest = h.generation();
                self.entries.insert(h, fresh);
                self.handles.push(h);
            }
            Claimed::Undone => {
                self.undone += 1;
                self.gave_back_unseen = true;
            }
            Claimed::Refused => unreachable!("a refusal claims nothing"),
        }
        Ok(())
    }

    /// After a claim (or a `reserve_many`'s) in a pool without sections,
    /// whose evictions `settle` read from the log up to `logged`: no other
    /// eviction happened.
    fn all_logged(&self, deferring: bool, logged: usize) -> Result<(), TestCaseError> {
        if !deferring {
            let log = self.evicted.lock().unwrap().len();
            prop_assert_eq!(log, logged, "an eviction the model did not expect");
        }
        Ok(())
    }

    /// `insert_at`: into the entry `i` picks (or one past the capacity), at
    /// the entry's next generation (`offset` 1), one before it (0: a stale
    /// key, unless the entry never held one) or later (2, 3: the
    /// generations between are skipped). The model's answer: out of
    /// range, occupied (a value or a reservation), stale, or the value
    /// under the key. (A `reserve_many` that ran out gave back entries
    /// under keys nobody saw: after one, an entry's next generation may be
    /// past the model's, and any later key may read stale.)
    fn insert_at(
        &mut self,
        pool: &mut HandlePool<Value>,
        i: &Index,
        offset: u8,
        key: u8,
    ) -> Result<(), TestCaseError> {
        // Entries that await a grace period free first (no section is
        // held in this run), so that whether `insert_at` frees them (only
        // if its entry is off the chain of vacated ones) does not matter.
        if self.entries.values().any(|e| e.limbo.is_some()) {
            self.shared = true;
            let freed = self.grace();
            prop_assert_eq!(pool.reclaim(), freed);
        }
        let index = i.index(self.capacity + 1);
        let newest = self.generations.get(&index).copied().unwrap_or(0);
        let last = Handle::from_bits(newest << 24 | index as u64);
        let occupied = last.map_or(false, |h| self.entries[&h].occupies());
        let next = newest + 1;
        let generation = match offset {
            0 => (next - 1).max(1),
            _ => next + u64::from(offset) - 1,
        };
        let h = Handle::from_bits(generation << 24 | index as u64).unwrap();
        let (value, id) = self.value(key);
        let fresh = Entry::value(id, key, self.order);
        self.order += 1;
        let answer = pool.insert_at(h, value);
        // Each `reserve_many` that ran out may have moved the entry on by
        // a generation nobody saw (several, over several of them).
        let skipped = self.gave_back_unseen && generation >= next;
        match answer {
            Ok(()) => {
                prop_assert!(
                    index < self.capacity && !occupied && generation >= next,
                    "insert_at({:?}) succeeded",
                    h
                );
                self.claimed(Claimed::Key(h), fresh)?;
                self.placed = true;
                let value = pool.get_mut(h).map(|v| v.id);
                prop_assert_eq!(value, Some(id));
            }
            Err(InsertAtError::OutOfRange(v)) => {
                prop_assert!(index >= self.capacity);
                prop_assert_eq!(v.id, id);
            }
            Err(InsertAtError::Occupied(v)) => {
                prop_assert!(index < self.capacity && occupied, "{:?} occupied", h);
                prop_assert_eq!(v.id, id);
            }
            Err(InsertAtError::Stale(v)) => {
                prop_assert!(
                    index < self.capacity && !occupied && (generation < next || skipped),
                    "{:?} stale, newest {}",
                    h,
                    newest
                );
                prop_assert_eq!(v.id, id);
            }
            Err(_) => prop_assert!(false, "{:?} refused as retired, or otherwise", h),
        }
        Ok(())
    }

    /// `remove_mut`: the value if live (no `Ref` can be held), else `None`.
    fn remove_mut(&mut self, pool: &mut HandlePool<Value>, h: Handle) -> Result<(), TestCaseError> {
        let entry = self.entries.get_mut(&h).unwrap();
        match pool.remove_mut(h) {
            Some(value) => {
                prop_assert!(entry.live, "removed {:?}", entry);
                prop_assert_eq!(value.id, entry.id);
            }
            None => prop_assert!(!entry.live),
        }
        entry.live = false;
        Ok(())
    }

    fn remove(&mut self, pool: &HandlePool<Value>, h: Handle) -> Result<(), TestCaseError> {
        self.shared = true;
        let entry = self.entries.get_mut(&h).unwrap();
        let live = entry.live;
        prop_assert_eq!(pool.remove(h), live);
        entry.live = false;
        if live && entry.readers == 0 {
            self.ended(h, false);
        }
        Ok(())
    }

    /// A counted reader of `h` is gone: the last one of a removed value
    /// ends its occupancy.
    fn unread(&mut self, h: Handle) {
        self.shared = true;
        let entry = self.entries.get_mut(&h).unwrap();
        entry.readers -= 1;
        if !entry.live && entry.readers == 0 {
            self.ended(h, false);
        }
    }

    /// `take`: the value if live and unread; `BeingRead` (and the value
    /// stays) if read; `Stale` if not live.
    fn take(&mut self, pool: &HandlePool<Value>, h: Handle) -> Result<(), TestCaseError> {
        self.shared = true;
        let open = self.section.is_some();
        let used = self.sections_used;
        let entry = self.entries.get_mut(&h).unwrap();
        match pool.take(h) {
            Ok(value) => {
                prop_assert!(entry.live && entry.readers == 0, "took {:?}", entry);
                prop_assert!(!open, "took {:?} under a section", entry);
                prop_assert_eq!(value.id, entry.id);
                entry.live = false;
                if used {
                    // Its grace period.
                    self.epoch += 1;
                }
            }
            Err(TakeError::BeingRead) => {
                prop_assert!(entry.live && (entry.readers > 0 || open), "{:?}", entry);
                prop_assert!(pool.contains(h), "a failed take leaves the value");
            }
            Err(err) => {
                prop_assert_eq!(err, TakeError::Stale);
                prop_assert!(!entry.live);
            }
        }
        Ok(())
    }

    /// `get` (counted), `contains` and `is_reserved`.
    fn get(&self, pool: &HandlePool<Value>, h: Handle) -> Result<(), TestCaseError> {
        let entry = &self.entries[&h];
        let seen = pool.get(h).map(|v| v.id);
        prop_assert_eq!(seen, entry.live.then_some(entry.id), "{:?}", h);
        prop_assert_eq!(pool.contains(h), entry.live);
        prop_assert_eq!(pool.is_reserved(h), entry.reserved, "{:?}", h);
        Ok(())
    }

    /// `with`: a section of its own (the pool has had one from then on).
    fn with(&mut self, pool: &HandlePool<Value>, h: Handle) -> Result<(), TestCaseError> {
        self.sections_used = true;
        let entry = &self.entries[&h];
        let seen = pool.with(h, |v| v.id);
        prop_assert_eq!(seen, entry.live.then_some(entry.id), "{:?}", h);
        Ok(())
    }

    /// `get`, `contains` and `iter` through `section`.
    fn section_reads(
        &self,
        section: &ReadSection<'_, Value>,
        h: Option<Handle>,
    ) -> Result<(), TestCaseError> {
        if let Some(h) = h {
            let entry = &self.entries[&h];
            prop_assert_eq!(
                section.get(h).map(|v| v.id),
                entry.live.then_some(entry.id),
                "{:?}",
                h
            );
            prop_assert_eq!(section.contains(h), entry.live);
        } else {
            let seen: Vec<(Handle, usize)> = section.iter().map(|(h, v)| (h, v.id)).collect();
            prop_assert_eq!(seen, self.live_in_order());
        }
        Ok(())
    }

    /// The live handles, in index order, with their values' ids.
    fn live_in_order(&self) -> Vec<(Handle, usize)> {
        let mut live: Vec<(Handle, usize)> = self
            .entries
            .iter()
            .filter(|(_, e)| e.live)
            .map(|(h, e)| (*h, e.id))
            .collect();
        live.sort_by_key(|(h, _)| h.index());
        live
    }

    /// After every step: `len`, `stats`, and the drops so far.
    fn check(&self, pool: &HandlePool<Value>) -> Result<(), TestCaseError> {
        // `len` counts the entries in use: reservations too.
        prop_assert_eq!(
            pool.len(),
            self.live() + self.removed_while_read() + self.reserved()
        );
        let stats = pool.stats();
        prop_assert_eq!(stats.live, self.live());
        prop_assert_eq!(stats.removed_while_read, self.removed_while_read());
        prop_assert_eq!(stats.reserved, self.reserved());
        let awaiting = self.entries.values().filter(|e| e.limbo.is_some()).count();
        prop_assert_eq!(stats.awaiting_reuse, awaiting);
        prop_assert_eq!(stats.retired, 0);
        // An upper bound (a thread's cached free entries count as in use),
        // and never below what was occupied at once.
        self.peak.set(self.peak.get().max(self.occupied()));
        prop_assert!(stats.peak_in_use >= self.peak.get());
        if (!self.cache || self.capacity == 1) && !self.placed {
            // Exact without caches, and without `insert_at`: while
            // entries vacated through `&mut` wait on their chain, the pool
            // counts them in use, and only `insert_at` (and a load) takes
            // entries from the free list while they do.
            prop_assert_eq!(stats.peak_in_use, self.peak.get(), "the peak");
        }
        prop_assert!(stats.peak_in_use <= self.capacity);
        // Entries are allocated before any handle names them, and never
        // past the capacity; in index order, unless `insert_at` named an
        // entry past those allocated (it allocates the entry's segment
        // alone).
        let named: std::collections::HashSet<usize> =
            self.entries.keys().map(|h| h.index()).collect();
        let highest = named.iter().map(|&i| i + 1).max().unwrap_or(0);
        let least = if self.placed { named.len() } else { highest };
        prop_assert!(stats.allocated >= least.max(self.initial.unwrap_or(self.capacity)));
        prop_assert!(stats.allocated <= self.capacity);
        prop_assert_eq!(stats.evictions as usize, self.evictions);
        let mut handed = self.evicted.lock().unwrap().clone();
        let mut expected = self.handed.clone();
        handed.sort_by_key(|(h, _)| (h.index(), h.generation()));
        expected.sort_by_key(|(h, _)| (h.index(), h.generation()));
        prop_assert_eq!(handed, expected, "`on_evict` calls");
        let drops = self.drops.lock().unwrap();
        for entry in self.entries.values().filter(|e| e.id != NO_VALUE) {
            let expected = if entry.occupies() { 0 } else { 1 };
            prop_assert_eq!(
                drops[entry.id],
                expected,
                "value {} ({:?})",
                entry.id,
                entry
            );
        }
        Ok(())
    }

    /// The pool is gone: every value was dropped exactly once (refused and
    /// evicted values included).
    fn check_dropped(&self) -> Result<(), TestCaseError> {
        for (id, &n) in self.drops.lock().unwrap().iter().enumerate() {
            prop_assert_eq!(n, 1, "value {} dropped {} times", id, n);
        }
        let mut handed = self.evicted.lock().unwrap().clone();
        let mut expected = self.handed.clone();
        handed.sort_by_key(|(h, _)| (h.index(), h.generation()));
        expected.sort_by_key(|(h, _)| (h.index(), h.generation()));
        prop_assert_eq!(handed, expected, "`on_evict` calls");
        Ok(())
    }

    /// The model's pool was saved and dropped, and `pool` loaded from the
    /// save (`origins`: the id of the value that each of its values
    /// copies). Every live key names a copy of its value (of the same
    /// key), every other key is stale, a reserved one too (no save holds
    /// reservations: their entries are free under a newer generation),
    /// and the loaded pool starts afresh: no reader, no section, nothing
    /// awaiting a grace period, no eviction counted.
    #[cfg_attr(not(feature = "serde"), allow(dead_code))]
    fn reloaded(
        &mut self,
        pool: &HandlePool<Value>,
        origins: &HashMap<usize, usize>,
    ) -> Result<(), TestCaseError> {
        for (h, entry) in self.entries.iter_mut() {
            entry.readers = 0;
            entry.limbo = None;
            entry.reserved = false;
            prop_assert!(!pool.is_reserved(*h), "{:?} reserved after the load", h);
            match pool.get(*h) {
                Some(v) => {
                    prop_assert!(entry.live, "{:?} reads {} after the load", h, v.id);
                    prop_assert_eq!(origins.get(&v.id), Some(&entry.id), "{:?}", h);
                    prop_assert_eq!(v.key, entry.key, "{:?}", h);
                    entry.id = v.id;
                }
                None => prop_assert!(!entry.live, "{:?} lost in the load", h),
            }
        }
        prop_assert_eq!(origins.len(), self.live(), "values loaded");
        self.sections_used = false;
        self.section = None;
        self.epoch = 1;
        self.evictions = 0;
        self.peak.set(0);
        self.shared = false;
        // A load places values as `insert_at` does.
        self.placed = true;
        Ok(())
    }
}

/// The secondary maps beside the pool, and their model: by index, at most
/// one key (the one its value was stored under) and its value.
#[derive(Default)]
struct Maps {
    dense: SecondaryMap<Handle, u32>,
    sparse: SparseSecondaryMap<Handle, u32>,
    model: HashMap<usize, (Handle, u32)>,
}

/// What a secondary map's `entry` gave (see [`use_entry`]).
#[derive(Debug, PartialEq)]
enum EntryAnswer {
    /// `None`: the key is older than the one stored at its index.
    Older,
    /// Occupied, with this value.
    Occupied(u32),
    Vacant,
}

/// Uses a secondary map's `entry` for `key` as `how` says, with `v`: an
/// occupied entry's value gets `v` added (0, 3: `and_modify`), is removed
/// (1) or replaced by `v` (2); a vacant one gets `v` (`insert`, or 3:
/// `or_insert_with_key`).
fn use_entry(
    entry: Option<tagpool::Entry<'_, Handle, u32>>,
    key: Handle,
    v: u32,
    how: u8,
) -> Result<EntryAnswer, TestCaseError> {
    let entry = match entry {
        None => return Ok(EntryAnswer::Older),
        Some(entry) => entry,
    };
    prop_assert_eq!(entry.key(), key);
    if how == 3 {
        let mut old = None;
        let mut given = None;
        let now = *entry
            .and_modify(|x| {
                old = Some(*x);
                *x += v;
            })
            .or_insert_with_key(|k| {
                given = Some(k);
                v
            });
        return Ok(match old {
            Some(old) => {
                prop_assert_eq!((now, given), (old + v, None));
                EntryAnswer::Occupied(old)
            }
            None => {
                prop_assert_eq!((now, given), (v, Some(key)));
                EntryAnswer::Vacant
            }
        });
    }
    Ok(match entry {
        tagpool::Entry::Occupied(mut occupied) => {
            prop_assert_eq!(occupied.key(), key);
            let old = *occupied.get();
            match how {
                0 => *occupied.get_mut() += v,
                1 => prop_assert_eq!(occupied.remove(), old),
                _ => prop_assert_eq!(occupied.insert(v), old),
            }
            EntryAnswer::Occupied(old)
        }
        tagpool::Entry::Vacant(vacant) => {
            prop_assert_eq!(vacant.key(), key);
            prop_assert_eq!(*vacant.insert(v), v);
            EntryAnswer::Vacant
        }
    })
}

impl Maps {
    /// The value stored under exactly `key`, in the model.
    fn stored(&self, key: Handle) -> Option<u32> {
        match self.model.get(&key.index()) {
            Some(&(stored, v)) if stored == key => Some(v),
            _ => None,
        }
    }

    /// Whether `key` is older than the key stored at its index.
    fn older(&self, key: Handle) -> bool {
        self.model
            .get(&key.index())
            .map_or(false, |(stored, _)| stored.generation() > key.generation())
    }

    /// `insert`: replaces the value of the same key (returning it), takes
    /// the place of an older key's (returning `None`), and is refused
    /// (`None`, nothing stored) for a key older than the stored one.
    fn insert(&mut self, key: Handle, v: u32) -> Result<(), TestCaseError> {
        let expected = self.stored(key);
        if !self.older(key) {
            self.model.insert(key.index(), (key, v));
        }
        prop_assert_eq!(self.dense.insert(key, v), expected, "{:?}", key);
        prop_assert_eq!(self.sparse.insert(key, v), expected, "{:?}", key);
        self.check()
    }

    /// `get`, `get_mut` and `contains_key`: the value of this very key.
    fn get(&mut self, key: Handle) -> Result<(), TestCaseError> {
        let expected = self.stored(key);
        prop_assert_eq!(self.dense.get(key).copied(), expected, "{:?}", key);
        prop_assert_eq!(self.sparse.get(key).copied(), expected, "{:?}", key);
        prop_assert_eq!(self.dense.get_mut(key).map(|v| *v), expected);
        prop_assert_eq!(self.sparse.get_mut(key).map(|v| *v), expected);
        prop_assert_eq!(self.dense.contains_key(key), expected.is_some());
        prop_assert_eq!(self.sparse.contains_key(key), expected.is_some());
        Ok(())
    }

    /// `remove`: the value of this very key (another generation's stays).
    fn remove(&mut self, key: Handle) -> Result<(), TestCaseError> {
        let expected = self.stored(key);
        if expected.is_some() {
            self.model.remove(&key.index());
        }
        prop_assert_eq!(self.dense.remove(key), expected, "{:?}", key);
        prop_assert_eq!(self.sparse.remove(key), expected, "{:?}", key);
        self.check()
    }

    /// `entry`, used through [`use_entry`].
    fn entry(&mut self, key: Handle, v: u32, how: u8) -> Result<(), TestCaseError> {
        let expected = if self.older(key) {
            EntryAnswer::Older
        } else if let Some(old) = self.stored(key) {
            match how {
                1 => self.model.remove(&key.index()),
                2 => self.model.insert(key.index(), (key, v)),
                _ => self.model.insert(key.index(), (key, old + v)),
            };
            EntryAnswer::Occupied(old)
        } else {
            self.model.insert(key.index(), (key, v));
            EntryAnswer::Vacant
        };
        let dense = use_entry(self.dense.entry(key), key, v, how)?;
        prop_assert_eq!(&dense, &expected, "{:?}", key);
        let sparse = use_entry(self.sparse.entry(key), key, v, how)?;
        prop_assert_eq!(sparse, expected, "{:?}", key);
        self.check()
    }

    /// `retain` of the values under keys the pool holds (`in_pool` asks
    /// the pool; `live`, the model).
    fn retain(
        &mut self,
        in_pool: impl Fn(Handle) -> bool,
        live: impl Fn(Handle) -> bool,
    ) -> Result<(), TestCaseError> {
        self.dense.retain(|k, _| in_pool(k));
        self.sparse.retain(|k, _| in_pool(k));
        self.model.retain(|_, (k, _)| live(*k));
        self.check()
    }

    /// `iter_mut` on both maps: `v` added to every value.
    fn add_all(&mut self, v: u32) -> Result<(), TestCaseError> {
        for (_, x) in self.dense.iter_mut() {
            *x += v;
        }
        for (_, x) in self.sparse.iter_mut() {
            *x += v;
        }
        for (_, x) in self.model.values_mut() {
            *x += v;
        }
        self.check()
    }

    /// `drain` on both maps: every pair the model holds, then nothing.
    fn drain(&mut self) -> Result<(), TestCaseError> {
        let by_index = |mut pairs: Vec<(Handle, u32)>| {
            pairs.sort_by_key(|(k, _)| k.index());
            pairs
        };
        let expected = by_index(self.model.drain().map(|(_, pair)| pair).collect());
        let dense: Vec<(Handle, u32)> = self.dense.drain().collect();
        prop_assert_eq!(&dense, &expected, "the dense map drains in index order");
        let sparse = by_index(self.sparse.drain().collect());
        prop_assert_eq!(&sparse, &expected, "the sparse map");
        prop_assert!(self.dense.is_empty() && self.sparse.is_empty());
        self.check()
    }

    /// `get_disjoint_mut([a, b])` on both maps: both values, exactly when
    /// the keys differ and each holds one under exactly that key; swapped.
    fn disjoint(&mut self, a: Handle, b: Handle) -> Result<(), TestCaseError> {
        let held = |k: Handle| {
            self.model
                .get(&k.index())
                .filter(|(key, _)| *key == k)
                .map(|&(_, v)| v)
        };
        let expected = if a == b { None } else { held(a).zip(held(b)) };
        let dense = self.dense.get_disjoint_mut([a, b]).map(|[x, y]| {
            core::mem::swap(x, y);
            (*y, *x)
        });
        prop_assert_eq!(dense, expected, "the dense map, {:?} and {:?}", a, b);
        let sparse = self.sparse.get_disjoint_mut([a, b]).map(|[x, y]| {
            core::mem::swap(x, y);
            (*y, *x)
        });
        prop_assert_eq!(sparse, expected, "the sparse map, {:?} and {:?}", a, b);
        if let Some((va, vb)) = expected {
            self.model.insert(a.index(), (a, vb));
            self.model.insert(b.index(), (b, va));
        }
        self.check()
    }

    /// Both maps hold what the model does: `len`, and every pair (the
    /// dense map's in index order).
    fn check(&self) -> Result<(), TestCaseError> {
        let mut expected: Vec<(Handle, u32)> = self.model.values().copied().collect();
        expected.sort_by_key(|(k, _)| k.index());
        let dense: Vec<(Handle, u32)> = self.dense.iter().map(|(k, v)| (k, *v)).collect();
        prop_assert_eq!(&dense, &expected, "the dense map");
        let mut sparse: Vec<(Handle, u32)> = self.sparse.iter().map(|(k, v)| (k, *v)).collect();
        sparse.sort_by_key(|(k, _)| k.index());
        prop_assert_eq!(&sparse, &expected, "the sparse map");
        prop_assert_eq!(self.dense.len(), expected.len());
        prop_assert_eq!(self.sparse.len(), expected.len());
        Ok(())
    }
}

/// The steps of [`common_op`] on `pool` (`Save` apart: the runs hold the
/// pool differently).
fn common_step(
    model: &mut Model,
    pool: &HandlePool<Value>,
    maps: &mut Maps,
    op: &Op,
) -> Result<(), TestCaseError> {
    match op {
        Op::Reserve => model.reserve(pool)?,
        Op::ReserveMany(n) => model.reserve_many(pool, *n)?,
        Op::Fill(i, reserved, key) => {
            if let Some(h) = model.pick_reserved(i, *reserved) {
                model.fill(pool, h, *key)?;
            }
        }
        Op::Cancel(i, reserved) => {
            if let Some(h) = model.pick_reserved(i, *reserved) {
                model.cancel(pool, h)?;
            }
        }
        Op::MapInsert(i, v) => {
            if let Some(h) = model.pick(i) {
                maps.insert(h, *v)?;
            }
        }
        Op::MapGet(i) => {
            if let Some(h) = model.pick(i) {
                maps.get(h)?;
            }
        }
        Op::MapRemove(i) => {
            if let Some(h) = model.pick(i) {
                maps.remove(h)?;
            }
        }
        Op::MapEntry(i, v, how) => {
            if let Some(h) = model.pick(i) {
                maps.entry(h, *v, *how)?;
            }
        }
        Op::MapRetain => maps.retain(|k| pool.contains(k), |k| model.entries[&k].live)?,
        Op::MapIterMut(v) => maps.add_all(*v)?,
        Op::MapDrain => maps.drain()?,
        Op::MapDisjoint(a, b) => {
            if let (Some(a), Some(b)) = (model.pick(a), model.pick(b)) {
                maps.disjoint(a, b)?;
            }
        }
        _ => unreachable!("not a common step: {:?}", op),
    }
    Ok(())
}
/// The shared face, `Ref`s held across steps; a save (with the `serde`
/// feature) drops them and goes on with the loaded pool.
fn run(setting: Setting, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut model = Model::new(setting);
    let mut maps = Maps::default();
    let mut pool = model.pool();
    let mut ops = ops.iter();
    while let Some(saved) = run_shared(&mut model, pool, &mut maps, &mut ops)? {
        pool = save::reload(&mut model, &mut maps, saved)?;
    }
    // The pool's drop frees what awaited a grace period.
    model.free_all();
    model.check_dropped()
}

/// [`run`]'s steps on one pool, until the ops run out (`None`) or a save
/// (returned; the pool dropped, and what its `Ref`s read).
fn run_shared(
    model: &mut Model,
    pool: HandlePool<Value>,
    maps: &mut Maps,
    ops: &mut std::slice::Iter<'_, Op>,
) -> Result<Option<save::Saved>, TestCaseError> {
    {
        let pool = Arc::new(pool);
        let mut held: Vec<Ref<'_, Value>> = Vec::new();
        let mut held_owned: Vec<OwnedRef<Value>> = Vec::new();
        let mut sections: Vec<ReadSection<'_, Value>> = Vec::new();
        for op in ops {
            match op {
                Op::Insert(key) => model.insert(&pool, *key, false)?,
                Op::InsertWithKey(key) => model.insert(&pool, *key, true)?,
                Op::Remove(i) => {
                    if let Some(h) = model.pick(i) {
                        model.remove(&pool, h)?;
                    }
                }
                Op::Take(i) => {
                    if let Some(h) = model.pick(i) {
                        model.take(&pool, h)?;
                    }
                }
                Op::Get(i) => {
                    if let Some(h) = model.pick(i) {
                        model.get(&pool, h)?;
                    }
                }
                Op::Hold(i) => {
                    if let Some(h) = model.pick(i) {
                        let entry = model.entries.get_mut(&h).unwrap();
                        match pool.get(h) {
                            Some(r) => {
                                prop_assert!(entry.live);
                                prop_assert_eq!(r.id, entry.id);
                                entry.readers += 1;
                                held.push(r);
                            }
                            None => prop_assert!(!entry.live),
                        }
                    }
                }
                Op::HoldOwned(i) => {
                    if let Some(h) = model.pick(i) {
                        let entry = model.entries.get_mut(&h).unwrap();
                        match pool.get_owned(h) {
                            Some(r) => {
                                prop_assert!(entry.live);
                                prop_assert_eq!(r.id, entry.id);
                                prop_assert_eq!(OwnedRef::handle(&r), h);
                                entry.readers += 1;
                                held_owned.push(r);
                            }
                            None => prop_assert!(!entry.live),
                        }
                    }
                }
                Op::UnholdOwned(i) if !held_owned.is_empty() => {
                    let r = held_owned.swap_remove(i.index(held_owned.len()));
                    let h = OwnedRef::handle(&r);
                    let entry = model.entries.get_mut(&h).unwrap();
                    prop_assert_eq!(r.id, entry.id, "a held value never changes");
                    drop(r);
                    model.unread(h);
                }
                Op::Unhold(i) if !held.is_empty() => {
                    let r = held.swap_remove(i.index(held.len()));
                    let h = Ref::handle(&r);
                    let entry = model.entries.get_mut(&h).unwrap();
                    prop_assert_eq!(r.id, entry.id, "a held value never changes");
                    drop(r);
                    model.unread(h);
                }
                Op::With(i) => {
                    if let Some(h) = model.pick(i) {
                        model.with(&pool, h)?;
                    }
                }
                Op::Open => {
                    sections.push(pool.read());
                    model.sections_used = true;
                    model.section = match model.section {
                        None => Some((model.epoch, 1)),
                        Some((epoch, n)) => Some((epoch, n + 1)),
                    };
                }
                Op::Close(i) if !sections.is_empty() => {
                    drop(sections.swap_remove(i.index(sections.len())));
                    model.section = match model.section {
                        Some((epoch, n)) if n > 1 => Some((epoch, n - 1)),
                        _ => None,
                    };
                }
                Op::SectionGet(i) => {
                    if let Some(h) = model.pick(i) {
                        model.sections_used = true;
                        match sections.last() {
                            Some(section) => model.section_reads(section, Some(h))?,
                            None => model.section_reads(&pool.read(), Some(h))?,
                        }
                    }
                }
                Op::SectionIter => {
                    model.sections_used = true;
                    match sections.last() {
                        Some(section) => model.section_reads(section, None)?,
                        None => model.section_reads(&pool.read(), None)?,
                    }
                }
                Op::Reclaim => {
                    model.shared = true;
                    let freed = model.grace();
                    prop_assert_eq!(pool.reclaim(), freed);
                }
                #[cfg(feature = "serde")]
                Op::Save(seq) => {
                    // Saved with its `Ref`s and sections held: the values
                    // they keep are stale in the save.
                    let saved = save::save(&pool, maps, *seq);
                    if model.exact() {
                        save::probe(model, &pool, &saved)?;
                    }
                    drop(sections);
                    drop(held);
                    drop(held_owned);
                    return Ok(Some(saved));
                }
                Op::InsertMut(_)
                | Op::RemoveMut(_)
                | Op::IterMut(_)
                | Op::Values
                | Op::Keys
                | Op::Retain(_)
                | Op::Clear
                | Op::Drain(_)
                | Op::GetDisjointMut(..)
                | Op::IndexMut(_)
                | Op::Unhold(_)
                | Op::UnholdOwned(_)
                | Op::Close(_) => {}
                op => common_step(model, &pool, maps, op)?,
            }
            model.check(&pool)?;
        }
        drop(sections);
        drop(held);
        drop(held_owned);
    }
    Ok(None)
}

/// The `&mut self` methods among inserts, takes and removes (no `Ref` is
/// held: `&mut` rules it out).
fn run_exclusive(setting: Setting, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut model = Model::new(setting);
    let mut maps = Maps::default();
    {
        let mut pool = model.pool();
        for op in ops {
            match op {
                Op::Insert(key) => model.insert(&pool, *key, false)?,
                Op::InsertWithKey(key) => model.insert(&pool, *key, true)?,
                Op::InsertMut(key) => model.insert_mut(&mut pool, *key)?,
                Op::InsertAt(i, offset, key) => model.insert_at(&mut pool, i, *offset, *key)?,
                Op::Remove(i) => {
                    if let Some(h) = model.pick(i) {
                        model.remove(&pool, h)?;
                    }
                }
                Op::RemoveMut(i) => {
                    if let Some(h) = model.pick(i) {
                        model.remove_mut(&mut pool, h)?;
                    }
                }
                Op::Take(i) => {
                    if let Some(h) = model.pick(i) {
                        model.take(&pool, h)?;
                    }
                }
                Op::Get(i) => {
                    if let Some(h) = model.pick(i) {
                        model.get(&pool, h)?;
                    }
                }
                Op::IterMut(add) => {
                    let live = model.live_in_order();
                    let iter = pool.iter_mut();
                    prop_assert_eq!(iter.len(), live.len());
                    let mut seen = Vec::new();
                    for (h, value) in iter {
                        seen.push((h, value.id));
                        value.key = value.key.wrapping_add(*add);
                    }
                    prop_assert_eq!(seen, live);
                    for entry in model.entries.values_mut().filter(|e| e.live) {
                        entry.key = entry.key.wrapping_add(*add);
                    }
                }
                Op::Values => {
                    let live = model.live_in_order();
                    let values = pool.values();
                    prop_assert_eq!(values.len(), live.len());
                    let ids: Vec<usize> = values.map(|v| v.id).collect();
                    let expected: Vec<usize> = live.iter().map(|(_, id)| *id).collect();
                    prop_assert_eq!(ids, expected);
                    let keys: Vec<u8> = pool.values_mut().map(|v| v.key).collect();
                    let expected: Vec<u8> =
                        live.iter().map(|(h, _)| model.entries[h].key).collect();
                    prop_assert_eq!(keys, expected);
                }
                Op::Keys => {
                    let live = model.live_in_order();
                    let keys = pool.keys();
                    prop_assert_eq!(keys.len(), live.len());
                    let keys: Vec<Handle> = keys.collect();
                    let expected: Vec<Handle> = live.iter().map(|(h, _)| *h).collect();
                    prop_assert_eq!(keys, expected);
                }
                Op::Retain(max) => {
                    let live = model.live_in_order();
                    let mut visited = Vec::new();
                    pool.retain(|h, v| {
                        visited.push((h, v.id));
                        v.key <= *max
                    });
                    prop_assert_eq!(visited, live);
                    for entry in model.entries.values_mut().filter(|e| e.live) {
                        entry.live = entry.key <= *max;
                    }
                }
                Op::Clear => {
                    pool.clear();
                    for entry in model.entries.values_mut() {
                        entry.live = false;
                    }
                    model.free_all();
                }
                Op::With(i) => {
                    if let Some(h) = model.pick(i) {
                        model.with(&pool, h)?;
                    }
                }
                Op::Drain(n) => {
                    let live = model.live_in_order();
                    let mut drain = pool.drain();
                    prop_assert_eq!(drain.len(), live.len());
                    let mut taken = Vec::new();
                    for _ in 0..*n {
                        match drain.next() {
                            Some((h, value)) => taken.push((h, value.id)),
                            None => break,
                        }
                    }
                    prop_assert_eq!(drain.len(), live.len() - taken.len());
                    drop(drain); // removes the rest
                    prop_assert_eq!(&taken[..], &live[..taken.len()]);
                    for entry in model.entries.values_mut() {
                        entry.live = false;
                    }
                }
                Op::GetDisjointMut(a, b) => {
                    if let (Some(a), Some(b)) = (model.pick(a), model.pick(b)) {
                        let ok = a != b && model.entries[&a].live && model.entries[&b].live;
                        match pool.get_disjoint_mut([a, b]) {
                            Some([x, y]) => {
                                prop_assert!(ok);
                                prop_assert_eq!(
                                    (x.id, y.id),
                                    (model.entries[&a].id, model.entries[&b].id)
                                );
                                std::mem::swap(&mut x.key, &mut y.key);
                                let (ka, kb) = (model.entries[&a].key, model.entries[&b].key);
                                model.entries.get_mut(&a).unwrap().key = kb;
                                model.entries.get_mut(&b).unwrap().key = ka;
                            }
                            None => prop_assert!(!ok, "{:?} and {:?}", a, b),
                        }
                    }
                }
                Op::IndexMut(i) => {
                    if let Some(h) = model.pick(i) {
                        let entry = model.entries.get_mut(&h).unwrap();
                        let mut view = pool.exclusive();
                        if entry.live {
                            prop_assert_eq!(view[h].id, entry.id);
                            view[h].key = view[h].key.wrapping_add(1);
                            entry.key = entry.key.wrapping_add(1);
                        } else {
                            let caught =
                                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                    view[h].id
                                }));
                            prop_assert!(caught.is_err(), "a stale key must panic");
                        }
                    }
                }
                Op::Hold(_)
                | Op::Unhold(_)
                | Op::HoldOwned(_)
                | Op::UnholdOwned(_)
                | Op::Open
                | Op::Close(_)
                | Op::SectionGet(_)
                | Op::SectionIter
                | Op::Reclaim => {}
                #[cfg(feature = "serde")]
                Op::Save(seq) => {
                    let saved = save::save(&pool, &maps, *seq);
                    if model.exact() {
                        save::probe_mut(&mut model, &mut pool, &saved)?;
                    }
                    drop(pool);
                    pool = save::reload(&mut model, &mut maps, saved)?;
                }
                op => common_step(&mut model, &pool, &mut maps, op)?,
            }
            model.check(&pool)?;
        }
    }
    model.free_all();
    model.check_dropped()
}

/// Saving and loading the pool and the maps mid-run (the `serde` feature),
/// in the tests' format (`support/format.rs`). A value saves as its key and
/// id; a loaded value is a new one (its drop counted apart), whose origin
/// the model looks up.
#[cfg(feature = "serde")]
mod save {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    use proptest::prelude::*;
    use proptest::test_runner::TestCaseError;
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use tagpool::{HandlePool, Reservation};

    use super::format::{Save, Value as Tree};
    use super::{Maps, Model, Value};

    /// The drop counts of the values a load makes, and for each of them
    /// (by id) the id of the value it copies.
    struct Loading {
        drops: Arc<Mutex<Vec<u32>>>,
        origins: HashMap<usize, usize>,
    }

    thread_local! {
        /// Set while a save loads (values have no seed of their own).
        static LOADING: RefCell<Option<Loading>> = const { RefCell::new(None) };
    }

    impl Serialize for Value {
        fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
            (self.key, self.id as u64).serialize(serializer)
        }
    }

    impl<'de> Deserialize<'de> for Value {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            let (key, origin) = <(u8, u64)>::deserialize(deserializer)?;
            LOADING.with(|loading| {
                let mut loading = loading.borrow_mut();
                let loading = loading
                    .as_mut()
                    .ok_or_else(|| D::Error::custom("a value loaded outside `load`"))?;
                let id = {
                    let mut drops = loading.drops.lock().unwrap();
                    drops.push(0);
                    drops.len() - 1
                };
                loading.origins.insert(id, origin as usize);
                Ok(Value {
                    key,
                    id,
                    drops: loading.drops.clone(),
                })
            })
        }
    }

    /// A save of the pool and of both maps.
    pub(super) struct Saved {
        pool: Tree,
        dense: Tree,
        sparse: Tree,
    }

    pub(super) fn save(pool: &HandlePool<Value>, maps: &Maps, seq: bool) -> Saved {
        Saved {
            pool: pool.serialize(Save { seq }).expect("a pool saves"),
            dense: maps.dense.serialize(Save { seq }).expect("a map saves"),
            sparse: maps.sparse.serialize(Save { seq }).expect("a map saves"),
        }
    }

    /// Loads a saved pool through the model's builder (its eviction's key
    /// function and `on_evict`): the pool, and the origins of its values.
    fn load(
        model: &Model,
        saved: &Tree,
    ) -> Result<(HandlePool<Value>, HashMap<usize, usize>), TestCaseError> {
        LOADING.with(|loading| {
            *loading.borrow_mut() = Some(Loading {
                drops: model.drops.clone(),
                origins: HashMap::new(),
            })
        });
        let loaded = model.builder().deserialize_pool(saved.clone());
        let origins = LOADING.with(|loading| loading.borrow_mut().take().unwrap().origins);
        let pool = loaded.map_err(|err| TestCaseError::fail(format!("no load: {err}")))?;
        Ok((pool, origins))
    }

    /// Where the save promises it (see [`Model::exact`]), the saved pool's
    /// next keys are a loaded one's: `reserve_many` of every free entry
    /// gives the same keys in the saved pool and in a second load of the
    /// save.
    pub(super) fn probe(
        model: &Model,
        pool: &HandlePool<Value>,
        saved: &Saved,
    ) -> Result<(), TestCaseError> {
        let n = model.capacity - model.occupied();
        let (twin, _) = load(model, &saved.pool)?;
        let keys = |r: Option<Vec<Reservation>>| {
            r.map(|r| r.iter().map(Reservation::key).collect::<Vec<_>>())
        };
        let theirs = keys(twin.reserve_many(n));
        prop_assert!(theirs.is_some(), "{} entries free after the load", n);
        prop_assert_eq!(keys(pool.reserve_many(n)), theirs, "the next {} keys", n);
        Ok(())
    }

    /// [`probe`] through `insert_mut`.
    pub(super) fn probe_mut(
        model: &mut Model,
        pool: &mut HandlePool<Value>,
        saved: &Saved,
    ) -> Result<(), TestCaseError> {
        let n = model.capacity - model.occupied();
        let (mut twin, _) = load(model, &saved.pool)?;
        for step in 0..n {
            let theirs = twin.insert_mut(model.value(0).0).ok();
            prop_assert!(
                theirs.is_some(),
                "{} of {} entries free after the load",
                step,
                n
            );
            let ours = pool.insert_mut(model.value(0).0).ok();
            prop_assert_eq!(ours, theirs, "the next key, {} of {}", step, n);
        }
        Ok(())
    }

    /// After a save: drops the saved pool's remains (what awaited a grace
    /// period), checks every value of it was dropped once, and loads the
    /// pool and the maps, which must hold what the model does.
    pub(super) fn reload(
        model: &mut Model,
        maps: &mut Maps,
        saved: Saved,
    ) -> Result<HandlePool<Value>, TestCaseError> {
        model.free_all();
        model.check_dropped()?;
        let (pool, origins) = load(model, &saved.pool)?;
        model.reloaded(&pool, &origins)?;
        model.check(&pool)?;
        let fail = |err: super::format::Error| TestCaseError::fail(format!("no map: {err}"));
        maps.dense = Deserialize::deserialize(saved.dense).map_err(fail)?;
        maps.sparse = Deserialize::deserialize(saved.sparse).map_err(fail)?;
        maps.check()?;
        Ok(pool)
    }
}

/// Without the `serde` feature, no step saves.
#[cfg(not(feature = "serde"))]
mod save {
    use proptest::test_runner::TestCaseError;
    use tagpool::HandlePool;

    use super::{Maps, Model, Value};

    /// No save is ever made.
    pub(super) enum Saved {}

    pub(super) fn reload(
        _: &mut Model,
        _: &mut Maps,
        saved: Saved,
    ) -> Result<HandlePool<Value>, TestCaseError> {
        match saved {}
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn the_handle_pool_matches_a_slot_map(
        setting in setting(),
        ops in prop::collection::vec(op(), 1..ops_len()),
    ) {
        run(setting, &ops)?;
    }

    #[test]
    fn the_exclusive_api_matches_a_slot_map(
        setting in setting(),
        ops in prop::collection::vec(exclusive_op(), 1..ops_len()),
    ) {
        run_exclusive(setting, &ops)?;
    }
}
