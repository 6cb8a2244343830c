//! Panics of the wakers the pool calls: caught where they happen, kept
//! aside, and resumed once the pool's state is whole again.
//!
//! # Why
//!
//! A release that finds waiters wakes one of them, and a task's `Waker` is
//! user code: it may panic. The wake happens in the middle of protocol
//! steps that must complete: an owned release's tail is open (`TAIL` in
//! its magazine, or the guard's share of `Shared::owned` not yet given
//! back), a sweep has more pushes to wake waiters for, the fair queue's
//! close has more tickets to wake. A panic that unwound from the wake
//! would skip the rest: `Pool::drop` would spin on the tail forever, the
//! last guard would never free the pool, a waiter would wait for a
//! wake-up that never comes. (No wake runs while a sweep claims a
//! magazine: sweeps wake once they have let go of every one.)
//!
//! Unwinding out of event-listener's `notify` is worse still: it marks
//! the listener notified and only then wakes it and counts the
//! notification, so a panic leaves its count one short, and its next
//! listener drop underflows (a debug build panics there). Catching around
//! `notify` cannot repair that count, so the pool never gives
//! event-listener a task's waker: its listeners are blocked threads only,
//! whose wake-ups are unparks, and a waiting task queues a ticket (see
//! `engine/wait`), whose waker the pool calls itself, through [`catch`].
//!
//! # The rule
//!
//! Every call into a waker (its `wake`, and the drop of every waker the
//! pool stored: a ticket's, through `Ticket`'s drop) goes through
//! [`catch`], which keeps the first panic in a thread-local slot (later
//! ones of the same operation are dropped). The operation runs to its end
//! as if the wake had returned, and then:
//!
//! - a release (a guard's drop or `detach`, a scope's drop) takes the panic
//!   with [`take`] after the cold path that woke, carries it out as it
//!   carries a reset closure's panic, and resumes it after `Shared::finish`,
//!   when nothing of the pool is in use any more;
//! - `close` and a dropped async acquire resume it at their end;
//! - an acquire that woke other waiters (moving slots out of other threads'
//!   caches, growing the pool, or passing on a notification its listener
//!   got) drops it, and so do `attach` and `trim`: the acquire is not the
//!   waker's caller in any sense its own caller could act on, and it may
//!   hold a slot that an unwind would lose.
//!
//! The thread-local is read only on cold paths that may have woken
//! someone (the release paths read it only after a wake-up), each before
//! its operation returns, so a panic kept there never outlives the
//! operation that caught it.
//!
//! # Nesting
//!
//! A waker is user code, and may itself use a pool (this one or another):
//! a `close` wakes W1, whose `wake` panics, then W2, whose `wake` releases
//! a guard of another pool. That release must neither resume W1's panic
//! (inside W2, which would never finish) nor drop it (an acquire there
//! drops what it finds). So [`call`] sets the slot aside before it runs
//! the user code and puts it back after: the operations nested inside a
//! waker see an empty slot, take only what they caught themselves, and the
//! outer operation finds its own panic where it left it. A nested
//! operation leaves nothing behind (each takes before it returns); should
//! one ever do, `call` drops it rather than mix it into the outer one's.
//!
//! # A task's own waker
//!
//! A poll clones its task's waker to queue it ([`clone_waker`]). The clone
//! runs before the poll queues anything (at most, the task is counted as
//! waiting), and its panic goes on at once, out of the poll: the future's
//! drop then ends the wait, as for any future dropped while it waits.
//!
//! A thread that already unwinds never resumes a second panic (that would
//! abort): the first one goes on and the caught one is dropped.
//!
//! The path where nobody waits never reaches this module: it wakes nobody.

use core::cell::Cell;
use std::panic::{self, AssertUnwindSafe};

/// A panic's payload, as `catch_unwind` returns it.
pub(crate) type Payload = Box<dyn core::any::Any + Send>;

std::thread_local! {
    /// The first waker panic caught on this thread and not taken yet.
    static CAUGHT: Cell<Option<Payload>> = const { Cell::new(None) };
}

