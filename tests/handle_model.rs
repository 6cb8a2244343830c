//! Property tests of the handle pool against a single-threaded slot map: a
//! plain model that keeps, for every handle ever returned, whether it is
//! live, its value, its insertion order and how many `Ref`s read it.
//!
//! Random sequences of inserts (`insert` and `insert_with_key`), removes,
//! takes, reads, held `Ref`s and their drops, on pools that never evict,
//! evict the oldest value or the least value. At every step the pool must
//! answer as the model does: which handles are live and what they hold,
//! `len`, which inserts fail, which value an eviction picks (the oldest,
//! or one of the least, among those nobody reads), that a remove while
//! read is deferred to the last `Ref`, that a take while read fails and
//! leaves the value, and that every value is dropped exactly once.
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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError};
use tagpool::{Handle, HandlePool, InsertError, OwnedRef, ReadSection, Ref, TakeError};

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

#[derive(Clone, Debug)]
enum Op {
    Insert(u8),
    /// `insert_with_key`.
    InsertWithKey(u8),
    /// `insert_mut` (the second run only).
    InsertMut(u8),
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
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
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
    ]
}

fn exclusive_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u8..6).prop_map(Op::Insert),
        2 => (0u8..6).prop_map(Op::InsertWithKey),
        4 => (0u8..6).prop_map(Op::InsertMut),
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
    ]
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![
        Just(Policy::Never),
        Just(Policy::Oldest),
        Just(Policy::Least)
    ]
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

/// The model's record of one handle.
#[derive(Debug)]
struct Entry {
    id: usize,
    key: u8,
    /// Insertion order.
    order: usize,
    live: bool,
    /// `Ref`s held now.
    readers: usize,
    /// Removed from a pool that has had sections, awaiting a grace period:
    /// its tag (the epoch at its removal, plus one), and whether it was
    /// evicted (`on_evict` gets it then).
    limbo: Option<(u64, bool)>,
}

impl Entry {
    /// Whether it still takes an entry of the pool: live, removed and
    /// still read, or awaiting a grace period.
    fn occupies(&self) -> bool {
        self.live || self.readers > 0 || self.limbo.is_some()
    }
}

/// The model: every handle ever returned, and the values' drop counts.
struct Model {
    capacity: usize,
    /// `HandleBuilder::initial`, if set: entries allocated as needed.
    initial: Option<usize>,
    policy: Policy,
    drops: Arc<Mutex<Vec<u32>>>,
    evicted: Arc<Mutex<Vec<(Handle, usize)>>>,
    entries: HashMap<Handle, Entry>,
    handles: Vec<Handle>,
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
}

