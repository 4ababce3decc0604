//! Runs the push tasks: which tasks get a session (a task whose stream is
//! live and that has none, a failed one whose back-off has passed), the
//! sessions themselves, the stream feeds they read, what their reports do
//! to their tasks (`connecting` -> `pushing` -> `ready`/`error`), retries,
//! and each session's share of the queue budget.
//!
//! Sans-IO like the sessions: the loop (`server::push_io`) asks for the
//! I/O of new sessions ([`PushManager::poll_new`]), drives the sessions
//! it was told about ([`PushManager::take_woken`], then
//! [`PushManager::transmit`] and [`PushManager::after`]), and passes
//! `now` in.

use super::feed::Feed;
use super::request::{redacted_url, select_tracks};
use super::session::{queue_bytes_for, Link, PushSession, Report, StartMedia, Wire};
use super::task::{PushState, TaskKey};
use crate::clock::Now;
use crate::media::{Track, TrackId};
use crate::state::app::output_tracks;
use crate::state::streams::{IngestOutput, StreamId, StreamMap};
use crate::state::Registry;
use slab::Slab;
use std::collections::{HashMap, VecDeque};
use std::time::Instant;

/// A session's handle.
pub(crate) type SessionId = usize;

struct Slot {
    session: PushSession,
    /// The destination's host and port (what the glue resolves).
    host: String,
    port: u16,
    /// The loop's handle of the session's I/O, once made.
    io: Option<usize>,
    woken: bool,
    /// The session's end has been taken into its task; later numbers (a
    /// clean close still finishing) no longer belong to the task.
    task_done: bool,
    /// When the task last got the session's counters.
    synced: Option<Instant>,
}

/// How often a running session's counters go to its task (what the stats
/// API shows) when nothing else happens: once a second, the window of the
/// task's rate meter. Each sync looks the task up by its three names; at
/// 300 pushes five times a second that was a tenth of the fan-out's
/// user-space CPU.
const SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// How often the feeds drop the frames every session has sent.
const TRIM_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// A new session's I/O to make.
#[derive(Debug)]
pub(crate) struct NewSession {
    pub id: SessionId,
    pub link: Link,
    pub host: String,
    pub port: u16,
}

/// What [`PushManager::after`] leaves for the loop.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum After {
    /// The session goes on.
    Running,
    /// The session is over: drop its I/O (the loop's handle).
    Finished(Option<usize>),
}

#[derive(Default)]
pub(crate) struct PushManager {
    /// The push tasks (the API adds and removes them).
    pub tasks: crate::push::task::PushTable,
    slots: Slab<Slot>,
    by_task: HashMap<TaskKey, SessionId>,
    /// Stream -> the sessions reading it.
    subscribers: StreamMap<Vec<SessionId>>,
    feeds: StreamMap<Feed>,
    new: VecDeque<SessionId>,
    woken: Vec<SessionId>,
    retry_at: Option<Instant>,
    /// When the feeds were last trimmed.
    trimmed_at: Option<Instant>,
    jitter: u32,
    /// A task changed state since the last look (the stats peaks).
    state_changed: bool,
}

/// A feed for sessions whose stream is gone (closing ones).
static NO_FEED: std::sync::LazyLock<Feed> = std::sync::LazyLock::new(Feed::default);

/// The stream a task reads, its tracks, and the task's tracks among them
/// (one function for a start and for every track change).
fn selection(
    reg: &Registry,
    tasks: &crate::push::task::PushTable,
    key: &TaskKey,
) -> Option<(StreamId, Vec<Track>, Vec<TrackId>)> {
    let task = tasks.get(&key.vhost, &key.app, &key.id)?;
    let (stream, profile) = reg.output_stream(&key.vhost, &key.app, &task.spec.stream_name)?;
    let tracks = reg.streams.get(stream)?.tracks().to_vec();
    let named = output_tracks(&tracks, profile);
    let selected = select_tracks(&task.spec, &tracks, &|t| {
        named
            .iter()
            .find(|(x, _)| x.id == t.id)
            .map(|(_, n)| n.clone())
    });
    Some((stream, tracks, selected))
}

impl PushManager {
    pub(crate) fn new(jitter_seed: u32) -> Self {
        PushManager {
            jitter: jitter_seed,
            ..PushManager::default()
        }
    }

