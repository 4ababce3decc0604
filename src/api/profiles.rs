//! OME's output-profile endpoints:
//! `GET/POST /v1/vhosts/{vh}/apps/{app}/outputProfiles` and
//! `GET/PATCH/DELETE .../outputProfiles/{profile}`. Encodes are bypasses
//! (or OME's conditional bypass on the codec): kiln does not transcode. A
//! change restarts the application, as OME does; profiles of config-file
//! hosts are read-only (403).

use super::envelope::{self, ApiError};
use super::{Api, Effect};
use crate::info;
use crate::state::app::{AppSpec, Encodes, OutputProfile};
use serde::Deserialize;
use serde_json::Value;

/// `PATCH .../outputProfiles/{profile}`: the fields to replace.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ProfilePatch {
    name: Option<String>,
    output_stream_name: Option<String>,
    encodes: Option<Encodes>,
}

impl Api {
    fn profile_not_found(vhost: &str, app: &str, profile: &str) -> ApiError {
        ApiError::http(
            404,
            format_args!("Could not find the output profile: [{vhost}/{app}/{profile}]"),
        )
    }

    pub(super) fn list_profiles(
        &self,
        vhost: &str,
        app: &str,
    ) -> Result<super::Response, ApiError> {
        let (_, a) = self.app_or_404(vhost, app)?;
        let names: Vec<&str> = a
            .output_profiles
            .output_profile
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        Ok(envelope::ok(names))
    }

    pub(super) fn get_profile(
        &self,
        vhost: &str,
        app: &str,
        profile: &str,
    ) -> Result<super::Response, ApiError> {
        let (_, a) = self.app_or_404(vhost, app)?;
        let p = a
            .output_profiles
            .output_profile
            .iter()
            .find(|p| p.name == profile)
            .ok_or_else(|| Self::profile_not_found(vhost, app, profile))?;
        Ok(envelope::ok(p))
    }

    /// The application as it is now, for a change (404s; 403 for a
    /// config-file host).
    fn app_to_change(&self, vhost: &str, app: &str) -> Result<(Vec<AppSpec>, usize), ApiError> {
        self.app_or_404(vhost, app)?;
        let v = self.writable_vhost(vhost)?;
        let apps = v.apps.clone();
        let i = apps
            .iter()
            .position(|a| a.name == app)
            .ok_or_else(|| ApiError::app_not_found(vhost, app))?;
        Ok((apps, i))
    }

    /// Validates the changed app, writes it and restarts the app.
    fn commit_profiles(
        &mut self,
        vhost: &str,
        app: &str,
        apps: Vec<AppSpec>,
        i: usize,
    ) -> Result<(), ApiError> {
        apps[i]
            .validate()
            .map_err(|e| ApiError::invalid_spec("output profile", None, e))?;
        self.commit_apps(vhost, apps, None)?;
        info!("output profiles of [{vhost}/{app}] changed; restarting the application");
        self.effects.push(Effect::RestartApp {
            vhost: vhost.to_string(),
            app: Some(app.to_string()),
        });
        Ok(())
    }

    pub(super) fn create_profiles(
        &mut self,
        vhost: &str,
        app: &str,
        body: &[u8],
    ) -> Result<super::Response, ApiError> {
        let (mut apps, i) = self.app_to_change(vhost, app)?;
        let value: Value = serde_json::from_slice(body).map_err(|e| ApiError::invalid_json(&e))?;
        let Value::Array(items) = value else {
            return Err(ApiError::bad_request("Request body must be an array"));
        };
        let mut results: Vec<Result<OutputProfile, ApiError>> = Vec::with_capacity(items.len());
        for (n, item) in items.into_iter().enumerate() {
            let checked = super::envelope::typed::<OutputProfile>(item)
                .map_err(|e| {
                    ApiError::bad_request(format_args!("Invalid output profile (item {n}): {e}"))
                })
                .and_then(|p| {
                    let profiles = &apps[i].output_profiles.output_profile;
                    if profiles.iter().any(|x| x.name == p.name) {
                        return Err(ApiError::http(
                            409,
                            format_args!(
                                "The output profile already exists: [{vhost}/{app}/{}]",
                                p.name
                            ),
                        ));
                    }
                    // Checked with the app it joins (names, bypass rules).
                    let mut probe = apps[i].clone();
                    probe.output_profiles.output_profile.push(p.clone());
                    probe
                        .validate()
                        .map_err(|e| ApiError::invalid_spec("output profile", Some(n), e))?;
                    Ok(p)
                });
            if let Ok(p) = &checked {
                apps[i].output_profiles.output_profile.push(p.clone());
            }
            results.push(checked);
        }
        if results.iter().any(|r| r.is_ok()) {
            if let Err(e) = self.commit_profiles(vhost, app, apps, i) {
                for r in results.iter_mut() {
                    if r.is_ok() {
                        *r = Err(e.clone());
                    }
                }
            }
        }
        Ok(envelope::batch(&results))
    }

    pub(super) fn patch_profile(
        &mut self,
        vhost: &str,
        app: &str,
        profile: &str,
        body: &[u8],
    ) -> Result<super::Response, ApiError> {
        let (mut apps, i) = self.app_to_change(vhost, app)?;
        let patch: ProfilePatch = super::envelope::typed_body(body, "Invalid output profile")?;
        let target = apps[i]
            .output_profiles
            .output_profile
            .iter_mut()
            .find(|p| p.name == profile)
            .ok_or_else(|| Self::profile_not_found(vhost, app, profile))?;
        if patch.name.as_deref().is_some_and(|n| n != profile) {
            return Err(ApiError::bad_request("An output profile cannot be renamed"));
        }
        if let Some(o) = patch.output_stream_name {
            target.output_stream_name = o;
        }
        if let Some(e) = patch.encodes {
            target.encodes = e;
        }
        self.commit_profiles(vhost, app, apps, i)?;
        self.get_profile(vhost, app, profile)
    }

    pub(super) fn delete_profile(
        &mut self,
        vhost: &str,
        app: &str,
        profile: &str,
    ) -> Result<super::Response, ApiError> {
        let (mut apps, i) = self.app_to_change(vhost, app)?;
        let before = apps[i].output_profiles.output_profile.len();
        apps[i]
            .output_profiles
            .output_profile
            .retain(|p| p.name != profile);
        if apps[i].output_profiles.output_profile.len() == before {
            return Err(Self::profile_not_found(vhost, app, profile));
        }
        self.commit_profiles(vhost, app, apps, i)?;
        Ok(envelope::ok_empty())
    }
}
