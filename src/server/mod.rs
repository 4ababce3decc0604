//! The poll loop: one `mio::Poll` on one thread owns every socket. Endpoints
//! (listeners, API and viewer connections, ingest sessions, push I/O) all implement
//! [`Endpoint`] and live in a generation-checked [`TokenTable`]; deadlines
//! live in [`Timers`], and the poll sleeps until the nearest one. Sockets
//! are edge-triggered: each endpoint reads and writes until `WouldBlock`,
//! and is registered once for the directions it needs.
//!
//! Media flows ingest -> registry (tracks, GOP) -> the
//! [`PushManager`], which feeds the stream's push sessions; the loop makes
//! the sessions' I/O ([`push_io::PushIo`]) and lets each woken session
//! transmit, then hands its reports back to the manager. The same ingest
//! output feeds the [`HlsManager`] (LL-HLS parts), which names the viewer
//! connections waiting for a part; the loop wakes them.
//!
//! SIGINT and SIGTERM end the loop: endpoints are dropped (closed) and `run`
//! returns. The state file needs no flush: every change was written before
//! it was answered.

pub(crate) mod api_conn;
pub(crate) mod budget;
pub(crate) mod conns;
pub(crate) mod endpoint;
pub(crate) mod file_writer;
pub(crate) mod heap;
pub(crate) mod listener;
pub(crate) mod players;
pub(crate) mod pull_io;
pub(crate) mod push_io;
pub(crate) mod redis_io;
pub(crate) mod resolver;
pub(crate) mod rtmp_ingest;
pub mod srt_ingest;
pub(crate) mod timers;
pub(crate) mod tokens;
pub(crate) mod transport;
pub(crate) mod ts_ingest;
pub(crate) mod viewer_conn;
pub(crate) mod webhook_io;

use crate::admission::manager::{AccessManager, Verdict};
use crate::api::{Api, Effect};
use crate::clock::Now;
use crate::config::ApiLimits;
use crate::files::{FileEvent, FileOp, DUMP_FILE};
use crate::hls::manager::HlsManager;
use crate::pull::on_demand::{self, OnDemand};
use crate::pull::origin_map::{MapConfig, OriginMap};
use crate::pull::table::{PullAnswer, NO_WAITER};
use crate::pull::PullKey;
use crate::push::manager::{After, PushManager, SessionId};
use crate::state::task::TaskKey;
use crate::record::manager::RecordManager;
use crate::state::streams::IngestOutput;
use api_conn::ApiConn;
use endpoint::{Accepted, Cx, Endpoint, Output};
use file_writer::FileWriter;
use listener::Listener;
use mio::net::{TcpListener, UdpSocket};
use mio::{Events, Interest, Poll, Token, Waker};
use players::Players;
use pull_io::PullIo;
use push_io::PushIo;
use redis_io::RedisIo;
use resolver::Resolver;
use rtmp_ingest::RtmpIngest;
use srt_ingest::SrtIngest;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timers::Timers;
use tokens::TokenTable;
use ts_ingest::TsPort;
use viewer_conn::ViewerConn;
use webhook_io::WebhookIo;

const SIGNAL_TOKEN: Token = Token(usize::MAX);
const WAKER_TOKEN: Token = Token(usize::MAX - 1);
/// The timer that retries failed push tasks.
const RETRY_TOKEN: Token = Token(usize::MAX - 2);
/// The timer that ends quiet or expired viewer sessions.
const ACCESS_TOKEN: Token = Token(usize::MAX - 3);
/// The timer that starts pulls again after their back-off.
const PULL_TOKEN: Token = Token(usize::MAX - 4);
/// The timer of the origin maps (refreshes, reconnects).
const MAP_TOKEN: Token = Token(usize::MAX - 5);
/// The timer of an owed heap trim (see `heap`).
const TRIM_TOKEN: Token = Token(usize::MAX - 6);
/// Fan-out: how many endpoints ahead are prefetched in one go (see
/// `drive_pushes`).
const PREFETCH_RUN: usize = 8;

/// What a TCP listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    Api,
    Rtmp,
    /// LL-HLS and HLS viewers.
    Viewer,
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
    /// SRT sockets from one address (0: no cap).
    pub srt_max_per_address: usize,
}

