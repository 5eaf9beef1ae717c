//! A warm start's snapshot document, read here so that a native index restores a peer's dump
//! without JavaScript parsing it first: a million-block snapshot (about 70 MB of JSON) took the
//! lossless JavaScript parser two seconds on the event loop, and serde a fraction of that.
//!
//! The document is Dynamo's `/dump` shape, one entry per model and routing group
//! (`{"<model>:default": {"block_size": 16, "events": [...], "engine_seqs": [...]}}`), or a bare
//! event array. `engine_seqs` is kvroute's extension: where each rank's engine stream stood.
//! The accepted shapes, the choice of entry and the error messages are those of the TypeScript
//! reader (`ts/replicas/snapshot.ts`), which the pure-JS backend runs, so both backends accept
//! and reject the same documents: JSON's open questions (repeated keys, lone surrogates, numbers
//! out of range, nesting) are settled for the whole document first, by [`rules`], as that reader
//! settles them, and not only in the parts read here.

use super::rules::{self, MAX_DOCUMENT_DEPTH};
use super::{is_json_space, parse_items, words, ParsedEvents};
use crate::KvError;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::Value;
use std::fmt;

/// Where one rank's engine stream stood when the snapshot began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineSeq {
    pub worker_id: u64,
    pub dp_rank: u64,
    pub seq: u64,
    /// The digest of the batch applied at `seq` ([`crate::ingest::cursor::digest`]), which a
    /// resumed cursor checks a gap's replay against; absent in older snapshots.
    pub digest: Option<u64>,
}

/// A snapshot's events, parsed, and the streams' positions.
#[derive(Debug)]
pub struct Snapshot {
    pub events: ParsedEvents,
    /// Events in the document, including those of a cache owner's lane (counted, not applied).
    pub event_count: usize,
    pub engine_seqs: Vec<EngineSeq>,
}

fn bad(what: impl fmt::Display) -> KvError {
    KvError::invalid_event(format!("warm start: {what}"))
}

/// `text` refused by serde: a syntax error in the words both backends use, else serde's.
fn not_json(text: &str, e: &serde_json::Error) -> KvError {
    if e.is_syntax() || e.is_eof() {
        return bad(format_args!("the snapshot is not JSON (invalid JSON: {})", words::syntax(text, e)));
    }
    bad(format_args!("the snapshot is not JSON ({e})"))
}

/// Parses `text`, picks the entry of `model` (or the only one), checks its block size against
/// `block_size` and parses its events.
///
/// # Errors
/// `InvalidEvent` for a malformed document or event (as the TypeScript reader words it);
/// `InvalidArg` when the entry's block size is not `block_size`.
pub fn parse_snapshot(text: &str, model: Option<&str>, block_size: u32) -> Result<Snapshot, KvError> {
    if let Some(rule) = rules::broken_rule(text, MAX_DOCUMENT_DEPTH) {
        // As the TypeScript reader words it: a nesting limit counted from the document.
        return Err(bad(format_args!("the snapshot is not JSON (invalid JSON: {rule})")));
    }
    // The document is read once per level: its entries, the chosen entry's fields, the events'
    // items, each event. Only a document that is neither an object nor an array is read whole
    // first, to tell JSON that is not a snapshot from text that is not JSON.
    let doc = text.trim_start_matches(is_json_space);
    if doc.starts_with('[') {
        // The whole text, so that a syntax error's position counts from its start.
        return events_of(text, Vec::new());
    }
    if !doc.starts_with('{') {
        serde_json::from_str::<&RawValue>(text).map_err(|e| not_json(text, &e))?;
        return Err(bad("the snapshot must be a JSON object or an event array"));
    }
    let entries = ordered_entries(text)?;
    let chosen: Vec<&(String, &RawValue)> = match model {
        None => entries.iter().collect(),
        Some(m) => entries.iter().filter(|(k, _)| *k == format!("{m}:default") || k == m).collect(),
    };
    if chosen.len() != 1 {
        let names = |list: &[&(String, &RawValue)]| list.iter().map(|(k, _)| k.as_str()).collect::<Vec<_>>().join(", ");
        return Err(bad(if chosen.is_empty() {
            let all: Vec<_> = entries.iter().collect();
            let has = if all.is_empty() { "none".to_owned() } else { names(&all) };
            let which = model.map_or(String::new(), |m| format!(" for model {}", Value::from(m)));
            format!("no entry{which} in the snapshot (has: {has})")
        } else {
            format!("the snapshot has {} entries ({}): name the model", chosen.len(), names(&chosen))
        }));
    }
    // The entry's fields stay raw text: the events are parsed once, by `parse_events`, and a
    // number is judged and quoted by its literal, as the TypeScript reader's lossless parser does.
    let raw = chosen[0].1.get().trim_start();
    let entry: Entry<'_> = match serde_json::from_str(raw) {
        Ok(entry) => entry,
        // An object that does not read as one (not reached: `rules` refused repeated fields).
        Err(e) if raw.starts_with('{') => return Err(not_json(raw, &e)),
        Err(_) => Entry::default(),
    };
    let events = entry.events.map(RawValue::get).filter(|e| e.trim_start().starts_with('['));
    let Some(events) = events else {
        return Err(bad("an entry must have an events array"));
    };
    let size = u64_of(entry.block_size, "block_size")?;
    if size != u64::from(block_size) {
        return Err(KvError::invalid_arg(format!(
            "warm start: the snapshot's block size is {size}, this index's is {block_size}"
        )));
    }
    let engine_seqs = match entry.engine_seqs.map(|r| r.get().trim_start()) {
        None | Some("null") => Vec::new(),
        Some(seqs) if seqs.starts_with('[') => {
            let seqs: Vec<&RawValue> = serde_json::from_str(seqs).map_err(bad)?;
            seqs.iter()
                .enumerate()
                .map(|(i, s)| {
                    let fields: Vec<(String, &RawValue)> = if s.get().starts_with('{') {
                        serde_json::from_str::<RawFields<'_>>(s.get()).map_err(bad)?.0
                    } else {
                        Vec::new()
                    };
                    let field = |name: &str| fields.iter().rev().find(|(k, _)| k == name).map(|(_, v)| *v);
                    let dp_rank = u64_of(field("dp_rank"), &format!("engine_seqs[{i}].dp_rank"))?;
                    let worker_id = u64_of(field("worker_id"), &format!("engine_seqs[{i}].worker_id"))?;
                    let seq = u64_of(field("seq"), &format!("engine_seqs[{i}].seq"))?;
                    let digest = match field("digest").filter(|v| v.get() != "null") {
                        Some(v) => Some(u64_of(Some(v), &format!("engine_seqs[{i}].digest"))?),
                        None => None,
                    };
                    Ok(EngineSeq { worker_id, dp_rank, seq, digest })
                })
                .collect::<Result<_, KvError>>()?
        }
        Some(_) => return Err(bad("engine_seqs must be an array")),
    };
    events_of(events, engine_seqs)
}

