//! The poll loop: one `mio::Poll` on one thread owns every socket. Endpoints
//! (listeners, API connections, ingest sessions, push sessions) live in a
//! generation-checked [`TokenTable`]; deadlines live in [`Timers`], and the
//! poll sleeps until the nearest one. Sockets are edge-triggered: each
//! endpoint reads and writes until `WouldBlock`, and is registered once for
//! the directions it needs.
//!
//! Media flows ingest -> registry (tracks, GOP) -> the stream's push
//! sessions, each with its own bounded queue. Push tasks advance here: a
//! task whose stream exists gets a session; a session's reports move the
//! task through `connecting`, `pushing`, `ready` and `error`; failed tasks
//! retry on their back-off timer.
//!
//! SIGINT and SIGTERM end the loop: endpoints are dropped (closed) and `run`
//! returns. The state file needs no flush: every change was written before
//! it was answered.

pub mod api_conn;
pub mod budget;
pub mod push_out;
pub mod resolver;
pub mod rtmp_ingest;
pub mod srt_ingest;
pub mod timers;
pub mod tokens;
pub mod transport;
pub mod ts_ingest;

use crate::api::{output_tracks, Api, Effect};
use crate::config::ApiLimits;
use crate::media::TrackId;
use crate::state::push::{self, PushState};
use crate::state::streams::StreamId;
use api_conn::{ApiConn, Status};
use mio::net::{TcpListener, TcpStream, UdpSocket};
use mio::{Events, Interest, Poll, Token, Waker};
use push_out::{PushOut, Report, StartMedia, TaskKey};
use resolver::Resolver;
use rtmp_ingest::{IngestOutput, RtmpIngest};
use srt_ingest::SrtIngest;
use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timers::Timers;
use tokens::TokenTable;
use ts_ingest::TsPort;

const SIGNAL_TOKEN: Token = Token(usize::MAX);
const WAKER_TOKEN: Token = Token(usize::MAX - 1);
/// The timer that retries failed push tasks.
const RETRY_TOKEN: Token = Token(usize::MAX - 2);
/// How long a listener rests when the process is out of file descriptors.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);
/// Most RTMP(S) connections at once; beyond, accept and close at once (a
/// flood must not take the descriptors the API and pushes need).
const MAX_RTMP_CONNECTIONS: usize = 4096;

/// What a TCP listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Api,
    Rtmp,
}

