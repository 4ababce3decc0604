//! Application and stream handlers (DECISIONS section 8). Changing or
//! deleting an application restarts it: the loop ends its sessions (an
//! [`Effect`](super::Effect)). Config-file hosts' applications are read-only.

use super::envelope::{self, ApiError};
use super::vhosts::raw_json;
use super::{Api, Effect};
use crate::clock;
use crate::info;
use crate::media::{MediaKind, Track};
use crate::state::app::{
    input_track_name, output_tracks, AppSpec, OutputProfiles, Providers, Publishers,
};
use crate::state::store::Change;
use crate::state::streams::LiveStream;
use crate::state::{Origin, Vhost};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

/// An application as `GET .../apps/{app}` shows it.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AppView<'a> {
    name: &'a str,
    dynamic: bool,
    #[serde(rename = "type")]
    app_type: &'a str,
    output_profiles: &'a OutputProfiles,
    providers: &'a Providers,
    publishers: &'a Publishers,
}

impl<'a> AppView<'a> {
    fn of(app: &'a AppSpec, origin: Origin) -> Self {
        AppView {
            name: &app.name,
            dynamic: origin == Origin::Api,
            app_type: &app.app_type,
            output_profiles: &app.output_profiles,
            providers: &app.providers,
            publishers: &app.publishers,
        }
    }
}

/// `PATCH .../apps/{app}`: the fields that may change.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct AppPatch {
    name: Option<String>,
    #[serde(rename = "type")]
    app_type: Option<String>,
    output_profiles: Option<OutputProfiles>,
    providers: Option<Providers>,
    publishers: Option<Publishers>,
}

impl Api {
    pub(super) fn vhost_or_404(&self, vhost: &str) -> Result<&Vhost, ApiError> {
        self.registry
            .vhost(vhost)
            .ok_or_else(|| ApiError::vhost_not_found(vhost))
    }

    pub(super) fn app_or_404(
        &self,
        vhost: &str,
        app: &str,
    ) -> Result<(&Vhost, &AppSpec), ApiError> {
        let v = self.vhost_or_404(vhost)?;
        let a = v
            .app(app)
            .ok_or_else(|| ApiError::app_not_found(vhost, app))?;
        Ok((v, a))
    }

    /// The host, for a change to it or its applications (403 for a
    /// config-file host).
    pub(super) fn writable_vhost(&self, vhost: &str) -> Result<&Vhost, ApiError> {
        let v = self.vhost_or_404(vhost)?;
        if v.origin == Origin::ConfigFile {
            return Err(ApiError::read_only(vhost));
        }
        Ok(v)
    }

    /// Writes the state with `vhost`'s applications replaced by `apps`,
    /// then applies it. Nothing changes if the write fails.
    /// `removed`: an application being deleted, whose push tasks go too.
    pub(super) fn commit_apps(
        &mut self,
        vhost: &str,
        apps: Vec<AppSpec>,
        removed: Option<&str>,
    ) -> Result<(), ApiError> {
        let change = Change::SetApps {
            vhost: vhost.to_string(),
            applications: (!apps.is_empty()).then(|| apps.clone()),
            removed_app: removed.map(str::to_string),
        };
        self.record(change, &format!("applications of [{vhost}] not changed"))?;
        if let Some(v) = self.registry.vhost_mut(vhost) {
            v.apps = apps;
        }
        if let Some(app) = removed {
            self.drop_pushes_of(vhost, Some(app));
            self.drop_pulls_of(vhost, Some(app));
            self.drop_channels_of(vhost, Some(app));
            self.stop_records_of(vhost, Some(app));
        }
        Ok(())
    }

    pub(super) fn list_apps(&self, vhost: &str) -> Result<super::Response, ApiError> {
        let v = self.vhost_or_404(vhost)?;
        let names: Vec<&str> = v.apps.iter().map(|a| a.name.as_str()).collect();
        Ok(envelope::ok(names))
    }

    pub(super) fn get_app(&self, vhost: &str, app: &str) -> Result<super::Response, ApiError> {
        let (v, a) = self.app_or_404(vhost, app)?;
        Ok(envelope::ok(AppView::of(a, v.origin)))
    }

