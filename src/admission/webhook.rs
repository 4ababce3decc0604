//! OME's AdmissionWebhooks messages (DECISIONS section 11): the request
//! body kiln POSTs to the control server, its `X-OME-Signature`, and the
//! answer. Pure functions; the HTTP exchange is [`super::http_client`].

use serde_json::{json, Value};
use std::net::SocketAddr;

/// The most answer body read (a longer answer is refused).
pub const MAX_ANSWER: usize = 16 * 1024;

pub use crate::state::vhost::Protocol;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Opening,
    Closing,
}

/// What a webhook request says about one session.
#[derive(Debug, Clone)]
pub struct Subject {
    pub protocol: Protocol,
    pub client: SocketAddr,
    pub user_agent: Option<String>,
    /// What the client asked for (with its port and query).
    pub url: String,
    /// Where an earlier answer sent it, if anywhere.
    pub new_url: Option<String>,
    /// A WHEP viewer's `Authorization: Bearer` token (kiln extension: OME
    /// reads no such header), for the control server to check.
    pub bearer: Option<Bearer>,
}

/// A bearer token: sent to the control server, never shown in a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Bearer(pub String);

impl std::fmt::Debug for Bearer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer([redacted])")
    }
}

/// The JSON body, OME's shape.
pub fn body(subject: &Subject, status: Status, unix_ms: i64) -> String {
    let mut client = json!({
        "address": subject.client.ip().to_canonical().to_string(),
        "port": subject.client.port(),
    });
    if let Some(ua) = &subject.user_agent {
        client["user_agent"] = Value::String(ua.clone());
    }
    let mut request = json!({
        "direction": if subject.protocol.is_incoming() { "incoming" } else { "outgoing" },
        "protocol": subject.protocol.wire_name(),
        "status": match status { Status::Opening => "opening", Status::Closing => "closing" },
        "url": subject.url,
        "time": crate::clock::format_iso8601(unix_ms, 0).replace("+00:00", "Z"),
    });
    if let Some(n) = &subject.new_url {
        request["new_url"] = Value::String(n.clone());
    }
    if let Some(Bearer(token)) = &subject.bearer {
        request["bearer"] = Value::String(token.clone());
    }
    json!({ "client": client, "request": request }).to_string()
}

/// The control server's decision on an opening.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allowed {
        new_url: Option<String>,
        /// Milliseconds the session may last (0: no limit).
        lifetime_ms: u64,
    },
    Denied {
        reason: String,
    },
}

/// Reads an answer: HTTP 200 with `{"allowed": bool, ...}`; anything else
/// is a refusal, with why.
pub fn parse_answer(status: u16, body: &[u8]) -> Decision {
    let denied = |reason: String| Decision::Denied { reason };
    if status != 200 {
        return denied(format!("the control server answered HTTP {status}"));
    }
    if body.len() > MAX_ANSWER {
        return denied("the control server's answer is too long".into());
    }
    let Ok(Value::Object(obj)) = serde_json::from_slice::<Value>(body) else {
        return denied("the control server's answer is not a JSON object".into());
    };
    let reason = obj
        .get("reason")
        .and_then(Value::as_str)
        .map(str::to_string);
    match obj.get("allowed").and_then(Value::as_bool) {
        None => denied("the control server's answer has no boolean \"allowed\"".into()),
        Some(false) => denied(reason.unwrap_or_else(|| "denied by the control server".into())),
        Some(true) => Decision::Allowed {
            new_url: obj
                .get("new_url")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_string),
            lifetime_ms: obj.get("lifetime").and_then(Value::as_u64).unwrap_or(0),
        },
    }
}

/// Fuzz entry: any answer body; never panics.
pub fn fuzz(data: &[u8]) {
    let _ = parse_answer(200, data);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_is_omes_shape() {
        let s = Subject {
            protocol: Protocol::Rtmp,
            client: "[::ffff:127.0.0.1]:5000".parse().unwrap(),
            user_agent: None,
            url: "rtmp://h:1935/app/s?x=1".into(),
            new_url: None,
            bearer: None,
        };
        let b: Value = serde_json::from_str(&body(&s, Status::Opening, 1_700_000_000_123)).unwrap();
        assert_eq!(b["client"]["address"], "127.0.0.1");
        assert_eq!(b["client"]["port"], 5000);
        assert!(b["client"].get("user_agent").is_none());
        assert_eq!(b["request"]["direction"], "incoming");
        assert_eq!(b["request"]["protocol"], "RTMP");
        assert_eq!(b["request"]["status"], "opening");
        assert_eq!(b["request"]["url"], "rtmp://h:1935/app/s?x=1");
        assert_eq!(b["request"]["time"], "2023-11-14T22:13:20.123Z");
        let v = Subject {
            protocol: Protocol::Llhls,
            user_agent: Some("hls.js".into()),
            new_url: Some("http://h:3333/b/s/llhls.m3u8".into()),
            bearer: None,
            ..s
        };
        let b: Value = serde_json::from_str(&body(&v, Status::Closing, 0)).unwrap();
        assert_eq!(b["request"]["direction"], "outgoing");
        assert_eq!(b["request"]["protocol"], "LLHLS");
        assert_eq!(b["request"]["status"], "closing");
        assert_eq!(b["client"]["user_agent"], "hls.js");
        assert_eq!(b["request"]["new_url"], "http://h:3333/b/s/llhls.m3u8");
    }

    #[test]
    fn answers() {
        assert_eq!(
            parse_answer(200, br#"{"allowed":true}"#),
            Decision::Allowed {
                new_url: None,
                lifetime_ms: 0
            }
        );
        assert_eq!(
            parse_answer(
                200,
                br#"{"allowed":true,"new_url":"rtmp://h/a/b","lifetime":5000}"#
            ),
            Decision::Allowed {
                new_url: Some("rtmp://h/a/b".into()),
                lifetime_ms: 5000
            }
        );
        assert_eq!(
            parse_answer(200, br#"{"allowed":false,"reason":"no"}"#),
            Decision::Denied {
                reason: "no".into()
            }
        );
        for (status, body) in [
            (500, &br#"{"allowed":true}"#[..]),
            (200, b"{}"),
            (200, b"[true]"),
            (200, br#"{"allowed":"true"}"#),
            (200, b"nope"),
        ] {
            assert!(
                matches!(parse_answer(status, body), Decision::Denied { .. }),
                "{status} {body:?}"
            );
        }
    }

    #[test]
    fn enables() {
        let e = crate::state::vhost::Enables {
            providers: Some("rtmp, SRT".into()),
            publishers: Some("webrtc,llhls".into()),
        };
        assert!(Protocol::Rtmp.enabled_in(&e));
        assert!(Protocol::Srt.enabled_in(&e));
        assert!(Protocol::Llhls.enabled_in(&e));
        assert!(!Protocol::Hls.enabled_in(&e));
        assert!(!Protocol::Rtmp.enabled_in(&Default::default()));
    }
}
