//! Saving a [`HandlePool`] and loading it back, apart from serde's data
//! model (`serialize.rs` maps these types to it): what a save reads from a
//! shared pool, how it recovers the order of the free entries, how a save
//! read back is checked, and how a load rebuilds the entries, the chain of
//! vacated entries and the free list.
//!
//! # What a save holds
//!
//! The capacity and the eviction kind; the high mark (the entries below it
//! have held values, those at or above it never have); every live value
//! with its key; the keys the next inserts would return, in order: first
//! those of the chain of entries vacated through `&mut` (`vacant`), then
//! those of the free list (`free`), whose free entries at or above the high
//! mark that it does not list come after it, in index order, at the first
//! generation (so that a pool never used past a few entries saves a few
//! keys, not its capacity); and the retired entries. Every entry below the
//! high mark is in exactly one of `values`, `vacant`, `free` and `retired`.
//!
//! # The free list's order, read through `&self`
//!
//! The free list is a stack linked through the index pool's links, whose
//! head only the engine reads. A save recovers the stack from the links
//! instead: the free list counts its entries, `n`; each of them is a free
//! entry off the vacated chain whose link names the next one down, the
//! last one's the list's end marker; so the top is a free entry whose chain
//! of links reaches the end marker through exactly `n` free entries. The
//! other free entries (awaiting a grace period, removed while read, or
//! held by the cache of a thread inside an insert or a remove: a save
//! first moves every other thread's cached entries to the free list) have
//! stale links, which may join the list's chain
//! but rarely make another chain of exactly `n`: when exactly one entry
//! has such a chain, the save takes it as the list, and the other free
//! entries after it, in index order (their order of reuse depends on the
//! threads that hold them). When none or several do (another thread moved
//! the list meanwhile, or stale links happen to make a second such chain),
//! it saves every free entry off the vacated chain in index order. With
//! no other thread on the pool and every free entry on its free lists, the
//! list's chain is the only one of its length that contains every free
//! entry, and the save is exact.

use super::entry::{self, RETIRED};
use super::key::FIRST_GENERATION;
use super::place::{pop_index, Held};
use super::{Handle, HandleBuilder, HandlePool, Key, Policy, Ref, MAX_HANDLE_CAPACITY, NIL};
use crate::engine::free_list::FreeList;
use crate::error::BuildError;
use crate::sync::Ordering;

/// How a pool makes room when full, as a save names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Evict {
    /// It does not.
    Never,
    /// [`HandleBuilder::evict_oldest`].
    Oldest,
    /// [`HandleBuilder::evict_min_by_key`]: the function is not saved.
    MinByKey,
}

impl Evict {
    /// The names of the kinds, in their order (serde's variants).
    pub(super) const NAMES: &'static [&'static str] = &["never", "oldest", "min_by_key"];

    /// This kind's name.
    pub(super) fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// A save's mark for a live entry, among the generations of free ones and
/// [`RETIRED`].
const LIVE: u64 = u64::MAX;

/// A pool as a save reads it, holding a counted read of every live value.
pub(super) struct Snapshot<'a, T, K> {
    pub(super) capacity: usize,
    pub(super) evict: Evict,
    pub(super) high: u32,
    /// In index order; oldest first in a pool that evicts the oldest.
    pub(super) values: Vec<Ref<'a, T, K>>,
    pub(super) vacant: Vec<Handle>,
    pub(super) free: Vec<Handle>,
    pub(super) retired: Vec<u32>,
}

impl<T, K> HandlePool<T, K> {
    /// The eviction kind of the pool.
    fn evict_kind(&self) -> Evict {
        match self.policy {
            Policy::Never => Evict::Never,
            Policy::Oldest => Evict::Oldest,
            Policy::Least(_) => Evict::MinByKey,
        }
    }
}

