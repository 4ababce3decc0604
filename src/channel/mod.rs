//! Channels: streams kiln makes itself, in OME's two kinds.
//!
//! - **Scheduled channels** ([`schedule`]): a programme of files and live
//!   streams at set times, with a fallback programme whenever nothing is
//!   due, an item fails or a live input stops (a channel that never goes
//!   dark). OME's `.sch` files and `scheduledChannels` API.
//! - **Multiplex channels** ([`mux`]): tracks of several live streams put
//!   into one stream under new names, with playlists of renditions (ABR
//!   from several encoders, no transcoder). OME's `.mux` files and
//!   `multiplexChannels` API.
//!
//! Sans-IO: specs (parsed from XML files or API JSON, bounded), the
//! scheduler that says what plays, and the re-timing that keeps a
//! channel's timestamps going forward across every switch. The loop's
//! plug-in (`server::features::channels`) reads files and directories off
//! the loop and feeds these.

pub mod mux;
pub mod schedule;
pub mod timeline;
pub mod xml;

/// Most channels of each kind per application, and items per programme:
/// a file or API call past them is refused.
pub const MAX_CHANNELS: usize = 256;
pub const MAX_ITEMS: usize = 1000;
/// Largest `.sch` / `.mux` file read.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// `stream://{vhost}/{app}/{stream}`: another stream of this server.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StreamUrl {
    pub vhost: String,
    pub app: String,
    pub stream: String,
}

impl StreamUrl {
    pub fn parse(url: &str) -> Option<StreamUrl> {
        let rest = url.strip_prefix("stream://")?;
        let mut p = rest.split('/');
        let (vhost, app, stream) = (p.next()?, p.next()?, p.next()?);
        if p.next().is_some() || [vhost, app, stream].iter().any(|s| s.is_empty()) {
            return None;
        }
        Some(StreamUrl {
            vhost: vhost.into(),
            app: app.into(),
            stream: stream.into(),
        })
    }
}

impl std::fmt::Display for StreamUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.vhost, self.app, self.stream)
    }
}

/// A file item's path under `MediaRootDir`: `file://` then a relative path
/// that does not leave the directory (no `..`, not absolute).
pub fn file_path(url: &str) -> Option<&str> {
    let p = url.strip_prefix("file://")?;
    let p = p.trim_start_matches('/');
    let ok = !p.is_empty()
        && std::path::Path::new(p)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    ok.then_some(p)
}

/// Entry points for cargo-fuzz targets: feed arbitrary bytes, ignore results.
pub mod fuzz {
    use super::schedule::{ScheduleSpec, Scheduler};

