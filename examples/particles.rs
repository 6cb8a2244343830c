//! A particle system on a fixed pool, after the "Object Pool" chapter of
//! *Game Programming Patterns*.
//!
//! The pool holds every particle the effect may ever show, made up front
//! (or, with `--initial`, as the bursts demand: see below).
//! Each frame the loop animates the live particles, returns the ones whose
//! lifetime ended, and spawns new ones: a trickle from an ambient emitter and,
//! now and then, a large burst (a wave of the wand). When the pool is
//! exhausted the system does what the chapter recommends for particles:
//! *just don't create* the particle. `try_acquire` fails at once, the
//! particle is counted as refused, and nobody will notice a few missing
//! sparkles in a busy explosion.
//!
//! Live particles are guards kept in a `Vec`; a particle dies by being
//! dropped from it, which returns its slot. A spawned particle is fully
//! re-initialised, so nothing of its past life shows. The run is
//! deterministic (a seeded xorshift generator), so the printed totals and
//! fingerprint are the same every time for the same arguments.
//!
//! Every frame it checks that the live count equals the pool's `in_use` and
//! never exceeds the capacity, and that the pool's storage (`allocated`)
//! never exceeds it either; at the end, that the counters agree and the
//! pool is empty once the particles are dropped. It exits with status 1 if
//! any check fails, and with status 2 on a bad argument.
//!
//! ```text
//! cargo run --release --example particles
//! cargo run --release --example particles -- --frames 120 --capacity 256
//! cargo run --release --example particles -- --capacity 1000000 --initial 1024
//! ```
//!
//! With `--initial N` the pool is elastic: it starts with storage for `N`
//! particles and doubles it as bursts demand, up to the capacity, which
//! stays the hard bound (a million-particle pool need not be allocated up
//! front). The bursts scale with the capacity (up to a third of it), so a
//! large pool grows several times. The run then also prints the storage
//! it ended with and each frame in which it grew (slots before and after),
//! and checks that the storage only grew, ended with at least `N` slots and
//! never passed the capacity. `N` must be between 1 and the capacity.

use std::fmt::Display;
use std::process::ExitCode;
use std::str::FromStr;

use tagpool::{Pool, PoolGuard};

const USAGE: &str = "\
usage: particles [--frames N] [--capacity C] [--initial N] [--seed S]

  --frames N     frames to simulate (default 600)
  --capacity C   particles in the pool (default 1024)
  --initial N    start with storage for N particles (1 to C) and grow it
                 as bursts demand (default: all C, up front)
  --seed S       seed of the generator, not 0 (default 88172645463325252)";

/// About this many rows in the summary table.
const TABLE_ROWS: usize = 15;
/// Width of the live-count bar at full capacity.
const BAR_WIDTH: usize = 24;

struct Args {
    frames: usize,
    capacity: usize,
    initial: Option<usize>,
    seed: u64,
}

impl Args {
    fn parse() -> Result<Self, String> {
        let mut args = Args {
            frames: 600,
            capacity: 1024,
            initial: None,
            seed: 88_172_645_463_325_252,
        };
        let mut it = std::env::args().skip(1);
        while let Some(flag) = it.next() {
            match flag.as_str() {
                "--frames" => args.frames = value(&mut it, &flag)?,
                "--capacity" => args.capacity = value(&mut it, &flag)?,
                "--initial" => args.initial = Some(value(&mut it, &flag)?),
                "--seed" => args.seed = value(&mut it, &flag)?,
                "-h" | "--help" => {
                    println!("{USAGE}");
                    std::process::exit(0);
                }
                other => return Err(format!("unknown argument `{other}`")),
            }
        }
        if args.frames == 0 || args.capacity == 0 || args.seed == 0 {
            return Err("--frames, --capacity and --seed must not be 0".into());
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

/// xorshift64: small, fast and the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number in `lo..hi`.
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + (self.next() % u64::from(hi - lo)) as u32
    }

    /// A number in `-1.0..1.0`.
    fn signed_unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// True with probability `1 / n`.
    fn one_in(&mut self, n: u64) -> bool {
        self.next() % n == 0
    }
}

/// One particle. Dead (`frames_left == 0`) while it sits in the pool.
#[derive(Clone, Copy, Debug, Default)]
struct Particle {
    x: f32,
    y: f32,
    vx: f32,
    vy: f32,
    frames_left: u32,
}

impl Particle {
    /// Brings a particle to life, setting every field: a reused particle
    /// keeps nothing from its previous life.
    fn init(&mut self, x: f32, y: f32, vx: f32, vy: f32, lifetime: u32) {
        *self = Particle {
            x,
            y,
            vx,
            vy,
            frames_left: lifetime,
        };
    }

