//! A soak test: threads hammer one small pool with every operation for a
//! while, checking exclusivity as they go and conservation at the end.
//!
//! ```text
//! cargo run --release --example soak -- --seconds 30 --threads 4 --capacity 16
//! ```
//!
//! Exits with status 1 on any violation:
//!
//! - exclusivity: every value carries a `holder` word. A guard's holder
//!   ticket is swapped in when the value is acquired and swapped out when the
//!   guard is released or detached; finding another ticket there means two
//!   guards held the value at once.
//! - conservation: after every thread joined, the slots still in use are
//!   exactly the leaked guards, every other slot can be held at once, the
//!   pool's counters match what the threads saw, and after the pool is
//!   dropped every value made was dropped once.
//! - liveness: the threads must finish within a minute of the deadline (a
//!   lost wake-up would leave a blocking acquire waiting forever).
//!
//! The factory and the reset closure panic now and then on purpose; those
//! panics are caught, counted and kept out of the output by a panic hook.

use std::panic::{self, AssertUnwindSafe};
use std::process;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use tagpool::{OwnedPoolGuard, Pool, PoolGuard, Stats};

/// The payload of the panics injected on purpose; the hook hides them.
const INJECTED: &str = "tagpool soak: injected panic";
/// The factory panics on every call number that is a multiple of this.
const FACTORY_PANIC_EVERY: u64 = 500;
/// The reset closure panics on every call number that is a multiple of this.
const RESET_PANIC_EVERY: u64 = 1000;
/// The most guards one thread holds at a time.
const MAX_HELD: usize = 4;
/// How long the threads may take to finish after the deadline.
const GRACE: Duration = Duration::from_secs(60);

#[derive(Clone, Copy)]
struct Args {
    seconds: u64,
    threads: usize,
    capacity: usize,
}

/// The options, with the defaults in `args`.
fn usage_text(args: &Args) -> String {
    format!(
        "\
usage: soak [--seconds N] [--threads T] [--capacity C]

  --seconds N    how long the threads run (default {})
  --threads T    threads, at least 2 (default {}: the cores, at least 4)
  --capacity C   the pool's capacity, at least 4 (default {})
  -h, --help     print this and exit",
        args.seconds, args.threads, args.capacity
    )
}

/// A bad argument: the usage on stderr, status 2.
fn usage(defaults: &Args) -> ! {
    eprintln!("{}", usage_text(defaults));
    process::exit(2);
}

fn parse_args() -> Args {
    let cores = thread::available_parallelism().map_or(1, |n| n.get());
    let defaults = Args {
        seconds: 10,
        // At least 4, so that threads interleave even on a small machine.
        threads: cores.max(4),
        capacity: 16,
    };
    let mut args = defaults;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            println!("{}", usage_text(&defaults));
            process::exit(0);
        }
        let mut value = || -> u64 {
            it.next()
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| usage(&defaults))
        };
        match flag.as_str() {
            "--seconds" => args.seconds = value(),
            "--threads" => args.threads = value() as usize,
            "--capacity" => args.capacity = value() as usize,
            _ => usage(&defaults),
        }
    }
    if args.threads < 2 || args.capacity < 4 {
        eprintln!("need --threads >= 2 and --capacity >= 4");
        process::exit(2);
    }
    args
}

// ---------------------------------------------------------------------------
// Values and closures
// ---------------------------------------------------------------------------

/// What the closures and the values did.
#[derive(Default)]
struct Tally {
    made: AtomicU64,
    dropped: AtomicU64,
    /// Sums of the ids made and dropped: with the counts, a double drop
    /// hiding a missed one would still show.
    made_id_sum: AtomicU64,
    dropped_id_sum: AtomicU64,
    factory_calls: AtomicU64,
    reset_calls: AtomicU64,
    /// Set at the end: no more injected panics.
    calm: AtomicBool,
    violations: AtomicU64,
}

impl Tally {
    fn violation(&self, what: &str) {
        if self.violations.fetch_add(1, SeqCst) < 20 {
            eprintln!("VIOLATION: {what}");
        }
    }

    fn injects(&self, call: u64, every: u64) -> bool {
        call % every == 0 && !self.calm.load(SeqCst)
    }
}

