//! Models of the per-thread caches: owners racing revokers, slots parked in
//! idle or exited threads' caches, waiting while the only free slots sit in
//! caches, batch refills and flushes, and (on the cache-off path) a pop that
//! retries after the head moved.
//!
//! Every holder writes its slot's value, so loom reports two simultaneous
//! holders (or a missing happens-before edge between successive holders) as
//! a concurrent access to a cell; a magazine's stack is a loom cell too, so
//! an owner and a revoker inside it at once are reported the same way.
//! Every model ends with a bounded drain that must take exactly `capacity`
//! slots.

#![cfg(loom)]

use std::sync::Arc;

use loom::alloc::Track;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;
use tagpool::{Pool, PoolGuard};
use tagpool_loom_tests::{check, drain, uncached};

/// A pool of `capacity` slots with per-thread caches of `cache` slots
/// (refills and flushes move `max(1, cache / 2)`).
fn cached_pool(capacity: usize, cache: usize) -> Arc<Pool<usize>> {
    Arc::new(
        Pool::builder(|| 0usize)
            .capacity(capacity)
            .thread_cache_size(cache)
            .build()
            .unwrap(),
    )
}

/// A pool of 2 tracked values with caches of 2, for the models of the
/// pool's drop: loom's `Track` fails a model whose values are never dropped.
fn tracked_pool() -> Arc<Pool<Track<usize>>> {
    Arc::new(
        Pool::builder(|| Track::new(0usize))
            .capacity(2)
            .thread_cache_size(2)
            .build()
            .unwrap(),
    )
}

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

/// Acquires up to `n` slots at once, writes them all, then releases them in
/// the order they were acquired; returns how many acquired.
fn hold(pool: &Pool<usize>, n: usize) -> usize {
    let held: Vec<_> = (0..n).filter_map(|_| pool.try_acquire().ok()).collect();
    let acquired = held.len();
    for mut g in held {
        *g += 1;
        drop(g);
    }
    acquired
}

/// Every write of every holder survives: no two holders overlapped. Takes
/// every slot (from caches too), so the caller's thread then holds them in
/// its own cache.
fn total_writes(pool: &Pool<usize>) -> usize {
    let held: Vec<_> = (0..pool.capacity())
        .filter_map(|_| pool.try_acquire().ok())
        .collect();
    held.iter().map(|g| **g).sum()
}

/// Spins (yielding to loom) until `flag` is set; Acquire pairs with the
/// setter's Release store.
fn wait_for(flag: &AtomicBool) {
    while !flag.load(Ordering::Acquire) {
        thread::yield_now();
    }
}

fn spawn<R: Send + 'static>(
    pool: &Arc<Pool<usize>>,
    work: impl FnOnce(&Pool<usize>) -> R + Send + 'static,
) -> thread::JoinHandle<R> {
    let pool = Arc::clone(pool);
    thread::spawn(move || work(&pool))
}

/// An owner runs acquire/release rounds on its own cache (so its magazine
/// holds a slot and it is inside `enter`/`exit`) while another thread takes
/// both slots: its second acquire finds its own cache and the free list
/// empty and must revoke the owner's magazine. The owner's
/// `state |= BUSY; barrier; revoked` and the revoker's
/// `revoked; barrier; state` must keep them out of the stack at the same
/// time. `run.sh` proves this model fails without either barrier, with an
/// owner that ignores `revoked`, with a revoker that ignores `BUSY`, and
/// with one that checks `BUSY` only before it claims the magazine, not
/// again after its heavy barrier: that one needs preemption bound 3 (the
/// owner sets `BUSY` between the revoker's look and its claim), which
/// costs about 1,500 iterations.
#[test]
fn owner_races_revoker() {
    check("owner_races_revoker", 3, || {
        let pool = cached_pool(2, 2);
        let owner = spawn(&pool, |p| rounds(p, 2));
        let here = hold(&pool, 2);
        let acquired = here + owner.join().unwrap();
        assert_eq!(total_writes(&pool), acquired);
        drain(&pool);
    });
}

