//! Events as JSON text, parsed here rather than in JavaScript: the native backend's
//! `applyEvents(string)` and `fromDump(string)` hand the text straight to Rust. serde_json reads
//! every integer exactly (no 2^53 limit), is a strict JSON parser, and never reads a float
//! literal as an integer. The accepted shapes and the batch layout (a JSON array, or NDJSON with
//! lines of JSON whitespace skipped) are those of the TypeScript parser and validator
//! (`ts/events/json.ts`, `ts/events/validate.ts`), which also holds lossless-json to serde_json's
//! answers where JSON leaves them open (`ts/events/json-rules.ts`), so both backends accept and
//! reject the same texts; messages name the event as they do (`events[3]`, `line 7`).

mod literal;
mod object;
mod refusal;
mod rules;
mod shapes;
mod snapshot;
mod syntax;
mod values;
mod words;

pub use snapshot::{parse_snapshot, EngineSeq, Snapshot};

use super::event::{EventData, Rank, RouterEvent, StoredBlock};
use crate::KvError;
use object::Obj;
use serde_json::value::RawValue;
use shapes::{JsonData, JsonEvent, Tier};

/// Most blocks (or hashes) one event may carry, as in `ts/limits.ts`.
pub const MAX_BLOCKS_PER_EVENT: usize = 1 << 20;

/// Events parsed from text, and how many valid ones were left out as a cache owner's lane
/// (`residency_domain: "cache_owner"`, which kvroute does not model yet: counted, not applied).
#[derive(Debug, Default)]
pub struct ParsedEvents {
    pub events: Vec<RouterEvent>,
    pub cache_owner_events: u64,
}

/// One event's JSON text.
pub fn parse_event(text: &str) -> Result<ParsedEvents, KvError> {
    let mut out = ParsedEvents::default();
    push(&mut out, text, || "event".to_owned()).map_err(|fault| refusal::lines([("event".to_owned(), text)], fault))?;
    Ok(out)
}

/// JSON's whitespace (RFC 8259). A batch's layout and a blank NDJSON line are judged by it, as
/// the TypeScript parser judges them: `str::trim` would also strip Unicode spaces (U+0085,
/// U+00A0) that no JSON parser skips, and JavaScript's `trim` the byte-order mark besides.
fn is_json_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

/// A batch: a JSON array of events, or NDJSON (one event per line; lines of JSON whitespace
/// skipped). All or nothing: the first invalid event fails the whole batch.
pub fn parse_events(text: &str) -> Result<ParsedEvents, KvError> {
    if text.trim_start_matches(is_json_space).starts_with('[') {
        let items = serde_json::from_str::<Vec<&RawValue>>(text)
            .map_err(|e| KvError::invalid_event(format!("invalid JSON: {}", words::syntax(text, &e))));
        return items.and_then(|items| parse_items(&items)).map_err(|fault| refusal::batch(text, fault));
    }
    let lines = || text.split('\n').enumerate().filter(|(_, line)| !line.trim_matches(is_json_space).is_empty());
    let label = |i: usize| format!("line {}", i + 1);
    let mut out = ParsedEvents::default();
    for (i, line) in lines() {
        push(&mut out, line, || label(i))
            .map_err(|fault| refusal::lines(lines().map(|(i, line)| (label(i), line)), fault))?;
    }
    Ok(out)
}

/// The events of a JSON array already split into its items (`events[i]` in messages).
fn parse_items(items: &[&RawValue]) -> Result<ParsedEvents, KvError> {
    let mut out = ParsedEvents::default();
    for (i, item) in items.iter().enumerate() {
        push(&mut out, item.get(), || format!("events[{i}]"))?;
    }
    Ok(out)
}

