//! A sound mixer with a fixed number of voices that steals the quietest
//! voice when a new sound must play (Game Programming Patterns' "forcibly
//! reuse", libgdx's DESTROY), and refuses stale handles.
//!
//! The voices live in a [`HandlePool`] that evicts the live voice with the
//! lowest volume (`evict_min_by_key`) and reports each stolen voice
//! (`on_evict`). A game thread plays sounds and keeps their handles; a
//! mixer thread, every tick, reads each voice it knows through its handle,
//! fades it, and removes the voices that faded out. A handle whose voice
//! was stolen answers `None`: the mixer drops it, the game never reaches
//! another sound through it.
//!
//! At the end the example checks that every sound ended exactly one way
//! (stolen, faded out, or still playing), that every live handle reaches
//! its own sound and every stale one nothing, and, in a single-threaded
//! phase where the choice is exact, that the quietest voice is the one
//! stolen and that a voice being read is skipped.
//!
//! ```sh
//! cargo run --release --example sounds -- --voices 8 --sounds 400
//! ```

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use tagpool::{Handle, HandlePool};

/// A playing sound.
struct Voice {
    /// Which sound this is (unique per play).
    sound: u64,
    /// 0..=1000; the mixer fades it every tick, and removes the voice at 0.
    volume: AtomicU32,
    /// Volume lost per tick.
    fade: u32,
}

/// A stolen voice, as `on_evict` saw it.
struct Stolen {
    handle: Handle,
    sound: u64,
    volume: u32,
}

fn main() {
    let mut voices = 8;
    let mut sounds = 400u64;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().unwrap_or_else(|| usage(&flag));
        let number = value.parse().unwrap_or_else(|_| usage(&flag));
        match flag.as_str() {
            "--voices" => voices = number as usize,
            "--sounds" => sounds = number,
            _ => usage(&flag),
        }
    }

    mix(voices, sounds);
    quietest_is_stolen_and_a_voice_being_read_is_skipped();
    println!("all checks passed");
}

fn usage(flag: &str) -> ! {
    eprintln!("unknown or incomplete flag {flag}; usage: sounds [--voices N] [--sounds N]");
    std::process::exit(2);
}

