//! Publishing over WebRTC (WHIP, OME's `direction=send`): a session that
//! receives becomes its stream's publisher; what its peer sends goes
//! through [`super::ingest`] into the stream, as any other input's frames.

use super::{
    credentials, ingest, offer_mids, sdp, EndReason, Offerable, SessionOptions, WebRtc, WebRtcError,
};
use crate::media::Codec;
use crate::state::streams::{IngestOutput, StreamId, Streams};
use std::time::Instant;
use str0m::format::Codec as RtcCodec;
use str0m::media::{Direction, MediaKind, Mid};
use str0m::{IceCreds, Rtc, RtcConfig};

/// A publishing session's media path.
pub(super) struct Publish {
    pub(super) tracks: ingest::IngestTracks,
    /// Its video m-line (where keyframe requests go).
    video: Option<Mid>,
    /// Its video layers by RID (a simulcast publisher's, in the order
    /// they first arrive; `None` for a publisher without simulcast): each
    /// is a video track of the stream (see [`ingest::IngestTracks`]).
    layers: Vec<Option<str0m::media::Rid>>,
}

impl WebRtc {
    /// A publisher's stack: it receives H.264 (and VP8 when asked: from
    /// a publisher that offers no H.264, or in kiln's own offer after
    /// H.264) and Opus, orders packets in str0m's reordering buffers
    /// (bounded: its defaults of 30 video and 15 audio packets) and NACKs
    /// what is lost.
    pub(super) fn new_publish_rtc(
        &self,
        ufrag: &str,
        pass: &str,
        h264: bool,
        vp8: bool,
        now: Instant,
    ) -> Rtc {
        let config = RtcConfig::new()
            .set_ice_lite(true)
            .clear_codecs()
            .enable_h264(h264)
            .enable_vp8(vp8)
            .enable_opus(true, true)
            .set_local_ice_credentials(IceCreds {
                ufrag: ufrag.to_string(),
                pass: pass.to_string(),
            })
            .set_stats_interval(None);
        self.build_rtc(config, now)
    }

    /// Makes a session a publisher of `stream` (it leaves the viewers).
    pub(super) fn make_publisher(&mut self, idx: usize, stream: StreamId) {
        if let Some(feed) = self.feeds.get_mut(&stream) {
            feed.sessions.retain(|&i| i != idx);
            if feed.sessions.is_empty() {
                self.feeds.remove(&stream);
            }
        }
        let s = &mut self.sessions[idx];
        let video = s
            .mids
            .iter()
            .find(|(_, k)| *k == MediaKind::Video)
            .map(|(m, _)| *m);
        let audio = s.mids.iter().any(|(_, k)| *k == MediaKind::Audio);
        s.publish = Some(Box::new(Publish {
            tracks: ingest::IngestTracks::new(video.is_some(), audio),
            video,
            layers: Vec::new(),
        }));
        self.publishers.insert(stream, idx);
    }

    /// A publisher's offer (WHIP) for `stream`, which the caller has just
    /// started: the session key and the answer.
    pub fn accept_publish_offer(
        &mut self,
        stream: StreamId,
        offer: &str,
        opts: SessionOptions,
        now: Instant,
    ) -> Result<(String, String), WebRtcError> {
        let (offer_text, offer) = self.parse_offer(offer, opts.client)?;
        let creds = credentials();
        // H.264 is preferred: VP8 is taken only when the offer has no H.264.
        let has_h264 = offer_text
            .lines()
            .any(|l| l.starts_with("a=rtpmap:") && l.to_ascii_uppercase().contains(" H264/"));
        let mut rtc = self.new_publish_rtc(&creds.0, &creds.1, has_h264, !has_h264, now);
        let answer = rtc
            .sdp_api()
            .accept_offer(offer)
            .map_err(|e| WebRtcError::BadSdp(e.to_string()))?;
        let mids = offer_mids(&mut rtc, offer_text);
        if !mids.iter().any(|(m, _)| {
            rtc.media(*m)
                .is_some_and(|media| media.direction().is_receiving())
        }) {
            return Err(WebRtcError::BadSdp(
                "the offer sends no H.264 or Opus kiln can take".into(),
            ));
        }
        let what = Offerable {
            video: true,
            vp8: !has_h264,
            audio: true,
            stereo: true,
        };
        let idx = self.insert(rtc, stream, what, creds, opts, now)?;
        self.sessions[idx].mids = mids;
        self.make_publisher(idx, stream);
        self.poll_session(idx, None, now);
        let key = self.sessions[idx].key.clone();
        let answer = sdp::complete_refused_sections(&answer.to_sdp_string(), offer_text);
        Ok((key, answer))
    }

    /// kiln offers to receive (OME's `direction=send`): a session that
    /// will publish `stream` once its answer is taken
    /// ([`accept_answer`](Self::accept_answer), as a viewer's).
    pub fn create_publish_offer(
        &mut self,
        stream: StreamId,
        opts: SessionOptions,
        now: Instant,
    ) -> Result<(String, String), WebRtcError> {
        self.room_for(opts.client)?;
        let creds = credentials();
        let mut rtc = self.new_publish_rtc(&creds.0, &creds.1, true, true, now);
        let mut api = rtc.sdp_api();
        let video = api.add_media(MediaKind::Video, Direction::RecvOnly, None, None, None);
        let audio = api.add_media(MediaKind::Audio, Direction::RecvOnly, None, None, None);
        let Some((offer, pending)) = api.apply() else {
            return Err(WebRtcError::Internal("no offer".into()));
        };
        let what = Offerable {
            video: true,
            vp8: false,
            audio: true,
            stereo: true,
        };
        let idx = self.insert(rtc, stream, what, creds, opts, now)?;
        let s = &mut self.sessions[idx];
        s.pending = Some(pending);
        s.mids = vec![(video, MediaKind::Video), (audio, MediaKind::Audio)];
        self.make_publisher(idx, stream);
        let key = self.sessions[idx].key.clone();
        Ok((key, offer.to_sdp_string()))
    }

