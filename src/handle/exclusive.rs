//! The exclusive face of a [`HandlePool`]: the methods on `&mut self`
//! (iteration by `&mut`, `retain`, `clear`, `drain`, `get_disjoint_mut`)
//! and the [`Exclusive`] view that indexes it. With the pool borrowed
//! `&mut`, no [`Ref`](super::Ref) is alive and no other thread acts on it,
//! so values are reached without counted reads.

use core::fmt;
use core::ops::{Index, IndexMut};

use super::entry;
use super::iter::{Drain, IterMut, Keys, Values, ValuesMut};
use super::{Handle, HandlePool, Key};
use crate::sync::Ordering;

impl<T, K: Key> HandlePool<T, K> {
    /// [`insert`](HandlePool::insert) through `&mut self`, as slotmap's
    /// `insert`: with no other thread on the pool, the free entry comes off
    /// the chain of entries vacated through `&mut self` (see
    /// [`remove_mut`](HandlePool::remove_mut)), else off the index pool's
    /// free list, each by a plain load and store, and the value is
    /// published without a read-modify-write. When both are empty (the
    /// free entries are in thread caches, or the pool is full), it is
    /// [`insert`](HandlePool::insert) itself: caches, then eviction.
    ///
    /// # Errors
    ///
    /// As [`insert`](HandlePool::insert): [`InsertError::Full`](crate::InsertError::Full) with the
    /// value.
    ///
    /// # Panics
    ///
    /// As [`insert`](HandlePool::insert): if an eviction's user code, or
    /// the allocation of a segment of entries, panics, the pool stays
    /// consistent and loses no entry.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(2);
    /// let a = pool.insert_mut("a").unwrap();
    /// assert_eq!(pool.remove_mut(a), Some("a"));
    /// assert_eq!(pool.remove_mut(a), None, "stale");
    /// ```
    #[inline]
    pub fn insert_mut(&mut self, value: T) -> Result<K, crate::InsertError<T>> {
        // Relaxed, here and below: `&mut self` orders everything.
        let head = self.vacant.load(Ordering::Relaxed);
        // One compare on the common path: `NIL` is above every index of
        // the first segment.
        let vacated = match self.entries.first(head) {
            Some(entry) => Some(entry),
            None if head != super::NIL => Some(self.entries.at(head)),
            None => None,
        };
        if let Some(entry) = vacated {
            // An entry vacated through `&mut self`: filled before, so its
            // segment is allocated and `high` covers it.
            let next = entry.stamp.load(Ordering::Relaxed) as u32;
            self.vacant.store(next, Ordering::Relaxed);
            let len = self.vacant_len.load(Ordering::Relaxed);
            self.vacant_len.store(len - 1, Ordering::Relaxed);
            // SAFETY: `&mut self`: this thread owns every entry, and this
            // one is free (it was on the chain).
            unsafe { entry.put(value) };
            self.stamp(entry);
            let generation = entry.publish_vacated(head);
            if cfg!(all(loom, tagpool_loom_retire_reuses)) {
                // Loom-only: that fault puts retired entries (generation 0)
                // on the chain, and the checked `new` reports them.
                return Ok(K::from_handle(Handle::new(head, generation)));
            }
            // SAFETY: a vacated entry went onto the chain only if its next
            // generation was not the retired mark, 0 (`vacate_entry`).
            return Ok(K::from_handle(unsafe {
                Handle::occupied(head, generation)
            }));
        }
        // SAFETY: `&mut self`: no other operation on the pool's indices runs
        // now, and whatever gave this thread the `&mut` ordered the earlier
        // ones before it.
        match unsafe { self.indices.pool().state().pop_exclusive() } {
            Some(index) => Ok(K::from_handle(self.fill(index, value))),
            None => {
                // A segment to grow, or a free entry in a cache.
                if let Some(index) = self.indices.pool().state().try_pop::<false>() {
                    return Ok(K::from_handle(self.fill(index, value)));
                }
                // Entries removed while the pool was read through sections
                // are free now: no section outlives a `&mut` borrow.
                self.reclaim_exclusive();
                self.insert(value)
            }
        }
    }

