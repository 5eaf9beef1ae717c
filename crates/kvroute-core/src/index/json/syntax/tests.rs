use super::syntax_error;

/// The cases both scanners are held to: this one here, its TypeScript twin in `test/index-json-syntax.test.ts`.
const CASES: &str = include_str!("cases.json");

#[test]
fn every_shared_case_is_worded_as_the_typescript_scanner_words_it() {
    let cases: Vec<(String, Option<String>)> = serde_json::from_str(CASES).expect("cases.json parses");
    assert!(cases.len() > 40);
    for (text, expected) in cases {
        assert_eq!(syntax_error(&text), expected, "{text:?}");
    }
}

#[test]
fn whatever_serde_json_takes_scans_clean() {
    for text in [
        r#"{"worker_id": 1, "event": {"event_id": 2, "data": "cleared"}}"#,
        "[]",
        "{}",
        " [ [ ] , { } ] ",
        "1e400",
        r#""\ud800""#,
    ] {
        assert!(serde_json::from_str::<&serde_json::value::RawValue>(text).is_ok() || text == "1e400");
        assert_eq!(syntax_error(text), None, "{text:?}");
    }
}

#[test]
fn nesting_far_past_serde_json_limit_is_scanned_without_recursion() {
    let deep = format!("{}1{}", "[".repeat(100_000), "]".repeat(99_999));
    assert_eq!(syntax_error(&deep).as_deref(), Some("expected ',' or ']', got the end of the text at position 200000"));
}
