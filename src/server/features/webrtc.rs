//! WebRTC viewers and publishers: frames to the session table, its timer,
//! its datagrams to the ICE sockets, AAC to the transcoder thread and Opus
//! back, publishers' frames to the other features, and what ended sessions
//! leave behind (a viewer count or a stream to end, an admission owed its
//! closing, a signalling socket to close).

use crate::admission::manager::AdmissionId;
use crate::clock::Now;
use crate::server::core::Core;
use crate::server::feature::Feature;
use crate::server::transcoder::Transcoder;
use crate::state::streams::IngestOutput;
use mio::Token;
use std::time::Instant;

#[derive(Default)]
pub(crate) struct WebRtc {
    /// AAC to Opus, on its own thread (started with the loop).
    transcoder: Option<Transcoder>,
}

impl Feature for WebRtc {
    fn start(&mut self, core: &mut Core, _now: Instant) {
        match Transcoder::start(core.waker.clone()) {
            Ok(t) => self.transcoder = Some(t),
            Err(e) => crate::error!(
                "webrtc: the audio transcoder thread did not start ({e}): AAC audio is not offered"
            ),
        }
    }

    fn on_wake(&mut self, core: &mut Core, now: Instant) {
        let Some(t) = &mut self.transcoder else {
            return;
        };
        let api = &mut core.api;
        for (stream, packets) in t.results() {
            api.webrtc
                .on_opus(stream, &packets, &mut api.registry.streams, now);
        }
    }

    fn on_ingest(&mut self, o: &IngestOutput, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        if api.webrtc.is_empty() {
            return;
        }
        api.webrtc.on_ingest(o, &mut api.registry.streams, now);
        for (owner, key) in core.api.webrtc.take_switched() {
            core.call(Token(owner), now, move |ep, cx| {
                ep.webrtc_switched(&key, cx)
            });
        }
    }

    fn timeout(&mut self, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        api.webrtc.handle_timeout(&mut api.registry.streams, now);
    }

    fn drive(&mut self, core: &mut Core, now: Instant) -> Option<Instant> {
        let work = core.api.webrtc.take_audio_work();
        if let Some(t) = &mut self.transcoder {
            if !work.is_empty() {
                t.submit(work, now);
            }
        }
        for token in core.api.webrtc.relays_with_output() {
            core.call(Token(token), now, |ep, cx| ep.flush(cx));
        }
        for token in core.api.webrtc.ports_with_output() {
            core.call(Token(token), now, |ep, cx| ep.flush(cx));
        }
        for stream in core.api.webrtc.take_joined() {
            if let Some(a) = core.api.registry.streams.audience_mut(stream) {
                a.webrtc += 1;
            }
        }
        // What publishers sent during timers (str0m's reordering buffer
        // lets frames go when their wait is over).
        core.out.ingest.append(&mut core.api.webrtc.take_ingest());
        for e in core.api.webrtc.take_ended() {
            if e.published {
                if let Some(s) = core.api.registry.streams.end(e.stream) {
                    crate::info!(
                        "stream [{}/{}/{}] ended ({} frames in; WebRTC session {}: {:?})",
                        s.vhost,
                        s.app,
                        s.name,
                        s.frames_in,
                        e.key,
                        e.reason
                    );
                    core.out.ingest.push(IngestOutput {
                        stream: Some(e.stream),
                        ended: Some(e.stream),
                        ..IngestOutput::default()
                    });
                }
            } else if e.connected {
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
        // Sessions paused for room wrote into another socket's outbox:
        // that socket sends on the next turn, at once.
        if core.api.webrtc.has_paused() && core.api.webrtc.has_output() {
            return Some(now);
        }
        core.api.webrtc.poll_timeout()
    }
}
