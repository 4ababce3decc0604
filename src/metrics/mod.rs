//! Statistics in OME's shape (`/v1/stats/current/...`, DECISIONS 14) and
//! the same figures in Prometheus text format (`/metrics`). Built from the
//! registry at request time: the only state kept for it is a rate meter
//! per stream (bytes in) and per push task (bytes out), fed by the loop.

pub(crate) mod history;

use crate::rate::RateMeter;
use crate::state::streams::LiveStream;
use serde::Serialize;
use std::fmt::Write as _;
use std::time::Instant;

/// OME's `connections` object: open sessions by publisher kind.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq, Eq)]
pub(crate) struct Connections {
    pub webrtc: u64,
    pub llhls: u64,
    /// HLS (MPEG-TS) viewers: OME names them `hlsv3`.
    #[serde(rename = "hlsv3")]
    pub hls: u64,
    pub ovt: u64,
    pub file: u64,
    pub push: u64,
    pub thumbnail: u64,
    pub srt: u64,
    /// RTMP players (kiln extension).
    pub rtmp: u64,
}

impl Connections {
    /// Every kind's count, in the field order.
    fn kinds(&self) -> [u64; 9] {
        [
            self.webrtc,
            self.llhls,
            self.hls,
            self.ovt,
            self.file,
            self.push,
            self.thumbnail,
            self.srt,
            self.rtmp,
        ]
    }

    fn add(&mut self, o: &Connections) {
        let [webrtc, llhls, hls, ovt, file, push, thumbnail, srt, rtmp] = o.kinds();
        self.rtmp += rtmp;
        self.webrtc += webrtc;
        self.llhls += llhls;
        self.hls += hls;
        self.ovt += ovt;
        self.file += file;
        self.push += push;
        self.thumbnail += thumbnail;
        self.srt += srt;
    }
}

/// The figures of one level (server, vhost, app, stream), summed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Totals {
    pub created_ms: i64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub last_in_bps: u64,
    pub last_out_bps: u64,
    pub max_in_bps: u64,
    pub max_out_bps: u64,
    pub last_recv: Option<Instant>,
    pub last_sent: Option<Instant>,
    pub connections: Connections,
}

fn later(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// What one push task sent, as the figures count it.
pub(crate) struct Sent<'a> {
    /// Bytes: of the current session (a stream's figures) or of every
    /// session (an application's and up).
    pub bytes: u64,
    pub rate: &'a RateMeter,
    /// It is pushing now (an open `push` connection).
    pub pushing: bool,
}

impl Totals {
    /// A live stream and what its push tasks sent.
    pub(crate) fn of_stream<'a>(
        s: &LiveStream,
        pushes: impl IntoIterator<Item = Sent<'a>>,
        now: Instant,
    ) -> Totals {
        let mut t = Totals {
            created_ms: s.created_ms,
            bytes_in: s.bytes_in,
            last_in_bps: s.in_rate.last_bps(now),
            max_in_bps: s.in_rate.max_bps(),
            last_recv: s.in_rate.last_at(),
            bytes_out: s.audience.bytes_out,
            ..Totals::default()
        };
        let (llhls, hls) = s.audience.http_viewers(now);
        t.connections.llhls = llhls;
        t.connections.hls = hls;
        t.connections.rtmp = s.audience.rtmp;
        t.connections.webrtc = s.audience.webrtc;
        t.connections.srt = s.audience.srt;
        for p in pushes {
            t.add_push(p, now);
        }
        t
    }

    /// A push task's output.
    pub(crate) fn add_push(&mut self, p: Sent<'_>, now: Instant) {
        self.bytes_out += p.bytes;
        self.last_out_bps += p.rate.last_bps(now);
        self.max_out_bps = self.max_out_bps.max(p.rate.max_bps());
        self.last_sent = later(self.last_sent, p.rate.last_at());
        if p.pushing {
            self.connections.push += 1;
        }
    }

    /// Adds a lower level's figures (the created time stays this level's).
    pub(crate) fn absorb(&mut self, o: &Totals) {
        self.bytes_in += o.bytes_in;
        self.bytes_out += o.bytes_out;
        self.last_in_bps += o.last_in_bps;
        self.last_out_bps += o.last_out_bps;
        self.max_in_bps = self.max_in_bps.max(o.max_in_bps);
        self.max_out_bps = self.max_out_bps.max(o.max_out_bps);
        self.last_recv = later(self.last_recv, o.last_recv);
        self.last_sent = later(self.last_sent, o.last_sent);
        self.connections.add(&o.connections);
    }

    pub(crate) fn total_connections(&self) -> u64 {
        self.connections.kinds().iter().sum()
    }
}

