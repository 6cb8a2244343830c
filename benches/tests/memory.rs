//! What a tagpool guard and a tagpool slot cost in memory, next to the
//! peers' guards.
//!
//! Run with `cargo test -p tagpool-benches --test memory -- --nocapture` to
//! see the figures. The per-slot overhead is measured, not computed from the
//! private layout: a counting allocator records the heap a pool takes at two
//! capacities, and the difference per slot, less the payload, is the
//! overhead.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::mem::size_of;

/// The system allocator, counting the live heap bytes of each thread.
struct Counting;

thread_local! {
    /// Bytes this thread allocated and has not freed (frees of memory
    /// allocated elsewhere make it negative; only differences matter).
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

fn add_live(bytes: isize) {
    // `try_with`: allocations while the thread's locals are torn down are
    // not counted.
    let _ = LIVE.try_with(|live| live.set(live.get() + bytes));
}

fn live() -> isize {
    LIVE.with(Cell::get)
}

// SAFETY: every call is forwarded to `System` unchanged; the counting only
// touches a thread-local `Cell` that never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        add_live(layout.size() as isize);
        // SAFETY: the caller upholds `GlobalAlloc::alloc`'s contract, which is
        // `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        add_live(layout.size() as isize);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        add_live(-(layout.size() as isize));
        // SAFETY: `ptr` was allocated by `System` with `layout` (every
        // allocation goes through this type).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        add_live(new_size as isize - layout.size() as isize);
        // SAFETY: as for `dealloc`; `new_size` is the caller's valid size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

type Block = [u64; 8];
const WORD: usize = size_of::<usize>();

/// The heap bytes a pool of `capacity` values made by `factory` holds,
/// minus what the values themselves own on the heap (`value_heap` each).
fn pool_heap<T: Send + 'static>(capacity: usize, value_heap: usize, factory: fn() -> T) -> isize {
    let before = live();
    let pool = tagpool::Pool::new(capacity, factory);
    let heap = live() - before;
    drop(pool);
    heap - (capacity * value_heap) as isize
}

/// Heap bytes per slot beyond `size_of::<T>()`, from two capacities (so the
/// pool's fixed heap cancels out), and that fixed heap.
fn slot_overhead<T: Send + 'static>(value_heap: usize, factory: fn() -> T) -> (f64, isize) {
    let (small, large) = (1024, 4096);
    let a = pool_heap(small, value_heap, factory);
    let b = pool_heap(large, value_heap, factory);
    let per_slot = (b - a) as f64 / (large - small) as f64;
    let fixed = a - (per_slot * small as f64).round() as isize;
    (per_slot - size_of::<T>() as f64, fixed)
}

#[test]
fn guards_are_two_words_at_most() {
    let guard = size_of::<tagpool::PoolGuard<'static, Block>>();
    let owned = size_of::<tagpool::OwnedPoolGuard<Block>>();
    println!("size_of PoolGuard<[u64; 8]>      = {guard} bytes");
    println!("size_of OwnedPoolGuard<[u64; 8]> = {owned} bytes");
    println!(
        "size_of Pool<[u64; 8]>           = {} bytes (inline, besides its heap)",
        size_of::<tagpool::Pool<Block>>()
    );
    println!("peers' guards, for comparison (the Mutex/ArrayQueue peers move the value itself, 64 bytes):");
    println!(
        "  object_pool::Reusable<[u64; 8]>                    = {} bytes",
        size_of::<object_pool::Reusable<'static, Block>>()
    );
    println!(
        "  object_pool::ReusableOwned<[u64; 8]>               = {} bytes",
        size_of::<object_pool::ReusableOwned<Block>>()
    );
    println!(
        "  lockfree_object_pool::LinearReusable<[u64; 8]>     = {} bytes",
        size_of::<lockfree_object_pool::LinearReusable<'static, Block>>()
    );
    println!(
        "  lockfree_object_pool::LinearOwnedReusable<[u64; 8]> = {} bytes",
        size_of::<lockfree_object_pool::LinearOwnedReusable<Block>>()
    );
    println!(
        "  sharded_slab::pool::RefMut<Vec<u8>>                = {} bytes",
        size_of::<sharded_slab::pool::RefMut<'static, Vec<u8>>>()
    );
    assert!(guard <= 2 * WORD, "PoolGuard grew to {guard} bytes");
    assert!(owned <= 2 * WORD, "OwnedPoolGuard grew to {owned} bytes");
}

#[test]
fn slot_overhead_is_small() {
    let (block, block_fixed) = slot_overhead::<Block>(0, || [0; 8]);
    let (buf, buf_fixed) = slot_overhead::<Vec<u8>>(4096, || Vec::with_capacity(4096));
    println!(
        "per-slot overhead, [u64; 8]: {block} bytes beyond its 64 (fixed heap {block_fixed} bytes)"
    );
    println!(
        "per-slot overhead, Vec<u8>:  {buf} bytes beyond its {} (fixed heap {buf_fixed} bytes)",
        size_of::<Vec<u8>>()
    );
    assert!(block <= 16.0, "a [u64; 8] slot costs {block} extra bytes");
    assert!(buf <= 16.0, "a Vec<u8> slot costs {buf} extra bytes");
}
