//! A viewer or player asks for a stream that is not live: pull it from
//! the host's origin (`<Origins>`) or from where the origin map says it
//! is, on demand (DECISIONS 12). One function for every kind of viewer;
//! the answer comes later, as a [`PullAnswer`](super::table::PullAnswer)
//! to the waiter's loop handle.

use super::origins::origin_urls;
use super::table::{PullKey, PullState};
use super::{PullSpec, Pulls, Source};
use crate::state::vhost::OriginProperties;
use crate::state::Registry;
use std::time::Instant;

/// What became of the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OnDemand {
    /// A pull is under way (or a lookup in the origin map): `waiter`
    /// hears when it is live or failed.
    Waiting,
    /// No origin has it (or it is live under another name): not found.
    NotFound,
    /// An origin has it but it cannot be pulled now: the status and why.
    Refused(u16, String),
}

/// Pulls `key` for `waiter` (see the module docs).
pub fn request(
    reg: &Registry,
    pulls: &mut Pulls,
    key: &PullKey,
    waiter: usize,
    now: Instant,
) -> OnDemand {
    match pulls.table.get(key).map(|t| t.state) {
        // Live, yet not under the name asked (an output profile renames
        // it): nothing to wait for.
        Some(PullState::Live) => return OnDemand::NotFound,
        Some(_) => {
            pulls.table.add_waiter(key, waiter);
            return OnDemand::Waiting;
        }
        None => {}
    }
    let urls = reg
        .vhost(&key.vhost)
        .and_then(|v| origin_urls(&v.spec, &key.app, &key.name));
    let Some(urls) = urls else {
        // Not under an origin: ask the host's origin map, if any.
        return match pulls
            .maps
            .iter_mut()
            .find(|m| m.vhosts.contains(&key.vhost))
        {
            Some(map) => {
                map.lookup(waiter, key.clone(), now);
                OnDemand::Waiting
            }
            None => OnDemand::NotFound,
        };
    };
    let sources: Result<Vec<Source>, String> = urls.iter().map(|u| Source::parse(u)).collect();
    match sources {
        Ok(sources) => start(reg, pulls, key, urls, sources, waiter, now),
        Err(why) => {
            crate::warn!("origin of [{key}]: {why}");
            OnDemand::Refused(502, format!("Bad origin URL: {why}"))
        }
    }
}

/// A player asks for `key`, which is not live: `Ok` when it waits for a
/// pull (its answer comes to `waiter`), else why it cannot play.
pub fn wait_for(
    reg: &Registry,
    pulls: &mut Pulls,
    key: &PullKey,
    waiter: usize,
    now: Instant,
) -> Result<(), String> {
    match request(reg, pulls, key, waiter, now) {
        OnDemand::Waiting => Ok(()),
        OnDemand::NotFound => Err(format!(
            "No such stream: [{}/{}/{}]",
            key.vhost, key.app, key.name
        )),
        OnDemand::Refused(_, why) => Err(why),
    }
}

/// The origin map said where `key` is: pull it for `waiter`.
pub fn from_map(
    reg: &Registry,
    pulls: &mut Pulls,
    key: &PullKey,
    url: &str,
    waiter: usize,
    now: Instant,
) -> OnDemand {
    if pulls.table.get(key).is_some() {
        pulls.table.add_waiter(key, waiter);
        return OnDemand::Waiting;
    }
    if url.starts_with("ovt://") {
        return OnDemand::Refused(
            502,
            format!(
                "the origin map holds [{}]: OME's OVT, which kiln does not pull",
                url.escape_debug()
            ),
        );
    }
    match Source::parse(url) {
        Ok(source) => start(
            reg,
            pulls,
            key,
            vec![url.to_string()],
            vec![source],
            waiter,
            now,
        ),
        Err(why) => OnDemand::Refused(502, format!("the origin map's URL: {why}")),
    }
}

fn start(
    reg: &Registry,
    pulls: &mut Pulls,
    key: &PullKey,
    urls: Vec<String>,
    sources: Vec<Source>,
    waiter: usize,
    now: Instant,
) -> OnDemand {
    let shown: Vec<String> = urls.iter().map(|u| super::request::redacted(u)).collect();
    let props = reg
        .vhost(&key.vhost)
        .and_then(|v| v.spec.origins.as_ref()?.properties.clone());
    if !pulls
        .table
        .insert_on_demand(spec(key, urls, props), sources, now)
    {
        return OnDemand::Refused(503, "Too many streams are being pulled".into());
    }
    crate::info!("pull [{key}] on demand from {}", shown.join(", "));
    pulls.table.add_waiter(key, waiter);
    OnDemand::Waiting
}

/// What an on-demand pull is: not durable, ended after 60 s unused (the
/// host's `<Origins><Properties>` may say otherwise).
fn spec(key: &PullKey, urls: Vec<String>, props: Option<OriginProperties>) -> PullSpec {
    let props = props.as_ref();
    PullSpec {
        vhost: key.vhost.clone(),
        app: key.app.clone(),
        name: key.name.clone(),
        urls,
        persistent: false,
        no_input_failover_timeout_ms: props
            .and_then(|p| p.no_input_failover_timeout)
            .unwrap_or(5000)
            .clamp(500, 600_000),
        unused_stream_deletion_timeout_ms: props
            .and_then(|p| p.unused_stream_deletion_timeout)
            .unwrap_or(60_000)
            .clamp(1000, 86_400_000),
    }
}
