//! kiln: a single-threaded live streaming relay with an
//! OvenMediaEngine-compatible management API. See ARCHITECTURE.md for the
//! shape and how to add a feature; each module says what it is.
//!
//! The layers, lowest first. An import (`use crate::...` or any `crate::`
//! path) points down, or sideways inside a `(shared)` layer without a cycle;
//! never up, and never between two modules of an `(apart)` layer: two
//! features share a piece by moving it down. `tests/layers.rs` holds this
//! (test code is exempt).
//!
//! layer cores (shared): clock codec files fmp4 http log media mp4 ports rate rtmp rtsp srt sys tls ts wildcard
//! layer model (shared): config state
//! layer features (apart): admission channel hls metrics pull push record webrtc
//! layer api (apart): api
//! layer server (apart): server
//!
//! `main.rs` (the binary) is above them all.
#![deny(unsafe_code)]
// What is `pub` is the surface the binary, the benches, the fuzz targets
// and the tests use; the rest is `pub(crate)`.
#![warn(unreachable_pub)]

pub mod log;

pub mod admission;
pub mod api;
pub mod channel;
pub mod clock;
pub mod codec;
pub mod config;
pub mod files;
pub mod fmp4;
pub mod hls;
pub mod http;
pub mod media;
pub(crate) mod metrics;
pub mod mp4;
pub(crate) mod ports;
pub mod pull;
pub mod push;
pub mod rate;
pub mod record;
pub mod rtmp;
pub mod rtsp;
pub mod server;
pub mod srt;
pub mod state;
pub mod sys;
pub mod tls;
pub mod ts;
#[cfg(feature = "webrtc")]
pub mod webrtc;
pub(crate) mod wildcard;
