//! What every kind of task (push, record, pull, dump) shares: its key, the
//! back-off between attempts, how it names the tracks it takes, and OME's
//! text for a request's missing fields.

use crate::media::{MediaKind, Track, TrackId};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Identifies a task.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaskKey {
    pub vhost: String,
    pub app: String,
    pub id: String,
}

impl std::fmt::Display for TaskKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.vhost, self.app, self.id)
    }
}

/// Back-off before the next attempt: 1 s doubling to 30 s, with up to 25%
/// jitter from `jitter` (0..=1023).
pub fn backoff(failures: u32, jitter: u32) -> Duration {
    let base = 1000u64 << failures.saturating_sub(1).min(5);
    let base = base.min(30_000);
    let extra = base * (jitter as u64 % 1024) / 4096;
    Duration::from_millis(base + extra)
}

/// The protocols a task pushes with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    Rtmp,
    Srt,
    Mpegts,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Rtmp => "rtmp",
            Protocol::Srt => "srt",
            Protocol::Mpegts => "mpegts",
        }
    }
}

/// The stream and tracks a task takes (`:startPush`, `:startRecord`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamSelector {
    pub name: Option<String>,
    #[serde(default)]
    pub variant_names: Vec<String>,
    #[serde(default)]
    pub track_ids: Vec<TrackId>,
}

/// The tracks a task sends from a stream's tracks (DECISIONS section 7):
/// variantNames and trackIds both select; data tracks always go; an empty
/// selection sends the first video track of the stream's list (its
/// largest layer, [`crate::media::first_layer`]) with every audio track
/// (srt, mpegts), or with the first audio track (rtmp). Pushes select
/// with their protocol; records as the `srt` and `mpegts` pushes do.
/// `named` gives each track's output encode name.
pub fn select(
    variant_names: &[String],
    track_ids: &[TrackId],
    protocol: Protocol,
    tracks: &[Track],
    named: &dyn Fn(&Track) -> Option<String>,
) -> Vec<TrackId> {
    let carried = |t: &Track| match protocol {
        Protocol::Rtmp => matches!(
            t.codec,
            crate::media::Codec::H264 | crate::media::Codec::Aac
        ),
        _ => true,
    };
    let explicit = !variant_names.is_empty() || !track_ids.is_empty();
    let mut ids: Vec<TrackId> = if explicit {
        // `trackIds` are the API's track ids: positions in the stream's
        // list, from 0 (as OME numbers tracks).
        tracks
            .iter()
            .enumerate()
            .filter(|(i, t)| {
                t.kind() == MediaKind::Data
                    || track_ids.contains(&(*i as TrackId))
                    || named(t).is_some_and(|n| variant_names.contains(&n))
            })
            .map(|(_, t)| t)
            .filter(|t| carried(t))
            .map(|t| t.id)
            .collect()
    } else if protocol == Protocol::Rtmp {
        let first = |kind: MediaKind| {
            tracks
                .iter()
                .find(|t| t.kind() == kind && carried(t))
                .map(|t| t.id)
        };
        first(MediaKind::Video)
            .into_iter()
            .chain(first(MediaKind::Audio))
            .collect()
    } else {
        crate::media::first_layer(tracks)
            .iter()
            .map(|t| t.id)
            .collect()
    };
    if protocol == Protocol::Rtmp {
        // RTMP carries one video and one audio track.
        let mut seen = Vec::new();
        ids.retain(|id| {
            let kind = tracks.iter().find(|t| t.id == *id).map(|t| t.kind());
            if seen.contains(&kind) {
                false
            } else {
                seen.push(kind);
                true
            }
        });
    }
    ids
}

/// OME's text for a task request's missing fields, spaces and all:
/// `There is no required parameter [ id stream.name]`.
pub fn write_missing(f: &mut std::fmt::Formatter<'_>, names: &[&str]) -> std::fmt::Result {
    f.write_str("There is no required parameter [")?;
    for n in names {
        write!(f, " {n}")?;
    }
    f.write_str("]")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtmp::flv::tests::{aac_track, h264_track};

    /// A ladder (three video renditions, two audio languages): with no
    /// selection, `srt`/`mpegts` and records take the first video track
    /// and every audio track, `rtmp` the first of each; `trackIds` (API
    /// positions) choose any.
    #[test]
    fn a_ladder_sends_its_first_layer_unless_told() {
        let tracks: Vec<Track> = [
            (1, h264_track()),
            (3, h264_track()),
            (4, h264_track()),
            (2, aac_track()),
            (5, aac_track()),
        ]
        .into_iter()
        .map(|(id, t)| Track { id, ..t })
        .collect();
        let none = |_: &Track| None;
        let sel = |ids: &[TrackId], p| select(&[], ids, p, &tracks, &none);
        assert_eq!(sel(&[], Protocol::Srt), [1, 2, 5]);
        assert_eq!(sel(&[], Protocol::Mpegts), [1, 2, 5]);
        assert_eq!(sel(&[], Protocol::Rtmp), [1, 2]);
        assert_eq!(sel(&[2, 4], Protocol::Srt), [4, 5]);
        assert_eq!(sel(&[1, 2], Protocol::Rtmp), [3]);
    }
}
