//! The model: one plain-data registry of the virtual hosts (from the config
//! file or the API) with their applications, and the live streams. Every
//! feature reads it; each keeps its own tasks. [`store`] keeps the API-made
//! part on disk, the features' tasks by kind ([`store::TaskKind`]), and
//! [`task`] is what every kind of task shares.

pub mod app;
pub mod name;
pub mod playlists;
pub mod store;
pub mod streams;
pub mod task;
pub mod track_stats;
pub mod vhost;

use app::AppSpec;
use std::collections::HashMap;
use store::{DurableState, FORMAT};
use streams::Streams;
use vhost::VhostSpec;

/// See [`Registry::live_outputs`].
#[derive(Debug, Default)]
#[allow(clippy::type_complexity)]
pub struct LiveOutputs<'a>(HashMap<&'a str, HashMap<&'a str, HashMap<String, streams::StreamId>>>);

impl LiveOutputs<'_> {
    /// The stream whose output `output_name` of `vhost`/`app` is.
    pub fn get(&self, vhost: &str, app: &str, output_name: &str) -> Option<streams::StreamId> {
        self.0.get(vhost)?.get(app)?.get(output_name).copied()
    }
}

/// Where a virtual host was declared. Config-file hosts, and their
/// applications, are read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    ConfigFile,
    Api,
}

#[derive(Debug, Clone)]
pub struct Vhost {
    /// The host; `spec.applications` is always `None` here (see `apps`).
    pub spec: VhostSpec,
    pub origin: Origin,
    pub apps: Vec<AppSpec>,
}

impl Vhost {
    /// `distribution`: the host's own, else the server's `<Name>`, else `kiln`.
    pub fn distribution<'a>(&'a self, server_name: Option<&'a str>) -> &'a str {
        self.spec
            .distribution
            .as_deref()
            .or(server_name)
            .unwrap_or("kiln")
    }

    pub fn app(&self, name: &str) -> Option<&AppSpec> {
        self.apps.iter().find(|a| a.name == name)
    }
}

#[derive(Debug, Default)]
pub struct Registry {
    /// Creation order, config-file hosts first.
    vhosts: Vec<Vhost>,
    pub server_name: Option<String>,
    /// `<Server><DiskBudget>`: all recordings together.
    pub disk_budget: Option<app::DiskBudget>,
    /// Live streams (run-time only).
    pub streams: Streams,
}

impl Registry {
    /// A registry of the config file's hosts (read-only) with their
    /// applications; `config::Config::registry` builds it.
    pub fn new(server_name: Option<String>, vhosts: Vec<(VhostSpec, Vec<AppSpec>)>) -> Self {
        Registry {
            vhosts: vhosts
                .into_iter()
                .map(|(spec, apps)| Vhost {
                    spec,
                    origin: Origin::ConfigFile,
                    apps,
                })
                .collect(),
            server_name,
            disk_budget: None,
            streams: Streams::default(),
        }
    }

    /// Adds the API-made hosts of a loaded state file (its tasks are the
    /// features' to restore). Returns the names skipped because the config
    /// file now declares them.
    pub fn restore(&mut self, vhosts: Vec<VhostSpec>) -> Vec<String> {
        let mut skipped = Vec::new();
        for spec in vhosts {
            if self.vhost(&spec.name).is_some() {
                skipped.push(format!(
                    "virtual host [{}] in the state file is now declared in the configuration file; the configuration wins",
                    spec.name
                ));
            } else {
                self.add_api_vhost(spec);
            }
        }
        skipped
    }

    pub fn vhosts(&self) -> &[Vhost] {
        &self.vhosts
    }

    pub fn vhost(&self, name: &str) -> Option<&Vhost> {
        self.vhosts.iter().find(|v| v.spec.name == name)
    }

    /// The host an RTMP publisher reaches: the first whose `host.names`
    /// match the tcUrl's host.
    ///
    /// DECISIONS 4 (amended): an exact name beats a pattern
    /// (`*.example.com`, the longest pattern first), which beats `*`,
    /// whatever the order of the hosts; among equals, the first in order
    /// (config-file hosts, then API-made ones by creation).
    /// The (vhost, app, stream name) an MPEG-TS port feeds: the first
    /// application, in registry order, whose stream map has the port.
    pub fn mpegts_stream(&self, port: u16) -> Option<(String, String, String)> {
        self.vhosts().iter().find_map(|v| {
            v.apps.iter().find_map(|a| {
                a.mpegts_streams()
                    .into_iter()
                    .find(|(p, _)| *p == port)
                    .map(|(_, name)| (v.spec.name.clone(), a.name.clone(), name))
            })
        })
    }

