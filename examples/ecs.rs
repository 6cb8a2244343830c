//! An ECS-style world on a [`HandlePool`]: entities that know their own
//! key, components that hold another entity's key as an `Option`, systems
//! that run on several threads, and a despawn that makes every stored key
//! of the dead entity stale.
//!
//! The world is a `HandlePool<Ship, Entity>` (`Entity` a typed key from
//! `new_key_type!`). Each frame runs five systems:
//!
//! - **spawn**, on every thread at once through `&HandlePool`: each ship is
//!   made by `insert_with_key`, so it stores its own key (`me`);
//! - **targeting**, on every thread: a ship whose `target: Option<Entity>`
//!   is stale (`get` answers `None`: the target was despawned) picks the
//!   nearest live enemy; the choices are applied with `get_mut`;
//! - **combat**, on every thread: each ship reads its target through a
//!   `Ref` and lowers its health (an atomic: many ships may hit one);
//! - **movement**, on every thread, through `&mut`: `values_mut` split into
//!   one chunk per thread;
//! - **despawn**, on every thread: ships at or below 0 health are removed.
//!
//! Every step is deterministic (integer positions, a fixed spawn order,
//! damage summed), so the example checks exact figures: each ship's `me`
//! is its key; the world's `len` and `stats` match the spawns and
//! despawns; a despawned key answers nothing anywhere; the stale targets
//! the next targeting finds are exactly the ships whose target died;
//! refused spawns are exactly those beyond the capacity; and
//! `Option<Entity>` takes 8 bytes. It prints the counts and exits with
//! status 1 if a check fails (2 on a bad argument).
//!
//! ```text
//! cargo run --release --example ecs
//! cargo run --release --example ecs -- --frames 60 --threads 4 --spawn 64
//! ```

use std::collections::HashSet;
use std::fmt::Display;
use std::process::ExitCode;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::thread;

use tagpool::{HandlePool, Ref};

tagpool::new_key_type! {
    /// An entity's key: the world takes no other pool's keys (nor a plain
    /// `Handle`).
    struct Entity;
}

const USAGE: &str = "\
usage: ecs [--frames N] [--threads N] [--spawn N] [--capacity N]

  --frames N    frames to run (default 60)
  --threads N   threads each system runs on, at least 1 (default 4)
  --spawn N     ships spawned per frame (default 64)
  --capacity N  the most ships alive at once, at least 1 (default 1024)";

/// An entity. Systems on several threads share it as `&Ship` (through a
/// `Ref`), so what they change at once is atomic; the rest changes under
/// `&mut` (`get_mut`, `values_mut`).
struct Ship {
    /// Its own key, given to it by `insert_with_key`.
    me: Entity,
    /// Spawn order, unique: ties in targeting go to the lower one.
    serial: u64,
    team: u8,
    pos: i64,
    vel: i64,
    health: AtomicI64,
    /// Another entity's key: stale once that entity is despawned.
    target: Option<Entity>,
}

impl Ship {
    fn damage(&self) -> i64 {
        7 + (self.serial % 5) as i64
    }
}

/// Counts the checks and prints the failed ones (the passed ones are
/// counted only: there are several per frame).
#[derive(Default)]
struct Checks {
    run: usize,
    failed: usize,
}

impl Checks {
    fn check(&mut self, ok: bool, what: impl Display) {
        self.run += 1;
        if !ok {
            println!("  FAILED  {what}");
            self.failed += 1;
        }
    }
}

struct Args {
    frames: u64,
    threads: usize,
    spawn: u64,
    capacity: usize,
}

fn parse() -> Result<Args, String> {
    let mut args = Args {
        frames: 60,
        threads: 4,
        spawn: 64,
        capacity: 1024,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let raw = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: std::num::ParseIntError| format!("{flag} {raw}: {e}");
        match flag.as_str() {
            "--frames" => args.frames = raw.parse().map_err(bad)?,
            "--threads" => args.threads = raw.parse().map_err(bad)?,
            "--spawn" => args.spawn = raw.parse().map_err(bad)?,
            "--capacity" => args.capacity = raw.parse().map_err(bad)?,
            _ => return Err(format!("unknown argument `{flag}`")),
        }
    }
    if args.threads == 0 {
        return Err("--threads must be at least 1".into());
    }
    if !(1..=tagpool::MAX_HANDLE_CAPACITY).contains(&args.capacity) {
        let max = tagpool::MAX_HANDLE_CAPACITY;
        return Err(format!("--capacity must be 1 to {max}"));
    }
    Ok(args)
}

