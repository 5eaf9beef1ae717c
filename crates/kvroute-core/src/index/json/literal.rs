//! A number as the TypeScript validator shows it in a refusal. serde_json reads an integer past
//! 2^64 and every literal with a fraction or an exponent as a double, so a visitor sees only the
//! value (`184467440737095516160` becomes `184467440737095520000`); the validator, whose parser
//! keeps literals, shows the literal. So on a refusal that names a double, the literal is looked up
//! again in the event's text by the error's path, and shown as the validator shows it.

use super::values::js_quoted;
use serde_json::value::RawValue;
use serde_path_to_error::{Path, Segment};
use std::collections::HashMap;

/// The literal text at `path` in `text` (one event's JSON), when the path leads to one.
pub fn literal_at<'a>(text: &'a str, path: &Path) -> Option<&'a str> {
    let mut here: &'a str = text;
    for segment in path.iter() {
        here = match segment {
            Segment::Map { key } => {
                let fields: HashMap<String, &'a RawValue> = serde_json::from_str(here).ok()?;
                fields.get(key.as_str())?.get()
            }
            Segment::Seq { index } => {
                let items: Vec<&'a RawValue> = serde_json::from_str(here).ok()?;
                items.get(*index)?.get()
            }
            _ => return None,
        };
    }
    Some(here.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r')))
}

/// How the validator shows a number `literal` that serde read as a double: an integer literal (past
/// a safe integer, or it would not be a double) as the decimal string it keeps; one whose value
/// is an integer as the literal, "(a float)"; any other as JavaScript prints the number.
pub fn shown_number(literal: &str) -> Option<String> {
    let digits = literal.strip_prefix('-').unwrap_or(literal);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && literal != "-0" {
        return Some(js_quoted(literal));
    }
    let v: f64 = literal.parse().ok()?;
    if !v.is_finite() {
        return None;
    }
    if v.fract() == 0.0 {
        return Some(format!("{literal} (a float)"));
    }
    Some(js_number(v))
}

/// A finite double as JavaScript's `String(number)` writes it: the shortest digits that read back,
/// in positional form for decimal exponents from -7 to 20, in exponent form otherwise.
fn js_number(v: f64) -> String {
    let scientific = format!("{:e}", v.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let k = digits.len() as i64;
    // Where the decimal point goes, counted from the first digit.
    let n = exponent.parse::<i64>().unwrap_or(0) + 1;
    let sign = if v < 0.0 { "-" } else { "" };
    let body = if k <= n && n <= 21 {
        format!("{digits}{}", "0".repeat((n - k) as usize))
    } else if 0 < n && n <= 21 {
        format!("{}.{}", &digits[..n as usize], &digits[n as usize..])
    } else if -6 < n && n <= 0 {
        format!("0.{}{digits}", "0".repeat((-n) as usize))
    } else {
        let e = n - 1;
        let e = if e < 0 { format!("-{}", -e) } else { format!("+{e}") };
        if k == 1 {
            format!("{digits}e{e}")
        } else {
            format!("{}.{}e{e}", &digits[..1], &digits[1..])
        }
    };
    format!("{sign}{body}")
}

#[cfg(test)]
mod tests {
    use super::{js_number, shown_number};

    #[test]
    fn numbers_as_javascript_prints_them() {
        for (v, js) in [
            (1.5, "1.5"),
            (0.1, "0.1"),
            (-2.25, "-2.25"),
            (1e-7, "1e-7"),
            (1.5e-7, "1.5e-7"),
            (0.000001, "0.000001"),
            (123456.789, "123456.789"),
            (1.2345e25, "1.2345e+25"),
            (9007199254740.992, "9007199254740.992"),
            (0.30000000000000004, "0.30000000000000004"),
        ] {
            assert_eq!(js_number(v), js, "{v}");
        }
    }

    #[test]
    fn literals_as_the_validator_shows_them() {
        assert_eq!(shown_number("184467440737095516160").as_deref(), Some(r#""184467440737095516160""#));
        assert_eq!(shown_number("-99999999999999999999").as_deref(), Some(r#""-99999999999999999999""#));
        assert_eq!(shown_number("45.0").as_deref(), Some("45.0 (a float)"));
        assert_eq!(shown_number("1e3").as_deref(), Some("1e3 (a float)"));
        assert_eq!(shown_number("-0").as_deref(), Some("-0 (a float)"));
        assert_eq!(shown_number("184467440737095516e15").as_deref(), Some("184467440737095516e15 (a float)"));
        assert_eq!(shown_number("1.5").as_deref(), Some("1.5"));
        assert_eq!(shown_number("15e-1").as_deref(), Some("1.5"));
    }
}