    /// Removes the value of `key` and returns it, through `&mut self`, as
    /// slotmap's `remove`: `None` if the key is stale. Every copy of the
    /// key answers `None` from then on. With no `Ref` alive and no other
    /// thread on the pool, the entry's word is read and written without a
    /// read-modify-write, and the entry goes onto the pool's chain of
    /// vacated entries (slotmap's free list: a plain load and store),
    /// which every insert takes from first, through `&mut self` or
    /// through `&self` (there by a compare-and-swap: while the pool is
    /// shared nothing is pushed onto the chain, so it cannot suffer ABA).
    /// An entry whose last generation this was is retired instead (see
    /// [`retired`](HandlePool::retired)).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(1);
    /// let h = pool.insert(vec![1, 2]).unwrap();
    /// assert_eq!(pool.remove_mut(h), Some(vec![1, 2]));
    /// assert!(pool.get(h).is_none());
    /// assert!(pool.insert_mut(vec![3]).is_ok(), "its entry is free again");
    /// ```
    #[inline]
    pub fn remove_mut(&mut self, key: K) -> Option<T> {
        let handle = key.handle();
        let entry = self.entries.get(handle.index())?;
        // Relaxed: `&mut self` orders everything.
        let state = entry.state.load(Ordering::Relaxed);
        if !entry::is_live(state, handle) {
            return None;
        }
        // SAFETY: `&mut self`.
        Some(unsafe { self.vacate_entry(entry, handle.index() as u32, state) })
    }

