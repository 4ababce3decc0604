//! What the loop owns apart from its features: the poller, the endpoint
//! table and its timers, the API and every feature's state (`api`), and the
//! services endpoints share (resolver, TLS client, file writer, connection
//! caps). Features are driven with it ([`super::feature::Feature`]).
//!
//! An endpoint call's output is queued ([`Core::call`]); the loop takes
//! the queue after each event, timer or feature step and hands it to the
//! features (`Server::settle`), so no call re-enters another.

use super::budget;
use super::conns;
use super::endpoint::{Accepted, Cx, Endpoint, Output};
use super::file_writer::FileWriter;
use super::heap;
use super::players::Players;
use super::resolver::Resolver;
use super::rtmp_ingest::RtmpIngest;
use super::timers::Timers;
use super::tokens::TokenTable;
use super::viewer_conn::ViewerConn;
use super::{api_conn::ApiConn, Service};
use crate::admission::manager::AccessManager;
use crate::api::Api;
use crate::config::ApiLimits;
use crate::files::{FileEvent, FileOp};
use mio::{Interest, Poll, Token};
use std::sync::Arc;
use std::time::Instant;

pub(crate) struct Entry {
    pub(crate) endpoint: Box<dyn Endpoint>,
    /// The deadline a timer is armed for (at most one live timer each).
    pub(crate) armed: Option<Instant>,
    /// The connection cap it counts against and its peer's address.
    pub(crate) counted: Option<(Service, std::net::IpAddr)>,
}

impl Entry {
    pub(crate) fn new(endpoint: Box<dyn Endpoint>) -> Self {
        Entry {
            endpoint,
            armed: None,
            counted: None,
        }
    }
}

pub(crate) struct Core {
    pub(crate) poll: Poll,
    pub(crate) endpoints: TokenTable<Entry>,
    pub(crate) timers: Timers,
    pub(crate) api: Api,
    pub(crate) access: AccessManager,
    pub(crate) players: Players,
    pub(crate) files: FileWriter,
    pub(crate) resolver: Resolver,
    pub(crate) tls_client: Arc<rustls::ClientConfig>,
    pub(crate) limits: ApiLimits,
    pub(crate) conns: conns::ConnCaps,
    /// Listeners to resume at the end of this turn (see `reap_unproven`).
    pub(crate) accept_again: Vec<Token>,
    /// Bytes held in ingest buffers, all connections together.
    pub(crate) ingest_budget: budget::IngestBudget,
    pub(crate) heap: heap::HeapTrim,
    /// This server's SRT port (what origin maps point edges at).
    pub(crate) srt_port: Option<u16>,
    /// What endpoint calls produced, for the features (see the module).
    pub(crate) out: Output,
    /// Wakes the poll from a worker thread (features' workers get a clone;
    /// the loop then calls every feature's `on_wake`).
    #[cfg_attr(not(feature = "webrtc"), allow(dead_code))]
    pub(crate) waker: Arc<mio::Waker>,
}

impl Core {
    /// Arms the endpoint's timer for `deadline` unless one is armed earlier.
    pub(crate) fn arm(&mut self, token: Token, deadline: Instant) {
        if let Some(entry) = self.endpoints.get_mut(token) {
            if entry.armed.is_none_or(|at| deadline < at) {
                entry.armed = Some(deadline);
                self.timers.schedule(deadline, token);
            }
        }
    }

