//! RTMP and RTMPS ingest: one publisher connection, the glue between the
//! transport (TCP or TLS with each vhost's certificate by SNI) and the
//! sans-IO [`ServerSession`]. The virtual host is the first whose
//! `host.names` match the tcUrl's host; the application must exist there
//! with the RTMP provider on, and the stream name must be free, or
//! `publish` is refused with a status the client prints.

use super::budget::BudgetShare;
use super::endpoint::{Cx, Endpoint};
use super::transport::{ReadEnd, Transport};
use super::Service;
use crate::rtmp::server::{ServerConfig, ServerEvent, ServerSession};
use crate::state::streams::{IngestOutput, PublishError, SourceType, StreamId};
use crate::state::Registry;
use mio::net::TcpStream;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// A publisher that sends nothing for this long is dropped.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// The handshake and `publish` must be done within this.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) struct RtmpIngest {
    transport: Transport,
    pub peer: SocketAddr,
    session: ServerSession,
    source: SourceType,
    /// The loop's token, as the stream's publisher id.
    owner: u64,
    /// Resolved at `connect`: (vhost, app name as asked).
    target: Option<(Option<String>, String)>,
    pub stream: Option<StreamId>,
    /// When the handshake and first `publish` must be done by; `None` once
    /// the connection has published (after an unpublish only the idle
    /// timeout applies, so the client can close on its own).
    setup_deadline: Option<Instant>,
    last_input: Instant,
    closed: bool,
    /// Publish was refused: close once the refusal has been sent.
    refused: bool,
    /// What this connection's buffers hold of the server-wide budget.
    budget: BudgetShare,
}

