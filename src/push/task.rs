//! Push tasks: the table, their states and counters, and the back-off
//! (specification "Push publishing task", DECISIONS section 7).
//!
//! A task is keyed by vhost/app/id. It waits in `ready` until its stream
//! exists, goes `connecting` -> `pushing`, falls to `error` on a failure and
//! retries after a back-off (1 s doubling to 30 s, with jitter, reset after
//! 30 s of pushing), returns to `ready` when the stream ends, and on
//! `:stopPush` goes through `stopping` to `stopped` and is removed.
//!
//! Plain data and pure functions of `now`; sessions run in
//! [`super::manager`].

use super::request::{Destination, PushSpec};
use std::collections::HashMap;
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PushState {
    Ready,
    Connecting,
    Pushing,
    Stopping,
    Stopped,
    Error,
}

impl PushState {
    pub fn name(self) -> &'static str {
        match self {
            PushState::Ready => "ready",
            PushState::Connecting => "connecting",
            PushState::Pushing => "pushing",
            PushState::Stopping => "stopping",
            PushState::Stopped => "stopped",
            PushState::Error => "error",
        }
    }
}

pub use crate::state::task::{backoff, TaskKey};

impl TaskKey {
    pub fn of(spec: &PushSpec) -> Self {
        TaskKey {
            vhost: spec.vhost.clone(),
            app: spec.app.clone(),
            id: spec.id.clone(),
        }
    }
}

/// A task: its spec, state and counters.
#[derive(Debug, Clone)]
pub struct PushTask {
    pub spec: PushSpec,
    pub destination: Destination,
    pub state: PushState,
    /// Bytes written in the current session.
    pub sent_bytes: u64,
    /// When the current session reached `pushing`.
    pub pushing_since: Option<Instant>,
    /// Sessions that have ended.
    pub sequence: u64,
    pub ended_bytes: u64,
    pub ended_ms: u64,
    /// Unix ms when the current (or last) session started / ended.
    pub start_ms: Option<i64>,
    pub finish_ms: Option<i64>,
    pub last_error: Option<String>,
    /// Unix ms when `last_error` happened.
    pub last_error_ms: Option<i64>,
    /// Consecutive failures, for the back-off.
    pub failures: u32,
    /// When to try again (state `error`).
    pub retry_at: Option<Instant>,
    /// Frames dropped for this destination (slow consumer).
    pub dropped_frames: u64,
    /// Creation order (set by the table).
    pub seq: u64,
    /// Output rate (the loop feeds it as `sent_bytes` grows).
    pub out_rate: crate::rate::RateMeter,
}

impl PushTask {
    pub fn new(spec: PushSpec, destination: Destination) -> Self {
        PushTask {
            spec,
            destination,
            state: PushState::Ready,
            sent_bytes: 0,
            pushing_since: None,
            sequence: 0,
            ended_bytes: 0,
            ended_ms: 0,
            start_ms: None,
            finish_ms: None,
            last_error: None,
            last_error_ms: None,
            failures: 0,
            retry_at: None,
            dropped_frames: 0,
            seq: 0,
            out_rate: Default::default(),
        }
    }

    pub fn sent_ms(&self, now: Instant) -> u64 {
        self.pushing_since
            .map(|t| now.saturating_duration_since(t).as_millis() as u64)
            .unwrap_or(0)
    }

    /// A session starts connecting.
    pub fn session_started(&mut self, now_ms: i64) {
        self.state = PushState::Connecting;
        self.sent_bytes = 0;
        self.pushing_since = None;
        self.start_ms = Some(now_ms);
        self.retry_at = None;
    }

    /// The destination accepted the stream.
    /// The session reached `pushing`: `lastError` (why the last session
    /// failed) no longer describes the task, so it is cleared.
    pub fn session_pushing(&mut self, now: Instant) {
        self.state = PushState::Pushing;
        self.pushing_since = Some(now);
        self.last_error = None;
        self.last_error_ms = None;
    }

