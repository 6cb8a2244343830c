//! A sound mixer with a fixed number of voices that steals the quietest
//! voice when a new sound must play ("forcibly reuse" in *Game Programming
//! Patterns*), on a [`HandlePool`] with eviction.
//!
//! The voices live in a `HandlePool<Voice, VoiceKey>` (`VoiceKey` a typed
//! key from `new_key_type!`) built with `evict_min_by_key`
//! on each voice's current volume and an `on_evict` that logs the stolen
//! voice. A game thread plays sounds at deterministic, random-looking
//! volumes and keeps their handles; a mixer thread, every tick, reads each
//! voice it knows through its handle (`with`), fades it, and removes those
//! that reached 0. A handle whose voice was stolen or removed is stale: it
//! answers `None` for ever, even once its entry plays another sound.
//!
//! The first few steals are printed with what the eviction compared (the
//! key logs each voice it reads): the quietest of how many voices, and
//! the next quietest. A voice the mixer is reading is skipped, however
//! quiet: when the same read lasted through the whole insert and its
//! voice was quieter, the line says so (rare: a read is short).
//!
//! While the mixer runs, the volumes move under the eviction's scan, so
//! which voice is the quietest is checked where it is exact: with the
//! mixer stopped, a last phase fills every voice with known volumes and
//! plays more sounds: each must steal the quietest voice not being read
//! (one held through a `Ref` is skipped), and with every voice read an
//! insert must be refused. Last, every handle ever returned is tried: a
//! live one must reach its own sound, a stale one nothing (`get`, `with`,
//! `contains`, `remove`). It prints the counts and exits with status 1 if
//! a check fails (2 on a bad argument). How many voices are stolen rather
//! than faded out while the mixer runs depends on timing.
//!
//! ```text
//! cargo run --release --example sounds
//! cargo run --release --example sounds -- --voices 2 --sounds 20
//! ```

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fmt::{Debug, Display};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use tagpool::{HandlePool, Key};

tagpool::new_key_type! {
    /// A voice's key: the voices' pool takes no other pool's keys (nor a
    /// plain `Handle`), so a key of another pool cannot stop a voice.
    struct VoiceKey;
}

const USAGE: &str = "\
usage: sounds [--voices N] [--sounds N]

  --voices N   voices that can play at once, at least 2 (default 8)
  --sounds N   sounds the game plays (default 200)";

/// The mixer's tick and the game's frame: a sound lasts a few frames, so
/// the voices now and then run out and the quietest is stolen.
const TICK: Duration = Duration::from_micros(250);
const FRAME: Duration = Duration::from_micros(500);
/// Steals printed as they happen; the others are only counted.
const SHOWN: usize = 4;

/// A playing sound. The game and the mixer share it as `&Voice` (through
/// a `Ref`), so what changes is atomic.
struct Voice {
    /// Which sound this is, unique per play: tells a voice from the next
    /// one in its entry.
    sound: u64,
    /// 0..=1000 in play; lowered by `fade` every tick.
    volume: AtomicU32,
    fade: u32,
}

impl Voice {
    fn new(sound: u64, volume: u32, fade: u32) -> Self {
        let volume = AtomicU32::new(volume);
        Voice {
            sound,
            volume,
            fade,
        }
    }
}

/// A voice at one moment: as `on_evict` saw it stolen, or as the exact
/// phase set it.
#[derive(Clone, Copy)]
struct Seen {
    handle: VoiceKey,
    sound: u64,
    volume: u32,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// A read of a voice by the mixer, published while it lasts. The game
/// compares the read before an insert with the one after it: the same
/// read (same `seq`) lasted through the whole insert, so its voice was
/// skipped by the eviction however quiet it was.
#[derive(Clone, Copy, PartialEq)]
struct Read {
    /// Counts the mixer's reads: tells one read from the next of the
    /// same voice.
    seq: u64,
    sound: u64,
    /// When the read began; the read lowers it by the voice's fade.
    volume: u32,
}

thread_local! {
    /// The voices an eviction on this thread compared, at the volumes it
    /// read (the key runs on the inserting thread, on voices it holds a
    /// read of).
    static COMPARED: RefCell<Vec<(u64, u32)>> = const { RefCell::new(Vec::new()) };
}

/// Takes this thread's `COMPARED` log: the last volume compared of each
/// sound.
fn compared() -> HashMap<u64, u32> {
    COMPARED.with(|seen| seen.take().into_iter().collect())
}

/// xorshift64: deterministic, random-looking volumes.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u32) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % u64::from(n)) as u32
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

fn parse() -> Result<(usize, u64), String> {
    let (mut voices, mut sounds) = (8, 200);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let raw = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: std::num::ParseIntError| format!("{flag} {raw}: {e}");
        match flag.as_str() {
            "--voices" => voices = raw.parse().map_err(bad)?,
            "--sounds" => sounds = raw.parse().map_err(bad)?,
            _ => return Err(format!("unknown argument `{flag}`")),
        }
    }
    if !(2..=tagpool::MAX_CAPACITY).contains(&voices) {
        let max = tagpool::MAX_CAPACITY;
        return Err(format!(
            "--voices must be 2 (one read, one stolen) to {max}"
        ));
    }
    Ok((voices, sounds))
}

