//! OME's channel endpoints:
//! `GET/POST /v1/vhosts/{vh}/apps/{app}/scheduledChannels`,
//! `GET/PATCH/DELETE .../scheduledChannels/{channel}`, and the same for
//! `multiplexChannels` (no PATCH). Bodies have the shape of the `.sch` and
//! `.mux` files. API-made channels are durable (the state file); channels
//! made by files are listed and shown, and follow their files (deleting
//! one through the API is refused: delete its file).

use super::envelope::{self, ApiError};
use super::{Api, Effect, Response};
use crate::channel::mux::MuxSpec;
use crate::channel::schedule::ScheduleSpec;
use crate::channel::{
    ChannelKey, MultiplexChannel, Origin, ScheduledChannel, MAX_CHANNELS, MULTIPLEX_KIND,
    SCHEDULED_KIND,
};
use crate::state::store::Change;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Which of the two kinds a request is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ChannelKind {
    Scheduled,
    Multiplex,
}

fn key(vhost: &str, app: &str, name: &str) -> ChannelKey {
    (vhost.to_string(), app.to_string(), name.to_string())
}

/// OME's `201 Created` (no `response`).
fn created() -> Response {
    Response::new(201, br#"{"message":"Created","statusCode":201}"#.to_vec())
}

fn not_found(vhost: &str, app: &str, name: &str) -> ApiError {
    ApiError::http(
        404,
        format_args!("Could not find the channel: [{vhost}/{app}/{name}]"),
    )
}

/// `PATCH .../scheduledChannels/{name}`: the programmes to replace.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SchedulePatch {
    stream: Option<serde_json::Value>,
    name: Option<serde_json::Value>,
    fallback_program: Option<crate::channel::schedule::FallbackProgram>,
    programs: Option<Vec<crate::channel::schedule::Program>>,
}

/// A scheduled channel as `GET` shows it (OME's shape).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ScheduledView<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    current_program: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fallback_program: Option<serde_json::Value>,
    programs: &'a [crate::channel::schedule::Program],
    /// OME's fields: `audioMap` (null when unset) and
    /// `errorToleranceDurationMs` (500 when unset) always there.
    stream: serde_json::Value,
    /// kiln extension: `api`, or the `.sch` file it comes from.
    source: String,
}

impl Api {
    pub(super) fn list_channels(
        &self,
        kind: ChannelKind,
        vhost: &str,
        app: &str,
    ) -> Result<Response, ApiError> {
        let (_, a) = self.app_or_404(vhost, app)?;
        if kind == ChannelKind::Multiplex && a.providers.multiplex.is_none() {
            // OME's answer for an application without <Multiplex>.
            return Err(ApiError::http(
                404,
                format_args!("Could not get the multiplex application"),
            ));
        }
        Ok(envelope::ok(self.channels.names(
            kind == ChannelKind::Scheduled,
            vhost,
            app,
        )))
    }

    /// The app, with the provider the kind needs.
    fn channel_app(&self, kind: ChannelKind, vhost: &str, app: &str) -> Result<(), ApiError> {
        let (_, a) = self.app_or_404(vhost, app)?;
        let enabled = match kind {
            ChannelKind::Scheduled => a.providers.schedule.is_some(),
            ChannelKind::Multiplex => a.providers.multiplex.is_some(),
        };
        if !enabled {
            let what = match kind {
                ChannelKind::Scheduled => "<Providers><Schedule> (providers.schedule)",
                ChannelKind::Multiplex => "<Providers><Multiplex> (providers.multiplex)",
            };
            return Err(ApiError::bad_request(format_args!(
                "The application [{vhost}/{app}] has no {what}"
            )));
        }
        Ok(())
    }

