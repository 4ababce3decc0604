//! A record request: `:startRecord` validation, the path rules, OME's path
//! macros and split schedules (DECISIONS sections 10 and 15). Pure
//! functions; no state, no files.

use crate::media::TrackId;
use crate::state::app::FileSpec;
use serde::{Deserialize, Serialize};

pub use crate::files::Container;

/// How the timestamps of split files run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SegmentationRule {
    /// Each file starts at 0 (OME's default).
    #[default]
    Discontinuity,
    /// Each file goes on from where the last one ended.
    Continuity,
}

impl SegmentationRule {
    pub fn name(self) -> &'static str {
        match self {
            SegmentationRule::Discontinuity => "discontinuity",
            SegmentationRule::Continuity => "continuity",
        }
    }
}

/// What the state file keeps of a record. Paths are the templates (with
/// macros), made absolute under the application's root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RecordSpec {
    pub id: String,
    pub vhost: String,
    pub app: String,
    pub stream_name: String,
    #[serde(default)]
    pub variant_names: Vec<String>,
    #[serde(default)]
    pub track_ids: Vec<TrackId>,
    pub file_path: String,
    pub info_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    #[serde(default)]
    pub segmentation_rule: SegmentationRule,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<String>,
    /// A time-lapse (kiln extension): one keyframe at most this often.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_lapse: Option<TimeLapse>,
    /// Pre-roll (kiln extension, ms): the first file of a live stream
    /// starts this long before the call, from the keyframe at or before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pre_roll: Option<u64>,
    pub created_ms: i64,
}

/// A time-lapse record (kiln's `keyframesEvery`, `timeLapseFps`): one
/// video keyframe per `every_ms` of the stream is written, nothing else,
/// each shown for `1 / fps` s of the film. No decoder: a keyframe stands
/// alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TimeLapse {
    pub every_ms: u64,
    pub fps: u32,
}

/// `keyframesEvery` bounds (ms): a tenth of a second to a day.
pub const TIME_LAPSE_EVERY_MS: std::ops::RangeInclusive<u64> = 100..=86_400_000;
/// `timeLapseFps` bounds; one frame per second of film when not given.
pub const TIME_LAPSE_FPS: std::ops::RangeInclusive<u32> = 1..=60;

/// `:startRecord` body (OME's fields).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartRecordRequest {
    pub id: Option<String>,
    pub stream: Option<crate::state::task::StreamSelector>,
    pub file_path: Option<String>,
    pub info_path: Option<String>,
    pub interval: Option<u64>,
    pub schedule: Option<String>,
    pub segmentation_rule: Option<String>,
    pub metadata: Option<String>,
    /// kiln: a time-lapse, one keyframe per this many ms.
    pub keyframes_every: Option<u64>,
    /// kiln: the time-lapse's frames per second of film (default 1).
    pub time_lapse_fps: Option<u32>,
    /// kiln: start this many ms before now (at most `<FILE><MaxPreRoll>`).
    pub pre_roll: Option<u64>,
}

