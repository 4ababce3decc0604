//! The management API (OME v1 compatible): one function from a request to a
//! response over the registry. Order of checks for every request: host
//! names (421), CORS preflight (204, before authentication), authentication
//! (401), route (404 / 405), then the handler. CORS headers go on every
//! answer, errors included, so browsers can read them.
//!
//! Not here: sockets, TLS, HTTP framing (see `server` and `http`).

pub mod access;
mod apps;
mod channels;
mod console;
mod dumps;
pub mod envelope;
mod events;
mod history;
mod ome_shape;
mod profiles;
mod pulls;
mod push;
mod records;
mod sessions;
mod stats;
pub use push::OwnIngest;
mod vhosts;

pub use push::PushView;

pub use crate::state::app::output_tracks;

use crate::config::ApiConfig;
use crate::config::ApiLimits;
use crate::http::{percent_decode, Request, Response};
use crate::state::store::{Change, DurableState, StateStore, TaskJson, TaskKind};
use crate::state::vhost::TlsSpec;
use crate::state::Registry;
use crate::tls::{ApiCertResolver, VhostCertResolver};
use envelope::ApiError;
use std::sync::Arc;
use std::time::Instant;

/// What the API handlers work on.
pub struct Api {
    pub registry: Registry,
    pub store: StateStore,
    /// The features' own state: their tasks and running sessions.
    pub(crate) pushes: crate::push::manager::PushManager,
    pub records: crate::record::manager::RecordManager,
    pub hls: crate::hls::manager::HlsManager,
    pub pulls: crate::pull::Pulls,
    /// Scheduled and multiplex channels.
    pub channels: crate::channel::Channels,
    /// WebRTC viewers' sessions.
    #[cfg(feature = "webrtc")]
    pub webrtc: crate::webrtc::WebRtc,
    /// Where WebRTC viewers signal (`<Bind><Publishers><WebRTC><Signalling>`
    /// Port, TLSPort), for `/v1/webrtc` and the console's preview.
    pub webrtc_signalling: (Option<u16>, Option<u16>),
    access_token: Vec<u8>,
    cross_domains: Vec<String>,
    host_names: Vec<String>,
    /// The API's own certificate files and resolver, when it has a TLS port.
    api_tls: Option<(TlsSpec, Arc<ApiCertResolver>)>,
    pub vhost_certs: Arc<VhostCertResolver>,
    /// The server's UTC offset, for times the API shows.
    pub utc_offset: i32,
    /// What handlers ask the loop to do after the answer (drained by it).
    pub effects: Vec<Effect>,
    /// How many hosts and tasks callers may create.
    pub(crate) limits: ApiLimits,
    /// kiln's own ingest ports and addresses, to refuse a push that would
    /// feed the stream it reads.
    pub own_ingest: OwnIngest,
    /// When this server started (Unix ms): the created time of the stats
    /// of the server, its vhosts and apps.
    started_ms: i64,
    /// The most connections seen per stats level (server, vhost, app,
    /// stream), and when.
    peaks: std::collections::HashMap<(String, String, String), crate::metrics::Peak>,
    /// When the peaks were last counted.
    peaks_noted: Option<Instant>,
    /// The last five minutes of the console's figures.
    history: crate::metrics::history::History,
    /// The time of the request being answered (given to `handle`).
    now: crate::clock::Now,
    /// The pull the request just answered waits for ([`Api::take_parked`]).
    parked: Option<crate::pull::PullKey>,
}

/// Work a handler leaves for the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// End the live sessions of an application (or of every application
    /// of a host when `app` is `None`): it changed or was deleted.
    RestartApp { vhost: String, app: Option<String> },
    /// A task was added: open its session if its stream is live (only this
    /// task is looked at, so a call costs the same at any number of tasks).
    PushAdded {
        vhost: String,
        app: String,
        id: String,
    },
    /// A task was stopped (already removed from the table): close its
    /// session cleanly.
    StopPush {
        vhost: String,
        app: String,
        id: String,
    },
    /// Timed metadata or a cue for a live stream's LL-HLS output.
    SendEvent {
        stream: crate::state::streams::StreamId,
        event: crate::hls::event::Event,
    },
    /// End a live stream's LL-HLS and HLS playlists now (VOD from here);
    /// the stream itself goes on.
    ConcludeHls {
        stream: crate::state::streams::StreamId,
    },
    /// A record was added: start it if its stream is live.
    RecordAdded(crate::push::task::TaskKey),
    /// `:stopRecord` (or its application went): close its file; the task
    /// leaves the table once the file is closed.
    StopRecord(crate::push::task::TaskKey),
    /// `:startHlsDump` (the task is in the registry's dump table).
    StartHlsDump(crate::push::task::TaskKey),
    /// `:stopHlsDump`: end the dump's playlists; the task goes.
    StopHlsDump(crate::push::task::TaskKey),
    /// `DELETE .../streams/{stream}`: its publisher or pull ends it.
    EndStream {
        stream: crate::state::streams::StreamId,
    },
    /// `DELETE .../sessions/{id}`: end a player (the endpoint's `conn`).
    EndSession {
        stream: crate::state::streams::StreamId,
        endpoint: usize,
        conn: u64,
    },
    /// A deleted pull that is not live: close its session.
    ClosePull { io: usize },
    /// A channel was made, changed or deleted (its table entry says
    /// which; none: deleted).
    ChannelChanged(crate::channel::ChannelKey),
}