fn push(out: &mut ParsedEvents, text: &str, label: impl Fn() -> String) -> Result<(), KvError> {
    let syntax = |inner: &serde_json::Error| {
        KvError::invalid_event(format!("{}: invalid JSON: {}", label(), words::syntax(text, inner)))
    };
    let mut de = serde_json::Deserializer::from_str(text);
    let event: Obj<JsonEvent> = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let inner = e.inner();
        if inner.is_syntax() || inner.is_eof() {
            return syntax(inner);
        }
        // The path in the validator's notation: `.event.data.stored.blocks[0].block_hash`; a
        // "must be …" message reads on from it, as the validator's do.
        let path = e.path().to_string();
        let field = if path == "." { String::new() } else { format!(".{path}") };
        let inner = inner.to_string();
        // serde_json appends the position; the path says where already.
        let inner = inner.split(" at line ").next().unwrap_or(&inner);
        // A double is shown by its literal, as the validator shows it.
        let shown = inner.strip_suffix(" (a float)").and_then(|_| {
            let (what, _) = inner.rsplit_once(", got ")?;
            let literal = literal::literal_at(text, e.path())?;
            Some(format!("{what}, got {}", literal::shown_number(literal)?))
        });
        let inner = shown.as_deref().unwrap_or(inner);
        if let Some(words) = words::reworded(&field, inner) {
            return KvError::invalid_event(format!("{}{words}", label()));
        }
        // A validator's phrase ("must be …", "has an unknown variant …") reads on from the path.
        let sep = if inner.starts_with("must ") || inner.starts_with("has ") { " " } else { ": " };
        KvError::invalid_event(format!("{}{field}{sep}{inner}", label()))
    })?;
    de.end().map_err(|e| syntax(&e))?;
    let event = convert(event.0).map_err(|why| KvError::invalid_event(format!("{}{why}", label())))?;
    match event {
        Some(e) => out.events.push(e),
        None => out.cache_owner_events += 1,
    }
    Ok(())
}

