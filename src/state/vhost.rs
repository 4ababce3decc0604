//! The virtual host as the API shows and accepts it (OME's JSON shape), and
//! its validation. The same type is built from `server.xml` and from a
//! `POST /v1/vhosts` item, so both origins behave alike.
//!
//! signedPolicy and admissionWebhooks are enforced by [`crate::admission`];
//! origins and originMapStore are validated, stored, returned and persisted
//! but not enforced yet.

use super::SpecError;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct VhostSpec {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<String>,
    pub host: HostSpec,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signed_policy: Option<SignedPolicy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admission_webhooks: Option<AdmissionWebhooks>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origins: Option<Origins>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin_map_store: Option<OriginMapStore>,
    /// OME's `<VirtualHost><CrossDomains>`: the origins a browser page may
    /// play the host's LL-HLS and HLS from, where an application names
    /// none of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cross_domains: Option<CrossDomains>,
    /// Applications created together with the host; never shown by
    /// `GET /v1/vhosts/{vhost}` (see `/apps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applications: Option<Vec<super::app::AppSpec>>,
}

/// OME's JSON form of a list of origins: `{"urls": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CrossDomains {
    pub urls: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostSpec {
    pub names: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
}

pub use super::name::{valid_name, STREAM_NAME_RULE};
pub use crate::tls::TlsSpec;

/// Who is admitted: a provider (a publisher coming in) or a publisher in
/// OME's sense (a viewer going out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Rtmp,
    Srt,
    Llhls,
    Hls,
    /// An RTMP player (`rtmp` in `enables.publishers`).
    RtmpPlay,
    /// An SRT caller in request mode (`srt` in `enables.publishers`).
    SrtPlay,
    /// A WebRTC viewer (`webrtc` in `enables.publishers`).
    WebRtc,
    /// A WebRTC publisher: WHIP or OME's `direction=send` (`webrtc` in
    /// `enables.providers`).
    WebRtcIngest,
}

