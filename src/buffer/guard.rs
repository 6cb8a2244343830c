//! The guards of a [`BufferPool`](super::BufferPool): a pooled buffer of
//! one class, or an unpooled one (a request above the largest class).

use core::fmt;
use core::ops::{Deref, DerefMut};

use crate::{OwnedPoolGuard, PoolGuard};

/// A buffer from [`BufferPool::acquire`](super::BufferPool::acquire) and
/// its other borrowed forms: a `Vec<T>` of at least the capacity asked for,
/// empty, that goes back to its class's pool (cleared) when dropped, or,
/// for a request above the largest class, a plain `Vec` that is freed.
/// Derefs to the `Vec`.
///
/// # Examples
///
/// ```
/// let pool = tagpool::BufferPool::<u8>::builder().sizes(64, 4096).capacity(4).build()?;
/// let mut buf = pool.acquire(100)?;
/// assert!(buf.is_empty() && buf.capacity() >= 100);
/// assert_eq!(buf.class_size(), Some(128));
/// buf.extend_from_slice(b"frame");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct BufferGuard<'a, T> {
    inner: Inner<PoolGuard<'a, Vec<T>>, T>,
}

/// A buffer that owns its share of the pool (from
/// [`BufferPool::acquire_owned`](super::BufferPool::acquire_owned) and its
/// other forms): `'static`, `Send` for `T: Send`, so it moves into tasks
/// and threads, and, for `T = u8`, into `bytes::Bytes::from_owner` (it is
/// `AsRef<[u8]>`), which sends it back to its class when the last `Bytes`
/// sharing it drops.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// let pool = Arc::new(tagpool::BufferPool::<u8>::builder().sizes(64, 4096).capacity(4).build()?);
/// let mut buf = pool.acquire_owned(1000)?;
/// buf.extend_from_slice(b"frame");
/// let bytes = bytes::Bytes::from_owner(buf);
/// assert_eq!(&bytes[..], b"frame");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct OwnedBufferGuard<T> {
    inner: Inner<OwnedPoolGuard<Vec<T>>, T>,
}

/// A pooled guard with its class's size, or an unpooled buffer.
enum Inner<G, T> {
    Pooled(G, usize),
    Unpooled(Vec<T>),
}

/// Whether a buffer of capacity `capacity` left its class of `size`: grown
/// to twice the size or more, or shrunk below it (a zero-sized `T`'s
/// capacity is unbounded and never leaves).
#[inline]
fn left_class<T>(capacity: usize, size: usize) -> bool {
    core::mem::size_of::<T>() != 0 && (capacity < size || capacity / 2 >= size)
}

/// A guard's release of its buffer: cleared and given back, or dropped and
/// its slot given back empty (a discard) if it left its class.
macro_rules! release_buffer {
    ($self:ident, $guard:ident) => {
        if let Inner::Pooled(..) = $self.inner {
            // A `Vec::new()` costs nothing: it only stands in for the guard
            // taken out.
            if let Inner::Pooled(mut g, size) =
                core::mem::replace(&mut $self.inner, Inner::Unpooled(Vec::new()))
            {
                if left_class::<T>(g.capacity(), size) {
                    $guard::discard(g);
                } else {
                    g.clear();
                }
            }
        }
    };
}

impl<T> Drop for BufferGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        release_buffer!(self, PoolGuard);
    }
}

impl<T> Drop for OwnedBufferGuard<T> {
    #[inline]
    fn drop(&mut self) {
        release_buffer!(self, OwnedPoolGuard);
    }
}

impl<'a, T> BufferGuard<'a, T> {
    pub(super) fn pooled(guard: PoolGuard<'a, Vec<T>>, size: usize) -> Self {
        Self {
            inner: Inner::Pooled(guard, size),
        }
    }

    pub(super) fn unpooled(buf: Vec<T>) -> Self {
        Self {
            inner: Inner::Unpooled(buf),
        }
    }

