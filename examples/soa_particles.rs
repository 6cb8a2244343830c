//! A particle system over structure-of-arrays storage: positions,
//! velocities and lifetimes in separate arrays, indexed by an
//! [`IndexPool`]'s indices.
//!
//! The pool owns no particle data: it only hands out indices in
//! `0..capacity`, each held by one guard, and takes them back when the
//! guard drops. The arrays are the caller's, laid out for the update loop
//! (each array is walked on its own, as SIMD and caches like). When every
//! index is taken, a spawn is dropped (the "don't create it" policy of
//! the classic literature): `try_acquire` never blocks.
//!
//! A second phase spawns from two threads at once (the pool is shared; an
//! index guard can cross threads) and checks that no index is handed out
//! twice.
//!
//! ```sh
//! cargo run --release --example soa_particles -- --frames 300 --capacity 4096 --spawn 96
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use tagpool::{IndexGuard, IndexPool};

/// The particle data, one array per field.
struct Particles {
    position: Vec<[f32; 2]>,
    velocity: Vec<[f32; 2]>,
    /// Frames left to live.
    life: Vec<u32>,
}

fn main() {
    let (mut frames, mut capacity, mut spawn) = (300u32, 4096usize, 96usize);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value: usize = args
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| usage(&flag));
        match flag.as_str() {
            "--frames" => frames = value as u32,
            "--capacity" => capacity = value,
            "--spawn" => spawn = value,
            _ => usage(&flag),
        }
    }

    let pool = IndexPool::new(capacity);
    let mut particles = Particles {
        position: vec![[0.0; 2]; capacity],
        velocity: vec![[0.0; 2]; capacity],
        life: vec![0; capacity],
    };
    let mut live: Vec<IndexGuard<'_>> = Vec::with_capacity(capacity);
    let (mut spawned, mut dropped, mut died, mut peak_live) = (0u64, 0u64, 0u64, 0usize);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;

    for frame in 0..frames {
        // Spawn a burst: each particle takes an index, or is not created.
        for _ in 0..spawn {
            match pool.try_acquire() {
                Ok(guard) => {
                    let i = guard.index();
                    seed = next(seed);
                    let angle = (seed % 6283) as f32 / 1000.0;
                    particles.position[i] = [0.0, 0.0];
                    particles.velocity[i] = [angle.cos(), angle.sin()];
                    particles.life[i] = 10 + (seed >> 40) as u32 % 100;
                    live.push(guard);
                    spawned += 1;
                }
                Err(_) => dropped += 1,
            }
        }
        peak_live = peak_live.max(live.len());

        // Update: walk the live indices; each array on its own.
        for guard in &live {
            let i = guard.index();
            for axis in 0..2 {
                particles.position[i][axis] += particles.velocity[i][axis];
                particles.velocity[i][axis] *= 0.99;
            }
            particles.life[i] -= 1;
        }

        // Kill the particles whose life ran out: dropping the guard frees
        // the index for the next spawn.
        let before = live.len();
        live.retain(|guard| particles.life[guard.index()] > 0);
        died += (before - live.len()) as u64;

        if frame % 100 == 0 {
            check(&pool, &live, capacity);
        }
    }
    check(&pool, &live, capacity);
    let stats = pool.stats();
    println!(
        "{frames} frames, capacity {capacity}, {spawn} spawns per frame: {spawned} spawned, \
         {dropped} not created (pool full), {died} died, {} alive",
        live.len()
    );
    println!(
        "peak alive {peak_live}, pool peak_in_use {}, failed_acquires {}",
        stats.peak_in_use, stats.failed_acquires
    );
    assert_eq!(stats.failed_acquires, dropped, "every failed spawn counted");
    assert!(stats.peak_in_use >= peak_live && stats.peak_in_use <= capacity);
    assert_eq!(spawned, died + live.len() as u64);
    drop(live);
    assert_eq!(pool.stats().in_use, 0, "every index came back");

    two_threads(&pool);
    println!("all checks passed");
}

/// Every live index is distinct and in range, and the pool counts exactly
/// the live particles as in use.
fn check(pool: &IndexPool, live: &[IndexGuard<'_>], capacity: usize) {
    let mut seen = vec![false; capacity];
    for guard in live {
        let i = guard.index();
        assert!(i < capacity, "index {i} out of range");
        assert!(!seen[i], "index {i} held by two particles");
        seen[i] = true;
    }
    assert_eq!(pool.stats().in_use, live.len());
}

/// Two threads spawn and kill particles on the same pool; a flag per index
/// catches an index handed to both.
fn two_threads(pool: &IndexPool) {
    let owned: Vec<AtomicBool> = (0..pool.capacity())
        .map(|_| AtomicBool::new(false))
        .collect();
    let total: u64 = thread::scope(|s| {
        let workers: Vec<_> = (0..2u64)
            .map(|t| {
                let owned = &owned;
                s.spawn(move || {
                    let mut live = Vec::new();
                    let mut seed = next(t + 1);
                    let mut spawned = 0;
                    for _ in 0..20_000 {
                        seed = next(seed);
                        if seed % 3 != 0 {
                            if let Ok(guard) = pool.try_acquire() {
                                let taken = owned[guard.index()].swap(true, Ordering::Relaxed);
                                assert!(!taken, "index {} handed out twice", guard.index());
                                live.push(guard);
                                spawned += 1;
                            }
                        } else if !live.is_empty() {
                            let guard = live.swap_remove(seed as usize % live.len());
                            owned[guard.index()].store(false, Ordering::Relaxed);
                        }
                    }
                    for guard in live {
                        owned[guard.index()].store(false, Ordering::Relaxed);
                    }
                    spawned
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("a worker"))
            .sum()
    });
    assert_eq!(pool.stats().in_use, 0);
    println!("two threads: {total} particles spawned and killed, no index held twice");
}

/// xorshift64.
fn next(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

fn usage(flag: &str) -> ! {
    eprintln!(
        "unknown or incomplete flag {flag}; usage: soa_particles [--frames N] [--capacity N] [--spawn N]"
    );
    std::process::exit(2);
}
