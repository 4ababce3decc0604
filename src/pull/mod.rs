//! Pulled streams (DECISIONS 12): `POST .../apps/{app}/streams` makes kiln
//! take a stream from another server (an IP camera over RTSP), trying the
//! request's URLs in order and again after a back-off. `request` is the
//! API body and the durable spec, `table` every pull's course (sans-IO);
//! the protocol cores are `crate::rtsp`, the I/O `server/pull_io.rs`.

pub mod origin_map;
pub mod origins;
pub mod request;
pub mod resp;
pub mod table;

pub use request::{PullSpec, Source};
pub use table::{PullKey, PullTable};
