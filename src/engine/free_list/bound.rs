//! The movable bound ([`Pool::set_capacity`](crate::Pool::set_capacity)):
//! the credit of slots the pool may still put in service, and the slots it
//! has withdrawn from service.
//!
//! # Protocol
//!
//! `credit` (on the head's cache line) is the bound minus the slots in
//! service (allocated and not withdrawn). Positive, it is room: an elastic
//! pool may grow that many slots, and a raise gives withdrawn slots back
//! against it. Negative, it is a *debt*: that many slots in service must
//! leave it, and since the lowering already withdrew every free slot it
//! could find, they are held ones, which withdraw as they come back.
//!
//! Only a `set_capacity` call (one at a time, under the pool's resize
//! lock) makes the credit negative: it subtracts, then
//! [announces](FreeList::announce_debt) the debt with a CAS of the head that
//! sets the waiter flag and bumps the tag. From then on, until the debt is
//! paid, every push that could put a slot back in reach of an acquire
//! withdraws it instead ([`withdraw`](FreeList::withdraw)), paying one unit:
//!
//! - A push (`push`, `push_linked` and the batches, a fair queue's
//!   `push_clearing_waiters`) reads the head by an Acquire load or failed
//!   CAS, and CASes from that exact word. If the lowering's announcement
//!   is after that word in the head's modification order, the CAS fails
//!   and the push reads again; if it is at or before it, the load
//!   synchronizes with the announcement (every later write of the head is
//!   a read-modify-write, in its release sequence), so the push sees the
//!   flag and the debt, and withdraws its slot. The check is on the flag
//!   first: a push while nobody waits and nothing is owed tests a bit of
//!   the word it loaded anyway, and loads nothing more. A fair pool's
//!   `push_unless_waiters` pushes nothing while the flag is set: its
//!   caller hands the slot off instead (next point).
//! - The flag stays set while the debt lasts: every clear of it
//!   (`clear_waiters`, the fair queue's) checks the debt after reading the
//!   head it CASes from, by the same argument.
//! - A release that hands its slot straight to a waiter (a fair pool's, or
//!   a barging pool's starving waiter's ticket) checks the debt under the
//!   ticket queue's lock, and withdraws the slot instead: a ticket queued
//!   after `set_capacity` returned took that lock after the lowering, so
//!   the release, which takes it after the ticket did, sees the debt.
//! - Slots in per-thread caches: the lowering counts itself in the wait
//!   queue's `waiting` word (its `RETIRING` bit), so every owner flushes
//!   after each operation and every release skips the caches, as for a
//!   waiter; then it sweeps the caches, and then it pops the free list,
//!   withdrawing what it pops until the debt is paid or the list is empty.
//!
//! # Room
//!
//! Waiters never look at the credit while they sleep. A raise that gives
//! room (an elastic pool may grow) bumps the head's tag with a CAS after
//! raising the credit ([`bump_for_room`](FreeList::bump_for_room)); a
//! waiter's flag CAS in `register_waiter` is refused while there is room
//! ([`room_to_grow`](FreeList::room_to_grow), read after the head). Both are
//! read-modify-writes of the head, so one is first: if the waiter's, the
//! raise's CAS reads the flag and wakes the waiters (every listener, and a
//! growth for each queued ticket); if the raise's, the waiter read it (or
//! a later word) and sees the room, and grows instead of parking.
//!
//! So once `set_capacity` returns, a slot reaches an acquire only if no
//! debt is left: the number of slots held by guards never rises above the
//! bound, and while it is above (the guards held when it was lowered),
//! every release lowers it by one.
//!
//! Every change of the credit is made under the withdrawn list's lock (a
//! payment with its slot, a raise's unit with the slot it takes back, a
//! growth's room): the list and the credit never disagree. The lock is
//! held for a `Vec` push or pop only, never across user code.

use super::FreeList;
use crate::sync::Ordering;

