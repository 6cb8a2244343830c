//! The free list: a Treiber stack of `u32` slot indices with a tagged head.
//!
//! This is the only module that knows about ABA. The head is one `AtomicU64`
//! that packs, from the least significant bit up:
//!
//! | field     | bits                 | meaning                                         |
//! |-----------|----------------------|-------------------------------------------------|
//! | `index`   | `b`                  | the slot on top of the stack, or `NIL`          |
//! | `free`    | `b` if `b <= 16`, else 0 | how many slots the stack holds              |
//! | `waiters` | 1                    | a thread may be parked waiting for a slot       |
//! | `tag`     | the rest: 31 to 61   | bumped by every successful compare-exchange     |
//!
//! `b` is the fewest bits that hold `capacity` (so `NIL = 2^b - 1` is never a
//! valid index): 1 to 32. Packing the free count costs tag bits, and buys
//! exact [`Stats`](crate::Stats) (in use, available) without a second atomic
//! read-modify-write when a pool has no per-thread caches. Up to `b = 16`
//! (65,535 slots) the count fits beside a tag of 31 bits or more; above, it
//! moves out of the head to a counter beside it, updated after each
//! successful CAS (once per batch for a pool with caches), which keeps the
//! tag at 31 bits up to `b = 32`: the largest capacity,
//! [`MAX_CAPACITY`](crate::MAX_CAPACITY) = `2^32 - 2`, has a 31-bit tag, a
//! capacity of 1024 (`b = 11`) a 41-bit one, a million (`b = 20`) a 43-bit
//! one. Packing the waiter flag lets a release learn, from the value its own
//! CAS replaced, whether anyone waits: no extra load at all when nobody does.
//!
//! The closed flag ([`Pool::close`](crate::Pool::close)) sits beside the
//! word, on the same cache line: a pop reads it after each load of the head,
//! and `close` sets it and then bumps the tag, so a pop that read the head
//! before the close fails its CAS and reads the flag again (see
//! [`FreeList::close`]).
//!
//! Links live in segments ([`Segmented`]): the first made with the list,
//! the others added by [`FreeList::grow`] as the pool grows.

use crossbeam_utils::CachePadded;

use crate::engine::segment::{Claim, Geometry, Growth, Segmented, Unpublished};
use crate::sync::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Mutex, Ordering};

mod bound;
mod layout;
mod waiters;

pub(crate) use self::layout::{Layout, MAX_INDEX_BITS};

/// A slot index popped from the list, with the number of slots left free.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Popped {
    pub(crate) index: u32,
    pub(crate) free: u32,
}

/// How many indices a batch pop took, with the number of slots left free.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Batch {
    pub(crate) count: u32,
    pub(crate) free: u32,
}

/// What a push saw.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pushed {
    /// The waiter flag was set in the head this push replaced.
    pub(crate) waiters: bool,
    /// The head word this push wrote.
    pub(crate) head: u64,
}

/// Whether a would-be waiter may park.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Register {
    /// The list was empty and the waiter flag is now set by this thread's CAS.
    Parked,
    /// The list holds a slot: try to pop instead of parking.
    Available,
    /// The pool is closed: stop waiting.
    Closed,
}

/// The head word and what sits on its cache line.
#[derive(Debug)]
struct Head {
    /// The packed word (see the module docs).
    word: AtomicU64,
    /// [`Pool::close`](crate::Pool::close) was called: pops fail. Written
    /// once, before a tag bump of `word` (see [`FreeList::close`]).
    closed: AtomicBool,
    /// The free count when the layout does not pack it in `word`: added to
    /// after each push, taken from after each pop, so it is exact whenever
    /// no push or pop is between its CAS and its count. Wrapping: between
    /// a pop's CAS and its count, a push of the same slot may count first.
    free: AtomicU64,
    /// The movable bound's credit (see `bound.rs`): negative while slots
    /// in service are owed, which the pushes check when the waiter flag is
    /// set. On the head's line: a push that checks it has the line already.
    credit: AtomicI64,
    /// How many slots are withdrawn (see `bound.rs`): read by every pop's
    /// peak record (`in_use`), so on the line the pop has just written.
    withdrawn: AtomicU32,
}

