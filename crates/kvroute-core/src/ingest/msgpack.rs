//! A zero-copy pull reader over msgpack bytes: markers come from `rmp` (the msgpack crate's own
//! marker table); this file reads the bytes that follow them. The decoder asks for exactly the
//! shape it expects next, so a token array is read straight into a `Vec<u32>` with no value tree
//! in between (profiling showed the tree costing more than everything else together).
//!
//! Lengths are never trusted for allocation: a container claiming 10^9 elements fails when its
//! bytes run out. Skipped values are nested at most [`MAX_DEPTH`] containers deep, counted from
//! the batch; the JS twin applies the same limit.

use rmp::Marker;

/// Deepest container nesting accepted (the batch itself is level 1). The deepest layout an
/// engine sends (legacy `block_mm_infos` inside a positional tail) needs 8.
pub const MAX_DEPTH: u32 = 32;

/// One scalar, or the header of a container (its elements follow).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Item<'a> {
    Nil,
    Bool(bool),
    /// Non-negative integer.
    Uint(u64),
    /// Negative integer.
    Int(i64),
    Float(f64),
    Str(&'a [u8]),
    Bin(&'a [u8]),
    Array(u32),
    Map(u32),
    Ext,
}

impl Item<'_> {
    pub fn type_name(&self) -> &'static str {
        match self {
            Item::Nil => "nil",
            Item::Bool(_) => "a boolean",
            Item::Uint(_) | Item::Int(_) => "an integer",
            Item::Float(_) => "a float",
            Item::Str(_) => "a string",
            Item::Bin(_) => "bytes",
            Item::Array(_) => "an array",
            Item::Map(_) => "a map",
            Item::Ext => "an extension value",
        }
    }
}

