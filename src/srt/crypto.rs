//! SRT encryption as libsrt (haicrypt) does it, sans-IO (DECISIONS 13).
//!
//! - **Keying material (KM) message**: the salt and the stream encrypting
//!   keys (SEKs, even and/or odd) wrapped with RFC 3394 under a key
//!   encrypting key (KEK) = PBKDF2-HMAC-SHA1(passphrase, last 8 bytes of
//!   the salt, 2048 iterations, key length). It travels in the handshake
//!   (KMREQ/KMRSP extensions) and, for key refreshes, in UMSG_EXT control
//!   packets; on the wire it is in network byte order.
//! - **Payloads**: AES-CTR with the SEK the packet's KK flags name; the IV
//!   is 0s with the packet sequence number (big-endian) at bytes 10-13, the
//!   block counter at 14-15, and the first 112 bits of the salt XORed in.
//! - **Key refresh** ([`TxCrypto`]): after `refresh_rate - pre_announce`
//!   packets a new SEK of the other parity is announced (KM with both
//!   keys), after `refresh_rate` packets it is used, and `pre_announce`
//!   packets later the old one is withdrawn (KM with the new key only).
//!   Every announcement is repeated until the peer answers it.
//!
//! The ciphers are RustCrypto's (`aes`, `ctr`, `aes-kw`); PBKDF2 and the
//! random salt and keys are ring's. Nothing here reads the clock or owns a
//! socket.

use aes::cipher::{KeyIvInit, StreamCipher};
use std::fmt;
use std::time::{Duration, Instant};

use super::packet::KeyFlags;

/// Salt length (libsrt: 16 bytes).
const SALT_LEN: usize = 16;
/// PBKDF2 uses the last 8 bytes of the salt.
const PBKDF2_SALT_LEN: usize = 8;
const PBKDF2_ITERATIONS: u32 = 2048;
/// RFC 3394 adds one 8-byte integrity block.
const WRAP_OVERHEAD: usize = 8;
/// Offset of the salt in a KM message.
const OFS_SALT: usize = 16;
/// The largest KM message: header, salt, two 32-byte keys, wrap block.
pub const KM_MAX_LEN: usize = OFS_SALT + SALT_LEN + 2 * 32 + WRAP_OVERHEAD;
/// libsrt's defaults: a new key every 2^24 packets, announced 2^16 before.
pub const DEFAULT_REFRESH_RATE: u64 = 1 << 24;
pub const DEFAULT_PRE_ANNOUNCE: u64 = 1 << 16;
/// An unanswered announcement is sent again this often, this many times.
const KM_RESEND_INTERVAL: Duration = Duration::from_secs(1);
const KM_MAX_RESENDS: u32 = 10;

/// libsrt's passphrase bounds.
pub const PASSPHRASE_MIN: usize = 10;
pub const PASSPHRASE_MAX: usize = 79;

/// KM states libsrt reports in a one-word KMRSP (SRT_KM_S_*).
pub const KM_STATE_UNSECURED: u32 = 0;
pub const KM_STATE_NOSECRET: u32 = 3;
pub const KM_STATE_BADSECRET: u32 = 4;

/// Why keying material was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KmError {
    /// Not a KM message (size, version, packet type, signature, cipher,
    /// salt or key length).
    Malformed(&'static str),
    /// The keys do not unwrap with our passphrase: a wrong passphrase.
    BadSecret,
}

impl fmt::Display for KmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KmError::Malformed(why) => write!(f, "malformed keying material: {why}"),
            KmError::BadSecret => f.write_str("wrong passphrase (keys do not unwrap)"),
        }
    }
}

impl std::error::Error for KmError {}

/// The passphrase and key length one side is configured with.
#[derive(Clone, PartialEq, Eq)]
pub struct CryptoConfig {
    pub passphrase: String,
    /// 16, 24 or 32 bytes (AES-128/192/256).
    pub key_len: usize,
    /// Packets per key (sender side).
    pub refresh_rate: u64,
    /// Packets before and after a switch both keys are announced.
    pub pre_announce: u64,
}

