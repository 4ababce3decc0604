//! `:sendEvent`, `:sendEvents` and `:concludeHlsLive` (DECISIONS section
//! 10): the body checked here (`hls::event`), the event handed to the
//! loop, which puts it into the stream's next LL-HLS parts (or ends its
//! playlists).

use super::envelope::{self, ApiError};
use super::{Api, Effect, Response};
use crate::hls::event;
use serde_json::Value;

impl Api {
    /// `POST .../streams/{stream}:sendEvent` (`many`: `:sendEvents`, an
    /// array of such bodies answered one envelope each).
    pub(super) fn send_event(
        &mut self,
        vhost: &str,
        app: &str,
        stream: &str,
        many: bool,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        let id = self.viewed_stream(vhost, app, stream, false)?;
        let value: Value = serde_json::from_slice(body).map_err(|e| ApiError::invalid_json(&e))?;
        let mut take = |v: &Value| -> Result<(), ApiError> {
            let event = event::parse(v).map_err(|e| ApiError::BadRequest(e.to_string()))?;
            self.effects.push(Effect::SendEvent { stream: id, event });
            Ok(())
        };
        if !many {
            take(&value)?;
            return Ok(envelope::ok_empty());
        }
        let Value::Array(items) = &value else {
            return Err(ApiError::BadRequest(
                "The body must be a JSON array of events".into(),
            ));
        };
        let results: Vec<Result<(), ApiError>> = items.iter().map(&mut take).collect();
        Ok(envelope::batch_status(&results))
    }

    /// `POST .../streams/{stream}:concludeHlsLive` (body `{}`): the
    /// stream's LL-HLS and HLS playlists get `EXT-X-ENDLIST` and stop
    /// changing; the stream, its pushes and its viewers' files stay.
    pub(super) fn conclude_hls_live(
        &mut self,
        vhost: &str,
        app: &str,
        stream: &str,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        let id = self.viewed_stream(vhost, app, stream, true)?;
        envelope::object_body(body, true)?;
        self.effects.push(Effect::ConcludeHls { stream: id });
        Ok(envelope::ok_empty())
    }

    /// `POST .../streams/{stream}:sendSubtitles` (OME v0.20): the body is
    /// checked as OME checks it (`format` "webvtt", `data` of `{label,
    /// subtitles: [{text, startOffset?, durationMs?, settings?}]}`); then,
    /// since kiln's streams have no subtitle tracks (WebVTT renditions are
    /// not built), every label is unknown and the answer is OME's for a
    /// label that names no subtitle track: 500 "Could not send WebVTT
    /// frame" (DECISIONS section 10).
    pub(super) fn send_subtitles(
        &mut self,
        vhost: &str,
        app: &str,
        stream: &str,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        self.live_stream(vhost, app, stream)?;
        let value: Value = serde_json::from_slice(body).map_err(|e| ApiError::invalid_json(&e))?;
        let data = match (&value["format"], &value["data"]) {
            (Value::String(format), Value::Array(data)) if !data.is_empty() => {
                if !format.eq_ignore_ascii_case("webvtt") {
                    return Err(ApiError::BadRequest(format!(
                        "format is not supported: [{}]",
                        format.escape_debug()
                    )));
                }
                data
            }
            _ => {
                return Err(ApiError::bad_request(
                    "format(string) and data(array) are required",
                ))
            }
        };
        let mut labels = Vec::new();
        for item in data {
            let (label, subtitles) = match (&item["label"], &item["subtitles"]) {
                (Value::String(l), Value::Array(s)) if !s.is_empty() => (l, s),
                _ => {
                    return Err(ApiError::bad_request(
                        "label(string) and subtitles(array) are required",
                    ))
                }
            };
            if subtitles.iter().any(|s| !s["text"].is_string()) {
                return Err(ApiError::bad_request(
                    "text(string) is required in subtitles",
                ));
            }
            labels.push(label.escape_debug().to_string());
        }
        crate::warn!(
            "subtitles for [{vhost}/{app}/{stream}] not sent: the stream has no subtitle track labelled [{}] (kiln does not build WebVTT renditions)",
            labels.join(", ")
        );
        Err(ApiError::http(
            500,
            format_args!("Could not send WebVTT frame: [{vhost}/{app}/{stream}]"),
        ))
    }

    /// A live stream by input or output name, in an application that
    /// publishes LL-HLS (or, with `or_hls`, HLS).
    fn viewed_stream(
        &self,
        vhost: &str,
        app: &str,
        stream: &str,
        or_hls: bool,
    ) -> Result<crate::state::streams::StreamId, ApiError> {
        let (spec, live) = self.live_stream(vhost, app, stream)?;
        let id = live.id;
        let publishes =
            spec.publishers.llhls.is_some() || (or_hls && spec.publishers.hls.is_some());
        if !publishes {
            let what = if or_hls {
                "LL-HLS or HLS"
            } else {
                "LL-HLS (<Publishers><LLHLS>): events travel in its parts"
            };
            return Err(ApiError::BadRequest(format!(
                "Application {app} does not publish {what}"
            )));
        }
        Ok(id)
    }
}