/// A revoker drains an idle owner's cache (its `revoked` becomes `DRAINED`)
/// and holds the slot; the owner's next acquire must take its magazine back
/// as empty, never take the held slot again. The other slot sits in the
/// revoker's own cache meanwhile, so the pool is not exhausted and the
/// owner's acquire does enter its drained magazine (an exhausted pool
/// would refuse before that: see `Shared::exhausted`). `run.sh` proves
/// this model fails with an owner that keeps the drained stack's length
/// (it takes the held slot a second time).
#[test]
fn drained_cache_is_taken_back_empty() {
    check("drained_cache_is_taken_back_empty", 2, || {
        let pool = cached_pool(2, 2);
        let parked = Arc::new(AtomicBool::new(false));
        let taken = Arc::new(AtomicBool::new(false));
        // The index of the slot the revoker drained and holds.
        let held = Arc::new(AtomicUsize::new(usize::MAX));
        let owner = {
            let (parked, taken, held) =
                (Arc::clone(&parked), Arc::clone(&taken), Arc::clone(&held));
            spawn(&pool, move |p| {
                *p.try_acquire().expect("nobody else acquires yet") += 1;
                // Release: the park happens-before the revoker's acquires.
                parked.store(true, Ordering::Release);
                wait_for(&taken);
                let mut g = p
                    .try_acquire()
                    .expect("the other slot is in the revoker's cache");
                // Acquire: pairs with the Release store below.
                let drained = held.load(Ordering::Acquire);
                assert_ne!(
                    PoolGuard::index(&g),
                    drained,
                    "took the slot the revoker holds"
                );
                *g += 1;
            })
        };
        wait_for(&parked);
        // The free slot first, then the parked one, by a sweep.
        let free = pool.try_acquire().expect("one slot is free");
        let mut drained = pool.try_acquire().expect("the parked slot is free");
        held.store(PoolGuard::index(&drained), Ordering::Release);
        // Into this thread's cache: the pool is not exhausted.
        drop(free);
        // Release: the drain happens-before the owner's second acquire.
        taken.store(true, Ordering::Release);
        *drained += 1;
        owner.join().unwrap();
        assert_eq!(*drained, 2);
        drop(drained);
        drain(&pool);
    });
}

/// Two threads try-acquire until they fail, keeping what they get, while
/// one of them has a free slot in its own cache: between them they must
/// take every slot. The revoker may claim the owner's magazine and see the
/// owner busy (it set `BUSY` to look at `revoked`), leaving the stack
/// alone; the owner must then take the claim back and use its stack (or,
/// giving up on it, take the claim over in its own sweep), never wait for
/// the revoker, nor give up while the revoker gives up too. `run.sh`
/// proves this model fails with an owner that gives up on a claimed stack
/// and sweeps that do not take claims over (it needs preemption bound 3).
#[test]
fn racing_try_acquires_take_every_slot() {
    /// Try-acquires until one fails; then, holding what it got, counts
    /// itself in `done` and waits for the other thread to stop too.
    fn take_all(pool: &Pool<usize>, done: &AtomicUsize) -> usize {
        let mut held = Vec::new();
        while let Ok(mut g) = pool.try_acquire() {
            *g += 1;
            held.push(g);
        }
        // AcqRel: each thread's failure happens-before the other's drops.
        done.fetch_add(1, Ordering::AcqRel);
        while done.load(Ordering::Acquire) < 2 {
            thread::yield_now();
        }
        held.len()
    }
    check("racing_try_acquires_take_every_slot", 3, || {
        let pool = cached_pool(2, 2);
        let parked = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let owner = {
            let (parked, done) = (Arc::clone(&parked), Arc::clone(&done));
            spawn(&pool, move |p| {
                // The owner parks one slot in its cache before the race.
                drop(p.try_acquire().expect("nobody else acquires yet"));
                // Release: the park happens-before the other thread's start.
                parked.store(true, Ordering::Release);
                take_all(p, &done)
            })
        };
        wait_for(&parked);
        let here = take_all(&pool, &done);
        let there = owner.join().unwrap();
        assert_eq!(here + there, 2, "both stopped with a slot free");
        drain(&pool);
    });
}

