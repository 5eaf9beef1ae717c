//! The rules JSON leaves to implementations, held as the TypeScript parser holds them
//! (`ts/events/json-rules.ts`): a number beyond a double's range, a `\u` escape of half a
//! surrogate pair, nesting too deep and a key repeated in one object are each an error wherever
//! they are in a text, not only in the parts kvroute reads. serde_json, which reads the parts
//! kvroute uses, checks the first three only where it decodes a value, and skips the rest unread;
//! without this scan the native backend took warm-start snapshots the JS backend refused, and
//! worded differently the events both refused.
//!
//! One iterative scan (no recursion, so no depth can overflow the stack), which finds what the
//! TypeScript parser reports, at its character positions: it stops at the first number out of
//! range, and its later checks find the first lone surrogate, then a nesting too deep, then the
//! first repeated key. Text that is not JSON is left to serde_json, which words the syntax error.

use super::is_json_space;
use memchr::memchr2;
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

/// How deep a snapshot may nest, its outermost value being level 1. Its events sit at level 4 and
/// may nest 127 levels each, so a valid snapshot reaches 130; the bound is here so that neither
/// backend's answer depends on stack size (the TypeScript reader's parser recurses, and overflows
/// the stack at about 5,000 levels).
pub const MAX_DOCUMENT_DEPTH: usize = 512;

/// An object with more keys than this checks repeats with a hash set, not a scan of its keys.
const KEYS_SCANNED: usize = 16;

/// The first rule a text breaks. Displayed in the TypeScript parser's words, a nesting too deep
/// as "nested deeper than `max_depth` levels" (callers that count levels from an inner value
/// word it themselves).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Broken {
    /// A number literal beyond a double's range, as shown (at most 40 characters and "…").
    OutOfRange(String),
    /// A `\u` escape of half a surrogate pair, at this JavaScript string index.
    LoneSurrogate(usize),
    /// Nesting deeper than the limit, first in the top-level array's item `item` (0 when the
    /// text is not an array).
    TooDeep { max_depth: usize, item: usize },
    /// A key repeated in one object, at this JavaScript string index of its second occurrence.
    RepeatedKey { key: String, position: usize },
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Broken::OutOfRange(shown) => write!(f, "number out of range: {shown}"),
            Broken::LoneSurrogate(at) => write!(f, "lone surrogate in \\u escape at position {at}"),
            Broken::TooDeep { max_depth, .. } => write!(f, "nested deeper than {max_depth} levels"),
            Broken::RepeatedKey { key, position } => {
                let key = serde_json::to_string(key).unwrap_or_default();
                write!(f, "duplicate key {key} at position {position}")
            }
        }
    }
}

/// The first rule `text` breaks, its outermost value being level 1 of at most `max_depth`; `None`
/// when it breaks none, or when it is not JSON and no number out of range comes before the
/// place where it stops being JSON (serde_json then says why).
pub fn broken_rule(text: &str, max_depth: usize) -> Option<Broken> {
    let mut scan = Scan::new(text, max_depth);
    let complete = scan.run().is_some();
    if let Some(literal) = scan.out_of_range {
        let shown = if literal.len() > 40 { format!("{}…", &literal[..40]) } else { literal.to_owned() };
        return Some(Broken::OutOfRange(shown));
    }
    if !complete {
        return None;
    }
    if let Some(at) = scan.lone_surrogate {
        return Some(Broken::LoneSurrogate(utf16_position(text, at)));
    }
    if let Some(item) = scan.deep_item {
        return Some(Broken::TooDeep { max_depth, item });
    }
    let (at, key) = scan.repeated_key?;
    Some(Broken::RepeatedKey { key: key.into_owned(), position: utf16_position(text, at) })
}

/// JavaScript's string index of a byte offset (UTF-16 code units before it).
fn utf16_position(text: &str, at: usize) -> usize {
    text[..at].chars().map(char::len_utf16).sum()
}

/// An open array or object; an object's keys are `Scan::keys[keys_from..]`, or in `set` once it
/// has many.
struct Frame<'a> {
    object: bool,
    keys_from: usize,
    set: Option<HashSet<Cow<'a, str>>>,
}

#[derive(PartialEq)]
enum Step {
    /// A value read whole.
    Done,
    /// A container opened: its first value is next.
    Opened,
}

/// A stack of bits: whether each container past the depth limit is an object.
#[derive(Default)]
struct Bits {
    words: Vec<u64>,
    len: usize,
}

impl Bits {
    fn push(&mut self, bit: bool) {
        let (word, shift) = (self.len / 64, self.len % 64);
        if shift == 0 {
            self.words.push(0);
        }
        self.words[word] |= u64::from(bit) << shift;
        self.len += 1;
    }

