//! Read sections: [`HandlePool::read`] opens a [`ReadSection`], through
//! which `get`, `contains` and the iterators read values while writing
//! nothing another thread reads (RCU, as liburcu's `membarrier` flavour).
//!
//! A section announces itself in this thread's record of the pool's
//! [`Domain`] (a plain store and a compiler fence), and every removal in a
//! pool that has had sections defers its value's drop and its entry's reuse
//! (to its thread's [`bag`], then the pool's [`limbo`]) until a grace period
//! shows that no section that could see the value is open. `domain.rs`
//! holds the protocol and its argument, `bag.rs` the per-thread bags,
//! `limbo.rs` the deferred entries and [`HandlePool::reclaim`].
//!
//! A section's `get` is one load and one compare: an entry's word, as
//! stored, is the bits of its live value's handle while no `Ref` counts
//! it (see `entry.rs`, `State`), so the section looks the key up by its
//! bits masked to a power of two (no bounds check) and compares the word
//! with them. Every other case takes the full lookup, inline with no
//! call, so that a caller's loop of reads stays unrollable.

use core::fmt;
use core::iter::FusedIterator;
use core::marker::PhantomData;

use super::entry::{self, Entry};
use super::{Handle, HandlePool, Key};
use crate::sync::Ordering;

mod bag;
mod domain;
mod limbo;

use self::domain::{Domain, Entered};
use self::limbo::Limbo;

/// The least batch of removals that triggers a grace period.
const MIN_BATCH: u32 = 64;
/// The most.
const MAX_BATCH: u32 = 4096;

/// A pool's read sections: its grace-period domain and its limbo.
pub(super) struct Sections {
    pub(super) domain: Domain,
    pub(super) limbo: Limbo,
    /// How many removals a grace period waits for: a quarter of the
    /// capacity, within [`MIN_BATCH`] and [`MAX_BATCH`], and never above
    /// the capacity.
    batch: u32,
    /// The limbo's length at which a remove runs a grace period: `batch`
    /// above what the last grace period left in it (entries that open
    /// sections keep), so that a long section does not make every remove
    /// run one.
    trigger: crate::sync::AtomicU32,
}

impl Sections {
    pub(super) fn new(capacity: u32) -> Self {
        let batch = (capacity / 4).clamp(MIN_BATCH, MAX_BATCH).min(capacity);
        Self {
            domain: Domain::new(),
            limbo: Limbo::new(),
            batch,
            trigger: crate::sync::AtomicU32::new(batch),
        }
    }
}

impl fmt::Debug for Sections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sections")
            .field("domain", &self.domain)
            .field("limbo", &self.limbo)
            .finish()
    }
}

/// A read section on a [`HandlePool`], from [`HandlePool::read`]: while it
/// lives, every value it reads stays in place, and reading writes nothing
/// that another thread reads.
///
/// [`get`](Self::get) returns a plain `&T`, valid as long as the section:
/// a `remove` (or an eviction, or the last `Ref` of a removed value) on any
/// thread makes the key stale at once, but the value's drop and its entry's
/// reuse wait until every section that could have seen it has ended (see
/// [`HandlePool::reclaim`]); a `take` fails while a section is open. Open one section per batch of reads (a
/// system's loop over its entities, a frame), not one per read, and do not
/// keep it open longer than that: entries removed while it is open are not
/// reused until it ends.
///
/// Sections nest (a section opened inside another one on the same thread
/// costs a counter). A section is tied to its thread (neither `Send` nor
/// `Sync`); the `&T`s it gives may go to other threads (scoped threads, for
/// `T: Sync`) for as long as the section lives. To hold a value beyond a
/// section or move it into a job, take a counted [`Ref`](super::Ref) or
/// [`OwnedRef`](super::OwnedRef) instead.
///
/// Forgetting a section (`mem::forget`) is safe: no `&T` can outlive the
/// borrow that forgetting ends. It never ends, though (not even when its
/// thread exits: a section kept in a thread-local may outlive its thread's
/// id, and the pool cannot tell the two apart): entries removed after the
/// last grace period before it began stay unused, their values undropped,
/// until the pool is dropped; `take` fails from then on, and an evicting
/// pool no longer evicts. A thread that gets the exited thread's id reads
/// through a slower path (a shared counter) on that pool.
///
/// # Examples
///
/// ```
/// let pool = tagpool::HandlePool::new(8);
/// let keys: Vec<_> = (0..4).map(|v| pool.insert(v * 10).unwrap()).collect();
/// let reader = pool.read();
/// let sum: i32 = keys.iter().filter_map(|&k| reader.get(k)).sum();
/// assert_eq!(sum, 60);
/// assert!(pool.remove(keys[0]));
/// assert!(reader.get(keys[0]).is_none(), "stale at once");
/// assert_eq!(reader.iter().count(), 3);
/// ```
///
/// # Send and Sync
///
/// A section is tied to the thread that opened it (its record of
/// the pool's readers is that thread's): neither `Send` nor `Sync`, for
/// any `T`. The `&T`s it gives are ordinary references: they cross to
/// scoped threads (for `T: Sync`) for as long as the section lives.
///
/// ```
/// let pool = tagpool::HandlePool::new(2);
/// let key = pool.insert(41u32).unwrap();
/// let reader = pool.read();
/// let value: &u32 = reader.get(key).unwrap();
/// let seen = std::thread::scope(|s| s.spawn(|| *value + 1).join().unwrap());
/// assert_eq!(seen, 42);
/// ```
///
/// ```compile_fail
/// // A section cannot move to another thread.
/// fn assert_send<T: Send>(_: &T) {}
/// let pool = tagpool::HandlePool::<u32>::new(1);
/// assert_send(&pool.read());
/// ```
///
/// ```compile_fail
/// // Nor be shared with one.
/// fn assert_sync<T: Sync>(_: &T) {}
/// let pool = tagpool::HandlePool::<u32>::new(1);
/// assert_sync(&pool.read());
/// ```
#[must_use = "a section does nothing unless read through"]
#[clippy::has_significant_drop]
pub struct ReadSection<'a, T, K = Handle> {
    pool: &'a HandlePool<T, K>,
    /// The entries `get` looks keys up in first, a power of two of them
    /// (`Entries::fast`): no bounds check.
    fast: &'a [Entry<T>],
    entered: Entered<'a>,
    /// Tied to this thread's record: neither `Send` nor `Sync`.
    _thread: PhantomData<*const ()>,
}

