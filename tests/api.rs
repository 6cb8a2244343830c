//! Single-thread semantics of the public API, bad input and faults.

use std::collections::HashSet;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tagpool::{BuildError, OwnedPoolGuard, Pool, PoolGuard, MAX_CAPACITY};

/// Counts how many values were made and dropped.
#[derive(Default)]
struct Tally {
    made: AtomicUsize,
    dropped: AtomicUsize,
}

impl Tally {
    fn made(&self) -> usize {
        self.made.load(Ordering::SeqCst)
    }
    fn dropped(&self) -> usize {
        self.dropped.load(Ordering::SeqCst)
    }
}

/// A value that reports its drop to a `Tally`.
struct Counted {
    tally: Arc<Tally>,
    id: usize,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.tally.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting_factory(tally: &Arc<Tally>) -> impl Fn() -> Counted + Send + Sync + 'static {
    let tally = Arc::clone(tally);
    move || Counted {
        id: tally.made.fetch_add(1, Ordering::SeqCst),
        tally: Arc::clone(&tally),
    }
}

/// Silences the default panic message of the panics these tests provoke.
fn quietly<R>(f: impl FnOnce() -> R) -> std::thread::Result<R> {
    panic::catch_unwind(AssertUnwindSafe(f))
}

#[test]
fn exhausts_at_exactly_capacity_live_guards() {
    for capacity in [1, 2, 3, 7, 64] {
        let pool = Pool::new(capacity, || 0u32);
        let guards: Vec<_> = (0..capacity)
            .map(|_| pool.try_acquire().expect("a free slot"))
            .collect();
        assert!(
            pool.try_acquire().is_err(),
            "capacity {capacity}: one guard too many"
        );
        let indices: HashSet<_> = guards.iter().map(PoolGuard::index).collect();
        assert_eq!(indices.len(), capacity, "every guard has its own slot");
        assert!(indices.iter().all(|&i| i < capacity));
        drop(guards);
        assert_eq!(pool.stats().available, capacity);
    }
}

#[test]
fn a_released_slot_can_be_acquired_again_with_its_value() {
    let pool = Pool::new(1, || 0u32);
    *pool.try_acquire().unwrap() = 5;
    assert_eq!(
        *pool.try_acquire().unwrap(),
        5,
        "no reset closure: the value is kept"
    );
}

#[test]
fn stats_track_in_use_peak_and_failures() {
    let pool = Pool::new(3, || ());
    let a = pool.try_acquire().unwrap();
    let b = pool.try_acquire().unwrap();
    let c = pool.try_acquire().unwrap();
    assert!(pool.try_acquire().is_err());
    assert!(pool.try_acquire().is_err());
    drop((a, b));
    let stats = pool.stats();
    assert_eq!(stats.capacity, 3);
    assert_eq!(stats.in_use, 1);
    assert_eq!(stats.available, 2);
    assert_eq!(stats.peak_in_use, 3);
    assert_eq!(stats.failed_acquires, 2);
    assert_eq!((stats.waits, stats.timeouts), (0, 0));
    drop(c);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn builder_rejects_zero_and_oversized_capacity() {
    assert_eq!(
        Pool::builder(|| 0u8).build().unwrap_err(),
        BuildError::ZeroCapacity
    );
    assert_eq!(
        Pool::builder(|| 0u8).capacity(0).build().unwrap_err(),
        BuildError::ZeroCapacity
    );
    let err = Pool::builder(|| 0u8)
        .capacity(MAX_CAPACITY + 1)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::CapacityTooLarge {
            requested: MAX_CAPACITY + 1,
            max: MAX_CAPACITY
        }
    );
    assert_eq!(
        err.to_string(),
        format!(
            "pool capacity {} is above the maximum of {MAX_CAPACITY}",
            MAX_CAPACITY + 1
        )
    );
    let _: &dyn std::error::Error = &err;
}

