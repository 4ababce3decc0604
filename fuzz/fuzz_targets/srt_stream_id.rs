#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let id = String::from_utf8_lossy(data);
    let _ = kiln::server::srt_ingest::parse_stream_id(&id);
});
