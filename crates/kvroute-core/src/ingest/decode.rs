//! msgpack payload → [`DecodedBatch`], for every engine layout (see the module docs of
//! [`super`]), streamed with the pull reader of [`super::msgpack`]: each field is read straight
//! into its final type.
//!
//! Tolerance follows what engines actually send: missing trailing fields, unknown map keys and
//! extra elements are counted in [`DecodeNotes`]; an unknown event tag skips that one event. A
//! value of the wrong type anywhere fails the whole batch, so nothing is ever half-applied. In a
//! map a repeated key's last value wins. Error paths are `format_args!` values, formatted only
//! when they are reported.

use super::msgpack::{Item, Malformed, Reader, MAX_DEPTH};
use super::types::{DecodeNotes, DecodedBatch, EngineEvent, EngineRemoved, EngineStored, ExtraKey, Layout};
use std::fmt::Display;

/// A decode failure: where in the batch, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

type Result<T> = std::result::Result<T, DecodeError>;
type Path<'a> = &'a dyn Display;

fn fail<T>(path: Path<'_>, what: impl Display) -> Result<T> {
    Err(DecodeError(format!("{path}: {what}")))
}

fn malformed(e: Malformed) -> DecodeError {
    DecodeError(format!("payload is not msgpack: {}", e.0))
}

/// The reader with errors mapped to [`DecodeError`].
struct In<'a> {
    r: Reader<'a>,
}

impl<'a> In<'a> {
    fn item(&mut self) -> Result<Item<'a>> {
        self.r.item().map_err(malformed)
    }

    fn skip_body(&mut self, item: Item<'_>, depth: u32) -> Result<()> {
        self.r.skip_body(item, depth).map_err(malformed)
    }

    fn skip(&mut self, depth: u32) -> Result<()> {
        self.r.skip(depth).map_err(malformed)
    }
}

fn utf8<'a>(bytes: &'a [u8], path: Path<'_>) -> Result<&'a str> {
    std::str::from_utf8(bytes).or_else(|_| fail(path, "is not UTF-8"))
}

/// Decodes one `EventBatch` payload.
pub fn decode_batch(payload: &[u8]) -> Result<DecodedBatch> {
    let mut r = In { r: Reader::new(payload) };
    let n = match r.item()? {
        Item::Array(n) => n,
        other => return fail(&"batch", format!("expected an array [ts, events, dp_rank], got {}", other.type_name())),
    };
    if n < 2 {
        return fail(&"batch", format!("expected [ts, events, dp_rank], got {n} elements"));
    }
    let mut notes = DecodeNotes { extra_fields: n.saturating_sub(3), ..DecodeNotes::default() };
    let ts = match r.item()? {
        Item::Float(f) => f,
        Item::Uint(u) => u as f64,
        Item::Int(i) => i as f64,
        other => {
            r.skip_body(other, 2)?;
            return fail(&"batch.ts", format!("expected a number, got {}", other.type_name()));
        }
    };
    let count = match r.item()? {
        Item::Array(count) => count,
        other => return fail(&"batch.events", format!("expected an array, got {}", other.type_name())),
    };
    let mut events = Vec::with_capacity((count as usize).min(r.r.remaining()));
    let (mut maps, mut arrays) = (false, false);
    for i in 0..count {
        let path = &format_args!("events[{i}]");
        let decoded = match r.item()? {
            Item::Map(len) => {
                maps = true;
                map_event(&mut r, len, path, &mut notes)?
            }
            Item::Array(len) => {
                arrays = true;
                array_event(&mut r, len, path, &mut notes)?
            }
            other => return fail(path, format!("expected a tagged map or array, got {}", other.type_name())),
        };
        match decoded {
            Some(event) => events.push(event),
            None => notes.unknown_events += 1,
        }
    }
    let dp_rank = if n >= 3 {
        match r.item()? {
            Item::Nil => None,
            Item::Uint(u) => Some(i64::try_from(u).or_else(|_| fail(&"batch.dp_rank", "out of range"))?),
            Item::Int(i) => Some(i),
            other => return fail(&"batch.dp_rank", format!("expected an integer or nil, got {}", other.type_name())),
        }
    } else {
        None
    };
    for _ in 3..n {
        r.skip(2)?;
    }
    if r.r.remaining() > 0 {
        return fail(&"payload", format!("{} bytes follow the batch", r.r.remaining()));
    }
    let layout = match (maps, arrays) {
        (false, false) => Layout::Empty,
        (true, false) => Layout::Map,
        (false, true) => Layout::Array,
        (true, true) => Layout::Mixed,
    };
    Ok(DecodedBatch { ts, dp_rank, events, layout, notes })
}