#[test]
fn builder_accepts_the_maximum_capacity_when_elastic() {
    assert_eq!(MAX_CAPACITY as u64, (1u64 << 32) - 2);
    let pool = Pool::builder(|| 0u8)
        .capacity(MAX_CAPACITY)
        .initial(2)
        .build()
        .unwrap();
    assert_eq!(pool.capacity(), MAX_CAPACITY);
    let guards: Vec<_> = (0..5).map(|_| pool.try_acquire().unwrap()).collect();
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.allocated), (5, 8), "grew 2, 4, 8");
    assert_eq!(stats.available, MAX_CAPACITY - 5);
    drop(guards);
    assert_eq!(pool.stats().in_use, 0);
}

#[test]
fn builder_rejects_bad_initial_sizes_and_too_many_values() {
    let err = Pool::builder(|| 0u8)
        .capacity(4)
        .initial(0)
        .build()
        .unwrap_err();
    assert_eq!(err, BuildError::ZeroInitial);
    assert_eq!(err.to_string(), "initial pool size must be at least 1");
    let err = Pool::builder(|| 0u8)
        .capacity(4)
        .initial(5)
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::InitialAboveCapacity {
            initial: 5,
            capacity: 4
        }
    );
    assert_eq!(
        err.to_string(),
        "initial pool size 5 is above the capacity of 4"
    );
    let err = Pool::builder(|| 0u8)
        .capacity(2)
        .values(vec![1, 2, 3])
        .build()
        .unwrap_err();
    assert_eq!(
        err,
        BuildError::TooManyValues {
            values: 3,
            capacity: 2
        }
    );
    assert_eq!(
        err.to_string(),
        "3 initial values do not fit a pool capacity of 2"
    );
    let err = Pool::builder(|| 0u8)
        .capacity(MAX_CAPACITY + 1)
        .initial(1)
        .build()
        .unwrap_err();
    assert!(matches!(err, BuildError::CapacityTooLarge { .. }));
}

#[test]
#[should_panic(expected = "tagpool::Pool::new: pool capacity must be at least 1")]
fn new_panics_on_zero_capacity() {
    let _ = Pool::new(0, || 0u8);
}

#[test]
#[should_panic(expected = "is above the maximum of 4294967294")]
fn new_panics_on_oversized_capacity() {
    let _ = Pool::new(MAX_CAPACITY + 1, || 0u8);
}

#[test]
fn eager_build_makes_every_value_and_lazy_build_none() {
    let tally = Arc::new(Tally::default());
    let eager = Pool::new(5, counting_factory(&tally));
    assert_eq!(tally.made(), 5);
    drop(eager);
    assert_eq!(tally.dropped(), 5);

    let tally = Arc::new(Tally::default());
    let lazy = Pool::builder(counting_factory(&tally))
        .capacity(5)
        .lazy()
        .build()
        .unwrap();
    assert_eq!(tally.made(), 0);
    let a = lazy.try_acquire().unwrap();
    drop(a);
    let a = lazy.try_acquire().unwrap();
    assert_eq!(tally.made(), 1, "a filled slot is not filled again");
    let b = lazy.try_acquire().unwrap();
    assert_eq!(tally.made(), 2);
    drop((a, b));
    drop(lazy);
    assert_eq!(tally.dropped(), 2, "only made values are dropped");
}

#[test]
fn factory_panic_during_eager_build_drops_the_values_made() {
    let tally = Arc::new(Tally::default());
    let make = counting_factory(&tally);
    let result = quietly(|| {
        Pool::new(10, move || {
            let value = make();
            assert!(value.id < 4, "factory failure");
            value
        })
    });
    assert!(result.is_err());
    assert_eq!(tally.made(), 5, "four values, then the fifth panicked");
    assert_eq!(
        tally.dropped(),
        5,
        "the four made and the one dropped by the panic"
    );
}