    pub(super) fn create_channel(
        &mut self,
        kind: ChannelKind,
        vhost: &str,
        app: &str,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        self.channel_app(kind, vhost, app)?;
        let value = envelope::object_body(body, false)?;
        let count = match kind {
            ChannelKind::Scheduled => self.channels.scheduled.len(),
            ChannelKind::Multiplex => self.channels.multiplex.len(),
        };
        if count >= MAX_CHANNELS {
            return Err(ApiError::bad_request(format_args!(
                "The limit of {MAX_CHANNELS} channels is reached"
            )));
        }
        let bad = |e: serde_json::Error| ApiError::bad_request(e);
        match kind {
            ChannelKind::Scheduled => {
                let mut spec: ScheduleSpec = serde_json::from_value(value).map_err(bad)?;
                spec.vhost = vhost.to_string();
                spec.app = app.to_string();
                spec.name = spec.stream.name.clone();
                self.check_new_name(vhost, app, &spec.name)?;
                let plan = spec.plan().map_err(ApiError::bad_request)?;
                self.check_no_loop(&spec.key(), &plan.streams())?;
                self.record_added(&SCHEDULED_KIND, &spec, "channel not created")?;
                let k = spec.key();
                crate::info!(
                    "scheduled channel [{vhost}/{app}/{}] created through the API",
                    spec.name
                );
                self.channels
                    .scheduled
                    .insert(k.clone(), ScheduledChannel::new(spec, Origin::Api));
                self.effects.push(Effect::ChannelChanged(k));
            }
            ChannelKind::Multiplex => {
                let mut spec: MuxSpec = serde_json::from_value(value).map_err(bad)?;
                spec.vhost = vhost.to_string();
                spec.app = app.to_string();
                spec.name = spec.output_stream.name.clone();
                self.check_new_name(vhost, app, &spec.name)?;
                let urls = spec.check().map_err(ApiError::bad_request)?;
                self.check_no_loop(&spec.key(), &urls)?;
                self.record_added(&MULTIPLEX_KIND, &spec, "channel not created")?;
                let k = spec.key();
                crate::info!(
                    "multiplex channel [{vhost}/{app}/{}] created through the API",
                    spec.name
                );
                self.channels
                    .multiplex
                    .insert(k.clone(), MultiplexChannel::new(spec, Origin::Api));
                self.effects.push(Effect::ChannelChanged(k));
            }
        }
        Ok(created())
    }

    /// A channel must not read its own output, directly or through other
    /// channels (it would read what it writes as fast as the loop turns).
    fn check_no_loop(
        &self,
        k: &ChannelKey,
        inputs: &[crate::channel::StreamUrl],
    ) -> Result<(), ApiError> {
        match self.channels.loop_through(k, inputs) {
            Some(l) => Err(ApiError::bad_request(format_args!(
                "The channel would play its own output: {l}"
            ))),
            None => Ok(()),
        }
    }

    fn check_new_name(&self, vhost: &str, app: &str, name: &str) -> Result<(), ApiError> {
        if !crate::state::vhost::valid_name(name) {
            return Err(ApiError::bad_request(format_args!(
                "The stream name [{name}] is missing or not valid"
            )));
        }
        if self.channels.has(vhost, app, name)
            || self.registry.streams.find(vhost, app, name).is_some()
        {
            return Err(ApiError::http(
                409,
                format_args!("Stream [{name}] already exists in [{vhost}/{app}]"),
            ));
        }
        Ok(())
    }