/// A slot parked in the cache of a thread that is alive but idle is taken
/// by another thread: the acquire that happens after the park must
/// succeed. `run.sh` proves this model fails when sweeps recover nothing.
#[test]
fn parked_slot_taken_from_idle_thread() {
    check("parked_slot_taken_from_idle_thread", 3, || {
        let pool = cached_pool(1, 2);
        let parked = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicBool::new(false));
        let owner = {
            let (parked, done) = (Arc::clone(&parked), Arc::clone(&done));
            spawn(&pool, move |p| {
                *p.try_acquire().expect("nobody else acquires yet") += 1;
                assert_eq!(p.stats().cached, 1, "the slot is parked here");
                // Release: the park happens-before the other acquire.
                parked.store(true, Ordering::Release);
                wait_for(&done);
            })
        };
        wait_for(&parked);
        let mut g = pool
            .try_acquire()
            .expect("the slot parked in an idle thread's cache is free");
        *g += 1;
        assert_eq!(*g, 2);
        drop(g);
        done.store(true, Ordering::Release);
        owner.join().unwrap();
        drain(&pool);
    });
}

/// Threads that end with slots in their caches: after joining them, the
/// main thread gets every slot.
#[test]
fn exited_threads_caches_are_recovered() {
    check("exited_threads_caches_are_recovered", 3, || {
        let pool = cached_pool(2, 2);
        let a = spawn(&pool, |p| rounds(p, 1));
        let b = spawn(&pool, |p| rounds(p, 1));
        let acquired = a.join().unwrap() + b.join().unwrap();
        assert!(acquired >= 1, "one of them found a slot");
        let stats = pool.stats();
        assert_eq!((stats.in_use, stats.available), (0, 2));
        assert_eq!(total_writes(&pool), acquired);
        drain(&pool);
    });
}

/// Two threads wait for the only slot with `acquire`: whoever gets it first
/// releases it into its own cache, so the other one must get it from there
/// (by its sweep, or by the owner's flush when it sees a waiter). loom
/// reports a waiter left parked as a deadlock.
#[test]
fn waiters_take_slots_from_caches() {
    check("waiters_take_slots_from_caches", 2, || {
        let pool = cached_pool(1, 1);
        let a = spawn(&pool, |p| *p.acquire().unwrap() += 1);
        let b = spawn(&pool, |p| *p.acquire().unwrap() += 1);
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(*pool.try_acquire().unwrap(), 2);
        drain(&pool);
    });
}

/// The holder of the only slot releases it into its cache once the waiter
/// has started waiting: the owner must flush it when it sees the waiter
/// (or the waiter's sweep must move it). `run.sh` proves this model
/// deadlocks when owners never flush for waiters.
#[test]
fn release_while_waiting_reaches_waiter() {
    check("release_while_waiting_reaches_waiter", 3, || {
        let pool = cached_pool(1, 1);
        let mut held = pool.try_acquire().unwrap();
        let waiter = spawn(&pool, |p| *p.acquire().unwrap() += 1);
        // Release only once the waiter counts as waiting.
        while pool.stats().waits == 0 {
            thread::yield_now();
        }
        *held += 1;
        drop(held);
        waiter.join().unwrap();
        assert_eq!(*pool.try_acquire().unwrap(), 2);
        drain(&pool);
    });
}