/// The tcUrl's host: `rtmp://host[:port]/app...` -> `host`.
pub(crate) fn tc_url_host(tc_url: &str) -> &str {
    let rest = tc_url.split_once("://").map_or(tc_url, |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    crate::api::access::host_without_port(authority)
}

impl RtmpIngest {
    pub(crate) fn new(
        stream: TcpStream,
        peer: SocketAddr,
        tls: Option<rustls::ServerConnection>,
        owner: u64,
        budget: BudgetShare,
        now: Instant,
    ) -> Self {
        let source = if tls.is_some() {
            SourceType::Rtmps
        } else {
            SourceType::Rtmp
        };
        RtmpIngest {
            transport: Transport::new(stream, tls),
            peer,
            session: ServerSession::new(ServerConfig::default()),
            source,
            owner,
            target: None,
            stream: None,
            setup_deadline: Some(now + SETUP_TIMEOUT),
            last_input: now,
            closed: false,
            refused: false,
            budget,
        }
    }

    pub(crate) fn deadline(&self) -> Instant {
        let idle = self.last_input + IDLE_TIMEOUT;
        self.setup_deadline.map_or(idle, |setup| setup.min(idle))
    }

    /// Reads what arrived, acts on the session's events, writes replies.
    pub(crate) fn on_ready(
        &mut self,
        registry: &mut Registry,
        now: Instant,
        out: &mut IngestOutput,
    ) {
        if self.closed {
            return;
        }
        let session = &mut self.session;
        let mut failure = None;
        let result = self
            .transport
            .read(true, |data| match session.handle_input(data) {
                Ok(()) => true,
                Err(e) => {
                    failure = Some(e);
                    false
                }
            });
        match result {
            Ok((got, end)) => {
                if got {
                    self.last_input = now;
                }
                if end == ReadEnd::Closed {
                    self.closed = true;
                }
            }
            Err(e) => {
                crate::debug!("rtmp {}: {e}", self.peer);
                self.closed = true;
            }
        }
        if let Some(e) = failure {
            crate::info!("rtmp {}: protocol error: {e}; closing", self.peer);
            self.closed = true;
        }
        if self.budget.update(self.session.buffered()).is_err() {
            crate::warn!(
                "rtmp {}: the server-wide ingest buffer budget ({} MiB) is used up; closing",
                self.peer,
                super::budget::DEFAULT_INGEST_BUDGET >> 20
            );
            self.closed = true;
        }
        self.handle_events(registry, now, out);
        self.flush();
        if self.session.is_closed() {
            self.closed = true;
        }
        if self.refused && !self.closed && self.session.pending_output().is_empty() {
            // The client has its answer; what it sends now would be dropped.
            self.transport.close_write();
            self.closed = true;
        }
        if self.closed {
            self.end(registry, out);
        }
    }

    /// The deadline passed (checked due by the loop).
    pub(crate) fn on_deadline(&mut self, registry: &mut Registry, out: &mut IngestOutput) {
        crate::info!(
            "rtmp {}: {}; closing",
            self.peer,
            if self.setup_deadline.is_some() {
                "no publish within 10 s"
            } else {
                "no data for 30 s"
            }
        );
        self.close(registry, out);
    }

    /// Ends the session from our side (app restarted, server stopping).
    pub(crate) fn close(&mut self, registry: &mut Registry, out: &mut IngestOutput) {
        self.closed = true;
        self.transport.close_write();
        self.end(registry, out);
    }

    fn end(&mut self, registry: &mut Registry, out: &mut IngestOutput) {
        if let Some(id) = self.stream.take() {
            if let Some(s) = registry.streams.end(id) {
                crate::info!(
                    "stream [{}/{}/{}] ended ({} frames in)",
                    s.vhost,
                    s.app,
                    s.name,
                    s.frames_in
                );
            }
            out.ended = Some(id);
        }
    }

    fn flush(&mut self) {
        loop {
            let pending = self.session.pending_output();
            if pending.is_empty() && !self.transport.has_pending_tls() {
                return;
            }
            match self.transport.write(pending) {
                Ok(0) => return,
                Ok(n) => self.session.consume_output(n),
                Err(e) => {
                    crate::debug!("rtmp {}: write: {e}", self.peer);
                    self.closed = true;
                    return;
                }
            }
        }
    }

    fn handle_events(&mut self, registry: &mut Registry, now: Instant, out: &mut IngestOutput) {
        while let Some(event) = self.session.poll_event() {
            match event {
                ServerEvent::Connect { app, tc_url, .. } => {
                    let host = tc_url_host(&tc_url);
                    let vhost = registry.vhost_serving(host).map(|v| v.spec.name.clone());
                    crate::debug!(
                        "rtmp {}: connect app [{app}] tcUrl [{tc_url}] -> vhost [{}]",
                        self.peer,
                        vhost.as_deref().unwrap_or("none matches")
                    );
                    self.target = Some((vhost, app));
                    self.session.accept_connect();
                }
                ServerEvent::Publish { stream_name, .. } => {
                    self.publish(registry, &stream_name, now, out);
                    // Either the stream started or the publish was refused.
                    self.refused = self.stream.is_none();
                }
                ServerEvent::TracksChanged(tracks) => {
                    if let Some(id) = self.stream {
                        registry.streams.set_tracks(id, tracks);
                        out.tracks_changed = true;
                        out.stream = Some(id);
                    }
                }
                ServerEvent::Frame(frame) => {
                    if let Some(id) = self.stream {
                        registry.streams.on_frame(id, &frame);
                        out.frames.push(frame);
                        out.stream = Some(id);
                    }
                }
                ServerEvent::Metadata(_) => {}
                ServerEvent::Unpublish => self.end(registry, out),
                ServerEvent::PlayRefused { stream_name } => {
                    let app = self.target.as_ref().map_or("", |(_, a)| a.as_str());
                    crate::warn!(
                        "rtmp {}: play [{app}/{stream_name}] refused: playback over RTMP is not served yet",
                        self.peer
                    );
                }
            }
        }
    }

    fn publish(
        &mut self,
        registry: &mut Registry,
        name: &str,
        now: Instant,
        out: &mut IngestOutput,
    ) {
        // RTMP stream names may carry a query (`stream?key=...`); it is not
        // part of the name.
        let name = name.split('?').next().unwrap_or("").to_string();
        let Some((vhost, app)) = self.target.clone() else {
            self.session.reject_publish("connect first");
            return;
        };
        let Some(vhost) = vhost else {
            self.session
                .reject_publish("No virtual host serves this tcUrl host");
            crate::warn!(
                "rtmp {}: publish refused: no virtual host for the tcUrl",
                self.peer
            );
            return;
        };
        let rtmp_on = registry
            .app(&vhost, &app)
            .map(|a| a.providers.rtmp.is_some());
        match rtmp_on {
            None => {
                let why = format!("Could not find the application: [{vhost}/{app}]");
                crate::warn!("rtmp {}: publish refused: {why}", self.peer);
                self.session.reject_publish(&why);
                return;
            }
            Some(false) => {
                let why = format!("RTMP is not enabled for the application: [{vhost}/{app}]");
                crate::warn!("rtmp {}: publish refused: {why}", self.peer);
                self.session.reject_publish(&why);
                return;
            }
            Some(true) => {}
        }
        if name.is_empty() {
            self.session.reject_publish("The stream name is empty");
            return;
        }
        match registry.streams.start(
            &vhost,
            &app,
            &name,
            self.source,
            self.owner,
            crate::clock::unix_millis_now(),
        ) {
            Ok(id) => {
                self.stream = Some(id);
                self.setup_deadline = None;
                self.last_input = now;
                self.session.accept_publish();
                out.started = Some(id);
                crate::info!(
                    "stream [{vhost}/{app}/{name}] started by {} from {}",
                    self.source.api_name(),
                    self.peer
                );
            }
            Err(PublishError::AlreadyPublishing) => {
                let why = format!("The stream is already being published: [{vhost}/{app}/{name}]");
                crate::warn!("rtmp {}: publish refused: {why}", self.peer);
                self.session
                    .reject_publish_with_code("NetStream.Publish.BadName", &why);
            }
        }
    }
}

impl Endpoint for RtmpIngest {
    fn ready(&mut self, cx: &mut Cx<'_>, _peer_closed: bool) {
        let mut out = IngestOutput::default();
        self.on_ready(&mut cx.api.registry, cx.now, &mut out);
        cx.out.ingest.push(out);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        let mut out = IngestOutput::default();
        self.on_deadline(&mut cx.api.registry, &mut out);
        cx.out.ingest.push(out);
    }

    fn deadline(&self) -> Option<Instant> {
        Some(RtmpIngest::deadline(self))
    }

    fn is_closed(&self) -> bool {
        self.closed
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        let _ = poll.deregister(self.transport.stream_mut());
    }

    fn abort(&mut self, cx: &mut Cx<'_>) {
        let mut out = IngestOutput::default();
        self.close(&mut cx.api.registry, &mut out);
        cx.out.ingest.push(out);
    }

    fn end_stream(&mut self, stream: StreamId, cx: &mut Cx<'_>) {
        if self.stream == Some(stream) {
            self.abort(cx);
        }
    }

    fn service(&self) -> Option<Service> {
        Some(Service::Rtmp)
    }
}

#[cfg(test)]
mod tests {
    use super::tc_url_host;

    #[test]
    fn tc_url_hosts() {
        assert_eq!(tc_url_host("rtmp://127.0.0.1:1935/app"), "127.0.0.1");
        assert_eq!(
            tc_url_host("rtmps://live.example.com/app/x"),
            "live.example.com"
        );
        assert_eq!(tc_url_host("rtmp://[::1]:1935/app"), "::1");
        assert_eq!(tc_url_host("garbage"), "garbage");
    }
}
