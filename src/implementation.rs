//! How tagpool is built: its layers, its source files, and the protocols
//! that keep it exact. Documentation only: nothing here is code.
//!
//! This is the map; every protocol's full argument (its invariants, the
//! orderings and why each is enough, what was measured to choose it) lives
//! in the module docs of the file named, beside the code it is about, and
//! every one has a loom model in `loom-tests/` together with planted faults
//! that `loom-tests/run.sh` shows the model catches.
//!
//! # One engine, three faces
//!
//! ```text
//! src/lib.rs              crate docs, re-exports; this module
//! src/pool/               Pool<T, E>: builder, guards, futures, scopes, IntoIter
//! src/index/              IndexPool: indices for the caller's own arrays
//! src/handle/             HandlePool<T>: generational handles, eviction
//! src/buffer/             BufferPool<T>: power-of-two classes, each a Pool<Vec<T>>
//! src/secondary/          SecondaryMap, SparseSecondaryMap: values keyed by handles
//! src/engine/             the engine, used by every face, using none of them
//!   segment.rs, slot.rs     storage in segments that never move; value cells
//!   free_list/              the tagged Treiber stack of u32 indices (ABA lives here)
//!   barrier.rs              the asymmetric barrier that revokes caches
//!   unwind.rs               a waker's panic carried past a protocol step
//!   fair.rs                 the FIFO ticket queue
//!   cache/, wait/           per-thread magazines; waiting for a slot
//!   shared/                 one pool's state, split by concern
//! src/stats.rs, error.rs  public value types
//! src/sync.rs             the loom/std shim: the only file naming atomics
//! ```
//!
//! Each layer imports only the layers below it. Inside the engine, `cache`
//! and `wait` import each other because the protocol is a circle: a cache
//! flush wakes waiters, and waiters sweep the caches. `IndexPool` is a
//! `Pool<()>` whose guards carry the index; `HandlePool` takes its entries'
//! indices from an `IndexPool` and keeps, beside each value, a generation
//! and a count of readers in one atomic word (`handle/entry.rs`); an entry
//! whose 40-bit generation is spent retires: its index never returns to
//! the free list.
//!
//! # The free list (`engine/free_list/`)
//!
//! A Treiber stack of `u32` slot indices. Its head is one `AtomicU64`: the
//! top index, the free count (up to 65,535 slots; a counter beside the word
//! above that), a waiter flag, a closed flag and an ABA tag that every
//! successful compare-exchange bumps (31 bits or more at every capacity, 41
//! at 1,024). The links are atomics in segments of their own, apart from
//! the values, so a pop's speculative read of a link is never a data race.
//! A batch (a cache's refill or flush, a scope's return) moves a chain of
//! indices in one compare-exchange.
//!
//! # Storage (`engine/segment.rs`, `engine/slot.rs`)
//!
//! Slots are numbered `0..capacity` once; segment 0 holds the first
//! `initial` (all of them unless the pool is elastic) and each later segment
//! doubles the slots, allocated by the one thread whose growth claim
//! succeeds. Nothing moves while the pool lives, so a guard is a pointer to
//! its value, and its index is the value's offset in its segment. A pool of
//! 2 to 64 slots gives each value a 128-byte block, so that threads holding
//! neighbouring values never share a cache line.
//!
//! # Per-thread caches (`engine/cache/`, `engine/barrier.rs`)
//!
//! Each thread keeps a magazine of free indices per pool (after Bonwick and
//! Adams), filled from and flushed to the free list in batches. The owner's
//! fast path is plain loads and stores and a compiler fence. A thread that
//! finds its magazine and the free list empty revokes the others'
//! magazines through an asymmetric barrier (Linux `membarrier`, `SeqCst`
//! fences elsewhere) and takes their indices, so `try_acquire` fails only
//! when every slot is held. A revoker only *claims* a magazine until it
//! commits to it by a CAS after its barrier: the owner takes a claim back
//! and another revoker takes one over, so nobody ever waits for a
//! revoker. When every magazine reads empty too (and the
//! pool cannot grow), it fails at once, on the loads the sweep would have
//! concluded from. Magazines also count the owned guards their
//! thread released, so that the last owned guard or the pool's handle,
//! whichever goes last, frees the pool without an `Arc` clone per guard.
//!
//! # Waiting (`engine/wait/`, `engine/fair.rs`)
//!
//! A blocked thread spins, then listens on an `event-listener` event; the
//! free list's waiter flag tells a release that someone listens, so a
//! release pays nothing while nobody waits. A thread that has waited
//! 100 µs queues a ticket and releases hand their slots straight to the
//! first ticket (the starvation bound); a task queues a ticket at once. A
//! fair pool queues every waiter. While anyone waits, cache owners flush
//! and releases skip the caches, and one waiter's sweep of the caches
//! covers the others. `close` sets the closed flag and wakes every waiter.
//!
//! # One pool's state (`engine/shared/`)
//!
//! `Shared` ties the above together for one pool: taking and filling a
//! slot (`take.rs`; a fill that fails gives the slot back empty, through
//! the release path, so a waiter gets it), releasing it (`release.rs`: the
//! reset, then the discard check, which may empty the slot, all before the
//! push), growing (`growth.rs`), what touches idle slots: trim, drain,
//! `retain_idle`, attach and a scope's batch return (`idle.rs`), the empty
//! slots of a pool without a factory, retired from the free list under a
//! lock until an attach refills one (`retire.rs`), the movable bound of
//! `set_capacity` (`capacity.rs`: lowering and raising; the credit, the
//! debt's protocol on the head word and the withdrawn slots are in
//! `free_list/bound.rs`), the waiting glue (`waiting.rs`) and statistics
//! (`stats.rs`). It lives in an allocation of
//! its own, freed by whichever of the handle and the last owned guard goes
//! last.
//!
//! `Shared<T>` has no error type: a fallible factory's error `E`
//! (`Pool<T, E>`, from `Pool::try_builder`) crosses the engine boxed as
//! `Box<dyn Any>`, made on the failure path only, and the face downcasts
//! it back to its `E` (out of line; it cannot fail, as the only factory
//! that returns an error is the one `try_builder` made for that `E`). The
//! engine's own errors (closed, exhausted, timed out) are the
//! `E = Infallible` forms, which the face widens to its `E`.
//!
//! # Verification
//!
//! Unit and integration tests of every public behaviour, a stress test,
//! property tests against sequential models, loom models of each protocol
//! above (with the faults they catch), miri with strict provenance,
//! ThreadSanitizer and a soak run: `.ci/run` runs them all.
