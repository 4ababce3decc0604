//! The application as the API shows and accepts it (OME's JSON shape:
//! `outputProfiles.outputProfile[].encodes.{videos,audios,datas}`,
//! `providers.{rtmp,srt,mpegts.streamMap.stream[]}`, `publishers.push`), and
//! its validation. Built from `server.xml` (by `config`) and from the API
//! alike.
//!
//! kiln relays and never transcodes: every encode must be a bypass; a
//! transcoding encode is refused with a message that says so.

use super::{ProfileProblem, SpecError};
use crate::media::{MediaKind, Track};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AppSpec {
    pub name: String,
    #[serde(rename = "type", default = "live")]
    pub app_type: String,
    /// Shown by GET as OME does; ignored on input.
    #[serde(default, skip_serializing)]
    pub dynamic: Option<bool>,
    #[serde(default)]
    pub output_profiles: OutputProfiles,
    #[serde(default)]
    pub providers: Providers,
    #[serde(default)]
    pub publishers: Publishers,
    /// kiln: how much disk the application's recordings may take.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_budget: Option<DiskBudget>,
    /// The body an API caller gave (merged with later PATCHes), which GET
    /// echoes as OME does: its values in the caller's JSON types, with
    /// OME's elements kiln does not use. Never read for behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub given: Option<Value>,
}

fn live() -> String {
    "live".into()
}

/// A disk budget (kiln's `<DiskBudget>`, of an application or of the
/// server): at most `max_total_mb` of recordings in total, at least
/// `min_free_mb` left free on their file system. Crossing either deletes
/// the oldest recorded files (of the record writing, then of its
/// application's other records); with nothing left to delete the record
/// goes to `error` ("disk full").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiskBudget {
    #[serde(
        rename = "maxTotalMB",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub max_total_mb: Option<u64>,
    #[serde(rename = "minFreeMB", default, skip_serializing_if = "Option::is_none")]
    pub min_free_mb: Option<u64>,
}

/// What is on disk as the budgets count it, and how the reasons name it.
#[derive(Debug, Clone, Copy)]
pub struct DiskUse<'a> {
    /// Bytes of the application's files, and of all the server's.
    pub app: u64,
    pub all: u64,
    /// Bytes free on their file system, as last read.
    pub free: Option<u64>,
    /// What the application's and the server's bytes are ("recordings").
    pub app_what: &'a str,
    pub server_what: &'a str,
    /// Room kept below each `MaxTotalMB` (for what is written before the
    /// next check).
    pub room: u64,
}

