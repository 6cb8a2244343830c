//! A particle system over structure-of-arrays storage, driven by an
//! [`IndexPool`]: positions, velocities and lifetimes live in three arrays
//! of the caller's, and a particle is an index into them, held by an
//! `IndexGuard`.
//!
//! The pool owns no particle data: it hands out indices in `0..capacity`,
//! each held by one guard at a time, and takes an index back when its
//! guard drops. Each frame spawns `--spawn` particles (`try_acquire`; when
//! every index is held, the spawn is dropped: the "just don't create it"
//! policy, which never blocks), moves the live ones, and kills those whose
//! lifetime ran out by dropping their guards. The live particles are the
//! guards in a `Vec<IndexGuard>`.
//!
//! The run is made twice from the same seed: once updating on one thread,
//! once splitting every frame's update across two threads with
//! `std::thread::scope`. Safe Rust cannot give two threads one array to
//! write at scattered indices, so the arrays are split in halves
//! (`split_at_mut`) and each thread updates the live particles whose index
//! falls in its half. The two runs must agree bit for bit.
//!
//! Every frame it checks that the live indices are distinct and below the
//! capacity and that the pool's `in_use` is the live count; at the end,
//! that the counters agree and that the pool is empty once the guards are
//! dropped. It exits with status 1 if a check fails, 2 on a bad argument.
//!
//! ```text
//! cargo run --release --example soa_particles
//! cargo run --release --example soa_particles -- --capacity 8 --spawn 16 --frames 20
//! ```

use std::fmt::Display;
use std::process::ExitCode;
use std::thread;

use tagpool::{IndexGuard, IndexPool, IndexStats};

const USAGE: &str = "\
usage: soa_particles [--frames N] [--capacity N] [--spawn N]

  --frames N     frames to simulate (default 300)
  --capacity N   particles at most, the pool's indices (default 4096)
  --spawn N      particles spawned per frame (default 64)";

/// Seconds per frame, and the gravity pulling the particles down.
const DT: f32 = 1.0 / 60.0;
const GRAVITY: f32 = -9.81;

/// The particle data, one array per field, each indexed by a guard's index.
struct Particles {
    position: Vec<[f32; 2]>,
    velocity: Vec<[f32; 2]>,
    /// Seconds left to live.
    life: Vec<f32>,
}

/// xorshift64: the same particles on every run.
struct Rng(u64);

impl Rng {
    /// A number in `0.0..1.0`.
    fn unit(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32
    }
}

/// What one run did.
struct Run {
    spawned: u64,
    dropped: u64,
    died: u64,
    peak_live: usize,
    /// Frames whose live indices were not distinct and in range, or whose
    /// live count was not the pool's `in_use`.
    bad_frames: u64,
    /// Particle updates by each thread (the second is idle on one thread).
    updates: [u64; 2],
    /// A hash of every live particle's data at the end, in spawn order.
    fingerprint: u64,
    live_at_end: usize,
    /// The pool's statistics at the end, and once the guards are dropped.
    end: IndexStats,
    after: IndexStats,
}

/// Simulates `frames` frames on a new pool, updating on `threads` (1 or 2).
fn run(frames: u32, capacity: usize, spawn: u32, threads: usize) -> Run {
    let pool = IndexPool::new(capacity);
    let mut particles = Particles {
        position: vec![[0.0; 2]; capacity],
        velocity: vec![[0.0; 2]; capacity],
        life: vec![0.0; capacity],
    };
    let mut live: Vec<IndexGuard<'_>> = Vec::with_capacity(capacity);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut spawned, mut dropped, mut died, mut peak_live, mut bad_frames) = (0, 0, 0, 0, 0);
    let mut updates = [0u64; 2];
    // Where the arrays are split between the threads, and each thread's
    // live indices (kept across frames to reuse their memory).
    let split = if threads == 1 { capacity } else { capacity / 2 };
    let (mut low, mut high) = (Vec::new(), Vec::new());
    let mut seen = vec![false; capacity];

    for _ in 0..frames {
        // Spawn: each particle takes an index, or is not created.
        for _ in 0..spawn {
            let guard = match pool.try_acquire() {
                Ok(guard) => guard,
                Err(_) => {
                    dropped += 1;
                    continue;
                }
            };
            let i = guard.index();
            particles.position[i] = [0.0, 0.0];
            particles.velocity[i] = [rng.unit() * 4.0 - 2.0, 4.0 + rng.unit() * 4.0];
            particles.life[i] = 0.5 + rng.unit() * 1.5; // 30 to 120 frames
            live.push(guard);
            spawned += 1;
        }
        peak_live = peak_live.max(live.len());

        // Update: each thread gets its half of every array and the live
        // indices that fall in it.
        low.clear();
        high.clear();
        for guard in &live {
            let i = guard.index();
            let half = if i < split { &mut low } else { &mut high };
            half.push(i);
        }
        let Particles {
            position,
            velocity,
            life,
        } = &mut particles;
        let (position_low, position_high) = position.split_at_mut(split);
        let (velocity_low, velocity_high) = velocity.split_at_mut(split);
        let (life_low, life_high) = life.split_at_mut(split);
        thread::scope(|s| {
            if !high.is_empty() {
                s.spawn(|| update(position_high, velocity_high, life_high, &high, split));
            }
            update(position_low, velocity_low, life_low, &low, 0);
        });
        updates[0] += low.len() as u64;
        updates[1] += high.len() as u64;

        // Kill the particles whose life ran out: dropping a guard gives its
        // index back for the next spawn.
        let before = live.len();
        live.retain(|guard| particles.life[guard.index()] > 0.0);
        died += (before - live.len()) as u64;

        // Every live index is distinct and in range, and the pool counts
        // exactly the live particles as in use.
        seen.fill(false);
        let distinct = live.iter().all(|guard| {
            let i = guard.index();
            i < capacity && !std::mem::replace(&mut seen[i], true)
        });
        if !distinct || pool.stats().in_use != live.len() {
            bad_frames += 1;
        }
    }

    let fingerprint = live.iter().fold(0xcbf2_9ce4_8422_2325u64, |hash, guard| {
        let i = guard.index();
        let [x, y] = particles.position[i];
        let [vx, vy] = particles.velocity[i];
        [x, y, vx, vy, particles.life[i]].iter().fold(hash, |h, v| {
            (h ^ u64::from(v.to_bits())).wrapping_mul(0x0000_0100_0000_01b3)
        })
    });
    let (live_at_end, end) = (live.len(), pool.stats());
    drop(live); // every index goes back to the pool
    Run {
        spawned,
        dropped,
        died,
        peak_live,
        bad_frames,
        updates,
        fingerprint,
        live_at_end,
        end,
        after: pool.stats(),
    }
}