fn main() -> ExitCode {
    let (voices, sounds) = match parse() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("sounds: {err}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // `on_evict` runs on the inserting thread, inside `insert`, and must
    // be `'static`: its log is shared through an `Arc`.
    let log: Log = Arc::default();
    let writer = Arc::clone(&log);
    let pool: HandlePool<Voice, VoiceKey> = HandlePool::builder_with_key()
        .capacity(voices)
        .evict_min_by_key(|voice: &Voice| {
            let volume = voice.volume.load(Ordering::Relaxed);
            COMPARED.with(|seen| seen.borrow_mut().push((voice.sound, volume)));
            volume
        })
        .on_evict(move |handle, voice: Voice| {
            let (sound, volume) = (voice.sound, voice.volume.into_inner());
            writer.lock().unwrap().push(Seen {
                handle,
                sound,
                volume,
            });
        })
        .build()
        .expect("a capacity checked by `parse`");
    println!("sounds: {voices} voices, {sounds} sounds");
    let mut checks = Checks::default();

    // Phase 1: the game and the mixer, on two threads.
    println!(
        "play: a new sound steals the quietest voice not being read; a voice \
         the mixer is reading is skipped, however quiet"
    );
    let playing = Mutex::new(Vec::<VoiceKey>::new()); // the handles the mixer knows
    let reading = Mutex::new(None::<Read>); // the mixer's read now
    let game_over = AtomicBool::new(false);
    let ((mut played, not_played, past_read), (faded, refused)) = thread::scope(|s| {
        let mixer = s.spawn(|| {
            let (mut faded, mut refused, mut reads) = (Vec::new(), 0, 0);
            loop {
                let done = game_over.load(Ordering::Acquire);
                let mut list = playing.lock().unwrap();
                list.retain(|&handle| {
                    // A counted read: while it lasts, an eviction skips
                    // this voice. It fades the voice through its atomic.
                    let volume = pool.with(handle, |voice| {
                        let now = voice.volume.load(Ordering::Relaxed);
                        reads += 1;
                        *reading.lock().unwrap() = Some(Read {
                            seq: reads,
                            sound: voice.sound,
                            volume: now,
                        });
                        let now = now.saturating_sub(voice.fade);
                        voice.volume.store(now, Ordering::Relaxed);
                        *reading.lock().unwrap() = None;
                        now
                    });
                    match volume {
                        Some(0) if pool.remove(handle) => faded.push(handle),
                        // Stolen before the read, or between it and the
                        // remove: the stale handle is refused.
                        None | Some(0) => refused += 1,
                        Some(_) => return true, // still playing
                    }
                    false
                });
                let idle = list.is_empty();
                drop(list);
                if done && idle {
                    return (faded, refused);
                }
                thread::sleep(TICK);
            }
        });
        let game = s.spawn(|| {
            let mut rng = Rng(0x2545_f491_4f6c_dd1d);
            let (mut played, mut not_played, mut past_read) = (Vec::new(), 0, 0);
            for sound in 0..sounds {
                let voice = Voice::new(sound, 200 + rng.below(801), 15 + rng.below(76));
                let before = *reading.lock().unwrap();
                let steals = log.lock().unwrap().len();
                compared(); // forget the last insert's
                let inserted = pool.insert(voice);
                // Still the same read: it lasted through the whole insert.
                let read = before.filter(|r| *reading.lock().unwrap() == Some(*r));
                let stole = log.lock().unwrap().get(steals).copied(); // by `on_evict`
                if let Some(Seen {
                    handle,
                    sound,
                    volume,
                }) = stole
                {
                    // Quieter all along: the read only lowers it, and the
                    // stolen voice was at least as loud when compared.
                    let quieter = read.filter(|r| r.volume < volume);
                    past_read += usize::from(quieter.is_some());
                    if steals < SHOWN {
                        let why = match quieter {
                            Some(r) => format!(
                                "; sound {} was quieter (volume {} or less), but the \
                                 mixer was reading it",
                                r.sound, r.volume
                            ),
                            None => choice(sound, volume, compared(), voices),
                        };
                        println!("  stole sound {sound} at volume {volume} ({handle:?}){why}");
                    }
                }
                match inserted {
                    Ok(handle) => {
                        played.push((handle, sound));
                        playing.lock().unwrap().push(handle);
                    }
                    Err(_) => not_played += 1, // every voice was being read
                }
                thread::sleep(FRAME);
            }
            (played, not_played, past_read)
        });
        let game = game.join().expect("the game thread");
        game_over.store(true, Ordering::Release);
        (game, mixer.join().expect("the mixer thread"))
    });
    let stolen = log.lock().unwrap().clone();
    println!(
        "play: {} played, {} stolen ({past_read} while the mixer read a quieter voice), \
         {} faded out, {not_played} refused (every voice read); {refused} stale handles \
         refused by the mixer",
        played.len(),
        stolen.len(),
        faded.len()
    );
    let handles: HashMap<VoiceKey, u64> = played.iter().copied().collect();
    let faded: HashSet<VoiceKey> = faded.into_iter().collect();
    checks.check(
        handles.len() == played.len() && played.len() as u64 + not_played == sounds,
        "every insert returned a new handle; played + refused == sounds",
    );
    // A stolen voice was one the game played, and did not also fade out.
    let once = |s: &Seen| handles.get(&s.handle) == Some(&s.sound) && !faded.contains(&s.handle);
    let one_way = stolen.iter().all(once);
    checks.check(
        one_way && stolen.len() + faded.len() == played.len() && pool.is_empty(),
        "every sound ended one way, stolen or faded out; no voice left",
    );

    // Phase 2, the mixer stopped: the choice is exact. Fill every voice,
    // then set known volumes through the handles.
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut next = sounds..; // the next sound ids
    let mut live = Vec::new();
    for sound in next.by_ref().take(voices) {
        let handle = pool.insert(Voice::new(sound, 0, 0)).expect("a free voice");
        let volume = rng.below(1001);
        pool.with(handle, |voice| {
            voice.volume.store(volume, Ordering::Relaxed)
        });
        played.push((handle, sound));
        live.push(Seen {
            handle,
            sound,
            volume,
        });
    }
    let volumes: Vec<u32> = live.iter().map(|v| v.volume).collect();
    println!(
        "exact: {voices} voices playing at volumes {}",
        list(&volumes)
    );

    // Hold the quietest voice through a `Ref` and play a louder sound: the
    // quietest of the others goes. Then, the `Ref` dropped, `voices` more:
    // each steals the quietest of all.
    let quietest = *live.iter().min_by_key(|v| v.volume).unwrap();
    let mut held = Some(pool.get(quietest.handle).expect("a live voice"));
    let (mut order, mut wrong) = (Vec::new(), Vec::new()); // volumes stolen
    for (round, sound) in next.by_ref().take(voices + 1).enumerate() {
        let volume = 1001 + round as u32; // louder than the first ones
        let reading = held.as_ref().map(|_| quietest.handle);
        match steal_one(&pool, &log, &mut live, reading, sound, volume) {
            Some((handle, was)) => {
                played.push((handle, sound));
                order.push(was.volume);
            }
            None => wrong.push(sound),
        }
        if let Some(voice) = held.take() {
            let intact = voice.sound == quietest.sound && pool.contains(quietest.handle);
            let what = format!("volume {} held through a `Ref`: skipped", quietest.volume);
            checks.check(intact, what);
        }
    }
    println!(
        "  {} more sounds stole the voices at volumes {}",
        voices + 1,
        list(&order)
    );
    checks.check(
        wrong.is_empty() && log.lock().unwrap().len() == stolen.len() + voices + 1,
        format_args!(
            "each stole the quietest voice not held, whose handle then gets None from \
             get and with, false from contains and remove{}",
            wrong_ones("sounds", &wrong)
        ),
    );

    // With every voice being read, nothing can be stolen: the insert fails
    // and gives the voice back.
    let reads: Vec<_> = live.iter().filter_map(|v| pool.get(v.handle)).collect();
    let steals = log.lock().unwrap().len();
    let sound = next.next().unwrap();
    let gave_back = match pool.insert(Voice::new(sound, 2000, 0)) {
        Ok(handle) => {
            played.push((handle, sound));
            false
        }
        Err(err) => err.into_inner().sound == sound,
    };
    checks.check(
        reads.len() == voices && gave_back && log.lock().unwrap().len() == steals,
        "with every voice being read, an insert is refused and returns its voice",
    );
    drop(reads);

    // Every handle ever returned: a live one reaches its own sound, a
    // stale one nothing.
    let owner: HashMap<VoiceKey, u64> = live.iter().map(|v| (v.handle, v.sound)).collect();
    let (mut stale, mut bad) = (0, Vec::new());
    for &(handle, sound) in &played {
        let wrong = if owner.contains_key(&handle) {
            pool.with(handle, |v| v.sound) != Some(sound)
        } else {
            stale += 1;
            pool.get(handle).is_some()
                || pool.with(handle, |v| v.sound).is_some()
                || pool.contains(handle)
                || pool.remove(handle)
        };
        if wrong {
            bad.push(handle);
        }
    }
    println!(
        "totals: {} sounds played, {} voices stolen, {} faded out, {} playing; \
         stale handles refused: {refused} by the mixer, {stale} at the end",
        played.len(),
        log.lock().unwrap().len(),
        faded.len(),
        owner.len()
    );
    checks.check(
        bad.is_empty() && owner.len() == pool.len() && stale + owner.len() == played.len(),
        format_args!(
            "{} live handles reach their own sound, {stale} stale ones nothing{}",
            owner.len(),
            wrong_ones("handles", &bad)
        ),
    );
    if checks.0 > 0 {
        println!("{} check(s) failed", checks.0);
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// Plays `sound` at `volume` on the full pool while `reading` is read.
/// Returns its handle and the voice it stole if that voice was the
/// quietest not being read and its handle is now refused everywhere.
fn steal_one(
    pool: &HandlePool<Voice, VoiceKey>,
    log: &Log,
    live: &mut [Seen],
    reading: Option<VoiceKey>,
    sound: u64,
    volume: u32,
) -> Option<(VoiceKey, Seen)> {
    let others = live.iter().filter(|v| Some(v.handle) != reading);
    let quietest = others.map(|v| v.volume).min();
    let first = log.lock().unwrap().len();
    let new = pool.insert(Voice::new(sound, volume, 0)).ok()?;
    let stolen = log.lock().unwrap()[first..].to_vec(); // by `on_evict`
    let victim = stolen.first()?.handle;
    let at = live.iter().position(|v| v.handle == victim)?;
    let was = live[at];
    let refused = pool.get(was.handle).is_none()
        && pool.with(was.handle, |_| ()).is_none()
        && !pool.contains(was.handle)
        && !pool.remove(was.handle);
    let right = stolen.len() == 1
        && (stolen[0].sound, stolen[0].volume) == (was.sound, was.volume)
        && Some(was.handle) != reading
        && Some(was.volume) == quietest
        && new.index() == was.handle.index(); // the new sound took its entry
    live[at] = Seen {
        handle: new,
        sound,
        volume,
    };
    (right && refused).then_some((new, was))
}

/// What the eviction that stole `sound` at `volume` compared it with,
/// from `seen` (the `COMPARED` log of its insert), on a pool of `voices`.
fn choice(sound: u64, volume: u32, mut seen: HashMap<u64, u32>, voices: usize) -> String {
    seen.remove(&sound);
    let n = seen.len() + 1; // with the stolen one, if the key ran at all
    let skipped = match voices.saturating_sub(n) {
        0 => String::new(),
        k => format!("; {k} other(s) not compared: being read or no longer playing"),
    };
    let how = match seen.iter().map(|(&s, &v)| (v, s)).min() {
        None => "the only voice it compared".to_owned(),
        Some((v, s)) if v >= volume => {
            format!("the quietest of the {n} voices compared (next: sound {s} at {v})")
        }
        Some((v, s)) => format!(
            "not the quietest it compared (sound {s} at {v}): volumes fade and reads \
             begin while it searches"
        ),
    };
    format!("; {how}{skipped}")
}

/// Volumes for printing: the first 16, then how many more; "none" if
/// there are none.
fn list(volumes: &[u32]) -> String {
    if volumes.is_empty() {
        return "none".to_owned();
    }
    match volumes.get(..16) {
        Some(first) if volumes.len() > 16 => format!("{first:?} and {} more", volumes.len() - 16),
        _ => format!("{volumes:?}"),
    }
}

/// What a failed check names, for printing after it: nothing when all
/// went right.
fn wrong_ones(what: &str, wrong: &[impl Debug]) -> String {
    match wrong {
        [] => String::new(),
        _ => format!(" (wrong {what}: {wrong:?})"),
    }
}
