//! AAC to Opus off the loop: one worker thread keeps a transcoder per
//! stream with WebRTC viewers ([`crate::webrtc::audio::AacToOpus`], about
//! 90 us of CPU per AAC frame) and wakes the poll with the Opus packets.
//! The loop never waits for it: what is queued and not yet transcoded is
//! bounded ([`MAX_QUEUED`]); past it, frames are dropped (a viewer hears a
//! gap) and the drop is logged once a minute.

use crate::state::streams::StreamId;
use crate::webrtc::audio::{AacToOpus, OpusPacket};
use crate::webrtc::AudioWork;
use mio::Waker;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// AAC frames handed to the worker and not yet transcoded (about 2.7 s of
/// one stream's audio, or 0.27 s of ten).
pub(crate) const MAX_QUEUED: usize = 128;

pub(crate) struct Transcoder {
    work: Sender<AudioWork>,
    done: Receiver<(StreamId, Vec<OpusPacket>)>,
    queued: Arc<AtomicUsize>,
    dropped: u64,
    last_drop_log: Option<Instant>,
}

impl Transcoder {
    pub(crate) fn start(waker: Arc<Waker>) -> std::io::Result<Transcoder> {
        let (wtx, wrx) = mpsc::channel::<AudioWork>();
        let (dtx, drx) = mpsc::channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let q = queued.clone();
        std::thread::Builder::new()
            .name("kiln-audio".into())
            .spawn(move || {
                // Per stream: (generation, its transcoder or why not).
                let mut coders: HashMap<StreamId, (u32, Result<AacToOpus, ()>)> = HashMap::new();
                for work in wrx {
                    match work {
                        AudioWork::Forget(stream) => {
                            coders.remove(&stream);
                        }
                        AudioWork::Frame {
                            stream,
                            generation,
                            asc,
                            frame,
                        } => {
                            q.fetch_sub(1, Ordering::Relaxed);
                            let slot = coders.entry(stream).or_insert((generation.wrapping_sub(1), Err(())));
                            if slot.0 != generation {
                                *slot = (
                                    generation,
                                    AacToOpus::new(&asc).map_err(|e| {
                                        crate::warn!("webrtc: stream {stream}: AAC audio not offered as Opus: {e}");
                                    }),
                                );
                            }
                            let Ok(coder) = &mut slot.1 else { continue };
                            match coder.push(&frame) {
                                Ok(p) if !p.is_empty() => {
                                    if dtx.send((stream, p)).is_err() {
                                        return;
                                    }
                                    let _ = waker.wake();
                                }
                                Ok(_) => {}
                                Err(e @ crate::webrtc::audio::AudioError::Decoder) => {
                                    crate::warn!("webrtc: stream {stream}: {e}")
                                }
                                Err(e) => crate::debug!("webrtc: stream {stream}: {e}"),
                            }
                        }
                    }
                }
            })?;
        Ok(Transcoder {
            work: wtx,
            done: drx,
            queued,
            dropped: 0,
            last_drop_log: None,
        })
    }

    /// Hands work to the worker (frames past the bound are dropped).
    pub(crate) fn submit(&mut self, work: Vec<AudioWork>, now: Instant) {
        for w in work {
            if matches!(w, AudioWork::Frame { .. }) {
                if self.queued.load(Ordering::Relaxed) >= MAX_QUEUED {
                    self.dropped += 1;
                    if self
                        .last_drop_log
                        .is_none_or(|t| now >= t + Duration::from_secs(60))
                    {
                        self.last_drop_log = Some(now);
                        crate::warn!(
                            "webrtc: the audio transcoder is behind; {} AAC frames dropped so far",
                            self.dropped
                        );
                    }
                    continue;
                }
                self.queued.fetch_add(1, Ordering::Relaxed);
            }
            let _ = self.work.send(w);
        }
    }

    /// Opus packets made since the last call, per stream in order.
    pub(crate) fn results(&mut self) -> impl Iterator<Item = (StreamId, Vec<OpusPacket>)> + '_ {
        self.done.try_iter()
    }
}