/// Moves the particles at `indices` one frame. The arrays are a slice of
/// the whole that starts at index `base`.
fn update(
    position: &mut [[f32; 2]],
    velocity: &mut [[f32; 2]],
    life: &mut [f32],
    indices: &[usize],
    base: usize,
) {
    for &i in indices {
        let i = i - base;
        position[i][0] += velocity[i][0] * DT;
        position[i][1] += velocity[i][1] * DT;
        velocity[i][1] += GRAVITY * DT;
        life[i] -= DT;
    }
}

/// Prints each check and counts the failures.
#[derive(Default)]
struct Checks(usize);

impl Checks {
    fn check(&mut self, ok: bool, what: impl Display) {
        println!("  {}  {what}", if ok { "ok    " } else { "FAILED" });
        self.0 += usize::from(!ok);
    }
}

fn parse() -> Result<(u32, usize, u32), String> {
    let (mut frames, mut capacity, mut spawn) = (300, 4096, 64);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let raw = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: std::num::ParseIntError| format!("{flag} {raw}: {e}");
        match flag.as_str() {
            "--frames" => frames = raw.parse().map_err(bad)?,
            "--capacity" => capacity = raw.parse().map_err(bad)?,
            "--spawn" => spawn = raw.parse().map_err(bad)?,
            _ => return Err(format!("unknown argument `{flag}`")),
        }
    }
    if capacity == 0 || capacity > tagpool::MAX_CAPACITY {
        return Err(format!("--capacity must be 1 to {}", tagpool::MAX_CAPACITY));
    }
    Ok((frames, capacity, spawn))
}

fn main() -> ExitCode {
    let (frames, capacity, spawn) = match parse() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("soa_particles: {err}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    println!("soa_particles: {frames} frames, capacity {capacity}, {spawn} spawns per frame");
    println!(
        "  {:>7}  {:>8}  {:>8}  {:>8}  {:>6}  {:>9}  {:>9}  {:>18}",
        "threads", "spawned", "dropped", "died", "live", "peak live", "pool peak", "fingerprint"
    );
    let runs = [
        run(frames, capacity, spawn, 1),
        run(frames, capacity, spawn, 2),
    ];
    for (threads, r) in runs.iter().enumerate() {
        println!(
            "  {:>7}  {:>8}  {:>8}  {:>8}  {:>6}  {:>9}  {:>9}  {:#018x}",
            threads + 1,
            r.spawned,
            r.dropped,
            r.died,
            r.live_at_end,
            r.peak_live,
            r.end.peak_in_use,
            r.fingerprint
        );
    }
    let [low, high] = runs[1].updates;
    println!(
        "  two threads: {low} particle updates below index {}, {high} above",
        capacity / 2
    );

    println!("checks");
    let mut checks = Checks::default();
    for (threads, r) in runs.iter().enumerate().map(|(t, r)| (t + 1, r)) {
        checks.check(
            r.bad_frames == 0,
            format_args!(
                "{threads} thread(s): every frame, live indices distinct and < {capacity}, \
                 in_use == live ({} frames wrong)",
                r.bad_frames
            ),
        );
        checks.check(
            r.end.in_use == r.live_at_end
                && r.end.failed_acquires == r.dropped
                && r.spawned == r.died + r.live_at_end as u64
                && r.peak_live <= r.end.peak_in_use
                && r.end.peak_in_use <= capacity,
            format_args!(
                "{threads} thread(s): in_use {} == live, failed acquires == dropped, \
                 spawned == died + live, peak live <= pool peak <= capacity",
                r.end.in_use
            ),
        );
        checks.check(
            r.after.in_use == 0 && r.after.available == capacity,
            format_args!(
                "{threads} thread(s): guards dropped, in_use {} == 0, available {} == {capacity}",
                r.after.in_use, r.after.available
            ),
        );
    }
    let same = |r: &Run| (r.spawned, r.dropped, r.died, r.live_at_end, r.fingerprint);
    checks.check(
        same(&runs[0]) == same(&runs[1])
            && runs[1].updates[0] + runs[1].updates[1] == runs[0].updates[0],
        "the two-thread update did what the one-thread update did, bit for bit",
    );
    if checks.0 > 0 {
        println!("{} check(s) failed", checks.0);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
