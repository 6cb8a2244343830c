//! Unit tests of the free list's head packing and its single-thread behaviour.

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