/// The 401 for a request without good credentials: with the Basic
/// challenge, except for a script's request (`X-Requested-With`, as the
/// console sends), which a browser must not answer with its own password
/// prompt: the page asks for the token itself.
fn challenge(req: &Request, e: ApiError) -> Response {
    let resp = e.to_response();
    if req.header_str("x-requested-with").is_some() {
        resp
    } else {
        resp.with_header("WWW-Authenticate", access::REALM_HEADER)
    }
}

/// The task kinds the state file keeps, one per feature with durable tasks.
pub static TASK_KINDS: [&TaskKind; 6] = [
    &crate::push::request::KIND,
    &crate::record::request::KIND,
    &crate::hls::dump::KIND,
    &crate::pull::KIND,
    &crate::channel::SCHEDULED_KIND,
    &crate::channel::MULTIPLEX_KIND,
];

/// The whole durable state: the registry's API-made hosts and every
/// feature's durable tasks.
fn durable(
    registry: &Registry,
    pushes: &crate::push::manager::PushManager,
    records: &crate::record::manager::RecordManager,
    dumps: &crate::hls::dump::DumpTable,
    pulls: &crate::pull::Pulls,
    channels: &crate::channel::Channels,
) -> DurableState {
    fn json<T: serde::Serialize>(specs: Vec<T>) -> Vec<TaskJson> {
        specs
            .iter()
            .filter_map(|s| serde_json::value::to_raw_value(s).ok())
            .collect()
    }
    let mut state = registry.durable();
    for (kind, tasks) in [
        (&crate::push::request::KIND, json(pushes.tasks.specs())),
        (&crate::record::request::KIND, json(records.tasks.specs())),
        (&crate::hls::dump::KIND, json(dumps.api_specs())),
        (&crate::pull::KIND, json(pulls.table.specs())),
        (
            &crate::channel::SCHEDULED_KIND,
            json(
                channels
                    .scheduled
                    .values()
                    .filter(|c| c.origin == crate::channel::Origin::Api)
                    .map(|c| &c.spec)
                    .collect(),
            ),
        ),
        (
            &crate::channel::MULTIPLEX_KIND,
            json(
                channels
                    .multiplex
                    .values()
                    .filter(|c| c.origin == crate::channel::Origin::Api)
                    .map(|c| &c.spec)
                    .collect(),
            ),
        ),
    ] {
        state.tasks.insert(kind.list.to_string(), tasks);
    }
    state
}

/// A durable task's key in its application: (vhost, app, id), borrowed.
trait Keyed {
    fn key(&self) -> (&str, &str, &str);
}

impl Keyed for crate::push::request::PushSpec {
    fn key(&self) -> (&str, &str, &str) {
        (&self.vhost, &self.app, &self.id)
    }
}

impl Keyed for crate::hls::dump::DumpSpec {
    fn key(&self) -> (&str, &str, &str) {
        (&self.vhost, &self.app, &self.id)
    }
}

impl Keyed for crate::record::request::RecordSpec {
    fn key(&self) -> (&str, &str, &str) {
        (&self.vhost, &self.app, &self.id)
    }
}

impl Keyed for crate::channel::schedule::ScheduleSpec {
    fn key(&self) -> (&str, &str, &str) {
        (&self.vhost, &self.app, &self.name)
    }
}

impl Keyed for crate::channel::mux::MuxSpec {
    fn key(&self) -> (&str, &str, &str) {
        (&self.vhost, &self.app, &self.name)
    }
}

impl Keyed for crate::pull::PullSpec {
    fn key(&self) -> (&str, &str, &str) {
        (&self.vhost, &self.app, &self.name)
    }
}

/// The tasks whose application is still there; the others are dropped,
/// said in `skipped` (`what` names the kind: `push`, `record`, ...).
fn of_live_apps<T: Keyed>(
    specs: Vec<T>,
    what: &str,
    reg: &Registry,
    skipped: &mut Vec<String>,
) -> Vec<T> {
    specs
        .into_iter()
        .filter(|spec| {
            let (vhost, app, id) = spec.key();
            let live = reg.app(vhost, app).is_some();
            if !live {
                skipped.push(format!(
                    "{what} [{vhost}/{app}/{id}] in the state file: the application is gone; dropped"
                ));
            }
            live
        })
        .collect()
}

/// Reads the tasks of `kind` in a loaded state file: each that parses,
/// the later of two with the same key (a hand-edited file); what was
/// dropped and why. Keys are borrowed: 10,000 tasks copy no string.
fn tasks_of<T: serde::de::DeserializeOwned + Keyed>(
    saved: &DurableState,
    kind: &TaskKind,
    skipped: &mut Vec<String>,
) -> Vec<T> {
    let raw = saved.tasks_of(kind);
    let mut specs: Vec<T> = Vec::with_capacity(raw.len());
    for (i, task) in raw.iter().enumerate() {
        match serde_json::from_str::<T>(task.get()) {
            Ok(spec) => specs.push(spec),
            Err(e) => skipped.push(format!(
                "{} #{} in the state file: {e}; dropped",
                kind.item,
                i + 1
            )),
        }
    }
    let mut last: std::collections::HashMap<(&str, &str, &str), usize> =
        std::collections::HashMap::with_capacity(specs.len());
    let mut shadowed = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        if let Some(earlier) = last.insert(spec.key(), i) {
            let (vhost, app, id) = spec.key();
            skipped.push(format!(
                "{} [{vhost}/{app}/{id}] is in the state file twice; the later is kept",
                kind.item
            ));
            shadowed.push(earlier);
        }
    }
    drop(last);
    if shadowed.is_empty() {
        return specs;
    }
    let shadowed: std::collections::HashSet<usize> = shadowed.into_iter().collect();
    specs
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !shadowed.contains(i))
        .map(|(_, s)| s)
        .collect()
}

