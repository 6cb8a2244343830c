//! Entries awaiting a grace period: removed (their keys stale), their
//! values still in place for the sections that may read them, their
//! indices out of every free list. The limbo is a lock-free stack of them,
//! and [`HandlePool::reclaim`] frees those no open section can see.
//!
//! # The stack
//!
//! One word: the number of entries (high 32 bits) and the top index (low
//! 32, [`NIL`] when empty). Links go through the index pool's free-list
//! links, which are the owner's to use while an index is out of that list
//! (a speculative pop there that reads one fails its tagged CAS). A
//! removal pushes its entry (one CAS); a grace period takes the whole
//! stack at once (one swap), so no pop ever reads a link that another
//! thread could change, and the stack needs no ABA tag: a push only needs
//! the top it links below to still be the top.
//!
//! While in the limbo an entry's `stamp` holds its grace period's epoch
//! (the `X` of the first grace period that took it, 0 before), shifted
//! left by one, and in bit 0 whether the value was evicted (it then goes
//! to `on_evict`, not to its drop).

use core::panic::AssertUnwindSafe;
use std::panic;

use crossbeam_utils::CachePadded;

use super::super::entry::{self, Entry};
use super::super::{Handle, HandlePool, NIL};
use crate::engine::free_list::FreeList;
use crate::sync::{AtomicU64, Ordering};

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
}

impl Limbo {
    pub(crate) fn new() -> Self {
        Self {
            head: CachePadded::new(AtomicU64::new(EMPTY)),
        }
    }

    /// How many entries await a grace period (a snapshot: a grace period
    /// in progress holds the ones it looks at).
    pub(crate) fn len(&self) -> usize {
        // Relaxed: a snapshot.
        count(self.head.load(Ordering::Relaxed)) as usize
    }

    /// Pushes the chain `top ..= last` of `n` entries, linked through
    /// `links` from `top` down to `last`; returns the count after.
    fn push_chain(&self, links: &FreeList, top_index: u32, last: u32, n: u32) -> u32 {
        // Relaxed: only the value to link below; the CAS decides.
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            links.set_link(last, top(head));
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

    /// Takes the whole stack: its top index and count.
    fn take(&self) -> (u32, u32) {
        // Relaxed first: an empty stack costs no write.
        if top(self.head.load(Ordering::Relaxed)) == NIL {
            return (NIL, 0);
        }
        // Acquire: pairs with the pushes' Release CAS (the links, the
        // stamps, the removals before them).
        let word = self.head.swap(EMPTY, Ordering::Acquire);
        (top(word), count(word))
    }
}

impl core::fmt::Debug for Limbo {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Limbo").field("len", &self.len()).finish()
    }
}

/// What became of the entries a grace period looked at.
#[derive(Debug)]
struct Sorted {
    /// The entries no open section can see, linked from this index.
    free: u32,
    /// Their number.
    freed: usize,
}

impl<T, K> HandlePool<T, K> {
    /// The free list whose links chain the limbo.
    #[inline]
    fn links(&self) -> &FreeList {
        self.indices.pool().state().free_list()
    }

    /// Puts entry `index`, owned by this thread, whose occupancy a `SeqCst`
    /// read-modify-write just ended in a pool that has had read sections
    /// ([`Domain::used`](super::domain::Domain::used)), into the limbo:
    /// its value is dropped (or, with `evicted`, handed to `on_evict`) and
    /// the entry reused once no section that could see it is open.
    /// Returns whether the limbo has grown to its batch: the caller (a
    /// remove, which knows the key type) then runs a grace period.
    pub(in crate::handle) fn defer(&self, index: u32, evicted: bool) -> bool {
        let entry = &self.entries[index as usize];
        // Relaxed: published by the push's Release CAS.
        entry.stamp.store(u64::from(evicted), Ordering::Relaxed);
        let after = self
            .sections
            .limbo
            .push_chain(self.links(), index, index, 1);
        after >= self.sections.batch
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
        let (first, _) = self.sections.limbo.take();
        // The taken chain ends at `NIL` (its bottom entry was pushed onto
        // an empty stack).
        self.free_chain(Sorted {
            free: first,
            freed: 0,
        });
    }

