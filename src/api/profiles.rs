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
    output_stream_name: Option<String>,
    encodes: Option<Encodes>,
}

/// OME's checks of an output profile to create: `name`,
/// `outputStreamName` and `encodes` present, with at least one video or
/// audio encode.
fn required_parts(item: &Value) -> Result<(), ApiError> {
    let bad = |why: &str| {
        Err(ApiError::bad_request(format_args!(
            "Invalid request body: {why}"
        )))
    };
    let (Some(name), Some(osn), Some(encodes)) = (
        item.get("name"),
        item.get("outputStreamName"),
        item.get("encodes"),
    ) else {
        return bad("\"name\", \"outputStreamName\", \"encodes\" are required");
    };
    if !name.is_string() || !osn.is_string() || !encodes.is_object() {
        return bad("\"name\" must be a string and \"encodes\" must be an object");
    }
    let count = |k: &str| encodes.get(k).and_then(Value::as_array).map_or(0, Vec::len);
    for k in ["videos", "audios"] {
        if encodes.get(k).is_some_and(|v| !v.is_array()) {
            return bad(&format!("\"encodes.{k}\" must be an array"));
        }
    }
    if encodes.get("videos").is_none() && encodes.get("audios").is_none() {
        return bad("\"encodes\" must have at least one item (videos array or audios array)");
    }
    if count("videos") + count("audios") == 0 {
        return bad("\"encodes\" must have at least one item (videos array or audios array) and each item must have at least one item");
    }
    Ok(())
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
        // An application made through the API echoes the profile as its
        // caller gave it (as OME's GET does); otherwise OME's form of a
        // config file's: settings as strings.
        if let Some(given) = given_profile(a.given.as_ref(), profile) {
            return Ok(envelope::ok(given.clone()));
        }
        let mut v = serde_json::to_value(p).map_err(|_| ApiError::internal())?;
        if let Some(encodes) = v.get_mut("encodes") {
            super::ome_shape::present(encodes);
        }
        Ok(envelope::ok(v))
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
        mut apps: Vec<AppSpec>,
        i: usize,
    ) -> Result<(), ApiError> {
        apps[i]
            .validate()
            .map_err(|e| ApiError::invalid_spec("output profile", None, e))?;
        // GET shows the profiles as they are now, each in its caller's
        // types where the caller gave it (kept in step by create and
        // PATCH), else in OME's form.
        let app_now = &apps[i];
        let now: Vec<Value> = app_now
            .output_profiles
            .output_profile
            .iter()
            .map(|p| {
                given_profile(app_now.given.as_ref(), &p.name)
                    .cloned()
                    .unwrap_or_else(|| {
                        let mut v = serde_json::to_value(p).unwrap_or_default();
                        super::ome_shape::present(&mut v);
                        v
                    })
            })
            .collect();
        if let Some(list) = apps[i]
            .given
            .as_mut()
            .and_then(|g| g.pointer_mut("/outputProfiles/outputProfile"))
        {
            *list = Value::Array(now);
        }
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
        // OME's checks of the whole request, with its words.
        for item in &items {
            required_parts(item)?;
        }
        let mut results: Vec<Result<OutputProfile, ApiError>> = Vec::with_capacity(items.len());
        for (n, mut item) in items.into_iter().enumerate() {
            let raw = item.clone();
            let dropped = super::ome_shape::normalize_profile(&mut item);
            super::apps::warn_dropped(&dropped, vhost, Some(app));
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
                if let Some(Value::Array(list)) = apps[i]
                    .given
                    .as_mut()
                    .and_then(|g| g.pointer_mut("/outputProfiles/outputProfile"))
                {
                    list.push(raw);
                }
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
        let mut value = envelope::object_body(body, false)?;
        if let Some(key) = value
            .as_object()
            .and_then(|o| o.keys().find(|k| k.eq_ignore_ascii_case("name")))
        {
            return Err(ApiError::bad_request(format_args!(
                "The {key} entry cannot be specified in the modification"
            )));
        }
        let raw = value.clone();
        let dropped = super::ome_shape::normalize_profile(&mut value);
        super::apps::warn_dropped(&dropped, vhost, Some(app));
        let patch: ProfilePatch = envelope::from_object(value)?;
        // What GET echoes changes as the profile does, in the caller's types.
        if let Some(given) = given_profile_mut(apps[i].given.as_mut(), profile) {
            super::ome_shape::merge(given, raw);
        }
        let target = apps[i]
            .output_profiles
            .output_profile
            .iter_mut()
            .find(|p| p.name == profile)
            .ok_or_else(|| Self::profile_not_found(vhost, app, profile))?;
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

/// The profile `name` of an application's body as its caller gave it.
fn given_profile<'a>(given: Option<&'a Value>, name: &str) -> Option<&'a Value> {
    given?
        .pointer("/outputProfiles/outputProfile")?
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)
}

fn given_profile_mut<'a>(given: Option<&'a mut Value>, name: &str) -> Option<&'a mut Value> {
    given?
        .pointer_mut("/outputProfiles/outputProfile")?
        .as_array_mut()?
        .iter_mut()
        .find(|p| p["name"] == name)
}
