//! [`Layout`]: how the free list's head word packs the top index, the free
//! count, the waiter flag and the ABA tag (see the table in `mod.rs`).

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
    pub(super) fn field_mask(self) -> u64 {
        self.mask
    }

    #[inline]
    pub(super) fn waiters_bit(self) -> u64 {
        self.waiters_bit
    }

    /// How many bits the tag has.
    pub(crate) fn tag_bits(self) -> u32 {
        64 - self.tag_shift
    }

    /// Whether the free count is packed in the head (else it is kept in
    /// [`Head::free`](super::Head::free)).
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
    pub(super) fn is_empty(self, word: u64) -> bool {
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
    pub(super) fn tag_one(self) -> u64 {
        self.tag_one
    }

    /// The lowest bit of the free count.
    #[inline]
    pub(super) fn free_one(self) -> u64 {
        self.free_one
    }

    /// The head after popping its top index: `next` on top, one slot fewer,
    /// the tag bumped, the waiter flag kept. `word` must not be empty.
    ///
    /// `next` is masked to the index field: a pop that read its link after
    /// another thread took the slot may have read anything (a held slot's
    /// link is a [`SharedPoolGuard`](crate::SharedPoolGuard)'s count), and
    /// its CAS then fails on the tag; masking keeps that garbage out of the
    /// other fields of the word it builds and discards.
    #[inline]
    pub(crate) fn popped(self, word: u64, next: u32) -> u64 {
        debug_assert!(!self.is_empty(word));
        debug_assert!(!self.counts_in_head() || self.free(word) > 0);
        ((word & !self.field_mask()) | (u64::from(next) & self.field_mask()))
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
        // Masked as in `popped`: a stale walk may have read anything.
        ((word & !self.field_mask()) | (u64::from(below) & self.field_mask()))
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
    pub(super) fn frozen(self, new: u64, first: u64) -> u64 {
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
    pub(super) fn flagged(self, word: u64, waiters: bool) -> u64 {
        let word = word.wrapping_add(self.tag_one());
        if waiters {
            word | self.waiters_bit()
        } else {
            word & !self.waiters_bit()
        }
    }
}
