//! `:sendEvent` and `:sendEvents` (DECISIONS section 10): the body checked
//! here (`hls::event`), the event handed to the loop, which puts it into
//! the stream's next LL-HLS parts.

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
        let (_, spec) = self.app_or_404(vhost, app)?;
        let streams = self.registry.streams.shown_of_app(vhost, app);
        // By input name, else by one of its output names.
        let id = streams
            .iter()
            .find(|s| s.name == stream)
            .or_else(|| {
                streams
                    .iter()
                    .find(|s| spec.output_names(&s.name).iter().any(|(n, _)| n == stream))
            })
            .map(|s| s.id)
            .ok_or_else(|| ApiError::stream_not_found(vhost, app, stream))?;
        if spec.publishers.llhls.is_none() {
            return Err(ApiError::BadRequest(format!(
                "Application {app} does not publish LL-HLS (<Publishers><LLHLS>): events travel in its parts"
            )));
        }
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
}
