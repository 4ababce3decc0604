//! OvenMediaEngine's WebRTC signalling messages (JSON over a WebSocket;
//! `../shared/spec/OME-WEBRTC.md` section 1), parsed and written. The
//! client asks (`request_offer`), kiln offers (`offer` with its `id`, the
//! SDP and the ICE candidates), the client answers (`answer`, `id` a JSON
//! integer), may trickle (`candidate`, ignored: kiln learns the peer from
//! STUN) and ends (`stop`). Errors are `{"code","error"}` replies after
//! which kiln closes the socket.

use serde_json::{json, Value};
use std::net::SocketAddr;

/// The largest signalling message kiln reads (an SDP answer is a few KB).
pub const MAX_MESSAGE: usize = 64 * 1024;

/// What a client sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    RequestOffer,
    Answer {
        id: i64,
        sdp: String,
    },
    Candidate {
        id: i64,
    },
    Stop {
        id: i64,
    },
    ChangeRendition {
        id: i64,
        rendition: Option<String>,
        auto: Option<bool>,
    },
    /// OvenPlayer's legacy keep-alive answer; nothing to do.
    Pong,
}

/// An error reply: OME's code and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: u16,
    pub error: String,
}

impl Refusal {
    pub fn new(code: u16, error: &str) -> Refusal {
        Refusal {
            code,
            error: error.to_string(),
        }
    }

    pub fn to_json(&self) -> String {
        json!({"code": self.code, "error": self.error}).to_string()
    }
}

/// Parses one message. `Ok(None)`: not JSON or no `command` (OME only
/// logs those; nothing is sent back).
pub fn parse(text: &str) -> Result<Option<Command>, Refusal> {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return Ok(None);
    };
    let Some(command) = v.get("command").and_then(Value::as_str) else {
        return Ok(None);
    };
    // OME reads `id` as an integer: a string reads as 0 ("Invalid ID").
    let id = || v.get("id").and_then(Value::as_i64).unwrap_or(0);
    match command {
        "request_offer" => Ok(Some(Command::RequestOffer)),
        "answer" => {
            let sdp = v
                .get("sdp")
                .ok_or_else(|| Refusal::new(400, "There is no SDP"))?;
            let ty = sdp.get("type").and_then(Value::as_str);
            if ty != Some("answer") {
                return Err(Refusal::new(400, "Invalid SDP type"));
            }
            let text = sdp
                .get("sdp")
                .and_then(Value::as_str)
                .ok_or_else(|| Refusal::new(400, "SDP must be a string"))?;
            Ok(Some(Command::Answer {
                id: id(),
                sdp: text.to_string(),
            }))
        }
        "candidate" => {
            let list = v
                .get("candidates")
                .ok_or_else(|| Refusal::new(400, "There is no candidate list"))?;
            let list = list
                .as_array()
                .ok_or_else(|| Refusal::new(400, "Candidates must be array"))?;
            for c in list {
                let s = c.get("candidate").and_then(Value::as_str).unwrap_or("");
                if s.is_empty() {
                    continue;
                }
                if !s.starts_with("candidate:") || s.split_whitespace().count() < 7 {
                    return Err(Refusal::new(
                        400,
                        &format!("Invalid candidate: {}", truncate(s, 100)),
                    ));
                }
            }
            Ok(Some(Command::Candidate { id: id() }))
        }
        "stop" => Ok(Some(Command::Stop { id: id() })),
        "change_rendition" => Ok(Some(Command::ChangeRendition {
            id: id(),
            rendition: v
                .get("rendition_name")
                .and_then(Value::as_str)
                .map(str::to_string),
            auto: v.get("auto").and_then(Value::as_bool),
        })),
        "pong" | "ping" => Ok(Some(Command::Pong)),
        other => Err(Refusal::new(
            400,
            &format!("Unknown command: {}", truncate(other, 100)),
        )),
    }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// OME's candidate line for one ICE socket (the JSON form, no `sdpMid`).
pub fn candidate_line(i: usize, addr: SocketAddr) -> String {
    format!(
        "candidate:{} 1 UDP 50 {} {} typ host",
        1_000_000_000 + i,
        addr.ip(),
        addr.port()
    )
}

