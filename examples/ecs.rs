//! An ECS-style world: entities are the keys of a [`HandlePool`], their
//! components live in secondary maps keyed by them, systems on several
//! threads spawn entities through reserved keys, and the world is saved
//! and loaded with serde mid-run.
//!
//! - **Entities**: a `HandlePool<u64, Entity>` (a typed key from
//!   `new_key_type!`), each entity's record its spawn serial.
//! - **Components**: position, velocity, health, team and target in
//!   [`SecondaryMap`]s; drone bays, which one ship in eight has, in a
//!   [`SparseSecondaryMap`]. A target is another entity's key, stale once
//!   that entity is despawned: the pool and every map answer `None`.
//! - **Systems**, each frame, on `--threads` threads over disjoint chunks
//!   of the ships: *think* reads the world through `&` only and writes
//!   commands to its thread's buffer (re-aim a ship whose target is
//!   stale, fire, launch a drone on a key [`HandlePool::reserve`] gives at
//!   once); *movement* updates each thread's chunk of `&mut` positions.
//! - **The sync point**, at the frame's end on the main thread: apply the
//!   buffers, despawn the dead from the pool and every map, fill each
//!   reservation (`insert_reserved`, then the drone's components), insert
//!   the arrivals. A wave of drones that did not all fit is called off
//!   whole (`cancel_reservation`): which launch the full pool refused
//!   depends on the threads' timing, and the run must not.
//! - **Save and load**: at the middle frame the pool and every map are
//!   saved (in the tests' self-describing format, `tests/support/format.rs`)
//!   and loaded into new structures, with which the run goes on.
//!
//! The checks are exact, whatever the threads' timing: refusals are the
//! spawns beyond the free entries; a frame finds stale exactly the targets
//! the last despawn made; every map holds values of live entities only;
//! after the load every saved key (entities, and targets stored in
//! components) names the same entity and components, every stale key stays
//! stale, and the next keys are the saved world's. It exits with status 1
//! if a check fails (2 on a bad argument).
//!
//! ```text
//! cargo run --release --features serde --example ecs
//! cargo run --release --features serde --example ecs -- --frames 60 --threads 4 --spawn 64
//! ```

#[path = "../tests/support/format.rs"]
mod format;

use std::collections::HashSet;
use std::fmt::Display;
use std::process::ExitCode;
use std::thread;

use serde::de::Error as _;
use serde::{Deserialize, Serialize};
use tagpool::{HandlePool, Ref, Reservation, SecondaryMap, SparseSecondaryMap};

use self::format::{Error, Save, Value};

tagpool::new_key_type! {
    /// An entity's key: the world's maps take no other pool's keys.
    struct Entity;
}

const USAGE: &str = "\
usage: ecs [--frames N] [--threads N] [--spawn N] [--capacity N]

  --frames N    frames to run (default 60); the world is saved and loaded at N/2
  --threads N   threads each system runs on, at least 1 (default 4)
  --spawn N     ships arriving per frame (default 64)
  --capacity N  the most entities alive at once, at least 1 (default 1024)";

/// The entities, and their components by entity key.
struct World {
    /// Each live entity's spawn serial: unique, it orders the merges.
    entities: HandlePool<u64, Entity>,
    pos: SecondaryMap<Entity, i64>,
    vel: SecondaryMap<Entity, i64>,
    health: SecondaryMap<Entity, i64>,
    team: SecondaryMap<Entity, u8>,
    /// The enemy a ship fires at: another entity's key.
    target: SecondaryMap<Entity, Entity>,
    /// Drones left to launch: a rare component, so a sparse map.
    bays: SparseSecondaryMap<Entity, u32>,
}

/// A new entity's components.
struct Ship {
    team: u8,
    pos: i64,
    vel: i64,
    health: i64,
    target: Option<Entity>,
    bays: Option<u32>,
}

