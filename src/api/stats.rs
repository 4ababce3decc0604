//! `GET /v1/stats/current[/vhosts/{vh}[/apps/{app}[/streams/{stream}]]]`
//! (OME's statistics) and `GET /metrics` (the same figures for
//! Prometheus). Streams count their own pushes' current sessions;
//! applications and up count every push task's bytes over all its sessions
//! and the live streams' input.

use super::envelope::{self, ApiError};
use super::Api;
use crate::http::Response;
use crate::metrics::{MetricsView, Peak, PromText, Sent, Totals, PROMETHEUS_CONTENT_TYPE};
use crate::push::task::PushTask;
use crate::state::streams::LiveStream;
use crate::state::Vhost;
use std::time::Instant;

/// A level of the statistics tree: server, vhost, app or stream.
type LevelKey = (String, String, String);

/// One `/metrics` family: name, type, help, and the value of an item.
type Family<T> = (&'static str, &'static str, &'static str, fn(&T) -> u64);

/// A push task's output for the figures; `lifetime`: its totals over
/// every session (for apps and up) rather than the current session's.
fn sent(p: &PushTask, lifetime: bool) -> Sent<'_> {
    Sent {
        bytes: if lifetime {
            p.ended_bytes + p.sent_bytes
        } else {
            p.sent_bytes
        },
        rate: &p.out_rate,
        pushing: p.state == crate::push::task::PushState::Pushing,
    }
}

impl Api {
    /// The output stream names of live stream `s` (its own name when its
    /// application is gone).
    fn output_names_of(&self, s: &LiveStream) -> Vec<String> {
        match self.registry.app(&s.vhost, &s.app) {
            Some(spec) => spec
                .output_names(&s.name)
                .into_iter()
                .map(|(n, _)| n)
                .collect(),
            None => vec![s.name.clone()],
        }
    }

