//! Timed metadata sent with `:sendEvent` (DECISIONS section 10): OME's
//! body, checked and turned into one ID3v2.4 tag (TXXX, any other text
//! frame `T???`, PRIV) or a cue (`EXT-X-CUE-OUT` / `EXT-X-CUE-IN`). The
//! packager carries a tag as an `emsg` box before the next part's `moof`
//! (scheme `https://aomedia.org/emsg/ID3`, as hls.js and Safari read it).

use bytes::Bytes;
use serde_json::Value;
use std::fmt;

/// The scheme of ID3 carried in `emsg` (AOM, "Carriage of ID3 Timed
/// Metadata in CMAF").
pub const ID3_SCHEME: &str = "https://aomedia.org/emsg/ID3";

/// A tag larger than this is refused (it travels in every viewer's part).
pub const MAX_TAG_BYTES: usize = 64 * 1024;

/// Which tracks an event goes into (`eventType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tracks {
    All,
    Video,
    Audio,
}

/// An ad break's edge (`eventFormat: cue`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cue {
    /// `EXT-X-CUE-OUT`, with the break's length when given.
    Out { duration_ms: Option<u64> },
    /// `EXT-X-CUE-IN`.
    In,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    /// A whole ID3v2.4 tag.
    Id3(Bytes),
    Cue(Cue),
}

/// One `:sendEvent`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub payload: Payload,
    pub tracks: Tracks,
    /// Cut the part being built now rather than at its boundary.
    pub urgent: bool,
}

/// Why a body was refused (400).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventError {
    NotAnObject,
    /// A field that is missing or of the wrong type, and what it must be.
    Field {
        field: &'static str,
        must: &'static str,
    },
    UnknownFormat(String),
    Scte35,
    UnknownEventType(String),
    NoEvents,
    /// `events[i]`'s frame type is not TXXX, T??? or PRIV.
    FrameType {
        index: usize,
        frame_type: String,
    },
    /// `events[i]` lacks `data` (or `info` for PRIV).
    FrameField {
        index: usize,
        field: &'static str,
    },
    CueType(String),
    TooLarge,
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::NotAnObject => write!(f, "Request body must be an object"),
            EventError::Field { field, must } => write!(f, "{field} must be {must}"),
            EventError::UnknownFormat(v) => {
                write!(f, "eventFormat {:?} is not supported (id3v2 or cue)", v)
            }
            EventError::Scte35 => write!(f, "eventFormat scte35 is not supported"),
            EventError::UnknownEventType(v) => {
                write!(f, "eventType {:?} is not one of event, video, audio", v)
            }
            EventError::NoEvents => write!(f, "events must be a non-empty array"),
            EventError::FrameType { index, frame_type } => write!(
                f,
                "events[{index}].frameType {:?} is not supported (TXXX, T??? text frames, PRIV)",
                frame_type
            ),
            EventError::FrameField { index, field } => {
                write!(f, "events[{index}].{field} must be a string")
            }
            EventError::CueType(v) => write!(f, "events[0].cueType {:?} is not one of out, in", v),
            EventError::TooLarge => write!(f, "The ID3 tag would exceed {MAX_TAG_BYTES} bytes"),
        }
    }
}

fn string<'a>(v: &'a Value, field: &'static str) -> Result<Option<&'a str>, EventError> {
    match v.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(EventError::Field {
            field,
            must: "a string",
        }),
    }
}

