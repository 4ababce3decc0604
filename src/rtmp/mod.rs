//! RTMP as sans-IO state machines: handshake, chunk stream, AMF0, FLV tag
//! bodies, and the two sessions kiln runs (the publisher-facing
//! [`server::ServerSession`] for ingest and the [`client::ClientSession`] for
//! push).
//!
//! Nothing here touches a socket or reads the clock: bytes go in through
//! `handle_input`, bytes to send come out of `pending_output` /
//! `consume_output` (write straight from the slice, consume what the socket
//! took), and what happened comes out of `poll_event`. No timers are
//! needed: RTMP has none a relay must drive.
//!
//! Not here: RTMPS (the loop wraps the byte stream in TLS), RTMPE/RTMPT,
//! playback sessions, AMF3 values (AMF3 command messages whose body is AMF0
//! after the 0x00 marker are accepted).

use std::fmt;

pub mod amf0;
pub mod chunk;
pub mod client;
pub mod command;
pub mod flv;
pub mod handshake;
pub mod media_out;
pub mod server;

pub use client::{ClientConfig, ClientEvent, ClientSession, ClientState};
pub use server::{ServerConfig, ServerEvent, ServerSession};

/// Why an RTMP session failed. Every variant is fatal for the session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RtmpError {
    Handshake(handshake::HandshakeError),
    Chunk(chunk::ChunkError),
    Amf0(amf0::Amf0Error),
    Flv(flv::FlvError),
    /// The peer broke the command sequence (the text says how).
    Protocol(&'static str),
    /// The session was already closed or failed.
    Closed,
}

impl fmt::Display for RtmpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RtmpError::Handshake(e) => write!(f, "RTMP handshake: {e}"),
            RtmpError::Chunk(e) => write!(f, "RTMP chunk stream: {e}"),
            RtmpError::Amf0(e) => write!(f, "RTMP command: {e}"),
            RtmpError::Flv(e) => write!(f, "RTMP media: {e}"),
            RtmpError::Protocol(e) => write!(f, "RTMP protocol: {e}"),
            RtmpError::Closed => write!(f, "RTMP session closed"),
        }
    }
}

impl std::error::Error for RtmpError {}

impl From<handshake::HandshakeError> for RtmpError {
    fn from(e: handshake::HandshakeError) -> Self {
        RtmpError::Handshake(e)
    }
}

impl From<chunk::ChunkError> for RtmpError {
    fn from(e: chunk::ChunkError) -> Self {
        RtmpError::Chunk(e)
    }
}

impl From<amf0::Amf0Error> for RtmpError {
    fn from(e: amf0::Amf0Error) -> Self {
        RtmpError::Amf0(e)
    }
}

impl From<flv::FlvError> for RtmpError {
    fn from(e: flv::FlvError) -> Self {
        RtmpError::Flv(e)
    }
}

/// Entry points for fuzz targets: each feeds arbitrary bytes through one
/// parser or state machine and ignores the result.
pub mod fuzz {
    use bytes::Bytes;

    pub fn fuzz_amf0(data: &[u8]) {
        let _ = super::amf0::decode_all(data);
    }

    pub fn fuzz_chunk(data: &[u8]) {
        let mut c = super::chunk::RtmpConnection::default();
        let _ = c.handle_input(data);
        while let Ok(Some(_)) = c.next_message() {}
    }

    pub fn fuzz_handshake(data: &[u8]) {
        let mut out = Vec::new();
        let _ = super::handshake::ServerHandshake::default().handle(data, &mut out);
        let _ = super::handshake::ClientHandshake::new(&mut out).handle(data, &mut out);
    }

    /// The bytes as one video and one audio tag, then cut at each 0xFF
    /// into several of each (sequence headers, then frames of the tracks
    /// they made, multitrack or not).
    pub fn fuzz_flv(data: &[u8]) {
        let b = Bytes::copy_from_slice(data);
        let mut ingest = super::flv::TagIngest::default();
        let _ = ingest.video(0, &b);
        let _ = ingest.audio(0, &b);
        for (i, tag) in b.split(|&x| x == 0xFF).enumerate() {
            let tag = b.slice_ref(tag);
            let _ = if i % 2 == 0 {
                ingest.video(i as u32, &tag)
            } else {
                ingest.audio(i as u32, &tag)
            };
            let _ = ingest.frames().count();
        }
        // panic-audit: fuzzing only; more tracks than the bound is the bug it finds.
        assert!(ingest.tracks().len() <= 2 * super::flv::MAX_TRACKS_PER_KIND);
    }

    /// Arbitrary bytes after a valid handshake, into a server session.
    pub fn fuzz_server(data: &[u8]) {
        let mut s = super::ServerSession::new(super::ServerConfig::default());
        let mut hs = vec![3u8];
        hs.extend_from_slice(&[0u8; 2 * super::handshake::HANDSHAKE_SIZE]);
        let _ = s.handle_input(&hs);
        for _ in 0..2 {
            let _ = s.handle_input(data);
            while let Some(e) = s.poll_event() {
                match e {
                    super::ServerEvent::Connect { .. } => s.accept_connect(),
                    super::ServerEvent::Publish { .. } => s.accept_publish(),
                    _ => {}
                }
            }
        }
    }

    /// Arbitrary bytes into a client session, raw and after a valid
    /// handshake.
    pub fn fuzz_client(data: &[u8]) {
        let config = super::ClientConfig::new("rtmp://127.0.0.1/app", "app", "key");
        let mut c = super::ClientSession::new(config.clone());
        let _ = c.handle_input(data);
        let mut c = super::ClientSession::new(config);
        let mut hs = vec![3u8];
        hs.extend_from_slice(&[0u8; 2 * super::handshake::HANDSHAKE_SIZE]);
        let _ = c.handle_input(&hs);
        let _ = c.handle_input(data);
        while c.poll_event().is_some() {}
    }
}
