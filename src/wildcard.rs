//! Wildcard patterns as OME uses them in host names and CORS entries: `*`
//! matches any run of characters, `?` any single character; the match is
//! whole-string and ASCII case-insensitive. Linear time, no allocation.

/// Does `pattern` match all of `text`?
pub(crate) fn matches(pattern: &str, text: &str) -> bool {
    let (p, t) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut ti) = (0usize, 0usize);
    // Position of the last `*` in the pattern and the text index it matched up to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == b'?' || p[pi].eq_ignore_ascii_case(&t[ti])) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == b'*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    while pi < p.len() && p[pi] == b'*' {
        pi += 1;
    }
    pi == p.len()
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn cases() {
        assert!(matches("*", ""));
        assert!(matches("*", "anything"));
        assert!(matches("*.example.com", "a.example.com"));
        assert!(matches("*.example.com", "A.B.EXAMPLE.com"));
        assert!(!matches("*.example.com", "example.com"));
        assert!(matches("host?", "host1"));
        assert!(!matches("host?", "host12"));
        assert!(matches("https://*.x.org", "https://a.x.org"));
        assert!(!matches("https://*.x.org", "http://a.x.org"));
        assert!(matches("a*b*c", "aXXbYYc"));
        assert!(!matches("a*b*c", "aXXbYY"));
        assert!(matches("", ""));
        assert!(!matches("", "x"));
    }
}