    fn pop(&mut self) {
        self.len -= 1;
        let (word, shift) = (self.len / 64, self.len % 64);
        self.words[word] &= !(1 << shift);
        if shift == 0 {
            self.words.pop();
        }
    }

    fn last(&self) -> bool {
        let i = self.len - 1;
        self.words[i / 64] >> (i % 64) & 1 == 1
    }
}

struct Scan<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    max_depth: usize,
    frames: Vec<Frame<'a>>,
    deep: Bits,
    keys: Vec<Cow<'a, str>>,
    /// Where an unpaired leading half was escaped, waiting for its trailing half.
    high: Option<usize>,
    out_of_range: Option<&'a str>,
    lone_surrogate: Option<usize>,
    /// The top-level array's item being read (commas seen at level 1).
    item: usize,
    /// The item in which the nesting first went past the limit.
    deep_item: Option<usize>,
    repeated_key: Option<(usize, Cow<'a, str>)>,
}

impl<'a> Scan<'a> {
    fn new(text: &'a str, max_depth: usize) -> Self {
        Scan {
            text,
            bytes: text.as_bytes(),
            at: 0,
            max_depth,
            frames: Vec::new(),
            deep: Bits::default(),
            keys: Vec::new(),
            high: None,
            out_of_range: None,
            lone_surrogate: None,
            item: 0,
            deep_item: None,
            repeated_key: None,
        }
    }

    /// Reads the whole text; `None` when it is not JSON or a number out of range ends the read.
    fn run(&mut self) -> Option<()> {
        loop {
            if self.value()? == Step::Opened {
                continue; // the container's first value (or its first key's) is next
            }
            // After a value: close what it ends, until a comma asks for another.
            loop {
                self.skip_space();
                let Some(object) = self.innermost() else {
                    self.flush_high();
                    return (self.at == self.bytes.len()).then_some(());
                };
                match (self.next()?, object) {
                    (b',', true) => {
                        self.key()?;
                        break;
                    }
                    (b',', false) => {
                        if self.frames.len() == 1 && self.deep.len == 0 {
                            self.item += 1;
                        }
                        break;
                    }
                    (b'}', true) | (b']', false) => self.close(),
                    _ => return None,
                }
            }
        }
    }

    /// One value; a container is only opened (and its first key read): `run` reads on inside it,
    /// so that no depth of nesting recurses.
    fn value(&mut self) -> Option<Step> {
        self.skip_space();
        let done = match self.next()? {
            b'{' | b'[' => {
                let object = self.bytes[self.at - 1] == b'{';
                self.open(object);
                self.skip_space();
                if self.bytes.get(self.at) == Some(if object { &b'}' } else { &b']' }) {
                    self.at += 1;
                    self.close();
                    return Some(Step::Done);
                }
                if object {
                    self.key()?;
                }
                return Some(Step::Opened);
            }
            b'"' => self.string(self.at - 1).map(drop),
            b'-' | b'0'..=b'9' => self.number(self.at - 1),
            b't' => self.literal(b"rue"),
            b'f' => self.literal(b"alse"),
            b'n' => self.literal(b"ull"),
            _ => None,
        };
        done.map(|()| Step::Done)
    }

    /// Whether the innermost open container is an object; `None` at the top level.
    fn innermost(&self) -> Option<bool> {
        if self.deep.len > 0 {
            return Some(self.deep.last());
        }
        self.frames.last().map(|f| f.object)
    }

    fn open(&mut self, object: bool) {
        if self.frames.len() < self.max_depth {
            self.frames.push(Frame { object, keys_from: self.keys.len(), set: None });
        } else {
            // Past the limit only whether each container is an object is kept, a bit each, so a
            // document of brackets cannot hold memory in proportion.
            self.deep_item.get_or_insert(self.item);
            self.deep.push(object);
        }
    }

    fn close(&mut self) {
        if self.deep.len > 0 {
            self.deep.pop();
        } else if let Some(frame) = self.frames.pop() {
            self.keys.truncate(frame.keys_from);
        }
    }

