//! The admission of every session, sans-IO (DECISIONS section 11): the
//! signed policy first, then the admission webhook; the openings in flight
//! and who waits for them; the sessions owed a closing; and the viewer
//! sessions an admitted LL-HLS/HLS playlist request opens.
//!
//! An endpoint asks [`AccessManager::check`]: the answer is at once
//! (allowed, refused) or later ([`Verdict::Pending`]: the loop sends the
//! webhook [`Call`]s the manager makes, hands their replies back, and
//! delivers each decision to the endpoint that waits for it). Every
//! allowed opening gets exactly one closing, sent after the opening's
//! answer: when its session ends ([`AccessManager::close`]), when the
//! endpoint that waited is gone before the answer came
//! ([`AccessManager::cancel`]), or when a viewer session goes quiet or
//! expires.

use super::http_client::Response;
use super::policy::{self, PolicyKeys};
use super::webhook::{self, Decision, Status, Subject};
use crate::clock::Now;
use crate::state::vhost::VhostSpec;
use base64::Engine;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Closings wait this long for the control server (OME's 500 ms).
pub const CLOSING_TIMEOUT: Duration = Duration::from_millis(500);
/// A viewer session with no request for this long is over.
pub const VIEWER_IDLE: Duration = Duration::from_secs(15);
/// How often viewer sessions are swept for quiet and expired ones.
pub const SWEEP: Duration = Duration::from_secs(1);
/// Most openings in flight at once; beyond, new sessions are refused (a
/// flood must not open unbounded connections to the control server).
pub const MAX_PENDING: usize = 1024;
/// Most viewer sessions at once.
pub const MAX_VIEWERS: usize = 65_536;

/// An opening in flight; also the id of the session it admits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CheckId(pub u64);

/// An admitted session the control server is owed a closing for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AdmissionId(pub u64);

/// What an admitted session may do.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Admit {
    /// When the session must end (epoch ms): the earlier of the policy's
    /// `stream_expire` and the webhook's `lifetime`.
    pub expire_at: Option<u64>,
    /// Where the webhook sent the session (vhost, app, stream by URL).
    pub new_url: Option<String>,
    /// Set when a webhook admitted it: close it when the session ends.
    pub admission: Option<AdmissionId>,
    /// A signed policy or a webhook admitted it for the name it asked
    /// (not merely nothing to check): it may take a silent stream of that
    /// name over from another address.
    pub vouched: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allowed(Admit),
    Refused(String),
    Pending(CheckId),
}

/// A webhook request for the loop to send.
#[derive(Debug, Clone)]
pub struct Call {
    pub id: u64,
    pub url: String,
    pub body: String,
    pub signature: String,
    pub timeout: Duration,
}

#[derive(Debug, Clone)]
struct Hook {
    url: String,
    secret: String,
    timeout: Duration,
}

struct Check {
    /// The endpoint token waiting; `None` once it is gone.
    waiter: Option<usize>,
    subject: Subject,
    hook: Hook,
    policy_expire: Option<u64>,
}

struct Admission {
    subject: Subject,
    hook: Hook,
    closing: bool,
}

enum CallKind {
    Opening(CheckId),
    Closing(AdmissionId),
}

/// A viewer admitted by its playlist request; later requests name it with
/// `?session={id}_{key}`.
#[derive(Debug, Clone)]
pub struct ViewerSession {
    pub key: String,
    pub vhost: String,
    pub app: String,
    pub stream: String,
    pub expire_at: Option<u64>,
    pub admission: Option<AdmissionId>,
    pub last_seen: Instant,
}

/// Why a viewer's session query is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionError {
    Missing,
    Unknown,
    Expired,
}

impl std::fmt::Display for SessionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SessionError::Missing => "This stream needs a session: open its playlist first",
            SessionError::Unknown => "Invalid session",
            SessionError::Expired => "The session has expired",
        })
    }
}

#[derive(Default)]
pub struct AccessManager {
    next_id: u64,
    checks: HashMap<CheckId, Check>,
    admissions: HashMap<AdmissionId, Admission>,
    calls: HashMap<u64, CallKind>,
    out: VecDeque<Call>,
    decisions: VecDeque<(usize, CheckId, Verdict)>,
    viewers: HashMap<u32, ViewerSession>,
    next_viewer: u32,
}