/// A lock-free stack of slot indices `0..capacity`, of which the first
/// [`allocated`](FreeList::allocated) exist (see [`FreeList::grow`]).
///
/// # Invariants
///
/// - Every allocated index is either on the stack exactly once or owned
///   by exactly one party outside it (a guard, or a thread between a pop and
///   a push). Ownership changes only through a successful CAS on the head.
/// - The free count (packed, or `Head::free` at quiescence) equals the
///   number of indices on the stack.
/// - Every successful CAS on the head bumps the tag.
/// - Every link on the stack, or written by a push, holds `NIL` or an
///   allocated index. A held slot's link may hold any `u32` (a
///   [`SharedPoolGuard`](crate::SharedPoolGuard)'s count lives there), so a
///   pop or a batch walk that reads a link after another thread took the
///   slot may read anything; its CAS then fails on the tag.
#[derive(Debug)]
pub(crate) struct FreeList {
    /// The packed head word, the closed flag and the outside free count.
    /// Padded so that the value array and the pool's counters never share
    /// its cache line.
    head: CachePadded<Head>,
    /// `links[i]` is the index below `i` on the stack while `i` is on it;
    /// meaningless otherwise. Links live apart from values and as long as the
    /// list, so the speculative link read in `pop` is always an atomic read
    /// of live memory, even when the slot was popped meanwhile.
    links: Segmented<AtomicU32>,
    /// How many segments of links (and of the pool's values) exist.
    growth: Growth,
    layout: Layout,
    /// The slots withdrawn from service by the movable bound (see
    /// `bound.rs`); their count is on the head's line.
    withdrawn: Mutex<Vec<u32>>,
}

impl FreeList {
    /// A list of `geometry`'s capacity whose first segment is allocated and
    /// on the stack, `0` on top.
    pub(crate) fn new(geometry: Geometry) -> Self {
        let layout = Layout::for_capacity(geometry.capacity());
        let first = geometry.first();
        let links = Segmented::new(geometry, |i| {
            AtomicU32::new(if i + 1 == first { layout.nil() } else { i + 1 })
        });
        let free = if layout.counts_in_head() { 0 } else { first };
        Self {
            head: CachePadded::new(Head {
                word: AtomicU64::new(layout.pack(0, false, first, 0)),
                closed: AtomicBool::new(false),
                free: AtomicU64::new(u64::from(free)),
                // Room for the segments not allocated yet (see `bound.rs`).
                credit: AtomicI64::new(i64::from(geometry.capacity() - first)),
                withdrawn: AtomicU32::new(0),
            }),
            links,
            growth: Growth::new(geometry.segments()),
            layout,
            withdrawn: Mutex::new(Vec::new()),
        }
    }