#[test]
fn factory_panic_during_lazy_fill_returns_the_slot_empty() {
    let fail = Arc::new(AtomicUsize::new(1));
    let pool = {
        let fail = Arc::clone(&fail);
        Pool::builder(move || {
            if fail.load(Ordering::SeqCst) > 0 {
                fail.fetch_sub(1, Ordering::SeqCst);
                panic!("factory failure");
            }
            7u32
        })
        .capacity(1)
        .lazy()
        .build()
        .unwrap()
    };
    assert!(quietly(|| pool.try_acquire().map(|g| *g)).is_err());
    assert_eq!(pool.stats().available, 1, "the slot came back");
    assert_eq!(
        *pool.try_acquire().unwrap(),
        7,
        "and is filled on the next acquire"
    );
}

#[test]
fn reset_runs_exactly_once_per_release_and_not_on_detach() {
    let resets = Arc::new(AtomicUsize::new(0));
    let pool = {
        let resets = Arc::clone(&resets);
        Pool::builder(Vec::<u32>::new)
            .capacity(2)
            .reset(move |v: &mut Vec<u32>| {
                resets.fetch_add(1, Ordering::SeqCst);
                v.clear();
            })
            .build()
            .unwrap()
    };
    for i in 0..10 {
        let mut g = pool.try_acquire().unwrap();
        assert!(g.is_empty(), "a reused value shows no past life");
        g.push(i);
    }
    assert_eq!(resets.load(Ordering::SeqCst), 10);
    let mut g = pool.try_acquire().unwrap();
    g.push(1);
    let v = PoolGuard::detach(g);
    assert_eq!(v, [1]);
    assert_eq!(resets.load(Ordering::SeqCst), 10, "detach does not reset");
}

#[test]
fn reset_panic_drops_the_value_returns_the_slot_and_propagates() {
    let tally = Arc::new(Tally::default());
    let pool = Pool::builder(counting_factory(&tally))
        .capacity(1)
        .reset(|c: &mut Counted| assert!(c.id != 0, "reset failure"))
        .build()
        .unwrap();
    let g = pool.try_acquire().unwrap();
    assert!(
        quietly(move || drop(g)).is_err(),
        "the panic propagates from the drop"
    );
    assert_eq!(tally.dropped(), 1, "the half-reset value was dropped");
    assert_eq!(pool.stats().available, 1, "the slot came back");
    let g = pool.try_acquire().unwrap();
    assert_eq!(g.id, 1, "refilled by the factory");
    drop(g); // id 1: reset succeeds
    drop(pool);
    assert_eq!((tally.made(), tally.dropped()), (2, 2));
}

#[test]
fn detach_refills_the_slot_so_capacity_is_never_lost() {
    let tally = Arc::new(Tally::default());
    let pool = Pool::new(2, counting_factory(&tally));
    let detached: Vec<Counted> = (0..5)
        .map(|_| PoolGuard::detach(pool.try_acquire().unwrap()))
        .collect();
    assert_eq!(pool.stats().available, 2);
    assert_eq!(
        tally.made(),
        2 + 3,
        "the two values built are served before the factory runs (idle values \
         first), then each detach leaves an empty slot to refill"
    );
    let both = (pool.try_acquire().unwrap(), pool.try_acquire().unwrap());
    assert!(pool.try_acquire().is_err());
    drop(both);
    drop(detached);
    drop(pool);
    assert_eq!(tally.made(), tally.dropped());
}

#[test]
fn forgotten_guard_keeps_its_slot_in_use_and_the_pool_drops_its_value() {
    let tally = Arc::new(Tally::default());
    let pool = Pool::new(2, counting_factory(&tally));
    std::mem::forget(pool.try_acquire().unwrap());
    assert_eq!(pool.stats().in_use, 1);
    for _ in 0..3 {
        let g = pool.try_acquire().expect("the other slot still works");
        assert!(pool.try_acquire().is_err());
        drop(g);
    }
    assert_eq!(pool.stats().in_use, 1);
    drop(pool);
    assert_eq!(
        tally.dropped(),
        2,
        "the leaked value is dropped once, with the pool"
    );
}

