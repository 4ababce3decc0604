//! A push request: `:startPush` validation, destination URLs
//! ([`Destination`]) and track selection (specification "Push publishing
//! task", DECISIONS section 7). Pure functions; no state, no sockets.

use crate::media::{Track, TrackId};
pub use crate::state::task::{select, Protocol, StreamSelector};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How the state file keeps push tasks (`"pushes"`, `addPush`/`deletePush`).
pub static KIND: crate::state::store::TaskKind = crate::state::store::TaskKind {
    list: "pushes",
    item: "push",
    id_field: "id",
};

/// Where a task sends, parsed from its URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    Rtmp {
        tls: bool,
        host: String,
        port: u16,
        /// The application path (`live2`, `app/inst`). The RTMP tcUrl is
        /// the task's URL as given (kept once, in its spec).
        app: String,
    },
    Udp {
        host: String,
        port: u16,
        ttl: Option<u32>,
    },
    Srt {
        host: String,
        port: u16,
        latency: Duration,
        timeout: Option<Duration>,
        stream_id: Option<String>,
        payload_size: usize,
        /// `passphrase`/`pbkeylen` (and libsrt's `kmrefreshrate`,
        /// `kmpreannounce`): encrypt.
        crypto: Option<crate::srt::crypto::CryptoConfig>,
    },
}

impl Destination {
    pub fn host_port(&self) -> (&str, u16) {
        match self {
            Destination::Rtmp { host, port, .. }
            | Destination::Udp { host, port, .. }
            | Destination::Srt { host, port, .. } => (host, *port),
        }
    }
}

/// What the state file keeps of a task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PushSpec {
    pub id: String,
    pub vhost: String,
    pub app: String,
    pub stream_name: String,
    #[serde(default)]
    pub variant_names: Vec<String>,
    #[serde(default)]
    pub track_ids: Vec<TrackId>,
    pub protocol: Protocol,
    pub url: String,
    #[serde(default)]
    pub stream_key: String,
    pub created_ms: i64,
}

/// `:startPush` body.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StartPushRequest {
    pub id: Option<String>,
    pub stream: Option<StreamSelector>,
    pub protocol: Option<String>,
    pub url: Option<String>,
    pub stream_key: Option<String>,
}

/// Why a `:startPush` body is refused (the API answers 400 with the text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestError {
    /// Every required field that is missing or empty, in the body's order.
    MissingFields(Vec<&'static str>),
    /// An id longer than 255 characters or with control characters.
    BadId,
    UnknownProtocol(String),
    /// What is wrong with the destination URL or its options.
    BadUrl(String),
    /// A variant name no encode of the application's output profiles has.
    UnknownVariant(String),
}

impl std::fmt::Display for RequestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestError::MissingFields(names) => crate::state::task::write_missing(f, names),
            RequestError::BadId => f.write_str("id must be 1-255 printable characters"),
            RequestError::UnknownProtocol(p) => {
                write!(f, "Unknown protocol [{p}]; use srt, rtmp or mpegts")
            }
            RequestError::BadUrl(why) => f.write_str(why),
            RequestError::UnknownVariant(v) => write!(
                f,
                "Unknown variant name [{v}]: no encode of the application's output profiles has it"
            ),
        }
    }
}