    /// Moves the particle one frame; returns whether it is still alive.
    fn animate(&mut self) -> bool {
        self.frames_left = self.frames_left.saturating_sub(1);
        self.x += self.vx;
        self.y += self.vy;
        self.vy -= 0.05; // gravity
        self.frames_left > 0
    }
}

/// Counts over a run of frames: one table row, or the totals.
#[derive(Clone, Copy, Default)]
struct Tally {
    spawned: u64,
    refused: u64,
    died: u64,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.spawned += other.spawned;
        self.refused += other.refused;
        self.died += other.died;
    }
}

/// The particle system: the pool and the particles alive now.
struct Particles<'p> {
    pool: &'p Pool<Particle>,
    live: Vec<PoolGuard<'p, Particle>>,
    /// Acquired particles that were still alive (should never happen).
    reused_live: u64,
}

impl<'p> Particles<'p> {
    fn new(pool: &'p Pool<Particle>) -> Self {
        Particles {
            pool,
            // Room for as many particles as the pool has storage for: never
            // more live particles than slots. An elastic pool starts small,
            // and this list then grows with it.
            live: Vec::with_capacity(pool.stats().allocated),
            reused_live: 0,
        }
    }

    /// Animates every live particle and returns the dead ones to the pool.
    fn update(&mut self) -> u64 {
        let before = self.live.len();
        self.live.retain_mut(|particle| particle.animate());
        (before - self.live.len()) as u64
    }

    /// Tries to spawn `count` particles around `(x, y)`; returns how many
    /// were spawned and how many refused because the pool was full.
    fn burst(&mut self, rng: &mut Rng, x: f32, y: f32, count: u32) -> Tally {
        let mut tally = Tally::default();
        for _ in 0..count {
            // Just don't create: a full pool refuses at once.
            let mut particle = match self.pool.try_acquire() {
                Ok(particle) => particle,
                Err(_) => {
                    tally.refused += 1;
                    continue;
                }
            };
            if particle.frames_left != 0 {
                self.reused_live += 1;
            }
            let (vx, vy) = (rng.signed_unit() * 2.0, rng.signed_unit() * 2.0 + 1.0);
            particle.init(x, y, vx, vy, rng.range(20, 90));
            self.live.push(particle);
            tally.spawned += 1;
        }
        tally
    }
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
            eprintln!("particles: {err}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut builder = Pool::builder(Particle::default).capacity(args.capacity);
    if let Some(initial) = args.initial {
        builder = builder.initial(initial);
    }
    let pool = match builder.build() {
        Ok(pool) => pool,
        Err(err) => {
            eprintln!("particles: {err}");
            return ExitCode::from(2);
        }
    };
    let capacity = pool.capacity();
    // Scale the effect with the pool, so that a small pool still overflows.
    let ambient_max = (capacity / 100).max(2) as u32;
    let burst_max = (capacity / 3).max(4) as u32;

    let mut rng = Rng(args.seed);
    let mut system = Particles::new(&pool);
    let rows_every = (args.frames + TABLE_ROWS - 1) / TABLE_ROWS;
    let mut row = Tally::default();
    let mut total = Tally::default();
    let mut max_live = 0;
    let mut in_use_mismatches = 0u64;
    let mut over_capacity = 0u64;
    let mut first_bad_frame = None;
    let mut allocated = pool.stats().allocated;
    // The frames during which the pool grew: (frame, slots before, after).
    let mut growths: Vec<(usize, usize, usize)> = Vec::new();
    let mut over_bound = 0u64;

    println!(
        "particles: {} frames, a pool of {capacity} particles, seed {}",
        args.frames, args.seed
    );
    println!(
        "  {:>11}  {:>8}  {:>8}  {:>8}  {:>6}  live / capacity",
        "frames", "spawned", "refused", "died", "live"
    );
    for frame in 0..args.frames {
        let mut tally = Tally {
            died: system.update(),
            ..Tally::default()
        };

        // The ambient emitter: a few particles every frame.
        let count = rng.range(0, ambient_max + 1);
        tally.add(system.burst(&mut rng, 0.0, 0.0, count));
        // A wave of the wand: sometimes, a burst of many at once.
        if rng.one_in(16) {
            let (x, y) = (rng.signed_unit() * 100.0, rng.signed_unit() * 100.0);
            let count = rng.range(burst_max / 4, burst_max + 1);
            tally.add(system.burst(&mut rng, x, y, count));
        }

        let live = system.live.len();
        let stats = pool.stats();
        if live != stats.in_use || live > capacity {
            in_use_mismatches += u64::from(live != stats.in_use);
            over_capacity += u64::from(live > capacity);
            first_bad_frame.get_or_insert(frame);
        }
        max_live = max_live.max(live);
        if stats.allocated != allocated {
            growths.push((frame, allocated, stats.allocated));
            allocated = stats.allocated;
        }
        over_bound += u64::from(stats.allocated > capacity);
        row.add(tally);
        total.add(tally);

        if (frame + 1) % rows_every == 0 || frame + 1 == args.frames {
            let first = frame - frame % rows_every;
            let bar = "#".repeat(((live * BAR_WIDTH + capacity - 1) / capacity).min(BAR_WIDTH));
            println!(
                "  {:>11}  {:>8}  {:>8}  {:>8}  {:>6}  |{bar:<BAR_WIDTH$}|",
                format!("{first}..={frame}"),
                row.spawned,
                row.refused,
                row.died,
                live
            );
            row = Tally::default();
        }
    }

    let live_at_end = system.live.len();
    let fingerprint = system.live.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, p| {
        [p.x, p.y, p.vx, p.vy].iter().fold(h, |h, v| {
            (h ^ u64::from(v.to_bits())).wrapping_mul(0x0000_0100_0000_01b3)
        }) ^ u64::from(p.frames_left)
    });
    println!(
        "  {:>11}  {:>8}  {:>8}  {:>8}  {:>6}",
        "total", total.spawned, total.refused, total.died, live_at_end
    );
    let stats = pool.stats();
    println!(
        "  pool: peak in use {} of {}, failed acquires {}; final state fingerprint {fingerprint:#018x}",
        stats.peak_in_use, stats.capacity, stats.failed_acquires
    );
    if let Some(initial) = args.initial {
        println!(
            "  storage: {} of {} slots allocated, from {initial}; it grew during {} frames",
            stats.allocated,
            stats.capacity,
            growths.len()
        );
        for (frame, from, to) in &growths {
            println!("    frame {frame:>5}: {from:>10} -> {to:>10} slots");
        }
    }

