//! SRTP's AES-GCM profiles with ring, the rest with str0m's RustCrypto
//! backend.
//!
//! Every packet kiln sends to a WebRTC viewer is sealed once per viewer:
//! at 200 viewers of a 2.5 Mb/s stream that is ~75,000 seals a second,
//! and the RustCrypto AES-GCM str0m ships spent a sixth of kiln's CPU on
//! them (one GHASH multiplication per block, a fresh `Vec` per packet).
//! ring's AES-GCM (AES-NI with aggregated carry-less GHASH, written in
//! place) does the same work in a fraction of it. ring is already kiln's
//! TLS cipher suite; no cipher here is kiln's own.
//!
//! DTLS, the STUN HMAC, SHA-256 and the AES-CM profile stay str0m's
//! RustCrypto ones: ring has no raw AES-CTR.

use std::sync::{Arc, OnceLock};

use ring::aead::{Aad, LessSafeKey, Nonce, Tag, UnboundKey, AES_128_GCM, AES_256_GCM};
use str0m::config::CryptoProvider;
use str0m_proto::crypto::SupportedAes128CmSha1_80;
use str0m_proto::crypto::{AeadAes128GcmCipher, AeadAes256GcmCipher, CryptoError, SrtpProvider};
use str0m_proto::crypto::{SupportedAeadAes128Gcm, SupportedAeadAes256Gcm};

/// The GCM tag, both key sizes (RFC 7714: 16 octets).
const TAG_LEN: usize = 16;

/// The crypto provider every `Rtc` kiln builds uses.
pub(super) fn provider() -> Arc<CryptoProvider> {
    static PROVIDER: OnceLock<Arc<CryptoProvider>> = OnceLock::new();
    PROVIDER
        .get_or_init(|| {
            static SRTP: RingSrtp = RingSrtp;
            Arc::new(CryptoProvider {
                srtp_provider: &SRTP,
                ..str0m_rust_crypto::default_provider()
            })
        })
        .clone()
}

fn rust_crypto_srtp() -> &'static dyn SrtpProvider {
    str0m_rust_crypto::default_provider().srtp_provider
}

#[derive(Debug)]
struct RingSrtp;

impl SrtpProvider for RingSrtp {
    fn aes_128_cm_sha1_80(&self) -> &'static dyn SupportedAes128CmSha1_80 {
        rust_crypto_srtp().aes_128_cm_sha1_80()
    }

    fn aead_aes_128_gcm(&self) -> &'static dyn SupportedAeadAes128Gcm {
        &RingGcmFactory
    }

    fn aead_aes_256_gcm(&self) -> &'static dyn SupportedAeadAes256Gcm {
        &RingGcmFactory
    }

    fn srtp_aes_128_ecb_round(&self, key: &[u8], input: &[u8], output: &mut [u8]) {
        rust_crypto_srtp().srtp_aes_128_ecb_round(key, input, output)
    }

    fn srtp_aes_256_ecb_round(&self, key: &[u8], input: &[u8], output: &mut [u8]) {
        rust_crypto_srtp().srtp_aes_256_ecb_round(key, input, output)
    }
}

#[derive(Debug)]
struct RingGcmFactory;

impl SupportedAeadAes128Gcm for RingGcmFactory {
    fn create_cipher(&self, key: [u8; 16], _encrypt: bool) -> Box<dyn AeadAes128GcmCipher> {
        Box::new(RingGcm::new(&AES_128_GCM, &key))
    }
}

impl SupportedAeadAes256Gcm for RingGcmFactory {
    fn create_cipher(&self, key: [u8; 32], _encrypt: bool) -> Box<dyn AeadAes256GcmCipher> {
        Box::new(RingGcm::new(&AES_256_GCM, &key))
    }
}

/// One direction's AES-GCM key (128 or 256 bits).
struct RingGcm {
    key: LessSafeKey,
}

impl std::fmt::Debug for RingGcm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingGcm").finish_non_exhaustive()
    }
}

impl RingGcm {
    fn new(alg: &'static ring::aead::Algorithm, key: &[u8]) -> RingGcm {
        // The key is the algorithm's length by the callers' types ([u8; 16]
        // for AES-128, [u8; 32] for AES-256); ring refuses only another.
        // panic-audit: the key length is fixed by type (above).
        let key = UnboundKey::new(alg, key).expect("AES-GCM key of the algorithm's length");
        RingGcm {
            key: LessSafeKey::new(key),
        }
    }

    /// `output` = `input` sealed, then the tag.
    fn seal(
        &self,
        iv: &[u8; 12],
        aad: &[u8],
        input: &[u8],
        output: &mut [u8],
    ) -> Result<(), CryptoError> {
        let n = input.len();
        if output.len() < n + TAG_LEN {
            return Err(CryptoError::Other(format!(
                "AES-GCM: {} bytes of output for {n} of input",
                output.len()
            )));
        }
        output[..n].copy_from_slice(input);
        let tag = self
            .key
            .seal_in_place_separate_tag(
                Nonce::assume_unique_for_key(*iv),
                Aad::from(aad),
                &mut output[..n],
            )
            .map_err(|_| CryptoError::Other("AES-GCM seal failed".into()))?;
        output[n..n + TAG_LEN].copy_from_slice(tag.as_ref());
        Ok(())
    }

