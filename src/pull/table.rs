//! Pulled streams: the table and each pull's course, as plain data and
//! pure functions of `now` (the I/O is `server/pull_io.rs`).
//!
//! A pull tries its URLs in order. The first to deliver media makes it
//! `live` and answers the API requests waiting for it. A URL that fails
//! passes to the next at once; when every URL of a round failed, the
//! waiters get every reason (502), and then:
//! - a pull that has been live, or is `persistent`, tries again from the
//!   first URL after a back-off (1 s doubling to 30 s, with jitter);
//! - any other pull is removed (it never worked).
//!
//! A pull made on demand (a viewer asked for a stream an origin or the
//! origin map knows) is removed whenever it fails: the next request looks
//! the stream up again (it may have moved to another origin). It ends when
//! nobody used it for its `unused_stream_deletion_timeout_ms`.

use super::request::{redacted, PullSpec, Source};
use crate::state::task::backoff;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// The waiter of a pull nobody waits for (a push or record asked for
/// the stream): no answer is sent.
pub const NO_WAITER: usize = usize::MAX;

/// Most pulls made on demand at once.
pub const MAX_ON_DEMAND: usize = 256;

/// A pulled stream's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PullKey {
    pub vhost: String,
    pub app: String,
    pub name: String,
}

impl PullKey {
    pub fn of(spec: &PullSpec) -> Self {
        PullKey {
            vhost: spec.vhost.clone(),
            app: spec.app.clone(),
            name: spec.name.clone(),
        }
    }
}

impl std::fmt::Display for PullKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}/{}", self.vhost, self.app, self.name)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullState {
    Connecting,
    Live,
    /// Every URL failed; the next round starts at `retry_at`.
    Waiting,
}

impl PullState {
    pub fn name(self) -> &'static str {
        match self {
            PullState::Connecting => "connecting",
            PullState::Live => "live",
            PullState::Waiting => "waiting",
        }
    }
}

/// One session of a pull: an attempt at one URL.
pub type SessionId = u64;

#[derive(Debug)]
pub struct PullTask {
    pub spec: PullSpec,
    sources: Vec<Source>,
    pub state: PullState,
    /// The URL being tried (or to try next).
    url_index: usize,
    /// This round's failures, one text per URL.
    errors: Vec<String>,
    pub last_error: Option<String>,
    failures: u32,
    retry_at: Option<Instant>,
    been_live: bool,
    waiters: Vec<usize>,
    session: Option<SessionId>,
    /// The session's endpoint in the loop.
    pub io: Option<usize>,
    on_demand: bool,
    last_used: Instant,
}

impl PullTask {
    /// When an on-demand pull ends for want of use.
    fn unused_at(&self) -> Option<Instant> {
        (self.on_demand && self.state == PullState::Live).then(|| {
            self.last_used + Duration::from_millis(self.spec.unused_stream_deletion_timeout_ms)
        })
    }

    /// A viewer's request started it (it ends when unused).
    pub fn on_demand(&self) -> bool {
        self.on_demand
    }

    pub fn url(&self) -> &str {
        self.spec
            .urls
            .get(self.url_index)
            .map_or("", String::as_str)
    }
}

/// A session the loop must open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPull {
    pub key: PullKey,
    pub session: SessionId,
    pub source: Source,
    /// No media for this long fails the session.
    pub no_input: Duration,
}

/// The answer for an API request waiting on a pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullAnswer {
    pub waiter: usize,
    pub key: PullKey,
    /// `Err`: why every URL failed.
    pub result: Result<(), String>,
}

#[derive(Debug, Default)]
pub struct PullTable {
    tasks: HashMap<PullKey, PullTask>,
    next_session: SessionId,
    new: VecDeque<NewPull>,
    answers: VecDeque<PullAnswer>,
}

