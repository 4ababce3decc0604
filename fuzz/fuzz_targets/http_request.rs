#![no_main]
//! The HTTP/1.1 request reader: the input is fed in pieces (sizes taken
//! from the first bytes), and requests are drained after every piece until
//! none is complete or the reader reports an error.
use kiln::http::{ReaderLimits, RequestReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&step, rest)) = data.split_first() else {
        return;
    };
    let mut reader = RequestReader::new(ReaderLimits {
        max_head_bytes: 16 * 1024,
        max_body_bytes: 64 * 1024,
    });
    let step = usize::from(step).max(1);
    for piece in rest.chunks(step) {
        reader.feed(piece);
        loop {
            match reader.next_request() {
                Ok(Some(req)) => {
                    let _ = req.keep_alive();
                    let _ = req.path();
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = e.status();
                    return;
                }
            }
        }
    }
});
