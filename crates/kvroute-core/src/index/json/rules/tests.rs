use super::{broken_rule, Broken, MAX_DOCUMENT_DEPTH};

fn rule(text: &str) -> Option<String> {
    broken_rule(text, MAX_DOCUMENT_DEPTH).map(|b| b.to_string())
}

fn nested(levels: usize) -> String {
    format!("{{\"a\": {}{}}}", "[".repeat(levels - 1), "]".repeat(levels - 1))
}

#[test]
fn valid_json_breaks_no_rule() {
    for text in [
        "{}",
        "[]",
        " [1, -2.5e3, 1e-400, \"x\", true, false, null, {\"a\": {\"a\": 1}}] ",
        r#"{"a": 1, "b": [{"a": 2}, {"a": 3}], "c": {"a": {"b": 1}, "b": 2}}"#,
        r#"{"k": "\ud83d\ude00 \u00e9 \\ud800 \" \n"}"#,
        r#"{"a": 1, "\u0061b": 2}"#,
        "\"\\uD834\\uDD1E\"",
    ] {
        assert_eq!(rule(text), None, "{text}");
    }
    assert_eq!(rule(&nested(MAX_DOCUMENT_DEPTH)), None);
}

#[test]
fn a_repeated_key_is_found_in_any_object_and_compared_decoded() {
    assert_eq!(rule(r#"{"a": 1, "a": 1}"#).as_deref(), Some(r#"duplicate key "a" at position 9"#));
    assert_eq!(rule(r#"[{"x": {"a": [1], "\u0061": [2]}}]"#).as_deref(), Some(r#"duplicate key "a" at position 18"#));
    // The first repeat in the text, though an outer object repeats later.
    let text = r#"{"o": {"p": 1, "p": 2}, "o": 3}"#;
    assert_eq!(rule(text).as_deref(), Some(r#"duplicate key "p" at position 15"#));
    // Past the scan of a few keys, a set.
    let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\": {i}")).collect();
    assert_eq!(rule(&format!("{{{}}}", many.join(", "))), None);
    let text = format!("{{{}, \"k7\": 0}}", many.join(", "));
    assert_eq!(rule(&text), Some(format!("duplicate key \"k7\" at position {}", text.len() - 8)));
}

#[test]
fn a_lone_surrogate_escape_is_found_with_its_position_in_utf16_units() {
    assert_eq!(rule(r#"{"x": "\ud800"}"#).as_deref(), Some(r"lone surrogate in \u escape at position 7"));
    assert_eq!(rule(r#"["\udc00"]"#).as_deref(), Some(r"lone surrogate in \u escape at position 2"));
    assert_eq!(rule(r#"["\ud800x\udc00"]"#).as_deref(), Some(r"lone surrogate in \u escape at position 2"));
    assert_eq!(rule(r#"["\ud800", "\udc00"]"#).as_deref(), Some(r"lone surrogate in \u escape at position 2"));
    // A key too, and a position counted in UTF-16 units as JavaScript counts: "😀é" is 3 units.
    assert_eq!(rule("{\"😀é\": 1, \"\\uDBFF\": 2}").as_deref(), Some(r"lone surrogate in \u escape at position 12"));
}

#[test]
fn nesting_past_the_limit_is_refused_without_a_frame_per_level() {
    let message = format!("nested deeper than {MAX_DOCUMENT_DEPTH} levels");
    assert_eq!(rule(&nested(MAX_DOCUMENT_DEPTH + 1)), Some(message.clone()));
    // Mixed containers past the limit close in the right order; ten million levels stay cheap.
    let deep = format!("[{}{}]", r#"{"a": ["#.repeat(400), "]}".repeat(400));
    assert_eq!(rule(&deep), Some(message.clone()));
    let very = format!("{}{}", "[".repeat(10_000_000), "]".repeat(10_000_000));
    assert_eq!(rule(&very), Some(message.clone()));
    // Which item of a top-level array went past the limit first.
    let items = format!(r#"[1, [[[]]], {{"a": [[]]}}, {}]"#, nested(9));
    assert_eq!(broken_rule(&items, 3), Some(Broken::TooDeep { max_depth: 3, item: 1 }));
    assert_eq!(broken_rule(&items, 4), Some(Broken::TooDeep { max_depth: 4, item: 3 }));
    assert_eq!(broken_rule(&items, 11), None);
    // Mismatched brackets past the limit are not JSON: serde says why.
    let bad = format!("{}{}", "[".repeat(600), "}".repeat(600));
    assert_eq!(rule(&bad), None);
}

#[test]
fn the_rules_rank_as_the_typescript_reader_ranks_them() {
    // A number out of range stops its parser, wherever it is; then a lone surrogate, then the
    // nesting, then a repeated key.
    let deep = "[".repeat(600) + &"]".repeat(600);
    let text = format!(r#"{{"a": 1, "a": "\ud800", "d": {deep}, "n": -1e400}}"#);
    assert_eq!(rule(&text).as_deref(), Some("number out of range: -1e400"));
    let text = format!(r#"{{"a": 1, "a": 2, "d": {deep}, "s": "\ud800"}}"#);
    assert_eq!(rule(&text).as_deref(), Some(r"lone surrogate in \u escape at position 1230"));
    let text = format!(r#"{{"a": 1, "a": 2, "d": {deep}}}"#);
    assert_eq!(rule(&text), Some(format!("nested deeper than {MAX_DOCUMENT_DEPTH} levels")));
    let long = format!("1{}", "0".repeat(400));
    assert_eq!(rule(&format!("[{long}]")), Some(format!("number out of range: {}…", &long[..40])));
    assert_eq!(rule("[1e308, -1.7976931348623157e308]"), None);
    // Exponents past any integer type, as JavaScript's Number reads them.
    assert_eq!(rule("[1e99999999999999999999999]").as_deref(), Some("number out of range: 1e99999999999999999999999"));
    assert_eq!(rule("[0e99999999999999999999999, 1e-99999999999999999999999, 0.0e400]"), None);
}

#[test]
fn text_that_is_not_json_is_left_to_serde() {
    for text in ["", "{", "[1,]", r#"{"a" 1}"#, r#"{"a": 1,}"#, "[1] 2", "tru", r#"["\u12"]"#, "{1: 2}", "\u{a0}[]"] {
        assert_eq!(rule(text), None, "{text}");
    }
    // A number out of range before a syntax error is still reported, as the reader's parser,
    // reading in order, meets it first.
    assert_eq!(rule("[1e999, ").as_deref(), Some("number out of range: 1e999"));
}