impl AccessManager {
    /// Admits (or not) `subject` to `vhost`: the signed policy, then the
    /// webhook. `waiter`: the endpoint token a pending decision goes to.
    pub fn check(
        &mut self,
        vhost: &VhostSpec,
        subject: Subject,
        waiter: usize,
        now: Now,
    ) -> Verdict {
        let now_ms = now.unix_ms.max(0) as u64;
        let mut policy_expire = None;
        let mut vouched = false;
        if let Some(sp) = vhost
            .signed_policy
            .as_ref()
            .filter(|sp| subject.protocol.enabled_in(&sp.enables))
        {
            let keys = PolicyKeys {
                policy_key: &sp.policy_query_key_name,
                signature_key: &sp.signature_query_key_name,
                secret: &sp.secret_key,
            };
            match policy::verify(&subject.url, keys, subject.client.ip(), now_ms) {
                Ok(granted) => {
                    policy_expire = granted.stream_expire;
                    vouched = true;
                }
                Err(e) => return Verdict::Refused(format!("SignedPolicy: {e}")),
            }
        }
        let Some(aw) = vhost
            .admission_webhooks
            .as_ref()
            .filter(|aw| subject.protocol.enabled_in(&aw.enables))
        else {
            return Verdict::Allowed(Admit {
                expire_at: policy_expire,
                vouched,
                ..Admit::default()
            });
        };
        if self.checks.len() >= MAX_PENDING {
            return Verdict::Refused("AdmissionWebhooks: too many admissions in flight".into());
        }
        let hook = Hook {
            url: aw.control_server_url.clone(),
            secret: aw.secret_key.clone(),
            timeout: Duration::from_millis(aw.timeout.max(1)),
        };
        let id = CheckId(self.next());
        self.send(CallKind::Opening(id), &subject, &hook, Status::Opening, now);
        self.checks.insert(
            id,
            Check {
                waiter: Some(waiter),
                subject,
                hook,
                policy_expire,
            },
        );
        Verdict::Pending(id)
    }