impl Model {
    fn new(capacity: usize, initial: Option<usize>, policy: Policy) -> Self {
        Self {
            capacity,
            initial: initial.map(|initial| initial.min(capacity)),
            policy,
            drops: Arc::new(Mutex::new(Vec::new())),
            evicted: Arc::new(Mutex::new(Vec::new())),
            entries: HashMap::new(),
            handles: Vec::new(),
            order: 0,
            peak: std::cell::Cell::new(0),
            sections_used: false,
            epoch: 1,
            section: None,
            evictions: 0,
            handed: Vec::new(),
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

    fn pool(&self) -> HandlePool<Value> {
        let builder = HandlePool::builder().capacity(self.capacity);
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
        builder
            .on_evict(move |h, v: Value| log.lock().unwrap().push((h, v.id)))
            .build()
            .unwrap()
    }

    fn occupied(&self) -> usize {
        self.entries.values().filter(|e| e.occupies()).count()
    }

    fn live(&self) -> usize {
        self.entries.values().filter(|e| e.live).count()
    }

    /// Values removed while counted `Ref`s read them.
    fn removed_while_read(&self) -> usize {
        self.entries
            .values()
            .filter(|e| !e.live && e.readers > 0)
            .count()
    }

    /// A handle ever returned, if any.
    fn pick(&self, i: &Index) -> Option<Handle> {
        (!self.handles.is_empty()).then(|| *i.get(&self.handles))
    }

    /// `insert`, or `insert_with_key` (whose closure must get the key the
    /// insert returns).
    fn insert(
        &mut self,
        pool: &HandlePool<Value>,
        key: u8,
        with_key: bool,
    ) -> Result<(), TestCaseError> {
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
        let fresh = Entry {
            id,
            key,
            order: self.order,
            live: true,
            readers: 0,
            limbo: None,
        };
        self.order += 1;
        if self.sections_used {
            return self.insert_deferring(fresh, value, exclusive, op);
        }
        let occupied = self.occupied();
        let candidates: Vec<&Entry> = self
            .entries
            .values()
            .filter(|e| e.live && e.readers == 0)
            .collect();
        // What the model expects of a full pool.
        let victim: Option<Vec<usize>> = match self.policy {
            _ if occupied < self.capacity => None,
            Policy::Never => Some(Vec::new()),
            Policy::Oldest => Some(
                candidates
                    .iter()
                    .min_by_key(|e| e.order)
                    .map(|e| e.id)
                    .into_iter()
                    .collect(),
            ),
            Policy::Least => {
                let least = candidates.iter().map(|e| e.key).min();
                Some(
                    candidates
                        .iter()
                        .filter(|e| Some(e.key) == least)
                        .map(|e| e.id)
                        .collect(),
                )
            }
        };
        let before = self.evicted.lock().unwrap().len();
        let inserted: Option<Handle> = op(value, id)?;
        match (inserted, victim) {
            (Some(h), None) => {
                prop_assert!(!self.entries.get(&h).map_or(false, |e| e.occupies()));
                prop_assert_eq!(self.evicted.lock().unwrap().len(), before);
                self.entries.insert(h, fresh);
                self.handles.push(h);
            }
            (Some(h), Some(allowed)) => {
                let log = self.evicted.lock().unwrap();
                prop_assert_eq!(log.len(), before + 1, "one eviction");
                let (gone, gone_id) = log[before];
                prop_assert!(
                    allowed.contains(&gone_id),
                    "evicted {} of {:?}",
                    gone_id,
                    allowed
                );
                let entry = self.entries.get_mut(&gone).expect("a known handle");
                prop_assert!(entry.live && entry.readers == 0 && entry.id == gone_id);
                entry.live = false;
                prop_assert_eq!(h.index(), gone.index(), "the evicted entry is reused");
                drop(log);
                self.evictions += 1;
                self.handed.push((gone, gone_id));
                self.entries.insert(h, fresh);
                self.handles.push(h);
            }
            (None, Some(allowed)) => {
                prop_assert!(allowed.is_empty(), "refused, but {:?} could go", allowed);
            }
            (None, None) => {
                return Err(TestCaseError::fail(format!(
                    "refused with {occupied} of {} entries used",
                    self.capacity
                )))
            }
        }
        Ok(())
    }

    /// [`insert_by`](Self::insert_by) in a pool that has had sections: a
    /// full pool runs a grace period (or, through `&mut`, frees every
    /// entry awaiting one), and evicts only if that freed nothing and no
    /// section is open: its victim awaits a grace period too, which runs
    /// at once.
    fn insert_deferring(
        &mut self,
        fresh: Entry,
        value: Value,
        exclusive: bool,
        op: impl FnOnce(Value, usize) -> Result<Option<Handle>, TestCaseError>,
    ) -> Result<(), TestCaseError> {
        let id = fresh.id;
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
        let inserted: Option<Handle> = op(value, id)?;
        match inserted {
            Some(h) => {
                prop_assert!(room, "inserted {:?} into a full pool", h);
                prop_assert!(!self.entries.get(&h).map_or(false, |e| e.occupies()));
                self.entries.insert(h, fresh);
                self.handles.push(h);
            }
            None => prop_assert!(!room, "refused with room"),
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
        let entry = self.entries.get_mut(&h).unwrap();
        entry.readers -= 1;
        if !entry.live && entry.readers == 0 {
            self.ended(h, false);
        }
    }

    /// `take`: the value if live and unread; `BeingRead` (and the value
    /// stays) if read; `Stale` if not live.
    fn take(&mut self, pool: &HandlePool<Value>, h: Handle) -> Result<(), TestCaseError> {
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

    /// `get` (counted) and `contains`.
    fn get(&self, pool: &HandlePool<Value>, h: Handle) -> Result<(), TestCaseError> {
        let entry = &self.entries[&h];
        let seen = pool.get(h).map(|v| v.id);
        prop_assert_eq!(seen, entry.live.then_some(entry.id), "{:?}", h);
        prop_assert_eq!(pool.contains(h), entry.live);
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
        prop_assert_eq!(pool.len(), self.live() + self.removed_while_read());
        let stats = pool.stats();
        prop_assert_eq!(stats.live, self.live());
        prop_assert_eq!(stats.removed_while_read, self.removed_while_read());
        let awaiting = self.entries.values().filter(|e| e.limbo.is_some()).count();
        prop_assert_eq!(stats.awaiting_reuse, awaiting);
        prop_assert_eq!(stats.retired, 0);
        // An upper bound (a thread's cached free entries count as in use),
        // and never below what was occupied at once.
        self.peak.set(self.peak.get().max(self.occupied()));
        prop_assert!(stats.peak_in_use >= self.peak.get());
        prop_assert!(stats.peak_in_use <= self.capacity);
        // Entries are allocated before any handle names them, and never
        // past the capacity.
        let highest = self
            .entries
            .keys()
            .map(|h| h.index() + 1)
            .max()
            .unwrap_or(0);
        prop_assert!(stats.allocated >= highest.max(self.initial.unwrap_or(self.capacity)));
        prop_assert!(stats.allocated <= self.capacity);
        prop_assert_eq!(stats.evictions as usize, self.evictions);
        let mut handed = self.evicted.lock().unwrap().clone();
        let mut expected = self.handed.clone();
        handed.sort_by_key(|(h, _)| (h.index(), h.generation()));
        expected.sort_by_key(|(h, _)| (h.index(), h.generation()));
        prop_assert_eq!(handed, expected, "`on_evict` calls");
        let drops = self.drops.lock().unwrap();
        for entry in self.entries.values() {
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
}

/// The shared face, `Ref`s held across steps.
fn run(
    capacity: usize,
    initial: Option<usize>,
    policy: Policy,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut model = Model::new(capacity, initial, policy);
    {
        let pool = Arc::new(model.pool());
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
                    let freed = model.grace();
                    prop_assert_eq!(pool.reclaim(), freed);
                }
                _ => {}
            }
            model.check(&pool)?;
        }
        drop(sections);
        drop(held);
        drop(held_owned);
    }
    // The pool's drop frees what awaited a grace period.
    model.free_all();
    model.check_dropped()
}

/// The `&mut self` methods among inserts, takes and removes (no `Ref` is
/// held: `&mut` rules it out).
fn run_exclusive(
    capacity: usize,
    initial: Option<usize>,
    policy: Policy,
    ops: &[Op],
) -> Result<(), TestCaseError> {
    let mut model = Model::new(capacity, initial, policy);
    {
        let mut pool = model.pool();
        for op in ops {
            match op {
                Op::Insert(key) => model.insert(&pool, *key, false)?,
                Op::InsertWithKey(key) => model.insert(&pool, *key, true)?,
                Op::InsertMut(key) => model.insert_mut(&mut pool, *key)?,
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
            }
            model.check(&pool)?;
        }
    }
    model.free_all();
    model.check_dropped()
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn the_handle_pool_matches_a_slot_map(
        capacity in 1usize..6,
        initial in prop::option::of(1usize..6),
        policy in policy(),
        ops in prop::collection::vec(op(), 1..ops_len()),
    ) {
        run(capacity, initial, policy, &ops)?;
    }

    #[test]
    fn the_exclusive_api_matches_a_slot_map(
        capacity in 1usize..6,
        initial in prop::option::of(1usize..6),
        policy in policy(),
        ops in prop::collection::vec(exclusive_op(), 1..ops_len()),
    ) {
        run_exclusive(capacity, initial, policy, &ops)?;
    }
}