/// An owner's fast acquire leaves a slot in its magazine while another
/// thread waits: the owner parks both slots of a pool of 2 in its cache of
/// 2, then takes one back (the inlined fast acquire) while the main thread
/// waits for a slot. If the waiter's sweep runs while the owner is busy, it
/// leaves the stack alone, and the owner's `exit` must see the waiter and
/// flush the slot left behind; the owner then keeps its guard and exits, so
/// nothing else would wake the waiter. Every other waiting model has
/// capacity 1, where an acquire never leaves a slot behind. `run.sh` proves
/// this model deadlocks when the fast acquire skips that flush
/// (`tagpool_loom_acquire_no_flush`).
#[test]
fn fast_acquire_flushes_for_a_waiter() {
    check("fast_acquire_flushes_for_a_waiter", 2, || {
        let pool = cached_pool(2, 2);
        let parked = Arc::new(AtomicBool::new(false));
        let owner = {
            let pool = Arc::clone(&pool);
            let parked = Arc::clone(&parked);
            thread::spawn(move || {
                let a = pool.try_acquire().expect("both slots are free");
                let b = pool.try_acquire().expect("one slot is free");
                drop((a, b));
                assert_eq!(pool.stats().cached, 2, "both slots are parked here");
                // Release: the park happens-before the waiter's acquire.
                parked.store(true, Ordering::Release);
                // May fail while the waiter's sweep holds the magazine,
                // its slots in transit to the free list.
                pool.try_acquire_owned().ok().map(|mut g| {
                    *g += 1;
                    g
                })
            })
        };
        wait_for(&parked);
        let mut g = pool.acquire().unwrap();
        *g += 1;
        let kept = owner.join().unwrap();
        let writes = 1 + kept.as_ref().map_or(0, |_| 1);
        drop((g, kept));
        assert_eq!(total_writes(&pool), writes);
        drain(&pool);
    });
}

/// A waiter skips its sweep of the caches when an earlier waiter's sweep
/// still covers the pool (`waiting` never dropped to 0 since), which is
/// sound only while the mark lives no longer than the waiting that made it.
/// The first waiter covers the pool, is served, and leaves (the count drops
/// to 0, which must clear the mark); its slot stays in its cache. Then a
/// holder takes that slot and releases it into its own cache while nobody
/// waits (so it does not flush) just as a second waiter arrives: the second
/// waiter must sweep that cache. `run.sh` proves this model deadlocks when
/// the mark outlives its waiters (`tagpool_loom_covered_stale`).
#[test]
fn covered_mark_ends_with_its_waiters() {
    check("covered_mark_ends_with_its_waiters", 2, || {
        let pool = cached_pool(1, 1);
        let held = pool.try_acquire().unwrap();
        let first = spawn(&pool, |p| *p.acquire().unwrap() += 1);
        while pool.stats().waits == 0 {
            thread::yield_now();
        }
        drop(held);
        first.join().unwrap();
        let held = Arc::new(AtomicBool::new(false));
        let holder = {
            let held = Arc::clone(&held);
            spawn(&pool, move |p| {
                let mut g = p.acquire().unwrap();
                *g += 1;
                held.store(true, Ordering::Release);
            })
        };
        // Acquire while the holder holds the slot or has just released it.
        wait_for(&held);
        *pool.acquire().unwrap() += 1;
        holder.join().unwrap();
        assert_eq!(*pool.try_acquire().unwrap(), 3);
        drain(&pool);
    });
}

/// A release that happens-before an acquire on another thread (through an
/// atomic flag, not a join) is visible to it, although the slot is parked
/// in the releaser's cache.
#[test]
fn release_happens_before_acquire() {
    check("release_happens_before_acquire", 3, || {
        let pool = cached_pool(1, 1);
        let released = Arc::new(AtomicBool::new(false));
        let releaser = {
            let released = Arc::clone(&released);
            spawn(&pool, move |p| {
                *p.try_acquire().expect("the taker waits for the flag") += 1;
                released.store(true, Ordering::Release);
            })
        };
        let taker = {
            let released = Arc::clone(&released);
            spawn(&pool, move |p| {
                wait_for(&released);
                let mut g = p.try_acquire().expect("the release happened before");
                *g += 1;
                *g
            })
        };
        releaser.join().unwrap();
        assert_eq!(taker.join().unwrap(), 2);
        drain(&pool);
    });
}