#[test]
fn dropping_the_pool_drops_every_value_exactly_once() {
    let tally = Arc::new(Tally::default());
    let pool = Pool::builder(counting_factory(&tally))
        .capacity(8)
        .lazy()
        .build()
        .unwrap();
    let held: Vec<_> = (0..5).map(|_| pool.try_acquire().unwrap()).collect();
    drop(held);
    let kept = PoolGuard::detach(pool.try_acquire().unwrap());
    drop(pool);
    assert_eq!(tally.made(), 5);
    assert_eq!(tally.dropped(), 4);
    drop(kept);
    assert_eq!(tally.dropped(), 5);
}

#[test]
fn owned_guards_keep_the_pool_alive_after_the_last_arc() {
    let tally = Arc::new(Tally::default());
    let pool = Arc::new(Pool::new(3, counting_factory(&tally)));
    let a = pool.try_acquire_owned().unwrap();
    let b = pool.try_acquire_owned().unwrap();
    let weak = Arc::downgrade(&pool);
    drop(pool);
    assert!(weak.upgrade().is_none(), "the guards do not hold the Arc");
    assert_eq!(a.id + b.id, 1);
    drop(a);
    assert_eq!(tally.dropped(), 0, "the last guard keeps every value");
    drop(b);
    assert_eq!(tally.dropped(), 3, "the last guard dropped the pool");
}

#[test]
fn owned_guards_dropped_on_other_threads_after_the_pool_free_it_once() {
    for _ in 0..50 {
        let tally = Arc::new(Tally::default());
        let pool = Arc::new(
            Pool::builder(counting_factory(&tally))
                .capacity(64)
                .thread_cache_size(8)
                .build()
                .unwrap(),
        );
        let guards: Vec<_> = (0..60).map(|_| pool.try_acquire_owned().unwrap()).collect();
        let mut chunks: Vec<Vec<_>> = vec![Vec::new(), Vec::new(), Vec::new()];
        for (i, g) in guards.into_iter().enumerate() {
            chunks[i % 3].push(g);
        }
        std::thread::scope(|s| {
            for chunk in chunks {
                s.spawn(move || {
                    for g in chunk {
                        drop(g);
                        std::thread::yield_now();
                    }
                });
            }
            drop(pool);
        });
        assert_eq!(tally.dropped(), 64, "every value dropped, once");
    }
}

#[test]
// The leak is the point: miri would report it.
#[cfg_attr(miri, ignore)]
fn a_forgotten_owned_guard_leaks_the_pool_values_without_harm() {
    let tally = Arc::new(Tally::default());
    let pool = Arc::new(Pool::new(2, counting_factory(&tally)));
    let g = pool.try_acquire_owned().unwrap();
    std::mem::forget(g);
    let other = pool.try_acquire_owned().unwrap();
    drop(pool);
    drop(other);
    assert_eq!(tally.dropped(), 0, "the forgotten guard keeps the pool");
}

#[test]
fn owned_guard_detach_and_index() {
    let pool = Arc::new(Pool::new(2, || String::from("x")));
    let g = pool.try_acquire_owned().unwrap();
    assert!(OwnedPoolGuard::index(&g) < 2);
    assert_eq!(Arc::strong_count(&pool), 1, "guards hold no Arc");
    assert_eq!(OwnedPoolGuard::detach(g), "x");
    assert_eq!(pool.stats().in_use, 0);
    let (a, b) = (
        pool.try_acquire_owned().unwrap(),
        pool.try_acquire_owned().unwrap(),
    );
    assert!(pool.try_acquire_owned().is_err());
    assert_eq!(pool.stats().failed_acquires, 1);
    drop((a, b));
}

