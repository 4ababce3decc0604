#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kiln::webrtc::packetize::fuzz_h264(data);
    kiln::webrtc::bframes::fuzz_gate(data);
});