    /// The pushes that read live stream `s` (by its output names).
    fn pushes_of_stream<'a>(&'a self, s: &LiveStream) -> Vec<&'a PushTask> {
        let outputs = self.output_names_of(s);
        self.pushes
            .tasks
            .of_app(&s.vhost, &s.app)
            .into_iter()
            .filter(|p| outputs.contains(&p.spec.stream_name))
            .collect()
    }

    fn stream_totals(&self, s: &LiveStream, now: Instant) -> Totals {
        let pushes = self.pushes_of_stream(s);
        let mut t = Totals::of_stream(s, pushes.into_iter().map(|p| sent(p, false)), now);
        t.connections.file = self.recordings(&s.vhost, &s.app, Some(s));
        t
    }

    /// Records writing now (OME's `connections.file`): of a stream (by its
    /// output names), or of the whole app.
    fn recordings(&self, vhost: &str, app: &str, stream: Option<&LiveStream>) -> u64 {
        // A record names the stream by its input or an output name.
        let outputs: Option<Vec<String>> = stream.map(|s| {
            let mut names = self.output_names_of(s);
            names.push(s.name.clone());
            names
        });
        self.records
            .tasks
            .of_app(vhost, app)
            .into_iter()
            .filter(|r| r.state == crate::record::task::RecordState::Recording)
            .filter(|r| {
                outputs
                    .as_ref()
                    .is_none_or(|o| o.contains(&r.spec.stream_name))
            })
            .count() as u64
    }

    fn app_totals(&self, vhost: &str, app: &str, now: Instant) -> Totals {
        let mut t = Totals {
            created_ms: self.started_ms,
            ..Totals::default()
        };
        for s in self.registry.streams.of_app(vhost, app) {
            let st = Totals::of_stream(s, [], now);
            t.absorb(&st);
        }
        for p in self.pushes.tasks.of_app(vhost, app) {
            t.add_push(sent(p, true), now);
        }
        t.connections.file = self.recordings(vhost, app, None);
        t
    }

    fn vhost_totals(&self, v: &Vhost, now: Instant) -> Totals {
        let mut t = Totals {
            created_ms: self.started_ms,
            ..Totals::default()
        };
        for a in &v.apps {
            t.absorb(&self.app_totals(&v.spec.name, &a.name, now));
        }
        t
    }

    /// The server's connections now, as `/v1/stats/current` counts them.
    pub(super) fn connections_now(&self, now: Instant) -> crate::metrics::Connections {
        self.server_totals(now).connections
    }

    fn server_totals(&self, now: Instant) -> Totals {
        let mut t = Totals {
            created_ms: self.started_ms,
            ..Totals::default()
        };
        for v in self.registry.vhosts() {
            t.absorb(&self.vhost_totals(v, now));
        }
        t
    }

    /// Records each level's connection count (pushes that are pushing),
    /// so the peaks (OME's `maxTotalConnections` and when) survive between
    /// queries. The loop calls it when a push starts or ends; it counts in
    /// one pass over the tasks, at most once a second.
    pub fn note_peaks(&mut self, now: crate::clock::Now) {
        if self.peaks_noted.is_some_and(|t| {
            now.instant.saturating_duration_since(t) < std::time::Duration::from_secs(1)
        }) {
            return;
        }
        self.peaks_noted = Some(now.instant);
        let now_ms = now.unix_ms;
        let mut counts: std::collections::HashMap<LevelKey, u64> = Default::default();
        for t in self.pushes.tasks.iter() {
            if t.state != crate::push::task::PushState::Pushing {
                continue;
            }
            let (vh, app) = (&t.spec.vhost, &t.spec.app);
            for key in [
                (String::new(), String::new(), String::new()),
                (vh.clone(), String::new(), String::new()),
                (vh.clone(), app.clone(), String::new()),
                (vh.clone(), app.clone(), t.spec.stream_name.clone()),
            ] {
                *counts.entry(key).or_default() += 1;
            }
        }
        for (key, n) in counts {
            self.peaks.entry(key).or_default().note(n, now_ms);
        }
    }

    fn view(&self, key: LevelKey, t: &Totals, now: Instant) -> Response {
        let peak = self.peaks.get(&key).copied().unwrap_or(Peak::default());
        envelope::ok(MetricsView::of(
            t,
            peak,
            now,
            self.now.unix_ms,
            self.utc_offset,
        ))
    }

    pub(super) fn stats(
        &self,
        vhost: Option<&str>,
        app: Option<&str>,
        stream: Option<&str>,
        now: Instant,
    ) -> Result<Response, ApiError> {
        let Some(vh) = vhost else {
            return Ok(self.view(Default::default(), &self.server_totals(now), now));
        };
        let v = self.vhost_or_404(vh)?;
        let Some(app) = app else {
            let key = (vh.to_string(), String::new(), String::new());
            return Ok(self.view(key, &self.vhost_totals(v, now), now));
        };
        self.app_or_404(vh, app)?;
        let Some(name) = stream else {
            let key = (vh.to_string(), app.to_string(), String::new());
            return Ok(self.view(key, &self.app_totals(vh, app, now), now));
        };
        let s = self
            .registry
            .streams
            .shown_of_app(vh, app)
            .into_iter()
            .find(|s| s.name == name)
            .ok_or_else(|| ApiError::stream_not_found(vh, app, name))?;
        let key = (vh.to_string(), app.to_string(), name.to_string());
        Ok(self.view(key, &self.stream_totals(s, now), now))
    }

    /// `GET /metrics`: Prometheus text, `kiln_` names, per-stream and
    /// per-push series labelled with vhost, app and stream (or push id).
    pub(super) fn metrics(&self, now: Instant) -> Response {
        let mut p = PromText::default();
        let streams = self.registry.streams.oldest_first();
        let stream_totals: Vec<(&LiveStream, Totals)> = streams
            .iter()
            .map(|s| (*s, self.stream_totals(s, now)))
            .collect();
        let labels = |s: &LiveStream| {
            [
                ("vhost", s.vhost.clone()),
                ("app", s.app.clone()),
                ("stream", s.name.clone()),
            ]
        };
        let families: [Family<Totals>; 6] = [
            (
                "kiln_stream_received_bytes_total",
                "counter",
                "Media bytes received from the stream's publisher.",
                |t| t.bytes_in,
            ),
            (
                "kiln_stream_sent_bytes_total",
                "counter",
                "Bytes the stream's pushes wrote in their current sessions.",
                |t| t.bytes_out,
            ),
            (
                "kiln_stream_receive_bits_per_second",
                "gauge",
                "Input rate over the last second.",
                |t| t.last_in_bps,
            ),
            (
                "kiln_stream_send_bits_per_second",
                "gauge",
                "Output rate of the stream's pushes over the last second.",
                |t| t.last_out_bps,
            ),
            (
                "kiln_stream_pushes",
                "gauge",
                "Pushes of the stream that are pushing.",
                |t| t.connections.push,
            ),
            (
                "kiln_stream_webrtc_viewers",
                "gauge",
                "WebRTC viewers of the stream (connected sessions).",
                |t| t.connections.webrtc,
            ),
        ];
        for (name, kind, help, value) in families {
            p.family(name, kind, help);
            for (s, t) in &stream_totals {
                let l = labels(s);
                let l: Vec<(&str, &str)> = l.iter().map(|(k, v)| (*k, v.as_str())).collect();
                p.sample(name, &l, value(t));
            }
        }
        let tasks: Vec<&PushTask> = {
            let mut v: Vec<&PushTask> = self.pushes.tasks.iter().collect();
            v.sort_unstable_by_key(|t| (t.spec.created_ms, t.seq));
            v
        };
        let push_families: [Family<PushTask>; 4] = [
            (
                "kiln_push_sent_bytes_total",
                "counter",
                "Bytes written to the destination over all sessions (totalsentBytes).",
                |t| t.ended_bytes + t.sent_bytes,
            ),
            (
                "kiln_push_sessions_total",
                "counter",
                "Sessions that have ended (sequence).",
                |t| t.sequence,
            ),
            (
                "kiln_push_dropped_frames_total",
                "counter",
                "Frames dropped because the destination could not keep up.",
                |t| t.dropped_frames,
            ),
            (
                "kiln_push_up",
                "gauge",
                "1 while the task is pushing, else 0.",
                |t| u64::from(t.state == crate::push::task::PushState::Pushing),
            ),
        ];
        for (name, kind, help, value) in push_families {
            p.family(name, kind, help);
            for t in &tasks {
                p.sample(
                    name,
                    &[
                        ("vhost", &t.spec.vhost),
                        ("app", &t.spec.app),
                        ("id", &t.spec.id),
                        ("protocol", t.spec.protocol.name()),
                        ("stream", &t.spec.stream_name),
                    ],
                    value(t),
                );
            }
        }
        p.family("kiln_streams", "gauge", "Live streams.");
        p.sample("kiln_streams", &[], streams.len() as u64);
        p.family("kiln_push_tasks", "gauge", "Push tasks (any state).");
        p.sample("kiln_push_tasks", &[], tasks.len() as u64);
        p.family(
            "kiln_channels",
            "gauge",
            "Scheduled and multiplex channels (made by the API or by files), and how many of them are live.",
        );
        let live =
            |k: &crate::channel::ChannelKey| self.registry.streams.find(&k.0, &k.1, &k.2).is_some();
        let ch = &self.channels;
        for (kind, keys) in [
            ("scheduled", ch.scheduled.keys().collect::<Vec<_>>()),
            ("multiplex", ch.multiplex.keys().collect::<Vec<_>>()),
        ] {
            p.sample(
                "kiln_channels",
                &[("kind", kind), ("live", "false")],
                keys.iter().filter(|k| !live(k)).count() as u64,
            );
            p.sample(
                "kiln_channels",
                &[("kind", kind), ("live", "true")],
                keys.iter().filter(|k| live(k)).count() as u64,
            );
        }
        let (streams_held, frames_held, bytes_held) = self.records.preroll_held();
        p.family(
            "kiln_record_preroll_streams",
            "gauge",
            "Live streams keeping their recent media for pre-roll records (<FILE><MaxPreRoll>).",
        );
        p.sample("kiln_record_preroll_streams", &[], streams_held as u64);
        p.family(
            "kiln_record_preroll_frames",
            "gauge",
            "Frames those streams hold for pre-roll.",
        );
        p.sample("kiln_record_preroll_frames", &[], frames_held as u64);
        p.family(
            "kiln_record_preroll_bytes",
            "gauge",
            "Bytes of media those streams hold for pre-roll.",
        );
        p.sample("kiln_record_preroll_bytes", &[], bytes_held as u64);
        let (dvr_disk, dvr_read) = self.hls.dvr_bytes();
        p.family(
            "kiln_llhls_dvr_disk_bytes",
            "gauge",
            "Bytes of LL-HLS DVR segments on disk (<LLHLS><DVR>).",
        );
        p.sample("kiln_llhls_dvr_disk_bytes", &[], dvr_disk);
        p.family(
            "kiln_llhls_dvr_read_cache_bytes",
            "gauge",
            "Bytes of DVR segments read back from disk and held for their viewers.",
        );
        p.sample("kiln_llhls_dvr_read_cache_bytes", &[], dvr_read as u64);
        p.family("kiln_virtual_hosts", "gauge", "Virtual hosts.");
        p.sample(
            "kiln_virtual_hosts",
            &[],
            self.registry.vhosts().len() as u64,
        );
        Response::new(200, p.finish().into_bytes())
            .with_header("Content-Type", PROMETHEUS_CONTENT_TYPE)
    }
}