struct Item {
    id: u64,
    /// The ticket of the guard holding this value; 0 while in the pool.
    holder: AtomicU64,
    /// The holder's ticket, written through the guard; the reset clears it.
    stamp: u64,
    tally: Arc<Tally>,
}

impl Drop for Item {
    fn drop(&mut self) {
        self.tally.dropped.fetch_add(1, SeqCst);
        self.tally.dropped_id_sum.fetch_add(self.id, SeqCst);
    }
}

fn build_pool(capacity: usize, tally: &Arc<Tally>) -> Pool<Item> {
    let make = Arc::clone(tally);
    let clear = Arc::clone(tally);
    Pool::builder(move || {
        let call = make.factory_calls.fetch_add(1, SeqCst) + 1;
        if make.injects(call, FACTORY_PANIC_EVERY) {
            panic::panic_any(INJECTED);
        }
        let id = make.made.fetch_add(1, SeqCst);
        make.made_id_sum.fetch_add(id, SeqCst);
        Item {
            id,
            holder: AtomicU64::new(0),
            stamp: 0,
            tally: Arc::clone(&make),
        }
    })
    .capacity(capacity)
    .lazy()
    .reset(move |item: &mut Item| {
        if item.holder.load(SeqCst) != 0 {
            clear.violation("a value was reset while a guard held it");
        }
        let call = clear.reset_calls.fetch_add(1, SeqCst) + 1;
        if clear.injects(call, RESET_PANIC_EVERY) {
            panic::panic_any(INJECTED);
        }
        item.stamp = 0;
    })
    .build()
    .expect("capacity checked by the argument parser")
}

fn is_injected(payload: &(dyn std::any::Any + Send)) -> bool {
    payload.downcast_ref::<&str>().copied() == Some(INJECTED)
        || payload.downcast_ref::<String>().map(String::as_str) == Some(INJECTED)
}

/// Hides the injected panics; every other panic reaches the default hook.
fn install_panic_hook() {
    let default = panic::take_hook();
    panic::set_hook(Box::new(move |info| {
        if !is_injected(info.payload()) {
            default(info);
        }
    }));
}

// ---------------------------------------------------------------------------
// Guards, mailboxes and the per-thread worker
// ---------------------------------------------------------------------------

enum Guard<'p> {
    Borrowed(PoolGuard<'p, Item>),
    Owned(OwnedPoolGuard<Item>),
}

impl Guard<'_> {
    fn item(&mut self) -> &mut Item {
        match self {
            Guard::Borrowed(g) => g,
            Guard::Owned(g) => g,
        }
    }

    fn index(&self) -> usize {
        match self {
            Guard::Borrowed(g) => PoolGuard::index(g),
            Guard::Owned(g) => OwnedPoolGuard::index(g),
        }
    }
}

/// A guard and the ticket it stamped on its value.
struct Held<'p> {
    guard: Guard<'p>,
    ticket: u64,
}

/// The sending side of a thread's channel. Closed while the thread waits in
/// a blocking acquire and once it finishes, so that no guard is ever stuck
/// in the channel of a thread that cannot take it (which could leave that
/// waiter, or another, waiting for it forever).
struct Mailbox<'p> {
    gate: Mutex<Gate<'p>>,
}

struct Gate<'p> {
    open: bool,
    tx: Sender<Held<'p>>,
}

impl<'p> Mailbox<'p> {
    fn gate(&self) -> MutexGuard<'_, Gate<'p>> {
        self.gate.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `held`, or gives it back if the mailbox is closed.
    fn send(&self, held: Held<'p>) -> Result<(), Held<'p>> {
        let gate = self.gate();
        if !gate.open {
            return Err(held);
        }
        // Sent under the lock: once `close` returns, every guard sent
        // before is already in the channel.
        gate.tx.send(held).map_err(|e| e.0)
    }

    fn set_open(&self, open: bool) {
        self.gate().open = open;
    }
}

/// What one thread did and saw.
#[derive(Default)]
struct Counts {
    ops: u64,
    try_acquires: u64,
    try_failed: u64,
    acquires: u64,
    timed_acquires: u64,
    timed_out: u64,
    owned: u64,
    batches: u64,
    releases: u64,
    detached: u64,
    forgotten: u64,
    sent: u64,
    received: u64,
    factory_panics: u64,
    reset_panics: u64,
    max_wait: Duration,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.ops += o.ops;
        self.try_acquires += o.try_acquires;
        self.try_failed += o.try_failed;
        self.acquires += o.acquires;
        self.timed_acquires += o.timed_acquires;
        self.timed_out += o.timed_out;
        self.owned += o.owned;
        self.batches += o.batches;
        self.releases += o.releases;
        self.detached += o.detached;
        self.forgotten += o.forgotten;
        self.sent += o.sent;
        self.received += o.received;
        self.factory_panics += o.factory_panics;
        self.reset_panics += o.reset_panics;
        self.max_wait = self.max_wait.max(o.max_wait);
    }
}

struct Shared<'p> {
    pool: &'p Arc<Pool<Item>>,
    tally: &'p Tally,
    /// Like `Item::holder`, per slot index: the ticket of the guard on it.
    slot_holders: Vec<AtomicU64>,
    mailboxes: Vec<Mailbox<'p>>,
    /// Guards leaked so far, at most `capacity / 4`.
    forgotten: AtomicUsize,
    stop: AtomicBool,
}

