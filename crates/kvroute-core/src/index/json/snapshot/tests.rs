use super::{parse_snapshot, EngineSeq};
use crate::ErrorCode;

const EVENT: &str = r#"{"worker_id": 18446744073709551615, "event": {"event_id": 1, "dp_rank": 0,
    "data": {"stored": {"parent_hash": null, "blocks": [{"block_hash": 7, "tokens_hash": 8}]}}}}"#;

fn doc(entries: &str) -> String {
    format!("{{{entries}}}")
}

fn entry(name: &str, block_size: &str, seqs: &str) -> String {
    format!(
        r#""{name}": {{"block_size": {block_size}, "events": [{EVENT}, {EVENT}], "engine_seqs": {seqs}, "other": 1}}"#
    )
}

#[test]
fn reads_an_entry_its_events_and_engine_seqs() {
    let seqs = r#"[{"worker_id": 18446744073709551615, "dp_rank": 1, "seq": "12345678901234567890"}]"#;
    let s = parse_snapshot(&doc(&entry("m:default", "16", seqs)), None, 16).unwrap();
    assert_eq!(s.event_count, 2);
    assert_eq!(s.events.events.len(), 2);
    let seq = EngineSeq { worker_id: u64::MAX, dp_rank: 1, seq: 12_345_678_901_234_567_890, digest: None };
    assert_eq!(s.engine_seqs, vec![seq]);
    // The digest of the batch at that seq, when the writer kept it (a number or a decimal string).
    for digest in ["18446744073709551615", "\"18446744073709551615\""] {
        let seqs = format!(
            r#"[{{"worker_id": 1, "dp_rank": 0, "seq": 3, "digest": {digest}}}, {{"worker_id": 2, "dp_rank": 0, "seq": 4, "digest": null}}]"#
        );
        let s = parse_snapshot(&doc(&entry("m:default", "16", &seqs)), None, 16).unwrap();
        assert_eq!(s.engine_seqs.iter().map(|e| e.digest).collect::<Vec<_>>(), vec![Some(u64::MAX), None]);
    }
    let bad = r#"[{"worker_id": 1, "dp_rank": 0, "seq": 3, "digest": -1}]"#;
    let err = parse_snapshot(&doc(&entry("m:default", "16", bad)), None, 16).unwrap_err();
    assert_eq!(err.message, r#"warm start: engine_seqs[0].digest must be a u64, got "-1""#);
    let bare = parse_snapshot(&format!("[{EVENT}]"), None, 64).unwrap();
    assert_eq!((bare.event_count, bare.engine_seqs.len()), (1, 0));
    let none = parse_snapshot(&doc(&entry("m:default", "\"16\"", "null")), None, 16).unwrap();
    assert!(none.engine_seqs.is_empty());
}

#[test]
fn a_model_picks_one_entry_of_several() {
    let two = doc(&format!("{}, {}", entry("a:default", "16", "[]"), entry("b", "32", "[]")));
    assert_eq!(parse_snapshot(&two, Some("a"), 16).unwrap().event_count, 2);
    assert_eq!(parse_snapshot(&two, Some("b"), 32).unwrap().event_count, 2);
    let err = parse_snapshot(&two, None, 16).unwrap_err();
    assert_eq!(err.message, "warm start: the snapshot has 2 entries (a:default, b): name the model");
    let err = parse_snapshot(&two, Some("c"), 16).unwrap_err();
    assert_eq!(err.message, r#"warm start: no entry for model "c" in the snapshot (has: a:default, b)"#);
    assert_eq!(parse_snapshot("{}", None, 16).unwrap_err().message, "warm start: no entry in the snapshot (has: none)");
}

#[test]
fn malformed_documents_are_invalid_events_and_another_block_size_an_invalid_argument() {
    let cases = [
        ("{", "warm start: the snapshot is not JSON ("),
        ("5", "warm start: the snapshot must be a JSON object or an event array"),
        (r#"{"m": 5}"#, "warm start: an entry must have an events array"),
        (r#"{"m": {"block_size": 16, "events": {}}}"#, "warm start: an entry must have an events array"),
        (r#"{"m": {"block_size": -1, "events": []}}"#, r#"warm start: block_size must be a u64, got "-1""#),
        (r#"{"m": {"block_size": 16.0, "events": []}}"#, r#"warm start: block_size must be a u64, got "16.0""#),
        (r#"{"m": {"events": []}}"#, r#"warm start: block_size must be a u64, got "undefined""#),
        (r#"{"m": {"block_size": null, "events": []}}"#, r#"warm start: block_size must be a u64, got "null""#),
        (r#"{"m": {"block_size": 16, "events": [], "engine_seqs": 3}}"#, "warm start: engine_seqs must be an array"),
        (
            r#"{"m": {"block_size": 16, "events": [], "engine_seqs": [{"worker_id": 1, "seq": 2}]}}"#,
            r#"warm start: engine_seqs[0].dp_rank must be a u64, got "undefined""#,
        ),
        (r#"{"m": {"block_size": 16, "events": [{"worker_id": -1}]}}"#, "events[0].worker_id must be a u64"),
    ];
    for (text, message) in cases {
        let err = parse_snapshot(text, None, 16).unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidEvent, "{text}");
        assert!(err.message.starts_with(message), "{text}: {}", err.message);
    }
    let err = parse_snapshot(&doc(&entry("m", "32", "[]")), None, 16).unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidArg);
    assert_eq!(err.message, "warm start: the snapshot's block size is 32, this index's is 16");
}
