//! The fair hand-off queue of pools built with
//! [`Builder::fair`](crate::Builder::fair): waiters queue *tickets* in
//! arrival order, and a release that finds waiters hands its slot to the
//! first ticket instead of pushing it.
//!
//! # Protocol
//!
//! The free list's waiter flag means "tickets may be queued". Every change
//! to the queue, and to a ticket's outcome or waker, happens under the
//! queue's lock.
//!
//! - A waiter that found the list empty takes the lock, sets the flag with
//!   the CAS of [`FreeList::register_waiter`] (which fails if a slot came
//!   free: it pops instead, or if the pool closed), and queues its ticket
//!   with the waker to call (a parked thread's handle, or a task's
//!   `Waker`).
//! - A release pushes only onto a head without the flag
//!   ([`FreeList::push_unless_waiters`]: the flag is part of the word its
//!   CAS compares). Seeing the flag, it keeps the slot, takes the lock,
//!   pops the first ticket, stores the slot's index as the ticket's
//!   outcome (Release), clears the flag if the queue is now empty, takes
//!   the ticket's waker, and wakes it after unlocking. If every ticket has
//!   left, it pushes the slot and clears the flag in one CAS.
//! - A waiter reads its outcome (Acquire). A task polled again re-registers
//!   its waker under the lock if it changed, checking the outcome there
//!   first. A waiter that gives up (a timeout, a dropped future) takes the
//!   lock: a ticket still queued leaves the queue (and the flag is cleared
//!   if it was the last); one already served has an outcome, which the
//!   waiter now owns: a timed-out thread takes the slot, a dropped future
//!   hands it on.
//! - [`close`](FairQueue::close) sets the closed flag and serves every
//!   ticket with the closed outcome, under the lock.
//!
//! So the flag is set only while the list is empty, and tickets are queued
//! only while the flag is set: an arriving thread can pop only when no
//! ticket waits, and never takes a slot ahead of one. The lock is taken
//! only by waiters and by releases that find waiters; nothing runs under it
//! but list operations and CASes (wake-ups happen after unlocking).
//!
//! A barging pool uses the same queue for the waiters that passed its
//! starvation bound (see "Starvation bound" in `engine/wait`). There the flag
//! also stands for the event's listeners, so the queue never clears it,
//! and a release serves the first ticket with a slot it pops back off the
//! list ([`serve_from_list`](FairQueue::serve_from_list)) instead of one it
//! kept.

use core::ops::DerefMut;
use core::task::Waker;
use std::collections::VecDeque;

use crate::engine::free_list::{FreeList, Popped, Register};
use crate::error::AcquireError;
use crate::sync::{AtomicU32, AtomicU64, ModelArc as Arc, Mutex, Ordering, Thread, UnsafeCell};

/// [`Ticket::state`] while its waiter waits.
const WAITING: u32 = u32::MAX;
/// [`Ticket::state`] once the pool closed under it.
const CLOSED: u32 = u32::MAX - 1;

/// How to wake a ticket's waiter.
#[derive(Debug)]
pub(crate) enum Wake {
    /// A blocked thread: unpark it.
    Thread(Thread),
    /// A pending future: wake its task.
    Task(Waker),
}

impl Wake {
    fn wake(self) {
        match self {
            Wake::Thread(thread) => thread.unpark(),
            // A task's waker may panic: caught and kept for the caller to
            // resume once its operation is complete (see `unwind.rs`), so
            // that a close still wakes every other ticket and a release
            // still ends its tail.
            Wake::Task(waker) => crate::engine::unwind::catch(move || waker.wake()),
        }
    }
}

/// A fair waiter's place in the queue.
///
/// # Invariants
///
/// - `state` is [`WAITING`] while the ticket is queued; it is written once,
///   under the queue's lock, when the ticket leaves the queue by being
///   served.
/// - `wake` is accessed only under the queue's lock, or by the thread that
///   made the ticket before it is queued.
/// - `in_use` is written before `state`, by the thread that serves the
///   ticket.
#[derive(Debug)]
pub(crate) struct Ticket {
    /// [`WAITING`], then a slot index handed over (owned by the ticket's
    /// waiter from then on) or [`CLOSED`].
    state: AtomicU32,
    /// How many slots are held once this ticket is served, for the waiter
    /// to record as the peak (a pop's own record): in a barging pool, the
    /// slots out of the free list just after the pop that took this
    /// ticket's slot back out of it; in a fair pool, those out of the list
    /// at the hand-off, less the slots the serving thread still has out
    /// without holding them (the rest of an idle chain it gives back).
    /// A fair hand-off takes nothing out of the list, but the slot may
    /// come from outside every guard (an idle slot a trim passes on, a
    /// grown one), so the waiter can hold more than any pop recorded.
    in_use: AtomicU32,
    /// The waiter to wake when the ticket is served.
    wake: UnsafeCell<Option<Wake>>,
}

