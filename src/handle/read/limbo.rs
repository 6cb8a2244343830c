//! Entries awaiting a grace period: removed (their keys stale), their
//! values still in place for the sections that may read them, their
//! indices out of every free list. The limbo is a lock-free stack of them,
//! and [`HandlePool::reclaim`] frees those no open section can see.
//!
//! # The stack
//!
//! One word: the number of entries (high 32 bits) and the top index (low
//! 32, [`NIL`] when empty). Links go through the index pool's free-list
//! links, which are the owner's to use while an index is out of that list,
//! as long as every link holds an index or the free list's own end marker
//! (a speculative walk there that reads one stops at the marker or goes on
//! through real entries, and its tagged CAS fails); so chains end with the
//! free list's end marker, never with `NIL`. A removal puts its entry in
//! its thread's bag (`bag.rs`), and a full bag comes here as one chain (one
//! CAS; a removal whose bag a grace period is reading pushes its entry
//! alone); a grace period takes the whole stack at once (one swap), with
//! every bag's entries, so no pop ever reads a link that another thread
//! could change, and the stack needs no ABA tag: a push only needs the top
//! it links below to still be the top.
//!
//! While in the limbo an entry's `stamp` holds its removal's tag (see
//! `domain.rs`, "Tags"), shifted left by one, and in bit 0 whether the value
//! was evicted (it then goes to `on_evict`, not to its drop).
//!
//! A grace period walks the chain it took once: each entry no open section
//! can see has its value taken out and joins a chain that goes back to the
//! free list in one push; the others go back to the limbo in one push.
//! Only then do the values drop (or go to `on_evict`): no user code runs
//! while entries are out of every list (an insert that finds the pool
//! full waits for such a walk, see `Limbo::wait_for_walks`).

use core::panic::AssertUnwindSafe;
use std::panic;

use crossbeam_utils::CachePadded;

use super::super::entry::{self, Entry};
use super::super::{Handle, HandlePool, NIL};
use super::bag::{self, Pushed, BAG};
use crate::engine::free_list::FreeList;
use crate::sync::{AtomicU64, AtomicUsize, Ordering};

/// An empty stack: no entry, top [`NIL`].
const EMPTY: u64 = NIL as u64;

/// The entry count of a stack word.
#[inline]
fn count(word: u64) -> u32 {
    (word >> 32) as u32
}

/// The top index of a stack word.
#[inline]
fn top(word: u64) -> u32 {
    word as u32
}

/// The limbo stack (see the module docs).
pub(crate) struct Limbo {
    head: CachePadded<AtomicU64>,
    /// Grace periods between their take of the stack and their pushes
    /// (entries out of the stack and not yet free): an insert that finds
    /// the stack empty while one is under way waits for its pushes.
    walking: AtomicUsize,
}

impl Limbo {
    pub(crate) fn new() -> Self {
        Self {
            head: CachePadded::new(AtomicU64::new(EMPTY)),
            walking: AtomicUsize::new(0),
        }
    }

    /// Whether a grace period holds taken entries now (a hint). Read after
    /// the stack (Acquire, in `len`) and the bags: a walk that emptied them
    /// counted itself first.
    pub(crate) fn walking(&self) -> bool {
        // Acquire: pairs with the Release decrement after a walk's pushes.
        self.walking.load(Ordering::Acquire) != 0
    }

    /// Waits until no grace period holds taken entries: each walk does no
    /// user code and no waiting between its take and its pushes.
    pub(crate) fn wait_for_walks(&self) {
        while self.walking() {
            crate::sync::yield_now();
        }
    }

    /// How many entries await a grace period (a snapshot: a grace period
    /// in progress holds the ones it looks at).
    pub(crate) fn len(&self) -> usize {
        // Acquire: a snapshot, but one that a walk's take emptied is seen
        // with that walk's count in `walking` (an insert that finds the
        // stack empty waits for the walk's pushes; see `has_entries`).
        count(self.head.load(Ordering::Acquire)) as usize
    }