impl DiskBudget {
    /// What `usage` crosses of an application's budget and the
    /// server's, in order (the application's total, the server's, the
    /// free space): why, and by how many bytes.
    pub fn crossed(app: DiskBudget, server: DiskBudget, usage: &DiskUse<'_>) -> Vec<(String, u64)> {
        const MB: u64 = 1 << 20;
        let mut out = Vec::new();
        let totals = [
            (
                app.max_total_mb,
                usage.app,
                "the application's",
                usage.app_what,
                "MaxTotalMB",
            ),
            (
                server.max_total_mb,
                usage.all,
                "the server's",
                usage.server_what,
                "its MaxTotalMB",
            ),
        ];
        for (mb, total, whose, what, name) in totals {
            let Some(mb) = mb else { continue };
            let max = mb.saturating_mul(MB).saturating_sub(usage.room);
            if total > max {
                out.push((
                    format!("{whose} {what} take {total} bytes, over the {max} {name} {mb} allows"),
                    total - max,
                ));
            }
        }
        let floor = app
            .min_free_mb
            .max(server.min_free_mb)
            .map(|mb| mb.saturating_mul(MB));
        if let (Some(min), Some(free)) = (floor, usage.free) {
            if free < min {
                out.push((
                    format!(
                        "{free} bytes free on the file system, under the {min} MinFreeMB {} asks",
                        min / MB
                    ),
                    min - free,
                ));
            }
        }
        out
    }
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputProfiles {
    #[serde(default)]
    pub output_profile: Vec<OutputProfile>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputProfile {
    pub name: String,
    #[serde(default = "origin_stream_name")]
    pub output_stream_name: String,
    #[serde(default)]
    pub encodes: Encodes,
    /// OME's `<Playlist>`s with rendition templates (config files only:
    /// the API's app bodies leave playlists out, as before).
    #[serde(skip)]
    pub playlists: Vec<super::playlists::PlaylistSpec>,
}

fn origin_stream_name() -> String {
    "${OriginStreamName}".into()
}

/// Encodes without a `name` are named as OME (and kiln's config file) names
/// them: `video_0`, `audio_0`, `data_0`, ... counting the unnamed ones of
/// each kind.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, from = "EncodesIn")]
pub struct Encodes {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub videos: Vec<Encode>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audios: Vec<Encode>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub datas: Vec<Encode>,
}

/// [`Encodes`] as a request or state file has them (names may be missing).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct EncodesIn {
    #[serde(default)]
    videos: Vec<Encode>,
    #[serde(default)]
    audios: Vec<Encode>,
    #[serde(default)]
    datas: Vec<Encode>,
}

impl From<EncodesIn> for Encodes {
    fn from(e: EncodesIn) -> Self {
        let name = |mut list: Vec<Encode>, prefix: &str| {
            for (unnamed, enc) in list
                .iter_mut()
                .filter(|enc| enc.name.is_empty())
                .enumerate()
            {
                enc.name = format!("{prefix}_{unnamed}");
            }
            list
        };
        Encodes {
            videos: name(e.videos, "video"),
            audios: name(e.audios, "audio"),
            datas: name(e.datas, "data"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Encode {
    /// Missing: named by [`Encodes`] (`video_0`, ...).
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub bypass: bool,
    /// Transcoding settings (codec, bitrate, ..., OME's `bypassIfMatch`):
    /// kept and shown as given; a conditional bypass passes a track of
    /// its codec, and anything else transcoding is refused (kiln relays).
    #[serde(flatten)]
    pub settings: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Providers {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtmp: Option<IngestProvider>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub srt: Option<IngestProvider>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mpegts: Option<MpegtsProvider>,
    /// Publishing over WebRTC (WHIP, OME's `direction=send`): OME's
    /// `providers.webrtc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webrtc: Option<WebRtcIngestSpec>,
    /// Scheduled channels (`<Providers><Schedule>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<ScheduleProvider>,
    /// Multiplex channels (`<Providers><Multiplex>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multiplex: Option<MultiplexProvider>,
}

/// An RTMP or SRT provider (`<Providers><RTMP>`, `providers.rtmp`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IngestProvider {
    /// OME's `<BlockDuplicateStreamName>` (default true): a publisher of a
    /// name that is live is refused, unless the live one has sent nothing
    /// for [`TAKE_OVER_AFTER`] (a reconnecting encoder whose old
    /// connection died without a close takes its name back). False: any
    /// new publisher takes the name over at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_duplicate_stream_name: Option<bool>,
    /// OME's `<AudioMap>` (SRT): the stream's audio tracks' labels, in
    /// order (what a player's audio menu shows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audio_map: Vec<AudioMapItem>,
}

/// One item of OME's `AudioMap` (scheduled channels, SRT and MPEG-TS
/// providers): a label for the audio track of its position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AudioMapItem {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub characteristics: Option<String>,
}

impl AudioMapItem {
    /// Its label, checked.
    pub fn label(&self) -> Result<crate::media::TrackLabel, String> {
        crate::media::TrackLabel::new(
            Some(&self.name),
            self.language.as_deref(),
            self.characteristics.as_deref(),
        )
    }
}

/// The most items an `AudioMap` has (audio tracks it labels).
pub const MAX_AUDIO_MAP: usize = 8;

/// An `AudioMap`'s labels, each checked (an item that is not is left
/// out: the config and the API refuse them before they get here).
pub fn audio_labels(map: &[AudioMapItem]) -> Vec<crate::media::TrackLabel> {
    map.iter().filter_map(|m| m.label().ok()).collect()
}

impl IngestProvider {
    /// Does a live publisher keep its name against a newcomer?
    pub fn blocks_duplicates(&self) -> bool {
        self.block_duplicate_stream_name.unwrap_or(true)
    }
}

/// A publisher silent this long loses its name to a new publisher of it
/// (a connection that died without a FIN looks live until the 30 s idle
/// timeout; an encoder reconnects within a few seconds).
pub const TAKE_OVER_AFTER: std::time::Duration = std::time::Duration::from_secs(2);

/// Where a scheduled channel's files are (absolute, or relative to the
/// config file's directory, resolved when read).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleProvider {
    /// `file://` items are under it.
    #[serde(default)]
    pub media_root_dir: String,
    /// `.sch` files are watched in it (none: API channels only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub schedule_files_dir: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MultiplexProvider {
    /// `.mux` files are watched in it (none: API channels only).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mux_files_dir: String,
}

/// An application's WebRTC publishing settings (`<Providers><WebRTC>`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebRtcIngestSpec {
    /// ICE must complete, and the publisher keep answering, within this
    /// (ms; OME's default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MpegtsProvider {
    #[serde(default)]
    pub stream_map: StreamMap,
    /// OME's `<AudioMap>`, as for SRT.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audio_map: Vec<AudioMapItem>,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamMap {
    #[serde(default)]
    pub stream: Vec<StreamMapItem>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamMapItem {
    /// Stream name; `${Port}` is replaced by the port.
    pub name: String,
    /// `4000`, `4000/udp` or `4000-4003`.
    pub port: String,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Publishers {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push: Option<Empty>,
    /// LL-HLS viewers: OME's `publishers.llhls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llhls: Option<LlhlsSpec>,
    /// HLS (MPEG-TS segments) viewers: OME's `publishers.hls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hls: Option<HlsSpec>,
    /// WebRTC viewers: OME's `publishers.webrtc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webrtc: Option<WebRtcSpec>,
    /// Recording (`:startRecord`): OME's `publishers.file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<FileSpec>,
}

/// An application's WebRTC playback settings (`<Publishers><WebRTC>`,
/// OME's `publishers.webrtc`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebRtcSpec {
    /// ICE must complete, and the viewer keep answering, within this (ms;
    /// OME's default 30000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
    /// RTX (NACK answers): always on in kiln.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtx: Option<bool>,
}

/// An application's recording settings (`<Publishers><FILE>`): the root
/// that relative record paths are under (and that absolute ones must stay
/// in), and the default file and info paths (OME's path macros).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FileSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info_path: Option<String>,
    /// kiln: the most `preRoll` a `:startRecord` may ask (ms); while set,
    /// the application's live streams keep that much of their media (and
    /// the GOP before it) in memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_pre_roll: Option<u64>,
}

/// `<MaxPreRoll>`'s bound (ms): two minutes of every stream of the app in
/// memory is the most an application may ask.
pub const MAX_PRE_ROLL_MS: u64 = 120_000;

impl FileSpec {
    /// What is wrong with the settings, if anything: the root must be an
    /// absolute path; the default file path must end in `.mp4` or `.ts`.
    pub fn problem(&self) -> Option<String> {
        if let Some(r) = &self.root_path {
            if !r.starts_with('/') {
                return Some(format!(
                    "RootPath [{}] must be an absolute path",
                    r.escape_debug()
                ));
            }
        }
        if let Some(f) = &self.file_path {
            if crate::files::Container::of(f).is_none() {
                return Some(format!(
                    "FilePath [{}] must end in .mp4 or .ts",
                    f.escape_debug()
                ));
            }
        }
        if self.max_pre_roll.is_some_and(|ms| ms > MAX_PRE_ROLL_MS) {
            return Some(format!("MaxPreRoll must be at most {MAX_PRE_ROLL_MS} (ms)"));
        }
        None
    }
}

/// An application's HLS (MPEG-TS) settings.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HlsSpec {
    /// Seconds (default 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_duration: Option<f64>,
    /// Segments kept (default 10, 3-100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_count: Option<u32>,
    /// Origins allowed to read from a browser (the API's patterns; unset:
    /// any origin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_domains: Option<Vec<String>>,
    /// `<DVR>`, as LL-HLS's (`EventPlaylistType` applies here).
    #[serde(
        default,
        rename = "dVR",
        alias = "dvr",
        skip_serializing_if = "Option::is_none"
    )]
    pub dvr: Option<DvrSpec>,
}