// SAFETY: `state` is atomic, and `wake` is accessed only under the queue's
// lock (see the invariants), which orders every access; a `Wake` is `Send`
// (a `Thread` handle or a `Waker`), so moving one between threads through
// the lock is sound.
unsafe impl Sync for Ticket {}

impl Ticket {
    /// A ticket that is not queued yet, waking `wake` once served. The
    /// caller queues it with [`FairQueue::enqueue`] (as often as that
    /// finds a slot free instead), and keeps its own `Arc` until the wait
    /// ends.
    pub(crate) fn new(wake: Wake) -> Arc<Self> {
        Arc::new(Self {
            state: AtomicU32::new(WAITING),
            in_use: AtomicU32::new(0),
            wake: UnsafeCell::new(Some(wake)),
        })
    }

    /// The ticket's outcome, once it has one: the slot handed over (now the
    /// caller's), or closed.
    pub(crate) fn outcome(&self) -> Option<Result<u32, AcquireError>> {
        // Acquire: pairs with the Release store in `hand_off` (the slot's
        // value, written by the releasing thread, is this waiter's now) or
        // in `close`.
        match self.state.load(Ordering::Acquire) {
            WAITING => None,
            CLOSED => Some(Err(AcquireError::Closed)),
            index => Some(Ok(index)),
        }
    }

    /// After an outcome of `Ok`: the slots out of the free list once the
    /// slot was popped for this ticket (0 if it was never in the list).
    pub(crate) fn in_use(&self) -> u32 {
        // Relaxed: written before the Release store of `state` that the
        // caller's `outcome` read (Acquire).
        self.in_use.load(Ordering::Relaxed)
    }

    /// Replaces the waker.
    ///
    /// # Safety
    ///
    /// The caller holds the queue's lock, or made the ticket and has not
    /// queued it yet.
    unsafe fn set_wake(&self, wake: Wake) {
        // SAFETY: no other access to `wake` can overlap (the contract).
        self.wake.get_mut().with(|w| unsafe { *w = Some(wake) });
    }

    /// Takes the waker out.
    ///
    /// # Safety
    ///
    /// As [`set_wake`](Self::set_wake).
    unsafe fn take_wake(&self) -> Option<Wake> {
        // SAFETY: the contract.
        self.wake.get_mut().with(|w| unsafe { (*w).take() })
    }

    /// Whether the stored waker would wake the same task as `waker`.
    ///
    /// # Safety
    ///
    /// As [`set_wake`](Self::set_wake).
    unsafe fn wakes(&self, waker: &Waker) -> bool {
        // SAFETY: the contract.
        self.wake
            .get_mut()
            .with(|w| unsafe { matches!(&*w, Some(Wake::Task(stored)) if stored.will_wake(waker)) })
    }
}

impl Drop for Ticket {
    /// A ticket that still holds a task's waker (never served: its future
    /// was dropped, or it found a slot or a closed pool before it was
    /// queued) drops it here, wherever the last `Arc` goes: user code,
    /// caught (see `unwind.rs`), so that the caller's bookkeeping after
    /// the drop (a waiting count, a starving count) always runs.
    fn drop(&mut self) {
        // `&mut self`: no other access to `wake` can exist.
        let wake = self.wake.get_mut().with(|w| {
            // SAFETY: `&mut self` is the only reference to the ticket.
            unsafe { (*w).take() }
        });
        if let Some(Wake::Task(waker)) = wake {
            crate::engine::unwind::catch(move || drop(waker));
        }
    }
}

/// What a waiter's attempt to queue found.
pub(crate) enum Enqueue {
    /// Queued: wait for the ticket's outcome.
    Queued,
    /// A slot came free: pop it instead.
    Available,
    /// The pool is closed.
    Closed,
}

