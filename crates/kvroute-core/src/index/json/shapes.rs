//! Dynamo's `RouterEvent` JSON (as `ts/events/validate.ts` accepts it), as serde types: unknown
//! fields and duplicate keys are errors, required fields must be present, and every value is
//! checked by its type, so a document that deserialises is a valid event.

use super::object::Obj;
use super::values::{js_quoted, must_be, required_nullable, AnyValue, Offset, U32, U64};
use crate::tiers::LowerTier;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::Deserialize;
use std::fmt;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonEvent {
    pub worker_id: U64,
    #[serde(default)]
    pub storage_tier: Option<Tier>,
    pub event: Obj<JsonCacheEvent>,
    #[serde(default)]
    pub residency_domain: Option<String>,
    /// Informational in Dynamo; any value.
    #[serde(default)]
    #[allow(dead_code)]
    pub state_source: Option<AnyValue>,
    #[serde(default)]
    #[allow(dead_code)]
    pub session_id: Option<String>,
}

#[derive(PartialEq, Eq, Clone, Copy)]
pub enum Tier {
    Device,
    HostPinned,
    Disk,
    External,
}

/// A `storage_tier` other than the four, in the validator's words.
const MUST_BE_TIER: &str = "must be one of device, host_pinned, disk, external";

impl<'de> Deserialize<'de> for Tier {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'v> Visitor<'v> for V {
            type Value = Tier;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(MUST_BE_TIER)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Tier, E> {
                match v {
                    "device" => Ok(Tier::Device),
                    "host_pinned" => Ok(Tier::HostPinned),
                    "disk" => Ok(Tier::Disk),
                    "external" => Ok(Tier::External),
                    _ => Err(must_be(MUST_BE_TIER, js_quoted(v))),
                }
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Tier, E> {
                Err(must_be(MUST_BE_TIER, v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Tier, E> {
                Err(must_be(MUST_BE_TIER, v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Tier, E> {
                Err(must_be(MUST_BE_TIER, v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Tier, E> {
                Err(must_be(MUST_BE_TIER, v))
            }
            fn visit_seq<A: de::SeqAccess<'v>>(self, _: A) -> Result<Tier, A::Error> {
                Err(must_be(MUST_BE_TIER, "an array"))
            }
            fn visit_map<A: MapAccess<'v>>(self, _: A) -> Result<Tier, A::Error> {
                Err(must_be(MUST_BE_TIER, "an object"))
            }
        }
        d.deserialize_any(V)
    }
}

impl Tier {
    /// The lower tier this names; `None` for device memory.
    pub fn lower(self) -> Option<LowerTier> {
        match self {
            Tier::Device => None,
            Tier::HostPinned => Some(LowerTier::HostPinned),
            Tier::Disk => Some(LowerTier::Disk),
            Tier::External => Some(LowerTier::External),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonCacheEvent {
    pub event_id: U64,
    #[serde(default)]
    pub dp_rank: Option<U32>,
    pub data: JsonData,
}

/// `{"stored": …}`, `{"removed": …}` or the string `"cleared"`, exactly as the TypeScript
/// validator reads it (serde's own enum form would also take `{"cleared": null}`).
const MUST_BE_DATA: &str = r#"must be {stored}, {removed} or "cleared""#;
/// An object of `data` with no key, or more than one.
const MUST_HAVE_ONE: &str = r#"must have exactly one of "stored" or "removed""#;

pub enum JsonData {
    Stored(JsonStored),
    Removed(JsonRemoved),
    Cleared,
}

impl<'de> Deserialize<'de> for JsonData {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = JsonData;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str(r#"{"stored": …}, {"removed": …} or "cleared""#)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<JsonData, E> {
                if v == "cleared" {
                    Ok(JsonData::Cleared)
                } else {
                    Err(must_be(MUST_BE_DATA, js_quoted(v)))
                }
            }
            // The other shapes, in the validator's words.
            fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<JsonData, A::Error> {
                Err(must_be(MUST_BE_DATA, "an array"))
            }
            fn visit_unit<E: de::Error>(self) -> Result<JsonData, E> {
                Err(must_be(MUST_BE_DATA, "null"))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<JsonData, E> {
                Err(must_be(MUST_BE_DATA, v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<JsonData, E> {
                Err(must_be(MUST_BE_DATA, v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<JsonData, E> {
                Err(must_be(MUST_BE_DATA, v))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<JsonData, A::Error> {
                let Some(variant) = map.next_key::<String>()? else {
                    return Err(must_be(MUST_HAVE_ONE, js_quoted("")));
                };
                let data = match variant.as_str() {
                    "stored" => JsonData::Stored(map.next_value::<Obj<JsonStored>>()?.0),
                    "removed" => JsonData::Removed(map.next_value::<Obj<JsonRemoved>>()?.0),
                    other => {
                        return Err(de::Error::custom(format!(
                            r#"has an unknown variant "{other}" (expected stored, removed or "cleared")"#
                        )))
                    }
                };
                if let Some(next) = map.next_key::<String>()? {
                    // Named as the validator names them: every key, in order.
                    let mut keys = vec![variant, next];
                    map.next_value::<IgnoredAny>()?;
                    while let Some(key) = map.next_key::<String>()? {
                        map.next_value::<IgnoredAny>()?;
                        keys.push(key);
                    }
                    return Err(must_be(MUST_HAVE_ONE, js_quoted(&keys.join(", "))));
                }
                Ok(data)
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonStored {
    #[serde(deserialize_with = "required_nullable")]
    pub parent_hash: Option<U64>,
    #[serde(default)]
    #[allow(dead_code)]
    pub start_position: Option<U32>,
    pub blocks: Vec<Obj<JsonBlock>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonBlock {
    pub block_hash: U64,
    pub tokens_hash: U64,
    #[serde(default)]
    #[allow(dead_code)]
    pub mm_extra_info: Option<Obj<JsonMmInfo>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonMmInfo {
    #[allow(dead_code)]
    pub mm_objects: Vec<Obj<JsonMmObject>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonMmObject {
    #[allow(dead_code)]
    pub mm_hash: U64,
    #[allow(dead_code)]
    pub offsets: Vec<(Offset, Offset)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JsonRemoved {
    pub block_hashes: Vec<U64>,
}
