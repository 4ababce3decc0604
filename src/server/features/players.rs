//! RTMP and SRT players: each gets what its stream did, at once.

use crate::server::core::Core;
use crate::server::feature::Feature;
use crate::state::streams::IngestOutput;
use mio::Token;
use std::time::Instant;

pub(crate) struct Players;

impl Feature for Players {
    fn on_ingest(&mut self, o: &IngestOutput, core: &mut Core, now: Instant) {
        let Some(id) = o.stream.or(o.ended) else {
            return;
        };
        for token in core.players.of(id) {
            // Players produce nothing for the rest of the server.
            let _ = core.guarded(Token(token), now, |ep, cx| ep.on_media(o, cx));
        }
    }

    fn drive(&mut self, _core: &mut Core, _now: Instant) -> Option<Instant> {
        None
    }
}
