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
