//! Application and stream handlers (DECISIONS section 8). Changing or
//! deleting an application restarts it: the loop ends its sessions (an
//! [`Effect`](super::Effect)). Config-file hosts' applications are read-only.

use super::envelope::{self, ApiError};
use super::ome_shape;
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
use crate::state::track_stats::TrackStats;
use crate::state::{Origin, Vhost};
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::Value;

/// An application as `GET .../apps/{app}` shows it (settings in OME's
/// string form: [`AppView::json`]).
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
    /// kiln's `<DiskBudget>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    disk_budget: Option<&'a crate::state::app::DiskBudget>,
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
            disk_budget: app.disk_budget.as_ref(),
        }
    }

    /// As OME's GET writes it: an application made through the API
    /// echoes what its caller gave, section by section; a config-file
    /// one shows its settings under `outputProfiles`, `providers` and
    /// `publishers` as strings, `crossDomains` as `{"urls": [...]}`.
    fn json(app: &'a AppSpec, origin: Origin) -> Value {
        let mut v = serde_json::to_value(AppView::of(app, origin)).unwrap_or_default();
        for key in ["outputProfiles", "providers", "publishers"] {
            let given = app.given.as_ref().and_then(|g| g.get(key)).cloned();
            if let Some(part) = v.get_mut(key) {
                match given {
                    Some(g) => *part = g,
                    None => ome_shape::present(part),
                }
            }
        }
        name_encodes(&mut v, app);
        v
    }
}

/// Encodes given without a name show the name kiln gave them (`video_0`,
/// as the config file names them: what a push's `variantNames` use).
fn name_encodes(v: &mut Value, app: &AppSpec) {
    let Some(Value::Array(profiles)) = v.pointer_mut("/outputProfiles/outputProfile") else {
        return;
    };
    for (p, spec) in profiles.iter_mut().zip(&app.output_profiles.output_profile) {
        let e = &spec.encodes;
        for (kind, named) in [
            ("videos", &e.videos),
            ("audios", &e.audios),
            ("datas", &e.datas),
        ] {
            let Some(Value::Array(list)) = p.pointer_mut(&format!("/encodes/{kind}")) else {
                continue;
            };
            for (enc, n) in list.iter_mut().zip(named) {
                if let Some(o) = enc.as_object_mut() {
                    o.entry("name").or_insert_with(|| n.name.clone().into());
                }
            }
        }
    }
}

/// An application body read as kiln's [`AppSpec`] (OME's shape
/// accepted: see [`ome_shape`]; the OME elements kiln does not use are
/// dropped with one WARN each), remembering the body as given.
pub(super) fn app_from_body(item: Value, vhost: &str) -> Result<AppSpec, String> {
    let mut normal = item.clone();
    let dropped = ome_shape::normalize_app(&mut normal);
    warn_dropped(&dropped, vhost, item.get("name").and_then(Value::as_str));
    let mut spec = super::envelope::typed::<AppSpec>(normal)?;
    spec.given = Some(item);
    Ok(spec)
}