    /// The current session ended; `error` says why if it failed. Returns
    /// when to retry for a failure.
    pub fn session_ended(
        &mut self,
        now: Instant,
        now_ms: i64,
        error: Option<String>,
        jitter: u32,
    ) -> Option<Instant> {
        let pushed_ms = self.sent_ms(now);
        self.ended_bytes += self.sent_bytes;
        self.ended_ms += pushed_ms;
        self.sent_bytes = 0;
        self.pushing_since = None;
        self.sequence += 1;
        self.finish_ms = Some(now_ms);
        match error {
            Some(e) => {
                if pushed_ms >= 30_000 {
                    self.failures = 0;
                }
                self.failures = self.failures.saturating_add(1);
                self.last_error = Some(e);
                self.last_error_ms = Some(now_ms);
                self.state = PushState::Error;
                let at = now + backoff(self.failures, jitter);
                self.retry_at = Some(at);
                Some(at)
            }
            None => {
                self.state = PushState::Ready;
                self.retry_at = None;
                None
            }
        }
    }
}

/// All tasks, keyed vhost -> app -> id (lookups by `&str`, no allocation:
/// a push session finds its task on every frame it sends). Tasks are boxed:
/// a few hundred bytes each, they would otherwise be moved on every growth
/// of the map (a quarter of start-up with 10,000 tasks).
#[derive(Debug, Default)]
pub struct PushTable {
    tasks: HashMap<String, HashMap<String, HashMap<String, Box<PushTask>>>>,
    count: usize,
    /// Creation order among tasks created in the same millisecond.
    next_seq: u64,
}

impl PushTable {
    pub fn get(&self, vhost: &str, app: &str, id: &str) -> Option<&PushTask> {
        self.tasks.get(vhost)?.get(app)?.get(id).map(|t| &**t)
    }

    pub fn get_mut(&mut self, vhost: &str, app: &str, id: &str) -> Option<&mut PushTask> {
        self.tasks
            .get_mut(vhost)?
            .get_mut(app)?
            .get_mut(id)
            .map(|t| &mut **t)
    }

    pub fn insert(&mut self, mut task: PushTask) {
        self.next_seq += 1;
        task.seq = self.next_seq;
        let slot = self
            .tasks
            .entry(task.spec.vhost.clone())
            .or_default()
            .entry(task.spec.app.clone())
            .or_default();
        if slot.insert(task.spec.id.clone(), Box::new(task)).is_none() {
            self.count += 1;
        }
    }

    pub fn remove(&mut self, vhost: &str, app: &str, id: &str) -> Option<PushTask> {
        let apps = self.tasks.get_mut(vhost)?;
        let ids = apps.get_mut(app)?;
        let task = ids.remove(id)?;
        self.count -= 1;
        if ids.is_empty() {
            apps.remove(app);
            if apps.is_empty() {
                self.tasks.remove(vhost);
            }
        }
        Some(*task)
    }

    /// Tasks of an app, by creation time.
    pub fn of_app(&self, vhost: &str, app: &str) -> Vec<&PushTask> {
        let mut v: Vec<&PushTask> = self
            .tasks
            .get(vhost)
            .and_then(|apps| apps.get(app))
            .map(|ids| ids.values().map(|t| &**t).collect())
            .unwrap_or_default();
        v.sort_unstable_by_key(|t| (t.spec.created_ms, t.seq));
        v
    }