/// Why a `:startRecord` body is refused (400 with the text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// OME's text: the required parameters, when any is missing.
    /// The required fields missing (`id`, `stream.name`).
    Missing(Vec<&'static str>),
    BadId,
    BothIntervalAndSchedule,
    BadInterval,
    BadSchedule(String),
    BadRule(String),
    /// `keyframesEvery` or `timeLapseFps` out of bounds, or the rate
    /// without the interval.
    BadTimeLapse,
    /// `preRoll` over the application's `<FILE><MaxPreRoll>` (or that unset).
    BadPreRoll(u64),
    /// No file or info path in the body nor in `<Publishers><FILE>`.
    NoPath(&'static str),
    /// The path's extension is neither `.mp4` nor `.ts`.
    BadContainer(String),
    Path(PathError),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::Missing(names) => crate::state::task::write_missing(f, names),
            RequestError::BadId => f.write_str("id must be 1-255 printable characters"),
            RequestError::BothIntervalAndSchedule => {
                f.write_str("[Interval] and [Schedule] cannot be used at the same time")
            }
            RequestError::BadInterval => f.write_str("interval must be at least 1000 (ms)"),
            RequestError::BadSchedule(s) => write!(
                f,
                "schedule [{}] is not \"<second> <minute> <hour>\" (each *, */n or n)",
                s.escape_debug()
            ),
            RequestError::BadRule(r) => write!(
                f,
                "segmentationRule [{}] is not continuity or discontinuity",
                r.escape_debug()
            ),
            RequestError::BadTimeLapse => write!(
                f,
                "keyframesEvery must be {}-{} (ms) and timeLapseFps {}-{}, given with keyframesEvery",
                TIME_LAPSE_EVERY_MS.start(),
                TIME_LAPSE_EVERY_MS.end(),
                TIME_LAPSE_FPS.start(),
                TIME_LAPSE_FPS.end()
            ),
            RequestError::BadPreRoll(0) => f.write_str(
                "preRoll needs <Publishers><FILE><MaxPreRoll> in the application (ms)",
            ),
            RequestError::BadPreRoll(max) => write!(f, "preRoll must be at most {max} (ms)"),
            RequestError::NoPath(which) => write!(
                f,
                "There is no {which}: give it in the request or in <Publishers><FILE>"
            ),
            RequestError::BadContainer(p) => {
                write!(f, "filePath [{}] must end in .mp4 or .ts", p.escape_debug())
            }
            RequestError::Path(e) => e.fmt(f),
        }
    }
}

pub use crate::files::{resolve, PathError};

/// How the state file keeps record tasks (`"records"`, `addRecord`/`deleteRecord`).
pub static KIND: crate::state::store::TaskKind = crate::state::store::TaskKind {
    list: "records",
    item: "record",
    id_field: "id",
};

/// A split schedule: OME's `"<second> <minute> <hour>"`, each field `*`,
/// `*/n` or a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    fields: [Field; 3],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Any,
    Every(u32),
    At(u32),
}

impl Field {
    fn matches(self, v: u32) -> bool {
        match self {
            Field::Any => true,
            Field::Every(n) => v % n == 0,
            Field::At(n) => v == n,
        }
    }
}

impl Schedule {
    pub fn parse(s: &str) -> Option<Schedule> {
        let parts: Vec<&str> = s.split_whitespace().collect();
        if parts.len() != 3 {
            return None;
        }
        let mut fields = [Field::Any; 3];
        for (i, (p, max)) in parts.iter().zip([60, 60, 24]).enumerate() {
            fields[i] = if *p == "*" {
                Field::Any
            } else if let Some(n) = p.strip_prefix("*/") {
                match n.parse::<u32>() {
                    Ok(n) if n >= 1 && n < max => Field::Every(n),
                    _ => return None,
                }
            } else {
                match p.parse::<u32>() {
                    Ok(n) if n < max => Field::At(n),
                    _ => return None,
                }
            };
        }
        if fields == [Field::Any; 3] {
            return None; // every second: not a split schedule
        }
        Some(Schedule { fields })
    }

    /// The first wall-clock second after `unix_ms` (zone `offset` seconds
    /// east of UTC) that the schedule names, in unix ms.
    pub fn next_after(&self, unix_ms: i64, offset: i32) -> i64 {
        let start = unix_ms.div_euclid(1000) + 1;
        // A matching second comes within a day.
        for s in start..start + 86_400 {
            let local = (s + offset as i64).rem_euclid(86_400) as u32;
            let (h, m, sec) = (local / 3600, (local / 60) % 60, local % 60);
            if self.fields[0].matches(sec) && self.fields[1].matches(m) && self.fields[2].matches(h)
            {
                return s * 1000;
            }
        }
        start * 1000 + 86_400_000
    }
}

/// What OME's path macros stand for in one file's path.
pub struct Macros<'a> {
    pub vhost: &'a str,
    pub app: &'a str,
    pub stream: &'a str,
    pub id: &'a str,
    pub transaction: &'a str,
    pub sequence: u64,
    pub start_ms: i64,
    pub end_ms: Option<i64>,
    pub utc_offset: i32,
}