impl PullTable {
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }

    pub fn get(&self, key: &PullKey) -> Option<&PullTask> {
        self.tasks.get(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = &PullTask> {
        self.tasks.values()
    }

    /// The pulls of an application (on-demand ones too), by name.
    pub fn of_app(&self, vhost: &str, app: &str) -> Vec<&PullTask> {
        let mut v: Vec<&PullTask> = (self.tasks.values())
            .filter(|t| t.spec.vhost == vhost && t.spec.app == app)
            .collect();
        v.sort_unstable_by(|a, b| a.spec.name.cmp(&b.spec.name));
        v
    }

    /// The specs to keep in the state file.
    pub fn specs(&self) -> Vec<PullSpec> {
        let mut v: Vec<PullSpec> = self
            .tasks
            .values()
            .filter(|t| t.spec.persistent)
            .map(|t| t.spec.clone())
            .collect();
        v.sort_unstable_by(|a, b| (&a.vhost, &a.app, &a.name).cmp(&(&b.vhost, &b.app, &b.name)));
        v
    }

    /// Adds a pull and starts its first URL.
    pub fn insert(&mut self, spec: PullSpec, sources: Vec<Source>, now: Instant) {
        self.insert_task(spec, sources, false, now);
    }

    /// Adds a pull a viewer asked for (see the module docs). False when
    /// [`MAX_ON_DEMAND`] are under way: viewers (unauthenticated) must not
    /// make kiln hold many outgoing connections.
    pub fn insert_on_demand(&mut self, spec: PullSpec, sources: Vec<Source>, now: Instant) -> bool {
        if self.tasks.values().filter(|t| t.on_demand).count() >= MAX_ON_DEMAND {
            return false;
        }
        self.insert_task(spec, sources, true, now);
        true
    }

    /// Was `key` pulled on demand (an edge's copy, not an origin's)?
    pub fn is_on_demand(&self, key: &PullKey) -> bool {
        self.tasks.get(key).is_some_and(|t| t.on_demand)
    }

    /// The on-demand pulls that are live (to see whether anyone still
    /// uses their streams).
    pub fn live_on_demand(&self) -> Vec<PullKey> {
        self.tasks
            .iter()
            .filter(|(_, t)| t.on_demand && t.state == PullState::Live)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Someone uses the stream `key` names (a viewer request).
    pub fn touch(&mut self, key: &PullKey, now: Instant) {
        if let Some(t) = self.tasks.get_mut(key) {
            t.last_used = now;
        }
    }

    fn insert_task(&mut self, spec: PullSpec, sources: Vec<Source>, on_demand: bool, now: Instant) {
        let key = PullKey::of(&spec);
        let task = PullTask {
            spec,
            sources,
            state: PullState::Connecting,
            url_index: 0,
            errors: Vec::new(),
            last_error: None,
            failures: 0,
            retry_at: None,
            been_live: false,
            waiters: Vec::new(),
            session: None,
            io: None,
            on_demand,
            last_used: now,
        };
        self.tasks.insert(key.clone(), task);
        self.start(&key);
    }

    fn start(&mut self, key: &PullKey) {
        let Some(t) = self.tasks.get_mut(key) else {
            return;
        };
        let Some(source) = t.sources.get(t.url_index).cloned() else {
            return;
        };
        self.next_session += 1;
        t.session = Some(self.next_session);
        t.state = PullState::Connecting;
        t.retry_at = None;
        self.new.push_back(NewPull {
            key: key.clone(),
            session: self.next_session,
            source,
            no_input: Duration::from_millis(t.spec.no_input_failover_timeout_ms),
        });
    }

    /// An API request waits for `key` to be live or failed; answered at
    /// once when it is live already. False: no such pull.
    pub fn add_waiter(&mut self, key: &PullKey, waiter: usize) -> bool {
        let Some(t) = self.tasks.get_mut(key) else {
            return false;
        };
        if waiter == NO_WAITER {
            return true;
        }
        if t.state == PullState::Live {
            self.answers.push_back(PullAnswer {
                waiter,
                key: key.clone(),
                result: Ok(()),
            });
        } else {
            t.waiters.push(waiter);
        }
        true
    }

    /// A waiter went away (its connection closed).
    pub fn forget_waiter(&mut self, key: &PullKey, waiter: usize) {
        if let Some(t) = self.tasks.get_mut(key) {
            t.waiters.retain(|w| *w != waiter);
        }
    }

    /// Removes a pull; its waiters hear why. Its I/O token, to close.
    pub fn remove(&mut self, key: &PullKey, why: &str) -> Option<usize> {
        let t = self.tasks.remove(key)?;
        for waiter in t.waiters {
            self.answers.push_back(PullAnswer {
                waiter,
                key: key.clone(),
                result: Err(why.to_string()),
            });
        }
        t.io
    }

    /// Removes the pulls of a host (or of one of its applications).
    pub fn remove_of(&mut self, vhost: &str, app: Option<&str>) -> Vec<usize> {
        let keys: Vec<PullKey> = self
            .tasks
            .keys()
            .filter(|k| k.vhost == vhost && app.is_none_or(|a| a == k.app))
            .cloned()
            .collect();
        keys.iter()
            .filter_map(|k| self.remove(k, "the application was deleted"))
            .collect()
    }

    pub fn poll_new(&mut self) -> Option<NewPull> {
        self.new.pop_front()
    }

    pub fn poll_answer(&mut self) -> Option<PullAnswer> {
        self.answers.pop_front()
    }

    fn key_of(&self, session: SessionId) -> Option<PullKey> {
        self.tasks
            .iter()
            .find(|(_, t)| t.session == Some(session))
            .map(|(k, _)| k.clone())
    }

    /// The loop made the session's endpoint.
    pub fn attach(&mut self, session: SessionId, io: usize) {
        if let Some(t) = self.key_of(session).and_then(|k| self.tasks.get_mut(&k)) {
            t.io = Some(io);
        }
    }

    /// The session delivers media: the pull is live.
    pub fn on_live(&mut self, session: SessionId) {
        let Some(key) = self.key_of(session) else {
            return;
        };
        let Some(t) = self.tasks.get_mut(&key) else {
            return;
        };
        t.state = PullState::Live;
        t.been_live = true;
        t.failures = 0;
        t.errors.clear();
        crate::info!("pull [{key}] is live from {}", redacted(t.url()));
        for waiter in std::mem::take(&mut t.waiters) {
            self.answers.push_back(PullAnswer {
                waiter,
                key: key.clone(),
                result: Ok(()),
            });
        }
    }

    /// The session ended (failed to start, or its media stopped): the next
    /// URL, a back-off, or the end of the pull. A session that is no
    /// longer the pull's (removed, replaced) is ignored.
    pub fn on_failed(&mut self, session: SessionId, why: &str, now: Instant) {
        let Some(key) = self.key_of(session) else {
            return;
        };
        let Some(t) = self.tasks.get_mut(&key) else {
            return;
        };
        t.io = None;
        t.session = None;
        let url = redacted(t.url());
        crate::warn!("pull [{key}] from {url}: {why}");
        t.errors.push(format!("{url}: {why}"));
        t.last_error = Some(why.to_string());
        t.url_index += 1;
        if t.url_index < t.sources.len() {
            self.start(&key);
            return;
        }
        t.url_index = 0;
        let why_all = std::mem::take(&mut t.errors).join("; ");
        for waiter in std::mem::take(&mut t.waiters) {
            self.answers.push_back(PullAnswer {
                waiter,
                key: key.clone(),
                result: Err(why_all.clone()),
            });
        }
        if t.on_demand {
            crate::info!("pull [{key}] (on demand) ended");
            self.tasks.remove(&key);
        } else if t.been_live || t.spec.persistent {
            t.failures += 1;
            let wait = backoff(
                t.failures,
                (session as u32).wrapping_mul(2_654_435_761) >> 22,
            );
            t.state = PullState::Waiting;
            t.retry_at = Some(now + wait);
            crate::info!(
                "pull [{key}]: every URL failed; trying again in {} ms",
                wait.as_millis()
            );
        } else {
            crate::warn!("pull [{key}] failed on every URL; removed");
            self.tasks.remove(&key);
        }
    }

    /// Starts the rounds whose back-off is over; ends the on-demand pulls
    /// nobody used for their unused timeout (their I/O tokens, to close).
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<usize> {
        let unused: Vec<PullKey> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.unused_at().is_some_and(|at| at <= now))
            .map(|(k, _)| k.clone())
            .collect();
        let mut close = Vec::new();
        for key in unused {
            crate::info!("pull [{key}] (on demand) unused; ended");
            close.extend(self.remove(&key, "unused"));
        }
        let due: Vec<PullKey> = self
            .tasks
            .iter()
            .filter(|(_, t)| t.retry_at.is_some_and(|at| at <= now))
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.start(&key);
        }
        close
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.tasks
            .values()
            .flat_map(|t| [t.retry_at, t.unused_at()])
            .flatten()
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(urls: &[&str], persistent: bool) -> (PullSpec, Vec<Source>) {
        let spec = PullSpec {
            vhost: "v".into(),
            app: "a".into(),
            name: "cam".into(),
            urls: urls.iter().map(|u| u.to_string()).collect(),
            persistent,
            no_input_failover_timeout_ms: 3000,
            unused_stream_deletion_timeout_ms: 60_000,
        };
        let sources = urls.iter().map(|u| Source::parse(u).unwrap()).collect();
        (spec, sources)
    }

    fn key() -> PullKey {
        PullKey {
            vhost: "v".into(),
            app: "a".into(),
            name: "cam".into(),
        }
    }

    #[test]
    fn fails_over_then_goes_live_and_answers() {
        let now = Instant::now();
        let mut t = PullTable::default();
        let (s, src) = spec(&["rtsp://a/1", "rtsp://b/2"], false);
        t.insert(s, src, Instant::now());
        assert!(t.add_waiter(&key(), 7));
        let first = t.poll_new().unwrap();
        assert_eq!(first.source.host_port(), ("a", 554));
        assert_eq!(first.no_input, Duration::from_secs(3));
        t.attach(first.session, 100);
        assert_eq!(t.get(&key()).unwrap().io, Some(100));
        t.on_failed(first.session, "refused", now);
        assert!(t.poll_answer().is_none());
        let second = t.poll_new().unwrap();
        assert_eq!(second.source.host_port(), ("b", 554));
        t.on_live(second.session);
        assert_eq!(
            t.poll_answer(),
            Some(PullAnswer {
                waiter: 7,
                key: key(),
                result: Ok(())
            })
        );
        // A late waiter on a live pull is answered at once.
        t.add_waiter(&key(), 8);
        assert_eq!(t.poll_answer().unwrap().waiter, 8);
        // A stale report from the first session changes nothing.
        t.on_failed(first.session, "late", now);
        assert_eq!(t.get(&key()).unwrap().state, PullState::Live);
    }

    #[test]
    fn never_live_and_not_persistent_is_removed_with_every_reason() {
        let now = Instant::now();
        let mut t = PullTable::default();
        let (s, src) = spec(&["rtsp://a/1", "rtsp://b/2"], false);
        t.insert(s, src, Instant::now());
        t.add_waiter(&key(), 1);
        let a = t.poll_new().unwrap();
        t.on_failed(a.session, "connection refused", now);
        let b = t.poll_new().unwrap();
        t.on_failed(b.session, "DESCRIBE: 404 Not Found", now);
        let answer = t.poll_answer().unwrap();
        assert_eq!(
            answer.result,
            Err("rtsp://a/1: connection refused; rtsp://b/2: DESCRIBE: 404 Not Found".into())
        );
        assert!(t.is_empty());
        assert!(t.poll_new().is_none());
    }

    #[test]
    fn live_or_persistent_pulls_back_off_and_retry() {
        let now = Instant::now();
        let mut t = PullTable::default();
        let (s, src) = spec(&["rtsp://a/1"], true);
        t.insert(s, src, Instant::now());
        let a = t.poll_new().unwrap();
        t.on_failed(a.session, "refused", now);
        let task = t.get(&key()).unwrap();
        assert_eq!(task.state, PullState::Waiting);
        let at = t.poll_timeout().unwrap();
        assert!(at >= now + Duration::from_secs(1) && at <= now + Duration::from_millis(1250));
        t.handle_timeout(now + Duration::from_millis(500));
        assert!(t.poll_new().is_none());
        t.handle_timeout(at);
        let b = t.poll_new().unwrap();
        t.on_live(b.session);
        // Drops after being live: back-off again from 1 s.
        t.on_failed(b.session, "no media for 3 s", now);
        assert_eq!(t.get(&key()).unwrap().state, PullState::Waiting);
        assert_eq!(t.specs().len(), 1);
        assert_eq!(t.remove(&key(), "deleted"), None);
        assert!(t.poll_timeout().is_none());
    }

    #[test]
    fn on_demand_pulls_end_on_failure_and_when_unused() {
        let now = Instant::now();
        let mut t = PullTable::default();
        let (s, src) = spec(&["srt://a:1/x/y"], false);
        assert!(t.insert_on_demand(s.clone(), src.clone(), now));
        let a = t.poll_new().unwrap();
        t.on_live(a.session);
        t.on_failed(a.session, "peer shut down", now);
        assert!(t.is_empty(), "a failed on-demand pull is not retried");
        assert!(t.insert_on_demand(s.clone(), src.clone(), now));
        let b = t.poll_new().unwrap();
        t.attach(b.session, 9);
        t.on_live(b.session);
        assert_eq!(t.poll_timeout(), Some(now + Duration::from_secs(60)));
        t.touch(&key(), now + Duration::from_secs(30));
        assert!(t.handle_timeout(now + Duration::from_secs(60)).is_empty());
        assert_eq!(t.handle_timeout(now + Duration::from_secs(90)), vec![9]);
        assert!(t.is_empty());
        // Bounded: viewers cannot make kiln open connections without end.
        for i in 0..MAX_ON_DEMAND {
            let mut s = s.clone();
            s.name = format!("cam{i}");
            assert!(t.insert_on_demand(s, src.clone(), now));
        }
        assert!(!t.insert_on_demand(s, src, now));
    }

    #[test]
    fn removal_answers_waiters() {
        let mut t = PullTable::default();
        let (s, src) = spec(&["rtsp://a/1"], false);
        t.insert(s, src, Instant::now());
        t.add_waiter(&key(), 3);
        t.add_waiter(&key(), 4);
        t.forget_waiter(&key(), 4);
        let n = t.poll_new().unwrap();
        t.attach(n.session, 55);
        assert_eq!(t.remove_of("v", Some("a")), vec![55]);
        let a = t.poll_answer().unwrap();
        assert_eq!(
            (a.waiter, a.result),
            (3, Err("the application was deleted".into()))
        );
        assert!(t.poll_answer().is_none());
    }
}
