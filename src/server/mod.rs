//! The poll loop: one `mio::Poll` on one thread owns every socket. Endpoints
//! (listeners, API and viewer connections, ingest sessions, push, pull,
//! webhook and Redis I/O) all implement [`Endpoint`](endpoint::Endpoint)
//! and live in a generation-checked token table; deadlines live in timers,
//! and the poll sleeps until the nearest one. Sockets are edge-triggered:
//! each endpoint reads and writes until `WouldBlock`, and is registered
//! once for the directions it needs.
//!
//! Features are plug-ins of the loop ([`feature::Feature`], the list in
//! [`features`]): after each event or timer, what endpoints produced
//! (ingest output, new connections) and what API handlers asked for
//! (effects) go to every plug-in, then each is driven and its timer armed
//! ([`Server::settle`]). This file is the loop, its tokens and the
//! endpoint table's turns; what a feature does is in its plug-in.
//!
//! SIGINT and SIGTERM end the loop: the features finish what must not be
//! left half-written (dumps get `EXT-X-ENDLIST`, recordings their closed
//! file and info), the file writer is given a few seconds to write it,
//! endpoints are dropped (closed) and `run` returns. The state file needs
//! no flush: every change was written before it was answered.

pub(crate) mod api_conn;
pub(crate) mod bind;
pub(crate) mod budget;
pub(crate) mod conns;
pub(crate) mod core;
pub(crate) mod endpoint;
pub(crate) mod feature;
pub(crate) mod features;
pub(crate) mod file_writer;
pub(crate) mod heap;
pub(crate) mod listener;
pub(crate) mod media_files;
pub(crate) mod players;
#[cfg(feature = "webrtc")]
pub(crate) mod public_address;
pub(crate) mod pull_io;
pub(crate) mod push_io;
pub(crate) mod redis_io;
pub(crate) mod resolver;
pub(crate) mod rtmp_ingest;
pub mod srt_ingest;
pub(crate) mod takeover;
pub(crate) mod timers;
pub(crate) mod tokens;
#[cfg(feature = "webrtc")]
pub(crate) mod transcoder;
pub(crate) mod transport;
pub(crate) mod ts_ingest;
pub(crate) mod viewer_conn;
pub(crate) mod webhook_io;
#[cfg(feature = "webrtc")]
pub(crate) mod webrtc_io;
#[cfg(feature = "webrtc")]
pub(crate) mod webrtc_relay;
#[cfg(feature = "webrtc")]
pub(crate) mod webrtc_signal;

pub use bind::{IcePort, Listen, ListenerSpec, Service};

use self::core::{Core, Entry};
use crate::api::{Api, Effect};
use crate::config::ApiLimits;
use endpoint::Output;
use feature::Feature;
use file_writer::FileWriter;
use mio::{Events, Interest, Poll, Token, Waker};
use players::Players;
use resolver::Resolver;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};
use timers::Timers;
use tokens::TokenTable;

const SIGNAL_TOKEN: Token = Token(usize::MAX);
const WAKER_TOKEN: Token = Token(usize::MAX - 1);
/// The timer of an owed heap trim (see `heap`).
const TRIM_TOKEN: Token = Token(usize::MAX - 2);
/// Feature `i`'s timer is `Token(FEATURE_TIMERS - i)`.
const FEATURE_TIMERS: usize = usize::MAX - 8;
/// How long a stopping server waits for its files to be written.
const SHUTDOWN_WRITES: Duration = Duration::from_secs(5);
/// Rounds of [`Server::settle`] in one go; what is left waits for the
/// next turn, and the poll does not sleep then.
const SETTLE_ROUNDS: usize = 64;

pub struct Server {
    core: Core,
    features: Vec<Box<dyn Feature>>,
    /// The deadline each feature's timer is armed for.
    armed: Vec<Option<Instant>>,
    shutdown: bool,
}

