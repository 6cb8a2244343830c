//! Parallel iteration over a [`HandlePool`] borrowed `&mut` (the `rayon`
//! feature): [`par_iter`](HandlePool::par_iter),
//! [`par_iter_mut`](HandlePool::par_iter_mut),
//! [`par_values`](HandlePool::par_values) and
//! [`par_values_mut`](HandlePool::par_values_mut).
//!
//! The entries lie in segments that never move, each a slice: rayon
//! splits each segment by index ([`IndexedParallelIterator`] over the
//! slice) and runs the segments side by side, and each worker keeps the
//! live entries of its part. The result is a plain [`ParallelIterator`]:
//! how many live values a part holds is known only by looking.
//!
//! Why `&mut self`, even for the `&T` iterators: through `&HandlePool`,
//! another thread may remove a value while a worker reads it. The shared
//! readers ([`Ref`](super::Ref), [`ReadSection`](super::ReadSection)) are
//! per thread: a section is open on the thread that opened it and cannot
//! cover rayon's workers, and a counted read per value would write each
//! entry's word from every worker. With the pool borrowed `&mut`, nothing
//! else can reach it, so the workers read and write the values directly,
//! as [`iter_mut`](HandlePool::iter_mut) does.

use ::rayon::iter::{
    IndexedParallelIterator, IntoParallelIterator, IntoParallelRefMutIterator, ParallelIterator,
};

use super::entry::Entry;
use super::{Handle, HandlePool, Key};

impl<T: Send, K: Key> HandlePool<T, K> {
    /// The live entries, each with its handle: the walk the four share.
    fn par_live(&mut self) -> impl ParallelIterator<Item = (Handle, &mut T)> + '_ {
        let used = self.used();
        // At most one slice per segment (25 for the largest pool): the
        // parallel work is within them.
        let segments: Vec<(u32, &mut [Entry<T>])> = self.entries.slices_mut(used).collect();
        segments.into_par_iter().flat_map(|(start, entries)| {
            entries
                .par_iter_mut()
                .enumerate()
                .filter_map(move |(offset, entry)| {
                    let (generation, value) = entry.live_mut()?;
                    let index = start + offset as u32;
                    // SAFETY: the generation of an occupied word: never 0
                    // (see `Handle::occupied`).
                    Some((unsafe { Handle::occupied(index, generation) }, value))
                })
        })
    }

    /// Iterates over the live values with their keys, each as `&mut T`, on
    /// rayon's thread pool: [`iter_mut`](HandlePool::iter_mut) in
    /// parallel, in no particular order.
    ///
    /// # Examples
    ///
    /// ```
    /// use rayon::iter::ParallelIterator;
    ///
    /// let mut pool = tagpool::HandlePool::new(1000);
    /// let keys: Vec<_> = (0..1000u64).map(|v| pool.insert(v).unwrap()).collect();
    /// pool.par_iter_mut().for_each(|(key, value)| *value += 1000 * key.index() as u64);
    /// let ten = keys[10];
    /// assert_eq!(pool.get_mut(ten).copied(), Some(10 + 1000 * ten.index() as u64));
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    pub fn par_iter_mut(&mut self) -> impl ParallelIterator<Item = (K, &mut T)> + '_
    where
        K: Send,
    {
        self.par_live()
            .map(|(handle, value)| (K::from_handle(handle), value))
    }

    /// Iterates over the live values, each as `&mut T`, on rayon's thread
    /// pool: [`values_mut`](HandlePool::values_mut) in parallel, in no
    /// particular order.
    ///
    /// # Examples
    ///
    /// ```
    /// use rayon::iter::ParallelIterator;
    ///
    /// let mut pool = tagpool::HandlePool::new(64);
    /// let h = pool.insert(vec![1, 2]).unwrap();
    /// pool.insert(vec![3]).unwrap();
    /// pool.par_values_mut().for_each(|v| v.push(0));
    /// assert_eq!(pool.get_mut(h).map(|v| v.len()), Some(3));
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    pub fn par_values_mut(&mut self) -> impl ParallelIterator<Item = &mut T> + '_ {
        self.par_live().map(|(_, value)| value)
    }
}

impl<T: Send + Sync, K: Key> HandlePool<T, K> {
    /// Iterates over the live values with their keys, each as `&T`, on
    /// rayon's thread pool, in no particular order. Takes `&mut self`, as
    /// [`values`](HandlePool::values) does, so that no thread can remove a
    /// value while a worker reads it: a [`ReadSection`](super::ReadSection)
    /// covers only the thread that opened it, not rayon's workers.
    ///
    /// # Examples
    ///
    /// ```
    /// use rayon::iter::ParallelIterator;
    ///
    /// let mut pool = tagpool::HandlePool::new(100);
    /// for v in 0..100u64 {
    ///     pool.insert(v).unwrap();
    /// }
    /// let odd = pool.par_iter().filter(|(_, v)| **v % 2 == 1).count();
    /// assert_eq!(odd, 50);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    pub fn par_iter(&mut self) -> impl ParallelIterator<Item = (K, &T)> + '_
    where
        K: Send,
    {
        self.par_live()
            .map(|(handle, value)| (K::from_handle(handle), &*value))
    }

    /// Iterates over the live values, each as `&T`, on rayon's thread pool,
    /// in no particular order (`&mut self`: see
    /// [`par_iter`](HandlePool::par_iter)).
    ///
    /// # Examples
    ///
    /// ```
    /// use rayon::iter::ParallelIterator;
    ///
    /// let mut pool = tagpool::HandlePool::new(100);
    /// for v in 1..=100u64 {
    ///     pool.insert(v).unwrap();
    /// }
    /// assert_eq!(pool.par_values().sum::<u64>(), 5050);
    /// ```
    #[cfg_attr(docsrs, doc(cfg(feature = "rayon")))]
    pub fn par_values(&mut self) -> impl ParallelIterator<Item = &T> + '_ {
        self.par_live().map(|(_, value)| &*value)
    }
}