impl HlsSpec {
    /// (segment duration, segments kept), out-of-range values clamped.
    pub fn settings(&self) -> (std::time::Duration, usize) {
        let d = self
            .segment_duration
            .filter(|v| v.is_finite())
            .map_or(6.0, |v| v.clamp(1.0, 60.0));
        let n = self.segment_count.map_or(10, |n| n.clamp(3, 100) as usize);
        (std::time::Duration::from_secs_f64(d), n)
    }
}

/// An application's LL-HLS settings (seconds; unset: the defaults of
/// DECISIONS section 9).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LlhlsSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_duration: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part_hold_back: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_duration: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_count: Option<u32>,
    /// How long (seconds) a playlist asked for before the stream's first
    /// complete segment is held for it before 503 (kiln extension,
    /// `<FirstSegmentTimeout>`; default three segment durations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_segment_timeout: Option<f64>,
    /// Origins allowed to read from a browser (the API's patterns; unset:
    /// any origin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_domains: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_control: Option<CacheControlSpec>,
    /// `<Dumps>`: OME's automatic dumps, and the root of the API's dump
    /// paths (kiln extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dumps: Option<DumpsSpec>,
    /// `<DVR>`: segments older than the live window kept on disk, so a
    /// viewer can go back (OME's element; its JSON name is `dVR`).
    #[serde(
        default,
        rename = "dVR",
        alias = "dvr",
        skip_serializing_if = "Option::is_none"
    )]
    pub dvr: Option<DvrSpec>,
}

