//! A thread's bag of removed entries, in its reader record: where a removal
//! in a pool with read sections puts its entry with plain stores, instead
//! of a compare-and-swap on the pool's shared limbo. A full bag goes to the
//! limbo in one push; a grace period on any thread takes every bag's
//! entries, so that the entries a thread removed are never hidden from
//! another thread's insert.
//!
//! # Protocol
//!
//! The bag's `state` holds its length and a `BUSY` bit, written by its
//! owner only; `claim` is 0, a grace period's claim (its token), `MOVING`
//! while a grace period that committed reads the entries, or `DRAINED`
//! once it has. This is the per-thread caches' protocol (`engine/cache`),
//! for a stack that only its owner pushes and only grace periods empty:
//!
//! - **Owner** ([`Bag::push`]): store `state` = length with `BUSY`; light
//!   barrier; load `claim`. A claim is taken back by CAS (the grace
//!   period's commit then fails); `DRAINED` means the bag was emptied
//!   (length 0 from now on, `claim` back to 0); `MOVING` means a grace
//!   period is reading the bag: the owner leaves it alone and its entry
//!   goes to the limbo instead. Then it stores the entry in its slot and
//!   `state` = the new length (Release), `BUSY` clear.
//! - **Grace period** ([`Bag::claim`], [`Bag::commit`]): CAS `claim` from 0
//!   (or another grace period's claim, taking it over) to its token; the
//!   heavy barrier; load `state` (Acquire). If the bag is not `BUSY` and
//!   not empty, CAS its token to `MOVING`, read the entries, store
//!   `DRAINED` (Release). Otherwise CAS its token back to 0.
//!
//! The owner's `BUSY` store, light barrier and `claim` load, and the grace
//! period's claim, heavy barrier and `state` load are a Dekker pair: the
//! owner sees the claim (and takes it back before touching the slots) or
//! the grace period sees `BUSY` (and does not commit). Every change of
//! `claim` between claims, 0 and `MOVING` is a CAS from the value read, so
//! exactly one of a take-back and a commit succeeds. An entry is in one
//! place: a bag below its length (not drained), the limbo, or one grace
//! period's walk.
//!
//! What a grace period misses: the entries of a bag whose owner is inside
//! a push at that moment (it sees `BUSY`). They are not lost; the next
//! grace period, or the bag's next flush, takes them.

use crate::sync::{AtomicU32, AtomicUsize, Ordering};

/// The most entries a bag holds; a full bag goes to the limbo.
pub(crate) const BAG: usize = 32;
/// `state`: the owner is inside a push.
const BUSY: u32 = 1 << 31;
/// `claim`: a grace period is reading the entries.
const MOVING: usize = 1;
/// `claim`: a grace period has read the entries; the owner resets.
const DRAINED: usize = 2;

/// Whether a `claim` word is a grace period's claim.
#[inline]
fn is_claim(claim: usize) -> bool {
    claim > DRAINED
}

/// The token of a grace period whose epoch is `epoch`: unique (each
/// grace period bumps the epoch by a read-modify-write) and a claim.
pub(crate) fn token(epoch: u64) -> usize {
    // Wraps only past `usize::MAX` grace periods; a claim is never 0 to 2.
    (epoch as usize).wrapping_add(DRAINED + 1).max(DRAINED + 1)
}

/// What [`Bag::push`] did with the entry.
#[derive(Debug)]
pub(crate) enum Pushed {
    /// It is in the bag.
    Kept,
    /// The bag was full with it: these entries left the bag, for the limbo.
    Full([u32; BAG]),
    /// A grace period is reading the bag: the entry goes to the limbo.
    Refused,
}

/// See the module docs.
#[derive(Debug)]
pub(crate) struct Bag {
    state: AtomicU32,
    claim: AtomicUsize,
    slots: [AtomicU32; BAG],
}

impl Bag {
    pub(crate) fn new() -> Self {
        Self {
            state: AtomicU32::new(0),
            claim: AtomicUsize::new(0),
            slots: core::array::from_fn(|_| AtomicU32::new(0)),
        }
    }

    /// How many entries the bag holds (a snapshot; the owner's own view
    /// until a grace period drained it).
    pub(crate) fn len(&self) -> usize {
        // Acquire: a snapshot, but a drained bag's is read with the count
        // of the walk that drained it (see `Limbo::walking`).
        if self.claim.load(Ordering::Acquire) == DRAINED {
            return 0;
        }
        // Relaxed: a snapshot.
        (self.state.load(Ordering::Relaxed) & !BUSY) as usize
    }

