//! The RTMP handshake, both sides, incremental across any read split.
//!
//! Server side ([`ServerHandshake`]): accepts the simple handshake (C1
//! version field zero, S2 echoes C1) and the digest ("FP9") handshake that
//! Flash Player 9+, ffmpeg and OBS/librtmp send: the C1 digest is looked for
//! at both offset schemes and validated with the Genuine FP key; S1 and S2
//! are then built with the FMS key so clients that check them accept them.
//! A C1 with a version but no valid digest gets the simple answer.
//!
//! Client side ([`ClientHandshake`]): sends a digest C1 (scheme 0, as
//! ffmpeg's client does, which nginx-rtmp, ffmpeg -listen and the big
//! platforms accept) and answers with C2 = S1 echoed, like ffmpeg when
//! publishing. The server's digests are not checked.
//!
//! Not here: RTMPE (encrypted handshake, C0 = 6) — rejected. Random bytes
//! come from `ring::rand`; no clock is read (time fields are zero).

use std::fmt;

use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};

/// Size of C1/C2/S1/S2.
pub const HANDSHAKE_SIZE: usize = 1536;
const RTMP_VERSION: u8 = 3;
const DIGEST_LEN: usize = 32;

const KEY_TAIL: [u8; 32] = [
    0xF0, 0xEE, 0xC2, 0x4A, 0x80, 0x68, 0xBE, 0xE8, 0x2E, 0x00, 0xD0, 0xD1, 0x02, 0x9E, 0x7E, 0x57,
    0x6E, 0xEC, 0x5D, 0x2D, 0x29, 0x80, 0x6F, 0xAB, 0x93, 0xB8, 0xE6, 0x36, 0xCF, 0xEB, 0x31, 0xAE,
];
const FP_KEY_TEXT: &[u8; 30] = b"Genuine Adobe Flash Player 001";
const FMS_KEY_TEXT: &[u8; 36] = b"Genuine Adobe Flash Media Server 001";

fn fp_key() -> [u8; 62] {
    let mut k = [0u8; 62];
    k[..30].copy_from_slice(FP_KEY_TEXT);
    k[30..].copy_from_slice(&KEY_TAIL);
    k
}

fn fms_key() -> [u8; 68] {
    let mut k = [0u8; 68];
    k[..36].copy_from_slice(FMS_KEY_TEXT);
    k[36..].copy_from_slice(&KEY_TAIL);
    k
}

/// Why the handshake failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandshakeError {
    /// C0/S0 named a version other than 3 (6 would be RTMPE).
    UnsupportedVersion(u8),
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::UnsupportedVersion(v) => {
                write!(f, "unsupported RTMP version {v} in handshake")
            }
        }
    }
}

impl std::error::Error for HandshakeError {}

/// Where the digest sits in a 1536-byte C1/S1 for the two schemes.
fn digest_offset(block: &[u8; HANDSHAKE_SIZE], scheme: u8) -> usize {
    let base = if scheme == 0 { 8 } else { 772 };
    let sum: usize = block[base..base + 4].iter().map(|&b| b as usize).sum();
    sum % 728 + base + 4
}

fn hmac_sha256(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let k = hmac::Key::new(hmac::HMAC_SHA256, key);
    let mut ctx = hmac::Context::with_key(&k);
    for p in parts {
        ctx.update(p);
    }
    let mut out = [0u8; 32];
    out.copy_from_slice(ctx.sign().as_ref());
    out
}

/// The digest of `block` without its 32 digest bytes at `offset`.
fn block_digest(block: &[u8; HANDSHAKE_SIZE], offset: usize, key: &[u8]) -> [u8; 32] {
    hmac_sha256(key, &[&block[..offset], &block[offset + DIGEST_LEN..]])
}

/// Finds and validates the client digest in C1; returns it.
fn find_client_digest(c1: &[u8; HANDSHAKE_SIZE]) -> Option<[u8; 32]> {
    let key = fp_key();
    for scheme in [1u8, 0] {
        let off = digest_offset(c1, scheme);
        let expect = block_digest(c1, off, &key[..30]);
        if expect[..] == c1[off..off + DIGEST_LEN] {
            return Some(expect);
        }
    }
    None
}

fn fill_random(buf: &mut [u8]) {
    if SystemRandom::new().fill(buf).is_err() {
        // Not security relevant: any bytes will do.
        for (i, b) in buf.iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(7);
        }
    }
}

