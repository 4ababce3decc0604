#![no_main]
//! Datagrams from a peer to a WHEP session made from Chromium's offer:
//! STUN naming its ufrag first, then the input (ICE, DTLS, SRTP/RTCP).
use libfuzzer_sys::fuzz_target;

const OFFER: &str = include_str!("../../tests/fixtures/chromium-whep-offer.sdp");

fuzz_target!(|data: &[u8]| {
    kiln::webrtc::fuzz::fuzz_datagrams(data, OFFER);
});
