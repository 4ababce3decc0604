//! A feature as the loop sees it: one plug-in per feature (push, pull, the
//! origin maps, LL-HLS, recording, admission, players), called in a list.
//! Each is the glue between the loop and its feature's sans-IO state
//! (kept in [`crate::api::Api`], where the API reaches it): what it does
//! with a stream's ingest output and with an API effect, what it has for
//! the loop (sessions to open, endpoints to wake, decisions to hand over)
//! and when its timer is next due. `features::all` is the list; adding a
//! feature is one file in `features/` and one line there.

use super::core::Core;
use crate::api::Effect;
use crate::files::FileEvent;
use crate::state::streams::IngestOutput;
use std::time::Instant;

pub(crate) trait Feature {
    /// Once, after the state file is restored and before the first poll.
    fn start(&mut self, _core: &mut Core, _now: Instant) {}

    /// What a stream did: frames, tracks, its start or end.
    fn on_ingest(&mut self, _out: &IngestOutput, _core: &mut Core, _now: Instant) {}

    /// An API handler's effect (every plug-in sees each; most are one's).
    fn on_effect(&mut self, _effect: &Effect, _core: &mut Core, _now: Instant) {}

    /// A file operation the writer finished or could not do: `None` when
    /// it was this feature's, else the event back for the next.
    fn on_file_event(
        &mut self,
        event: FileEvent,
        _core: &mut Core,
        _now: Instant,
    ) -> Option<FileEvent> {
        Some(event)
    }

    /// The poll was woken from another thread (a feature's worker may
    /// have results).
    fn on_wake(&mut self, _core: &mut Core, _now: Instant) {}

    /// Carries out what the feature has for the loop. Returns when its
    /// timer is next due.
    fn drive(&mut self, core: &mut Core, now: Instant) -> Option<Instant>;

    /// Its timer is due (then `drive` follows).
    fn timeout(&mut self, _core: &mut Core, _now: Instant) {}

    /// The server stops (SIGINT, SIGTERM): finish what must not be left
    /// half-written (a dump's playlists, a recording's file and info), as
    /// file operations `drive` then hands over; the loop waits a moment
    /// for the writer before it exits.
    fn shutdown(&mut self, _core: &mut Core, _now: Instant) {}
}