/// Builds S1 (digest form, scheme 0) and S2 answering a validated C1.
fn digest_s1_s2(client_digest: &[u8; 32], out: &mut Vec<u8>) {
    let fms = fms_key();
    let mut s1 = [0u8; HANDSHAKE_SIZE];
    fill_random(&mut s1[8..]);
    s1[..4].copy_from_slice(&[0, 0, 0, 0]);
    s1[4..8].copy_from_slice(&[4, 5, 0, 1]); // "FMS 4.5.0.1"
    let off = digest_offset(&s1, 0);
    let d = block_digest(&s1, off, &fms[..36]);
    s1[off..off + DIGEST_LEN].copy_from_slice(&d);

    let mut s2 = [0u8; HANDSHAKE_SIZE];
    fill_random(&mut s2[..HANDSHAKE_SIZE - DIGEST_LEN]);
    let temp = hmac_sha256(&fms, &[client_digest]);
    let sig = hmac_sha256(&temp, &[&s2[..HANDSHAKE_SIZE - DIGEST_LEN]]);
    s2[HANDSHAKE_SIZE - DIGEST_LEN..].copy_from_slice(&sig);

    out.extend_from_slice(&s1);
    out.extend_from_slice(&s2);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ServerState {
    /// Waiting for C0 + C1.
    C0C1,
    /// S0 S1 S2 sent; waiting for C2.
    C2,
    Done,
}

/// Server side of the handshake.
#[derive(Debug)]
pub struct ServerHandshake {
    state: ServerState,
    buf: Vec<u8>,
}

impl Default for ServerHandshake {
    fn default() -> Self {
        ServerHandshake {
            state: ServerState::C0C1,
            buf: Vec::with_capacity(1 + HANDSHAKE_SIZE),
        }
    }
}

impl ServerHandshake {
    pub fn is_done(&self) -> bool {
        self.state == ServerState::Done
    }

    /// Feeds received bytes, appends S0 S1 S2 to `out` once C1 is complete.
    /// Returns how many bytes of `input` the handshake took; the rest (once
    /// done) belong to the chunk stream.
    pub fn handle(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, HandshakeError> {
        let mut used = 0;
        while used < input.len() && self.state != ServerState::Done {
            let want = match self.state {
                ServerState::C0C1 => 1 + HANDSHAKE_SIZE,
                _ => HANDSHAKE_SIZE,
            };
            let n = (want - self.buf.len()).min(input.len() - used);
            self.buf.extend_from_slice(&input[used..used + n]);
            used += n;
            if let Some(&v) = self.buf.first() {
                if self.state == ServerState::C0C1 && v != RTMP_VERSION {
                    return Err(HandshakeError::UnsupportedVersion(v));
                }
            }
            if self.buf.len() < want {
                break;
            }
            match self.state {
                ServerState::C0C1 => {
                    let mut c1 = [0u8; HANDSHAKE_SIZE];
                    c1.copy_from_slice(&self.buf[1..]);
                    self.answer(&c1, out);
                    self.state = ServerState::C2;
                }
                _ => self.state = ServerState::Done,
            }
            self.buf.clear();
        }
        Ok(used)
    }

    fn answer(&self, c1: &[u8; HANDSHAKE_SIZE], out: &mut Vec<u8>) {
        out.reserve(1 + 2 * HANDSHAKE_SIZE);
        out.push(RTMP_VERSION);
        let digest = if c1[4..8] != [0, 0, 0, 0] {
            find_client_digest(c1)
        } else {
            None
        };
        match digest {
            Some(d) => digest_s1_s2(&d, out),
            None => {
                let mut s1 = [0u8; HANDSHAKE_SIZE];
                fill_random(&mut s1[8..]);
                out.extend_from_slice(&s1);
                out.extend_from_slice(c1);
            }
        }
    }
}

/// Client side of the handshake.
#[derive(Debug)]
pub struct ClientHandshake {
    done: bool,
    buf: Vec<u8>,
}

impl ClientHandshake {
    /// Starts the handshake: appends C0 + C1 to `out`.
    pub fn new(out: &mut Vec<u8>) -> Self {
        let mut c1 = [0u8; HANDSHAKE_SIZE];
        fill_random(&mut c1[8..]);
        c1[4..8].copy_from_slice(&[9, 0, 124, 2]); // Flash Player 9.0.124.2
        let off = digest_offset(&c1, 0);
        let d = block_digest(&c1, off, &fp_key()[..30]);
        c1[off..off + DIGEST_LEN].copy_from_slice(&d);
        out.push(RTMP_VERSION);
        out.extend_from_slice(&c1);
        ClientHandshake {
            done: false,
            buf: Vec::with_capacity(1 + 2 * HANDSHAKE_SIZE),
        }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Feeds received bytes; once S0 S1 S2 are in, appends C2 to `out`.
    /// Returns how many bytes of `input` the handshake took.
    pub fn handle(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, HandshakeError> {
        if self.done {
            return Ok(0);
        }
        let want = 1 + 2 * HANDSHAKE_SIZE;
        let n = (want - self.buf.len()).min(input.len());
        self.buf.extend_from_slice(&input[..n]);
        if let Some(&v) = self.buf.first() {
            if v != RTMP_VERSION {
                return Err(HandshakeError::UnsupportedVersion(v));
            }
        }
        if self.buf.len() == want {
            out.extend_from_slice(&self.buf[1..1 + HANDSHAKE_SIZE]);
            self.done = true;
            self.buf = Vec::new();
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn run_server(input: &[u8], splits: &[usize]) -> (ServerHandshake, Vec<u8>, usize) {
        let mut s = ServerHandshake::default();
        let mut out = Vec::new();
        let mut pos: usize = 0;
        let mut used = 0;
        for &k in splits.iter().chain(std::iter::once(&usize::MAX)) {
            let end = pos.saturating_add(k).min(input.len());
            used += s.handle(&input[pos..end], &mut out).unwrap();
            pos = end;
            if s.is_done() {
                break;
            }
        }
        (s, out, used)
    }

    #[test]
    fn simple_handshake_echoes_c1() {
        let mut input = vec![3u8];
        let c1: Vec<u8> = (0..HANDSHAKE_SIZE).map(|i| (i * 7) as u8).collect();
        let mut c1z = c1.clone();
        c1z[4..8].copy_from_slice(&[0, 0, 0, 0]);
        input.extend_from_slice(&c1z);
        input.extend_from_slice(&[0u8; HANDSHAKE_SIZE]);
        input.extend_from_slice(&[0xAA, 0xBB]);
        let (s, out, used) = run_server(&input, &[1, 1000, 3]);
        assert!(s.is_done());
        assert_eq!(used, input.len() - 2);
        assert_eq!(out.len(), 1 + 2 * HANDSHAKE_SIZE);
        assert_eq!(out[0], 3);
        assert_eq!(&out[1 + HANDSHAKE_SIZE..], &c1z[..]);
    }

    #[test]
    fn digest_handshake_with_client() {
        let mut c0c1 = Vec::new();
        let mut client = ClientHandshake::new(&mut c0c1);
        let c1: [u8; HANDSHAKE_SIZE] = c0c1[1..].try_into().unwrap();
        let cd = find_client_digest(&c1).expect("client digest valid");

        let mut s = ServerHandshake::default();
        let mut s_out = Vec::new();
        assert_eq!(s.handle(&c0c1, &mut s_out).unwrap(), c0c1.len());
        // S1 carries a valid FMS digest at scheme 0.
        let s1: [u8; HANDSHAKE_SIZE] = s_out[1..1 + HANDSHAKE_SIZE].try_into().unwrap();
        let off = digest_offset(&s1, 0);
        assert_eq!(block_digest(&s1, off, &fms_key()[..36]), s1[off..off + 32]);
        // S2 signature as ffmpeg's client checks it.
        let s2 = &s_out[1 + HANDSHAKE_SIZE..];
        let temp = hmac_sha256(&fms_key(), &[&cd]);
        assert_eq!(hmac_sha256(&temp, &[&s2[..1504]]), s2[1504..]);

        let mut c2 = Vec::new();
        for b in s_out.chunks(100) {
            client.handle(b, &mut c2).unwrap();
        }
        assert!(client.is_done());
        assert_eq!(&c2[..], &s1[..]);
        s.handle(&c2, &mut s_out).unwrap();
        assert!(s.is_done());
    }

    #[test]
    fn scheme1_digest_accepted() {
        let mut c1 = [5u8; HANDSHAKE_SIZE];
        c1[4..8].copy_from_slice(&[128, 0, 7, 2]);
        let off = digest_offset(&c1, 1);
        let d = block_digest(&c1, off, &fp_key()[..30]);
        c1[off..off + 32].copy_from_slice(&d);
        assert_eq!(find_client_digest(&c1), Some(d));
    }

    #[test]
    fn bad_version_rejected() {
        let mut s = ServerHandshake::default();
        assert_eq!(
            s.handle(&[6], &mut Vec::new()),
            Err(HandshakeError::UnsupportedVersion(6))
        );
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..4000)) {
            let mut s = ServerHandshake::default();
            let _ = s.handle(&data, &mut Vec::new());
            let mut c = ClientHandshake::new(&mut Vec::new());
            let _ = c.handle(&data, &mut Vec::new());
        }

        #[test]
        fn any_split_same_answer(splits in prop::collection::vec(1usize..700, 0..10)) {
            let mut input = vec![3u8];
            input.extend((0..HANDSHAKE_SIZE).map(|i| if (4..8).contains(&i) { 0 } else { i as u8 }));
            input.extend_from_slice(&[1u8; HANDSHAKE_SIZE]);
            let (s, out, used) = run_server(&input, &splits);
            prop_assert!(s.is_done());
            prop_assert_eq!(used, input.len());
            prop_assert_eq!(&out[1 + HANDSHAKE_SIZE..], &input[1..1 + HANDSHAKE_SIZE]);
        }
    }
}