pub(super) fn warn_dropped(dropped: &[String], vhost: &str, app: Option<&str>) {
    for path in dropped {
        crate::warn!(
            "application [{vhost}/{}]: {path} is OME's and not supported by kiln; ignored",
            app.unwrap_or("?").escape_debug()
        );
    }
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
        Ok(envelope::ok(AppView::json(a, v.origin)))
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
            .config_file_apps()
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

    /// The applications the config file declares (whose folders bound
    /// those the API may name).
    fn config_file_apps(&self) -> impl Iterator<Item = &AppSpec> {
        self.registry
            .vhosts()
            .iter()
            .filter(|v| v.origin == crate::state::Origin::ConfigFile)
            .flat_map(|v| v.apps.iter())
    }

    /// A DVR folder set through the API (`publishers.llhls.dVR` or
    /// `hls.dVR`, its
    /// `tempStoragePath` or OME's default) must be one the config file
    /// names for a DVR of its own, or lie under it: kiln writes and
    /// deletes there.
    fn check_dvr_folder(&self, spec: &AppSpec) -> Result<(), ApiError> {
        let roots: Vec<std::path::PathBuf> = self
            .config_file_apps()
            .flat_map(|a| a.publishers.dvrs())
            .filter(|d| d.enable)
            .filter_map(|d| crate::files::resolve(None, d.path()).ok())
            .collect();
        for (publisher, dvr) in spec.publishers.named_dvrs() {
            let Some(dvr) = dvr.filter(|d| d.enable) else {
                continue;
            };
            let inside = crate::files::resolve(None, dvr.path())
                .is_ok_and(|d| roots.iter().any(|r| d.starts_with(r)));
            if !inside {
                return Err(ApiError::bad_request(format_args!(
                    "publishers.{publisher}.dVR.tempStoragePath [{}] must be a folder the config file names for a DVR (<LLHLS> or <HLS> <DVR><TempStoragePath>), or under one",
                    dvr.path().escape_debug()
                )));
            }
        }
        Ok(())
    }

    /// The folders an application made through the API writes records
    /// and dumps under (`publishers.file.rootPath`,
    /// `publishers.llhls.dumps.rootPath`) must be given, and lie under one
    /// the config file names for its own applications' recordings or
    /// dumps (`<FILE><RootPath>`, `<LLHLS><Dumps><RootPath>`): a token
    /// holder must not make kiln (often root) write into any folder.
    fn check_write_roots(&self, spec: &AppSpec) -> Result<(), ApiError> {
        let asked = [
            (
                "publishers.file.rootPath",
                spec.publishers
                    .file
                    .as_ref()
                    .map(|f| f.root_path.as_deref()),
            ),
            (
                "publishers.llhls.dumps.rootPath",
                spec.publishers
                    .llhls
                    .as_ref()
                    .and_then(|l| l.dumps.as_ref())
                    .map(|d| d.root_path.as_deref()),
            ),
        ];
        if asked.iter().all(|(_, r)| r.is_none()) {
            return Ok(());
        }
        let roots: Vec<std::path::PathBuf> = self
            .config_file_apps()
            .flat_map(|a| {
                [
                    a.publishers.file.as_ref().and_then(|f| f.root_path.clone()),
                    a.publishers
                        .llhls
                        .as_ref()
                        .and_then(|l| l.dumps.as_ref())
                        .and_then(|d| d.root_path.clone()),
                ]
            })
            .flatten()
            .filter_map(|d| crate::files::resolve(None, &d).ok())
            .collect();
        for (field, root) in asked {
            let Some(root) = root else {
                continue;
            };
            let inside = root.is_some_and(|r| {
                crate::files::resolve(None, r).is_ok_and(|d| roots.iter().any(|c| d.starts_with(c)))
            });
            if !inside {
                return Err(ApiError::bad_request(format_args!(
                    "{field} [{}] must be a folder the config file names for recordings or dumps (<FILE><RootPath>, <LLHLS><Dumps><RootPath>), or under one",
                    root.unwrap_or("").escape_debug()
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
        // An item without a name fails the whole request, as OME's config
        // layer does.
        if items
            .iter()
            .any(|i| i.is_object() && !i["name"].is_string())
        {
            return Err(ApiError::Config("application.name is not optional".into()));
        }
        let mut apps = current;
        let mut results: Vec<Result<String, ApiError>> = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let checked = app_from_body(item, vhost)
                .map_err(|e| {
                    ApiError::bad_request(format_args!("Invalid application (item {i}): {e}"))
                })
                .and_then(|spec| {
                    spec.validate()
                        .map_err(|e| ApiError::invalid_spec("application", Some(i), e))?;
                    self.check_channel_folders(&spec)?;
                    self.check_dvr_folder(&spec)?;
                    self.check_write_roots(&spec)?;
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
                    Ok(raw_json(&AppView::json(a, v.origin)))
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
        let mut patch = envelope::object_body(body, false)?;
        // OME's refusals, in its words (a PATCH that names the app at all).
        for key in ["name", "dynamic"] {
            if patch.get(key).is_some() {
                return Err(ApiError::bad_request(format_args!(
                    "Cannot change [{key}] using this API"
                )));
            }
        }
        let mut apps = v.apps.clone();
        let Some(target) = apps.iter_mut().find(|a| a.name == app) else {
            return Err(ApiError::app_not_found(vhost, app));
        };
        // Merged into the application as OME merges it: a PATCH of
        // `providers.rtmp` leaves SRT on (`null` removes an element); the
        // body as given is merged the same way, for GET to echo.
        let mut given = match target.given.take() {
            Some(g) => g,
            None => AppView::json(target, Origin::Api),
        };
        ome_shape::merge(&mut given, patch.clone());
        let dropped = ome_shape::normalize_app(&mut patch);
        warn_dropped(&dropped, vhost, Some(app));
        let mut merged = serde_json::to_value(&*target).map_err(|_| ApiError::internal())?;
        ome_shape::merge(&mut merged, patch);
        *target = super::envelope::typed::<AppSpec>(merged)
            .map_err(|e| ApiError::bad_request(format_args!("Invalid application: {e}")))?;
        target.given = Some(given);
        target
            .validate()
            .map_err(|e| ApiError::invalid_spec("application", None, e))?;
        let target = target.clone();
        self.check_channel_folders(&target)?;
        self.check_dvr_folder(&target)?;
        self.check_write_roots(&target)?;
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
        Ok(envelope::ok(StreamView::of(live, spec, self.utc_offset)))
    }
}

/// A live stream as `GET .../streams/{stream}` shows it: OME's shape. Track
/// ids are positions in the stream's list, from 0 (as OME numbers them;
/// the `trackIds` of pushes and records are read the same way), with
/// OME's Data track (timed metadata) last.
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
    #[serde(skip_serializing_if = "Option::is_none")]
    source_url: Option<&'a str>,
    created_time: String,
    tracks: Vec<TrackView>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OutputView {
    name: String,
    playlists: Vec<PlaylistView>,
    tracks: Vec<TrackView>,
}

/// A playlist of an output stream (OME's `playlists`): `llhls.m3u8` and
/// the WebRTC default, and a multiplex channel's own.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlaylistView {
    name: String,
    file_name: String,
    options: PlaylistOptions,
    renditions: Vec<RenditionView>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlaylistOptions {
    enable_ts_packaging: bool,
    hls_chunklist_path_depth: i32,
    webrtc_auto_abr: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RenditionView {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    video_variant_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    audio_variant_name: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TrackView {
    id: usize,
    name: String,
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
    max_width: u32,
    max_height: u32,
    framerate: f64,
    framerate_avg: f64,
    framerate_conf: f64,
    framerate_latest: f64,
    bitrate: u64,
    bitrate_avg: u64,
    bitrate_conf: u64,
    bitrate_latest: u64,
    key_frame_interval: f64,
    key_frame_interval_avg: f64,
    key_frame_interval_conf: f64,
    key_frame_interval_latest: f64,
    delta_frames_since_last_key_frame: u64,
    /// B-frames seen (frames presented before one decoded earlier):
    /// WebRTC viewers get fewer frames (issue 41).
    has_bframes: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AudioView {
    bypass: bool,
    codec: &'static str,
    samplerate: u32,
    channel: u8,
    bitrate: u64,
    bitrate_avg: u64,
    bitrate_conf: u64,
    bitrate_latest: u64,
    /// kiln's: the track's label (an `AudioMap`'s, a source's language),
    /// what players' audio menus show.
    #[serde(skip_serializing_if = "Option::is_none")]
    label: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    language: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    characteristics: Option<String>,
}

fn kind_name(kind: MediaKind) -> &'static str {
    match kind {
        MediaKind::Video => "Video",
        MediaKind::Audio => "Audio",
        MediaKind::Data => "Data",
    }
}

/// Rounded to three decimals (frame rates and intervals).
fn milli(v: f64) -> f64 {
    if v.is_finite() {
        (v * 1000.0).round() / 1000.0
    } else {
        0.0
    }
}

fn track_view(
    id: usize,
    t: &Track,
    name: String,
    bypass: bool,
    stats: Option<&TrackStats>,
) -> TrackView {
    let idle = TrackStats::default();
    let st = stats.unwrap_or(&idle);
    let conf = t.bitrate as u64;
    let avg = st.average_bitrate();
    let bitrate = if conf > 0 { conf } else { avg };
    TrackView {
        id,
        name,
        kind: kind_name(t.kind()),
        video: t.video.map(|v| {
            let conf_fps = milli(v.framerate);
            let avg_fps = milli(st.average_framerate());
            VideoView {
                bypass,
                codec: t.codec.api_name(),
                width: v.width,
                height: v.height,
                max_width: v.width,
                max_height: v.height,
                framerate: if conf_fps > 0.0 { conf_fps } else { avg_fps },
                framerate_avg: avg_fps,
                framerate_conf: conf_fps,
                framerate_latest: milli(st.latest_framerate),
                bitrate,
                bitrate_avg: avg,
                bitrate_conf: conf,
                bitrate_latest: st.latest_bitrate,
                key_frame_interval: milli(st.average_gop_frames()),
                key_frame_interval_avg: milli(st.average_gop_frames()),
                key_frame_interval_conf: 0.0,
                key_frame_interval_latest: st.last_gop_frames as f64,
                delta_frames_since_last_key_frame: st.since_keyframe,
                has_bframes: st.has_bframes,
            }
        }),
        audio: t.audio.map(|a| AudioView {
            bypass,
            codec: t.codec.api_name(),
            samplerate: a.sample_rate,
            channel: a.channels,
            bitrate,
            bitrate_avg: avg,
            bitrate_conf: conf,
            bitrate_latest: st.latest_bitrate,
            label: t.label.name.clone(),
            language: t.label.language.map(|l| l.as_str().to_string()),
            characteristics: t.label.characteristics.clone(),
        }),
    }
}

/// OME's Data track: timed metadata (`:sendEvent`), last in the list.
fn data_track(id: usize) -> TrackView {
    TrackView {
        id,
        name: "Data".into(),
        kind: "Data",
        video: None,
        audio: None,
    }
}

/// "video" → "Video", "audio_2" → "Audio_2" (OME's input track names).
fn capitalised(name: String) -> String {
    let mut c = name.chars();
    match c.next() {
        Some(first) => first.to_ascii_uppercase().to_string() + c.as_str(),
        None => name,
    }
}

fn playlists_of(s: &LiveStream, spec: &AppSpec, tracks: &[(Track, String)]) -> Vec<PlaylistView> {
    let options = |ts| PlaylistOptions {
        enable_ts_packaging: ts,
        hls_chunklist_path_depth: -1,
        webrtc_auto_abr: false,
    };
    let first = |kind: MediaKind| {
        tracks
            .iter()
            .find(|(t, _)| t.kind() == kind)
            .map(|(_, n)| n.clone())
    };
    let default = || RenditionView {
        name: "default".into(),
        video_variant_name: first(MediaKind::Video),
        audio_variant_name: first(MediaKind::Audio),
    };
    let mut out = Vec::new();
    if spec.publishers.llhls.is_some() {
        out.push(PlaylistView {
            name: "llhls_default".into(),
            file_name: "llhls".into(),
            options: options(false),
            renditions: vec![default()],
        });
    }
    if spec.publishers.webrtc.is_some() {
        out.push(PlaylistView {
            name: "webrtc_default".into(),
            file_name: "webrtc_default".into(),
            options: options(false),
            renditions: vec![default()],
        });
    }
    let name_of = |id: Option<u32>| {
        id.and_then(|id| tracks.iter().find(|(t, _)| t.id == id))
            .map(|(_, n)| n.clone())
    };
    for p in &s.playlists {
        out.push(PlaylistView {
            name: p.name.clone(),
            file_name: p.file_name.clone(),
            options: options(false),
            renditions: p
                .renditions
                .iter()
                .map(|r| RenditionView {
                    name: r.name.clone(),
                    video_variant_name: name_of(r.video),
                    audio_variant_name: name_of(r.audio),
                })
                .collect(),
        });
    }
    out
}

impl<'a> StreamView<'a> {
    fn of(s: &'a LiveStream, spec: &AppSpec, utc_offset: i32) -> Self {
        let tracks = s.tracks();
        let position = |t: &Track| tracks.iter().position(|x| x.id == t.id).unwrap_or(0);
        let mut input: Vec<TrackView> = tracks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let name = capitalised(input_track_name(tracks, t));
                track_view(i, t, name, false, s.track_stats(t.id))
            })
            .collect();
        input.push(data_track(tracks.len()));
        StreamView {
            name: &s.name,
            input: InputView {
                source_type: s.source.api_name(),
                source_url: s.source_url.as_deref(),
                created_time: clock::format_iso8601(s.created_ms, utc_offset),
                tracks: input,
            },
            outputs: spec
                .output_names(&s.name)
                .into_iter()
                .map(|(name, profile)| {
                    let out = output_tracks(tracks, profile);
                    let mut views: Vec<TrackView> = out
                        .iter()
                        .map(|(t, n)| {
                            track_view(position(t), t, n.clone(), true, s.track_stats(t.id))
                        })
                        .collect();
                    views.push(data_track(tracks.len()));
                    OutputView {
                        name,
                        playlists: playlists_of(s, spec, &out),
                        tracks: views,
                    }
                })
                .collect(),
        }
    }
}
