//! `<VirtualHosts>`: each `<VirtualHost>` (inline or included from other
//! files), its host names and TLS, admission (`<SignedPolicy>`,
//! `<AdmissionWebhooks>`), `<Origins>` and `<OriginMapStore>`.

use super::{
    config_dir, dom, AppConfig, ConfigError, VhostConfig, Walker, UNSUPPORTED_ORIGINS,
    UNSUPPORTED_ORIGIN_PASS, UNSUPPORTED_VHOST,
};
use crate::state::vhost::AdmissionWebhooks;
use crate::state::vhost::Enables;
use crate::state::vhost::HostSpec;
use crate::state::vhost::Origin;
use crate::state::vhost::OriginMapStore;
use crate::state::vhost::OriginPass;
use crate::state::vhost::OriginProperties;
use crate::state::vhost::OriginUrls;
use crate::state::vhost::Origins;
use crate::state::vhost::RedisServer;
use crate::state::vhost::SignedPolicy;
use crate::state::vhost::VhostSpec;
use dom::Element;
use std::path::Path;
use std::path::PathBuf;

impl Walker<'_> {
    pub(super) fn vhosts(&mut self, el: &Element, path: &str) -> Vec<VhostConfig> {
        let mut out = Vec::new();
        self.children(el, path, &[], &["VirtualHost"], |w, c, p| {
            if c.name != "VirtualHost" {
                return false;
            }
            match c.attribute("include") {
                Some(pattern) => out.extend(w.included_vhosts(c, p, pattern)),
                None => out.extend(w.vhost(c, p)),
            }
            true
        });
        out
    }

    /// `<VirtualHost include="VHost*.xml" />` (OME): every file matching the
    /// pattern (relative to the config's folder; `*` and `?` in the file
    /// name), in name order, holds one `<VirtualHost>`. No match: nothing.
    pub(super) fn included_vhosts(
        &mut self,
        el: &Element,
        path: &str,
        pattern: &str,
    ) -> Vec<VhostConfig> {
        let full = config_dir(&self.file).join(pattern);
        let dir = full.parent().map(Path::to_path_buf).unwrap_or_default();
        let file_pattern = full
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
            Ok(entries) => entries
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter(|e| {
                    crate::wildcard::matches(&file_pattern, &e.file_name().to_string_lossy())
                })
                .map(|e| e.path())
                .collect(),
            Err(_) => Vec::new(),
        };
        files.sort_unstable();
        if files.is_empty() {
            self.warn(
                el,
                path,
                format!("include [{pattern}] matches no file; nothing included"),
            );
        }
        let mut out = Vec::new();
        for file in files {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => {
                    self.error(el, path, format!("include [{}]: {e}", file.display()));
                    continue;
                }
            };
            let outer = std::mem::replace(&mut self.file, file.clone());
            match dom::parse(&text) {
                Ok(root) if root.name == "VirtualHost" => out.extend(self.vhost(&root, path)),
                Ok(root) => self.error(
                    &root,
                    path,
                    format!(
                        "an included file must hold one <VirtualHost>, not <{}>",
                        root.name
                    ),
                ),
                Err(e) => self.errors.push(ConfigError {
                    file: file.clone(),
                    line: e.line,
                    column: e.column,
                    path: String::new(),
                    message: format!("XML syntax error: {}", e.message),
                }),
            }
            self.file = outer;
        }
        out
    }

    pub(super) fn vhost(&mut self, el: &Element, path: &str) -> Option<VhostConfig> {
        let mut name = None;
        let mut distribution = None;
        let mut host: Option<HostSpec> = None;
        let mut spec_extra = (None, None, None, None);
        let mut cross_domains = None;
        let mut applications = Vec::new();
        let mut app_template = None;
        let mut tls_at = None;
        self.children(el, path, UNSUPPORTED_VHOST, &[], |w, c, p| {
            match c.name.as_str() {
                "Name" => name = w.nonempty_text(c, p),
                "Distribution" => distribution = w.nonempty_text(c, p),
                "Host" => {
                    let mut h = HostSpec {
                        names: Vec::new(),
                        tls: None,
                    };
                    w.children(c, p, &[], &[], |w, c, p| {
                        match c.name.as_str() {
                            "Names" => h.names = w.names_list(c, p),
                            "TLS" => {
                                h.tls = w.tls(c, p);
                                tls_at = Some((w.file.clone(), c.line, c.column));
                            }
                            _ => return false,
                        }
                        true
                    });
                    host = Some(h);
                }
                "SignedPolicy" => spec_extra.0 = w.signed_policy(c, p),
                "AdmissionWebhooks" => spec_extra.1 = w.admission_webhooks(c, p),
                "Origins" => spec_extra.2 = w.origins(c, p),
                "OriginMapStore" => spec_extra.3 = w.origin_map_store(c, p),
                "CrossDomains" => {
                    cross_domains = Some(crate::state::vhost::CrossDomains {
                        urls: w.cross_domains(c, p),
                    })
                }
                "Applications" => w.children(c, p, &[], &["Application"], |w, c, p| {
                    if c.name != "Application" {
                        return false;
                    }
                    if let Some(a) = w.application(c, p) {
                        if a.name == "*" {
                            if app_template.is_some() {
                                w.error(c, p, "the application template [*] is declared twice");
                            }
                            app_template = Some(a);
                        } else if applications.iter().any(|x: &AppConfig| x.name == a.name) {
                            w.error(c, p, format!("application [{}] is declared twice", a.name));
                        } else {
                            applications.push(a);
                        }
                    }
                    true
                }),
                _ => return false,
            }
            true
        });
        let Some(name) = name else {
            self.error(el, path, "<Name> is required");
            return None;
        };
        let host = host.unwrap_or(HostSpec {
            names: vec!["*".into()],
            tls: None,
        });
        let spec = VhostSpec {
            name,
            distribution,
            host,
            signed_policy: spec_extra.0,
            admission_webhooks: spec_extra.1,
            origins: spec_extra.2,
            origin_map_store: spec_extra.3,
            cross_domains,
            applications: None,
        };
        if let Err(e) = spec.validate() {
            self.error(el, path, e.to_string());
            return None;
        }
        Some(VhostConfig {
            spec,
            applications,
            app_template,
            line: el.line,
            tls_at,
        })
    }

    pub(super) fn enables(&mut self, el: &Element, path: &str) -> Enables {
        let mut e = Enables::default();
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "Providers" => e.providers = w.text(c, p),
                "Publishers" => e.publishers = w.text(c, p),
                _ => return false,
            }
            true
        });
        e
    }

    pub(super) fn required(
        &mut self,
        el: &Element,
        path: &str,
        v: Option<String>,
        name: &str,
    ) -> String {
        match v {
            Some(v) => v,
            None => {
                self.error(el, path, format!("<{name}> is required"));
                String::new()
            }
        }
    }

    pub(super) fn signed_policy(&mut self, el: &Element, path: &str) -> Option<SignedPolicy> {
        let (mut pq, mut sq, mut sk, mut en) = (None, None, None, Enables::default());
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "PolicyQueryKeyName" => pq = w.nonempty_text(c, p),
                "SignatureQueryKeyName" => sq = w.nonempty_text(c, p),
                "SecretKey" => sk = w.nonempty_text(c, p),
                "Enables" => en = w.enables(c, p),
                _ => return false,
            }
            true
        });
        Some(SignedPolicy {
            enables: en,
            policy_query_key_name: self.required(el, path, pq, "PolicyQueryKeyName"),
            secret_key: self.required(el, path, sk, "SecretKey"),
            signature_query_key_name: self.required(el, path, sq, "SignatureQueryKeyName"),
        })
    }

    pub(super) fn admission_webhooks(
        &mut self,
        el: &Element,
        path: &str,
    ) -> Option<AdmissionWebhooks> {
        let (mut url, mut sk, mut timeout, mut en) = (None, None, None, Enables::default());
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "ControlServerUrl" => url = w.nonempty_text(c, p),
                "SecretKey" => sk = w.text(c, p),
                "Timeout" => timeout = w.number::<u64>(c, p),
                "Enables" => en = w.enables(c, p),
                _ => return false,
            }
            true
        });
        Some(AdmissionWebhooks {
            control_server_url: self.required(el, path, url, "ControlServerUrl"),
            enables: en,
            secret_key: sk.unwrap_or_default(),
            timeout: timeout.unwrap_or(3000),
        })
    }

    pub(super) fn origins(&mut self, el: &Element, path: &str) -> Option<Origins> {
        let mut origin = Vec::new();
        let mut properties = None;
        self.children(el, path, UNSUPPORTED_ORIGINS, &["Origin"], |w, c, p| {
            if c.name == "Properties" {
                let mut props = OriginProperties {
                    no_input_failover_timeout: None,
                    unused_stream_deletion_timeout: None,
                };
                w.children(c, p, &[], &[], |w, c, p| {
                    match c.name.as_str() {
                        "NoInputFailoverTimeout" => {
                            props.no_input_failover_timeout = w.number(c, p)
                        }
                        "UnusedStreamDeletionTimeout" => {
                            props.unused_stream_deletion_timeout = w.number(c, p)
                        }
                        _ => return false,
                    }
                    true
                });
                properties = Some(props);
                return true;
            }
            if c.name != "Origin" {
                return false;
            }
            let (mut location, mut scheme, mut urls) = (None, None, Vec::new());
            w.children(c, p, &[], &[], |w, c, p| {
                match c.name.as_str() {
                    "Location" => location = w.nonempty_text(c, p),
                    "Pass" => w.children(c, p, UNSUPPORTED_ORIGIN_PASS, &[], |w, c, p| {
                        match c.name.as_str() {
                            "Scheme" => scheme = w.nonempty_text(c, p),
                            "Urls" => {
                                urls = w.repeated(c, p, &[], "Url", |w, c, p| w.nonempty_text(c, p))
                            }
                            _ => return false,
                        }
                        true
                    }),
                    _ => return false,
                }
                true
            });
            origin.push(Origin {
                location: w.required(c, p, location, "Location"),
                pass: OriginPass {
                    scheme: w.required(c, p, scheme, "Pass/Scheme"),
                    urls: OriginUrls { url: urls },
                },
            });
            true
        });
        Some(Origins { properties, origin })
    }

    pub(super) fn origin_map_store(&mut self, el: &Element, path: &str) -> Option<OriginMapStore> {
        let (mut host_name, mut host, mut auth) = (None, None, None);
        self.children(el, path, &[], &[], |w, c, p| {
            match c.name.as_str() {
                "OriginHostName" => host_name = w.nonempty_text(c, p),
                "RedisServer" => w.children(c, p, &[], &[], |w, c, p| {
                    match c.name.as_str() {
                        "Host" => host = w.nonempty_text(c, p),
                        "Auth" => auth = w.text(c, p),
                        _ => return false,
                    }
                    true
                }),
                _ => return false,
            }
            true
        });
        Some(OriginMapStore {
            origin_host_name: self.required(el, path, host_name, "OriginHostName"),
            redis_server: RedisServer {
                host: self.required(el, path, host, "RedisServer/Host"),
                auth,
            },
        })
    }
}