impl<T, K: Key> HandlePool<T, K> {
    /// Reads the pool for a save: see the module docs.
    pub(super) fn snapshot(&self) -> Snapshot<'_, T, K> {
        // The free entries parked in threads' caches go to the free list
        // first (those of threads in an insert or a remove stay put), so
        // that the list's order is the order of the next inserts, here and
        // in the loaded pool alike: each refills its caches from the same
        // list in the same way.
        self.indices.pool().state().sweep_caches();
        let capacity = self.capacity();
        let high = self.used().min(capacity) as u32;
        let mut values = Vec::new();
        let marks: Vec<u64> = (0..high)
            .map(|index| self.save_entry(index, &mut values))
            .collect();
        let mut listed = Bits::new(high);
        let vacant = self.vacant_order(&marks, &mut listed);
        let mut free = self.free_order(&marks, &listed);
        // The free entries at or above the high mark that end the order in
        // index order go without saying (see the module docs).
        let mut cut = free.len();
        while cut > 0 && free[cut - 1] >= high && free.get(cut).map_or(true, |&n| free[cut - 1] < n)
        {
            cut -= 1;
        }
        free.truncate(cut);
        let free = free
            .into_iter()
            .map(|index| {
                let mark = marks.get(index as usize).copied();
                Handle::new(index, mark.unwrap_or(FIRST_GENERATION))
            })
            .collect();
        if let Policy::Oldest = self.policy {
            // Relaxed: the stamp was published with the value, which this
            // thread's counted read acquired.
            values.sort_by_key(|value| {
                let index = value.handle.index();
                (self.entries[index].stamp.load(Ordering::Relaxed), index)
            });
        }
        let retired = (0..high)
            .filter(|&i| marks[i as usize] == RETIRED)
            .collect();
        Snapshot {
            capacity,
            evict: self.evict_kind(),
            high,
            values,
            vacant,
            free,
            retired,
        }
    }

    /// The save's mark of entry `index`: [`LIVE`] (its value pushed onto
    /// `values` as a counted read), [`RETIRED`], or the generation of a
    /// free entry (the next one of a value removed while read).
    fn save_entry<'a>(&'a self, index: u32, values: &mut Vec<Ref<'a, T, K>>) -> u64 {
        let entry = match self.entries.get(index as usize) {
            Some(entry) => entry,
            // Not seen by this thread: filled by another one meanwhile.
            None => return FIRST_GENERATION,
        };
        // Acquire: as a read's first load.
        let mut state = entry.state.load(Ordering::Acquire);
        loop {
            let generation = entry::generation(state);
            if entry::is_reserved(state) {
                // A reservation (`reserve.rs`) is no value and is not
                // saved: the loaded entry is free under the next
                // generation (retired after the last), so the reserved
                // key is stale there.
                return entry::ended(state);
            }
            if !entry::is_occupied(state) {
                return generation;
            }
            if let Some(value) = self.read_counted(Handle::new(index, generation)) {
                values.push(value);
                return LIVE;
            }
            // Acquire: as above; another thread changed the word since.
            state = entry.state.load(Ordering::Acquire);
        }
    }

    /// The keys of the chain of vacated entries, in its order, each marked
    /// in `listed`. A pop by another thread meanwhile may leave the walk a
    /// stale link: it stops at the first index that is not a free entry
    /// below the high mark not listed yet.
    fn vacant_order(&self, marks: &[u64], listed: &mut Bits) -> Vec<Handle> {
        let mut order = Vec::new();
        // Relaxed: the chain was written through `&mut self`, ordered
        // before this shared use by whatever ended that borrow (see
        // `pop_vacant`).
        let mut at = self.vacant.load(Ordering::Relaxed);
        while let Some(&mark) = marks.get(at as usize) {
            if mark == LIVE || mark == RETIRED || listed.get(at) {
                break;
            }
            let entry = match self.entries.get(at as usize) {
                Some(entry) => entry,
                None => break,
            };
            listed.set(at);
            order.push(Handle::new(at, mark));
            // Relaxed: as above.
            at = entry.stamp.load(Ordering::Relaxed) as u32;
        }
        order
    }

    /// The indices of the free entries off the vacated chain, in the free
    /// list's order when the save can recover it, else in index order (see
    /// the module docs).
    fn free_order(&self, marks: &[u64], listed: &Bits) -> Vec<u32> {
        let high = marks.len() as u32;
        let links = self.indices.pool().state().free_list();
        let allocated = links.allocated().min(self.capacity() as u32);
        let free = |index: u32| match marks.get(index as usize) {
            Some(&mark) => mark != LIVE && mark != RETIRED && !listed.get(index),
            // Never filled (at or above the high mark).
            None => true,
        };
        let mut order = Vec::new();
        let mut placed = Bits::new(allocated);
        if walk_free_list(links, allocated, &free, &mut order) {
            for &index in &order {
                placed.set(index);
            }
        } else {
            order.clear();
        }
        // The free entries off the list (in caches, awaiting a grace
        // period, removed while read) or all of them, in index order.
        order.extend((0..allocated).filter(|&i| free(i) && !placed.get(i)));
        // Entries below the high mark that this thread does not see in the
        // links' segments: only while another thread grows them.
        order.extend((allocated..high).filter(|&i| free(i)));
        order
    }
}