/// Level of an event's fields (batch 1, events 2, event 3).
const FIELD: u32 = 4;

fn text_item(item: Item<'_>, path: Path<'_>) -> Result<Option<String>> {
    match item {
        Item::Nil => Ok(None),
        Item::Str(s) => Ok(Some(utf8(s, path)?.to_owned())),
        other => fail(path, format!("expected a string, got {}", other.type_name())),
    }
}

fn opt_text(r: &mut In<'_>, path: Path<'_>) -> Result<Option<String>> {
    let item = r.item()?;
    if matches!(item, Item::Array(_) | Item::Map(_)) {
        r.skip_body(item, FIELD)?;
    }
    text_item(item, path)
}

fn uint_item(item: Item<'_>, path: Path<'_>) -> Result<u64> {
    match item {
        Item::Uint(u) => Ok(u),
        Item::Int(_) => fail(path, "must not be negative"),
        other => fail(path, format!("expected an unsigned integer, got {}", other.type_name())),
    }
}

/// An optional unsigned field (nil = absent).
fn opt_uint(r: &mut In<'_>, path: Path<'_>) -> Result<Option<u64>> {
    match r.item()? {
        Item::Nil => Ok(None),
        item @ (Item::Array(_) | Item::Map(_)) => {
            r.skip_body(item, FIELD)?;
            uint_item(item, path).map(Some)
        }
        item => uint_item(item, path).map(Some),
    }
}

