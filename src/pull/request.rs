//! `POST .../apps/{app}/streams` (OME's pull, DECISIONS 12): the body, its
//! checks, and the durable spec of a pulled stream.

use crate::rtsp::RtspUrl;
use serde::{Deserialize, Serialize};

/// Most URLs one pull may fail over across.
pub const MAX_URLS: usize = 8;

/// What a pull is asked to be (kept in the state file when `persistent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullSpec {
    pub vhost: String,
    pub app: String,
    pub name: String,
    pub urls: Vec<String>,
    #[serde(default)]
    pub persistent: bool,
    /// No media for this long on a live pull: fail over to the next URL.
    pub no_input_failover_timeout_ms: u64,
    /// Kept for the API; unused streams are not ended yet.
    pub unused_stream_deletion_timeout_ms: u64,
}

/// Where a pull takes its stream from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Rtsp(RtspUrl),
    /// An SRT listener in request mode (it sends, kiln receives MPEG-TS).
    Srt {
        host: String,
        port: u16,
        /// `?streamid=` as given, else `#!::r={path},m=request` (kiln's
        /// and OME's request form).
        stream_id: String,
        /// `?latency=` in ms (default 120).
        latency_ms: u64,
        /// `?passphrase=` (and `pbkeylen=`, 16 by default): decrypt.
        crypto: Option<crate::srt::crypto::CryptoConfig>,
    },
    /// An RTMP(S) server that plays the stream to kiln.
    Rtmp {
        host: String,
        port: u16,
        tls: bool,
        config: crate::rtmp::client::ClientConfig,
    },
}

impl Source {
    /// Parses one of a pull's URLs; the error names the URL's problem.
    pub fn parse(url: &str) -> Result<Source, String> {
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
        match scheme.to_ascii_lowercase().as_str() {
            "rtsp" => RtspUrl::parse(url).map(Source::Rtsp),
            "srt" => parse_srt(url),
            "rtmp" | "rtmps" => parse_rtmp(url),
            "" => Err(format!("[{}] is not a URL", redacted(url))),
            other => Err(format!(
                "the [{}] scheme cannot be pulled (rtsp://, srt://, rtmp:// and rtmps:// can)",
                other.escape_debug()
            )),
        }
    }

    /// The host and port to connect to.
    pub fn host_port(&self) -> (&str, u16) {
        match self {
            Source::Rtsp(u) => (&u.host, u.port),
            Source::Srt { host, port, .. } | Source::Rtmp { host, port, .. } => (host, *port),
        }
    }
}

/// `rtmp[s]://host[:port]/app[/instance]/stream`, played.
fn parse_rtmp(url: &str) -> Result<Source, String> {
    let tls = url
        .get(..6)
        .is_some_and(|s| s.eq_ignore_ascii_case("rtmps:"));
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let authority = rest.split('/').next().unwrap_or("");
    let (host, port) = crate::http::url::split_authority(authority)
        .map_err(|e| format!("The rtmp url is not valid: {e}"))?;
    let mut config = crate::rtmp::client::ClientConfig::from_url(url).ok_or_else(|| {
        format!(
            "The rtmp url must name the application and stream: rtmp://host[:port]/app/stream ([{}])",
            redacted(url)
        )
    })?;
    config.play = true;
    config.flash_ver = "LNX 9,0,124,2".into();
    Ok(Source::Rtmp {
        host: host.to_string(),
        port: port.unwrap_or(if tls { 443 } else { 1935 }),
        tls,
        config,
    })
}

/// `srt://host:port[/app/stream][?streamid=...&latency=ms]`.
fn parse_srt(url: &str) -> Result<Source, String> {
    let rest = &url["srt://".len()..];
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (host, port) = crate::http::url::split_authority(authority)
        .map_err(|e| format!("The srt url is not valid: {e}"))?;
    let port = port.ok_or_else(|| {
        format!(
            "The srt url needs a port: srt://host:port ([{}])",
            redacted(url)
        )
    })?;
    let mut stream_id = None;
    let mut latency_ms = 120;
    let mut passphrase = None;
    let mut key_len = 16;
    for kv in query.split('&').filter(|kv| !kv.is_empty()) {
        match kv.split_once('=') {
            Some(("streamid", v)) => {
                stream_id = Some(crate::http::percent_decode(v).unwrap_or_else(|| v.to_string()))
            }
            Some(("passphrase", v)) => {
                passphrase = Some(crate::http::percent_decode(v).unwrap_or_else(|| v.to_string()))
            }
            Some(("pbkeylen", v)) => {
                key_len = match v {
                    "16" | "24" | "32" => v.parse().unwrap_or(16),
                    _ => {
                        return Err(format!(
                            "pbkeylen [{}] is not 16, 24 or 32",
                            v.escape_debug()
                        ))
                    }
                }
            }
            Some(("latency", v)) => {
                latency_ms = v
                    .parse::<u64>()
                    .ok()
                    .filter(|l| *l <= 60_000)
                    .ok_or_else(|| format!("latency [{}] is not 0-60000 ms", v.escape_debug()))?
            }
            _ => {}
        }
    }
    let path = path.trim_matches('/');
    let stream_id = match stream_id {
        Some(id) if !id.is_empty() && id.len() <= 512 => id,
        Some(_) => return Err("the streamid is empty or over 512 bytes".into()),
        None if !path.is_empty() => format!("#!::r={path},m=request"),
        None => {
            return Err(format!(
                "The srt url names no stream: srt://host:port/app/stream or ?streamid= ([{}])",
                redacted(url)
            ))
        }
    };
    let crypto = match passphrase {
        Some(p) => Some(crate::srt::crypto::CryptoConfig::new(&p, key_len)?),
        None => None,
    };
    Ok(Source::Srt {
        host: host.to_string(),
        port,
        stream_id,
        latency_ms,
        crypto,
    })
}