    /// The folders an application made through the API reads channel
    /// files from (`providers.schedule.mediaRootDir` and
    /// `scheduleFilesDir`, `providers.multiplex.muxFilesDir`) must lie
    /// under one the config file names for one of its own applications:
    /// an API caller must not make kiln play `/etc` to anonymous viewers.
    fn check_channel_folders(&self, spec: &AppSpec) -> Result<(), ApiError> {
        let p = &spec.providers;
        let asked = [
            (
                "providers.schedule.mediaRootDir",
                p.schedule.as_ref().map(|s| &s.media_root_dir),
            ),
            (
                "providers.schedule.scheduleFilesDir",
                p.schedule.as_ref().map(|s| &s.schedule_files_dir),
            ),
            (
                "providers.multiplex.muxFilesDir",
                p.multiplex.as_ref().map(|m| &m.mux_files_dir),
            ),
        ];
        let asked: Vec<(&str, &String)> = asked
            .into_iter()
            .filter_map(|(f, d)| d.filter(|d| !d.is_empty()).map(|d| (f, d)))
            .collect();
        if asked.is_empty() {
            return Ok(());
        }
        let roots: Vec<std::path::PathBuf> = self
            .registry
            .vhosts()
            .iter()
            .filter(|v| v.origin == crate::state::Origin::ConfigFile)
            .flat_map(|v| v.apps.iter())
            .flat_map(|a| {
                let s = a.providers.schedule.as_ref();
                let m = a.providers.multiplex.as_ref();
                [
                    s.map(|s| s.media_root_dir.clone()),
                    s.map(|s| s.schedule_files_dir.clone()),
                    m.map(|m| m.mux_files_dir.clone()),
                ]
            })
            .flatten()
            .filter(|d: &String| !d.is_empty())
            .filter_map(|d| crate::files::resolve(None, &d).ok())
            .collect();
        for (field, dir) in asked {
            let inside = crate::files::resolve(None, dir)
                .is_ok_and(|d| roots.iter().any(|r| d.starts_with(r)));
            if !inside {
                return Err(ApiError::bad_request(format_args!(
                    "{field} [{}] must be an absolute folder under one the config file names for its applications' <Schedule> or <Multiplex> (MediaRootDir, ScheduleFilesDir, MuxFilesDir)",
                    dir.escape_debug()
                )));
            }
        }
        Ok(())
    }

