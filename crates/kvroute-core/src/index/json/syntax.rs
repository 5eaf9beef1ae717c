//! The words of a JSON syntax error, the same from both backends: the twin of the TypeScript
//! scanner (`ts/events/json-syntax.ts`), which documents why. serde_json finds that a text is
//! not JSON; this scan of the refused text says where and what, as the TypeScript backend says
//! it: the first character at which the text stops being the beginning of one JSON value, what
//! was expected there, and its position in UTF-16 code units (the other JSON rules' positions).
//! Iterative, so no depth overflows the stack; only refused texts are scanned.

/// What may come next: the scanner's states, each a place in the grammar.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expecting {
    Value,
    /// Right after `[`.
    ValueOrClose,
    /// Right after `{`.
    KeyOrClose,
    /// After `,` in an object.
    Key,
    Colon,
    CommaOrBracket,
    CommaOrBrace,
    End,
}

impl Expecting {
    fn words(self) -> &'static str {
        match self {
            Self::Value => "a value",
            Self::ValueOrClose => "a value or ']'",
            Self::KeyOrClose => "a string key or '}'",
            Self::Key => "a string key",
            Self::Colon => "':'",
            Self::CommaOrBracket => "',' or ']'",
            Self::CommaOrBrace => "',' or '}'",
            Self::End => "the end of the text",
        }
    }
}

/// A character as a message shows it: quoted when it prints, else as its code point.
fn shown(c: Option<char>) -> String {
    let Some(c) = c else { return "the end of the text".to_owned() };
    let code = c as u32;
    let invisible = code <= 0x20 || (0x7f..=0xa0).contains(&code) || matches!(code, 0x2028 | 0x2029 | 0xfeff);
    if invisible {
        format!("U+{code:04X}")
    } else {
        format!("'{c}'")
    }
}

/// The scan over `text`'s bytes; positions are byte offsets, turned into UTF-16 ones at a refusal.
struct Scan<'a> {
    text: &'a str,
    bytes: &'a [u8],
}

impl Scan<'_> {
    fn byte(&self, at: usize) -> Option<u8> {
        self.bytes.get(at).copied()
    }

    /// A refusal at byte offset `at`: `expected` there, and the character found.
    fn refusal(&self, expected: &str, at: usize) -> String {
        let got = self.text.get(at..).and_then(|rest| rest.chars().next());
        let position: usize = self.text[..at].encode_utf16().count();
        format!("expected {expected}, got {} at position {position}", shown(got))
    }

    fn is_digit(&self, at: usize) -> bool {
        self.byte(at).is_some_and(|b| b.is_ascii_digit())
    }

    /// A string starting at `i` (its `"`): the offset after it.
    fn string(&self, mut i: usize) -> Result<usize, String> {
        i += 1;
        loop {
            match self.byte(i) {
                None => return Err(self.refusal("'\"'", i)),
                Some(b'"') => return Ok(i + 1),
                Some(b) if b < 0x20 => {
                    return Err(self.refusal("a character of a string (a control character must be escaped)", i))
                }
                Some(b'\\') => match self.byte(i + 1) {
                    None => return Err(self.refusal("an escape", i + 1)),
                    Some(b'u') => {
                        for k in 2..6 {
                            if !self.byte(i + k).is_some_and(|h| h.is_ascii_hexdigit()) {
                                return Err(self.refusal("a hex digit of a \\u escape", i + k));
                            }
                        }
                        i += 6;
                    }
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => i += 2,
                    Some(_) => return Err(self.refusal("an escape (one of \"\\/bfnrtu)", i + 1)),
                },
                Some(_) => i += 1,
            }
        }
    }

    /// Digits from `at` (at least one): the offset after them.
    fn digits(&self, mut at: usize) -> Result<usize, String> {
        if !self.is_digit(at) {
            return Err(self.refusal("a digit", at));
        }
        while self.is_digit(at) {
            at += 1;
        }
        Ok(at)
    }

    /// A number starting at `i`: the offset after it (RFC 8259's grammar).
    fn number(&self, mut i: usize) -> Result<usize, String> {
        if self.byte(i) == Some(b'-') {
            i += 1;
        }
        if self.byte(i) == Some(b'0') {
            i += 1;
            if self.is_digit(i) {
                return Err(self.refusal("a number without a leading zero", i));
            }
        } else {
            i = self.digits(i)?;
        }
        if self.byte(i) == Some(b'.') {
            i = self.digits(i + 1)?;
        }
        if matches!(self.byte(i), Some(b'e' | b'E')) {
            i += 1;
            if matches!(self.byte(i), Some(b'+' | b'-')) {
                i += 1;
            }
            return self.digits(i);
        }
        Ok(i)
    }

    /// `true`, `false` or `null` at `i`: the offset after it (`expecting` words a character that
    /// begins none: what the place takes, `]` too right after `[`).
    fn literal(&self, i: usize, expecting: Expecting) -> Result<usize, String> {
        let word: &[u8] = match self.byte(i) {
            Some(b't') => b"true",
            Some(b'f') => b"false",
            Some(b'n') => b"null",
            _ => return Err(self.refusal(expecting.words(), i)),
        };
        for (k, want) in word.iter().enumerate().skip(1) {
            if self.byte(i + k) != Some(*want) {
                let quoted = format!("'{}'", std::str::from_utf8(word).unwrap_or_default());
                return Err(self.refusal(&quoted, i + k));
            }
        }
        Ok(i + word.len())
    }
}