impl FreeList {
    /// Whether slots in service are owed (the credit is negative). The
    /// caller read the head with the waiter flag set by an Acquire load or
    /// a failed CAS, or holds the ticket queue's lock, which orders the
    /// lowering's subtraction before this load where it must be (see the
    /// module docs).
    #[inline]
    pub(crate) fn in_debt(&self) -> bool {
        if cfg!(all(loom, tagpool_loom_push_ignores_debt)) {
            // Loom-only fault injection: pushes that never withdraw.
            return false;
        }
        // Relaxed: see above.
        self.head.credit.load(Ordering::Relaxed) < 0
    }

    /// Whether slots in service are owed now (a snapshot, for the caller of
    /// `set_capacity`, which holds the resize lock).
    pub(crate) fn in_debt_now(&self) -> bool {
        self.credit() < 0
    }

    /// The credit: the bound minus the slots in service (a snapshot).
    pub(crate) fn credit(&self) -> i64 {
        // Relaxed: a snapshot; the protocol's decisions are CASes.
        self.head.credit.load(Ordering::Relaxed)
    }

    /// Withdraws the slot `index`, owned by the caller, if a debt is owed:
    /// pays one unit and keeps the slot out of service. Returns whether it
    /// did; `false` means no debt is left and the caller gives the slot
    /// back as usual.
    pub(crate) fn withdraw(&self, index: u32) -> bool {
        let mut withdrawn = self.lock_withdrawn();
        // Relaxed: every change of the credit is made under this lock,
        // which orders them; the pushes' view of the debt is ordered by the
        // head (see the module docs).
        let credit = self.head.credit.load(Ordering::Relaxed);
        if credit >= 0 {
            return false;
        }
        // Relaxed: as above.
        self.head.credit.store(credit + 1, Ordering::Relaxed);
        withdrawn.push(index);
        // Relaxed: a statistic (and the peak's `in_use`), not a protocol.
        self.head.withdrawn.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// [`withdraw`](Self::withdraw) for the top `n` slots of a chain linked
    /// from `top`, owned by the caller: withdraws from the top while a debt
    /// is owed. Returns the new top and how many are left to push.
    pub(super) fn withdraw_chain(&self, mut top: u32, mut n: u32) -> (u32, u32) {
        while n > 0 {
            // The link below `top` is read before `top` leaves the chain.
            let below = self.link_of(top);
            if !self.withdraw(top) {
                break;
            }
            top = below;
            n -= 1;
        }
        (top, n)
    }

    /// Adds `delta` to the credit (a raise, or a lowering's subtraction)
    /// and returns the credit before. Under the pool's resize lock.
    pub(crate) fn add_credit(&self, delta: i64) -> i64 {
        // The withdrawn list's lock: a payment's check and CAS are atomic
        // with respect to this change (see the module docs).
        let _withdrawn = self.lock_withdrawn();
        // AcqRel: Release orders a lowering's subtraction before its
        // announcement's CAS for the pushes that read it (the CAS is
        // sequenced after this anyway); Acquire takes the payments'.
        self.head.credit.fetch_add(delta, Ordering::AcqRel)
    }

    /// Takes room for `wanted` new slots (an elastic growth): returns how
    /// many of them may serve; the rest the grower withdraws at once
    /// ([`withdraw_new`](Self::withdraw_new)).
    pub(crate) fn take_room(&self, wanted: u32) -> u32 {
        let _withdrawn = self.lock_withdrawn();
        // Relaxed: under the lock, as in `withdraw`.
        let credit = self.head.credit.load(Ordering::Relaxed);
        let take = credit.clamp(0, i64::from(wanted));
        // Relaxed: under the lock.
        self.head.credit.store(credit - take, Ordering::Relaxed);
        take as u32
    }

    /// Keeps the new slot `index` of a growth out of service, without room
    /// for it (see [`take_room`](Self::take_room)).
    pub(crate) fn withdraw_new(&self, index: u32) {
        self.lock_withdrawn().push(index);
        // Relaxed: a statistic.
        self.head.withdrawn.fetch_add(1, Ordering::Relaxed);
    }

    /// Takes a withdrawn slot back into service against a unit of credit,
    /// if the credit is positive and a slot is withdrawn: the caller then
    /// owns the slot and gives it back (a raise).
    pub(crate) fn reinstate(&self) -> Option<u32> {
        let mut withdrawn = self.lock_withdrawn();
        // Relaxed: under the lock, as in `withdraw`.
        if self.head.credit.load(Ordering::Relaxed) <= 0 {
            return None;
        }
        let index = withdrawn.pop()?;
        // Relaxed: under the lock.
        self.head.credit.fetch_sub(1, Ordering::Relaxed);
        // Relaxed: a statistic.
        self.head.withdrawn.fetch_sub(1, Ordering::Relaxed);
        Some(index)
    }

    /// The withdrawn slots (a copy), for a caller that owns them: the
    /// resize lock's holder, which alone takes them back.
    pub(crate) fn withdrawn(&self) -> Vec<u32> {
        self.lock_withdrawn().clone()
    }

    /// How many slots are withdrawn (a snapshot).
    #[inline]
    pub(crate) fn withdrawn_count(&self) -> u32 {
        // Relaxed: a statistic.
        self.head.withdrawn.load(Ordering::Relaxed)
    }

    /// Whether the pool may grow now: segments are left and the bound has
    /// room for them. A waiter that reads this after the head word in
    /// `register_waiter` (an Acquire load or a failed CAS) sees the room of
    /// every raise whose [`bump_for_room`](Self::bump_for_room) is at or
    /// before that word (see the module docs, "Room").
    #[inline]
    pub(crate) fn room_to_grow(&self) -> bool {
        !self.growth.complete() && self.credit() > 0
    }

    /// Whether every segment is grown (a snapshot, for the statistics).
    pub(crate) fn growth_complete(&self) -> bool {
        self.growth.complete()
    }

    /// A raise's side of "Room": bumps the head's tag with a CAS, after
    /// the credit was raised, and returns whether the word it replaced
    /// had the waiter flag set: then waiters may have parked without
    /// seeing the room, and the caller wakes them to grow.
    pub(crate) fn bump_for_room(&self) -> bool {
        // Relaxed: the CAS below decides.
        let mut head = self.head.word.load(Ordering::Relaxed);
        loop {
            // AcqRel: Release publishes the raised credit to a waiter whose
            // flag CAS comes later (it fails and reads this word, or a
            // later one); Acquire takes the registration of a waiter whose
            // flag this word carries.
            match self.head.word.compare_exchange_weak(
                head,
                head.wrapping_add(self.layout.tag_one()),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return self.layout.waiters(head),
                Err(actual) => head = actual,
            }
        }
    }

    /// Announces a debt: sets the waiter flag and bumps the tag with a CAS
    /// of the head, whatever it holds, so that every push whose CAS comes
    /// later sees the flag and the debt (see the module docs).
    pub(crate) fn announce_debt(&self) {
        if cfg!(all(loom, tagpool_loom_debt_unannounced)) {
            // Loom-only fault injection: a debt that the pushes never see
            // unless a waiter set the flag.
            return;
        }
        let layout = self.layout;
        // Relaxed: the CAS below decides.
        let mut head = self.head.word.load(Ordering::Relaxed);
        loop {
            // AcqRel: Release publishes the credit's subtraction to the
            // pushes that read this word or a later one; Acquire keeps the
            // head's release sequence for the waiters' edge (as a waiter's
            // flag CAS, see `register_waiter`).
            match self.head.word.compare_exchange_weak(
                head,
                layout.flagged(head, true),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return,
                Err(actual) => head = actual,
            }
        }
    }

    fn lock_withdrawn(&self) -> crate::sync::MutexGuard<'_, Vec<u32>> {
        self.withdrawn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}
