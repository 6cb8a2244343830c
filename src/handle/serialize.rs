//! The `serde` feature: a [`Handle`] serializes as its 64 bits, a `u64`
//! (the typed keys of [`new_key_type!`](crate::new_key_type) as their
//! handle's, through `__key_serde!`); a whole [`HandlePool`] as a struct of
//! its capacity, eviction kind, live values with their keys, the keys its
//! next inserts would return, and its retired entries (`save.rs` reads and
//! rebuilds the pool; this file maps it to serde's data model), loaded back
//! by [`Deserialize`] or, for a pool whose eviction or `on_evict` needs
//! closures, through a [`HandleBuilder`] ([`HandleBuilder::deserialize_pool`],
//! or the builder as a [`DeserializeSeed`]).

use core::fmt;
use core::marker::PhantomData;

use serde::de::{
    Deserialize, DeserializeSeed, Deserializer, EnumAccess, Error, IgnoredAny, MapAccess,
    SeqAccess, Unexpected, VariantAccess, Visitor,
};
use serde::ser::{Serialize, SerializeStruct, Serializer};

use super::save::{Evict, Saved};
use super::{Handle, HandleBuilder, HandlePool, Key, Ref};

impl Serialize for Handle {
    /// The handle's [`to_bits`](Handle::to_bits), as a `u64`.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(self.to_bits())
    }
}

impl<'de> Deserialize<'de> for Handle {
    /// A `u64`, taken by [`from_bits`](Handle::from_bits): an error for
    /// bits of generation 0, which no pool hands out.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let bits = u64::deserialize(deserializer)?;
        Handle::from_bits(bits).ok_or_else(|| {
            D::Error::invalid_value(
                Unexpected::Unsigned(bits),
                &"the bits of a handle (generation 1 or above)",
            )
        })
    }
}

/// The fields of a saved pool, in their order.
const FIELDS: &[&str] = &[
    "capacity", "evict", "high", "values", "vacant", "free", "retired",
];

