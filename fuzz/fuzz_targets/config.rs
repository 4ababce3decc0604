#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // Variables are looked up deterministically: names of even length are set.
    let env = |name: &str| {
        if name.len().is_multiple_of(2) {
            Some(format!("{name}-value"))
        } else {
            None
        }
    };
    let _ = kiln::config::parse(std::path::Path::new("/fuzz/server.xml"), &text, &env);
});
