//! An event dispatcher whose events come from a pool, with no allocation
//! after warm-up.
//!
//! After the libgdx "Pooling in Java" article: game code asks the dispatcher
//! for an event, fills it in and hands it back, without knowing who listens
//! or how events are recycled. Here units hit and heal each other tens of
//! thousands of times a frame:
//!
//! - `send` is the article's `acquire, update, notify, release`: the event
//!   reaches every listener at once and goes back to the pool.
//! - `post` queues the event until the frame's `flush`, which delivers the
//!   queue in order and then releases every event. If all the pool's events
//!   are queued, `acquire` flushes early rather than grow: the pool bounds
//!   the memory events use.
//!
//! An event owns a `Vec` (units caught in an area hit) and a `String` (its
//! combat-log line). The pool's reset closure clears both and keeps their
//! capacity, so filling a recycled event allocates nothing. A counting
//! `#[global_allocator]` proves it: allocations are counted from the end of
//! the warm-up frames (setup, and any growth of the events' buffers, happen
//! before; with the sizes here the first frame is already allocation-free).
//! The example exits with status 1 if any allocation was counted, if a
//! listener missed an event, or if the pool is not empty at the end.
//!
//! ```text
//! cargo run --release --example events
//! cargo run --release --example events -- --frames 10 --events 5000
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::fmt::{Display, Write as _};
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use tagpool::{Pool, PoolGuard};

/// Counts allocation calls (`alloc`, `alloc_zeroed` and `realloc`) made
/// through the global allocator, then forwards them to [`System`].
struct CountingAllocator;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

fn allocations() -> u64 {
    // Relaxed: one thread reads its own count; nothing is published.
    ALLOCATIONS.load(Ordering::Relaxed)
}

// SAFETY: every method forwards its arguments unchanged to `System`, which
// implements `GlobalAlloc` correctly; counting does not touch the memory.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // Relaxed: a statistic.
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // Relaxed: a statistic.
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // Relaxed: a statistic.
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller upholds `GlobalAlloc::realloc`'s contract, and
        // `ptr` came from this allocator, that is from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller upholds `GlobalAlloc::dealloc`'s contract, and
        // `ptr` came from this allocator, that is from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const USAGE: &str = "\
usage: events [--frames N] [--events E] [--warmup W] [--capacity C]

  --frames N     frames measured after warm-up (default 100)
  --events E     events per frame (default 20000)
  --warmup W     frames run before counting allocations (default 2)
  --capacity C   events in the pool, the most queued at once (default 4096)";

/// Units in the game world.
const UNITS: u32 = 1024;
const MAX_HP: i32 = 500;
/// The most units an area hit catches besides its target.
const MAX_SPLASH: usize = 8;
/// Room for the longest combat-log line.
const TEXT_CAPACITY: usize = 96;

struct Args {
    frames: usize,
    events: usize,
    warmup: usize,
    capacity: usize,
}