    pub fn vhost_serving(&self, host: &str) -> Option<&Vhost> {
        // (rank, pattern length) of the best match so far: lower rank wins,
        // then the longer pattern.
        let mut best: Option<((u8, std::cmp::Reverse<usize>), &Vhost)> = None;
        for v in &self.vhosts {
            for pattern in &v.spec.host.names {
                let rank = if pattern == "*" {
                    2
                } else if pattern.contains(['*', '?']) {
                    1
                } else {
                    0
                };
                let key = (rank, std::cmp::Reverse(pattern.len()));
                if best.as_ref().is_some_and(|(b, _)| *b <= key) {
                    continue;
                }
                if crate::wildcard::matches(pattern, host) {
                    best = Some((key, v));
                }
            }
        }
        best.map(|(_, v)| v)
    }

    /// The host an SRT streamid names: by vhost name first, else as
    /// [`Registry::vhost_serving`]; no host: the first that serves any name.
    pub fn vhost_for_stream_id(&self, host: Option<&str>) -> Option<&Vhost> {
        let host = host.unwrap_or("*");
        self.vhost(host).or_else(|| self.vhost_serving(host))
    }

    /// The live stream whose output `output_name` is, with the output
    /// profile that makes it (None: no profiles, the input itself).
    pub fn output_stream(
        &self,
        vhost: &str,
        app: &str,
        output_name: &str,
    ) -> Option<(streams::StreamId, Option<&app::OutputProfile>)> {
        let spec = self.app(vhost, app)?;
        // The oldest stream wins a name; no list is built (every viewer
        // request asks this).
        self.streams
            .iter()
            .filter(|s| s.vhost == vhost && s.app == app)
            .filter_map(|s| Some((s.id, spec.output_named(&s.name, output_name)?)))
            .min_by_key(|(id, _)| *id)
    }

    /// A stream's tracks changed: its provider's `AudioMap` labels them,
    /// and OME's `<Playlist>` templates name them.
    pub fn on_tracks_changed(&mut self, id: streams::StreamId) {
        self.label_audio(id);
        self.refresh_template_playlists(id);
    }

    /// Labels an SRT or MPEG-TS stream's audio tracks with its provider's
    /// `AudioMap` (OME's; over what the source said).
    fn label_audio(&mut self, id: streams::StreamId) {
        let Some(s) = self.streams.get(id) else {
            return;
        };
        let Some(spec) = self.app(&s.vhost, &s.app) else {
            return;
        };
        let map = match s.source {
            streams::SourceType::Srt => spec.providers.srt.as_ref().map(|p| &p.audio_map),
            streams::SourceType::MpegTs => spec.providers.mpegts.as_ref().map(|p| &p.audio_map),
            _ => None,
        };
        let labels = app::audio_labels(map.map_or(&[][..], |m| &m[..]));
        if labels.is_empty() {
            return;
        }
        let mut tracks = s.tracks().to_vec();
        crate::media::label_audio(&mut tracks, &labels);
        let labels = tracks.into_iter().map(|t| t.label).collect();
        self.streams.set_labels(id, labels);
    }

    /// A stream's playlists from its output profile's `<Playlist>`
    /// templates (OME's; see [`playlists`]), made again when its tracks
    /// change. Channels make their own.
    fn refresh_template_playlists(&mut self, id: streams::StreamId) {
        let Some(s) = self.streams.get(id) else {
            return;
        };
        if matches!(
            s.source,
            streams::SourceType::Scheduled | streams::SourceType::Multiplex
        ) {
            return;
        }
        let Some(Some(profile)) = self
            .app(&s.vhost, &s.app)
            .and_then(|spec| spec.output_named(&s.name, &s.name))
        else {
            return;
        };
        if profile.playlists.is_empty() {
            return;
        }
        let made = playlists::template_playlists(profile, s.tracks());
        if made != s.playlists {
            self.streams.set_playlists(id, made);
        }
    }