impl<T, K> HandlePool<T, K> {
    /// Opens a read section on this thread: see [`ReadSection`].
    ///
    /// Opening the outermost section on a thread is a few loads and one
    /// store to the thread's own record, found through a thread-local memo
    /// (where Linux's `membarrier` is available; elsewhere it is a lookup
    /// and a fence); a nested one counts.
    ///
    /// # Panics
    ///
    /// If this thread already has 2^32 - 1 sections open on the pool.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(2);
    /// let key = pool.insert("hello").unwrap();
    /// let reader = pool.read();
    /// assert_eq!(reader.get(key), Some(&"hello"));
    /// ```
    #[inline]
    pub fn read(&self) -> ReadSection<'_, T, K> {
        ReadSection {
            pool: self,
            fast: self.entries.fast(),
            entered: self.sections.domain.enter(),
            _thread: PhantomData,
        }
    }

    /// One read in a section of its own (`with`): no `ReadSection` to set up,
    /// only the announcement and its end (also if `f` panics).
    #[inline]
    pub(super) fn read_once<R>(&self, key: K, f: impl FnOnce(&T) -> R) -> Option<R>
    where
        K: Key,
    {
        /// Ends the section, also on an unwind out of `f`.
        struct End<'a>(&'a Domain, Entered<'a>);
        impl Drop for End<'_> {
            #[inline]
            fn drop(&mut self) {
                self.0.exit(self.1);
            }
        }
        let domain = &self.sections.domain;
        let _end = End(domain, domain.enter());
        let handle = key.handle();
        let entry = self.entries.get(handle.index())?;
        // Acquire: as in `ReadSection::get`.
        if entry.state.is_key(handle.to_bits(), Ordering::Acquire) {
            return Some(f(section_value(entry)));
        }
        read_live(entry, handle).map(f)
    }

    /// How many entries await a grace period: in the limbo and in the
    /// threads' bags (a look at every thread's record).
    pub(super) fn awaiting_reuse(&self) -> usize {
        let limbo = self.sections.limbo.len();
        if !self.sections.domain.used() {
            return limbo;
        }
        limbo
            + self
                .sections
                .domain
                .records()
                .map(|reader| reader.bag.len())
                .sum::<usize>()
    }
}

impl<'a, T, K> ReadSection<'a, T, K> {
    /// The pool this section reads.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::<u8>::new(1);
    /// assert!(std::ptr::eq(pool.read().pool(), &pool));
    /// ```
    pub fn pool(&self) -> &'a HandlePool<T, K> {
        self.pool
    }
}

