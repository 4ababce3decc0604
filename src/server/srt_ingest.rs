//! SRT listener ingest: one UDP socket, many callers, driven through the
//! sans-IO [`Listener`]. The caller's streamid names the stream; it must
//! name an application with the SRT provider on and a free stream name, or
//! the handshake is rejected with an HTTP-like code (404, 403, 409) the
//! caller reports. Each connection's TS payloads go through its own
//! demuxer.
//!
//! Streamid forms: `{vhost host or name}/{app}/{stream}`, OME's
//! `srt://{host}[:port]/{app}/{stream}` (URL-encoded or not), and SRT's
//! access-control syntax `#!::h={host},r={app}/{stream},m=publish`;
//! `{app}/{stream}` picks the first virtual host that serves any name.

use super::endpoint::{Cx, Endpoint};
use crate::srt::{ConnectionId, Listener, ListenerConfig, ListenerEvent, RejectReason};
use crate::state::streams::{IngestOutput, PublishError, SourceType, StreamId};
use crate::state::Registry;
use crate::ts::{DemuxEvent, Demuxer};
use mio::net::UdpSocket;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

const MAX_DATAGRAM: usize = 65_536;

struct Connection {
    stream: StreamId,
    demuxer: Demuxer,
}

pub struct SrtIngest {
    socket: UdpSocket,
    listener: Listener,
    conns: HashMap<ConnectionId, Connection>,
    buf: Vec<u8>,
    out: Vec<u8>,
    /// A datagram the socket would not take yet (sent first next time).
    blocked: Option<(SocketAddr, Vec<u8>)>,
    owner: u64,
}

/// The mode a streamid asks for: `m=` in the access-control form, `mode=`
/// in the query of the URL forms; `None` when it says none (publish).
pub fn stream_id_mode(id: &str) -> Option<String> {
    let id = access_control_form(id);
    if let Some(acl) = id.strip_prefix("#!::") {
        return acl
            .split(',')
            .find_map(|kv| kv.strip_prefix("m="))
            .map(str::to_string);
    }
    let (_, query) = id.split_once('?')?;
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("mode="))
        .map(str::to_string)
}

/// The streamid trimmed, and percent-decoded when that makes it SRT's
/// access-control form (`%23!::r=...` as some URL-driven callers send it).
fn access_control_form(id: &str) -> std::borrow::Cow<'_, str> {
    let id = id.trim();
    if !id.starts_with("#!::") && id.starts_with("%23") {
        if let Some(decoded) = crate::http::percent_decode(id) {
            if decoded.starts_with("#!::") {
                return decoded.into();
            }
        }
    }
    id.into()
}

/// (host or vhost name, app, stream) from a streamid.
pub fn parse_stream_id(id: &str) -> Option<(Option<String>, String, String)> {
    let id = access_control_form(id);
    let id = id.as_ref();
    if let Some(acl) = id.strip_prefix("#!::") {
        let (mut host, mut resource, mut mode) = (None, None, None);
        for kv in acl.split(',') {
            match kv.split_once('=') {
                Some(("h", v)) => host = Some(v.to_string()),
                Some(("r", v)) => resource = Some(v.to_string()),
                Some(("m", v)) => mode = Some(v.to_string()),
                _ => {}
            }
        }
        if mode.is_some_and(|m| m != "publish") {
            return None;
        }
        let (app, stream) = resource?
            .split_once('/')
            .map(|(a, s)| (a.to_string(), s.to_string()))?;
        return (!app.is_empty() && !stream.is_empty()).then_some((host, app, stream));
    }
    let decoded = crate::http::percent_decode(id).unwrap_or_else(|| id.to_string());
    let path = match decoded.split_once("://") {
        Some((_, rest)) => rest.to_string(),
        None => decoded,
    };
    let path = path.split('?').next().unwrap_or("");
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        [host, app, stream] => Some((
            Some(crate::api::access::host_without_port(host).to_string()),
            app.to_string(),
            stream.to_string(),
        )),
        [app, stream] => Some((None, app.to_string(), stream.to_string())),
        _ => None,
    }
}

/// Moves what a demuxer has into the registry and an output for the
/// stream's push sessions.
pub fn drain_demuxer(demuxer: &mut Demuxer, id: StreamId, registry: &mut Registry) -> IngestOutput {
    let mut out = IngestOutput {
        stream: Some(id),
        ..Default::default()
    };
    while let Some(ev) = demuxer.poll_event() {
        match ev {
            DemuxEvent::TracksChanged(tracks) => {
                registry.streams.set_tracks(id, tracks);
                out.tracks_changed = true;
            }
            DemuxEvent::Frame(frame) => {
                registry.streams.on_frame(id, &frame);
                out.frames.push(frame);
            }
        }
    }
    out
}

