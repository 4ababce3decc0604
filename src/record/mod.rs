//! Recording (`:startRecord`, `:stopRecord`, `:records`; DECISIONS section
//! 10): a stream's tracks into fragmented MP4 or MPEG-TS files, split by
//! interval or schedule, with OME's info XML and path macros.
//!
//! - [`request`]: body validation, the path rules, macros, schedules;
//! - [`task`]: the record table and states;
//! - [`mux`]: the bytes of a file;
//! - [`manager`]: the recordings of live streams, as file operations for
//!   the writer thread (`server/file_writer.rs`), which alone touches disk;
//! - [`preroll`]: the recent media a pre-roll starts from.

pub mod manager;
pub mod mux;
pub mod preroll;
pub mod request;
pub mod task;

/// Drives what parses peer and caller text here with arbitrary input (the
/// fuzz target, with `hls::fuzz::fuzz_dump_request`): `:startRecord` bodies through their
/// checks, the accepted paths through OME's macros with publisher names
/// made of the input, and the input as a split schedule.
pub mod fuzz {
    use super::request::{expand, resolve, validate_start, Macros, Schedule, StartRecordRequest};

    pub fn fuzz_request(data: &[u8]) {
        let text = String::from_utf8_lossy(data);
        if let Some(s) = Schedule::parse(&text) {
            let _ = s.next_after(
                i64::from(u32::from_le_bytes([data[0], 1, 2, 3])) * 1000,
                3600,
            );
        }
        let file = crate::state::app::FileSpec {
            root_path: Some("/srv/rec".into()),
            file_path: Some("${Stream}_${Sequence}.ts".into()),
            info_path: Some("${Id}.xml".into()),
            max_pre_roll: Some(10_000),
        };
        let (json, name) = text.split_at(text.find('\n').unwrap_or(text.len()));
        if let Ok(req) = serde_json::from_str::<StartRecordRequest>(json) {
            if let Ok(spec) = validate_start(req, "v", "a", &file, 0) {
                let m = Macros {
                    vhost: "v",
                    app: "a",
                    stream: name,
                    id: &spec.id,
                    transaction: "t",
                    sequence: 7,
                    start_ms: 1_795_437_296_000,
                    end_ms: None,
                    utc_offset: -3600,
                };
                let path = expand(&spec.file_path, &m);
                if let Ok(p) = resolve(Some("/srv/rec"), &path) {
                    // panic-audit: fuzzing only; a path outside the root is the bug it finds.
                    assert!(p.starts_with("/srv/rec"), "{}", p.display());
                }
            }
        }
    }
}
