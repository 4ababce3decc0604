//! kiln: a single-threaded live streaming relay with an
//! OvenMediaEngine-compatible management API. See DESIGN.md in the shared
//! folder and README.md for the shape; each module says what it is.
#![deny(unsafe_code)]

pub mod log;

pub mod api;
pub mod clock;
pub mod codec;
pub mod config;
pub mod http;
pub mod media;
pub mod metrics;
pub mod ports;
pub mod push;
pub mod rtmp;
pub mod server;
pub mod srt;
pub mod state;
pub mod sys;
pub mod tls;
pub mod ts;
pub mod wildcard;