/// Saves the pool: a struct `HandlePool` of seven fields, from which
/// [`Deserialize`] (or [`HandleBuilder::deserialize_pool`]) rebuilds a
/// pool where every saved key names its value, every key that was stale is
/// stale, the retired entries stay retired, and the next inserts return
/// the keys they would have returned from the saved pool.
///
/// | field | type | what |
/// |---|---|---|
/// | `capacity` | `u64` | [`capacity`](HandlePool::capacity) |
/// | `evict` | unit variant of `Evict`: `never`, `oldest`, `min_by_key` | the eviction policy's kind (its key function, and `on_evict`, are closures: see [`deserialize_pool`](HandleBuilder::deserialize_pool)) |
/// | `high` | `u32` | the high mark: the entries below it have held values, those at or above it never have |
/// | `values` | sequence of `(key, value)` | the live values and their keys, in index order (in a pool that evicts the oldest, oldest first: the order of its evictions) |
/// | `vacant` | sequence of keys | the keys the next inserts return from the chain of entries vacated through `&mut` ([`remove_mut`](HandlePool::remove_mut), [`retain`](HandlePool::retain), [`clear`](HandlePool::clear), [`drain`](HandlePool::drain)), which inserts take first, in order |
/// | `free` | sequence of keys | the keys the next inserts return after those, in order; the free entries at or above the high mark it does not list come after it, in index order, at generation 1 |
/// | `retired` | sequence of `u32` | the indices of the [retired](HandlePool::retired) entries |
///
/// Keys are [`Handle`]s' 64 bits (`u64`). Every entry below the high mark
/// is in exactly one of `values`, `vacant`, `free` and `retired`, with the
/// generation of its next key where it is free: the save of a pool of
/// capacity 2^24 that used a hundred entries holds about a hundred keys.
/// Statistics ([`stats`](HandlePool::stats)) are not saved.
///
/// # A save of a shared pool
///
/// `serialize` takes `&self`: it reads each entry's state, taking a counted
/// read ([`Ref`]) of every live value for as long as it runs (so a value it
/// saves is neither dropped nor evicted meanwhile, and
/// [`take`](HandlePool::take) fails on it). While other threads insert and
/// remove, the save holds every value that was live throughout it, may or
/// may not hold the others, and stays consistent (it always loads); keys
/// handed out or ended during the save may be stale, or name a later value,
/// in the loaded pool. Save while no other thread inserts or removes for
/// an exact save.
///
/// # The order of reuse
///
/// `vacant` is the pool's chain of vacated entries, in its order; `free`
/// is its free list, from the top, then the free entries the free list
/// does not hold (awaiting a grace period, removed while a [`Ref`] read
/// them, held by the cache of a thread in the middle of an insert or a
/// remove) in index order: when a grace period frees them depends on the
/// threads' [sections](HandlePool::read). A save first moves the free
/// entries in the threads' caches to the free list (as
/// [`Pool::trim`](crate::Pool::trim) does, and as they move whenever a
/// thread waits), so that the saved pool's next inserts and
/// the loaded pool's both refill their caches from the same list. The
/// loaded pool holds `vacant` on its chain and `free` on its free list, its
/// caches empty and no entry awaiting a grace period.
///
/// So when the save is exact (above) and no entry in use held no value
/// (none awaiting a grace period, removed while read, or reserved), the
/// loaded pool's next inserts ([`insert`](HandlePool::insert),
/// [`insert_mut`](HandlePool::insert_mut), [`reserve`](HandlePool::reserve))
/// on a thread return the keys the saved pool's next inserts on a thread
/// would have, with or without thread caches, and every later operation
/// answers as it would have in the saved pool. (With caches, inserts on
/// several threads take keys in an order that depends on which thread
/// refills first, in either pool.)
///
/// The save reads the free list's order from the links between its
/// entries; in the rare case that it cannot tell which free entries are
/// the list's (another thread moving the list meanwhile, or stale links of
/// cached entries that look like it), it saves every free entry off the
/// chain in index order.
///
/// # Examples
///
/// The tokens of serde's data model (what a format such as JSON writes):
///
/// ```
/// use serde_test::{assert_ser_tokens, Token};
/// use tagpool::HandlePool;
///
/// let mut pool = HandlePool::builder().capacity(4).thread_cache(false).build()?;
/// let a = pool.insert("a").unwrap(); // index 0, generation 1
/// let b = pool.insert("b").unwrap(); // index 1
/// pool.remove_mut(a); // entry 0 at generation 2, on the vacated chain
/// let key = |index: u64, generation: u64| Token::U64(generation << 24 | index);
/// assert_ser_tokens(&pool, &[
///     Token::Struct { name: "HandlePool", len: 7 },
///     Token::Str("capacity"), Token::U64(4),
///     Token::Str("evict"), Token::UnitVariant { name: "Evict", variant: "never" },
///     Token::Str("high"), Token::U32(2),
///     Token::Str("values"), Token::Seq { len: Some(1) },
///     Token::Tuple { len: 2 }, key(1, 1), Token::Str("b"), Token::TupleEnd,
///     Token::SeqEnd,
///     Token::Str("vacant"), Token::Seq { len: Some(1) }, key(0, 2), Token::SeqEnd,
///     // Entries 2 and 3, never used, come next: in index order, unlisted.
///     Token::Str("free"), Token::Seq { len: Some(0) }, Token::SeqEnd,
///     Token::Str("retired"), Token::Seq { len: Some(0) }, Token::SeqEnd,
///     Token::StructEnd,
/// ]);
/// assert_eq!(b.to_bits(), 1 << 24 | 1);
/// # Ok::<(), tagpool::BuildError>(())
/// ```
impl<T: Serialize, K: Key> Serialize for HandlePool<T, K> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let saved = self.snapshot();
        let mut out = serializer.serialize_struct("HandlePool", FIELDS.len())?;
        out.serialize_field("capacity", &(saved.capacity as u64))?;
        out.serialize_field("evict", &saved.evict)?;
        out.serialize_field("high", &saved.high)?;
        out.serialize_field("values", &Values(&saved.values))?;
        out.serialize_field("vacant", &saved.vacant[..])?;
        out.serialize_field("free", &saved.free[..])?;
        out.serialize_field("retired", &saved.retired[..])?;
        out.end()
    }
}

/// The `(key, value)` pairs of a save's counted reads.
struct Values<'s, 'a, T, K>(&'s [Ref<'a, T, K>]);