    /// Iterates over the live values with their keys, each as `&mut T`, in
    /// index order. Exclusive access to the pool: no counted reads, and the
    /// iterator knows its length ([`ExactSizeIterator`]) and walks from
    /// either end ([`DoubleEndedIterator`]), as the other iterators through
    /// `&mut self` do. `for (key, value) in &mut pool` is this walk.
    ///
    /// With `&HandlePool` (shared by threads), use [`iter`](HandlePool::iter).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(4);
    /// let a = pool.insert(1).unwrap();
    /// let b = pool.insert(2).unwrap();
    /// for (key, value) in pool.iter_mut() {
    ///     *value += if key == a { 10 } else { 20 };
    /// }
    /// assert_eq!((pool.with(a, |v| *v), pool.with(b, |v| *v)), (Some(11), Some(22)));
    /// ```
    pub fn iter_mut(&mut self) -> IterMut<'_, T, K> {
        IterMut::new(self)
    }

    /// Iterates over the live values, each as `&T`, in index order. Takes
    /// `&mut self` so that no other thread can remove a value while it is
    /// borrowed (no counted reads); with `&HandlePool`, use
    /// [`iter`](HandlePool::iter), whose items are counted [`Ref`](super::Ref)s.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(4);
    /// pool.insert(1).unwrap();
    /// pool.insert(2).unwrap();
    /// assert_eq!(pool.values().sum::<i32>(), 3);
    /// ```
    pub fn values(&mut self) -> Values<'_, T, K> {
        Values::new(self)
    }

    /// Iterates over the live values, each as `&mut T`, in index order.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(4);
    /// let h = pool.insert(String::from("a")).unwrap();
    /// pool.values_mut().for_each(|s| s.push('!'));
    /// assert_eq!(pool.with(h, |s| s.clone()).as_deref(), Some("a!"));
    /// ```
    pub fn values_mut(&mut self) -> ValuesMut<'_, T, K> {
        ValuesMut::new(self)
    }

    /// Iterates over the live values' keys, in index order. Exact: no other
    /// thread inserts or removes while the pool is borrowed `&mut`.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(4);
    /// let a = pool.insert(1).unwrap();
    /// let b = pool.insert(2).unwrap();
    /// pool.remove(a);
    /// assert_eq!(pool.keys().collect::<Vec<_>>(), [b]);
    /// ```
    pub fn keys(&mut self) -> Keys<'_, T, K> {
        Keys::new(self)
    }

    /// Keeps the live values for which `f` returns `true` and removes the
    /// others (their keys go stale; their entries are free for inserts, or
    /// retire if their last generation ended), in index order.
    ///
    /// # Panics
    ///
    /// If `f` or a removed value's drop panics: the panic propagates; the
    /// values not visited yet (and the one whose `f` panicked) stay, the
    /// pool is consistent and loses no entry.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(4);
    /// let keys: Vec<_> = (1..=4).map(|v| pool.insert(v).unwrap()).collect();
    /// pool.retain(|_key, v| {
    ///     *v *= 10;
    ///     *v > 20
    /// });
    /// assert_eq!(pool.values().copied().collect::<Vec<_>>(), [30, 40]);
    /// assert!(!pool.contains(keys[0]) && pool.contains(keys[3]));
    /// ```
    pub fn retain(&mut self, mut f: impl FnMut(K, &mut T) -> bool) {
        for index in 0..self.used() {
            let keep = match self.entries.get_mut(index).and_then(|e| e.live_mut()) {
                // User code: the entry is unchanged until it returns.
                Some((generation, value)) => {
                    f(K::from_handle(Handle::new(index as u32, generation)), value)
                }
                None => continue,
            };
            if !keep {
                drop(self.vacate(index as u32));
            }
        }
    }

    /// Removes every live value (their keys go stale), dropping them in
    /// index order.
    ///
    /// # Panics
    ///
    /// If a value's drop panics: the panic propagates, the values after it
    /// stay in the pool.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(2);
    /// let h = pool.insert(1).unwrap();
    /// pool.clear();
    /// assert!(pool.is_empty() && !pool.contains(h));
    /// assert!(pool.insert(2).is_ok());
    /// ```
    pub fn clear(&mut self) {
        self.clear_range(0..self.used());
        // And the values removed earlier that waited for read sections.
        self.reclaim_exclusive();
    }

    /// Removes every live value and yields it with its key (stale from
    /// then on), in index order. Dropping the [`Drain`] part-way removes the
    /// rest.
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(4);
    /// let a = pool.insert("a").unwrap();
    /// let b = pool.insert("b").unwrap();
    /// assert_eq!(pool.drain().collect::<Vec<_>>(), [(a, "a"), (b, "b")]);
    /// assert!(pool.is_empty() && pool.get(a).is_none());
    /// ```
    pub fn drain(&mut self) -> Drain<'_, T, K> {
        Drain::new(self)
    }

    /// `&mut`s to the values of `N` keys at once, or `None` if any key is
    /// stale or two keys name the same value (as std's
    /// `slice::get_disjoint_mut` and slotmap's `get_disjoint_mut`).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(4);
    /// let a = pool.insert(1).unwrap();
    /// let b = pool.insert(2).unwrap();
    /// if let Some([x, y]) = pool.get_disjoint_mut([a, b]) {
    ///     std::mem::swap(x, y);
    /// }
    /// assert_eq!((pool.with(a, |v| *v), pool.with(b, |v| *v)), (Some(2), Some(1)));
    /// assert!(pool.get_disjoint_mut([a, a]).is_none(), "the same value twice");
    /// pool.remove(b);
    /// assert!(pool.get_disjoint_mut([a, b]).is_none(), "a stale key");
    /// ```
    pub fn get_disjoint_mut<const N: usize>(&mut self, keys: [K; N]) -> Option<[&mut T; N]> {
        for (i, key) in keys.iter().enumerate() {
            let index = key.index();
            if !self.contains(*key) || keys[..i].iter().any(|k| k.index() == index) {
                return None;
            }
        }
        let entries = &self.entries;
        Some(core::array::from_fn(|i| {
            let entry = &entries[keys[i].index()];
            // The references borrow the pool; the keys name distinct
            // entries (checked above), so the references do not alias.
            // SAFETY: `&mut self`: no `Ref` reads and no other thread
            // reaches any entry while the references live.
            let cell = unsafe { entry.cell_mut() };
            // SAFETY: as above, for as long as the pool is borrowed.
            let value = cell.with(|p| unsafe { (*p).as_mut() });
            // SAFETY: the entry is live (checked above), so it holds a
            // value.
            unsafe { value.unwrap_unchecked() }
        }))
    }

    /// The pool as an [`Exclusive`] view, which indexes it: `view[key]`
    /// and `view[key] = value`, panicking on a stale key (as slotmap's
    /// `Index`).
    ///
    /// # Examples
    ///
    /// ```
    /// let mut pool = tagpool::HandlePool::new(2);
    /// let h = pool.insert(1).unwrap();
    /// let mut view = pool.exclusive();
    /// view[h] += 1;
    /// assert_eq!(view[h], 2);
    /// ```
    pub fn exclusive(&mut self) -> Exclusive<'_, T, K> {
        Exclusive { pool: self }
    }
}

