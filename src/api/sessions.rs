//! A stream's sessions (kiln extension; OME's users ask for it in its
//! #401): `GET .../streams/{stream}/sessions` lists who publishes and who
//! watches — the publisher, RTMP and SRT players, WebRTC sessions, LL-HLS
//! and HLS viewers — and `DELETE .../sessions/{id}` ends one.
//!
//! Ids name the kind: `publisher`, `rtmp-N` and `srt-N` (players; N is
//! never reused), `webrtc-KEY`, `llhls-TOKEN` and `hls-TOKEN` (a player
//! session: the token its multivariant playlist gave its chunklist URIs),
//! `llhls-ADDRESS` and `hls-ADDRESS` (a player that carries no token). An
//! LL-HLS or HLS viewer has no connection of its own (each request stands
//! alone): ending one refuses its requests for the stream for a minute
//! (`ENDED_HTTP_VIEWER_REFUSED`): a session's, those with its token; an
//! address's, those without one. Its player stops.

use super::envelope::{self, ApiError};
use super::{Api, Effect, Response};
use crate::clock;
use crate::state::streams::HttpWho;
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SessionInfo {
    id: String,
    /// `rtmp`, `srt`, `webrtc`, `llhls`, `hls`; for the publisher its
    /// source type as stream info names it, in lower case (`rtmp`,
    /// `rtsppull`).
    protocol: String,
    /// `publisher` or `viewer`.
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    remote_address: Option<String>,
    since: String,
    /// Bytes in (the publisher) or out (a viewer), or both ways (WebRTC).
    bytes: u64,
    /// WebRTC: ICE and DTLS are done.
    #[serde(skip_serializing_if = "Option::is_none")]
    connected: Option<bool>,
}

/// Where a session id points.
enum Target {
    Publisher,
    Player(u64),
    #[cfg_attr(not(feature = "webrtc"), allow(dead_code))]
    WebRtc(String),
    Http(HttpWho, bool),
}

fn parse_id(id: &str) -> Option<Target> {
    if id == "publisher" {
        return Some(Target::Publisher);
    }
    let (kind, rest) = id.split_once('-')?;
    match kind {
        "rtmp" | "srt" => rest.parse().ok().map(Target::Player),
        "webrtc" => Some(Target::WebRtc(rest.to_string())),
        "llhls" | "hls" => {
            let who = match rest.parse() {
                Ok(ip) => HttpWho::Address(ip),
                Err(_) => HttpWho::Session(crate::hls::session::parse_token_text(rest)?),
            };
            Some(Target::Http(who, kind == "hls"))
        }
        _ => None,
    }
}

impl Api {
    pub(super) fn list_sessions(
        &self,
        vhost: &str,
        app: &str,
        stream: &str,
    ) -> Result<Response, ApiError> {
        let (_, live) = self.live_stream(vhost, app, stream)?;
        let now = self.now;
        let time = |ms: i64| clock::format_iso8601(ms, self.utc_offset);
        // An instant of this loop turn as wall-clock time.
        let wall = |at: std::time::Instant| {
            now.unix_ms - now.instant.saturating_duration_since(at).as_millis() as i64
        };
        // One dialect for every row: lower-case protocols, `ip:port`
        // addresses (`[::1]:port`); a pull names the URL it pulls from.
        #[cfg(feature = "webrtc")]
        let webrtc_publisher = self
            .webrtc
            .sessions_of(live.id)
            .into_iter()
            .find(|s| s.publisher)
            .and_then(|s| s.remote);
        #[cfg(not(feature = "webrtc"))]
        let webrtc_publisher: Option<String> = None;
        let mut list = vec![SessionInfo {
            id: "publisher".into(),
            protocol: live.source.api_name().to_ascii_lowercase(),
            role: "publisher",
            remote_address: live
                .publisher_addr
                .map(|a| a.to_string())
                .or(webrtc_publisher)
                .or_else(|| live.source_url.clone()),
            since: time(live.created_ms),
            bytes: live.bytes_in,
            connected: None,
        }];
        let mut players: Vec<_> = live.audience.players.iter().collect();
        players.sort_unstable_by_key(|(id, _)| **id);
        for (id, p) in players {
            list.push(SessionInfo {
                id: format!("{}-{id}", p.protocol),
                protocol: p.protocol.to_string(),
                role: "viewer",
                remote_address: Some(p.remote.to_string()),
                since: time(p.since_ms),
                bytes: p.bytes,
                connected: None,
            });
        }
        #[cfg(feature = "webrtc")]
        for s in self.webrtc.sessions_of(live.id) {
            if s.publisher {
                // The stream's publisher, listed above.
                continue;
            }
            list.push(SessionInfo {
                id: format!("webrtc-{}", s.key),
                protocol: "webrtc".into(),
                role: "viewer",
                remote_address: s.remote,
                since: time(wall(s.opened)),
                bytes: s.bytes,
                connected: Some(s.connected),
            });
        }
        let mut http: Vec<_> = live.audience.http_list(now.instant).collect();
        // Oldest first; a session before an address row of the same moment.
        http.sort_unstable_by_key(|(who, hls, v)| {
            (v.first, *hls, matches!(who, HttpWho::Address(_)), v.remote)
        });
        for (who, hls, v) in http {
            let kind = if hls { "hls" } else { "llhls" };
            // A player session: its token and the address of its last
            // request; a viewer known by address alone: that address.
            let (name, remote) = match who {
                HttpWho::Session(t) => (crate::hls::session::token_text(t), v.remote.to_string()),
                HttpWho::Address(ip) => (ip.to_string(), ip.to_string()),
            };
            list.push(SessionInfo {
                id: format!("{kind}-{name}"),
                protocol: kind.into(),
                role: "viewer",
                remote_address: Some(remote),
                since: time(wall(v.first)),
                bytes: v.bytes,
                connected: None,
            });
        }
        Ok(envelope::ok(list))
    }

    pub(super) fn end_session(
        &mut self,
        vhost: &str,
        app: &str,
        stream: &str,
        id: &str,
    ) -> Result<Response, ApiError> {
        let (_, live) = self.live_stream(vhost, app, stream)?;
        let (stream_id, path) = (live.id, format!("{vhost}/{app}/{}", live.name));
        let not_found = || ApiError::Http {
            status: 404,
            text: format!("Could not find the session: [{path}/{id}]"),
        };
        match parse_id(id).ok_or_else(not_found)? {
            Target::Publisher => {
                self.effects.push(Effect::EndStream { stream: stream_id });
            }
            Target::Player(n) => {
                let p = live.audience.players.get(&n).ok_or_else(not_found)?;
                if !id.starts_with(p.protocol) {
                    return Err(not_found());
                }
                self.effects.push(Effect::EndSession {
                    stream: stream_id,
                    endpoint: p.endpoint,
                    conn: p.conn,
                });
            }
            #[cfg(feature = "webrtc")]
            Target::WebRtc(key) => {
                if self.webrtc.session_stream(&key) != Some(stream_id) {
                    return Err(not_found());
                }
                let _ = self.webrtc.stop(&key);
            }
            #[cfg(not(feature = "webrtc"))]
            Target::WebRtc(_) => return Err(not_found()),
            Target::Http(who, hls) => {
                let now = self.now.instant;
                let ended = self
                    .registry
                    .streams
                    .audience_mut(stream_id)
                    .is_some_and(|a| a.end_http(who, hls, now));
                if !ended {
                    return Err(not_found());
                }
            }
        }
        crate::info!("session [{path}/{id}] ended through the API");
        Ok(envelope::ok_empty())
    }
}
