//! AMF0 (Action Message Format 0) values: what RTMP command and data
//! messages carry. Encoder and bounded decoder.
//!
//! Supported markers: number, boolean, string, object, null, undefined,
//! ECMA array, object end, strict array, date, long string. Not supported
//! (decode error): references, movie clip, record set, XML document, typed
//! object and the AVM+ (AMF3) switch. The decoder never panics, limits the
//! nesting depth ([`MAX_DEPTH`]) and never allocates more than the input
//! can hold. Long strings decode to [`Amf0Value::String`]; the encoder picks
//! the long form for strings over 65535 bytes.

use std::fmt;

/// Deepest nesting of objects and arrays the decoder accepts.
pub const MAX_DEPTH: usize = 32;

const MARKER_NUMBER: u8 = 0x00;
const MARKER_BOOLEAN: u8 = 0x01;
const MARKER_STRING: u8 = 0x02;
const MARKER_OBJECT: u8 = 0x03;
const MARKER_NULL: u8 = 0x05;
const MARKER_UNDEFINED: u8 = 0x06;
const MARKER_ECMA_ARRAY: u8 = 0x08;
const MARKER_OBJECT_END: u8 = 0x09;
const MARKER_STRICT_ARRAY: u8 = 0x0A;
const MARKER_DATE: u8 = 0x0B;
const MARKER_LONG_STRING: u8 = 0x0C;

/// One AMF0 value.
#[derive(Clone, Debug, PartialEq)]
pub enum Amf0Value {
    Number(f64),
    Boolean(bool),
    /// A string or long string (invalid UTF-8 is replaced, never rejected).
    String(String),
    /// An anonymous object: properties in wire order.
    Object(Vec<(String, Amf0Value)>),
    Null,
    Undefined,
    /// An associative array: properties in wire order.
    EcmaArray(Vec<(String, Amf0Value)>),
    StrictArray(Vec<Amf0Value>),
    /// Milliseconds since the epoch and a (deprecated) timezone offset.
    Date {
        millis: f64,
        timezone: i16,
    },
}

impl Amf0Value {
    /// The string, for `String` values.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Amf0Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The number, for `Number` values.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Amf0Value::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// The properties, for `Object` and `EcmaArray` values.
    pub fn properties(&self) -> Option<&[(String, Amf0Value)]> {
        match self {
            Amf0Value::Object(p) | Amf0Value::EcmaArray(p) => Some(p),
            _ => None,
        }
    }

    /// The first property named `key` of an object or ECMA array.
    pub fn get(&self, key: &str) -> Option<&Amf0Value> {
        self.properties()?
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Shorthand: `get(key)` as a string.
    pub fn get_str(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Amf0Value::as_str)
    }

    /// Shorthand: `get(key)` as a number.
    pub fn get_f64(&self, key: &str) -> Option<f64> {
        self.get(key).and_then(Amf0Value::as_f64)
    }

    /// Appends the encoding of this value to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Amf0Value::Number(n) => {
                out.push(MARKER_NUMBER);
                out.extend_from_slice(&n.to_be_bytes());
            }
            Amf0Value::Boolean(b) => {
                out.push(MARKER_BOOLEAN);
                out.push(u8::from(*b));
            }
            Amf0Value::String(s) => encode_string(s, out),
            Amf0Value::Object(props) => {
                out.push(MARKER_OBJECT);
                encode_properties(props, out);
            }
            Amf0Value::Null => out.push(MARKER_NULL),
            Amf0Value::Undefined => out.push(MARKER_UNDEFINED),
            Amf0Value::EcmaArray(props) => {
                out.push(MARKER_ECMA_ARRAY);
                let n = u32::try_from(props.len()).unwrap_or(u32::MAX);
                out.extend_from_slice(&n.to_be_bytes());
                encode_properties(props, out);
            }
            Amf0Value::StrictArray(items) => {
                out.push(MARKER_STRICT_ARRAY);
                let n = u32::try_from(items.len()).unwrap_or(u32::MAX);
                out.extend_from_slice(&n.to_be_bytes());
                for item in items.iter().take(n as usize) {
                    item.encode(out);
                }
            }
            Amf0Value::Date { millis, timezone } => {
                out.push(MARKER_DATE);
                out.extend_from_slice(&millis.to_be_bytes());
                out.extend_from_slice(&timezone.to_be_bytes());
            }
        }
    }

    /// Decodes one value from the start of `buf`; returns it and the number
    /// of bytes it took.
    pub fn decode(buf: &[u8]) -> Result<(Amf0Value, usize), Amf0Error> {
        let mut r = Reader::new(buf);
        let v = r.value(0)?;
        Ok((v, r.pos))
    }
}