/// The queue of tickets, in arrival order; every queued ticket is
/// [`WAITING`].
#[derive(Debug)]
pub(crate) struct FairQueue {
    tickets: Mutex<VecDeque<Arc<Ticket>>>,
    /// Whether the queue owns the waiter flag. In a fair pool (`true`) the
    /// flag means only "tickets may be queued", and the queue clears it
    /// when it empties. In a barging pool (`false`) the queue holds only
    /// starving waiters' tickets, the flag also stands for the event's
    /// listeners, and the queue never clears it: only a release's wake
    /// does, once it finds no listener left and no starving waiter (see
    /// "Starvation bound" in `engine/wait`).
    owns_flag: bool,
    /// The queue's length, stored under the lock after each change: a
    /// statistic ([`Stats::queued_waiters`](crate::Stats::queued_waiters)).
    len: AtomicU32,
    /// Tickets served with a slot, counted under the lock (a load and a
    /// store, no read-modify-write): a statistic
    /// ([`Stats::handoffs`](crate::Stats::handoffs)).
    served: AtomicU64,
}

impl FairQueue {
    /// The queue of a fair pool (`owns_flag`) or of a barging pool's
    /// starving waiters.
    pub(crate) fn new(owns_flag: bool) -> Self {
        Self {
            tickets: Mutex::new(VecDeque::new()),
            owns_flag,
            len: AtomicU32::new(0),
            served: AtomicU64::new(0),
        }
    }

    /// How many tickets were served with a slot.
    pub(crate) fn served(&self) -> u64 {
        // Relaxed: a statistic.
        self.served.load(Ordering::Relaxed)
    }

    /// How many tickets are queued (a snapshot).
    pub(crate) fn len(&self) -> u32 {
        // Relaxed: a statistic.
        self.len.load(Ordering::Relaxed)
    }

    /// The number of queued tickets, read under the lock: exact.
    pub(crate) fn len_locked(&self) -> usize {
        self.lock().len()
    }

    /// Records the length of the locked `queue` after a change.
    fn note_len(&self, queue: &VecDeque<Arc<Ticket>>) {
        // Relaxed: a statistic; the lock orders the stores.
        self.len.store(queue.len() as u32, Ordering::Relaxed);
    }

    /// Whether emptying the queue clears the waiter flag.
    fn clears_flag(&self) -> bool {
        // Loom-only fault injection (`tagpool_loom_ticket_clears_flag`): a
        // barging pool's queue that clears the flag as a fair pool's does,
        // dropping the flag of a listener registered meanwhile.
        self.owns_flag || cfg!(all(loom, tagpool_loom_ticket_clears_flag))
    }

    fn lock(&self) -> impl DerefMut<Target = VecDeque<Arc<Ticket>>> + '_ {
        // No code that can panic runs under the lock (no user code, no
        // wake-up): a poisoned lock still holds a consistent queue.
        self.tickets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `ticket` (made by [`Ticket::new`], not queued yet), if the
    /// list is empty and the pool open. The caller made it before, so
    /// that the lock is held only for the CAS and the push, and keeps it:
    /// no waker is cloned or dropped here.
    pub(crate) fn enqueue(&self, free: &FreeList, ticket: &Arc<Ticket>) -> Enqueue {
        let mut queue = self.lock();
        match free.register_waiter() {
            Register::Available => Enqueue::Available,
            Register::Closed => Enqueue::Closed,
            Register::Parked => {
                queue.push_back(Arc::clone(ticket));
                self.note_len(&queue);
                Enqueue::Queued
            }
        }
    }

