//! The free list: a Treiber stack of `u32` slot indices with a tagged head.
//!
//! This is the only module that knows about ABA. The head is one `AtomicU64`
//! that packs, from the least significant bit up:
//!
//! | field     | bits                 | meaning                                         |
//! |-----------|----------------------|-------------------------------------------------|
//! | `index`   | `b`                  | the slot on top of the stack, or `NIL`          |
//! | `free`    | `b`                  | how many slots the stack holds (`0..=capacity`) |
//! | `waiters` | 1                    | a thread may be parked waiting for a slot       |
//! | `closed`  | 1                    | [`Pool::close`](crate::Pool::close) was called: pops fail |
//! | `tag`     | `62 - 2b`            | bumped by every successful compare-exchange     |
//!
//! `b` is the fewest bits that hold `capacity` (so `NIL = 2^b - 1` is never a
//! valid index). Packing the free count costs tag bits, and buys exact
//! [`Stats`](crate::Stats) (in use, available) without a second atomic
//! read-modify-write on the hot path. Packing the waiter flag lets a release
//! learn, from the value its own CAS replaced, whether anyone waits: no extra
//! load at all when nobody does. Packing the closed flag makes a closed
//! pool refuse every pop without a second load on the acquire path.
//!
//! With `b <= 16` (capacity at most [`MAX_CAPACITY`](crate::MAX_CAPACITY)) the
//! tag has at least 30 bits; a capacity of 1024 (`b = 11`) leaves 40.

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// The widest index field: keeps the tag at 30 bits or more, so a pop can
/// only be fooled after 2^30 head changes during one preemption.
pub(crate) const MAX_INDEX_BITS: u32 = 16;

/// A decoded head word. Field layout: see the module docs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Layout {
    /// `b`: the width of the `index` and the `free` fields.
    bits: u32,
    /// `2^b - 1`: the `index` field's mask, and `NIL`.
    mask: u64,
    /// `2^b`: one in the `free` field.
    free_one: u64,
    /// The waiter flag, bit `2b`.
    waiters_bit: u64,
    /// The closed flag, bit `2b + 1`.
    closed_bit: u64,
    /// One in the `tag` field, bit `2b + 2` (see [`Layout::tag_one`]).
    tag_one: u64,
}

impl Layout {
    /// The layout for `capacity` slots.
    pub(crate) fn for_capacity(capacity: u32) -> Self {
        debug_assert!(capacity >= 1);
        let bits = u32::BITS - capacity.leading_zeros();
        debug_assert!(bits <= MAX_INDEX_BITS, "capacity {capacity} too large");
        // Loom-only fault injection: the ABA model must fail without the tag.
        let tag_one = if cfg!(all(loom, tagpool_loom_no_aba_tag)) {
            0
        } else {
            1u64 << (2 * bits + 2)
        };
        Self {
            bits,
            mask: (1u64 << bits) - 1,
            free_one: 1u64 << bits,
            waiters_bit: 1u64 << (2 * bits),
            closed_bit: 1u64 << (2 * bits + 1),
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
        62 - 2 * self.bits
    }

    #[inline]
    pub(crate) fn index(self, word: u64) -> u32 {
        (word & self.field_mask()) as u32
    }

    #[inline]
    pub(crate) fn free(self, word: u64) -> u32 {
        ((word >> self.bits) & self.field_mask()) as u32
    }

    #[inline]
    pub(crate) fn waiters(self, word: u64) -> bool {
        word & self.waiters_bit() != 0
    }

    #[inline]
    pub(crate) fn closed(self, word: u64) -> bool {
        word & self.closed_bit != 0
    }

    /// Whether a pop must fail: the stack is empty or the pool is closed.
    #[inline]
    fn refuses_pop(self, word: u64) -> bool {
        self.index(word) == self.nil() || self.closed(word)
    }

    #[cfg(test)]
    pub(crate) fn tag(self, word: u64) -> u64 {
        word >> (2 * self.bits + 2)
    }

    /// Packs a head word; `tag` is taken modulo `2^tag_bits`.
    #[inline]
    pub(crate) fn pack(self, tag: u64, waiters: bool, free: u32, index: u32) -> u64 {
        debug_assert!(u64::from(index) <= self.field_mask());
        debug_assert!(u64::from(free) <= self.field_mask());
        (tag << (2 * self.bits + 2))
            | if waiters { self.waiters_bit() } else { 0 }
            | (u64::from(free) << self.bits)
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
        debug_assert!(self.index(word) != self.nil() && self.free(word) > 0);
        debug_assert!(u64::from(next) <= self.field_mask());
        ((word & !self.field_mask()) | u64::from(next))
            .wrapping_sub(self.free_one())
            .wrapping_add(self.tag_one())
    }

    /// The head after pushing `index`: `index` on top, one slot more, the tag
    /// bumped, the waiter flag kept.
    #[inline]
    pub(crate) fn pushed(self, word: u64, index: u32) -> u64 {
        debug_assert!(u64::from(self.free(word)) < self.field_mask());
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
        debug_assert!(n >= 1 && n <= self.free(word));
        debug_assert!(u64::from(below) <= self.field_mask());
        ((word & !self.field_mask()) | u64::from(below))
            .wrapping_sub(u64::from(n) * self.free_one())
            .wrapping_add(self.tag_one())
    }

    /// The head after pushing a chain of `n` indices whose top is `top`:
    /// `top` on top, `n` slots more, the tag bumped, the waiter flag kept.
    #[inline]
    pub(crate) fn pushed_n(self, word: u64, top: u32, n: u32) -> u64 {
        debug_assert!(u64::from(self.free(word)) + u64::from(n) < self.field_mask() + 1);
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
            let tag_field = !((self.closed_bit << 1) - 1);
            (new & !tag_field) | (first.wrapping_add(self.tag_one()) & tag_field)
        } else {
            let _ = first;
            new
        }
    }

