//! The loop's plug-ins, one per feature (see [`super::feature`]). The
//! order of [`all`] is the order each is told of ingest output and effects
//! and driven: players hear frames first (the lowest delay), then the
//! outputs, then the features that open sessions of their own.

mod access;
mod channels;
mod history;
mod hls;
mod origin_map;
mod players;
mod pull;
mod push;
mod record;
#[cfg(feature = "webrtc")]
mod webrtc;

use super::feature::Feature;

/// Every feature of the loop.
pub(crate) fn all() -> Vec<Box<dyn Feature>> {
    vec![
        Box::new(players::Players),
        #[cfg(feature = "webrtc")]
        Box::new(webrtc::WebRtc::default()),
        Box::new(push::Push::default()),
        Box::new(hls::Hls),
        Box::new(record::Record),
        Box::new(access::Access),
        Box::new(origin_map::OriginMaps),
        Box::new(pull::Pull),
        Box::new(channels::Channels::default()),
        Box::new(history::History::default()),
    ]
}
