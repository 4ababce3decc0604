//! `:startPush`, `:stopPush` and `:pushes` (specification "Start/Stop push
//! publishing", "Get push publishing state"; DECISIONS section 7). The
//! handlers change the task table and persist it; the loop starts and stops
//! the sessions (effects).

use super::envelope::{self, ApiError};
use super::{Api, Effect};
use crate::clock;
use crate::info;
use crate::push::request::{self, Destination, PushSpec, StartPushRequest};
use crate::push::task::{PushState, PushTask};
use crate::state::store::Change;
use serde::{Deserialize, Serialize};
use std::net::IpAddr;
use std::time::Instant;

/// A task as the API shows it (the specification's fields, then lastError).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PushView<'a> {
    id: &'a str,
    state: &'static str,
    vhost: &'a str,
    app: &'a str,
    stream: StreamView<'a>,
    protocol: &'static str,
    url: &'a str,
    stream_key: &'a str,
    sent_bytes: u64,
    sent_time: u64,
    sequence: u64,
    #[serde(rename = "totalsentBytes")]
    total_sent_bytes: u64,
    #[serde(rename = "totalsentTime")]
    total_sent_time: u64,
    created_time: clock::IsoTime,
    start_time: clock::IsoTime,
    finish_time: clock::IsoTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<&'a str>,
    /// When `lastError` happened (kiln extension).
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error_time: Option<clock::IsoTime>,
    /// Frames this destination could not take in time (kiln extension).
    dropped_frames: u64,
    /// OME's flag for tasks made by `<Push><StreamMap>`: kiln's tasks all
    /// come from the API.
    is_config: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StreamView<'a> {
    name: &'a str,
    track_ids: &'a [u32],
    variant_names: &'a [String],
}