/// Recovers the free list's order from its links, onto `order`: `false` if
/// it cannot tell which of the entries for which `free` holds, below
/// `allocated`, are the list's (see the module docs).
fn walk_free_list(
    links: &FreeList,
    allocated: u32,
    free: &dyn Fn(u32) -> bool,
    order: &mut Vec<u32>,
) -> bool {
    /// A depth not known yet.
    const UNKNOWN: u32 = 0;
    /// No chain of free entries down to the end marker (or one being
    /// walked: a walk that comes back to it is a cycle).
    const BROKEN: u32 = u32::MAX;
    let count = links.free_count();
    if count == 0 {
        return true;
    }
    let end = links.layout().nil();
    // Each link is an atomic load (Relaxed: a snapshot, checked as it
    // goes) of an allocated index: `allocated` read the segments'
    // publication. `depth[i]`: how many free entries the chain from `i`
    // down to the end marker passes through, `i` included.
    let mut depth = vec![UNKNOWN; allocated as usize];
    let mut path = Vec::new();
    for start in 0..allocated {
        if depth[start as usize] != UNKNOWN || !free(start) {
            continue;
        }
        let mut at = start;
        let mut below = loop {
            path.push(at);
            depth[at as usize] = BROKEN;
            let next = links.link_of(at);
            if next == end {
                break 0;
            }
            if next >= allocated || !free(next) {
                break BROKEN;
            }
            match depth[next as usize] {
                UNKNOWN => at = next,
                known => break known,
            }
        };
        for &on in path.iter().rev() {
            below = if below == BROKEN { BROKEN } else { below + 1 };
            depth[on as usize] = below;
        }
        path.clear();
    }
    let mut tops = (0..allocated).filter(|&i| depth[i as usize] == count && free(i));
    let mut at = match (tops.next(), tops.next()) {
        (Some(top), None) => top,
        _ => return false,
    };
    // Down the chain again, each depth one less than the last (so no entry
    // twice, whatever another thread wrote to the links since).
    for left in (1..=count).rev() {
        if at >= allocated || depth[at as usize] != left || !free(at) {
            return false;
        }
        order.push(at);
        at = links.link_of(at);
    }
    true
}

/// A pool's save read back, before it is checked.
pub(super) struct Saved<T> {
    pub(super) capacity: u64,
    pub(super) evict: Evict,
    pub(super) high: u32,
    pub(super) values: Vec<(Handle, T)>,
    pub(super) vacant: Vec<Handle>,
    pub(super) free: Vec<Handle>,
    pub(super) retired: Vec<u32>,
}

/// Why a save read back cannot be loaded.
#[derive(Debug)]
pub(super) enum Refused {
    Capacity(u64),
    HighAboveCapacity(u32, u64),
    BeyondCapacity(&'static str, usize, u64),
    AboveHigh(&'static str, usize, u32),
    TwoValues(usize),
    Twice(usize),
    NeverFilled(usize, u64),
    Missing(usize),
    Build(BuildError),
    Evict(Evict, Evict),
    NeedsKey,
}

impl core::fmt::Display for Refused {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Self::Capacity(c) => {
                write!(f, "capacity {c} is not between 1 and {MAX_HANDLE_CAPACITY}")
            }
            Self::HighAboveCapacity(h, c) => write!(f, "high mark {h} is above the capacity {c}"),
            Self::BeyondCapacity(what, i, c) => {
                write!(f, "{what} at index {i} is beyond the capacity {c}")
            }
            Self::AboveHigh(what, i, h) => {
                write!(f, "{what} at index {i} is at or above the high mark {h}")
            }
            Self::TwoValues(i) => write!(f, "two values at index {i}"),
            Self::Twice(i) => write!(f, "index {i} is saved twice"),
            Self::NeverFilled(i, g) => write!(
                f,
                "the free entry at index {i}, above the high mark, has generation {g}, not 1"
            ),
            Self::Missing(i) => write!(f, "index {i}, below the high mark, is saved nowhere"),
            Self::Build(ref err) => write!(f, "{err}"),
            Self::Evict(saved, built) => write!(
                f,
                "the saved pool evicts `{}`, the builder's `{}`",
                saved.name(),
                built.name()
            ),
            Self::NeedsKey => f.write_str(
                "the saved pool evicts by a key function, which no save holds: \
                 load it with `HandleBuilder::evict_min_by_key` and `deserialize_pool`",
            ),
        }
    }
}