/// Checks a `:sendEvent` body (OME's).
pub fn parse(body: &Value) -> Result<Event, EventError> {
    if !body.is_object() {
        return Err(EventError::NotAnObject);
    }
    let format = string(body, "eventFormat")?.ok_or(EventError::Field {
        field: "eventFormat",
        must: "id3v2 or cue",
    })?;
    let tracks = match string(body, "eventType")?
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        None | Some("event") => Tracks::All,
        Some("video") => Tracks::Video,
        Some("audio") => Tracks::Audio,
        Some(other) => return Err(EventError::UnknownEventType(other.to_string())),
    };
    let urgent = match body.get("urgent") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => {
            return Err(EventError::Field {
                field: "urgent",
                must: "true or false",
            })
        }
    };
    let events = match body.get("events") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        _ => return Err(EventError::NoEvents),
    };
    let payload = match format.to_ascii_lowercase().as_str() {
        "id3v2" => Payload::Id3(id3_tag(events)?),
        "cue" => Payload::Cue(cue(&events[0])?),
        "scte35" => return Err(EventError::Scte35),
        _ => return Err(EventError::UnknownFormat(format.to_string())),
    };
    Ok(Event {
        payload,
        tracks,
        urgent,
    })
}

fn cue(v: &Value) -> Result<Cue, EventError> {
    let kind = string(v, "cueType")?.ok_or(EventError::Field {
        field: "events[0].cueType",
        must: "out or in",
    })?;
    match kind.to_ascii_lowercase().as_str() {
        "out" => {
            let duration_ms = match v.get("duration") {
                None | Some(Value::Null) => None,
                Some(d) => Some(d.as_u64().ok_or(EventError::Field {
                    field: "events[0].duration",
                    must: "a whole number of milliseconds",
                })?),
            };
            Ok(Cue::Out { duration_ms })
        }
        "in" => Ok(Cue::In),
        other => Err(EventError::CueType(other.to_string())),
    }
}

/// ID3v2.4 sizes are "syncsafe": 7 bits per byte.
fn syncsafe(n: usize) -> [u8; 4] {
    [
        ((n >> 21) & 0x7f) as u8,
        ((n >> 14) & 0x7f) as u8,
        ((n >> 7) & 0x7f) as u8,
        (n & 0x7f) as u8,
    ]
}

/// UTF-8 text encoding byte of ID3v2.4 text frames.
const UTF8: u8 = 3;