impl fmt::Debug for CryptoConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The passphrase is a secret: never printed.
        f.debug_struct("CryptoConfig")
            .field("key_len", &self.key_len)
            .field("refresh_rate", &self.refresh_rate)
            .field("pre_announce", &self.pre_announce)
            .finish_non_exhaustive()
    }
}

impl CryptoConfig {
    /// A config with libsrt's refresh defaults; checks the passphrase
    /// length (10-79) and key length (16, 24, 32; 0 means 16).
    pub fn new(passphrase: &str, key_len: usize) -> Result<Self, String> {
        let n = passphrase.len();
        if !(PASSPHRASE_MIN..=PASSPHRASE_MAX).contains(&n) {
            return Err(format!(
                "the passphrase must be {PASSPHRASE_MIN}-{PASSPHRASE_MAX} characters (it has {n})"
            ));
        }
        let key_len = if key_len == 0 { 16 } else { key_len };
        if ![16, 24, 32].contains(&key_len) {
            return Err(format!("pbkeylen must be 16, 24 or 32 (got {key_len})"));
        }
        Ok(CryptoConfig {
            passphrase: passphrase.to_string(),
            key_len,
            refresh_rate: DEFAULT_REFRESH_RATE,
            pre_announce: DEFAULT_PRE_ANNOUNCE,
        })
    }

    /// Sets the refresh schedule (libsrt's `kmrefreshrate`, `kmpreannounce`:
    /// the pre-announce must be at most half the rate).
    pub fn with_refresh(mut self, refresh_rate: u64, pre_announce: u64) -> Result<Self, String> {
        if refresh_rate == 0 || pre_announce == 0 || pre_announce > refresh_rate / 2 {
            return Err(format!(
                "kmpreannounce ({pre_announce}) must be 1 to half of kmrefreshrate ({refresh_rate})"
            ));
        }
        self.refresh_rate = refresh_rate;
        self.pre_announce = pre_announce;
        Ok(self)
    }
}

/// KEK = PBKDF2-HMAC-SHA1(passphrase, last 8 bytes of salt, 2048, key_len).
fn derive_kek(passphrase: &str, salt: &[u8; SALT_LEN], key_len: usize) -> Vec<u8> {
    let mut kek = vec![0u8; key_len];
    ring::pbkdf2::derive(
        ring::pbkdf2::PBKDF2_HMAC_SHA1,
        std::num::NonZeroU32::new(PBKDF2_ITERATIONS).unwrap_or(std::num::NonZeroU32::MIN),
        &salt[SALT_LEN - PBKDF2_SALT_LEN..],
        passphrase.as_bytes(),
        &mut kek,
    );
    kek
}

fn wrap(kek: &[u8], keys: &[u8]) -> Option<Vec<u8>> {
    match kek.len() {
        16 => aes_kw::KekAes128::try_from(kek).ok()?.wrap_vec(keys).ok(),
        24 => aes_kw::KekAes192::try_from(kek).ok()?.wrap_vec(keys).ok(),
        32 => aes_kw::KekAes256::try_from(kek).ok()?.wrap_vec(keys).ok(),
        _ => None,
    }
}

fn unwrap(kek: &[u8], wrapped: &[u8]) -> Option<Vec<u8>> {
    match kek.len() {
        16 => aes_kw::KekAes128::try_from(kek)
            .ok()?
            .unwrap_vec(wrapped)
            .ok(),
        24 => aes_kw::KekAes192::try_from(kek)
            .ok()?
            .unwrap_vec(wrapped)
            .ok(),
        32 => aes_kw::KekAes256::try_from(kek)
            .ok()?
            .unwrap_vec(wrapped)
            .ok(),
        _ => None,
    }
}

/// `len` random bytes from the system's generator (getrandom(2)); `None`
/// if it fails, and then no key is made at all.
fn random(len: usize) -> Option<Vec<u8>> {
    use ring::rand::SecureRandom;
    let mut buf = vec![0u8; len];
    ring::rand::SystemRandom::new().fill(&mut buf).ok()?;
    Some(buf)
}

/// A parsed KM message.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyMaterial {
    /// Which keys it carries (even, odd or both; even first).
    pub keys: KeyFlags,
    pub salt: [u8; SALT_LEN],
    pub key_len: usize,
    /// The wrapped keys (key_len per key + 8).
    pub wrapped: Vec<u8>,
}