/// Where a check of a save saw an index below the high mark.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Seen {
    Nowhere,
    Value,
    Elsewhere,
}

impl<T> Saved<T> {
    /// Checks that the save describes a pool: see [`Refused`].
    fn check(&self) -> Result<(), Refused> {
        let capacity = self.capacity;
        if capacity == 0 || capacity > MAX_HANDLE_CAPACITY as u64 {
            return Err(Refused::Capacity(capacity));
        }
        if u64::from(self.high) > capacity {
            return Err(Refused::HighAboveCapacity(self.high, capacity));
        }
        let mut seen = vec![Seen::Nowhere; self.high as usize];
        let mut see = |what: &'static str, index: usize, value: bool| {
            if index as u64 >= capacity {
                return Err(Refused::BeyondCapacity(what, index, capacity));
            }
            let at = seen
                .get_mut(index)
                .ok_or(Refused::AboveHigh(what, index, self.high))?;
            match (*at, value) {
                (Seen::Nowhere, true) => *at = Seen::Value,
                (Seen::Nowhere, false) => *at = Seen::Elsewhere,
                (Seen::Value, true) => return Err(Refused::TwoValues(index)),
                _ => return Err(Refused::Twice(index)),
            }
            Ok(())
        };
        for (key, _) in &self.values {
            see("a value", key.index(), true)?;
        }
        for key in &self.vacant {
            see("a vacated entry", key.index(), false)?;
        }
        for &index in &self.retired {
            see("a retired entry", index as usize, false)?;
        }
        let mut fresh = Vec::new();
        for key in &self.free {
            let index = key.index();
            if index < self.high as usize {
                see("a free entry", index, false)?;
            } else if index as u64 >= capacity {
                return Err(Refused::BeyondCapacity("a free entry", index, capacity));
            } else if key.generation() != FIRST_GENERATION {
                return Err(Refused::NeverFilled(index, key.generation()));
            } else {
                fresh.push(index);
            }
        }
        fresh.sort_unstable();
        if let Some(pair) = fresh.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(Refused::Twice(pair[0]));
        }
        match seen.iter().position(|&at| at == Seen::Nowhere) {
            Some(index) => Err(Refused::Missing(index)),
            None => Ok(()),
        }
    }

    /// The pool the save describes, built by `builder` with the saved
    /// capacity; the builder's eviction must be the saved one, or none
    /// (then the saved one is taken, but for a key function, which no save
    /// holds).
    pub(super) fn load<K: Key>(
        self,
        builder: HandleBuilder<T, K>,
    ) -> Result<HandlePool<T, K>, Refused> {
        self.check()?;
        let mut pool = builder
            .capacity(self.capacity as usize)
            .build()
            .map_err(Refused::Build)?;
        match (self.evict, pool.evict_kind()) {
            (saved, built) if saved == built => {}
            (Evict::Oldest, Evict::Never) => pool.policy = Policy::Oldest,
            (Evict::MinByKey, Evict::Never) => return Err(Refused::NeedsKey),
            (saved, built) => return Err(Refused::Evict(saved, built)),
        }
        pool.restore(self);
        Ok(pool)
    }
}

