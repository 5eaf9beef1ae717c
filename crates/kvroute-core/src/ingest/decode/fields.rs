//! Readers of the values inside an event (strings, integers, hashes, token lists, extra keys),
//! each checking its type and reporting a lazily formatted path on failure.

use super::super::msgpack::{Item, Malformed, Reader};
use super::super::types::{DecodeNotes, ExtraKey};
use std::fmt::Display;

/// A decode failure: where in the batch, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

pub(super) type Result<T> = std::result::Result<T, DecodeError>;
pub(super) type Path<'a> = &'a dyn Display;

pub(super) fn fail<T>(path: Path<'_>, what: impl Display) -> Result<T> {
    Err(DecodeError(format!("{path}: {what}")))
}

pub(super) fn malformed(e: Malformed) -> DecodeError {
    DecodeError(format!("payload is not msgpack: {}", e.0))
}

/// The reader with errors mapped to [`DecodeError`].
pub(super) struct In<'a> {
    pub(super) r: Reader<'a>,
}

impl<'a> In<'a> {
    pub(super) fn item(&mut self) -> Result<Item<'a>> {
        self.r.item().map_err(malformed)
    }

    pub(super) fn skip_body(&mut self, item: Item<'_>, depth: u32) -> Result<()> {
        self.r.skip_body(item, depth).map_err(malformed)
    }

    pub(super) fn skip(&mut self, depth: u32) -> Result<()> {
        self.r.skip(depth).map_err(malformed)
    }
}

pub(super) fn utf8<'a>(bytes: &'a [u8], path: Path<'_>) -> Result<&'a str> {
    std::str::from_utf8(bytes).or_else(|_| fail(path, "is not UTF-8"))
}

/// Level of an event's fields (batch 1, events 2, event 3).
pub(super) const FIELD: u32 = 4;

pub(super) fn text_item(item: Item<'_>, path: Path<'_>) -> Result<Option<String>> {
    match item {
        Item::Nil => Ok(None),
        Item::Str(s) => Ok(Some(utf8(s, path)?.to_owned())),
        other => fail(path, format!("expected a string, got {}", other.type_name())),
    }
}

pub(super) fn opt_text(r: &mut In<'_>, path: Path<'_>) -> Result<Option<String>> {
    let item = r.item()?;
    if matches!(item, Item::Array(_) | Item::Map(_)) {
        r.skip_body(item, FIELD)?;
    }
    text_item(item, path)
}

pub(super) fn uint_item(item: Item<'_>, path: Path<'_>) -> Result<u64> {
    match item {
        Item::Uint(u) => Ok(u),
        Item::Int(_) => fail(path, "must not be negative"),
        other => fail(path, format!("expected an unsigned integer, got {}", other.type_name())),
    }
}

/// An optional unsigned field (nil = absent).
pub(super) fn opt_uint(r: &mut In<'_>, path: Path<'_>) -> Result<Option<u64>> {
    match r.item()? {
        Item::Nil => Ok(None),
        item @ (Item::Array(_) | Item::Map(_)) => {
            r.skip_body(item, FIELD)?;
            uint_item(item, path).map(Some)
        }
        item => uint_item(item, path).map(Some),
    }
}

pub(super) fn opt_int(r: &mut In<'_>, path: Path<'_>) -> Result<Option<i128>> {
    match r.item()? {
        Item::Nil => Ok(None),
        Item::Uint(u) => Ok(Some(i128::from(u))),
        Item::Int(i) => Ok(Some(i128::from(i))),
        item => {
            r.skip_body(item, FIELD)?;
            fail(path, format!("expected an integer, got {}", item.type_name()))
        }
    }
}

/// One engine hash as u64: unsigned as is, signed (SGLang) bit-cast, bytes (vLLM bytes mode)
/// folded to their last 8 bytes big-endian, which is exactly the int-mode value of the same
/// digest, so both modes give a block one identity.
pub(super) fn hash_item(item: Item<'_>, path: Path<'_>, notes: &mut DecodeNotes) -> Result<u64> {
    match item {
        Item::Uint(u) => Ok(u),
        Item::Int(i) => Ok(i as u64),
        Item::Bin(b) if !b.is_empty() => {
            if b.len() == 32 {
                notes.folded_hashes += 1;
            } else {
                notes.odd_length_hashes += 1;
            }
            let tail = &b[b.len().saturating_sub(8)..];
            Ok(tail.iter().fold(0u64, |acc, &byte| (acc << 8) | u64::from(byte)))
        }
        other => fail(path, format!("expected an integer or bytes hash, got {}", other.type_name())),
    }
}

pub(super) fn opt_hash(r: &mut In<'_>, path: Path<'_>, notes: &mut DecodeNotes) -> Result<Option<u64>> {
    match r.item()? {
        Item::Nil => Ok(None),
        item @ (Item::Array(_) | Item::Map(_)) => {
            r.skip_body(item, FIELD)?;
            hash_item(item, path, notes).map(Some)
        }
        item => hash_item(item, path, notes).map(Some),
    }
}