impl fmt::Debug for KeyMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyMaterial")
            .field("keys", &self.keys)
            .field("key_len", &self.key_len)
            .finish_non_exhaustive()
    }
}

impl KeyMaterial {
    /// Parses a KM message (network byte order), bounded by its own
    /// lengths.
    pub fn parse(msg: &[u8]) -> Result<KeyMaterial, KmError> {
        if msg.len() < OFS_SALT {
            return Err(KmError::Malformed("shorter than its header"));
        }
        if msg[0] >> 4 != 1 || msg[0] & 0x0F != 2 {
            return Err(KmError::Malformed("not version 1 keying material"));
        }
        if u16::from_be_bytes([msg[1], msg[2]]) != 0x2029 {
            return Err(KmError::Malformed("wrong signature"));
        }
        let keys = KeyFlags::from_bits(u32::from(msg[3] & 3));
        if keys == KeyFlags::None {
            return Err(KmError::Malformed("carries no key"));
        }
        if msg[8] != 2 {
            return Err(KmError::Malformed("cipher is not AES-CTR"));
        }
        let salt_len = usize::from(msg[14]) * 4;
        let key_len = usize::from(msg[15]) * 4;
        if salt_len != SALT_LEN {
            return Err(KmError::Malformed("salt is not 16 bytes"));
        }
        if ![16, 24, 32].contains(&key_len) {
            return Err(KmError::Malformed("key length is not 16, 24 or 32"));
        }
        let count = if keys == KeyFlags::Both { 2 } else { 1 };
        let wrapped_len = count * key_len + WRAP_OVERHEAD;
        let end = OFS_SALT + SALT_LEN + wrapped_len;
        // The handshake pads a KM message to whole 32-bit words.
        if msg.len() < end || msg.len() > end + 3 {
            return Err(KmError::Malformed("length does not match its keys"));
        }
        let mut salt = [0u8; SALT_LEN];
        salt.copy_from_slice(&msg[OFS_SALT..OFS_SALT + SALT_LEN]);
        Ok(KeyMaterial {
            keys,
            salt,
            key_len,
            wrapped: msg[OFS_SALT + SALT_LEN..end].to_vec(),
        })
    }

    /// Appends the message (network byte order).
    pub fn write(&self, out: &mut Vec<u8>) {
        out.push(0x12); // version 1, packet type 2 (KM)
        out.extend_from_slice(&0x2029u16.to_be_bytes()); // "HAI"
        out.push(self.keys.bits() as u8);
        out.extend_from_slice(&[0, 0, 0, 0]); // KEKI 0
        out.extend_from_slice(&[2, 0, 2, 0]); // AES-CTR, no auth, SE TS/SRT
        out.extend_from_slice(&[0, 0, (SALT_LEN / 4) as u8, (self.key_len / 4) as u8]);
        out.extend_from_slice(&self.salt);
        out.extend_from_slice(&self.wrapped);
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(KM_MAX_LEN);
        self.write(&mut v);
        v
    }

    /// The keys in it, unwrapped with `passphrase`: (even, odd).
    fn unwrap_keys(&self, passphrase: &str) -> Result<EvenOdd, KmError> {
        let kek = derive_kek(passphrase, &self.salt, self.key_len);
        let keys = unwrap(&kek, &self.wrapped).ok_or(KmError::BadSecret)?;
        let (a, b) = keys.split_at(self.key_len.min(keys.len()));
        Ok(match self.keys {
            KeyFlags::Even => (Some(a.to_vec()), None),
            KeyFlags::Odd => (None, Some(a.to_vec())),
            _ => (Some(a.to_vec()), Some(b.to_vec())),
        })
    }
}

/// The even and the odd key a KM message carries (either may be absent).
type EvenOdd = (Option<Vec<u8>>, Option<Vec<u8>>);

/// One stream encrypting key with its cipher choice.
#[derive(Clone)]
struct Sek(Vec<u8>);