    /// For a task polled again: stores `waker` if the ticket holds another
    /// one. Returns the outcome instead if the ticket was served meanwhile.
    pub(crate) fn register(
        &self,
        ticket: &Ticket,
        waker: &Waker,
    ) -> Option<Result<u32, AcquireError>> {
        {
            let _queue = self.lock();
            // Under the lock the outcome is final: it is written under it.
            if let Some(outcome) = ticket.outcome() {
                return Some(outcome);
            }
            // `will_wake` compares the wakers' data and vtables: no user
            // code. SAFETY: the queue's lock is held (`_queue`).
            if unsafe { ticket.wakes(waker) } {
                return None;
            }
        }
        // The clone is user code: never under the lock. A panic unwinds
        // from here, with nothing changed (see `unwind.rs`).
        let new = crate::engine::unwind::clone_waker(waker);
        let queue = self.lock();
        let (outcome, old) = match ticket.outcome() {
            // Served meanwhile: the new waker is not needed.
            Some(outcome) => (Some(outcome), Some(Wake::Task(new))),
            None => {
                // SAFETY: the queue's lock is held (`queue`).
                let old = unsafe { ticket.take_wake() };
                // SAFETY: as above.
                unsafe { ticket.set_wake(Wake::Task(new)) };
                (None, old)
            }
        };
        drop(queue);
        // A waker's drop is user code: outside the lock, and caught (see
        // `unwind.rs`; the poll drops the panic).
        if let Some(old) = old {
            crate::engine::unwind::catch(move || drop(old));
        }
        outcome
    }

    /// Takes `ticket` out of the queue for a waiter that gives up. `None`
    /// if it was still waiting (it is gone now); its outcome if it was
    /// served meanwhile, which the caller now owns.
    pub(crate) fn leave(
        &self,
        free: &FreeList,
        ticket: &Arc<Ticket>,
    ) -> Option<Result<u32, AcquireError>> {
        let mut queue = self.lock();
        if let Some(outcome) = ticket.outcome() {
            return Some(outcome);
        }
        let position = queue.iter().position(|t| Arc::ptr_eq(t, ticket));
        debug_assert!(position.is_some(), "a waiting ticket is queued");
        if let Some(position) = position {
            queue.remove(position);
            self.note_len(&queue);
        }
        if queue.is_empty() && self.clears_flag() {
            free.clear_waiters_locked();
        }
        None
    }

    /// Fair pools: gives the slot `index`, owned by the caller, to the first
    /// queued ticket, or pushes it if none is left. `pending` is how many
    /// other slots the caller has out of the list without a guard (the
    /// rest of a chain it gives back), which the served waiter's peak
    /// does not count.
    #[cold]
    pub(crate) fn hand_off(&self, free: &FreeList, index: u32, pending: u32) {
        let mut queue = self.lock();
        if debt_checked_here() && free.in_debt() && free.withdraw(index) {
            // A lowered bound is owed slots (see `free_list/bound.rs`):
            // checked under the lock, so after the lowering for every
            // ticket queued once `set_capacity` returned.
            return;
        }
        let ticket = match first_for_hand_off(&mut queue) {
            Some(ticket) => ticket,
            None => return free.push_clearing_waiters(index),
        };
        self.note_len(&queue);
        if queue.is_empty() {
            free.clear_waiters_locked();
        }
        // Loom-only fault injection (`tagpool_loom_fair_peak_unrecorded`):
        // the old behaviour, a fair hand-off that leaves the waiter nothing
        // to record, so a waiter handed an idle slot while it holds another
        // may never be counted holding both.
        if !cfg!(all(loom, tagpool_loom_fair_peak_unrecorded)) {
            // Relaxed: a statistic, published to the waiter by `serve`'s
            // Release store of the ticket's state (as in `hand_off_queued`).
            ticket.in_use.store(
                free.in_use(free.free_count()).saturating_sub(pending),
                Ordering::Relaxed,
            );
        }
        serve(self, queue, &ticket, index);
    }

    /// Barging pools: hands the slot `index`, owned by the caller, to the
    /// first queued ticket, if any, or withdraws it while a lowered bound
    /// is owed slots. Returns whether it did either; if not, the caller
    /// still owns the slot and pushes it.
    #[cold]
    pub(crate) fn hand_off_queued(&self, free: &FreeList, index: u32) -> bool {
        let mut queue = self.lock();
        if debt_checked_here() && free.in_debt() && free.withdraw(index) {
            // Withdrawn, not handed (as in `hand_off`): the caller's slot
            // is gone all the same.
            return true;
        }
        let ticket = match first_for_hand_off(&mut queue) {
            Some(ticket) => ticket,
            None => return false,
        };
        self.note_len(&queue);
        // The flag stays: in a barging pool it stands for the listeners
        // too (see the module docs).
        debug_assert!(!self.clears_flag());
        // Relaxed: a statistic, published to the waiter by `serve`'s
        // Release store of the ticket's state. The slot never went to the
        // list, so the slots out of it count it already. (The slot comes
        // from a holder's release, so this never exceeds a peak a pop
        // recorded; stored so that the waiter's record is true, as every
        // other hand-off's is.)
        ticket
            .in_use
            .store(free.in_use(free.free_count()), Ordering::Relaxed);
        serve(self, queue, &ticket, index);
        true
    }