impl Publishers {
    /// LL-HLS's and HLS's DVRs, by the publisher's JSON name.
    pub fn named_dvrs(&self) -> [(&'static str, Option<&DvrSpec>); 2] {
        [
            ("llhls", self.llhls.as_ref().and_then(|l| l.dvr.as_ref())),
            ("hls", self.hls.as_ref().and_then(|h| h.dvr.as_ref())),
        ]
    }

    /// The DVRs set (LL-HLS's, HLS's).
    pub fn dvrs(&self) -> impl Iterator<Item = &DvrSpec> {
        self.named_dvrs().into_iter().filter_map(|(_, d)| d)
    }
}

/// OME's `<DVR>` of `<LLHLS>` and `<HLS>`: `Enable`, `TempStoragePath`
/// (default `/tmp/ll_hls_dvr`), `MaxDuration` (seconds, default 3600) and
/// `EventPlaylistType` (HLS's playlist says `EXT-X-PLAYLIST-TYPE:EVENT`;
/// LL-HLS's never does, as in OME).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DvrSpec {
    #[serde(default)]
    pub enable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temp_storage_path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_playlist_type: Option<bool>,
}

/// OME's default `<TempStoragePath>`.
pub const DVR_DEFAULT_PATH: &str = "/tmp/ll_hls_dvr";
/// The longest DVR window (a week): a bound on what one stream keeps.
pub const DVR_MAX_DURATION: u64 = 7 * 24 * 3600;

impl DvrSpec {
    /// The folder, made absolute (OME's default when unset).
    pub fn path(&self) -> &str {
        self.temp_storage_path
            .as_deref()
            .unwrap_or(DVR_DEFAULT_PATH)
    }

    /// The window (OME's default one hour).
    pub fn window(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.max_duration.unwrap_or(3600).clamp(1, DVR_MAX_DURATION))
    }

    /// What is wrong with it, if anything (the message names the field).
    pub fn problem(&self) -> Option<String> {
        if !std::path::Path::new(self.path()).is_absolute() {
            return Some(format!(
                "tempStoragePath [{}] must be an absolute folder",
                self.path().escape_debug()
            ));
        }
        if self
            .max_duration
            .is_some_and(|d| d == 0 || d > DVR_MAX_DURATION)
        {
            return Some(format!(
                "maxDuration must be 1 to {DVR_MAX_DURATION} seconds"
            ));
        }
        None
    }
}

/// OME's `<LLHLS><CacheControl>`: `max-age` seconds per kind of file; 0
/// means `no-cache, no-store`, -1 no `Cache-Control` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CacheControlSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_playlist_max_age: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunklist_max_age: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunklist_with_directives_max_age: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment_max_age: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_segment_max_age: Option<i32>,
}

/// Which kind of media an encode names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeTarget {
    Video,
    Audio,
    Data,
}