/// Checks a `:startPush` body in the order DECISIONS section 7 gives
/// (after vhost and app, which the caller checked): required fields (all
/// missing ones named), protocol, URL scheme, options. `has_encode` tells
/// whether a variant name is an encode of the application.
pub fn validate_start(
    req: StartPushRequest,
    vhost: &str,
    app: &str,
    now_ms: i64,
    has_encode: &dyn Fn(&str) -> bool,
) -> Result<(PushSpec, Destination), RequestError> {
    let mut missing = Vec::new();
    let id = req.id.filter(|s| !s.is_empty());
    if id.is_none() {
        missing.push("id");
    }
    let stream_name = req
        .stream
        .as_ref()
        .and_then(|s| s.name.clone())
        .filter(|s| !s.is_empty());
    if stream_name.is_none() {
        missing.push("stream.name");
    }
    let protocol_text = req.protocol.clone().filter(|s| !s.is_empty());
    if protocol_text.is_none() {
        missing.push("protocol");
    }
    let url = req.url.clone().filter(|s| !s.is_empty());
    if url.is_none() {
        missing.push("url");
    }
    let stream_key = req.stream_key.clone().unwrap_or_default();
    if protocol_text.as_deref() == Some("rtmp") && stream_key.is_empty() {
        missing.push("streamKey");
    }
    let (Some(id), Some(stream_name), Some(protocol_text), Some(url)) =
        (id, stream_name, protocol_text, url)
    else {
        return Err(RequestError::MissingFields(missing));
    };
    if !missing.is_empty() {
        return Err(RequestError::MissingFields(missing));
    }
    if id.len() > 255 || id.chars().any(|c| c.is_control()) {
        return Err(RequestError::BadId);
    }
    let protocol = match protocol_text.as_str() {
        "rtmp" => Protocol::Rtmp,
        "srt" => Protocol::Srt,
        "mpegts" => Protocol::Mpegts,
        other => return Err(RequestError::UnknownProtocol(other.to_string())),
    };
    let destination = parse_url(protocol, &url).map_err(RequestError::BadUrl)?;
    let selector = req.stream.unwrap_or(StreamSelector {
        name: None,
        variant_names: Vec::new(),
        track_ids: Vec::new(),
    });
    for v in &selector.variant_names {
        if !has_encode(v) {
            return Err(RequestError::UnknownVariant(v.clone()));
        }
    }
    Ok((
        PushSpec {
            id,
            vhost: vhost.to_string(),
            app: app.to_string(),
            stream_name,
            variant_names: selector.variant_names,
            track_ids: selector.track_ids,
            protocol,
            url,
            stream_key: if protocol == Protocol::Rtmp {
                stream_key
            } else {
                req.stream_key.unwrap_or_default()
            },
            created_ms: now_ms,
        },
        destination,
    ))
}

/// Splits `scheme://host[:port][/path][?query]`; the error says what is
/// wrong with the URL.
fn split_url(url: &str) -> Result<(&str, &str, Option<u16>, &str, &str), String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or("it does not start with scheme://")?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err("user information (user@host) is not supported".into());
    }
    let (host, port) = split_authority(authority)?;
    Ok((scheme, host, port, path, query))
}

pub use crate::http::host::valid_host_name;
pub use crate::http::url::{redacted_url, split_authority};

/// The options of a URL's query, each given once: a repeated one is
/// refused (which would win is a guess, and a mask could miss one).
fn query_pairs(query: &str) -> Result<Vec<(&str, &str)>, String> {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    for p in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = p.split_once('=').unwrap_or((p, ""));
        if pairs.iter().any(|(seen, _)| *seen == k) {
            return Err(format!("The url option [{k}] is given more than once"));
        }
        pairs.push((k, v));
    }
    Ok(pairs)
}