/// Runs `f`, a call into a waker, and keeps its panic for [`take`]
/// (unless an earlier panic of this operation is kept already: see
/// [`call`] for what `f` sees).
pub(crate) fn catch(f: impl FnOnce()) {
    if let Some(payload) = call(f) {
        keep(payload);
    }
}

/// Runs `f`, user code, with this thread's kept panic set aside (see
/// "Nesting" in the module docs), and returns `f`'s panic.
#[cold]
pub(crate) fn call(f: impl FnOnce()) -> Option<Payload> {
    let saved = take();
    let panicked = panic::catch_unwind(AssertUnwindSafe(f)).err();
    // Operations nested in `f` take what they catch before they return:
    // nothing is left here. Whatever is, is not the outer operation's.
    discard(take());
    if saved.is_some() {
        let mut saved = saved;
        // `try_with`: during the thread's exit the slot may be gone; the
        // panic is then dropped.
        let _ = CAUGHT.try_with(|slot| slot.set(saved.take()));
        discard(saved);
    }
    panicked
}

/// Clones a task's waker for the pool to keep: user code, run with this
/// thread's kept panic set aside (see "Nesting"). A panicking clone
/// unwinds from here: the caller calls it before it changes anything (see
/// "A task's own waker" in the module docs).
#[cold]
pub(crate) fn clone_waker(waker: &core::task::Waker) -> core::task::Waker {
    let mut cloned = None;
    if let Some(payload) = call(|| cloned = Some(waker.clone())) {
        panic::resume_unwind(payload);
    }
    cloned.expect("a clone that returned")
}

/// Keeps `payload` unless an earlier panic is kept already.
#[cold]
fn keep(payload: Payload) {
    // `try_with`: during the thread's exit the slot may be gone; the panic
    // is then dropped.
    let rejected = CAUGHT
        .try_with(|slot| {
            let first = slot.take();
            match first {
                Some(first) => {
                    slot.set(Some(first));
                    Some(payload)
                }
                None => {
                    slot.set(Some(payload));
                    None
                }
            }
        })
        .unwrap_or(None);
    discard(rejected);
}

/// Takes the panic kept on this thread, if any.
#[cold]
pub(crate) fn take() -> Option<Payload> {
    CAUGHT.try_with(Cell::take).unwrap_or(None)
}

/// Drops the panic kept on this thread, if any: for operations that do
/// not resume a waker's panic (see the module docs).
#[cold]
pub(crate) fn drop_caught() {
    discard(take());
}

/// The first of two panics; the second is dropped.
pub(crate) fn first(a: Option<Payload>, b: Option<Payload>) -> Option<Payload> {
    match a {
        Some(a) => {
            discard(b);
            Some(a)
        }
        None => b,
    }
}

/// Drops a panic's payload, whose own drop may panic (that panic is
/// dropped too).
#[inline]
pub(crate) fn discard(payload: Option<Payload>) {
    if let Some(payload) = payload {
        discard_now(payload);
    }
}

/// [`discard`] with a panic to drop: out of line, so that callers on hot
/// paths keep only the test.
#[cold]
#[inline(never)]
fn discard_now(payload: Payload) {
    // The payload's drop is user code: run with the kept panic set aside
    // (see "Nesting"), its own panic dropped.
    drop(call(move || drop(payload)));
}

/// Resumes `payload`, unless this thread already unwinds (a second panic
/// would abort): then it is dropped and the first panic goes on.
///
/// Inlined: a guard's drop calls it after every release, and with nobody
/// waiting `payload` is `None` and this is one test of a register.
#[inline]
pub(crate) fn resume(payload: Option<Payload>) {
    if let Some(payload) = payload {
        resume_now(payload);
    }
}

/// [`resume`] with a panic to resume.
#[cold]
#[inline(never)]
fn resume_now(payload: Payload) {
    if std::thread::panicking() {
        discard(Some(payload));
    } else {
        panic::resume_unwind(payload);
    }
}