/// A TCP listener to open: what it serves, where, and for TLS ports the
/// rustls config.
pub struct ListenerSpec {
    pub service: Service,
    pub addr: SocketAddr,
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// Everything the server listens on.
#[derive(Default)]
pub struct Listen {
    pub tcp: Vec<ListenerSpec>,
    /// MPEG-TS over UDP: one address per port.
    pub mpegts: Vec<SocketAddr>,
    /// How long an MPEG-TS port may be quiet before its stream ends.
    pub mpegts_quiet: Duration,
    /// The SRT listener's address.
    pub srt: Option<SocketAddr>,
    /// Its passphrase, when callers must encrypt.
    pub srt_crypto: Option<crate::srt::crypto::CryptoConfig>,
}

enum Endpoint {
    Listener(Listener),
    ApiConn(Box<ApiConn>),
    RtmpConn(Box<RtmpIngest>),
    TsPort(Box<TsPort>),
    Srt(Box<SrtIngest>),
    Push(Box<PushOut>),
}

struct Entry {
    endpoint: Endpoint,
    /// The deadline a timer is armed for (at most one live timer each).
    armed: Option<Instant>,
}

struct Listener {
    service: Service,
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    /// Accepting is paused until then (out of descriptors).
    paused_until: Option<Instant>,
}

pub struct Server {
    poll: Poll,
    endpoints: TokenTable<Entry>,
    timers: Timers,
    api: Api,
    limits: ApiLimits,
    api_conns: usize,
    rtmp_conns: usize,
    /// Bytes held in ingest buffers, all connections together.
    ingest_budget: budget::IngestBudget,
    shutdown: bool,
    resolver: Resolver,
    tls_client: Arc<rustls::ClientConfig>,
    /// Task -> its session.
    sessions: HashMap<TaskKey, Token>,
    /// Stream -> the push sessions fed by it.
    subscribers: HashMap<StreamId, Vec<Token>>,
    retry_armed: Option<Instant>,
    jitter: u32,
}

impl Server {
    /// Binds the listeners. Nothing is served until [`Server::run`].
    pub fn bind(api: Api, listen: Listen, limits: ApiLimits) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER_TOKEN)?);
        let mut endpoints = TokenTable::default();
        for spec in listen.tcp {
            let mut listener = bind_listener(spec.addr)
                .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", spec.addr)))?;
            let token = endpoints.vacant_token();
            poll.registry()
                .register(&mut listener, token, Interest::READABLE)?;
            let what = match (spec.service, spec.tls.is_some()) {
                (Service::Api, false) => "API server listening on http",
                (Service::Api, true) => "API server listening on https",
                (Service::Rtmp, false) => "RTMP ingest listening on rtmp",
                (Service::Rtmp, true) => "RTMPS ingest listening on rtmps",
            };
            crate::info!("{what}://{}", listener.local_addr()?);
            endpoints.insert(Entry {
                endpoint: Endpoint::Listener(Listener {
                    service: spec.service,
                    listener,
                    tls: spec.tls,
                    paused_until: None,
                }),
                armed: None,
            });
        }
        for addr in listen.mpegts {
            let mut socket =
                bind_udp(addr).map_err(|e| io::Error::new(e.kind(), format!("{addr}/udp: {e}")))?;
            let token = endpoints.vacant_token();
            poll.registry()
                .register(&mut socket, token, Interest::READABLE)?;
            crate::info!("MPEG-TS ingest listening on udp://{addr}");
            endpoints.insert(Entry {
                endpoint: Endpoint::TsPort(Box::new(TsPort::new(
                    socket,
                    addr.port(),
                    listen.mpegts_quiet,
                    token.0 as u64,
                ))),
                armed: None,
            });
        }
        if let Some(addr) = listen.srt {
            let mut socket =
                bind_udp(addr).map_err(|e| io::Error::new(e.kind(), format!("{addr}/udp: {e}")))?;
            let token = endpoints.vacant_token();
            poll.registry().register(
                &mut socket,
                token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            crate::info!("SRT ingest listening on srt://{addr}");
            endpoints.insert(Entry {
                endpoint: Endpoint::Srt(Box::new(SrtIngest::new(
                    socket,
                    token.0 as u64,
                    listen.srt_crypto.clone(),
                    Instant::now(),
                ))),
                armed: None,
            });
        }
        Ok(Server {
            poll,
            endpoints,
            timers: Timers::default(),
            api,
            limits,
            api_conns: 0,
            rtmp_conns: 0,
            ingest_budget: budget::IngestBudget::new(budget::DEFAULT_INGEST_BUDGET),
            shutdown: false,
            resolver: Resolver::start(waker)?,
            tls_client: crate::tls::client_config(),
            sessions: HashMap::new(),
            subscribers: HashMap::new(),
            retry_armed: None,
            jitter: std::process::id(),
        })
    }

    /// Serves until SIGINT or SIGTERM.
    pub fn run(mut self) -> io::Result<()> {
        let mut signals = signal_hook_mio::v1_0::Signals::new([
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
        ])?;
        self.poll
            .registry()
            .register(&mut signals, SIGNAL_TOKEN, Interest::READABLE)?;
        // Tasks restored from the state file wait for their streams.
        self.reconcile_pushes(Instant::now());
        let mut events = Events::with_capacity(1024);
        while !self.shutdown {
            let timeout = self.timers.timeout(Instant::now());
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            let now = Instant::now();
            for event in events.iter() {
                match event.token() {
                    SIGNAL_TOKEN => {
                        for sig in signals.pending() {
                            crate::info!("signal {sig} received; shutting down");
                            self.shutdown = true;
                        }
                    }
                    WAKER_TOKEN => self.on_resolved(now),
                    token => {
                        let closed = event.is_read_closed() || event.is_error();
                        self.guarded(token, now, |server| server.on_ready(token, now, closed))
                    }
                }
            }
            self.fire_timers(Instant::now());
        }
        // Dropping the endpoints closes every socket.
        crate::info!("stopped");
        Ok(())
    }

    /// Arms the endpoint's timer for `deadline` unless one is armed earlier.
    fn arm(&mut self, token: Token, deadline: Instant) {
        if let Some(entry) = self.endpoints.get_mut(token) {
            if entry.armed.is_none_or(|at| deadline < at) {
                entry.armed = Some(deadline);
                self.timers.schedule(deadline, token);
            }
        }
    }

    /// `peer_closed`: the poller saw the peer's FIN or an error.
    fn on_ready(&mut self, token: Token, now: Instant, peer_closed: bool) {
        let mut out = IngestOutput::default();
        let Some(entry) = self.endpoints.get_mut(token) else {
            return;
        };
        match &mut entry.endpoint {
            Endpoint::Listener(_) => self.accept(token, now),
            Endpoint::ApiConn(conn) => {
                let status = conn.on_ready(&mut self.api, now, peer_closed);
                let deadline = conn.deadline();
                match status {
                    Status::Open => self.arm(token, deadline),
                    Status::Closed => self.remove_endpoint(token),
                }
                self.apply_effects(now);
            }
            Endpoint::RtmpConn(conn) => {
                conn.on_ready(&mut self.api.registry, now, &mut out);
                if conn.is_closed() {
                    self.remove_endpoint(token);
                } else {
                    let d = conn.deadline();
                    self.arm(token, d);
                }
            }
            Endpoint::TsPort(port) => {
                port.on_ready(&mut self.api.registry, now, &mut out);
                if let Some(d) = port.deadline() {
                    self.arm(token, d);
                }
            }
            Endpoint::Srt(srt) => {
                let mut outs = Vec::new();
                srt.on_ready(&mut self.api.registry, now, &mut outs);
                if let Some(d) = srt.deadline() {
                    self.arm(token, d);
                }
                for o in outs {
                    self.dispatch(o, now);
                }
            }
            Endpoint::Push(session) => {
                session.on_ready(self.poll.registry(), token, now);
                self.after_push(token, now);
            }
        }
        self.dispatch(out, now);
    }

    fn fire_timers(&mut self, now: Instant) {
        // Take what is due first: a handler that re-arms at or before `now`
        // fires on the next turn, after the poll, never in a loop here.
        let mut due = Vec::new();
        while let Some(token) = self.timers.pop_due(now) {
            due.push(token);
        }
        for token in due {
            if token == RETRY_TOKEN {
                self.retry_armed = None;
                self.reconcile_pushes(now);
                continue;
            }
            self.guarded(token, now, |server| server.on_timer(token, now));
        }
    }

    /// An endpoint's timer fired.
    fn on_timer(&mut self, token: Token, now: Instant) {
        let Some(entry) = self.endpoints.get_mut(token) else {
            return;
        };
        // Only the armed entry counts; the others are stale.
        match entry.armed {
            Some(at) if at <= now => entry.armed = None,
            _ => return,
        }
        let mut out = IngestOutput::default();
        match &mut entry.endpoint {
            Endpoint::ApiConn(conn) => {
                let deadline = conn.deadline();
                if deadline > now {
                    self.arm(token, deadline);
                    return;
                }
                match conn.on_deadline(&mut self.api, now) {
                    Status::Open => {
                        let d = conn.deadline();
                        self.arm(token, d);
                    }
                    Status::Closed => self.remove_endpoint(token),
                }
            }
            Endpoint::RtmpConn(conn) => {
                let deadline = conn.deadline();
                if deadline > now {
                    self.arm(token, deadline);
                    return;
                }
                conn.on_deadline(&mut self.api.registry, &mut out);
                self.remove_endpoint(token);
            }
            Endpoint::TsPort(port) => {
                let Some(deadline) = port.deadline() else {
                    return;
                };
                if deadline > now {
                    self.arm(token, deadline);
                    return;
                }
                port.end(&mut self.api.registry, &mut out);
            }
            Endpoint::Srt(srt) => {
                let mut outs = Vec::new();
                srt.on_timeout(&mut self.api.registry, now, &mut outs);
                if let Some(d) = srt.deadline() {
                    self.arm(token, d);
                }
                for o in outs {
                    self.dispatch(o, now);
                }
            }
            Endpoint::Push(session) => {
                if session.deadline() <= now {
                    session.on_deadline(now);
                }
                self.after_push(token, now);
            }
            Endpoint::Listener(l) => {
                l.paused_until = None;
                self.accept(token, now);
            }
        }
        self.dispatch(out, now);
    }

    /// Runs an endpoint's handler with a panic contained to that endpoint.
    ///
    /// Every parser and state machine is fuzzed, so a panic is a bug; if one
    /// happens anyway it must not take every stream and the API down with
    /// the process. It costs the endpoint it happened on: a connection is
    /// closed (its stream ended), a push session fails with an error (the
    /// task retries), a shared port ends its current stream.
    fn guarded(&mut self, token: Token, now: Instant, handler: impl FnOnce(&mut Self)) {
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(self)));
        if let Err(payload) = run {
            let what = panic_message(payload.as_ref());
            crate::error!("internal error (a bug; please report it): {what}; closing the endpoint it happened on");
            self.after_panic(token, now);
        }
    }

    fn after_panic(&mut self, token: Token, now: Instant) {
        let Some(entry) = self.endpoints.get_mut(token) else {
            return;
        };
        let mut out = IngestOutput::default();
        match &mut entry.endpoint {
            Endpoint::ApiConn(_) => self.remove_endpoint(token),
            Endpoint::RtmpConn(conn) => {
                conn.close(&mut self.api.registry, &mut out);
                self.remove_endpoint(token);
            }
            Endpoint::TsPort(port) => port.end(&mut self.api.registry, &mut out),
            Endpoint::Push(session) => {
                session.abort("internal error (see the server log)");
                self.after_push(token, now);
            }
            Endpoint::Srt(_) | Endpoint::Listener(_) => {}
        }
        self.dispatch(out, now);
    }

    /// Drops an endpoint (closing its socket).
    fn remove_endpoint(&mut self, token: Token) {
        let Some(entry) = self.endpoints.remove(token) else {
            return;
        };
        let registry = self.poll.registry();
        match entry.endpoint {
            Endpoint::ApiConn(mut conn) => {
                let _ = registry.deregister(conn.stream_mut());
                self.api_conns -= 1;
            }
            Endpoint::RtmpConn(mut conn) => {
                let _ = registry.deregister(conn.stream_mut());
                self.rtmp_conns -= 1;
            }
            Endpoint::TsPort(mut port) => {
                let _ = registry.deregister(port.socket_mut());
            }
            Endpoint::Srt(mut srt) => {
                let _ = registry.deregister(srt.socket_mut());
            }
            Endpoint::Listener(mut l) => {
                let _ = registry.deregister(&mut l.listener);
            }
            Endpoint::Push(mut session) => {
                session.deregister(registry);
                if self.sessions.get(&session.key) == Some(&token) {
                    self.sessions.remove(&session.key);
                    self.rebalance_queues();
                }
                if let Some(list) = self.subscribers.get_mut(&session.stream) {
                    list.retain(|t| *t != token);
                }
            }
        }
    }

    /// Carries out what API handlers asked for.
    fn apply_effects(&mut self, now: Instant) {
        for effect in std::mem::take(&mut self.api.effects) {
            match effect {
                Effect::RestartApp { vhost, app } => {
                    let ids = self.api.registry.streams.ids_of(&vhost, app.as_deref());
                    for id in ids {
                        let Some(owner) = self.api.registry.streams.get(id).map(|s| s.publisher)
                        else {
                            continue;
                        };
                        self.end_publisher(Token(owner as usize), id, now);
                    }
                }
                Effect::PushAdded { vhost, app, id } => {
                    self.start_if_live(TaskKey { vhost, app, id }, now)
                }
                Effect::StopPush { vhost, app, id } => {
                    let key = TaskKey { vhost, app, id };
                    if let Some(token) = self.sessions.remove(&key) {
                        if let Some(Entry {
                            endpoint: Endpoint::Push(session),
                            ..
                        }) = self.endpoints.get_mut(token)
                        {
                            session.close(true, now);
                            if let Some(list) = self.subscribers.get_mut(&session.stream) {
                                list.retain(|t| *t != token);
                            }
                        }
                        self.after_push(token, now);
                    }
                    crate::info!("push [{}/{}/{}] stopped", key.vhost, key.app, key.id);
                }
            }
        }
    }

    /// Ends the session that publishes a stream (its app restarted).
    fn end_publisher(&mut self, token: Token, stream: StreamId, now: Instant) {
        let mut out = IngestOutput::default();
        match self.endpoints.get_mut(token).map(|e| &mut e.endpoint) {
            Some(Endpoint::Srt(srt)) => {
                let mut outs = Vec::new();
                srt.close(stream, &mut self.api.registry, now, &mut outs);
                for o in outs {
                    self.dispatch(o, now);
                }
            }
            Some(Endpoint::RtmpConn(conn)) => {
                conn.close(&mut self.api.registry, &mut out);
                self.remove_endpoint(token);
            }
            Some(Endpoint::TsPort(port)) => port.end(&mut self.api.registry, &mut out),
            _ => {}
        }
        self.dispatch(out, now);
    }

    /// Hands what ingest produced to the stream's push sessions.
    fn dispatch(&mut self, out: IngestOutput, now: Instant) {
        if let Some(id) = out.stream {
            let bytes: usize = out.frames.iter().map(|f| f.data.len()).sum();
            self.api.registry.streams.note_input(id, bytes as u64, now);
            let subs = self.subscribers.get(&id).cloned().unwrap_or_default();
            if out.tracks_changed {
                for &token in &subs {
                    let Some(selection) = self.selection_for(token) else {
                        continue;
                    };
                    if let Some(Endpoint::Push(s)) =
                        self.endpoints.get_mut(token).map(|e| &mut e.endpoint)
                    {
                        s.on_tracks(selection.0, selection.1, now);
                    }
                }
            }
            if !out.frames.is_empty() {
                for &token in &subs {
                    if let Some(Endpoint::Push(s)) =
                        self.endpoints.get_mut(token).map(|e| &mut e.endpoint)
                    {
                        s.on_frames(&out.frames, now);
                    }
                }
            }
            for &token in &subs {
                self.after_push(token, now);
            }
        }
        if let Some(ended) = out.ended {
            for token in self.subscribers.remove(&ended).unwrap_or_default() {
                if let Some(Endpoint::Push(s)) =
                    self.endpoints.get_mut(token).map(|e| &mut e.endpoint)
                {
                    s.close(false, now);
                }
                self.after_push(token, now);
            }
        }
        if out.started.is_some() || out.ended.is_some() {
            self.reconcile_pushes(now);
        }
    }

    /// The (tracks, selected ids) a push session should send now.
    fn selection_for(&self, token: Token) -> Option<(Vec<crate::media::Track>, Vec<TrackId>)> {
        let Some(Entry {
            endpoint: Endpoint::Push(s),
            ..
        }) = self.endpoints.get(token)
        else {
            return None;
        };
        let reg = &self.api.registry;
        let task = reg.pushes.get(&s.key.vhost, &s.key.app, &s.key.id)?;
        let (stream_id, profile) =
            reg.output_stream(&s.key.vhost, &s.key.app, &task.spec.stream_name)?;
        let tracks = reg.streams.get(stream_id)?.tracks().to_vec();
        let named = output_tracks(&tracks, profile);
        let ids = push::select_tracks(&task.spec, &tracks, &|t| {
            named
                .iter()
                .find(|(x, _)| x.id == t.id)
                .map(|(_, n)| n.clone())
        });
        Some((tracks, ids))
    }

    /// Gives every task that can run a session, and arms the retry timer.
    fn reconcile_pushes(&mut self, now: Instant) {
        let mut next_retry: Option<Instant> = None;
        let mut to_start = Vec::new();
        let mut to_ready = Vec::new();
        let reg = &self.api.registry;
        let outputs = reg.live_outputs();
        for task in reg.pushes.iter() {
            if task.state == PushState::Error {
                if let Some(at) = task.retry_at.filter(|at| *at > now) {
                    next_retry = Some(next_retry.map_or(at, |n: Instant| n.min(at)));
                    continue;
                }
            }
            let spec = &task.spec;
            let stream = outputs.get(&spec.vhost, &spec.app, &spec.stream_name);
            if stream.is_none() && task.state == PushState::Ready {
                continue; // waiting for its stream: nothing to do
            }
            let key = TaskKey {
                vhost: spec.vhost.clone(),
                app: spec.app.clone(),
                id: spec.id.clone(),
            };
            if self.sessions.contains_key(&key) {
                continue;
            }
            match stream {
                Some(id) => to_start.push((task.seq, key, id)),
                None => to_ready.push(key),
            }
        }
        for key in to_ready {
            if let Some(t) = self
                .api
                .registry
                .pushes
                .get_mut(&key.vhost, &key.app, &key.id)
            {
                t.state = PushState::Ready;
            }
        }
        // In creation order (the table is a hash map): a stream's pushes are
        // served in the order they were made, every frame.
        to_start.sort_unstable_by_key(|(seq, _, _)| *seq);
        for (_, key, id) in to_start {
            self.start_session(key, id, now);
        }
        if let Some(at) = next_retry {
            if self.retry_armed.is_none_or(|armed| at < armed) {
                self.retry_armed = Some(at);
                self.timers.schedule(at, RETRY_TOKEN);
            }
        }
    }

    /// Starts one task's session when its stream is live and it has none.
    fn start_if_live(&mut self, key: TaskKey, now: Instant) {
        if self.sessions.contains_key(&key) {
            return;
        }
        let reg = &self.api.registry;
        let Some(task) = reg.pushes.get(&key.vhost, &key.app, &key.id) else {
            return;
        };
        if let Some((stream_id, _)) =
            reg.output_stream(&key.vhost, &key.app, &task.spec.stream_name)
        {
            self.start_session(key, stream_id, now);
        }
    }

    fn start_session(&mut self, key: TaskKey, stream_id: StreamId, now: Instant) {
        let token = self.endpoints.vacant_token();
        let reg = &self.api.registry;
        let Some(task) = reg.pushes.get(&key.vhost, &key.app, &key.id) else {
            return;
        };
        let Some((_, profile)) = reg.output_stream(&key.vhost, &key.app, &task.spec.stream_name)
        else {
            return;
        };
        let Some(stream) = reg.streams.get(stream_id) else {
            return;
        };
        let tracks = stream.tracks().to_vec();
        let named = output_tracks(&tracks, profile);
        let selected = push::select_tracks(&task.spec, &tracks, &|t| {
            named
                .iter()
                .find(|(x, _)| x.id == t.id)
                .map(|(_, n)| n.clone())
        });
        let (host, port) = task.destination.host_port();
        let host = host.to_string();
        let session = PushOut::new(
            key.clone(),
            task,
            StartMedia {
                stream: stream_id,
                tracks,
                selected,
                gop: stream.gop(),
            },
            &self.tls_client,
            push_out::queue_bytes_for(self.sessions.len() + 1),
            now,
        );
        crate::info!(
            "push [{}/{}/{}]: connecting to {}",
            key.vhost,
            key.app,
            key.id,
            push::redacted_url(&task.spec.url)
        );
        if let Some(t) = self
            .api
            .registry
            .pushes
            .get_mut(&key.vhost, &key.app, &key.id)
        {
            t.session_started(crate::clock::unix_millis_now());
        }
        self.endpoints.insert(Entry {
            endpoint: Endpoint::Push(Box::new(session)),
            armed: None,
        });
        self.sessions.insert(key, token);
        self.subscribers.entry(stream_id).or_default().push(token);
        self.rebalance_queues();
        if let Some(addrs) = self.resolver.resolve(token, &host, port) {
            if let Some(Endpoint::Push(s)) = self.endpoints.get_mut(token).map(|e| &mut e.endpoint)
            {
                s.on_resolved(Ok(addrs), self.poll.registry(), token, now);
            }
        }
        self.after_push(token, now);
    }

    /// Gives every push session its share of the queue budget.
    fn rebalance_queues(&mut self) {
        let bytes = push_out::queue_bytes_for(self.sessions.len());
        for token in self.sessions.values() {
            if let Some(Entry {
                endpoint: Endpoint::Push(s),
                ..
            }) = self.endpoints.get_mut(*token)
            {
                s.set_queue_bytes(bytes);
            }
        }
    }

    fn on_resolved(&mut self, now: Instant) {
        let answers: Vec<_> = self.resolver.answers().collect();
        for a in answers {
            let token = a.token;
            self.guarded(token, now, move |server| {
                if let Some(Endpoint::Push(s)) =
                    server.endpoints.get_mut(token).map(|e| &mut e.endpoint)
                {
                    s.on_resolved(a.result, server.poll.registry(), token, now);
                }
                server.after_push(token, now);
            });
        }
    }

    /// Applies a push session's reports to its task; removes it when done.
    fn after_push(&mut self, token: Token, now: Instant) {
        let Some(Entry {
            endpoint: Endpoint::Push(s),
            ..
        }) = self.endpoints.get_mut(token)
        else {
            return;
        };
        let reports = s.take_reports();
        let done = s.is_done();
        let deadline = s.deadline();
        let mut retry = None;
        // Runs for every push on every ingest read: no key clones here.
        let mut ended = false;
        let mut state_changed = false;
        if !s.detached && !s.task_done {
            let key = &s.key;
            if let Some(task) = self
                .api
                .registry
                .pushes
                .get_mut(&key.vhost, &key.app, &key.id)
            {
                // A new session starts from 0: then all of it is new.
                let new_bytes = s
                    .sent_bytes
                    .checked_sub(task.sent_bytes)
                    .unwrap_or(s.sent_bytes);
                task.out_rate.add(new_bytes, now);
                task.sent_bytes = s.sent_bytes;
                task.dropped_frames = s.dropped_frames();
                for r in reports {
                    match r {
                        Report::Pushing => {
                            crate::info!("push [{}/{}/{}]: pushing", key.vhost, key.app, key.id);
                            task.session_pushing(now);
                            state_changed = true;
                        }
                        Report::Ended(err) => {
                            ended = true;
                            state_changed = true;
                            self.jitter =
                                self.jitter.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                            let why = err.clone();
                            retry = task.session_ended(
                                now,
                                crate::clock::unix_millis_now(),
                                err,
                                (self.jitter >> 16) & 1023,
                            );
                            // A failure an operator acts on: WARN, with when
                            // the next attempt is due (DECISIONS 14).
                            if let Some(why) = why {
                                let next = retry.map_or(String::new(), |at| {
                                    format!(
                                        "; next attempt in {:.1} s",
                                        at.saturating_duration_since(now).as_secs_f64()
                                    )
                                });
                                crate::warn!(
                                    "push [{}/{}/{}] failed (session {}): {why}{next}",
                                    key.vhost,
                                    key.app,
                                    key.id,
                                    task.sequence
                                );
                            }
                        }
                    }
                }
            }
        }
        if state_changed {
            self.api.note_peaks(crate::clock::Now::read(now));
        }
        if ended {
            let Some(Entry {
                endpoint: Endpoint::Push(s),
                ..
            }) = self.endpoints.get_mut(token)
            else {
                return;
            };
            s.task_done = true;
            // The task is free for a new session (a clean close may still
            // be finishing on this one).
            if self.sessions.get(&s.key) == Some(&token) {
                self.sessions.remove(&s.key);
            }
        }
        if done {
            self.remove_endpoint(token);
            if let Some(at) = retry {
                if self.retry_armed.is_none_or(|armed| at < armed) {
                    self.retry_armed = Some(at);
                    self.timers.schedule(at, RETRY_TOKEN);
                }
            }
        } else {
            self.arm(token, deadline);
        }
    }

    fn accept(&mut self, token: Token, now: Instant) {
        loop {
            let Some(Entry {
                endpoint: Endpoint::Listener(l),
                ..
            }) = self.endpoints.get_mut(token)
            else {
                return;
            };
            if l.paused_until.is_some() {
                return;
            }
            let (stream, peer) = match l.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_out_of_descriptors(&e) => {
                    crate::warn!(
                        "accept failed: {e} (out of file descriptors); pausing the {:?} listener for {} ms",
                        l.service,
                        ACCEPT_PAUSE.as_millis()
                    );
                    l.paused_until = Some(now + ACCEPT_PAUSE);
                    self.arm(token, now + ACCEPT_PAUSE);
                    return;
                }
                Err(e) => {
                    crate::debug!("accept failed: {e}");
                    continue;
                }
            };
            let service = l.service;
            let full = match service {
                Service::Api => self.api_conns >= self.limits.max_connections,
                Service::Rtmp => self.rtmp_conns >= MAX_RTMP_CONNECTIONS,
            };
            if full {
                // Over the cap: accept and close at once.
                crate::debug!("{service:?} connection cap reached; closing {peer}");
                drop(stream);
                continue;
            }
            let tls = match &l.tls {
                Some(cfg) => match rustls::ServerConnection::new(cfg.clone()) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        crate::warn!("TLS session for {peer} failed: {e}");
                        continue;
                    }
                },
                None => None,
            };
            self.add_conn(service, stream, peer, tls, now);
        }
    }

    fn add_conn(
        &mut self,
        service: Service,
        mut stream: TcpStream,
        peer: SocketAddr,
        tls: Option<rustls::ServerConnection>,
        now: Instant,
    ) {
        let _ = stream.set_nodelay(true);
        let token = self.endpoints.vacant_token();
        if let Err(e) = self.poll.registry().register(
            &mut stream,
            token,
            Interest::READABLE | Interest::WRITABLE,
        ) {
            crate::warn!("cannot register a connection from {peer}: {e}");
            return;
        }
        let (endpoint, deadline) = match service {
            Service::Api => {
                let conn = ApiConn::new(stream, peer, tls, self.limits.clone(), now);
                let d = conn.deadline();
                self.api_conns += 1;
                (Endpoint::ApiConn(Box::new(conn)), d)
            }
            Service::Rtmp => {
                crate::debug!("rtmp connection from {peer}");
                let conn = RtmpIngest::new(
                    stream,
                    peer,
                    tls,
                    token.0 as u64,
                    self.ingest_budget.share(),
                    now,
                );
                let d = conn.deadline();
                self.rtmp_conns += 1;
                (Endpoint::RtmpConn(Box::new(conn)), d)
            }
        };
        self.endpoints.insert(Entry {
            endpoint,
            armed: None,
        });
        self.arm(token, deadline);
        // Data may already be waiting; try at once (a FIN, if any, is
        // reported by the registration's first event).
        self.on_ready(token, now, false);
    }
}

fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) | Some(libc::ENOMEM)
    )
}

/// A non-blocking UDP socket with a large receive buffer (ingest bursts).
fn bind_udp(addr: SocketAddr) -> io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    socket.set_reuse_address(true)?;
    let _ = socket.set_recv_buffer_size(4 * 1024 * 1024);
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    Ok(UdpSocket::from_std(socket.into()))
}

/// A non-blocking listener with SO_REUSEADDR and a deep backlog.
fn bind_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        let _ = socket.set_only_v6(false);
    }
    socket.bind(&addr.into())?;
    socket.listen(4096)?;
    socket.set_nonblocking(true)?;
    Ok(TcpListener::from_std(socket.into()))
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