#[derive(Clone, Copy)]
enum How {
    Try,
    Wait,
    Timeout(Duration),
}

/// xorshift64*: enough randomness to vary the interleavings.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

struct Worker<'s, 'p> {
    me: usize,
    shared: &'s Shared<'p>,
    inbox: Receiver<Held<'p>>,
    held: Vec<Held<'p>>,
    rng: Rng,
    next_ticket: u64,
    counts: Counts,
}

impl<'p> Worker<'_, 'p> {
    fn run(&mut self) {
        while !self.shared.stop.load(SeqCst) {
            self.step();
            self.counts.ops += 1;
        }
        self.finish();
    }

    fn step(&mut self) {
        let roll = self.rng.below(100);
        let full = self.held.len() >= MAX_HELD;
        match roll {
            _ if full && roll < 45 => self.release_random(),
            0..=26 => self.acquire(How::Try),
            27..=31 => {
                let micros = self.rng.below(50) as u64;
                self.acquire(How::Timeout(Duration::from_micros(micros)));
            }
            32..=33 => self.acquire(How::Wait),
            34..=44 => self.batch(),
            45..=69 => self.release_random(),
            70..=74 => self.detach_random(),
            75 => self.forget_random(),
            76..=85 => self.send_random(),
            86..=95 => self.receive(),
            _ => self.check_stats(),
        }
    }

    fn violation(&self, what: &str) {
        self.shared
            .tally
            .violation(&format!("thread {}: {what}", self.me));
    }

    /// Acquires one guard; `None` if none came (or the factory panicked).
    fn take(&mut self, how: How) -> Option<Held<'p>> {
        let pool = self.shared.pool;
        let owned = self.rng.next() & 1 == 1;
        let result = panic::catch_unwind(AssertUnwindSafe(|| match (owned, how) {
            (false, How::Try) => pool.try_acquire().ok().map(Guard::Borrowed),
            (false, How::Wait) => Some(Guard::Borrowed(pool.acquire().unwrap())),
            (false, How::Timeout(t)) => pool.acquire_timeout(t).ok().map(Guard::Borrowed),
            (true, How::Try) => pool.try_acquire_owned().ok().map(Guard::Owned),
            (true, How::Wait) => Some(Guard::Owned(pool.acquire_owned().unwrap())),
            (true, How::Timeout(t)) => pool.acquire_owned_timeout(t).ok().map(Guard::Owned),
        }));
        let c = &mut self.counts;
        c.owned += u64::from(owned);
        match how {
            How::Try => c.try_acquires += 1,
            How::Wait => c.acquires += 1,
            How::Timeout(_) => c.timed_acquires += 1,
        }
        let mut guard = match result {
            Ok(Some(guard)) => guard,
            Ok(None) => {
                match how {
                    How::Try => c.try_failed += 1,
                    How::Timeout(_) => c.timed_out += 1,
                    // Unreachable: `acquire` always returns a guard.
                    How::Wait => {}
                }
                return None;
            }
            Err(payload) => {
                if !is_injected(&*payload) {
                    panic::resume_unwind(payload);
                }
                c.factory_panics += 1;
                return None;
            }
        };
        self.next_ticket += 1;
        let ticket = ((self.me as u64 + 1) << 40) | self.next_ticket;
        let index = guard.index();
        match self.shared.slot_holders.get(index) {
            None => self.violation(&format!("slot index {index} out of range")),
            Some(slot) => {
                let previous = slot.swap(ticket, SeqCst);
                if previous != 0 {
                    self.violation(&format!(
                        "slot {index} handed out while {previous:#x} held it"
                    ));
                }
            }
        }
        let item = guard.item();
        let previous = item.holder.swap(ticket, SeqCst);
        if previous != 0 {
            let what = format!(
                "value {} acquired while ticket {previous:#x} held it",
                item.id
            );
            self.violation(&what);
        } else if item.stamp != 0 {
            let what = format!("value {} reused without a reset", item.id);
            self.violation(&what);
        }
        guard.item().stamp = ticket;
        Some(Held { guard, ticket })
    }

    fn acquire(&mut self, how: How) {
        if let How::Wait = how {
            // Wait only holding nothing and with the mailbox closed: every
            // slot is then held by a thread that does not wait, and comes
            // back.
            self.release_all();
            self.close_and_drain();
            let start = Instant::now();
            let taken = self.take(how);
            self.counts.max_wait = self.counts.max_wait.max(start.elapsed());
            self.shared.mailboxes[self.me].set_open(true);
            self.held.extend(taken);
        } else if let Some(held) = self.take(how) {
            self.held.push(held);
        }
    }

    /// Holds several guards at once, then releases them in a random order.
    fn batch(&mut self) {
        self.counts.batches += 1;
        let n = 1 + self.rng.below(MAX_HELD - self.held.len().min(MAX_HELD - 1));
        for _ in 0..n {
            let how = if self.rng.below(4) != 0 {
                How::Try
            } else {
                How::Timeout(Duration::from_micros(20))
            };
            if let Some(held) = self.take(how) {
                self.held.push(held);
            }
        }
        thread::yield_now();
        while self.held.len() > 1 && self.rng.below(4) != 0 {
            self.release_random();
        }
    }

    fn check_out(&mut self, held: &mut Held<'p>) {
        let ticket = held.ticket;
        let index = held.guard.index();
        let slot = &self.shared.slot_holders[index];
        if let Err(other) = slot.compare_exchange(ticket, 0, SeqCst, SeqCst) {
            self.violation(&format!("slot {index}: holder {other:#x}, not {ticket:#x}"));
        }
        let item = held.guard.item();
        if item.stamp != ticket {
            let what = format!("value {}: stamp {:#x} overwritten", item.id, item.stamp);
            self.violation(&what);
        }
        if let Err(other) = item.holder.compare_exchange(ticket, 0, SeqCst, SeqCst) {
            let what = format!("value {}: holder {other:#x}, not {ticket:#x}", item.id);
            self.violation(&what);
        }
    }

    fn release(&mut self, mut held: Held<'p>) {
        self.check_out(&mut held);
        self.counts.releases += 1;
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(move || drop(held))) {
            if !is_injected(&*payload) {
                panic::resume_unwind(payload);
            }
            self.counts.reset_panics += 1;
        }
    }

    fn pick(&mut self) -> Option<Held<'p>> {
        if self.held.is_empty() {
            return None;
        }
        let k = self.rng.below(self.held.len());
        Some(self.held.swap_remove(k))
    }

    fn release_random(&mut self) {
        if let Some(held) = self.pick() {
            self.release(held);
        }
    }

    fn release_all(&mut self) {
        while let Some(held) = self.held.pop() {
            self.release(held);
        }
    }

    fn detach_random(&mut self) {
        let mut held = match self.pick() {
            Some(held) => held,
            None => return,
        };
        self.check_out(&mut held);
        self.counts.detached += 1;
        let item = match held.guard {
            Guard::Borrowed(g) => PoolGuard::detach(g),
            Guard::Owned(g) => OwnedPoolGuard::detach(g),
        };
        drop(item);
    }

    fn forget_random(&mut self) {
        // Only borrowed guards: a leaked owned guard would also leak the
        // pool's `Arc`.
        let k = match self
            .held
            .iter()
            .position(|h| matches!(h.guard, Guard::Borrowed(_)))
        {
            Some(k) => k,
            None => return,
        };
        let limit = self.shared.pool.capacity() / 4;
        let budget = self
            .shared
            .forgotten
            .fetch_update(SeqCst, SeqCst, |f| (f < limit).then_some(f + 1));
        if budget.is_ok() {
            self.counts.forgotten += 1;
            std::mem::forget(self.held.swap_remove(k));
        }
    }

    fn send_random(&mut self) {
        let held = match self.pick() {
            Some(held) => held,
            None => return,
        };
        let others = self.shared.mailboxes.len() - 1;
        let to = (self.me + 1 + self.rng.below(others)) % self.shared.mailboxes.len();
        match self.shared.mailboxes[to].send(held) {
            Ok(()) => self.counts.sent += 1,
            Err(held) => self.held.push(held),
        }
    }

    fn receive(&mut self) {
        while let Ok(mut held) = self.inbox.try_recv() {
            self.counts.received += 1;
            let item = held.guard.item();
            if item.holder.load(SeqCst) != held.ticket {
                let what = format!("value {} changed holder in transit", item.id);
                self.violation(&what);
            }
            self.held.push(held);
        }
        while self.held.len() > MAX_HELD {
            self.release_random();
        }
    }

    fn close_and_drain(&mut self) {
        self.shared.mailboxes[self.me].set_open(false);
        self.receive();
        self.release_all();
    }

    fn check_stats(&mut self) {
        let forgotten = self.shared.forgotten.load(SeqCst);
        let s = self.shared.pool.stats();
        // Stats are exact only when nothing is in flight: a slot on its way
        // between a thread's cache and the free list (a refill, a flush, a
        // revocation) can be counted in both for a moment, so `in_use` may
        // read low by at most the cached slots (none in pools without
        // caches). This thread's own guards and the forgotten ones are held
        // throughout.
        let ok = s.in_use + s.available == s.capacity
            && s.in_use + s.cached >= self.held.len() + forgotten
            && s.in_use <= s.peak_in_use
            && s.peak_in_use <= s.capacity
            && s.timeouts <= s.waits;
        if !ok {
            self.violation(&format!("inconsistent stats {s:?}"));
        }
    }

    fn finish(&mut self) {
        self.release_all();
        self.close_and_drain();
        if !self.held.is_empty() {
            self.violation("guards left after finishing");
        }
    }
}

