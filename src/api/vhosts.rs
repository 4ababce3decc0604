//! Virtual host and certificate handlers (DECISIONS sections 4 and 5).
//! Changes are written to the state file before they are applied and
//! answered; if the write fails nothing changes and the answer is 500.

use super::envelope::{self, ApiError};
use super::Api;
use crate::http::Response;
use crate::state::store::Change;
use crate::state::vhost::{
    AdmissionWebhooks, HostSpec, OriginMapStore, Origins, SignedPolicy, VhostSpec,
};
use crate::state::{Origin, Vhost};
use crate::tls::{self, VhostCert};
use crate::{error, info, warn};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// A virtual host as `GET /v1/vhosts/{vhost}` shows it: never `applications`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct VhostView<'a> {
    name: &'a str,
    distribution: &'a str,
    host: &'a HostSpec,
    #[serde(skip_serializing_if = "Option::is_none")]
    signed_policy: Option<&'a SignedPolicy>,
    #[serde(skip_serializing_if = "Option::is_none")]
    admission_webhooks: Option<&'a AdmissionWebhooks>,
    #[serde(skip_serializing_if = "Option::is_none")]
    origins: Option<&'a Origins>,
    #[serde(skip_serializing_if = "Option::is_none")]
    origin_map_store: Option<&'a OriginMapStore>,
    /// OME's `{"urls": [...]}`.
    #[serde(skip_serializing_if = "Option::is_none")]
    cross_domains: Option<&'a crate::state::vhost::CrossDomains>,
}

impl<'a> VhostView<'a> {
    pub(super) fn of(v: &'a Vhost, server_name: Option<&'a str>) -> Self {
        VhostView {
            name: &v.spec.name,
            distribution: v.distribution(server_name),
            host: &v.spec.host,
            signed_policy: v.spec.signed_policy.as_ref(),
            admission_webhooks: v.spec.admission_webhooks.as_ref(),
            origins: v.spec.origins.as_ref(),
            origin_map_store: v.spec.origin_map_store.as_ref(),
            cross_domains: v.spec.cross_domains.as_ref(),
        }
    }
}

/// The outcome of one item of a creation request.
enum ItemOutcome {
    Created(Box<Vhost>, Vec<VhostCert>),
    Failed(ApiError),
}

impl Api {
    pub(super) fn list_vhosts(&self) -> Response {
        let names: Vec<&str> = self
            .registry
            .vhosts()
            .iter()
            .map(|v| v.spec.name.as_str())
            .collect();
        envelope::ok(names)
    }

    pub(super) fn get_vhost(&self, name: &str) -> Result<Response, ApiError> {
        let v = self
            .registry
            .vhost(name)
            .ok_or_else(|| ApiError::vhost_not_found(name))?;
        Ok(envelope::ok(VhostView::of(
            v,
            self.registry.server_name.as_deref(),
        )))
    }

