//! Property tests: random operation sequences checked step by step against a
//! plain sequential model, and random multi-threaded runs checked for
//! exclusivity and conservation.
//!
//! The sequential model covers elastic pools (the storage `Stats::allocated`
//! reports, grown only when every allocated slot is held), trimming (only
//! idle values, exactly those beyond `keep`, each dropped once), draining,
//! and attaching values to empty slots (`Full` exactly when every slot
//! holds a value), with `Stats::filled` checked at every step. It also knows
//! the free list's order where the pool documents it (a stack: the most
//! recently released slot on top, `trim` keeping the values on top), up to
//! ties where it does not (the order of a build's or a growth's slots).
//!
//! The concurrent runs trim, drain and attach too, with and without
//! per-thread caches, and check the storage (`Stats::allocated`: a doubling
//! of the initial size, never shrinking, never below a slot held) and the
//! values (`Stats::filled`) at every step, and that no value is ever dropped
//! while a guard holds it.
//!
//! The injected panics are caught with `catch_unwind`; the panic hook is left
//! alone (libtest captures the messages of passing tests).

use std::any::Any;
use std::collections::HashSet;
use std::mem;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError};
use tagpool::{
    AcquireError, AcquireTimeoutError, AttachError, Builder, OwnedPoolGuard, Pool, PoolGuard,
    Stats, TryAcquireError,
};

mod support;
use support::{watchdog, WAITING};

/// The payload of every panic these tests provoke on purpose.
const INJECTED: &str = "tagpool model: injected panic";

fn config(cases: u32) -> Config {
    let default = Config::default(); // reads `PROPTEST_CASES` and friends
    let cases = if cfg!(miri) {
        4
    } else if std::env::var_os("PROPTEST_CASES").is_some() {
        default.cases
    } else {
        cases
    };
    Config {
        cases,
        // Keep shrinking bounded under miri; never write regression files.
        max_shrink_iters: if cfg!(miri) { 16 } else { 1024 },
        failure_persistence: None,
        ..default
    }
}

// ---------------------------------------------------------------------------
// The payload and the closures
// ---------------------------------------------------------------------------

/// What one pool's factory and reset closures did, shared with its values.
#[derive(Default)]
struct Probe {
    /// How often each value was dropped, indexed by id; the length is the
    /// number of values made.
    drops: Mutex<Vec<u32>>,
    dropped: AtomicUsize,
    factory_calls: AtomicUsize,
    reset_calls: AtomicUsize,
    /// Resets of a value whose holder had not released it yet.
    reset_while_held: AtomicUsize,
    /// The factory (reset) panics while this is set; a fallible factory
    /// (`Setup::fallible`) returns an error instead.
    fail_factory: AtomicBool,
    fail_reset: AtomicBool,
    /// The discard check refuses the value while this is set.
    discard: AtomicBool,
    discard_calls: AtomicUsize,
    /// The discard check refuses call number `n` if `n` is a multiple of
    /// this; 0 never.
    discard_every: AtomicUsize,
    /// The factory (reset) call number `n` panics if `n` is a multiple of
    /// this; 0 never.
    factory_fail_every: AtomicUsize,
    reset_fail_every: AtomicUsize,
    /// Values dropped while their holder's marker was set (a trim or drain
    /// that took a held value), before the pool's own drop.
    dropped_while_held: AtomicUsize,
    /// Set just before the test drops the pool, whose drop drops the values
    /// of leaked guards (still marked held).
    pool_dropping: AtomicBool,
}

impl Probe {
    fn drops(&self) -> MutexGuard<'_, Vec<u32>> {
        self.drops.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn made(&self) -> usize {
        self.drops().len()
    }
}

/// The pooled value: reports its drop and carries the exclusivity marker.
struct Val {
    id: usize,
    /// Set by the test on every acquire, cleared by the reset closure.
    dirty: bool,
    /// Swapped to `true` by the holder on acquire and back on release: two
    /// holders at once would find it already set.
    held: AtomicBool,
    probe: Arc<Probe>,
}

impl Drop for Val {
    fn drop(&mut self) {
        if self.held.load(SeqCst) && !self.probe.pool_dropping.load(SeqCst) {
            self.probe.dropped_while_held.fetch_add(1, SeqCst);
        }
        self.probe.drops()[self.id] += 1;
        self.probe.dropped.fetch_add(1, SeqCst);
    }
}

fn should_fail(flag: &AtomicBool, every: &AtomicUsize, call: usize) -> bool {
    let every = every.load(SeqCst);
    // `call` starts at 1, and no `call` is a multiple of 0.
    flag.load(SeqCst) || (every != 0 && call % every == 0)
}

fn factory(probe: &Arc<Probe>) -> impl Fn() -> Val + Send + Sync + 'static {
    let probe = Arc::clone(probe);
    move || {
        let call = probe.factory_calls.fetch_add(1, SeqCst) + 1;
        if should_fail(&probe.fail_factory, &probe.factory_fail_every, call) {
            panic::panic_any(INJECTED);
        }
        new_val(&probe)
    }
}

/// The factory of a `try_builder` pool: fails where `factory` panics.
fn fallible_factory(
    probe: &Arc<Probe>,
) -> impl Fn() -> Result<Val, &'static str> + Send + Sync + 'static {
    let probe = Arc::clone(probe);
    move || {
        let call = probe.factory_calls.fetch_add(1, SeqCst) + 1;
        if should_fail(&probe.fail_factory, &probe.factory_fail_every, call) {
            return Err(INJECTED);
        }
        Ok(new_val(&probe))
    }
}

/// Whether a factory error is the injected one.
fn is_injected_error(err: &str) -> bool {
    err == INJECTED
}

/// The factory error types the model runs with: `Infallible` (`Pool<Val>`,
/// an infallible factory or none) and `&'static str` (`Pool<Val, &str>`, a
/// fallible factory). The model keeps an error as its text.
trait ModelErr: std::fmt::Display + std::fmt::Debug + 'static {}

impl<E: std::fmt::Display + std::fmt::Debug + 'static> ModelErr for E {}

/// The discard check: refuses while `Probe::discard` is set, or on every
/// `Probe::discard_every`th call. Never called for a held value.
fn discard(probe: &Arc<Probe>) -> impl Fn(&Val) -> bool + Send + Sync + 'static {
    let probe = Arc::clone(probe);
    move |val| {
        if val.held.load(SeqCst) {
            probe.reset_while_held.fetch_add(1, SeqCst);
        }
        let call = probe.discard_calls.fetch_add(1, SeqCst) + 1;
        should_fail(&probe.discard, &probe.discard_every, call)
    }
}

/// What `retain_idle` keeps: values whose id is not `refuse` modulo 3.
fn retained(id: usize, refuse: usize) -> bool {
    id % 3 != refuse
}

/// A value with the next id; the factory's, or one given to
/// `Builder::values`.
fn new_val(probe: &Arc<Probe>) -> Val {
    let id = {
        let mut drops = probe.drops();
        drops.push(0);
        drops.len() - 1
    };
    Val {
        id,
        dirty: false,
        held: AtomicBool::new(false),
        probe: Arc::clone(probe),
    }
}

fn reset(probe: &Arc<Probe>) -> impl Fn(&mut Val) + Send + Sync + 'static {
    let probe = Arc::clone(probe);
    move |val| {
        if val.held.load(SeqCst) {
            // Not a panic: this may run while a failing test unwinds.
            probe.reset_while_held.fetch_add(1, SeqCst);
        }
        let call = probe.reset_calls.fetch_add(1, SeqCst) + 1;
        if should_fail(&probe.fail_reset, &probe.reset_fail_every, call) {
            panic::panic_any(INJECTED);
        }
        val.dirty = false;
    }
}

fn is_injected(payload: &(dyn Any + Send)) -> bool {
    payload.downcast_ref::<&str>() == Some(&INJECTED)
}

#[derive(Clone, Copy, Debug)]
struct Setup {
    capacity: usize,
    lazy: bool,
    reset: bool,
    fair: bool,
    /// Elastic: storage for this many slots at build (at most the
    /// capacity), doubling on demand.
    initial: Option<usize>,
    /// Slots `0..values` start with values the test made
    /// (`Builder::values`), not the factory.
    values: usize,
    /// A discard check (`Builder::discard_if`), driven by the probe.
    discard: bool,
    /// The factory returns errors instead of panicking (`try_builder`).
    fallible: bool,
    /// No factory at all (`Pool::builder_from_values`): every slot starts
    /// with a value, and emptied slots retire.
    no_factory: bool,
}

impl Setup {
    /// The storage at build: an elastic pool's first segment holds the
    /// initial size, and at least the values given.
    fn first(&self) -> usize {
        self.initial.unwrap_or(self.capacity).max(self.values)
    }
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        1..=8usize,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        prop::option::weighted(0.4, 1..=8usize),
        prop_oneof![3 => Just(0usize), 1 => 1..=8usize],
        (any::<bool>(), weighted(&[(3, 0u8), (1, 1), (1, 2)])),
    )
        .prop_map(
            |(capacity, lazy, reset, fair, initial, values, (discard, factory))| {
                // 0: an infallible factory; 1: a fallible one; 2: none.
                let no_factory = factory == 2;
                Setup {
                    capacity,
                    lazy,
                    reset,
                    fair,
                    initial: if no_factory {
                        None
                    } else {
                        initial.map(|n| n.min(capacity))
                    },
                    values: if no_factory {
                        capacity
                    } else {
                        values.min(capacity)
                    },
                    discard,
                    fallible: factory == 1,
                    no_factory,
                }
            },
        )
}