/// Facts about the connection a request came on.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestInfo<'a> {
    pub tls: bool,
    pub sni: Option<&'a str>,
}

impl Api {
    pub fn new(
        api: Option<&ApiConfig>,
        registry: Registry,
        store: StateStore,
        api_cert: Option<Arc<ApiCertResolver>>,
        vhost_certs: Arc<VhostCertResolver>,
        utc_offset: i32,
    ) -> Self {
        // What kilns that stopped left in the configuration's DVR folders
        // goes first (the file worker does it before anything else).
        let mut hls = crate::hls::manager::HlsManager::new(utc_offset);
        hls.sweep_dvr_folders(&registry);
        Api {
            registry,
            store,
            pushes: crate::push::manager::PushManager::new(std::process::id()),
            records: crate::record::manager::RecordManager::new(utc_offset),
            hls,
            pulls: crate::pull::Pulls::default(),
            channels: Default::default(),
            #[cfg(feature = "webrtc")]
            webrtc: crate::webrtc::WebRtc::new(),
            webrtc_signalling: (None, None),
            access_token: api
                .map(|a| a.access_token.as_bytes().to_vec())
                .unwrap_or_default(),
            cross_domains: api.map(|a| a.cross_domains.clone()).unwrap_or_default(),
            host_names: api.map(|a| a.host_names.clone()).unwrap_or_default(),
            api_tls: match (api.and_then(|a| a.tls.clone()), api_cert) {
                (Some(spec), Some(resolver)) if api.is_some_and(|a| a.tls_port.is_some()) => {
                    Some((spec, resolver))
                }
                _ => None,
            },
            vhost_certs,
            utc_offset,
            effects: Vec::new(),
            limits: api.map(|a| a.limits.clone()).unwrap_or_default(),
            own_ingest: OwnIngest::default(),
            started_ms: crate::clock::unix_millis_now(),
            peaks: Default::default(),
            peaks_noted: None,
            history: Default::default(),
            now: crate::clock::Now::read(Instant::now()),
            parked: None,
        }
    }

    /// Makes a task's addition durable, as [`Api::record`].
    pub(super) fn record_added(
        &mut self,
        kind: &'static TaskKind,
        task: &impl serde::Serialize,
        what: &str,
    ) -> Result<(), ApiError> {
        let change = Change::add_task(kind, task).map_err(|e| {
            crate::error!(
                "cannot write a {} to the state file: {e}; {what}",
                kind.item
            );
            ApiError::internal()
        })?;
        self.record(change, what)
    }

    /// The API-made hosts and every feature's tasks of a loaded state
    /// file; what was skipped, and why (to be logged).
    pub fn restore(&mut self, saved: DurableState) -> Vec<String> {
        let mut skipped = Vec::new();
        let pushes: Vec<crate::push::request::PushSpec> =
            tasks_of(&saved, &crate::push::request::KIND, &mut skipped);
        let records: Vec<crate::record::request::RecordSpec> =
            tasks_of(&saved, &crate::record::request::KIND, &mut skipped);
        let dumps: Vec<crate::hls::dump::DumpSpec> =
            tasks_of(&saved, &crate::hls::dump::KIND, &mut skipped);
        let pulls: Vec<crate::pull::PullSpec> = tasks_of(&saved, &crate::pull::KIND, &mut skipped);
        let scheduled: Vec<crate::channel::schedule::ScheduleSpec> =
            tasks_of(&saved, &crate::channel::SCHEDULED_KIND, &mut skipped);
        let multiplex: Vec<crate::channel::mux::MuxSpec> =
            tasks_of(&saved, &crate::channel::MULTIPLEX_KIND, &mut skipped);
        skipped.extend(self.registry.restore(saved.vhosts));
        let reg = &self.registry;
        let pushes = of_live_apps(pushes, "push", reg, &mut skipped);
        let records = of_live_apps(records, "record", reg, &mut skipped);
        let dumps = of_live_apps(dumps, "hls dump", reg, &mut skipped);
        let pulls = of_live_apps(pulls, "pull", reg, &mut skipped);
        for spec in pushes {
            match crate::push::request::parse_url(spec.protocol, &spec.url) {
                Ok(dest) => self
                    .pushes
                    .tasks
                    .insert(crate::push::task::PushTask::new(spec, dest)),
                Err(e) => skipped.push(format!(
                    "push [{}/{}/{}] in the state file: {e}; dropped",
                    spec.vhost, spec.app, spec.id
                )),
            }
        }
        for spec in records {
            self.records
                .tasks
                .insert(crate::record::task::RecordTask::new(spec));
        }
        // Dumps: listed as finished (every dump ended when kiln stopped).
        for spec in dumps {
            self.hls.dump_tasks.insert_finished(spec);
        }
        for spec in pulls {
            let name = format!("{}/{}/{}", spec.vhost, spec.app, spec.name);
            let sources: Result<Vec<_>, _> = spec
                .urls
                .iter()
                .map(|u| crate::pull::Source::parse(u))
                .collect();
            match sources {
                Ok(sources) if !sources.is_empty() => {
                    self.pulls.table.insert(spec, sources, Instant::now())
                }
                Ok(_) => skipped.push(format!(
                    "pull [{name}] in the state file has no URL; dropped"
                )),
                Err(e) => skipped.push(format!("pull [{name}] in the state file: {e}; dropped")),
            }
        }
        self.restore_channels(scheduled, multiplex, &mut skipped);
        skipped
    }

