//! The manager with stepped time and no sockets: policy then webhook,
//! pending decisions, one closing per allowed opening whatever ends the
//! session, viewer sessions.

use super::*;
use crate::admission::webhook::Protocol;
use crate::state::vhost::{AdmissionWebhooks, Enables, HostSpec, SignedPolicy};

fn vhost(policy: bool, hook: bool) -> VhostSpec {
    let enables = Enables {
        providers: Some("rtmp,srt".into()),
        publishers: Some("llhls".into()),
    };
    VhostSpec {
        name: "default".into(),
        distribution: None,
        host: HostSpec {
            names: vec!["*".into()],
            tls: None,
        },
        signed_policy: policy.then(|| SignedPolicy {
            enables: enables.clone(),
            policy_query_key_name: "policy".into(),
            secret_key: "secret".into(),
            signature_query_key_name: "signature".into(),
        }),
        admission_webhooks: hook.then(|| AdmissionWebhooks {
            control_server_url: "http://127.0.0.1:9/hook".into(),
            enables,
            secret_key: "hooksecret".into(),
            timeout: 3000,
        }),
        origins: None,
        origin_map_store: None,
        cross_domains: None,
        applications: None,
    }
}

fn subject(protocol: Protocol, url: &str) -> Subject {
    Subject {
        protocol,
        client: "127.0.0.1:5000".parse().unwrap(),
        user_agent: None,
        url: url.into(),
        new_url: None,
        bearer: None,
    }
}

fn now(base: Instant, ms: u64) -> Now {
    Now {
        instant: base + Duration::from_millis(ms),
        unix_ms: 1_000_000 + ms as i64,
    }
}

fn ok(body: &str) -> Result<Response, String> {
    Ok(Response {
        status: 200,
        body: body.as_bytes().to_vec(),
    })
}

fn status_of(call: &Call) -> String {
    let v: serde_json::Value = serde_json::from_str(&call.body).unwrap();
    v["request"]["status"].as_str().unwrap().to_string()
}

#[test]
fn nothing_configured_admits_at_once() {
    let mut m = AccessManager::default();
    let t = Instant::now();
    let v = m.check(
        &vhost(false, false),
        subject(Protocol::Rtmp, "rtmp://h:1935/app/s"),
        1,
        now(t, 0),
    );
    assert_eq!(v, Verdict::Allowed(Admit::default()));
    assert!(m.poll_call().is_none());
}

#[test]
fn protocols_not_enabled_are_not_checked() {
    let mut m = AccessManager::default();
    let t = Instant::now();
    let v = m.check(
        &vhost(true, true),
        subject(Protocol::Hls, "http://h:3333/app/s/playlist.m3u8"),
        1,
        now(t, 0),
    );
    assert_eq!(v, Verdict::Allowed(Admit::default()));
}

#[test]
fn policy_is_checked_before_the_webhook() {
    let mut m = AccessManager::default();
    let t = Instant::now();
    let v = m.check(
        &vhost(true, true),
        subject(Protocol::Rtmp, "rtmp://h:1935/app/s"),
        1,
        now(t, 0),
    );
    assert!(
        matches!(v, Verdict::Refused(ref why) if why.contains("signature")),
        "{v:?}"
    );
    assert!(m.poll_call().is_none(), "a refused policy asks no webhook");
    let keys = PolicyKeys {
        policy_key: "policy",
        signature_key: "signature",
        secret: "secret",
    };
    let url = policy::sign_url(
        "rtmp://h:1935/app/s",
        keys,
        r#"{"url_expire":2000000,"stream_expire":1500000}"#,
    );
    let v = m.check(
        &vhost(true, false),
        subject(Protocol::Rtmp, &url),
        1,
        now(t, 0),
    );
    assert_eq!(
        v,
        Verdict::Allowed(Admit {
            expire_at: Some(1_500_000),
            vouched: true,
            ..Admit::default()
        })
    );
}