/// The steps of the `&mut self` methods that need no key type (a
/// [`Drain`]'s drop runs them).
impl<T, K> HandlePool<T, K> {
    /// The number of live values, exact under `&mut self`: the entries in
    /// use, less the retired ones and the values removed while read
    /// (their `Ref`s leaked).
    pub(super) fn live_exclusive(&mut self) -> usize {
        let capacity = self.entries.capacity();
        let in_use = self.indices.stats().in_use;
        // Relaxed: `&mut self` orders everything.
        let retired = self.counters.retired.load(Ordering::Relaxed);
        let removed = self.counters.removed_while_read(capacity);
        // Reservations are no values (`reserve.rs`).
        let reserved = self.reserved_exclusive();
        let vacant = self.vacant.load(Ordering::Relaxed);
        debug_assert!(vacant == super::NIL || (vacant as usize) < capacity);
        in_use
            .saturating_sub(retired)
            .saturating_sub(removed)
            .saturating_sub(reserved)
            .saturating_sub(self.vacant_len.load(Ordering::Relaxed) as usize)
            .saturating_sub(self.awaiting_reuse())
    }

    /// Ends the live value of entry `index` under `&mut self`: bumps the
    /// generation (its keys go stale), takes the value out, gives the index
    /// back (or retires the entry if that was its last generation), and
    /// returns the value, which the caller drops or hands out.
    #[inline]
    pub(super) fn vacate(&mut self, index: u32) -> T {
        let entry = self.entries.at(index);
        // Relaxed: `&mut self` orders everything.
        let state = entry.state.load(Ordering::Relaxed);
        // SAFETY: `&mut self`.
        unsafe { self.vacate_entry(entry, index, state) }
    }

    /// [`vacate`](Self::vacate) of `entry`, of index `index`, whose word the
    /// caller just read: `state`, occupied. Through `&self` so that the
    /// caller can hand in the entry it already looked up.
    ///
    /// # Safety
    ///
    /// The caller has exclusive access to the pool (`&mut self`): every
    /// load and store here is a plain one.
    #[inline]
    unsafe fn vacate_entry(&self, entry: &super::entry::Entry<T>, index: u32, state: u64) -> T {
        debug_assert!(entry::is_occupied(state));
        let ended = entry::ended(state);
        // Reader counts left by leaked `Ref`s go: their borrows ended.
        // Relaxed: exclusive access orders everything.
        entry
            .state
            .store(index, entry::free(ended), Ordering::Relaxed);
        // SAFETY: exclusive access (this function's contract): this thread
        // owns every entry.
        let value = unsafe { entry.take() };
        // SAFETY: an occupied entry holds a value (`Some`: see the field).
        let value = unsafe { value.unwrap_unchecked() };
        if entry::is_retired(ended) {
            self.retire();
        } else {
            // Onto the chain of vacated entries (see `HandlePool::vacant`),
            // where the next insert, `&mut` or not, finds it first.
            entry.stamp.store(
                u64::from(self.vacant.load(Ordering::Relaxed)),
                Ordering::Relaxed,
            );
            self.vacant.store(index, Ordering::Relaxed);
            let len = self.vacant_len.load(Ordering::Relaxed);
            self.vacant_len.store(len + 1, Ordering::Relaxed);
        }
        value
    }

