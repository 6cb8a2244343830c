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

use crate::segment::{Claim, Geometry, Growth, Segmented, Unpublished};
use crate::sync::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// The widest index field: capacities up to `2^32 - 2` (`NIL = 2^32 - 1`).
pub(crate) const MAX_INDEX_BITS: u32 = 32;

/// The widest index field that leaves room for the free count in the head
/// beside a tag of 31 bits (`16 + 16 + 1 + 31 = 64`).
const COUNT_IN_HEAD_MAX_BITS: u32 = 16;

/// A decoded head word. Field layout: see the module docs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Layout {
    /// `b`: the width of the `index` field (and of `free` when packed).
    bits: u32,
    /// `2^b - 1`: the `index` field's mask, and `NIL`.
    mask: u64,
    /// One in the `free` field (`2^b`), or 0 when the count lives outside
    /// the head (`b > 16`).
    free_one: u64,
    /// The waiter flag, the bit above `free`.
    waiters_bit: u64,
    /// The tag's lowest bit number.
    tag_shift: u32,
    /// One in the `tag` field (see [`Layout::tag_one`]).
    tag_one: u64,
}

impl Layout {
    /// The layout for `capacity` slots.
    pub(crate) fn for_capacity(capacity: u32) -> Self {
        debug_assert!((1..u32::MAX).contains(&capacity));
        let bits = u32::BITS - capacity.leading_zeros();
        debug_assert!(bits <= MAX_INDEX_BITS, "capacity {capacity} too large");
        let count_bits = if bits <= COUNT_IN_HEAD_MAX_BITS {
            bits
        } else {
            0
        };
        let tag_shift = bits + count_bits + 1;
        // Loom-only fault injection: the ABA model must fail without the tag.
        let tag_one = if cfg!(all(loom, tagpool_loom_no_aba_tag)) {
            0
        } else {
            1u64 << tag_shift
        };
        Self {
            bits,
            mask: (1u64 << bits) - 1,
            free_one: if count_bits == 0 { 0 } else { 1u64 << bits },
            waiters_bit: 1u64 << (bits + count_bits),
            tag_shift,
            tag_one,
        }
    }

    /// The index that means "empty stack" (all `b` bits set).
    #[inline]
    pub(crate) fn nil(self) -> u32 {
        self.mask as u32
    }

    #[inline]
    fn field_mask(self) -> u64 {
        self.mask
    }

    #[inline]
    fn waiters_bit(self) -> u64 {
        self.waiters_bit
    }

    /// How many bits the tag has.
    pub(crate) fn tag_bits(self) -> u32 {
        64 - self.tag_shift
    }

    /// Whether the free count is packed in the head (else it is kept in
    /// [`Head::free`]).
    #[inline]
    pub(crate) fn counts_in_head(self) -> bool {
        self.free_one != 0
    }

    #[inline]
    pub(crate) fn index(self, word: u64) -> u32 {
        (word & self.field_mask()) as u32
    }

    /// The packed free count; the layout must [count in the
    /// head](Self::counts_in_head).
    #[inline]
    pub(crate) fn free(self, word: u64) -> u32 {
        debug_assert!(self.counts_in_head());
        ((word >> self.bits) & self.field_mask()) as u32
    }

    #[inline]
    pub(crate) fn waiters(self, word: u64) -> bool {
        word & self.waiters_bit() != 0
    }

    /// Whether the stack is empty.
    #[inline]
    fn is_empty(self, word: u64) -> bool {
        self.index(word) == self.nil()
    }

    #[cfg(test)]
    pub(crate) fn tag(self, word: u64) -> u64 {
        word >> self.tag_shift
    }

    /// Packs a head word; `tag` is taken modulo `2^tag_bits`, and `free` is
    /// dropped when the count lives outside the head.
    #[inline]
    pub(crate) fn pack(self, tag: u64, waiters: bool, free: u32, index: u32) -> u64 {
        debug_assert!(u64::from(index) <= self.field_mask());
        debug_assert!(u64::from(free) <= self.field_mask());
        let free = if self.counts_in_head() {
            u64::from(free) << self.bits
        } else {
            0
        };
        (tag << self.tag_shift)
            | if waiters { self.waiters_bit() } else { 0 }
            | free
            | u64::from(index)
    }

