//! msgpack payload → [`DecodedBatch`], for every engine layout (see the module docs of
//! [`super`]). `rmpv` reads the msgpack (zero-copy, with a depth limit, never preallocating from
//! a claimed length, so a batch claiming 10^9 blocks fails at the end of its bytes instead of
//! allocating); this file only interprets the values.
//!
//! Tolerance follows what engines actually send: missing trailing fields, unknown map keys and
//! extra elements are counted in [`DecodeNotes`]; an unknown event tag skips that one event. A
//! value of the wrong type anywhere fails the whole batch, so nothing is ever half-applied.

use super::types::{DecodeNotes, DecodedBatch, EngineEvent, EngineRemoved, EngineStored, ExtraKey, Layout};
use rmpv::ValueRef;

/// Nesting budget of one batch, in rmpv's units (about 2 per container level, so ~30 levels):
/// the deepest legitimate layout (legacy `block_mm_infos`) needs 9 levels; the slack keeps odd
/// but valid payloads decodable while stopping deliberately deep ones. The JS twin applies the same
/// budget (`depthCost` in `ts/js/ingest/decode.ts`).
const MAX_DEPTH: usize = 64;

/// A decode failure: where in the batch, and what was wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

type Result<T> = std::result::Result<T, DecodeError>;

fn fail<T>(path: &str, what: impl std::fmt::Display) -> Result<T> {
    Err(DecodeError(format!("{path}: {what}")))
}

fn is_nil(v: &ValueRef<'_>) -> bool {
    matches!(v, ValueRef::Nil)
}

