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
const TEST_ONLY_FILES: &[&str] = &["srt/sim_tests.rs", "ts/test_util.rs", "config/tests.rs"];

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
fn braces(code: &str) -> i64 {
    let code = code.split("//").next().unwrap_or("");
    code.matches('{').count() as i64 - code.matches('}').count() as i64
}
