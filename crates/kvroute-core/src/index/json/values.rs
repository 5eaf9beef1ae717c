//! The scalar shapes of Dynamo's event JSON, deserialised exactly: a u64 is an integer literal in
//! range or a decimal string (hashes above 2^53 travel both ways); a float literal is never read
//! as an integer, even when its value is one (`45.0`, `1e3`, `45.000000000000001`).

use serde::de::{self, Deserializer, Visitor};
use serde::Deserialize;
use std::fmt;

/// Longest decimal string accepted (leading zeros included): a megabyte of zeros stays cheap.
const DECIMAL_MAX_LENGTH: usize = 256;
/// Largest integer an offset may be: the pure-JS twin holds offsets as doubles.
const SAFE_INTEGER_MAX: u64 = (1 << 53) - 1;

fn decimal(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > DECIMAL_MAX_LENGTH || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let significant = s.trim_start_matches('0');
    if significant.is_empty() {
        return Some(0);
    }
    if significant.len() > 20 {
        return None;
    }
    significant.parse().ok()
}

/// What the TypeScript validator says about a bad u64, so both backends word it alike.
pub(super) const MUST_BE_U64: &str = "must be a u64 (a non-negative safe integer, a bigint or a decimal string)";
/// What it says about a bad u32 (a `dp_rank`), whatever the fault.
const MUST_BE_U32: &str = "must be an integer in [0, 2^32)";

/// A string as the TypeScript validator's `describe` shows it: JSON-quoted, cut after 40 UTF-16
/// code units with "..." (a cut through a surrogate pair leaves its first half, escaped).
pub fn js_quoted(v: &str) -> String {
    let units: Vec<u16> = v.encode_utf16().collect();
    if units.len() <= 40 {
        return serde_json::to_string(v).unwrap_or_default();
    }
    let cut = &units[..40];
    let (whole, half) = match cut.last() {
        Some(&u) if (0xd800..0xdc00).contains(&u) => (&cut[..39], format!("\\u{u:04x}")),
        _ => (cut, String::new()),
    };
    let quoted = serde_json::to_string(&format!("{}...", String::from_utf16_lossy(whole))).unwrap_or_default();
    if half.is_empty() {
        return quoted;
    }
    // The half goes before the "..." as JavaScript leaves it: `"…\ud83d..."`.
    let body = &quoted[1..quoted.len() - 4];
    format!("\"{body}{half}...\"")
}

/// "must be …, got …": errors in the validator's words (`mod.rs` puts the field path first).
pub fn must_be<E: de::Error>(what: &str, got: impl fmt::Display) -> E {
    E::custom(format!("{what}, got {got}"))
}

/// An integer in [0, `MAX`] as an integer literal or a decimal string, its faults worded as the
/// validator words them for a u64 or a u32. A constant, not a field: the u64 visitor, on every
/// hash of every event, stays a zero-sized type whose range check compiles away.
struct IntVisitor<const MAX: u64>;

impl<const MAX: u64> IntVisitor<MAX> {
    const WORDS: &'static str = if MAX == u64::MAX { MUST_BE_U64 } else { MUST_BE_U32 };
}

impl<'de, const MAX: u64> Visitor<'de> for IntVisitor<MAX> {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(Self::WORDS)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
        if v <= MAX {
            Ok(v)
        } else {
            Err(must_be(Self::WORDS, v))
        }
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).ok().filter(|&v| v <= MAX).ok_or_else(|| must_be(Self::WORDS, v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<u64, E> {
        Err(must_be(Self::WORDS, format_args!("{v} (a float)")))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<u64, E> {
        Err(must_be(Self::WORDS, v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<u64, E> {
        Err(must_be(Self::WORDS, "null"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<u64, E> {
        decimal(v).filter(|&n| n <= MAX).ok_or_else(|| must_be(Self::WORDS, js_quoted(v)))
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, _: A) -> Result<u64, A::Error> {
        Err(must_be(Self::WORDS, "an array"))
    }

    fn visit_map<A: de::MapAccess<'de>>(self, _: A) -> Result<u64, A::Error> {
        Err(must_be(Self::WORDS, "an object"))
    }
}

/// A u64 as an integer literal or a decimal string.
#[derive(Debug, Clone, Copy)]
pub struct U64(pub u64);

impl<'de> Deserialize<'de> for U64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(IntVisitor::<{ u64::MAX }>).map(U64)
    }
}

/// A u32 as an integer literal or a decimal string.
#[derive(Debug, Clone, Copy)]
pub struct U32(pub u32);

impl<'de> Deserialize<'de> for U32 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = d.deserialize_any(IntVisitor::<{ u32::MAX as u64 }>)?;
        Ok(U32(u32::try_from(v).unwrap_or(u32::MAX)))
    }
}

/// A non-negative integer literal no larger than 2^53 − 1 (multimodal offsets).
#[derive(Debug, Clone, Copy)]
pub struct Offset(#[allow(dead_code)] pub u64);

impl<'de> Deserialize<'de> for Offset {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = u64;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a non-negative safe integer")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<u64, E> {
                if v <= SAFE_INTEGER_MAX {
                    Ok(v)
                } else {
                    Err(E::invalid_value(de::Unexpected::Unsigned(v), &self))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<u64, E> {
                u64::try_from(v)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
                    .and_then(|v| self.visit_u64(v))
            }
        }
        d.deserialize_any(V).map(Offset)
    }
}

/// Any JSON value, checked only for duplicate keys at every depth: the TypeScript parser rejects
/// a document whose objects repeat a key (it would mean two things), so this side does too.
pub struct AnyValue;

impl<'de> Deserialize<'de> for AnyValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(AnyVisitor)
    }
}

struct AnyVisitor;

impl<'de> Visitor<'de> for AnyVisitor {
    type Value = AnyValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }
    fn visit_unit<E: de::Error>(self) -> Result<AnyValue, E> {
        Ok(AnyValue)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<AnyValue, A::Error> {
        while seq.next_element::<AnyValue>()?.is_some() {}
        Ok(AnyValue)
    }

    fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<AnyValue, A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<AnyValue>()?;
            if !keys.insert(key.clone()) {
                return Err(de::Error::custom(format!("duplicate key \"{key}\"")));
            }
        }
        Ok(AnyValue)
    }
}

/// A field that must be present but may be null (`parent_hash`): `deserialize_with` turns off
/// serde's implicit default for `Option`.
pub fn required_nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u64_of(text: &str) -> Result<u64, String> {
        serde_json::from_str::<U64>(text).map(|v| v.0).map_err(|e| e.to_string())
    }

    #[test]
    fn u64_reads_integers_and_decimal_strings_exactly() {
        assert_eq!(u64_of("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(u64_of("\"18446744073709551615\""), Ok(u64::MAX));
        assert_eq!(u64_of("\"0000000000000000000000000042\""), Ok(42));
    }

    #[test]
    fn u64_rejects_floats_negatives_and_overflow() {
        for text in [
            "45.000000000000001",
            "45.0",
            "1e3",
            "-1",
            "-0",
            "18446744073709551616",
            "\"18446744073709551616\"",
            "\"\"",
            "\"1 \"",
        ] {
            assert!(u64_of(text).is_err(), "{text} must be rejected");
        }
    }
}
