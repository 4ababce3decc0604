#![no_main]
//! The state journal replay: arbitrary bytes as a journal (and, after the
//! first 0 byte, as the snapshot before it). Never panics; records that do
//! not parse are an error or a dropped torn tail.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    use kiln::state::store::replay;
    use std::path::Path;
    let (journal, snapshot) = match data.iter().position(|b| *b == 0) {
        Some(i) => (&data[..i], Some(&data[i + 1..])),
        None => (data, None),
    };
    let _ = replay(snapshot, journal, &kiln::api::TASK_KINDS, Path::new("s"), Path::new("j"));
});