    fn next(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn send(&mut self, kind: CallKind, subject: &Subject, hook: &Hook, status: Status, now: Now) {
        let id = self.next();
        let body = webhook::body(subject, status, now.unix_ms);
        let timeout = match status {
            Status::Opening => hook.timeout,
            Status::Closing => CLOSING_TIMEOUT,
        };
        self.out.push_back(Call {
            id,
            url: hook.url.clone(),
            signature: policy::sign(&hook.secret, &body),
            body,
            timeout,
        });
        self.calls.insert(id, kind);
    }

    /// The next webhook request to send.
    pub fn poll_call(&mut self) -> Option<Call> {
        self.out.pop_front()
    }

    /// A webhook request ended: its response, or why there is none (a
    /// connection error, the time-out).
    pub fn handle_reply(&mut self, call: u64, result: Result<Response, String>, now: Now) {
        match self.calls.remove(&call) {
            Some(CallKind::Opening(id)) => {
                let Some(check) = self.checks.remove(&id) else {
                    return;
                };
                let decision = match result {
                    Ok(r) => webhook::parse_answer(r.status, &r.body),
                    Err(e) => Decision::Denied {
                        reason: format!("the control server could not be asked: {e}"),
                    },
                };
                self.decide(id, check, decision, now);
            }
            Some(CallKind::Closing(id)) => {
                if let Err(e) = result {
                    crate::debug!("admission {}: closing not confirmed: {e}", id.0);
                }
                self.admissions.remove(&id);
            }
            None => {}
        }
    }

    fn decide(&mut self, id: CheckId, check: Check, decision: Decision, now: Now) {
        let verdict = match decision {
            Decision::Denied { reason } => Verdict::Refused(format!("AdmissionWebhooks: {reason}")),
            Decision::Allowed {
                new_url,
                lifetime_ms,
            } => {
                let lifetime = (lifetime_ms > 0)
                    .then(|| (now.unix_ms.max(0) as u64).saturating_add(lifetime_ms));
                let expire_at = crate::clock::earliest(check.policy_expire, lifetime);
                let admission = AdmissionId(id.0);
                let subject = Subject {
                    new_url: new_url.clone(),
                    bearer: None,
                    ..check.subject
                };
                self.admissions.insert(
                    admission,
                    Admission {
                        subject,
                        hook: check.hook,
                        closing: false,
                    },
                );
                if check.waiter.is_none() {
                    // Nobody to admit any more: the session is over.
                    self.close(admission, now);
                    return;
                }
                Verdict::Allowed(Admit {
                    expire_at,
                    new_url,
                    admission: Some(admission),
                    vouched: true,
                })
            }
        };
        if let Some(waiter) = check.waiter {
            self.decisions.push_back((waiter, id, verdict));
        }
    }

    /// The next decision for a waiting endpoint: (its token, the check,
    /// allowed or refused). The loop `close`s an allowed admission whose
    /// endpoint is gone.
    pub fn poll_decision(&mut self) -> Option<(usize, CheckId, Verdict)> {
        self.decisions.pop_front()
    }

    /// The endpoint waiting for `id` is gone: a later "allowed" is closed
    /// at once.
    pub fn cancel(&mut self, id: CheckId) {
        if let Some(c) = self.checks.get_mut(&id) {
            c.waiter = None;
        }
    }

    /// The admitted session ended: its closing is sent (once).
    pub fn close(&mut self, id: AdmissionId, now: Now) {
        let Some(a) = self.admissions.get_mut(&id) else {
            return;
        };
        if a.closing {
            return;
        }
        a.closing = true;
        let (subject, hook) = (a.subject.clone(), a.hook.clone());
        self.send(CallKind::Closing(id), &subject, &hook, Status::Closing, now);
    }

    /// Openings in flight and sessions owed or sending a closing.
    pub fn in_flight(&self) -> (usize, usize) {
        (self.checks.len(), self.admissions.len())
    }

    // -- viewer sessions --

    /// Opens a viewer session for an admitted playlist request; the
    /// `session` query value its playlists carry.
    pub fn open_viewer(
        &mut self,
        (vhost, app, stream): (&str, &str, &str),
        admit: &Admit,
        now: Now,
    ) -> Option<String> {
        if self.viewers.len() >= MAX_VIEWERS {
            if let Some(a) = admit.admission {
                self.close(a, now);
            }
            return None;
        }
        let mut raw = [0u8; 6];
        if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut raw).is_err() {
            return None;
        }
        let key = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw);
        let id = loop {
            self.next_viewer = self.next_viewer.wrapping_add(1);
            if self.next_viewer != 0 && !self.viewers.contains_key(&self.next_viewer) {
                break self.next_viewer;
            }
        };
        self.viewers.insert(
            id,
            ViewerSession {
                key: key.clone(),
                vhost: vhost.into(),
                app: app.into(),
                stream: stream.into(),
                expire_at: admit.expire_at,
                admission: admit.admission,
                last_seen: now.instant,
            },
        );
        Some(format!("{id}_{key}"))
    }

    /// Checks a viewer's `session` query value and notes the request: the
    /// stream the session was opened for (whatever path the request names).
    pub fn use_viewer(
        &mut self,
        session: Option<&str>,
        now: Now,
    ) -> Result<(String, String, String), SessionError> {
        let value = session.ok_or(SessionError::Missing)?;
        let (id, key) = value.split_once('_').ok_or(SessionError::Unknown)?;
        let id: u32 = id.parse().map_err(|_| SessionError::Unknown)?;
        let s = self.viewers.get_mut(&id).ok_or(SessionError::Unknown)?;
        if !policy::same_bytes(s.key.as_bytes(), key.as_bytes()) {
            return Err(SessionError::Unknown);
        }
        if s.expire_at
            .is_some_and(|e| (now.unix_ms.max(0) as u64) >= e)
        {
            self.end_viewer(id, now);
            return Err(SessionError::Expired);
        }
        s.last_seen = now.instant;
        Ok((s.vhost.clone(), s.app.clone(), s.stream.clone()))
    }

    fn end_viewer(&mut self, id: u32, now: Now) {
        if let Some(s) = self.viewers.remove(&id) {
            if let Some(a) = s.admission {
                self.close(a, now);
            }
        }
    }

    /// Ends viewer sessions that went quiet or expired.
    pub fn handle_timeout(&mut self, now: Now) {
        let now_ms = now.unix_ms.max(0) as u64;
        let over: Vec<u32> = self
            .viewers
            .iter()
            .filter(|(_, s)| {
                now.instant.saturating_duration_since(s.last_seen) >= VIEWER_IDLE
                    || s.expire_at.is_some_and(|e| now_ms >= e)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in over {
            self.end_viewer(id, now);
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due: a sweep
    /// a second while viewer sessions exist (each request checks expiry
    /// exactly; the sweep only finds the sessions nobody uses).
    pub fn poll_timeout(&self, now: Now) -> Option<Instant> {
        (!self.viewers.is_empty()).then(|| now.instant + SWEEP)
    }

    pub fn viewer_count(&self) -> usize {
        self.viewers.len()
    }
}

#[cfg(test)]
mod tests;