    /// A list of `capacity` slots, all allocated and on the stack.
    #[cfg(test)]
    pub(crate) fn full(capacity: u32) -> Self {
        Self::new(Geometry::new(capacity, capacity))
    }

    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }

    /// The link of slot `index`, which must be allocated and visible (the
    /// caller owns it, or read it from the head: see [`Segmented::get`]).
    #[inline]
    fn link(&self, index: u32) -> &AtomicU32 {
        debug_assert!(index < self.capacity());
        self.links.get(index)
    }

    /// Links the owned index `index` above `next`, for a chain the caller
    /// builds out of slots it holds (a scope) and pushes later with
    /// [`push_linked`](Self::push_linked).
    #[inline]
    pub(crate) fn set_link(&self, index: u32, next: u32) {
        // Relaxed: the caller owns `index`; the push's Release CAS
        // publishes the link.
        self.link(index).store(next, Ordering::Relaxed);
    }

    /// The link word of the held index `index`, which no chain uses while
    /// the slot is held: a [`SharedPoolGuard`](crate::SharedPoolGuard)'s
    /// count lives there. A pop (or a batch pop's walk) that read `index` at
    /// the head before it was taken may still load it; its CAS then fails
    /// on the head's tag, as for any link that changed under it (see
    /// `Layout::popped`).
    #[inline]
    pub(crate) fn held_link(&self, index: u32) -> &AtomicU32 {
        self.link(index)
    }

    /// The link below the owned index `index` in a chain the caller built.
    #[inline]
    pub(crate) fn link_of(&self, index: u32) -> u32 {
        // Relaxed: the caller wrote it (or the growth that published the
        // segment did, before the caller's Acquire took the slots).
        self.link(index).load(Ordering::Relaxed)
    }

    /// The slots of the first segment: the capacity, for a pool that
    /// never grows.
    pub(crate) fn first_segment_len(&self) -> u32 {
        self.links.geometry().first()
    }

    /// The number of slots the list can ever hold: the pool's capacity.
    #[inline]
    pub(crate) fn capacity(&self) -> u32 {
        self.links.geometry().capacity()
    }

    /// How many slots exist (a snapshot): the capacity, unless the pool is
    /// still growing.
    #[inline]
    pub(crate) fn allocated(&self) -> u32 {
        let geometry = self.links.geometry();
        if geometry.segments() == 1 {
            return geometry.first();
        }
        geometry.end(self.growth.published() - 1)
    }

    /// How many slots are held outside the list (by guards or caches) when
    /// it holds `free`: what the peak statistic records.
    #[inline]
    pub(crate) fn in_use(&self, free: u32) -> u32 {
        self.allocated()
            .saturating_sub(free)
            .saturating_sub(self.withdrawn_count())
    }

    /// Counts `n` popped slots outside the head, if the layout keeps the
    /// count there; returns the count left, given the head just written.
    #[inline]
    fn count_popped(&self, new: u64, n: u32) -> u32 {
        if self.layout.counts_in_head() {
            return self.layout.free(new);
        }
        // Relaxed: a statistic; the head's CAS orders the slots themselves.
        let before = self.head.free.fetch_sub(u64::from(n), Ordering::Relaxed);
        clamp_count(before.wrapping_sub(u64::from(n)))
    }

    /// Counts `n` pushed slots outside the head, if the layout keeps the
    /// count there.
    #[inline]
    fn count_pushed(&self, n: u32) {
        if !self.layout.counts_in_head() {
            // Relaxed: a statistic, as in `count_popped`.
            self.head.free.fetch_add(u64::from(n), Ordering::Relaxed);
        }
    }

    /// Whether a pop of `word` must fail: the stack is empty or the pool is
    /// closed. `word` was just loaded (Acquire) or returned by a failed CAS.
    #[inline]
    fn refuses_pop(&self, word: u64) -> bool {
        // Relaxed: `close` sets the flag before its tag bump, and a pop
        // whose CAS can succeed read a head at or after that bump (which
        // synchronizes with it), so it sees the flag; see `close`.
        self.layout.is_empty(word) || self.head.closed.load(Ordering::Relaxed)
    }

    /// Takes the index on top of the stack, or `None` when it is empty or
    /// the pool is closed.
    #[inline]
    pub(crate) fn pop(&self) -> Option<Popped> {
        let layout = self.layout;
        // Acquire: pairs with the Release half of the CAS in `push` (and of
        // every later CAS in the head's release sequence), so `links[index]`
        // and the slot's value, written before that push, are visible.
        let mut head = self.head.word.load(Ordering::Acquire);
        let first = head;
        loop {
            if self.refuses_pop(head) {
                return None;
            }
            let index = layout.index(head);
            // Relaxed: ordered by the Acquire load (or failed CAS) above. It
            // may read a link being rewritten by a thread that popped `index`
            // meanwhile; then the head has changed and the CAS below fails.
            let next = self.link(index).load(Ordering::Relaxed);
            let new = layout.frozen(layout.popped(head, next), first);
            // Acquire on success: takes ownership of the slot the pushing
            // thread released. Acquire on failure: the reloaded head is
            // used to read `next` again.
            match self.head.word.compare_exchange_weak(
                head,
                new,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
                    return Some(Popped {
                        index,
                        free: self.count_popped(new, 1),
                    });
                }
                Err(actual) => {
                    cas_stats::note(cas_stats::POP);
                    head = actual;
                }
            }
        }
    }

    /// Returns `index` to the stack.
    ///
    /// The caller must own `index` (it popped it and has not pushed it since).
    #[inline]
    pub(crate) fn push(&self, index: u32) -> Pushed {
        let layout = self.layout;
        // Below the capacity: a growth pushes its slots before it publishes
        // them in `allocated`.
        debug_assert!(index < self.capacity());
        // Acquire: with the flag set, orders a lowering's debt before the
        // check below (see `bound.rs`); otherwise only the value to link
        // below `index`, and the CAS decides.
        let mut head = self.head.word.load(Ordering::Acquire);
        loop {
            if layout.waiters(head) && self.in_debt() && self.withdraw(index) {
                return Pushed {
                    waiters: false,
                    head,
                };
            }
            // Relaxed: published by the Release CAS below.
            self.link(index)
                .store(layout.index(head), Ordering::Relaxed);
            let new = layout.pushed(head, index);
            // Release: publishes `links[index]` and the slot's value to the
            // thread that pops `index` (its Acquire load or CAS). Acquire:
            // pairs with the Release CAS in `register_waiter`, a second edge
            // to a waiter's listener beside event-listener's own fences (see
            // "What orders a waiter's listener" in `engine/wait`).
            // Acquire on failure: as the load above.
            match self
                .head
                .word
                .compare_exchange_weak(head, new, PUSH_SUCCESS, Ordering::Acquire)
            {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
                    self.count_pushed(1);
                    return Pushed {
                        waiters: layout.waiters(head),
                        head: new,
                    };
                }
                Err(actual) => {
                    cas_stats::note(cas_stats::PUSH);
                    head = actual;
                }
            }
        }
    }

    /// [`pop`](Self::pop) for a caller that no other operation on this list
    /// can race: a load and a store of the head, no CAS.
    ///
    /// # Safety
    ///
    /// No other thread operates on the list (pops, pushes, closes, growth,
    /// waiting) until this returns, and whatever handed this thread the
    /// list ordered the other threads' earlier operations before this one
    /// (a `&mut` borrow of the pool that owns it does both). The head's tag
    /// is bumped as a CAS would, so later concurrent pops stay ABA-safe.
    #[inline]
    pub(crate) unsafe fn pop_exclusive(&self) -> Option<Popped> {
        let layout = self.layout;
        // Relaxed: no other thread touches the head now; what they did
        // before is ordered by the caller's exclusivity.
        let head = self.head.word.load(Ordering::Relaxed);
        if self.refuses_pop(head) {
            return None;
        }
        let index = layout.index(head);
        // Relaxed: as above.
        let next = self.link(index).load(Ordering::Relaxed);
        let new = layout.popped(head, next);
        // Relaxed: as above; the end of the exclusivity publishes it.
        self.head.word.store(new, Ordering::Relaxed);
        Some(Popped {
            index,
            free: self.count_popped(new, 1),
        })
    }

    /// Takes up to `out.len()` indices off the top of the stack in one CAS,
    /// writing them to `out` top first; returns how many, or `None` when the
    /// stack is empty or the pool is closed. Takes one only while the
    /// waiter flag is set, so that a thread refilling its cache does not
    /// hoard slots that waiters need.
    ///
    /// The walk down the links is speculative, like the one-link read in
    /// [`pop`](Self::pop): a link on the stack is written only by the thread
    /// that pushes it, before its push, and every change to the stack is a
    /// successful CAS that bumps the tag. So if the head still holds the
    /// word read before the walk, no CAS happened during it, and every link
    /// the walk read was on the stack and unchanged the whole time. If the
    /// head moved, the walk may have read garbage: `NIL`, an index that
    /// was allocated when it was written, possibly in a segment this thread
    /// does not see yet, or a shared guard's count in a held slot's link,
    /// maybe past the capacity (a lookup past the allocated segments ends
    /// the walk early); then the CAS fails, or the walk starts over.
    pub(crate) fn pop_batch(&self, out: &mut [u32]) -> Option<Batch> {
        self.pop_batch_if(out, false)
    }

    /// [`pop_batch`](Self::pop_batch), which with `even_closed` also pops
    /// from a closed pool (for trimming and draining, which give every slot
    /// back).
    pub(crate) fn pop_batch_if(&self, out: &mut [u32], even_closed: bool) -> Option<Batch> {
        let layout = self.layout;
        debug_assert!(!out.is_empty() && out.len() <= u32::MAX as usize);
        // Acquire: as in `pop`.
        let mut head = self.head.word.load(Ordering::Acquire);
        loop {
            if layout.is_empty(head) || (!even_closed && self.refuses_pop(head)) {
                return None;
            }
            let top = layout.index(head);
            let want = if layout.waiters(head) {
                1
            } else if layout.counts_in_head() {
                // A walk read before the CAS may be stale: never build a
                // head with more slots taken than the word says it holds.
                (out.len() as u32).min(layout.free(head))
            } else {
                out.len() as u32
            };
            let mut n = 0u32;
            let mut index = top;
            let below = loop {
                debug_assert!(index != layout.nil());
                // In bounds: `n < want <= out.len()`.
                out[n as usize] = index;
                n += 1;
                // Loom-only fault injection: a walk that reads every link
                // with `get`, which panics on a segment this thread does
                // not see yet (a stale walk can reach one).
                #[cfg(all(loom, tagpool_loom_walk_get))]
                let link = Some(self.links.get(index));
                #[cfg(not(all(loom, tagpool_loom_walk_get)))]
                let link = self.links.try_get(index);
                let link = match link {
                    Some(link) => link,
                    // Garbage from a stale walk (see above): start over.
                    None => break None,
                };
                // Relaxed: ordered by the Acquire load (or failed CAS) of
                // the head; see the method docs for why a stale read is
                // caught.
                let next = link.load(Ordering::Relaxed);
                if n == want || next == layout.nil() {
                    break Some(next);
                }
                index = next;
            };
            let below = match below {
                Some(below) => below,
                None => {
                    // Rare: let the thread that moved the head (and grew
                    // the segment) go on, rather than spin on a head that
                    // may still read stale (under loom, a spin without a
                    // yield never ends).
                    crate::sync::yield_now();
                    // Acquire: as the first load.
                    head = self.head.word.load(Ordering::Acquire);
                    continue;
                }
            };
            let new = layout.popped_n(head, below, n);
            // Acquire on success: takes ownership of the `n` slots their
            // pushers released (Release CAS in `push`/`push_batch`). Acquire
            // on failure: the reloaded head is walked again.
            match self.head.word.compare_exchange_weak(
                head,
                new,
                Ordering::Acquire,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
                    return Some(Batch {
                        count: n,
                        free: self.count_popped(new, n),
                    });
                }
                Err(actual) => {
                    cas_stats::note(cas_stats::POP);
                    head = actual;
                }
            }
        }
    }

    /// Returns the indices of `chain` to the stack in one CAS, `chain[0]` on
    /// top.
    ///
    /// The caller must own every index of `chain` (each popped, none pushed
    /// since), and `chain` must not be empty.
    pub(crate) fn push_batch(&self, chain: &[u32]) -> Pushed {
        debug_assert!(!chain.is_empty() && chain.len() <= self.capacity() as usize);
        // Link the chain once: these links are the caller's until the CAS
        // below publishes them.
        for pair in chain.windows(2) {
            // Relaxed: published by the Release CAS in `push_linked`.
            self.link(pair[0]).store(pair[1], Ordering::Relaxed);
        }
        let n = chain.len() as u32;
        self.push_linked(chain[0], chain[chain.len() - 1], n, false)
            .expect("pushed unconditionally")
    }

    /// Returns a chain of `n` indices, already linked from `top` down to
    /// `last`, to the stack in one CAS; with `unless_waiters`, only while
    /// the waiter flag is clear (`None` when it is set, and nothing pushed).
    ///
    /// The caller must own every index of the chain.
    pub(crate) fn push_linked(
        &self,
        top: u32,
        last: u32,
        n: u32,
        unless_waiters: bool,
    ) -> Option<Pushed> {
        let layout = self.layout;
        let (mut top, mut n) = (top, n);
        // Acquire: as in `push`.
        let mut head = self.head.word.load(Ordering::Acquire);
        loop {
            if unless_waiters && layout.waiters(head) {
                return None;
            }
            if layout.waiters(head) && self.in_debt() {
                // Owed slots leave from the top (see `bound.rs`).
                (top, n) = self.withdraw_chain(top, n);
                if n == 0 {
                    return Some(Pushed {
                        waiters: false,
                        head,
                    });
                }
            }
            // Relaxed: published by the Release CAS below.
            self.link(last).store(layout.index(head), Ordering::Relaxed);
            let new = layout.pushed_n(head, top, n);
            // Release: publishes the chain's links and its slots' values to
            // the threads that pop them. Acquire: as in `push`, on success
            // and failure.
            match self
                .head
                .word
                .compare_exchange_weak(head, new, PUSH_SUCCESS, Ordering::Acquire)
            {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
                    self.count_pushed(n);
                    return Some(Pushed {
                        waiters: layout.waiters(head),
                        head: new,
                    });
                }
                Err(actual) => {
                    cas_stats::note(cas_stats::PUSH);
                    head = actual;
                }
            }
        }
    }

    /// Claims the growth of the next segment, for a thread that found the
    /// pool exhausted (see [`Growth::claim`]), if `fits` says the segment
    /// can be laid out (the links' own layout is checked too).
    pub(crate) fn claim_growth(&self, fits: impl FnOnce(u32) -> bool) -> Claim {
        self.growth.claim(|k| self.links.fits(k) && fits(k))
    }

    /// Waits until no thread is growing the pool.
    pub(crate) fn wait_for_growth(&self) {
        self.growth.wait_while_busy();
    }

    /// Allocates the links of segment `k`, claimed by this thread, linked
    /// in index order (`NIL` below the last), unpublished. The segment's
    /// indices exist once the caller has published them
    /// ([`publish_links`](Self::publish_links)), pushed them (or kept
    /// them) and called [`grown`](Self::grown).
    pub(crate) fn prepare_growth(&self, k: u32) -> Unpublished<AtomicU32> {
        let end = self.links.geometry().end(k);
        let nil = self.layout.nil();
        self.links.prepare(k, |i| {
            AtomicU32::new(if i + 1 == end { nil } else { i + 1 })
        })
    }

    /// Publishes the links made by [`prepare_growth`](Self::prepare_growth);
    /// returns the segment's indices. Never panics.
    pub(crate) fn publish_links(
        &self,
        k: u32,
        links: Unpublished<AtomicU32>,
    ) -> core::ops::Range<u32> {
        let geometry = self.links.geometry();
        self.links.publish(links);
        geometry.start(k)..geometry.end(k)
    }

    /// [`prepare_growth`](Self::prepare_growth) and
    /// [`publish_links`](Self::publish_links) at once.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn grow(&self, k: u32) -> core::ops::Range<u32> {
        let links = self.prepare_growth(k);
        self.publish_links(k, links)
    }

    /// Ends the growth of segment `k`: its indices are on the stack or
    /// owned by the grower.
    pub(crate) fn grown(&self, k: u32) {
        self.growth.publish(k);
    }

    /// Gives up the growth of segment `k`, claimed by this thread, before
    /// anything of it was published (see [`Growth::abandon`]).
    pub(crate) fn abandon_growth(&self, k: u32) {
        self.growth.abandon(k);
    }

    /// Whether a pop would fail now and no growth could add a slot: the
    /// stack is empty (or the pool closed) and every segment exists. A
    /// snapshot, made of the loads on which a failing [`pop`](Self::pop)
    /// and a `Claim::Full` growth
    /// claim rest (see `Shared::exhausted`).
    #[inline]
    pub(crate) fn exhausted(&self) -> bool {
        if cfg!(all(loom, tagpool_loom_exhausted_head_first)) {
            // Loom-only fault injection: the other order, head first.
            // Acquire: as below.
            let head = self.head.word.load(Ordering::Acquire);
            return self.refuses_pop(head) && self.growth.complete();
        }
        // The growth first, by an Acquire load that pairs with the end of
        // each growth (after its push): if every segment is grown, the head
        // loaded next holds the last growth's slots unless they were taken.
        // The other order could read the head empty, then the growth that
        // pushed meanwhile over, and refuse with slots free.
        // Not the bound's room (see `bound.rs`): a growth takes it before
        // it pushes its slots, so a look at it here could read the room
        // gone and then the head still empty. A pool with no room left
        // takes the full path, whose growth step finds no room.
        self.growth.complete() && {
            // Acquire: as in `pop`, whose failure this predicts (nothing is
            // read through an empty head either way).
            let head = self.head.word.load(Ordering::Acquire);
            self.refuses_pop(head)
        }
    }

    /// Whether the pool is closed: a snapshot, final once `true`.
    pub(crate) fn is_closed(&self) -> bool {
        // Relaxed: a snapshot. A caller that must not miss a close it is
        // ordered after reads the head first (see `refuses_pop`).
        self.head.closed.load(Ordering::Relaxed)
    }

    /// A snapshot of how many slots are on the stack.
    pub(crate) fn free_count(&self) -> u32 {
        if self.layout.counts_in_head() {
            // Relaxed: a statistic; no data is read through it.
            self.layout.free(self.head.word.load(Ordering::Relaxed))
        } else {
            // Relaxed: as above.
            clamp_count(self.head.free.load(Ordering::Relaxed))
        }
    }
}