impl World {
    fn new(capacity: usize) -> Self {
        World {
            // No per-thread caches of free entries: the systems'
            // reservations come off the free list, whose order a save
            // keeps, so the loaded world's next keys are the saved one's.
            entities: HandlePool::builder_with_key()
                .capacity(capacity)
                .thread_cache(false)
                .build()
                .expect("a capacity from 1 to MAX_HANDLE_CAPACITY"),
            pos: SecondaryMap::new(),
            vel: SecondaryMap::new(),
            health: SecondaryMap::new(),
            team: SecondaryMap::new(),
            target: SecondaryMap::new(),
            bays: SparseSecondaryMap::new(),
        }
    }

    /// Writes the components of the new entity `key`.
    fn attach(&mut self, key: Entity, ship: Ship) {
        self.pos.insert(key, ship.pos);
        self.vel.insert(key, ship.vel);
        self.health.insert(key, ship.health);
        self.team.insert(key, ship.team);
        if let Some(target) = ship.target {
            self.target.insert(key, target);
        }
        if let Some(bays) = ship.bays {
            self.bays.insert(key, bays);
        }
    }

    /// Removes `key` from the pool and every map; whether it was live.
    fn despawn(&mut self, key: Entity) -> bool {
        self.pos.remove(key);
        self.vel.remove(key);
        self.health.remove(key);
        self.team.remove(key);
        self.target.remove(key);
        self.bays.remove(key);
        self.entities.remove_mut(key).is_some()
    }

    /// Whether the pool and every map answer `None` for `key`.
    fn is_gone(&self, key: Entity) -> bool {
        !self.entities.contains(key)
            && self.entities.get(key).is_none()
            && (self.pos.get(key), self.vel.get(key)) == (None, None)
            && (self.health.get(key), self.team.get(key)) == (None, None)
            && (self.target.get(key), self.bays.get(key)) == (None, None)
    }

    /// Whether every map holds values of live entities only, the dense
    /// ones but `target` one for each.
    fn consistent(&self) -> bool {
        let live = |key: Entity| self.entities.contains(key);
        let n = self.entities.len();
        (self.pos.len(), self.vel.len()) == (n, n)
            && (self.health.len(), self.team.len()) == (n, n)
            && self.pos.keys().all(live)
            && self.vel.keys().all(live)
            && self.health.keys().all(live)
            && self.team.keys().all(live)
            && self.target.keys().all(live)
            && self.bays.keys().all(live)
    }

    /// The live entities as (key, serial), in spawn order.
    fn roster(&self) -> Vec<(Entity, u64)> {
        let mut ships: Vec<_> = self
            .entities
            .iter()
            .map(|s| (Ref::handle(&s), *s))
            .collect();
        ships.sort_by_key(|&(_, serial)| serial);
        ships
    }

    /// Every component map, as a tuple: saved after the pool.
    fn maps(&self) -> impl Serialize + PartialEq + '_ {
        let (pos, vel, health) = (&self.pos, &self.vel, &self.health);
        (pos, vel, health, &self.team, &self.target, &self.bays)
    }

    /// Saves the pool and every map.
    fn save(&self) -> Result<Value, Error> {
        (&self.entities, self.maps()).serialize(Save { seq: false })
    }

    /// Loads a world that [`save`](Self::save) saved.
    fn load(saved: Value) -> Result<Self, Error> {
        let (pool, maps) = match saved {
            Value::Seq(mut parts) if parts.len() == 2 => (parts.remove(0), parts.remove(0)),
            _ => return Err(Error::custom("not a saved world")),
        };
        let (pos, vel, health, team, target, bays) = Deserialize::deserialize(maps)?;
        // The save holds the pool's entries; the builder, what it is
        // built with (as in `new`).
        let builder = HandlePool::builder_with_key().thread_cache(false);
        let entities = builder.deserialize_pool(pool)?;
        Ok(World {
            entities,
            pos,
            vel,
            health,
            team,
            target,
            bays,
        })
    }
}

/// A drone on a reserved key, launched by the carrier of serial `serial`.
struct Launch {
    /// The right to fill the key (`insert_reserved`) or give it back.
    reservation: Reservation<Entity>,
    key: Entity,
    carrier: Entity,
    serial: u64,
    drone: Ship,
}