    pub(super) fn get_channel(
        &self,
        kind: ChannelKind,
        vhost: &str,
        app: &str,
        name: &str,
    ) -> Result<Response, ApiError> {
        self.app_or_404(vhost, app)?;
        let k = key(vhost, app, name);
        let source = |o: &Origin| match o {
            Origin::Api => "api".to_string(),
            Origin::File(p) => p.display().to_string(),
        };
        match kind {
            ChannelKind::Scheduled => {
                let c = self
                    .channels
                    .scheduled
                    .get(&k)
                    .ok_or_else(|| not_found(vhost, app, name))?;
                Ok(envelope::ok(ScheduledView {
                    current_program: c.now.as_ref().map(|n| self.current_program(&c.spec, n)),
                    fallback_program: c.spec.fallback_program.as_ref().map(|f| {
                        serde_json::json!({
                            "items": f.items,
                            "name": "fallback",
                            "repeat": true,
                            "scheduled": "1970-01-01T00:00:00Z",
                        })
                    }),
                    programs: &c.spec.programs,
                    stream: {
                        let s = &c.spec.stream;
                        let mut v = serde_json::to_value(s).unwrap_or_default();
                        if let Some(o) = v.as_object_mut() {
                            o.entry("audioMap").or_insert(serde_json::Value::Null);
                            o.insert(
                                "errorToleranceDurationMs".into(),
                                s.error_tolerance_duration_ms.unwrap_or(500).into(),
                            );
                        }
                        v
                    },
                    source: source(&c.origin),
                }))
            }
            ChannelKind::Multiplex => {
                let c = self
                    .channels
                    .multiplex
                    .get(&k)
                    .ok_or_else(|| not_found(vhost, app, name))?;
                let mut v = serde_json::to_value(&c.spec).unwrap_or_default();
                if let Some(o) = v.as_object_mut() {
                    o.remove("vhost");
                    o.remove("app");
                    o.remove("name");
                    o.insert("state".into(), c.state.into());
                    o.insert("pullingMessage".into(), c.message.clone().into());
                    o.insert("source".into(), source(&c.origin).into());
                    // OME shows `options` on every playlist (null unset).
                    if let Some(Value::Array(lists)) = o.get_mut("playlists") {
                        for p in lists.iter_mut().filter_map(Value::as_object_mut) {
                            p.entry("options").or_insert(Value::Null);
                        }
                    }
                }
                Ok(envelope::ok(v))
            }
        }
    }

    /// OME's `currentProgram`: the programme (or fallback) and its item;
    /// only the state when nothing plays.
    fn current_program(
        &self,
        spec: &ScheduleSpec,
        n: &crate::channel::NowPlaying,
    ) -> serde_json::Value {
        let Some(c) = n.playing else {
            return serde_json::json!({ "state": n.state });
        };
        let now = self.now.unix_ms;
        let fallback = Vec::new();
        let (name, scheduled, repeat, items) = match c.program.and_then(|p| spec.programs.get(p)) {
            Some(p) => (p.name.as_str(), p.scheduled.as_str(), p.repeat, &p.items),
            None => (
                "fallback",
                "1970-01-01T00:00:00Z",
                true,
                spec.fallback_program
                    .as_ref()
                    .map_or(&fallback, |f| &f.items),
            ),
        };
        // OME's `duration` and `end`: a repeating programme has none (-1,
        // and OME's farthest time as its end).
        let duration: i64 = if repeat {
            -1
        } else {
            items.iter().map(|i| i.duration.max(0)).sum()
        };
        let end = match crate::clock::parse_iso8601(scheduled) {
            Some(start) if duration >= 0 => {
                crate::clock::format_iso8601(start.saturating_add(duration), self.utc_offset)
            }
            _ => "2262-04-11T23:47:16.854+00:00".to_string(),
        };
        let item = items.get(c.item).map(|i| {
            // An item with a duration is where the schedule has it; one
            // without (a live stream, a file to its end) is as far in as
            // it has played since it began (not since its programme's
            // scheduled time).
            let since = if i.duration > 0 {
                c.since_ms
            } else {
                n.since_ms
            };
            serde_json::json!({
                "url": i.url,
                "start": i.start,
                "duration": i.duration,
                "currentPosition": (now - since).max(0),
            })
        });
        serde_json::json!({
            "name": name,
            "scheduled": scheduled,
            "repeat": repeat,
            "duration": duration,
            "end": end,
            "state": n.state,
            "currentItem": item,
        })
    }

    pub(super) fn patch_channel(
        &mut self,
        vhost: &str,
        app: &str,
        name: &str,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        self.app_or_404(vhost, app)?;
        let k = key(vhost, app, name);
        let c = self
            .channels
            .scheduled
            .get(&k)
            .ok_or_else(|| not_found(vhost, app, name))?;
        if c.origin != Origin::Api {
            return Err(ApiError::bad_request(
                "The channel is made by a .sch file: change the file",
            ));
        }
        let value = envelope::object_body(body, false)?;
        let patch: SchedulePatch = serde_json::from_value(value).map_err(ApiError::bad_request)?;
        if patch.stream.is_some() {
            return Err(ApiError::bad_request("Stream object could not be patched"));
        }
        if patch.name.is_some() {
            return Err(ApiError::bad_request("Cannot change [name] using this API"));
        }
        let mut spec = c.spec.clone();
        if let Some(f) = patch.fallback_program {
            spec.fallback_program = Some(f);
        }
        if let Some(p) = patch.programs {
            spec.programs = p;
        }
        let plan = spec.plan().map_err(ApiError::bad_request)?;
        self.check_no_loop(&k, &plan.streams())?;
        // The journal keeps one record per channel: the old one goes.
        self.record(
            Change::delete_task(&SCHEDULED_KIND, vhost, app, name),
            "channel not changed",
        )?;
        self.record_added(&SCHEDULED_KIND, &spec, "channel not changed")?;
        if let Some(c) = self.channels.scheduled.get_mut(&k) {
            c.spec = spec;
        }
        crate::info!("scheduled channel [{vhost}/{app}/{name}] changed through the API");
        self.effects.push(Effect::ChannelChanged(k));
        // OME answers a change as it answers a creation.
        Ok(created())
    }