    /// Every output name of every live stream: vhost -> app -> output name
    /// -> stream (the oldest stream wins a name, as in `output_stream`).
    /// Built once per reconcile so that each of thousands of push tasks
    /// costs one lookup.
    pub fn live_outputs(&self) -> LiveOutputs<'_> {
        let mut out = LiveOutputs::default();
        for s in self.streams.oldest_first() {
            let Some(spec) = self.app(&s.vhost, &s.app) else {
                continue;
            };
            let names = out
                .0
                .entry(&s.vhost)
                .or_default()
                .entry(&s.app)
                .or_default();
            for (name, _) in spec.output_names(&s.name) {
                names.entry(name).or_insert(s.id);
            }
        }
        out
    }

    pub fn vhost_mut(&mut self, name: &str) -> Option<&mut Vhost> {
        self.vhosts.iter_mut().find(|v| v.spec.name == name)
    }

    pub fn app(&self, vhost: &str, app: &str) -> Option<&AppSpec> {
        self.vhost(vhost).and_then(|v| v.app(app))
    }

    /// Adds a host made through the API; its `applications` become its apps.
    pub fn add_api_vhost(&mut self, mut spec: VhostSpec) {
        let apps = spec.applications.take().unwrap_or_default();
        self.vhosts.push(Vhost {
            spec,
            origin: Origin::Api,
            apps,
        });
    }

    pub fn remove_vhost(&mut self, name: &str) -> Option<Vhost> {
        let i = self.vhosts.iter().position(|v| v.spec.name == name)?;
        Some(self.vhosts.remove(i))
    }

    /// The part of the registry the state file keeps: API-made hosts with
    /// their applications (the features add their tasks).
    pub fn durable(&self) -> DurableState {
        DurableState {
            format: FORMAT,
            vhosts: self
                .vhosts
                .iter()
                .filter(|v| v.origin == Origin::Api)
                .map(|v| {
                    let mut spec = v.spec.clone();
                    spec.applications = if v.apps.is_empty() {
                        None
                    } else {
                        Some(v.apps.clone())
                    };
                    spec
                })
                .collect(),
            tasks: Default::default(),
            journal_seq: 0,
        }
    }
}

