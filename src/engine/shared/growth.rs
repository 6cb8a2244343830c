//! Growing an elastic pool by its next segment: one thread allocates and
//! publishes it, the others wait for it (see `segment.rs`).

use super::Shared;
use crate::engine::free_list::FreeList;
use crate::engine::segment::Claim;

/// The growth claim of segment `k`, held while the segment is allocated:
/// dropped only if the allocation unwinds (the grower forgets it once the
/// allocations are done), and then gives the growth back, so that the
/// threads waiting in `wait_for_growth` go on and a later one may try again.
struct GrowthClaim<'a> {
    free: &'a FreeList,
    k: u32,
}

impl Drop for GrowthClaim<'_> {
    fn drop(&mut self) {
        self.free.abandon_growth(self.k);
    }
}

/// A growth refused before its claim: segment `k` would not fit an `isize`.
#[cold]
#[inline(never)]
fn too_large(k: u32, capacity: u32) -> ! {
    panic!(
        "tagpool: cannot grow the pool to its capacity of {capacity} slots: \
         segment {k} is larger than `isize::MAX` bytes on this target"
    )
}

impl<T> Shared<T> {
    /// Grows the pool by its next segment, for a thread that found no free
    /// slot, and takes the segment's first slot; `None` when the pool has
    /// all its segments or is closed.
    ///
    /// One thread grows each segment: the one whose claim succeeds (see
    /// `segment.rs`). It allocates the segment's links and cells (empty:
    /// the factory fills them on their first acquire, outside any retry
    /// loop), publishes both, pushes all but the first slot to the free
    /// list as one chain and keeps the first. A thread that finds another
    /// one growing waits for it to finish, then takes from the free list, or
    /// grows the next segment if the first growth's slots are all taken
    /// already.
    ///
    /// A growth never leaves the claim set: a segment whose size in bytes
    /// overflows an `isize` (32-bit targets only) is refused before the
    /// claim, and an allocation that unwinds (under `-Z oom=panic`, or the
    /// tests' injected fault) drops a [`GrowthClaim`] that gives the claim
    /// back, before anything of the segment was published.
    ///
    /// # Panics
    ///
    /// If the next segment cannot be laid out on this target; every later
    /// growth panics the same way, and the pool keeps working at its
    /// current size for the threads that do not need to grow it.
    #[cold]
    #[inline(never)]
    pub(super) fn grow(&self) -> Option<u32> {
        loop {
            if self.free.is_closed() {
                return None;
            }
            match self.free.claim_growth(|k| self.slots.fits(k)) {
                Claim::Full => return None,
                Claim::TooLarge(k) => too_large(k, self.free.capacity()),
                Claim::Busy => {
                    self.free.wait_for_growth();
                    if let Some(index) = self.pop_free() {
                        return Some(index);
                    }
                }
                Claim::Grow(k) => {
                    let claim = GrowthClaim {
                        free: &self.free,
                        k,
                    };
                    // No room under the bound (see `capacity.rs`): as
                    // full. Checked with the claim held, not before it: a
                    // growth under way takes the room before it pushes its
                    // slots, and a thread that finds it busy waits for
                    // them (`Claim::Busy` above).
                    if self.free.credit() <= 0 {
                        return None;
                    }
                    // The steps that may unwind (allocations): the claim's
                    // drop gives the growth back.
                    let links = self.free.prepare_growth(k);
                    let cells = self.slots.prepare_growth(k);
                    // From here nothing unwinds: publish, push, end the
                    // growth.
                    core::mem::forget(claim);
                    let new = self.free.publish_links(k, links);
                    self.slots.publish(cells);
                    // The slots beyond the bound's room leave service at
                    // once (see `capacity.rs`): the last ones.
                    let serving = self.free.take_room(new.len() as u32);
                    let end = new.start + serving;
                    for index in end..new.end {
                        self.free.withdraw_new(index);
                    }
                    let mine = new.start;
                    if serving > 1 {
                        self.waiters
                            .release_linked(&self.free, mine + 1, end - 1, end - mine - 1);
                        // An acquire: a waker's panic is dropped (see
                        // `unwind.rs`).
                        crate::engine::unwind::drop_caught();
                    }
                    self.free.grown(k);
                    if serving == 0 {
                        // The room went to a lowering meanwhile.
                        continue;
                    }
                    return Some(mine);
                }
            }
        }
    }
}
