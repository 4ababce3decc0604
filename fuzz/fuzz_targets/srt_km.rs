#![no_main]
//! SRT keying material: arbitrary bytes as a KM message (KMREQ from a
//! caller or a refresh) are parsed and unwrapped; never panics.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    use kiln::srt::crypto::{KeyMaterial, RxCrypto};
    if let Ok(km) = KeyMaterial::parse(data) {
        let _ = km.to_bytes();
    }
    if let Ok(mut rx) = RxCrypto::from_km("fuzzing passphrase", data) {
        let _ = rx.handle_km(data);
        let mut payload = data.to_vec();
        let _ = rx.decrypt(kiln::srt::packet::KeyFlags::Even, 7, &mut payload);
    }
});