/// Why reading stopped: the bytes are not (complete) msgpack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    pub fn seek(&mut self, pos: usize) {
        self.pos = pos;
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Malformed> {
        let end =
            self.pos.checked_add(n).filter(|&e| e <= self.buf.len()).ok_or(Malformed("unexpected end of data"))?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    fn be<const N: usize>(&mut self) -> Result<[u8; N], Malformed> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn len_u8(&mut self) -> Result<usize, Malformed> {
        Ok(usize::from(self.be::<1>()?[0]))
    }

    fn len_u16(&mut self) -> Result<usize, Malformed> {
        Ok(usize::from(u16::from_be_bytes(self.be()?)))
    }

    fn len_u32(&mut self) -> Result<usize, Malformed> {
        Ok(u32::from_be_bytes(self.be()?) as usize)
    }

    /// The next value when it is an unsigned integer in one of msgpack's compact encodings (the
    /// token-id hot path); `None`, consuming nothing, for anything else.
    #[inline]
    pub fn uint(&mut self) -> Option<u64> {
        let rest = &self.buf[self.pos..];
        let (&b, tail) = rest.split_first()?;
        let (v, n) = match b {
            0x00..=0x7f => (u64::from(b), 1),
            0xcc => (u64::from(*tail.first()?), 2),
            0xcd => (u64::from(u16::from_be_bytes(tail.get(..2)?.try_into().ok()?)), 3),
            0xce => (u64::from(u32::from_be_bytes(tail.get(..4)?.try_into().ok()?)), 5),
            0xcf => (u64::from_be_bytes(tail.get(..8)?.try_into().ok()?), 9),
            _ => return None,
        };
        self.pos += n;
        Some(v)
    }

    /// The next item. For a container only its header is consumed.
    #[inline]
    pub fn item(&mut self) -> Result<Item<'a>, Malformed> {
        let byte = self.be::<1>()?[0];
        Ok(match Marker::from_u8(byte) {
            Marker::FixPos(v) => Item::Uint(u64::from(v)),
            Marker::FixNeg(v) => Item::Int(i64::from(v)),
            Marker::Null => Item::Nil,
            Marker::True => Item::Bool(true),
            Marker::False => Item::Bool(false),
            Marker::U8 => Item::Uint(u64::from(self.be::<1>()?[0])),
            Marker::U16 => Item::Uint(u64::from(u16::from_be_bytes(self.be()?))),
            Marker::U32 => Item::Uint(u64::from(u32::from_be_bytes(self.be()?))),
            Marker::U64 => Item::Uint(u64::from_be_bytes(self.be()?)),
            Marker::I8 => signed(i64::from(i8::from_be_bytes(self.be()?))),
            Marker::I16 => signed(i64::from(i16::from_be_bytes(self.be()?))),
            Marker::I32 => signed(i64::from(i32::from_be_bytes(self.be()?))),
            Marker::I64 => signed(i64::from_be_bytes(self.be()?)),
            Marker::F32 => float(f64::from(f32::from_be_bytes(self.be()?))),
            Marker::F64 => float(f64::from_be_bytes(self.be()?)),
            Marker::FixStr(n) => Item::Str(self.take(usize::from(n))?),
            Marker::Str8 => {
                let n = self.len_u8()?;
                Item::Str(self.take(n)?)
            }
            Marker::Str16 => {
                let n = self.len_u16()?;
                Item::Str(self.take(n)?)
            }
            Marker::Str32 => {
                let n = self.len_u32()?;
                Item::Str(self.take(n)?)
            }
            Marker::Bin8 => {
                let n = self.len_u8()?;
                Item::Bin(self.take(n)?)
            }
            Marker::Bin16 => {
                let n = self.len_u16()?;
                Item::Bin(self.take(n)?)
            }
            Marker::Bin32 => {
                let n = self.len_u32()?;
                Item::Bin(self.take(n)?)
            }
            Marker::FixArray(n) => Item::Array(u32::from(n)),
            Marker::Array16 => Item::Array(u32::from(u16::from_be_bytes(self.be()?))),
            Marker::Array32 => Item::Array(u32::from_be_bytes(self.be()?)),
            Marker::FixMap(n) => Item::Map(u32::from(n)),
            Marker::Map16 => Item::Map(u32::from(u16::from_be_bytes(self.be()?))),
            Marker::Map32 => Item::Map(u32::from_be_bytes(self.be()?)),
            Marker::FixExt1 => self.ext(1)?,
            Marker::FixExt2 => self.ext(2)?,
            Marker::FixExt4 => self.ext(4)?,
            Marker::FixExt8 => self.ext(8)?,
            Marker::FixExt16 => self.ext(16)?,
            Marker::Ext8 => {
                let n = self.len_u8()?;
                self.ext(n)?
            }
            Marker::Ext16 => {
                let n = self.len_u16()?;
                self.ext(n)?
            }
            Marker::Ext32 => {
                let n = self.len_u32()?;
                self.ext(n)?
            }
            Marker::Reserved => return Err(Malformed("reserved byte 0xc1")),
        })
    }

    fn ext(&mut self, n: usize) -> Result<Item<'a>, Malformed> {
        self.take(1 + n)?;
        Ok(Item::Ext)
    }

    /// Skips the elements of a container whose header `item` was just read, at nesting `depth`
    /// (the container's own level).
    pub fn skip_body(&mut self, item: Item<'_>, depth: u32) -> Result<(), Malformed> {
        let count = match item {
            Item::Array(n) => u64::from(n),
            Item::Map(n) => 2 * u64::from(n),
            _ => return Ok(()),
        };
        if depth > MAX_DEPTH {
            return Err(Malformed("depth limit exceeded"));
        }
        for _ in 0..count {
            let child = self.item()?;
            self.skip_body(child, depth + 1)?;
        }
        Ok(())
    }

    /// Reads and skips one whole value whose level would be `depth`.
    pub fn skip(&mut self, depth: u32) -> Result<(), Malformed> {
        let item = self.item()?;
        self.skip_body(item, depth)
    }
}

/// An integral float in an integer's range reads as that integer, so both backends agree: the
/// JS twin's msgpackr returns `5.0` as the number 5 and cannot tell it from `5`. Anything else
/// (a fraction, ±∞, NaN, or beyond the 64-bit range, where the JS twin sees a float too) stays a
/// float, which every integer field refuses.
fn float(f: f64) -> Item<'static> {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    const TWO_64: f64 = 18_446_744_073_709_551_616.0;
    if f.fract() != 0.0 || !(-TWO_63..TWO_64).contains(&f) {
        Item::Float(f)
    } else if f >= 0.0 {
        Item::Uint(f as u64)
    } else {
        Item::Int(f as i64)
    }
}

fn signed(v: i64) -> Item<'static> {
    if v >= 0 {
        Item::Uint(v as u64)
    } else {
        Item::Int(v)
    }
}
