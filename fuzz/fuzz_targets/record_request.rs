#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kiln::record::fuzz::fuzz_request(data);
    kiln::hls::fuzz::fuzz_dump_request(data);
});