    /// Where WebRTC viewers connect, and how many there are (`GET
    /// /v1/webrtc`, kiln extension): the signalling ports (WHEP and OME's
    /// WebSocket, on the viewer port), the ICE candidates and the TCP
    /// relay's URLs; keyframe requests the open sessions received, and
    /// datagrams dropped because a viewer could not keep up.
    fn webrtc_info(&self) -> Response {
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Info {
            enabled: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            signalling_port: Option<u16>,
            #[serde(skip_serializing_if = "Option::is_none")]
            signalling_tls_port: Option<u16>,
            ice_candidates: Vec<String>,
            tcp_relay: Vec<String>,
            sessions: usize,
            /// Of the sessions, those publishing (WHIP, `direction=send`).
            publishers: usize,
            keyframe_requests: u64,
            dropped_datagrams: u64,
        }
        #[cfg(feature = "webrtc")]
        let (
            enabled,
            ice_candidates,
            tcp_relay,
            (sessions, publishers),
            keyframe_requests,
            dropped_datagrams,
        ) = (
            self.webrtc.enabled(),
            self.webrtc
                .candidates()
                .iter()
                .map(|a| format!("{a}/udp"))
                .collect(),
            self.webrtc.relay_urls.clone(),
            (self.webrtc.len(), self.webrtc.publishers()),
            self.webrtc.keyframe_requests(),
            self.webrtc.dropped,
        );
        #[cfg(not(feature = "webrtc"))]
        let (
            enabled,
            ice_candidates,
            tcp_relay,
            (sessions, publishers),
            keyframe_requests,
            dropped_datagrams,
        ) = (false, Vec::new(), Vec::new(), (0, 0), 0, 0);
        let (signalling_port, signalling_tls_port) = if enabled {
            self.webrtc_signalling
        } else {
            (None, None)
        };
        envelope::ok(Info {
            enabled,
            signalling_port,
            signalling_tls_port,
            ice_candidates,
            tcp_relay,
            sessions,
            publishers,
            keyframe_requests,
            dropped_datagrams,
        })
    }

    /// The last WARN and ERROR lines, oldest first, in the server's time
    /// zone (`GET /v1/logs`, kiln extension; read from memory, no file).
    fn recent_log(&self) -> Response {
        #[derive(serde::Serialize)]
        struct Line {
            time: String,
            level: &'static str,
            message: String,
        }
        let lines: Vec<Line> = (crate::log::recent().into_iter())
            .map(|r| Line {
                time: crate::clock::IsoTime::new(r.unix_ms, self.utc_offset)
                    .as_str()
                    .to_string(),
                level: r.level.name(),
                message: r.text,
            })
            .collect();
        envelope::ok(lines)
    }

    /// How many push tasks there are.
    pub fn push_task_count(&self) -> usize {
        self.pushes.tasks.len()
    }

    /// The state store, and the whole durable state as it is now for the
    /// store to write when it folds its journal (built only then).
    fn store_and_state(&mut self) -> (&mut StateStore, impl FnOnce() -> DurableState + '_) {
        let Api {
            store,
            registry,
            pushes,
            records,
            hls,
            pulls,
            channels,
            ..
        } = self;
        (store, move || {
            durable(registry, pushes, records, &hls.dump_tasks, pulls, channels)
        })
    }

    /// Opens the state store with what was restored (written out only when
    /// the journal must be folded: most starts serialize nothing).
    pub fn open_store(&mut self) -> std::io::Result<()> {
        let (store, current) = self.store_and_state();
        store.open(current)
    }

    /// Makes a change durable (the state journal) before it is applied;
    /// on failure logs why (`what` did not happen) and gives the 500 to
    /// answer. Every API change goes through here.
    pub(super) fn record(&mut self, change: Change, what: &str) -> Result<(), ApiError> {
        let (store, current) = self.store_and_state();
        store.record(&change, current).map_err(|e| {
            crate::error!(
                "cannot write the state file {}: {e}; {what}",
                self.store.path().display()
            );
            ApiError::internal()
        })
    }

    /// Answers one request at `now` (handlers never read a clock).
    pub fn handle(
        &mut self,
        req: &Request,
        info: RequestInfo<'_>,
        now: crate::clock::Now,
    ) -> Response {
        self.now = now;
        let cors = access::cors_headers(req, &self.cross_domains);
        let mut resp = self.answer(req, info);
        resp.headers.extend(cors);
        resp
    }

    /// Answers an error found by the HTTP layer (408, 413, 431, ...), with
    /// the CORS headers when the head was read.
    pub fn error_response(&self, req: Option<&Request>, err: &ApiError) -> Response {
        let mut resp = err.to_response();
        if let Some(req) = req {
            resp.headers
                .extend(access::cors_headers(req, &self.cross_domains));
        }
        resp
    }

    /// A request whose head says `Expect: 100-continue`: the answer to
    /// give before inviting its body, when it will be refused anyway
    /// (wrong host, no or bad credentials), so an unauthenticated client
    /// never gets `100 Continue`.
    pub fn refuse_before_body(&self, req: &Request, info: RequestInfo<'_>) -> Option<Response> {
        let refusal = match access::check_host(req, info.sni, &self.host_names) {
            Err(e) => e.to_response(),
            Ok(()) if console::serve(req, self.webrtc_signalling).is_some() => return None,
            Ok(()) => challenge(req, access::authenticate(req, &self.access_token).err()?),
        };
        let mut resp = refusal;
        resp.headers
            .extend(access::cors_headers(req, &self.cross_domains));
        Some(resp)
    }

