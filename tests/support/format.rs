//! A small self-describing serde format, shared by `tests/serde_pool.rs`
//! and `examples/ecs.rs` (which include it by `#[path]`: it needs the
//! `serde` feature, so it is no module of `support/mod.rs`): a value
//! serializes to a [`Value`] tree, and a `Value` is a `Deserializer` that
//! reads it back. serde_test checks tokens but does not read them back,
//! and serde_json needs a newer Rust than the MSRV (1.63).
//!
//! Structs serialize as a map of named fields (JSON's way), or as a
//! sequence with `Save { seq: true }` (bincode's). Unsigned and signed
//! integers, strings, unit variants, sequences, tuples and structs are in
//! the format; the rest of serde's data model is an error.

use serde::de::value::{MapDeserializer, SeqDeserializer, StrDeserializer};
use serde::de::{IntoDeserializer, Visitor};
use serde::ser::{self, Impossible, Serialize};
use serde::{forward_to_deserialize_any, Deserializer};

pub(crate) use serde::de::value::Error;

/// A saved value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    U64(u64),
    I64(i64),
    Str(String),
    /// A unit variant.
    Variant(&'static str),
    Seq(Vec<Value>),
    /// A struct's fields, by name.
    Map(Vec<(String, Value)>),
}

/// The serializer of the format; structs as sequences with `seq`.
pub(crate) struct Save {
    /// Whether structs serialize as sequences, not maps of named fields.
    pub(crate) seq: bool,
}

/// A sequence, tuple or struct being serialized.
pub(crate) struct Fields {
    seq: bool,
    values: Vec<Value>,
    names: Vec<String>,
}

fn unsupported<T>() -> Result<T, Error> {
    Err(ser::Error::custom("not in the format"))
}

/// Serializer methods of one argument that the format does not take.
macro_rules! unsupported {
    ($($name:ident($ty:ty)),* $(,)?) => {
        $(fn $name(self, _: $ty) -> Result<Value, Error> {
            unsupported()
        })*
    };
}

impl ser::Serializer for Save {
    type Ok = Value;
    type Error = Error;
    type SerializeSeq = Fields;
    type SerializeTuple = Fields;
    type SerializeTupleStruct = Impossible<Value, Error>;
    type SerializeTupleVariant = Impossible<Value, Error>;
    type SerializeMap = Impossible<Value, Error>;
    type SerializeStruct = Fields;
    type SerializeStructVariant = Impossible<Value, Error>;

    unsupported! {
        serialize_bool(bool), serialize_f32(f32), serialize_f64(f64), serialize_char(char),
        serialize_bytes(&[u8]), serialize_unit_struct(&'static str),
    }
    fn serialize_i8(self, v: i8) -> Result<Value, Error> {
        Ok(Value::I64(v.into()))
    }
    fn serialize_i16(self, v: i16) -> Result<Value, Error> {
        Ok(Value::I64(v.into()))
    }
    fn serialize_i32(self, v: i32) -> Result<Value, Error> {
        Ok(Value::I64(v.into()))
    }
    fn serialize_i64(self, v: i64) -> Result<Value, Error> {
        Ok(Value::I64(v))
    }
    fn serialize_u8(self, v: u8) -> Result<Value, Error> {
        Ok(Value::U64(v.into()))
    }
    fn serialize_u16(self, v: u16) -> Result<Value, Error> {
        Ok(Value::U64(v.into()))
    }
    fn serialize_u32(self, v: u32) -> Result<Value, Error> {
        Ok(Value::U64(v.into()))
    }
    fn serialize_u64(self, v: u64) -> Result<Value, Error> {
        Ok(Value::U64(v))
    }
    fn serialize_str(self, v: &str) -> Result<Value, Error> {
        Ok(Value::Str(v.to_owned()))
    }
    fn serialize_none(self) -> Result<Value, Error> {
        unsupported()
    }
    fn serialize_some<T: ?Sized + Serialize>(self, _: &T) -> Result<Value, Error> {
        unsupported()
    }
    fn serialize_unit(self) -> Result<Value, Error> {
        unsupported()
    }
    fn serialize_unit_variant(
        self,
        _: &'static str,
        _: u32,
        v: &'static str,
    ) -> Result<Value, Error> {
        Ok(Value::Variant(v))
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: &T,
    ) -> Result<Value, Error> {
        unsupported()
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: &T,
    ) -> Result<Value, Error> {
        unsupported()
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Fields, Error> {
        Ok(Fields::new(true))
    }
    fn serialize_tuple(self, _: usize) -> Result<Fields, Error> {
        Ok(Fields::new(true))
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleStruct, Error> {
        unsupported()
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, Error> {
        unsupported()
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, Error> {
        unsupported()
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Fields, Error> {
        Ok(Fields::new(self.seq))
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, Error> {
        unsupported()
    }
}

impl Fields {
    fn new(seq: bool) -> Self {
        Self {
            seq,
            values: Vec::new(),
            names: Vec::new(),
        }
    }

    fn push<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.values.push(value.serialize(Save { seq: self.seq })?);
        Ok(())
    }

    fn done(self) -> Value {
        if self.names.is_empty() || self.seq {
            Value::Seq(self.values)
        } else {
            Value::Map(self.names.into_iter().zip(self.values).collect())
        }
    }
}

impl ser::SerializeSeq for Fields {
    type Ok = Value;
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.push(value)
    }
    fn end(self) -> Result<Value, Error> {
        Ok(self.done())
    }
}

impl ser::SerializeTuple for Fields {
    type Ok = Value;
    type Error = Error;
    fn serialize_element<T: ?Sized + Serialize>(&mut self, value: &T) -> Result<(), Error> {
        self.push(value)
    }
    fn end(self) -> Result<Value, Error> {
        Ok(self.done())
    }
}

impl ser::SerializeStruct for Fields {
    type Ok = Value;
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        name: &'static str,
        value: &T,
    ) -> Result<(), Error> {
        self.names.push(name.to_owned());
        self.push(value)
    }
    fn end(self) -> Result<Value, Error> {
        Ok(self.done())
    }
}

impl<'de> Deserializer<'de> for Value {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self {
            Value::U64(v) => visitor.visit_u64(v),
            Value::I64(v) => visitor.visit_i64(v),
            Value::Str(v) => visitor.visit_string(v),
            Value::Variant(v) => visitor.visit_str(v),
            Value::Seq(values) => {
                let mut seq = SeqDeserializer::new(values.into_iter());
                let out = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(out)
            }
            Value::Map(fields) => {
                let mut map = MapDeserializer::new(fields.into_iter());
                let out = visitor.visit_map(&mut map)?;
                map.end()?;
                Ok(out)
            }
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self {
            Value::Variant(v) => visitor.visit_enum(StrDeserializer::<Error>::new(v)),
            other => other.deserialize_any(visitor),
        }
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

impl<'de> IntoDeserializer<'de, Error> for Value {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}
