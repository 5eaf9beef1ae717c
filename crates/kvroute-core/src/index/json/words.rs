//! serde's errors for a missing or an unknown field, reworded as the TypeScript validator
//! (`ts/events/validate.ts`) words them, so that both backends refuse such an event in the same
//! words (serde's are "missing field `event`" and "unknown field `x`, expected one of …"); and
//! its recursion limit as the TypeScript parser's nesting rule (`ts/events/json-rules.ts`); its
//! syntax errors in the words of [`syntax_error`], which both backends share.

use super::syntax::syntax_error;
use super::values::MUST_BE_U64;

/// serde_json's recursion limit refuses the 128th level of an event.
pub const TOO_DEEP: &str = "nested deeper than 127 levels";

/// A syntax error's words for the refused `text`, as both backends word it ([`syntax_error`]);
/// a text that scans as JSON was refused for its depth (serde's recursion limit), worded as the
/// TypeScript parser words that, or, never met, for what serde says.
pub fn syntax(text: &str, inner: &serde_json::Error) -> String {
    if let Some(words) = syntax_error(text) {
        return words;
    }
    let words = inner.to_string();
    if words.starts_with("recursion limit exceeded") {
        return TOO_DEEP.to_owned();
    }
    words
}

/// What the validator says after a missing field's path.
fn missing(name: &str) -> Option<String> {
    Some(match name {
        "worker_id" | "event_id" => " is missing".to_owned(),
        "parent_hash" => " is missing (use null for none)".to_owned(),
        "event" => " must be an object, got undefined".to_owned(),
        "data" => r#" must be {stored}, {removed} or "cleared", got undefined"#.to_owned(),
        "blocks" | "block_hashes" | "mm_objects" | "offsets" => " must be an array, got undefined".to_owned(),
        "block_hash" | "tokens_hash" | "mm_hash" => format!(" {MUST_BE_U64}, got undefined"),
        _ => return None,
    })
}

/// The validator's message for serde's `inner`, after the event's label, or `None` when it words
/// this error as serde does. `field` is serde's path in the validator's notation (`.event.zz`):
/// the object missing a field, or the unknown field itself.
pub fn reworded(field: &str, inner: &str) -> Option<String> {
    if let Some(rest) = inner.strip_prefix("missing field `") {
        let name = rest.strip_suffix('`')?;
        return Some(format!("{field}.{name}{}", missing(name)?));
    }
    // The name ends where the path does: a name may hold "`, " itself.
    let rest = inner.strip_prefix("unknown field `")?;
    rest.match_indices("`, ").find_map(|(end, _)| {
        let name = &rest[..end];
        let object = field.strip_suffix(name)?.strip_suffix('.')?;
        Some(format!("{object} has an unknown field \"{name}\""))
    })
}

#[cfg(test)]
mod tests {
    use super::reworded;

    #[test]
    fn the_recursion_limit_and_syntax_errors_in_the_parsers_words() {
        let deep = format!("{}{}", "[".repeat(128), "]".repeat(128));
        let err = serde_json::from_str::<serde_json::Value>(&deep).unwrap_err();
        assert_eq!(super::syntax(&deep, &err), "nested deeper than 127 levels");
        assert!(serde_json::from_str::<serde_json::Value>(&deep[1..deep.len() - 1]).is_ok());
        // Too deep, and not JSON either: the syntax error is told (the TypeScript parser has no such limit).
        let broken = format!("{deep},");
        let err = serde_json::from_str::<serde_json::Value>(&broken).unwrap_err();
        assert_eq!(super::syntax(&broken, &err), "expected the end of the text, got ',' at position 256");
        let err = serde_json::from_str::<serde_json::Value>("[1,]").unwrap_err();
        assert_eq!(super::syntax("[1,]", &err), "expected a value, got ']' at position 3");
    }

    #[test]
    fn missing_and_unknown_fields_in_the_validators_words() {
        assert_eq!(reworded("", "missing field `worker_id`").as_deref(), Some(".worker_id is missing"));
        assert_eq!(
            reworded(".event.data.stored", "missing field `parent_hash`").as_deref(),
            Some(".event.data.stored.parent_hash is missing (use null for none)")
        );
        assert_eq!(
            reworded(".event.zz", "unknown field `zz`, expected one of `event_id`, `dp_rank`, `data`").as_deref(),
            Some(".event has an unknown field \"zz\"")
        );
        assert_eq!(
            reworded(".a`, b", "unknown field `a`, b`, there are no fields").as_deref(),
            Some(" has an unknown field \"a`, b\"")
        );
        // Anything else keeps serde's words.
        assert_eq!(reworded("", "missing field `other`"), None);
        assert_eq!(reworded(".x", "unknown field `y`, expected `z`"), None);
        assert_eq!(reworded(".x", "invalid type: map, expected a string"), None);
    }
}
