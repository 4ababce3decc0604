//! The panic audit, kept true by a test: outside `#[cfg(test)]` code, no
//! `unwrap`, `expect`, `panic!`, `unreachable!`, `todo!`, `unimplemented!`,
//! `assert!` or `debug_assert!` may appear in `src/` unless the line, or a
//! comment line right above it, says `panic-audit:` and why it cannot fire.
//! One panic in this single-threaded server would stop every stream (the
//! loop contains one to the endpoint it happened on, but that is a last
//! resort), so peer input must be answered with errors, never panics.
//! Indexing, slicing and arithmetic overflow are left to the fuzz targets,
//! which run with debug assertions and overflow checks on (`fuzz/run.sh`).

use std::path::{Path, PathBuf};

const FORBIDDEN: &[&str] = &[
    ".unwrap()",
    ".expect(",
    "panic!(",
    "unreachable!(",
    "todo!(",
    "unimplemented!(",
    "assert!(",
    "assert_eq!(",
    "assert_ne!(",
];

/// Files compiled only for tests (declared under `#[cfg(test)]`).
const TEST_ONLY_FILES: &[&str] = &[
    "srt/sim_tests.rs",
    "push/sim_tests.rs",
    "fmp4/tests.rs",
    "hls/tests.rs",
    "hls/dvr/tests.rs",
    "ts/test_util.rs",
    "config/tests.rs",
    "record/manager/tests.rs",
    "admission/manager/tests.rs",
    "rtsp/client/tests.rs",
    "channel/schedule/tests.rs",
    "channel/mux/tests.rs",
    "mp4/tests.rs",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn no_unaudited_panic_sites_outside_tests() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    assert!(files.len() > 20, "found only {} files", files.len());
    let mut found = Vec::new();
    let mut audited = 0;
    for path in &files {
        let rel = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if TEST_ONLY_FILES.contains(&rel.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(path).unwrap();
        let mut previous = "";
        // Brace depth of an item under `#[cfg(test)]` being skipped.
        let mut skipping: Option<i64> = None;
        let mut cfg_test = false;
        for (n, line) in text.lines().enumerate() {
            let code = line.trim();
            if let Some(depth) = skipping.as_mut() {
                *depth += braces(code);
                if *depth <= 0 {
                    skipping = None;
                }
                continue;
            }
            if cfg_test {
                cfg_test = false;
                // `mod x;` (a test-only file) or an item with a body.
                if !code.ends_with(';') {
                    let depth = braces(code);
                    if depth > 0 {
                        skipping = Some(depth);
                    }
                }
                continue;
            }
            if code.starts_with("#[cfg(test)]") {
                cfg_test = true;
                continue;
            }
            let is_comment = code.starts_with("//");
            if !is_comment && FORBIDDEN.iter().any(|f| code.contains(f)) {
                if line.contains("panic-audit:") || previous.contains("panic-audit:") {
                    audited += 1;
                } else {
                    found.push(format!("src/{rel}:{}: {code}", n + 1));
                }
            }
            previous = code;
        }
    }
    assert!(
        found.is_empty(),
        "panic sites without a `panic-audit:` reason:\n{}",
        found.join("\n")
    );
    eprintln!(
        "panic audit: {} files, {audited} audited sites",
        files.len()
    );
}

/// Opening minus closing braces on a line (outside comments; good enough
/// for this code base, whose strings hold no unbalanced braces in test items).
/// `{` minus `}` on a line, outside string and char literals (plain,
/// escaped and raw `r#"..."#`) and outside a trailing `//` comment.
fn braces(code: &str) -> i64 {
    let b = code.as_bytes();
    let mut depth = 0i64;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => break,
            b'r' if matches!(b.get(i + 1), Some(b'#') | Some(b'"'))
                && (i == 0
                    || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
                    || b[i - 1] == b'b') =>
            {
                let hashes = b[i + 1..].iter().take_while(|c| **c == b'#').count();
                let open = i + 1 + hashes;
                if b.get(open) != Some(&b'"') {
                    i += 1;
                    continue;
                }
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                match b[open + 1..].windows(close.len()).position(|w| w == close) {
                    Some(end) => i = open + 1 + end + close.len(),
                    None => break,
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') => i += 3,
            b'\'' if b.get(i + 1) == Some(&b'\\') && b.get(i + 3) == Some(&b'\'') => i += 4,
            b'{' => {
                depth += 1;
                i += 1;
            }
            b'}' => {
                depth -= 1;
                i += 1;
            }
            _ => i += 1,
        }
    }
    depth
}

#[test]
fn braces_ignore_literals() {
    assert_eq!(braces(r#"fn f() {"#), 1);
    assert_eq!(braces(r#"let e = parse("[1, }").unwrap_err();"#), 0);
    assert_eq!(braces(r##"x(br#"{"a":1"#); }"##), -1);
    assert_eq!(braces(r#"let c = '{'; // {"#), 0);
    assert_eq!(braces(r#"write!(f, "{{{}", x) {"#), 1);
}