/// The sizes an elastic pool's storage takes, in order: `first`, then
/// doubling, the last cut at the capacity.
fn doublings(first: usize, capacity: usize) -> Vec<usize> {
    let mut sizes = vec![first];
    let mut size = first;
    while size < capacity {
        size = (size * 2).min(capacity);
        sizes.push(size);
    }
    sizes
}

/// The builder of an infallible pool (`setup.fallible` false): a factory,
/// or none.
fn builder(setup: Setup, probe: &Arc<Probe>) -> Builder<Val> {
    assert!(!setup.fallible, "a fallible pool is a `Pool<Val, &str>`");
    let builder = if setup.no_factory {
        Pool::builder_from_values((0..setup.values).map(|_| new_val(probe)).collect())
    } else {
        Pool::builder(factory(probe)).capacity(setup.capacity)
    };
    configure(builder, setup, probe)
}

/// The builder of a fallible pool (`setup.fallible`).
fn fallible_builder(setup: Setup, probe: &Arc<Probe>) -> Builder<Val, &'static str> {
    assert!(setup.fallible && !setup.no_factory);
    configure(
        Pool::try_builder(fallible_factory(probe)).capacity(setup.capacity),
        setup,
        probe,
    )
}

/// The settings of `setup` but the factory, on `builder`.
fn configure<E>(builder: Builder<Val, E>, setup: Setup, probe: &Arc<Probe>) -> Builder<Val, E> {
    // Caches off: the sequential model knows the free list's order, which a
    // thread's cache changes (the concurrent runs switch caches on with
    // `thread_cache_size`, an explicit size the default rule never changes).
    let mut builder = builder.thread_cache(false);
    if setup.discard {
        builder = builder.discard_if(discard(probe));
    }
    if setup.lazy {
        builder = builder.lazy();
    }
    if setup.reset {
        builder = builder.reset(reset(probe));
    }
    if setup.fair {
        builder = builder.fair();
    }
    if let Some(initial) = setup.initial {
        builder = builder.initial(initial);
    }
    if setup.values > 0 && !setup.no_factory {
        builder = builder.values((0..setup.values).map(|_| new_val(probe)).collect());
    }
    builder
}

/// Either kind of guard.
enum Guard<'p> {
    Borrowed(PoolGuard<'p, Val>),
    Owned(OwnedPoolGuard<Val>),
}

impl Guard<'_> {
    fn index(&self) -> usize {
        match self {
            Guard::Borrowed(g) => PoolGuard::index(g),
            Guard::Owned(g) => OwnedPoolGuard::index(g),
        }
    }

    fn val(&self) -> &Val {
        match self {
            Guard::Borrowed(g) => g,
            Guard::Owned(g) => g,
        }
    }

    fn val_mut(&mut self) -> &mut Val {
        match self {
            Guard::Borrowed(g) => g,
            Guard::Owned(g) => g,
        }
    }

    fn is_owned(&self) -> bool {
        matches!(self, Guard::Owned(_))
    }

    fn detach(self) -> Val {
        match self {
            Guard::Borrowed(g) => PoolGuard::detach(g),
            Guard::Owned(g) => OwnedPoolGuard::detach(g),
        }
    }

    /// Leaks a borrowed guard. (A leaked owned guard keeps the pool's
    /// values alive for good, by design: `tests/api.rs` covers that; the
    /// models leak borrowed guards only, so that every value is dropped at
    /// the end.)
    fn forget(self) {
        match self {
            Guard::Borrowed(g) => mem::forget(g),
            Guard::Owned(_) => unreachable!("the models never leak owned guards"),
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Try,
    Wait,
    Timeout(Duration),
    /// An async acquire polled once, then dropped (cancelled) if pending.
    AsyncOnce,
}

/// What an acquire returned: a guard, nothing (exhausted, timed out,
/// cancelled or closed), or a fallible factory's error.
type Acquired<'p> = Result<Option<Guard<'p>>, String>;

/// A guard, `None` for any error but a factory's (as its text).
fn got<G, E: Into<Failed>>(result: Result<G, E>) -> Result<Option<G>, String> {
    match result.map_err(Into::into) {
        Ok(guard) => Ok(Some(guard)),
        Err(Failed(Some(err))) => Err(err),
        Err(Failed(None)) => Ok(None),
    }
}

/// An acquire's error, reduced to the factory's if it is one.
struct Failed(Option<String>);

impl<E: ModelErr> From<TryAcquireError<E>> for Failed {
    fn from(err: TryAcquireError<E>) -> Self {
        match err {
            TryAcquireError::Factory(err) => Failed(Some(err.to_string())),
            _ => Failed(None),
        }
    }
}

impl<E: ModelErr> From<AcquireError<E>> for Failed {
    fn from(err: AcquireError<E>) -> Self {
        match err {
            AcquireError::Factory(err) => Failed(Some(err.to_string())),
            _ => Failed(None),
        }
    }
}

impl<E: ModelErr> From<AcquireTimeoutError<E>> for Failed {
    fn from(err: AcquireTimeoutError<E>) -> Self {
        match err {
            AcquireTimeoutError::Factory(err) => Failed(Some(err.to_string())),
            _ => Failed(None),
        }
    }
}

fn borrowed(got: Result<Option<PoolGuard<'_, Val>>, String>) -> Acquired<'_> {
    got.map(|g| g.map(Guard::Borrowed))
}

fn owned_guard<'p>(got: Result<Option<OwnedPoolGuard<Val>>, String>) -> Acquired<'p> {
    got.map(|g| g.map(Guard::Owned))
}

fn acquire<E: ModelErr>(pool: &Arc<Pool<Val, E>>, owned: bool, kind: Kind) -> Acquired<'_> {
    match (owned, kind) {
        (false, Kind::Try) => borrowed(got(pool.try_acquire())),
        (false, Kind::Wait) => borrowed(got(pool.acquire())),
        (false, Kind::Timeout(t)) => borrowed(got(pool.acquire_timeout(t))),
        (false, Kind::AsyncOnce) => borrowed(poll_once_or_cancel(pool.acquire_async())),
        (true, Kind::Try) => owned_guard(got(pool.try_acquire_owned())),
        (true, Kind::Wait) => owned_guard(got(pool.acquire_owned())),
        (true, Kind::Timeout(t)) => owned_guard(got(pool.acquire_owned_timeout(t))),
        (true, Kind::AsyncOnce) => owned_guard(poll_once_or_cancel(pool.acquire_owned_async())),
    }
}

/// Polls an acquire future once; drops it if it is pending (a cancelled
/// wait) or failed.
fn poll_once_or_cancel<G, F, E>(mut future: F) -> Result<Option<G>, String>
where
    F: std::future::Future<Output = Result<G, AcquireError<E>>> + Unpin,
    E: ModelErr,
{
    let (_, waker) = support::executor::counting();
    match support::executor::poll_once(&mut future, &waker) {
        std::task::Poll::Ready(result) => got(result),
        std::task::Poll::Pending => Ok(None),
    }
}

/// Acquires, catching an injected factory panic (`Err`).
fn acquire_catching<E: ModelErr>(
    pool: &Arc<Pool<Val, E>>,
    owned: bool,
    kind: Kind,
) -> Result<Acquired<'_>, Box<dyn Any + Send>> {
    panic::catch_unwind(AssertUnwindSafe(|| acquire(pool, owned, kind)))
}

/// Releases, catching an injected reset panic (`Err`).
fn release_catching(guard: Guard<'_>) -> Result<(), Box<dyn Any + Send>> {
    panic::catch_unwind(AssertUnwindSafe(move || drop(guard)))
}

/// Every value made was dropped exactly once.
fn assert_all_dropped_once(probe: &Probe) -> Result<(), TestCaseError> {
    prop_assert_eq!(probe.reset_while_held.load(SeqCst), 0, "reset while held");
    prop_assert_eq!(
        probe.dropped_while_held.load(SeqCst),
        0,
        "dropped while held"
    );
    let drops = probe.drops();
    for (id, &n) in drops.iter().enumerate() {
        prop_assert_eq!(n, 1, "value {} dropped {} times", id, n);
    }
    prop_assert_eq!(probe.dropped.load(SeqCst), drops.len());
    Ok(())
}

// ---------------------------------------------------------------------------
// (a) Sequential operations against a model
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    /// Acquire a slot; with `factory_panics`, a fill by the factory panics.
    Acquire {
        owned: bool,
        kind: Kind,
        factory_panics: bool,
    },
    /// Drop guard `k`; with `reset_panics`, the reset closure panics; with
    /// `discard`, the discard check (if the pool has one) refuses the
    /// value.
    Release {
        k: Index,
        reset_panics: bool,
        discard: bool,
    },
    Detach {
        k: Index,
    },
    Forget {
        k: Index,
    },
    /// Drop detached value `k`.
    DropDetached {
        k: Index,
    },
    /// Close the pool.
    Close,
    /// Trim the idle values beyond `keep`.
    Trim {
        keep: usize,
    },
    /// Take every idle value out (they become detached values).
    DrainIdle,
    /// Attach detached value `k` to an empty slot.
    Attach {
        k: Index,
    },
    /// Drop the idle values whose id is `refuse` modulo 3.
    RetainIdle {
        refuse: usize,
    },
}

