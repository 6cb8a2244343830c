//! Typed keys: the [`Key`] trait of a handle pool's key type, and the
//! [`new_key_type!`](crate::new_key_type) macro that makes one, so that a
//! key of one pool does not type-check as a key of another.

use core::fmt;
use core::hash::Hash;

use super::Handle;

#[cfg(doc)]
use super::HandlePool;

/// A key type of a [`HandlePool`]: [`Handle`] itself (the default), or a
/// type made with [`new_key_type!`](crate::new_key_type).
///
/// A key is a handle under a name of its own: `HandlePool<Enemy, EnemyKey>`
/// takes and returns `EnemyKey`s only, so handing it a key of the bullets'
/// pool is a compile error, not a lookup of an unrelated value (which an
/// untyped [`Handle`] of another pool may name). The key has the handle's
/// layout, generation and guarantees, and `Option<Key>` is 8 bytes.
///
/// Implement it with [`new_key_type!`](crate::new_key_type) rather than by
/// hand. A hand-written implementation must make
/// [`from_handle`](Key::from_handle) and [`handle`](Key::handle) each
/// other's inverse; one that does not cannot break memory safety (the pool
/// checks every key as it checks any handle), only name the wrong value or
/// none.
///
/// The provided methods read the key's handle:
/// [`index`](Key::index), [`generation`](Key::generation), and the 64-bit
/// form for FFI and the network, [`to_bits`](Key::to_bits) and
/// [`from_bits`](Key::from_bits).
///
/// # Examples
///
/// ```
/// use tagpool::{HandlePool, Key};
///
/// tagpool::new_key_type! { struct EnemyKey; }
///
/// let enemies: HandlePool<&str, EnemyKey> = HandlePool::with_key(4);
/// let orc = enemies.insert("orc").unwrap();
/// let bits = orc.to_bits(); // to a file, a socket, C
/// assert_eq!(EnemyKey::from_bits(bits), Some(orc));
/// assert_eq!((orc.index(), orc.generation()), (0, 1));
/// assert_eq!(EnemyKey::from_handle(orc.handle()), orc);
/// assert_eq!(std::mem::size_of::<Option<EnemyKey>>(), 8);
/// ```
pub trait Key: Copy + Eq + Ord + Hash + fmt::Debug {
    /// The key of `handle`.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{Handle, Key};
    ///
    /// tagpool::new_key_type! { struct EnemyKey; }
    ///
    /// let handle = Handle::from_bits(1 << 24).unwrap();
    /// assert_eq!(EnemyKey::from_handle(handle).handle(), handle);
    /// ```
    fn from_handle(handle: Handle) -> Self;

    /// The handle this key names.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{Handle, HandlePool, Key};
    ///
    /// tagpool::new_key_type! { struct EnemyKey; }
    ///
    /// let enemies: HandlePool<u8, EnemyKey> = HandlePool::with_key(1);
    /// let key = enemies.insert(7).unwrap();
    /// let handle: Handle = key.handle();
    /// assert_eq!(handle.to_bits(), key.to_bits());
    /// ```
    fn handle(self) -> Handle;

    /// The entry's index, as [`Handle::index`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{HandlePool, Key};
    ///
    /// tagpool::new_key_type! { struct EnemyKey; }
    ///
    /// let enemies: HandlePool<u8, EnemyKey> = HandlePool::with_key(1);
    /// assert_eq!(enemies.insert(7).unwrap().index(), 0);
    /// ```
    fn index(self) -> usize {
        self.handle().index()
    }

    /// The occupancy's generation, as [`Handle::generation`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{HandlePool, Key};
    ///
    /// tagpool::new_key_type! { struct EnemyKey; }
    ///
    /// let enemies: HandlePool<u8, EnemyKey> = HandlePool::with_key(1);
    /// assert_eq!(enemies.insert(7).unwrap().generation(), 1);
    /// ```
    fn generation(self) -> u64 {
        self.handle().generation()
    }

    /// The key as 64 bits, as [`Handle::to_bits`]: the same bits as its
    /// handle's.
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::{HandlePool, Key};
    ///
    /// tagpool::new_key_type! { struct EnemyKey; }
    ///
    /// let enemies: HandlePool<u8, EnemyKey> = HandlePool::with_key(1);
    /// let key = enemies.insert(7).unwrap();
    /// assert_eq!(key.to_bits(), 1 << 24, "generation 1, index 0");
    /// ```
    fn to_bits(self) -> u64 {
        self.handle().to_bits()
    }

    /// The key whose [`to_bits`](Key::to_bits) are `bits`, or `None` for
    /// bits no pool hands out, as [`Handle::from_bits`].
    ///
    /// # Examples
    ///
    /// ```
    /// use tagpool::Key;
    ///
    /// tagpool::new_key_type! { struct EnemyKey; }
    ///
    /// assert!(EnemyKey::from_bits(1 << 24).is_some());
    /// assert_eq!(EnemyKey::from_bits(0), None);
    /// ```
    fn from_bits(bits: u64) -> Option<Self> {
        Handle::from_bits(bits).map(Self::from_handle)
    }
}