/// How many of `len` items each of `threads` takes (at least one).
fn per_thread(len: usize, threads: usize) -> usize {
    ((len + threads - 1) / threads).max(1)
}

/// Splits `items` into one chunk per thread.
fn chunks<T>(items: &[T], threads: usize) -> std::slice::Chunks<'_, T> {
    items.chunks(per_thread(items.len(), threads))
}

/// The live ships as (key, serial), in spawn order: what the shared
/// systems split between their threads.
fn roster(world: &HandlePool<Ship, Entity>) -> Vec<(Entity, u64)> {
    let mut ships: Vec<(Entity, u64)> = world.iter().map(|s| (Ref::handle(&s), s.serial)).collect();
    ships.sort_by_key(|&(_, serial)| serial);
    ships
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("ecs: {err}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let threads = args.threads;
    let mut world: HandlePool<Ship, Entity> = HandlePool::with_key(args.capacity);
    let mut checks = Checks::default();
    checks.check(
        std::mem::size_of::<Option<Entity>>() == 8,
        "Option<Entity> is 8 bytes",
    );

    let (mut spawned, mut refused, mut despawned) = (0u64, 0u64, 0u64);
    let mut stale_found = 0usize;
    // Ships whose target died in the last despawn: the next targeting
    // must find exactly these stale.
    let mut expect_stale = 0usize;
    let mut dead: Vec<Entity> = Vec::new();

    for frame in 0..args.frames {
        // Spawn, on every thread at once: a ship learns its key as it is
        // made. Nothing is removed meanwhile, so the refusals are exactly
        // the spawns beyond the free entries.
        let free = args.capacity - world.len();
        let first = frame * args.spawn;
        let refused_now = AtomicUsize::new(0);
        let serials: Vec<u64> = (first..first + args.spawn).collect();
        thread::scope(|s| {
            for part in chunks(&serials, threads) {
                let (world, refused_now) = (&world, &refused_now);
                s.spawn(move || {
                    for &serial in part {
                        let made = world.insert_with_key(|me| Ship {
                            me,
                            serial,
                            team: (serial % 2) as u8,
                            pos: (serial as i64 * 37) % 1000,
                            vel: (serial as i64 % 7) - 3,
                            health: AtomicI64::new(40),
                            target: None,
                        });
                        if made.is_err() {
                            refused_now.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let refused_now = refused_now.into_inner() as u64;
        checks.check(
            refused_now == args.spawn.saturating_sub(free as u64),
            format_args!("frame {frame}: {refused_now} spawns refused, those beyond the capacity"),
        );
        spawned += args.spawn - refused_now;
        refused += refused_now;

        // Targeting, on every thread: read each ship's stored target; a
        // stale one (despawned) or none picks the nearest live enemy.
        let ships = roster(&world);
        let positions: Vec<(Entity, u64, u8, i64)> = ships
            .iter()
            .map(|&(key, serial)| {
                let ship = world.get(key).expect("live: nothing is removed now");
                (key, serial, ship.team, ship.pos)
            })
            .collect();
        let stale_now = AtomicUsize::new(0);
        let choices: Vec<(Entity, Option<Entity>)> = thread::scope(|s| {
            let workers: Vec<_> = chunks(&ships, threads)
                .map(|part| {
                    let (world, positions, stale_now) = (&world, &positions, &stale_now);
                    s.spawn(move || {
                        let mut chosen = Vec::new();
                        for &(key, _) in part {
                            let ship = world.get(key).unwrap();
                            match ship.target {
                                Some(t) if world.contains(t) => continue,
                                Some(_) => {
                                    stale_now.fetch_add(1, Ordering::Relaxed);
                                }
                                None => {}
                            }
                            let nearest = positions
                                .iter()
                                .filter(|&&(_, _, team, _)| team != ship.team)
                                .min_by_key(|&&(_, serial, _, pos)| {
                                    ((pos - ship.pos).abs(), serial)
                                })
                                .map(|&(enemy, ..)| enemy);
                            chosen.push((key, nearest));
                        }
                        chosen
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|w| w.join().unwrap())
                .collect()
        });
        let stale_now = stale_now.into_inner();
        checks.check(
            stale_now == expect_stale,
            format_args!("frame {frame}: {stale_now} stale targets, the ships whose target died"),
        );
        stale_found += stale_now;
        for (key, target) in choices {
            world.get_mut(key).expect("live").target = target;
        }

        // Combat, on every thread: many ships may read and hit one target.
        thread::scope(|s| {
            for part in chunks(&ships, threads) {
                let world = &world;
                s.spawn(move || {
                    for &(key, _) in part {
                        let ship = world.get(key).unwrap();
                        if let Some(target) = ship.target.and_then(|t| world.get(t)) {
                            target.health.fetch_sub(ship.damage(), Ordering::Relaxed);
                        }
                    }
                });
            }
        });

        // Movement, on every thread, through `&mut`: one chunk of
        // `values_mut` each.
        let mut all: Vec<&mut Ship> = world.values_mut().collect();
        let per = per_thread(all.len(), threads);
        thread::scope(|s| {
            for part in all.chunks_mut(per) {
                s.spawn(move || {
                    for ship in part {
                        ship.pos += ship.vel;
                        if !(0..1000).contains(&ship.pos) {
                            ship.vel = -ship.vel;
                        }
                    }
                });
            }
        });

        // Despawn, on every thread: the ships at or below 0 health. Count
        // first the survivors whose target dies: their stored key goes
        // stale.
        let doomed: HashSet<Entity> = ships
            .iter()
            .filter(|&&(key, _)| world.get(key).unwrap().health.load(Ordering::Relaxed) <= 0)
            .map(|&(key, _)| key)
            .collect();
        expect_stale = ships
            .iter()
            .filter(|&&(key, _)| !doomed.contains(&key))
            .filter(|&&(key, _)| {
                let target = world.get(key).unwrap().target;
                matches!(target, Some(t) if doomed.contains(&t))
            })
            .count();
        let removed = AtomicUsize::new(0);
        let doomed_list: Vec<Entity> = doomed.iter().copied().collect();
        thread::scope(|s| {
            for part in chunks(&doomed_list, threads) {
                let (world, removed) = (&world, &removed);
                s.spawn(move || {
                    for &key in part {
                        if world.remove(key) {
                            removed.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        let removed = removed.into_inner();
        checks.check(
            removed == doomed.len(),
            format_args!("frame {frame}: {removed} ships despawned, each once"),
        );
        despawned += removed as u64;
        dead.extend(doomed_list);

        // After every frame: each ship knows its own key, and the counts
        // add up.
        let mine = world.iter().all(|ship| ship.me == Ref::handle(&ship));
        checks.check(
            mine,
            format_args!("frame {frame}: every ship's `me` is its key"),
        );
        let live = (spawned - despawned) as usize;
        let stats = world.stats();
        checks.check(
            world.len() == live && stats.live == live,
            format_args!("frame {frame}: {live} ships alive (len and stats agree)"),
        );
    }

    // Every despawned key answers nothing anywhere, whatever its entry
    // holds now.
    let mut gone = true;
    for &key in &dead {
        gone &= world.get(key).is_none() && !world.contains(key);
        gone &= world.get_mut(key).is_none() && world.take(key).is_err();
    }
    checks.check(
        gone,
        format_args!("{} despawned keys are all stale", dead.len()),
    );

    println!(
        "ecs: {} frames on {threads} threads: {spawned} ships spawned ({refused} refused: \
         full), {despawned} despawned, {stale_found} stale targets re-aimed, {} alive",
        args.frames,
        world.len()
    );
    if checks.failed == 0 {
        println!("ecs: all {} checks passed", checks.run);
        ExitCode::SUCCESS
    } else {
        println!("ecs: {} of {} checks FAILED", checks.failed, checks.run);
        ExitCode::FAILURE
    }
}