    /// A `.sch` or `.mux` file's text, or the API's JSON of either; a
    /// schedule that reads is then run for a while on a clock the input
    /// picks.
    pub fn fuzz_channel_files(data: &[u8]) {
        let Some((&mode, rest)) = data.split_first() else {
            return;
        };
        let text = String::from_utf8_lossy(rest);
        let spec = match mode % 4 {
            0 => ScheduleSpec::from_xml(&text, "fuzz").ok(),
            1 => serde_json::from_str::<ScheduleSpec>(&text).ok(),
            2 => {
                let _ = super::mux::MuxSpec::from_xml(&text).map(|m| {
                    let _ = m.check();
                    super::mux::Multiplexer::new(m).playlists()
                });
                None
            }
            _ => {
                if let Ok(m) = serde_json::from_str::<super::mux::MuxSpec>(&text) {
                    let _ = m.check();
                }
                None
            }
        };
        let Some(plan) = spec.and_then(|s| s.plan().ok()) else {
            return;
        };
        let mut s = Scheduler::new(plan);
        let mut now = i64::from(mode) * 1_000_000_000;
        for (i, &b) in rest.iter().enumerate().take(2000) {
            now += i64::from(b) * 997;
            let live = |_: &super::StreamUrl| b & 1 == 1;
            let _ = s.poll(now, &live);
            match (b >> 1) % 5 {
                0 => s.ended(now),
                1 => s.failed(now),
                _ => {}
            }
            let _ = s.next_change(now + i as i64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched(name: &str, reads: &[&str]) -> schedule::ScheduleSpec {
        let items: Vec<serde_json::Value> = reads
            .iter()
            .map(|r| serde_json::json!({"url": format!("stream://default/app/{r}")}))
            .collect();
        let mut s: schedule::ScheduleSpec = serde_json::from_value(serde_json::json!({
            "stream": {"name": name},
            "fallbackProgram": {"items": items}
        }))
        .unwrap();
        s.vhost = "default".into();
        s.app = "app".into();
        s.name = name.into();
        s
    }

    #[test]
    fn a_channel_fed_its_own_output_is_found() {
        let mut c = Channels::default();
        let key = |n: &str| ("default".to_string(), "app".to_string(), n.to_string());
        let url = |n: &str| StreamUrl::parse(&format!("stream://default/app/{n}")).unwrap();
        // Itself.
        assert_eq!(
            c.loop_through(&key("a"), &[url("cam"), url("a")])
                .as_deref(),
            Some("default/app/a -> default/app/a")
        );
        // Through another: b reads a; a would read b.
        c.scheduled.insert(
            key("b"),
            ScheduledChannel::new(sched("b", &["a"]), Origin::Api),
        );
        assert_eq!(
            c.loop_through(&key("a"), &[url("b")]).as_deref(),
            Some("default/app/a -> default/app/b -> default/app/a")
        );
        // A chain without a loop, and a diamond, are fine.
        c.scheduled.insert(
            key("c"),
            ScheduledChannel::new(sched("c", &["cam", "b"]), Origin::Api),
        );
        assert_eq!(c.loop_through(&key("d"), &[url("c"), url("b")]), None);
        assert_eq!(c.loop_through(&key("a"), &[url("cam")]), None);
    }

    #[test]
    fn urls() {
        let u = StreamUrl::parse("stream://default/app/cam").unwrap();
        assert_eq!(u.to_string(), "default/app/cam");
        assert!(StreamUrl::parse("stream://default/app").is_none());
        assert!(StreamUrl::parse("stream://default/app/cam/x").is_none());
        assert!(StreamUrl::parse("rtmp://x/y/z").is_none());
        assert_eq!(file_path("file://a/b.mp4"), Some("a/b.mp4"));
        assert_eq!(file_path("file:///abs.mp4"), Some("abs.mp4"));
        assert_eq!(file_path("file://../etc/passwd"), None);
        assert_eq!(file_path("file://a/../../b"), None);
        assert_eq!(file_path("file://"), None);
    }
}

/// The channels' durable kinds in the state file (API-made ones only;
/// file-made ones are their files).
pub static SCHEDULED_KIND: crate::state::store::TaskKind = crate::state::store::TaskKind {
    list: "scheduledChannels",
    item: "scheduledChannel",
    id_field: "name",
};
pub static MULTIPLEX_KIND: crate::state::store::TaskKind = crate::state::store::TaskKind {
    list: "multiplexChannels",
    item: "multiplexChannel",
    id_field: "name",
};

/// A channel's key: (vhost, app, stream name).
pub type ChannelKey = (String, String, String);

/// Where a channel came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `POST .../scheduledChannels` or `.../multiplexChannels`: durable.
    Api,
    /// A `.sch` / `.mux` file (the channel follows the file).
    File(std::path::PathBuf),
}

/// What a scheduled channel plays now, as its plug-in last saw it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NowPlaying {
    /// What plays, if anything.
    pub playing: Option<schedule::Cursor>,
    /// When what plays began to play (Unix ms): an item without a
    /// duration (a live stream, a file to its end) is this far in.
    pub since_ms: i64,
    /// `onair`, or why nothing plays.
    pub state: String,
}

#[derive(Debug, Clone)]
pub struct ScheduledChannel {
    pub spec: schedule::ScheduleSpec,
    pub origin: Origin,
    pub now: Option<NowPlaying>,
}

#[derive(Debug, Clone)]
pub struct MultiplexChannel {
    pub spec: mux::MuxSpec,
    pub origin: Origin,
    /// OME's `state` (`Pulling`, `Playing`) and `pullingMessage`.
    pub state: &'static str,
    pub message: String,
}

impl ScheduledChannel {
    /// A channel just made (nothing played yet).
    pub fn new(spec: schedule::ScheduleSpec, origin: Origin) -> Self {
        ScheduledChannel {
            spec,
            origin,
            now: None,
        }
    }
}

impl MultiplexChannel {
    /// A channel just made: `Pulling` until every source was seen.
    pub fn new(spec: mux::MuxSpec, origin: Origin) -> Self {
        MultiplexChannel {
            spec,
            origin,
            state: "Pulling",
            message: String::new(),
        }
    }
}

/// Every channel, by key: what the API shows and changes, and what the
/// loop's plug-in runs (it hears of changes through the API's effects).
#[derive(Debug, Default)]
pub struct Channels {
    pub scheduled: std::collections::BTreeMap<ChannelKey, ScheduledChannel>,
    pub multiplex: std::collections::BTreeMap<ChannelKey, MultiplexChannel>,
}

impl Channels {
    /// Names of an application's channels of one kind.
    pub fn names(&self, scheduled: bool, vhost: &str, app: &str) -> Vec<String> {
        let keys: Vec<&ChannelKey> = if scheduled {
            self.scheduled.keys().collect()
        } else {
            self.multiplex.keys().collect()
        };
        keys.into_iter()
            .filter(|k| k.0 == vhost && k.1 == app)
            .map(|k| k.2.clone())
            .collect()
    }

