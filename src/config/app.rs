//! `<Application>`: its providers and publishers (LL-HLS, HLS, dumps,
//! files), output profiles and their encodes.

use super::{
    dom, ome_schema, AppConfig, EncodeConfig, EncodeKind, OutputProfileConfig, StreamMapEntry,
    Walker, UNSUPPORTED_APP, UNSUPPORTED_APP_PROVIDERS, UNSUPPORTED_APP_PUBLISHERS,
    UNSUPPORTED_ENCODES, UNSUPPORTED_LLHLS, UNSUPPORTED_OUTPUT_PROFILE,
    UNSUPPORTED_OUTPUT_PROFILES,
};
use crate::state::playlists::{PlaylistSpec, RenditionTemplate, TrackTemplate};
use dom::Element;

impl Walker<'_> {
    /// OME's `<AudioMap><Item><Name>/<Language>/<Characteristics>`: each
    /// item checked (a language is an RFC 5646 tag, texts fit a
    /// playlist), one that is not named as an error.
    fn audio_map(&mut self, el: &Element, path: &str) -> Vec<crate::state::app::AudioMapItem> {
        let mut items = Vec::new();
        self.children(el, path, &[], &["Item"], |w, c, p| {
            if c.name != "Item" {
                return false;
            }
            let mut item = crate::state::app::AudioMapItem {
                name: String::new(),
                language: None,
                characteristics: None,
            };
            w.children(c, p, &[], &[], |w, c, p| {
                match c.name.as_str() {
                    "Name" => item.name = w.text(c, p).unwrap_or_default(),
                    "Language" => item.language = w.nonempty_text(c, p),
                    "Characteristics" => item.characteristics = w.nonempty_text(c, p),
                    _ => return false,
                }
                true
            });
            match item.label() {
                Ok(_) if items.len() < crate::state::app::MAX_AUDIO_MAP => items.push(item),
                Ok(_) => w.error(
                    c,
                    p,
                    format!("more than {} items", crate::state::app::MAX_AUDIO_MAP),
                ),
                Err(e) => w.error(c, p, e),
            }
            true
        });
        items
    }

    pub(super) fn application(&mut self, el: &Element, path: &str) -> Option<AppConfig> {
        let mut app = AppConfig {
            name: String::new(),
            output_profiles: Vec::new(),
            rtmp: false,
            srt: false,
            rtmp_block_duplicates: None,
            srt_block_duplicates: None,
            srt_audio_map: Vec::new(),
            mpegts: None,
            mpegts_audio_map: Vec::new(),
            push: false,
            llhls: None,
            webrtc: None,
            webrtc_ingest: None,
            schedule: None,
            multiplex: None,
            hls: None,
            file: None,
            disk_budget: None,
        };
        let mut name = None;
        self.children(el, path, UNSUPPORTED_APP, &[], |w, c, p| {
            match c.name.as_str() {
                "Name" => name = w.nonempty_text(c, p),
                "DiskBudget" => app.disk_budget = Some(w.disk_budget(c, p)),
                "Type" => {
                    if let Some(t) = w.nonempty_text(c, p) {
                        if t != "live" {
                            w.error(c, p, format!("application type [{t}] is not supported; kiln serves live applications"));
                        }
                    }
                }
                "OutputProfiles" => {
                    w.children(c, p, UNSUPPORTED_OUTPUT_PROFILES, &["OutputProfile"], |w, c, p| {
                        if c.name != "OutputProfile" {
                            return false;
                        }
                        if let Some(op) = w.output_profile(c, p) {
                            app.output_profiles.push(op);
                        }
                        true
                    })
                }
                "Providers" => w.children(c, p, UNSUPPORTED_APP_PROVIDERS, &[], |w, c, p| {
                    match c.name.as_str() {
                        "WebRTC" => app.webrtc_ingest = Some(w.webrtc_ingest_app(c, p)),
                        "Schedule" => {
                            let mut s = crate::state::app::ScheduleProvider::default();
                            w.children(c, p, &[], &[], |w, c, p| {
                                let dir = w.nonempty_text(c, p).map(|d| w.resolve_path(&d));
                                match (c.name.as_str(), dir) {
                                    ("MediaRootDir", Some(d)) => s.media_root_dir = d,
                                    // OME's documents spell it both ways.
                                    ("ScheduleFilesDir" | "ScheduleFileDir", Some(d)) => {
                                        s.schedule_files_dir = d
                                    }
                                    ("MediaRootDir" | "ScheduleFilesDir" | "ScheduleFileDir", None) => {}
                                    _ => return false,
                                }
                                true
                            });
                            if s.media_root_dir.is_empty() {
                                w.error(c, p, "<MediaRootDir> is required");
                            }
                            app.schedule = Some(s);
                        }
                        "Multiplex" => {
                            let mut m = crate::state::app::MultiplexProvider::default();
                            w.children(c, p, &[], &[], |w, c, p| {
                                if c.name != "MuxFilesDir" {
                                    return false;
                                }
                                if let Some(d) = w.nonempty_text(c, p) {
                                    m.mux_files_dir = w.resolve_path(&d);
                                }
                                true
                            });
                            app.multiplex = Some(m);
                        }
                        "RTMP" => {
                            app.rtmp = true;
                            app.rtmp_block_duplicates = w.block_duplicates(c, p);
                        }
                        "SRT" => {
                            app.srt = true;
                            w.children(c, p, super::UNSUPPORTED_WORKERS, &[], |w, c, p| {
                                match c.name.as_str() {
                                    "BlockDuplicateStreamName" => {
                                        app.srt_block_duplicates = w.bool_text(c, p)
                                    }
                                    "AudioMap" => app.srt_audio_map = w.audio_map(c, p),
                                    _ => return false,
                                }
                                true
                            });
                        }
                        "MPEGTS" => {
                            let mut map = Vec::new();
                            w.children(c, p, &[], &[], |w, c, p| {
                                if c.name == "AudioMap" {
                                    app.mpegts_audio_map = w.audio_map(c, p);
                                    return true;
                                }
                                if c.name != "StreamMap" {
                                    return false;
                                }
                                w.children(c, p, &[], &["Stream"], |w, c, p| {
                                    if c.name != "Stream" {
                                        return false;
                                    }
                                    let (mut n, mut ports) = (None, Vec::new());
                                    w.children(c, p, &[], &[], |w, c, p| {
                                        match c.name.as_str() {
                                            "Name" => n = w.nonempty_text(c, p),
                                            "Port" => ports = w.udp_ports(c, p),
                                            _ => return false,
                                        }
                                        true
                                    });
                                    match n {
                                        Some(name) if !ports.is_empty() => {
                                            map.push(StreamMapEntry { name, ports })
                                        }
                                        _ => w.error(c, p, "<Name> and <Port> are required"),
                                    }
                                    true
                                });
                                true
                            });
                            app.mpegts = Some(map);
                        }
                        _ => return false,
                    }
                    true
                }),
                "Publishers" => w.children(c, p, UNSUPPORTED_APP_PUBLISHERS, &[], |w, c, p| {
                    if c.name == "WebRTC" {
                        app.webrtc = Some(w.webrtc_app(c, p));
                        return true;
                    }
                    if c.name == "LLHLS" {
                        app.llhls = Some(w.llhls(c, p));
                        return true;
                    }
                    if c.name == "HLS" {
                        app.hls = Some(w.hls(c, p));
                        return true;
                    }
                    if c.name == "FILE" || c.name == "File" {
                        app.file = Some(w.file_publisher(c, p));
                        return true;
                    }
                    if c.name != "Push" {
                        return false;
                    }
                    // OME's <Push> may hold <StreamMap> for automatic pushes;
                    // kiln drives pushes through the API only.
                    w.children(c, p, &["StreamMap"], &[], |_, _, _| false);
                    app.push = true;
                    true
                }),
                _ => return false,
            }
            true
        });
        let Some(name) = name else {
            self.error(el, path, "<Name> is required");
            return None;
        };
        // `*` is OME's dynamic-application template (kept by the vhost).
        if name != "*" && !crate::state::vhost::valid_name(&name) {
            self.error(
                el,
                path,
                format!("application name [{name}] must be 1-255 letters, digits, '-', '_' or '.' (or * for OME's template)"),
            );
            return None;
        }
        app.name = name;
        Some(app)
    }

    pub(super) fn output_profile(
        &mut self,
        el: &Element,
        path: &str,
    ) -> Option<OutputProfileConfig> {
        let (mut name, mut osn, mut encodes) = (None, None, Vec::new());
        let mut playlists = Vec::new();
        // OME names unnamed encodes video_0, audio_0, ... (counting the
        // unnamed ones of each kind).
        let mut unnamed = [0usize; 3];
        self.children(
            el,
            path,
            UNSUPPORTED_OUTPUT_PROFILE,
            &["Playlist"],
            |w, c, p| {
                match c.name.as_str() {
                    "Name" => name = w.nonempty_text(c, p),
                    "OutputStreamName" => osn = w.nonempty_text(c, p),
                    "Encodes" => w.children(
                        c,
                        p,
                        UNSUPPORTED_ENCODES,
                        &["Video", "Audio", "Data"],
                        |w, c, p| {
                            let (kind, slot, prefix) = match c.name.as_str() {
                                "Video" => (EncodeKind::Video, 0, "video"),
                                "Audio" => (EncodeKind::Audio, 1, "audio"),
                                "Data" => (EncodeKind::Data, 2, "data"),
                                _ => return false,
                            };
                            if let Some(e) = w.encode(c, p, kind, &mut unnamed[slot], prefix) {
                                encodes.push(e);
                            }
                            true
                        },
                    ),
                    "Playlist" => {
                        if let Some(pl) = w.playlist(c, p) {
                            playlists.push(pl);
                        }
                    }
                    _ => return false,
                }
                true
            },
        );
        let Some(name) = name else {
            self.error(el, path, "<Name> is required");
            return None;
        };
        Some(OutputProfileConfig {
            name,
            output_stream_name: osn.unwrap_or_else(|| "${OriginStreamName}".into()),
            encodes,
            playlists,
        })
    }

    /// OME's `<Playlist>`: `Name`, `FileName`, its `<Rendition>`s (by the
    /// variant names of their video and audio) and `<RenditionTemplate>`s
    /// (the renditions kiln makes of a stream's own tracks). `<Options>`
    /// is warned about.
    fn playlist(&mut self, el: &Element, path: &str) -> Option<PlaylistSpec> {
        let mut spec = PlaylistSpec::default();
        self.children(
            el,
            path,
            &["Options"],
            &["RenditionTemplate", "Rendition"],
            |w, c, p| {
                match c.name.as_str() {
                    "Name" => spec.name = w.nonempty_text(c, p).unwrap_or_default(),
                    "FileName" => spec.file_name = w.nonempty_text(c, p).unwrap_or_default(),
                    "Rendition" => {
                        let (mut name, mut video, mut audio) = (String::new(), None, None);
                        w.children(c, p, &[], &[], |w, c, p| {
                            match c.name.as_str() {
                                "Name" => name = w.nonempty_text(c, p).unwrap_or_default(),
                                "Video" => video = w.nonempty_text(c, p),
                                "Audio" => audio = w.nonempty_text(c, p),
                                _ => return false,
                            }
                            true
                        });
                        if name.is_empty() {
                            w.error(c, p, "<Name> is required");
                        } else {
                            spec.renditions.push((name, video, audio));
                        }
                    }
                    "RenditionTemplate" => {
                        let mut t = RenditionTemplate::default();
                        w.children(c, p, &[], &[], |w, c, p| {
                            match c.name.as_str() {
                                "Name" => t.name = w.nonempty_text(c, p).unwrap_or_default(),
                                "VideoTemplate" => t.video = Some(w.track_template(c, p)),
                                "AudioTemplate" => t.audio = Some(w.track_template(c, p)),
                                _ => return false,
                            }
                            true
                        });
                        if t.name.is_empty() {
                            w.error(c, p, "<Name> is required");
                        } else {
                            spec.templates.push(t);
                        }
                    }
                    _ => return false,
                }
                true
            },
        );
        let safe = |n: &str| {
            !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !safe(&spec.file_name) || spec.name.is_empty() {
            self.error(
                el,
                path,
                "<Name> and <FileName> are required (a file name of letters, digits, _ and -)",
            );
            return None;
        }
        if spec.templates.is_empty() && spec.renditions.is_empty() {
            self.warn(
                el,
                path,
                "has no <Rendition> or <RenditionTemplate>; ignored",
            );
            return None;
        }
        Some(spec)
    }

    /// `<VideoTemplate>` / `<AudioTemplate>`.
    fn track_template(&mut self, el: &Element, path: &str) -> TrackTemplate {
        let mut t = TrackTemplate::default();
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "EncodingType" => {
                    let v = w
                        .nonempty_text(c, p)
                        .unwrap_or_default()
                        .to_ascii_lowercase();
                    t.encoded_only = v == "encoded";
                }
                "VariantName" => t.variant_name = w.nonempty_text(c, p),
                "MinWidth" => t.min_width = w.number(c, p),
                "MaxWidth" => t.max_width = w.number(c, p),
                "MinHeight" => t.min_height = w.number(c, p),
                "MaxHeight" => t.max_height = w.number(c, p),
                "MinFramerate" => t.min_framerate = w.number(c, p),
                "MaxFramerate" => t.max_framerate = w.number(c, p),
                "MinBitrate" => t.min_bitrate = w.number(c, p),
                "MaxBitrate" => t.max_bitrate = w.number(c, p),
                "MinSamplerate" => t.min_samplerate = w.number(c, p),
                "MaxSamplerate" => t.max_samplerate = w.number(c, p),
                "MinChannel" => t.min_channel = w.number(c, p),
                "MaxChannel" => t.max_channel = w.number(c, p),
                _ => return false,
            }
            true
        });
        t
    }

    /// One encode. A bypass applies; a conditional bypass on the codec
    /// applies as "pass the track when its codec matches"; any other
    /// (transcoding) encode is skipped with a warning: kiln relays.
    pub(super) fn encode(
        &mut self,
        el: &Element,
        path: &str,
        kind: EncodeKind,
        unnamed: &mut usize,
        prefix: &str,
    ) -> Option<EncodeConfig> {
        let (mut name, mut bypass, mut codec) = (None, kind == EncodeKind::Data, None);
        let mut codec_eq = false;
        let mut other_conditions = Vec::new();
        let mut shown = Vec::new();
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "Name" => name = w.nonempty_text(c, p),
                "Bypass" => bypass = w.bool_text(c, p).unwrap_or(false),
                "Codec" => codec = w.nonempty_text(c, p),
                "BypassIfMatch" => w.children(c, p, &[], &[], |w, c, p| {
                    let op = w.nonempty_text(c, p).unwrap_or_default();
                    if c.name == "Codec" && op.eq_ignore_ascii_case("eq") {
                        codec_eq = true;
                    } else if ome_schema::is_ome_element(&c.name) {
                        other_conditions.push(c.name.clone());
                    } else {
                        return false;
                    }
                    true
                }),
                // Transcoding settings: OME's, moot for a bypass.
                _ => {
                    if !ome_schema::is_ome_element(&c.name) {
                        return false;
                    }
                    if let Some(v) = w.nonempty_text(c, p) {
                        let mut key = c.name.clone();
                        key[..1].make_ascii_lowercase();
                        shown.push((key, v));
                    }
                }
            }
            true
        });
        let name = name.unwrap_or_else(|| {
            let n = format!("{prefix}_{unnamed}");
            *unnamed += 1;
            n
        });
        if bypass {
            return Some(EncodeConfig {
                kind,
                name,
                if_codec: None,
                shown: Vec::new(),
            });
        }
        match codec {
            Some(codec) if codec_eq => {
                if !other_conditions.is_empty() {
                    self.warn(
                        el,
                        path,
                        format!(
                            "encode [{name}]: only <BypassIfMatch><Codec> is checked (kiln does not transcode); {} not applied",
                            other_conditions.join(", ")
                        ),
                    );
                }
                Some(EncodeConfig {
                    kind,
                    name,
                    if_codec: Some(codec.to_ascii_lowercase()),
                    shown,
                })
            }
            _ => {
                self.warn(
                    el,
                    path,
                    format!("encode [{name}] transcodes; kiln relays streams and does not transcode: skipped (the profile's bypass encodes still apply)"),
                );
                None
            }
        }
    }

    /// `<Publishers><LLHLS>` of an application.
    pub(super) fn llhls(&mut self, el: &Element, path: &str) -> crate::state::app::LlhlsSpec {
        let mut spec = crate::state::app::LlhlsSpec::default();
        self.children(el, path, UNSUPPORTED_LLHLS, &[], |w, c, p| {
            match c.name.as_str() {
                "ChunkDuration" => spec.chunk_duration = w.seconds(c, p, 0.1, 10.0),
                "PartHoldBack" => spec.part_hold_back = w.seconds(c, p, 0.0, 60.0),
                "SegmentDuration" => spec.segment_duration = w.seconds(c, p, 1.0, 60.0),
                "SegmentCount" => spec.segment_count = w.segment_count(c, p),
                "FirstSegmentTimeout" => spec.first_segment_timeout = w.seconds(c, p, 1.0, 600.0),
                "CrossDomains" => spec.cross_domains = Some(w.cross_domains(c, p)),
                "CacheControl" => spec.cache_control = Some(w.cache_control(c, p)),
                "Dumps" => spec.dumps = Some(w.dumps(c, p)),
                "DVR" => spec.dvr = Some(w.dvr(c, p)),
                _ => return false,
            }
            true
        });
        spec
    }

    /// `<LLHLS><DVR>` and `<HLS><DVR>`: OME's element, read unchanged.
    pub(super) fn dvr(&mut self, el: &Element, path: &str) -> crate::state::app::DvrSpec {
        let mut spec = crate::state::app::DvrSpec::default();
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "Enable" => spec.enable = w.bool_text(c, p).unwrap_or(false),
                "TempStoragePath" => spec.temp_storage_path = w.nonempty_text(c, p),
                "MaxDuration" => spec.max_duration = w.number(c, p),
                "EventPlaylistType" => spec.event_playlist_type = w.bool_text(c, p),
                _ => return false,
            }
            true
        });
        if let Some(why) = spec.problem() {
            self.error(el, path, why);
        }
        spec
    }

    /// `<LLHLS><Dumps>`: `<RootPath>` (kiln) and OME's `<Dump>` entries.
    pub(super) fn dumps(&mut self, el: &Element, path: &str) -> crate::state::app::DumpsSpec {
        let mut spec = crate::state::app::DumpsSpec::default();
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "RootPath" => spec.root_path = w.nonempty_text(c, p),
                "Dump" => {
                    let (mut enable, mut target, mut out) = (true, None, None);
                    let mut playlists = Vec::new();
                    w.children(c, p, &["Extension"], &[], |w, c, p| {
                        match c.name.as_str() {
                            "Enable" => enable = w.text(c, p).is_some_and(|t| t.trim() == "true"),
                            "TargetStreamName" => target = w.nonempty_text(c, p),
                            "OutputPath" => out = w.nonempty_text(c, p),
                            "Playlists" => {
                                playlists = w.repeated(c, p, &[], "Playlist", |w, c, p| {
                                    w.nonempty_text(c, p)
                                })
                            }
                            _ => return false,
                        }
                        true
                    });
                    match (target, out) {
                        (Some(target_stream_name), Some(output_path)) => {
                            spec.dump.push(crate::state::app::DumpConfig {
                                enable,
                                target_stream_name,
                                playlists,
                                output_path,
                            })
                        }
                        _ => w.error(c, p, "<TargetStreamName> and <OutputPath> are required"),
                    }
                }
                _ => return false,
            }
            true
        });
        if let Some(why) = spec.problem() {
            self.error(el, path, why);
        }
        spec
    }

    /// `<Publishers><HLS>` of an application.
    pub(super) fn hls(&mut self, el: &Element, path: &str) -> crate::state::app::HlsSpec {
        let mut spec = crate::state::app::HlsSpec::default();
        self.children(
            el,
            path,
            &["CacheControl", "DefaultQueryString"],
            &[],
            |w, c, p| {
                match c.name.as_str() {
                    "SegmentDuration" => spec.segment_duration = w.seconds(c, p, 1.0, 60.0),
                    "SegmentCount" => spec.segment_count = w.segment_count(c, p),
                    "CrossDomains" => spec.cross_domains = Some(w.cross_domains(c, p)),
                    "DVR" => spec.dvr = Some(w.dvr(c, p)),
                    _ => return false,
                }
                true
            },
        );
        spec
    }

    /// `<Publishers><FILE>` of an application: `<RootPath>`, `<FilePath>`,
    /// `<InfoPath>` (OME's automatic `<StreamMap>` is not supported).
    pub(super) fn file_publisher(
        &mut self,
        el: &Element,
        path: &str,
    ) -> crate::state::app::FileSpec {
        let mut spec = crate::state::app::FileSpec::default();
        self.children(el, path, &["StreamMap"], &[], |w, c, p| {
            // OME's example folds long paths over lines.
            let mut value = || {
                w.nonempty_text(c, p)
                    .map(|t| t.lines().map(str::trim).collect::<String>())
            };
            match c.name.as_str() {
                "RootPath" => spec.root_path = value(),
                "FilePath" => spec.file_path = value(),
                "InfoPath" => spec.info_path = value(),
                "MaxPreRoll" => spec.max_pre_roll = w.number(c, p),
                _ => return false,
            }
            true
        });
        if let Some(why) = spec.problem() {
            self.error(el, path, why);
        }
        spec
    }

    /// `<LLHLS><CacheControl>`: max-age seconds, 0 or -1 and up.
    pub(super) fn cache_control(
        &mut self,
        el: &Element,
        path: &str,
    ) -> crate::state::app::CacheControlSpec {
        let mut spec = crate::state::app::CacheControlSpec::default();
        self.children(el, path, &[], &[], |w, c, p| {
            let slot = match c.name.as_str() {
                "MasterPlaylistMaxAge" => &mut spec.master_playlist_max_age,
                "ChunklistMaxAge" => &mut spec.chunklist_max_age,
                "ChunklistWithDirectivesMaxAge" => &mut spec.chunklist_with_directives_max_age,
                "SegmentMaxAge" => &mut spec.segment_max_age,
                "PartialSegmentMaxAge" => &mut spec.partial_segment_max_age,
                _ => return false,
            };
            *slot = match w.number::<i32>(c, p) {
                Some(v) if v >= -1 => Some(v),
                Some(_) => {
                    w.error(
                        c,
                        p,
                        "must be seconds, 0 (no-cache, no-store) or -1 (no header)",
                    );
                    None
                }
                None => None,
            };
            true
        });
        spec
    }

    /// A number of seconds in `lo..=hi`.
    pub(super) fn seconds(&mut self, el: &Element, path: &str, lo: f64, hi: f64) -> Option<f64> {
        match self.number::<f64>(el, path) {
            Some(v) if (lo..=hi).contains(&v) => Some(v),
            Some(_) => {
                self.error(el, path, format!("must be {lo} to {hi} seconds"));
                None
            }
            None => None,
        }
    }

    /// `SegmentCount`: 3 to 100 segments kept.
    pub(super) fn segment_count(&mut self, el: &Element, path: &str) -> Option<u32> {
        match self.number::<u32>(el, path) {
            Some(n) if (3..=100).contains(&n) => Some(n),
            Some(_) => {
                self.error(el, path, "must be 3 to 100");
                None
            }
            None => None,
        }
    }
}
