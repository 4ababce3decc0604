#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kiln::hls::fuzz::fuzz_event(data);
});
