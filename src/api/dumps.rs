//! `:startHlsDump`, `:stopHlsDump` and `:hlsDumps` (OME's HLS dump API;
//! DECISIONS section 10). The dump table is in the registry; the loop
//! writes the files (effects).

use super::envelope::{self, ApiError};
use super::{Api, Effect, Response};
use crate::clock;
use crate::hls::dump::{self, DumpStatus, DumpTask, StartDumpRequest, StopDumpRequest};
use crate::push::task::TaskKey;
use crate::state::store::Change;
use serde::Serialize;
use serde_json::Value;

/// A dump as the API shows it (OME's request fields, then its state).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DumpView<'a> {
    id: &'a str,
    vhost: &'a str,
    app: &'a str,
    output_stream_name: &'a str,
    output_path: String,
    playlist: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    info_file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user_data: Option<&'a str>,
    /// OME's flag: the dump is writing.
    enabled: bool,
    status: &'static str,
    segments: u64,
    bytes: u64,
    created_time: clock::IsoTime,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<&'a str>,
}

impl<'a> DumpView<'a> {
    fn of(d: &'a DumpTask, offset: i32) -> Self {
        let s = &d.spec;
        DumpView {
            id: &s.id,
            vhost: &s.vhost,
            app: &s.app,
            output_stream_name: &s.stream,
            output_path: s.output_path.display().to_string(),
            playlist: &s.playlists,
            info_file: s.info_file.as_ref().map(|p| p.display().to_string()),
            user_data: s.user_data.as_deref(),
            enabled: d.status == crate::hls::dump::DumpStatus::Running,
            status: d.status.name(),
            segments: d.segments,
            bytes: d.bytes,
            created_time: clock::IsoTime::new(s.created_ms, offset),
            last_error: d.last_error.as_deref(),
        }
    }
}

impl Api {
    pub(super) fn start_hls_dump(
        &mut self,
        vhost: &str,
        app: &str,
        stream: &str,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        let (spec, _) = self.live_stream(vhost, app, stream)?;
        let Some(llhls) = spec.publishers.llhls.as_ref() else {
            return Err(ApiError::bad_request(format_args!(
                "Application {app} does not publish LL-HLS (<Publishers><LLHLS>): dumps are of its playlists"
            )));
        };
        let root = llhls.dumps.as_ref().and_then(|d| d.root_path.clone());
        let mut value = envelope::object_body(body, true)?;
        // The stream in the path when the body names none.
        if value.get("outputStreamName").is_none() {
            value["outputStreamName"] = Value::String(stream.to_string());
        }
        let req: StartDumpRequest = envelope::from_object(value)?;
        let spec = dump::validate_start(req, vhost, app, root.as_deref(), self.now.unix_ms)
            .map_err(ApiError::bad_request)?;
        self.live_stream(vhost, app, &spec.stream)?;
        let key = TaskKey {
            vhost: vhost.to_string(),
            app: app.to_string(),
            id: spec.id.clone(),
        };
        if self
            .hls
            .dump_tasks
            .get(&key)
            .is_some_and(|d| d.status == DumpStatus::Running)
        {
            return Err(ApiError::bad_request(format_args!(
                "Duplicate ID already exists [{}]",
                spec.id
            )));
        }
        if self.hls.dump_tasks.len() >= self.limits.max_push_tasks {
            return Err(ApiError::bad_request(format_args!(
                "The limit of {} dumps is reached (Managers/API/Limits/MaxPushTasks)",
                self.limits.max_push_tasks
            )));
        }
        // Kept in the state file (a finished dump of the same id goes).
        if self.hls.dump_tasks.get(&key).is_some_and(|d| d.spec.api) {
            self.record(
                Change::delete_task(&dump::KIND, vhost, app, &spec.id),
                "dump not started",
            )?;
        }
        self.record_added(&dump::KIND, &spec, "dump not started")?;
        crate::info!(
            "hls dump [{key}] of [{}] to {}",
            spec.stream,
            spec.output_path.display()
        );
        self.hls.dump_tasks.insert(spec);
        self.effects.push(Effect::StartHlsDump(key));
        // OME answers with no `response`; `:hlsDumps` shows the dump.
        Ok(envelope::ok_empty())
    }

    pub(super) fn stop_hls_dump(
        &mut self,
        vhost: &str,
        app: &str,
        stream: &str,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        self.app_or_404(vhost, app)?;
        let req: StopDumpRequest = envelope::from_object(envelope::object_body(body, true)?)?;
        let name = req.output_stream_name.unwrap_or_else(|| stream.to_string());
        let keys: Vec<TaskKey> = match req.id.filter(|s| !s.is_empty()) {
            Some(id) => {
                let key = TaskKey {
                    vhost: vhost.to_string(),
                    app: app.to_string(),
                    id: id.clone(),
                };
                if self.hls.dump_tasks.get(&key).is_none() {
                    return Err(ApiError::http(
                        404,
                        format_args!("There is no dump related to the ID [{id}]"),
                    ));
                }
                vec![key]
            }
            // No id: every dump of the output stream.
            None => self
                .hls
                .dump_tasks
                .of(vhost, app, Some(&name))
                .into_iter()
                .map(|(k, _)| k.clone())
                .collect(),
        };
        for key in keys {
            if self.hls.dump_tasks.get(&key).is_some_and(|d| d.spec.api) {
                self.record(
                    Change::delete_task(&dump::KIND, &key.vhost, &key.app, &key.id),
                    "dump not stopped",
                )?;
            }
            self.effects.push(Effect::StopHlsDump(key));
        }
        Ok(envelope::ok_empty())
    }

    pub(super) fn list_hls_dumps(
        &self,
        vhost: &str,
        app: &str,
        stream: &str,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        self.app_or_404(vhost, app)?;
        let value = envelope::object_body(body, true)?;
        let id = value.get("id").and_then(Value::as_str);
        let views: Vec<DumpView> = self
            .hls
            .dump_tasks
            .of(vhost, app, Some(stream))
            .into_iter()
            .filter(|(k, _)| id.is_none_or(|id| k.id == id))
            .map(|(_, d)| DumpView::of(d, self.utc_offset))
            .collect();
        Ok(envelope::ok(views))
    }
}
