//! The rules every name kiln is given follows (hosts, applications,
//! streams), from the API, the config file or an ingest.

/// Is `name` a valid virtual host (or application) name: 1-255 characters of
/// letters, digits, `-`, `_`, `.`, and not `.` or `..` (they would name a
/// path segment, not a host).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && name.len() <= 255
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Why a stream name from an ingest (RTMP publish or play, SRT streamid)
/// is refused: the API's name rules apply to every way a name arrives, so
/// no name can be longer than 255 bytes or hold a NUL, `/`, a control or
/// bidi character, or be `.` or `..`.
pub const STREAM_NAME_RULE: &str =
    "The stream name must be 1-255 letters, digits, '-', '_' or '.' (not . or ..)";