impl From<&str> for Amf0Value {
    fn from(s: &str) -> Self {
        Amf0Value::String(s.to_owned())
    }
}

impl From<String> for Amf0Value {
    fn from(s: String) -> Self {
        Amf0Value::String(s)
    }
}

impl From<f64> for Amf0Value {
    fn from(n: f64) -> Self {
        Amf0Value::Number(n)
    }
}

impl From<bool> for Amf0Value {
    fn from(b: bool) -> Self {
        Amf0Value::Boolean(b)
    }
}

/// Encodes a sequence of values (a command or data message body).
pub fn encode_all(values: &[Amf0Value], out: &mut Vec<u8>) {
    for v in values {
        v.encode(out);
    }
}

/// Decodes values until the buffer ends (a command or data message body).
pub fn decode_all(buf: &[u8]) -> Result<Vec<Amf0Value>, Amf0Error> {
    let mut r = Reader::new(buf);
    let mut values = Vec::new();
    while r.pos < buf.len() {
        r.charge(VALUE_SIZE)?;
        values.push(r.value(0)?);
    }
    Ok(values)
}

/// Writes a string value, choosing the long form over 65535 bytes.
pub fn encode_string(s: &str, out: &mut Vec<u8>) {
    match u16::try_from(s.len()) {
        Ok(n) => {
            out.push(MARKER_STRING);
            out.extend_from_slice(&n.to_be_bytes());
            out.extend_from_slice(s.as_bytes());
        }
        Err(_) => {
            let n = u32::try_from(s.len()).unwrap_or(u32::MAX);
            out.push(MARKER_LONG_STRING);
            out.extend_from_slice(&n.to_be_bytes());
            out.extend_from_slice(&s.as_bytes()[..n as usize]);
        }
    }
}

fn encode_key(k: &str, out: &mut Vec<u8>) {
    let n = u16::try_from(k.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(&k.as_bytes()[..n as usize]);
}

fn encode_properties(props: &[(String, Amf0Value)], out: &mut Vec<u8>) {
    for (k, v) in props {
        if k.is_empty() {
            continue; // an empty key would end the object early
        }
        encode_key(k, out);
        v.encode(out);
    }
    out.extend_from_slice(&[0, 0, MARKER_OBJECT_END]);
}

/// Why AMF0 decoding failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Amf0Error {
    /// The buffer ended inside a value.
    Truncated,
    /// A marker this decoder does not support.
    UnsupportedMarker(u8),
    /// Objects or arrays nested deeper than [`MAX_DEPTH`].
    TooDeep,
    /// An object end marker where a value was expected.
    UnexpectedObjectEnd,
    /// The decoded values would take more memory than the allocation
    /// budget allows for this input (e.g. millions of one-byte nulls).
    TooLarge,
}

impl fmt::Display for Amf0Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Amf0Error::Truncated => write!(f, "AMF0 value truncated"),
            Amf0Error::UnsupportedMarker(m) => write!(f, "unsupported AMF0 marker 0x{m:02x}"),
            Amf0Error::TooDeep => write!(f, "AMF0 nesting deeper than {MAX_DEPTH}"),
            Amf0Error::UnexpectedObjectEnd => write!(f, "unexpected AMF0 object end"),
            Amf0Error::TooLarge => write!(
                f,
                "AMF0 values would take more than {ALLOC_FACTOR} times their encoded size"
            ),
        }
    }
}

impl std::error::Error for Amf0Error {}