pub(super) fn hashes_body(r: &mut In<'_>, item: Item<'_>, path: Path<'_>, notes: &mut DecodeNotes) -> Result<Vec<u64>> {
    let Item::Array(n) = item else {
        r.skip_body(item, FIELD)?;
        return fail(path, format!("expected an array, got {}", item.type_name()));
    };
    let mut out = Vec::with_capacity((n as usize).min(r.r.remaining()));
    for i in 0..n {
        if let Some(u) = r.r.uint() {
            out.push(u);
            continue;
        }
        let h = r.item()?;
        if matches!(h, Item::Array(_) | Item::Map(_)) {
            r.skip_body(h, FIELD + 1)?;
        }
        out.push(hash_item(h, &format_args!("{path}[{i}]"), notes)?);
    }
    Ok(out)
}

pub(super) fn token_item(item: Item<'_>, path: Path<'_>) -> Result<u32> {
    match item {
        Item::Uint(u) => u32::try_from(u).or_else(|_| fail(path, "token id must be in [0, 2^32)")),
        Item::Int(_) => fail(path, "token id must be in [0, 2^32)"),
        other => fail(path, format!("expected a token id, got {}", other.type_name())),
    }
}

/// Token ids, or Eagle bigram pairs `[[t0, t1], [t1, t2], …]` flattened to `t0, t1, …, tn`.
pub(super) fn tokens_body(r: &mut In<'_>, item: Item<'_>, path: Path<'_>) -> Result<(Vec<u32>, bool)> {
    let Item::Array(n) = item else {
        r.skip_body(item, FIELD)?;
        return fail(path, format!("expected an array, got {}", item.type_name()));
    };
    let mut out = Vec::with_capacity((n as usize + 1).min(r.r.remaining() + 1));
    let mut eagle = false;
    for i in 0..n {
        if !eagle {
            // `uint` has consumed the value when it returns one: an id past u32 fails here, or
            // the next item would be read as this token and the rest of the event misparsed.
            if let Some(u) = r.r.uint() {
                let Ok(id) = u32::try_from(u) else {
                    return fail(&format_args!("{path}[{i}]"), "token id must be in [0, 2^32)");
                };
                out.push(id);
                continue;
            }
        }
        let t = r.item()?;
        match t {
            Item::Uint(u) if u <= u64::from(u32::MAX) && !eagle => out.push(u as u32),
            Item::Array(len) if i == 0 || eagle => {
                eagle = true;
                let at = &format_args!("{path}[{i}]");
                if len != 2 {
                    r.skip_body(t, FIELD + 1)?;
                    return fail(at, format!("a bigram pair has 2 tokens, got {len}"));
                }
                let first = r.item()?;
                r.skip_body(first, FIELD + 2)?;
                out.push(token_item(first, &format_args!("{at}[0]"))?);
                let second = r.item()?;
                r.skip_body(second, FIELD + 2)?;
                let second = token_item(second, &format_args!("{at}[1]"))?;
                if i + 1 == n {
                    out.push(second);
                }
            }
            _ if eagle => {
                r.skip_body(t, FIELD + 1)?;
                return fail(&format_args!("{path}[{i}]"), "mixes pairs and token ids");
            }
            Item::Array(_) => {
                r.skip_body(t, FIELD + 1)?;
                return fail(&format_args!("{path}[{i}]"), "mixes pairs and token ids");
            }
            other => {
                r.skip_body(other, FIELD + 1)?;
                out.push(token_item(other, &format_args!("{path}[{i}]"))?);
            }
        }
    }
    Ok((out, eagle))
}

pub(super) fn extra_key(r: &mut In<'_>, depth: u32, path: Path<'_>) -> Result<ExtraKey> {
    Ok(match r.item()? {
        Item::Str(s) => ExtraKey::Text(utf8(s, path)?.to_owned()),
        Item::Uint(u) => ExtraKey::Int(i128::from(u)),
        Item::Int(i) => ExtraKey::Int(i128::from(i)),
        Item::Bin(b) => ExtraKey::Bytes(b.to_vec()),
        Item::Array(2) => {
            let first = r.item()?;
            let Item::Str(id) = first else {
                r.skip_body(first, depth + 1)?;
                r.skip(depth + 1)?;
                return Ok(ExtraKey::Other);
            };
            let id = utf8(id, path)?.to_owned();
            match r.item()? {
                Item::Uint(u) => ExtraKey::Pair(id, i64::try_from(u).unwrap_or(-1)),
                Item::Int(i) => ExtraKey::Pair(id, i),
                other => {
                    r.skip_body(other, depth + 1)?;
                    ExtraKey::Other
                }
            }
        }
        other => {
            r.skip_body(other, depth)?;
            ExtraKey::Other
        }
    })
}

pub(super) fn extra_keys_body(r: &mut In<'_>, item: Item<'_>, path: Path<'_>) -> Result<Vec<Option<Vec<ExtraKey>>>> {
    let Item::Array(blocks) = item else {
        r.skip_body(item, FIELD)?;
        return fail(path, format!("expected an array (one entry per block), got {}", item.type_name()));
    };
    let mut out = Vec::with_capacity((blocks as usize).min(r.r.remaining()));
    for i in 0..blocks {
        match r.item()? {
            Item::Nil => out.push(None),
            Item::Array(keys) => {
                let mut list = Vec::with_capacity((keys as usize).min(r.r.remaining()));
                for j in 0..keys {
                    list.push(extra_key(r, FIELD + 2, &format_args!("{path}[{i}][{j}]"))?);
                }
                out.push(Some(list));
            }
            other => {
                r.skip_body(other, FIELD + 1)?;
                return fail(
                    &format_args!("{path}[{i}]"),
                    format!("expected a list of keys or nil, got {}", other.type_name()),
                );
            }
        }
    }
    Ok(out)
}