    /// Removes (and drops) every live value in the entries of `range`.
    pub(super) fn clear_range(&mut self, range: core::ops::Range<usize>) {
        for index in range {
            let entry = match self.entries.get(index) {
                Some(entry) => entry,
                None => continue,
            };
            // Relaxed: `&mut self` orders everything.
            let state = entry.state.load(Ordering::Relaxed);
            if entry::is_occupied(state) {
                drop(self.vacate(index as u32));
            }
        }
    }

    /// A shared reference to the value of `handle`, uncounted.
    ///
    /// # Safety
    ///
    /// No thread may end or change the value while the reference lives:
    /// the caller has exclusive access to the pool (an [`Exclusive`]).
    unsafe fn peek(&self, handle: Handle) -> Option<&T> {
        let entry = self.entries.get(handle.index())?;
        // Relaxed: exclusive access orders everything.
        let state = entry.state.load(Ordering::Relaxed);
        if !entry::is_live(state, handle) {
            return None;
        }
        // SAFETY: the caller's exclusive access (this function's
        // contract): nobody writes the cell while the reference lives.
        let cell = unsafe { entry.cell() };
        // SAFETY: as above; a live entry holds a value.
        cell.with(|p| unsafe { (*p).as_ref() })
    }
}

/// A [`HandlePool`] borrowed `&mut`, for indexing: `view[key]` reads and
/// `view[key] = value` writes the value of `key`, and panic if the key is
/// stale, as slotmap's `SlotMap` does.
///
/// Why a view, rather than `Index` on the pool: [`Index::index`] takes
/// `&self`, and a `&HandlePool` is shared by threads that may remove the
/// value while the `&T` it returned lives. The view holds the pool by
/// `&mut`, and gives no way to its `&self` methods, so nothing can end a
/// value while a reference from the view lives. [`get`](HandlePool::get),
/// [`get_mut`](HandlePool::get_mut) and
/// [`get_disjoint_mut`](HandlePool::get_disjoint_mut) answer `None`
/// instead of panicking.
///
/// # Examples
///
/// ```
/// let mut pool = tagpool::HandlePool::new(2);
/// let a = pool.insert(String::from("a")).unwrap();
/// let mut view = pool.exclusive();
/// view[a].push('!');
/// assert_eq!(view[a], "a!");
/// ```
pub struct Exclusive<'a, T, K = Handle> {
    pool: &'a mut HandlePool<T, K>,
}

impl<T, K: Key> Index<K> for Exclusive<'_, T, K> {
    type Output = T;

    /// # Panics
    ///
    /// If `key` is stale (removed, evicted, or names nothing).
    fn index(&self, key: K) -> &T {
        // SAFETY: the view borrows the pool `&mut` and exposes none of its
        // `&self` methods: nothing ends or changes the value while `&self`
        // (hence the returned reference) lives.
        match unsafe { self.pool.peek(key.handle()) } {
            Some(value) => value,
            None => panic!("tagpool: a HandlePool indexed with a stale key: {key:?}"),
        }
    }
}

impl<T, K: Key> IndexMut<K> for Exclusive<'_, T, K> {
    /// # Panics
    ///
    /// If `key` is stale (removed, evicted, or names nothing).
    fn index_mut(&mut self, key: K) -> &mut T {
        match self.pool.get_mut(key) {
            Some(value) => value,
            None => panic!("tagpool: a HandlePool indexed with a stale key: {key:?}"),
        }
    }
}

impl<T, K: Key> fmt::Debug for Exclusive<'_, T, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Exclusive").field(&self.pool).finish()
    }
}