/// An entry's fields, as raw text (others are ignored, as the TypeScript reader ignores them).
/// A field given as `null` is `Some("null")`, told apart from one left out.
#[derive(serde::Deserialize, Default)]
struct Entry<'a> {
    #[serde(borrow, default, deserialize_with = "present")]
    block_size: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    events: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    engine_seqs: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    serde::Deserialize::deserialize(d).map(Some)
}

/// An object's fields in order, as raw text.
struct RawFields<'a>(Vec<(String, &'a RawValue)>);

impl<'de> serde::Deserialize<'de> for RawFields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(FieldsVisitor).map(RawFields)
    }
}

fn events_of(events: &str, engine_seqs: Vec<EngineSeq>) -> Result<Snapshot, KvError> {
    let items: Vec<&RawValue> = serde_json::from_str(events).map_err(|e| not_json(events, &e))?;
    let parsed = parse_items(&items)?;
    let event_count = parsed.events.len() + parsed.cache_owner_events as usize;
    Ok(Snapshot { events: parsed, event_count, engine_seqs })
}

/// A u64 as the TypeScript reader takes one: an integer literal without sign, fraction or
/// exponent, or a string of at most 20 decimal digits, below 2^64 either way.
fn u64_of(v: Option<&RawValue>, what: &str) -> Result<u64, KvError> {
    let digits = |s: &str| (1..=20).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_digit());
    let parsed = v.map(RawValue::get).and_then(|raw| match raw.as_bytes().first() {
        Some(b'0'..=b'9') if digits(raw) => raw.parse().ok(),
        Some(b'"') => serde_json::from_str::<String>(raw).ok().filter(|s| digits(s)).and_then(|s| s.parse().ok()),
        _ => None,
    });
    parsed.ok_or_else(|| bad(format_args!("{what} must be a u64, got {}", Value::from(js_string(v)))))
}

/// `String(v)` in JavaScript of the value the TypeScript reader's lossless parser makes of this
/// literal, for the messages it writes: a number keeps its literal.
fn js_string(v: Option<&RawValue>) -> String {
    let Some(raw) = v.map(RawValue::get) else {
        return "undefined".to_owned();
    };
    match raw.as_bytes().first() {
        Some(b'"') => serde_json::from_str::<String>(raw).unwrap_or_default(),
        Some(b'[') => serde_json::from_str::<Vec<&RawValue>>(raw)
            .unwrap_or_default()
            .into_iter()
            .map(|item| if item.get() == "null" { String::new() } else { js_string(Some(item)) })
            .collect::<Vec<_>>()
            .join(","),
        Some(b'{') => "[object Object]".to_owned(),
        _ => raw.to_owned(),
    }
}

/// The top-level entries in document order (`rules` refused a repeated key already).
fn ordered_entries(doc: &str) -> Result<Vec<(String, &RawValue)>, KvError> {
    serde_json::from_str(doc).map(|RawFields(entries)| entries).map_err(|e| not_json(doc, &e))
}

struct FieldsVisitor;

impl<'de> Visitor<'de> for FieldsVisitor {
    type Value = Vec<(String, &'de RawValue)>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
            out.push(entry);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