#[test]
fn guards_debug_as_their_value_and_the_pool_needs_no_t_debug() {
    struct Opaque;
    let pool = Pool::new(2, || Opaque);
    let _g = pool.try_acquire().unwrap();
    let s = format!("{pool:?}");
    assert!(s.contains("capacity: 2") && s.contains("in_use: 1"), "{s}");
    assert!(format!("{:?}", Pool::builder(|| Opaque).capacity(4)).contains("capacity: 4"));

    let pool = Arc::new(Pool::new(2, || vec![1u8, 2]));
    let borrowed = pool.try_acquire().unwrap();
    let owned = pool.try_acquire_owned().unwrap();
    assert_eq!(format!("{borrowed:?}"), "[1, 2]");
    assert_eq!(format!("{owned:#?}"), format!("{:#?}", vec![1u8, 2]));
    assert_eq!(format!("{:?}", (borrowed, owned)), "([1, 2], [1, 2])");
}

#[test]
fn guards_forward_as_ref_and_as_mut_to_the_value() {
    fn bytes_of(value: &impl AsRef<[u8]>) -> &[u8] {
        value.as_ref()
    }
    let pool = Arc::new(Pool::new(2, || String::from("abc")));
    let mut borrowed = pool.try_acquire().unwrap();
    let owned = pool.try_acquire_owned().unwrap();
    assert_eq!(bytes_of(&borrowed), b"abc");
    assert_eq!(bytes_of(&owned), b"abc");
    assert_eq!(AsRef::<str>::as_ref(&owned), "abc");
    assert_eq!(
        AsRef::<std::path::Path>::as_ref(&borrowed),
        std::path::Path::new("abc")
    );
    AsMut::<str>::as_mut(&mut borrowed).make_ascii_uppercase();
    assert_eq!(*borrowed, "ABC");

    let pool = Arc::new(Pool::new(1, || vec![0u8; 3]));
    let mut owned = pool.try_acquire_owned().unwrap();
    AsMut::<[u8]>::as_mut(&mut owned).copy_from_slice(b"xyz");
    assert_eq!(AsRef::<[u8]>::as_ref(&owned), b"xyz");
    assert_eq!(AsRef::<Vec<u8>>::as_ref(&owned).capacity(), 3);
}

#[test]
fn into_iter_is_a_named_exact_fused_iterator() {
    fn named(_: &tagpool::IntoIter<u32>) {}
    fn fused(_: &impl std::iter::FusedIterator) {}
    let pool = Pool::builder(|| 0u32)
        .capacity(5)
        .lazy()
        .values(vec![1, 2, 3])
        .build()
        .unwrap();
    let mut values = pool.into_iter();
    named(&values);
    fused(&values);
    assert_eq!((values.len(), values.size_hint()), (3, (3, Some(3))));
    let mut seen = vec![values.next().unwrap()];
    assert_eq!((values.len(), values.size_hint()), (2, (2, Some(2))));
    assert_eq!(format!("{values:?}").matches(", ").count(), 1, "{values:?}");
    seen.extend(values.by_ref());
    seen.sort_unstable();
    assert_eq!(seen, [1, 2, 3]);
    assert_eq!(
        (values.len(), values.next(), values.next()),
        (0, None, None)
    );
    assert_eq!(format!("{values:?}"), "IntoIter([])");
}

#[test]
fn values_not_yielded_are_dropped_with_the_iterator() {
    let tally = Arc::new(Tally::default());
    let held = Arc::new(Pool::new(4, counting_factory(&tally)));
    let owned = held.try_acquire_owned().unwrap();
    let pool = Arc::try_unwrap(held).unwrap();
    let mut values = pool.into_iter();
    assert_eq!(values.len(), 3, "the held value is not yielded");
    drop(values.next());
    assert_eq!(tally.dropped(), 1);
    drop(values);
    assert_eq!(tally.dropped(), 3);
    drop(owned);
    assert_eq!((tally.made(), tally.dropped()), (4, 4));
}