    /// The size of the class the buffer belongs to (its capacity when it
    /// was made), or `None` for an unpooled buffer.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder().sizes(64, 256).capacity(1).build()?;
    /// assert_eq!(pool.acquire(65)?.class_size(), Some(128));
    /// assert_eq!(pool.acquire(1000)?.class_size(), None, "above the largest class");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn class_size(&self) -> Option<usize> {
        class_size(&self.inner)
    }

    /// Takes the buffer out of the pool (its slot is refilled later), or
    /// returns the unpooled one, as [`PoolGuard::detach`] does.
    ///
    /// # Examples
    ///
    /// ```
    /// let pool = tagpool::BufferPool::<u8>::builder().sizes(64, 256).capacity(1).build()?;
    /// let mut buf = pool.acquire(10)?;
    /// buf.push(7);
    /// let kept: Vec<u8> = tagpool::BufferGuard::detach(buf);
    /// assert_eq!(kept, [7]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn detach(mut guard: Self) -> Vec<T> {
        match core::mem::replace(&mut guard.inner, Inner::Unpooled(Vec::new())) {
            Inner::Pooled(g, _) => PoolGuard::detach(g),
            Inner::Unpooled(buf) => buf,
        }
    }
}

impl<T> OwnedBufferGuard<T> {
    pub(super) fn pooled(guard: OwnedPoolGuard<Vec<T>>, size: usize) -> Self {
        Self {
            inner: Inner::Pooled(guard, size),
        }
    }

    pub(super) fn unpooled(buf: Vec<T>) -> Self {
        Self {
            inner: Inner::Unpooled(buf),
        }
    }

    /// As [`BufferGuard::class_size`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::BufferPool::<u8>::builder().sizes(64, 256).capacity(1).build()?);
    /// assert_eq!(pool.acquire_owned(1)?.class_size(), Some(64));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn class_size(&self) -> Option<usize> {
        class_size(&self.inner)
    }

    /// As [`BufferGuard::detach`].
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// let pool = Arc::new(tagpool::BufferPool::<u8>::builder().sizes(64, 256).capacity(1).build()?);
    /// let buf = pool.acquire_owned(1)?;
    /// assert!(tagpool::OwnedBufferGuard::detach(buf).capacity() >= 64);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn detach(mut guard: Self) -> Vec<T> {
        match core::mem::replace(&mut guard.inner, Inner::Unpooled(Vec::new())) {
            Inner::Pooled(g, _) => OwnedPoolGuard::detach(g),
            Inner::Unpooled(buf) => buf,
        }
    }
}

/// The class of a pooled buffer.
fn class_size<G, T>(inner: &Inner<G, T>) -> Option<usize> {
    match inner {
        Inner::Pooled(_, size) => Some(*size),
        Inner::Unpooled(_) => None,
    }
}

macro_rules! buffer_guard_traits {
    ($guard:ident $(<$lt:lifetime>)?) => {
        impl<$($lt,)? T> Deref for $guard<$($lt,)? T> {
            type Target = Vec<T>;

            #[inline]
            fn deref(&self) -> &Vec<T> {
                match &self.inner {
                    Inner::Pooled(g, _) => g,
                    Inner::Unpooled(buf) => buf,
                }
            }
        }

        impl<$($lt,)? T> DerefMut for $guard<$($lt,)? T> {
            #[inline]
            fn deref_mut(&mut self) -> &mut Vec<T> {
                match &mut self.inner {
                    Inner::Pooled(g, _) => g,
                    Inner::Unpooled(buf) => buf,
                }
            }
        }

        /// The buffer's contents, as a slice.
        impl<$($lt,)? T> AsRef<[T]> for $guard<$($lt,)? T> {
            fn as_ref(&self) -> &[T] {
                self
            }
        }

        /// The buffer's contents, as a mutable slice.
        impl<$($lt,)? T> AsMut<[T]> for $guard<$($lt,)? T> {
            fn as_mut(&mut self) -> &mut [T] {
                self
            }
        }

        impl<$($lt,)? T: fmt::Debug> fmt::Debug for $guard<$($lt,)? T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct(stringify!($guard))
                    .field("class_size", &self.class_size())
                    .field("buf", &**self)
                    .finish()
            }
        }
    };
}

buffer_guard_traits!(BufferGuard<'a>);
buffer_guard_traits!(OwnedBufferGuard);
