//! A publisher that reconnects takes its name back (OME's
//! `BlockDuplicateStreamName`, and a silent publisher's name): the new
//! RTMP or SRT publisher takes the live stream over, its viewers and
//! outputs stay, its frames go on on the stream's timeline
//! ([`crate::state::streams::Continue`]), and the old publisher's endpoint
//! is told to let go ([`Endpoint::yield_stream`](super::endpoint::Endpoint::yield_stream)).

use super::endpoint::Cx;
use crate::state::streams::{Newcomer, SourceType, StreamId};
use std::net::SocketAddr;

/// A publisher of a name that is live takes the stream over when its
/// application lets it (`BlockDuplicateStreamName` false, or the live
/// publisher silent for [`TAKE_OVER_AFTER`] and the newcomer from its
/// address or vouched for by admission): the stream, its viewers and
/// outputs stay, its `sourceUrl` names the newcomer, and the loop tells
/// the old publisher to let go. The stream, if taken.
pub(crate) fn take_over(
    cx: &mut Cx<'_>,
    (vhost, app, name): (&str, &str, &str),
    (source, owner): (SourceType, u64),
    (peer, vouched): (SocketAddr, bool),
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
    let newcomer = Newcomer {
        ip: peer.ip(),
        vouched,
    };
    if !reg
        .streams
        .may_take_over(id, blocks, TAKE_OVER_AFTER, now, newcomer)
    {
        return None;
    }
    let old = reg.streams.take_over(id, source, owner)?;
    let scheme = match source {
        SourceType::Srt => "SRT",
        _ => "TCP",
    };
    reg.streams.set_publisher_addr(id, scheme, peer);
    cx.out.taken_over.push((old, id));
    Some(id)
}