impl<T: Serialize, K> Serialize for Values<'_, '_, T, K> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|value| (value.handle, &**value)))
    }
}

impl Serialize for Evict {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_unit_variant("Evict", *self as u32, self.name())
    }
}

/// Loads a pool saved by its [`Serialize`], with the saved capacity and
/// eviction policy, no `on_evict`, and the other settings of
/// [`HandlePool::builder`]: see [`HandleBuilder::deserialize_pool`], which
/// this is with a builder of no settings, for what it checks.
///
/// # Errors
///
/// Where the input is no saved pool, or an inconsistent one (see
/// [`deserialize_pool`](HandleBuilder::deserialize_pool)); and where the
/// saved pool evicts by a key function (`min_by_key`), which no save
/// holds: load it with [`deserialize_pool`](HandleBuilder::deserialize_pool).
///
/// # Examples
///
/// ```
/// use serde_test::{assert_de_tokens_error, Token};
/// use tagpool::HandlePool;
///
/// // A pool of capacity 2 whose save says a value is at index 5.
/// assert_de_tokens_error::<HandlePool<u32>>(&[
///     Token::Struct { name: "HandlePool", len: 7 },
///     Token::Str("capacity"), Token::U64(2),
///     Token::Str("evict"), Token::UnitVariant { name: "Evict", variant: "oldest" },
///     Token::Str("high"), Token::U32(1),
///     Token::Str("values"), Token::Seq { len: Some(1) },
///     Token::Tuple { len: 2 }, Token::U64(1 << 24 | 5), Token::U32(7), Token::TupleEnd,
///     Token::SeqEnd,
///     Token::Str("vacant"), Token::Seq { len: Some(0) }, Token::SeqEnd,
///     Token::Str("free"), Token::Seq { len: Some(0) }, Token::SeqEnd,
///     Token::Str("retired"), Token::Seq { len: Some(0) }, Token::SeqEnd,
///     Token::StructEnd,
/// ], "a value at index 5 is beyond the capacity 2");
/// ```
impl<'de, T: Deserialize<'de>, K: Key> Deserialize<'de> for HandlePool<T, K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        HandlePool::builder_with_key().deserialize_pool(deserializer)
    }
}

/// [`HandleBuilder::deserialize_pool`], for a pool inside a type that
/// serde deserializes by seeds.
impl<'de, T: Deserialize<'de>, K: Key> DeserializeSeed<'de> for HandleBuilder<T, K> {
    type Value = HandlePool<T, K>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_struct("HandlePool", FIELDS, Load(self))
    }
}