    /// Every task, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = &PushTask> {
        self.tasks
            .values()
            .flat_map(|apps| apps.values())
            .flat_map(|ids| ids.values())
            .map(|t| &**t)
    }

    /// Removes the tasks of an app (or of a whole host).
    pub fn remove_of(&mut self, vhost: &str, app: Option<&str>) -> Vec<PushTask> {
        let mut gone: Vec<PushTask> = Vec::new();
        match app {
            None => {
                if let Some(apps) = self.tasks.remove(vhost) {
                    gone.extend(
                        apps.into_values()
                            .flat_map(|ids| ids.into_values())
                            .map(|t| *t),
                    );
                }
            }
            Some(app) => {
                if let Some(apps) = self.tasks.get_mut(vhost) {
                    if let Some(ids) = apps.remove(app) {
                        gone.extend(ids.into_values().map(|t| *t));
                    }
                    if apps.is_empty() {
                        self.tasks.remove(vhost);
                    }
                }
            }
        }
        self.count -= gone.len();
        gone.sort_unstable_by_key(|t| t.seq);
        gone
    }

    /// The durable part of every task, in creation order.
    pub fn specs(&self) -> Vec<PushSpec> {
        let mut all: Vec<&PushTask> = self.iter().collect();
        all.sort_unstable_by_key(|t| t.seq);
        all.into_iter().map(|t| t.spec.clone()).collect()
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::push::request::{validate_start, StartPushRequest};
    use std::time::Duration;

    fn req(json: &str) -> StartPushRequest {
        serde_json::from_str(json).unwrap()
    }

    fn start(json: &str) -> Result<(PushSpec, Destination), String> {
        validate_start(req(json), "default", "app", 0, &|_| false).map_err(|e| e.to_string())
    }

    #[test]
    fn table_keys_and_order() {
        let mut table = PushTable::default();
        for (app, id) in [("a", "x"), ("a", "y"), ("b", "x")] {
            let (spec, dest) = validate_start(
                req(&format!(r#"{{"id":"{id}","stream":{{"name":"s"}},"protocol":"mpegts","url":"udp://h:1"}}"#)),
                "v",
                app,
                7,
                &|_| true,
            )
            .unwrap();
            table.insert(PushTask::new(spec, dest));
        }
        assert_eq!(table.len(), 3);
        assert!(table.get("v", "a", "y").is_some());
        assert!(table.get("v", "b", "y").is_none());
        let ids: Vec<&str> = table
            .of_app("v", "a")
            .iter()
            .map(|t| t.spec.id.as_str())
            .collect();
        assert_eq!(ids, ["x", "y"]);
        assert_eq!(table.remove_of("v", Some("a")).len(), 2);
        assert_eq!(table.len(), 1);
        assert_eq!(
            table.remove("v", "b", "x").map(|t| t.spec.app),
            Some("b".to_string())
        );
        assert!(table.is_empty());
    }

    #[test]
    fn backoff_doubles_to_thirty_seconds() {
        assert_eq!(backoff(1, 0), Duration::from_secs(1));
        assert_eq!(backoff(2, 0), Duration::from_secs(2));
        assert_eq!(backoff(5, 0), Duration::from_secs(16));
        assert_eq!(backoff(6, 0), Duration::from_secs(30));
        assert_eq!(backoff(60, 0), Duration::from_secs(30));
        assert!(backoff(1, 1023) < Duration::from_millis(1250));
    }

    #[test]
    fn counters_over_sessions() {
        let (spec, dest) =
            start(r#"{"id":"a","stream":{"name":"s"},"protocol":"mpegts","url":"udp://x:1"}"#)
                .unwrap();
        let mut t = PushTask::new(spec, dest);
        let t0 = Instant::now();
        t.session_started(1000);
        t.session_pushing(t0);
        t.sent_bytes = 500;
        let retry = t.session_ended(t0 + Duration::from_secs(2), 3000, Some("refused".into()), 0);
        assert_eq!(retry, Some(t0 + Duration::from_secs(3)));
        assert_eq!(
            (t.state, t.sequence, t.ended_bytes, t.ended_ms),
            (PushState::Error, 1, 500, 2000)
        );
        assert_eq!(t.last_error.as_deref(), Some("refused"));
        t.session_started(4000);
        assert_eq!(
            t.last_error.as_deref(),
            Some("refused"),
            "kept while connecting"
        );
        t.session_pushing(t0);
        assert_eq!(t.last_error, None, "cleared once pushing again");
        t.sent_bytes = 100;
        assert_eq!(
            t.session_ended(t0 + Duration::from_secs(1), 5000, None, 0),
            None
        );
        assert_eq!(
            (t.state, t.sequence, t.ended_bytes),
            (PushState::Ready, 2, 600)
        );
    }
}