#[test]
fn guards_deref_mut_to_the_value() {
    let pool = Pool::new(1, || [0u64; 8]);
    let mut g = pool.try_acquire().unwrap();
    g[3] = 9;
    g.iter_mut().for_each(|x| *x += 1);
    assert_eq!(g.iter().sum::<u64>(), 9 + 8);
}

#[test]
fn send_and_sync_bounds_hold() {
    fn send_sync<X: Send + Sync>() {}
    fn send<X: Send>() {}
    send_sync::<Pool<std::cell::Cell<u8>>>(); // T: Send is enough
    send::<PoolGuard<'static, std::cell::Cell<u8>>>();
    send::<OwnedPoolGuard<std::cell::Cell<u8>>>();
    send_sync::<PoolGuard<'static, Vec<u8>>>();
    send_sync::<OwnedPoolGuard<Vec<u8>>>();
    // `Sync + !Send` payloads: a shared borrowed guard is fine (it exposes
    // only `&T`); the owned guard's `Sync` needs `T: Send` (see its docs).
    fn sync<X: Sync>() {}
    sync::<PoolGuard<'static, std::sync::MutexGuard<'static, ()>>>();
    // A handle pool's `&mut` iterators move to other threads as a slice's
    // `IterMut` does (`par_bridge`, a scoped thread), also when the pool
    // grows in segments.
    send::<tagpool::IterMut<'static, Vec<u8>>>();
    send::<tagpool::Values<'static, Vec<u8>>>();
    send::<tagpool::ValuesMut<'static, Vec<u8>>>();
    send::<tagpool::Keys<'static, Vec<u8>>>();
    send_sync::<tagpool::Drain<'static, Vec<u8>>>();
    send::<tagpool::IterMut<'static, std::cell::Cell<u8>>>();
}

#[test]
fn unwind_safety_bounds_hold() {
    use std::cell::Cell;
    use std::panic::{RefUnwindSafe, UnwindSafe};
    use tagpool::{HandlePool, IndexGuard, IndexPool, OwnedIndexGuard, Ref};
    fn both<X: UnwindSafe + RefUnwindSafe>() {}
    fn unwind_safe<X: UnwindSafe>() {}
    both::<Pool<Vec<u8>>>();
    both::<Pool<Cell<u8>>>(); // values are never shared: `T: UnwindSafe` is enough
                              // The crate docs' `compile_fail` pool of `Box<dyn FnMut() + Send>`
                              // fails for want of exactly this bound:
    both::<Pool<Box<dyn FnMut() + Send + UnwindSafe>>>();
    both::<Arc<Pool<Vec<u8>>>>();
    both::<PoolGuard<'static, Vec<u8>>>();
    both::<OwnedPoolGuard<Vec<u8>>>();
    unwind_safe::<PoolGuard<'static, Cell<u8>>>();
    unwind_safe::<OwnedPoolGuard<Cell<u8>>>();
    both::<IndexPool>();
    both::<IndexGuard<'static>>();
    both::<OwnedIndexGuard>();
    both::<HandlePool<std::sync::atomic::AtomicU32>>();
    both::<Ref<'static, Vec<u8>>>();
    both::<tagpool::HandleIter<'static, Vec<u8>>>();
    unwind_safe::<HandlePool<Cell<u8>>>();
    both::<tagpool::IntoIter<Vec<u8>>>();
}

