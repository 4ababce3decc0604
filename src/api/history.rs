//! `GET /v1/stats/history` (kiln extension, for the console): the last
//! five minutes of what the console graphs, sampled by the loop every
//! [`history::INTERVAL`] into [`history::History`]. Series are named as
//! the console names them: `in:VH/APP/STREAM` (input bits per second, as
//! `lastThroughputIn`), `fps:VH/APP/STREAM` (the first video track's
//! frame rate, as stream info gives it), `push:`, `record:` (by id) and
//! `pull:` (by name) `VH/APP/...` (states), `viewers:PROTOCOL` (the
//! server's connections, as `/v1/stats/current` counts them).

use super::envelope;
use super::{Api, Response};
use crate::metrics::history::{self, Sample};
use serde::Serialize;
use std::time::Instant;

impl Api {
    /// One sampling round (the loop calls it every `history::INTERVAL`).
    pub fn sample_history(&mut self, now: Instant) {
        let mut samples: Vec<(String, Sample)> = Vec::new();
        for s in self
            .registry
            .streams
            .iter()
            .filter(|s| !s.tracks().is_empty())
        {
            let key = format!("{}/{}/{}", s.vhost, s.app, s.name);
            samples.push((
                format!("in:{key}"),
                Sample::Number(s.in_rate.last_bps(now) as f64),
            ));
            if let Some((t, v)) = s.tracks().iter().find_map(|t| Some((t, t.video?))) {
                let avg = s.track_stats(t.id).map_or(0.0, |st| st.average_framerate());
                let fps = if v.framerate > 0.0 { v.framerate } else { avg };
                let fps = if fps.is_finite() {
                    (fps * 1000.0).round() / 1000.0
                } else {
                    0.0
                };
                samples.push((format!("fps:{key}"), Sample::Number(fps)));
            }
        }
        for t in self.pushes.tasks.iter() {
            let s = &t.spec;
            let key = format!("push:{}/{}/{}", s.vhost, s.app, s.id);
            samples.push((key, Sample::State(t.state.name())));
        }
        for t in self.records.tasks.iter() {
            let s = &t.spec;
            let key = format!("record:{}/{}/{}", s.vhost, s.app, s.id);
            samples.push((key, Sample::State(t.state.name())));
        }
        for t in self.pulls.table.iter() {
            let s = &t.spec;
            let key = format!("pull:{}/{}/{}", s.vhost, s.app, s.name);
            samples.push((key, Sample::State(t.state.name())));
        }
        let c = self.connections_now(now);
        for (p, n) in [
            ("llhls", c.llhls),
            ("hls", c.hls),
            ("webrtc", c.webrtc),
            ("rtmp", c.rtmp),
            ("srt", c.srt),
            ("push", c.push),
            ("file", c.file),
        ] {
            samples.push((format!("viewers:{p}"), Sample::Number(n as f64)));
        }
        self.history.begin_round();
        for (key, value) in samples {
            self.history.record(key, value);
        }
        self.history.end_round();
    }

    pub(super) fn history_view(&self) -> Response {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct View<'a> {
            interval_ms: u128,
            series:
                std::collections::BTreeMap<&'a str, &'a std::collections::VecDeque<Option<Sample>>>,
        }
        envelope::ok(View {
            interval_ms: history::INTERVAL.as_millis(),
            series: self.history.series(),
        })
    }
}