    pub(super) fn create_apps(
        &mut self,
        vhost: &str,
        body: &[u8],
    ) -> Result<super::Response, ApiError> {
        let current = self.writable_vhost(vhost)?.apps.clone();
        let value: Value = serde_json::from_slice(body).map_err(|e| ApiError::invalid_json(&e))?;
        let Value::Array(items) = value else {
            return Err(ApiError::bad_request("Request body must be an array"));
        };
        let mut apps = current;
        let mut results: Vec<Result<String, ApiError>> = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let checked = super::envelope::typed::<AppSpec>(item)
                .map_err(|e| {
                    ApiError::bad_request(format_args!("Invalid application (item {i}): {e}"))
                })
                .and_then(|spec| {
                    spec.validate()
                        .map_err(|e| ApiError::invalid_spec("application", Some(i), e))?;
                    self.check_channel_folders(&spec)?;
                    if apps.iter().any(|a| a.name == spec.name) {
                        return Err(ApiError::app_exists(vhost, &spec.name));
                    }
                    Ok(spec)
                });
            results.push(checked.map(|spec| {
                let name = spec.name.clone();
                apps.push(spec);
                name
            }));
        }
        if results.iter().any(|r| r.is_ok()) {
            if let Err(e) = self.commit_apps(vhost, apps, None) {
                for r in results.iter_mut() {
                    if r.is_ok() {
                        *r = Err(e.clone());
                    }
                }
            }
        }
        let views: Vec<Result<Box<RawValue>, ApiError>> = results
            .into_iter()
            .map(|r| {
                r.and_then(|name| {
                    info!("application [{vhost}/{name}] created");
                    let (v, a) = self.app_or_404(vhost, &name)?;
                    Ok(raw_json(&AppView::of(a, v.origin)))
                })
            })
            .collect();
        Ok(envelope::batch(&views))
    }

    pub(super) fn patch_app(
        &mut self,
        vhost: &str,
        app: &str,
        body: &[u8],
    ) -> Result<super::Response, ApiError> {
        self.app_or_404(vhost, app)?;
        let v = self.writable_vhost(vhost)?;
        let patch: AppPatch = super::envelope::typed_body(body, "Invalid application")?;
        let mut apps = v.apps.clone();
        let Some(target) = apps.iter_mut().find(|a| a.name == app) else {
            return Err(ApiError::app_not_found(vhost, app));
        };
        if let Some(name) = patch.name {
            if name != app {
                return Err(ApiError::bad_request("An application cannot be renamed"));
            }
        }
        if let Some(t) = patch.app_type {
            target.app_type = t;
        }
        if let Some(p) = patch.output_profiles {
            target.output_profiles = p;
        }
        if let Some(p) = patch.providers {
            target.providers = p;
        }
        if let Some(p) = patch.publishers {
            target.publishers = p;
        }
        target
            .validate()
            .map_err(|e| ApiError::invalid_spec("application", None, e))?;
        let target = target.clone();
        self.check_channel_folders(&target)?;
        self.commit_apps(vhost, apps, None)?;
        info!("application [{vhost}/{app}] changed; restarting it");
        self.effects.push(Effect::RestartApp {
            vhost: vhost.to_string(),
            app: Some(app.to_string()),
        });
        self.get_app(vhost, app)
    }

    pub(super) fn delete_app(
        &mut self,
        vhost: &str,
        app: &str,
    ) -> Result<super::Response, ApiError> {
        self.app_or_404(vhost, app)?;
        let v = self.writable_vhost(vhost)?;
        let apps: Vec<AppSpec> = v.apps.iter().filter(|a| a.name != app).cloned().collect();
        self.commit_apps(vhost, apps, Some(app))?;
        info!("application [{vhost}/{app}] deleted");
        self.effects.push(Effect::RestartApp {
            vhost: vhost.to_string(),
            app: Some(app.to_string()),
        });
        Ok(envelope::ok_empty())
    }

    pub(super) fn list_streams(&self, vhost: &str, app: &str) -> Result<super::Response, ApiError> {
        self.app_or_404(vhost, app)?;
        let names: Vec<&str> = self
            .registry
            .streams
            .shown_of_app(vhost, app)
            .into_iter()
            .map(|s| s.name.as_str())
            .collect();
        Ok(envelope::ok(names))
    }

    /// A live stream of an application, by input name, else by one of its
    /// output names (404 for either missing).
    pub(super) fn live_stream(
        &self,
        vhost: &str,
        app: &str,
        stream: &str,
    ) -> Result<(&AppSpec, &crate::state::streams::LiveStream), ApiError> {
        let (_, spec) = self.app_or_404(vhost, app)?;
        let streams = self.registry.streams.shown_of_app(vhost, app);
        let live = streams
            .iter()
            .find(|s| s.name == stream)
            .or_else(|| {
                streams
                    .iter()
                    .find(|s| spec.output_named(&s.name, stream).is_some())
            })
            .copied()
            .ok_or_else(|| ApiError::stream_not_found(vhost, app, stream))?;
        Ok((spec, live))
    }

    pub(super) fn get_stream(
        &self,
        vhost: &str,
        app: &str,
        stream: &str,
    ) -> Result<super::Response, ApiError> {
        let (spec, live) = self.live_stream(vhost, app, stream)?;
        Ok(envelope::ok(StreamView::of(
            live,
            spec,
            self.utc_offset,
            self.now.unix_ms,
        )))
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StreamView<'a> {
    name: &'a str,
    input: InputView<'a>,
    outputs: Vec<OutputView>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InputView<'a> {
    source_type: &'static str,
    created_time: String,
    tracks: Vec<TrackView<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutputView {
    name: String,
    tracks: Vec<TrackView<'static>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TrackView<'a> {
    id: u32,
    name: std::borrow::Cow<'a, str>,
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    video: Option<VideoView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audio: Option<AudioView>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct VideoView {
    bypass: bool,
    codec: &'static str,
    width: u32,
    height: u32,
    framerate: f64,
    bitrate: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AudioView {
    bypass: bool,
    codec: &'static str,
    samplerate: u32,
    channel: u8,
    bitrate: String,
}

fn kind_name(kind: MediaKind) -> &'static str {
    match kind {
        MediaKind::Video => "Video",
        MediaKind::Audio => "Audio",
        MediaKind::Data => "Data",
    }
}

fn track_view(t: &Track, name: String, bypass: bool, measured: u64) -> TrackView<'static> {
    let bitrate = if t.bitrate > 0 {
        t.bitrate as u64
    } else {
        measured
    };
    TrackView {
        id: t.id,
        name: name.into(),
        kind: kind_name(t.kind()),
        video: t.video.map(|v| VideoView {
            bypass,
            codec: t.codec.api_name(),
            width: v.width,
            height: v.height,
            framerate: (v.framerate * 1000.0).round() / 1000.0,
            bitrate: bitrate.to_string(),
        }),
        audio: t.audio.map(|a| AudioView {
            bypass,
            codec: t.codec.api_name(),
            samplerate: a.sample_rate,
            channel: a.channels,
            bitrate: bitrate.to_string(),
        }),
    }
}

impl<'a> StreamView<'a> {
    fn of(s: &'a LiveStream, spec: &AppSpec, utc_offset: i32, now_ms: i64) -> Self {
        let tracks = s.tracks();
        let measured = |t: &Track| s.measured_bitrate(t.id, now_ms);
        StreamView {
            name: &s.name,
            input: InputView {
                source_type: s.source.api_name(),
                created_time: clock::format_iso8601(s.created_ms, utc_offset),
                tracks: tracks
                    .iter()
                    .map(|t| track_view(t, input_track_name(tracks, t), false, measured(t)))
                    .collect(),
            },
            outputs: spec
                .output_names(&s.name)
                .into_iter()
                .map(|(name, profile)| OutputView {
                    name,
                    tracks: output_tracks(tracks, profile)
                        .iter()
                        .map(|(t, n)| track_view(t, n.clone(), true, measured(t)))
                        .collect(),
                })
                .collect(),
        }
    }
}