/// The checks types cannot express; `None` for a valid event of a cache owner's lane.
fn convert(e: JsonEvent) -> Result<Option<RouterEvent>, String> {
    let too_many = |n: usize, what: &str| {
        Err(format!(".event.data.{what} must hold at most {MAX_BLOCKS_PER_EVENT} entries, got {n}"))
    };
    let data = match e.event.0.data {
        JsonData::Cleared => EventData::Cleared,
        JsonData::Removed(r) if r.block_hashes.len() > MAX_BLOCKS_PER_EVENT => {
            return too_many(r.block_hashes.len(), "removed.block_hashes")
        }
        JsonData::Removed(r) => EventData::Removed { hashes: r.block_hashes.into_iter().map(|h| h.0).collect() },
        JsonData::Stored(s) if s.blocks.len() > MAX_BLOCKS_PER_EVENT => {
            return too_many(s.blocks.len(), "stored.blocks")
        }
        JsonData::Stored(s) => EventData::Stored {
            parent: s.parent_hash.map(|h| h.0),
            blocks: s
                .blocks
                .into_iter()
                .map(|b| StoredBlock { ext: b.0.block_hash.0, local: b.0.tokens_hash.0 })
                .collect(),
        },
    };
    if e.residency_domain.as_deref() == Some("cache_owner") {
        return Ok(None);
    }
    Ok(Some(RouterEvent {
        rank: Rank::new(e.worker_id.0, e.event.0.dp_rank.map_or(0, |r| r.0)),
        event_id: e.event.0.event_id.0,
        lower_tier: e.storage_tier.and_then(Tier::lower),
        data,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STORED: &str = r#"{"worker_id": 18446744073709551615, "event": {"event_id": "7", "dp_rank": 2,
        "data": {"stored": {"parent_hash": null, "blocks": [{"block_hash": 9007199254740993, "tokens_hash": 5}]}}}}"#;

    #[test]
    fn reads_u64s_exactly_and_both_batch_layouts() {
        let one = parse_event(STORED).expect("valid");
        let e = &one.events[0];
        assert_eq!(e.rank, Rank::new(u64::MAX, 2));
        assert_eq!(e.event_id, 7);
        assert_eq!(
            e.data,
            EventData::Stored { parent: None, blocks: vec![StoredBlock { ext: 9007199254740993, local: 5 }] }
        );
        let flat = STORED.replace('\n', " ");
        let ndjson = format!("\n{flat}\n  \n{flat}\n");
        assert_eq!(parse_events(&ndjson).expect("ndjson").events.len(), 2);
        assert_eq!(parse_events(&format!("[{flat}, {flat}]")).expect("array").events.len(), 2);
    }

    #[test]
    fn a_float_is_out_of_range_only_when_it_rounds_to_infinity() {
        let with = |n: &str| {
            parse_event(&format!(
                r#"{{"worker_id": 1, "state_source": {n}, "event": {{"event_id": 0, "data": "cleared"}}}}"#
            ))
        };
        // Above f64::MAX but rounding to it, as JavaScript's Number() reads them.
        for n in ["1.7976931348623158e308", "-1.797693134862315807e308", "1e-400"] {
            assert!(with(n).is_ok(), "{n}");
        }
        for n in ["1.7976931348623159e308", "1e400", "-1e309"] {
            let err = with(n).expect_err(n).to_string();
            assert!(err.contains("number out of range"), "{n}: {err}");
        }
    }

    #[test]
    fn only_json_whitespace_makes_a_line_blank_or_precedes_an_array() {
        let flat = STORED.replace('\n', " ");
        assert_eq!(parse_events(&format!(" \t\r\n[{flat}]")).expect("array").events.len(), 1);
        assert_eq!(parse_events(&format!("{flat}\r\n \t\r\n{flat}\r\n")).expect("ndjson").events.len(), 2);
        for space in ['\u{85}', '\u{a0}', '\u{2028}', '\u{3000}', '\u{feff}'] {
            let err = parse_events(&format!("{flat}\n{space}\n{flat}")).expect_err("not blank");
            assert!(err.to_string().contains("line 2: invalid JSON"), "{space:?}: {err}");
            let err = parse_events(&format!("{space}[{flat}]")).expect_err("not JSON");
            assert!(err.to_string().contains("line 1: invalid JSON"), "{space:?}: {err}");
        }
    }

    #[test]
    fn rejects_floats_unknown_fields_duplicates_and_bad_variants() {
        let cases = [
            (
                r#"{"worker_id": 45.000000000000001, "event": {"event_id": 0, "data": "cleared"}}"#,
                "event.worker_id must be a u64",
            ),
            (
                r#"{"worker_id": 1, "event": {"event_id": 0, "data": {"removed": {"block_hashes": [1, 2.5]}}}}"#,
                "event.event.data.removed.block_hashes[1] must be a u64",
            ),
            (r#"{"worker_id": 1, "event": {"event_id": 0, "data": "cleared"}, "x": 1}"#, "unknown field"),
            (r#"{"worker_id": 1, "worker_id": 2, "event": {"event_id": 0, "data": "cleared"}}"#, "duplicate"),
            (r#"{"worker_id": 1, "event": {"event_id": 0, "data": {"cleared": null}}}"#, "unknown variant"),
            (r#"{"worker_id": 1, "event": {"event_id": 0, "data": {"stored": {"blocks": []}}}}"#, "parent_hash"),
            (
                r#"{"worker_id": 1, "event": {"event_id": 0, "data": {"removed": {"block_hashes": []}, "stored": {}}}}"#,
                "exactly one",
            ),
            (r#"{"worker_id": 0000000000000001, "event": {"event_id": 0, "data": "cleared"}}"#, "invalid JSON"),
        ];
        for (text, needle) in cases {
            let err = parse_event(text).expect_err(text);
            assert_eq!(err.code, crate::ErrorCode::InvalidEvent);
            assert!(err.message.contains(needle), "{text}: {}", err.message);
        }
    }

    #[test]
    fn names_the_failing_event_and_keeps_cache_owner_events_out() {
        let bad = parse_events("[{\"worker_id\": 1, \"event\": {\"event_id\": 0, \"data\": \"cleared\"}}, 3]")
            .expect_err("bad");
        assert!(bad.message.starts_with("events[1]"), "{}", bad.message);
        let bad = parse_events("\n{\"worker_id\": -1, \"event\": {\"event_id\": 0, \"data\": \"cleared\"}}")
            .expect_err("bad");
        assert!(bad.message.starts_with("line 2"), "{}", bad.message);
        let owner =
            r#"{"worker_id": 1, "residency_domain": "cache_owner", "event": {"event_id": 0, "data": "cleared"}}"#;
        let parsed = parse_event(owner).expect("valid");
        assert_eq!((parsed.events.len(), parsed.cache_owner_events), (0, 1));
    }

    #[test]
    fn objects_only_never_serdes_array_form_of_a_struct() {
        let cases = [
            (
                r#"[[1, null, {"event_id": 1, "data": "cleared"}, null, null, null]]"#,
                "events[0] must be an object, got an array",
            ),
            (r#"[{"worker_id": 1, "event": [1, null, "cleared"]}]"#, "events[0].event must be an object, got an array"),
            (r#"[{"worker_id": 1, "event": 5}]"#, "events[0].event must be an object, got 5"),
            (
                r#"[{"worker_id": 1, "event": {"event_id": 1, "data": {"stored": [null, [[5, 6, null]]]}}}]"#,
                "events[0].event.data.stored must be an object, got an array",
            ),
            (
                r#"[{"worker_id": 1, "event": {"event_id": 1, "data": {"stored": {"parent_hash": null, "blocks": [[5, 6, null]]}}}}]"#,
                "events[0].event.data.stored.blocks[0] must be an object, got an array",
            ),
            (r#"[null]"#, "events[0] must be an object, got null"),
            ("\"x\"", "line 1 must be an object, got \"x\""),
        ];
        for (text, message) in cases {
            let err = parse_events(text).expect_err(text);
            assert_eq!(err.message, message, "{text}");
        }
    }
}