    /// Pushes the chain `top ..= last` of `n` entries, linked through
    /// `links` from `top` down to `last`; returns the count after.
    fn push_chain(&self, links: &FreeList, top_index: u32, last: u32, n: u32) -> u32 {
        // Relaxed: only the value to link below; the CAS decides.
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // The free list's end marker, never the stack's `NIL`: a stale
            // walk of the free list may read any link (see `FreeList`).
            let below = match top(head) {
                NIL => links.layout().nil(),
                index => index,
            };
            links.set_link(last, below);
            let after = count(head) + n;
            let new = u64::from(after) << 32 | u64::from(top_index);
            // Release: publishes the links, the entries' stamps and their
            // removals (and values) to the grace period that takes them
            // (Acquire swap in `take`).
            match self
                .head
                .compare_exchange_weak(head, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return after,
                Err(actual) => head = actual,
            }
        }
    }

    /// Starts a walk: until the guard drops, `walking` says that entries
    /// out of the stack (or out of the threads' bags) are on their way
    /// back.
    fn begin_walk(&self) -> Walk<'_> {
        // Relaxed: ordered before the take (and the bags' claims) by their
        // Release halves.
        self.walking.fetch_add(1, Ordering::Relaxed);
        Walk(self)
    }

    /// Takes the whole stack, inside a walk: its top index and count.
    /// `end` is the free list's end marker, which ends the chain (and is
    /// the answer for an empty stack).
    fn take(&self, _walk: &Walk<'_>, end: u32) -> (u32, u32) {
        // A look first: an empty stack costs no write. Acquire: as in
        // `len`.
        if top(self.head.load(Ordering::Acquire)) == NIL {
            return (end, 0);
        }
        // AcqRel: Acquire pairs with the pushes' Release CAS (the links,
        // the stamps, the removals before them); Release publishes the
        // walk's count to an insert that reads the empty stack.
        let word = self.head.swap(EMPTY, Ordering::AcqRel);
        match top(word) {
            NIL => (end, 0),
            first => (first, count(word)),
        }
    }

    /// Ends a walk that [`begin_walk`](Self::begin_walk) counted, after its
    /// pushes.
    fn walked(&self) {
        // Release: the walk's pushes happen before an insert that reads
        // the count back to 0 (Acquire in `walking`).
        self.walking.fetch_sub(1, Ordering::Release);
    }
}

/// A walk of a taken chain: ends it (see [`Limbo::walked`]) when dropped.
struct Walk<'a>(&'a Limbo);

impl Drop for Walk<'_> {
    fn drop(&mut self) {
        self.0.walked();
    }
}

impl core::fmt::Debug for Limbo {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Limbo").field("len", &self.len()).finish()
    }
}

impl<T, K> HandlePool<T, K> {
    /// The free list whose links chain the limbo.
    #[inline]
    fn links(&self) -> &FreeList {
        self.indices.pool().state().free_list()
    }

    /// The end of a chain linked through the free list's links: the free
    /// list's own end marker, so that every link holds an index or it (a
    /// stale walk of the free list may read any link, and must stop at
    /// anything that is not an index).
    #[inline]
    fn end(&self) -> u32 {
        self.links().layout().nil()
    }

    /// Puts entry `index`, owned by this thread, whose occupancy a `SeqCst`
    /// read-modify-write just ended in a pool that has had read sections
    /// ([`Domain::used`](super::domain::Domain::used)), into the limbo:
    /// its value is dropped (or, with `evicted`, handed to `on_evict`) and
    /// the entry reused once no section that could see it is open.
    /// Returns whether the limbo has grown to its batch: the caller then
    /// runs a grace period.
    pub(in crate::handle) fn defer(&self, index: u32, evicted: bool) -> bool {
        let entry = &self.entries[index as usize];
        let domain = &self.sections.domain;
        let tag = domain.tag();
        // Relaxed: published by the bag's Release store of its length, or
        // the limbo push's Release CAS.
        entry
            .stamp
            .store(tag << 1 | u64::from(evicted), Ordering::Relaxed);
        let links = self.links();
        if let Some((reader, memoized)) = domain.record() {
            match reader.bag.push(index, || domain.light(memoized)) {
                Pushed::Kept => return false,
                Pushed::Full(full) => {
                    domain.advance();
                    for pair in full.windows(2) {
                        links.set_link(pair[0], pair[1]);
                    }
                    let after =
                        self.sections
                            .limbo
                            .push_chain(links, full[0], full[BAG - 1], BAG as u32);
                    return self.batch_reached(after);
                }
                Pushed::Refused => {}
            }
        }
        let after = self.sections.limbo.push_chain(links, index, index, 1);
        self.batch_reached(after)
    }