/// folly's `IndexedMemPool` bug, on the cache-off path. A pop reads the
/// head (tag `t`) and is preempted; another thread pops (tag `t + 1`); a
/// third reads that head and is preempted; the second thread then takes
/// every slot and releases them in the order it took them, which reverses
/// the stack. The first pop's CAS fails and it retries on the new head. A
/// retry that bumps the tag it read before the loop writes tag `t + 1`
/// again, on a head with the same index and count as the one the third
/// thread read but another slot below: the third thread's stale CAS
/// succeeds and hands out a slot the first thread holds. `run.sh` proves
/// this model fails with the tag frozen before the retry loop.
#[test]
fn retried_pop_bumps_the_current_tag() {
    check("retried_pop_bumps_the_current_tag", 3, || {
        // Capacity 3, caches off: the free list alone.
        let pool = Arc::new(uncached(3, || 0usize));
        let first = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                pool.try_acquire_owned().map(|mut g| {
                    *g += 1;
                    g
                })
            })
        };
        let stale = spawn(&pool, |p| rounds(p, 1));
        let here = hold(&pool, 3);
        let held = first.join().unwrap();
        let acquired = here + stale.join().unwrap() + usize::from(held.is_ok());
        drop(held);
        assert_eq!(total_writes(&pool), acquired);
        drain(&pool);
    });
}

/// Batches: caches of 4 slots refill 2 at a time, so one refill can take
/// two slots of three; the other thread then finds the free list short and
/// revokes the first one's cache, moving its slots back in one push.
#[test]
fn batch_refill_and_revoke() {
    check("batch_refill_and_revoke", 2, || {
        let pool = cached_pool(3, 4);
        let a = spawn(&pool, |p| hold(p, 2));
        let here = hold(&pool, 2);
        let acquired = here + a.join().unwrap();
        assert_eq!(total_writes(&pool), acquired);
        drain(&pool);
    });
}

/// Batches: caches of 1 slot, so each thread that releases two slots
/// flushes the older one to the free list when its cache is full, while the
/// other thread refills from it and revokes.
#[test]
fn full_cache_flushes_oldest() {
    check("full_cache_flushes_oldest", 2, || {
        let pool = cached_pool(3, 1);
        let a = spawn(&pool, |p| hold(p, 2));
        let here = hold(&pool, 2);
        let acquired = here + a.join().unwrap();
        assert_eq!(total_writes(&pool), acquired);
        drain(&pool);
    });
}

/// An owned guard, counted in the acquiring thread's magazine, dropped on
/// another thread (where its release is counted in that thread's magazine,
/// with a tail that reads the pool) while the pool's handle is dropped: the
/// handle's drop seals both magazines and frees the pool's state exactly
/// once, after the release's last access. The state's liveness cell makes
/// loom report a free that does not happen-after every access of the
/// release (the `tagpool_loom_no_tail` and `tagpool_loom_seal_busy` faults),
/// and `Track` a value never dropped (a count lost by the seal).
#[test]
fn owned_release_races_pool_drop() {
    check("owned_release_races_pool_drop", 3, || {
        let pool = tracked_pool();
        let mut g = pool.try_acquire_owned().unwrap();
        *g.get_mut() += 1;
        let job = thread::spawn(move || drop(g));
        drop(pool);
        job.join().unwrap();
        // loom's `Track` fails the model if a value was never dropped: the
        // state was never freed because a count was lost.
    });
}