/// Parses a destination URL for a protocol (400 text on error).
pub fn parse_url(protocol: Protocol, url: &str) -> Result<Destination, String> {
    let real = url;
    let shown = redacted_url(real);
    // Error texts show the URL with its secrets masked.
    let url: &str = &shown;
    let invalid = |why: &str| format!("Invalid url [{url}]: {why}");
    // The scheme first, and only here: `file:///etc/passwd` is the wrong
    // scheme, not a URL without a host.
    let wanted: &[&str] = match protocol {
        Protocol::Rtmp => &["rtmp", "rtmps"],
        Protocol::Srt => &["srt"],
        Protocol::Mpegts => &["udp"],
    };
    if let Some((scheme, _)) = url.split_once("://") {
        if !wanted.contains(&scheme) {
            let want: Vec<String> = wanted.iter().map(|w| format!("{w}://")).collect();
            return Err(format!(
                "The url of an {} push must start with {}: [{url}]",
                protocol.name(),
                want.join(" or ")
            ));
        }
    }
    let (scheme, host, port, path, query) = split_url(real).map_err(|e| invalid(&e))?;
    let host = host.to_string();
    match protocol {
        Protocol::Rtmp => {
            let tls = scheme == "rtmps";
            let app = path.trim_matches('/').to_string();
            if app.is_empty() {
                return Err(format!(
                    "The rtmp url must name the application: rtmp://host[:port]/app ([{url}])"
                ));
            }
            if !query.is_empty() {
                return Err(format!(
                    "The rtmp url takes no query; put the key in streamKey ([{url}])"
                ));
            }
            Ok(Destination::Rtmp {
                tls,
                host,
                port: port.unwrap_or(if tls { 443 } else { 1935 }),
                app,
            })
        }
        Protocol::Mpegts => {
            let port = port
                .ok_or_else(|| format!("The mpegts url needs a port: udp://host:port ([{url}])"))?;
            if !path.is_empty() {
                return Err(invalid("it takes no path after host:port"));
            }
            let mut ttl = None;
            for (k, v) in query_pairs(query).map_err(|e| invalid(&e))? {
                match k {
                    "ttl" => {
                        ttl = Some(
                            v.parse::<u32>()
                                .ok()
                                .filter(|t| (1..=255).contains(t))
                                .ok_or_else(|| format!("Invalid ttl [{v}]: 1-255"))?,
                        )
                    }
                    other => {
                        return Err(format!("Unknown mpegts url option [{other}]; known: ttl"))
                    }
                }
            }
            Ok(Destination::Udp { host, port, ttl })
        }
        Protocol::Srt => {
            let port =
                port.ok_or_else(|| format!("The srt url needs a port: srt://host:port ([{url}])"))?;
            if !path.is_empty() {
                return Err(invalid("it takes no path after host:port"));
            }
            let mut latency = Duration::from_millis(120);
            let mut timeout = None;
            let mut stream_id = None;
            let mut payload_size = 1316usize;
            let (mut passphrase, mut pbkeylen) = (None::<String>, 0usize);
            let (mut refresh, mut preannounce) = (None::<u64>, None::<u64>);
            let count = |k: &str, v: &str| -> Result<u64, String> {
                v.parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0 && *n <= 1 << 31)
                    .ok_or_else(|| format!("Invalid srt option {k}=[{v}]: a packet count"))
            };
            // Bounded: these become deadlines on the loop's clock. Values
            // are microseconds (ffmpeg's and OME's unit); 1-999 is refused
            // because srt-live-transmit users write milliseconds there.
            let micros = |k: &str, v: &str, max_s: u64| -> Result<Duration, String> {
                let us = v
                    .parse::<u64>()
                    .ok()
                    .filter(|us| *us <= max_s * 1_000_000)
                    .ok_or_else(|| {
                        format!("Invalid srt option {k}=[{v}]: microseconds, at most {max_s} s")
                    })?;
                if (1..1000).contains(&us) {
                    return Err(format!(
                        "Invalid srt option {k}=[{v}]: the unit is microseconds (as in ffmpeg and OME), so this is under 1 ms; for {us} ms write {k}={}",
                        us * 1000
                    ));
                }
                Ok(Duration::from_micros(us))
            };
            for (k, v) in query_pairs(query).map_err(|e| invalid(&e))? {
                match k {
                    "mode" => {
                        if v != "caller" {
                            return Err(format!("Unsupported srt mode [{v}]: only caller is supported"));
                        }
                    }
                    "latency" => latency = micros(k, v, 60)?,
                    "timeout" => timeout = Some(micros(k, v, 3600)?),
                    "streamid" => {
                        stream_id = Some(crate::http::percent_decode(v).unwrap_or_else(|| v.to_string()))
                    }
                    "payload_size" | "pkt_size" => {
                        payload_size = v
                            .parse::<usize>()
                            .ok()
                            .filter(|n| (188..=1456).contains(n) && n % 188 == 0)
                            .ok_or_else(|| format!("Invalid srt option {k}=[{v}]: a multiple of 188 up to 1316"))?
                    }
                    "passphrase" => {
                        passphrase =
                            Some(crate::http::percent_decode(v).unwrap_or_else(|| v.to_string()))
                    }
                    "pbkeylen" => {
                        pbkeylen = v
                            .parse::<usize>()
                            .ok()
                            .filter(|n| [16, 24, 32].contains(n))
                            .ok_or_else(|| format!("Invalid srt option pbkeylen=[{v}]: 16, 24 or 32"))?
                    }
                    "kmrefreshrate" => refresh = Some(count(k, v)?),
                    "kmpreannounce" => preannounce = Some(count(k, v)?),
                    other => {
                        return Err(format!(
                            "Unknown srt option [{other}]; known: mode, latency, timeout, streamid, payload_size, passphrase, pbkeylen, kmrefreshrate, kmpreannounce"
                        ))
                    }
                }
            }
            let crypto = match passphrase {
                Some(p) => {
                    let mut c = crate::srt::crypto::CryptoConfig::new(&p, pbkeylen)
                        .map_err(|e| format!("Invalid srt option passphrase: {e}"))?;
                    if refresh.is_some() || preannounce.is_some() {
                        let rate = refresh.unwrap_or(c.refresh_rate);
                        let pre = preannounce.unwrap_or((rate / 4).max(1));
                        c = c
                            .with_refresh(rate, pre)
                            .map_err(|e| format!("Invalid srt option: {e}"))?;
                    }
                    Some(c)
                }
                None if pbkeylen != 0 || refresh.is_some() || preannounce.is_some() => return Err(
                    "Invalid srt url: pbkeylen, kmrefreshrate and kmpreannounce need a passphrase"
                        .into(),
                ),
                None => None,
            };
            Ok(Destination::Srt {
                host,
                port,
                latency,
                timeout,
                stream_id,
                payload_size,
                crypto,
            })
        }
    }
}

