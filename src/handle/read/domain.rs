//! The grace-period domain of one [`HandlePool`](crate::HandlePool): who
//! reads now, and since when.
//!
//! # Readers
//!
//! Each thread that opens a read section on the pool owns one [`Reader`]
//! (in a [`PerThread`], found through the thread's memo as a cache's
//! magazine is). Its `word` is 0 outside any section; inside, the pool's
//! `epoch` as the outermost section read it on entry. Entering is a load
//! of `epoch` (a line that changes only when a grace period starts), a
//! plain store of it to `word` and the light half of the asymmetric
//! barrier ([`barrier::light_fast`]: a compiler fence once the process uses
//! `membarrier`); leaving is a Release store of 0. Nested sections only
//! count in `depth`, which only the owner reads and writes. Nothing a
//! reader writes is shared with another thread's reads of its own state:
//! no read-modify-write, no line that another reader writes.
//!
//! # Tags
//!
//! A removal (whose occupancy-ending read-modify-write is `SeqCst`) reads
//! the epoch after it (`SeqCst`) and tags its entry with that epoch plus
//! one ([`Domain::tag`]). A section whose outermost entry read an epoch at
//! or above the tag began after the removal and cannot see the value: it
//! read a bump `I` of the epoch that comes after the remover's load in the
//! epoch's modification order, so in the single total order `S` of
//! `SeqCst` operations the removal comes before the remover's load, which
//! comes before `I`, which comes before the reader's `SeqCst` load of the
//! epoch and the fence after it (the light barrier), so the reader's loads
//! of entry words after that fence see the removal.
//!
//! # Grace periods
//!
//! A thread that frees entries ([`HandlePool::reclaim`](crate::HandlePool::reclaim))
//! first bumps `epoch` ([`Domain::begin_grace`]: later sections announce
//! the new value), runs the heavy half of the barrier ([`barrier::heavy`]),
//! then reads every reader's `word` ([`Domain::oldest_reader`]). An entry
//! is free of readers once every word reads 0 or at least its tag:
//!
//! - A reader that could still see the removed value as live loaded its
//!   entry's word before the removal. Its own store of `word` came before
//!   that load, with the light barrier between them; the removal came
//!   before the grace period (the entry was handed to it through the
//!   limbo's Release push and Acquire take), so before its heavy barrier.
//!   The two halves are a Dekker pair: the scan after the heavy barrier
//!   sees the reader's store (or a later one of the same reader).
//! - That reader's word is below the tag (see "Tags"), for as long as that
//!   section lasts.
//!
//! So a reader whose word reads 0 or at least the tag has left every
//! section that could see the value (its Release store of 0, or of a later
//! epoch, carries its reads before the scan's Acquire load), and the
//! oldest open section's epoch bounds what may be freed.
//!
//! A later grace period may decide about entries that an earlier one kept:
//! the earlier scan happened before it (the kept entries went back to the
//! limbo with a Release and came out with an Acquire), so the later scan
//! reads every reader's word as recent as the earlier one did, or more.
//!
//! What the tags cannot tell apart: a section that began after a removal
//! but before the next bump of the epoch announces the same epoch as one
//! that began just before the removal, so it holds the entry too (until it
//! ends). Telling them apart would take a write that every reader sees per
//! removal, or a shared write per read.
//!
//! # The first section
//!
//! A pool that has never had a section frees removed values at once, as
//! before sections existed: removals check `used` after the read-modify-
//! write that ends the occupancy. Both sides are `SeqCst` (the removal's
//! RMW and its load of `used`; the first section's store of `used` and a
//! `SeqCst` fence after it, which every thread runs before its first
//! section on the pool), so either the removal sees `used` and defers, or
//! the section's loads see the removal.
//!
//! # Readers without a record
//!
//! A thread that has lost its thread-local registration (a section opened
//! by a thread-local's destructor, late in thread exit) has no `Reader`. It
//! counts itself in `unregistered` instead (a read-modify-write and a
//! fence: that path is rare), and while that count is not 0 no grace
//! period frees anything.

use crossbeam_utils::CachePadded;