/// What one thread's share of *think* asks of the sync point.
#[derive(Default)]
struct Commands {
    /// New targets; `None` where no enemy is left.
    aims: Vec<(Entity, Option<Entity>)>,
    /// Damage, by the key of the ship hit.
    hits: Vec<(Entity, i64)>,
    launches: Vec<Launch>,
    /// Launches the full pool refused.
    refused: usize,
    /// Stale targets found (and replaced) that read `None` everywhere.
    stale: usize,
}

/// *Think* over one thread's `chunk` of the ships, reading the world
/// through `&` only: re-aim, fire, launch.
fn think(world: &World, chunk: &[(Entity, u64)], roster: &[(Entity, u64)]) -> Commands {
    let mut out = Commands::default();
    for &(me, serial) in chunk {
        let (team, pos) = (world.team[me], world.pos[me]);
        let held = world.target.get(me).copied();
        let mut target = held;
        if let Some(old) = held.filter(|&old| !world.entities.contains(old)) {
            // Despawned: counted if the pool and every map answer `None`.
            out.stale += usize::from(world.is_gone(old));
            target = None;
        }
        if target.is_none() {
            // The nearest enemy, the first spawned of those as near.
            target = roster
                .iter()
                .filter(|&&(other, _)| world.team[other] != team)
                .min_by_key(|&&(other, serial)| ((world.pos[other] - pos).abs(), serial))
                .map(|&(enemy, _)| enemy);
        }
        if target != held {
            out.aims.push((me, target));
        }
        let target = match target {
            Some(target) => target,
            None => continue,
        };
        out.hits.push((target, 7 + (serial % 5) as i64));
        if world.bays.get(me).map_or(false, |&left| left > 0) {
            // The drone's key now, through the shared pool; the entity is
            // made at the sync point.
            let drone = Ship {
                team,
                pos,
                vel: 2 * world.vel[me] + 1,
                health: 12,
                target: Some(target),
                bays: None,
            };
            match world.entities.reserve() {
                Some(reservation) => out.launches.push(Launch {
                    key: reservation.key(),
                    reservation,
                    carrier: me,
                    serial,
                    drone,
                }),
                None => out.refused += 1,
            }
        }
    }
    out
}

/// The ship of serial `serial` arriving for `team`: one in eight carries
/// three drones.
fn arrival(serial: u64, team: u8) -> Ship {
    Ship {
        team,
        pos: (serial as i64 * 37) % 1000,
        vel: (serial as i64 % 7) - 3,
        health: 40,
        target: None,
        bays: if serial % 8 == 0 { Some(3) } else { None },
    }
}

/// Saves `world`, loads it into new structures, and checks that the
/// loaded world holds what the saved one does: every key that named an
/// entity names it (with the same components), every key in `dead` is
/// still stale, and the next keys are the saved world's.
fn reload(world: &World, dead: &mut Vec<Entity>, checks: &mut Checks) -> Result<World, Error> {
    let loaded = World::load(world.save()?)?;
    let live = world.entities.len();
    let same = loaded.roster() == world.roster() && loaded.maps() == world.maps();
    checks.check(
        same && loaded.consistent(),
        format_args!("the {live} entity keys name the same entities and components"),
    );
    // A stored target names the same entity in both (or none in both).
    let serial = |w: &World, key| w.entities.get(key).map(|s| *s);
    let aimed = world
        .target
        .values()
        .all(|&t| serial(world, t) == serial(&loaded, t));
    checks.check(aimed, "every stored target names the same entity");
    let stale = dead.iter().all(|&key| loaded.is_gone(key));
    checks.check(
        stale,
        format_args!("the {} stale keys are stale", dead.len()),
    );
    // The next spawns get the keys the saved world would have given.
    let n = (world.entities.capacity() - live).min(16);
    let keys = |reservations: &Option<Vec<Reservation<Entity>>>| {
        reservations
            .as_ref()
            .map(|r| r.iter().map(Reservation::key).collect::<Vec<_>>())
    };
    let next = loaded.entities.reserve_many(n);
    let saved = world.entities.reserve_many(n);
    checks.check(
        next.is_some() && keys(&next) == keys(&saved),
        format_args!("the next {n} keys are the saved world's"),
    );
    // The saved world is dropped after this, its reservations with it.
    drop(saved);
    for reservation in next.into_iter().flatten() {
        dead.push(reservation.key());
        loaded.entities.cancel_reservation(reservation);
    }
    Ok(loaded)
}

