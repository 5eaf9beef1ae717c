//! Positional (array-layout) events: vLLM ≤ 0.23 and SGLang ≤ 0.5.19, with their tails.

use super::super::msgpack::Item;
use super::super::types::{DecodeNotes, EngineEvent, EngineRemoved, EngineStored};
use super::fields::{
    extra_keys_body, fail, hashes_body, opt_hash, opt_int, opt_text, opt_uint, tokens_body, utf8, In, Path, Result,
    FIELD,
};

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

pub(super) fn array_event(
    r: &mut In<'_>,
    len: u32,
    path: Path<'_>,
    notes: &mut DecodeNotes,
) -> Result<Option<EngineEvent>> {
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