impl<T, K: Key> HandlePool<T, K> {
    /// Puts a checked save into this pool, just built with its capacity.
    fn restore(&mut self, saved: Saved<T>) {
        let high = saved.high;
        let span = saved
            .free
            .iter()
            .map(|key| key.index() as u32 + 1)
            .fold(high, u32::max);
        {
            // Every index below `span` out of the index pool, each where
            // the save puts it. A pool just built hands them out in index
            // order; any other goes back.
            let mut others = Held {
                free: self.indices.pool().state().free_list(),
                chain: Vec::new(),
            };
            let mut taken = 0;
            while taken < span {
                // SAFETY: `&mut self`: no other operation on the index pool.
                match unsafe { pop_index(&self.indices) } {
                    Some(index) if index < span => taken += 1,
                    Some(index) => others.chain.push(index),
                    None => break,
                }
            }
            debug_assert!(taken == span && others.chain.is_empty());
        }
        for index in 0..high {
            // Allocates the entry's segment: it was filled once.
            self.entries.claim(index, &self.indices);
        }
        // In order: the insertion stamps of a pool that evicts the oldest.
        for (key, value) in saved.values {
            self.fill_at(key.index() as u32, key.generation(), value);
        }
        // Relaxed, here and below: `&mut self` orders everything.
        let mut head = NIL;
        for key in saved.vacant.iter().rev() {
            let entry = self.entries.at(key.index() as u32);
            entry.state.store(
                key.index() as u32,
                entry::free(key.generation()),
                Ordering::Relaxed,
            );
            entry.stamp.store(u64::from(head), Ordering::Relaxed);
            head = key.index() as u32;
        }
        self.vacant.store(head, Ordering::Relaxed);
        self.vacant_len
            .store(saved.vacant.len() as u32, Ordering::Relaxed);
        for &index in &saved.retired {
            let entry = self.entries.at(index);
            entry
                .state
                .store(index, entry::free(RETIRED), Ordering::Relaxed);
            self.retire();
        }
        let mut listed = Bits::new(span - high);
        let mut chain = Held {
            free: self.indices.pool().state().free_list(),
            chain: Vec::with_capacity(saved.free.len()),
        };
        for key in &saved.free {
            let index = key.index() as u32;
            if index < high {
                let entry = self.entries.at(index);
                entry
                    .state
                    .store(index, entry::free(key.generation()), Ordering::Relaxed);
            } else {
                listed.set(index - high);
            }
            chain.chain.push(index);
        }
        chain
            .chain
            .extend((high..span).filter(|&i| !listed.get(i - high)));
        // The chain goes onto the free list as it drops, its first on top.
        drop(chain);
        self.indices.pool().state().note_held();
        self.high.store(high, Ordering::Relaxed);
    }
}

/// A set of indices below a bound.
struct Bits(Vec<u64>);

impl Bits {
    fn new(len: u32) -> Self {
        Self(vec![0; (len as usize + 63) / 64])
    }

    fn get(&self, index: u32) -> bool {
        self.0
            .get(index as usize / 64)
            .map_or(false, |word| word >> (index % 64) & 1 != 0)
    }

    fn set(&mut self, index: u32) {
        self.0[index as usize / 64] |= 1 << (index % 64);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// The free list's order, popped through `&mut` (which empties it).
    fn popped(pool: &mut HandlePool<u32>) -> Vec<u32> {
        let free = pool.indices.pool().state().free_list();
        // SAFETY: `&mut pool`: no other operation on its index pool.
        core::iter::from_fn(|| unsafe { free.pop_exclusive() })
            .map(|popped| popped.index)
            .collect()
    }

    /// Entries in this thread's cache go to the free list before the save
    /// reads it (the sweep), so the saved order is the free list's, the
    /// entries that were cached included: the order of the next inserts.
    /// (A thread in the middle of an insert or a remove keeps its cache,
    /// whose stale links the walk reads past; no single thread can show
    /// that here.)
    #[test]
    fn the_save_reads_the_free_list_after_sweeping_the_caches() {
        let mut pool = HandlePool::builder().capacity(64).build().unwrap();
        let keys: Vec<_> = (0..3).map(|v| pool.insert(v).unwrap()).collect();
        // Back to this thread's cache.
        assert!(pool.remove(keys[0]) && pool.remove(keys[2]));
        let saved: Vec<_> = pool
            .snapshot()
            .free
            .iter()
            .map(|k| k.index() as u32)
            .collect();
        let list = popped(&mut pool);
        assert_eq!(list.len(), 63, "every free entry, swept: {list:?}");
        for removed in [&keys[0], &keys[2]] {
            assert!(saved.contains(&(removed.index() as u32)), "{saved:?}");
        }
        // The entries never used that end the list in index order go
        // unsaid.
        assert_eq!(saved[..], list[..saved.len()]);
        assert!(list[saved.len()..].windows(2).all(|w| w[0] < w[1]));
    }

    /// Without caches, the free list in any order is read exactly, and its
    /// entries never used that end it in index order go unsaid.
    #[test]
    fn the_free_lists_order_is_read_exactly_without_caches() {
        let mut pool = HandlePool::builder()
            .capacity(16)
            .thread_cache(false)
            .build()
            .unwrap();
        let keys: Vec<_> = (0..6).map(|v| pool.insert(v).unwrap()).collect();
        for i in [4, 0, 5, 2] {
            assert!(pool.remove(keys[i]));
        }
        let saved: Vec<_> = pool.snapshot().free.iter().map(|k| k.index()).collect();
        assert_eq!(saved, [2, 5, 0, 4]);
        let list = popped(&mut pool);
        assert_eq!(list, [2, 5, 0, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
    }
}