/// The `offer` message; with `relay` (the TCP relay's `turn:` URLs, when
/// the viewer asked `transport=tcp`) OME's two spellings of the ICE servers.
pub fn offer(id: i64, sdp: &str, ports: &[SocketAddr], relay: &[String]) -> String {
    let candidates: Vec<Value> = ports
        .iter()
        .enumerate()
        .map(|(i, a)| json!({"candidate": candidate_line(i, *a), "sdpMLineIndex": 0}))
        .collect();
    let mut m = json!({
        "code": 200,
        "command": "offer",
        "id": id,
        "peer_id": 0,
        "sdp": {"type": "offer", "sdp": sdp},
        "candidates": candidates,
    });
    if !relay.is_empty() {
        use crate::webrtc::turn::{PASSWORD, USERNAME};
        m["ice_servers"] = json!([{"urls": relay, "user_name": USERNAME, "credential": PASSWORD}]);
        m["iceServers"] = json!([{"urls": relay, "username": USERNAME, "credential": PASSWORD}]);
    }
    m.to_string()
}

/// WHEP's `Link` header values for the relay (OME's WHIP form).
pub fn link_headers(relay: &[String]) -> Vec<String> {
    use crate::webrtc::turn::{PASSWORD, USERNAME};
    relay
        .iter()
        .map(|u| {
            format!("<{u}>; rel=\"ice-server\"; username=\"{USERNAME}\"; credential=\"{PASSWORD}\"; credential-type=\"password\"")
        })
        .collect()
}

/// One rendition of a stream for WebRTC viewers: a video track (an
/// encoder's layer; the stream's only one is `source`) with the stream's
/// first audio track, as the `playlist` notification shows it.
#[derive(Debug, Clone, Default)]
pub struct RenditionInfo {
    pub name: String,
    /// Its video track (`None`: audio only).
    pub track: Option<crate::media::TrackId>,
    pub video: Option<(String, u32, u32, u32, f64)>,
    pub audio: Option<(String, u32, u32, u32)>,
}

/// A stream's renditions for WebRTC viewers: one per H.264 video track
/// (the first is what a viewer plays until it chooses), named `source`
/// when there is one, else by its height (`720p`; `720p_1` for a second
/// of one height, as OME names a template's duplicates); with the
/// stream's first audio track as Opus.
pub fn renditions(stream: &crate::state::streams::LiveStream) -> Vec<RenditionInfo> {
    use crate::media::Codec;
    let tracks = stream.tracks();
    let audio = tracks.iter().find_map(|t| match (t.codec, t.audio) {
        (Codec::Aac | Codec::Opus, a) => {
            let ch = a.map_or(2, |a| u32::from(a.channels).clamp(1, 2));
            Some(("OPUS".to_string(), 48_000, ch, t.bitrate))
        }
        _ => None,
    });
    let videos: Vec<_> = tracks
        .iter()
        .filter_map(|t| match (t.codec, t.video) {
            (Codec::H264, Some(v)) => Some((t.id, v, t.bitrate)),
            _ => None,
        })
        .collect();
    if videos.is_empty() {
        return vec![RenditionInfo {
            name: "source".into(),
            audio,
            ..RenditionInfo::default()
        }];
    }
    let mut out: Vec<RenditionInfo> = Vec::new();
    for (id, v, bitrate) in &videos {
        let name = if videos.len() == 1 {
            "source".to_string()
        } else {
            let base = format!("{}p", v.height);
            let same = out
                .iter()
                .filter(|r| r.name == base || r.name.starts_with(&format!("{base}_")))
                .count();
            // A name taken: `_1`, `_2`... after it, as OME makes its
            // rendition names unique.
            if same == 0 {
                base
            } else {
                format!("{base}_{same}")
            }
        };
        out.push(RenditionInfo {
            name,
            track: Some(*id),
            video: Some(("H264".into(), v.width, v.height, *bitrate, v.framerate)),
            audio: audio.clone(),
        });
    }
    out
}

/// The renditions of one of the stream's named playlists (OME's
/// `<Playlist>`, `/{app}/{stream}/{FileName}`): each with its video track
/// (H.264: what WebRTC viewers get) and its audio, or the stream's first.
pub fn playlist_renditions(
    stream: &crate::state::streams::LiveStream,
    playlist: &crate::state::streams::Playlist,
) -> Vec<RenditionInfo> {
    use crate::media::Codec;
    let tracks = stream.tracks();
    let first_audio = tracks
        .iter()
        .find(|t| t.kind() == crate::media::MediaKind::Audio)
        .map(|t| t.id);
    playlist
        .renditions
        .iter()
        .filter_map(|r| {
            let v = tracks
                .iter()
                .find(|t| Some(t.id) == r.video && t.codec == Codec::H264)?;
            let p = v.video?;
            let a = tracks
                .iter()
                .find(|t| Some(t.id) == r.audio.or(first_audio));
            Some(RenditionInfo {
                name: r.name.clone(),
                track: Some(v.id),
                video: Some(("H264".into(), p.width, p.height, v.bitrate, p.framerate)),
                audio: a.map(|a| {
                    let ch = a.audio.map_or(2, |x| u32::from(x.channels).clamp(1, 2));
                    ("OPUS".to_string(), 48_000, ch, a.bitrate)
                }),
            })
        })
        .collect()
}