#[test]
fn a_pool_shared_with_code_that_panicked_needs_no_assert_unwind_safe() {
    let pool = Pool::builder(|| vec![0u8; 4])
        .capacity(2)
        .reset(|buf: &mut Vec<u8>| buf.fill(0))
        .build()
        .unwrap();
    let caught = panic::catch_unwind(|| {
        let mut buf = pool.try_acquire().unwrap();
        buf[0] = 1;
        if buf[0] == 1 {
            panic!("half way through");
        }
    });
    assert!(caught.is_err());
    let stats = pool.stats();
    assert_eq!((stats.in_use, stats.available, stats.filled), (0, 2, 1));
    assert!(pool
        .try_acquire()
        .into_iter()
        .chain(pool.try_acquire())
        .all(|buf| *buf == [0; 4]));

    let handles = tagpool::HandlePool::new(1);
    let h = handles
        .insert(std::sync::atomic::AtomicU32::new(1))
        .unwrap();
    let caught = panic::catch_unwind(|| {
        let value = handles.get(h).unwrap();
        value.store(2, Ordering::SeqCst);
        panic!("while reading");
    });
    assert!(caught.is_err());
    assert_eq!(handles.with(h, |v| v.load(Ordering::SeqCst)), Some(2));
    assert!(handles.remove(h));
    assert!(
        handles.insert(std::sync::atomic::AtomicU32::new(3)).is_ok(),
        "the unwound `Ref` counted itself out, so the remove freed the entry"
    );

    let indices = Arc::new(tagpool::IndexPool::new(1));
    let index = indices.try_acquire_owned().unwrap();
    assert!(panic::catch_unwind(move || {
        let _index = index;
        panic!("holding an index");
    })
    .is_err());
    assert_eq!(indices.stats().in_use, 0);
}

/// Two words: Rust moves such a value as a register pair, so a guard pushed
/// into a collection is never copied through the stack (see `slot::Held`).
#[test]
fn guards_are_two_words() {
    use std::mem::size_of;
    let word = size_of::<usize>();
    assert_eq!(size_of::<PoolGuard<'static, [u64; 8]>>(), 2 * word);
    assert_eq!(size_of::<OwnedPoolGuard<[u64; 8]>>(), 2 * word);
    assert_eq!(size_of::<PoolGuard<'static, ()>>(), 2 * word);
    assert_eq!(
        size_of::<Option<PoolGuard<'static, [u64; 8]>>>(),
        2 * word,
        "a niche is kept"
    );
}

#[test]
fn a_guard_index_is_its_slot_for_every_payload_size() {
    fn check<T: Default + Send + 'static>() {
        let pool = Pool::builder(T::default)
            .capacity(5)
            .thread_cache(false)
            .build()
            .unwrap();
        let guards: Vec<_> = (0..5).map(|_| pool.try_acquire().unwrap()).collect();
        let mut seen: Vec<usize> = guards.iter().map(PoolGuard::index).collect();
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2, 3, 4]);
        drop(guards);
        let pool = Arc::new(pool);
        let owned: Vec<_> = (0..5).map(|_| pool.try_acquire_owned().unwrap()).collect();
        let mut seen: Vec<usize> = owned.iter().map(OwnedPoolGuard::index).collect();
        seen.sort_unstable();
        assert_eq!(seen, [0, 1, 2, 3, 4]);
    }
    check::<()>();
    check::<u8>();
    check::<[u8; 3]>();
    check::<u64>();
    check::<[u64; 8]>();
    check::<Vec<u8>>();
    check::<String>();
}

#[test]
fn a_guard_dropped_while_unwinding_skips_the_reset_and_drops_the_value() {
    let resets = Arc::new(AtomicUsize::new(0));
    let drops = Arc::new(AtomicUsize::new(0));
    struct Tracked(Arc<AtomicUsize>, u32);
    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let pool = {
        let (resets, drops) = (Arc::clone(&resets), Arc::clone(&drops));
        Pool::builder(move || Tracked(Arc::clone(&drops), 1))
            .capacity(1)
            .reset(move |v: &mut Tracked| {
                resets.fetch_add(1, Ordering::SeqCst);
                // Would abort the process if it ran during the unwind.
                assert!(v.1 != 7, "reset failure");
            })
            .build()
            .unwrap()
    };
    let result = quietly(|| {
        let mut guard = pool.try_acquire().unwrap();
        guard.1 = 7; // half updated when the holder fails
        panic!("the holder fails");
    });
    let payload = result.expect_err("the holder's panic propagates");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"the holder fails"));
    assert_eq!(
        resets.load(Ordering::SeqCst),
        0,
        "no reset during the unwind"
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the value was dropped");
    assert_eq!(pool.stats().available, 1, "the slot came back");
    let refilled = pool.try_acquire().unwrap();
    assert_eq!(refilled.1, 1, "refilled by the factory");
    drop(refilled);
    assert_eq!(resets.load(Ordering::SeqCst), 1, "a normal release resets");
}

