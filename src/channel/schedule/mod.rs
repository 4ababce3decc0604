//! Scheduled channels: the spec (OME's `.sch` file and the body of its
//! `scheduledChannels` API, one shape) and the [`Scheduler`], which says
//! what plays at each moment.
//!
//! What OME's documents leave open, decided here (and in the README):
//! - A programme is due from its `scheduled` time until the next
//!   programme's; it plays its items in order, each for its `duration`
//!   (absent or -1: a file to its end, a live stream for as long as it is
//!   live), then again from the first when `repeat`, else it is over.
//! - A programme due when the channel starts (scheduled in the past)
//!   starts at its first item, not where it would have been.
//! - The fallback programme plays, in order and repeated, whenever no
//!   programme is due, the due item cannot play (a file that does not
//!   open, a live stream that is not live) or a live item stops. The due
//!   item is tried again as soon as its stream is live, or every
//!   [`RETRY_MS`] for a file; it is left for the due item at once.

use super::xml::{self, XmlError};
use super::{file_path, ChannelKey, StreamUrl, MAX_ITEMS};
use serde::{Deserialize, Serialize};

/// A file item that failed is tried again after this.
pub const RETRY_MS: i64 = 5000;
/// The longest an item's `start` and `duration` may be (ms): 366 days.
/// Times are added to wall-clock ms and scaled to 90 kHz, so they are
/// bounded well inside `i64`.
pub const MAX_ITEM_MS: i64 = 366 * 24 * 3600 * 1000;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScheduleSpec {
    /// The application (set by kiln: the URL's, or the file's directory's).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub vhost: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub app: String,
    /// The channel's stream name (the state file's key).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    pub stream: StreamSection,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_program: Option<FallbackProgram>,
    #[serde(default)]
    pub programs: Vec<Program>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamSection {
    #[serde(default)]
    pub name: String,
    /// kiln never transcodes: false is warned about and treated as true.
    #[serde(default)]
    pub bypass_transcoder: bool,
    #[serde(default = "yes")]
    pub video_track: bool,
    #[serde(default = "yes")]
    pub audio_track: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub audio_map: Vec<AudioMapItem>,
    /// OME's tolerance of timestamp jumps between items (ms, default
    /// 500): kept and shown; kiln's timeline rebases every item, so it
    /// has no use for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_tolerance_duration_ms: Option<u64>,
}

fn yes() -> bool {
    true
}

pub use crate::state::app::AudioMapItem;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FallbackProgram {
    #[serde(default)]
    pub items: Vec<Item>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Program {
    #[serde(default)]
    pub name: String,
    pub scheduled: String,
    #[serde(default)]
    pub repeat: bool,
    #[serde(default)]
    pub items: Vec<Item>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Item {
    pub url: String,
    /// Where a file starts, ms.
    #[serde(default)]
    pub start: i64,
    /// How long the item plays, ms; -1: a file to its end, a stream while
    /// it is live.
    #[serde(default = "minus_one")]
    pub duration: i64,
}

fn minus_one() -> i64 {
    -1
}

/// What an item plays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A path under the application's `MediaRootDir`.
    File {
        path: String,
        start_ms: i64,
    },
    Stream(StreamUrl),
}

/// An item, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanItem {
    pub source: Source,
    pub duration_ms: Option<i64>,
    pub url: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanProgram {
    pub name: String,
    pub at_ms: i64,
    pub repeat: bool,
    pub items: Vec<PlanItem>,
}

/// A spec checked and ready to schedule: programmes by time.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub programs: Vec<PlanProgram>,
    pub fallback: Vec<PlanItem>,
    /// The channel's audio tracks' labels, in order (OME's `AudioMap`):
    /// the channel carries this many audio tracks (one when empty), and
    /// an item with fewer fails.
    pub audio_map: Vec<crate::media::TrackLabel>,
}

pub use crate::state::app::MAX_AUDIO_MAP;

fn plan_item(i: &Item) -> Result<PlanItem, String> {
    let duration_ms = (i.duration > 0).then_some(i.duration);
    if i.duration == 0 || i.duration < -1 || i.start < 0 {
        return Err(format!(
            "item [{}]: duration must be -1 or positive and start at least 0",
            i.url
        ));
    }
    if i.duration > MAX_ITEM_MS || i.start > MAX_ITEM_MS {
        return Err(format!(
            "item [{}]: start and duration must be at most {MAX_ITEM_MS} ms (366 days)",
            i.url
        ));
    }
    let source = if let Some(u) = StreamUrl::parse(&i.url) {
        Source::Stream(u)
    } else if let Some(p) = file_path(&i.url) {
        Source::File {
            path: p.to_string(),
            start_ms: i.start,
        }
    } else {
        return Err(format!(
            "item url [{}] must be file://{{path under MediaRootDir}} or stream://{{vhost}}/{{app}}/{{stream}}",
            i.url
        ));
    };
    Ok(PlanItem {
        source,
        duration_ms,
        url: i.url.clone(),
    })
}

impl Plan {
    /// The live streams it reads (`stream://` items).
    pub fn streams(&self) -> Vec<StreamUrl> {
        self.programs
            .iter()
            .flat_map(|p| &p.items)
            .chain(&self.fallback)
            .filter_map(|i| match &i.source {
                Source::Stream(u) => Some(u.clone()),
                Source::File { .. } => None,
            })
            .collect()
    }
}

impl ScheduleSpec {
    /// The channel's key in the channel table.
    pub fn key(&self) -> ChannelKey {
        (self.vhost.clone(), self.app.clone(), self.name.clone())
    }

    /// Checks the spec: every URL and time read, within the limits.
    pub fn plan(&self) -> Result<Plan, String> {
        if self.programs.len() > MAX_ITEMS {
            return Err(format!("more than {MAX_ITEMS} programs"));
        }
        let fallback = match &self.fallback_program {
            Some(f) if f.items.len() > MAX_ITEMS => {
                return Err(format!("more than {MAX_ITEMS} fallback items"))
            }
            Some(f) => f.items.iter().map(plan_item).collect::<Result<_, _>>()?,
            None => Vec::new(),
        };
        let mut programs = Vec::with_capacity(self.programs.len());
        for (i, p) in self.programs.iter().enumerate() {
            let at_ms = crate::clock::parse_iso8601(&p.scheduled).ok_or_else(|| {
                format!(
                    "program [{}]: scheduled [{}] is not an ISO 8601 time",
                    p.name, p.scheduled
                )
            })?;
            if p.items.is_empty() || p.items.len() > MAX_ITEMS {
                return Err(format!(
                    "program [{}] must have 1 to {MAX_ITEMS} items",
                    p.name
                ));
            }
            programs.push(PlanProgram {
                name: if p.name.is_empty() {
                    format!("program_{}", i + 1)
                } else {
                    p.name.clone()
                },
                at_ms,
                repeat: p.repeat,
                items: p.items.iter().map(plan_item).collect::<Result<_, _>>()?,
            });
        }
        programs.sort_by_key(|p| p.at_ms);
        if programs.is_empty() && fallback.is_empty() {
            return Err("the schedule has no program and no fallback program".into());
        }
        if !self.stream.video_track && !self.stream.audio_track {
            return Err("videoTrack and audioTrack are both false".into());
        }
        if self.stream.audio_map.len() > MAX_AUDIO_MAP {
            return Err(format!("audioMap has more than {MAX_AUDIO_MAP} items"));
        }
        let audio_map = self
            .stream
            .audio_map
            .iter()
            .enumerate()
            .map(|(i, m)| {
                m.label()
                    .map_err(|e| format!("audioMap item {}: {e}", i + 1))
            })
            .collect::<Result<_, _>>()?;
        Ok(Plan {
            programs,
            fallback,
            audio_map,
        })
    }

    /// A `.sch` file's text (the channel's name is the file's stem when
    /// `<Stream><Name>` is absent).
    pub fn from_xml(text: &str, stem: &str) -> Result<ScheduleSpec, XmlError> {
        let root = xml::root(text, "Schedule")?;
        xml::only(&root, &["Stream", "FallbackProgram", "Program"])?;
        let stream_el = root
            .children
            .iter()
            .find(|c| c.name == "Stream")
            .ok_or_else(|| xml::error(&root, "<Stream> is required"))?;
        xml::only(
            stream_el,
            &[
                "Name",
                "BypassTranscoder",
                "VideoTrack",
                "AudioTrack",
                "AudioMap",
            ],
        )?;
        let mut audio_map = Vec::new();
        if let Some(m) = stream_el.children.iter().find(|c| c.name == "AudioMap") {
            xml::only(m, &["Item"])?;
            for it in &m.children {
                xml::only(it, &["Name", "Language", "Characteristics"])?;
                audio_map.push(AudioMapItem {
                    name: xml::text(it, "Name").unwrap_or("").to_string(),
                    language: xml::text(it, "Language").map(str::to_string),
                    characteristics: xml::text(it, "Characteristics").map(str::to_string),
                });
            }
        }
        let items = |el: &crate::config::dom::Element| -> Result<Vec<Item>, XmlError> {
            xml::only(el, &["Item"])?;
            el.children
                .iter()
                .map(|it| {
                    let url = it
                        .attribute("url")
                        .ok_or_else(|| xml::error(it, "<Item> needs a url"))?;
                    let item = Item {
                        url: url.to_string(),
                        start: xml::attr_ms(it, "start", 0)?,
                        duration: xml::attr_ms(it, "duration", -1)?,
                    };
                    plan_item(&item).map_err(|e| xml::error(it, e))?;
                    Ok(item)
                })
                .collect()
        };
        let mut fallback_program = None;
        let mut programs = Vec::new();
        for c in &root.children {
            match c.name.as_str() {
                "FallbackProgram" => fallback_program = Some(FallbackProgram { items: items(c)? }),
                "Program" => {
                    let scheduled = c.attribute("scheduled").ok_or_else(|| {
                        xml::error(c, "<Program> needs scheduled=\"ISO 8601 time\"")
                    })?;
                    if crate::clock::parse_iso8601(scheduled).is_none() {
                        return Err(xml::error(
                            c,
                            format!("scheduled=\"{scheduled}\" is not an ISO 8601 time"),
                        ));
                    }
                    programs.push(Program {
                        name: c.attribute("name").unwrap_or("").to_string(),
                        scheduled: scheduled.to_string(),
                        repeat: xml::attr_bool(c, "repeat")?,
                        items: items(c)?,
                    });
                }
                _ => {}
            }
        }
        let spec = ScheduleSpec {
            vhost: String::new(),
            app: String::new(),
            name: stem.to_string(),
            stream: StreamSection {
                name: xml::text(stream_el, "Name").unwrap_or(stem).to_string(),
                bypass_transcoder: xml::boolean(stream_el, "BypassTranscoder", false)?,
                video_track: xml::boolean(stream_el, "VideoTrack", true)?,
                audio_track: xml::boolean(stream_el, "AudioTrack", true)?,
                audio_map,
                error_tolerance_duration_ms: xml::text(stream_el, "ErrorToleranceDurationMs")
                    .and_then(|t| t.trim().parse().ok()),
            },
            fallback_program,
            programs,
        };
        spec.plan().map_err(|e| xml::error(&root, e))?;
        Ok(spec)
    }
}

/// Where the scheduler is: a programme's item (`program` Some) or the
/// fallback's, since when (Unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    pub program: Option<usize>,
    pub item: usize,
    pub since_ms: i64,
}