use super::bag::Bag;
use crate::engine::barrier;
use crate::sync::PerThread;
use crate::sync::{fence, thread_token, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

/// The epoch a domain starts at: a reader's word is never 0 inside a
/// section.
const FIRST_EPOCH: u64 = 1;

/// One thread's record in a [`Domain`].
#[derive(Debug)]
pub(crate) struct Reader {
    /// 0 outside any section; else the epoch read on entering the
    /// outermost one. Written by the owner only (plain stores).
    word: AtomicU64,
    /// How many sections the owner has open. Read and written by the
    /// owner only (an atomic so that the record is `Sync`; never an RMW).
    depth: AtomicU32,
    /// The [`thread_token`] of the thread that last used the record:
    /// another thread's token means this thread took over the record of
    /// an exited one (see [`Domain::enter_slow`]).
    owner: AtomicU64,
    /// The entries this thread removed that wait for a grace period
    /// (`bag.rs`). Kept when another thread takes the record over: they
    /// are the pool's.
    pub(crate) bag: Bag,
}

impl Reader {
    fn new() -> CachePadded<Self> {
        CachePadded::new(Self {
            word: AtomicU64::new(0),
            depth: AtomicU32::new(0),
            owner: AtomicU64::new(0),
            bag: Bag::new(),
        })
    }
}

/// Which record an open section counted itself in.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Entered<'a> {
    /// This thread's record.
    Record(&'a Reader),
    /// The domain's count of readers without one.
    Unregistered,
}

/// See the module docs.
pub(crate) struct Domain {
    /// A section was ever opened on the pool: removals defer from then on.
    used: AtomicBool,
    /// The barrier mode, fixed at build: whether the light half may be a
    /// compiler fence (the memo, and so the fast path, is on only then).
    light: bool,
    /// Bumped by every grace period; never 0.
    epoch: CachePadded<AtomicU64>,
    /// Readers without a record (see the module docs).
    unregistered: AtomicUsize,
    /// The records, found through the thread's second memo (the first is
    /// the caches'), so that a thread that alternates between the pool's
    /// inserts and its sections or removals finds both fast.
    readers: PerThread<CachePadded<Reader>, 1>,
}

impl Domain {
    pub(crate) fn new() -> Self {
        barrier::init();
        let light = barrier::is_light();
        Self {
            used: AtomicBool::new(false),
            light,
            epoch: CachePadded::new(AtomicU64::new(FIRST_EPOCH)),
            unregistered: AtomicUsize::new(0),
            // Memoized only where the fast path's light barrier is a
            // compiler fence (as the caches' magazines); under loom the
            // fast path runs for every record, with real fences.
            readers: PerThread::new(Reader::new, light || cfg!(all(loom, feature = "loom"))),
        }
    }

    /// Whether a section was ever opened: a removal that ended an
    /// occupancy by a `SeqCst` read-modify-write calls this next, and
    /// defers the value's drop and the entry's reuse if it says so.
    #[inline]
    pub(crate) fn used(&self) -> bool {
        // Loom-only fault injection: a removal that never defers, as if
        // no section had ever been opened. The models of a section racing
        // a remove must see the value dropped or replaced under the reader.
        if cfg!(all(loom, tagpool_loom_section_never_defers)) {
            return false;
        }
        // Loom checks `SeqCst` loads and read-modify-writes as if they were
        // `AcqRel` (its documented incompleteness), which is weaker than
        // the argument in the module docs needs; a `SeqCst` fence between
        // the removal's RMW and this load (and the tag's load after it)
        // gives loom the same order through fences, which it models. On
        // hardware the RMW already is a full barrier.
        #[cfg(all(loom, feature = "loom"))]
        fence(Ordering::SeqCst);
        // SeqCst: pairs with the first section's SeqCst store and fence
        // (see the module docs, "The first section").
        self.used.load(Ordering::SeqCst)
    }

    /// [`used`](Self::used) as a hint, for paths that only look for work
    /// (an insert that found no free entry): no fence, no `SeqCst`.
    #[inline]
    pub(crate) fn used_hint(&self) -> bool {
        // Relaxed: a hint; a pool whose first section races this insert
        // has nothing in its limbo yet.
        self.used.load(Ordering::Relaxed)
    }

    /// Opens a section on this thread: the fast path for a thread whose
    /// memo holds its record.
    #[inline]
    pub(crate) fn enter(&self) -> Entered<'_> {
        match self.readers.remembered() {
            Some(reader) => {
                // Memoized only in the light mode (or under loom, where
                // `light_fast` is a real fence).
                self.enter_record(reader, |_| barrier::light_fast());
                Entered::Record(reader)
            }
            None => self.enter_slow(),
        }
    }

    /// [`enter`](Self::enter) for a thread whose memo holds another
    /// record: finds (or makes, or takes over) this thread's.
    #[cold]
    #[inline(never)]
    fn enter_slow(&self) -> Entered<'_> {
        let reader = match self.own_record() {
            Some(reader) => reader,
            None => return self.enter_unregistered(),
        };
        let light = self.light;
        self.enter_record(reader, |_| barrier::light_with(light));
        Entered::Record(reader)
    }

    /// This thread's record, for its bag (`None` late in thread exit),
    /// and the light barrier to use with it.
    #[inline]
    pub(crate) fn record(&self) -> Option<(&Reader, bool)> {
        match self.readers.remembered() {
            // Memoized only in the light mode (or under loom).
            Some(reader) => Some((reader, true)),
            None => self.own_record().map(|reader| (reader, false)),
        }
    }

    /// The light barrier for a record from [`record`](Self::record):
    /// `memoized` says it came from the memo.
    #[inline(always)]
    pub(crate) fn light(&self, memoized: bool) {
        if memoized {
            barrier::light_fast();
        } else {
            barrier::light_with(self.light);
        }
    }

    /// Every record, of live and exited threads.
    pub(crate) fn records(&self) -> impl Iterator<Item = &Reader> {
        self.readers.iter().map(|reader| &**reader)
    }

    /// This thread's record, made or taken over now if need be (and
    /// remembered in the thread's memo); `None` late in thread exit.
    fn own_record(&self) -> Option<&Reader> {
        // The token first: no lookup (which sets the memo) without one.
        let token = thread_token();
        if token == 0 {
            return None;
        }
        let (reader, _) = self.readers.get_or_make()?;
        // Relaxed: the owner's own field, or an exited thread's (see below).
        if reader.owner.load(Ordering::Relaxed) != token {
            // This thread's first use of the record: new, or an exited
            // thread's. That thread may still have a section open in it: a
            // section kept in a thread-local whose destructor runs after
            // the thread's id was freed, or a forgotten one. Either way the
            // record stays its: this thread reads without one (the
            // unregistered path), for as long as the section lasts (for
            // good, for a forgotten one). Acquire: pairs with the Release
            // store of the depth at the end of such a section, after its
            // store of the word, which this thread's stores then follow.
            if reader.depth.load(Ordering::Acquire) != 0 {
                // The memo must not keep a record this thread does not own.
                self.readers.forget_memo();
                return None;
            }
            reader.owner.store(token, Ordering::Relaxed);
            self.first_section();
        }
        Some(reader)
    }

    /// What every thread runs before its first section on the pool (see
    /// the module docs, "The first section").
    fn first_section(&self) {
        // Relaxed: a hint; the store below is the protocol step.
        if !self.used.load(Ordering::Relaxed) {
            // SeqCst: pairs with the removals' SeqCst load in `used`.
            self.used.store(true, Ordering::SeqCst);
        }
        // SeqCst fence: after `used` is true for this thread, before any
        // of its sections' loads (see the module docs).
        fence(Ordering::SeqCst);
    }

    /// Counts a section of a thread without a record.
    #[cold]
    fn enter_unregistered(&self) -> Entered<'_> {
        self.first_section();
        // SeqCst RMW and fence: the reader's half of the Dekker pair with
        // the grace period's heavy barrier and load of the count.
        self.unregistered.fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        Entered::Unregistered
    }

    /// Counts a section in `reader`, this thread's record: stores the epoch
    /// if it is the outermost, then runs `light` (the light barrier, given
    /// the barrier mode's `light` flag).
    #[inline(always)]
    fn enter_record(&self, reader: &Reader, light: impl FnOnce(bool)) {
        // Relaxed: the owner's own field.
        let depth = reader.depth.load(Ordering::Relaxed);
        if depth == 0 {
            // SeqCst (a plain load on x86, `ldar` on Arm): a reader that
            // reads an epoch above a removal's tag sees that removal (see
            // the module docs, "Tags").
            let epoch = self.epoch.load(Ordering::SeqCst);
            // Loom-only fault injection: a section that announces itself
            // with the epoch after the current one, as if it had begun
            // after the next grace period started: that grace period frees
            // what this reader may still see.
            #[cfg(all(loom, tagpool_loom_section_epoch_ahead))]
            let epoch = epoch + 1;
            // Release: a grace period's scan that reads this epoch (at or
            // above a tag) concludes that this thread's earlier section has
            // ended, so that section's reads must happen before what the
            // scan frees (a later plain store would not carry the earlier
            // Release store of 0). Ordered before the section's loads by the
            // light barrier below, and seen by a grace period's scan after
            // its heavy barrier (the Dekker pair of the module docs).
            reader.word.store(epoch, Ordering::Release);
            // Loom-only fault injection: a section with no barrier between
            // its announcement and its loads.
            if !cfg!(all(loom, tagpool_loom_section_no_barrier)) {
                light(self.light);
            }
        } else {
            assert!(depth < u32::MAX, "tagpool: too many nested read sections");
        }
        // Relaxed: the owner's own field.
        reader.depth.store(depth + 1, Ordering::Relaxed);
    }

    /// Ends a section opened by [`enter`](Self::enter) on this thread.
    #[inline]
    pub(crate) fn exit(&self, entered: Entered<'_>) {
        match entered {
            Entered::Record(reader) => {
                // Relaxed: the owner's own field.
                let depth = reader.depth.load(Ordering::Relaxed) - 1;
                // Loom-only fault injection: the end of any section, nested
                // or not, ends the thread's announcement.
                #[cfg(all(loom, tagpool_loom_section_exit_clears))]
                let depth = 0;
                if depth == 0 {
                    // Release: this thread's reads in the section happen
                    // before a grace period's Acquire scan that reads 0.
                    reader.word.store(0, Ordering::Release);
                }
                // Release, after the word: a thread that takes the record
                // over once it reads 0 here (see `own_record`) writes after
                // this section's last store.
                reader.depth.store(depth, Ordering::Release);
            }
            Entered::Unregistered => {
                // Release: as above, for the count.
                self.unregistered.fetch_sub(1, Ordering::Release);
            }
        }
    }

    /// Whether this thread has a section open on the pool (a `take` must
    /// not wait for its own).
    pub(crate) fn open_here(&self) -> bool {
        match self.own_record() {
            // Relaxed: the owner's own field.
            Some(reader) => reader.depth.load(Ordering::Relaxed) != 0,
            // Without a record a thread may hold an unregistered section:
            // say so whenever any is open.
            // Relaxed: a conservative answer either way.
            None => self.unregistered.load(Ordering::Relaxed) != 0,
        }
    }

    /// The tag of a removal whose occupancy-ending `SeqCst` read-modify-
    /// write (or a `SeqCst` fence after it) this thread just ran: a section
    /// that announces an epoch at or above it began after the removal (see
    /// the module docs, "Tags").
    #[inline]
    pub(crate) fn tag(&self) -> u64 {
        // SeqCst: see "Tags" in the module docs.
        self.epoch.load(Ordering::SeqCst) + 1
    }

    /// Moves the epoch on without a grace period: sections that open from
    /// now on announce an epoch above the tags of every removal before
    /// (see "Tags"), so a grace period can tell them from the sections that
    /// may see those removals. A thread whose bag fills calls it (once per
    /// [`BAG`](super::bag::BAG) removals): without it, a long run of
    /// removals between two grace periods would be held by every section
    /// that began during it.
    #[inline]
    pub(crate) fn advance(&self) {
        // SeqCst: see "Tags" in the module docs.
        self.epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// Starts a grace period: bumps the epoch and runs the heavy barrier.
    /// Returns the new epoch `X`: every removal that happened before this
    /// call is free of readers once [`oldest_reader`](Self::oldest_reader)
    /// reads at least `X`.
    pub(crate) fn begin_grace(&self, before_barrier: impl FnOnce(u64)) -> u64 {
        // SeqCst: see "Tags" in the module docs.
        let epoch = self.epoch.fetch_add(1, Ordering::SeqCst) + 1;
        // The grace period's claims of the threads' bags (`bag.rs`), which
        // the barrier orders before its look at their owners.
        before_barrier(epoch);
        barrier::heavy();
        epoch
    }

    /// The epoch of the oldest open section (`u64::MAX` if none, 0 while
    /// a reader without a record is open). Exact for what a grace period
    /// frees when read after a [`begin_grace`](Self::begin_grace) on this
    /// thread; a hint otherwise (`take` and eviction look before they
    /// remove: a section that opens meanwhile is caught by the grace period
    /// after).
    pub(crate) fn oldest_reader(&self) -> u64 {
        // Acquire: pairs with the Release decrement of a reader without a
        // record.
        if self.unregistered.load(Ordering::Acquire) != 0 {
            return 0;
        }
        self.readers
            .iter()
            // Acquire: pairs with the readers' Release store of 0 at the
            // end of a section (their reads happen before what the caller
            // frees).
            .map(|reader| reader.word.load(Ordering::Acquire))
            .filter(|&word| word != 0)
            .min()
            .unwrap_or(u64::MAX)
    }
}

impl core::fmt::Debug for Domain {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Domain")
            // Relaxed: a snapshot for display.
            .field("used", &self.used.load(Ordering::Relaxed))
            .field("epoch", &self.epoch.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}