    fn answer(&mut self, req: &Request, info: RequestInfo<'_>) -> Response {
        if let Err(e) = access::check_host(req, info.sni, &self.host_names) {
            return e.to_response();
        }
        if req.method() == "OPTIONS" {
            return Response::new(204, Vec::new())
                .with_header("Access-Control-Max-Age", "600")
                .with_header("Allow", access::ALLOW_METHODS);
        }
        if let Some(resp) = console::serve(req, self.webrtc_signalling) {
            return resp;
        }
        if let Err(e) = access::authenticate(req, &self.access_token) {
            return challenge(req, e);
        }
        if req
            .path()
            .split('/')
            .any(|seg| percent_decode(seg).is_none())
        {
            // Not a path that names nothing: one that cannot be read.
            return ApiError::bad_request(format_args!(
                "Invalid percent-encoding in the path [{}]: a % must be followed by two hex digits, and the result must be UTF-8",
                req.path()
            ))
            .to_response();
        }
        let route = match Route::parse(req.path()) {
            Some(r) => r,
            None => return ApiError::controller_not_found().to_response(),
        };
        let method = if req.method() == "HEAD" {
            "GET"
        } else {
            req.method()
        };
        let allowed = route.methods();
        if !allowed.contains(&method) {
            // 405 even on a read-only (config-file) host: 403 is only for a
            // method the path takes.
            let mut allow: Vec<&str> = allowed.to_vec();
            if allow.contains(&"GET") {
                allow.push("HEAD");
            }
            allow.push("OPTIONS");
            return ApiError::method_not_allowed()
                .to_response()
                .with_header("Allow", allow.join(", "));
        }
        if let Err(e) = envelope::check_duplicate_keys(&req.body) {
            return e.to_response();
        }
        let result = match (&route, method) {
            (Route::Version, _) => Ok(envelope::ok(Version::CURRENT)),
            (Route::Logs, _) => Ok(self.recent_log()),
            (Route::WebRtc, _) => Ok(self.webrtc_info()),
            (Route::Profiles(vh, app), "GET") => self.list_profiles(vh, app),
            (Route::Profiles(vh, app), _) => self.create_profiles(vh, app, &req.body),
            (Route::Profile(vh, app, p), "GET") => self.get_profile(vh, app, p),
            (Route::Profile(vh, app, p), "PATCH") => self.patch_profile(vh, app, p, &req.body),
            (Route::Profile(vh, app, p), _) => self.delete_profile(vh, app, p),
            (Route::History, _) => Ok(self.history_view()),
            (Route::Stats(vh, app, s), _) => self.stats(
                vh.as_deref(),
                app.as_deref(),
                s.as_deref(),
                self.now.instant,
            ),
            (Route::Metrics, _) => Ok(self.metrics(self.now.instant)),
            (Route::OpenApi, _) => Ok(Response::new(200, OPENAPI.as_bytes().to_vec())
                .with_header("Content-Type", "application/yaml")),
            (Route::Vhosts, "GET") => Ok(self.list_vhosts()),
            (Route::Vhosts, _) => self.create_vhosts(&req.body),
            (Route::Vhost(name), "GET") => self.get_vhost(name),
            (Route::Vhost(name), _) => self.delete_vhost(name),
            (Route::ReloadAllCertificates, _) => self.reload_all_certificates(),
            (Route::ReloadVhostCertificate(name), _) => self.reload_vhost_certificate(name),
            (Route::ReloadApiCertificate, _) => self.reload_api_certificate(),
            (Route::Apps(vh), "GET") => self.list_apps(vh),
            (Route::Apps(vh), _) => self.create_apps(vh, &req.body),
            (Route::App(vh, app), "GET") => self.get_app(vh, app),
            (Route::App(vh, app), "PATCH") => self.patch_app(vh, app, &req.body),
            (Route::App(vh, app), _) => self.delete_app(vh, app),
            (Route::AppAction(vh, app, AppAction::StartPush), _) => {
                self.start_push(vh, app, &req.body)
            }
            (Route::AppAction(vh, app, AppAction::StopPush), _) => {
                self.stop_push(vh, app, &req.body)
            }
            (Route::AppAction(vh, app, AppAction::Pushes), _) => {
                self.list_pushes(vh, app, &req.body)
            }
            (Route::AppAction(vh, app, AppAction::StartRecord), _) => {
                self.start_record(vh, app, &req.body)
            }
            (Route::AppAction(vh, app, AppAction::StopRecord), _) => {
                self.stop_record(vh, app, &req.body)
            }
            (Route::AppAction(vh, app, AppAction::Pulls), _) => self.list_pulls(vh, app),
            (Route::AppAction(vh, app, AppAction::Records), _) => {
                self.list_records(vh, app, &req.body)
            }
            (Route::Channels(k, vh, app), "GET") => self.list_channels(*k, vh, app),
            (Route::Channels(k, vh, app), _) => self.create_channel(*k, vh, app, &req.body),
            (Route::Channel(k, vh, app, c), "GET") => self.get_channel(*k, vh, app, c),
            (Route::Channel(_, vh, app, c), "PATCH") => self.patch_channel(vh, app, c, &req.body),
            (Route::Channel(k, vh, app, c), _) => self.delete_channel(*k, vh, app, c),
            (Route::Streams(vh, app), "GET") => self.list_streams(vh, app),
            (Route::Streams(vh, app), _) => self.create_stream(vh, app, &req.body),
            (Route::Sessions(vh, app, s), _) => self.list_sessions(vh, app, s),
            (Route::Session(vh, app, s, id), _) => self.end_session(vh, app, s, id),
            (Route::Stream(vh, app, s), "GET") => self.get_stream(vh, app, s),
            (Route::Stream(vh, app, s), _) => self.delete_stream(vh, app, s),
            (Route::StreamAction(vh, app, s, action), _) => match action {
                StreamAction::SendEvent => self.send_event(vh, app, s, false, &req.body),
                StreamAction::SendEvents => self.send_event(vh, app, s, true, &req.body),
                StreamAction::ConcludeHlsLive => self.conclude_hls_live(vh, app, s, &req.body),
                StreamAction::StartHlsDump => self.start_hls_dump(vh, app, s, &req.body),
                StreamAction::StopHlsDump => self.stop_hls_dump(vh, app, s, &req.body),
                StreamAction::HlsDumps => self.list_hls_dumps(vh, app, s, &req.body),
                StreamAction::SendSubtitles => self.send_subtitles(vh, app, s, &req.body),
            },
        };
        result.unwrap_or_else(|e| e.to_response())
    }
}

