//! Model of a discard on release racing an acquire that fills the slot the
//! discard emptied.

#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tagpool::Pool;
use tagpool_loom_tests::{check, drain};

/// One slot; the main thread holds it, writes 1 (which the discard check
/// refuses) and releases it, so the release drops the value and pushes the
/// slot empty, while another thread acquires: if it gets the slot after
/// the discard, the factory fills it (a value 0, never the discarded 1),
/// and it writes 2, which is kept. Fault `tagpool_loom_discard_late`: the
/// release pushes the slot before it checks and empties it, so the discard
/// writes a slot that the other thread may hold.
#[test]
fn discard_races_an_acquire() {
    check("discard_races_an_acquire", 3, || {
        let pool = Arc::new(
            Pool::builder(|| 0usize)
                .capacity(1)
                .thread_cache(false)
                .discard_if(|v: &usize| *v == 1)
                .build()
                .unwrap(),
        );
        let user = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                if let Ok(mut g) = pool.try_acquire() {
                    assert_ne!(*g, 1, "a discarded value came back");
                    *g = 2;
                }
            })
        };
        if let Ok(mut g) = pool.try_acquire() {
            assert_ne!(*g, 1, "a discarded value came back");
            *g = 1;
        }
        user.join().unwrap();
        let stats = pool.stats();
        assert!(stats.discarded <= 1 && stats.filled <= 1);
        {
            let last = pool.try_acquire().expect("every slot is free");
            assert!(*last == 0 || *last == 2, "a discarded value came back");
        }
        drain(&pool);
    });
}