struct Entry {
    endpoint: Box<dyn Endpoint>,
    /// The deadline a timer is armed for (at most one live timer each).
    armed: Option<Instant>,
    /// The connection cap it counts against and its peer's address.
    counted: Option<(Service, std::net::IpAddr)>,
}

impl Entry {
    fn new(endpoint: Box<dyn Endpoint>) -> Self {
        Entry {
            endpoint,
            armed: None,
            counted: None,
        }
    }
}

pub struct Server {
    poll: Poll,
    endpoints: TokenTable<Entry>,
    timers: Timers,
    api: Api,
    pushes: PushManager,
    /// Scratch for the push sessions woken in a turn (kept: no allocation
    /// per turn).
    woken_pushes: Vec<(SessionId, usize)>,
    hls: HlsManager,
    records: RecordManager,
    access: AccessManager,
    players: Players,
    /// Inside `drive_access` (its calls must not start another).
    driving_access: bool,
    access_armed: Option<Instant>,
    files: FileWriter,
    limits: ApiLimits,
    conns: conns::ConnCaps,
    /// Listeners to resume at the end of this turn (see `reap_unproven`).
    accept_again: Vec<Token>,
    /// Bytes held in ingest buffers, all connections together.
    ingest_budget: budget::IngestBudget,
    heap: heap::HeapTrim,
    shutdown: bool,
    resolver: Resolver,
    tls_client: Arc<rustls::ClientConfig>,
    retry_armed: Option<Instant>,
    pull_armed: Option<Instant>,
    map_armed: Option<Instant>,
    driving_maps: bool,
    /// This server's SRT port (what origin maps point edges at).
    srt_port: Option<u16>,
}