/// `GET /v1/version`: OME's fields first, saying which OME version's API
/// kiln answers as (a script that checks `version >= 0.15.3` before reading
/// `:startRecord` as an object judges kiln as it would that OME), then
/// kiln's own name and version.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Version {
    version: &'static str,
    git_version: &'static str,
    name: &'static str,
    kiln_version: &'static str,
    api_version: &'static str,
}

/// The OvenMediaEngine release whose v1 API kiln follows.
pub const OME_API_VERSION: &str = "0.20.0";

impl Version {
    const CURRENT: Version = Version {
        version: OME_API_VERSION,
        git_version: concat!("v0.20.0-kiln-", env!("CARGO_PKG_VERSION")),
        name: "kiln",
        kiln_version: env!("CARGO_PKG_VERSION"),
        api_version: "v1",
    };
}

/// Actions on an application (`.../apps/{app}:name`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AppAction {
    StartPush,
    StopPush,
    Pushes,
    StartRecord,
    StopRecord,
    Records,
    /// Every pull of the application, live or not (kiln extension).
    Pulls,
}

/// The resources the API knows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    Version,
    /// `/v1/logs`: the last WARN and ERROR lines (kiln extension).
    Logs,
    /// `/v1/webrtc`: where WebRTC viewers connect (kiln extension).
    WebRtc,
    /// `/v1/stats/history`: the console's last five minutes (kiln extension).
    History,
    Vhosts,
    ReloadAllCertificates,
    Vhost(String),
    ReloadVhostCertificate(String),
    ReloadApiCertificate,
    Apps(String),
    App(String, String),
    AppAction(String, String, AppAction),
    Streams(String, String),
    Stream(String, String, String),
    /// `.../streams/{stream}/sessions` (kiln extension).
    Sessions(String, String, String),
    Session(String, String, String, String),
    /// `.../streams/{stream}:{action}`.
    StreamAction(String, String, String, StreamAction),
    Profiles(String, String),
    Profile(String, String, String),
    /// `.../scheduledChannels` or `.../multiplexChannels`.
    Channels(channels::ChannelKind, String, String),
    Channel(channels::ChannelKind, String, String, String),
    /// `/v1/stats/current[/vhosts/{vh}[/apps/{app}[/streams/{s}]]]`.
    Stats(Option<String>, Option<String>, Option<String>),
    /// `/metrics` (Prometheus text).
    Metrics,
    /// `/v1/openapi.yaml`.
    OpenApi,
}

/// What a `POST .../streams/{stream}:{action}` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StreamAction {
    SendEvent,
    SendEvents,
    ConcludeHlsLive,
    StartHlsDump,
    StopHlsDump,
    HlsDumps,
    SendSubtitles,
}

/// kiln's OpenAPI document (YAML in its JSON syntax), served at
/// `/v1/openapi.yaml`; generated by `src/api/openapi.py`.
pub const OPENAPI: &str = include_str!("openapi.yaml");

/// Every path the API answers, as the OpenAPI document writes them (a
/// unit test holds both to each other and to the router).
pub const ROUTE_TEMPLATES: &[&str] = &[
    "/v1/version",
    "/v1/logs",
    "/v1/webrtc",
    "/v1/vhosts",
    "/v1/vhosts:reloadAllCertificates",
    "/v1/vhosts/{vhost}",
    "/v1/vhosts/{vhost}:reloadCertificate",
    "/v1/managers/api:reloadCertificate",
    "/v1/vhosts/{vhost}/apps",
    "/v1/vhosts/{vhost}/apps/{app}",
    "/v1/vhosts/{vhost}/apps/{app}/outputProfiles",
    "/v1/vhosts/{vhost}/apps/{app}/outputProfiles/{profile}",
    "/v1/vhosts/{vhost}/apps/{app}/streams",
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}",
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}/sessions",
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}/sessions/{session}",
    "/v1/vhosts/{vhost}/apps/{app}/scheduledChannels",
    "/v1/vhosts/{vhost}/apps/{app}/scheduledChannels/{channel}",
    "/v1/vhosts/{vhost}/apps/{app}/multiplexChannels",
    "/v1/vhosts/{vhost}/apps/{app}/multiplexChannels/{channel}",
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:sendEvent",
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:sendEvents",
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:concludeHlsLive",
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:startHlsDump",
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:stopHlsDump",
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:hlsDumps",
    "/v1/vhosts/{vhost}/apps/{app}/streams/{stream}:sendSubtitles",
    "/v1/vhosts/{vhost}/apps/{app}:startPush",
    "/v1/vhosts/{vhost}/apps/{app}:stopPush",
    "/v1/vhosts/{vhost}/apps/{app}:pushes",
    "/v1/vhosts/{vhost}/apps/{app}:startRecord",
    "/v1/vhosts/{vhost}/apps/{app}:stopRecord",
    "/v1/vhosts/{vhost}/apps/{app}:records",
    "/v1/vhosts/{vhost}/apps/{app}:pulls",
    "/v1/stats/current",
    "/v1/stats/history",
    "/v1/stats/current/vhosts/{vhost}",
    "/v1/stats/current/vhosts/{vhost}/apps/{app}",
    "/v1/stats/current/vhosts/{vhost}/apps/{app}/streams/{stream}",
    "/metrics",
    "/v1/openapi.yaml",
];