impl AppSpec {
    /// Checks what serde cannot. The message names the field.
    pub fn validate(&self) -> Result<(), SpecError> {
        if !super::name::valid_name(&self.name) {
            return Err(SpecError::BadName(self.name.clone()));
        }
        if self.app_type != "live" {
            return Err(SpecError::NotLive(self.app_type.clone()));
        }
        let mut profile_names = Vec::new();
        for p in &self.output_profiles.output_profile {
            if p.name.is_empty() {
                return Err(SpecError::Empty(
                    "outputProfiles.outputProfile[].name".into(),
                ));
            }
            if profile_names.contains(&&p.name) {
                return Err(SpecError::Twice {
                    what: "output profile",
                    name: p.name.clone(),
                });
            }
            profile_names.push(&p.name);
            if p.output_stream_name.trim().is_empty() {
                return Err(SpecError::Profile {
                    profile: p.name.clone(),
                    problem: ProfileProblem::NoOutputStreamName,
                });
            }
            for (kind, list) in [
                ("videos", &p.encodes.videos),
                ("audios", &p.encodes.audios),
                ("datas", &p.encodes.datas),
            ] {
                for e in list {
                    if e.name.is_empty() {
                        return Err(SpecError::Profile {
                            profile: p.name.clone(),
                            problem: ProfileProblem::UnnamedEncode(kind),
                        });
                    }
                    if !e.bypass && kind != "datas" && e.bypass_codec().is_none() {
                        return Err(SpecError::Profile {
                            profile: p.name.clone(),
                            problem: ProfileProblem::Transcodes(e.name.clone()),
                        });
                    }
                }
            }
        }
        let viewer_origins = [
            (
                "publishers.llhls.crossDomains",
                self.publishers
                    .llhls
                    .as_ref()
                    .and_then(|l| l.cross_domains.as_ref()),
            ),
            (
                "publishers.hls.crossDomains",
                self.publishers
                    .hls
                    .as_ref()
                    .and_then(|l| l.cross_domains.as_ref()),
            ),
        ];
        for (field, list) in viewer_origins {
            if list.is_some_and(|l| l.iter().any(|u| u.trim().is_empty())) {
                return Err(SpecError::Empty(format!("{field}[]")));
            }
        }
        if self
            .publishers
            .llhls
            .as_ref()
            .and_then(|l| l.dumps.as_ref())
            .is_some_and(|d| d.problem().is_some())
        {
            return Err(SpecError::Form {
                field: "publishers.llhls.dumps".into(),
                must: "an absolute rootPath; targetStreamName, outputPath (inside rootPath when absolute) and .m3u8 playlist names in each dump",
            });
        }
        for (publisher, dvr) in self.publishers.named_dvrs() {
            if dvr.is_some_and(|d| d.problem().is_some()) {
                return Err(SpecError::Form {
                    field: format!("publishers.{publisher}.dVR"),
                    must: "an absolute tempStoragePath and a maxDuration of 1 to 604800 seconds",
                });
            }
        }
        if let Some(f) = &self.publishers.file {
            if f.root_path.as_ref().is_some_and(|r| !r.starts_with('/')) {
                return Err(SpecError::Form {
                    field: "publishers.file.rootPath".into(),
                    must: "an absolute path",
                });
            }
            if f.max_pre_roll.is_some_and(|ms| ms > MAX_PRE_ROLL_MS) {
                return Err(SpecError::Form {
                    field: "publishers.file.maxPreRoll".into(),
                    must: "at most 120000 (ms)",
                });
            }
            if f.problem().is_some() {
                return Err(SpecError::Form {
                    field: "publishers.file.filePath".into(),
                    must: "a path ending in .mp4 or .ts",
                });
            }
        }
        if let Some(c) = self.publishers.llhls.as_ref().and_then(|l| l.cache_control) {
            let ages = [
                c.master_playlist_max_age,
                c.chunklist_max_age,
                c.chunklist_with_directives_max_age,
                c.segment_max_age,
                c.partial_segment_max_age,
            ];
            if ages.iter().flatten().any(|&a| a < -1) {
                return Err(SpecError::Form {
                    field: "publishers.llhls.cacheControl".into(),
                    must: "seconds, 0 (no-cache, no-store) or -1 (no header)",
                });
            }
        }
        if let Some(m) = &self.providers.mpegts {
            for s in &m.stream_map.stream {
                crate::ports::parse_ports(&s.port).map_err(|e| SpecError::StreamMapPort {
                    stream: s.name.clone(),
                    why: e.to_string(),
                })?;
            }
        }
        let maps = [
            ("srt", self.providers.srt.as_ref().map(|p| &p.audio_map)),
            (
                "mpegts",
                self.providers.mpegts.as_ref().map(|p| &p.audio_map),
            ),
        ];
        for (provider, map) in maps {
            let map = map.map_or(&[][..], |m| &m[..]);
            if map.len() > MAX_AUDIO_MAP {
                return Err(SpecError::AudioMap {
                    field: format!("providers.{provider}.audioMap"),
                    why: format!("more than {} items", MAX_AUDIO_MAP),
                });
            }
            for (i, item) in map.iter().enumerate() {
                item.label().map_err(|why| SpecError::AudioMap {
                    field: format!("providers.{provider}.audioMap[{i}]"),
                    why,
                })?;
            }
        }
        Ok(())
    }