/// Says what a channel plays: fed the wall clock, whether live streams
/// are live, and what became of the item playing.
#[derive(Debug)]
pub struct Scheduler {
    pub plan: Plan,
    /// The programme item due now.
    want: Option<Cursor>,
    /// Programmes (no repeat) that played through.
    done: Vec<bool>,
    /// The wanted item failed: fallback until this time.
    retry_at: Option<i64>,
    fallback: Option<Cursor>,
    /// Fallback items that failed, and when (tried again after RETRY_MS).
    fallback_failed: Vec<Option<i64>>,
    playing: Option<Cursor>,
}

impl Scheduler {
    pub fn new(plan: Plan) -> Self {
        Scheduler {
            done: vec![false; plan.programs.len()],
            fallback_failed: vec![None; plan.fallback.len()],
            plan,
            want: None,
            retry_at: None,
            fallback: None,
            playing: None,
        }
    }

    /// What plays now.
    pub fn playing(&self) -> Option<(Cursor, &PlanItem)> {
        let c = self.playing?;
        Some((c, self.item(c)?))
    }

    pub fn item(&self, c: Cursor) -> Option<&PlanItem> {
        match c.program {
            Some(p) => self.plan.programs.get(p)?.items.get(c.item),
            None => self.plan.fallback.get(c.item),
        }
    }