    /// Whether a limbo of `len` entries calls for a grace period.
    #[inline]
    fn batch_reached(&self, len: u32) -> bool {
        // Relaxed: a hint (a racing grace period moves it; any value is
        // safe, some only slower).
        len >= self.sections.trigger.load(Ordering::Relaxed)
    }

    /// Links `index` on top of the chain `(first, last, n)`.
    fn link_on(&self, chain: &mut (u32, u32, u32), index: u32) {
        self.links().set_link(index, chain.0);
        if chain.0 == self.end() {
            chain.1 = index;
        }
        chain.0 = index;
        chain.2 += 1;
    }

    /// Takes the limbo and joins `chain` (entries from the bags) on top:
    /// the chain to walk.
    fn take_all(&self, walk: &Walk<'_>, mut chain: (u32, u32, u32)) -> (u32, u32) {
        let (first, n) = self.sections.limbo.take(walk, self.end());
        if chain.0 == self.end() {
            return (first, n);
        }
        self.links().set_link(chain.1, first);
        chain.2 += n;
        (chain.0, chain.2)
    }

    /// Frees every entry that awaits a grace period now, through `&mut
    /// self`: no section can be open (sections borrow the pool), so no
    /// grace period is needed.
    ///
    /// # Panics
    ///
    /// If a value's drop or `on_evict` panics: after every entry is free
    /// (the first panic goes on, the others are dropped).
    pub(in crate::handle) fn reclaim_exclusive(&mut self) {
        let walk = self.sections.limbo.begin_walk();
        let mut bags = (self.end(), self.end(), 0);
        for reader in self.sections.domain.records() {
            reader
                .bag
                .drain_exclusive(|index| self.link_on(&mut bags, index));
        }
        let (first, n) = self.take_all(&walk, bags);
        self.free_taken(walk, first, n, u64::MAX);
    }

    /// Whether any thread's bag holds entries (a look at every record).
    fn bags_hold_entries(&self) -> bool {
        self.sections.domain.used()
            && self
                .sections
                .domain
                .records()
                .any(|reader| reader.bag.len() != 0)
    }

    /// Whether entries await a grace period (in the limbo or a bag), or a
    /// grace period holds some: an insert that found no free entry then
    /// runs a grace period, or waits for the walk in flight.
    pub(in crate::handle) fn may_free_entries(&self) -> bool {
        let limbo = &self.sections.limbo;
        // The limbo and the bags before `walking`: a walk that emptied
        // them counted itself first (see `Limbo::has_entries`).
        limbo.len() != 0 || self.bags_hold_entries() || limbo.walking()
    }