impl SrtIngest {
    pub fn new(
        socket: UdpSocket,
        owner: u64,
        crypto: Option<crate::srt::crypto::CryptoConfig>,
        now: Instant,
    ) -> Self {
        let config = ListenerConfig {
            crypto,
            ..ListenerConfig::default()
        };
        SrtIngest {
            socket,
            listener: Listener::new(config, now),
            conns: HashMap::new(),
            buf: vec![0u8; MAX_DATAGRAM],
            out: Vec::with_capacity(1500),
            blocked: None,
            owner,
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.listener.poll_timeout()
    }

    /// The streams this socket feeds (for ending an app's sessions).
    pub fn connection_of(&self, stream: StreamId) -> Option<ConnectionId> {
        self.conns
            .iter()
            .find(|(_, c)| c.stream == stream)
            .map(|(id, _)| *id)
    }

    pub fn on_ready(
        &mut self,
        registry: &mut Registry,
        now: Instant,
        outs: &mut Vec<IngestOutput>,
    ) {
        loop {
            match self.socket.recv_from(&mut self.buf) {
                Ok((n, from)) => {
                    self.listener.handle_datagram(from, &self.buf[..n], now);
                    self.drain_events(registry, now, outs);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    crate::debug!("srt: recv: {e}");
                    break;
                }
            }
        }
        self.flush();
    }

    pub fn on_timeout(
        &mut self,
        registry: &mut Registry,
        now: Instant,
        outs: &mut Vec<IngestOutput>,
    ) {
        self.listener.handle_timeout(now);
        self.drain_events(registry, now, outs);
        self.flush();
    }

    /// Closes a connection from our side (its app restarted).
    pub fn close(
        &mut self,
        stream: StreamId,
        registry: &mut Registry,
        now: Instant,
        outs: &mut Vec<IngestOutput>,
    ) {
        if let Some(conn) = self.connection_of(stream) {
            let _ = self.listener.close(conn, now);
            self.end(conn, registry, outs);
            self.flush();
        }
    }

    fn end(&mut self, conn: ConnectionId, registry: &mut Registry, outs: &mut Vec<IngestOutput>) {
        if let Some(mut c) = self.conns.remove(&conn) {
            // The last PES of each track is complete only now.
            c.demuxer.flush();
            outs.push(drain_demuxer(&mut c.demuxer, c.stream, registry));
            if let Some(s) = registry.streams.end(c.stream) {
                crate::info!(
                    "stream [{}/{}/{}] ended (SRT {conn}; {} frames in)",
                    s.vhost,
                    s.app,
                    s.name,
                    s.frames_in
                );
            }
            outs.push(IngestOutput {
                ended: Some(c.stream),
                ..Default::default()
            });
        }
    }

    fn drain_events(
        &mut self,
        registry: &mut Registry,
        now: Instant,
        outs: &mut Vec<IngestOutput>,
    ) {
        while let Some(event) = self.listener.poll_event() {
            match event {
                ListenerEvent::ConnectionRequest {
                    conn,
                    peer,
                    stream_id,
                } => match self.admit(registry, stream_id.as_deref()) {
                    Ok((vhost, app, name)) => {
                        match registry.streams.start(
                            &vhost,
                            &app,
                            &name,
                            SourceType::Srt,
                            self.owner,
                            crate::clock::unix_millis_now(),
                        ) {
                            Ok(id) => {
                                if self.listener.accept(conn, now).is_ok() {
                                    crate::info!(
                                        "stream [{vhost}/{app}/{name}] started by Srt from {peer}"
                                    );
                                    self.conns.insert(
                                        conn,
                                        Connection {
                                            stream: id,
                                            demuxer: Demuxer::new(),
                                        },
                                    );
                                    outs.push(IngestOutput {
                                        started: Some(id),
                                        ..Default::default()
                                    });
                                } else {
                                    registry.streams.end(id);
                                }
                            }
                            Err(PublishError::AlreadyPublishing) => {
                                crate::warn!("srt {peer}: refused (reject code 1409): stream [{vhost}/{app}/{name}] is already being published");
                                let _ =
                                    self.listener
                                        .reject(conn, RejectReason::Predefined(409), now);
                            }
                        }
                    }
                    Err((code, why)) => {
                        crate::warn!(
                            "srt {peer}: refused (reject code {}): {why}",
                            1000 + u32::from(code)
                        );
                        let _ = self
                            .listener
                            .reject(conn, RejectReason::Predefined(code), now);
                    }
                },
                ListenerEvent::Refused {
                    peer,
                    stream_id,
                    reason,
                    detail,
                } => {
                    crate::warn!(
                        "srt {peer}: refused (reject code {}, {reason}): {detail}; streamid [{}]",
                        reason.code(),
                        stream_id.as_deref().unwrap_or("")
                    );
                }
                ListenerEvent::KeysRefreshed { conn } => {
                    crate::debug!("srt {conn}: keys refreshed");
                }
                ListenerEvent::Data { conn, payload } => {
                    let Some(c) = self.conns.get_mut(&conn) else {
                        continue;
                    };
                    c.demuxer.push(&payload);
                    let out = drain_demuxer(&mut c.demuxer, c.stream, registry);
                    if out.tracks_changed || !out.frames.is_empty() {
                        outs.push(out);
                    }
                }
                ListenerEvent::Closed { conn, reason } => {
                    crate::debug!("srt {conn}: closed: {reason}");
                    self.end(conn, registry, outs);
                }
            }
        }
    }

    /// Which stream a streamid may publish to, or the reject code and why.
    fn admit(
        &self,
        registry: &Registry,
        stream_id: Option<&str>,
    ) -> Result<(String, String, String), (u16, String)> {
        let Some(id) = stream_id else {
            return Err((400, "no streamid; use {host}/{app}/{stream}".into()));
        };
        match stream_id_mode(id).as_deref() {
            None | Some("publish") => {}
            Some("request") => {
                // SRT_REJX_BAD_MODE: libsrt callers print the code.
                return Err((
                    405,
                    format!("streamid [{id}] asks to play (m=request): playback over SRT is not served yet"),
                ));
            }
            Some(other) => {
                return Err((
                    405,
                    format!("streamid [{id}]: unknown mode [{other}]; kiln takes m=publish"),
                ))
            }
        }
        let Some((host, app, stream)) = parse_stream_id(id) else {
            return Err((
                400,
                format!("streamid [{id}] is not {{host}}/{{app}}/{{stream}}"),
            ));
        };
        let vhost = registry.vhost_for_stream_id(host.as_deref()).ok_or((
            404,
            format!("no virtual host for [{}]", host.unwrap_or_default()),
        ))?;
        let vname = vhost.spec.name.clone();
        let spec = vhost.app(&app).ok_or((
            404,
            format!("Could not find the application: [{vname}/{app}]"),
        ))?;
        if spec.providers.srt.is_none() {
            return Err((
                403,
                format!("SRT is not enabled for the application: [{vname}/{app}]"),
            ));
        }
        Ok((vname, app, stream))
    }

    fn flush(&mut self) {
        if let Some((to, data)) = self.blocked.take() {
            match self.socket.send_to(&data, to) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.blocked = Some((to, data));
                    return;
                }
                _ => {}
            }
        }
        while let Some(to) = self.listener.poll_transmit(&mut self.out) {
            match self.socket.send_to(&self.out, to) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.blocked = Some((to, self.out.clone()));
                    return;
                }
                Err(e) => crate::debug!("srt: send to {to}: {e}"),
            }
        }
    }
}