fn channel_kind(segment: &str) -> channels::ChannelKind {
    if segment == "scheduledChannels" {
        channels::ChannelKind::Scheduled
    } else {
        channels::ChannelKind::Multiplex
    }
}

impl Route {
    fn parse(path: &str) -> Option<Route> {
        match path {
            "/metrics" => return Some(Route::Metrics),
            "/v1/openapi.yaml" => return Some(Route::OpenApi),
            _ => {}
        }
        let rest = path.strip_prefix("/v1/")?;
        // As OME: a trailing slash is an empty last name
        // (`/v1/vhosts/` asks for the virtual host [], a 404).
        let segments: Vec<&str> = rest.split('/').collect();
        Some(match segments.as_slice() {
            ["version"] => Route::Version,
            ["logs"] => Route::Logs,
            ["webrtc"] => Route::WebRtc,
            ["stats", "current"] => Route::Stats(None, None, None),
            ["stats", "history"] => Route::History,
            ["stats", "current", "vhosts", vh] => {
                Route::Stats(Some(percent_decode(vh)?), None, None)
            }
            ["stats", "current", "vhosts", vh, "apps", app] => {
                Route::Stats(Some(percent_decode(vh)?), Some(percent_decode(app)?), None)
            }
            ["stats", "current", "vhosts", vh, "apps", app, "streams", s] => Route::Stats(
                Some(percent_decode(vh)?),
                Some(percent_decode(app)?),
                Some(percent_decode(s)?),
            ),
            ["vhosts"] => Route::Vhosts,
            ["vhosts:reloadAllCertificates"] => Route::ReloadAllCertificates,
            ["managers", "api:reloadCertificate"] => Route::ReloadApiCertificate,
            ["vhosts", vh, "apps"] => Route::Apps(percent_decode(vh)?),
            ["vhosts", vh, "apps", app] => {
                let vh = percent_decode(vh)?;
                let app = percent_decode(app)?;
                match app.rsplit_once(':') {
                    None => Route::App(vh, app),
                    Some((name, action)) => {
                        let action = match action {
                            "startPush" => AppAction::StartPush,
                            "stopPush" => AppAction::StopPush,
                            "pushes" => AppAction::Pushes,
                            "startRecord" => AppAction::StartRecord,
                            "stopRecord" => AppAction::StopRecord,
                            "records" => AppAction::Records,
                            "pulls" => AppAction::Pulls,
                            _ => return None,
                        };
                        Route::AppAction(vh, name.to_string(), action)
                    }
                }
            }
            ["vhosts", vh, "apps", app, "outputProfiles"] => {
                Route::Profiles(percent_decode(vh)?, percent_decode(app)?)
            }
            ["vhosts", vh, "apps", app, "outputProfiles", p] => Route::Profile(
                percent_decode(vh)?,
                percent_decode(app)?,
                percent_decode(p)?,
            ),
            ["vhosts", vh, "apps", app, "streams"] => {
                Route::Streams(percent_decode(vh)?, percent_decode(app)?)
            }
            ["vhosts", vh, "apps", app, kind @ ("scheduledChannels" | "multiplexChannels")] => {
                Route::Channels(
                    channel_kind(kind),
                    percent_decode(vh)?,
                    percent_decode(app)?,
                )
            }
            ["vhosts", vh, "apps", app, kind @ ("scheduledChannels" | "multiplexChannels"), c] => {
                Route::Channel(
                    channel_kind(kind),
                    percent_decode(vh)?,
                    percent_decode(app)?,
                    percent_decode(c)?,
                )
            }
            ["vhosts", vh, "apps", app, "streams", s] => {
                let (vh, app, s) = (
                    percent_decode(vh)?,
                    percent_decode(app)?,
                    percent_decode(s)?,
                );
                let action = s.rsplit_once(':').and_then(|(name, action)| {
                    let action = match action {
                        "sendEvent" => StreamAction::SendEvent,
                        "sendEvents" => StreamAction::SendEvents,
                        "concludeHlsLive" => StreamAction::ConcludeHlsLive,
                        "startHlsDump" => StreamAction::StartHlsDump,
                        "stopHlsDump" => StreamAction::StopHlsDump,
                        "hlsDumps" => StreamAction::HlsDumps,
                        "sendSubtitles" => StreamAction::SendSubtitles,
                        _ => return None,
                    };
                    Some((name.to_string(), action))
                });
                match action {
                    Some((name, action)) => Route::StreamAction(vh, app, name, action),
                    // An action kiln does not have (no stream name holds
                    // `:`): OME's "Controller not found".
                    None if s.contains(':') => return None,
                    None => Route::Stream(vh, app, s),
                }
            }
            ["vhosts", vh, "apps", app, "streams", s, "sessions"] => Route::Sessions(
                percent_decode(vh)?,
                percent_decode(app)?,
                percent_decode(s)?,
            ),
            ["vhosts", vh, "apps", app, "streams", s, "sessions", id] => Route::Session(
                percent_decode(vh)?,
                percent_decode(app)?,
                percent_decode(s)?,
                percent_decode(id)?,
            ),
            ["vhosts", name] => {
                let name = percent_decode(name)?;
                match name.rsplit_once(':') {
                    Some((vh, "reloadCertificate")) => {
                        Route::ReloadVhostCertificate(vh.to_string())
                    }
                    Some(_) => return None,
                    None => Route::Vhost(name),
                }
            }
            _ => return None,
        })
    }

