//! Push publishing: everything between a `:startPush` and the bytes a
//! destination receives, with no socket and no clock of its own.
//!
//! - [`request`]: `:startPush` validation, destination URLs, track selection;
//! - [`task`]: the task table (held by the registry), states, back-off;
//! - [`feed`]: a stream's frames shared by all of its sessions (RTMP chunked
//!   once per stream), each session a cursor into it;
//! - [`session`]: one [`session::PushSession`] per running task, sans-IO over
//!   the RTMP client, the SRT caller and the TS muxer;
//! - [`manager`]: which tasks run, their sessions, reports, retries and
//!   queue budgets (driven by the loop; `server::push_io` owns the sockets).

pub(crate) mod feed;
pub(crate) mod manager;
pub(crate) mod pacing;
pub mod request;
pub(crate) mod session;
pub mod task;

#[cfg(test)]
mod sim_tests;
