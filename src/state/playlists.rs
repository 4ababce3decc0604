//! OME's `<OutputProfile><Playlist>` with `<RenditionTemplate>`s: a named
//! multivariant playlist of a stream (LL-HLS `{FileName}.m3u8`, the API's
//! stream `playlists`) whose renditions the templates make from the
//! stream's own tracks (an encoder's layers: simulcast, enhanced RTMP
//! multitrack). kiln never encodes, so every track is a bypassed one.
//!
//! As OME does (`TranscoderStream`, v0.18's ABR from simulcast): each
//! template makes one rendition per video track it matches, with each
//! audio group it matches (the audio tracks of one variant name: a
//! multilingual variant's languages stay one group, as OME keeps them), or
//! per video alone, or per audio group alone; the template's name takes `${Width}`, `${Height}`,
//! `${Bitrate}`, `${Framerate}`, `${Samplerate}` and `${Channel}`, and a
//! name already taken gets `_1`, `_2`, ... after it. A fixed `<Rendition>`
//! names the variants of its video and audio: the first track of each
//! name (kiln's tracks carry their bypass encode's name).

use super::app::OutputProfile;
use super::streams::{Playlist, Rendition};
use crate::media::{MediaKind, Track};

/// One `<Playlist>` of an output profile (config files; the API's app
/// bodies leave playlists out).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PlaylistSpec {
    pub name: String,
    pub file_name: String,
    pub templates: Vec<RenditionTemplate>,
    /// `<Rendition>`s: a name and the variant names of its video and
    /// audio (each the first track of that name).
    pub renditions: Vec<(String, Option<String>, Option<String>)>,
}

/// One `<RenditionTemplate>`: its name template and which tracks it takes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RenditionTemplate {
    pub name: String,
    pub video: Option<TrackTemplate>,
    pub audio: Option<TrackTemplate>,
}

/// `<VideoTemplate>` / `<AudioTemplate>`: the tracks a template takes.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TrackTemplate {
    /// `<EncodingType>encoded</EncodingType>`: only transcoded tracks,
    /// which kiln never has.
    pub encoded_only: bool,
    pub variant_name: Option<String>,
    pub min_width: Option<u32>,
    pub max_width: Option<u32>,
    pub min_height: Option<u32>,
    pub max_height: Option<u32>,
    pub min_framerate: Option<f64>,
    pub max_framerate: Option<f64>,
    pub min_bitrate: Option<u32>,
    pub max_bitrate: Option<u32>,
    pub min_samplerate: Option<u32>,
    pub max_samplerate: Option<u32>,
    pub min_channel: Option<u32>,
    pub max_channel: Option<u32>,
}

impl TrackTemplate {
    /// Does the template take `t`, whose output variant name is `variant`?
    fn matches(&self, t: &Track, variant: &str) -> bool {
        let within = |v: Option<f64>, lo: Option<f64>, hi: Option<f64>| {
            lo.is_none_or(|lo| v.is_some_and(|v| v >= lo))
                && hi.is_none_or(|hi| v.is_some_and(|v| v <= hi))
        };
        let u = |x: Option<u32>| x.map(f64::from);
        let video = t.video.unwrap_or_default();
        let audio = t.audio.unwrap_or_default();
        let rate = (t.bitrate > 0).then_some(f64::from(t.bitrate));
        !self.encoded_only
            && self.variant_name.as_deref().is_none_or(|n| n == variant)
            && within(
                Some(f64::from(video.width)),
                u(self.min_width),
                u(self.max_width),
            )
            && within(
                Some(f64::from(video.height)),
                u(self.min_height),
                u(self.max_height),
            )
            && within(
                Some(video.framerate),
                self.min_framerate,
                self.max_framerate,
            )
            && within(rate, u(self.min_bitrate), u(self.max_bitrate))
            && within(
                Some(f64::from(audio.sample_rate)),
                u(self.min_samplerate),
                u(self.max_samplerate),
            )
            && within(
                Some(f64::from(audio.channels)),
                u(self.min_channel),
                u(self.max_channel),
            )
    }
}

