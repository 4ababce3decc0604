//! Multiplex channels: the spec (OME's `.mux` file and the body of its
//! `multiplexChannels` API, one shape) and the [`Multiplexer`], which
//! turns the source streams' tracks and frames into the channel's.
//!
//! Decided where OME's documents are silent (and in the README):
//! - A source track is named as the app's output profile names it
//!   (`bypass_video`) or by its input name (`video`, `audio`, `video_2`).
//! - The channel starts when every source is live and has its mapped
//!   tracks; its tracks stay for its life. A source that stops leaves
//!   its renditions out of the playlists until it is back.
//! - Each source's time is put on the channel's clock at its first frame
//!   (and again when it comes back): sources line up by arrival, so each
//!   rendition's newest part is as new as the others' (a player switching
//!   at the live edge finds it; sources' own clocks, which separate
//!   encoders do not share, are not trusted). No track goes backwards.

use super::xml::{self, XmlError};
use super::{ChannelKey, StreamUrl, MAX_ITEMS};
use crate::media::{Frame, Ticks, Track, TrackId};
use crate::state::streams::{Playlist, Rendition};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MuxSpec {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub vhost: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app: String,
    /// The channel's stream name (`outputStream.name`; the state file's key).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub output_stream: OutputStream,
    pub source_streams: Vec<SourceStream>,
    #[serde(default)]
    pub playlists: Vec<PlaylistSpec>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputStream {
    pub name: String,
    /// OME's flag (kiln never transcodes: kept and shown as given).
    #[serde(default)]
    pub bypass_transcoder: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceStream {
    #[serde(default)]
    pub name: String,
    pub url: String,
    #[serde(default)]
    pub track_map: Vec<TrackMapEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TrackMapEntry {
    pub source_track_name: String,
    pub new_track_name: String,
    /// Bits per second the playlist states for it (BANDWIDTH).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate_conf: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub framerate_conf: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlaylistSpec {
    #[serde(default)]
    pub name: String,
    pub file_name: String,
    /// OME's playlist options (`webrtcAutoAbr`, `hlsChunklistPathDepth`):
    /// kept and shown, not applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(default)]
    pub renditions: Vec<RenditionSpec>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RenditionSpec {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<String>,
}

impl MuxSpec {
    /// The channel's key in the channel table.
    pub fn key(&self) -> ChannelKey {
        (self.vhost.clone(), self.app.clone(), self.name.clone())
    }

    /// Checks the spec; the source URLs, read.
    pub fn check(&self) -> Result<Vec<StreamUrl>, String> {
        if self.source_streams.is_empty() || self.source_streams.len() > MAX_ITEMS {
            return Err(format!("sourceStreams must have 1 to {MAX_ITEMS} streams"));
        }
        let mut urls = Vec::new();
        let mut names: Vec<&str> = Vec::new();
        for s in &self.source_streams {
            let u = StreamUrl::parse(&s.url).ok_or_else(|| {
                format!(
                    "source url [{}] must be stream://{{vhost}}/{{app}}/{{stream}}",
                    s.url
                )
            })?;
            if u.vhost == self.vhost && u.app == self.app && u.stream == self.output_stream.name {
                return Err(format!("source [{}] is the channel itself", s.url));
            }
            if s.track_map.is_empty() || s.track_map.len() > 64 {
                return Err(format!("source [{}] must map 1 to 64 tracks", s.url));
            }
            for t in &s.track_map {
                if t.new_track_name.is_empty() || names.contains(&t.new_track_name.as_str()) {
                    return Err(format!(
                        "newTrackName [{}] is empty or used twice",
                        t.new_track_name
                    ));
                }
                names.push(&t.new_track_name);
            }
            urls.push(u);
        }
        let mut files: Vec<&str> = Vec::new();
        for p in &self.playlists {
            let ok_name = !p.file_name.is_empty()
                && p.file_name.len() <= 64
                && p.file_name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !ok_name || files.contains(&p.file_name.as_str()) || p.file_name == "llhls" {
                return Err(format!(
                    "playlist fileName [{}] must be unique, not llhls, and letters, digits, _ or -",
                    p.file_name
                ));
            }
            files.push(&p.file_name);
            if p.renditions.is_empty() || p.renditions.len() > 64 {
                return Err(format!(
                    "playlist [{}] must have 1 to 64 renditions",
                    p.file_name
                ));
            }
            for r in &p.renditions {
                for t in [&r.video, &r.audio].into_iter().flatten() {
                    if !names.contains(&t.as_str()) {
                        return Err(format!(
                            "rendition [{}] names track [{t}], which no trackMap makes",
                            r.name
                        ));
                    }
                }
                if r.video.is_none() && r.audio.is_none() {
                    return Err(format!(
                        "rendition [{}] has neither video nor audio",
                        r.name
                    ));
                }
            }
        }
        Ok(urls)
    }

    /// A `.mux` file's text.
    pub fn from_xml(text: &str) -> Result<MuxSpec, XmlError> {
        let root = xml::root(text, "Multiplex")?;
        xml::only(&root, &["OutputStream", "SourceStreams", "Playlists"])?;
        let out = root
            .children
            .iter()
            .find(|c| c.name == "OutputStream")
            .ok_or_else(|| xml::error(&root, "<OutputStream> is required"))?;
        xml::only(out, &["Name", "BypassTranscoder"])?;
        let name = xml::text(out, "Name")
            .filter(|n| !n.is_empty())
            .ok_or_else(|| xml::error(out, "<OutputStream><Name> is required"))?;
        let mut source_streams = Vec::new();
        let mut playlists = Vec::new();
        for c in &root.children {
            match c.name.as_str() {
                "SourceStreams" => {
                    xml::only(c, &["SourceStream"])?;
                    for s in &c.children {
                        xml::only(s, &["Name", "Url", "TrackMap"])?;
                        let mut track_map = Vec::new();
                        for m in s.children.iter().filter(|m| m.name == "TrackMap") {
                            xml::only(m, &["Track"])?;
                            for t in &m.children {
                                xml::only(
                                    t,
                                    &[
                                        "SourceTrackName",
                                        "NewTrackName",
                                        "BitrateConf",
                                        "FramerateConf",
                                    ],
                                )?;
                                let need = |n: &str| {
                                    xml::text(t, n)
                                        .map(str::to_string)
                                        .ok_or_else(|| xml::error(t, format!("<{n}> is required")))
                                };
                                track_map.push(TrackMapEntry {
                                    source_track_name: need("SourceTrackName")?,
                                    new_track_name: need("NewTrackName")?,
                                    bitrate_conf: xml::number(t, "BitrateConf")?,
                                    framerate_conf: xml::number(t, "FramerateConf")?,
                                });
                            }
                        }
                        source_streams.push(SourceStream {
                            name: xml::text(s, "Name").unwrap_or("").to_string(),
                            url: xml::text(s, "Url")
                                .ok_or_else(|| xml::error(s, "<Url> is required"))?
                                .to_string(),
                            track_map,
                        });
                    }
                }
                "Playlists" => {
                    xml::only(c, &["Playlist"])?;
                    for p in &c.children {
                        xml::only(p, &["Name", "FileName", "Options", "Rendition"])?;
                        let mut renditions = Vec::new();
                        for r in p.children.iter().filter(|r| r.name == "Rendition") {
                            xml::only(r, &["Name", "Video", "Audio"])?;
                            renditions.push(RenditionSpec {
                                name: xml::text(r, "Name").unwrap_or("").to_string(),
                                video: xml::text(r, "Video").map(str::to_string),
                                audio: xml::text(r, "Audio").map(str::to_string),
                            });
                        }
                        playlists.push(PlaylistSpec {
                            name: xml::text(p, "Name").unwrap_or("").to_string(),
                            file_name: xml::text(p, "FileName")
                                .ok_or_else(|| xml::error(p, "<FileName> is required"))?
                                .to_string(),
                            options: None,
                            renditions,
                        });
                    }
                }
                _ => {}
            }
        }
        let spec = MuxSpec {
            vhost: String::new(),
            app: String::new(),
            name: name.to_string(),
            output_stream: OutputStream {
                name: name.to_string(),
                bypass_transcoder: xml::boolean(out, "BypassTranscoder", false)?,
            },
            source_streams,
            playlists,
        };
        Ok(spec)
    }
}

/// One source as the multiplexer follows it.
#[derive(Debug)]
struct Source {
    /// (source track id, channel track id), once its tracks are known.
    bound: Vec<(TrackId, TrackId)>,
    /// Added to its times to put them on the channel's clock; set at its
    /// first frame after it (re)started.
    offset: Option<Ticks>,
    live: bool,
}

/// Turns the sources' tracks and frames into the channel's.
#[derive(Debug)]
pub struct Multiplexer {
    pub spec: MuxSpec,
    sources: Vec<Source>,
    /// The channel's tracks (id = position in the track maps + 1); `None`
    /// until its source is first seen.
    tracks: Vec<Option<Track>>,
    /// The last decode time given out per channel track.
    last_dts: Vec<Option<Ticks>>,
}

impl Multiplexer {
    pub fn new(spec: MuxSpec) -> Self {
        let n: usize = spec.source_streams.iter().map(|s| s.track_map.len()).sum();
        Multiplexer {
            sources: spec
                .source_streams
                .iter()
                .map(|_| Source {
                    bound: Vec::new(),
                    offset: None,
                    live: false,
                })
                .collect(),
            tracks: vec![None; n],
            last_dts: vec![None; n],
            spec,
        }
    }

    /// The channel track id of source `i`'s `k`th map entry.
    fn out_id(&self, i: usize, k: usize) -> TrackId {
        let before: usize = self.spec.source_streams[..i]
            .iter()
            .map(|s| s.track_map.len())
            .sum();
        (before + k + 1) as TrackId
    }

    fn id_of_name(&self, name: &str) -> Option<TrackId> {
        let mut id = 0;
        for s in &self.spec.source_streams {
            for t in &s.track_map {
                id += 1;
                if t.new_track_name == name {
                    return Some(id);
                }
            }
        }
        None
    }

    /// Source `i` is live with these tracks, each with the names it goes
    /// by. False when a mapped name has no track (the source cannot be
    /// used yet); true when the channel's tracks changed.
    /// The first track name source `i`'s track map asks for that none of
    /// `tracks` has (why the source cannot join).
    pub fn missing_track(&self, i: usize, tracks: &[(Track, Vec<String>)]) -> Option<String> {
        let spec = self.spec.source_streams.get(i)?;
        spec.track_map
            .iter()
            .map(|m| &m.source_track_name)
            .find(|n| !tracks.iter().any(|(_, names)| names.contains(n)))
            .cloned()
    }

    pub fn source_tracks(&mut self, i: usize, tracks: &[(Track, Vec<String>)]) -> (bool, bool) {
        let Some(spec) = self.spec.source_streams.get(i) else {
            return (false, false);
        };
        let mut bound = Vec::new();
        for (k, m) in spec.track_map.iter().enumerate() {
            let Some((t, _)) = tracks
                .iter()
                .find(|(_, names)| names.contains(&m.source_track_name))
            else {
                return (false, false);
            };
            bound.push((t.id, k, t.clone()));
        }
        let mut changed = false;
        let mut ids = Vec::new();
        for (src, k, mut t) in bound {
            let id = self.out_id(i, k);
            t.id = id;
            if let Some(b) = spec.track_map[k].bitrate_conf {
                t.bitrate = u32::try_from(b).unwrap_or(u32::MAX);
            }
            if let (Some(f), Some(v)) = (spec.track_map[k].framerate_conf, t.video.as_mut()) {
                if v.framerate == 0.0 {
                    v.framerate = f;
                }
            }
            let slot = &mut self.tracks[id as usize - 1];
            if slot.as_ref() != Some(&t) {
                changed = true;
                *slot = Some(t);
            }
            ids.push((src, id));
        }
        let s = &mut self.sources[i];
        s.bound = ids;
        s.offset = None;
        s.live = true;
        (true, changed)
    }

    /// Source `i` stopped.
    pub fn source_ended(&mut self, i: usize) {
        if let Some(s) = self.sources.get_mut(i) {
            s.live = false;
            s.offset = None;
            s.bound.clear();
        }
    }

    pub fn is_live(&self, i: usize) -> bool {
        self.sources.get(i).is_some_and(|s| s.live)
    }

    /// Every source was seen with its tracks: the channel can start.
    pub fn ready(&self) -> bool {
        self.tracks.iter().all(Option::is_some)
    }

    /// The channel's tracks (all known once [`Multiplexer::ready`]).
    pub fn tracks(&self) -> Vec<Track> {
        self.tracks.iter().flatten().cloned().collect()
    }

    /// A frame of source `i` on the channel's clock (`now`: the channel's
    /// clock now, 90 kHz); `None` when it is not mapped or would go back.
    pub fn frame(&mut self, i: usize, f: &Frame, now: Ticks) -> Option<Frame> {
        let s = self.sources.get_mut(i)?;
        let &(_, id) = s.bound.iter().find(|(src, _)| *src == f.track)?;
        let offset = *s.offset.get_or_insert(now - f.dts);
        let dts = f.dts + offset;
        let last = &mut self.last_dts[id as usize - 1];
        if last.is_some_and(|l| dts <= l) {
            return None;
        }
        *last = Some(dts);
        Some(Frame {
            track: id,
            pts: f.pts + offset,
            dts,
            keyframe: f.keyframe,
            data: f.data.clone(),
        })
    }

    /// The playlists as the packager serves them, each rendition live or
    /// not by its sources.
    pub fn playlists(&self) -> Vec<Playlist> {
        let source_of = |id: TrackId| {
            let mut n = 0usize;
            for (i, s) in self.spec.source_streams.iter().enumerate() {
                n += s.track_map.len();
                if (id as usize) <= n {
                    return Some(i);
                }
            }
            None
        };
        self.spec
            .playlists
            .iter()
            .map(|p| Playlist {
                name: p.name.clone(),
                file_name: p.file_name.clone(),
                renditions: p
                    .renditions
                    .iter()
                    .map(|r| {
                        let video = r.video.as_deref().and_then(|n| self.id_of_name(n));
                        let audio = r.audio.as_deref().and_then(|n| self.id_of_name(n));
                        let live = [video, audio]
                            .into_iter()
                            .flatten()
                            .all(|id| source_of(id).is_some_and(|i| self.is_live(i)));
                        Rendition {
                            name: r.name.clone(),
                            video,
                            audio,
                            audio_alternates: Vec::new(),
                            live,
                        }
                    })
                    .collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