impl Sek {
    /// XORs `data` with the AES-CTR key stream of packet `seq`.
    fn apply(&self, salt: &[u8; SALT_LEN], seq: u32, data: &mut [u8]) {
        let mut iv = [0u8; 16];
        iv[10..14].copy_from_slice(&seq.to_be_bytes());
        for (v, s) in iv[..14].iter_mut().zip(salt) {
            *v ^= s;
        }
        let key = &self.0[..];
        match key.len() {
            16 => ctr::Ctr128BE::<aes::Aes128>::new(key.into(), (&iv).into()).apply_keystream(data),
            24 => ctr::Ctr128BE::<aes::Aes192>::new(key.into(), (&iv).into()).apply_keystream(data),
            32 => ctr::Ctr128BE::<aes::Aes256>::new(key.into(), (&iv).into()).apply_keystream(data),
            _ => {}
        }
    }
}

/// Both key slots (index 0 even, 1 odd).
#[derive(Clone, Default)]
struct KeyPair {
    salt: [u8; SALT_LEN],
    keys: [Option<Sek>; 2],
}

fn slot(flag: KeyFlags) -> Option<usize> {
    match flag {
        KeyFlags::Even => Some(0),
        KeyFlags::Odd => Some(1),
        _ => None,
    }
}

/// The receiving side: keys from the peer's KM messages.
pub struct RxCrypto {
    passphrase: String,
    pair: KeyPair,
    /// Packets that could not be decrypted (no key for their flag).
    pub undecryptable: u64,
}

impl fmt::Debug for RxCrypto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RxCrypto")
            .field("undecryptable", &self.undecryptable)
            .finish_non_exhaustive()
    }
}

impl RxCrypto {
    /// Takes the keys of a KM message (from the handshake's KMREQ or a
    /// later refresh): the KMRSP to send back is the same message.
    pub fn from_km(passphrase: &str, msg: &[u8]) -> Result<RxCrypto, KmError> {
        let mut rx = RxCrypto {
            passphrase: passphrase.to_string(),
            pair: KeyPair::default(),
            undecryptable: 0,
        };
        rx.handle_km(msg)?;
        Ok(rx)
    }

    /// A refresh: installs the keys a KM message carries (the others stay
    /// for late packets).
    pub fn handle_km(&mut self, msg: &[u8]) -> Result<(), KmError> {
        let km = KeyMaterial::parse(msg)?;
        let (even, odd) = km.unwrap_keys(&self.passphrase)?;
        if km.salt != self.pair.salt {
            self.pair = KeyPair {
                salt: km.salt,
                keys: [None, None],
            };
        }
        if let Some(k) = even {
            self.pair.keys[0] = Some(Sek(k));
        }
        if let Some(k) = odd {
            self.pair.keys[1] = Some(Sek(k));
        }
        Ok(())
    }

    /// Decrypts a payload in place; false when there is no key for it.
    pub fn decrypt(&mut self, flag: KeyFlags, seq: u32, data: &mut [u8]) -> bool {
        match slot(flag).and_then(|i| self.pair.keys[i].as_ref()) {
            Some(k) => {
                k.apply(&self.pair.salt, seq, data);
                true
            }
            None => {
                self.undecryptable += 1;
                false
            }
        }
    }
}

/// A data packet's payload as the receiver takes it: as is when sent in
/// the clear, else decrypted into `scratch`. `None` when it cannot be
/// used: encrypted with no keys here, or with a key not (yet) known (as
/// if lost).
pub(crate) fn plain_payload<'a>(
    flag: KeyFlags,
    seq: u32,
    payload: &'a [u8],
    keys: Option<&mut RxCrypto>,
    scratch: &'a mut Vec<u8>,
) -> Option<&'a [u8]> {
    match (flag, keys) {
        (KeyFlags::None, _) => Some(payload),
        (flag, Some(keys)) => {
            scratch.clear();
            scratch.extend_from_slice(payload);
            keys.decrypt(flag, seq, scratch).then_some(&scratch[..])
        }
        (_, None) => None,
    }
}