impl Args {
    fn parse() -> Result<Self, String> {
        let mut args = Args {
            frames: 100,
            events: 20_000,
            warmup: 2,
            capacity: 4096,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            match flag.as_str() {
                "--frames" => args.frames = value(&mut it, &flag)?,
                "--events" => args.events = value(&mut it, &flag)?,
                "--warmup" => args.warmup = value(&mut it, &flag)?,
                "--capacity" => args.capacity = value(&mut it, &flag)?,
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        if args.frames == 0 || args.events == 0 || args.capacity == 0 {
            return Err("--frames, --events and --capacity must be at least 1".into());
        }
        Ok(args)
    }
}

/// Parses the value that follows `flag`.
fn value<T>(it: &mut impl Iterator<Item = String>, flag: &str) -> Result<T, String>
where
    T: FromStr,
    T::Err: Display,
{
    let raw = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
    raw.parse().map_err(|err| format!("{flag} {raw}: {err}"))
}

/// xorshift64: a tiny deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `0..n`.
    fn below(&mut self, n: u32) -> u32 {
        (self.next() % u64::from(n)) as u32
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Kind {
    #[default]
    Damage,
    Heal,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Element {
    #[default]
    Physical,
    Fire,
    Frost,
}

impl Element {
    const ALL: [Element; 3] = [Element::Physical, Element::Fire, Element::Frost];
}

/// A pooled event. `splash` and `text` keep their capacity between uses.
#[derive(Debug, Default)]
struct Event {
    kind: Kind,
    element: Element,
    source: u32,
    target: u32,
    amount: u32,
    /// Other units caught in an area hit, each taking half the amount.
    splash: Vec<u32>,
    /// The combat-log line.
    text: String,
}

impl Event {
    /// The factory: an idle event with room for the largest one.
    fn new() -> Self {
        Event {
            splash: Vec::with_capacity(MAX_SPLASH),
            text: String::with_capacity(TEXT_CAPACITY),
            ..Event::default()
        }
    }

    /// The reset closure: back to idle, keeping the buffers' capacity.
    fn clear(&mut self) {
        self.kind = Kind::default();
        self.element = Element::default();
        self.source = 0;
        self.target = 0;
        self.amount = 0;
        self.splash.clear();
        self.text.clear();
    }

    /// Fills an idle event in as a heal.
    fn heal(&mut self, source: u32, target: u32, amount: u32) {
        self.kind = Kind::Heal;
        (self.source, self.target, self.amount) = (source, target, amount);
        // Writing into a `String` with room to spare does not allocate.
        let _ = write!(self.text, "unit {source} heals unit {target} for {amount}");
    }

    /// Fills an idle event in as a hit, catching the units of `splash`.
    fn damage(
        &mut self,
        source: u32,
        target: u32,
        amount: u32,
        element: Element,
        splash: impl Iterator<Item = u32>,
    ) {
        self.kind = Kind::Damage;
        (self.source, self.target, self.amount) = (source, target, amount);
        self.element = element;
        self.splash.extend(splash.take(MAX_SPLASH));
        let _ = write!(
            self.text,
            "unit {source} hits unit {target} for {amount} {element:?} damage (+{} caught)",
            self.splash.len()
        );
    }

    fn is_idle(&self) -> bool {
        self.amount == 0 && self.splash.is_empty() && self.text.is_empty()
    }

    /// Damage dealt in total: the amount to the target, half to each other
    /// unit caught.
    fn total_damage(&self) -> u64 {
        u64::from(self.amount) + u64::from(self.amount / 2) * self.splash.len() as u64
    }
}

/// Anything that wants to hear about events.
trait Listener {
    fn on_event(&mut self, event: &Event);
}

/// Hands out pooled events and delivers them to listeners.
struct Dispatcher<'a> {
    pool: &'a Pool<Event>,
    listeners: Vec<&'a mut dyn Listener>,
    /// Posted events waiting for `flush`; never longer than the pool.
    queue: Vec<PoolGuard<'a, Event>>,
    early_flushes: u64,
    /// Events that came out of the pool not idle (should never happen).
    dirty: u64,
}

impl<'a> Dispatcher<'a> {
    fn new(pool: &'a Pool<Event>, listeners: Vec<&'a mut dyn Listener>) -> Self {
        Dispatcher {
            pool,
            listeners,
            queue: Vec::with_capacity(pool.capacity()),
            early_flushes: 0,
            dirty: 0,
        }
    }

    /// An idle event to fill in. If every event is queued, delivers the
    /// queue first to free them.
    fn acquire(&mut self) -> PoolGuard<'a, Event> {
        let event = match self.pool.try_acquire() {
            Ok(event) => event,
            Err(_) => {
                self.early_flushes += 1;
                self.flush();
                self.pool.try_acquire().expect("a flush frees every event")
            }
        };
        if !event.is_idle() {
            self.dirty += 1;
        }
        event
    }

    /// Delivers `event` to every listener now, then returns it to the pool.
    fn send(&mut self, event: PoolGuard<'a, Event>) {
        for listener in &mut self.listeners {
            listener.on_event(&event);
        }
    }

    /// Queues `event` for the next `flush`.
    fn post(&mut self, event: PoolGuard<'a, Event>) {
        self.queue.push(event);
    }

    /// Delivers the queued events in order, returning each to the pool.
    fn flush(&mut self) {
        for event in self.queue.drain(..) {
            for listener in &mut self.listeners {
                listener.on_event(&event);
            }
        }
    }
}

/// Applies damage and healing to the units' hit points.
struct Health {
    hp: Vec<i32>,
    events: u64,
    damage: u64,
    deaths: u64,
}

impl Listener for Health {
    fn on_event(&mut self, event: &Event) {
        self.events += 1;
        let target = event.target as usize;
        match event.kind {
            Kind::Heal => self.hp[target] = (self.hp[target] + event.amount as i32).min(MAX_HP),
            Kind::Damage => {
                self.damage += event.total_damage();
                let hits = std::iter::once((event.target, event.amount))
                    .chain(event.splash.iter().map(|&unit| (unit, event.amount / 2)));
                for (unit, amount) in hits {
                    let hp = &mut self.hp[unit as usize];
                    *hp -= amount as i32;
                    if *hp <= 0 {
                        self.deaths += 1;
                        *hp = MAX_HP; // respawn
                    }
                }
            }
        }
    }
}

/// Keeps the combat log: here a hash of every line instead of a file.
#[derive(Default)]
struct CombatLog {
    events: u64,
    bytes: u64,
    hash: u64,
}

impl Listener for CombatLog {
    fn on_event(&mut self, event: &Event) {
        self.events += 1;
        self.bytes += event.text.len() as u64;
        self.hash = event.text.bytes().fold(self.hash, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    }
}

/// Counts damage events by element.
#[derive(Default)]
struct ElementStats {
    events: u64,
    hits: [u64; Element::ALL.len()],
}

impl Listener for ElementStats {
    fn on_event(&mut self, event: &Event) {
        self.events += 1;
        if event.kind == Kind::Damage {
            self.hits[event.element as usize] += 1;
        }
    }
}

/// What the game code sent, to check what the listeners heard.
#[derive(Default)]
struct Sent {
    events: u64,
    damage: u64,
    bytes: u64,
}

impl Sent {
    fn record(&mut self, event: &Event) {
        self.events += 1;
        if event.kind == Kind::Damage {
            self.damage += event.total_damage();
        }
        self.bytes += event.text.len() as u64;
    }
}

/// One frame of game code: `count` hits and heals.
fn play_frame(dispatcher: &mut Dispatcher<'_>, rng: &mut Rng, count: usize, sent: &mut Sent) {
    for _ in 0..count {
        let (source, target, amount) = (rng.below(UNITS), rng.below(UNITS), 1 + rng.below(60));
        let mut event = dispatcher.acquire();
        if rng.below(5) == 0 {
            event.heal(source, target, amount);
            sent.record(&event);
            dispatcher.send(event);
        } else {
            let element = Element::ALL[rng.below(3) as usize];
            let caught = if rng.below(4) == 0 {
                1 + rng.below(MAX_SPLASH as u32)
            } else {
                0
            };
            let splash = (0..caught).map(|_| rng.below(UNITS));
            event.damage(source, target, amount, element, splash);
            sent.record(&event);
            dispatcher.post(event);
        }
    }
    dispatcher.flush();
}

/// Prints one check and remembers whether any failed.
#[derive(Default)]
struct Checks {
    failed: usize,
}

impl Checks {
    fn check(&mut self, ok: bool, what: impl Display) {
        println!("  {}  {what}", if ok { "ok    " } else { "FAILED" });
        if !ok {
            self.failed += 1;
        }
    }
}

fn main() -> ExitCode {
    let args = match Args::parse() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("events: {err}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let at_start = allocations();
    let pool = match Pool::builder(Event::new)
        .capacity(args.capacity)
        .reset(Event::clear)
        .build()
    {
        Ok(pool) => pool,
        Err(err) => {
            eprintln!("events: {err}");
            return ExitCode::from(2);
        }
    };
    let mut health = Health {
        hp: vec![MAX_HP; UNITS as usize],
        events: 0,
        damage: 0,
        deaths: 0,
    };
    let mut log = CombatLog::default();
    let mut elements = ElementStats::default();
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut sent = Sent::default();

    let (after_warmup, after_run, early_flushes, dirty, elapsed) = {
        let mut dispatcher = Dispatcher::new(&pool, vec![&mut health, &mut log, &mut elements]);
        for _ in 0..args.warmup {
            play_frame(&mut dispatcher, &mut rng, args.events, &mut sent);
        }
        // From here on, nothing may allocate: no printing until the end.
        let after_warmup = allocations();
        let start = Instant::now();
        for _ in 0..args.frames {
            play_frame(&mut dispatcher, &mut rng, args.events, &mut sent);
        }
        let elapsed = start.elapsed();
        let after_run = allocations();
        (
            after_warmup,
            after_run,
            dispatcher.early_flushes,
            dispatcher.dirty,
            elapsed,
        )
    };
    let measured = after_run - after_warmup;
    let stats = pool.stats();
    let total_frames = args.warmup + args.frames;
    let measured_events = (args.frames * args.events) as f64;

    println!(
        "events: {} frames ({} warm-up) of {} events, a pool of {} events",
        total_frames, args.warmup, args.events, stats.capacity
    );
    println!(
        "  measured         {} frames in {:.3} s: {:.0} events/s, {:.2} ms per frame",
        args.frames,
        elapsed.as_secs_f64(),
        measured_events / elapsed.as_secs_f64(),
        elapsed.as_secs_f64() * 1e3 / args.frames as f64
    );
    println!(
        "  allocations      {} during setup and warm-up, {measured} after warm-up",
        after_warmup - at_start
    );
    println!(
        "  dispatched       {} events: {} hits ({} physical, {} fire, {} frost), {} heals",
        sent.events,
        elements.hits.iter().sum::<u64>(),
        elements.hits[0],
        elements.hits[1],
        elements.hits[2],
        sent.events - elements.hits.iter().sum::<u64>()
    );
    println!(
        "  listeners        {} deaths; combat log {} bytes, hash {:#018x}",
        health.deaths, log.bytes, log.hash
    );
    println!(
        "  pool             peak in use {} of {}, early flushes {early_flushes} \
         (failed acquires {})",
        stats.peak_in_use, stats.capacity, stats.failed_acquires
    );

    println!("checks");
    let mut checks = Checks::default();
    checks.check(
        measured == 0,
        format_args!(
            "no allocation after warm-up ({measured} in {} frames)",
            args.frames
        ),
    );
    checks.check(
        [health.events, log.events, elements.events] == [sent.events; 3],
        format_args!(
            "every listener heard every event (sent {}, heard {} / {} / {})",
            sent.events, health.events, log.events, elements.events
        ),
    );
    checks.check(
        health.damage == sent.damage && log.bytes == sent.bytes,
        format_args!(
            "listeners saw what was sent (damage {} == {}, log bytes {} == {})",
            health.damage, sent.damage, log.bytes, sent.bytes
        ),
    );
    checks.check(
        dirty == 0,
        format_args!("every event came out of the pool idle ({dirty} did not)"),
    );
    checks.check(
        stats.failed_acquires == early_flushes && stats.peak_in_use <= stats.capacity,
        format_args!(
            "queue bounded by the pool (peak {} of {}, failed acquires {} == early flushes)",
            stats.peak_in_use, stats.capacity, stats.failed_acquires
        ),
    );
    checks.check(
        stats.in_use == 0 && stats.available == stats.capacity,
        format_args!(
            "pool empty at the end (in use {}, available {})",
            stats.in_use, stats.available
        ),
    );

    if checks.failed == 0 {
        ExitCode::SUCCESS
    } else {
        println!("{} check(s) failed", checks.failed);
        ExitCode::FAILURE
    }
}