    /// The programme due at `now`: the latest one scheduled at or before
    /// it, unless it played through.
    pub fn due(&self, now_ms: i64) -> Option<usize> {
        let i = self.plan.programs.iter().rposition(|p| p.at_ms <= now_ms)?;
        (!self.done[i]).then_some(i)
    }

    /// When something changes by the clock alone next (an item's end, a
    /// programme's start, a retry).
    pub fn next_change(&self, now_ms: i64) -> Option<i64> {
        let mut at: Option<i64> = None;
        let mut min = |t: i64| {
            if t > now_ms {
                at = Some(at.map_or(t, |a| a.min(t)));
            }
        };
        if let Some(p) = self.plan.programs.iter().find(|p| p.at_ms > now_ms) {
            min(p.at_ms);
        }
        for c in [self.want, self.playing].into_iter().flatten() {
            if let Some(d) = self.item(c).and_then(|i| i.duration_ms) {
                min(c.since_ms.saturating_add(d));
            }
        }
        if let Some(r) = self.retry_at {
            min(r);
        }
        for t in self.fallback_failed.iter().flatten() {
            min(t + RETRY_MS);
        }
        at
    }

    /// Moves a cursor past the items whose duration ran out.
    fn advance(&mut self, mut c: Cursor, now_ms: i64) -> Option<Cursor> {
        for _ in 0..=MAX_ITEMS * 2 {
            let d = self.item(c)?.duration_ms;
            match d {
                Some(d) if now_ms >= c.since_ms.saturating_add(d) => {
                    c = self.next_item(c, c.since_ms.saturating_add(d))?;
                }
                _ => return Some(c),
            }
        }
        Some(c)
    }