/// The sending side: our keys, their schedule and their announcements.
pub struct TxCrypto {
    config: CryptoConfig,
    kek: Vec<u8>,
    pair: KeyPair,
    /// The key in use.
    active: usize,
    /// Packets encrypted with the active key.
    count: u64,
    /// The previous key is still announced (until `pre_announce` packets
    /// after the switch).
    old_announced: bool,
    /// The next key is announced (before the switch).
    next_announced: bool,
    /// The announcement waiting for the peer's KMRSP, and when it goes
    /// again.
    pending: Option<(Vec<u8>, Instant, u32)>,
    /// Refreshes done (switches to a new key).
    pub refreshes: u64,
}

impl fmt::Debug for TxCrypto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TxCrypto")
            .field("active", &self.active)
            .field("count", &self.count)
            .field("refreshes", &self.refreshes)
            .finish_non_exhaustive()
    }
}

impl TxCrypto {
    /// A new salt and even key, as libsrt starts (`None` when the system
    /// has no randomness to give).
    pub fn new(config: CryptoConfig) -> Option<TxCrypto> {
        let mut salt = [0u8; SALT_LEN];
        salt.copy_from_slice(&random(SALT_LEN)?);
        let kek = derive_kek(&config.passphrase, &salt, config.key_len);
        let key = random(config.key_len)?;
        Some(TxCrypto {
            config,
            kek,
            pair: KeyPair {
                salt,
                keys: [Some(Sek(key)), None],
            },
            active: 0,
            count: 0,
            old_announced: false,
            next_announced: false,
            pending: None,
            refreshes: 0,
        })
    }

    /// The key length, as the handshake's encryption field advertises it.
    pub fn key_len(&self) -> usize {
        self.config.key_len
    }

    fn flag(i: usize) -> KeyFlags {
        if i == 0 {
            KeyFlags::Even
        } else {
            KeyFlags::Odd
        }
    }

    /// A KM message with the keys of the given slots.
    fn km(&self, slots: &[usize]) -> Vec<u8> {
        let mut keys = Vec::with_capacity(2 * self.config.key_len);
        for &i in slots {
            if let Some(k) = &self.pair.keys[i] {
                keys.extend_from_slice(&k.0);
            }
        }
        let flags = match slots {
            [0] => KeyFlags::Even,
            [1] => KeyFlags::Odd,
            _ => KeyFlags::Both,
        };
        KeyMaterial {
            keys: flags,
            salt: self.pair.salt,
            key_len: self.config.key_len,
            wrapped: wrap(&self.kek, &keys).unwrap_or_default(),
        }
        .to_bytes()
    }

    /// The KM message for the handshake's KMREQ: the active key.
    pub fn handshake_km(&self) -> Vec<u8> {
        self.km(&[self.active])
    }

    /// Checks the peer's KMRSP in the handshake: the same message back
    /// means it has our key; one word is its KM state (refusal).
    pub fn check_handshake_response(&self, rsp: &[u8]) -> Result<(), u32> {
        if rsp == self.handshake_km().as_slice() || rsp.starts_with(&self.handshake_km()) {
            return Ok(());
        }
        Err(km_state(rsp))
    }

    /// Encrypts one payload about to be sent as packet `seq`; returns the
    /// KK flags it goes with. Advances the refresh schedule.
    pub fn encrypt(&mut self, seq: u32, data: &mut [u8], now: Instant) -> KeyFlags {
        self.schedule(now);
        let flag = Self::flag(self.active);
        if let Some(k) = &self.pair.keys[self.active] {
            k.apply(&self.pair.salt, seq, data);
        }
        self.count += 1;
        flag
    }

    fn announce(&mut self, msg: Vec<u8>, now: Instant) {
        self.pending = Some((msg, now, 0));
    }

    fn schedule(&mut self, now: Instant) {
        let rate = self.config.refresh_rate;
        let pre = self.config.pre_announce;
        let other = 1 - self.active;
        if !self.next_announced && self.count >= rate - pre {
            // Pre-announce: a fresh key of the other parity, both keys sent.
            let Some(key) = random(self.config.key_len) else {
                return; // no randomness now: keep the key in use
            };
            self.pair.keys[other] = Some(Sek(key));
            self.next_announced = true;
            let msg = self.km(&[0, 1]);
            self.announce(msg, now);
        } else if self.next_announced && self.count >= rate {
            // Switch to the announced key; the old one stays for late
            // packets and retransmissions.
            self.active = other;
            self.count = 0;
            self.next_announced = false;
            self.old_announced = true;
            self.refreshes += 1;
        } else if self.old_announced && self.count >= pre {
            // Decommission the old key: announce the active one alone.
            self.old_announced = false;
            self.pair.keys[1 - self.active] = None;
            let msg = self.km(&[self.active]);
            self.announce(msg, now);
        }
    }