    pub(super) fn delete_channel(
        &mut self,
        kind: ChannelKind,
        vhost: &str,
        app: &str,
        name: &str,
    ) -> Result<Response, ApiError> {
        self.app_or_404(vhost, app)?;
        let k = key(vhost, app, name);
        let origin = match kind {
            ChannelKind::Scheduled => self.channels.scheduled.get(&k).map(|c| c.origin.clone()),
            ChannelKind::Multiplex => self.channels.multiplex.get(&k).map(|c| c.origin.clone()),
        }
        .ok_or_else(|| not_found(vhost, app, name))?;
        if let Origin::File(p) = origin {
            return Err(ApiError::bad_request(format_args!(
                "The channel is made by the file [{}]: delete the file",
                p.display()
            )));
        }
        let task_kind = match kind {
            ChannelKind::Scheduled => &SCHEDULED_KIND,
            ChannelKind::Multiplex => &MULTIPLEX_KIND,
        };
        self.record(
            Change::delete_task(task_kind, vhost, app, name),
            "channel not deleted",
        )?;
        match kind {
            ChannelKind::Scheduled => self.channels.scheduled.remove(&k).map(|_| ()),
            ChannelKind::Multiplex => self.channels.multiplex.remove(&k).map(|_| ()),
        };
        crate::info!("channel [{vhost}/{app}/{name}] deleted through the API");
        self.effects.push(Effect::ChannelChanged(k));
        Ok(envelope::ok_empty())
    }

    /// Drops the channels of an app (or host) being deleted (their journal
    /// records go with the app's); their streams end with the restart.
    pub(super) fn drop_channels_of(&mut self, vhost: &str, app: Option<&str>) {
        for k in self.channels.remove_of(vhost, app) {
            self.effects.push(Effect::ChannelChanged(k));
        }
    }
}

impl Api {
    /// Can a `kind` channel of the state file be restored: its
    /// application still there and its spec `valid`? Why not goes to
    /// `skipped`.
    fn restorable(
        &self,
        kind: &str,
        (vhost, app, name): &ChannelKey,
        valid: Result<(), String>,
        skipped: &mut Vec<String>,
    ) -> bool {
        let why = if self.registry.app(vhost, app).is_none() {
            "the application is gone".to_string()
        } else if let Err(e) = valid {
            e
        } else {
            return true;
        };
        skipped.push(format!(
            "{kind} channel [{vhost}/{app}/{name}] in the state file: {why}; dropped"
        ));
        false
    }

    /// The API-made channels of a loaded state file.
    pub(super) fn restore_channels(
        &mut self,
        scheduled: Vec<ScheduleSpec>,
        multiplex: Vec<MuxSpec>,
        skipped: &mut Vec<String>,
    ) {
        for spec in scheduled {
            let k = spec.key();
            if !self.restorable("scheduled", &k, spec.plan().map(drop), skipped) {
                continue;
            }
            self.channels
                .scheduled
                .insert(k, ScheduledChannel::new(spec, Origin::Api));
        }
        for spec in multiplex {
            let k = spec.key();
            if !self.restorable("multiplex", &k, spec.check().map(drop), skipped) {
                continue;
            }
            self.channels
                .multiplex
                .insert(k, MultiplexChannel::new(spec, Origin::Api));
        }
    }
}