    pub fn push_enabled(&self) -> bool {
        self.publishers.push.is_some()
    }

    /// `<Publishers><FILE>`: recording is enabled.
    pub fn file(&self) -> Option<&FileSpec> {
        self.publishers.file.as_ref()
    }

    /// MPEG-TS port -> stream name, from the stream map.
    pub fn mpegts_streams(&self) -> Vec<(u16, String)> {
        let mut out = Vec::new();
        if let Some(m) = &self.providers.mpegts {
            for s in &m.stream_map.stream {
                if let Ok((ports, _)) = crate::ports::parse_ports(&s.port) {
                    for p in ports {
                        out.push((p, s.name.replace("${Port}", &p.to_string())));
                    }
                }
            }
        }
        out
    }

    /// The output streams a stream named `input` has: (output stream name,
    /// profile). Without profiles, one output with the input's name.
    pub fn output_names(&self, input: &str) -> Vec<(String, Option<&OutputProfile>)> {
        if self.output_profiles.output_profile.is_empty() {
            return vec![(input.to_string(), None)];
        }
        self.output_profiles
            .output_profile
            .iter()
            .map(|p| {
                (
                    p.output_stream_name.replace("${OriginStreamName}", input),
                    Some(p),
                )
            })
            .collect()
    }

    /// The profile whose output of `input` is named `output` (`None` in
    /// the outer option: no output of `input` has that name). The same
    /// answer as searching [`output_names`](Self::output_names), without
    /// building the names: this is asked on every viewer request.
    pub fn output_named(&self, input: &str, output: &str) -> Option<Option<&OutputProfile>> {
        if self.output_profiles.output_profile.is_empty() {
            return (input == output).then_some(None);
        }
        self.output_profiles
            .output_profile
            .iter()
            .find(|p| names_output(&p.output_stream_name, input, output))
            .map(Some)
    }

    /// Is `name` the name of some encode in some output profile?
    pub fn has_encode(&self, name: &str) -> bool {
        self.output_profiles.output_profile.iter().any(|p| {
            p.encodes
                .videos
                .iter()
                .chain(&p.encodes.audios)
                .chain(&p.encodes.datas)
                .any(|e| e.name == name)
        })
    }
}

impl Encode {
    /// OME's conditional bypass: `codec` with `bypassIfMatch.codec = eq`.
    pub fn conditional(name: &str, codec: &str) -> Encode {
        let mut settings = Map::new();
        settings.insert("codec".into(), Value::from(codec));
        settings.insert("bypassIfMatch".into(), serde_json::json!({ "codec": "eq" }));
        Encode {
            name: name.to_string(),
            bypass: false,
            settings,
        }
    }

    /// The codec a conditional bypass passes (`codec` when
    /// `bypassIfMatch.codec` is `eq`), lower-case.
    pub fn bypass_codec(&self) -> Option<String> {
        let eq = self
            .settings
            .get("bypassIfMatch")
            .and_then(|b| b.get("codec"))
            .and_then(Value::as_str)
            .is_some_and(|op| op.eq_ignore_ascii_case("eq"));
        let codec = self.settings.get("codec").and_then(Value::as_str)?;
        eq.then(|| codec.to_ascii_lowercase())
    }

    /// Does this encode pass a track of `codec` (kiln's codec name, e.g.
    /// `aac`, `h264`)?
    pub fn passes(&self, codec: &str) -> bool {
        if self.bypass {
            return true;
        }
        match self.bypass_codec().as_deref() {
            Some(c) => {
                c == codec || (c == "hevc" && codec == "h265") || (c == "avc" && codec == "h264")
            }
            None => false,
        }
    }
}

impl OutputProfile {
    /// The name a track of this kind and codec carries in this profile's
    /// output: the first encode of its kind that passes it (a bypass, or a
    /// conditional bypass on that codec); `None`: not in this output.
    pub fn encode_name(&self, target: EncodeTarget, codec: &str) -> Option<&str> {
        match target {
            EncodeTarget::Video => &self.encodes.videos,
            EncodeTarget::Audio => &self.encodes.audios,
            EncodeTarget::Data => &self.encodes.datas,
        }
        .iter()
        .find(|e| target == EncodeTarget::Data || e.passes(codec))
        .map(|e| e.name.as_str())
    }
}

