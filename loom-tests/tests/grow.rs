//! Models of elastic storage and trimming: threads racing to grow, a guard
//! held across a growth, a cache's batch walk racing a growth, and a trim
//! racing an acquire.
//!
//! Value cells are loom cells, so two holders of one slot (or a growth or
//! trim that touches a held value) are reported as a concurrent access;
//! `Track` reports a value leaked; every model ends with a bounded drain.

#![cfg(loom)]

use std::sync::Arc;

use loom::alloc::Track;
use loom::thread;
use tagpool::Pool;
use tagpool_loom_tests::{check, drain};

/// An elastic pool of 3 slots that starts with 1: its two growths add one
/// slot each.
fn elastic() -> Pool<usize> {
    Pool::builder(|| 0usize)
        .capacity(3)
        .initial(1)
        .thread_cache(false)
        .build()
        .unwrap()
}

/// With the only allocated slot held, two threads find the pool exhausted
/// at once: each must get a slot of its own, one growing each segment (a
/// thread that finds the other growing waits for it, then grows the next
/// segment). Fault `tagpool_loom_grow_unclaimed`: both grow the same
/// segment, and its slot is handed out twice.
#[test]
fn threads_race_to_grow() {
    check("threads_race_to_grow", 3, || {
        let pool = Arc::new(elastic());
        let mut first = pool.try_acquire().unwrap();
        *first += 1;
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    let mut g = pool.try_acquire().expect("the pool can grow");
                    *g += 1;
                })
            })
            .collect();
        for racer in racers {
            racer.join().unwrap();
        }
        drop(first);
        // 2 if one racer released its grown slot before the other looked.
        assert!(pool.stats().allocated >= 2);
        drain(&pool);
    });
}

/// A guard's value is written on its thread while another thread grows the
/// pool and uses the new slot: segments never move, so the two never touch
/// one cell. Fault `tagpool_loom_grow_moves`: a growth that moves the first
/// segment's values (a `Vec`-style reallocation) reads the held value.
#[test]
fn guard_held_across_a_growth() {
    check("guard_held_across_a_growth", 3, || {
        let pool = Arc::new(
            Pool::builder(|| 0usize)
                .capacity(2)
                .initial(1)
                .thread_cache(false)
                .build()
                .unwrap(),
        );
        let mut held = pool.try_acquire_owned().unwrap();
        let grower = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let mut g = pool.try_acquire().expect("the pool can grow");
                *g += 10;
            })
        };
        *held += 1;
        assert_eq!(*held, 1);
        drop(held);
        grower.join().unwrap();
        drain(&pool);
    });
}

/// A cache's refill walks the free list from a head it read before another
/// thread grew the pool and pushed a slot of the first segment back on top
/// of a slot of the new one: the stale walk reads that link, an index in a
/// segment this thread does not see yet, and must start over (its CAS
/// would fail anyway). Pool: capacity 4, starting with 2 (segments
/// `{0, 1}` and `{2, 3}`), caches of 4 (refills of 2, so a walk reads past
/// the top). The walker refills from the head `0 -> 1`. The main thread
/// refills `{0, 1}` (keeping 0 in its cache), and in a scope takes 0 and
/// grows segment 1 (keeping 2, pushing 3); the scope's end pushes `2 -> 0`
/// onto 3, so the link of 0 the walker reads may be 3. Faults:
/// `tagpool_loom_walk_get` (the walk reads links with `get`, which panics
/// on the unpublished segment) and `tagpool_loom_grow_relaxed` (the
/// segment's pointer published with a Relaxed swap: the walker finds it
/// and reads a link whose initialization it does not see).
#[test]
fn batch_walk_races_a_growth() {
    check("batch_walk_races_a_growth", 2, || {
        let pool = Arc::new(
            Pool::builder(|| 0usize)
                .capacity(4)
                .initial(2)
                .thread_cache_size(4)
                .build()
                .unwrap(),
        );
        let walker = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                if let Ok(mut g) = pool.try_acquire() {
                    *g += 1;
                }
            })
        };
        let mut kept = pool.try_acquire();
        if let Ok(g) = &mut kept {
            **g += 1;
        }
        {
            let frame = pool.scope();
            for _ in 0..2 {
                if let Ok(value) = frame.try_acquire() {
                    *value += 1;
                }
            }
        }
        drop(kept);
        walker.join().unwrap();
        drain(&pool);
    });
}

