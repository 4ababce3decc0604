//! Pulled streams: new pulls get their I/O ([`PullIo`]), the API requests
//! and players parked on a pull get its answer, and a push or record that
//! wants a stream an origin has pulls it on demand.

use crate::api::Effect;
use crate::pull::on_demand;
use crate::pull::table::NO_WAITER;
use crate::pull::PullKey;
use crate::server::core::Core;
use crate::server::feature::Feature;
use crate::server::pull_io::PullIo;
use mio::Token;
use std::time::Instant;

pub(crate) struct Pull;

impl Feature for Pull {
    /// Restored pushes and records may want streams an origin has.
    fn start(&mut self, core: &mut Core, now: Instant) {
        let api = &core.api;
        let wanted: Vec<(String, String, String)> = (api.pushes.tasks.specs().into_iter())
            .map(|p| (p.vhost, p.app, p.stream_name))
            .chain((api.records.tasks.specs().into_iter()).map(|r| (r.vhost, r.app, r.stream_name)))
            .collect();
        for (vhost, app, name) in wanted {
            want_stream(core, &vhost, &app, &name, now);
        }
    }

    fn on_effect(&mut self, effect: &Effect, core: &mut Core, now: Instant) {
        let api = &core.api;
        let wanted = match effect {
            Effect::PushAdded { vhost, app, id } => api
                .pushes
                .tasks
                .get(vhost, app, id)
                .map(|t| (vhost.clone(), app.clone(), t.spec.stream_name.clone())),
            Effect::RecordAdded(key) => api.records.tasks.get(key).map(|t| {
                (
                    key.vhost.clone(),
                    key.app.clone(),
                    t.spec.stream_name.clone(),
                )
            }),
            Effect::ClosePull { io } => {
                core.call(Token(*io), now, |ep, cx| ep.abort(cx));
                None
            }
            _ => None,
        };
        if let Some((vhost, app, name)) = wanted {
            want_stream(core, &vhost, &app, &name, now);
        }
    }

    /// The back-off ended for some pulls, or on-demand pulls went unused.
    fn timeout(&mut self, core: &mut Core, now: Instant) {
        note_pull_use(core, now);
        for io in core.api.pulls.table.handle_timeout(now) {
            core.call(Token(io), now, |ep, cx| ep.abort(cx));
        }
    }

    /// Opens the sessions pulls asked for and answers the requests parked
    /// on pulls.
    fn drive(&mut self, core: &mut Core, now: Instant) -> Option<Instant> {
        loop {
            let mut busy = false;
            while let Some(new) = core.api.pulls.table.poll_new() {
                busy = true;
                let session = new.session;
                if let Some(token) = core.add_endpoint(now, |cx| Box::new(PullIo::start(new, cx))) {
                    core.api.pulls.table.attach(session, token.0);
                }
            }
            while let Some(answer) = core.api.pulls.table.poll_answer() {
                busy = true;
                let token = Token(answer.waiter);
                let _ = core.guarded(token, now, |ep, cx| ep.pull_answered(answer, cx));
            }
            if !busy {
                break;
            }
        }
        core.api.pulls.table.poll_timeout()
    }
}

/// A push or record wants a stream: when it is not live and an origin
/// has it, it is pulled on demand (nobody waits for the answer; the push
/// or record starts with the stream, as for any publisher).
fn want_stream(core: &mut Core, vhost: &str, app: &str, name: &str, now: Instant) {
    let api = &mut core.api;
    if api.registry.output_stream(vhost, app, name).is_some() {
        return;
    }
    let key = PullKey {
        vhost: vhost.into(),
        app: app.into(),
        name: name.into(),
    };
    let has_origin = (api.registry.vhost(vhost))
        .is_some_and(|v| v.spec.origins.is_some() || v.spec.origin_map_store.is_some());
    if has_origin {
        let _ = on_demand::request(&api.registry, &mut api.pulls, &key, NO_WAITER, now);
    }
}

/// An on-demand pull is used while its stream has RTMP or SRT players,
/// pushes or records (LL-HLS viewers note their own use with each
/// request).
fn note_pull_use(core: &mut Core, now: Instant) {
    let api = &mut core.api;
    for key in api.pulls.table.live_on_demand() {
        let Some(id) = (api.registry.streams)
            .find(&key.vhost, &key.app, &key.name)
            .map(|s| s.id)
        else {
            continue;
        };
        let used = !core.players.of(id).is_empty()
            || (api.pushes.tasks.of_app(&key.vhost, &key.app).iter())
                .any(|t| t.spec.stream_name == key.name)
            || (api.records.tasks.of_app(&key.vhost, &key.app).iter())
                .any(|t| t.spec.stream_name == key.name);
        if used {
            api.pulls.table.touch(&key, now);
        }
    }
}