impl Server {
    /// Binds the listeners. Nothing is served until [`Server::run`].
    pub fn bind(mut api: Api, listen: Listen, limits: ApiLimits) -> io::Result<Self> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER_TOKEN)?);
        let mut endpoints: TokenTable<Entry> = TokenTable::default();
        bind::bind_all(&poll, &listen, &mut endpoints, &mut api)?;
        let features = features::all();
        Ok(Server {
            core: Core {
                poll,
                endpoints,
                timers: Timers::default(),
                api,
                access: Default::default(),
                players: Players::default(),
                files: FileWriter::start(waker.clone())?,
                resolver: Resolver::start(waker.clone())?,
                waker,
                tls_client: crate::tls::client_config(),
                conns: conns::ConnCaps::new(&limits, crate::sys::nofile_limit())
                    .with_viewer_share(listen.viewer_max_per_address),
                limits,
                accept_again: Vec::new(),
                ingest_budget: budget::IngestBudget::new(budget::DEFAULT_INGEST_BUDGET),
                heap: heap::HeapTrim::default(),
                srt_port: listen.srt.map(|a| a.port()),
                out: Output::default(),
            },
            armed: vec![None; features.len()],
            features,
            shutdown: false,
        })
    }

    /// Opens the state file (and its journal) with what is restored: after
    /// every listener is bound, so a failed start writes nothing.
    pub fn open_state(&mut self) -> io::Result<()> {
        let api = &mut self.core.api;
        let path = api.store.path().display().to_string();
        api.open_store()
            .map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))
    }

    /// Serves until SIGINT or SIGTERM.
    pub fn run(mut self) -> io::Result<()> {
        let mut signals = signal_hook_mio::v1_0::Signals::new([
            signal_hook::consts::SIGINT,
            signal_hook::consts::SIGTERM,
        ])?;
        self.core
            .poll
            .registry()
            .register(&mut signals, SIGNAL_TOKEN, Interest::READABLE)?;
        let now = Instant::now();
        // Endpoints bound before the loop with a deadline of their own
        // (the public address query starts at once).
        let due: Vec<(Token, Instant)> = self
            .core
            .endpoints
            .iter()
            .filter_map(|(t, e)| Some((t, e.endpoint.deadline()?)))
            .collect();
        for (token, at) in due {
            self.core.arm(token, at);
        }
        for f in &mut self.features {
            f.start(&mut self.core, now);
        }
        self.settle(now);
        let mut events = Events::with_capacity(1024);
        while !self.shutdown {
            let timeout = if self.core.out.is_empty() {
                self.core.timers.timeout(Instant::now())
            } else {
                Some(Duration::ZERO) // work left from the last turn
            };
            if let Err(e) = self.core.poll.poll(&mut events, timeout) {
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
                        self.on_files(now);
                        for f in &mut self.features {
                            f.on_wake(&mut self.core, now);
                        }
                    }
                    token => {
                        let closed = event.is_read_closed() || event.is_error();
                        self.core.call(token, now, |ep, cx| ep.ready(cx, closed));
                    }
                }
                self.settle(now);
            }
            self.fire_timers(Instant::now());
            self.core.resume_accepting(Instant::now());
            let now = Instant::now();
            self.settle(now);
            let media = self.core.api.records.preroll_held().2;
            let released =
                self.core.ingest_budget.take_released() + self.core.heap.media_released(media);
            if let Some(at) = self.core.heap.on_released(released, now) {
                self.core.timers.schedule(at, TRIM_TOKEN);
            }
        }
        let now = Instant::now();
        for f in &mut self.features {
            f.shutdown(&mut self.core, now);
        }
        self.settle(now);
        if !self.core.files.finish(SHUTDOWN_WRITES) {
            crate::warn!(
                "files were still being written {} s after the stop; some may lack their end",
                SHUTDOWN_WRITES.as_secs()
            );
        }
        // Dropping the endpoints closes every socket.
        crate::info!("stopped");
        Ok(())
    }

    /// Hands what endpoints produced and what API handlers asked for to the
    /// features, drives each and arms its timer; again while that produced
    /// more (bounded).
    fn settle(&mut self, now: Instant) {
        for _ in 0..SETTLE_ROUNDS {
            let out = std::mem::take(&mut self.core.out);
            self.process(out, now);
            self.apply_effects(now);
            for (i, f) in self.features.iter_mut().enumerate() {
                if let Some(at) = f.drive(&mut self.core, now) {
                    if self.armed[i].is_none_or(|armed| at < armed) {
                        self.armed[i] = Some(at);
                        self.core.timers.schedule(at, Token(FEATURE_TIMERS - i));
                    }
                }
            }
            if self.core.out.is_empty() && self.core.api.effects.is_empty() {
                return;
            }
        }
    }

    /// New connections, and ingest output for the features.
    fn process(&mut self, out: Output, now: Instant) {
        let core = &mut self.core;
        if let Some(listener) = out.descriptors_short {
            // Descriptors freed: the listener takes what waits at once
            // (after this turn's events) instead of resting.
            if core.reap_unproven(now, true) > 0 {
                core.accept_again.push(listener);
            }
        }
        for a in out.accepted {
            core.add_conn(a, now);
        }
        for (old, id) in out.taken_over {
            core.call(Token(old as usize), now, |ep, cx| ep.yield_stream(id, cx));
        }
        for o in &out.ingest {
            if let Some(id) = o.stream {
                let bytes: usize = o.frames.iter().map(|f| f.data.len()).sum();
                core.api.registry.streams.note_input(id, bytes as u64, now);
                if o.tracks_changed {
                    // AudioMap labels, `<Playlist>` templates.
                    core.api.registry.on_tracks_changed(id);
                }
            }
            for f in &mut self.features {
                f.on_ingest(o, core, now);
            }
        }
    }

    /// Carries out what API handlers asked for: the loop's own effects
    /// (ending streams), then each feature hears every effect.
    fn apply_effects(&mut self, now: Instant) {
        for effect in std::mem::take(&mut self.core.api.effects) {
            let core = &mut self.core;
            let streams = match &effect {
                Effect::RestartApp { vhost, app } => {
                    core.api.registry.streams.ids_of(vhost, app.as_deref())
                }
                Effect::EndStream { stream } => vec![*stream],
                _ => Vec::new(),
            };
            for id in streams {
                if let Some(owner) = core.api.registry.streams.get(id).map(|s| s.publisher) {
                    core.call(Token(owner as usize), now, |ep, cx| ep.end_stream(id, cx));
                }
            }
            if let Effect::EndSession {
                stream,
                endpoint,
                conn,
            } = effect
            {
                core.call(Token(endpoint), now, |ep, cx| {
                    ep.end_session(stream, conn, cx)
                });
            }
            for f in &mut self.features {
                f.on_effect(&effect, core, now);
            }
        }
    }

    fn fire_timers(&mut self, now: Instant) {
        // Take what is due first: a handler that re-arms at or before `now`
        // fires on the next turn, after the poll, never in a loop here.
        let mut due = Vec::new();
        while let Some(token) = self.core.timers.pop_due(now) {
            due.push(token);
        }
        for token in due {
            if token == TRIM_TOKEN {
                // The trim itself runs at the end of the turn.
                continue;
            }
            let i = FEATURE_TIMERS.wrapping_sub(token.0);
            if token.0 <= FEATURE_TIMERS && i < self.features.len() {
                self.armed[i] = None;
                self.features[i].timeout(&mut self.core, now);
                continue;
            }
            let core = &mut self.core;
            let Some(entry) = core.endpoints.get_mut(token) else {
                continue;
            };
            // Only the armed entry counts; the others are stale.
            match entry.armed {
                Some(at) if at <= now => entry.armed = None,
                _ => continue,
            }
            match entry.endpoint.deadline() {
                Some(d) if d > now => core.arm(token, d),
                Some(_) => core.call(token, now, |ep, cx| ep.timeout(cx)),
                None => {}
            }
        }
    }

    fn on_resolved(&mut self, now: Instant) {
        let answers: Vec<_> = self.core.resolver.answers().collect();
        for a in answers {
            let result = a.result;
            self.core
                .call(a.token, now, move |ep, cx| ep.resolved(result, cx));
        }
    }

    /// What the writer thread finished or could not do, to the feature
    /// whose file it was.
    fn on_files(&mut self, now: Instant) {
        let events: Vec<_> = self.core.files.events().collect();
        for e in events {
            let mut left = Some(e);
            for f in &mut self.features {
                let Some(e) = left.take() else { break };
                left = f.on_file_event(e, &mut self.core, now);
            }
        }
    }
}