    fn methods(&self) -> &'static [&'static str] {
        match self {
            Route::Version
            | Route::Logs
            | Route::WebRtc
            | Route::Stats(..)
            | Route::History
            | Route::Metrics
            | Route::OpenApi => &["GET"],
            Route::Vhosts => &["GET", "POST"],
            Route::Vhost(_) => &["GET", "DELETE"],
            Route::ReloadAllCertificates
            | Route::ReloadVhostCertificate(_)
            | Route::ReloadApiCertificate => &["POST"],
            Route::Apps(_) => &["GET", "POST"],
            Route::App(..) => &["GET", "PATCH", "DELETE"],
            // OME keeps the deprecated GET form of the lists.
            Route::AppAction(_, _, AppAction::Pushes | AppAction::Records) => &["GET", "POST"],
            Route::AppAction(..) | Route::StreamAction(..) => &["POST"],
            Route::Streams(..) => &["GET", "POST"],
            Route::Stream(..) => &["GET", "DELETE"],
            Route::Sessions(..) => &["GET"],
            Route::Session(..) => &["DELETE"],
            Route::Profiles(..) => &["GET", "POST"],
            Route::Profile(..) => &["GET", "PATCH", "DELETE"],
            Route::Channels(..) => &["GET", "POST"],
            Route::Channel(channels::ChannelKind::Scheduled, ..) => &["GET", "PATCH", "DELETE"],
            Route::Channel(..) => &["GET", "DELETE"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A snapshot that names a task twice (a hand-edited file) keeps the
    /// later, says so, and drops a task that does not parse with its
    /// reason; the others stay in order.
    #[test]
    fn a_task_named_twice_in_a_snapshot_is_kept_once_the_later() {
        let push = |id: &str, stream: &str| {
            format!(
                r#"{{"id":"{id}","vhost":"a","app":"app","streamName":"{stream}","protocol":"mpegts","url":"udp://127.0.0.1:9","createdMs":1}}"#
            )
        };
        let text = format!(
            r#"{{"format":1,"vhosts":[],"pushes":[{},{},{{"id":1}},{}]}}"#,
            push("x", "first"),
            push("y", "s"),
            push("x", "second")
        );
        let saved: DurableState = serde_json::from_str(&text).unwrap();
        let mut skipped = Vec::new();
        let got: Vec<crate::push::request::PushSpec> =
            tasks_of(&saved, &crate::push::request::KIND, &mut skipped);
        let names: Vec<(&str, &str)> = (got.iter())
            .map(|p| (p.id.as_str(), p.stream_name.as_str()))
            .collect();
        assert_eq!(names, [("y", "s"), ("x", "second")]);
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(
            skipped[0].starts_with("push #3 in the state file"),
            "{skipped:?}"
        );
        assert!(
            skipped[1].contains("[a/app/x] is in the state file twice"),
            "{skipped:?}"
        );
    }

    /// The OpenAPI document's paths are exactly [`ROUTE_TEMPLATES`], each
    /// of which the router takes, with the methods the document lists.
    #[test]
    fn openapi_document_covers_every_route() {
        let json = OPENAPI.split_once('\n').map_or(OPENAPI, |(_, rest)| rest);
        let doc: serde_json::Value = serde_json::from_str(json).unwrap();
        let paths = doc["paths"].as_object().unwrap();
        let mut documented: Vec<&str> = paths.keys().map(String::as_str).collect();
        let mut templates = ROUTE_TEMPLATES.to_vec();
        documented.sort_unstable();
        templates.sort_unstable();
        assert_eq!(documented, templates);
        for t in ROUTE_TEMPLATES {
            let concrete = t
                .replace("{vhost}", "vh")
                .replace("{app}", "app")
                .replace("{profile}", "p")
                .replace("{channel}", "c")
                .replace("{stream}", "s");
            let route = Route::parse(&concrete).unwrap_or_else(|| panic!("{t}"));
            let mut methods: Vec<String> =
                route.methods().iter().map(|m| m.to_lowercase()).collect();
            let mut listed: Vec<String> = paths[*t]
                .as_object()
                .unwrap()
                .keys()
                .filter(|k| *k != "parameters")
                .cloned()
                .collect();
            methods.sort_unstable();
            listed.sort_unstable();
            assert_eq!(methods, listed, "{t}");
        }
    }

    #[test]
    fn routes() {
        assert_eq!(Route::parse("/v1/vhosts"), Some(Route::Vhosts));
        assert_eq!(
            Route::parse("/v1/vhosts/"),
            Some(Route::Vhost(String::new()))
        );
        assert_eq!(Route::parse("/v1/vhosts/a"), Some(Route::Vhost("a".into())));
        assert_eq!(
            Route::parse("/v1/vhosts/a%2Eb"),
            Some(Route::Vhost("a.b".into()))
        );
        assert_eq!(
            Route::parse("/v1/vhosts/a:reloadCertificate"),
            Some(Route::ReloadVhostCertificate("a".into()))
        );
        assert_eq!(
            Route::parse("/v1/vhosts/a%3AreloadCertificate"),
            Some(Route::ReloadVhostCertificate("a".into()))
        );
        assert_eq!(Route::parse("/v1/vhosts/a:nope"), None);
        assert_eq!(
            Route::parse("/v1/vhosts:reloadAllCertificates"),
            Some(Route::ReloadAllCertificates)
        );
        assert_eq!(
            Route::parse("/v1/managers/api:reloadCertificate"),
            Some(Route::ReloadApiCertificate)
        );
        assert_eq!(Route::parse("/v2/vhosts"), None);
        assert_eq!(Route::parse("/v1/vhosts/%zz"), None);
    }
}