// ---------------------------------------------------------------------------
// The run and the final checks
// ---------------------------------------------------------------------------

fn main() {
    let args = parse_args();
    install_panic_hook();
    println!(
        "soak: {} threads, capacity {}, {} s (factory panics every {FACTORY_PANIC_EVERY}th \
         call, reset every {RESET_PANIC_EVERY}th)",
        args.threads, args.capacity, args.seconds
    );

    let finished = Arc::new(AtomicBool::new(false));
    {
        let finished = Arc::clone(&finished);
        let limit = Duration::from_secs(args.seconds) + GRACE;
        thread::spawn(move || {
            thread::sleep(limit);
            if !finished.load(SeqCst) {
                eprintln!(
                    "VIOLATION: the threads did not finish {} s after the deadline \
                     (a lost wake-up or a lost slot)",
                    GRACE.as_secs()
                );
                process::exit(1);
            }
        });
    }

    let tally = Arc::new(Tally::default());
    let pool = Arc::new(build_pool(args.capacity, &tally));
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..args.threads).map(|_| mpsc::channel()).unzip();
    let shared = Shared {
        pool: &pool,
        tally: &tally,
        slot_holders: (0..args.capacity).map(|_| AtomicU64::new(0)).collect(),
        mailboxes: senders
            .into_iter()
            .map(|tx| Mailbox {
                gate: Mutex::new(Gate { open: true, tx }),
            })
            .collect(),
        forgotten: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    };

    let start = Instant::now();
    let mut total = Counts::default();
    thread::scope(|s| {
        let seed = start.elapsed().as_nanos() as u64 ^ u64::from(process::id());
        let workers: Vec<_> = receivers
            .into_iter()
            .enumerate()
            .map(|(me, inbox)| {
                let shared = &shared;
                s.spawn(move || {
                    let mut worker = Worker {
                        me,
                        shared,
                        inbox,
                        held: Vec::new(),
                        rng: Rng((seed ^ (me as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1),
                        next_ticket: 0,
                        counts: Counts::default(),
                    };
                    worker.run();
                    std::mem::take(&mut worker.counts)
                })
            })
            .collect();
        thread::sleep(Duration::from_secs(args.seconds));
        shared.stop.store(true, SeqCst);
        for worker in workers {
            match worker.join() {
                Ok(counts) => total.add(&counts),
                Err(_) => tally.violation("a worker thread panicked"),
            }
        }
    });
    let elapsed = start.elapsed();
    finished.store(true, SeqCst);
    let forgotten = shared.forgotten.load(SeqCst);
    drop(shared);

    report(&total, elapsed);
    let stats = pool.stats();
    println!("pool: {stats:?}");
    check_final(&pool, &tally, &total, stats, forgotten);
    drop(pool);
    let made = tally.made.load(SeqCst);
    let dropped = tally.dropped.load(SeqCst);
    println!("values: {made} made, {dropped} dropped");
    if made != dropped || tally.made_id_sum.load(SeqCst) != tally.dropped_id_sum.load(SeqCst) {
        tally.violation("values made and dropped do not match after the pool was dropped");
    }

    let violations = tally.violations.load(SeqCst);
    if violations == 0 {
        println!("result: OK, no violations");
    } else {
        println!("result: FAILED, {violations} violations");
        process::exit(1);
    }
}

fn report(c: &Counts, elapsed: Duration) {
    let secs = elapsed.as_secs_f64();
    println!(
        "ops: {} in {secs:.1} s = {:.0} ops/s",
        c.ops,
        c.ops as f64 / secs
    );
    println!(
        "  try_acquire {} ({} empty), acquire {} (longest wait {:?}), \
         acquire_timeout {} ({} timed out), owned {}",
        c.try_acquires,
        c.try_failed,
        c.acquires,
        c.max_wait,
        c.timed_acquires,
        c.timed_out,
        c.owned
    );
    println!(
        "  batches {}, releases {}, detached {}, forgotten {}, sent {}, received {}",
        c.batches, c.releases, c.detached, c.forgotten, c.sent, c.received
    );
    println!(
        "  injected panics caught: factory {}, reset {}",
        c.factory_panics, c.reset_panics
    );
}

fn check_final(pool: &Arc<Pool<Item>>, tally: &Tally, c: &Counts, stats: Stats, forgotten: usize) {
    let capacity = pool.capacity();
    let expect = |ok: bool, what: &str| {
        if !ok {
            tally.violation(what);
        }
    };
    expect(
        stats.in_use == forgotten,
        "slots in use beyond the leaked guards",
    );
    expect(stats.available == capacity - forgotten, "slots missing");
    expect(
        stats.failed_acquires == c.try_failed,
        "failed_acquires != empty try_acquires",
    );
    expect(
        stats.timeouts == c.timed_out,
        "timeouts != timed-out acquires",
    );
    expect(stats.waits >= stats.timeouts, "fewer waits than timeouts");
    expect(
        stats.peak_in_use <= capacity && stats.peak_in_use >= forgotten,
        "peak_in_use out of range",
    );
    expect(
        Arc::strong_count(pool) == 1,
        "an owned guard outlived its thread",
    );
    let factory_calls = tally.factory_calls.load(SeqCst);
    expect(
        factory_calls == tally.made.load(SeqCst) + c.factory_panics
            && c.factory_panics == factory_calls / FACTORY_PANIC_EVERY,
        "factory calls do not add up",
    );
    let reset_calls = tally.reset_calls.load(SeqCst);
    expect(
        reset_calls == c.releases && c.reset_panics == reset_calls / RESET_PANIC_EVERY,
        "reset calls do not add up (one per release)",
    );

    // Every slot not leaked can be held at once, by distinct guards, each
    // holding a value nobody else marked.
    tally.calm.store(true, SeqCst);
    let all: Vec<_> = (forgotten..capacity)
        .filter_map(|_| pool.try_acquire().ok())
        .collect();
    expect(
        all.len() == capacity - forgotten,
        "could not hold every free slot at once",
    );
    expect(pool.try_acquire().is_err(), "a slot beyond the capacity");
    let mut indices: Vec<usize> = all.iter().map(PoolGuard::index).collect();
    indices.sort_unstable();
    indices.dedup();
    expect(indices.len() == all.len(), "two guards share a slot");
    expect(
        all.iter()
            .all(|item| item.holder.load(SeqCst) == 0 && item.stamp == 0),
        "a free value still marked or not reset",
    );
    drop(all);
    expect(
        pool.stats().in_use == forgotten,
        "the final guards did not all return",
    );
}