fn opt_int(r: &mut In<'_>, path: Path<'_>) -> Result<Option<i128>> {
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
fn hash_item(item: Item<'_>, path: Path<'_>, notes: &mut DecodeNotes) -> Result<u64> {
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

fn opt_hash(r: &mut In<'_>, path: Path<'_>, notes: &mut DecodeNotes) -> Result<Option<u64>> {
    match r.item()? {
        Item::Nil => Ok(None),
        item @ (Item::Array(_) | Item::Map(_)) => {
            r.skip_body(item, FIELD)?;
            hash_item(item, path, notes).map(Some)
        }
        item => hash_item(item, path, notes).map(Some),
    }
}

fn hashes_body(r: &mut In<'_>, item: Item<'_>, path: Path<'_>, notes: &mut DecodeNotes) -> Result<Vec<u64>> {
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

fn token_item(item: Item<'_>, path: Path<'_>) -> Result<u32> {
    match item {
        Item::Uint(u) => u32::try_from(u).or_else(|_| fail(path, "token id must be in [0, 2^32)")),
        Item::Int(_) => fail(path, "token id must be in [0, 2^32)"),
        other => fail(path, format!("expected a token id, got {}", other.type_name())),
    }
}

/// Token ids, or Eagle bigram pairs `[[t0, t1], [t1, t2], …]` flattened to `t0, t1, …, tn`.
fn tokens_body(r: &mut In<'_>, item: Item<'_>, path: Path<'_>) -> Result<(Vec<u32>, bool)> {
    let Item::Array(n) = item else {
        r.skip_body(item, FIELD)?;
        return fail(path, format!("expected an array, got {}", item.type_name()));
    };
    let mut out = Vec::with_capacity((n as usize + 1).min(r.r.remaining() + 1));
    let mut eagle = false;
    for i in 0..n {
        if !eagle {
            if let Some(u) = r.r.uint().filter(|&u| u <= u64::from(u32::MAX)) {
                out.push(u as u32);
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

fn extra_key(r: &mut In<'_>, depth: u32, path: Path<'_>) -> Result<ExtraKey> {
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

fn extra_keys_body(r: &mut In<'_>, item: Item<'_>, path: Path<'_>) -> Result<Vec<Option<Vec<ExtraKey>>>> {
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

const STORED_KEYS: &[&str] = &[
    "type",
    "block_hashes",
    "parent_block_hash",
    "token_ids",
    "block_size",
    "lora_id",
    "medium",
    "lora_name",
    "extra_keys",
    "group_idx",
    "kv_cache_spec_kind",
    "kv_cache_spec_sliding_window",
    "locality",
    "ownership",
    "session_id",
    "lookahead_token_ids",
    "cache_salt",
];
const REMOVED_KEYS: &[&str] = &["type", "block_hashes", "medium", "group_idx", "locality", "ownership"];
const CLEARED_KEYS: &[&str] = &["type", "ownership"];

/// A map event. msgspec writes the tag first, and then the fields are read in one pass; if the
/// tag comes later (keys may come in any order), a first pass finds it and a second reads the
/// fields that tag has.
fn map_event(r: &mut In<'_>, len: u32, path: Path<'_>, notes: &mut DecodeNotes) -> Result<Option<EngineEvent>> {
    let start = r.r.position();
    let mut tag = None;
    let mut first = 0;
    if len > 0 {
        let key = r.item()?;
        if key == Item::Str(b"type") {
            let value = r.item()?;
            r.skip_body(value, FIELD)?;
            tag = Some(value);
            first = 1;
        } else {
            r.r.seek(start);
        }
    }
    for _ in 0..len * (1 - first) {
        let key = r.item()?;
        r.skip_body(key, FIELD)?;
        if key == Item::Str(b"type") {
            let value = r.item()?;
            r.skip_body(value, FIELD)?;
            tag = Some(value);
        } else {
            r.skip(FIELD)?;
        }
    }
    let fields_start = if first == 1 { r.r.position() } else { start };
    let Some(tag) = tag else { return fail(path, "map event has no \"type\"") };
    let kind = match tag {
        Item::Str(s) => utf8(s, &format_args!("{path}.type"))?,
        other => {
            return fail(
                &format_args!("{path}.type"),
                format!("expected the event tag (a string), got {}", other.type_name()),
            )
        }
    };
    let known = match kind {
        "BlockStored" => STORED_KEYS,
        "BlockRemoved" => REMOVED_KEYS,
        "AllBlocksCleared" => CLEARED_KEYS,
        _ => {
            if first == 1 {
                for _ in 1..len {
                    r.skip(FIELD)?;
                    r.skip(FIELD)?;
                }
            }
            return Ok(None);
        }
    };
    r.r.seek(fields_start);
    let mut s = EngineStored::default();
    let (mut has_hashes, mut has_tokens, mut has_size) = (false, false, false);
    for _ in first..len {
        let key = r.item()?;
        let name = match key {
            Item::Str(k) => std::str::from_utf8(k).ok().filter(|k| known.contains(k)),
            other => {
                r.skip_body(other, FIELD)?;
                None
            }
        };
        let Some(name) = name else {
            notes.extra_fields += 1;
            r.skip(FIELD)?;
            continue;
        };
        let at = &format_args!("{path}.{name}");
        match name {
            "block_hashes" => {
                let v = r.item()?;
                has_hashes = v != Item::Nil;
                s.block_hashes = if has_hashes { hashes_body(r, v, at, notes)? } else { Vec::new() };
            }
            "parent_block_hash" => s.parent_block_hash = opt_hash(r, at, notes)?,
            "token_ids" => {
                let v = r.item()?;
                has_tokens = v != Item::Nil;
                (s.token_ids, s.eagle) = if has_tokens { tokens_body(r, v, at)? } else { (Vec::new(), false) };
            }
            "block_size" => {
                let v = opt_uint(r, at)?;
                has_size = v.is_some();
                s.block_size = v.unwrap_or(0);
            }
            "lora_id" => s.lora_id = opt_int(r, at)?,
            "medium" => s.medium = opt_text(r, at)?,
            "lora_name" => s.lora_name = opt_text(r, at)?,
            "cache_salt" => s.cache_salt = opt_text(r, at)?,
            "extra_keys" => {
                let v = r.item()?;
                s.extra_keys = if v == Item::Nil { None } else { Some(extra_keys_body(r, v, at)?) };
            }
            "group_idx" => s.group_idx = opt_uint(r, at)?,
            "kv_cache_spec_kind" => s.kv_cache_spec_kind = opt_text(r, at)?,
            "kv_cache_spec_sliding_window" => s.kv_cache_spec_sliding_window = opt_uint(r, at)?,
            "locality" => s.locality = opt_text(r, at)?,
            "ownership" => s.ownership = opt_text(r, at)?,
            "session_id" => s.session_id = opt_text(r, at)?,
            // "type" (read above) and lookahead_token_ids (informational).
            _ => r.skip(FIELD)?,
        }
    }
    let require =
        |present: bool, name: &str| if present { Ok(()) } else { fail(path, format!("{kind} has no \"{name}\"")) };
    Ok(Some(match kind {
        "BlockStored" => {
            require(has_tokens, "token_ids")?;
            require(has_hashes, "block_hashes")?;
            require(has_size, "block_size")?;
            EngineEvent::Stored(Box::new(s))
        }
        "BlockRemoved" => {
            require(has_hashes, "block_hashes")?;
            EngineEvent::Removed(EngineRemoved {
                block_hashes: s.block_hashes,
                medium: s.medium,
                group_idx: s.group_idx,
                locality: s.locality,
                ownership: s.ownership,
            })
        }
        _ => EngineEvent::Cleared { ownership: s.ownership },
    }))
}

/// A positional tail element, read shallowly (containers are skipped).
#[derive(Clone)]
enum TailValue {
    Nil,
    Uint(u64),
    Text(String),
    Other,
}

/// The fields after a positional event's fixed part: group, kind, window, locality, ownership.
#[derive(Default)]
struct Tail {
    group_idx: Option<u64>,
    kind: Option<String>,
    window: Option<u64>,
    locality: Option<String>,
    ownership: Option<String>,
}

fn read_tail(r: &mut In<'_>, count: u32, path: Path<'_>) -> Result<Vec<TailValue>> {
    let mut out = Vec::with_capacity(count.min(16) as usize);
    for i in 0..count {
        let item = r.item()?;
        out.push(match item {
            Item::Nil => TailValue::Nil,
            Item::Uint(u) => TailValue::Uint(u),
            Item::Str(s) => TailValue::Text(utf8(s, &format_args!("{path}[{i}]"))?.to_owned()),
            other => {
                r.skip_body(other, FIELD)?;
                TailValue::Other
            }
        });
    }
    Ok(out)
}

/// Reads a positional tail. When its elements have the fixed layout's types it is read
/// positionally; otherwise (older engines put fields in other orders) the first integer is the
/// group, the second the window, the first string the kind, and anything else is counted extra.
fn tail(items: &[TailValue], notes: &mut DecodeNotes) -> Tail {
    let uint_slot = |v: &TailValue| matches!(v, TailValue::Nil | TailValue::Uint(_));
    let text_slot = |v: &TailValue| matches!(v, TailValue::Nil | TailValue::Text(_));
    let fixed = [uint_slot, text_slot, uint_slot, text_slot, text_slot];
    let as_uint = |v: Option<&TailValue>| match v {
        Some(TailValue::Uint(u)) => Some(*u),
        _ => None,
    };
    let as_text = |v: Option<&TailValue>| match v {
        Some(TailValue::Text(t)) => Some(t.clone()),
        _ => None,
    };
    if items.iter().zip(fixed).all(|(v, ok)| ok(v)) {
        notes.extra_fields += items.len().saturating_sub(5) as u32;
        return Tail {
            group_idx: as_uint(items.first()),
            kind: as_text(items.get(1)),
            window: as_uint(items.get(2)),
            locality: as_text(items.get(3)),
            ownership: as_text(items.get(4)),
        };
    }
    let mut out = Tail::default();
    for v in items {
        match v {
            TailValue::Nil => {}
            TailValue::Uint(u) if out.group_idx.is_none() => out.group_idx = Some(*u),
            TailValue::Uint(u) if out.window.is_none() => out.window = Some(*u),
            TailValue::Text(t) if out.kind.is_none() => out.kind = Some(t.clone()),
            _ => notes.extra_fields += 1,
        }
    }
    out
}

fn array_event(r: &mut In<'_>, len: u32, path: Path<'_>, notes: &mut DecodeNotes) -> Result<Option<EngineEvent>> {
    if len == 0 {
        return fail(path, "array event is empty");
    }
    let tag = r.item()?;
    let kind = match tag {
        Item::Str(s) => utf8(s, &format_args!("{path}[0]"))?,
        other => {
            r.skip_body(other, FIELD)?;
            for _ in 1..len {
                r.skip(FIELD)?;
            }
            return fail(
                &format_args!("{path}[0]"),
                format!("expected the event tag (a string), got {}", other.type_name()),
            );
        }
    };
    match kind {
        "BlockStored" => stored_array(r, len, path, notes).map(|s| Some(EngineEvent::Stored(Box::new(s)))),
        "BlockRemoved" => {
            if len < 2 {
                return fail(&format_args!("{path}[1] (block_hashes)"), "is missing or nil");
            }
            let v = r.item()?;
            if v == Item::Nil {
                return fail(&format_args!("{path}[1] (block_hashes)"), "is missing or nil");
            }
            let block_hashes = hashes_body(r, v, &format_args!("{path}[1] (block_hashes)"), notes)?;
            let medium = if len > 2 { opt_text(r, &format_args!("{path}[2] (medium)"))? } else { None };
            let items = read_tail(r, len.saturating_sub(3), path)?;
            let t = tail(&items, notes);
            Ok(Some(EngineEvent::Removed(EngineRemoved {
                block_hashes,
                medium,
                group_idx: t.group_idx,
                locality: t.locality,
                ownership: t.ownership,
            })))
        }
        "AllBlocksCleared" => {
            notes.extra_fields += len.saturating_sub(2);
            let ownership = if len > 1 { opt_text(r, &format_args!("{path}[1] (ownership)"))? } else { None };
            for _ in 2..len {
                r.skip(FIELD)?;
            }
            Ok(Some(EngineEvent::Cleared { ownership }))
        }
        _ => {
            for _ in 1..len {
                r.skip(FIELD)?;
            }
            Ok(None)
        }
    }
}

fn stored_array(r: &mut In<'_>, len: u32, path: Path<'_>, notes: &mut DecodeNotes) -> Result<EngineStored> {
    if len < 5 {
        for _ in 1..len {
            r.skip(FIELD)?;
        }
        return fail(
            path,
            format!("BlockStored needs at least hashes, parent, tokens and block_size, got {} fields", len - 1),
        );
    }
    let mut s = EngineStored::default();
    let v = r.item()?;
    if v == Item::Nil {
        return fail(&format_args!("{path}[1] (block_hashes)"), "is nil");
    }
    s.block_hashes = hashes_body(r, v, &format_args!("{path}[1] (block_hashes)"), notes)?;
    s.parent_block_hash = opt_hash(r, &format_args!("{path}[2] (parent_block_hash)"), notes)?;
    let v = r.item()?;
    if v == Item::Nil {
        return fail(&format_args!("{path}[3] (token_ids)"), "is nil");
    }
    (s.token_ids, s.eagle) = tokens_body(r, v, &format_args!("{path}[3] (token_ids)"))?;
    s.block_size = match opt_uint(r, &format_args!("{path}[4] (block_size)"))? {
        Some(b) => b,
        None => return fail(&format_args!("{path}[4] (block_size)"), "is nil"),
    };
    if len > 5 {
        s.lora_id = opt_int(r, &format_args!("{path}[5] (lora_id)"))?;
    }
    if len > 6 {
        s.medium = opt_text(r, &format_args!("{path}[6] (medium)"))?;
    }
    if len > 7 {
        // Slot 7 holds vLLM's lora_name (a string) or SGLang 0.5.19's {"cache_salt": str}.
        let at = &format_args!("{path}[7] (lora_name)");
        match r.item()? {
            Item::Nil => {}
            Item::Str(t) => s.lora_name = Some(utf8(t, at)?.to_owned()),
            Item::Map(n) => s.cache_salt = salt_metadata(r, n, &format_args!("{path}[7] (metadata)"), notes)?,
            other => {
                r.skip_body(other, FIELD)?;
                return fail(at, format!("expected a string or a metadata map, got {}", other.type_name()));
            }
        }
    }
    if len > 8 {
        let v = r.item()?;
        if v != Item::Nil {
            s.extra_keys = Some(extra_keys_body(r, v, &format_args!("{path}[8] (extra_keys)"))?);
        }
    }
    let items = read_tail(r, len.saturating_sub(9), path)?;
    let t = tail(&items, notes);
    s.group_idx = t.group_idx;
    s.kv_cache_spec_kind = t.kind;
    s.kv_cache_spec_sliding_window = t.window;
    s.locality = t.locality;
    s.ownership = t.ownership;
    Ok(s)
}

/// SGLang 0.5.19's `{"cache_salt": str}`; `""` means no salt, anything else is malformed.
fn salt_metadata(r: &mut In<'_>, n: u32, path: Path<'_>, notes: &mut DecodeNotes) -> Result<Option<String>> {
    let mut salt = None;
    for _ in 0..n {
        let key = r.item()?;
        r.skip_body(key, FIELD + 1)?;
        if key == Item::Str(b"cache_salt") {
            match r.item()? {
                Item::Str(t) => salt = Some(utf8(t, path)?.to_owned()),
                other => {
                    r.skip_body(other, FIELD + 1)?;
                    return fail(path, format!("cache_salt must be a string, got {}", other.type_name()));
                }
            }
        } else {
            notes.extra_fields += 1;
            r.skip(FIELD + 1)?;
        }
    }
    match salt {
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => Ok(Some(s)),
        None => fail(path, "metadata map has no cache_salt"),
    }
}

// Keep the depth limit visible where the levels are counted.
const _: () = assert!(FIELD + 4 <= MAX_DEPTH);