/// `trim(0)` races a thread that acquires, writes and releases: the trim
/// drops only idle values (each exactly once: `Track`), never the held one.
/// Fault `tagpool_loom_trim_unowned`: a trim that takes the values of every
/// slot it finds filled, without taking the slot from the free list first.
#[test]
fn trim_races_an_acquire() {
    check("trim_races_an_acquire", 3, || {
        let pool = Arc::new(
            Pool::builder(|| Track::new(0usize))
                .capacity(2)
                .thread_cache(false)
                .build()
                .unwrap(),
        );
        let user = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                // While the trim holds both idle slots this finds none.
                if let Ok(mut g) = pool.try_acquire() {
                    *g.get_mut() += 1;
                }
            })
        };
        let trimmed = pool.trim(0);
        user.join().unwrap();
        assert!(trimmed <= 2 && pool.stats().filled <= 2);
        drain(&pool);
    });
}

/// With the only allocated slot held, two threads find the pool exhausted
/// at once and the first segment allocation unwinds (an injected fault, as
/// an allocation over `isize::MAX` bytes): the thread it unwinds gives the
/// growth claim back, so the other one (perhaps waiting for that growth)
/// and the unwound one, trying again, each get a slot. Fault
/// `tagpool_loom_grow_claim_kept`: the claim outlives the unwind, and the
/// threads wait for the growth forever.
#[test]
fn unwound_growth_gives_its_claim_back() {
    // Quiet the injected panic (once per interleaving); report the others.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !info
            .to_string()
            .contains("injected segment allocation failure")
        {
            report(info);
        }
    }));
    check("unwound_growth_gives_its_claim_back", 2, || {
        let pool = Arc::new(elastic());
        let first = pool.try_acquire().unwrap();
        tagpool::__loom_fail_next_growth();
        let racers: Vec<_> = (0..2)
            .map(|_| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || {
                    let tried = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        pool.try_acquire().map(|mut g| *g += 1)
                    }));
                    match tried {
                        Ok(got) => got.expect("the pool can grow"),
                        // The unwound growth: try again.
                        Err(_) => *pool.try_acquire().expect("the pool can grow") += 1,
                    }
                })
            })
            .collect();
        for racer in racers {
            racer.join().unwrap();
        }
        drop(first);
        drain(&pool);
    });
}

/// A pool with caches refuses at once, without its full path, when it
/// finds nobody waiting, the free list empty, every segment grown and
/// every cache empty (`Shared::exhausted`). That look must read the growth
/// before the head: a growth that ends in between pushes its spare slots
/// first, then says it is over, so the other order can read the head
/// empty and then the growth over, and refuse with a slot free. Here the
/// first segment is held, and two threads take the two slots of the
/// second one: one of them grows it (taking one slot and pushing the
/// other), and both must succeed. `run.sh` proves this model fails with
/// the other order (`tagpool_loom_exhausted_head_first`).
#[test]
fn exhausted_shortcut_races_a_growth() {
    check("exhausted_shortcut_races_a_growth", 3, || {
        let pool = Arc::new(
            Pool::builder(|| 0usize)
                .capacity(4)
                .initial(2)
                .thread_cache_size(2)
                .build()
                .unwrap(),
        );
        let held: Vec<_> = (0..2).map(|_| pool.try_acquire().unwrap()).collect();
        let grower = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || pool.try_acquire().map(|mut g| *g += 1).is_ok())
        };
        let mine = pool.try_acquire().map(|mut g| *g += 1).is_ok();
        let theirs = grower.join().unwrap();
        assert!(mine && theirs, "a slot of the second segment was free");
        drop(held);
        drain(&pool);
    });
}