impl Protocol {
    /// The name in `enables.providers` / `enables.publishers`.
    pub fn enables_name(self) -> &'static str {
        match self {
            Protocol::Rtmp | Protocol::RtmpPlay => "rtmp",
            Protocol::Srt | Protocol::SrtPlay => "srt",
            Protocol::Llhls => "llhls",
            Protocol::Hls => "hls",
            Protocol::WebRtc | Protocol::WebRtcIngest => "webrtc",
        }
    }

    /// The name in a webhook request.
    pub fn wire_name(self) -> &'static str {
        match self {
            Protocol::Rtmp | Protocol::RtmpPlay => "RTMP",
            Protocol::Srt | Protocol::SrtPlay => "SRT",
            Protocol::Llhls => "LLHLS",
            Protocol::Hls => "HLS",
            Protocol::WebRtc | Protocol::WebRtcIngest => "WEBRTC",
        }
    }

    /// Publishers come in (providers); viewers go out.
    pub fn is_incoming(self) -> bool {
        matches!(
            self,
            Protocol::Rtmp | Protocol::Srt | Protocol::WebRtcIngest
        )
    }

    /// Is this protocol on in an `enables` pair (a comma list each)?
    pub fn enabled_in(self, enables: &Enables) -> bool {
        let list = if self.is_incoming() {
            enables.providers.as_deref()
        } else {
            enables.publishers.as_deref()
        };
        list.unwrap_or("")
            .split(',')
            .any(|p| p.trim().eq_ignore_ascii_case(self.enables_name()))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Enables {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub providers: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publishers: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SignedPolicy {
    #[serde(default)]
    pub enables: Enables,
    pub policy_query_key_name: String,
    pub secret_key: String,
    pub signature_query_key_name: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AdmissionWebhooks {
    pub control_server_url: String,
    #[serde(default)]
    pub enables: Enables,
    #[serde(default)]
    pub secret_key: String,
    /// Milliseconds (OME's unit).
    pub timeout: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Origins {
    /// OME's `<Origins><Properties>`: how pulls made on demand behave.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<OriginProperties>,
    pub origin: Vec<Origin>,
}

/// Milliseconds, as OME writes them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OriginProperties {
    /// No media for this long fails the pull (default 5000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_input_failover_timeout: Option<u64>,
    /// A pulled stream nobody uses for this long ends (default 60000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unused_stream_deletion_timeout: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Origin {
    pub location: String,
    pub pass: OriginPass,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OriginPass {
    pub scheme: String,
    pub urls: OriginUrls,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OriginUrls {
    pub url: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OriginMapStore {
    pub origin_host_name: String,
    pub redis_server: RedisServer,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RedisServer {
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
}

/// A `host.names` entry: a host name, IP address or wildcard pattern of
/// them (never a path, a port or control characters).
pub fn valid_host_pattern(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 253
        && n.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(b, b'-' | b'_' | b'.' | b'*' | b'?' | b':' | b'[' | b']')
        })
}

const PROVIDER_NAMES: &[&str] = &["rtmp", "webrtc", "srt", "mpegts", "rtsp", "ovt", "whip"];
const PUBLISHER_NAMES: &[&str] = &[
    "webrtc", "llhls", "hls", "dash", "ovt", "srt", "rtmp", "push",
];

impl VhostSpec {
    /// Checks the rules serde cannot express. The message names the field.
    pub fn validate(&self) -> Result<(), SpecError> {
        if !valid_name(&self.name) {
            return Err(SpecError::BadName(self.name.clone()));
        }
        if self.host.names.is_empty() {
            return Err(SpecError::Empty("host.names".into()));
        }
        if let Some(n) = self.host.names.iter().find(|n| n.trim().is_empty()) {
            return Err(SpecError::EmptyHostName(n.clone()));
        }
        if let Some(n) = self.host.names.iter().find(|n| !valid_host_pattern(n)) {
            return Err(SpecError::NotAHostName(n.clone()));
        }
        if let Some(tls) = &self.host.tls {
            if tls.cert_path.is_empty() {
                return Err(SpecError::Empty("host.tls.certPath".into()));
            }
            if tls.key_path.is_empty() {
                return Err(SpecError::Empty("host.tls.keyPath".into()));
            }
        }
        if let Some(apps) = &self.applications {
            for (i, app) in apps.iter().enumerate() {
                app.validate().map_err(|e| SpecError::At {
                    path: format!("applications[{i}]"),
                    inner: Box::new(e),
                })?;
                if apps[..i].iter().any(|a| a.name == app.name) {
                    return Err(SpecError::Twice {
                        what: "applications:",
                        name: app.name.clone(),
                    });
                }
            }
        }
        if let Some(sp) = &self.signed_policy {
            check_enables("signedPolicy", &sp.enables)?;
        }
        if let Some(aw) = &self.admission_webhooks {
            check_enables("admissionWebhooks", &aw.enables)?;
            if !(aw.control_server_url.starts_with("http://")
                || aw.control_server_url.starts_with("https://"))
            {
                return Err(SpecError::Form {
                    field: "admissionWebhooks.controlServerUrl".into(),
                    must: "must be an http(s) URL",
                });
            }
        }
        if let Some(o) = &self.origins {
            for (i, origin) in o.origin.iter().enumerate() {
                if !origin.location.starts_with('/') {
                    return Err(SpecError::Form {
                        field: format!("origins.origin[{i}].location"),
                        must: "must start with '/'",
                    });
                }
                if origin.pass.urls.url.is_empty() {
                    return Err(SpecError::Empty(format!(
                        "origins.origin[{i}].pass.urls.url"
                    )));
                }
            }
        }
        Ok(())
    }

    /// True when one of the host's names matches `host` (wildcards allowed).
    pub fn serves_host_name(&self, host: &str) -> bool {
        self.host
            .names
            .iter()
            .any(|pattern| crate::wildcard::matches(pattern, host))
    }
}

fn check_enables(what: &str, e: &Enables) -> Result<(), SpecError> {
    for (field, list, allowed) in [
        ("providers", &e.providers, PROVIDER_NAMES),
        ("publishers", &e.publishers, PUBLISHER_NAMES),
    ] {
        if let Some(list) = list {
            for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                if !allowed.contains(&item.to_ascii_lowercase().as_str()) {
                    return Err(SpecError::UnknownProtocol {
                        field: format!("{what}.enables.{field}"),
                        item: item.to_string(),
                        known: allowed.join(", "),
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(valid_name("default"));
        assert!(valid_name("a.b-c_d9"));
        assert!(!valid_name(""));
        assert!(!valid_name("a b"));
        assert!(!valid_name("a/b"));
        assert!(!valid_name(&"x".repeat(256)));
        assert!(!valid_name("."));
        assert!(!valid_name(".."));
        assert!(valid_name("..."));
    }

    #[test]
    fn host_names_are_checked() {
        for bad in ["a\nb", "a\0", "a/b", "a b", "x:80/", &"x".repeat(254)] {
            let spec: VhostSpec =
                serde_json::from_value(serde_json::json!({"name":"a","host":{"names":[bad]}}))
                    .unwrap();
            let e = spec.validate().unwrap_err();
            assert!(matches!(e, SpecError::NotAHostName(_)), "{bad:?}: {e}");
            assert!(e.to_string().contains("not a host name"), "{bad:?}: {e}");
        }
        for good in [
            "*",
            "*.example.com",
            "127.0.0.1",
            "::1",
            "[::1]",
            "cam-?.lan",
        ] {
            let spec: VhostSpec =
                serde_json::from_value(serde_json::json!({"name":"a","host":{"names":[good]}}))
                    .unwrap();
            assert!(spec.validate().is_ok(), "{good}");
        }
    }

    #[test]
    fn unknown_field_is_named() {
        let err =
            serde_json::from_str::<VhostSpec>(r#"{"name":"a","host":{"names":["*"]},"colour":1}"#)
                .unwrap_err()
                .to_string();
        assert!(err.contains("colour"), "{err}");
    }

    #[test]
    fn round_trip_keeps_json_types() {
        let json = r#"{"name":"a","host":{"names":["*"]},"admissionWebhooks":{"controlServerUrl":"http://x/y","secretKey":"","timeout":3000,"enables":{"providers":"rtmp,srt"}}}"#;
        let spec: VhostSpec = serde_json::from_str(json).unwrap();
        spec.validate().unwrap();
        let back = serde_json::to_value(&spec).unwrap();
        assert_eq!(back["admissionWebhooks"]["timeout"], 3000);
    }
}