/// The syntax error of `text` in the words both backends use, or `None` when it is the
/// beginning and end of one JSON value (numbers' range, repeated keys and the like are
/// [`super::rules`]' business).
pub fn syntax_error(text: &str) -> Option<String> {
    let scan = Scan { text, bytes: text.as_bytes() };
    // Open containers, innermost last: what closes them.
    let mut open: Vec<u8> = Vec::new();
    let mut expecting = Expecting::Value;
    let mut i = 0;
    let after_value = |open: &[u8]| match open.last() {
        None => Expecting::End,
        Some(b']') => Expecting::CommaOrBracket,
        Some(_) => Expecting::CommaOrBrace,
    };
    loop {
        while matches!(scan.byte(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            i += 1;
        }
        let Some(c) = scan.byte(i) else {
            return (expecting != Expecting::End).then(|| scan.refusal(expecting.words(), i));
        };
        let step = match expecting {
            Expecting::End => Err(scan.refusal(expecting.words(), i)),
            Expecting::Colon if c == b':' => {
                expecting = Expecting::Value;
                Ok(i + 1)
            }
            Expecting::Colon => Err(scan.refusal(expecting.words(), i)),
            Expecting::CommaOrBracket | Expecting::CommaOrBrace => {
                let close = if expecting == Expecting::CommaOrBracket { b']' } else { b'}' };
                if c == b',' {
                    expecting = if close == b']' { Expecting::Value } else { Expecting::Key };
                    Ok(i + 1)
                } else if c == close {
                    open.pop();
                    expecting = after_value(&open);
                    Ok(i + 1)
                } else {
                    Err(scan.refusal(expecting.words(), i))
                }
            }
            Expecting::KeyOrClose | Expecting::Key => {
                if c == b'}' && expecting == Expecting::KeyOrClose {
                    open.pop();
                    expecting = after_value(&open);
                    Ok(i + 1)
                } else if c == b'"' {
                    expecting = Expecting::Colon;
                    scan.string(i)
                } else {
                    Err(scan.refusal(expecting.words(), i))
                }
            }
            Expecting::Value | Expecting::ValueOrClose => {
                if c == b']' && expecting == Expecting::ValueOrClose {
                    open.pop();
                    expecting = after_value(&open);
                    Ok(i + 1)
                } else if c == b'[' || c == b'{' {
                    open.push(if c == b'[' { b']' } else { b'}' });
                    expecting = if c == b'[' { Expecting::ValueOrClose } else { Expecting::KeyOrClose };
                    Ok(i + 1)
                } else {
                    let end = match c {
                        b'"' => scan.string(i),
                        b'-' | b'0'..=b'9' => scan.number(i),
                        _ => scan.literal(i, expecting),
                    };
                    expecting = after_value(&open);
                    end
                }
            }
        };
        match step {
            Ok(next) => i = next,
            Err(words) => return Some(words),
        }
    }
}

#[cfg(test)]
mod tests;
