//! Push publishing: the tasks' sessions get frames from ingest; the loop
//! makes each new session's I/O ([`PushIo`]), lets every woken session
//! transmit and hands its reports back to the manager.

use crate::api::Effect;
use crate::clock::Now;
use crate::push::manager::{After, SessionId};
use crate::push::task::TaskKey;
use crate::server::core::Core;
use crate::server::feature::Feature;
use crate::server::push_io::PushIo;
use crate::state::streams::IngestOutput;
use mio::Token;
use std::time::Instant;

/// Fan-out: how many endpoints ahead are prefetched in one go.
const PREFETCH_RUN: usize = 8;

#[derive(Default)]
pub(crate) struct Push {
    /// Scratch for the sessions woken in a turn (kept: no allocation per
    /// turn).
    woken: Vec<(SessionId, usize)>,
}

impl Feature for Push {
    /// Tasks restored from the state file wait for their streams.
    fn start(&mut self, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        api.pushes.reconcile(&mut api.registry, Now::read(now));
    }

    fn on_ingest(&mut self, o: &IngestOutput, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        api.pushes.on_ingest(o, &mut api.registry, Now::read(now));
    }

    fn on_effect(&mut self, effect: &Effect, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        match effect {
            Effect::PushAdded { vhost, app, id } => {
                let key = TaskKey {
                    vhost: vhost.clone(),
                    app: app.clone(),
                    id: id.clone(),
                };
                api.pushes
                    .start_if_live(key, &mut api.registry, Now::read(now));
            }
            Effect::StopPush { vhost, app, id } => {
                let key = TaskKey {
                    vhost: vhost.clone(),
                    app: app.clone(),
                    id: id.clone(),
                };
                api.pushes.stop(&key, now);
                crate::info!("push [{key}] stopped");
            }
            _ => {}
        }
    }

    fn timeout(&mut self, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        api.pushes.handle_timeout(&mut api.registry, Now::read(now));
    }

    /// Makes the I/O of new sessions, lets every woken session transmit,
    /// and takes its reports into its task.
    fn drive(&mut self, core: &mut Core, now: Instant) -> Option<Instant> {
        let wall = Now::read(now);
        loop {
            while let Some(new) = core.api.pushes.poll_new() {
                let id = new.id;
                if let Some(token) = core.add_endpoint(now, |cx| Box::new(PushIo::start(new, cx))) {
                    core.api.pushes.attach(id, token.0);
                }
            }
            let mut woken = std::mem::take(&mut self.woken);
            core.api.pushes.take_woken(&mut woken);
            if woken.is_empty() {
                self.woken = woken;
                break;
            }
            for (k, &(id, io)) in woken.iter().enumerate() {
                // Each flush's `writev` evicts the next sessions' memory:
                // bring it back ahead. The slots are found by reading the
                // tables (misses), so they are taken eight at a time, their
                // misses overlapping; what they point at follows one turn
                // ahead, when reading the pointers costs nothing.
                if k % PREFETCH_RUN == 0 {
                    for &(later, io) in woken.iter().skip(k + 2).take(PREFETCH_RUN) {
                        core.prefetch_entry(Token(io));
                        core.api.pushes.prefetch_slot(later);
                    }
                }
                if let Some(&(next, io)) = woken.get(k + 1) {
                    core.prefetch_endpoint(Token(io));
                    core.api.pushes.prefetch(next);
                }
                // Push I/O produces no output for the rest of the server.
                let _ = core.guarded(Token(io), now, |ep, cx| ep.flush(cx));
                match core.api.pushes.after(id, wall) {
                    After::Running => {}
                    After::Finished(io) => {
                        if let Some(io) = io {
                            core.remove_endpoint(Token(io));
                        }
                    }
                }
            }
            self.woken = woken;
        }
        core.api.pushes.trim_feeds(now);
        if core.api.pushes.take_state_changed() {
            core.api.note_peaks(wall);
        }
        core.api.pushes.poll_timeout()
    }
}