/// A URL for logs and answers: credentials and passphrases hidden.
pub fn redacted(url: &str) -> String {
    let url = crate::http::url::redacted_url(url);
    let url = url.as_ref();
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if at > s && !url[s + 3..at].contains('/') => {
            format!("{}***@{}", &url[..s + 3], &url[at + 1..])
        }
        _ => url.to_string(),
    }
    .escape_debug()
    .to_string()
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Body {
    name: String,
    urls: Vec<String>,
    #[serde(default)]
    properties: Properties,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Properties {
    #[serde(default)]
    persistent: bool,
    no_input_failover_timeout_ms: Option<u64>,
    unused_stream_deletion_timeout_ms: Option<u64>,
}

/// Checks a request body; the spec and the parsed sources, or why not.
pub fn parse(
    value: serde_json::Value,
    vhost: &str,
    app: &str,
) -> Result<(PullSpec, Vec<Source>), String> {
    let body: Body = serde_json::from_value(value).map_err(|e| format!("Invalid request: {e}"))?;
    if !crate::state::vhost::valid_name(&body.name) {
        return Err(format!(
            "Invalid stream name [{}]: 1-255 letters, digits, '-', '_' or '.'",
            body.name.escape_debug()
        ));
    }
    if body.urls.is_empty() || body.urls.len() > MAX_URLS {
        return Err(format!("urls must hold 1 to {MAX_URLS} URLs"));
    }
    let sources = body
        .urls
        .iter()
        .map(|u| Source::parse(u))
        .collect::<Result<Vec<_>, _>>()?;
    let p = body.properties;
    Ok((
        PullSpec {
            vhost: vhost.into(),
            app: app.into(),
            name: body.name,
            urls: body.urls,
            persistent: p.persistent,
            no_input_failover_timeout_ms: p
                .no_input_failover_timeout_ms
                .unwrap_or(10_000)
                .clamp(1000, 600_000),
            unused_stream_deletion_timeout_ms: p
                .unused_stream_deletion_timeout_ms
                .unwrap_or(60_000),
        },
        sources,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bodies() {
        let (spec, sources) = parse(
            json!({"name": "cam", "urls": ["rtsp://u:p@10.0.0.2/live", "rtsp://10.0.0.3:8554/live"],
                   "properties": {"persistent": true, "noInputFailoverTimeoutMs": 3000}}),
            "default",
            "app",
        )
        .unwrap();
        assert_eq!(spec.name, "cam");
        assert!(spec.persistent);
        assert_eq!(spec.no_input_failover_timeout_ms, 3000);
        assert_eq!(sources.len(), 2);
        assert_eq!(sources[1].host_port(), ("10.0.0.3", 8554));
        let err = |v| parse(v, "d", "a").unwrap_err();
        assert!(err(json!({"name": "cam", "urls": []})).contains("1 to 8"));
        assert!(err(json!({"name": "c m", "urls": ["rtsp://x/"]})).contains("Invalid stream name"));
        assert_eq!(
            err(json!({"name": "cam", "urls": ["http://x/"]})),
            "the [http] scheme cannot be pulled (rtsp://, srt://, rtmp:// and rtmps:// can)"
        );
        assert_eq!(
            Source::parse("srt://10.0.0.9:9999/app/cam").unwrap(),
            Source::Srt {
                host: "10.0.0.9".into(),
                port: 9999,
                stream_id: "#!::r=app/cam,m=request".into(),
                latency_ms: 120,
                crypto: None,
            }
        );
        let Source::Srt {
            stream_id,
            latency_ms,
            ..
        } = Source::parse("srt://h:1?streamid=%23!::r=a/b,m=request&latency=300").unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (stream_id.as_str(), latency_ms),
            ("#!::r=a/b,m=request", 300)
        );
        assert!(err(json!({"name": "c", "urls": ["srt://h:1"]})).contains("names no stream"));
        assert!(err(json!({"name": "c", "urls": ["srt://h/a/b"]})).contains("needs a port"));
        assert!(err(json!({"urls": ["rtsp://x/"]})).contains("missing field `name`"));
        assert!(err(json!({"name": "cam", "urls": ["rtsp://x:0/"]})).contains("1-65535"));
    }

    #[test]
    fn redaction() {
        assert_eq!(redacted("rtsp://admin:pw@cam/live"), "rtsp://***@cam/live");
        assert_eq!(redacted("rtsp://cam/a@b"), "rtsp://cam/a@b");
        assert_eq!(
            redacted("srt://h:1/a/b?passphrase=secret-words&pbkeylen=32"),
            "srt://h:1/a/b?passphrase=***&pbkeylen=32"
        );
        let Source::Srt { crypto, .. } =
            Source::parse("srt://h:1/a/b?passphrase=0123456789&pbkeylen=32").unwrap()
        else {
            panic!()
        };
        assert_eq!(crypto.unwrap().key_len, 32);
        assert!(Source::parse("srt://h:1/a/b?passphrase=short").is_err());
    }
}