/// The game thread plays `sounds` sounds on `voices` voices while the mixer
/// thread fades them.
fn mix(voices: usize, sounds: u64) {
    let stolen = Arc::new(Mutex::new(Vec::<Stolen>::new()));
    let log = Arc::clone(&stolen);
    let pool = HandlePool::builder()
        .capacity(voices)
        .evict_min_by_key(|v: &Voice| v.volume.load(Ordering::Relaxed))
        .on_evict(move |handle, voice: Voice| {
            log.lock().unwrap().push(Stolen {
                handle,
                sound: voice.sound,
                volume: voice.volume.load(Ordering::Relaxed),
            });
        })
        .build()
        .expect("at least one voice");

    // The handles the mixer knows, and every handle the game ever got.
    let playing = Mutex::new(Vec::<Handle>::new());
    let mut played = Vec::<(Handle, u64)>::new();
    let game_over = AtomicBool::new(false);
    let mut faded = Vec::<Handle>::new();
    let mut refused_by_mixer = 0u64;
    let mut not_played = 0u64;

    thread::scope(|s| {
        let mixer = s.spawn(|| {
            let (mut faded, mut refused) = (Vec::new(), 0u64);
            loop {
                let done = game_over.load(Ordering::Acquire);
                let mut list = playing.lock().unwrap();
                list.retain(|&handle| {
                    let volume = pool.with(handle, |voice| {
                        let now = voice
                            .volume
                            .load(Ordering::Relaxed)
                            .saturating_sub(voice.fade);
                        voice.volume.store(now, Ordering::Relaxed);
                        now
                    });
                    match volume {
                        // Stolen by the game thread: the handle is stale.
                        None => {
                            refused += 1;
                            false
                        }
                        Some(0) => {
                            // Faded out: free the voice. `false` only if it
                            // was stolen between the read and now.
                            if pool.remove(handle) {
                                faded.push(handle);
                            } else {
                                refused += 1;
                            }
                            false
                        }
                        Some(_) => true,
                    }
                });
                let empty = list.is_empty();
                drop(list);
                if done && empty {
                    return (faded, refused);
                }
                thread::sleep(Duration::from_micros(200)); // the next tick
            }
        });

        let mut x = 0x2545_f491_4f6c_dd1du64;
        for sound in 0..sounds {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let voice = Voice {
                sound,
                volume: AtomicU32::new(100 + (x % 900) as u32),
                fade: 10 + (x >> 32) as u32 % 90,
            };
            match pool.insert(voice) {
                Ok(handle) => {
                    played.push((handle, sound));
                    playing.lock().unwrap().push(handle);
                }
                // Every voice was being read by the mixer at each try.
                Err(_) => not_played += 1,
            }
            if sound % 2 == 1 {
                thread::sleep(Duration::from_millis(1)); // the next frame
            }
        }
        game_over.store(true, Ordering::Release);
        let (f, r) = mixer.join().expect("the mixer thread");
        faded = f;
        refused_by_mixer = r;
    });

    let stolen = stolen.lock().unwrap();
    let stolen_handles: HashSet<Handle> = stolen.iter().map(|s| s.handle).collect();
    let faded_handles: HashSet<Handle> = faded.iter().copied().collect();

    // Every sound played ended exactly one way, and each stale handle is
    // refused everywhere.
    let mut live = 0;
    for &(handle, sound) in &played {
        let ended = [
            stolen_handles.contains(&handle),
            faded_handles.contains(&handle),
        ];
        assert!(
            !(ended[0] && ended[1]),
            "sound {sound} both stolen and faded"
        );
        if ended[0] || ended[1] {
            assert!(
                pool.get(handle).is_none(),
                "stale {handle:?} still reaches a voice"
            );
            assert!(pool.with(handle, |v| v.sound).is_none());
            assert!(!pool.contains(handle));
            assert!(!pool.remove(handle), "a stale remove ended another voice");
        } else {
            assert_eq!(pool.with(handle, |v| v.sound), Some(sound), "{handle:?}");
            live += 1;
        }
    }
    for s in stolen.iter() {
        assert!(
            played.contains(&(s.handle, s.sound)),
            "on_evict saw an unknown voice"
        );
    }
    assert_eq!(live, pool.len(), "a voice is neither live nor ended");
    let quietest_stolen = stolen.iter().map(|s| s.volume).max().unwrap_or(0);
    println!(
        "{voices} voices, {sounds} sounds: {} played, {} stolen (the loudest at volume {}), \
         {} faded out, {} still playing, {} not played (every voice being read)",
        played.len(),
        stolen.len(),
        quietest_stolen,
        faded.len(),
        live,
        not_played
    );
    println!(
        "stale handles refused: {} by the mixer, {} checked at the end",
        refused_by_mixer,
        played.len() - live
    );
    assert_eq!(played.len() as u64 + not_played, sounds);
    assert_eq!(stolen.len() + faded.len() + live, played.len());
}

/// With nobody else touching the pool, the choice is exact: the quietest
/// voice is stolen, and a voice being read is skipped for the next
/// quietest.
fn quietest_is_stolen_and_a_voice_being_read_is_skipped() {
    let stolen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&stolen);
    let pool = HandlePool::builder()
        .capacity(4)
        .evict_min_by_key(|v: &Voice| v.volume.load(Ordering::Relaxed))
        .on_evict(move |handle, voice: Voice| log.lock().unwrap().push((handle, voice.sound)))
        .build()
        .expect("four voices");
    let play = |sound: u64, volume: u32| {
        pool.insert(Voice {
            sound,
            volume: AtomicU32::new(volume),
            fade: 0,
        })
        .expect("a voice to steal")
    };
    let handles: Vec<Handle> = [(0, 500), (1, 100), (2, 900), (3, 300)]
        .iter()
        .map(|&(sound, volume)| play(sound, volume))
        .collect();

    let new = play(4, 700);
    assert_eq!(
        *stolen.lock().unwrap(),
        [(handles[1], 1)],
        "the quietest (volume 100) is stolen"
    );
    assert!(pool.get(handles[1]).is_none());
    assert_eq!(
        new.index(),
        handles[1].index(),
        "its voice plays the new sound"
    );
    assert_ne!(new, handles[1], "under a new handle");

    // The quietest left (300) is being read: the next quietest (500) goes.
    let reading = pool.get(handles[3]).expect("live");
    play(5, 800);
    assert_eq!(stolen.lock().unwrap()[1], (handles[0], 0));
    assert_eq!(reading.volume.load(Ordering::Relaxed), 300, "not torn out");
    drop(reading);
    play(6, 600);
    assert_eq!(stolen.lock().unwrap()[2], (handles[3], 3), "now it goes");
    println!(
        "exact phase: stole volumes 100, then 500 (300 was being read), then 300; \
         {} stale handles refused",
        stolen.lock().unwrap().len()
    );
}