/// Which operation, before its arguments (see [`weighted`]).
#[derive(Clone, Copy, Debug)]
enum Tag {
    Acquire,
    Release,
    Detach,
    Forget,
    DropDetached,
    Close,
    Trim,
    DrainIdle,
    Attach,
    RetainIdle,
    Send,
    Receive,
    Stats,
}

/// One of `choices`, by weight, as `prop_oneof!` would pick it (and shrinking
/// towards the first, as a union does), but in under a microsecond instead
/// of tens: a union makes a lazy tree, with a copy of the runner, for every
/// arm before the one it picks, and generating the operations was most of
/// these tests' time.
fn weighted<T: Clone + std::fmt::Debug + 'static>(
    choices: &[(usize, T)],
) -> impl Strategy<Value = T> {
    let all: Vec<T> = choices
        .iter()
        .flat_map(|(weight, choice)| std::iter::repeat(choice.clone()).take(*weight))
        .collect();
    prop::sample::select(all)
}

fn op() -> impl Strategy<Value = Op> {
    let tag = weighted(&[
        (30, Tag::Acquire),
        (20, Tag::Release),
        (5, Tag::Detach),
        (5, Tag::Forget),
        (5, Tag::DropDetached),
        // Rare: most sequences should run on an open pool.
        (1, Tag::Close),
        (3, Tag::Trim),
        (1, Tag::DrainIdle),
        (4, Tag::Attach),
        (2, Tag::RetainIdle),
    ]);
    let kind = weighted(&[
        (1, Kind::Try),
        (1, Kind::Wait),
        (1, Kind::Timeout(Duration::ZERO)),
        (1, Kind::AsyncOnce),
    ]);
    // Mostly below the idle values, sometimes above the capacity.
    let keep = weighted(&[
        (3, 0usize),
        (3, 1),
        (3, 2),
        (1, 3),
        (1, 4),
        (1, 5),
        (1, 6),
        (1, 7),
        (1, 8),
    ]);
    let panics = prop::bool::weighted(0.2);
    let discards = prop::bool::weighted(0.3);
    (
        tag,
        any::<Index>(),
        any::<bool>(),
        kind,
        panics,
        keep,
        discards,
    )
        .prop_map(|(tag, k, owned, kind, panics, keep, discard)| match tag {
            Tag::Acquire => Op::Acquire {
                owned,
                kind,
                factory_panics: panics,
            },
            Tag::Release => Op::Release {
                k,
                reset_panics: panics,
                discard,
            },
            Tag::Detach => Op::Detach { k },
            Tag::Forget => Op::Forget { k },
            Tag::DropDetached => Op::DropDetached { k },
            Tag::Close => Op::Close,
            Tag::Trim => Op::Trim { keep },
            Tag::DrainIdle => Op::DrainIdle,
            Tag::Attach => Op::Attach { k },
            Tag::RetainIdle => Op::RetainIdle { refuse: keep % 3 },
            Tag::Send | Tag::Receive | Tag::Stats => unreachable!("not weighted"),
        })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ModelValue {
    id: usize,
    dirty: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct ModelSlot {
    held: bool,
    forgotten: bool,
    value: Option<ModelValue>,
    /// Where the slot sits on the free list while it is idle and allocated:
    /// higher is nearer the top. Slots at the same position are in an
    /// order the model does not know.
    pos: i64,
    /// A pool without a factory: the slot lost its value and left the free
    /// list (or an attach gave it a value the model keeps in `attached`).
    retired: bool,
}

/// A value attached to an empty idle slot that the model does not know
/// (the pool's choice), and its place on the free list.
#[derive(Clone, Copy, Debug)]
struct Attached {
    value: ModelValue,
    pos: i64,
}

/// What the pool should look like: plain sequential bookkeeping.
#[derive(Debug)]
struct Model {
    reset: bool,
    discard: bool,
    no_factory: bool,
    fallible: bool,
    fair: bool,
    discarded: u64,
    discard_calls: usize,
    slots: Vec<ModelSlot>,
    /// Slots `0..allocated` have storage; the pool grows by doubling the
    /// first segment (`first`, `2 * first`, ...) up to the capacity.
    allocated: usize,
    first: usize,
    /// Values attached to some empty idle slot: which one is the pool's
    /// choice, learned when an acquire (or a trim or drain) finds them.
    /// Such a slot still looks empty in `slots`, at a position below its
    /// value's (the attach moved it to the top).
    attached: Vec<Attached>,
    /// The last position given out: pushes go on top.
    stamp: i64,
    /// Whether to check the free list's order (always: a knob for
    /// debugging a failure).
    lifo: bool,
    /// Ids of the values made and not dropped.
    live: HashSet<usize>,
    made: usize,
    peak: usize,
    failed: u64,
    waits: u64,
    timeouts: u64,
    async_waits: u64,
    cancelled: u64,
    closed: bool,
    factory_calls: usize,
    reset_calls: usize,
}

impl Model {
    fn new(setup: Setup) -> Self {
        let first = setup.first();
        let mut model = Model {
            reset: setup.reset,
            discard: setup.discard,
            no_factory: setup.no_factory,
            fallible: setup.fallible,
            fair: setup.fair,
            discarded: 0,
            discard_calls: 0,
            // Every slot of the first segment on the free list, in an order
            // the model leaves open (position 0).
            slots: vec![ModelSlot::default(); setup.capacity],
            allocated: first,
            first,
            attached: Vec::new(),
            stamp: 0,
            lifo: true,
            live: HashSet::new(),
            made: 0,
            peak: 0,
            failed: 0,
            waits: 0,
            timeouts: 0,
            async_waits: 0,
            cancelled: 0,
            closed: false,
            factory_calls: 0,
            reset_calls: 0,
        };
        for i in 0..first {
            let id = if i < setup.values {
                // Made by the test: not a factory call.
                let id = model.make();
                model.factory_calls -= 1;
                id
            } else if !setup.lazy {
                model.make()
            } else {
                continue;
            };
            model.slots[i].value = Some(ModelValue { id, dirty: false });
        }
        model
    }

    /// A position above every one given out so far: the top of the free
    /// list.
    fn next_stamp(&mut self) -> i64 {
        self.stamp += 1;
        self.stamp
    }

    /// The position of the free list's top: the highest of the idle
    /// allocated slots and attached values.
    fn top(&self) -> Option<i64> {
        self.slots[..self.allocated]
            .iter()
            .filter(|s| !s.held && !s.retired)
            .map(|s| s.pos)
            .chain(self.attached.iter().map(|a| a.pos))
            .max()
    }

    /// Grows the storage to `allocated` slots: the new ones enter the free
    /// list together, on top (it was empty), in an order the model leaves
    /// open.
    fn grow(&mut self, allocated: usize) {
        let pos = self.next_stamp();
        for slot in &mut self.slots[self.allocated..allocated] {
            slot.pos = pos;
        }
        self.allocated = allocated;
    }

    /// Puts every empty idle slot at `pos`, in an order the model leaves
    /// open (it may know less than the pool).
    fn settle_empty(&mut self, pos: i64) {
        let allocated = self.allocated;
        for slot in &mut self.slots[..allocated] {
            if !slot.held && !slot.retired && slot.value.is_none() {
                slot.pos = pos;
            }
        }
    }

    fn make(&mut self) -> usize {
        let id = self.made;
        self.made += 1;
        self.factory_calls += 1;
        self.live.insert(id);
        id
    }

    fn in_use(&self) -> usize {
        self.slots.iter().filter(|s| s.held).count()
    }

    /// Whether no slot is free: every slot is held, or retired (and no
    /// attach brought a retired one back).
    fn full(&self) -> bool {
        self.in_use() + self.retired() == self.slots.len()
    }

    /// Slots retired and not serving: the retired ones less those an
    /// attach filled (whose values the model keeps in `attached`).
    fn retired(&self) -> usize {
        if !self.no_factory {
            return 0;
        }
        self.slots.iter().filter(|s| s.retired).count() - self.attached.len()
    }

    /// A slot lost its value: in a pool without a factory it retires.
    fn empty_slot(&mut self, index: usize) {
        let slot = &mut self.slots[index];
        slot.value = None;
        slot.retired = self.no_factory;
    }

    /// Whether an idle slot is empty: the model's empty idle slots, less
    /// those holding attached values (the model does not know which).
    fn free_empty_slot_exists(&self) -> bool {
        self.empty_idle(self.slots.len()) > 0
    }

    /// Empty idle slots below `end`, less the attached values (which sit in
    /// allocated slots).
    fn empty_idle(&self, end: usize) -> usize {
        let empty = self.slots[..end]
            .iter()
            .filter(|s| !s.held && s.value.is_none())
            .count();
        empty - self.attached.len()
    }

    /// Slots holding a value, idle or held, with the attached ones.
    fn filled(&self) -> usize {
        self.slots.iter().filter(|s| s.value.is_some()).count() + self.attached.len()
    }

    /// Idle values, with their positions: in idle slots the model knows,
    /// and attached ones.
    fn idle_values(&self) -> Vec<(ModelValue, i64)> {
        self.slots
            .iter()
            .filter(|s| !s.held)
            .filter_map(|s| s.value.map(|v| (v, s.pos)))
            .chain(self.attached.iter().map(|a| (a.value, a.pos)))
            .collect()
    }

    /// Whether every allocated slot is held: only then may the pool grow.
    fn allocated_all_held(&self) -> bool {
        self.slots[..self.allocated].iter().all(|s| s.held)
    }

    /// The storage after growing to hold `index`.
    fn grown_to(&self, index: usize) -> usize {
        let mut allocated = self.allocated;
        while allocated <= index {
            allocated = (allocated * 2).min(self.slots.len());
        }
        allocated
    }

    /// Whether `allocated` is a size the pool can have.
    fn legal_allocated(&self, allocated: usize) -> bool {
        doublings(self.first, self.slots.len()).contains(&allocated)
    }
}

struct Harness<'p, E: ModelErr> {
    pool: &'p Arc<Pool<Val, E>>,
    probe: &'p Probe,
    model: Model,
    guards: Vec<Guard<'p>>,
    detached: Vec<Val>,
}

impl<'p, E: ModelErr> Harness<'p, E> {
    fn apply(&mut self, op: &Op) -> Result<(), TestCaseError> {
        match *op {
            Op::Acquire {
                owned,
                kind,
                factory_panics,
            } => self.acquire(owned, kind, factory_panics),
            Op::Release {
                k,
                reset_panics,
                discard,
            } if !self.guards.is_empty() => {
                self.release_discarding(k.index(self.guards.len()), reset_panics, discard)
            }
            Op::Detach { k } if !self.guards.is_empty() => {
                let guard = self.guards.swap_remove(k.index(self.guards.len()));
                let index = guard.index();
                prop_assert!(guard.val().held.swap(false, SeqCst));
                let val = guard.detach();
                // The slot goes back empty, on top of the free list (or
                // retires, in a pool without a factory).
                let pos = self.model.next_stamp();
                let slot = &mut self.model.slots[index];
                let expected = slot.value.take().expect("a held slot is filled");
                prop_assert_eq!(val.id, expected.id, "detach returned another value");
                slot.held = false;
                slot.pos = pos;
                self.model.empty_slot(index);
                self.detached.push(val);
                Ok(())
            }
            Op::Forget { k } if !self.guards.is_empty() => {
                let k = k.index(self.guards.len());
                if self.guards[k].is_owned() {
                    // See `Guard::forget`: an owned guard is released.
                    return self.release(k, false);
                }
                let guard = self.guards.swap_remove(k);
                self.model.slots[guard.index()].forgotten = true;
                guard.forget();
                Ok(())
            }
            Op::DropDetached { k } if !self.detached.is_empty() => {
                let val = self.detached.swap_remove(k.index(self.detached.len()));
                self.model.live.remove(&val.id);
                drop(val);
                Ok(())
            }
            Op::Close => {
                prop_assert_eq!(self.pool.close(), !self.model.closed);
                self.model.closed = true;
                Ok(())
            }
            Op::Trim { keep } => {
                self.trim(keep)?;
                self.note_fair_return();
                Ok(())
            }
            Op::RetainIdle { refuse } => {
                self.retain_idle(refuse)?;
                self.note_fair_return();
                Ok(())
            }
            Op::DrainIdle => self.drain_idle(),
            Op::Attach { k } if !self.detached.is_empty() => {
                self.attach(k.index(self.detached.len()))
            }
            _ => Ok(()),
        }
    }

    fn acquire(
        &mut self,
        owned: bool,
        kind: Kind,
        factory_panics: bool,
    ) -> Result<(), TestCaseError> {
        let model = &mut self.model;
        let full = model.full();
        let closed = model.closed;
        // A waiting acquire on a full pool would wait forever here.
        let kind = match kind {
            Kind::Wait if full && !closed => Kind::Timeout(Duration::ZERO),
            kind => kind,
        };
        self.probe.fail_factory.store(factory_panics, SeqCst);
        let result = acquire_catching(self.pool, owned, kind);
        self.probe.fail_factory.store(false, SeqCst);
        // A fill that failed, by a panic or (a fallible factory) an error,
        // is one case: the slot went back empty.
        let result = match result {
            Ok(Ok(got)) => Ok(got),
            Ok(Err(err)) => {
                prop_assert!(model.fallible, "a factory error from an infallible pool");
                prop_assert!(is_injected_error(&err), "an unexpected error: {:?}", err);
                Err(())
            }
            Err(payload) => {
                prop_assert!(is_injected(&*payload), "an unexpected panic");
                prop_assert!(!model.fallible, "a fallible factory panicked");
                Err(())
            }
        };
        match result {
            Ok(None) if closed => {}
            Ok(None) => {
                prop_assert!(full, "no slot although the model has a free one");
                match kind {
                    Kind::Try => model.failed += 1,
                    Kind::Timeout(_) => {
                        model.waits += 1;
                        model.timeouts += 1;
                    }
                    Kind::AsyncOnce => {
                        model.async_waits += 1;
                        model.cancelled += 1;
                    }
                    Kind::Wait => unreachable!("a waiting acquire returns a guard"),
                }
            }
            Ok(Some(mut guard)) => {
                prop_assert!(!closed, "a guard from a closed pool");
                prop_assert!(!full, "a guard from a full pool");
                let index = guard.index();
                prop_assert!(index < model.slots.len(), "index {} out of range", index);
                let slot = model.slots[index];
                prop_assert!(!slot.held, "slot {} handed out twice", index);
                let val = guard.val();
                let attached = model.attached.iter().position(|a| a.value.id == val.id);
                if index >= model.allocated {
                    prop_assert!(
                        model.allocated_all_held(),
                        "the pool grew although an allocated slot was free"
                    );
                    let grown = model.grown_to(index);
                    model.grow(grown);
                } else if model.lifo {
                    // A stack: the slot on top, the attached value's if the
                    // slot holds one; but idle values first, so the highest
                    // one if any is idle (the empty slots above it stay).
                    let pos = match (slot.value, attached) {
                        (None, Some(at)) => model.attached[at].pos,
                        _ => slot.pos,
                    };
                    let highest_value = model.idle_values().iter().map(|&(_, pos)| pos).max();
                    prop_assert_eq!(
                        Some(pos),
                        highest_value.or_else(|| model.top()),
                        "slot {} is not the highest idle value, nor the top of the free list",
                        index
                    );
                }
                let expected = match (slot.value, attached) {
                    (Some(value), _) => value,
                    (None, Some(at)) => model.attached.swap_remove(at).value,
                    (None, None) => {
                        // The slot was empty: the factory filled it, as no
                        // value was idle.
                        prop_assert!(!model.no_factory, "an empty slot handed out");
                        prop_assert!(
                            model.idle_values().is_empty(),
                            "the factory ran although a value was idle"
                        );
                        prop_assert!(!factory_panics, "a fill did not run the panicking factory");
                        let id = model.make();
                        ModelValue { id, dirty: false }
                    }
                };
                prop_assert_eq!(
                    ModelValue {
                        id: val.id,
                        dirty: val.dirty
                    },
                    expected,
                    "slot {} holds another value (or a reused value was not reset)",
                    index
                );
                let slot = &mut model.slots[index];
                slot.held = true;
                slot.retired = false;
                slot.value = Some(ModelValue {
                    id: expected.id,
                    dirty: true,
                });
                // Retired slots are off the free list: a pop counts them
                // held (see `Stats::peak_in_use`).
                model.peak = model.peak.max(model.in_use() + model.retired());
                prop_assert!(!guard.val().held.swap(true, SeqCst), "two holders");
                guard.val_mut().dirty = true;
                self.guards.push(guard);
            }
            Err(()) => {
                prop_assert!(factory_panics && !full && !closed);
                prop_assert!(
                    model.free_empty_slot_exists(),
                    "the factory ran although every free slot is filled"
                );
                prop_assert!(
                    model.idle_values().is_empty(),
                    "the factory ran (and failed) although a value was idle"
                );
                model.factory_calls += 1;
                // A growth may have run before the factory: learn it.
                let allocated = self.pool.stats().allocated;
                prop_assert!(allocated >= model.allocated && model.legal_allocated(allocated));
                if allocated > model.allocated {
                    prop_assert!(model.allocated_all_held(), "grew with a free slot");
                    // The slot taken goes back on top of the new ones.
                    model.grow(allocated);
                } else if model.lifo {
                    // The slot on top was empty; it goes back there.
                    let top = model.top();
                    prop_assert!(
                        model.slots[..model.allocated]
                            .iter()
                            .any(|s| !s.held && s.value.is_none() && Some(s.pos) == top),
                        "the factory ran although the top of the free list is filled"
                    );
                }
                // The slot was held while the factory ran; whether that
                // counts towards the peak is the pool's choice.
                let peak = self.pool.stats().peak_in_use;
                let held_during_fill = model.in_use() + 1;
                prop_assert!(
                    peak == model.peak || peak == held_during_fill,
                    "peak {} after a factory panic, expected {} or {}",
                    peak,
                    model.peak,
                    held_during_fill
                );
                model.peak = peak;
            }
        }
        Ok(())
    }

    /// Forgets the values the pool dropped or handed out (`gone`) from the
    /// idle slots and the attached list; returns how many it found.
    fn remove_idle(&mut self, gone: &HashSet<usize>) -> usize {
        let model = &mut self.model;
        let mut found = 0;
        let no_factory = model.no_factory;
        for slot in model.slots.iter_mut().filter(|s| !s.held) {
            if slot.value.map_or(false, |v| gone.contains(&v.id)) {
                slot.value = None;
                slot.retired = no_factory;
                found += 1;
            }
        }
        let before = model.attached.len();
        model.attached.retain(|a| !gone.contains(&a.value.id));
        found + before - model.attached.len()
    }

    /// After a trim, drain or `retain_idle` that gave values back: a fair
    /// pool notes the slots out of the free list as its peak, and retired
    /// slots are out of it (see `Stats::peak_in_use`).
    fn note_fair_return(&mut self) {
        let model = &mut self.model;
        if model.fair && !model.idle_values().is_empty() {
            model.peak = model.peak.max(model.in_use() + model.retired());
        }
    }

    fn trim(&mut self, keep: usize) -> Result<(), TestCaseError> {
        let idle = self.model.idle_values();
        // Copies: the trim's drops lock the probe.
        let before: Vec<u32> = self.probe.drops().clone();
        let trimmed = self.pool.trim(keep);
        prop_assert_eq!(trimmed, idle.len().saturating_sub(keep), "values trimmed");
        let after: Vec<u32> = self.probe.drops().clone();
        let dropped: HashSet<usize> = (0..after.len())
            .filter(|&id| after[id] > before.get(id).copied().unwrap_or(0))
            .collect();
        prop_assert_eq!(dropped.len(), trimmed, "values dropped by the trim");
        prop_assert!(
            dropped
                .iter()
                .all(|id| idle.iter().any(|(v, _)| v.id == *id)),
            "the trim dropped a value that was not idle"
        );
        // The kept values are the first filled ones popped: none below a
        // dropped one.
        let kept_lowest = idle
            .iter()
            .filter(|(v, _)| !dropped.contains(&v.id))
            .map(|&(_, pos)| pos)
            .min();
        let dropped_highest = idle
            .iter()
            .filter(|(v, _)| dropped.contains(&v.id))
            .map(|&(_, pos)| pos)
            .max();
        if let (true, Some(kept), Some(dropped)) = (self.model.lifo, kept_lowest, dropped_highest) {
            prop_assert!(
                kept >= dropped,
                "the trim kept a value (at {}) below one it dropped (at {}): {:?}",
                kept,
                dropped,
                idle
            );
        }
        prop_assert_eq!(self.remove_idle(&dropped), trimmed);
        for id in &dropped {
            self.model.live.remove(id);
        }
        // The kept values stay on top, in their order; the empty slots go
        // below them.
        let below = match kept_lowest {
            Some(pos) => pos - 1,
            None => self.model.next_stamp(),
        };
        self.model.settle_empty(below);
        Ok(())
    }

    fn drain_idle(&mut self) -> Result<(), TestCaseError> {
        let idle = self.model.idle_values();
        let drained = self.pool.drain_idle();
        prop_assert_eq!(drained.len(), idle.len(), "values drained");
        let ids: HashSet<usize> = drained.iter().map(|v| v.id).collect();
        prop_assert!(
            ids.iter().all(|id| idle.iter().any(|(v, _)| v.id == *id)),
            "the drain took a value that was not idle"
        );
        prop_assert!(drained.iter().all(|v| !v.held.load(SeqCst)));
        prop_assert_eq!(self.remove_idle(&ids), drained.len());
        self.detached.extend(drained);
        // Every idle slot is empty now.
        let pos = self.model.next_stamp();
        self.model.settle_empty(pos);
        Ok(())
    }

    fn attach(&mut self, k: usize) -> Result<(), TestCaseError> {
        let val = self.detached.swap_remove(k);
        let value = ModelValue {
            id: val.id,
            dirty: val.dirty,
        };
        let model = &self.model;
        // An empty slot that no guard holds: allocated or not.
        let room = model.free_empty_slot_exists();
        let must_grow = model.empty_idle(model.allocated) == 0;
        let closed = model.closed;
        match self.pool.attach(val) {
            Ok(()) => {
                prop_assert!(!closed && room, "attached to a closed or full pool");
                let model = &mut self.model;
                let allocated = self.pool.stats().allocated;
                if must_grow {
                    prop_assert!(allocated > model.allocated, "attached without room");
                } else {
                    prop_assert_eq!(allocated, model.allocated, "grew with room");
                }
                prop_assert!(model.legal_allocated(allocated));
                model.grow(allocated);
                // The value's slot goes on top of the free list; the values
                // looked through on the way keep their order.
                let pos = model.next_stamp();
                model.attached.push(Attached { value, pos });
            }
            Err(AttachError::Closed(val)) => {
                prop_assert!(closed, "Closed from an open pool");
                self.detached.push(val);
            }
            Err(AttachError::Full(val)) => {
                prop_assert!(!closed && !room, "Full with an empty slot");
                self.detached.push(val);
            }
            Err(err) => prop_assert!(false, "an error the model does not know: {}", err),
        }
        Ok(())
    }

    fn release(&mut self, k: usize, reset_panics: bool) -> Result<(), TestCaseError> {
        self.release_discarding(k, reset_panics, false)
    }

    fn release_discarding(
        &mut self,
        k: usize,
        reset_panics: bool,
        discard: bool,
    ) -> Result<(), TestCaseError> {
        let guard = self.guards.swap_remove(k);
        let index = guard.index();
        prop_assert!(
            guard.val().held.swap(false, SeqCst),
            "a held value not marked"
        );
        self.probe.fail_reset.store(reset_panics, SeqCst);
        self.probe.discard.store(discard, SeqCst);
        let result = release_catching(guard);
        self.probe.fail_reset.store(false, SeqCst);
        self.probe.discard.store(false, SeqCst);
        let model = &mut self.model;
        // Pushed on top of the free list, filled or (after a panicking
        // reset or a discard) empty; retired instead if empty in a pool
        // without a factory.
        let pos = model.next_stamp();
        let slot = &mut model.slots[index];
        slot.held = false;
        slot.pos = pos;
        let value = slot.value.expect("a held slot is filled");
        let mut emptied = false;
        if model.reset {
            model.reset_calls += 1;
            match &result {
                Ok(()) => {
                    prop_assert!(!reset_panics, "the panicking reset did not run");
                    model.slots[index].value = Some(ModelValue {
                        dirty: false,
                        ..value
                    });
                }
                Err(payload) => {
                    prop_assert!(is_injected(&**payload), "an unexpected panic");
                    prop_assert!(reset_panics);
                    emptied = true;
                }
            }
        } else {
            prop_assert!(result.is_ok(), "a release without a reset closure panicked");
        }
        if model.discard && !emptied {
            model.discard_calls += 1;
            if discard {
                model.discarded += 1;
                emptied = true;
            }
        }
        if emptied {
            model.empty_slot(index);
            model.live.remove(&value.id);
        }
        Ok(())
    }

    /// `retain_idle`, refusing the values whose id is `refuse` modulo 3.
    fn retain_idle(&mut self, refuse: usize) -> Result<(), TestCaseError> {
        let idle = self.model.idle_values();
        let mut visited = HashSet::new();
        let mut visits = 0;
        let mut held_visited = 0;
        let dropped_count = self.pool.retain_idle(|v| {
            visits += 1;
            visited.insert(v.id);
            if v.held.load(SeqCst) {
                held_visited += 1;
            }
            retained(v.id, refuse)
        });
        prop_assert_eq!(held_visited, 0, "retain_idle visited a held value");
        let idle_ids: HashSet<usize> = idle.iter().map(|(v, _)| v.id).collect();
        prop_assert_eq!(&visited, &idle_ids, "retain_idle visits every idle value");
        prop_assert_eq!(visits, idle.len(), "retain_idle visits each value once");
        let dropped: HashSet<usize> = idle_ids
            .iter()
            .copied()
            .filter(|&id| !retained(id, refuse))
            .collect();
        prop_assert_eq!(dropped_count, dropped.len(), "values dropped");
        for &id in &dropped {
            prop_assert_eq!(self.probe.drops()[id], 1, "value {} not dropped", id);
        }
        prop_assert_eq!(self.remove_idle(&dropped), dropped.len());
        for id in &dropped {
            self.model.live.remove(id);
        }
        // As a trim: the kept values stay on top, in their order; the empty
        // slots go below them.
        let kept_lowest = idle
            .iter()
            .filter(|(v, _)| !dropped.contains(&v.id))
            .map(|&(_, pos)| pos)
            .min();
        let below = match kept_lowest {
            Some(pos) => pos - 1,
            None => self.model.next_stamp(),
        };
        self.model.settle_empty(below);
        Ok(())
    }

    /// Compares everything observable with the model.
    fn check(&self) -> Result<(), TestCaseError> {
        let model = &self.model;
        let capacity = model.slots.len();
        let stats = self.pool.stats();
        let expected = ExpectedStats {
            capacity,
            in_use: model.in_use(),
            available: capacity - model.in_use() - model.retired(),
            retired: model.retired(),
            discarded: model.discarded,
            peak_in_use: model.peak,
            failed_acquires: model.failed,
            waits: model.waits,
            timeouts: model.timeouts,
            async_waits: model.async_waits,
            cancelled_waits: model.cancelled,
            waiting: (0, 0),
            closed: model.closed,
        };
        prop_assert_eq!(ExpectedStats::from(stats), expected);
        prop_assert_eq!(stats.allocated, model.allocated, "slots allocated");
        prop_assert_eq!(stats.filled, model.filled(), "slots filled");
        prop_assert_eq!(self.probe.made(), model.made, "values made");
        prop_assert_eq!(self.probe.factory_calls.load(SeqCst), model.factory_calls);
        prop_assert_eq!(self.probe.reset_calls.load(SeqCst), model.reset_calls);
        prop_assert_eq!(self.probe.discard_calls.load(SeqCst), model.discard_calls);
        prop_assert_eq!(
            self.probe.dropped_while_held.load(SeqCst),
            0,
            "a held value was dropped"
        );
        prop_assert_eq!(
            self.probe.dropped.load(SeqCst),
            model.made - model.live.len(),
            "values dropped"
        );
        for (id, &n) in self.probe.drops().iter().enumerate() {
            let expected = u32::from(!model.live.contains(&id));
            prop_assert_eq!(n, expected, "value {} dropped {} times", id, n);
        }
        // Every live value is in a slot or detached, exactly once.
        let mut placed: Vec<usize> = model
            .slots
            .iter()
            .filter_map(|s| s.value.map(|v| v.id))
            .chain(self.detached.iter().map(|v| v.id))
            .chain(model.attached.iter().map(|a| a.value.id))
            .collect();
        placed.sort_unstable();
        let mut live: Vec<usize> = model.live.iter().copied().collect();
        live.sort_unstable();
        prop_assert_eq!(placed, live, "live values");
        // The guards: distinct slots, each holding the model's value.
        let mut indices = HashSet::new();
        for guard in &self.guards {
            let index = guard.index();
            prop_assert!(indices.insert(index), "two guards share slot {}", index);
            let slot = model.slots[index];
            prop_assert!(slot.held && !slot.forgotten);
            // What the holder wrote, after every trim and drain as well.
            let val = guard.val();
            let read = ModelValue {
                id: val.id,
                dirty: val.dirty,
            };
            prop_assert_eq!(slot.value, Some(read), "guard of slot {} reads", index);
            prop_assert!(val.held.load(SeqCst));
        }
        let forgotten = model.slots.iter().filter(|s| s.forgotten).count();
        prop_assert_eq!(self.guards.len() + forgotten, model.in_use());
        // Owned guards keep the pool's state alive, not its `Arc`.
        prop_assert_eq!(Arc::strong_count(self.pool), 1, "pool Arcs");
        Ok(())
    }
}

/// `Stats` is `#[non_exhaustive]`: compare its fields through this copy.
#[derive(Debug, PartialEq, Eq)]
struct ExpectedStats {
    capacity: usize,
    in_use: usize,
    available: usize,
    retired: usize,
    discarded: u64,
    peak_in_use: usize,
    failed_acquires: u64,
    waits: u64,
    timeouts: u64,
    async_waits: u64,
    cancelled_waits: u64,
    waiting: (usize, usize),
    closed: bool,
}

impl From<Stats> for ExpectedStats {
    fn from(s: Stats) -> Self {
        ExpectedStats {
            capacity: s.capacity,
            in_use: s.in_use,
            available: s.available,
            retired: s.retired,
            discarded: s.discarded,
            peak_in_use: s.peak_in_use,
            failed_acquires: s.failed_acquires,
            waits: s.waits,
            timeouts: s.timeouts,
            async_waits: s.async_waits,
            cancelled_waits: s.cancelled_waits,
            waiting: (s.waiting_threads, s.waiting_tasks),
            closed: s.closed,
        }
    }
}

fn run_sequential(setup: Setup, ops: &[Op]) -> Result<(), TestCaseError> {
    let probe = Arc::new(Probe::default());
    if setup.fallible {
        let builder = fallible_builder(setup, &probe);
        run_sequential_on(setup, ops, probe, builder)
    } else {
        let builder = builder(setup, &probe);
        run_sequential_on(setup, ops, probe, builder)
    }
}

fn run_sequential_on<E: ModelErr>(
    setup: Setup,
    ops: &[Op],
    probe: Arc<Probe>,
    builder: Builder<Val, E>,
) -> Result<(), TestCaseError> {
    let pool = Arc::new(builder.build().expect("a valid setup"));
    let mut h = Harness {
        pool: &pool,
        probe: &probe,
        model: Model::new(setup),
        guards: Vec::new(),
        detached: Vec::new(),
    };
    h.check()?;
    for op in ops {
        h.apply(op)?;
        h.check()?;
    }

    // Release every guard, then every slot not leaked can be held at once.
    while !h.guards.is_empty() {
        h.release(h.guards.len() - 1, false)?;
        h.check()?;
    }
    let forgotten = h.model.slots.iter().filter(|s| s.forgotten).count();
    // Retired slots (a pool without a factory) serve nobody.
    let serving = setup.capacity - forgotten - h.model.retired();
    if h.model.closed {
        h.acquire(false, Kind::Try, false)?;
        prop_assert!(h.guards.is_empty(), "a slot from a closed pool");
    } else {
        for _ in 0..serving {
            h.acquire(false, Kind::Try, false)?;
        }
        prop_assert_eq!(h.guards.len(), serving);
        h.acquire(true, Kind::Try, false)?;
        prop_assert_eq!(h.guards.len(), serving, "one too many");
    }
    h.check()?;

    // Drop everything: every value made is dropped exactly once, the leaked
    // ones with the pool.
    while !h.guards.is_empty() {
        h.release(h.guards.len() - 1, false)?;
    }
    h.check()?;
    drop(mem::take(&mut h.detached));
    drop(h);
    prop_assert_eq!(Arc::strong_count(&pool), 1);
    probe.pool_dropping.store(true, SeqCst);
    drop(pool);
    assert_all_dropped_once(&probe)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn sequential_operations_match_the_model(
        setup in setup(),
        ops in prop::collection::vec(op(), 1..64),
    ) {
        run_sequential(setup, &ops)?;
    }
}

// ---------------------------------------------------------------------------
// (b) Concurrent operations, checked for exclusivity and conservation
// ---------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum COp {
    Acquire {
        owned: bool,
        kind: Kind,
    },
    Release {
        k: Index,
    },
    Detach {
        k: Index,
    },
    Forget {
        k: Index,
    },
    /// Move guard `k` to the next thread's inbox.
    Send {
        k: Index,
    },
    /// Take every guard from this thread's inbox.
    Receive,
    Stats,
    /// Drop this thread's detached value `k`.
    DropDetached {
        k: Index,
    },
    /// Attach this thread's detached value `k`.
    Attach {
        k: Index,
    },
    Trim {
        keep: usize,
    },
    /// Take every idle value (they become this thread's detached values).
    DrainIdle,
    /// Drop the idle values whose id is `refuse` modulo 3.
    RetainIdle {
        refuse: usize,
    },
}