/// The playlists `profile` makes of a stream's `tracks` (in the stream's
/// order): each playlist's templates against the tracks, renditions
/// named as OME names them.
pub fn template_playlists(profile: &OutputProfile, tracks: &[Track]) -> Vec<Playlist> {
    let named = super::app::output_tracks(tracks, Some(profile));
    // The audio tracks by variant name, in the stream's order: one group
    // each (a multilingual variant's languages stay together).
    let mut audio_groups: Vec<(String, Vec<&Track>)> = Vec::new();
    for (t, n) in named.iter().filter(|(t, _)| t.kind() == MediaKind::Audio) {
        match audio_groups.iter_mut().find(|(g, _)| g == n) {
            Some((_, g)) => g.push(t),
            None => audio_groups.push((n.clone(), vec![t])),
        }
    }
    profile
        .playlists
        .iter()
        .map(|p| {
            let mut renditions: Vec<Rendition> = Vec::new();
            let by_variant = |kind: MediaKind, v: &Option<String>| {
                v.as_ref().and_then(|v| {
                    named
                        .iter()
                        .find(|(t, n)| t.kind() == kind && n == v)
                        .map(|(t, _)| t.id)
                })
            };
            let group_of = |name: &Option<String>| -> Vec<u32> {
                name.as_ref()
                    .and_then(|n| audio_groups.iter().find(|(g, _)| g == n))
                    .map(|(_, g)| g.iter().skip(1).map(|t| t.id).collect())
                    .unwrap_or_default()
            };
            for (name, video, audio) in &p.renditions {
                let (v, a) = (
                    by_variant(MediaKind::Video, video),
                    by_variant(MediaKind::Audio, audio),
                );
                if v.is_some() || a.is_some() {
                    renditions.push(Rendition {
                        name: unique(&renditions, name.clone()),
                        video: v,
                        audio: a,
                        audio_alternates: if a.is_some() {
                            group_of(audio)
                        } else {
                            Vec::new()
                        },
                        live: true,
                    });
                }
            }
            for t in &p.templates {
                let take = |kind: MediaKind, tpl: &Option<TrackTemplate>| -> Vec<&Track> {
                    match tpl {
                        None => Vec::new(),
                        Some(tpl) => named
                            .iter()
                            .filter(|(x, n)| x.kind() == kind && tpl.matches(x, n))
                            .map(|(x, _)| x)
                            .collect(),
                    }
                };
                // Video: each track that matches; audio: each group whose
                // first track does (OME does not split a group).
                let videos = take(MediaKind::Video, &t.video);
                let audios: Vec<&[&Track]> = match &t.audio {
                    None => Vec::new(),
                    Some(tpl) => audio_groups
                        .iter()
                        .filter(|(n, g)| tpl.matches(g[0], n))
                        .map(|(_, g)| g.as_slice())
                        .collect(),
                };
                let pairs: Vec<(Option<&Track>, Option<&[&Track]>)> =
                    match (videos.is_empty(), audios.is_empty()) {
                        (false, false) => videos
                            .iter()
                            .flat_map(|v| audios.iter().map(move |a| (Some(*v), Some(*a))))
                            .collect(),
                        (false, true) => videos.iter().map(|v| (Some(*v), None)).collect(),
                        (true, false) => audios.iter().map(|a| (None, Some(*a))).collect(),
                        (true, true) => Vec::new(),
                    };
                for (v, group) in pairs {
                    let a = group.map(|g| g[0]);
                    let name = unique(&renditions, rendition_name(&t.name, v, a));
                    renditions.push(Rendition {
                        name,
                        video: v.map(|v| v.id),
                        audio: a.map(|a| a.id),
                        audio_alternates: group
                            .map(|g| g.iter().skip(1).map(|t| t.id).collect())
                            .unwrap_or_default(),
                        live: true,
                    });
                }
            }
            Playlist {
                name: p.name.clone(),
                file_name: p.file_name.clone(),
                renditions,
            }
        })
        .collect()
}

/// A template's name with its `${...}` of the tracks filled in.
fn rendition_name(template: &str, video: Option<&Track>, audio: Option<&Track>) -> String {
    let mut name = template.to_string();
    if let Some(v) = video {
        let p = v.video.unwrap_or_default();
        name = name
            .replace("${Width}", &p.width.to_string())
            .replace("${Height}", &p.height.to_string())
            .replace("${Bitrate}", &v.bitrate.to_string())
            .replace("${Framerate}", &(p.framerate.round() as u64).to_string());
    }
    if let Some(a) = audio {
        let p = a.audio.unwrap_or_default();
        name = name
            .replace("${Samplerate}", &p.sample_rate.to_string())
            .replace("${Channel}", &p.channels.to_string());
    }
    name
}