impl Server {
    /// Binds the listeners. Nothing is served until [`Server::run`].
    pub fn bind(api: Api, listen: Listen, limits: ApiLimits) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER_TOKEN)?);
        let utc_offset = api.utc_offset;
        let mut endpoints: TokenTable<Entry> = TokenTable::default();
        for spec in listen.tcp {
            // What it is (for a bind error: its config element) and what
            // the log says it serves.
            let (element, what) = match (spec.service, spec.tls.is_some()) {
                (Service::Api, false) => (
                    "API server (<Bind><Managers><API><Port>)",
                    "API server listening on http",
                ),
                (Service::Api, true) => (
                    "API server (<Bind><Managers><API><TLSPort>)",
                    "API server listening on https",
                ),
                (Service::Rtmp, false) => (
                    "RTMP ingest (<Bind><Providers><RTMP><Port>)",
                    "RTMP ingest listening on rtmp",
                ),
                (Service::Rtmp, true) => (
                    "RTMPS ingest (<Bind><Providers><RTMP><TLSPort>)",
                    "RTMPS ingest listening on rtmps",
                ),
                (Service::Viewer, false) => (
                    "LL-HLS viewers (<Bind><Publishers><LLHLS><Port>)",
                    "LL-HLS viewers served on http",
                ),
                (Service::Viewer, true) => (
                    "LL-HLS viewers (<Bind><Publishers><LLHLS><TLSPort>)",
                    "LL-HLS viewers served on https",
                ),
            };
            let mut listener = bind_listener(spec.addr, element)?;
            crate::info!("{what}://{}", listener.local_addr()?);
            let token = endpoints.vacant_token();
            poll.registry()
                .register(&mut listener, token, Interest::READABLE)?;
            endpoints.insert(Entry::new(Box::new(Listener::new(
                spec.service,
                listener,
                spec.tls,
            ))));
        }
        for addr in listen.mpegts {
            let mut socket = bind_udp(addr, "MPEG-TS ingest (<Bind><Providers><MPEGTS><Port>)")?;
            let token = endpoints.vacant_token();
            poll.registry()
                .register(&mut socket, token, Interest::READABLE)?;
            crate::info!("MPEG-TS ingest listening on udp://{addr}");
            endpoints.insert(Entry::new(Box::new(TsPort::new(
                socket,
                addr.port(),
                listen.mpegts_quiet,
                token.0 as u64,
            ))));
        }
        if let Some(addr) = listen.srt {
            let mut socket = bind_udp(addr, "SRT ingest (<Bind><Providers><SRT><Port>)")?;
            let token = endpoints.vacant_token();
            poll.registry().register(
                &mut socket,
                token,
                Interest::READABLE | Interest::WRITABLE,
            )?;
            crate::info!("SRT ingest listening on srt://{addr}");
            endpoints.insert(Entry::new(Box::new(SrtIngest::new(
                socket,
                token.0 as u64,
                listen.srt_crypto.clone(),
                listen.srt_max_per_address,
                Instant::now(),
            ))));
        }
        Ok(Server {
            poll,
            endpoints,
            timers: Timers::default(),
            api,
            pushes: PushManager::new(std::process::id()),
            hls: HlsManager::new(utc_offset),
            records: RecordManager::new(utc_offset),
            access: AccessManager::default(),
            players: Players::default(),
            driving_access: false,
            access_armed: None,
            files: FileWriter::start(waker.clone())?,
            conns: conns::ConnCaps::new(&limits, crate::sys::nofile_limit()),
            accept_again: Vec::new(),
            limits,
            ingest_budget: budget::IngestBudget::new(budget::DEFAULT_INGEST_BUDGET),
            heap: heap::HeapTrim::default(),
            shutdown: false,
            resolver: Resolver::start(waker)?,
            tls_client: crate::tls::client_config(),
            retry_armed: None,
            woken_pushes: Vec::new(),
            pull_armed: None,
            map_armed: None,
            driving_maps: false,
            srt_port: listen.srt.map(|a| a.port()),
        })
    }

    /// Opens the state file (and its journal) with what is restored: after
    /// every listener is bound, so a failed start writes nothing.
    pub fn open_state(&mut self) -> io::Result<()> {
        let Api {
            store, registry, ..
        } = &mut self.api;
        let path = store.path().display().to_string();
        store
            .open(|| registry.durable())
            .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
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
        let now = Instant::now();
        self.pushes
            .reconcile(&mut self.api.registry, Now::read(now));
        self.drive_pushes(now);
        self.start_origin_maps(now);
        self.drive_origin_maps(now);
        // Restored pushes and records may want streams an origin has.
        let wanted: Vec<(String, String, String)> = (self.api.registry.pushes.specs().into_iter())
            .map(|p| (p.vhost, p.app, p.stream_name))
            .chain(
                self.api
                    .registry
                    .records
                    .specs()
                    .into_iter()
                    .map(|r| (r.vhost, r.app, r.stream_name)),
            )
            .collect();
        for (vhost, app, name) in wanted {
            self.want_stream(&vhost, &app, &name, now);
        }
        self.drive_pulls(now);
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
                    WAKER_TOKEN => {
                        self.on_resolved(now);
                        self.on_files();
                    }
                    token => {
                        let closed = event.is_read_closed() || event.is_error();
                        self.call(token, now, |ep, cx| ep.ready(cx, closed));
                    }
                }
            }
            self.fire_timers(Instant::now());
            self.resume_accepting(Instant::now());
            let now = Instant::now();
            if let Some(at) = self
                .heap
                .on_released(self.ingest_budget.take_released(), now)
            {
                self.timers.schedule(at, TRIM_TOKEN);
            }
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

    /// Calls an endpoint, then carries out what it produced.
    fn call(&mut self, token: Token, now: Instant, f: impl FnOnce(&mut dyn Endpoint, &mut Cx<'_>)) {
        let out = self.guarded(token, now, f);
        self.process(out, now);
    }

    /// Calls an endpoint with a panic contained to it, then drops it if it
    /// is finished or arms its deadline.
    ///
    /// Every parser and state machine is fuzzed, so a panic is a bug; if one
    /// happens anyway it must not take every stream and the API down with
    /// the process. It costs the endpoint it happened on: a connection is
    /// closed (its stream ended), a push session fails with an error (the
    /// task retries), a shared port ends its current stream.
    fn guarded(
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
        let Server {
            poll,
            endpoints,
            api,
            pushes,
            hls,
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
            pushes,
            hls,
            access,
            players,
            resolver,
            tls_client,
            out,
        };
        f(entry.endpoint.as_mut(), &mut cx);
    }

    /// Carries out what endpoints produced: new connections, ingest output
    /// for the pushes, API effects, and the push sessions it woke.
    fn process(&mut self, out: Output, now: Instant) {
        if let Some(listener) = out.descriptors_short {
            // Descriptors freed: the listener takes what waits at once
            // (after this turn's events) instead of resting.
            if self.reap_unproven(now, true) > 0 {
                self.accept_again.push(listener);
            }
        }
        for a in out.accepted {
            self.add_conn(a, now);
        }
        if !out.ingest.is_empty() {
            let wall = Now::read(now);
            for o in &out.ingest {
                if let Some(id) = o.stream {
                    let bytes: usize = o.frames.iter().map(|f| f.data.len()).sum();
                    self.api.registry.streams.note_input(id, bytes as u64, now);
                }
                self.pushes.on_ingest(o, &mut self.api.registry, wall);
                self.hls.on_ingest(o, &mut self.api.registry, wall);
                self.records.on_ingest(o, &mut self.api.registry, wall);
                self.map_streams(o, now);
                let stream = o.stream.or(o.ended);
                if let Some(id) = stream {
                    for token in self.players.of(id) {
                        // Players produce nothing for the rest of the server.
                        let _ = self.guarded(Token(token), now, |ep, cx| ep.on_media(o, cx));
                    }
                }
            }
            self.wake_viewers(now);
        }
        if !self.api.effects.is_empty() {
            self.apply_effects(now);
        }
        self.drive_pushes(now);
        self.drive_files();
        self.drive_access(now);
        self.drive_origin_maps(now);
        self.drive_pulls(now);
    }

    /// A push or record wants a stream: when it is not live and an origin
    /// has it, it is pulled on demand (nobody waits for the answer; the
    /// push or record starts with the stream, as for any publisher).
    fn want_stream(&mut self, vhost: &str, app: &str, name: &str, now: Instant) {
        let reg = &mut self.api.registry;
        if reg.output_stream(vhost, app, name).is_some() {
            return;
        }
        let key = PullKey {
            vhost: vhost.into(),
            app: app.into(),
            name: name.into(),
        };
        let has_origin = reg
            .vhost(vhost)
            .is_some_and(|v| v.spec.origins.is_some() || v.spec.origin_map_store.is_some());
        if has_origin {
            let _ = on_demand::request(reg, &key, NO_WAITER, now);
        }
    }

    /// An on-demand pull is used while its stream has RTMP or SRT players,
    /// pushes or records (LL-HLS viewers note their own use with each
    /// request).
    fn note_pull_use(&mut self, now: Instant) {
        let reg = &mut self.api.registry;
        for key in reg.pulls.live_on_demand() {
            let Some(id) = reg
                .streams
                .find(&key.vhost, &key.app, &key.name)
                .map(|s| s.id)
            else {
                continue;
            };
            let used = !self.players.of(id).is_empty()
                || reg
                    .pushes
                    .of_app(&key.vhost, &key.app)
                    .iter()
                    .any(|t| t.spec.stream_name == key.name)
                || reg
                    .records
                    .of_app(&key.vhost, &key.app)
                    .iter()
                    .any(|t| t.spec.stream_name == key.name);
            if used {
                reg.pulls.touch(&key, now);
            }
        }
    }

    /// One origin map (and its Redis connection) per Redis the hosts'
    /// `originMapStore` name.
    fn start_origin_maps(&mut self, now: Instant) {
        let mut maps: Vec<OriginMap> = Vec::new();
        for v in self.api.registry.vhosts() {
            let Some(store) = &v.spec.origin_map_store else {
                continue;
            };
            let Some((host, port)) =
                crate::http::url::split_authority(&store.redis_server.host)
                    .ok()
                    .map(|(h, p)| (h.to_string(), p.unwrap_or(6379)))
            else {
                crate::warn!(
                    "virtual host [{}]: originMapStore Redis host [{}] is not host:port; ignored",
                    v.spec.name,
                    store.redis_server.host.escape_debug()
                );
                continue;
            };
            let config = MapConfig {
                host,
                port,
                auth: store.redis_server.auth.clone().filter(|a| !a.is_empty()),
                origin_host_name: store.origin_host_name.clone(),
            };
            match maps.iter_mut().find(|m| m.config == config) {
                Some(m) => m.vhosts.push(v.spec.name.clone()),
                None => maps.push(OriginMap::new(config, vec![v.spec.name.clone()], now)),
            }
        }
        if maps.is_empty() {
            return;
        }
        if self.srt_port.is_none() {
            crate::warn!("originMapStore: no SRT port (Bind/Providers/SRT); this server registers no stream, edges pull over SRT");
        }
        let n = maps.len();
        self.api.registry.origin_maps = maps;
        for i in 0..n {
            let m = &self.api.registry.origin_maps[i];
            crate::info!(
                "origin map on Redis {}:{} for [{}]",
                m.config.host,
                m.config.port,
                m.vhosts.join(", ")
            );
            if let Some(token) = self.add_endpoint(now, |_| Box::new(RedisIo::new(i))) {
                self.api.registry.origin_maps[i].io = Some(token.0);
            }
        }
    }

    /// Registers started streams and unregisters ended ones in the origin
    /// maps, turns lookups into on-demand pulls, lets each map's
    /// connection send and run its timers, and arms the maps' timer.
    fn drive_origin_maps(&mut self, now: Instant) {
        if self.api.registry.origin_maps.is_empty() || self.driving_maps {
            return;
        }
        self.driving_maps = true;
        for i in 0..self.api.registry.origin_maps.len() {
            while let Some(l) = self.api.registry.origin_maps[i].poll_lookup() {
                let reg = &mut self.api.registry;
                let outcome = match &l.url {
                    Ok(url) => on_demand::from_map(reg, &l.key, url, l.waiter, now),
                    Err(why) => OnDemand::Refused(404, why.clone()),
                };
                let why = match outcome {
                    OnDemand::Waiting => continue,
                    _ if l.waiter == NO_WAITER => continue,
                    OnDemand::NotFound => "not found".to_string(),
                    OnDemand::Refused(_, why) => why,
                };
                let answer = PullAnswer {
                    waiter: l.waiter,
                    key: l.key,
                    result: Err(why),
                };
                let _ = self.guarded(Token(answer.waiter), now, |ep, cx| {
                    ep.pull_answered(answer, cx)
                });
            }
            let m = &self.api.registry.origin_maps[i];
            let due = m.has_output() || m.poll_timeout().is_some_and(|t| t <= now);
            if let (true, Some(io)) = (due, m.io) {
                let _ = self.guarded(Token(io), now, |ep, cx| ep.flush(cx));
            }
        }
        self.driving_maps = false;
        let next = self
            .api
            .registry
            .origin_maps
            .iter()
            .filter_map(|m| m.poll_timeout())
            .min();
        if let Some(at) = next {
            if self.map_armed.is_none_or(|armed| at < armed) {
                self.map_armed = Some(at);
                self.timers.schedule(at, MAP_TOKEN);
            }
        }
    }

    /// A stream started or ended: the origin maps of its host hear it.
    fn map_streams(&mut self, o: &IngestOutput, now: Instant) {
        let reg = &mut self.api.registry;
        if reg.origin_maps.is_empty() {
            return;
        }
        if let Some(id) = o.ended {
            for m in reg.origin_maps.iter_mut() {
                m.unregister(id, now);
            }
        }
        let (Some(id), Some(port)) = (o.started, self.srt_port) else {
            return;
        };
        let Some(s) = reg.streams.get(id) else { return };
        let key = PullKey {
            vhost: s.vhost.clone(),
            app: s.app.clone(),
            name: s.name.clone(),
        };
        if reg.pulls.is_on_demand(&key) {
            return; // an edge's copy: the origin holds the key
        }
        for m in reg
            .origin_maps
            .iter_mut()
            .filter(|m| m.vhosts.contains(&key.vhost))
        {
            let value = format!(
                "srt://{}:{port}/{}/{}",
                m.config.origin_host_name, key.app, key.name
            );
            m.register(id, &key.app, &key.name, value, now);
        }
    }

    /// Opens the sessions pulls asked for, answers the API requests parked
    /// on pulls, and arms the back-off timer.
    fn drive_pulls(&mut self, now: Instant) {
        loop {
            let mut busy = false;
            while let Some(new) = self.api.registry.pulls.poll_new() {
                busy = true;
                let session = new.session;
                if let Some(token) = self.add_endpoint(now, |cx| Box::new(PullIo::start(new, cx))) {
                    self.api.registry.pulls.attach(session, token.0);
                }
            }
            while let Some(answer) = self.api.registry.pulls.poll_answer() {
                busy = true;
                let token = Token(answer.waiter);
                let _ = self.guarded(token, now, |ep, cx| ep.pull_answered(answer, cx));
            }
            if !busy {
                break;
            }
        }
        if let Some(at) = self.api.registry.pulls.poll_timeout() {
            if self.pull_armed.is_none_or(|armed| at < armed) {
                self.pull_armed = Some(at);
                self.timers.schedule(at, PULL_TOKEN);
            }
        }
    }

    /// Makes a new endpoint (push or webhook I/O) with the context every
    /// call gets, and keeps it unless it finished at once; its token.
    /// Such endpoints produce nothing for the rest of the server.
    fn add_endpoint(
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
            pushes: &mut self.pushes,
            hls: &mut self.hls,
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

    /// Sends the webhook requests admissions made, hands each decision to
    /// the endpoint waiting for it (one that is gone has what was allowed
    /// closed), and arms the viewer-session timer.
    fn drive_access(&mut self, now: Instant) {
        if self.driving_access {
            return;
        }
        self.driving_access = true;
        loop {
            let mut busy = false;
            while let Some(call) = self.access.poll_call() {
                busy = true;
                self.add_endpoint(now, |cx| Box::new(WebhookIo::start(call, cx)));
            }
            while let Some((waiter, check, verdict)) = self.access.poll_decision() {
                busy = true;
                let token = Token(waiter);
                if self.endpoints.get(token).is_some() {
                    self.call(token, now, move |ep, cx| ep.admitted(check, verdict, cx));
                } else if let Verdict::Allowed(admit) = verdict {
                    if let Some(a) = admit.admission {
                        self.access.close(a, Now::read(now));
                    }
                }
            }
            if !busy {
                break;
            }
        }
        self.driving_access = false;
        if let Some(at) = self.access.poll_timeout(Now::read(now)) {
            if self.access_armed.is_none_or(|armed| at < armed) {
                self.access_armed = Some(at);
                self.timers.schedule(at, ACCESS_TOKEN);
            }
        }
    }

    /// Hands the file operations of recordings and dumps to the writer
    /// thread; one it cannot take fails its owner at once.
    fn drive_files(&mut self) {
        loop {
            let mut ops: Vec<FileOp> = self.records.poll_ops().collect();
            ops.extend(self.hls.poll_file_ops());
            let refused: Vec<FileEvent> = ops
                .into_iter()
                .filter_map(|op| self.files.submit(op))
                .collect();
            if refused.is_empty() {
                return;
            }
            for e in refused {
                self.on_file_event(e);
            }
        }
    }

    /// What the writer thread finished or could not do.
    fn on_files(&mut self) {
        let events: Vec<_> = self.files.events().collect();
        for e in events {
            self.on_file_event(e);
        }
        self.drive_files();
    }

    fn on_file_event(&mut self, e: FileEvent) {
        let file = match &e {
            FileEvent::Failed { file, .. } | FileEvent::Closed { file } => *file,
        };
        if file & DUMP_FILE != 0 {
            self.hls.on_file_event(e, &mut self.api.registry);
        } else {
            self.records.on_file_event(e, &mut self.api.registry);
        }
    }

    /// Makes the I/O of new push sessions, lets every woken session
    /// transmit, and takes its reports into its task.
    fn drive_pushes(&mut self, now: Instant) {
        let wall = Now::read(now);
        loop {
            while let Some(new) = self.pushes.poll_new() {
                let id = new.id;
                if let Some(token) = self.add_endpoint(now, |cx| Box::new(PushIo::start(new, cx))) {
                    self.pushes.attach(id, token.0);
                }
            }
            let mut woken = std::mem::take(&mut self.woken_pushes);
            self.pushes.take_woken(&mut woken);
            if woken.is_empty() {
                self.woken_pushes = woken;
                break;
            }
            for (k, &(id, io)) in woken.iter().enumerate() {
                // Each flush's `writev` evicts the next sessions' memory:
                // bring it back ahead. The slots are found by reading the
                // tables (misses), so they are taken eight at a time, their
                // misses overlapping; what they point at follows one turn
                // ahead, when reading the pointers costs nothing.
                if k % PREFETCH_RUN == 0 {
                    for &(later, io) in woken.iter().skip(k + 2).take(PREFETCH_RUN) {
                        self.prefetch_entry(Token(io));
                        self.pushes.prefetch_slot(later);
                    }
                }
                if let Some(&(next, io)) = woken.get(k + 1) {
                    self.prefetch_endpoint(Token(io));
                    self.pushes.prefetch(next);
                }
                let token = Token(io);
                // Push I/O produces no output for the rest of the server.
                let _ = self.guarded(token, now, |ep, cx| ep.flush(cx));
                match self.pushes.after(id, &mut self.api.registry, wall) {
                    After::Running => {}
                    After::Finished(io) => {
                        if let Some(io) = io {
                            self.remove_endpoint(Token(io));
                        }
                    }
                }
            }
            self.woken_pushes = woken;
        }
        self.pushes.trim_feeds(now);
        if self.pushes.take_state_changed() {
            self.api.note_peaks(wall);
        }
        if let Some(at) = self.pushes.poll_timeout() {
            if self.retry_armed.is_none_or(|armed| at < armed) {
                self.retry_armed = Some(at);
                self.timers.schedule(at, RETRY_TOKEN);
            }
        }
    }

    fn fire_timers(&mut self, now: Instant) {
        // Take what is due first: a handler that re-arms at or before `now`
        // fires on the next turn, after the poll, never in a loop here.
        let mut due = Vec::new();
        while let Some(token) = self.timers.pop_due(now) {
            due.push(token);
        }
        for token in due {
            if token == TRIM_TOKEN {
                // The trim itself runs at the end of the turn.
                continue;
            }
            if token == ACCESS_TOKEN {
                self.access_armed = None;
                self.access.handle_timeout(Now::read(now));
                self.drive_access(now);
                continue;
            }
            if token == MAP_TOKEN {
                self.map_armed = None;
                self.drive_origin_maps(now);
                continue;
            }
            if token == PULL_TOKEN {
                self.pull_armed = None;
                self.note_pull_use(now);
                for io in self.api.registry.pulls.handle_timeout(now) {
                    self.call(Token(io), now, |ep, cx| ep.abort(cx));
                }
                self.drive_pulls(now);
                continue;
            }
            if token == RETRY_TOKEN {
                self.retry_armed = None;
                self.pushes
                    .handle_timeout(&mut self.api.registry, Now::read(now));
                self.drive_pushes(now);
                continue;
            }
            let Some(entry) = self.endpoints.get_mut(token) else {
                continue;
            };
            // Only the armed entry counts; the others are stale.
            match entry.armed {
                Some(at) if at <= now => entry.armed = None,
                _ => continue,
            }
            match entry.endpoint.deadline() {
                Some(d) if d > now => self.arm(token, d),
                Some(_) => self.call(token, now, |ep, cx| ep.timeout(cx)),
                None => {}
            }
        }
    }

    fn on_resolved(&mut self, now: Instant) {
        let answers: Vec<_> = self.resolver.answers().collect();
        for a in answers {
            let result = a.result;
            self.call(a.token, now, move |ep, cx| ep.resolved(result, cx));
        }
    }

    /// Drops an endpoint (closing its socket).
    fn remove_endpoint(&mut self, token: Token) {
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
    fn reap_unproven(&mut self, now: Instant, short: bool) -> usize {
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
    fn resume_accepting(&mut self, now: Instant) {
        for _ in 0..64 {
            let Some(listener) = self.accept_again.pop() else {
                return;
            };
            self.call(listener, now, |ep, cx| ep.timeout(cx));
        }
        self.accept_again.clear();
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
                        self.call(Token(owner as usize), now, |ep, cx| ep.end_stream(id, cx));
                    }
                }
                Effect::PushAdded { vhost, app, id } => {
                    let key = TaskKey { vhost, app, id };
                    let stream = self
                        .api
                        .registry
                        .pushes
                        .get(&key.vhost, &key.app, &key.id)
                        .map(|t| t.spec.stream_name.clone());
                    self.pushes
                        .start_if_live(key.clone(), &mut self.api.registry, Now::read(now));
                    if let Some(name) = stream {
                        self.want_stream(&key.vhost, &key.app, &name, now);
                    }
                }
                Effect::StopPush { vhost, app, id } => {
                    let key = TaskKey { vhost, app, id };
                    self.pushes.stop(&key, now);
                    crate::info!("push [{key}] stopped");
                }
                Effect::SendEvent { stream, event } => {
                    if !self.hls.send_event(stream, &event) {
                        crate::debug!("event for stream {stream}: no LL-HLS output, dropped");
                    }
                }
                Effect::ConcludeHls { stream } => self.hls.conclude(stream),
                Effect::RecordAdded(key) => {
                    self.records
                        .start_if_live(&key, &mut self.api.registry, Now::read(now));
                    let stream = self
                        .api
                        .registry
                        .records
                        .get(&key)
                        .map(|t| t.spec.stream_name.clone());
                    if let Some(name) = stream {
                        self.want_stream(&key.vhost, &key.app, &name, now);
                    }
                }
                Effect::StopRecord(key) => {
                    self.records
                        .stop(&key, &mut self.api.registry, Now::read(now))
                }
                Effect::StartHlsDump(key) => {
                    if !self
                        .hls
                        .start_dump(&key, &mut self.api.registry, Now::read(now))
                    {
                        if let Some(d) = self.api.registry.dumps.get_mut(&key) {
                            d.status = crate::hls::dump::DumpStatus::Error;
                            d.last_error = Some("the stream has no LL-HLS output".into());
                        }
                    }
                }
                Effect::StopHlsDump(key) => {
                    self.hls
                        .stop_dump(&key, &mut self.api.registry, Now::read(now))
                }
                Effect::EndStream { stream } => {
                    if let Some(owner) = self.api.registry.streams.get(stream).map(|s| s.publisher)
                    {
                        self.call(Token(owner as usize), now, |ep, cx| {
                            ep.end_stream(stream, cx)
                        });
                    }
                }
                Effect::ClosePull { io } => self.call(Token(io), now, |ep, cx| ep.abort(cx)),
            }
        }
        self.wake_viewers(now);
    }

    /// Answers the viewers parked on what now exists (a new part, a part
    /// cut by an urgent event, ended playlists).
    fn wake_viewers(&mut self, now: Instant) {
        let woken = self.hls.take_woken();
        for (k, &io) in woken.iter().enumerate() {
            // As for pushes: a thousand viewers answered in a row, each
            // write evicting the next ones' memory.
            if let Some(&io) = woken.get(k + 2) {
                self.prefetch_entry(Token(io));
            }
            if let Some(&io) = woken.get(k + 1) {
                self.prefetch_endpoint(Token(io));
            }
            self.call(Token(io), now, |ep, cx| ep.flush(cx));
        }
    }

    /// The first of two prefetch steps for an endpoint flushed soon in a
    /// run of flushes (fan-out): its entry, at least two turns ahead.
    fn prefetch_entry(&self, token: Token) {
        if let Some(e) = self.endpoints.get(token) {
            crate::sys::prefetch(e);
        }
    }

    /// The second step, one turn ahead: what the entry (now in cache)
    /// points at.
    fn prefetch_endpoint(&self, token: Token) {
        if let Some(e) = self.endpoints.get(token) {
            e.endpoint.prefetch();
        }
    }

    fn add_conn(&mut self, accepted: Accepted, now: Instant) {
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
        };
        let mut entry = Entry::new(endpoint);
        entry.counted = Some((service, peer.ip()));
        self.endpoints.insert(entry);
        // Data may already be waiting; try at once (a FIN, if any, is
        // reported by the registration's first event).
        self.call(token, now, |ep, cx| ep.ready(cx, false));
    }
}

/// A non-blocking UDP socket with a large receive buffer (ingest bursts);
/// an error names `what` it is for (its config element) and the address.
fn bind_udp(addr: SocketAddr, what: &str) -> io::Result<UdpSocket> {
    bind_udp_socket(addr)
        .map_err(|e| io::Error::new(e.kind(), format!("{what} on {addr}/udp: {e}")))
}

fn bind_udp_socket(addr: SocketAddr) -> io::Result<UdpSocket> {
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

/// A non-blocking listener with SO_REUSEADDR and a deep backlog; an error
/// names `what` it is for (its config element) and the address.
fn bind_listener(addr: SocketAddr, what: &str) -> io::Result<TcpListener> {
    bind_tcp_listener(addr).map_err(|e| io::Error::new(e.kind(), format!("{what} on {addr}: {e}")))
}

fn bind_tcp_listener(addr: SocketAddr) -> io::Result<TcpListener> {
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
