#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kiln::webrtc::fuzz::fuzz_ingest(data);
});