/// `name`, or `name_1`, `name_2`... when it is taken.
fn unique(taken: &[Rendition], name: String) -> String {
    let is_taken = |n: &str| taken.iter().any(|r| r.name == n);
    if !is_taken(&name) {
        return name;
    }
    (1..)
        .map(|i| format!("{name}_{i}"))
        .find(|n| !is_taken(n))
        .unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::{AudioParams, Codec, CodecConfig, VideoParams};

    fn video(id: u32, width: u32, height: u32) -> Track {
        Track {
            id,
            codec: Codec::H264,
            config: CodecConfig::None,
            video: Some(VideoParams {
                width,
                height,
                framerate: 30.0,
            }),
            audio: None,
            bitrate: 0,
            label: Default::default(),
        }
    }

    fn aac(id: u32) -> Track {
        Track {
            id,
            codec: Codec::Aac,
            config: CodecConfig::None,
            video: None,
            audio: Some(AudioParams {
                sample_rate: 48_000,
                channels: 2,
            }),
            bitrate: 0,
            label: Default::default(),
        }
    }

    fn profile(templates: Vec<RenditionTemplate>) -> OutputProfile {
        let mut p: OutputProfile = serde_json::from_value(serde_json::json!({
            "name": "bypass",
            "encodes": {"videos": [{"name": "bypass_video", "bypass": true}],
                        "audios": [{"name": "bypass_audio", "bypass": true}]}
        }))
        .unwrap();
        p.playlists = vec![PlaylistSpec {
            name: "abr".into(),
            file_name: "abr".into(),
            templates,
            renditions: vec![(
                "fixed".into(),
                Some("bypass_video".into()),
                Some("nope".into()),
            )],
        }];
        p
    }

    #[test]
    fn a_height_template_makes_a_rendition_per_layer_with_the_audio() {
        let all = TrackTemplate::default();
        let p = profile(vec![RenditionTemplate {
            name: "${Height}p".into(),
            video: Some(all.clone()),
            audio: Some(TrackTemplate {
                variant_name: Some("bypass_audio".into()),
                ..all.clone()
            }),
        }]);
        let tracks = [
            video(1, 1280, 720),
            video(3, 640, 360),
            video(4, 640, 360),
            aac(2),
        ];
        let made = template_playlists(&p, &tracks);
        let names: Vec<(&str, Option<u32>, Option<u32>)> = made[0]
            .renditions
            .iter()
            .map(|r| (r.name.as_str(), r.video, r.audio))
            .collect();
        assert_eq!(
            names,
            [
                ("fixed", Some(1), None),
                ("720p", Some(1), Some(2)),
                ("360p", Some(3), Some(2)),
                ("360p_1", Some(4), Some(2))
            ]
        );
        assert_eq!(made[0].file_name, "abr");
    }

    #[test]
    fn the_languages_of_one_audio_variant_stay_one_group() {
        let all = TrackTemplate::default();
        let p = profile(vec![RenditionTemplate {
            name: "${Height}p".into(),
            video: Some(all.clone()),
            audio: Some(all.clone()),
        }]);
        let mut spa = aac(5);
        spa.label.language = crate::media::Language::parse(b"spa");
        let mut eng = aac(2);
        eng.label.language = crate::media::Language::parse(b"eng");
        let tracks = [video(1, 1280, 720), video(3, 640, 360), eng, spa];
        let made = template_playlists(&p, &tracks);
        let got: Vec<_> = made[0]
            .renditions
            .iter()
            .map(|r| {
                (
                    r.name.as_str(),
                    r.video,
                    r.audio,
                    r.audio_alternates.clone(),
                )
            })
            .collect();
        // Two video renditions, each with both languages: not 2 x 2.
        assert_eq!(
            got,
            [
                ("fixed", Some(1), None, Vec::<u32>::new()),
                ("720p", Some(1), Some(2), vec![5]),
                ("360p", Some(3), Some(2), vec![5])
            ]
        );
    }

    #[test]
    fn limits_and_encoded_only_pick_tracks() {
        let p = profile(vec![
            RenditionTemplate {
                name: "small_${Width}".into(),
                video: Some(TrackTemplate {
                    max_height: Some(400),
                    ..TrackTemplate::default()
                }),
                audio: None,
            },
            RenditionTemplate {
                name: "enc".into(),
                video: Some(TrackTemplate {
                    encoded_only: true,
                    ..TrackTemplate::default()
                }),
                audio: None,
            },
            RenditionTemplate {
                name: "sound_${Samplerate}_${Channel}".into(),
                video: None,
                audio: Some(TrackTemplate::default()),
            },
        ]);
        let made = template_playlists(&p, &[video(1, 1280, 720), video(3, 640, 360), aac(2)]);
        let names: Vec<&str> = made[0].renditions.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["fixed", "small_640", "sound_48000_2"]);
    }
}