/// A port list as the API shows it (`4000-4003`, `4000,4005`).
pub fn ports_text(ports: &[u16]) -> String {
    match (ports.first(), ports.last()) {
        (Some(a), Some(b)) if ports.len() > 1 && (*b as usize - *a as usize + 1) == ports.len() => {
            format!("{a}-{b}")
        }
        _ => ports
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(","),
    }
}

/// The name of an input track: its kind, numbered after the first.
pub fn input_track_name(tracks: &[Track], t: &Track) -> String {
    let kind = t.kind();
    let nth = tracks
        .iter()
        .filter(|x| x.kind() == kind)
        .position(|x| x.id == t.id)
        .unwrap_or(0);
    let base = match kind {
        MediaKind::Video => "video",
        MediaKind::Audio => "audio",
        MediaKind::Data => "data",
    };
    if nth == 0 {
        base.to_string()
    } else {
        format!("{base}_{}", nth + 1)
    }
}

/// The tracks of one output stream: each input track of a kind the profile
/// has an encode for, named after that encode. Without a profile, every
/// track under its input name.
pub fn output_tracks(tracks: &[Track], profile: Option<&OutputProfile>) -> Vec<(Track, String)> {
    tracks
        .iter()
        .filter_map(|t| {
            let name = match profile {
                None => input_track_name(tracks, t),
                Some(p) => p
                    .encode_name(
                        match t.kind() {
                            MediaKind::Video => EncodeTarget::Video,
                            MediaKind::Audio => EncodeTarget::Audio,
                            MediaKind::Data => EncodeTarget::Data,
                        },
                        &t.codec.api_name().to_ascii_lowercase(),
                    )?
                    .to_string(),
            };
            Some((t.clone(), name))
        })
        .collect()
}

/// Does `template` with every `${OriginStreamName}` replaced by `input`
/// read `output`? (What `str::replace` then `==` answer, without the
/// string.)
fn names_output(template: &str, input: &str, output: &str) -> bool {
    const PLACEHOLDER: &[u8] = b"${OriginStreamName}";
    let (t, o, input) = (template.as_bytes(), output.as_bytes(), input.as_bytes());
    let (mut i, mut j) = (0, 0);
    // Left to right, a placeholder taken whole where one starts, as
    // `replace` finds them.
    while i < t.len() {
        if t[i] == b'$' && t[i..].starts_with(PLACEHOLDER) {
            if !o[j..].starts_with(input) {
                return false;
            }
            i += PLACEHOLDER.len();
            j += input.len();
        } else {
            if o.get(j) != Some(&t[i]) {
                return false;
            }
            i += 1;
            j += 1;
        }
    }
    j == o.len()
}

/// `<LLHLS><Dumps>`: a root for relative API paths (kiln extension) and
/// OME's automatic dumps.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DumpsSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_path: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dump: Vec<DumpConfig>,
}

/// One `<Dump>`: streams whose name matches `targetStreamName` (`*`, `?`)
/// are dumped under `outputPath` (OME's macros) from their start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DumpConfig {
    #[serde(default = "yes")]
    pub enable: bool,
    pub target_stream_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub playlists: Vec<String>,
    pub output_path: String,
}