    /// The KM announcement to send now (a UMSG_EXT KMREQ), if one is due.
    pub fn poll_announcement(&mut self, now: Instant) -> Option<Vec<u8>> {
        let (msg, due, sent) = self.pending.as_mut()?;
        if now < *due {
            return None;
        }
        if *sent > KM_MAX_RESENDS {
            self.pending = None;
            return None;
        }
        *sent += 1;
        *due = now + KM_RESEND_INTERVAL;
        Some(msg.clone())
    }

    /// When [`TxCrypto::poll_announcement`] has something next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.pending.as_ref().map(|(_, due, _)| *due)
    }

    /// The peer's KMRSP to an announcement: it stops being repeated.
    pub fn handle_response(&mut self, rsp: &[u8]) {
        if self
            .pending
            .as_ref()
            .is_some_and(|(msg, _, _)| rsp.starts_with(msg))
        {
            self.pending = None;
        }
    }
}

/// The KM state in a one-word KMRSP. libsrt writes that word so that it
/// arrives little-endian; read either order, preferring the one that gives
/// a known state.
pub fn km_state(rsp: &[u8]) -> u32 {
    match rsp {
        [a, b, c, d, ..] => {
            let le = u32::from_le_bytes([*a, *b, *c, *d]);
            if le <= 6 {
                le
            } else {
                u32::from_be_bytes([*a, *b, *c, *d])
            }
        }
        _ => KM_STATE_NOSECRET,
    }
}

/// A one-word KMRSP carrying `state`, laid out as libsrt sends it.
pub fn km_state_response(state: u32) -> Vec<u8> {
    state.to_le_bytes().to_vec()
}