#[test]
fn webhook_allows_with_new_url_and_lifetime_then_closes_once() {
    let mut m = AccessManager::default();
    let t = Instant::now();
    let Verdict::Pending(id) = m.check(
        &vhost(false, true),
        subject(Protocol::Srt, "srt://h:9999/app/s"),
        7,
        now(t, 0),
    ) else {
        panic!("pending expected");
    };
    let call = m.poll_call().unwrap();
    assert_eq!(status_of(&call), "opening");
    assert_eq!(call.url, "http://127.0.0.1:9/hook");
    assert_eq!(call.timeout, Duration::from_millis(3000));
    assert_eq!(call.signature, policy::sign("hooksecret", &call.body));
    assert!(m.poll_decision().is_none());
    m.handle_reply(
        call.id,
        ok(r#"{"allowed":true,"new_url":"srt://h:9999/other/s2","lifetime":2000}"#),
        now(t, 100),
    );
    let (waiter, got, verdict) = m.poll_decision().unwrap();
    assert_eq!((waiter, got), (7, id));
    let Verdict::Allowed(admit) = verdict else {
        panic!("allowed expected");
    };
    assert_eq!(admit.new_url.as_deref(), Some("srt://h:9999/other/s2"));
    assert_eq!(admit.expire_at, Some(1_000_100 + 2000));
    let a = admit.admission.unwrap();
    m.close(a, now(t, 200));
    m.close(a, now(t, 300));
    let closing = m.poll_call().unwrap();
    assert_eq!(status_of(&closing), "closing");
    assert_eq!(closing.timeout, CLOSING_TIMEOUT);
    let body: serde_json::Value = serde_json::from_str(&closing.body).unwrap();
    assert_eq!(body["request"]["new_url"], "srt://h:9999/other/s2");
    assert!(m.poll_call().is_none(), "one closing only");
    m.handle_reply(closing.id, Err("timed out".into()), now(t, 800));
    assert_eq!(m.in_flight(), (0, 0));
}

#[test]
fn refusals_and_failures_send_no_closing() {
    let mut m = AccessManager::default();
    let t = Instant::now();
    for reply in [
        ok(r#"{"allowed":false,"reason":"banned"}"#),
        Err("connection refused".into()),
        Ok(Response {
            status: 500,
            body: vec![],
        }),
    ] {
        let Verdict::Pending(_) = m.check(
            &vhost(false, true),
            subject(Protocol::Rtmp, "rtmp://h:1935/app/s"),
            1,
            now(t, 0),
        ) else {
            panic!()
        };
        let call = m.poll_call().unwrap();
        m.handle_reply(call.id, reply, now(t, 10));
        let (_, _, v) = m.poll_decision().unwrap();
        assert!(matches!(v, Verdict::Refused(_)), "{v:?}");
        assert!(m.poll_call().is_none());
    }
    assert_eq!(m.in_flight(), (0, 0));
}

#[test]
fn a_waiter_gone_before_the_answer_still_gets_its_closing() {
    let mut m = AccessManager::default();
    let t = Instant::now();
    let Verdict::Pending(id) = m.check(
        &vhost(false, true),
        subject(Protocol::Rtmp, "rtmp://h:1935/app/s"),
        1,
        now(t, 0),
    ) else {
        panic!()
    };
    let call = m.poll_call().unwrap();
    m.cancel(id);
    m.handle_reply(call.id, ok(r#"{"allowed":true}"#), now(t, 10));
    assert!(m.poll_decision().is_none());
    let closing = m.poll_call().unwrap();
    assert_eq!(status_of(&closing), "closing");
}

#[test]
fn viewer_sessions() {
    let mut m = AccessManager::default();
    let t = Instant::now();
    let admit = Admit {
        expire_at: Some(1_000_000 + 60_000),
        new_url: None,
        admission: None,
        vouched: false,
    };
    let token = m
        .open_viewer(("default", "app", "s"), &admit, now(t, 0))
        .unwrap();
    let (id, key) = token.split_once('_').unwrap();
    assert_eq!(key.len(), 8);
    let here = ("default".to_string(), "app".to_string(), "s".to_string());
    assert_eq!(m.use_viewer(Some(&token), now(t, 10)), Ok(here));
    assert_eq!(m.use_viewer(None, now(t, 10)), Err(SessionError::Missing));
    assert_eq!(
        m.use_viewer(Some(&format!("{id}_xxxxxxxx")), now(t, 10)),
        Err(SessionError::Unknown)
    );
    assert_eq!(
        m.use_viewer(Some("nonsense"), now(t, 10)),
        Err(SessionError::Unknown)
    );
    // Quiet for VIEWER_IDLE: over.
    assert_eq!(
        m.poll_timeout(now(t, 10)),
        Some(t + Duration::from_millis(10) + SWEEP)
    );
    m.handle_timeout(now(t, 10 + VIEWER_IDLE.as_millis() as u64));
    assert_eq!(m.viewer_count(), 0);
    assert_eq!(
        m.use_viewer(Some(&token), now(t, 20_000)),
        Err(SessionError::Unknown)
    );
}

#[test]
fn a_viewer_session_closes_its_admission_when_it_expires() {
    let mut m = AccessManager::default();
    let t = Instant::now();
    let Verdict::Pending(_) = m.check(
        &vhost(false, true),
        subject(Protocol::Llhls, "http://h:3333/app/s/llhls.m3u8"),
        1,
        now(t, 0),
    ) else {
        panic!()
    };
    let call = m.poll_call().unwrap();
    m.handle_reply(
        call.id,
        ok(r#"{"allowed":true,"lifetime":1000}"#),
        now(t, 0),
    );
    let (_, _, Verdict::Allowed(admit)) = m.poll_decision().unwrap() else {
        panic!()
    };
    let token = m
        .open_viewer(("default", "app", "s"), &admit, now(t, 0))
        .unwrap();
    assert!(m.use_viewer(Some(&token), now(t, 500)).is_ok());
    assert_eq!(
        m.use_viewer(Some(&token), now(t, 1000)),
        Err(SessionError::Expired)
    );
    let closing = m.poll_call().unwrap();
    assert_eq!(status_of(&closing), "closing");
    assert!(m.poll_call().is_none());
}