impl Key for Handle {
    #[inline]
    fn from_handle(handle: Handle) -> Self {
        handle
    }

    #[inline]
    fn handle(self) -> Handle {
        self
    }
}

/// Declares key types for [`HandlePool`]s, as slotmap's macro of the same
/// name: each a [`Key`] of its own, so that a pool built for one takes no
/// other.
///
/// Each `struct Name;` becomes a `Copy` newtype of [`Handle`] with
/// `#[repr(transparent)]` (8 bytes, and 8 in an `Option`), `Eq`, `Ord`,
/// `Hash`, a `Debug` that prints `Name(3v1)` (index 3, generation 1),
/// `From<Handle>` and `Into<Handle>`, and, with the `serde` feature, the
/// handle's `Serialize` and `Deserialize` (its bits, as a `u64`).
/// Attributes (doc comments included) and a visibility go before `struct`.
/// Build the pool with [`HandlePool::with_key`] or
/// [`HandlePool::builder_with_key`].
///
/// # Examples
///
/// ```
/// use tagpool::HandlePool;
///
/// tagpool::new_key_type! {
///     /// The key of an enemy.
///     pub struct EnemyKey;
///     /// The key of a bullet.
///     pub struct BulletKey;
/// }
///
/// let enemies: HandlePool<&str, EnemyKey> = HandlePool::with_key(16);
/// let bullets: HandlePool<[f32; 2], BulletKey> = HandlePool::with_key(16);
/// let orc = enemies.insert("orc").unwrap();
/// let shot = bullets.insert([0.0, 1.0]).unwrap();
/// assert_eq!(enemies.with(orc, |name| *name), Some("orc"));
/// assert!(bullets.contains(shot));
/// assert_eq!(format!("{orc:?}"), "EnemyKey(0v1)");
/// ```
///
/// A key of one pool does not compile as a key of another (here, the
/// example above with the bullets' pool asked for the enemy's key), nor
/// does a plain [`Handle`]:
///
/// ```compile_fail,E0308
/// use tagpool::HandlePool;
///
/// tagpool::new_key_type! { pub struct EnemyKey; pub struct BulletKey; }
///
/// let enemies: HandlePool<&str, EnemyKey> = HandlePool::with_key(16);
/// let bullets: HandlePool<[f32; 2], BulletKey> = HandlePool::with_key(16);
/// let orc = enemies.insert("orc").unwrap();
/// let _ = bullets.get(orc); // expected `BulletKey`, found `EnemyKey`
/// ```
///
/// ```compile_fail,E0308
/// use tagpool::HandlePool;
///
/// tagpool::new_key_type! { pub struct BulletKey; }
///
/// let untyped = HandlePool::new(16);
/// let bullets: HandlePool<[f32; 2], BulletKey> = HandlePool::with_key(16);
/// let handle = untyped.insert("orc").unwrap();
/// let _ = bullets.get(handle); // expected `BulletKey`, found `Handle`
/// ```
#[macro_export]
macro_rules! new_key_type {
    ( $( $(#[$outer:meta])* $vis:vis struct $name:ident; )* ) => {
        $(
            $(#[$outer])*
            #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
            #[repr(transparent)]
            $vis struct $name($crate::Handle);

            impl $crate::Key for $name {
                #[inline]
                fn from_handle(handle: $crate::Handle) -> Self {
                    $name(handle)
                }

                #[inline]
                fn handle(self) -> $crate::Handle {
                    self.0
                }
            }

            impl ::core::convert::From<$crate::Handle> for $name {
                #[inline]
                fn from(handle: $crate::Handle) -> Self {
                    $name(handle)
                }
            }

            impl ::core::convert::From<$name> for $crate::Handle {
                #[inline]
                fn from(key: $name) -> Self {
                    key.0
                }
            }

            impl ::core::fmt::Debug for $name {
                fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                    ::core::write!(
                        f,
                        "{}({}v{})",
                        ::core::stringify!($name),
                        self.0.index(),
                        self.0.generation()
                    )
                }
            }

            $crate::__key_serde!($name);
        )*
    };
}

/// The `serde` impls of a key type made by
/// [`new_key_type!`](crate::new_key_type): its handle's. Not part of the
/// API.
#[cfg(feature = "serde")]
#[doc(hidden)]
#[macro_export]
macro_rules! __key_serde {
    ($name:ident) => {
        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S>(&self, serializer: S) -> ::core::result::Result<S::Ok, S::Error>
            where
                S: $crate::__private::serde::Serializer,
            {
                $crate::__private::serde::Serialize::serialize(&self.0, serializer)
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D>(deserializer: D) -> ::core::result::Result<Self, D::Error>
            where
                D: $crate::__private::serde::Deserializer<'de>,
            {
                <$crate::Handle as $crate::__private::serde::Deserialize<'de>>::deserialize(
                    deserializer,
                )
                .map($name)
            }
        }
    };
}

/// Without the `serde` feature, key types have no `serde` impls. Not part
/// of the API.
#[cfg(not(feature = "serde"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __key_serde {
    ($name:ident) => {};
}