/// One ID3v2.4 tag holding a frame per event.
fn id3_tag(events: &[Value]) -> Result<Bytes, EventError> {
    let mut frames = Vec::new();
    for (index, e) in events.iter().enumerate() {
        let frame_type =
            e.get("frameType")
                .and_then(Value::as_str)
                .ok_or(EventError::FrameField {
                    index,
                    field: "frameType",
                })?;
        let id = frame_type.as_bytes();
        let well_formed = id.len() == 4
            && id
                .iter()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
        let bad = || EventError::FrameType {
            index,
            frame_type: frame_type.to_string(),
        };
        if !well_formed {
            return Err(bad());
        }
        let field = |name: &'static str| -> Result<Option<&str>, EventError> {
            match e.get(name) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s)),
                Some(_) => Err(EventError::FrameField { index, field: name }),
            }
        };
        let data = field("data")?.ok_or(EventError::FrameField {
            index,
            field: "data",
        })?;
        let mut body = Vec::new();
        if frame_type == "TXXX" {
            body.push(UTF8);
            body.extend_from_slice(field("info")?.unwrap_or("").as_bytes());
            body.push(0);
            body.extend_from_slice(data.as_bytes());
        } else if frame_type == "PRIV" {
            let owner = field("info")?.ok_or(EventError::FrameField {
                index,
                field: "info",
            })?;
            body.extend_from_slice(owner.as_bytes());
            body.push(0);
            body.extend_from_slice(data.as_bytes());
        } else if id[0] == b'T' {
            body.push(UTF8);
            body.extend_from_slice(data.as_bytes());
        } else {
            return Err(bad());
        }
        frames.extend_from_slice(id);
        frames.extend_from_slice(&syncsafe(body.len()));
        frames.extend_from_slice(&[0, 0]);
        frames.extend_from_slice(&body);
        if frames.len() + 10 > MAX_TAG_BYTES {
            return Err(EventError::TooLarge);
        }
    }
    let mut tag = Vec::with_capacity(10 + frames.len());
    tag.extend_from_slice(b"ID3\x04\x00\x00");
    tag.extend_from_slice(&syncsafe(frames.len()));
    tag.extend_from_slice(&frames);
    Ok(tag.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn omes_example_body_makes_one_id3v24_tag() {
        let e = parse(&json!({
            "eventFormat": "id3v2",
            "eventType": "video",
            "events": [
                {"frameType": "TXXX", "info": "AirenSoft", "data": "OvenMediaEngine"},
                {"frameType": "TIT2", "data": "OvenMediaEngine 123"}
            ]
        }))
        .unwrap();
        assert_eq!(e.tracks, Tracks::Video);
        assert!(!e.urgent);
        let Payload::Id3(tag) = e.payload else {
            panic!("not id3")
        };
        assert_eq!(&tag[..6], b"ID3\x04\x00\x00");
        let size = tag[6..10]
            .iter()
            .fold(0usize, |a, b| (a << 7) | usize::from(*b));
        assert_eq!(size, tag.len() - 10);
        // TXXX: encoding, description, NUL, value.
        assert_eq!(&tag[10..14], b"TXXX");
        let txxx = 1 + 9 + 1 + 15;
        assert_eq!(&tag[14..18], &syncsafe(txxx));
        assert_eq!(&tag[20..20 + txxx], b"\x03AirenSoft\x00OvenMediaEngine");
        let tit2 = &tag[20 + txxx..];
        assert_eq!(&tit2[..4], b"TIT2");
        assert_eq!(&tit2[10..], b"\x03OvenMediaEngine 123");
    }

    #[test]
    fn priv_cue_and_refusals() {
        let e = parse(&json!({"eventFormat": "ID3V2", "urgent": true,
            "events": [{"frameType": "PRIV", "info": "com.example", "data": "x"}]}))
        .unwrap();
        assert!(e.urgent);
        assert_eq!(e.tracks, Tracks::All);
        let Payload::Id3(tag) = e.payload else {
            panic!()
        };
        assert!(tag.ends_with(b"PRIV\x00\x00\x00\x0d\x00\x00com.example\x00x"));
        assert_eq!(
            parse(
                &json!({"eventFormat": "cue", "events": [{"cueType": "out", "duration": 30000}]})
            )
            .unwrap()
            .payload,
            Payload::Cue(Cue::Out {
                duration_ms: Some(30_000)
            })
        );
        let refused = [
            (json!([]), EventError::NotAnObject),
            (
                json!({"events": []}),
                EventError::Field {
                    field: "eventFormat",
                    must: "id3v2 or cue",
                },
            ),
            (
                json!({"eventFormat": "scte35", "events": [{}]}),
                EventError::Scte35,
            ),
            (
                json!({"eventFormat": "id3v2", "events": []}),
                EventError::NoEvents,
            ),
            (
                json!({"eventFormat": "id3v2", "eventType": "data", "events": [{}]}),
                EventError::UnknownEventType("data".into()),
            ),
            (
                json!({"eventFormat": "id3v2", "urgent": 1, "events": [{}]}),
                EventError::Field {
                    field: "urgent",
                    must: "true or false",
                },
            ),
            (
                json!({"eventFormat": "id3v2", "events": [{"frameType": "APIC", "data": "x"}]}),
                EventError::FrameType {
                    index: 0,
                    frame_type: "APIC".into(),
                },
            ),
            (
                json!({"eventFormat": "id3v2", "events": [{"frameType": "TIT2"}]}),
                EventError::FrameField {
                    index: 0,
                    field: "data",
                },
            ),
            (
                json!({"eventFormat": "id3v2", "events": [{"frameType": "PRIV", "data": "x"}]}),
                EventError::FrameField {
                    index: 0,
                    field: "info",
                },
            ),
            (
                json!({"eventFormat": "cue", "events": [{"cueType": "sideways"}]}),
                EventError::CueType("sideways".into()),
            ),
            (
                json!({"eventFormat": "id3v2", "events": [{"frameType": "TXXX", "data": "x".repeat(70_000)}]}),
                EventError::TooLarge,
            ),
        ];
        for (body, want) in refused {
            assert_eq!(parse(&body), Err(want), "{body}");
        }
    }
}
