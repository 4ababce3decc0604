//! `POST .../apps/{app}/streams` (pull a stream in) and `DELETE
//! .../streams/{stream}` (end a pulled stream, or disconnect a
//! publisher), DECISIONS 12. Streams are not settings: both work on
//! config-file hosts too.
//!
//! A pull's answer waits for the pull: the handler parks the request
//! ([`Api::take_parked`]) and the loop answers it with
//! [`Api::pull_answer`] once the pull is live (200 with the stream) or
//! failed on every URL (502 naming why).

use super::envelope::{self, ApiError};
use super::{Api, Effect, Response};
use crate::pull::table::PullAnswer;
use crate::pull::PullKey;
use crate::state::store::Change;

/// Most pulls at once.
pub(super) const MAX_PULLS: usize = 1000;

impl Api {
    pub(super) fn create_stream(
        &mut self,
        vhost: &str,
        app: &str,
        body: &[u8],
    ) -> Result<Response, ApiError> {
        self.app_or_404(vhost, app)?;
        let (spec, sources) =
            crate::pull::request::parse(envelope::object_body(body, false)?, vhost, app)
                .map_err(ApiError::bad_request)?;
        let key = PullKey::of(&spec);
        if self.pulls.table.get(&key).is_some()
            || self.registry.streams.find(vhost, app, &spec.name).is_some()
        {
            return Err(ApiError::http(
                409,
                format_args!("Stream [{}] already exists in [{vhost}/{app}]", spec.name),
            ));
        }
        if self.pulls.table.len() >= MAX_PULLS {
            return Err(ApiError::bad_request(format_args!(
                "The limit of {MAX_PULLS} pulled streams is reached"
            )));
        }
        if spec.persistent {
            self.record_added(&crate::pull::KIND, &spec, "pull not started")?;
        }
        crate::info!(
            "pull [{key}] created: {}",
            spec.urls
                .iter()
                .map(|u| crate::pull::request::redacted(u))
                .collect::<Vec<_>>()
                .join(", ")
        );
        self.pulls.table.insert(spec, sources, self.now.instant);
        self.parked = Some(key);
        // Placeholder: the connection answers when the pull does.
        Ok(Response::new(202, Vec::new()))
    }

    /// The pull a request just handled waits for, if any (taken once).
    pub fn take_parked(&mut self) -> Option<PullKey> {
        self.parked.take()
    }

    /// The answer for a request parked on a pull.
    pub fn pull_answer(&self, answer: &PullAnswer) -> Response {
        let k = &answer.key;
        match &answer.result {
            Ok(()) => self
                .get_stream(&k.vhost, &k.app, &k.name)
                .unwrap_or_else(|_| {
                    ApiError::http(502, format_args!("Stream [{k}] ended as it went live"))
                        .to_response()
                }),
            Err(why) => {
                ApiError::http(502, format_args!("Could not pull [{k}]: {why}")).to_response()
            }
        }
    }

    pub(super) fn delete_stream(
        &mut self,
        vhost: &str,
        app: &str,
        stream: &str,
    ) -> Result<Response, ApiError> {
        self.app_or_404(vhost, app)?;
        let key = PullKey {
            vhost: vhost.into(),
            app: app.into(),
            name: stream.into(),
        };
        let live = self.registry.streams.find(vhost, app, stream).map(|s| s.id);
        let pull = self.pulls.table.get(&key).map(|p| p.spec.persistent);
        if live.is_none() && pull.is_none() {
            return Err(ApiError::stream_not_found(vhost, app, stream));
        }
        if pull == Some(true) {
            self.record(
                Change::delete_task(&crate::pull::KIND, vhost, app, stream),
                "stream not deleted",
            )?;
        }
        let io = self.pulls.table.remove(&key, "the stream was deleted");
        match (live, io) {
            (Some(stream), _) => self.effects.push(Effect::EndStream { stream }),
            (None, Some(io)) => self.effects.push(Effect::ClosePull { io }),
            (None, None) => {}
        }
        crate::info!("stream [{key}] deleted through the API");
        Ok(envelope::ok_empty())
    }

    /// Ends the pulls of an app (or host) being deleted (their journal
    /// records go with the app's); live ones end with the app's restart.
    pub(super) fn drop_pulls_of(&mut self, vhost: &str, app: Option<&str>) {
        for io in self.pulls.table.remove_of(vhost, app) {
            self.effects.push(Effect::ClosePull { io });
        }
    }
}

/// A pull as `:pulls` shows it (kiln extension). URLs are shown with their
/// secrets masked.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct PullView<'a> {
    name: &'a str,
    state: &'static str,
    urls: Vec<String>,
    /// The URL being tried, or live.
    url: String,
    persistent: bool,
    /// A viewer's request started it; it ends when unused.
    on_demand: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<&'a str>,
}

impl Api {
    /// `POST .../apps/{app}:pulls`: every pull of the application, live or
    /// not, by name.
    pub(super) fn list_pulls(&self, vhost: &str, app: &str) -> Result<Response, ApiError> {
        self.app_or_404(vhost, app)?;
        let redacted = crate::pull::request::redacted;
        let pulls: Vec<PullView<'_>> = (self.pulls.table.of_app(vhost, app).into_iter())
            .map(|t| PullView {
                name: &t.spec.name,
                state: t.state.name(),
                urls: t.spec.urls.iter().map(|u| redacted(u)).collect(),
                url: redacted(t.url()),
                persistent: t.spec.persistent,
                on_demand: t.on_demand(),
                last_error: t.last_error.as_deref(),
            })
            .collect();
        Ok(envelope::ok(pulls))
    }
}
