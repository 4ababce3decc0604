#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kiln::channel::fuzz::fuzz_channel_files(data);
});