/// OME's `Metrics` object.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct MetricsView {
    pub created_time: String,
    pub last_updated_time: String,
    pub total_bytes_in: u64,
    pub total_bytes_out: u64,
    pub total_connections: u64,
    pub max_total_connections: u64,
    pub max_total_connection_time: String,
    pub last_recv_time: String,
    pub last_sent_time: String,
    pub avg_throughput_in: u64,
    pub avg_throughput_out: u64,
    pub max_throughput_in: u64,
    pub max_throughput_out: u64,
    pub last_throughput_in: u64,
    pub last_throughput_out: u64,
    pub connections: Connections,
}

/// The largest number of connections seen at one level, and when.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Peak {
    pub connections: u64,
    pub at_ms: i64,
}

impl Peak {
    pub(crate) fn note(&mut self, connections: u64, now_ms: i64) {
        if connections > self.connections || self.at_ms == 0 {
            self.connections = self.connections.max(connections);
            self.at_ms = now_ms;
        }
    }
}

impl MetricsView {
    pub(crate) fn of(
        t: &Totals,
        peak: Peak,
        now: Instant,
        now_ms: i64,
        utc_offset: i32,
    ) -> MetricsView {
        let iso = |ms: i64| crate::clock::format_iso8601(ms, utc_offset);
        let at = |i: Option<Instant>| {
            let ms = i.map_or(0, |i| {
                now_ms - now.saturating_duration_since(i).as_millis() as i64
            });
            iso(ms)
        };
        let secs = ((now_ms - t.created_ms).max(1) as f64) / 1000.0;
        let total = t.total_connections();
        let peak_connections = peak.connections.max(total);
        MetricsView {
            created_time: iso(t.created_ms),
            last_updated_time: iso(now_ms),
            total_bytes_in: t.bytes_in,
            total_bytes_out: t.bytes_out,
            total_connections: total,
            max_total_connections: peak_connections,
            max_total_connection_time: iso(if peak.connections >= total {
                peak.at_ms
            } else {
                now_ms
            }),
            last_recv_time: at(t.last_recv),
            last_sent_time: at(t.last_sent),
            avg_throughput_in: (t.bytes_in as f64 * 8.0 / secs) as u64,
            avg_throughput_out: (t.bytes_out as f64 * 8.0 / secs) as u64,
            max_throughput_in: t.max_in_bps.max(t.last_in_bps),
            max_throughput_out: t.max_out_bps.max(t.last_out_bps),
            last_throughput_in: t.last_in_bps,
            last_throughput_out: t.last_out_bps,
            connections: t.connections,
        }
    }
}

/// Prometheus text exposition format (version 0.0.4).
#[derive(Default)]
pub(crate) struct PromText {
    out: String,
}

/// A label value escaped as the text format wants (`\`, `"`, newline).
fn escape_label(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

impl PromText {
    /// Starts a metric family.
    pub(crate) fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample of the current family.
    pub(crate) fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: u64) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    pub(crate) fn finish(self) -> String {
        self.out
    }
}

/// The content type of [`PromText`].
pub(crate) const PROMETHEUS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_labels_are_escaped() {
        let mut p = PromText::default();
        p.family("kiln_x_total", "counter", "x");
        p.sample("kiln_x_total", &[("stream", "a\"b\\c\nd")], 7);
        assert_eq!(
            p.finish(),
            "# HELP kiln_x_total x\n# TYPE kiln_x_total counter\nkiln_x_total{stream=\"a\\\"b\\\\c\\nd\"} 7\n"
        );
    }
}