impl<T, K: Key> HandleBuilder<T, K> {
    /// Loads a pool saved by its [`Serialize`], built by this builder
    /// with the saved capacity: the builder supplies what no save holds,
    /// the closures of [`evict_min_by_key`](HandleBuilder::evict_min_by_key)
    /// and [`on_evict`](HandleBuilder::on_evict), and the per-thread
    /// caches and [`initial`](HandleBuilder::initial) allocation. (A
    /// capacity set on the builder is replaced by the saved one.)
    ///
    /// The builder's eviction policy must be the saved one's kind, or
    /// none: a builder that sets no policy takes the saved `oldest`, and
    /// refuses the saved `min_by_key`, whose key function it lacks.
    ///
    /// The loaded pool holds every saved value under its saved key, its
    /// entries at their saved generations (so a key stale before the save
    /// is stale after it), the retired entries retired, and its free
    /// entries in the saved order of reuse (see [`Serialize`] for when that
    /// order is exact). A pool that evicts the oldest evicts its values in
    /// the saved order.
    ///
    /// # Errors
    ///
    /// A `D::Error` (never a panic) where the input is not a saved pool, or
    /// is an inconsistent one: a capacity of 0 or above
    /// [`MAX_HANDLE_CAPACITY`](crate::MAX_HANDLE_CAPACITY), a high mark
    /// above it, an index at or above the capacity, two values at one
    /// index, an index saved twice (as a value, a free or a retired entry),
    /// an entry below the high mark saved nowhere, a value or a vacated or
    /// retired entry at or above the high mark, a free entry above it at a
    /// generation other than 1, a key of generation 0 (see
    /// [`Handle`]'s `Deserialize`); where the builder's
    /// eviction differs from the saved one (above); and where the builder
    /// fails ([`BuildError`](crate::BuildError), as a message).
    ///
    /// # Examples
    ///
    /// A pool whose eviction needs a key function, inside a type of the
    /// caller's:
    ///
    /// ```
    /// use serde::{Deserialize, Deserializer};
    /// use serde_test::{assert_de_tokens, Token};
    /// use tagpool::{HandlePool, Ref};
    ///
    /// /// Sounds by volume: a full pool stops the quietest.
    /// struct Voices(HandlePool<u32>);
    ///
    /// impl<'de> Deserialize<'de> for Voices {
    ///     fn deserialize<D: Deserializer<'de>>(saved: D) -> Result<Self, D::Error> {
    ///         let builder = HandlePool::builder().evict_min_by_key(|volume: &u32| *volume);
    ///         builder.deserialize_pool(saved).map(Voices)
    ///     }
    /// }
    /// # impl PartialEq for Voices {
    /// #     fn eq(&self, other: &Self) -> bool {
    /// #         let live = |p: &HandlePool<u32>| -> Vec<_> { p.iter().map(|r| (Ref::handle(&r), *r)).collect() };
    /// #         self.0.capacity() == other.0.capacity() && live(&self.0) == live(&other.0)
    /// #     }
    /// # }
    /// # impl std::fmt::Debug for Voices {
    /// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { self.0.fmt(f) }
    /// # }
    ///
    /// let voices = Voices(HandlePool::builder().capacity(2).evict_min_by_key(|v: &u32| *v).build()?);
    /// voices.0.insert(70).unwrap();
    /// // Its save, as serde's data model has it (`assert_ser_tokens(&voices.0, ..)`
    /// // passes), loads an equal pool.
    /// assert_de_tokens(&voices, &[
    ///     Token::Struct { name: "HandlePool", len: 7 },
    ///     Token::Str("capacity"), Token::U64(2),
    ///     Token::Str("evict"), Token::UnitVariant { name: "Evict", variant: "min_by_key" },
    ///     Token::Str("high"), Token::U32(1),
    ///     Token::Str("values"), Token::Seq { len: Some(1) },
    ///     Token::Tuple { len: 2 }, Token::U64(1 << 24), Token::U32(70), Token::TupleEnd,
    ///     Token::SeqEnd,
    ///     Token::Str("vacant"), Token::Seq { len: Some(0) }, Token::SeqEnd,
    ///     Token::Str("free"), Token::Seq { len: Some(0) }, Token::SeqEnd,
    ///     Token::Str("retired"), Token::Seq { len: Some(0) }, Token::SeqEnd,
    ///     Token::StructEnd,
    /// ]);
    /// # Ok::<(), tagpool::BuildError>(())
    /// ```
    pub fn deserialize_pool<'de, D>(self, deserializer: D) -> Result<HandlePool<T, K>, D::Error>
    where
        D: Deserializer<'de>,
        T: Deserialize<'de>,
    {
        DeserializeSeed::deserialize(self, deserializer)
    }
}

/// The `Visitor` of a saved pool, with the builder that makes it.
struct Load<T, K>(HandleBuilder<T, K>);