    pub(super) fn create_vhosts(&mut self, body: &[u8]) -> Result<Response, ApiError> {
        let value: Value = serde_json::from_slice(body).map_err(|e| ApiError::invalid_json(&e))?;
        let Value::Array(items) = value else {
            return Err(ApiError::bad_request("Request body must be an array"));
        };
        let mut outcomes: Vec<ItemOutcome> = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let outcome = self.check_new_vhost(i, item, &outcomes);
            outcomes.push(outcome);
        }
        // Persist every created host at once, before anything is applied.
        let created: Vec<&Vhost> = outcomes
            .iter()
            .filter_map(|o| match o {
                ItemOutcome::Created(v, _) => Some(&**v),
                ItemOutcome::Failed(_) => None,
            })
            .collect();
        if !created.is_empty() {
            let change = Change::AddVhosts {
                vhosts: created.iter().map(|v| v.spec.clone()).collect(),
            };
            if let Err(e) = self.record(change, "virtual hosts not created") {
                for o in outcomes.iter_mut() {
                    if matches!(o, ItemOutcome::Created(..)) {
                        *o = ItemOutcome::Failed(e.clone());
                    }
                }
            }
        }
        let mut results: Vec<Result<Box<RawValue>, ApiError>> = Vec::with_capacity(outcomes.len());
        for o in outcomes {
            results.push(match o {
                ItemOutcome::Created(v, certs) => {
                    let name = v.spec.name.clone();
                    if !certs.is_empty() {
                        self.vhost_certs.install(certs);
                    }
                    if v.spec.origin_map_store.is_some() {
                        info!(
                            "virtual host [{name}]: originMapStore is stored but not yet enforced"
                        );
                    }
                    self.registry.add_api_vhost(v.spec);
                    info!("virtual host [{name}] created");
                    let stored = self.registry.vhost(&name).ok_or_else(ApiError::internal)?;
                    Ok(raw_json(&VhostView::of(
                        stored,
                        self.registry.server_name.as_deref(),
                    )))
                }
                ItemOutcome::Failed(e) => Err(e),
            });
        }
        Ok(envelope::batch(&results))
    }

    /// Validates one item of a creation request against the registry and the
    /// items before it.
    fn check_new_vhost(&self, index: usize, item: Value, earlier: &[ItemOutcome]) -> ItemOutcome {
        let fail = |e: ApiError| ItemOutcome::Failed(e);
        if !item.is_object() {
            return fail(ApiError::bad_request(format_args!(
                "Item {index} must be a virtual host object"
            )));
        }
        let mut item = item;
        let vhost_name = item
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_string();
        // The applications as OME's bodies are read (and echoed).
        let mut apps = None;
        let given = item.as_object_mut().and_then(|o| o.remove("applications"));
        if let Some(given) = given {
            let Value::Array(items) = given else {
                return fail(ApiError::bad_request(format_args!(
                    "Invalid virtual host (item {index}): applications must be an array"
                )));
            };
            let apps = apps.get_or_insert_with(Vec::new);
            for (i, app) in items.into_iter().enumerate() {
                match super::apps::app_from_body(app, &vhost_name) {
                    Ok(a) => apps.push(a),
                    Err(e) => {
                        return fail(ApiError::bad_request(format_args!(
                            "Invalid virtual host (item {index}): applications[{i}]: {e}"
                        )))
                    }
                }
            }
        }
        let mut spec: VhostSpec = match super::envelope::typed(item) {
            Ok(s) => s,
            Err(e) => {
                return fail(ApiError::bad_request(format_args!(
                    "Invalid virtual host (item {index}): {e}"
                )))
            }
        };
        spec.applications = apps;
        if let Err(e) = spec.validate() {
            return fail(ApiError::invalid_spec("virtual host", Some(index), e));
        }
        let taken_earlier = earlier
            .iter()
            .any(|o| matches!(o, ItemOutcome::Created(v, _) if v.spec.name == spec.name));
        if taken_earlier || self.registry.vhost(&spec.name).is_some() {
            return fail(ApiError::vhost_exists(&spec.name));
        }
        let api_hosts = self
            .registry
            .vhosts()
            .iter()
            .filter(|v| v.origin == Origin::Api)
            .count();
        let created_earlier = earlier
            .iter()
            .filter(|o| matches!(o, ItemOutcome::Created(..)))
            .count();
        if api_hosts + created_earlier >= self.limits.max_vhosts {
            return fail(ApiError::bad_request(format_args!(
                "The limit of {} virtual hosts is reached (Managers/API/Limits/MaxVirtualHosts)",
                self.limits.max_vhosts
            )));
        }
        let mut certs = Vec::new();
        if let Some(tls_spec) = &spec.host.tls {
            match tls::load_certified_key(tls_spec) {
                Ok(key) => certs.push(VhostCert {
                    vhost: spec.name.clone(),
                    names: spec.host.names.clone(),
                    key,
                }),
                Err(e) => {
                    return fail(ApiError::bad_request(format_args!(
                        "Invalid TLS settings of [{}]: {e}",
                        spec.name
                    )))
                }
            }
        }
        ItemOutcome::Created(
            Box::new(Vhost {
                spec,
                origin: Origin::Api,
                apps: Vec::new(),
            }),
            certs,
        )
    }

    pub(super) fn delete_vhost(&mut self, name: &str) -> Result<Response, ApiError> {
        let v = self
            .registry
            .vhost(name)
            .ok_or_else(|| ApiError::vhost_not_found(name))?;
        if v.origin == Origin::ConfigFile {
            return Err(ApiError::read_only(name));
        }
        let change = Change::DeleteVhost {
            name: name.to_string(),
        };
        self.record(change, &format!("virtual host [{name}] not deleted"))?;
        self.registry.remove_vhost(name);
        self.vhost_certs.remove(name);
        self.drop_pushes_of(name, None);
        self.drop_pulls_of(name, None);
        self.drop_channels_of(name, None);
        self.stop_records_of(name, None);
        self.effects.push(super::Effect::RestartApp {
            vhost: name.to_string(),
            app: None,
        });
        info!("virtual host [{name}] deleted");
        Ok(envelope::ok_empty())
    }

    pub(super) fn reload_all_certificates(&mut self) -> Result<Response, ApiError> {
        let mut loaded = Vec::new();
        let mut failed = false;
        for v in self.registry.vhosts() {
            let Some(spec) = &v.spec.host.tls else {
                continue;
            };
            match tls::load_certified_key(spec) {
                Ok(key) => loaded.push(VhostCert {
                    vhost: v.spec.name.clone(),
                    names: v.spec.host.names.clone(),
                    key,
                }),
                Err(e) => {
                    error!(
                        "certificate reload of virtual host [{}] failed: {e}",
                        v.spec.name
                    );
                    failed = true;
                }
            }
        }
        if failed {
            warn!("certificate reload: no certificate changed; the existing ones stay in use");
            return Err(ApiError::internal());
        }
        let n = loaded.len();
        self.vhost_certs.install(loaded);
        info!("certificates of {n} virtual host(s) reloaded");
        Ok(envelope::ok_empty())
    }

    pub(super) fn reload_vhost_certificate(&mut self, name: &str) -> Result<Response, ApiError> {
        let v = self
            .registry
            .vhost(name)
            .ok_or_else(|| ApiError::vhost_not_found(name))?;
        let Some(spec) = &v.spec.host.tls else {
            info!("virtual host [{name}] has no TLS settings; nothing to reload");
            return Ok(envelope::ok_empty());
        };
        match tls::load_certified_key(spec) {
            Ok(key) => {
                self.vhost_certs.install(vec![VhostCert {
                    vhost: name.to_string(),
                    names: v.spec.host.names.clone(),
                    key,
                }]);
                info!("certificate of virtual host [{name}] reloaded");
                Ok(envelope::ok_empty())
            }
            Err(e) => {
                error!("certificate reload of virtual host [{name}] failed: {e}; the existing certificate stays in use");
                Err(ApiError::internal())
            }
        }
    }

    pub(super) fn reload_api_certificate(&mut self) -> Result<Response, ApiError> {
        let Some((spec, resolver)) = &self.api_tls else {
            return Err(ApiError::bad_request("The API server has no TLS port"));
        };
        match tls::load_certified_key(spec) {
            Ok(key) => {
                resolver.swap(key);
                info!("API server certificate reloaded");
                Ok(envelope::ok_empty())
            }
            Err(e) => {
                error!("API server certificate reload failed: {e}; the existing certificate stays in use");
                Err(ApiError::internal())
            }
        }
    }
}

/// A view rendered once as JSON text, to embed in a batch answer with its
/// field order kept.
pub(super) fn raw_json<T: Serialize>(view: &T) -> Box<RawValue> {
    serde_json::to_string(view)
        .ok()
        .and_then(|s| RawValue::from_string(s).ok())
        .unwrap_or_else(|| RawValue::from_string("null".into()).unwrap_or_default())
}
