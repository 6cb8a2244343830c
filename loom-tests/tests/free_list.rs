//! Models of the free list through the public API: exclusivity,
//! conservation, the ABA interleaving and exhaustion.
//!
//! Every holder writes its slot's value, so loom reports two simultaneous
//! holders (or a missing happens-before edge between successive holders) as
//! a concurrent access to a cell. Every model ends with a bounded drain.

#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tagpool::Pool;
use tagpool_loom_tests::{check, drain, uncached};

/// `ops` acquire + write + release rounds; returns how many acquired.
fn rounds(pool: &Pool<usize>, ops: usize) -> usize {
    let mut acquired = 0;
    for _ in 0..ops {
        if let Ok(mut g) = pool.try_acquire() {
            *g += 1;
            acquired += 1;
        }
    }
    acquired
}

/// Acquires two slots at once, writes both, releases the first acquired
/// first; returns how many acquired.
fn hold_two(pool: &Pool<usize>) -> usize {
    let a = pool.try_acquire();
    let b = pool.try_acquire();
    let mut acquired = 0;
    for mut g in [a, b].into_iter().flatten() {
        *g += 1;
        acquired += 1;
        drop(g);
    }
    acquired
}

/// Every write of every holder survives: no two holders overlapped.
fn total_writes(pool: &Pool<usize>) -> usize {
    let held: Vec<_> = (0..pool.capacity())
        .filter_map(|_| pool.try_acquire().ok())
        .collect();
    held.iter().map(|g| **g).sum()
}

fn exclusive(
    name: &str,
    preemptions: usize,
    capacity: usize,
    threads: &'static [fn(&Pool<usize>) -> usize],
) {
    check(name, preemptions, move || {
        let pool = Arc::new(uncached(capacity, || 0usize));
        let handles: Vec<_> = threads
            .iter()
            .map(|&work| {
                let pool = Arc::clone(&pool);
                thread::spawn(move || work(&pool))
            })
            .collect();
        let acquired: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(total_writes(&pool), acquired);
        drain(&pool);
    });
}

#[test]
fn exclusive_two_threads_capacity_1() {
    exclusive(
        "exclusive_two_threads_capacity_1",
        3,
        1,
        &[|p| rounds(p, 2), |p| rounds(p, 1)],
    );
}

#[test]
fn exclusive_two_threads_capacity_2() {
    exclusive(
        "exclusive_two_threads_capacity_2",
        3,
        2,
        &[hold_two, |p| rounds(p, 2)],
    );
}

#[test]
fn exclusive_three_threads_capacity_2() {
    exclusive(
        "exclusive_three_threads_capacity_2",
        3,
        2,
        &[hold_two, |p| rounds(p, 1), |p| rounds(p, 1)],
    );
}

#[test]
fn exclusive_three_threads_capacity_3() {
    exclusive(
        "exclusive_three_threads_capacity_3",
        2,
        3,
        &[hold_two, |p| rounds(p, 1), |p| rounds(p, 1)],
    );
}

/// The ABA interleaving. T1 pops and is preempted between reading the head
/// and its CAS; meanwhile T2 pops two slots, T3 returns a slot it held from
/// before, and T2 pushes its first slot back. Without the tag the head word
/// is then identical to what T1 read (same index, same free count), T1's CAS
/// succeeds, and T1 takes the slot T2 still holds. With the tag it fails and
/// retries. `run.sh` proves this model fails when the tag is disabled.
#[test]
fn aba_reordered_release() {
    check("aba_reordered_release", 3, || {
        let pool = Arc::new(uncached(3, || 0usize));
        let t3 = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || rounds(&pool, 1))
        };
        let t2 = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || hold_two(&pool))
        };
        let t1 = rounds(&pool, 1);
        let acquired = t1 + t2.join().unwrap() + t3.join().unwrap();
        assert_eq!(total_writes(&pool), acquired);
        drain(&pool);
    });
}

/// With every slot held, `try_acquire` returns `None` and never a held slot.
#[test]
fn exhaustion_never_hands_out_a_held_slot() {
    check("exhaustion_never_hands_out_a_held_slot", 3, || {
        let pool = Arc::new(Pool::new(1, || 0usize));
        let other = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || rounds(&pool, 2))
        };
        if let Ok(mut held) = pool.try_acquire() {
            *held += 1;
            assert!(pool.try_acquire().is_err(), "the only slot is held here");
            *held += 1;
        }
        other.join().unwrap();
        drain(&pool);
    });
}