/// Counts the checks and prints the failed ones.
#[derive(Default)]
struct Checks {
    run: usize,
    failed: usize,
    /// Where the checks are: `frame 7`.
    at: String,
}

impl Checks {
    fn check(&mut self, ok: bool, what: impl Display) {
        self.run += 1;
        if !ok {
            println!("  FAILED  {}: {what}", self.at);
            self.failed += 1;
        }
    }
}

/// The run's counts.
#[derive(Default)]
struct Tally {
    arrived: usize,
    full: usize,
    launched: usize,
    called_off: usize,
    cancelled: usize,
    despawned: usize,
    stale: usize,
}

/// `--frames`, `--threads`, `--spawn` and `--capacity`.
fn parse() -> Result<[usize; 4], String> {
    let (names, mut values) = (
        ["--frames", "--threads", "--spawn", "--capacity"],
        [60, 4, 64, 1024],
    );
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let at = names.iter().position(|&name| name == flag);
        let at = at.ok_or_else(|| format!("unknown argument `{flag}`"))?;
        let raw = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        values[at] = raw.parse().map_err(|e| format!("{flag} {raw}: {e}"))?;
    }
    if values[1] == 0 {
        return Err("--threads must be at least 1".into());
    }
    if !(1..=tagpool::MAX_HANDLE_CAPACITY).contains(&values[3]) {
        let max = tagpool::MAX_HANDLE_CAPACITY;
        return Err(format!("--capacity must be 1 to {max}"));
    }
    Ok(values)
}

