//! The `serde` feature: a [`Handle`] serializes as its 64 bits, a `u64`
//! (the typed keys of [`new_key_type!`](crate::new_key_type) as their
//! handle's, through `__key_serde!`).

use serde::de::{Deserialize, Deserializer, Error, Unexpected};
use serde::ser::{Serialize, Serializer};

use super::Handle;

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