    /// Is `name` a channel (of either kind) of the application?
    pub fn has(&self, vhost: &str, app: &str, name: &str) -> bool {
        let k = (vhost.to_string(), app.to_string(), name.to_string());
        self.scheduled.contains_key(&k) || self.multiplex.contains_key(&k)
    }

    /// The streams channel `k` reads (its items' or sources'
    /// `stream://` URLs).
    fn inputs(&self, k: &ChannelKey) -> Vec<StreamUrl> {
        if let Some(c) = self.scheduled.get(k) {
            c.spec.plan().map(|p| p.streams()).unwrap_or_default()
        } else if let Some(c) = self.multiplex.get(k) {
            c.spec.check().unwrap_or_default()
        } else {
            Vec::new()
        }
    }

    /// Would channel `key`, reading `inputs`, be fed its own output,
    /// directly or through other channels? The loop as text
    /// (`default/app/a -> default/app/b -> default/app/a`). Such a channel
    /// would read what it writes as fast as the loop can turn (a core
    /// spun forever), so it is refused.
    pub fn loop_through(&self, key: &ChannelKey, inputs: &[StreamUrl]) -> Option<String> {
        let name = |k: &ChannelKey| format!("{}/{}/{}", k.0, k.1, k.2);
        let mut seen = std::collections::BTreeSet::new();
        // (a stream read, the chain of channels that led to it)
        let mut todo: Vec<(ChannelKey, Vec<ChannelKey>)> = inputs
            .iter()
            .map(|u| {
                (
                    (u.vhost.clone(), u.app.clone(), u.stream.clone()),
                    vec![key.clone()],
                )
            })
            .collect();
        while let Some((k, mut chain)) = todo.pop() {
            chain.push(k.clone());
            if k == *key {
                return Some(chain.iter().map(name).collect::<Vec<_>>().join(" -> "));
            }
            let is_channel = self.scheduled.contains_key(&k) || self.multiplex.contains_key(&k);
            if !is_channel || !seen.insert(k.clone()) {
                continue;
            }
            for u in self.inputs(&k) {
                let next = (u.vhost, u.app, u.stream);
                todo.push((next, chain.clone()));
            }
        }
        None
    }

    /// Removes the channels of an application (or of every application of
    /// a host): their keys.
    pub fn remove_of(&mut self, vhost: &str, app: Option<&str>) -> Vec<ChannelKey> {
        let gone = |k: &ChannelKey| k.0 == vhost && app.is_none_or(|a| k.1 == a);
        let mut keys: Vec<ChannelKey> =
            self.scheduled.keys().filter(|k| gone(k)).cloned().collect();
        keys.extend(self.multiplex.keys().filter(|k| gone(k)).cloned());
        self.scheduled.retain(|k, _| !gone(k));
        self.multiplex.retain(|k, _| !gone(k));
        keys
    }
}
