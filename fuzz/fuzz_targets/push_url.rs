#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    use kiln::push::request::{parse_url, Protocol};
    let Some((&p, rest)) = data.split_first() else {
        return;
    };
    let protocol = match p % 3 {
        0 => Protocol::Rtmp,
        1 => Protocol::Srt,
        _ => Protocol::Mpegts,
    };
    let url = String::from_utf8_lossy(rest);
    if let Ok(dest) = parse_url(protocol, &url) {
        let _ = dest.host_port();
    }
});