/// A value that holds owned guards of its own pool, as a tree of pooled
/// nodes does, and reports its drops.
struct Node {
    children: Vec<OwnedPoolGuard<Node>>,
    /// The reset closure panics on a node with this set.
    poisoned: bool,
    /// The node's own `Drop` panics with this set.
    panics_on_drop: bool,
    drops: Arc<AtomicUsize>,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
        if self.panics_on_drop {
            panic!("node drop failure");
        }
    }
}

fn node_pool(drops: &Arc<AtomicUsize>, capacity: usize, caches: bool) -> Arc<Pool<Node>> {
    let drops = Arc::clone(drops);
    Arc::new(
        Pool::builder(move || Node {
            children: Vec::new(),
            poisoned: false,
            panics_on_drop: false,
            drops: Arc::clone(&drops),
        })
        .capacity(capacity)
        .thread_cache_size(if caches { 4 } else { 0 })
        .reset(|n: &mut Node| {
            assert!(!n.poisoned, "reset failure");
            n.children.clear();
        })
        .build()
        .unwrap(),
    )
}

/// The case a review found: a reset panics in an owned guard's drop, after
/// the pool's handle is gone, and the half-reset value owns guards of the
/// same pool. The value is dropped before the slot goes back (its children
/// release their slots then), the panic propagates, and the pool is freed
/// once, by the last release, with every value dropped exactly once. Under
/// miri, a free before the parent's release ended would be reported.
#[test]
fn reset_panic_in_an_owned_guard_whose_value_holds_guards_of_the_same_pool() {
    for caches in [true, false] {
        let drops = Arc::new(AtomicUsize::new(0));
        let pool = node_pool(&drops, 8, caches);
        let mut parent = pool.try_acquire_owned().unwrap();
        for _ in 0..3 {
            let child = pool.try_acquire_owned().unwrap();
            parent.children.push(child);
        }
        parent.poisoned = true;
        drop(pool);
        assert_eq!(drops.load(Ordering::SeqCst), 0, "the guards keep the pool");
        let payload = quietly(move || drop(parent)).expect_err("the reset's panic propagates");
        assert_eq!(payload.downcast_ref::<&str>(), Some(&"reset failure"));
        assert_eq!(
            drops.load(Ordering::SeqCst),
            8,
            "the half-reset parent and the 7 pooled values, each once"
        );
    }
}

/// A value whose own `Drop` panics while the reset's panic is being handled:
/// the second panic is swallowed (two at once would abort), the reset's goes
/// on, and the slot and the guard's count still come back.
#[test]
fn reset_panic_then_a_panicking_value_drop_still_returns_the_slot() {
    let drops = Arc::new(AtomicUsize::new(0));
    let pool = node_pool(&drops, 2, true);
    let mut g = pool.try_acquire_owned().unwrap();
    g.poisoned = true;
    g.panics_on_drop = true;
    let payload = quietly(move || drop(g)).expect_err("the reset's panic propagates");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"reset failure"));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    assert_eq!(pool.stats().available, 2, "the slot came back, empty");
    let served = pool.try_acquire_owned().unwrap();
    assert!(
        !served.poisoned,
        "the other value, idle, served before the factory runs"
    );
    drop(served);
    assert_eq!(pool.stats().filled, 1, "the factory never ran");
    drop(pool);
    assert_eq!(
        drops.load(Ordering::SeqCst),
        2,
        "the pooled value and the failed one"
    );
}
