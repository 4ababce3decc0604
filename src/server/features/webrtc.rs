//! WebRTC viewers: frames to the session table, its timer, its datagrams
//! to the ICE sockets, and what ended sessions leave behind (a viewer
//! count, an admission owed its closing, a signalling socket to close).

use crate::admission::manager::AdmissionId;
use crate::clock::Now;
use crate::server::core::Core;
use crate::server::feature::Feature;
use crate::state::streams::IngestOutput;
use mio::Token;
use std::time::Instant;

pub(crate) struct WebRtc;

impl Feature for WebRtc {
    fn on_ingest(&mut self, o: &IngestOutput, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        if api.webrtc.is_empty() {
            return;
        }
        api.webrtc.on_ingest(o, &mut api.registry.streams, now);
    }

    fn timeout(&mut self, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        api.webrtc.handle_timeout(&mut api.registry.streams, now);
    }

    fn drive(&mut self, core: &mut Core, now: Instant) -> Option<Instant> {
        for token in core.api.webrtc.ports_with_output() {
            core.call(Token(token), now, |ep, cx| ep.flush(cx));
        }
        for stream in core.api.webrtc.take_joined() {
            if let Some(a) = core.api.registry.streams.audience_mut(stream) {
                a.webrtc += 1;
            }
        }
        for e in core.api.webrtc.take_ended() {
            if e.connected {
                if let Some(a) = core.api.registry.streams.audience_mut(e.stream) {
                    a.webrtc = a.webrtc.saturating_sub(1);
                }
            }
            if e.tag != 0 {
                core.access.close(AdmissionId(e.tag), Now::read(now));
            }
            if let Some(owner) = e.owner {
                let key = e.key.clone();
                core.call(Token(owner), now, move |ep, cx| ep.webrtc_ended(&key, cx));
            }
        }
        core.api.webrtc.poll_timeout()
    }
}