    /// Pushes `index` (an entry this thread removed), as the bag's owner;
    /// `light` is the light half of the barrier.
    #[inline]
    pub(crate) fn push(&self, index: u32, light: impl FnOnce()) -> Pushed {
        // Relaxed: the owner's own word.
        let mut len = self.state.load(Ordering::Relaxed) & !BUSY;
        // Relaxed: ordered before the load of `claim` by the barrier.
        self.state.store(len | BUSY, Ordering::Relaxed);
        // Loom-only fault injection: an owner that never looks at claims
        // (a grace period then reads the slots it writes).
        if !cfg!(all(loom, tagpool_loom_bag_ignores_claim)) {
            light();
            // Acquire: pairs with the grace period's Release store of
            // `DRAINED` (it read the slots before).
            let mut claim = self.claim.load(Ordering::Acquire);
            while claim != 0 {
                if claim == DRAINED {
                    // Emptied: the new length is stored below, `BUSY` still
                    // set, before any grace period can claim again.
                    len = 0;
                    // Release: after the owner's empty `state`, in effect
                    // (`BUSY` keeps any claimant off until it is stored).
                    self.claim.store(0, Ordering::Release);
                    break;
                }
                if claim == MOVING {
                    // Leave the slots to the grace period reading them.
                    // Release: as the end of a push.
                    self.state.store(len, Ordering::Release);
                    return Pushed::Refused;
                }
                // A claim: take it back (AcqRel, as the cache's owner); the
                // claimant's commit then fails.
                match self
                    .claim
                    .compare_exchange(claim, 0, Ordering::AcqRel, Ordering::Acquire)
                {
                    Ok(_) => break,
                    Err(now) => claim = now,
                }
            }
        }
        // Relaxed: published by the Release store of `state` below.
        self.slots[len as usize].store(index, Ordering::Relaxed);
        len += 1;
        if len as usize == BAG {
            let full = core::array::from_fn(|i| self.slots[i].load(Ordering::Relaxed));
            // Release: as below.
            self.state.store(0, Ordering::Release);
            return Pushed::Full(full);
        }
        // Release: publishes the slot to the grace period whose Acquire
        // load of `state` reads this length.
        self.state.store(len, Ordering::Release);
        Pushed::Kept
    }

    /// A grace period's first step: claims the bag with `token` if it looks
    /// non-empty. Returns whether it claimed.
    pub(crate) fn claim(&self, token: usize) -> bool {
        // Relaxed: a hint; the commit re-reads it after the barrier.
        if self.state.load(Ordering::Relaxed) & !BUSY == 0 {
            return false;
        }
        // Relaxed: the value to replace; the CAS decides.
        let mut claim = self.claim.load(Ordering::Relaxed);
        loop {
            if claim != 0 && !is_claim(claim) {
                // Moving or drained: another grace period has the entries.
                return false;
            }
            // AcqRel: as the cache's revoker (Release orders the claim
            // before the heavy barrier's effect on the owner).
            match self
                .claim
                .compare_exchange(claim, token, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => claim = now,
            }
        }
    }

    /// A grace period's last step, after its heavy barrier, for a bag it
    /// claimed with `token`: calls `take` with each entry and returns how
    /// many, or 0 if the owner is inside a push or took the claim back.
    pub(crate) fn commit(&self, token: usize, mut take: impl FnMut(u32)) -> usize {
        // Acquire: pairs with the owner's Release store of `state` (the
        // slots below its length).
        let state = self.state.load(Ordering::Acquire);
        // Loom-only fault injection: a grace period that reads a busy bag.
        let busy = state & BUSY != 0 && !cfg!(all(loom, tagpool_loom_bag_ignores_busy));
        let len = state & !BUSY;
        if busy || len == 0 {
            // Relaxed: gives the claim back; a failure means the owner took
            // it back, or another grace period took it over.
            let _ = self
                .claim
                .compare_exchange(token, 0, Ordering::Relaxed, Ordering::Relaxed);
            return 0;
        }
        // AcqRel: the commit; fails if the owner took the claim back.
        if self
            .claim
            .compare_exchange(token, MOVING, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return 0;
        }
        for slot in &self.slots[..len as usize] {
            // Relaxed: published by the owner's Release store of `state`.
            take(slot.load(Ordering::Relaxed));
        }
        // Release: the reads above happen before the owner's next use of
        // the slots (its Acquire load of `claim`).
        self.claim.store(DRAINED, Ordering::Release);
        len as usize
    }

    /// Empties the bag through exclusive access to the pool (no owner is
    /// inside a push): calls `take` with each entry.
    pub(crate) fn drain_exclusive(&self, mut take: impl FnMut(u32)) {
        // Relaxed: exclusive access orders everything.
        if self.claim.load(Ordering::Relaxed) != DRAINED {
            let len = self.state.load(Ordering::Relaxed) & !BUSY;
            for slot in &self.slots[..len as usize] {
                take(slot.load(Ordering::Relaxed));
            }
        }
        self.state.store(0, Ordering::Relaxed);
        self.claim.store(0, Ordering::Relaxed);
    }
}
