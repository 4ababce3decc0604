//! `:startRecord`, `:stopRecord` and `:records` (OME's recording API;
//! DECISIONS section 10). The handlers change the record table and persist
//! it; the loop starts and stops the recordings (effects).

use super::envelope::{self, ApiError};
use super::{Api, Effect};
use crate::clock;
use crate::info;
use crate::push::task::TaskKey;
use crate::record::request::{self, StartRecordRequest};
use crate::record::task::RecordTask;
use crate::state::store::Change;
use serde::{Deserialize, Serialize};

/// A record as the API shows it (OME's fields, then kiln's `lastError`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RecordView<'a> {
    state: &'static str,
    id: &'a str,
    vhost: &'a str,
    app: &'a str,
    stream: StreamView<'a>,
    /// Paths as OME shows them: under the application's root, written
    /// from it (`/default/app/x.ts` for `<RootPath>/default/app/x.ts`).
    file_path: &'a str,
    info_path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_file_path: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_info_path: Option<&'a str>,
    /// OME's flag for records made by `<FILE><StreamMap>`: kiln's records
    /// all come from the API.
    is_config: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    interval: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    schedule: Option<&'a str>,
    segmentation_rule: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    metadata: Option<&'a str>,
    /// A time-lapse (kiln extension): one keyframe per this many ms, and
    /// the film's frames per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    keyframes_every: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    time_lapse_fps: Option<u32>,
    /// kiln extension: the pre-roll asked for (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pre_roll: Option<u64>,
    sequence: u64,
    record_bytes: u64,
    record_time: u64,
    total_record_bytes: u64,
    total_record_time: u64,
    created_time: clock::IsoTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    start_time: Option<clock::IsoTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    finish_time: Option<clock::IsoTime>,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<&'a str>,
    /// When `lastError` happened (kiln extension).
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error_time: Option<clock::IsoTime>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StreamView<'a> {
    name: &'a str,
    track_ids: &'a [u32],
    variant_names: &'a [String],
}

/// `path` as the API shows it: from the root when it is under it.
fn under_root<'a>(root: Option<&str>, path: &'a str) -> &'a str {
    match root.map(|r| r.trim_end_matches('/')) {
        Some(r) if !r.is_empty() => match path.strip_prefix(r) {
            Some(rest) if rest.starts_with('/') => rest,
            _ => path,
        },
        _ => path,
    }
}

impl<'a> RecordView<'a> {
    pub(super) fn of(t: &'a RecordTask, offset: i32, root: Option<&str>) -> Self {
        let time = |ms: Option<i64>| ms.map(|ms| clock::IsoTime::new(ms, offset));
        let s = &t.spec;
        let shown = |p: &'a str| under_root(root, p);
        RecordView {
            state: t.state.name(),
            id: &s.id,
            vhost: &s.vhost,
            app: &s.app,
            stream: StreamView {
                name: &s.stream_name,
                track_ids: &s.track_ids,
                variant_names: &s.variant_names,
            },
            file_path: shown(&s.file_path),
            info_path: shown(&s.info_path),
            output_file_path: t.output_file_path.as_deref().map(shown),
            output_info_path: t.output_info_path.as_deref().map(shown),
            is_config: false,
            interval: s.interval_ms,
            schedule: s.schedule.as_deref(),
            segmentation_rule: s.segmentation_rule.name(),
            metadata: s.metadata.as_deref(),
            keyframes_every: s.time_lapse.map(|l| l.every_ms),
            time_lapse_fps: s.time_lapse.map(|l| l.fps),
            pre_roll: s.pre_roll,
            sequence: t.sequence,
            record_bytes: t.record_bytes,
            record_time: t.record_ms,
            total_record_bytes: t.ended_bytes + t.record_bytes,
            total_record_time: t.ended_ms + t.record_ms,
            created_time: clock::IsoTime::new(s.created_ms, offset),
            start_time: time(t.start_ms),
            finish_time: time(t.finish_ms),
            last_error: t.last_error.as_deref(),
            last_error_time: time(t.last_error_ms),
        }
    }
}

#[derive(Deserialize)]
struct IdBody {
    id: Option<String>,
}

/// The body as `T`; it must be a JSON object (OME's bodies are).
fn object<T: serde::de::DeserializeOwned>(
    body: &[u8],
    empty_is_object: bool,
) -> Result<T, ApiError> {
    envelope::from_object(envelope::object_body(body, empty_is_object)?)
}

impl Api {
    /// vhost (404), app (404, also when `<Publishers><FILE>` is not set).
    fn file_app(&self, vhost: &str, app: &str) -> Result<crate::state::app::FileSpec, ApiError> {
        let (_, a) = self.app_or_404(vhost, app)?;
        a.file().cloned().ok_or_else(|| {
            ApiError::http(
                404,
                format_args!("Recording is not enabled for the application: [{vhost}/{app}] (<Publishers><FILE>)"),
            )
        })
    }