/// A revoker drains the cache of a thread that holds an owned guard (its
/// `revoked` becomes `DRAINED`); then the pool's handle is dropped while
/// that thread releases the guard, its release taking the drained magazine
/// back. The take-back and the handle's seal race on `revoked`: the owner
/// clears `DRAINED` with a CAS, so a `SEALED` stored since it looked stays,
/// and the release then counts in the pool's shared count; the last release
/// frees the state. `run.sh` proves this model fails when the owner clears
/// `DRAINED` with a plain store (the seal is overwritten, the release counts
/// in a magazine the seal already summed, and loom's `Track` reports values
/// never dropped).
#[test]
fn drained_take_back_races_the_seal() {
    check("drained_take_back_races_the_seal", 3, || {
        let pool = tracked_pool();
        let parked = Arc::new(AtomicBool::new(false));
        let drained = Arc::new(AtomicBool::new(false));
        let owner = {
            let pool = Arc::clone(&pool);
            let (parked, drained) = (Arc::clone(&parked), Arc::clone(&drained));
            thread::spawn(move || {
                let mut kept = pool.try_acquire_owned().expect("both slots are free");
                *kept.get_mut() += 1;
                // Parked in this thread's cache.
                drop(pool.try_acquire_owned().expect("one slot is free"));
                drop(pool);
                // Release: the park happens-before the revoker's acquire.
                parked.store(true, Ordering::Release);
                wait_for(&drained);
                drop(kept);
            })
        };
        wait_for(&parked);
        let mut g = pool
            .try_acquire()
            .expect("the slot parked in the owner's cache is free");
        *g.get_mut() += 1;
        drop(g);
        // Release: the drain happens-before the owner's release.
        drained.store(true, Ordering::Release);
        drop(pool);
        owner.join().unwrap();
    });
}

/// An owner whose fast acquire finds a waiter's claim on its magazine
/// leaves the fast path without its flush; if the waiter saw it busy, it
/// left the stack to the owner and marked the pool covered, so the owner
/// must flush before it takes its slot elsewhere (here: before it waits
/// itself, when its own wait skips the sweep for the covered pool). The
/// owner holds one slot and parks the other in its cache before the race;
/// then it waits for a second slot while another thread waits for one:
/// between them they must get the parked slot. `run.sh` proves this model
/// deadlocks without that flush (`tagpool_loom_wait_skips_flush`; it needs
/// preemption bound 3).
#[test]
fn owner_flushes_before_it_waits() {
    check("owner_flushes_before_it_waits", 3, || {
        let pool = cached_pool(2, 2);
        let held: Vec<_> = (0..2).map(|_| pool.try_acquire().unwrap()).collect();
        let mut held = held.into_iter();
        let first = held.next().unwrap();
        drop(held);
        assert_eq!(pool.stats().cached, 1, "one slot is parked here");
        let waiter = spawn(&pool, |p| *p.acquire().unwrap() += 1);
        let mut second = pool.acquire().unwrap();
        *second += 1;
        drop(first);
        drop(second);
        waiter.join().unwrap();
        drain(&pool);
    });
}

/// A release whose fast path finds its stack full (or claimed) leaves it
/// without the flush that ends every operation; while anyone waits it
/// then pushes its slot straight to the free list, so it must flush the
/// stack first: a waiter whose sweep saw the owner busy left the stack to
/// it and marked the pool covered, and a second waiter then skips its
/// sweep. Here the owner's stack of one is full (a pool of 2) and it holds
/// the other slot; two waiters come, the first keeping its slot until the
/// second has one: the second must get the slot of that stack. `run.sh`
/// proves this model deadlocks without the flush
/// (`tagpool_loom_release_skips_flush`), at preemption bound 2, where the
/// faulty build deadlocks after about four minutes on 2 cores; the model
/// runs at bound 1 in the normal pass (7 s), as the full bound-2 search
/// would cost more than the rest of the loom step.
#[test]
fn full_cache_release_flushes_for_waiters() {
    check("full_cache_release_flushes_for_waiters", 1, || {
        let pool = cached_pool(2, 1);
        let last = {
            let first = pool.try_acquire().unwrap();
            let last = pool.try_acquire().unwrap();
            drop(first);
            last
        };
        assert_eq!(pool.stats().cached, 1, "the stack is full");
        let first_waiter = {
            let pool = Arc::clone(&pool);
            thread::spawn(move || {
                let second_waiter = spawn(&pool, |p| *p.acquire().unwrap() += 1);
                let mut got = pool.acquire().unwrap();
                *got += 1;
                // Kept until the other waiter has a slot too.
                second_waiter.join().unwrap();
            })
        };
        drop(last);
        first_waiter.join().unwrap();
        drain(&pool);
    });
}