impl<'a> PushView<'a> {
    pub fn of(t: &'a PushTask, now: Instant, offset: i32) -> Self {
        let time = |ms: Option<i64>| clock::IsoTime::new(ms.unwrap_or(0), offset);
        let sent_time = t.sent_ms(now);
        PushView {
            id: &t.spec.id,
            state: t.state.name(),
            vhost: &t.spec.vhost,
            app: &t.spec.app,
            stream: StreamView {
                name: &t.spec.stream_name,
                track_ids: &t.spec.track_ids,
                variant_names: &t.spec.variant_names,
            },
            protocol: t.spec.protocol.name(),
            url: &t.spec.url,
            stream_key: &t.spec.stream_key,
            sent_bytes: t.sent_bytes,
            sent_time,
            sequence: t.sequence,
            total_sent_bytes: t.ended_bytes + t.sent_bytes,
            total_sent_time: t.ended_ms + sent_time,
            created_time: time(Some(t.spec.created_ms)),
            start_time: time(t.start_ms),
            finish_time: time(t.finish_ms),
            last_error: t.last_error.as_deref(),
            last_error_time: t.last_error_ms.map(|ms| time(Some(ms))),
            dropped_frames: t.dropped_frames,
            is_config: false,
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct IdBody {
    id: Option<String>,
}

/// kiln's own ingest listeners (from the config) and this host's addresses.
#[derive(Debug, Clone, Default)]
pub struct OwnIngest {
    pub rtmp_port: Option<u16>,
    pub srt_port: Option<u16>,
    pub mpegts_ports: Vec<u16>,
    /// The bind address and the interfaces' addresses.
    pub addresses: Vec<IpAddr>,
}

impl OwnIngest {
    /// Is `host` (a URL's host) this machine?
    fn is_local(&self, host: &str) -> bool {
        if host.eq_ignore_ascii_case("localhost") {
            return true;
        }
        host.parse::<IpAddr>()
            .is_ok_and(|ip| ip.is_loopback() || ip.is_unspecified() || self.addresses.contains(&ip))
    }
}

fn parse_body<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, ApiError> {
    super::envelope::typed_body(body, "Invalid request")
}

impl Api {
    /// vhost (404), app (404, also when push is not enabled).
    fn push_app(&self, vhost: &str, app: &str) -> Result<(), ApiError> {
        let (_, a) = self.app_or_404(vhost, app)?;
        if !a.push_enabled() {
            return Err(ApiError::http(
                404,
                format_args!("Push publishing is not enabled for the application: [{vhost}/{app}]"),
            ));
        }
        Ok(())
    }

    pub(super) fn start_push(
        &mut self,
        vhost: &str,
        app: &str,
        body: &[u8],
    ) -> Result<super::Response, ApiError> {
        self.push_app(vhost, app)?;
        let req: StartPushRequest = envelope::from_object(envelope::object_body(body, false)?)?;
        let spec_app = self.registry.app(vhost, app).cloned();
        let has_encode = |n: &str| spec_app.as_ref().is_some_and(|a| a.has_encode(n));
        let (spec, destination) =
            request::validate_start(req, vhost, app, self.now.unix_ms, &has_encode)?;
        if self.pushes.tasks.get(vhost, app, &spec.id).is_some() {
            return Err(ApiError::http(
                409,
                format_args!("Duplicate ID: [{}]", spec.id),
            ));
        }
        if let Some(why) = self.feeds_itself(vhost, app, &spec, &destination) {
            return Err(ApiError::bad_request(why));
        }
        if self.pushes.tasks.len() >= self.limits.max_push_tasks {
            return Err(ApiError::bad_request(format_args!(
                "The limit of {} push tasks is reached (Managers/API/Limits/MaxPushTasks)",
                self.limits.max_push_tasks
            )));
        }
        self.record_added(&crate::push::request::KIND, &spec, "push not started")?;
        let id = spec.id.clone();
        info!(
            "push [{vhost}/{app}/{id}] created: {} {} for stream [{}]",
            spec.protocol.name(),
            request::redacted_url(&spec.url),
            spec.stream_name
        );
        let live = self
            .registry
            .output_stream(vhost, app, &spec.stream_name)
            .is_some();
        let mut task = PushTask::new(spec, destination);
        if live {
            // The loop opens the session right after this answer.
            task.session_started(self.now.unix_ms);
        }
        self.pushes.tasks.insert(task);
        self.effects.push(Effect::PushAdded {
            vhost: vhost.to_string(),
            app: app.to_string(),
            id: id.clone(),
        });
        let task = self
            .pushes
            .tasks
            .get(vhost, app, &id)
            .ok_or_else(ApiError::internal)?;
        Ok(envelope::ok(PushView::of(
            task,
            self.now.instant,
            self.utc_offset,
        )))
    }

    /// Why a push would feed the very stream it reads (a loop that keeps
    /// the stream alive forever), or `None`: its destination is one of
    /// kiln's own ingest ports on this host, and what arrives there becomes
    /// the stream the push sends (DECISIONS section 15).
    fn feeds_itself(
        &self,
        vhost: &str,
        app: &str,
        spec: &PushSpec,
        destination: &Destination,
    ) -> Option<String> {
        let own = &self.own_ingest;
        let (host, port) = destination.host_port();
        if !own.is_local(host) {
            return None;
        }
        let app_spec = self.registry.app(vhost, app)?;
        // Does input stream `name` of vhost/app produce what the push reads?
        let reads = |v: &str, a: &str, name: &str| {
            v == vhost
                && a == app
                && (name == spec.stream_name
                    || app_spec.output_named(name, &spec.stream_name).is_some())
        };
        let fed = match destination {
            Destination::Udp { .. } if own.mpegts_ports.contains(&port) => {
                self.registry.mpegts_stream(port)
            }
            Destination::Rtmp {
                tls: false,
                app: dest_app,
                ..
            } if own.rtmp_port == Some(port) => {
                // As the RTMP ingest reads it: vhost by the tcUrl host, the
                // key without its query as the stream name.
                let key = spec.stream_key.split('?').next().unwrap_or("");
                let v = self.registry.vhost_serving(host)?;
                Some((v.spec.name.clone(), dest_app.clone(), key.to_string()))
            }
            Destination::Srt { stream_id, .. } if own.srt_port == Some(port) => {
                let (h, a, s) = crate::srt::stream_id::parse_stream_id(stream_id.as_deref()?)?;
                let v = self.registry.vhost_for_stream_id(h.as_deref())?;
                Some((v.spec.name.clone(), a, s))
            }
            _ => None,
        }?;
        let (v, a, name) = fed;
        reads(&v, &a, &name).then(|| {
            format!(
                "The push would feed the stream it reads: [{}] is kiln's own {} ingest for [{v}/{a}/{name}]",
                request::redacted_url(&spec.url),
                spec.protocol.name()
            )
        })
    }

    pub(super) fn stop_push(
        &mut self,
        vhost: &str,
        app: &str,
        body: &[u8],
    ) -> Result<super::Response, ApiError> {
        self.push_app(vhost, app)?;
        let req: IdBody = parse_body(body)?;
        let Some(id) = req.id.filter(|s| !s.is_empty()) else {
            return Err(ApiError::bad_request(
                "There is no required parameter [ id]",
            ));
        };
        if self.pushes.tasks.get(vhost, app, &id).is_none() {
            return Err(ApiError::http(
                404,
                format_args!("Could not find id '{id}': [{vhost}/{app}]"),
            ));
        }
        let change = Change::delete_task(&crate::push::request::KIND, vhost, app, &id);
        self.record(change, "push not stopped")?;
        if let Some(mut task) = self.pushes.tasks.remove(vhost, app, &id) {
            task.state = PushState::Stopping;
            info!("push [{vhost}/{app}/{id}] stopping");
            self.effects.push(Effect::StopPush {
                vhost: vhost.to_string(),
                app: app.to_string(),
                id,
            });
        }
        Ok(envelope::ok_empty())
    }

    pub(super) fn list_pushes(
        &self,
        vhost: &str,
        app: &str,
        body: &[u8],
    ) -> Result<super::Response, ApiError> {
        // An application without Push has no tasks: `[]`, as OME answers.
        self.app_or_404(vhost, app)?;
        let req: IdBody = if body.iter().all(|b| b.is_ascii_whitespace()) {
            IdBody::default()
        } else {
            parse_body(body)?
        };
        let now = self.now.instant;
        let views: Vec<PushView> = self
            .pushes
            .tasks
            .of_app(vhost, app)
            .into_iter()
            .filter(|t| req.id.as_ref().is_none_or(|id| &t.spec.id == id))
            .map(|t| PushView::of(t, now, self.utc_offset))
            .collect();
        Ok(envelope::ok(views))
    }

    /// Removes the push tasks of an app (or host) being deleted, from the
    /// durable state given and from the table; the loop closes sessions.
    pub(super) fn drop_pushes_of(&mut self, vhost: &str, app: Option<&str>) {
        for t in self.pushes.tasks.remove_of(vhost, app) {
            info!(
                "push [{}/{}/{}] ended: its application is gone",
                t.spec.vhost, t.spec.app, t.spec.id
            );
            self.effects.push(Effect::StopPush {
                vhost: t.spec.vhost,
                app: t.spec.app,
                id: t.spec.id,
            });
        }
    }
}
