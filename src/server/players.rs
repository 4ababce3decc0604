//! Which connections play which stream (RTMP play): the loop hands each
//! stream's ingest output to its players.

use crate::state::streams::{StreamId, StreamMap};

#[derive(Default)]
pub(crate) struct Players {
    by_stream: StreamMap<Vec<usize>>,
}

impl Players {
    pub(crate) fn add(&mut self, stream: StreamId, token: usize) {
        let list = self.by_stream.entry(stream).or_default();
        if !list.contains(&token) {
            list.push(token);
        }
    }

    pub(crate) fn remove(&mut self, stream: StreamId, token: usize) {
        if let Some(list) = self.by_stream.get_mut(&stream) {
            list.retain(|t| *t != token);
            if list.is_empty() {
                self.by_stream.remove(&stream);
            }
        }
    }

    /// The players of `stream` (a copy: calling them may change the set).
    pub(crate) fn of(&self, stream: StreamId) -> Vec<usize> {
        self.by_stream.get(&stream).cloned().unwrap_or_default()
    }
}
