//! msgpack payload → [`DecodedBatch`], for every engine layout (see the module docs of
//! [`super`]), streamed with the pull reader of [`super::msgpack`]: each field is read straight
//! into its final type.
//!
//! Tolerance follows what engines actually send: missing trailing fields, unknown map keys and
//! extra elements are counted in [`DecodeNotes`]; an unknown event tag skips that one event. A
//! value of the wrong type anywhere fails the whole batch, so nothing is ever half-applied. In a
//! map a repeated key's last value wins. Error paths are `format_args!` values, formatted only
//! when they are reported.

mod fields;
mod positional;

use super::msgpack::{Item, Reader, MAX_DEPTH};
use super::types::{DecodeNotes, DecodedBatch, EngineEvent, EngineRemoved, EngineStored, Layout};
use fields::{
    extra_keys_body, fail, hashes_body, opt_hash, opt_int, opt_text, opt_uint, tokens_body, utf8, In, Path, Result,
    FIELD,
};
use positional::array_event;

pub use fields::DecodeError;

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

// Keep the depth limit visible where the levels are counted.
const _: () = assert!(FIELD + 4 <= MAX_DEPTH);