/// The `playlist` notification after a good answer: the stream's
/// renditions (kiln relays each as it is).
pub fn playlist_notification(stream: &str, renditions: &[RenditionInfo], auto: bool) -> String {
    let list: Vec<Value> = renditions
        .iter()
        .map(|r| {
            let mut rendition = json!({"name": r.name});
            if let Some((codec, width, height, bitrate, framerate)) = &r.video {
                rendition["video_track"] = json!({
                    "id": 0, "name": "video", "type": "Video",
                    "video": {"codec": codec, "width": width, "height": height, "bitrate": bitrate, "framerate": framerate},
                });
            }
            if let Some((codec, samplerate, channel, bitrate)) = &r.audio {
                rendition["audio_track"] = json!({
                    "id": 1, "name": "audio", "type": "Audio",
                    "audio": {"codec": codec, "samplerate": samplerate, "channel": channel, "bitrate": bitrate},
                });
            }
            rendition
        })
        .collect();
    json!({
        "command": "notification",
        "type": "playlist",
        "message": {"name": stream, "file_name": "", "auto": auto, "renditions": list},
    })
    .to_string()
}

pub fn rendition_changed(name: &str, auto: bool) -> String {
    json!({
        "command": "notification",
        "type": "rendition_changed",
        "message": {"rendition_name": name, "auto": auto},
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ome_messages() {
        assert_eq!(
            parse(r#"{"command":"request_offer"}"#),
            Ok(Some(Command::RequestOffer))
        );
        assert_eq!(
            parse(r#"{"command":"answer","id":5,"peer_id":0,"sdp":{"type":"answer","sdp":"v=0"}}"#),
            Ok(Some(Command::Answer {
                id: 5,
                sdp: "v=0".into()
            }))
        );
        // A string id reads as 0, as OME reads it.
        assert_eq!(
            parse(r#"{"command":"stop","id":"5"}"#),
            Ok(Some(Command::Stop { id: 0 }))
        );
        assert_eq!(parse("not json"), Ok(None));
        assert_eq!(parse(r#"{"id":1}"#), Ok(None));
        assert_eq!(
            parse(r#"{"command":"dance"}"#).unwrap_err().error,
            "Unknown command: dance"
        );
        assert_eq!(
            parse(r#"{"command":"answer","id":1}"#).unwrap_err().error,
            "There is no SDP"
        );
        assert_eq!(
            parse(r#"{"command":"answer","id":1,"sdp":{"type":"offer","sdp":""}}"#)
                .unwrap_err()
                .error,
            "Invalid SDP type"
        );
        assert_eq!(
            parse(r#"{"command":"candidate","id":1,"candidates":[{"candidate":"bad"}]}"#)
                .unwrap_err()
                .code,
            400
        );
        assert_eq!(
            parse(
                r#"{"command":"candidate","id":1,"candidates":[{"candidate":"candidate:1 1 udp 1 1.2.3.4 5 typ host"},{"candidate":""}]}"#
            ),
            Ok(Some(Command::Candidate { id: 1 }))
        );
    }

    #[test]
    fn offer_has_candidates_without_mid() {
        let o: Value =
            serde_json::from_str(&offer(7, "v=0", &["127.0.0.1:10000".parse().unwrap()], &[]))
                .unwrap();
        assert!(o.get("iceServers").is_none());
        let relay = vec!["turn:127.0.0.1:3478?transport=tcp".to_string()];
        let t: Value = serde_json::from_str(&offer(7, "v=0", &[], &relay)).unwrap();
        assert_eq!(t["ice_servers"][0]["user_name"], "ome");
        assert_eq!(t["iceServers"][0]["username"], "ome");
        assert_eq!(t["iceServers"][0]["credential"], "airen");
        assert_eq!(
            t["iceServers"][0]["urls"][0],
            "turn:127.0.0.1:3478?transport=tcp"
        );
        assert_eq!(o["command"], "offer");
        assert_eq!(o["id"], 7);
        assert_eq!(o["sdp"]["type"], "offer");
        assert_eq!(
            o["candidates"][0]["candidate"],
            "candidate:1000000000 1 UDP 50 127.0.0.1 10000 typ host"
        );
        assert!(o["candidates"][0].get("sdpMid").is_none());
    }
}
