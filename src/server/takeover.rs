//! A publisher that reconnects takes its name back (OME's
//! `BlockDuplicateStreamName`, and a silent publisher's name): the new
//! RTMP or SRT publisher takes the live stream over, its viewers and
//! outputs stay, its frames go on on the stream's timeline
//! ([`crate::state::streams::Continue`]), and the old publisher's endpoint
//! is told to let go ([`Endpoint::yield_stream`](super::endpoint::Endpoint::yield_stream)).

use super::endpoint::Cx;
use crate::state::streams::{SourceType, StreamId};

/// A publisher of a name that is live takes the stream over when its
/// application lets it (`BlockDuplicateStreamName` false, or the live
/// publisher silent for [`TAKE_OVER_AFTER`]): the stream, its viewers and
/// outputs stay, and the loop tells the old publisher to let go. The
/// stream, if taken.
pub(crate) fn take_over(
    cx: &mut Cx<'_>,
    (vhost, app, name): (&str, &str, &str),
    source: SourceType,
    owner: u64,
) -> Option<StreamId> {
    use crate::state::app::TAKE_OVER_AFTER;
    let reg = &mut cx.api.registry;
    let provider = reg.app(vhost, app).and_then(|a| match source {
        SourceType::Srt => a.providers.srt.as_ref(),
        _ => a.providers.rtmp.as_ref(),
    });
    let blocks = provider.is_none_or(|p| p.blocks_duplicates());
    let id = reg.streams.find(vhost, app, name)?.id;
    let now = (cx.now, crate::clock::Now::read(cx.now).unix_ms);
    if !reg.streams.may_take_over(id, blocks, TAKE_OVER_AFTER, now) {
        return None;
    }
    let old = reg.streams.take_over(id, source, owner)?;
    cx.out.taken_over.push((old, id));
    Some(id)
}
