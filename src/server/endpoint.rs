//! The one shape of everything the loop drives: listeners, API
//! connections, ingest sessions and ports, push I/O. Each kind implements
//! [`Endpoint`]; the loop calls `ready` on socket readiness and `timeout`
//! when `deadline` has passed, hands every call the same context ([`Cx`])
//! and reads every result from the same [`Output`]. A new kind of endpoint
//! is one more impl, not one more arm in the loop.

use super::players::Players;
use super::resolver::Resolver;
use super::Service;
use crate::admission::manager::{AccessManager, CheckId, Verdict};
use crate::api::Api;
use crate::state::streams::{IngestOutput, StreamId};
use mio::net::TcpStream;
use mio::Token;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// What every endpoint call gets.
pub(crate) struct Cx<'a> {
    pub now: Instant,
    /// The endpoint's own token (its socket's registration).
    pub token: Token,
    pub poll: &'a mio::Registry,
    /// The API, the registry and every feature's state.
    pub api: &'a mut Api,
    pub access: &'a mut AccessManager,
    pub players: &'a mut Players,
    pub resolver: &'a Resolver,
    pub tls_client: &'a Arc<rustls::ClientConfig>,
    pub out: &'a mut Output,
}

/// A connection a listener accepted.
pub(crate) struct Accepted {
    pub service: Service,
    pub stream: TcpStream,
    pub peer: SocketAddr,
    pub tls: Option<rustls::ServerConnection>,
}

/// What endpoint calls produced for the rest of the server.
#[derive(Default)]
pub(crate) struct Output {
    /// What ingests did to their streams, in order.
    pub ingest: Vec<IngestOutput>,
    pub accepted: Vec<Accepted>,
    /// The listener that ran out of descriptors (its token).
    pub descriptors_short: Option<Token>,
    /// Streams a new publisher took over: (the old publisher's token, the
    /// stream), for the loop to tell the old one to let go.
    pub taken_over: Vec<(u64, StreamId)>,
}

impl Output {
    pub(crate) fn is_empty(&self) -> bool {
        self.ingest.is_empty()
            && self.accepted.is_empty()
            && self.descriptors_short.is_none()
            && self.taken_over.is_empty()
    }

    /// Adds `other`'s after this one's.
    pub(crate) fn append(&mut self, mut other: Output) {
        self.ingest.append(&mut other.ingest);
        self.accepted.append(&mut other.accepted);
        self.descriptors_short = self.descriptors_short.or(other.descriptors_short);
        self.taken_over.append(&mut other.taken_over);
    }
}

pub(crate) trait Endpoint {
    /// The socket is ready (either direction; both are attempted).
    /// `peer_closed`: the poller saw the peer's FIN or an error.
    fn ready(&mut self, cx: &mut Cx<'_>, peer_closed: bool);

    /// [`deadline`](Self::deadline) has passed.
    fn timeout(&mut self, cx: &mut Cx<'_>);

    /// When `timeout` is due, if ever.
    fn deadline(&self) -> Option<Instant>;

    /// The endpoint is finished: the loop drops it (closing its socket).
    fn is_closed(&self) -> bool;

    /// Takes the socket out of the poller before the endpoint is dropped.
    fn deregister(&mut self, poll: &mio::Registry);

    /// A panic was contained in one of its calls: end what it serves (a
    /// connection closes, its stream ends; a push session fails).
    fn abort(&mut self, cx: &mut Cx<'_>);

    /// Write what its core has for the socket (a push session woken by
    /// new frames). Most endpoints write in `ready` and have nothing here.
    fn flush(&mut self, _cx: &mut Cx<'_>) {}

    /// Prefetch the memory `flush` reads: the loop calls it for the next of
    /// many endpoints it flushes in a row (push and viewer fan-out).
    fn prefetch(&self) {}

    /// A name this endpoint asked the resolver for is resolved.
    fn resolved(&mut self, _result: Result<Vec<SocketAddr>, String>, _cx: &mut Cx<'_>) {}

    /// The decision on an admission this endpoint waited for
    /// ([`Verdict::Pending`]). One it no longer waits for must close what
    /// was allowed, as this default does.
    fn admitted(&mut self, _check: CheckId, verdict: Verdict, cx: &mut Cx<'_>) {
        if let Verdict::Allowed(admit) = verdict {
            if let Some(a) = admit.admission {
                cx.access.close(a, crate::clock::Now::read(cx.now));
            }
        }
    }

    /// What a stream this endpoint plays did (frames, new tracks, its end).
    fn on_media(&mut self, _out: &IngestOutput, _cx: &mut Cx<'_>) {}

    /// The pull an API request of this connection waits for is live or
    /// failed.
    fn pull_answered(&mut self, _answer: crate::pull::table::PullAnswer, _cx: &mut Cx<'_>) {}

    /// The WebRTC session `key` this endpoint signalled for has ended.
    #[cfg(feature = "webrtc")]
    fn webrtc_ended(&mut self, _key: &str, _cx: &mut Cx<'_>) {}

    /// The WebRTC session `key` this endpoint signalled for switched to
    /// the rendition its viewer chose.
    #[cfg(feature = "webrtc")]
    fn webrtc_switched(&mut self, _key: &str, _cx: &mut Cx<'_>) {}

    /// End `stream` if this endpoint publishes it (its app restarted).
    fn end_stream(&mut self, _stream: StreamId, _cx: &mut Cx<'_>) {}

    /// The sessions API ends this endpoint's player `conn` of `stream`
    /// (an RTMP connection; one of an SRT port's sockets).
    fn end_session(&mut self, _stream: StreamId, _conn: u64, _cx: &mut Cx<'_>) {}

    /// Another publisher took `stream` over from this endpoint: stop
    /// publishing it and close, without ending the stream.
    fn yield_stream(&mut self, _stream: StreamId, _cx: &mut Cx<'_>) {}

    /// When this connection was accepted, while its peer has not yet
    /// completed a request (API, viewer) or a publish/play (RTMP): the
    /// first to close when descriptors run short.
    fn unproven_since(&self) -> Option<Instant> {
        None
    }
}