    /// `word` with the tag bumped and the closed flag set.
    #[inline]
    fn closing(self, word: u64) -> u64 {
        word.wrapping_add(self.tag_one()) | self.closed_bit
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

/// A lock-free stack of slot indices `0..capacity`.
///
/// # Invariants
///
/// - Every index in `0..capacity` is either on the stack exactly once or owned
///   by exactly one party outside it (a guard, or a thread between a pop and
///   a push). Ownership changes only through a successful CAS on `head`.
/// - `free(head)` equals the number of indices on the stack.
/// - Every successful CAS on `head` bumps the tag.
#[derive(Debug)]
pub(crate) struct FreeList {
    /// The packed head word (see the module docs). Padded so that the value
    /// array and the pool's counters never share its cache line.
    head: CachePadded<AtomicU64>,
    /// `next[i]` is the index below `i` on the stack while `i` is on it;
    /// meaningless otherwise. Links live apart from values and as long as the
    /// list, so the speculative `next` read in `pop` is always an atomic read
    /// of live memory, even when the slot was popped meanwhile.
    next: Box<[AtomicU32]>,
    layout: Layout,
}

impl FreeList {
    /// A list that holds every index of `0..capacity`, `0` on top.
    pub(crate) fn full(capacity: u32) -> Self {
        let layout = Layout::for_capacity(capacity);
        let next = (0..capacity)
            .map(|i| {
                AtomicU32::new(if i + 1 == capacity {
                    layout.nil()
                } else {
                    i + 1
                })
            })
            .collect();
        Self {
            head: CachePadded::new(AtomicU64::new(layout.pack(0, false, capacity, 0))),
            next,
            layout,
        }
    }

    pub(crate) fn layout(&self) -> Layout {
        self.layout
    }

    /// The link of slot `index`, which must be below the capacity.
    #[inline]
    fn link(&self, index: u32) -> &AtomicU32 {
        debug_assert!((index as usize) < self.next.len());
        // Indices in the head and in links are NIL (which every caller
        // checks first) or in `0..capacity`: only `full` and `push` (whose
        // caller owns a popped index) write them.
        // SAFETY: so `index < capacity == next.len()`.
        unsafe { self.next.get_unchecked(index as usize) }
    }

    /// The number of slots the list was made for.
    #[inline]
    pub(crate) fn capacity(&self) -> u32 {
        self.next.len() as u32
    }

    /// Takes the index on top of the stack, or `None` when it is empty or
    /// the pool is closed.
    #[inline]
    pub(crate) fn pop(&self) -> Option<Popped> {
        let layout = self.layout;
        // Acquire: pairs with the Release half of the CAS in `push` (and of
        // every later CAS in the head's release sequence), so `next[index]`
        // and the slot's value, written before that push, are visible.
        let mut head = self.head.load(Ordering::Acquire);
        let first = head;
        loop {
            if layout.refuses_pop(head) {
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
            match self
                .head
                .compare_exchange_weak(head, new, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
                    return Some(Popped {
                        index,
                        free: layout.free(new),
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
        debug_assert!((index as usize) < self.next.len());
        // Relaxed: only the value to link below `index`; the CAS decides.
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release CAS below.
            self.link(index)
                .store(layout.index(head), Ordering::Relaxed);
            let new = layout.pushed(head, index);
            // Release: publishes `next[index]` and the slot's value to the
            // thread that pops `index` (its Acquire load or CAS). Acquire:
            // pairs with the Release CAS in `register_waiter`, a second edge
            // to a waiter's listener beside event-listener's own fences (see
            // "What orders a waiter's listener" in `wait.rs`).
            match self
                .head
                .compare_exchange_weak(head, new, PUSH_SUCCESS, Ordering::Relaxed)
            {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
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
    /// stack is empty or the pool is closed. Takes one only while the waiter flag is set, so that
    /// a thread refilling its cache does not hoard slots that waiters need.
    ///
    /// The walk down the links is speculative, like the one-link read in
    /// [`pop`](Self::pop): a link on the stack is written only by the thread
    /// that pushes it, before its push, and every change to the stack is a
    /// successful CAS that bumps the tag. So if the head still holds the
    /// word read before the walk, no CAS happened during it, and every link
    /// the walk read was on the stack and unchanged the whole time. If the
    /// head moved, the walk may have read garbage (always `NIL` or an index
    /// below the capacity, never out of bounds) and the CAS fails.
    pub(crate) fn pop_batch(&self, out: &mut [u32]) -> Option<Batch> {
        let layout = self.layout;
        debug_assert!(!out.is_empty() && out.len() <= u32::MAX as usize);
        // Acquire: as in `pop`.
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            if layout.refuses_pop(head) {
                return None;
            }
            let top = layout.index(head);
            let want = if layout.waiters(head) {
                1
            } else {
                (out.len() as u32).min(layout.free(head))
            };
            let mut n = 0u32;
            let mut index = top;
            let below = loop {
                debug_assert!(index != layout.nil());
                // In bounds: `n < want <= out.len()`.
                out[n as usize] = index;
                n += 1;
                // Relaxed: ordered by the Acquire load (or failed CAS) of
                // `head`; see the method docs for why a stale read is caught.
                let next = self.link(index).load(Ordering::Relaxed);
                if n == want || next == layout.nil() {
                    break next;
                }
                index = next;
            };
            let new = layout.popped_n(head, below, n);
            // Acquire on success: takes ownership of the `n` slots their
            // pushers released (Release CAS in `push`/`push_batch`). Acquire
            // on failure: the reloaded head is walked again.
            match self
                .head
                .compare_exchange_weak(head, new, Ordering::Acquire, Ordering::Acquire)
            {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
                    return Some(Batch {
                        count: n,
                        free: layout.free(new),
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
        let layout = self.layout;
        debug_assert!(!chain.is_empty() && chain.len() <= self.next.len());
        // Link the chain once: these links are the caller's until the CAS
        // below publishes them.
        for pair in chain.windows(2) {
            debug_assert!((pair[0] as usize) < self.next.len());
            // Relaxed: published by the Release CAS below.
            self.link(pair[0]).store(pair[1], Ordering::Relaxed);
        }
        let top = chain[0];
        let last = chain[chain.len() - 1];
        let n = chain.len() as u32;
        // Relaxed: only the value to link below the chain; the CAS decides.
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release CAS below.
            self.link(last).store(layout.index(head), Ordering::Relaxed);
            let new = layout.pushed_n(head, top, n);
            // Release: publishes the chain's links and its slots' values to
            // the threads that pop them. Acquire: as in `push`.
            match self
                .head
                .compare_exchange_weak(head, new, PUSH_SUCCESS, Ordering::Relaxed)
            {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
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

    /// Sets the waiter flag if the stack is empty and the pool open.
    ///
    /// The caller registers its listener *before* calling this: the CAS then
    /// orders the registration before any push that sees the flag.
    pub(crate) fn register_waiter(&self) -> Register {
        let layout = self.layout;
        // Acquire: a non-empty head is about to be popped (see `pop`).
        let mut head = self.head.load(Ordering::Acquire);
        loop {
            if layout.closed(head) {
                return Register::Closed;
            }
            if layout.index(head) != layout.nil() {
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
            match self
                .head
                .compare_exchange_weak(head, new, Ordering::AcqRel, Ordering::Acquire)
            {
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
        let cleared = self
            .head
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
        let mut head = self.head.load(Ordering::Relaxed);
        while let Err(actual) = self.head.compare_exchange(
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
        debug_assert!((index as usize) < self.next.len());
        // Relaxed: only the value to link below `index`, and a first look at
        // the flag; the CAS decides.
        let mut head = self.head.load(Ordering::Relaxed);
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
                .compare_exchange_weak(head, new, PUSH_SUCCESS, Ordering::Relaxed)
            {
                Ok(_) => {
                    cas_stats::note(cas_stats::DONE);
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
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            // Relaxed: published by the Release CAS below.
            self.link(index)
                .store(layout.index(head), Ordering::Relaxed);
            let new = layout.flagged(layout.pushed(head, index), false);
            // Release: as in `push`.
            match self
                .head
                .compare_exchange_weak(head, new, PUSH_SUCCESS, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }

    /// Fair mode: clears the waiter flag, whatever the head is. The caller
    /// holds the fair queue's lock and has just emptied the queue: no
    /// waiter can register meanwhile (registering takes the lock).
    pub(crate) fn clear_waiters_locked(&self) {
        // Relaxed: publishes nothing; the lock orders it with registrations.
        let mut head = self.head.load(Ordering::Relaxed);
        while self.layout.waiters(head) {
            // Relaxed: as above.
            match self.head.compare_exchange_weak(
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
    pub(crate) fn close(&self) -> bool {
        // Relaxed: the CAS decides.
        let mut head = self.head.load(Ordering::Relaxed);
        loop {
            if self.layout.closed(head) {
                return false;
            }
            // AcqRel: Acquire pairs with a waiter's Release flag CAS, so the
            // listener it registered first is visible to the caller's
            // notification (as for a push, see `wait.rs`); Release publishes
            // the flag to the waiters' Acquire loads and CASes.
            match self.head.compare_exchange_weak(
                head,
                self.layout.closing(head),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(actual) => head = actual,
            }
        }
    }

    /// Whether the pool is closed: a snapshot, final once `true`.
    pub(crate) fn is_closed(&self) -> bool {
        // Acquire: pairs with the Release CAS in `close`.
        self.layout.closed(self.head.load(Ordering::Acquire))
    }

    /// A snapshot of how many slots are on the stack.
    pub(crate) fn free_count(&self) -> u32 {
        // Relaxed: a statistic; no data is read through it.
        self.layout.free(self.head.load(Ordering::Relaxed))
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
        assert_eq!(l.tag_bits(), 60);
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
    fn layout_round_trips_at_largest_capacity() {
        let cap = crate::MAX_CAPACITY as u32;
        let l = Layout::for_capacity(cap);
        assert_eq!(l.tag_bits(), 30);
        assert!(l.nil() >= cap, "NIL must not be a valid index");
        let max_tag = (1u64 << 30) - 1;
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
    fn index_bits_are_the_fewest_that_hold_capacity_and_nil() {
        assert_eq!(Layout::for_capacity(1023).nil(), 1023);
        assert_eq!(Layout::for_capacity(1024).nil(), 2047);
        assert_eq!(Layout::for_capacity(1024).tag_bits(), 40);
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
        for capacity in [1, 2, 3, 1000, 1024, crate::MAX_CAPACITY as u32] {
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
    fn closing_keeps_every_field_and_survives_tag_wrap() {
        for capacity in [1, 1000, crate::MAX_CAPACITY as u32] {
            let l = Layout::for_capacity(capacity);
            let max_tag = (1u64 << l.tag_bits()) - 1;
            let w = l.pack(max_tag, true, 1, capacity - 1);
            let closed = l.closing(w);
            assert!(l.closed(closed) && !l.closed(w));
            assert_eq!(
                (
                    l.tag(closed),
                    l.waiters(closed),
                    l.free(closed),
                    l.index(closed)
                ),
                (0, true, 1, capacity - 1),
                "the tag wraps without reaching the closed bit"
            );
            let popped = l.popped(closed, l.nil());
            let pushed = l.pushed(popped, 0);
            assert!(
                l.closed(popped) && l.closed(pushed),
                "pops and pushes keep it"
            );
            assert!(l.closed(l.flagged(pushed, false)));
        }
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
        assert!(!list.layout().waiters(list.head.load(Ordering::Relaxed)));
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