/// Decoded values may take at most this many times their encoded size (plus
/// [`ALLOC_SLACK`]) in memory. Real metadata stays near 3x; a strict array
/// of one-byte nulls would take 32x.
pub const ALLOC_FACTOR: usize = 4;
const ALLOC_SLACK: usize = 4096;
const VALUE_SIZE: usize = std::mem::size_of::<Amf0Value>();
const PROPERTY_SIZE: usize = std::mem::size_of::<(String, Amf0Value)>();

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Bytes the decoded values may still allocate.
    budget: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Reader {
            buf,
            pos: 0,
            budget: buf.len().saturating_mul(ALLOC_FACTOR) + ALLOC_SLACK,
        }
    }

    /// Takes `n` bytes of memory from the budget before allocating them.
    fn charge(&mut self, n: usize) -> Result<(), Amf0Error> {
        self.budget = self.budget.checked_sub(n).ok_or(Amf0Error::TooLarge)?;
        Ok(())
    }

    fn take(&mut self, n: usize) -> Result<&[u8], Amf0Error> {
        let end = self.pos.checked_add(n).ok_or(Amf0Error::Truncated)?;
        let s = self.buf.get(self.pos..end).ok_or(Amf0Error::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, Amf0Error> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, Amf0Error> {
        let b = self.take(2)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Result<u32, Amf0Error> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn f64(&mut self) -> Result<f64, Amf0Error> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(f64::from_be_bytes(a))
    }

    fn string_of(&mut self, n: usize) -> Result<String, Amf0Error> {
        if n > self.remaining() {
            return Err(Amf0Error::Truncated);
        }
        self.charge(n)?;
        let b = self.take(n)?;
        Ok(String::from_utf8_lossy(b).into_owned())
    }

    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    fn value(&mut self, depth: usize) -> Result<Amf0Value, Amf0Error> {
        if depth > MAX_DEPTH {
            return Err(Amf0Error::TooDeep);
        }
        let marker = self.u8()?;
        Ok(match marker {
            MARKER_NUMBER => Amf0Value::Number(self.f64()?),
            MARKER_BOOLEAN => Amf0Value::Boolean(self.u8()? != 0),
            MARKER_STRING => {
                let n = self.u16()? as usize;
                Amf0Value::String(self.string_of(n)?)
            }
            MARKER_LONG_STRING => {
                let n = self.u32()? as usize;
                Amf0Value::String(self.string_of(n)?)
            }
            MARKER_OBJECT => Amf0Value::Object(self.properties(depth)?),
            MARKER_NULL => Amf0Value::Null,
            MARKER_UNDEFINED => Amf0Value::Undefined,
            MARKER_ECMA_ARRAY => {
                let _count = self.u32()?; // advisory only; the end marker rules
                Amf0Value::EcmaArray(self.properties(depth)?)
            }
            MARKER_STRICT_ARRAY => {
                let n = self.u32()? as usize;
                // Every value takes at least one byte: a count beyond what
                // is left is a lie, and must not drive an allocation.
                if n > self.remaining() {
                    return Err(Amf0Error::Truncated);
                }
                self.charge(n.saturating_mul(VALUE_SIZE))?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(self.value(depth + 1)?);
                }
                Amf0Value::StrictArray(items)
            }
            MARKER_DATE => {
                let millis = self.f64()?;
                let tz = self.u16()?;
                Amf0Value::Date {
                    millis,
                    timezone: tz as i16,
                }
            }
            MARKER_OBJECT_END => return Err(Amf0Error::UnexpectedObjectEnd),
            m => return Err(Amf0Error::UnsupportedMarker(m)),
        })
    }

    /// Key/value pairs up to the empty key + object end marker. A buffer
    /// ending cleanly between properties is accepted too (some encoders omit
    /// the end marker of a trailing ECMA array).
    fn properties(&mut self, depth: usize) -> Result<Vec<(String, Amf0Value)>, Amf0Error> {
        let mut props = Vec::new();
        loop {
            if self.remaining() == 0 {
                return Ok(props);
            }
            let n = self.u16()? as usize;
            if n == 0 {
                if self.remaining() == 0 {
                    return Ok(props);
                }
                let m = self.u8()?;
                if m == MARKER_OBJECT_END {
                    return Ok(props);
                }
                // An empty key followed by a value: accept it.
                self.pos -= 1;
                self.charge(PROPERTY_SIZE)?;
                let v = self.value(depth + 1)?;
                props.push((String::new(), v));
                continue;
            }
            self.charge(PROPERTY_SIZE)?;
            let key = self.string_of(n)?;
            let v = self.value(depth + 1)?;
            props.push((key, v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn roundtrip(v: &Amf0Value) -> Amf0Value {
        let mut out = Vec::new();
        v.encode(&mut out);
        let (d, n) = Amf0Value::decode(&out).unwrap();
        assert_eq!(n, out.len());
        d
    }

    #[test]
    fn allocation_is_bounded_by_the_input() {
        // A strict array of 100,000 nulls: 100 KB in, 3.2 MB if decoded.
        let n = 100_000u32;
        let mut bytes = vec![MARKER_STRICT_ARRAY];
        bytes.extend_from_slice(&n.to_be_bytes());
        bytes.extend(std::iter::repeat_n(MARKER_NULL, n as usize));
        assert_eq!(Amf0Value::decode(&bytes), Err(Amf0Error::TooLarge));
        assert_eq!(decode_all(&bytes), Err(Amf0Error::TooLarge));
        // Ordinary metadata decodes.
        let meta = Amf0Value::EcmaArray(
            (0..200)
                .map(|i| (format!("k{i}"), Amf0Value::Number(i as f64)))
                .collect(),
        );
        let mut out = Vec::new();
        meta.encode(&mut out);
        assert_eq!(Amf0Value::decode(&out).unwrap().0, meta);
    }

    #[test]
    fn scalars_roundtrip() {
        for v in [
            Amf0Value::Number(1.5),
            Amf0Value::Boolean(true),
            Amf0Value::String("connect".into()),
            Amf0Value::Null,
            Amf0Value::Undefined,
            Amf0Value::Date {
                millis: 1e12,
                timezone: -60,
            },
        ] {
            assert_eq!(roundtrip(&v), v);
        }
    }

    #[test]
    fn long_string_roundtrip() {
        let s = "x".repeat(70_000);
        let mut out = Vec::new();
        Amf0Value::String(s.clone()).encode(&mut out);
        assert_eq!(out[0], MARKER_LONG_STRING);
        assert_eq!(
            roundtrip(&Amf0Value::String(s.clone())),
            Amf0Value::String(s)
        );
    }

    #[test]
    fn nested_roundtrip() {
        let v = Amf0Value::Object(vec![
            ("app".into(), "live".into()),
            (
                "arr".into(),
                Amf0Value::StrictArray(vec![1.0.into(), Amf0Value::Null]),
            ),
            (
                "ecma".into(),
                Amf0Value::EcmaArray(vec![("width".into(), 640.0.into())]),
            ),
        ]);
        let d = roundtrip(&v);
        assert_eq!(d, v);
        assert_eq!(d.get_str("app"), Some("live"));
        assert_eq!(d.get("ecma").unwrap().get_f64("width"), Some(640.0));
    }

    #[test]
    fn known_bytes_connect() {
        // "connect", 1.0, {app: "live"}
        let bytes = [
            0x02, 0x00, 0x07, b'c', b'o', b'n', b'n', b'e', b'c', b't', 0x00, 0x3F, 0xF0, 0, 0, 0,
            0, 0, 0, 0x03, 0x00, 0x03, b'a', b'p', b'p', 0x02, 0x00, 0x04, b'l', b'i', b'v', b'e',
            0x00, 0x00, 0x09,
        ];
        let vals = decode_all(&bytes).unwrap();
        assert_eq!(vals[0].as_str(), Some("connect"));
        assert_eq!(vals[1].as_f64(), Some(1.0));
        assert_eq!(vals[2].get_str("app"), Some("live"));
        let mut out = Vec::new();
        encode_all(&vals, &mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn too_deep_is_rejected() {
        let mut bytes = [MARKER_STRICT_ARRAY, 0, 0, 0, 1].repeat(MAX_DEPTH + 5);
        bytes.push(MARKER_NULL);
        assert_eq!(Amf0Value::decode(&bytes), Err(Amf0Error::TooDeep));
    }

    #[test]
    fn lying_counts_do_not_allocate() {
        let bytes = [MARKER_STRICT_ARRAY, 0xFF, 0xFF, 0xFF, 0xFF, MARKER_NULL];
        assert_eq!(Amf0Value::decode(&bytes), Err(Amf0Error::Truncated));
        let bytes = [MARKER_LONG_STRING, 0xFF, 0xFF, 0xFF, 0xFF, b'a'];
        assert_eq!(Amf0Value::decode(&bytes), Err(Amf0Error::Truncated));
    }

    #[test]
    fn ecma_array_without_end_marker() {
        let bytes = [
            MARKER_ECMA_ARRAY,
            0,
            0,
            0,
            1,
            0,
            1,
            b'a',
            MARKER_NUMBER,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        let (v, _) = Amf0Value::decode(&bytes).unwrap();
        assert_eq!(v.get_f64("a"), Some(0.0));
    }

    fn arb_value() -> impl Strategy<Value = Amf0Value> {
        let leaf = prop_oneof![
            any::<f64>()
                .prop_filter("NaN", |f| !f.is_nan())
                .prop_map(Amf0Value::Number),
            any::<bool>().prop_map(Amf0Value::Boolean),
            ".{0,20}".prop_map(Amf0Value::String),
            Just(Amf0Value::Null),
            Just(Amf0Value::Undefined),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(("[a-z]{1,8}", inner.clone()), 0..6)
                    .prop_map(Amf0Value::Object),
                prop::collection::vec(("[a-z]{1,8}", inner.clone()), 0..6)
                    .prop_map(Amf0Value::EcmaArray),
                prop::collection::vec(inner, 0..6).prop_map(Amf0Value::StrictArray),
            ]
        })
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode_all(&data);
        }

        #[test]
        fn encode_decode_roundtrip(v in arb_value()) {
            prop_assert_eq!(roundtrip(&v), v);
        }
    }
}