    /// `input` = ciphertext then tag; the plaintext goes to `output`'s
    /// front, its length is returned.
    fn open(
        &self,
        iv: &[u8; 12],
        aads: &[&[u8]],
        input: &[u8],
        output: &mut [u8],
    ) -> Result<usize, CryptoError> {
        let Some(n) = input.len().checked_sub(TAG_LEN) else {
            return Err(CryptoError::Other(
                "AES-GCM: input shorter than its tag".into(),
            ));
        };
        if output.len() < n {
            return Err(CryptoError::Other(format!(
                "AES-GCM: {} bytes of output for {n} of plaintext",
                output.len()
            )));
        }
        let tag = Tag::try_from(&input[n..])
            .map_err(|_| CryptoError::Other("AES-GCM: bad tag".into()))?;
        let joined: Vec<u8>;
        let aad: &[u8] = match aads {
            [one] => one,
            many => {
                joined = many.concat();
                &joined
            }
        };
        output[..n].copy_from_slice(&input[..n]);
        self.key
            .open_in_place_separate_tag(
                Nonce::assume_unique_for_key(*iv),
                Aad::from(aad),
                tag,
                &mut output[..n],
                0..,
            )
            .map_err(|_| CryptoError::Other("AES-GCM: authentication failed".into()))?;
        Ok(n)
    }
}

/// str0m has one trait per key size, with the same two methods.
macro_rules! gcm_cipher {
    ($($trait:ident),+) => {$(
        impl $trait for RingGcm {
            fn encrypt(
                &mut self,
                iv: &[u8; 12],
                aad: &[u8],
                input: &[u8],
                output: &mut [u8],
            ) -> Result<(), CryptoError> {
                self.seal(iv, aad, input, output)
            }

            fn decrypt(
                &mut self,
                iv: &[u8; 12],
                aads: &[&[u8]],
                input: &[u8],
                output: &mut [u8],
            ) -> Result<usize, CryptoError> {
                self.open(iv, aads, input, output)
            }
        }
    )+};
}
gcm_cipher!(AeadAes128GcmCipher, AeadAes256GcmCipher);

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// ring's seal is byte for byte RustCrypto's, and each opens the
    /// other's, for both key sizes and the lengths a packet has.
    #[test]
    fn ring_and_rust_crypto_agree_both_ways() {
        let rc = rust_crypto_srtp();
        let ours = provider().srtp_provider;
        for len in [0usize, 1, 15, 16, 17, 160, 1188, 1200] {
            let iv: [u8; 12] = pattern(12, len as u8).try_into().unwrap();
            let aad = pattern(12 + len % 5, 7);
            let msg = pattern(len, 3);

            let k128: [u8; 16] = pattern(16, 1).try_into().unwrap();
            let mut a = vec![0u8; len + TAG_LEN];
            let mut b = vec![0u8; len + TAG_LEN];
            ours.aead_aes_128_gcm()
                .create_cipher(k128, true)
                .encrypt(&iv, &aad, &msg, &mut a)
                .unwrap();
            rc.aead_aes_128_gcm()
                .create_cipher(k128, true)
                .encrypt(&iv, &aad, &msg, &mut b)
                .unwrap();
            assert_eq!(a, b, "AES-128-GCM seal, {len} bytes");
            let mut back = vec![0u8; len];
            let n = ours
                .aead_aes_128_gcm()
                .create_cipher(k128, false)
                .decrypt(&iv, &[&aad], &b, &mut back)
                .unwrap();
            assert_eq!((n, &back[..]), (len, &msg[..]));

            let k256: [u8; 32] = pattern(32, 2).try_into().unwrap();
            ours.aead_aes_256_gcm()
                .create_cipher(k256, true)
                .encrypt(&iv, &aad, &msg, &mut a)
                .unwrap();
            rc.aead_aes_256_gcm()
                .create_cipher(k256, true)
                .encrypt(&iv, &aad, &msg, &mut b)
                .unwrap();
            assert_eq!(a, b, "AES-256-GCM seal, {len} bytes");
            // AAD in two pieces, as SRTCP gives it.
            let (x, y) = aad.split_at(4);
            let n = ours
                .aead_aes_256_gcm()
                .create_cipher(k256, false)
                .decrypt(&iv, &[x, y], &a, &mut back)
                .unwrap();
            assert_eq!((n, &back[..]), (len, &msg[..]));
            let n = rc
                .aead_aes_256_gcm()
                .create_cipher(k256, false)
                .decrypt(&iv, &[&aad], &a, &mut back)
                .unwrap();
            assert_eq!(n, len);
        }
    }

    #[test]
    fn a_tampered_packet_or_short_buffer_is_an_error_not_a_panic() {
        let ours = provider().srtp_provider;
        let key = [9u8; 16];
        let iv = [1u8; 12];
        let aad = [2u8; 12];
        let mut sealed = vec![0u8; 100 + TAG_LEN];
        ours.aead_aes_128_gcm()
            .create_cipher(key, true)
            .encrypt(&iv, &aad, &[5u8; 100], &mut sealed)
            .unwrap();
        let mut dec = ours.aead_aes_128_gcm().create_cipher(key, false);
        let mut out = vec![0u8; 100];
        sealed[50] ^= 1;
        assert!(dec.decrypt(&iv, &[&aad], &sealed, &mut out).is_err());
        assert!(dec.decrypt(&iv, &[&aad], &sealed[..10], &mut out).is_err());
        assert!(dec.decrypt(&iv, &[&aad], &sealed, &mut out[..10]).is_err());
        let mut enc = ours.aead_aes_128_gcm().create_cipher(key, true);
        assert!(enc
            .encrypt(&iv, &aad, &[0u8; 100], &mut [0u8; 100])
            .is_err());
    }
}