    /// A key and its colon (inside an object: not past the depth limit, where keys are not kept);
    /// a repeat in the same object is noted (the first one in the text).
    fn key(&mut self) -> Option<()> {
        self.skip_space();
        let start = self.at;
        if self.next()? != b'"' {
            return None;
        }
        let key = self.string(start)?;
        self.skip_space();
        if self.next()? != b':' {
            return None;
        }
        if self.repeated_key.is_some() || self.lone_surrogate.is_some() || self.deep_item.is_some() {
            return Some(()); // a rule reported before repeats is broken already
        }
        let frame = self.frames.last_mut()?;
        let repeated = match &mut frame.set {
            Some(set) => !set.insert(key.clone()),
            None => {
                let mine = &self.keys[frame.keys_from..];
                let repeated = mine.contains(&key);
                if mine.len() >= KEYS_SCANNED {
                    frame.set = Some(mine.iter().cloned().chain([key.clone()]).collect());
                }
                repeated
            }
        };
        if repeated {
            self.repeated_key = Some((start, key));
        } else if frame.set.is_none() {
            self.keys.push(key);
        }
        Some(())
    }

    /// A string whose opening quote is at `start`, decoded only if it has escapes.
    fn string(&mut self, start: usize) -> Option<Cow<'a, str>> {
        let mut escaped = false;
        loop {
            self.at += memchr2(b'"', b'\\', &self.bytes[self.at..])?;
            if self.bytes[self.at] == b'"' {
                self.at += 1;
                break;
            }
            escaped = true;
            self.escape()?;
        }
        let literal = &self.text[start..self.at];
        if !escaped {
            return Some(Cow::Borrowed(&literal[1..literal.len() - 1]));
        }
        // The literal is well formed; a lone surrogate is replaced, a broken rule already.
        Some(Cow::Owned(decode(literal)))
    }

    /// The escape at `at`; a `\u` escape of a surrogate half is matched with its other half.
    fn escape(&mut self) -> Option<()> {
        let at = self.at;
        let kind = *self.bytes.get(at + 1)?;
        if kind != b'u' {
            self.at += 2;
            return Some(());
        }
        let hex = self.text.get(at + 2..at + 6)?;
        let code = u16::from_str_radix(hex, 16).ok()?;
        self.at += 6;
        let trailing = (0xdc00..=0xdfff).contains(&code);
        if let Some(high) = self.high.take() {
            if trailing && at == high + 6 {
                return Some(());
            }
            self.note_lone(high);
        }
        if (0xd800..=0xdbff).contains(&code) {
            self.high = Some(at);
        } else if trailing {
            self.note_lone(at);
        }
        Some(())
    }

    fn note_lone(&mut self, at: usize) {
        self.lone_surrogate.get_or_insert(at);
    }

    /// A number whose first character is at `start`; one beyond a double's range ends the read.
    fn number(&mut self, start: usize) -> Option<()> {
        self.flush_high();
        let mut end = start;
        let mut exponent = false;
        while let Some(&b) = self.bytes.get(end) {
            match b {
                b'0'..=b'9' | b'-' | b'+' | b'.' => {}
                b'e' | b'E' => exponent = true,
                _ => break,
            }
            end += 1;
        }
        self.at = end;
        let literal = &self.text[start..end];
        // Only an exponent or more than 308 digits can reach past f64::MAX.
        if exponent || literal.len() > 308 {
            let value: f64 = literal.parse().ok()?;
            if value.is_infinite() {
                self.out_of_range = Some(literal);
                return None;
            }
        }
        Some(())
    }

    /// An unpaired leading half stays lone once anything but its trailing escape follows.
    fn flush_high(&mut self) {
        if let Some(high) = self.high.take() {
            self.note_lone(high);
        }
    }

    fn literal(&mut self, rest: &[u8]) -> Option<()> {
        self.flush_high();
        let end = self.at + rest.len();
        (self.bytes.get(self.at..end)? == rest).then(|| self.at = end)
    }

    fn next(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn skip_space(&mut self) {
        while self.bytes.get(self.at).is_some_and(|&b| is_json_space(char::from(b))) {
            self.at += 1;
        }
    }
}

/// A string literal's value (its quotes included in `literal`).
fn decode(literal: &str) -> String {
    let units: Vec<u16> = {
        let inner = &literal[1..literal.len() - 1];
        let mut out = Vec::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c != '\\' {
                let mut buf = [0u16; 2];
                out.extend_from_slice(c.encode_utf16(&mut buf));
                continue;
            }
            out.push(match chars.next() {
                Some('b') => 0x08,
                Some('f') => 0x0c,
                Some('n') => 0x0a,
                Some('r') => 0x0d,
                Some('t') => 0x09,
                Some('u') => u16::from_str_radix(&chars.by_ref().take(4).collect::<String>(), 16).unwrap_or(0xfffd),
                Some(other) => other as u16,
                None => 0xfffd,
            });
        }
        out
    };
    String::from_utf16_lossy(&units)
}

#[cfg(test)]
mod tests;
