//! kiln: a single-threaded live streaming relay with an
//! OvenMediaEngine-compatible management API. See DESIGN.md in the shared
//! folder and README.md for the shape; each module says what it is.
#![deny(unsafe_code)]
// What is `pub` is the surface the binary, the benches, the fuzz targets
// and the tests use; the rest is `pub(crate)`.
#![warn(unreachable_pub)]

pub mod log;

pub mod admission;
pub mod api;
pub mod clock;
pub mod codec;
pub mod config;
pub mod files;
pub mod fmp4;
pub mod hls;
pub mod http;
pub mod media;
pub(crate) mod metrics;
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
pub(crate) mod wildcard;