fn main() -> ExitCode {
    let [frames, threads, spawn, capacity] = match parse() {
        Ok(values) => values,
        Err(err) => {
            eprintln!("ecs: {err}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let mut world = World::new(capacity);
    let (mut checks, mut tally) = (Checks::default(), Tally::default());
    let mut serial = 0u64;
    // Keys of despawned entities and cancelled reservations: stale.
    let mut dead: Vec<Entity> = Vec::new();
    // Targets that the last despawn made stale.
    let mut expect_stale = 0;

    for frame in 0..frames {
        checks.at = format!("frame {frame}");
        // Think, on every thread, through `&World`.
        let roster = world.roster();
        let free = capacity - world.entities.len();
        let buffers: Vec<Commands> = thread::scope(|s| {
            let (world, all) = (&world, &roster);
            let workers: Vec<_> = roster
                .chunks(roster.len() / threads + 1)
                .map(|chunk| s.spawn(move || think(world, chunk, all)))
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });

        // Movement, on every thread: each its own chunk of `&mut`
        // positions, the velocities shared.
        let vel = &world.vel;
        let mut moving: Vec<(Entity, &mut i64)> = world.pos.iter_mut().collect();
        let per = moving.len() / threads + 1;
        thread::scope(|s| {
            for chunk in moving.chunks_mut(per) {
                s.spawn(move || {
                    for (key, pos) in chunk {
                        **pos = (**pos + vel[*key]).rem_euclid(1000);
                    }
                });
            }
        });

        // The sync point: the main thread owns the world again.
        let (mut launches, mut refused, mut stale) = (Vec::new(), 0, 0);
        for buffer in buffers {
            for (me, aim) in buffer.aims {
                match aim {
                    Some(target) => world.target.insert(me, target),
                    None => world.target.remove(me),
                };
            }
            for (target, damage) in buffer.hits {
                world.health[target] -= damage;
            }
            launches.extend(buffer.launches);
            refused += buffer.refused;
            stale += buffer.stale;
        }
        checks.check(
            stale == expect_stale,
            format_args!("{stale} stale targets: those despawned, None everywhere"),
        );
        tally.stale += stale;
        let wanted = launches.len() + refused;
        checks.check(
            refused == wanted.saturating_sub(free),
            format_args!("{refused} of {wanted} launches refused: those beyond {free} free"),
        );
        let held = |l: &Launch| world.entities.is_reserved(l.key) && world.is_gone(l.key);
        checks.check(
            launches.iter().all(held) && world.entities.stats().reserved == launches.len(),
            "every reserved key is held and reads None",
        );

        // Despawn the dead, from the pool and every map.
        let doomed: Vec<Entity> = roster
            .iter()
            .map(|&(key, _)| key)
            .filter(|&key| world.health[key] <= 0)
            .collect();
        let gone = doomed
            .iter()
            .all(|&key| world.despawn(key) && world.is_gone(key));
        checks.check(gone, "every despawned key reads None");
        tally.despawned += doomed.len();

        // The drones on their reserved keys, in their carriers' order; or,
        // if the pool refused one launch, the wave called off.
        launches.sort_by_key(|l| l.serial);
        let wave = refused == 0;
        let mut once = true;
        for l in launches {
            if wave {
                once &= world.entities.insert_reserved(l.reservation, serial) == Ok(l.key);
                world.attach(l.key, l.drone);
                if let Some(left) = world.bays.get_mut(l.carrier) {
                    *left -= 1;
                }
                serial += 1;
                tally.launched += 1;
            } else {
                once &= world.entities.cancel_reservation(l.reservation);
                once &= !world.entities.is_reserved(l.key) && world.is_gone(l.key);
                dead.push(l.key);
                tally.cancelled += 1;
            }
        }
        checks.check(once, "each reservation filled or cancelled, once");
        tally.called_off += usize::from(!wave);

        // The arrivals, inserted by the main thread, for the weaker team.
        let free = capacity - world.entities.len();
        let mut teams = [0, 0];
        world
            .team
            .values()
            .for_each(|&t| teams[usize::from(t)] += 1);
        let mut full = 0;
        for _ in 0..spawn {
            let team = usize::from(teams[1] < teams[0]);
            match world.entities.insert_mut(serial) {
                Ok(key) => {
                    world.attach(key, arrival(serial, team as u8));
                    teams[team] += 1;
                    serial += 1;
                    tally.arrived += 1;
                }
                Err(_) => full += 1,
            }
        }
        checks.check(
            full == spawn.saturating_sub(free),
            format_args!("{full} arrivals refused: those beyond {free} free"),
        );
        tally.full += full;

        // The next `think` finds stale the targets despawned now (a
        // drone's too).
        let doomed: HashSet<Entity> = doomed.into_iter().collect();
        expect_stale = world.target.values().filter(|t| doomed.contains(t)).count();
        dead.extend(doomed);

        // The counts add up; every component is a live entity's.
        let live = tally.arrived + tally.launched - tally.despawned;
        let stats = world.entities.stats();
        checks.check(
            (world.entities.len(), stats.live, stats.reserved) == (live, live, 0),
            format_args!("{live} entities alive (len and stats agree)"),
        );
        checks.check(
            world.consistent() && world.health.values().all(|&h| h > 0),
            "every component is a live entity's",
        );

        if frame == frames / 2 {
            checks.at = format!("frame {frame}, after the load");
            world = match reload(&world, &mut dead, &mut checks) {
                Ok(loaded) => loaded,
                Err(err) => {
                    println!("  FAILED  {}: {err}", checks.at);
                    return ExitCode::FAILURE;
                }
            };
            println!("ecs: saved and loaded at frame {frame}: {live} entities");
        }
    }

    checks.at = "the end".into();
    let stale = dead.iter().all(|&key| world.is_gone(key));
    checks.check(
        stale,
        format_args!("the {} dead keys are stale", dead.len()),
    );
    let Tally {
        arrived,
        full,
        launched,
        called_off,
        cancelled,
        despawned,
        stale,
    } = tally;
    println!(
        "ecs: {frames} frames on {threads} threads: {arrived} ships arrived ({full} refused: \
         full), {launched} drones launched by the systems ({called_off} waves called off, \
         {cancelled} of their reservations cancelled), {despawned} despawned, {stale} stale targets \
         re-aimed, {} alive",
        world.entities.len()
    );
    if checks.failed == 0 {
        println!("ecs: all {} checks passed", checks.run);
        ExitCode::SUCCESS
    } else {
        println!("ecs: {} of {} checks FAILED", checks.failed, checks.run);
        ExitCode::FAILURE
    }
}