fn cop() -> impl Strategy<Value = COp> {
    let tag = weighted(&[
        (6, Tag::Acquire),
        (4, Tag::Release),
        (1, Tag::Detach),
        (1, Tag::Forget),
        (2, Tag::Send),
        (2, Tag::Receive),
        (1, Tag::Stats),
        (1, Tag::DropDetached),
        (2, Tag::Attach),
        (1, Tag::Trim),
        (1, Tag::DrainIdle),
        (1, Tag::RetainIdle),
    ]);
    let kind = weighted(&[
        (3, Kind::Try),
        (1, Kind::Wait),
        (2, Kind::Timeout(Duration::ZERO)),
        (1, Kind::AsyncOnce),
    ]);
    (
        tag,
        any::<Index>(),
        any::<bool>(),
        kind,
        0..500u64,
        0..=4usize,
    )
        .prop_map(|(tag, k, owned, kind, us, keep)| match tag {
            Tag::Acquire => COp::Acquire {
                owned,
                kind: match kind {
                    Kind::Timeout(_) => Kind::Timeout(Duration::from_micros(us)),
                    kind => kind,
                },
            },
            Tag::Release => COp::Release { k },
            Tag::Detach => COp::Detach { k },
            Tag::Forget => COp::Forget { k },
            Tag::Send => COp::Send { k },
            Tag::Receive => COp::Receive,
            Tag::Stats => COp::Stats,
            Tag::DropDetached => COp::DropDetached { k },
            Tag::Attach => COp::Attach { k },
            Tag::Trim => COp::Trim { keep },
            Tag::DrainIdle => COp::DrainIdle,
            Tag::RetainIdle => COp::RetainIdle { refuse: keep % 3 },
            Tag::Close => unreachable!("not weighted"),
        })
}