/// The tracks a push sends from a stream's tracks: see
/// [`crate::state::task::select`]. `named` gives each track's output
/// encode name.
pub fn select_tracks(
    spec: &PushSpec,
    tracks: &[Track],
    named: &dyn Fn(&Track) -> Option<String>,
) -> Vec<TrackId> {
    select(
        &spec.variant_names,
        &spec.track_ids,
        spec.protocol,
        tracks,
        named,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(json: &str) -> StartPushRequest {
        serde_json::from_str(json).unwrap()
    }

    fn start(json: &str) -> Result<(PushSpec, Destination), String> {
        validate_start(req(json), "default", "app", 0, &|n| {
            n == "bypass_video" || n == "bypass_audio"
        })
        .map_err(|e| e.to_string())
    }

    #[test]
    fn missing_fields_are_all_named() {
        let e = start(r#"{"protocol":"rtmp"}"#).unwrap_err();
        assert_eq!(
            e,
            "There is no required parameter [ id stream.name url streamKey]"
        );
        let e = start(r#"{"id":"a","stream":{"name":"s"},"protocol":"srt"}"#).unwrap_err();
        assert_eq!(e, "There is no required parameter [ url]");
    }

    #[test]
    fn urls() {
        let (_, d) = start(r#"{"id":"a","stream":{"name":"s"},"protocol":"rtmp","url":"rtmp://a.rtmp.youtube.com/live2","streamKey":"k"}"#).unwrap();
        assert_eq!(
            d,
            Destination::Rtmp {
                tls: false,
                host: "a.rtmp.youtube.com".into(),
                port: 1935,
                app: "live2".into(),
            }
        );
        let (_, d) = start(r#"{"id":"a","stream":{"name":"s"},"protocol":"rtmp","url":"rtmps://live-api-s.facebook.com:443/rtmp/","streamKey":"k"}"#).unwrap();
        assert!(matches!(
            d,
            Destination::Rtmp {
                tls: true,
                port: 443,
                ..
            }
        ));
        let (_, d) = start(r#"{"id":"a","stream":{"name":"s"},"protocol":"mpegts","url":"udp://239.0.0.1:5000?ttl=4"}"#).unwrap();
        assert_eq!(
            d,
            Destination::Udp {
                host: "239.0.0.1".into(),
                port: 5000,
                ttl: Some(4)
            }
        );
        let (_, d) = start(r#"{"id":"a","stream":{"name":"s"},"protocol":"srt","url":"srt://[::1]:9000?mode=caller&latency=200000&streamid=a%2Fb"}"#).unwrap();
        assert!(
            matches!(d, Destination::Srt { ref host, port: 9000, latency, ref stream_id, .. }
            if host == "::1" && latency == Duration::from_millis(200) && stream_id.as_deref() == Some("a/b"))
        );
    }

    #[test]
    fn passphrases_are_redacted_for_logs() {
        assert_eq!(
            redacted_url("srt://h:1?streamid=a&passphrase=0123456789x&pbkeylen=16"),
            "srt://h:1?streamid=a&passphrase=***&pbkeylen=16"
        );
        assert_eq!(redacted_url("udp://h:1"), "udp://h:1");
        // every occurrence, whatever the case
        assert_eq!(
            redacted_url("srt://h:1?passphrase=aaaaaaaaaa&x=1&PASSPHRASE=bbbbbbbbbb"),
            "srt://h:1?passphrase=***&x=1&PASSPHRASE=***"
        );
    }

    #[test]
    fn a_repeated_option_is_refused_and_errors_never_show_a_passphrase() {
        let e = parse_url(
            Protocol::Srt,
            "srt://h:9000?passphrase=aaaaaaaaaa&passphrase=bbbbbbbbbb",
        )
        .unwrap_err();
        assert!(e.contains("[passphrase] is given more than once"), "{e}");
        assert!(
            !e.contains("aaaaaaaaaa") && !e.contains("bbbbbbbbbb"),
            "{e}"
        );
        let e = parse_url(Protocol::Mpegts, "udp://h:9000?ttl=2&ttl=3").unwrap_err();
        assert!(e.contains("[ttl] is given more than once"), "{e}");
        let e =
            parse_url(Protocol::Srt, "srt://h:9000?passphrase=short&mode=listener").unwrap_err();
        assert!(!e.contains("short"), "{e}");
    }

    #[test]
    fn the_scheme_is_checked_before_the_host() {
        let e = parse_url(Protocol::Rtmp, "file:///etc/passwd").unwrap_err();
        assert!(e.contains("must start with rtmp:// or rtmps://"), "{e}");
        let e = parse_url(Protocol::Srt, "file:///etc/passwd").unwrap_err();
        assert!(e.contains("must start with srt://"), "{e}");
    }

    #[test]
    fn url_errors() {
        let e = start(r#"{"id":"a","stream":{"name":"s"},"protocol":"rtmp","url":"srt://x:1/app","streamKey":"k"}"#).unwrap_err();
        assert!(e.contains("rtmp://"), "{e}");
        let e =
            start(r#"{"id":"a","stream":{"name":"s"},"protocol":"srt","url":"srt://x:1?foo=1"}"#)
                .unwrap_err();
        assert!(e.contains("[foo]"), "{e}");
        let e = start(r#"{"id":"a","stream":{"name":"s"},"protocol":"srt","url":"srt://x:1?passphrase=short"}"#).unwrap_err();
        assert!(e.contains("passphrase") && e.contains("10-79"), "{e}");
        let e = start(
            r#"{"id":"a","stream":{"name":"s"},"protocol":"srt","url":"srt://x:1?pbkeylen=24"}"#,
        )
        .unwrap_err();
        assert!(e.contains("need a passphrase"), "{e}");
        let (_, d) = start(r#"{"id":"a","stream":{"name":"s"},"protocol":"srt","url":"srt://x:1?passphrase=0123456789abc&pbkeylen=32"}"#).unwrap();
        assert!(matches!(d, Destination::Srt { crypto: Some(ref c), .. } if c.key_len == 32));
        let e = start(
            r#"{"id":"a","stream":{"name":"s"},"protocol":"srt","url":"srt://x:1?mode=listener"}"#,
        )
        .unwrap_err();
        assert!(e.contains("only caller"), "{e}");
        let e = start(r#"{"id":"a","stream":{"name":"s"},"protocol":"srt","url":"srt://x:1?latency=18446744073709551615"}"#).unwrap_err();
        assert!(e.contains("at most 60 s"), "{e}");
        let e = start(
            r#"{"id":"a","stream":{"name":"s"},"protocol":"srt","url":"srt://x:1?latency=200"}"#,
        )
        .unwrap_err();
        assert!(
            e.contains("microseconds") && e.contains("latency=200000"),
            "{e}"
        );
        for (url, why) in [
            ("udp://x:99999", "not in 1-65535"),
            ("udp://x:50o4", "[50o4] is not a number"),
            ("udp://x:+80", "[+80] is not a number"),
            ("udp://a%0Ab:80", "not a host name"),
            ("udp://a\nb:80", "not a host name"),
            ("udp://:80", "not a host name"),
            ("udp://[zz]:80", "not an IPv6 address"),
            ("udp//x:80", "scheme://"),
        ] {
            let body =
                serde_json::json!({"id":"a","stream":{"name":"s"},"protocol":"mpegts","url":url});
            let e = start(&body.to_string()).unwrap_err();
            assert!(e.contains("Invalid url") && e.contains(why), "{url}: {e}");
        }
        let long = format!("udp://{}:80", "a".repeat(300));
        let body =
            serde_json::json!({"id":"a","stream":{"name":"s"},"protocol":"mpegts","url":long});
        assert!(start(&body.to_string()).is_err());
        let e = start(r#"{"id":"a","stream":{"name":"s"},"protocol":"mpegts","url":"udp://x"}"#)
            .unwrap_err();
        assert!(e.contains("needs a port"), "{e}");
        let e = start(r#"{"id":"a","stream":{"name":"s"},"protocol":"webrtc","url":"udp://x:1"}"#)
            .unwrap_err();
        assert!(e.contains("Unknown protocol [webrtc]"), "{e}");
        let e = start(r#"{"id":"a","stream":{"name":"s","variantNames":["nope"]},"protocol":"mpegts","url":"udp://x:1"}"#).unwrap_err();
        assert!(e.contains("[nope]"), "{e}");
    }
}