/// The outside free count read as a number: a transient underflow (see
/// [`Head::free`]) reads as 0.
#[inline]
fn clamp_count(count: u64) -> u32 {
    if (count as i64) < 0 {
        0
    } else {
        count.min(u64::from(u32::MAX)) as u32
    }
}

/// The success ordering of the push CAS.
#[cfg(not(all(loom, tagpool_loom_weak_push)))]
const PUSH_SUCCESS: Ordering = Ordering::AcqRel;
/// Loom-only fault injection: a push that publishes nothing. Some model must
/// report the resulting causality violation on the slot's value.
#[cfg(all(loom, tagpool_loom_weak_push))]
const PUSH_SUCCESS: Ordering = Ordering::Relaxed;

/// Bench-only counters of failed head CASes, per thread.
///
/// Built only with `RUSTFLAGS="--cfg tagpool_cas_stats"` (the benchmark
/// crate's `contention` binary); otherwise `note` is an empty inline function
/// and nothing is counted.
pub(crate) mod cas_stats {
    /// A failed pop or batch-pop CAS.
    pub(crate) const POP: usize = 0;
    /// A failed push or batch-push CAS.
    pub(crate) const PUSH: usize = 1;
    /// A successful head CAS of any kind.
    pub(crate) const DONE: usize = 2;
    /// A failed waiter-flag CAS (register or clear).
    pub(crate) const OTHER: usize = 3;

    #[cfg(tagpool_cas_stats)]
    std::thread_local! {
        static COUNTS: core::cell::Cell<[u64; 4]> = const { core::cell::Cell::new([0; 4]) };
    }

    /// Counts one head CAS of kind `which` on this thread.
    #[inline(always)]
    pub(crate) fn note(which: usize) {
        #[cfg(tagpool_cas_stats)]
        COUNTS.with(|r| {
            let mut v = r.get();
            v[which] += 1;
            r.set(v);
        });
        let _ = which;
    }

    /// This thread's head CASes `[failed pops, failed pushes, successes,
    /// other failures]` since the last call.
    #[cfg(tagpool_cas_stats)]
    pub(crate) fn take() -> [u64; 4] {
        COUNTS.with(|r| r.replace([0; 4]))
    }
}

#[cfg(all(test, not(loom)))]
mod tests;