    /// Frees the entries of the chain from `first` (`n` of them, taken
    /// from the limbo by this thread) whose tags are at most `limit`, and
    /// puts the others back: see the module docs. Every entry is back (in
    /// the free list or the limbo) before any user code runs: the values'
    /// drops and `on_evict` come last. Returns how many it freed.
    ///
    /// # Panics
    ///
    /// If a value's drop or `on_evict` panics: after every value is handed
    /// over (the first panic goes on, the others are dropped).
    fn free_taken(&self, walk: Walk<'_>, first: u32, n: u32, limit: u64) -> usize {
        // `walk` ends after the pushes, or if anything below unwinds.
        let links = self.links();
        let end = self.end();
        let (mut freed, mut freed_last, mut freed_n) = (end, end, 0u32);
        let (mut kept, mut kept_last, mut kept_n) = (end, end, 0u32);
        let mut freed_plain = 0;
        // The values to hand over once every entry is back: none for a type
        // with no drop (and nothing evicted for `on_evict`), so that the
        // common walk allocates nothing.
        let mut values = Vec::new();
        let keep_values = core::mem::needs_drop::<T>() || self.on_evict.is_some();
        if keep_values {
            values.reserve_exact(n as usize);
        }
        let mut index = first;
        while index != end {
            // The link of an entry in a taken chain is this thread's.
            let next = links.link_of(index);
            let entry: &Entry<T> = &self.entries[index as usize];
            // Relaxed: written by this thread or published by the limbo's
            // CAS, which this thread's take (Acquire) read.
            let stamp = entry.stamp.load(Ordering::Relaxed);
            // Loom-only fault injection: a grace period that frees every
            // entry it looks at, whatever the open sections.
            if stamp >> 1 > limit && !cfg!(all(loom, tagpool_loom_grace_keeps_nothing)) {
                links.set_link(index, kept);
                if kept == end {
                    kept_last = index;
                }
                kept = index;
                kept_n += 1;
                index = next;
                continue;
            }
            // Relaxed: this thread owns the entry (see below); its word was
            // published with it.
            let ended = entry::generation(entry.state.load(Ordering::Relaxed));
            let key = Handle::new(index, entry::generation_before(ended));
            // SAFETY: the entry came out of the limbo through this thread's
            // take, and no section that could see its value is open (the
            // caller's grace period, or `&mut self`): this thread owns it.
            let value = unsafe { entry.take() };
            if keep_values {
                values.push((key, stamp & 1 != 0, value));
            } else {
                // No drop to run (`needs_drop` said so).
                debug_assert!(!core::mem::needs_drop::<Option<T>>());
                core::mem::forget(value);
                freed_plain += 1;
            }
            if entry.retired() {
                // Its last generation ended: it never goes back.
                self.retire();
            } else {
                links.set_link(index, freed);
                if freed == end {
                    freed_last = index;
                }
                freed = index;
                freed_n += 1;
            }
            index = next;
        }
        if kept != end {
            self.sections
                .limbo
                .push_chain(links, kept, kept_last, kept_n);
        }
        if freed != end {
            // Release (the push's CAS): the values' removal from the cells
            // happens before the next fill of each entry.
            let _ = links.push_linked(freed, freed_last, freed_n, false);
        }
        // The next batch counts from what stays (`kept_n` went back).
        // Relaxed: a hint, see `batch_reached`.
        self.sections.trigger.store(
            self.sections.limbo.len() as u32 + self.sections.batch,
            Ordering::Relaxed,
        );
        drop(walk);
        let freed = values.len() + freed_plain;
        let mut caught = None;
        for (key, evicted, value) in values {
            let handed = panic::catch_unwind(AssertUnwindSafe(|| match (&self.on_evict, value) {
                (Some(on_evict), Some(value)) if evicted => on_evict(key, value),
                (_, value) => drop(value),
            }));
            if let Err(payload) = handed {
                match caught {
                    None => caught = Some(payload),
                    // Its drop is user code too: dropped with its own
                    // panic caught (see `unwind.rs`).
                    Some(_) => crate::engine::unwind::discard(Some(payload)),
                }
            }
        }
        if let Some(payload) = caught {
            panic::resume_unwind(payload);
        }
        freed
    }