impl<'a, T, K: Key> ReadSection<'a, T, K> {
    /// The value of `key`, or `None` if the key is stale (removed,
    /// evicted, taken, of another pool) or names nothing. One load of the
    /// entry's word, no write.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(2);
    /// let key = pool.insert(vec![1, 2]).unwrap();
    /// let reader = pool.read();
    /// let value: &Vec<i32> = reader.get(key).unwrap();
    /// pool.remove(key);
    /// assert_eq!(value.len(), 2, "still readable in the section");
    /// assert!(reader.get(key).is_none());
    /// ```
    #[inline]
    pub fn get(&self, key: K) -> Option<&T> {
        let handle = key.handle();
        let bits = handle.to_bits();
        // The key's bits masked to the power of two `fast.len()`: in
        // bounds, no check; one compare of the stored word with the bits
        // (`State::is_key`), which only the key's own entry passes, while
        // its value is live and no `Ref` counts it ("Which keys pass the
        // compare" in `entry.rs`). The rest out of line (a counted value,
        // an index past `fast`, a stale key), so that the common path
        // keeps its registers.
        let index = bits as usize & (self.fast.len() - 1);
        // SAFETY: `fast.len()` is a power of two (`Entries::fast`), so the
        // masked index is below it.
        let entry = unsafe { self.fast.get_unchecked(index) };
        // Acquire: pairs with the publish (Release) of the value.
        if entry.state.is_key(bits, Ordering::Acquire) {
            return Some(section_value(entry));
        }
        // Not the bits: a counted value, an index past `fast`, or a stale
        // key. Inline, with no call: a call in a caller's loop of reads
        // keeps the compiler from unrolling it (20% of a hot read).
        read_live(self.pool.entries.get_inline(handle.index())?, handle)
    }

    /// Whether `key` names a live value.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(2);
    /// let key = pool.insert(1).unwrap();
    /// let reader = pool.read();
    /// assert!(reader.contains(key));
    /// pool.remove(key);
    /// assert!(!reader.contains(key));
    /// ```
    #[inline]
    pub fn contains(&self, key: K) -> bool {
        let handle = key.handle();
        self.pool
            .entries
            .get(handle.index())
            .map_or(false, |entry| {
                // Acquire: as in `get` (a `true` may be followed by a read).
                let state = entry.state.load(Ordering::Acquire);
                entry::is_live(state, handle)
            })
    }

    /// The live values with their keys, in index order. A value inserted
    /// or removed on another thread during the walk may or may not be
    /// visited; every value live throughout the walk is, once.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// let a = pool.insert('a').unwrap();
    /// pool.insert('b').unwrap();
    /// let reader = pool.read();
    /// let (key, value) = reader.iter().next().unwrap();
    /// assert_eq!((key, *value), (a, 'a'));
    /// assert_eq!(reader.iter().map(|(_, v)| *v).collect::<String>(), "ab");
    /// ```
    pub fn iter(&self) -> SectionIter<'_, T, K> {
        SectionIter {
            walk: Walk::new(self.pool),
            _key: PhantomData,
        }
    }

    /// The live values, in index order: [`iter`](Self::iter) without the
    /// keys.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::HandlePool::new(4);
    /// pool.insert(2).unwrap();
    /// pool.insert(3).unwrap();
    /// assert_eq!(pool.read().values().product::<i32>(), 6);
    /// ```
    pub fn values(&self) -> impl Iterator<Item = &T> + '_ {
        let mut walk = Walk::new(self.pool);
        core::iter::from_fn(move || walk.next_value()).map(section_value)
    }
}

impl<T, K> Drop for ReadSection<'_, T, K> {
    #[inline]
    fn drop(&mut self) {
        self.pool.sections.domain.exit(self.entered);
    }
}

impl<T, K> fmt::Debug for ReadSection<'_, T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadSection").finish_non_exhaustive()
    }
}

/// The value of `entry` if its word is live under `generation`.
///
/// The caller has a section open on the entry's pool and keeps it open as
/// long as the reference lives.
#[inline]
fn read_live<T>(entry: &Entry<T>, handle: Handle) -> Option<&T> {
    // Acquire: pairs with the publish (Release) of the value read below.
    let state = entry.state.load(Ordering::Acquire);
    if !entry::is_live(state, handle) {
        return None;
    }
    Some(section_value(entry))
}

/// The value of an entry whose word a section just read as occupied.
#[inline]
fn section_value<T>(entry: &Entry<T>) -> &T {
    // The caller's section was open when it read the word occupied: what
    // ends that occupancy leaves the value in place until a grace period
    // shows the section ended (`domain.rs`), and nobody writes the cell of
    // an occupied entry. The reference lives no longer than the section.
    // SAFETY: a section reader of an occupied entry (`Entry::cell`'s terms).
    let cell = unsafe { entry.cell() };
    // SAFETY: as above.
    let value = cell.with(|p| unsafe { &*p });
    // SAFETY: an occupied entry holds a value (`Some`), and it stays until
    // the grace period.
    unsafe { value.as_ref().unwrap_unchecked() }
}

