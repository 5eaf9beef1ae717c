//! Which fault a refused text is reported for. The TypeScript backend parses a whole text (each
//! line of NDJSON) before it validates any event, so what its parser meets first, a syntax error
//! or a number out of range, and then a rule of [`rules`] broken anywhere, is what it reports,
//! before any event's own fault; this backend reads event by event. So once a text is refused
//! here, it is looked over for those first, in the TypeScript backend's order, and the event's
//! fault is reported only when there are none. A text that parses pays nothing for this.

use super::rules::{broken_rule, Broken};
use super::words::{self, TOO_DEEP};
use crate::KvError;
use serde_json::value::RawValue;

/// How deep an event may nest, its own object being level 1 (serde_json's recursion limit).
const MAX_EVENT_DEPTH: usize = 127;

fn invalid(label: &str, why: impl std::fmt::Display) -> KvError {
    KvError::invalid_event(format!("{label}invalid JSON: {why}"))
}

/// A refused batch array: its first broken rule, else `fault`. Syntax errors were found already
/// (the array is split whole before its events are read).
pub fn batch(text: &str, fault: KvError) -> KvError {
    match broken_rule(text, MAX_EVENT_DEPTH + 1) {
        Some(Broken::TooDeep { item, .. }) => invalid(&format!("events[{item}]: "), TOO_DEEP),
        Some(rule) => invalid("", rule),
        None => fault,
    }
}

/// A refused text of lines (NDJSON, or one event), each `(label, text)`: the first line's
/// number out of range, syntax error or broken rule, else `fault`.
pub fn lines<'a>(lines: impl IntoIterator<Item = (String, &'a str)>, fault: KvError) -> KvError {
    for (label, line) in lines {
        let label = format!("{label}: ");
        let rule = broken_rule(line, MAX_EVENT_DEPTH);
        if let Some(number @ Broken::OutOfRange(_)) = rule {
            return invalid(&label, number);
        }
        if let Err(e) = serde_json::from_str::<&RawValue>(line) {
            return invalid(&label, words::syntax(line, &e));
        }
        match rule {
            Some(Broken::TooDeep { .. }) => return invalid(&label, TOO_DEEP),
            Some(rule) => return invalid(&label, rule),
            None => {}
        }
    }
    fault
}