fn yes() -> bool {
    true
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {

    #[test]
    fn unnamed_encodes_are_named_as_in_the_config_file() {
        let e: Encodes = serde_json::from_str(
            r#"{"videos":[{"bypass":true},{"name":"hd","bypass":true},{"bypass":true}],"audios":[{"bypass":true}]}"#,
        )
        .unwrap();
        let names: Vec<&str> = e
            .videos
            .iter()
            .chain(&e.audios)
            .map(|x| x.name.as_str())
            .collect();
        assert_eq!(names, ["video_0", "hd", "video_1", "audio_0"]);
    }

    use super::*;

    #[test]
    fn ome_shape_round_trips() {
        let json = r#"{"name":"app","type":"live","outputProfiles":{"outputProfile":[{"name":"bypass","outputStreamName":"${OriginStreamName}","encodes":{"videos":[{"name":"v","bypass":true}],"audios":[{"name":"a","bypass":true}]}}]},"providers":{"rtmp":{},"mpegts":{"streamMap":{"stream":[{"name":"s_${Port}","port":"4000-4001"}]}}},"publishers":{"push":{}}}"#;
        let spec: AppSpec = serde_json::from_str(json).unwrap();
        spec.validate().unwrap();
        assert_eq!(serde_json::to_string(&spec).unwrap(), json);
        assert_eq!(
            spec.mpegts_streams(),
            vec![(4000, "s_4000".to_string()), (4001, "s_4001".to_string())]
        );
        assert!(spec.push_enabled());
        assert_eq!(spec.output_names("cam")[0].0, "cam");
        assert!(spec.output_named("cam", "cam").is_some());
        assert!(spec.output_named("cam", "cam2").is_none());
        assert!(spec.has_encode("a"));
        assert!(!spec.has_encode("b"));
    }

    #[test]
    fn a_max_pre_roll_over_two_minutes_is_refused_by_its_name() {
        let json = r#"{"name":"app","publishers":{"file":{"rootPath":"/r","maxPreRoll":120001}}}"#;
        let spec: AppSpec = serde_json::from_str(json).unwrap();
        let e = spec.validate().unwrap_err().to_string();
        assert!(e.contains("maxPreRoll") && e.contains("120000"), "{e}");
        assert!(!e.contains("filePath"), "{e}");
        let ok = json.replace("120001", "120000");
        serde_json::from_str::<AppSpec>(&ok)
            .unwrap()
            .validate()
            .unwrap();
    }

    /// `providers.srt.audioMap` (OME's `<AudioMap>` through the API):
    /// kept and shown; an item that is not a label is refused, naming it.
    #[test]
    fn audio_maps_are_checked() {
        let json = r#"{"name":"app","type":"live","outputProfiles":{"outputProfile":[]},"providers":{"srt":{"audioMap":[{"name":"English","language":"en"},{"name":"Korean","language":"ko","characteristics":"public.alternate"}]}},"publishers":{}}"#;
        let spec: AppSpec = serde_json::from_str(json).unwrap();
        spec.validate().unwrap();
        assert_eq!(serde_json::to_string(&spec).unwrap(), json);
        let bad = json.replace(r#""ko""#, r#""korean""#);
        let spec: AppSpec = serde_json::from_str(&bad).unwrap();
        let err = spec.validate().unwrap_err().to_string();
        assert!(
            err.contains("providers.srt.audioMap[1]: language [korean] is not a language tag"),
            "{err}"
        );
    }

    #[test]
    fn transcoding_is_refused_clearly() {
        let json = r#"{"name":"app","outputProfiles":{"outputProfile":[{"name":"p","encodes":{"audios":[{"name":"opus","codec":"opus","bitrate":128000}]}}]}}"#;
        let spec: AppSpec = serde_json::from_str(json).unwrap();
        let err = spec.validate().unwrap_err();
        assert!(
            matches!(&err, SpecError::Profile { problem: ProfileProblem::Transcodes(e), .. } if e == "opus"),
            "{err:?}"
        );
        assert!(err.to_string().contains("does not transcode"), "{err}");
    }

    #[test]
    fn unknown_fields_are_named() {
        let err = serde_json::from_str::<AppSpec>(r#"{"name":"a","colour":1}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("colour"));
    }

    #[test]
    fn output_names_are_matched_as_replace_then_compare_would() {
        let templates = [
            "${OriginStreamName}",
            "${OriginStreamName}_bypass",
            "pre_${OriginStreamName}",
            "fixed",
            "",
            "${OriginStreamName}${OriginStreamName}",
            "a${OriginStreamName}b${OriginStreamName}c",
            "${OriginStream",
        ];
        let inputs = ["cam", "", "a", "${OriginStreamName}"];
        let outputs = [
            "cam",
            "cam_bypass",
            "pre_cam",
            "fixed",
            "",
            "camcam",
            "acambcamc",
            "a",
            "ab",
            "abc",
            "cam_",
            "_bypass",
            "${OriginStream",
            "aabac",
            "${OriginStreamName}",
        ];
        for t in templates {
            for i in inputs {
                for o in outputs {
                    assert_eq!(
                        names_output(t, i, o),
                        t.replace("${OriginStreamName}", i) == o,
                        "{t:?} {i:?} {o:?}"
                    );
                }
            }
        }
    }
}