/// A walk over the occupied entries of a pool, in index order, up to the
/// high mark read when it began: the first segment as a slice (no segment
/// lookup, no bounds check), then entry by entry.
///
/// Its hot loop is `next`'s walk of the slice, which keeps its state in
/// registers once inlined into the caller's loop: nothing here takes the
/// walk's address (the step past the first segment takes and returns its
/// position by value), and an entry's index is computed from what is left
/// of the slice rather than counted per entry. (An `Enumerate` and a
/// `&mut self` call kept the walk in memory, a store-to-load chain per
/// entry that cost Intel cores 2.5 ns per value.)
struct Walk<'s, T, K> {
    pool: &'s HandlePool<T, K>,
    /// The first segment's entries below the mark, not walked yet.
    first: core::slice::Iter<'s, Entry<T>>,
    /// How many entries `first` had when the walk began: the index past
    /// its last one.
    first_len: usize,
    /// The index of the next entry to look at past the first segment's.
    next: usize,
    /// The entries used when the walk began (see `HandleIter`).
    end: usize,
}

impl<'s, T, K> Walk<'s, T, K> {
    fn new(pool: &'s HandlePool<T, K>) -> Self {
        let end = pool.used();
        let first = pool.entries.first_segment();
        let first = &first[..end.min(first.len())];
        Self {
            pool,
            first: first.iter(),
            first_len: first.len(),
            next: first.len(),
            end,
        }
    }

    /// The next occupied entry: its index, the entry and the word read.
    #[inline]
    fn next(&mut self) -> Found<'s, T> {
        match self.next_in_first() {
            Some((entry, state)) => {
                // The entry just taken is the one before what is left.
                let index = self.first_len - self.first.len() - 1;
                Some((index, entry, state))
            }
            None => self.next_past_first(),
        }
    }

    /// The next occupied entry of the first segment, with the word read
    /// (the one word that says both that it is live and of which
    /// generation: a second load could see a removal).
    #[inline]
    fn next_in_first(&mut self) -> Option<(&'s Entry<T>, u64)> {
        self.first.by_ref().find_map(|entry| {
            // Acquire: pairs with the publish of the value.
            let state = entry.state.load(Ordering::Acquire);
            entry::is_occupied(state).then_some((entry, state))
        })
    }

    /// The next occupied entry's value, without its index.
    #[inline]
    fn next_value(&mut self) -> Option<&'s Entry<T>> {
        match self.next_in_first() {
            Some((entry, _)) => Some(entry),
            None => self.next_past_first().map(|(_, entry, _)| entry),
        }
    }

    /// [`next`](Self::next) past the first segment.
    #[inline]
    fn next_past_first(&mut self) -> Found<'s, T> {
        let (next, found) = past_first(self.pool, self.next, self.end);
        self.next = next;
        found
    }

    fn left(&self) -> usize {
        self.first.len() + self.end.saturating_sub(self.next)
    }
}

/// An occupied entry a walk found: its index, the entry, the word read
/// (its flags and generation: see `State::load_flags`).
type Found<'s, T> = Option<(usize, &'s Entry<T>, u64)>;

/// [`Walk::next`] past the first segment, from index `next` up to `end`:
/// the index to go on from, and the occupied entry found (its index, the
/// entry, the word read). By value, so that the walk stays in registers.
#[inline(never)]
fn past_first<T, K>(pool: &HandlePool<T, K>, mut next: usize, end: usize) -> (usize, Found<'_, T>) {
    while next < end {
        let index = next;
        next += 1;
        // Not allocated, or not seen by this thread yet: no value this
        // thread was told of.
        let entry = match pool.entries.get(index) {
            Some(entry) => entry,
            None => continue,
        };
        // Acquire: pairs with the publish of the value.
        let state = entry.state.load(Ordering::Acquire);
        if entry::is_occupied(state) {
            return (next, Some((index, entry, state)));
        }
    }
    (next, None)
}

/// The iterator of [`ReadSection::iter`]: the live values and their keys.
#[must_use = "iterators are lazy and do nothing unless consumed"]
pub struct SectionIter<'s, T, K = Handle> {
    walk: Walk<'s, T, K>,
    _key: PhantomData<fn() -> K>,
}

impl<'s, T, K: Key> Iterator for SectionIter<'s, T, K> {
    type Item = (K, &'s T);

    #[inline]
    fn next(&mut self) -> Option<(K, &'s T)> {
        let (index, entry, state) = self.walk.next()?;
        // SAFETY: `state` is an occupied word (the walk returns only those),
        // whose generation is never 0.
        let handle = unsafe { Handle::occupied(index as u32, entry::generation(state)) };
        Some((K::from_handle(handle), section_value(entry)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.walk.left()))
    }
}

/// Once it returns `None` it has passed the last entry, and stays there.
impl<T, K: Key> FusedIterator for SectionIter<'_, T, K> {}

impl<T, K> fmt::Debug for SectionIter<'_, T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SectionIter")
            .field("left", &self.walk.left())
            .finish()
    }
}