impl Endpoint for SrtIngest {
    fn ready(&mut self, cx: &mut Cx<'_>, _peer_closed: bool) {
        self.on_ready(&mut cx.api.registry, cx.now, &mut cx.out.ingest);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        self.on_timeout(&mut cx.api.registry, cx.now, &mut cx.out.ingest);
    }

    fn deadline(&self) -> Option<Instant> {
        SrtIngest::deadline(self)
    }

    fn is_closed(&self) -> bool {
        false
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        let _ = poll.deregister(&mut self.socket);
    }

    /// The listener's state is not known to be sound: nothing safe to
    /// end but the turn (the socket serves on).
    fn abort(&mut self, _cx: &mut Cx<'_>) {}

    fn end_stream(&mut self, stream: StreamId, cx: &mut Cx<'_>) {
        self.close(stream, &mut cx.api.registry, cx.now, &mut cx.out.ingest);
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_stream_id, stream_id_mode};

    #[test]
    fn stream_id_forms() {
        let t = |h: Option<&str>, a: &str, s: &str| {
            Some((h.map(String::from), a.to_string(), s.to_string()))
        };
        assert_eq!(
            parse_stream_id("default/app/cam"),
            t(Some("default"), "app", "cam")
        );
        assert_eq!(parse_stream_id("app/cam"), t(None, "app", "cam"));
        assert_eq!(
            parse_stream_id("srt://live.example.com:9999/app/cam"),
            t(Some("live.example.com"), "app", "cam")
        );
        assert_eq!(
            parse_stream_id("srt%3A%2F%2F127.0.0.1%3A9999%2Fapp%2Fcam"),
            t(Some("127.0.0.1"), "app", "cam")
        );
        assert_eq!(
            parse_stream_id("#!::h=live.example.com,r=app/cam,m=publish"),
            t(Some("live.example.com"), "app", "cam")
        );
        assert_eq!(parse_stream_id("#!::r=app/cam,m=request"), None);
        let mode = |id: &str| stream_id_mode(id);
        assert_eq!(mode("#!::r=app/cam,m=request").as_deref(), Some("request"));
        assert_eq!(
            mode("%23!::r=app/cam,m=request").as_deref(),
            Some("request")
        );
        assert_eq!(
            mode("srt://h:1/app/cam?mode=request").as_deref(),
            Some("request")
        );
        assert_eq!(
            parse_stream_id("%23!::r=app/cam,m=publish"),
            t(None, "app", "cam")
        );
        assert_eq!(stream_id_mode("#!::r=app/cam"), None);
        assert_eq!(stream_id_mode("default/app/cam"), None);
        assert_eq!(parse_stream_id("justone"), None);
        assert_eq!(parse_stream_id(""), None);
    }
}