    /// Barging pools: if a starving waiter's ticket is queued, pops a slot
    /// off the free list (most likely the one the caller has just pushed)
    /// and hands it to the first ticket. Returns whether a ticket got one:
    /// not when the queue is empty (nothing is popped then) or the list is
    /// (another thread took the slot first; the ticket stays queued, and
    /// that thread's release serves it).
    #[cold]
    pub(crate) fn serve_from_list(&self, free: &FreeList) -> bool {
        let mut queue = self.lock();
        let ticket = match queue.pop_front() {
            Some(ticket) => ticket,
            None => return false,
        };
        // Under the lock, with the ticket in hand: a popped slot always
        // has a taker, so it never needs to go back.
        let Popped { index, free: left } = match free.pop() {
            Some(popped) => popped,
            None => {
                // Still first in line: the taker's release serves it.
                queue.push_front(ticket);
                return false;
            }
        };
        self.note_len(&queue);
        if queue.is_empty() && self.clears_flag() {
            free.clear_waiters_locked();
        }
        // Relaxed: published by the Release store of `state` in `serve`.
        ticket.in_use.store(free.in_use(left), Ordering::Relaxed);
        serve(self, queue, &ticket, index);
        true
    }

    /// Closes the pool: sets the closed flag and serves every ticket with
    /// the closed outcome. Returns whether this call set the flag.
    pub(crate) fn close(&self, free: &FreeList) -> bool {
        let mut queue = self.lock();
        let closed_now = free.close();
        let mut wakes = Vec::with_capacity(queue.len());
        for ticket in queue.drain(..) {
            // Release: pairs with the Acquire load in `Ticket::outcome`.
            ticket.state.store(CLOSED, Ordering::Release);
            // SAFETY: the queue's lock is held.
            wakes.extend(unsafe { ticket.take_wake() });
        }
        self.note_len(&queue);
        if self.clears_flag() {
            free.clear_waiters_locked();
        }
        drop(queue);
        if !cfg!(all(loom, tagpool_loom_close_no_notify)) {
            wakes.into_iter().for_each(Wake::wake);
        }
        closed_now
    }
}

/// Serves `ticket`, just taken out of the locked `queue` of `fair`, with
/// the slot `index` (owned by the caller until this store): counts it,
/// stores the outcome, takes the waker, unlocks, then wakes the waiter.
/// Takes the first ticket out of the locked `queue`, for a release that
/// hands it a slot it owns.
fn first_for_hand_off(queue: &mut VecDeque<Arc<Ticket>>) -> Option<Arc<Ticket>> {
    if cfg!(all(loom, tagpool_loom_fair_keep_ticket)) {
        // Loom-only fault injection: the ticket stays queued after it is
        // served, and is served again.
        queue.front().cloned()
    } else {
        queue.pop_front()
    }
}

fn serve(
    fair: &FairQueue,
    queue: impl DerefMut<Target = VecDeque<Arc<Ticket>>>,
    ticket: &Ticket,
    index: u32,
) {
    // Relaxed: a statistic, written only under the lock (`queue`).
    let served = fair.served.load(Ordering::Relaxed);
    fair.served.store(served + 1, Ordering::Relaxed);
    // Release: pairs with the Acquire load in `Ticket::outcome`: the slot
    // and its value (and `in_use`) are the waiter's from here on.
    ticket.state.store(index, Ordering::Release);
    // SAFETY: the queue's lock is held (`queue`).
    let wake = unsafe { ticket.take_wake() };
    drop(queue);
    // Outside the lock: a task's waker runs executor code.
    if let Some(wake) = wake {
        wake.wake();
    }
}

/// Whether a hand-off checks a lowered bound's debt under the queue's lock.
/// Loom-only fault injection (`tagpool_loom_debt_checked_early`): the
/// check made before the lock instead (by `WaitQueue::release_among`),
/// which a ticket queued after the lowering slips past.
#[inline(always)]
pub(crate) fn debt_checked_here() -> bool {
    !cfg!(all(loom, tagpool_loom_debt_checked_early))
}