    /// What a successful CAS adds to the head word to bump the tag: the
    /// tag's lowest bit. A carry out of bit 63 falls off, so the tag wraps.
    ///
    /// ABA, and why the tag stops it. A pool of three slots; `T3` holds `X`,
    /// so the stack is `A B` with a free count of 2. `T1` pops; between
    /// reading the head and its CAS it is preempted:
    ///
    /// | step | thread | action                                  | stack (top first) | head `(index, free)` without tag | head with tag   |
    /// |------|--------|-----------------------------------------|-------------------|----------------------------------|-----------------|
    /// | 1    | T1     | pop: reads head, reads `next[A] = B`    | A B               | (A, 2)                           | (A, 2, t)       |
    /// | 2    | T2     | pop A                                   | B                 | (B, 1)                           | (B, 1, t+1)     |
    /// | 3    | T2     | pop B                                   |                   | (NIL, 0)                         | (NIL, 0, t+2)   |
    /// | 4    | T3     | push X (`next[X] = NIL`)                | X                 | (X, 1)                           | (X, 1, t+3)     |
    /// | 5    | T2     | push A (`next[A] = X`)                  | A X               | (A, 2)                           | (A, 2, t+4)     |
    /// | 6    | T1     | CAS head from what it read in step 1 to `(B, 1)` |          | **succeeds**: the head becomes `B`, which T2 holds, so B is handed out twice and X is lost | **fails**: `t != t+4`; T1 reloads and retries |
    ///
    /// The free count alone does not help: it is back to 2 in step 5. The tag
    /// makes every head value unique within its wrap window (`2^tag_bits`
    /// successful CASes). A thread can only be fooled if it is preempted for
    /// that many operations *and* resumes when index, count and tag all
    /// match again.
    ///
    /// Every new head is computed from the head just read, on every retry:
    /// bumping a tag fixed before the loop lets two CASes publish the same
    /// tag, which reopens the window above.
    #[inline]
    fn tag_one(self) -> u64 {
        self.tag_one
    }

    /// The lowest bit of the free count.
    #[inline]
    fn free_one(self) -> u64 {
        self.free_one
    }

    /// The head after popping its top index: `next` on top, one slot fewer,
    /// the tag bumped, the waiter flag kept. `word` must not be empty.
    #[inline]
    pub(crate) fn popped(self, word: u64, next: u32) -> u64 {
        debug_assert!(!self.is_empty(word));
        debug_assert!(!self.counts_in_head() || self.free(word) > 0);
        debug_assert!(u64::from(next) <= self.field_mask());
        ((word & !self.field_mask()) | u64::from(next))
            .wrapping_sub(self.free_one())
            .wrapping_add(self.tag_one())
    }

    /// The head after pushing `index`: `index` on top, one slot more, the tag
    /// bumped, the waiter flag kept.
    #[inline]
    pub(crate) fn pushed(self, word: u64, index: u32) -> u64 {
        debug_assert!(!self.counts_in_head() || u64::from(self.free(word)) < self.field_mask());
        debug_assert!(u64::from(index) < u64::from(self.nil()));
        ((word & !self.field_mask()) | u64::from(index))
            .wrapping_add(self.free_one())
            .wrapping_add(self.tag_one())
    }

    /// The head after popping `n` indices off the top: `below` (the index
    /// under the last one taken) on top, `n` slots fewer, the tag bumped, the
    /// waiter flag kept. `n` must not exceed the free count of `word`.
    #[inline]
    pub(crate) fn popped_n(self, word: u64, below: u32, n: u32) -> u64 {
        debug_assert!(n >= 1 && (!self.counts_in_head() || n <= self.free(word)));
        debug_assert!(u64::from(below) <= self.field_mask());
        ((word & !self.field_mask()) | u64::from(below))
            .wrapping_sub(u64::from(n) * self.free_one())
            .wrapping_add(self.tag_one())
    }

