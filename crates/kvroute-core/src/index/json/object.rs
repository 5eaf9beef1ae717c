//! Objects only. serde's derived struct deserializers also take a JSON array holding the fields
//! in order, which the TypeScript validator rightly refuses (`must be an object, got an array`):
//! without this wrapper the native backend accepted `[[1, null, {"event_id": 1, "data":
//! "cleared"}, null, null, null]]` as an event. `Obj<T>` takes a JSON object and nothing else,
//! and words the refusal as the validator does.

use super::values::must_be;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::fmt;
use std::marker::PhantomData;

/// A `T` read from a JSON object only.
pub struct Obj<T>(pub T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ObjVisitor(PhantomData))
    }
}

const MUST_BE_OBJECT: &str = "must be an object";

struct ObjVisitor<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
    type Value = Obj<T>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Obj<T>, A::Error> {
        T::deserialize(MapAccessDeserializer::new(map)).map(Obj)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Obj<T>, A::Error> {
        Err(must_be(MUST_BE_OBJECT, "an array"))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Obj<T>, E> {
        Err(must_be(MUST_BE_OBJECT, v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Obj<T>, E> {
        Err(must_be(MUST_BE_OBJECT, v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Obj<T>, E> {
        // The validator shows an integral float literal as written, marked; `{v:?}` keeps ".0".
        if v.fract() == 0.0 {
            Err(must_be(MUST_BE_OBJECT, format_args!("{v:?} (a float)")))
        } else {
            Err(must_be(MUST_BE_OBJECT, v))
        }
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Obj<T>, E> {
        Err(must_be(MUST_BE_OBJECT, v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Obj<T>, E> {
        Err(must_be(MUST_BE_OBJECT, "null"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Obj<T>, E> {
        Err(must_be(MUST_BE_OBJECT, format_args!("{v:?}")))
    }
}
