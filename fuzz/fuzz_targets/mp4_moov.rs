#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kiln::mp4::fuzz::fuzz_moov(data);
});