/// What a KM state means, for logs and `lastError`.
pub fn km_state_text(state: u32) -> &'static str {
    match state {
        KM_STATE_BADSECRET => "wrong passphrase",
        KM_STATE_NOSECRET => "the peer has no passphrase set",
        KM_STATE_UNSECURED => "the peer does not encrypt",
        _ => "the peer refused the keying material",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(len: usize) -> CryptoConfig {
        CryptoConfig::new("correct horse battery", len).unwrap()
    }

    #[test]
    fn config_bounds() {
        assert!(CryptoConfig::new("short", 16)
            .unwrap_err()
            .contains("10-79"));
        assert!(CryptoConfig::new(&"x".repeat(80), 16).is_err());
        assert!(CryptoConfig::new("long enough", 20)
            .unwrap_err()
            .contains("16, 24 or 32"));
        assert_eq!(CryptoConfig::new("long enough", 0).unwrap().key_len, 16);
        assert!(cfg(16).with_refresh(100, 60).is_err());
        assert!(cfg(16).with_refresh(100, 50).is_ok());
    }

    /// RFC 3394 section 4.1 (the test vector of the key wrap itself).
    #[test]
    fn key_wrap_vector() {
        let kek: Vec<u8> = (0u8..16).collect();
        let data = [
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD,
            0xEE, 0xFF,
        ];
        let wrapped = wrap(&kek, &data).unwrap();
        assert_eq!(
            wrapped,
            [
                0x1F, 0xA6, 0x8B, 0x0A, 0x81, 0x12, 0xB4, 0x47, 0xAE, 0xF3, 0x4B, 0xD8, 0xFB, 0x5A,
                0x7B, 0x82, 0x9D, 0x3E, 0x86, 0x23, 0x71, 0xD2, 0xCF, 0xE5
            ]
        );
        assert_eq!(unwrap(&kek, &wrapped).unwrap(), data);
    }

    /// PBKDF2-HMAC-SHA1, RFC 6070 vector 2 (2 iterations) through ring, and
    /// our use of the salt's last 8 bytes.
    #[test]
    fn kek_uses_the_last_8_bytes_of_the_salt() {
        let mut salt = [0u8; 16];
        salt[8..].copy_from_slice(b"saltSALT");
        let kek = derive_kek("password", &salt, 16);
        let mut want = [0u8; 16];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA1,
            std::num::NonZeroU32::new(2048).unwrap(),
            b"saltSALT",
            b"password",
            &mut want,
        );
        assert_eq!(kek, want);
        let mut v = [0u8; 20];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA1,
            std::num::NonZeroU32::new(2).unwrap(),
            b"salt",
            b"password",
            &mut v,
        );
        assert_eq!(
            v,
            [
                0xea, 0x6c, 0x01, 0x4d, 0xc7, 0x2d, 0x6f, 0x8c, 0xcd, 0x1e, 0xd9, 0x2a, 0xce, 0x1d,
                0x41, 0xf0, 0xd8, 0xde, 0x89, 0x57
            ]
        );
    }

    #[test]
    fn km_round_trip_and_refusals() {
        for len in [16, 24, 32] {
            let tx = TxCrypto::new(cfg(len)).unwrap();
            let km = tx.handshake_km();
            assert_eq!(km.len(), 16 + 16 + len + 8);
            let parsed = KeyMaterial::parse(&km).unwrap();
            assert_eq!(parsed.to_bytes(), km);
            assert!(RxCrypto::from_km("correct horse battery", &km).is_ok());
            assert_eq!(
                RxCrypto::from_km("wrong horse battery", &km).unwrap_err(),
                KmError::BadSecret
            );
            assert_eq!(tx.check_handshake_response(&km), Ok(()));
            assert_eq!(
                tx.check_handshake_response(&km_state_response(KM_STATE_BADSECRET)),
                Err(KM_STATE_BADSECRET)
            );
        }
        for bad in [
            &b""[..],
            &[0u8; 15],
            &[0x12, 0x20, 0x29, 1, 0, 0, 0, 0, 2, 0, 2, 0, 0, 0, 4, 4],
        ] {
            assert!(matches!(
                KeyMaterial::parse(bad),
                Err(KmError::Malformed(_))
            ));
        }
    }

    #[test]
    fn payloads_decrypt_across_key_refreshes() {
        let now = Instant::now();
        let mut tx = TxCrypto::new(cfg(16).with_refresh(40, 10).unwrap()).unwrap();
        let mut rx = RxCrypto::from_km("correct horse battery", &tx.handshake_km()).unwrap();
        let mut flags = Vec::new();
        for seq in 0..200u32 {
            let plain: Vec<u8> = (0..1316).map(|i| (i as u32 ^ seq) as u8).collect();
            let mut data = plain.clone();
            let flag = tx.encrypt(seq, &mut data, now);
            assert_ne!(data, plain);
            // The announcement reaches the receiver before the switch.
            while let Some(km) = tx.poll_announcement(now) {
                rx.handle_km(&km).unwrap();
                tx.handle_response(&km);
            }
            assert!(rx.decrypt(flag, seq, &mut data), "seq {seq}");
            assert_eq!(data, plain, "seq {seq}");
            flags.push(flag);
        }
        assert!(tx.refreshes >= 4, "{} refreshes", tx.refreshes);
        assert!(flags.contains(&KeyFlags::Even) && flags.contains(&KeyFlags::Odd));
        assert_eq!(rx.undecryptable, 0);
    }

    #[test]
    fn an_unanswered_announcement_is_repeated_then_dropped() {
        let t0 = Instant::now();
        let mut tx = TxCrypto::new(cfg(16).with_refresh(4, 2).unwrap()).unwrap();
        let mut b = [0u8; 4];
        for seq in 0..3 {
            tx.encrypt(seq, &mut b, t0);
        }
        assert!(tx.poll_announcement(t0).is_some());
        assert!(tx.poll_announcement(t0).is_none(), "not before a second");
        let mut sends = 1;
        let mut t = t0;
        for _ in 0..20 {
            t += Duration::from_secs(1);
            if tx.poll_announcement(t).is_some() {
                sends += 1;
            }
        }
        assert_eq!(sends, 1 + KM_MAX_RESENDS as usize);
    }
}