    /// Runs a grace period now: frees every removed entry that no open read
    /// section (on any thread) may still see, and returns how many: all of
    /// them when no section is open, else those removed before a grace
    /// period that came before each open section began.
    ///
    /// Removals in a pool read through sections ([`read`](HandlePool::read))
    /// make their keys stale at once, but drop their values (or hand them
    /// to `on_evict`) and reuse their entries only once no section that
    /// could see them is open. The pool runs grace periods by itself, in
    /// batches, and whenever an insert finds no other free entry; call
    /// this where the drops should happen now (at the end of a frame,
    /// before a measurement). It never waits: entries that an open section
    /// may still see stay for a later grace period.
    ///
    /// A grace period costs one process-wide memory barrier (Linux's
    /// `membarrier`: a few microseconds while other threads run) and a
    /// look at every thread's section record.
    ///
    /// # Panics
    ///
    /// If a value's drop or `on_evict` panics: after every entry it freed
    /// is back in the pool (the first panic goes on).
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let key = pool.insert(String::from("gone")).unwrap();
    /// let reader = pool.read();
    /// assert!(pool.remove(key), "stale at once");
    /// assert_eq!(pool.stats().awaiting_reuse, 1, "the reader may still see it");
    /// assert_eq!(pool.reclaim(), 0);
    /// drop(reader);
    /// assert_eq!(pool.reclaim(), 1, "dropped now");
    /// assert_eq!(pool.stats().awaiting_reuse, 0);
    /// ```
    pub fn reclaim(&self) -> usize {
        if self.sections.limbo.len() == 0 && !self.bags_hold_entries() {
            return 0;
        }
        let domain = &self.sections.domain;
        let walk = self.sections.limbo.begin_walk();
        let mut token = 0;
        // The bump, the barrier and the look at the readers come before
        // the take, so that the entries stay in the limbo (where inserts
        // see them) for the microseconds of the barrier. An entry pushed
        // after the bump may have been removed after the barrier, where the
        // look does not cover it: its tag is above the bump's epoch, and
        // only entries tagged at or below it go.
        // The bags are claimed between the bump and the barrier (`bag.rs`).
        let epoch = domain.begin_grace(|epoch| {
            token = bag::token(epoch);
            for reader in domain.records() {
                reader.bag.claim(token);
            }
        });
        let limit = domain.oldest_reader().min(epoch);
        let mut bags = (self.end(), self.end(), 0);
        for reader in domain.records() {
            reader
                .bag
                .commit(token, |index| self.link_on(&mut bags, index));
        }
        let (first, n) = self.take_all(&walk, bags);
        if first == self.end() {
            return 0;
        }
        self.free_taken(walk, first, n, limit)
    }
}

/// A pool's drop frees the entries that await a grace period (no section
/// can be open: sections borrow the pool), handing evicted values to
/// `on_evict` as a grace period would; the other values drop with the
/// entries.
impl<T, K> Drop for HandlePool<T, K> {
    fn drop(&mut self) {
        // Loom-only fault injection: a drop that leaves the limbo's values
        // where they are; `Track` reports the evicted ones `on_evict` never
        // got (the others still drop with their entries).
        if cfg!(all(loom, tagpool_loom_drop_forgets_limbo)) {
            return;
        }
        self.reclaim_exclusive();
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Every link a chain of the limbo writes is an index or the free
    /// list's end marker, never the stack's `NIL`: a stale walk of the free
    /// list (a cache refill's batch pop) may read any link, and goes out of
    /// bounds on anything else.
    #[test]
    fn limbo_chains_end_with_the_free_lists_marker() {
        let pool = HandlePool::new(64);
        let keys: Vec<_> = (0..40u32).map(|v| pool.insert(v).unwrap()).collect();
        let section = pool.read();
        for &key in &keys {
            assert!(pool.remove(key));
        }
        // The section keeps them all: the grace period pushes its kept
        // chain back.
        assert_eq!(pool.reclaim(), 0);
        let links = pool.links();
        let end = pool.end();
        assert_ne!(end, NIL);
        let head = pool.sections.limbo.head.load(Ordering::Relaxed);
        let (mut index, mut seen) = (top(head), 0);
        while index != end {
            assert!((index as usize) < pool.capacity(), "link {index}");
            index = links.link_of(index);
            seen += 1;
        }
        assert_eq!(seen, count(head));
        drop(section);
        assert_eq!(pool.reclaim(), 40);
    }
}