    /// The publisher the session table knows for `stream`, ended (the
    /// API deleted the stream, its app restarted).
    pub fn end_publisher(&mut self, stream: StreamId) {
        if let Some(&idx) = self.publishers.get(&stream) {
            self.end(idx, EndReason::Stopped);
        }
    }

    /// Sessions publishing a stream.
    pub fn publishers(&self) -> usize {
        self.publishers.len()
    }

    /// The endpoint that stands for every WebRTC publisher in the registry
    /// (an ICE socket's token: the loop asks it to end a stream).
    pub fn publisher_token(&self) -> Option<usize> {
        self.port_tokens.first().copied()
    }

    /// What publishing sessions did to their streams since the last call.
    pub fn take_ingest(&mut self) -> Vec<IngestOutput> {
        std::mem::take(&mut self.ingest)
    }

    /// A publisher's frame: into its stream, and out to the features.
    pub(super) fn on_published(
        &mut self,
        idx: usize,
        m: &str0m::media::MediaData,
        streams: &mut Streams,
        now: Instant,
    ) {
        let Some(s) = self.sessions.get_mut(idx) else {
            return;
        };
        let id = s.stream;
        let Some(p) = s.publish.as_deref_mut() else {
            return;
        };
        let codec = match m.params.spec().codec {
            RtcCodec::H264 => ingest::MediaCodec::H264,
            RtcCodec::Vp8 => ingest::MediaCodec::Vp8,
            RtcCodec::Opus => ingest::MediaCodec::Opus,
            _ => return,
        };
        let mut layer = 0;
        if codec != ingest::MediaCodec::Opus {
            layer = match p.layers.iter().position(|r| *r == m.rid) {
                Some(i) => i,
                None if p.layers.len() < ingest::MAX_LAYERS => {
                    p.layers.push(m.rid);
                    p.layers.len() - 1
                }
                None => return,
            };
        }
        let mut events = Vec::new();
        p.tracks.on_media(
            ingest::Media {
                codec,
                rtp_time: m.time.numer(),
                rate: m.time.denom(),
                arrival: m.network_time,
                contiguous: m.contiguous,
                layer,
                data: &m.data,
            },
            &mut events,
        );
        let wanted = match codec {
            ingest::MediaCodec::Opus => 0,
            _ => p.tracks.keyframes_wanted(now),
        };
        if wanted != 0 {
            match p.video.and_then(|mid| s.rtc.writer(mid)) {
                Some(mut w) => {
                    for (i, rid) in p.layers.iter().enumerate() {
                        if wanted & (1 << i) != 0 {
                            let r =
                                w.request_keyframe(*rid, str0m::media::KeyframeRequestKind::Pli);
                            crate::debug!(
                                "webrtc session {}: keyframe asked for (layer {rid:?}: {r:?})",
                                s.key
                            );
                        }
                    }
                }
                None => crate::debug!(
                    "webrtc session {}: no video m-line to ask a keyframe of",
                    s.key
                ),
            }
        }
        streams.note_input(id, m.data.len() as u64, now);
        if events.is_empty() {
            return;
        }
        // One output per stream and batch: frames append to the last one.
        if self.ingest.last().is_none_or(|o| o.stream != Some(id)) {
            self.ingest.push(IngestOutput {
                stream: Some(id),
                ..IngestOutput::default()
            });
        }
        for e in events {
            match e {
                ingest::IngestEvent::Tracks(tracks) => {
                    // New tracks start the outputs' muxers afresh: what came
                    // before goes out first.
                    if self.ingest.last().is_some_and(|o| !o.frames.is_empty()) {
                        self.ingest.push(IngestOutput {
                            stream: Some(id),
                            ..IngestOutput::default()
                        });
                    }
                    let first = streams.get(id).filter(|st| st.tracks().is_empty());
                    let has = |c: Codec| tracks.iter().any(|t| t.codec == c);
                    if let Some(st) = first.filter(|_| has(Codec::Opus)) {
                        crate::info!(
                            "stream [{}/{}/{}]: its audio is Opus: LL-HLS, HLS, SRT, MPEG-TS, recordings and WebRTC carry it; RTMP outputs carry its video only (RTMP has no Opus)",
                            st.vhost,
                            st.app,
                            st.name
                        );
                    }
                    if let Some(st) = streams.get(id).filter(|_| has(Codec::Vp8)) {
                        crate::warn!(
                            "stream [{}/{}/{}]: its video is VP8 (the publisher offered no H.264): only WebRTC viewers get it; LL-HLS, HLS, RTMP, SRT, MPEG-TS and recordings carry its audio only",
                            st.vhost,
                            st.app,
                            st.name
                        );
                    }
                    streams.set_tracks(id, tracks);
                    if let Some(o) = self.ingest.last_mut() {
                        o.tracks_changed = true;
                    }
                }
                ingest::IngestEvent::Frame(f) => {
                    streams.on_frame(id, &f);
                    if let Some(o) = self.ingest.last_mut() {
                        o.frames.push(f);
                    }
                }
            }
        }
    }
}