    /// Takes out the value of each entry of `sorted.free`'s chain, gives
    /// the entry back, then drops the value or hands it to `on_evict`,
    /// panics caught until every entry is back.
    fn free_chain(&self, sorted: Sorted) -> usize {
        let links = self.links();
        let mut caught = None;
        let mut freed = 0;
        let mut index = sorted.free;
        while index != NIL {
            // Read before the entry goes back (a push rewrites its link).
            let next = links.link_of(index);
            let entry: &Entry<T> = &self.entries[index as usize];
            // Relaxed: written by this thread or published by the limbo's
            // CAS, which this thread's take (Acquire) read.
            let evicted = entry.stamp.load(Ordering::Relaxed) & 1 != 0;
            // Relaxed: as above (the removal's RMW, read by the take).
            let state = entry.state.load(Ordering::Relaxed);
            let ended = entry::generation(state);
            let old = Handle::new(index, entry::generation_before(ended));
            // SAFETY: the entry came out of the limbo through this thread's
            // take, and no section that could see its value is open (the
            // caller's grace period, or `&mut self`): this thread owns it.
            let value = unsafe { entry.take() };
            let woke = self.give_back(index);
            crate::engine::unwind::discard(woke);
            let handed = panic::catch_unwind(AssertUnwindSafe(|| match (&self.on_evict, value) {
                (Some(on_evict), Some(value)) if evicted => on_evict(old, value),
                (_, value) => drop(value),
            }));
            if let Err(payload) = handed {
                caught.get_or_insert(payload);
            }
            freed += 1;
            index = next;
        }
        debug_assert!(sorted.freed == 0 || sorted.freed == freed);
        if let Some(payload) = caught {
            panic::resume_unwind(payload);
        }
        freed
    }

    /// Sorts the taken chain from `first` into the entries that no open
    /// section can see (returned) and the others (pushed back to the
    /// limbo, tagged).
    fn sort(&self, first: u32, epoch: u64, oldest: u64) -> Sorted {
        let links = self.links();
        let (mut free, mut freed) = (NIL, 0);
        let (mut kept, mut kept_last, mut kept_n) = (NIL, NIL, 0);
        let mut index = first;
        while index != NIL {
            let next = links.link_of(index);
            let entry = &self.entries[index as usize];
            // Relaxed: see `free_chain`.
            let stamp = entry.stamp.load(Ordering::Relaxed);
            let mut tag = stamp >> 1;
            if tag == 0 {
                // First looked at by this grace period: removed before its
                // bump (the take came first).
                tag = epoch;
                // Relaxed: published by the push back, if any.
                entry
                    .stamp
                    .store(epoch << 1 | (stamp & 1), Ordering::Relaxed);
            }
            // Loom-only fault injection: a grace period that frees every
            // entry it looks at, whatever the open sections.
            if tag <= oldest || cfg!(all(loom, tagpool_loom_grace_keeps_nothing)) {
                links.set_link(index, free);
                free = index;
                freed += 1;
            } else {
                links.set_link(index, kept);
                if kept == NIL {
                    kept_last = index;
                }
                kept = index;
                kept_n += 1;
            }
            index = next;
        }
        if kept != NIL {
            self.sections
                .limbo
                .push_chain(links, kept, kept_last, kept_n);
        }
        Sorted { free, freed }
    }
}

impl<T, K> HandlePool<T, K> {
    /// Runs a grace period now: frees every entry removed before every
    /// open read section began (on any thread), and returns how many.
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
        let (first, _) = self.sections.limbo.take();
        if first == NIL {
            return 0;
        }
        let domain = &self.sections.domain;
        let epoch = domain.begin_grace();
        let oldest = domain.oldest_reader();
        let sorted = self.sort(first, epoch, oldest);
        self.free_chain(sorted)
    }
}

/// A pool's drop frees the entries that await a grace period (no section
/// can be open: sections borrow the pool), handing evicted values to
/// `on_evict` as a grace period would; the other values drop with the
/// entries.
impl<T, K> Drop for HandlePool<T, K> {
    fn drop(&mut self) {
        self.reclaim_exclusive();
    }
}