/// Why a virtual host, application or output profile is refused: the
/// checks serde cannot express. Each names the field; the texts are here,
/// and the API wraps them in one place (`ApiError::InvalidSpec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpecError {
    /// A vhost or application name outside 1-255 letters, digits, '-',
    /// '_' or '.'.
    BadName(String),
    /// An application type other than `live`.
    NotLive(String),
    /// A field that must not be empty (its path).
    Empty(String),
    /// `host.names` has an empty entry.
    EmptyHostName(String),
    /// A `host.names` entry that is not a host pattern.
    NotAHostName(String),
    /// A name given twice: ("output profile", name) or ("applications:", name).
    Twice { what: &'static str, name: String },
    /// An output profile's problem.
    Profile {
        profile: String,
        problem: ProfileProblem,
    },
    /// An `enables` list names an unknown protocol.
    UnknownProtocol {
        field: String,
        item: String,
        known: String,
    },
    /// A value of the wrong form (the field and what it must be).
    Form { field: String, must: &'static str },
    /// A StreamMap port that does not parse.
    StreamMapPort { stream: String, why: String },
    /// An `audioMap` item that is not a label (its path, why).
    AudioMap { field: String, why: String },
    /// The error of an item inside a list (its path, e.g. `applications[2]`).
    At { path: String, inner: Box<SpecError> },
}

/// What is wrong inside an output profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProfileProblem {
    NoOutputStreamName,
    /// An encode without a name (`videos`, `audios` or `datas`).
    UnnamedEncode(&'static str),
    /// An encode that transcodes.
    Transcodes(String),
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SpecError::BadName(n) => {
                write!(f, "name [{n}] must be 1-255 letters, digits, '-', '_' or '.'")
            }
            SpecError::NotLive(t) => {
                write!(f, "type [{t}] is not supported; kiln serves live applications")
            }
            SpecError::Empty(field) => write!(f, "{field} must not be empty"),
            SpecError::EmptyHostName(n) => write!(f, "host.names has an empty entry [{n}]"),
            SpecError::NotAHostName(n) => write!(
                f,
                "host.names entry [{n}] is not a host name: at most 253 letters, digits, '-', '_', '.', ':' (IPv6) and the wildcards '*' and '?'"
            ),
            SpecError::Twice { what, name } => write!(f, "{what} [{name}] appears twice"),
            SpecError::Profile { profile, problem } => {
                write!(f, "output profile [{profile}]: ")?;
                match problem {
                    ProfileProblem::NoOutputStreamName => f.write_str("outputStreamName is empty"),
                    ProfileProblem::UnnamedEncode(kind) => {
                        write!(f, "encodes.{kind}[].name must not be empty")
                    }
                    ProfileProblem::Transcodes(e) => write!(
                        f,
                        "encode [{e}] is not a bypass; kiln relays streams and does not transcode (set \"bypass\": true, or \"codec\" with \"bypassIfMatch\": {{\"codec\": \"eq\"}})"
                    ),
                }
            }
            SpecError::UnknownProtocol { field, item, known } => {
                write!(f, "{field}: unknown protocol [{item}] (known: {known})")
            }
            SpecError::Form { field, must } => write!(f, "{field} {must}"),
            SpecError::StreamMapPort { stream, why } => {
                write!(f, "providers.mpegts.streamMap.stream [{stream}]: port {why}")
            }
            SpecError::AudioMap { field, why } => write!(f, "{field}: {why}"),
            SpecError::At { path, inner } => write!(f, "{path}: {inner}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::streams::SourceType;

    const CONFIG: &str = r#"<?xml version="1.0"?>
<Server version="8">
  <Name>t</Name>
  <Bind><Managers><API><Port>8081</Port></API></Managers></Bind>
  <Managers><API><AccessToken>a:b</AccessToken></API></Managers>
  <VirtualHosts><VirtualHost><Name>default</Name>
    <Applications><Application><Name>app</Name><Type>live</Type>
      <OutputProfiles>
        <OutputProfile><Name>same</Name><OutputStreamName>${OriginStreamName}</OutputStreamName>
          <Encodes><Video><Name>v</Name><Bypass>true</Bypass></Video></Encodes></OutputProfile>
        <OutputProfile><Name>fixed</Name><OutputStreamName>fixed</OutputStreamName>
          <Encodes><Video><Name>w</Name><Bypass>true</Bypass></Video></Encodes></OutputProfile>
      </OutputProfiles>
      <Publishers><Push/></Publishers>
    </Application></Applications>
  </VirtualHost></VirtualHosts>
</Server>
"#;

    /// DECISIONS 4 (amended): exact names beat patterns (longest first),
    /// which beat `*`, whatever the order of the hosts.
    #[test]
    fn the_most_specific_host_name_wins() {
        let vhost = |name: &str, names: &[&str]| {
            let names: String = names.iter().map(|n| format!("<Name>{n}</Name>")).collect();
            format!(
                "<VirtualHost><Name>{name}</Name><Host><Names>{names}</Names></Host></VirtualHost>"
            )
        };
        let config = format!(
            r#"<?xml version="1.0"?>
<Server version="8"><Name>t</Name>
  <Bind><Managers><API><Port>8081</Port></API></Managers></Bind>
  <Managers><API><AccessToken>a:b</AccessToken></API></Managers>
  <VirtualHosts>{}{}{}{}</VirtualHosts></Server>"#,
            vhost("default", &["*"]),
            vhost("pattern", &["*.example.com"]),
            vhost("longer", &["*.live.example.com"]),
            vhost("exact", &["other.test", "live.example.com"]),
        );
        let parsed = crate::config::parse(std::path::Path::new("t.xml"), &config, &|_| None)
            .expect("test config parses");
        let reg = parsed.config.registry();
        for (host, want) in [
            ("live.example.com", "exact"),
            ("LIVE.example.com", "exact"),
            ("a.live.example.com", "longer"),
            ("b.example.com", "pattern"),
            ("elsewhere.test", "default"),
        ] {
            let got = reg.vhost_serving(host).map(|v| v.spec.name.as_str());
            assert_eq!(got, Some(want), "{host}");
        }
    }

    /// `live_outputs` (one map per reconcile) answers as `output_stream`
    /// (one search per task) does, the oldest stream winning a shared name.
    #[test]
    fn live_outputs_agree_with_output_stream() {
        let parsed = crate::config::parse(std::path::Path::new("t.xml"), CONFIG, &|_| None)
            .expect("test config parses");
        let mut reg = parsed.config.registry();
        let first = reg
            .streams
            .start("default", "app", "s1", SourceType::Rtmp, 1, 0)
            .expect("s1 starts");
        let second = reg
            .streams
            .start("default", "app", "s2", SourceType::Srt, 2, 0)
            .expect("s2 starts");
        let outputs = reg.live_outputs();
        for (name, want) in [
            ("s1", Some(first)),
            ("s2", Some(second)),
            ("fixed", Some(first)),
            ("s3", None),
        ] {
            assert_eq!(outputs.get("default", "app", name), want, "{name}");
            assert_eq!(
                reg.output_stream("default", "app", name).map(|(id, _)| id),
                want,
                "{name}"
            );
        }
        assert_eq!(outputs.get("default", "other", "s1"), None);
        assert_eq!(outputs.get("nohost", "app", "s1"), None);
    }
}