    /// Calls an endpoint; what it produced is queued for the features.
    pub(crate) fn call(
        &mut self,
        token: Token,
        now: Instant,
        f: impl FnOnce(&mut dyn Endpoint, &mut Cx<'_>),
    ) {
        let out = self.guarded(token, now, f);
        self.out.append(out);
    }

    /// Calls an endpoint with a panic contained to it, then drops it if it
    /// is finished or arms its deadline; what it produced.
    ///
    /// Every parser and state machine is fuzzed, so a panic is a bug; if one
    /// happens anyway it must not take every stream and the API down with
    /// the process. It costs the endpoint it happened on: a connection is
    /// closed (its stream ended), a push session fails with an error (the
    /// task retries), a shared port ends its current stream.
    pub(crate) fn guarded(
        &mut self,
        token: Token,
        now: Instant,
        f: impl FnOnce(&mut dyn Endpoint, &mut Cx<'_>),
    ) -> Output {
        let mut out = Output::default();
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.with_endpoint(token, now, &mut out, f)
        }));
        if let Err(payload) = run {
            let what = panic_message(payload.as_ref());
            crate::error!("internal error (a bug; please report it): {what}; closing the endpoint it happened on");
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                self.with_endpoint(token, now, &mut out, |ep, cx| ep.abort(cx))
            }));
        }
        match self
            .endpoints
            .get(token)
            .map(|e| (e.endpoint.is_closed(), e.endpoint.deadline()))
        {
            Some((true, _)) => self.remove_endpoint(token),
            Some((false, Some(deadline))) => self.arm(token, deadline),
            _ => {}
        }
        out
    }

    fn with_endpoint(
        &mut self,
        token: Token,
        now: Instant,
        out: &mut Output,
        f: impl FnOnce(&mut dyn Endpoint, &mut Cx<'_>),
    ) {
        let Core {
            poll,
            endpoints,
            api,
            access,
            players,
            resolver,
            tls_client,
            ..
        } = self;
        let Some(entry) = endpoints.get_mut(token) else {
            return;
        };
        let mut cx = Cx {
            now,
            token,
            poll: poll.registry(),
            api,
            access,
            players,
            resolver,
            tls_client,
            out,
        };
        f(entry.endpoint.as_mut(), &mut cx);
    }

    /// Makes a new endpoint (push, pull, webhook or Redis I/O) with the
    /// context every call gets, and keeps it unless it finished at once;
    /// its token. Such endpoints produce nothing for the rest of the server.
    pub(crate) fn add_endpoint(
        &mut self,
        now: Instant,
        make: impl FnOnce(&mut Cx<'_>) -> Box<dyn Endpoint>,
    ) -> Option<Token> {
        let mut out = Output::default();
        let endpoint = make(&mut Cx {
            now,
            token: self.endpoints.vacant_token(),
            poll: self.poll.registry(),
            api: &mut self.api,
            access: &mut self.access,
            players: &mut self.players,
            resolver: &self.resolver,
            tls_client: &self.tls_client,
            out: &mut out,
        });
        if endpoint.is_closed() {
            return None;
        }
        let deadline = endpoint.deadline();
        let token = self.endpoints.insert(Entry::new(endpoint));
        if let Some(d) = deadline {
            self.arm(token, d);
        }
        Some(token)
    }

    /// Hands file operations to the writer thread; those it cannot take
    /// come back as failures, for their owner to hear at once.
    pub(crate) fn submit_files(&mut self, ops: Vec<FileOp>) -> Vec<FileEvent> {
        ops.into_iter()
            .filter_map(|op| self.files.submit(op))
            .collect()
    }

    /// Drops an endpoint (closing its socket).
    pub(crate) fn remove_endpoint(&mut self, token: Token) {
        let Some(mut entry) = self.endpoints.remove(token) else {
            return;
        };
        entry.endpoint.deregister(self.poll.registry());
        if let Some((service, ip)) = entry.counted {
            self.conns.release(service, ip);
        }
    }

    /// Near the descriptor limit: closes the oldest connections that have
    /// not completed a request, publish or play yet (any port).
    /// `short`: `accept` already failed for want of descriptors. Returns
    /// how many it closed.
    pub(crate) fn reap_unproven(&mut self, now: Instant, short: bool) -> usize {
        let n = self.conns.to_reap(self.endpoints.len(), short);
        if n == 0 {
            return 0;
        }
        let mut idle: Vec<(Instant, Token)> = self
            .endpoints
            .iter()
            .filter_map(|(t, e)| e.endpoint.unproven_since().map(|at| (at, t)))
            .collect();
        if idle.is_empty() {
            return 0;
        }
        let n = n.min(idle.len());
        idle.select_nth_unstable(n - 1);
        crate::log_throttled!(
            crate::log::Level::Warn,
            "descriptors-low",
            crate::log::NO_ADDRESS,
            "{} connections and sockets open, near the open-files limit: closing the {n} oldest connections that never completed a request",
            self.endpoints.len()
        );
        for &(_, token) in &idle[..n] {
            // A closed endpoint is dropped by the call.
            self.call(token, now, |ep, cx| ep.abort(cx));
        }
        n
    }

    /// Lets listeners that ran short of descriptors accept again now that
    /// some were freed; bounded per turn (a listener that is still short
    /// rests until its pause ends).
    pub(crate) fn resume_accepting(&mut self, now: Instant) {
        for _ in 0..64 {
            let Some(listener) = self.accept_again.pop() else {
                return;
            };
            self.call(listener, now, |ep, cx| ep.timeout(cx));
        }
        self.accept_again.clear();
    }

    /// The first of two prefetch steps for an endpoint flushed soon in a
    /// run of flushes (fan-out): its entry, at least two turns ahead.
    pub(crate) fn prefetch_entry(&self, token: Token) {
        if let Some(e) = self.endpoints.get(token) {
            crate::sys::prefetch(e);
        }
    }

    /// The second step, one turn ahead: what the entry (now in cache)
    /// points at.
    pub(crate) fn prefetch_endpoint(&self, token: Token) {
        if let Some(e) = self.endpoints.get(token) {
            e.endpoint.prefetch();
        }
    }

    /// Flushes many endpoints in a row (viewers answered): each write
    /// evicts the next ones' memory, so each is prefetched ahead.
    pub(crate) fn flush_all(&mut self, tokens: &[usize], now: Instant) {
        for (k, &io) in tokens.iter().enumerate() {
            if let Some(&io) = tokens.get(k + 2) {
                self.prefetch_entry(Token(io));
            }
            if let Some(&io) = tokens.get(k + 1) {
                self.prefetch_endpoint(Token(io));
            }
            self.call(Token(io), now, |ep, cx| ep.flush(cx));
        }
    }

    pub(crate) fn add_conn(&mut self, accepted: Accepted, now: Instant) {
        let Accepted {
            service,
            mut stream,
            peer,
            tls,
        } = accepted;
        self.reap_unproven(now, false);
        if self.conns.admit(service, peer.ip()).is_err() {
            // Over a cap: accepted and closed at once (logged by the caps).
            return;
        }
        let _ = stream.set_nodelay(true);
        let token = self.endpoints.vacant_token();
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            crate::warn!("cannot register a connection from {peer}: {e}");
            self.conns.release(service, peer.ip());
            return;
        }
        let endpoint: Box<dyn Endpoint> = match service {
            Service::Api => Box::new(ApiConn::new(
                stream,
                peer,
                tls,
                self.limits.clone(),
                token.0,
                now,
            )),
            Service::Rtmp => {
                crate::debug!("rtmp connection from {peer}");
                Box::new(RtmpIngest::new(
                    stream,
                    peer,
                    tls,
                    token.0 as u64,
                    self.ingest_budget.share(),
                    now,
                ))
            }
            Service::Viewer => Box::new(ViewerConn::new(stream, peer, tls, now)),
            #[cfg(feature = "webrtc")]
            Service::WebRtcRelay => {
                Box::new(super::webrtc_relay::RelayConn::new(stream, peer, now))
            }
            #[cfg(not(feature = "webrtc"))]
            Service::WebRtcRelay => return,
        };
        let mut entry = Entry::new(endpoint);
        entry.counted = Some((service, peer.ip()));
        self.endpoints.insert(entry);
        // Data may already be waiting; try at once (a FIN, if any, is
        // reported by the registration's first event).
        self.call(token, now, |ep, cx| ep.ready(cx, false));
    }
}

/// The text of a panic's payload (`panic!` with a literal or a format).
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(no message)"
    }
}

#[cfg(test)]
mod tests {
    use super::panic_message;

    #[test]
    fn panic_messages_are_recovered_from_both_payload_kinds() {
        let literal = std::panic::catch_unwind(|| panic!("plain")).unwrap_err();
        let n = 7;
        let formatted = std::panic::catch_unwind(|| panic!("bad index {n}")).unwrap_err();
        let other = std::panic::catch_unwind(|| std::panic::panic_any(5u8)).unwrap_err();
        assert_eq!(panic_message(literal.as_ref()), "plain");
        assert_eq!(panic_message(formatted.as_ref()), "bad index 7");
        assert_eq!(panic_message(other.as_ref()), "(no message)");
    }
}