fn type_name(v: &ValueRef<'_>) -> &'static str {
    match v {
        ValueRef::Nil => "nil",
        ValueRef::Boolean(_) => "a boolean",
        ValueRef::Integer(_) => "an integer",
        ValueRef::F32(_) | ValueRef::F64(_) => "a float",
        ValueRef::String(_) => "a string",
        ValueRef::Binary(_) => "bytes",
        ValueRef::Array(_) => "an array",
        ValueRef::Map(_) => "a map",
        ValueRef::Ext(..) => "an extension value",
    }
}

/// Decodes one `EventBatch` payload.
pub fn decode_batch(payload: &[u8]) -> Result<DecodedBatch> {
    let mut rd = payload;
    let value = rmpv::decode::read_value_ref_with_max_depth(&mut rd, MAX_DEPTH)
        .map_err(|e| DecodeError(format!("payload is not msgpack: {e}")))?;
    if !rd.is_empty() {
        return fail("payload", format!("{} bytes follow the batch", rd.len()));
    }
    let ValueRef::Array(items) = value else {
        return fail("batch", format!("expected an array [ts, events, dp_rank], got {}", type_name(&value)));
    };
    if items.len() < 2 {
        return fail("batch", format!("expected [ts, events, dp_rank], got {} elements", items.len()));
    }
    let mut notes = DecodeNotes { extra_fields: items.len().saturating_sub(3) as u32, ..DecodeNotes::default() };
    let ts = match &items[0] {
        ValueRef::F64(f) => *f,
        ValueRef::F32(f) => f64::from(*f),
        ValueRef::Integer(i) => i.as_f64().unwrap_or(f64::NAN),
        other => return fail("batch.ts", format!("expected a number, got {}", type_name(other))),
    };
    let dp_rank = match items.get(2) {
        None | Some(ValueRef::Nil) => None,
        Some(ValueRef::Integer(i)) => match i.as_i64() {
            Some(r) => Some(r),
            None => return fail("batch.dp_rank", "out of range"),
        },
        Some(other) => return fail("batch.dp_rank", format!("expected an integer or nil, got {}", type_name(other))),
    };
    let ValueRef::Array(raw_events) = &items[1] else {
        return fail("batch.events", format!("expected an array, got {}", type_name(&items[1])));
    };
    let mut events = Vec::with_capacity(raw_events.len());
    let (mut maps, mut arrays) = (false, false);
    for (i, raw) in raw_events.iter().enumerate() {
        let path = format!("events[{i}]");
        let decoded = match raw {
            ValueRef::Map(entries) => {
                maps = true;
                decode_map_event(entries, &path, &mut notes)?
            }
            ValueRef::Array(fields) => {
                arrays = true;
                decode_array_event(fields, &path, &mut notes)?
            }
            other => return fail(&path, format!("expected a tagged map or array, got {}", type_name(other))),
        };
        match decoded {
            Some(event) => events.push(event),
            None => notes.unknown_events += 1,
        }
    }
    let layout = match (maps, arrays) {
        (false, false) => Layout::Empty,
        (true, false) => Layout::Map,
        (false, true) => Layout::Array,
        (true, true) => Layout::Mixed,
    };
    Ok(DecodedBatch { ts, dp_rank, events, layout, notes })
}

fn tag<'a>(v: &'a ValueRef<'a>, path: &str) -> Result<&'a str> {
    match v {
        ValueRef::String(s) => match s.as_str() {
            Some(s) => Ok(s),
            None => fail(path, "tag is not UTF-8"),
        },
        other => fail(path, format!("expected the event tag (a string), got {}", type_name(other))),
    }
}

fn decode_map_event(
    entries: &[(ValueRef<'_>, ValueRef<'_>)],
    path: &str,
    notes: &mut DecodeNotes,
) -> Result<Option<EngineEvent>> {
    let field = |name: &str| {
        entries.iter().find(|(k, _)| matches!(k, ValueRef::String(s) if s.as_str() == Some(name))).map(|(_, v)| v)
    };
    let Some(kind) = field("type") else { return fail(path, "map event has no \"type\"") };
    let kind = tag(kind, &format!("{path}.type"))?;
    let known: &[&str] = match kind {
        "BlockStored" => &[
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
        ],
        "BlockRemoved" => &["type", "block_hashes", "medium", "group_idx", "locality", "ownership"],
        "AllBlocksCleared" => &["type", "ownership"],
        _ => return Ok(None),
    };
    notes.extra_fields += entries
        .iter()
        .filter(|(k, _)| !matches!(k, ValueRef::String(s) if s.as_str().is_some_and(|s| known.contains(&s))))
        .count() as u32;
    let at = |name: &str| format!("{path}.{name}");
    let opt = |name: &str| field(name).filter(|v| !is_nil(v));
    let require = |name: &str| match opt(name) {
        Some(v) => Ok(v),
        None => fail(path, format!("{kind} has no \"{name}\"")),
    };
    Ok(Some(match kind {
        "BlockStored" => {
            let (token_ids, eagle) = tokens(require("token_ids")?, &at("token_ids"))?;
            EngineEvent::Stored(Box::new(EngineStored {
                block_hashes: hashes(require("block_hashes")?, &at("block_hashes"), notes)?,
                parent_block_hash: opt("parent_block_hash")
                    .map(|v| hash(v, &at("parent_block_hash"), notes))
                    .transpose()?,
                token_ids,
                eagle,
                block_size: uint(require("block_size")?, &at("block_size"))?,
                lora_id: opt("lora_id").map(|v| int(v, &at("lora_id"))).transpose()?,
                medium: opt_text(opt("medium"), &at("medium"))?,
                lora_name: opt_text(opt("lora_name"), &at("lora_name"))?,
                cache_salt: opt_text(opt("cache_salt"), &at("cache_salt"))?,
                extra_keys: opt("extra_keys").map(|v| extra_keys(v, &at("extra_keys"))).transpose()?,
                group_idx: opt("group_idx").map(|v| uint(v, &at("group_idx"))).transpose()?,
                kv_cache_spec_kind: opt_text(opt("kv_cache_spec_kind"), &at("kv_cache_spec_kind"))?,
                kv_cache_spec_sliding_window: opt("kv_cache_spec_sliding_window")
                    .map(|v| uint(v, &at("kv_cache_spec_sliding_window")))
                    .transpose()?,
                locality: opt_text(opt("locality"), &at("locality"))?,
                ownership: opt_text(opt("ownership"), &at("ownership"))?,
                session_id: opt_text(opt("session_id"), &at("session_id"))?,
            }))
        }
        "BlockRemoved" => EngineEvent::Removed(EngineRemoved {
            block_hashes: hashes(require("block_hashes")?, &at("block_hashes"), notes)?,
            medium: opt_text(opt("medium"), &at("medium"))?,
            group_idx: opt("group_idx").map(|v| uint(v, &at("group_idx"))).transpose()?,
            locality: opt_text(opt("locality"), &at("locality"))?,
            ownership: opt_text(opt("ownership"), &at("ownership"))?,
        }),
        _ => EngineEvent::Cleared { ownership: opt_text(opt("ownership"), &at("ownership"))? },
    }))
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

/// Reads a positional tail. When its elements have the fixed layout's types it is read
/// positionally; otherwise (older engines put fields in other orders) the first integer is the
/// group, the second the window, the first string the kind, and anything else is counted extra.
fn tail(items: &[ValueRef<'_>], path: &str, notes: &mut DecodeNotes) -> Result<Tail> {
    let is_uint = |v: &ValueRef<'_>| is_nil(v) || matches!(v, ValueRef::Integer(i) if i.as_u64().is_some());
    let is_text = |v: &ValueRef<'_>| is_nil(v) || matches!(v, ValueRef::String(_));
    let fixed_types = [is_uint, is_text, is_uint, is_text, is_text];
    if items.iter().zip(fixed_types).all(|(v, ok)| ok(v)) {
        notes.extra_fields += items.len().saturating_sub(5) as u32;
        let get = |i: usize| items.get(i).filter(|v| !is_nil(v));
        return Ok(Tail {
            group_idx: get(0).map(|v| uint(v, &format!("{path}[group_idx]"))).transpose()?,
            kind: opt_text(get(1), &format!("{path}[kv_cache_spec_kind]"))?,
            window: get(2).map(|v| uint(v, &format!("{path}[kv_cache_spec_sliding_window]"))).transpose()?,
            locality: opt_text(get(3), &format!("{path}[locality]"))?,
            ownership: opt_text(get(4), &format!("{path}[ownership]"))?,
        });
    }
    let mut out = Tail::default();
    for v in items {
        match v {
            ValueRef::Nil => {}
            ValueRef::Integer(i) if i.as_u64().is_some() && out.group_idx.is_none() => out.group_idx = i.as_u64(),
            ValueRef::Integer(i) if i.as_u64().is_some() && out.window.is_none() => out.window = i.as_u64(),
            ValueRef::String(_) if out.kind.is_none() => {
                out.kind = opt_text(Some(v), &format!("{path}[kv_cache_spec_kind]"))?
            }
            _ => notes.extra_fields += 1,
        }
    }
    Ok(out)
}

fn decode_array_event(fields: &[ValueRef<'_>], path: &str, notes: &mut DecodeNotes) -> Result<Option<EngineEvent>> {
    let Some(first) = fields.first() else { return fail(path, "array event is empty") };
    let kind = tag(first, &format!("{path}[0]"))?;
    let at = |i: usize, name: &str| format!("{path}[{i}] ({name})");
    let get = |i: usize| fields.get(i).filter(|v| !is_nil(v));
    Ok(Some(match kind {
        "BlockStored" => {
            if fields.len() < 5 {
                return fail(
                    path,
                    format!(
                        "BlockStored needs at least hashes, parent, tokens and block_size, got {} fields",
                        fields.len() - 1
                    ),
                );
            }
            let Some(hash_list) = get(1) else { return fail(&at(1, "block_hashes"), "is nil") };
            let Some(token_list) = get(3) else { return fail(&at(3, "token_ids"), "is nil") };
            let Some(size) = get(4) else { return fail(&at(4, "block_size"), "is nil") };
            let (token_ids, eagle) = tokens(token_list, &at(3, "token_ids"))?;
            // Slot 7 holds vLLM's lora_name (a string) or SGLang 0.5.19's {"cache_salt": str}.
            let (lora_name, cache_salt) = match get(7) {
                None => (None, None),
                Some(ValueRef::String(_)) => (opt_text(get(7), &at(7, "lora_name"))?, None),
                Some(ValueRef::Map(entries)) => (None, salt_metadata(entries, &at(7, "metadata"), notes)?),
                Some(other) => {
                    return fail(
                        &at(7, "lora_name"),
                        format!("expected a string or a metadata map, got {}", type_name(other)),
                    )
                }
            };
            let t = tail(fields.get(9..).unwrap_or(&[]), path, notes)?;
            EngineEvent::Stored(Box::new(EngineStored {
                block_hashes: hashes(hash_list, &at(1, "block_hashes"), notes)?,
                parent_block_hash: get(2).map(|v| hash(v, &at(2, "parent_block_hash"), notes)).transpose()?,
                token_ids,
                eagle,
                block_size: uint(size, &at(4, "block_size"))?,
                lora_id: get(5).map(|v| int(v, &at(5, "lora_id"))).transpose()?,
                medium: opt_text(get(6), &at(6, "medium"))?,
                lora_name,
                cache_salt,
                extra_keys: get(8).map(|v| extra_keys(v, &at(8, "extra_keys"))).transpose()?,
                group_idx: t.group_idx,
                kv_cache_spec_kind: t.kind,
                kv_cache_spec_sliding_window: t.window,
                locality: t.locality,
                ownership: t.ownership,
                session_id: None,
            }))
        }
        "BlockRemoved" => {
            let Some(hash_list) = get(1) else { return fail(&at(1, "block_hashes"), "is missing or nil") };
            let t = tail(fields.get(3..).unwrap_or(&[]), path, notes)?;
            EngineEvent::Removed(EngineRemoved {
                block_hashes: hashes(hash_list, &at(1, "block_hashes"), notes)?,
                medium: opt_text(get(2), &at(2, "medium"))?,
                group_idx: t.group_idx,
                locality: t.locality,
                ownership: t.ownership,
            })
        }
        "AllBlocksCleared" => {
            notes.extra_fields += fields.len().saturating_sub(2) as u32;
            EngineEvent::Cleared { ownership: opt_text(get(1), &at(1, "ownership"))? }
        }
        _ => return Ok(None),
    }))
}

/// SGLang 0.5.19's `{"cache_salt": str}`; `""` means no salt, anything else is malformed.
fn salt_metadata(
    entries: &[(ValueRef<'_>, ValueRef<'_>)],
    path: &str,
    notes: &mut DecodeNotes,
) -> Result<Option<String>> {
    let mut salt = None;
    for (k, v) in entries {
        match k {
            ValueRef::String(s) if s.as_str() == Some("cache_salt") => match v {
                ValueRef::String(_) => salt = opt_text(Some(v), path)?,
                other => return fail(path, format!("cache_salt must be a string, got {}", type_name(other))),
            },
            _ => notes.extra_fields += 1,
        }
    }
    match salt {
        Some(s) if s.is_empty() => Ok(None),
        Some(s) => Ok(Some(s)),
        None => fail(path, "metadata map has no cache_salt"),
    }
}

fn opt_text(v: Option<&ValueRef<'_>>, path: &str) -> Result<Option<String>> {
    match v {
        None | Some(ValueRef::Nil) => Ok(None),
        Some(ValueRef::String(s)) => match s.as_str() {
            Some(s) => Ok(Some(s.to_owned())),
            None => fail(path, "is not UTF-8"),
        },
        Some(other) => fail(path, format!("expected a string, got {}", type_name(other))),
    }
}

fn uint(v: &ValueRef<'_>, path: &str) -> Result<u64> {
    match v {
        ValueRef::Integer(i) => match i.as_u64() {
            Some(u) => Ok(u),
            None => fail(path, "must not be negative"),
        },
        other => fail(path, format!("expected an unsigned integer, got {}", type_name(other))),
    }
}

fn int(v: &ValueRef<'_>, path: &str) -> Result<i128> {
    match v {
        ValueRef::Integer(i) => {
            Ok(i.as_u64().map(i128::from).or_else(|| i.as_i64().map(i128::from)).unwrap_or_default())
        }
        other => fail(path, format!("expected an integer, got {}", type_name(other))),
    }
}

/// One engine hash as u64: unsigned as is, signed (SGLang) bit-cast, bytes (vLLM bytes mode)
/// folded to their last 8 bytes big-endian, which is exactly the int-mode value of the same
/// digest, so both modes give a block one identity.
fn hash(v: &ValueRef<'_>, path: &str, notes: &mut DecodeNotes) -> Result<u64> {
    match v {
        ValueRef::Integer(i) => Ok(i.as_u64().unwrap_or_else(|| i.as_i64().unwrap_or_default() as u64)),
        ValueRef::Binary(b) if !b.is_empty() => {
            if b.len() == 32 {
                notes.folded_hashes += 1;
            } else {
                notes.odd_length_hashes += 1;
            }
            let tail = &b[b.len().saturating_sub(8)..];
            Ok(tail.iter().fold(0u64, |acc, &byte| (acc << 8) | u64::from(byte)))
        }
        other => fail(path, format!("expected an integer or bytes hash, got {}", type_name(other))),
    }
}

fn hashes(v: &ValueRef<'_>, path: &str, notes: &mut DecodeNotes) -> Result<Vec<u64>> {
    let ValueRef::Array(items) = v else { return fail(path, format!("expected an array, got {}", type_name(v))) };
    items.iter().enumerate().map(|(i, h)| hash(h, &format!("{path}[{i}]"), notes)).collect()
}

fn token(v: &ValueRef<'_>, path: &str) -> Result<u32> {
    match v {
        ValueRef::Integer(i) => match i.as_u64().and_then(|u| u32::try_from(u).ok()) {
            Some(t) => Ok(t),
            None => fail(path, "token id must be in [0, 2^32)"),
        },
        other => fail(path, format!("expected a token id, got {}", type_name(other))),
    }
}

/// Token ids, or Eagle bigram pairs `[[t0, t1], [t1, t2], …]` flattened to `t0, t1, …, tn`.
fn tokens(v: &ValueRef<'_>, path: &str) -> Result<(Vec<u32>, bool)> {
    let ValueRef::Array(items) = v else { return fail(path, format!("expected an array, got {}", type_name(v))) };
    if let Some(ValueRef::Array(_)) = items.first() {
        let mut out = Vec::with_capacity(items.len() + 1);
        for (i, item) in items.iter().enumerate() {
            let ValueRef::Array(pair) = item else { return fail(&format!("{path}[{i}]"), "mixes pairs and token ids") };
            if pair.len() != 2 {
                return fail(&format!("{path}[{i}]"), format!("a bigram pair has 2 tokens, got {}", pair.len()));
            }
            out.push(token(&pair[0], &format!("{path}[{i}][0]"))?);
            if i + 1 == items.len() {
                out.push(token(&pair[1], &format!("{path}[{i}][1]"))?);
            }
        }
        return Ok((out, true));
    }
    let out = items.iter().enumerate().map(|(i, t)| token(t, &format!("{path}[{i}]"))).collect::<Result<Vec<_>>>()?;
    Ok((out, false))
}

fn extra_key(v: &ValueRef<'_>, path: &str) -> Result<ExtraKey> {
    Ok(match v {
        ValueRef::String(_) => ExtraKey::Text(opt_text(Some(v), path)?.unwrap_or_default()),
        ValueRef::Integer(_) => ExtraKey::Int(int(v, path)?),
        ValueRef::Binary(b) => ExtraKey::Bytes(b.to_vec()),
        ValueRef::Array(pair) if pair.len() == 2 && matches!(pair[0], ValueRef::String(_)) => match &pair[1] {
            ValueRef::Integer(i) => {
                ExtraKey::Pair(opt_text(Some(&pair[0]), path)?.unwrap_or_default(), i.as_i64().unwrap_or(-1))
            }
            _ => ExtraKey::Other,
        },
        _ => ExtraKey::Other,
    })
}

fn extra_keys(v: &ValueRef<'_>, path: &str) -> Result<Vec<Option<Vec<ExtraKey>>>> {
    let ValueRef::Array(blocks) = v else {
        return fail(path, format!("expected an array (one entry per block), got {}", type_name(v)));
    };
    blocks
        .iter()
        .enumerate()
        .map(|(i, block)| match block {
            ValueRef::Nil => Ok(None),
            ValueRef::Array(keys) => keys
                .iter()
                .enumerate()
                .map(|(j, k)| extra_key(k, &format!("{path}[{i}][{j}]")))
                .collect::<Result<Vec<_>>>()
                .map(Some),
            other => fail(&format!("{path}[{i}]"), format!("expected a list of keys or nil, got {}", type_name(other))),
        })
        .collect()
}