impl<'de, T: Deserialize<'de>, K: Key> Visitor<'de> for Load<T, K> {
    type Value = HandlePool<T, K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a saved handle pool")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        /// The next field, or an error naming how many came.
        fn next<'de, A: SeqAccess<'de>, F: Deserialize<'de>>(
            seq: &mut A,
            at: usize,
        ) -> Result<F, A::Error> {
            seq.next_element()?
                .ok_or_else(|| A::Error::invalid_length(at, &"a saved handle pool of 7 fields"))
        }
        let saved = Saved {
            capacity: next(&mut seq, 0)?,
            evict: next(&mut seq, 1)?,
            high: next(&mut seq, 2)?,
            values: next::<A, Many<(Handle, T)>>(&mut seq, 3)?.0,
            vacant: next::<A, Many<Handle>>(&mut seq, 4)?.0,
            free: next::<A, Many<Handle>>(&mut seq, 5)?.0,
            retired: next::<A, Many<u32>>(&mut seq, 6)?.0,
        };
        saved.load(self.0).map_err(A::Error::custom)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut capacity = None;
        let mut evict = None;
        let mut high = None;
        let mut values = None;
        let mut vacant = None;
        let mut free = None;
        let mut retired = None;
        while let Some(field) = map.next_key_seed(Name(FIELDS))? {
            /// Reads a field's value into `slot`: an error if it came twice.
            fn read<'de, A: MapAccess<'de>, F: Deserialize<'de>>(
                map: &mut A,
                slot: &mut Option<F>,
                name: &'static str,
            ) -> Result<(), A::Error> {
                if slot.is_some() {
                    return Err(A::Error::duplicate_field(name));
                }
                *slot = Some(map.next_value()?);
                Ok(())
            }
            match field {
                Some(0) => read(&mut map, &mut capacity, FIELDS[0])?,
                Some(1) => read(&mut map, &mut evict, FIELDS[1])?,
                Some(2) => read(&mut map, &mut high, FIELDS[2])?,
                Some(3) => read::<A, Many<(Handle, T)>>(&mut map, &mut values, FIELDS[3])?,
                Some(4) => read::<A, Many<Handle>>(&mut map, &mut vacant, FIELDS[4])?,
                Some(5) => read::<A, Many<Handle>>(&mut map, &mut free, FIELDS[5])?,
                Some(_) => read::<A, Many<u32>>(&mut map, &mut retired, FIELDS[6])?,
                // A field of another version: skipped.
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        /// A field that must have come.
        fn got<F, E: Error>(slot: Option<F>, name: &'static str) -> Result<F, E> {
            slot.ok_or_else(|| E::missing_field(name))
        }
        let saved = Saved {
            capacity: got(capacity, FIELDS[0])?,
            evict: got(evict, FIELDS[1])?,
            high: got(high, FIELDS[2])?,
            values: got(values, FIELDS[3])?.0,
            vacant: got(vacant, FIELDS[4])?.0,
            free: got(free, FIELDS[5])?.0,
            retired: got(retired, FIELDS[6])?.0,
        };
        saved.load(self.0).map_err(A::Error::custom)
    }
}

/// The most elements that a sequence's size hint reserves room for, before
/// they arrive (a hint is not to be trusted with memory).
const MAX_RESERVED: usize = 4096;

/// The elements of a sequence.
struct Many<E>(Vec<E>);

impl<'de, E: Deserialize<'de>> Deserialize<'de> for Many<E> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The sequence's visitor.
        struct Elements<E>(PhantomData<fn() -> E>);

        impl<'de, E: Deserialize<'de>> Visitor<'de> for Elements<E> {
            type Value = Many<E>;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Many<E>, A::Error> {
                let mut all = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_RESERVED));
                while let Some(element) = seq.next_element()? {
                    all.push(element);
                }
                Ok(Many(all))
            }
        }

        deserializer.deserialize_seq(Elements(PhantomData))
    }
}

/// An identifier among `names` (a field or a variant): its position, or
/// `None` for another one.
struct Name(&'static [&'static str]);

impl<'de> DeserializeSeed<'de> for Name {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for Name {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an identifier")
    }

    fn visit_u64<E: Error>(self, index: u64) -> Result<Option<usize>, E> {
        Ok(Some(index as usize).filter(|&index| index < self.0.len()))
    }

    fn visit_str<E: Error>(self, name: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|&known| known == name))
    }

    fn visit_bytes<E: Error>(self, name: &[u8]) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|&known| known.as_bytes() == name))
    }
}

impl<'de> Deserialize<'de> for Evict {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The enum's visitor.
        struct Kind;

        impl<'de> Visitor<'de> for Kind {
            type Value = Evict;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an eviction kind: `never`, `oldest` or `min_by_key`")
            }

            fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Evict, A::Error> {
                let (kind, variant) = data.variant_seed(Name(Evict::NAMES))?;
                variant.unit_variant()?;
                match kind {
                    Some(0) => Ok(Evict::Never),
                    Some(1) => Ok(Evict::Oldest),
                    Some(_) => Ok(Evict::MinByKey),
                    None => Err(A::Error::custom(
                        "unknown eviction kind, expected `never`, `oldest` or `min_by_key`",
                    )),
                }
            }
        }

        deserializer.deserialize_enum("Evict", Evict::NAMES, Kind)
    }
}