#[derive(Clone, Copy, Debug)]
struct CSetup {
    pool: Setup,
    factory_fail_every: usize,
    reset_fail_every: usize,
    /// The discard check (if the pool has one) refuses every this many
    /// calls.
    discard_every: usize,
    /// Per-thread caches of this many slots; 0 is off, always for fair
    /// pools.
    thread_cache: usize,
}

fn csetup() -> impl Strategy<Value = CSetup> {
    let every = prop_oneof![Just(0usize), 2..10usize];
    let cache = prop_oneof![2 => Just(0usize), 1 => Just(2usize), 1 => Just(4usize)];
    (setup(), every.clone(), every.clone(), every, cache).prop_map(
        |(pool, factory_fail_every, reset_fail_every, discard_every, cache)| CSetup {
            // A pool without a factory can retire every slot, and a waiting
            // acquire then waits for an attach: the sequential model covers
            // it.
            pool: if pool.no_factory {
                Setup {
                    no_factory: false,
                    ..pool
                }
            } else {
                pool
            },
            factory_fail_every,
            reset_fail_every,
            discard_every,
            thread_cache: if pool.fair { 0 } else { cache },
        },
    )
}

/// Guards on their way to a thread. Closed while the thread waits in a
/// blocking acquire and after it finished, so that no slot is ever stuck in
/// the inbox of a thread that cannot take it (which could starve a waiter).
struct Inbox<'p> {
    guards: Vec<Guard<'p>>,
    closed: bool,
}