    pub(super) fn start_record(
        &mut self,
        vhost: &str,
        app: &str,
        body: &[u8],
    ) -> Result<super::Response, ApiError> {
        let file = self.file_app(vhost, app)?;
        let req: StartRecordRequest = object(body, false)?;
        let spec = request::validate_start(req, vhost, app, &file, self.now.unix_ms)
            .map_err(ApiError::bad_request)?;
        let key = TaskKey {
            vhost: vhost.to_string(),
            app: app.to_string(),
            id: spec.id.clone(),
        };
        if self.records.tasks.get(&key).is_some() {
            return Err(ApiError::bad_request(format_args!(
                "Duplicate ID already exists [{}]",
                spec.id
            )));
        }
        if self.pushes.tasks.len() + self.records.tasks.len() >= self.limits.max_push_tasks {
            return Err(ApiError::bad_request(format_args!(
                "The limit of {} push and record tasks is reached (Managers/API/Limits/MaxPushTasks)",
                self.limits.max_push_tasks
            )));
        }
        self.record_added(&crate::record::request::KIND, &spec, "record not started")?;
        info!(
            "record [{key}] created: stream [{}] to {}",
            spec.stream_name, spec.file_path
        );
        let live = self
            .registry
            .output_stream(&key.vhost, &key.app, &spec.stream_name)
            .and_then(|(id, _)| self.registry.streams.get(id))
            .is_some_and(|s| !s.tracks().is_empty());
        self.records.tasks.insert(RecordTask::new(spec));
        self.effects.push(Effect::RecordAdded(key.clone()));
        if live {
            // Named now, as OME names it in this answer; the loop opens
            // that file right after.
            self.records.promise_first_file(&key, self.now.unix_ms);
        }
        let task = self
            .records
            .tasks
            .get(&key)
            .ok_or_else(ApiError::internal)?;
        let mut view = RecordView::of(task, self.utc_offset, file.root_path.as_deref());
        // The loop starts a record of a live stream right after this answer
        // (as a push's session): say the state it is in by then.
        if live && view.state == "ready" {
            view.state = "recording";
        }
        // One object, as OME ≥ 0.15.3 answers (an array was its old bug).
        Ok(envelope::ok(view))
    }

    pub(super) fn stop_record(
        &mut self,
        vhost: &str,
        app: &str,
        body: &[u8],
    ) -> Result<super::Response, ApiError> {
        let file = self.file_app(vhost, app)?;
        let req: IdBody = object(body, false)?;
        let Some(id) = req.id.filter(|s| !s.is_empty()) else {
            return Err(ApiError::bad_request(
                "There is no required parameter [ id]",
            ));
        };
        let key = TaskKey {
            vhost: vhost.to_string(),
            app: app.to_string(),
            id: id.clone(),
        };
        if self.records.tasks.get(&key).is_none() {
            return Err(ApiError::http(
                404,
                format_args!("There is no record information related to the ID [{id}]"),
            ));
        }
        self.record(
            Change::delete_task(&crate::record::request::KIND, vhost, app, &id),
            "record not stopped",
        )?;
        let task = self
            .records
            .tasks
            .get_mut(&key)
            .ok_or_else(ApiError::internal)?;
        task.state = crate::record::task::RecordState::Stopping;
        info!("record [{key}] stopping");
        let view = envelope::ok(RecordView::of(
            task,
            self.utc_offset,
            file.root_path.as_deref(),
        ));
        self.effects.push(Effect::StopRecord(key));
        Ok(view)
    }

    pub(super) fn list_records(
        &self,
        vhost: &str,
        app: &str,
        body: &[u8],
    ) -> Result<super::Response, ApiError> {
        // An application without FILE has no records: `[]`, as OME answers.
        let (_, spec) = self.app_or_404(vhost, app)?;
        let root = spec.file().and_then(|f| f.root_path.clone());
        let req: IdBody = object(body, true)?;
        let views: Vec<RecordView> = self
            .records
            .tasks
            .of_app(vhost, app)
            .into_iter()
            .filter(|t| req.id.as_ref().is_none_or(|id| &t.spec.id == id))
            .map(|t| RecordView::of(t, self.utc_offset, root.as_deref()))
            .collect();
        Ok(envelope::ok(views))
    }

    /// The records of an app (or host) being deleted: the loop closes
    /// their files and drops them.
    pub(super) fn stop_records_of(&mut self, vhost: &str, app: Option<&str>) {
        for key in self.records.tasks.keys() {
            if key.vhost == vhost && app.is_none_or(|a| key.app == a) {
                info!("record [{key}] ended: its application is gone");
                self.effects.push(Effect::StopRecord(key));
            }
        }
    }
}