/// Expands `${VirtualHost}`, `${Application}`, `${Stream}`,
/// `${SourceStream}`, `${Id}`, `${TransactionId}`, `${Sequence}`,
/// `${StartTime:fmt}` and `${EndTime:fmt}` (fmt of `YYYY MM DD hh mm ss`).
/// Names come from the publisher: `/` in them becomes `_` (no new
/// directories, no `..` step). `${EndTime}` before the end is the start.
pub fn expand(template: &str, m: &Macros<'_>) -> String {
    let safe = |s: &str| s.replace('/', "_");
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(close) = after.find('}') else {
            out.push_str(&rest[at..]);
            return out;
        };
        let name = &after[..close];
        let (key, fmt) = name.split_once(':').unwrap_or((name, "YYYYMMDDhhmmss"));
        match key {
            "VirtualHost" => out.push_str(&safe(m.vhost)),
            "Application" => out.push_str(&safe(m.app)),
            "Stream" | "SourceStream" => out.push_str(&safe(m.stream)),
            "Id" => out.push_str(&safe(m.id)),
            "TransactionId" => out.push_str(m.transaction),
            "Sequence" => out.push_str(&m.sequence.to_string()),
            "StartTime" => time(&mut out, fmt, m.start_ms, m.utc_offset),
            "EndTime" => time(&mut out, fmt, m.end_ms.unwrap_or(m.start_ms), m.utc_offset),
            _ => {
                out.push_str("${");
                out.push_str(name);
                out.push('}');
            }
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out
}

fn time(out: &mut String, fmt: &str, unix_ms: i64, offset: i32) {
    let (y, mo, d, h, mi, s) = crate::clock::civil(unix_ms, offset);
    let mut rest = fmt;
    while !rest.is_empty() {
        let (text, len) = if rest.starts_with("YYYY") {
            (format!("{y:04}"), 4)
        } else {
            let v = match rest.get(..2) {
                Some("MM") => Some(mo),
                Some("DD") => Some(d),
                Some("hh") => Some(h),
                Some("mm") => Some(mi),
                Some("ss") => Some(s),
                _ => None,
            };
            match v {
                Some(v) => (format!("{v:02}"), 2),
                None => {
                    let c = rest.chars().next().unwrap_or('_');
                    let c = if c == '/' { '_' } else { c };
                    (c.to_string(), c.len_utf8().max(1))
                }
            }
        };
        out.push_str(&text);
        rest = rest.get(len..).unwrap_or("");
    }
}

/// Checks a `:startRecord` body (after vhost and app, which the caller
/// checked) against the application's `<Publishers><FILE>`.
pub fn validate_start(
    req: StartRecordRequest,
    vhost: &str,
    app: &str,
    file: &FileSpec,
    now_ms: i64,
) -> Result<RecordSpec, RequestError> {
    let id = req.id.filter(|s| !s.is_empty());
    let stream = req.stream;
    let name = stream
        .as_ref()
        .and_then(|s| s.name.clone())
        .filter(|s| !s.is_empty());
    let (Some(id), Some(stream_name)) = (id.clone(), name.clone()) else {
        let mut missing = Vec::new();
        if id.is_none() {
            missing.push("id");
        }
        if name.is_none() {
            missing.push("stream.name");
        }
        return Err(RequestError::Missing(missing));
    };
    if id.len() > 255 || id.chars().any(char::is_control) {
        return Err(RequestError::BadId);
    }
    if req.interval.is_some() && req.schedule.is_some() {
        return Err(RequestError::BothIntervalAndSchedule);
    }
    if req.interval.is_some_and(|i| i < 1000) {
        return Err(RequestError::BadInterval);
    }
    if let Some(s) = &req.schedule {
        if Schedule::parse(s).is_none() {
            return Err(RequestError::BadSchedule(s.clone()));
        }
    }
    let time_lapse = match (req.keyframes_every, req.time_lapse_fps) {
        (None, None) => None,
        (Some(every_ms), fps) => {
            let fps = fps.unwrap_or(1);
            if !TIME_LAPSE_EVERY_MS.contains(&every_ms) || !TIME_LAPSE_FPS.contains(&fps) {
                return Err(RequestError::BadTimeLapse);
            }
            Some(TimeLapse { every_ms, fps })
        }
        (None, Some(_)) => return Err(RequestError::BadTimeLapse),
    };
    let max_pre_roll = file.max_pre_roll.unwrap_or(0);
    if req.pre_roll.is_some_and(|ms| ms > max_pre_roll) {
        return Err(RequestError::BadPreRoll(max_pre_roll));
    }
    let segmentation_rule = match req.segmentation_rule.as_deref() {
        None => SegmentationRule::Discontinuity,
        Some(r) if r.eq_ignore_ascii_case("discontinuity") => SegmentationRule::Discontinuity,
        Some(r) if r.eq_ignore_ascii_case("continuity") => SegmentationRule::Continuity,
        Some(r) => return Err(RequestError::BadRule(r.to_string())),
    };
    let root = file.root_path.as_deref();
    let file_path = req
        .file_path
        .filter(|p| !p.is_empty())
        .or_else(|| file.file_path.clone())
        .ok_or(RequestError::NoPath("filePath"))?;
    if Container::of(&file_path).is_none() {
        return Err(RequestError::BadContainer(file_path));
    }
    let info_path = req
        .info_path
        .filter(|p| !p.is_empty())
        .or_else(|| file.info_path.clone())
        .ok_or(RequestError::NoPath("infoPath"))?;
    let file_path = resolve(root, &file_path).map_err(RequestError::Path)?;
    let info_path = resolve(root, &info_path).map_err(RequestError::Path)?;
    let stream = stream.unwrap_or(crate::state::task::StreamSelector {
        name: None,
        variant_names: Vec::new(),
        track_ids: Vec::new(),
    });
    Ok(RecordSpec {
        id,
        vhost: vhost.to_string(),
        app: app.to_string(),
        stream_name,
        variant_names: stream.variant_names,
        track_ids: stream.track_ids,
        file_path: file_path.display().to_string(),
        info_path: info_path.display().to_string(),
        interval_ms: req.interval,
        schedule: req.schedule,
        segmentation_rule,
        metadata: req.metadata,
        time_lapse,
        pre_roll: req.pre_roll.filter(|&ms| ms > 0),
        created_ms: now_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn paths_stay_under_the_root() {
        let root = Some("/srv/rec");
        assert_eq!(
            resolve(root, "a/b.ts").unwrap(),
            PathBuf::from("/srv/rec/a/b.ts")
        );
        assert_eq!(
            resolve(root, "/srv/rec/./x/../y.mp4").unwrap(),
            PathBuf::from("/srv/rec/y.mp4")
        );
        // OME's paths: absolute ones are under the root too.
        assert_eq!(
            resolve(root, "/default/app/s.ts").unwrap(),
            PathBuf::from("/srv/rec/default/app/s.ts")
        );
        assert_eq!(
            resolve(root, "/srv/record/x.ts").unwrap(),
            PathBuf::from("/srv/rec/srv/record/x.ts")
        );
        for bad in [
            "../x.ts",
            "/../x.ts",
            "a/../../x.ts",
            "/srv/rec/../x.ts",
            ".",
        ] {
            assert!(
                matches!(resolve(root, bad), Err(PathError::OutsideRoot(..))),
                "{bad}"
            );
        }
        assert!(matches!(resolve(None, "x.ts"), Err(PathError::Relative(_))));
        assert_eq!(
            resolve(None, "/tmp/x.ts").unwrap(),
            PathBuf::from("/tmp/x.ts")
        );
        assert!(matches!(
            resolve(None, "/../x"),
            Err(PathError::Invalid(..))
        ));
        assert!(matches!(
            resolve(root, "a\nb.ts"),
            Err(PathError::Invalid(..))
        ));
        assert!(matches!(resolve(root, ""), Err(PathError::Invalid(..))));
        // `..` past / under a root says what `..` out of the root says
        // (issue 28: infoPath said "not valid" where filePath said this).
        for p in [
            "../../../../../../../etc/x.xml",
            "../x.xml",
            "/../etc/x.xml",
        ] {
            let e = resolve(root, p).unwrap_err();
            assert!(matches!(e, PathError::OutsideRoot(..)), "{p}: {e:?}");
            assert!(
                e.to_string().contains("is outside the root [/srv/rec]"),
                "{e}"
            );
        }
    }

    #[test]
    fn macros_expand_and_names_cannot_make_directories() {
        let m = Macros {
            vhost: "default",
            app: "app",
            stream: "../cam/1",
            id: "r1",
            transaction: "t9",
            sequence: 3,
            // 2026-11-23T12:34:56Z
            start_ms: 1_795_437_296_000,
            end_ms: Some(1_795_437_316_000),
            utc_offset: 3600,
        };
        assert_eq!(
            expand(
                "/r/${VirtualHost}/${Application}/${Stream}_${Id}_${Sequence}_${StartTime:YYYYMMDDhhmmss}_${EndTime:hh-mm-ss}.ts",
                &m
            ),
            "/r/default/app/.._cam_1_r1_3_20261123133456_13-35-16.ts"
        );
        assert_eq!(expand("${Unknown}${Stream", &m), "${Unknown}${Stream");
        assert_eq!(expand("${TransactionId}", &m), "t9");
    }

    #[test]
    fn schedules_parse_and_find_the_next_second() {
        let s = Schedule::parse("0 */1 *").unwrap();
        // 12:34:56 -> 12:35:00
        assert_eq!(s.next_after(1_795_437_296_000, 0), 1_795_437_300_000);
        let s = Schedule::parse("*/20 * *").unwrap();
        assert_eq!(s.next_after(1_795_437_296_500, 0), 1_795_437_300_000);
        assert_eq!(s.next_after(1_795_437_300_000, 0), 1_795_437_320_000);
        let s = Schedule::parse("0 0 3").unwrap();
        // 03:00:00 local at +01:00 is 02:00:00 UTC.
        let next = s.next_after(1_795_437_296_000, 3600);
        assert_eq!(crate::clock::civil(next, 3600).3, 3);
        for bad in ["* * *", "60 * *", "*/0 * *", "0 0", "a b c", "0 0 24"] {
            assert!(Schedule::parse(bad).is_none(), "{bad}");
        }
    }

    fn body(json: &str) -> StartRecordRequest {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn start_bodies_are_checked_in_ome_order() {
        let file = FileSpec {
            root_path: Some("/srv/rec".into()),
            file_path: Some("${Stream}_${Sequence}.ts".into()),
            info_path: Some("${Stream}.xml".into()),
            max_pre_roll: Some(10_000),
        };
        let ok = validate_start(
            body(r#"{"id":"r","stream":{"name":"s","trackIds":[1]},"interval":20000,"segmentationRule":"continuity"}"#),
            "v",
            "a",
            &file,
            5,
        )
        .unwrap();
        assert_eq!(ok.file_path, "/srv/rec/${Stream}_${Sequence}.ts");
        assert_eq!(ok.info_path, "/srv/rec/${Stream}.xml");
        assert_eq!(ok.track_ids, vec![1]);
        assert_eq!(ok.segmentation_rule, SegmentationRule::Continuity);
        let err = |json: &str| {
            validate_start(body(json), "v", "a", &file, 0)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err(r#"{"stream":{"name":"s"}}"#),
            "There is no required parameter [ id]"
        );
        assert_eq!(
            err("{}"),
            "There is no required parameter [ id stream.name]"
        );
        assert_eq!(
            err(r#"{"id":"r","stream":{"name":"s"},"interval":5000,"schedule":"0 * *"}"#),
            "[Interval] and [Schedule] cannot be used at the same time"
        );
        assert!(
            err(r#"{"id":"r","stream":{"name":"s"},"filePath":"x.flv"}"#).contains(".mp4 or .ts")
        );
        assert!(
            err(r#"{"id":"r","stream":{"name":"s"},"filePath":"/../etc/x.ts"}"#)
                .contains("outside the root [/srv/rec]")
        );
        assert!(err(r#"{"id":"r","stream":{"name":"s"},"schedule":"x"}"#).contains("schedule"));
        assert!(
            err(r#"{"id":"r","stream":{"name":"s"},"segmentationRule":"x"}"#)
                .contains("segmentationRule")
        );
        let none = FileSpec::default();
        assert_eq!(
            validate_start(
                body(r#"{"id":"r","stream":{"name":"s"}}"#),
                "v",
                "a",
                &none,
                0
            )
            .unwrap_err(),
            RequestError::NoPath("filePath")
        );
    }
}
