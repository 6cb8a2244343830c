//! Model of a per-frame scope's batch return racing an acquire.

#![cfg(loom)]

use std::sync::Arc;

use loom::thread;
use tagpool::Pool;
use tagpool_loom_tests::{check, drain};

/// A scope takes both slots, writes them and is dropped (reset, then one
/// batch push) while another thread acquires, checks that its value was
/// reset and writes it. Fault `tagpool_loom_scope_reset_late`: the batch
/// goes back before its values are reset, so the reset writes a slot the
/// other thread may hold.
#[test]
fn scope_batch_races_an_acquire() {
    check("scope_batch_races_an_acquire", 3, || {
        let pool = Arc::new(
            Pool::builder(|| 0usize)
                .capacity(2)
                .thread_cache(false)
                .reset(|v: &mut usize| *v = 0)
                .build()
                .unwrap(),
        );
        let user = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                if let Ok(mut g) = pool.try_acquire() {
                    assert_eq!(*g, 0, "a value shows its past life");
                    *g += 5;
                }
            })
        };
        {
            let frame = pool.scope();
            if let Ok(a) = frame.try_acquire() {
                *a = 1;
            }
            if let Ok(b) = frame.try_acquire() {
                *b = 2;
            }
        }
        user.join().unwrap();
        drain(&pool);
    });
}