    let reused_live = system.reused_live;
    drop(system); // every remaining particle goes back to the pool
    let after = pool.stats();

    println!("checks");
    let mut checks = Checks::default();
    checks.check(
        in_use_mismatches == 0,
        format_args!("live == pool in_use on every frame ({in_use_mismatches} frames differ)"),
    );
    checks.check(
        over_capacity == 0 && stats.peak_in_use <= capacity,
        format_args!(
            "live <= capacity on every frame (max live {max_live}, pool peak {})",
            stats.peak_in_use
        ),
    );
    checks.check(
        stats.peak_in_use >= max_live,
        format_args!(
            "pool peak bounds the most particles alive at once ({} >= {max_live}; equal with caches off)",
            stats.peak_in_use
        ),
    );
    checks.check(
        stats.failed_acquires == total.refused,
        format_args!(
            "pool failed acquires == refused ({} == {})",
            stats.failed_acquires, total.refused
        ),
    );
    checks.check(
        total.spawned == total.died + live_at_end as u64,
        format_args!(
            "spawned == died + live ({} == {} + {live_at_end})",
            total.spawned, total.died
        ),
    );
    checks.check(
        reused_live == 0,
        format_args!("every particle came out of the pool dead ({reused_live} were alive)"),
    );
    checks.check(
        after.in_use == 0 && after.available == capacity,
        format_args!(
            "pool empty once the system is dropped (in use {}, available {})",
            after.in_use, after.available
        ),
    );

    checks.check(
        over_bound == 0 && stats.allocated <= capacity,
        format_args!(
            "storage never above the capacity ({} of {capacity} slots allocated)",
            stats.allocated
        ),
    );
    if let Some(initial) = args.initial {
        let grew_only_up = growths.iter().all(|&(_, from, to)| from < to);
        checks.check(
            stats.allocated >= initial
                && grew_only_up
                && (!growths.is_empty() || stats.peak_in_use <= initial),
            format_args!(
                "storage started at {initial} slots and only grew, as needed ({} slots at the end, grew in {} frames)",
                stats.allocated,
                growths.len()
            ),
        );
    }

    if let Some(frame) = first_bad_frame {
        println!("first bad frame: {frame}");
    }
    if checks.failed == 0 {
        ExitCode::SUCCESS
    } else {
        println!("{} check(s) failed", checks.failed);
        ExitCode::FAILURE
    }
}