    #[cfg(test)]
    /// Sessions running (closing ones included).
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Gives every task that can run a session; arms the retry time.
    pub(crate) fn reconcile(&mut self, reg: &mut Registry, now: Now) {
        let mut to_start = Vec::new();
        let mut to_ready = Vec::new();
        self.retry_at = None;
        let outputs = reg.live_outputs();
        for task in self.tasks.iter() {
            if task.state == PushState::Error {
                if let Some(at) = task.retry_at.filter(|at| *at > now.instant) {
                    self.retry_at = Some(self.retry_at.map_or(at, |r| r.min(at)));
                    continue;
                }
            }
            let spec = &task.spec;
            let stream = outputs.get(&spec.vhost, &spec.app, &spec.stream_name);
            if stream.is_none() && task.state == PushState::Ready {
                continue; // waiting for its stream: nothing to do
            }
            let key = TaskKey::of(spec);
            if self.by_task.contains_key(&key) {
                continue;
            }
            match stream {
                Some(_) => to_start.push((task.seq, key)),
                None => to_ready.push(key),
            }
        }
        for key in to_ready {
            if let Some(t) = self.tasks.get_mut(&key.vhost, &key.app, &key.id) {
                t.state = PushState::Ready;
            }
        }
        // In creation order (the table is a hash map): a stream's pushes are
        // served in the order they were made, every frame.
        to_start.sort_unstable_by_key(|(seq, _)| *seq);
        for (_, key) in to_start {
            self.start(key, reg, now);
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is due (a retry).
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.retry_at
    }

    pub(crate) fn handle_timeout(&mut self, reg: &mut Registry, now: Now) {
        if self.retry_at.is_some_and(|at| at <= now.instant) {
            self.reconcile(reg, now);
        }
    }

    /// Starts a new task's session if its stream is live (`:startPush`).
    pub(crate) fn start_if_live(&mut self, key: TaskKey, reg: &mut Registry, now: Now) {
        if !self.by_task.contains_key(&key) {
            self.start(key, reg, now);
        }
    }

    fn start(&mut self, key: TaskKey, reg: &mut Registry, now: Now) {
        let Some((stream, tracks, selected)) = selection(reg, &self.tasks, &key) else {
            return;
        };
        let Some(live) = reg.streams.get(stream) else {
            return;
        };
        let Some(task) = self.tasks.get_mut(&key.vhost, &key.app, &key.id) else {
            return;
        };
        let feed = self
            .feeds
            .entry(stream)
            .or_insert_with(|| Feed::new(&tracks, live.gop()));
        let session = PushSession::new(
            key.clone(),
            &task.destination,
            &task.spec.url,
            &task.spec.stream_key,
            StartMedia {
                stream,
                tracks,
                selected,
                from: feed.gop_start(),
            },
            queue_bytes_for(self.slots.len() + 1),
            now.instant,
        );
        if session.is_rtmp() {
            feed.enable_rtmp();
        }
        crate::info!(
            "push [{key}]: connecting to {}",
            redacted_url(&task.spec.url)
        );
        task.session_started(now.unix_ms);
        self.state_changed = true;
        let (host, port) = task.destination.host_port();
        let id = self.slots.insert(Slot {
            session,
            host: host.to_string(),
            port,
            io: None,
            woken: false,
            task_done: false,
            synced: None,
        });
        self.by_task.insert(key, id);
        self.subscribers.entry(stream).or_default().push(id);
        self.new.push_back(id);
        self.rebalance();
    }

    /// Stops a task's session (`:stopPush`): it closes cleanly and reports
    /// nothing more.
    pub(crate) fn stop(&mut self, key: &TaskKey, now: Instant) {
        let Some(id) = self.by_task.remove(key) else {
            return;
        };
        self.close(id, true, now);
    }

    fn close(&mut self, id: SessionId, detached: bool, now: Instant) {
        let Some(slot) = self.slots.get_mut(id) else {
            return;
        };
        let stream = slot.session.stream;
        let feed = self.feeds.get(&stream).unwrap_or(&NO_FEED);
        slot.session.close(detached, feed, now);
        self.unsubscribe(stream, id);
        self.wake(id);
    }

    /// A session no longer reads `stream`; the last one's going drops the
    /// feed.
    fn unsubscribe(&mut self, stream: StreamId, id: SessionId) {
        if let Some(list) = self.subscribers.get_mut(&stream) {
            list.retain(|s| *s != id);
            if list.is_empty() {
                self.subscribers.remove(&stream);
                self.feeds.remove(&stream);
            }
        }
    }

    /// Hands what an ingest produced to its stream's sessions.
    pub(crate) fn on_ingest(&mut self, out: &IngestOutput, reg: &mut Registry, now: Now) {
        if let Some(stream) = out.stream {
            if let (Some(feed), Some(subs)) =
                (self.feeds.get_mut(&stream), self.subscribers.get(&stream))
            {
                if out.tracks_changed {
                    if let Some(live) = reg.streams.get(stream) {
                        feed.set_tracks(live.tracks());
                    }
                    for &id in subs {
                        let Some(slot) = self.slots.get_mut(id) else {
                            continue;
                        };
                        if let Some((_, tracks, selected)) =
                            selection(reg, &self.tasks, &slot.session.key)
                        {
                            slot.session.on_tracks(tracks, selected);
                        }
                    }
                }
                // One clone per stream (a reference count), none per session.
                for f in &out.frames {
                    feed.push(f.clone());
                }
                // A read that completed no frame wakes nobody.
                let news = !out.frames.is_empty() || out.tracks_changed;
                for &id in subs.iter().filter(|_| news) {
                    if let Some(slot) = self.slots.get_mut(id) {
                        slot.session.on_frames(feed, now.instant);
                        if !slot.woken {
                            slot.woken = true;
                            self.woken.push(id);
                        }
                    }
                }
            }
        }
        if let Some(ended) = out.ended {
            let subs = self.subscribers.get(&ended).cloned().unwrap_or_default();
            // Each close unsubscribes; the last takes the feed with it.
            for id in subs {
                self.close(id, false, now.instant);
            }
        }
        if out.started.is_some() || out.ended.is_some() {
            self.reconcile(reg, now);
        }
    }

    /// A session has something to do (input, a timeout, a close).
    pub(crate) fn wake(&mut self, id: SessionId) {
        if let Some(slot) = self.slots.get_mut(id) {
            if !slot.woken {
                slot.woken = true;
                self.woken.push(id);
            }
        }
    }

    /// The next new session whose I/O the loop makes.
    pub(crate) fn poll_new(&mut self) -> Option<NewSession> {
        while let Some(id) = self.new.pop_front() {
            if let Some(slot) = self.slots.get(id) {
                return Some(NewSession {
                    id,
                    link: slot.session.link().clone(),
                    host: slot.host.clone(),
                    port: slot.port,
                });
            }
        }
        None
    }

    /// The loop made a session's I/O (`io`: its handle for it).
    pub(crate) fn attach(&mut self, id: SessionId, io: usize) {
        if let Some(slot) = self.slots.get_mut(id) {
            slot.io = Some(io);
        }
    }

    /// The sessions woken since the last call whose I/O exists, with it,
    /// into `out` (cleared first; the caller keeps it, so the loop does not
    /// allocate per turn).
    pub(crate) fn take_woken(&mut self, out: &mut Vec<(SessionId, usize)>) {
        out.clear();
        for id in self.woken.drain(..) {
            if let Some(slot) = self.slots.get_mut(id) {
                slot.woken = false;
                if let Some(io) = slot.io {
                    out.push((id, io));
                }
            }
        }
    }

    /// Prefetches session `id`'s slot: the first of two steps, some turns
    /// ahead (then [`prefetch`](Self::prefetch) follows the pointers in it).
    pub(crate) fn prefetch_slot(&self, id: SessionId) {
        if let Some(slot) = self.slots.get(id) {
            crate::sys::prefetch(&slot.woken);
            crate::sys::prefetch(&slot.synced);
            slot.session.prefetch_slot();
        }
    }

    /// Prefetches what transmitting on session `id` reads (see
    /// [`PushSession::prefetch`]).
    pub(crate) fn prefetch(&self, id: SessionId) {
        if let Some(slot) = self.slots.get(id) {
            slot.session.prefetch();
        }
    }

    pub(crate) fn session(&self, id: SessionId) -> Option<&PushSession> {
        self.slots.get(id).map(|s| &s.session)
    }

    pub(crate) fn session_mut(&mut self, id: SessionId) -> Option<&mut PushSession> {
        self.slots.get_mut(id).map(|s| &mut s.session)
    }

    /// Lets a session write through `wire` what its feed and protocol have.
    pub(crate) fn transmit(&mut self, id: SessionId, now: Instant, wire: &mut dyn Wire) {
        let Some(slot) = self.slots.get_mut(id) else {
            return;
        };
        let feed = self.feeds.get(&slot.session.stream).unwrap_or(&NO_FEED);
        slot.session.poll_transmit(feed, now, wire);
    }

    /// Applies a session's reports to its task; a finished session is
    /// removed and a failed task's retry armed.
    pub(crate) fn after(&mut self, id: SessionId, now: Now) -> After {
        let Some(slot) = self.slots.get_mut(id) else {
            return After::Finished(None);
        };
        let s = &mut slot.session;
        let mut ended = false;
        // Runs for every push on every ingest read: the task is looked up
        // only when there is news, or its counters are due.
        let due = s.has_reports()
            || s.is_done()
            || slot
                .synced
                .is_none_or(|at| now.instant.saturating_duration_since(at) >= SYNC_INTERVAL);
        if due && !s.detached && !slot.task_done {
            slot.synced = Some(now.instant);
            if let Some(task) = self.tasks.get_mut(&s.key.vhost, &s.key.app, &s.key.id) {
                // A new session starts from 0: then all of it is new.
                let new_bytes = s
                    .sent_bytes
                    .checked_sub(task.sent_bytes)
                    .unwrap_or(s.sent_bytes);
                task.out_rate.add(new_bytes, now.instant);
                task.sent_bytes = s.sent_bytes;
                task.dropped_frames = s.dropped_frames();
                while let Some(r) = s.poll_report() {
                    match r {
                        Report::Pushing => {
                            crate::info!("push [{}]: pushing", s.key);
                            task.session_pushing(now.instant);
                            self.state_changed = true;
                        }
                        Report::Ended(err) => {
                            ended = true;
                            self.state_changed = true;
                            self.jitter =
                                self.jitter.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                            let why = err.clone();
                            let retry = task.session_ended(
                                now.instant,
                                now.unix_ms,
                                err,
                                (self.jitter >> 16) & 1023,
                            );
                            // A failure an operator acts on: WARN, with when
                            // the next attempt is due (DECISIONS 14).
                            if let Some(why) = why {
                                let next = retry.map_or(String::new(), |at| {
                                    format!(
                                        "; next attempt in {:.1} s",
                                        at.saturating_duration_since(now.instant).as_secs_f64()
                                    )
                                });
                                crate::warn!(
                                    "push [{}] failed (session {}): {why}{next}",
                                    s.key,
                                    task.sequence
                                );
                            }
                            if let Some(at) = retry {
                                self.retry_at = Some(self.retry_at.map_or(at, |r| r.min(at)));
                            }
                        }
                    }
                }
            }
        }
        // Reports of a detached or finished session mean nothing now.
        while s.poll_report().is_some() {}
        if ended {
            slot.task_done = true;
            // The task is free for a new session (a clean close may still
            // be finishing on this one).
            if self.by_task.get(&s.key) == Some(&id) {
                self.by_task.remove(&s.key);
            }
        }
        if !s.is_done() {
            return After::Running;
        }
        let io = slot.io;
        let stream = s.stream;
        let key = s.key.clone();
        self.slots.remove(id);
        if self.by_task.get(&key) == Some(&id) {
            self.by_task.remove(&key);
        }
        self.unsubscribe(stream, id);
        self.rebalance();
        After::Finished(io)
    }

    /// Ends a session from outside its logic (a contained panic).
    pub(crate) fn abort(&mut self, id: SessionId, why: &str) {
        if let Some(slot) = self.slots.get_mut(id) {
            slot.session.abort(why);
        }
        self.wake(id);
    }

    /// Drops what every session of a stream has sent (the last GOP stays).
    ///
    /// It reads every session's position: at most every [`TRIM_INTERVAL`],
    /// not on every turn of the loop (at 300 pushes that pass was a miss
    /// per session per turn; the feed holds at most that much longer).
    pub(crate) fn trim_feeds(&mut self, now: Instant) {
        if self
            .trimmed_at
            .is_some_and(|at| now.saturating_duration_since(at) < TRIM_INTERVAL)
        {
            return;
        }
        self.trimmed_at = Some(now);
        for (stream, feed) in self.feeds.iter_mut() {
            let Some(subs) = self.subscribers.get(stream) else {
                continue;
            };
            let oldest = subs
                .iter()
                .filter_map(|id| self.slots.get(*id))
                .map(|s| s.session.position())
                .min();
            if let Some(at) = oldest {
                feed.trim(at);
            }
        }
    }

    /// Whether a task changed state since the last call.
    pub(crate) fn take_state_changed(&mut self) -> bool {
        std::mem::take(&mut self.state_changed)
    }

    /// Gives every session its share of the queue budget.
    fn rebalance(&mut self) {
        let bytes = queue_bytes_for(self.slots.len());
        for (_, slot) in self.slots.iter_mut() {
            slot.session.set_queue_bytes(bytes);
        }
    }
}