    /// The head after pushing a chain of `n` indices whose top is `top`:
    /// `top` on top, `n` slots more, the tag bumped, the waiter flag kept.
    #[inline]
    pub(crate) fn pushed_n(self, word: u64, top: u32, n: u32) -> u64 {
        debug_assert!(
            !self.counts_in_head()
                || u64::from(self.free(word)) + u64::from(n) < self.field_mask() + 1
        );
        debug_assert!(u64::from(top) < u64::from(self.nil()));
        ((word & !self.field_mask()) | u64::from(top))
            .wrapping_add(u64::from(n) * self.free_one())
            .wrapping_add(self.tag_one())
    }

    /// Loom-only fault injection (`tagpool_loom_frozen_tag`): `new` with the
    /// tag field of `first` bumped once, as folly's pool did when it computed
    /// the tag before its retry loop. Identity otherwise.
    #[inline(always)]
    fn frozen(self, new: u64, first: u64) -> u64 {
        if cfg!(all(loom, tagpool_loom_frozen_tag)) {
            let tag_field = !((self.waiters_bit << 1) - 1);
            (new & !tag_field) | (first.wrapping_add(self.tag_one()) & tag_field)
        } else {
            let _ = first;
            new
        }
    }

    /// `word` with the tag bumped and the waiter flag set to `waiters`.
    #[inline]
    fn flagged(self, word: u64, waiters: bool) -> u64 {
        let word = word.wrapping_add(self.tag_one());
        if waiters {
            word | self.waiters_bit()
        } else {
            word & !self.waiters_bit()
        }
    }
}

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
/// - Every link ever written holds `NIL` or an allocated index.
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
            }),
            links,
            growth: Growth::new(geometry.segments()),
            layout,
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

    /// The link below the owned index `index` in a chain the caller built.
    #[inline]
    pub(crate) fn link_of(&self, index: u32) -> u32 {
        // Relaxed: the caller wrote it (or the growth that published the
        // segment did, before the caller's Acquire took the slots).
        self.link(index).load(Ordering::Relaxed)
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
        self.allocated().saturating_sub(free)
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
        // Relaxed: only the value to link below `index`; the CAS decides.
        let mut head = self.head.word.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release CAS below.
            self.link(index)
                .store(layout.index(head), Ordering::Relaxed);
            let new = layout.pushed(head, index);
            // Release: publishes `links[index]` and the slot's value to the
            // thread that pops `index` (its Acquire load or CAS). Acquire:
            // pairs with the Release CAS in `register_waiter`, a second edge
            // to a waiter's listener beside event-listener's own fences (see
            // "What orders a waiter's listener" in `wait.rs`).
            match self
                .head
                .word
                .compare_exchange_weak(head, new, PUSH_SUCCESS, Ordering::Relaxed)
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
    /// head moved, the walk may have read garbage: `NIL` or an index that
    /// was allocated when it was written (never out of bounds), possibly in
    /// a segment this thread does not see yet, which ends the walk early;
    /// then the CAS fails, or the walk starts over.
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
        // Relaxed: only the value to link below the chain; the CAS decides.
        let mut head = self.head.word.load(Ordering::Relaxed);
        loop {
            if unless_waiters && layout.waiters(head) {
                return None;
            }
            // Relaxed: published by the Release CAS below.
            self.link(last).store(layout.index(head), Ordering::Relaxed);
            let new = layout.pushed_n(head, top, n);
            // Release: publishes the chain's links and its slots' values to
            // the threads that pop them. Acquire: as in `push`.
            match self
                .head
                .word
                .compare_exchange_weak(head, new, PUSH_SUCCESS, Ordering::Relaxed)
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

    /// Sets the waiter flag if the stack is empty and the pool open.
    ///
    /// The caller registers its listener *before* calling this: the CAS then
    /// orders the registration before any push that sees the flag.
    pub(crate) fn register_waiter(&self) -> Register {
        let layout = self.layout;
        // Acquire: a non-empty head is about to be popped (see `pop`).
        let mut head = self.head.word.load(Ordering::Acquire);
        loop {
            // Relaxed: as in `refuses_pop`: a CAS that succeeds read a head
            // at or after the close's tag bump, which orders the flag.
            if self.head.closed.load(Ordering::Relaxed) {
                return Register::Closed;
            }
            if !layout.is_empty(head) {
                return Register::Available;
            }
            // Always a real CAS, even when the flag is already set: the bumped
            // tag puts this registration in the head's modification order, so
            // the next push synchronizes with it (the second edge; see "What
            // orders a waiter's listener" in `wait.rs`).
            let new = layout.flagged(head, true);
            // AcqRel: Release pairs with the Acquire half of the CAS in `push`
            // (the second edge to the listener registered before this);
            // Acquire as for the load above.
            match self.head.word.compare_exchange_weak(
                head,
                new,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
                    return Register::Parked;
                }
                Err(actual) => {
                    cas_stats::note(cas_stats::OTHER);
                    head = actual;
                }
            }
        }
    }

    /// Clears the waiter flag if the head is still exactly `seen`.
    ///
    /// Called by a releaser whose notification found no listener left to
    /// wake: every parked waiter has been notified already. A failure leaves
    /// the flag set, which only costs a later release a spurious notify.
    #[cfg(not(all(loom, tagpool_loom_clear_any)))]
    pub(crate) fn clear_waiters(&self, seen: u64) {
        let new = self.layout.flagged(seen, false);
        // Relaxed: this publishes nothing; a waiter that registers meanwhile
        // changes the head and makes this CAS fail.
        let cleared =
            self.head
                .word
                .compare_exchange(seen, new, Ordering::Relaxed, Ordering::Relaxed);
        cas_stats::note(if cleared.is_ok() {
            cas_stats::DONE
        } else {
            cas_stats::OTHER
        });
    }

    /// Loom-only fault injection: clears the flag from whatever the head is
    /// now, losing a waiter that registered after `seen`. The waiting models
    /// must catch it.
    #[cfg(all(loom, tagpool_loom_clear_any))]
    pub(crate) fn clear_waiters(&self, _seen: u64) {
        let mut head = self.head.word.load(Ordering::Relaxed);
        while let Err(actual) = self.head.word.compare_exchange(
            head,
            self.layout.flagged(head, false),
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            head = actual;
        }
    }

    /// Fair mode: pushes `index` unless the waiter flag is set, in which
    /// case the caller keeps it and hands it to the first waiter (see
    /// `wait.rs`). `None` means the flag was set.
    ///
    /// The caller must own `index`.
    #[inline]
    pub(crate) fn push_unless_waiters(&self, index: u32) -> Option<Pushed> {
        let layout = self.layout;
        // Below the capacity: a growth pushes its slots before it publishes
        // them in `allocated`.
        debug_assert!(index < self.capacity());
        // Relaxed: only the value to link below `index`, and a first look at
        // the flag; the CAS decides.
        let mut head = self.head.word.load(Ordering::Relaxed);
        loop {
            if layout.waiters(head) {
                return None;
            }
            // Relaxed: published by the Release CAS below.
            self.link(index)
                .store(layout.index(head), Ordering::Relaxed);
            let new = layout.pushed(head, index);
            // Release: as in `push`. The CAS fails if a waiter set the flag
            // since the load: the flag is part of the word compared.
            match self
                .head
                .word
                .compare_exchange_weak(head, new, PUSH_SUCCESS, Ordering::Relaxed)
            {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
                    self.count_pushed(1);
                    return Some(Pushed {
                        waiters: false,
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

    /// Fair mode: pushes `index` and clears the waiter flag in one CAS. The
    /// caller holds the fair queue's lock and found it empty.
    ///
    /// The caller must own `index`.
    pub(crate) fn push_clearing_waiters(&self, index: u32) {
        let layout = self.layout;
        // Relaxed: only the value to link below `index`; the CAS decides.
        let mut head = self.head.word.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release CAS below.
            self.link(index)
                .store(layout.index(head), Ordering::Relaxed);
            let new = layout.flagged(layout.pushed(head, index), false);
            // Release: as in `push`.
            match self
                .head
                .word
                .compare_exchange_weak(head, new, PUSH_SUCCESS, Ordering::Relaxed)
            {
                Ok(_) => {
                    self.count_pushed(1);
                    return;
                }
                Err(actual) => head = actual,
            }
        }
    }

    /// Fair mode: clears the waiter flag, whatever the head is. The caller
    /// holds the fair queue's lock and has just emptied the queue: no
    /// waiter can register meanwhile (registering takes the lock).
    pub(crate) fn clear_waiters_locked(&self) {
        // Relaxed: publishes nothing; the lock orders it with registrations.
        let mut head = self.head.word.load(Ordering::Relaxed);
        while self.layout.waiters(head) {
            // Relaxed: as above.
            match self.head.word.compare_exchange_weak(
                head,
                self.layout.flagged(head, false),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }

    /// Sets the closed flag: every later pop fails and no waiter parks.
    /// Returns whether this call set it (`false`: closed already).
    ///
    /// The flag is set first, then the tag bumped by a read-modify-write of
    /// the head. A pop (or a waiter's flag CAS) that read the head before
    /// the bump fails its CAS, reloads and sees the flag; one that read the
    /// bump or a later word synchronizes with it (the bump is Release, and
    /// later CASes continue its release sequence), so it sees the flag too.
    /// No pop succeeds after the bump: that is the close's linearization
    /// point. A waiter whose flag CAS came before the bump is in the
    /// modification order before it, so the bump's Acquire makes that
    /// waiter's listener visible to the close's notification.
    pub(crate) fn close(&self) -> bool {
        // Relaxed: ordered for pops by the tag bump below.
        if self.head.closed.swap(true, Ordering::Relaxed) {
            return false;
        }
        // AcqRel: Acquire pairs with a waiter's Release flag CAS, so the
        // listener it registered first is visible to the caller's
        // notification (as for a push, see `wait.rs`); Release publishes
        // the flag to the pops and waiters that read this word or a later
        // one.
        //
        // Without this bump (a mutant that survived, and survives
        // `close_races_a_release_and_waiters` at bound 3: 827,865 and
        // 64,814 iterations, checked 2026-11-25) nothing observable breaks
        // today, for the same reason as the push CAS's Acquire (see "What
        // orders a waiter's listener" in `wait.rs`): event-listener's
        // SeqCst fences after `listen` and before `notify` make a Dekker
        // pair with the waiter's load and the close's store of the flag,
        // so the waiter sees the flag or the close's notification finds it;
        // and a pop that read the head before the flag and whose CAS
        // lands after this point could not be told from one that came
        // first (a thread that the close happens-before sees the flag, so
        // none can order that pop after the close). The bump stays: it is the close's linearization point for
        // pops, and it keeps waiters safe should event-listener drop the
        // fence its docs call an implementation detail.
        self.head
            .word
            .fetch_add(self.layout.tag_one(), Ordering::AcqRel);
        true
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
mod tests {
    use super::*;

    #[test]
    fn layout_round_trips_at_smallest_capacity() {
        let l = Layout::for_capacity(1);
        assert_eq!(l.nil(), 1);
        assert_eq!(l.tag_bits(), 61);
        for (tag, waiters, free, index) in [
            (0, false, 0, 0),
            (5, true, 1, 1),
            ((1 << 60) - 1, true, 1, 0),
        ] {
            let w = l.pack(tag, waiters, free, index);
            assert_eq!(
                (l.tag(w), l.waiters(w), l.free(w), l.index(w)),
                (tag, waiters, free, index)
            );
        }
    }

    #[test]
    fn layout_round_trips_at_the_largest_packed_capacity() {
        let cap = 65_535;
        let l = Layout::for_capacity(cap);
        assert!(l.counts_in_head());
        assert_eq!(l.tag_bits(), 31);
        assert!(l.nil() >= cap, "NIL must not be a valid index");
        let max_tag = (1u64 << 31) - 1;
        for (tag, waiters, free, index) in [
            (0, false, cap, cap - 1),
            (max_tag, true, 0, l.nil()),
            (7, false, 1, 0),
        ] {
            let w = l.pack(tag, waiters, free, index);
            assert_eq!(
                (l.tag(w), l.waiters(w), l.free(w), l.index(w)),
                (tag, waiters, free, index)
            );
        }
    }

    #[test]
    fn large_capacities_count_outside_and_keep_a_31_bit_tag() {
        for (cap, tag_bits) in [
            (65_536, 46),
            (1 << 20, 42),
            (1 << 24, 38),
            (crate::MAX_CAPACITY as u32, 31),
        ] {
            let l = Layout::for_capacity(cap);
            assert!(!l.counts_in_head(), "{cap}");
            assert_eq!(l.tag_bits(), tag_bits, "{cap}");
            assert!(l.nil() >= cap);
            let max_tag = (1u64 << tag_bits) - 1;
            let w = l.pack(max_tag, true, 0, cap - 1);
            assert_eq!(
                (l.tag(w), l.waiters(w), l.index(w)),
                (max_tag, true, cap - 1)
            );
            let pushed = l.pushed(w, 3);
            assert_eq!(
                (l.tag(pushed), l.waiters(pushed), l.index(pushed)),
                (0, true, 3)
            );
            let popped = l.popped_n(pushed, l.nil(), 1);
            assert_eq!((l.tag(popped), l.index(popped)), (1, l.nil()));
        }
    }

    #[test]
    fn index_bits_are_the_fewest_that_hold_capacity_and_nil() {
        assert_eq!(Layout::for_capacity(1023).nil(), 1023);
        assert_eq!(Layout::for_capacity(1024).nil(), 2047);
        assert_eq!(Layout::for_capacity(1024).tag_bits(), 41);
    }

    #[test]
    fn tag_wraps_without_touching_other_fields() {
        let l = Layout::for_capacity(1000);
        let max_tag = (1u64 << l.tag_bits()) - 1;
        let w = l.pack(max_tag, true, 17, 999);
        let pushed = l.pushed(w, 5);
        assert_eq!(l.tag(pushed), 0, "the tag wraps to 0");
        assert_eq!(
            (l.waiters(pushed), l.free(pushed), l.index(pushed)),
            (true, 18, 5)
        );
        let popped = l.popped(pushed, 999);
        let fields = (
            l.tag(popped),
            l.waiters(popped),
            l.free(popped),
            l.index(popped),
        );
        assert_eq!(fields, (1, true, 17, 999));
        let flagged = l.flagged(l.pack(max_tag, false, 0, l.nil()), true);
        let fields = (
            l.tag(flagged),
            l.waiters(flagged),
            l.free(flagged),
            l.index(flagged),
        );
        assert_eq!(fields, (0, true, 0, l.nil()));
        assert!(!l.waiters(l.flagged(flagged, false)));
    }

    #[test]
    fn pushed_and_popped_match_pack_on_every_field() {
        for capacity in [1, 2, 3, 1000, 1024, 65_535] {
            let l = Layout::for_capacity(capacity);
            for (tag, waiters) in [(0, false), (3, true), ((1u64 << l.tag_bits()) - 3, false)] {
                let empty = l.pack(tag, waiters, 0, l.nil());
                let one = l.pushed(empty, capacity - 1);
                assert_eq!(one, l.pack(tag + 1, waiters, 1, capacity - 1));
                assert_eq!(l.popped(one, l.nil()), l.pack(tag + 2, waiters, 0, l.nil()));
            }
        }
    }

    #[test]
    fn an_outside_count_is_exact_at_quiescence() {
        let list = FreeList::full(70_000);
        assert!(!list.layout().counts_in_head());
        assert_eq!(list.free_count(), 70_000);
        let a = list.pop().unwrap();
        assert_eq!(a.free, 69_999);
        let mut out = [0; 8];
        let batch = list.pop_batch(&mut out).unwrap();
        assert_eq!((batch.count, batch.free), (8, 69_991));
        list.push_batch(&out);
        list.push(a.index);
        assert_eq!(list.free_count(), 70_000);
        assert_eq!(
            clamp_count(0u64.wrapping_sub(1)),
            0,
            "an underflow reads as 0"
        );
    }

    #[test]
    fn a_grown_segment_is_pushed_as_one_chain() {
        let list = FreeList::new(Geometry::new(2, 7));
        assert_eq!((list.allocated(), list.free_count()), (2, 2));
        assert_eq!(list.claim_growth(|_| true), Claim::Grow(1));
        let new = list.grow(1);
        assert_eq!(new, 2..4);
        list.push_linked(new.start, new.end - 1, 2, false).unwrap();
        list.grown(1);
        assert_eq!((list.allocated(), list.free_count()), (4, 4));
        let popped: Vec<u32> = core::iter::from_fn(|| list.pop().map(|p| p.index)).collect();
        assert_eq!(popped, [2, 3, 0, 1]);
    }

    #[test]
    fn a_closed_list_refuses_pops_and_waiters_but_takes_pushes() {
        let list = FreeList::full(3);
        let a = list.pop().unwrap();
        assert!(list.close());
        assert!(!list.close(), "closing twice reports it");
        assert!(list.is_closed());
        assert!(list.pop().is_none(), "two slots are free, yet no pop");
        assert!(list.pop_batch(&mut [0; 2]).is_none());
        assert_eq!(list.register_waiter(), Register::Closed);
        list.push(a.index);
        assert_eq!(list.free_count(), 3, "releases go on");
    }

    #[test]
    fn push_unless_waiters_refuses_a_flagged_head() {
        let list = FreeList::full(2);
        let a = list.pop().unwrap();
        let b = list.pop().unwrap();
        assert_eq!(list.register_waiter(), Register::Parked);
        assert!(
            list.push_unless_waiters(a.index).is_none(),
            "a waiter is queued"
        );
        list.push_clearing_waiters(a.index);
        assert!(!list
            .layout()
            .waiters(list.head.word.load(Ordering::Relaxed)));
        assert!(list.push_unless_waiters(b.index).is_some());
        assert_eq!(list.free_count(), 2);
        assert_eq!(list.register_waiter(), Register::Available);
    }

    #[test]
    fn pop_and_push_are_lifo_and_count() {
        let list = FreeList::full(3);
        let l = list.layout();
        let a = list.pop().unwrap();
        let b = list.pop().unwrap();
        assert_eq!((a.index, a.free, b.index, b.free), (0, 2, 1, 1));
        list.push(a.index);
        assert_eq!(list.free_count(), 2);
        assert_eq!(list.pop().unwrap().index, 0);
        assert_eq!(list.pop().unwrap().index, 2);
        assert!(list.pop().is_none());
        assert_eq!(list.free_count(), 0);
        assert_eq!(l.nil(), 3);
    }

    #[test]
    fn waiter_flag_is_set_only_on_empty_list_and_seen_by_push() {
        let list = FreeList::full(1);
        assert_eq!(list.register_waiter(), Register::Available);
        let p = list.pop().unwrap();
        assert_eq!(list.register_waiter(), Register::Parked);
        let pushed = list.push(p.index);
        assert!(pushed.waiters);
        // The flag survives the push until a releaser clears it.
        assert!(list.layout().waiters(pushed.head));
        list.clear_waiters(pushed.head);
        let p = list.pop().unwrap();
        assert!(!list.push(p.index).waiters);
    }

    #[test]
    fn clear_waiters_fails_when_head_moved() {
        let list = FreeList::full(2);
        let a = list.pop().unwrap();
        let b = list.pop().unwrap();
        assert_eq!(list.register_waiter(), Register::Parked);
        let pushed = list.push(a.index);
        list.push(b.index);
        list.clear_waiters(pushed.head);
        let a = list.pop().unwrap();
        assert!(
            list.push(a.index).waiters,
            "a stale clear must not drop the flag"
        );
    }
}
