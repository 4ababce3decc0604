//! RTSP pull *core*: the client that takes a stream from an IP camera or
//! another server (`rtsp://`), sans-IO. `message` is RTSP/1.0 on the TCP
//! connection (responses, interleaved frames, authorization), `sdp` the
//! session description, `rtp` the packets and depacketizers, `client` the
//! DESCRIBE/SETUP/PLAY state machine that turns them into kiln tracks and
//! frames.

pub mod client;
pub mod message;
pub mod rtp;
pub mod sdp;

pub use client::{ClientEvent, RtspClient};
pub use message::RtspUrl;
