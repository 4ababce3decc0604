//! Push publishing, the parts that need no socket: the per-destination
//! frame queue with its drop policy, and UDP pacing. The task table is in
//! `state::push`; the socket glue in `server::push_out`.

pub mod pacing;
pub mod queue;