struct Shared<'p, E: ModelErr> {
    pool: &'p Arc<Pool<Val, E>>,
    inboxes: Vec<Mutex<Inbox<'p>>>,
    /// Guards leaked so far; kept below the capacity so waits always end.
    forgotten: AtomicUsize,
    /// Whether the pool has a reset closure.
    reset: bool,
    /// Whether it has per-thread caches.
    caches: bool,
    /// The sizes its storage can take (see [`doublings`]).
    sizes: Vec<usize>,
}

impl<'p, E: ModelErr> Shared<'p, E> {
    fn inbox(&self, thread: usize) -> MutexGuard<'_, Inbox<'p>> {
        self.inboxes[thread]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// What one thread saw.
#[derive(Debug, Default)]
struct Tally {
    failed_tries: u64,
    timeouts: u64,
    /// Async acquires polled once that found nothing and were cancelled.
    cancelled: u64,
    factory_panics: usize,
    /// Fills failed by a fallible factory's error.
    factory_errors: usize,
    reset_panics: usize,
    releases: usize,
    max_held: usize,
    /// Values dropped by this thread's trims.
    trimmed: usize,
}

struct Worker<'s, 'p, E: ModelErr> {
    me: usize,
    shared: &'s Shared<'p, E>,
    held: Vec<Guard<'p>>,
    /// Values this thread detached or drained, out of the pool.
    detached: Vec<Val>,
    /// The most storage seen allocated.
    allocated: usize,
    tally: Tally,
}

impl<'s, 'p, E: ModelErr> Worker<'s, 'p, E> {
    fn new(me: usize, shared: &'s Shared<'p, E>) -> Self {
        Worker {
            me,
            shared,
            held: Vec::new(),
            detached: Vec::new(),
            allocated: 0,
            tally: Tally::default(),
        }
    }
}

impl<'p, E: ModelErr> Worker<'_, 'p, E> {
    fn run(&mut self, ops: &[COp]) {
        for op in ops {
            self.step(op);
            self.tally.max_held = self.tally.max_held.max(self.held.len());
            self.check_stats();
        }
    }

    /// What this thread can tell of the pool's counters while others work.
    fn check_stats(&mut self) {
        let shared = self.shared;
        let forgotten = shared.forgotten.load(SeqCst);
        let stats = shared.pool.stats();
        let held = self.held.len() + forgotten;
        assert_eq!(stats.in_use + stats.available, stats.capacity);
        // Counted from the free list's head: exact but for slots moving
        // between caches and the list, or pushed by a growth whose segment
        // is not yet published (then counted twice as free).
        if !shared.caches && stats.allocated == stats.capacity {
            assert!(stats.in_use >= held, "{held} held: {stats:?}");
        }
        assert!(stats.in_use <= stats.peak_in_use, "{stats:?}");
        assert!(stats.peak_in_use <= stats.capacity, "{stats:?}");
        assert!(stats.timeouts <= stats.waits, "{stats:?}");
        assert!(
            shared.sizes.contains(&stats.allocated),
            "allocated is not one of {:?}: {stats:?}",
            shared.sizes
        );
        assert!(stats.allocated >= self.allocated, "the storage shrank");
        self.allocated = stats.allocated;
        // Each slot held has a value, and `filled` only falls after a value
        // left its slot.
        assert!(stats.filled >= held, "{held} held: {stats:?}");
        assert!(stats.filled <= stats.allocated, "{stats:?}");
        // Every slot held is allocated, once the growth that made it is
        // published (a growth pushes its slots just before it publishes the
        // segment, so `allocated` may lag a moment): wait for that, not
        // forever, but long enough that only a growth never published
        // fails (the growing thread may be preempted right there, for long
        // on a loaded machine), and before the run's watchdog aborts.
        let end = self.held.iter().map(|g| g.index() + 1).max().unwrap_or(0);
        let mut allocated = stats.allocated;
        let start = Instant::now();
        while allocated < end && start.elapsed() < WAITING / 2 {
            std::thread::yield_now();
            allocated = shared.pool.stats().allocated;
        }
        assert!(allocated >= end, "slot {} held: {stats:?}", end - 1);
    }

    fn step(&mut self, op: &COp) {
        let shared = self.shared;
        let len = self.held.len();
        match *op {
            COp::Acquire { owned, kind } => self.acquire(owned, kind),
            COp::Release { k } if len > 0 => {
                let guard = self.held.swap_remove(k.index(len));
                self.release(guard);
            }
            COp::Detach { k } if len > 0 => {
                let guard = self.held.swap_remove(k.index(len));
                assert!(guard.val().held.swap(false, SeqCst), "holder marker lost");
                self.detached.push(guard.detach());
            }
            COp::DropDetached { k } if !self.detached.is_empty() => {
                drop(self.detached.swap_remove(k.index(self.detached.len())));
            }
            COp::Attach { k } if !self.detached.is_empty() => {
                let mut val = self.detached.swap_remove(k.index(self.detached.len()));
                // As a reset would leave it: the next holder checks.
                val.dirty = false;
                match shared.pool.attach(val) {
                    Ok(()) => {}
                    Err(AttachError::Full(val)) => self.detached.push(val),
                    Err(err) => panic!("attach failed on a pool never closed: {err}"),
                }
            }
            COp::Trim { keep } => {
                let forgotten = shared.forgotten.load(SeqCst);
                let trimmed = shared.pool.trim(keep);
                // Only idle values: not those of this thread's guards nor
                // of leaked ones (`Val::drop` checks each).
                let held = self.held.len() + forgotten;
                assert!(
                    trimmed + held <= shared.pool.capacity(),
                    "trimmed {trimmed} with {held} held"
                );
                self.tally.trimmed += trimmed;
            }
            COp::RetainIdle { refuse } => {
                let forgotten = shared.forgotten.load(SeqCst);
                let dropped = shared.pool.retain_idle(|v| {
                    assert!(
                        !v.held.load(SeqCst),
                        "retain_idle visited held value {}",
                        v.id
                    );
                    retained(v.id, refuse)
                });
                let held = self.held.len() + forgotten;
                assert!(
                    dropped + held <= shared.pool.capacity(),
                    "retain_idle dropped {dropped} with {held} held"
                );
                self.tally.trimmed += dropped;
            }
            COp::DrainIdle => {
                let forgotten = shared.forgotten.load(SeqCst);
                let drained = shared.pool.drain_idle();
                let held = self.held.len() + forgotten;
                assert!(
                    drained.len() + held <= shared.pool.capacity(),
                    "drained {} with {held} held",
                    drained.len()
                );
                for val in &drained {
                    assert!(!val.held.load(SeqCst), "drained value {} is held", val.id);
                }
                self.detached.extend(drained);
            }
            COp::Forget { k } if len > 0 => {
                let capacity = shared.pool.capacity();
                let guard = self.held.swap_remove(k.index(len));
                // See `Guard::forget`: owned guards are released.
                let reserved = if guard.is_owned() {
                    Err(0)
                } else {
                    shared
                        .forgotten
                        .fetch_update(SeqCst, SeqCst, |f| (f + 1 < capacity).then_some(f + 1))
                };
                if reserved.is_ok() {
                    guard.forget();
                } else {
                    self.release(guard);
                }
            }
            COp::Send { k } if len > 0 => {
                let guard = self.held.swap_remove(k.index(len));
                let next = (self.me + 1) % shared.inboxes.len();
                let mut inbox = shared.inbox(next);
                if inbox.closed {
                    drop(inbox);
                    self.held.push(guard);
                } else {
                    inbox.guards.push(guard);
                }
            }
            COp::Receive => {
                let received = mem::take(&mut shared.inbox(self.me).guards);
                self.held.extend(received);
            }
            // Checked after every step.
            COp::Stats => {}
            _ => {}
        }
    }

    fn acquire(&mut self, owned: bool, kind: Kind) {
        if let Kind::Wait = kind {
            // Wait only holding nothing, with the inbox closed: then every
            // slot a waiter waits for is held by a thread that will release
            // or pass it on, and the wait ends.
            for guard in mem::take(&mut self.held) {
                self.release(guard);
            }
            self.close_inbox();
        }
        let result = acquire_catching(self.shared.pool, owned, kind);
        if let Kind::Wait = kind {
            self.shared.inbox(self.me).closed = false;
        }
        match result {
            Ok(Ok(Some(mut guard))) => {
                let val = guard.val_mut();
                assert!(
                    !val.held.swap(true, SeqCst),
                    "two holders of value {}",
                    val.id
                );
                if self.shared.reset {
                    assert!(!val.dirty, "a reused value was not reset");
                }
                val.dirty = true;
                self.held.push(guard);
            }
            Ok(Ok(None)) => match kind {
                Kind::Try => self.tally.failed_tries += 1,
                Kind::Timeout(_) => self.tally.timeouts += 1,
                Kind::AsyncOnce => self.tally.cancelled += 1,
                Kind::Wait => panic!("a waiting acquire returned nothing"),
            },
            Ok(Err(err)) => {
                assert!(is_injected_error(&err), "an unexpected error: {err:?}");
                self.tally.factory_errors += 1;
            }
            Err(payload) => {
                assert!(is_injected(&*payload), "an unexpected panic");
                self.tally.factory_panics += 1;
            }
        }
    }

    fn release(&mut self, guard: Guard<'p>) {
        assert!(guard.val().held.swap(false, SeqCst), "holder marker lost");
        self.tally.releases += 1;
        if let Err(payload) = release_catching(guard) {
            assert!(is_injected(&*payload), "an unexpected panic");
            self.tally.reset_panics += 1;
        }
    }

    /// Releases every guard held, closes the inbox and drops the detached
    /// values.
    fn finish(&mut self) {
        for guard in mem::take(&mut self.held) {
            self.release(guard);
        }
        self.close_inbox();
        self.detached.clear();
    }

    /// Closes the inbox and releases what it held.
    fn close_inbox(&mut self) {
        let received = {
            let mut inbox = self.shared.inbox(self.me);
            inbox.closed = true;
            mem::take(&mut inbox.guards)
        };
        for guard in received {
            self.release(guard);
        }
    }
}

impl<E: ModelErr> Drop for Worker<'_, '_, E> {
    /// Runs even if the thread panics, so that no other thread waits forever.
    fn drop(&mut self) {
        self.finish();
    }
}

fn run_concurrent(setup: CSetup, threads: &[Vec<COp>]) -> Result<(), TestCaseError> {
    let probe = Arc::new(Probe::default());
    if setup.pool.fallible {
        let builder = fallible_builder(setup.pool, &probe);
        run_concurrent_on(setup, threads, probe, builder)
    } else {
        let builder = builder(setup.pool, &probe);
        run_concurrent_on(setup, threads, probe, builder)
    }
}

fn run_concurrent_on<E: ModelErr>(
    setup: CSetup,
    threads: &[Vec<COp>],
    probe: Arc<Probe>,
    mut builder: Builder<Val, E>,
) -> Result<(), TestCaseError> {
    let capacity = setup.pool.capacity;
    if setup.thread_cache > 0 {
        builder = builder.thread_cache_size(setup.thread_cache);
    }
    let pool = Arc::new(builder.build().expect("a valid setup"));
    let eager = probe.made();
    probe.factory_calls.store(0, SeqCst);
    probe
        .factory_fail_every
        .store(setup.factory_fail_every, SeqCst);
    probe.reset_fail_every.store(setup.reset_fail_every, SeqCst);
    probe.discard_every.store(setup.discard_every, SeqCst);

    let shared = Shared {
        pool: &pool,
        inboxes: threads
            .iter()
            .map(|_| {
                Mutex::new(Inbox {
                    guards: Vec::new(),
                    closed: false,
                })
            })
            .collect(),
        forgotten: AtomicUsize::new(0),
        reset: setup.pool.reset,
        caches: setup.thread_cache > 0,
        sizes: doublings(setup.pool.first(), capacity),
    };
    let tallies: Vec<Tally> = std::thread::scope(|s| {
        // A lost slot or a lost wake-up leaves a blocking acquire waiting
        // forever: report the case and abort rather than hang.
        let _watchdog = watchdog(
            format!("concurrent case {setup:?}, ops per thread: {threads:?}"),
            WAITING,
        );
        let handles: Vec<_> = threads
            .iter()
            .enumerate()
            .map(|(me, ops)| {
                let shared = &shared;
                s.spawn(move || {
                    let mut worker = Worker::new(me, shared);
                    worker.run(ops);
                    worker.finish();
                    mem::take(&mut worker.tally)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| panic::resume_unwind(p)))
            .collect()
    });
    for inbox in &shared.inboxes {
        let inbox = inbox.lock().unwrap_or_else(PoisonError::into_inner);
        prop_assert!(inbox.closed && inbox.guards.is_empty());
    }
    let forgotten = shared.forgotten.load(SeqCst);
    drop(shared);

    let stats = pool.stats();
    let failed: u64 = tallies.iter().map(|t| t.failed_tries).sum();
    let timeouts: u64 = tallies.iter().map(|t| t.timeouts).sum();
    let cancelled: u64 = tallies.iter().map(|t| t.cancelled).sum();
    let factory_panics: usize = tallies.iter().map(|t| t.factory_panics).sum();
    let factory_errors: usize = tallies.iter().map(|t| t.factory_errors).sum();
    prop_assert!(factory_panics == 0 || !setup.pool.fallible);
    prop_assert!(factory_errors == 0 || setup.pool.fallible);
    let factory_panics = factory_panics + factory_errors;
    let reset_panics: usize = tallies.iter().map(|t| t.reset_panics).sum();
    let releases: usize = tallies.iter().map(|t| t.releases).sum();
    let max_held = tallies.iter().map(|t| t.max_held).max().unwrap_or(0);
    let trimmed: usize = tallies.iter().map(|t| t.trimmed).sum();
    prop_assert!(forgotten < capacity);
    prop_assert_eq!(stats.in_use, forgotten, "slots lost or leaked");
    prop_assert_eq!(stats.available, capacity - forgotten);
    prop_assert_eq!(stats.failed_acquires, failed);
    prop_assert_eq!(stats.timeouts, timeouts);
    prop_assert_eq!(stats.cancelled_waits, cancelled);
    prop_assert!(stats.async_waits >= stats.cancelled_waits);
    prop_assert_eq!((stats.waiting_threads, stats.waiting_tasks), (0, 0));
    prop_assert!(stats.waits >= stats.timeouts);
    prop_assert!(stats.peak_in_use <= capacity, "{:?}", stats);
    prop_assert!(
        stats.peak_in_use >= max_held.max(forgotten),
        "peak {} with {} held by one thread, {} leaked: {:?}",
        stats.peak_in_use,
        max_held,
        forgotten,
        stats
    );
    prop_assert_eq!(
        Arc::strong_count(&pool),
        1,
        "an owned guard outlived its thread"
    );
    // Every value not dropped is in a slot: the threads dropped the values
    // they took out.
    let made = probe.made();
    let dropped = probe.dropped.load(SeqCst);
    prop_assert_eq!(stats.filled, made - dropped, "values in the pool");
    prop_assert!(dropped >= trimmed);
    prop_assert!(doublings(setup.pool.first(), capacity).contains(&stats.allocated));

    // The factory ran once per value made after the build, plus once per
    // injected panic; the panics fell exactly on the multiples.
    let factory_calls = probe.factory_calls.load(SeqCst);
    prop_assert_eq!(factory_calls, probe.made() - eager + factory_panics);
    let expected = factory_calls.checked_div(setup.factory_fail_every);
    prop_assert_eq!(factory_panics, expected.unwrap_or(0));
    // The reset closure ran exactly once per release.
    let reset_calls = probe.reset_calls.load(SeqCst);
    if setup.pool.reset {
        prop_assert_eq!(reset_calls, releases);
    } else {
        prop_assert_eq!(reset_calls, 0);
    }
    let expected = reset_calls.checked_div(setup.reset_fail_every);
    prop_assert_eq!(reset_panics, expected.unwrap_or(0));
    // The discard check ran once per release whose reset did not panic,
    // and refused exactly the multiples.
    let discard_calls = probe.discard_calls.load(SeqCst);
    if setup.pool.discard {
        prop_assert_eq!(discard_calls, releases - reset_panics);
    } else {
        prop_assert_eq!(discard_calls, 0);
    }
    let expected = discard_calls.checked_div(setup.discard_every);
    prop_assert_eq!(stats.discarded as usize, expected.unwrap_or(0));

    // Every slot not leaked can be held at once, by distinct guards.
    probe.factory_fail_every.store(0, SeqCst);
    probe.reset_fail_every.store(0, SeqCst);
    probe.discard_every.store(0, SeqCst);
    let all: Vec<_> = (forgotten..capacity)
        .map(|_| pool.try_acquire().expect("a slot that should be free"))
        .collect();
    prop_assert!(pool.try_acquire().is_err());
    let indices: HashSet<_> = all.iter().map(PoolGuard::index).collect();
    prop_assert_eq!(indices.len(), all.len());
    for val in &all {
        prop_assert!(!val.held.load(SeqCst), "value {} still marked held", val.id);
        if setup.pool.reset {
            prop_assert!(!val.dirty, "a reused value was not reset");
        }
    }
    // Every slot is held now (the leaked ones too), so every slot is
    // allocated and filled.
    let stats = pool.stats();
    prop_assert_eq!((stats.allocated, stats.filled), (capacity, capacity));
    drop(all);
    prop_assert_eq!(pool.stats().in_use, forgotten);
    probe.pool_dropping.store(true, SeqCst);
    drop(pool);
    assert_all_dropped_once(&probe)
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn concurrent_operations_conserve_every_slot_and_value(
        setup in csetup(),
        threads in prop::collection::vec(prop::collection::vec(cop(), 0..40), 2..=4),
    ) {
        run_concurrent(setup, &threads)?;
    }
}