    /// The item after `c`, starting at `at`; `None` when a programme
    /// without repeat ends.
    fn next_item(&mut self, c: Cursor, at: i64) -> Option<Cursor> {
        let (len, repeat) = match c.program {
            Some(p) => {
                let p = self.plan.programs.get(p)?;
                (p.items.len(), p.repeat)
            }
            None => (self.plan.fallback.len(), true),
        };
        let item = c.item + 1;
        if item < len {
            return Some(Cursor {
                item,
                since_ms: at,
                ..c
            });
        }
        if repeat && len > 0 {
            return Some(Cursor {
                item: 0,
                since_ms: at,
                ..c
            });
        }
        if let Some(p) = c.program {
            self.done[p] = true;
        }
        None
    }

    /// What should play at `now`; `Some(new)` when it changed (`None`
    /// inside: nothing can play).
    pub fn poll(
        &mut self,
        now_ms: i64,
        is_live: &dyn Fn(&StreamUrl) -> bool,
    ) -> Option<Option<Cursor>> {
        let due = self.due(now_ms);
        if due != self.want.and_then(|c| c.program) {
            self.want = due.map(|p| Cursor {
                program: Some(p),
                item: 0,
                since_ms: now_ms,
            });
            self.retry_at = None;
        }
        if let Some(c) = self.want {
            let before = c.item;
            self.want = self.advance(c, now_ms);
            if self.want.map(|c| c.item) != Some(before) {
                self.retry_at = None;
            }
            if self.want.is_none() && self.due(now_ms).is_some() {
                return self.poll(now_ms, is_live);
            }
        }
        // A live item plays while its stream is live (it is left when the
        // stream stops and taken again when it is back).
        let retry_due = self.retry_at.is_none_or(|t| now_ms >= t);
        let wanted = self
            .want
            .filter(|c| match self.item(*c).map(|i| &i.source) {
                Some(Source::Stream(u)) => is_live(u) && retry_due,
                Some(Source::File { .. }) => retry_due,
                None => false,
            });
        let target = match wanted {
            Some(c) => {
                self.fallback = None;
                Some(c)
            }
            None => self.fallback_cursor(now_ms, is_live),
        };
        if target == self.playing {
            return None;
        }
        self.playing = target;
        Some(target)
    }

    fn fallback_cursor(
        &mut self,
        now_ms: i64,
        is_live: &dyn Fn(&StreamUrl) -> bool,
    ) -> Option<Cursor> {
        let len = self.plan.fallback.len();
        if len == 0 {
            return None;
        }
        let mut c = match self.fallback {
            Some(c) => self.advance(c, now_ms)?,
            None => Cursor {
                program: None,
                item: 0,
                since_ms: now_ms,
            },
        };
        // Skip items that cannot play now (at most once round).
        for _ in 0..len {
            let ok = match &self.plan.fallback[c.item].source {
                Source::Stream(u) => is_live(u),
                Source::File { .. } => {
                    self.fallback_failed[c.item].is_none_or(|t| now_ms >= t + RETRY_MS)
                }
            };
            if ok {
                self.fallback = Some(c);
                return Some(c);
            }
            c = Cursor {
                item: (c.item + 1) % len,
                since_ms: now_ms,
                ..c
            };
        }
        self.fallback = None;
        None
    }

    /// The item playing reached its end (a file's end; a live stream
    /// that stopped).
    pub fn ended(&mut self, now_ms: i64) {
        let Some(c) = self.playing else { return };
        let is_stream = matches!(self.item(c).map(|i| &i.source), Some(Source::Stream(_)));
        match c.program {
            // A live item that stopped: fallback until its stream is back.
            Some(_) if is_stream => {}
            Some(_) => {
                self.want = self.next_item(c, now_ms);
                self.retry_at = None;
            }
            None => self.fallback = self.next_item(c, now_ms),
        }
    }

    /// The item playing could not start or broke (a file that does not
    /// open or read, a stream without a track the channel carries): the
    /// fallback plays, and the item is tried again after [`RETRY_MS`].
    pub fn failed(&mut self, now_ms: i64) {
        let Some(c) = self.playing else { return };
        match c.program {
            Some(_) => self.retry_at = Some(now_ms + RETRY_MS),
            None => {
                if let Some(f) = self.fallback_failed.get_mut(c.item) {
                    *f = Some(now_ms);
                }
                self.fallback = self.next_item(c, now_ms);
            }
        }
    }
}

#[cfg(test)]
mod tests;
