//! Logging to stderr: one line per event, `TIMESTAMP LEVEL message`. The level
//! is set once at start (`KILN_LOG` or `--log-level`). No crate: kiln logs
//! little, and a logger it owns cannot surprise it.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};
use std::sync::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

impl Level {
    pub fn parse(s: &str) -> Option<Level> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "error" => Level::Error,
            "warn" | "warning" => Level::Warn,
            "info" => Level::Info,
            "debug" => Level::Debug,
            "trace" => Level::Trace,
            _ => return None,
        })
    }

    /// The name a reader sees (`WARN`, `ERROR`, ...).
    pub fn name(self) -> &'static str {
        self.label().trim_end()
    }

    fn label(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warn => "WARN ",
            Level::Info => "INFO ",
            Level::Debug => "DEBUG",
            Level::Trace => "TRACE",
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);
static OFFSET: AtomicI32 = AtomicI32::new(0);

pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// The UTC offset used for log timestamps (the server's offset).
pub fn set_utc_offset(seconds: i32) {
    OFFSET.store(seconds, Ordering::Relaxed);
}

pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

#[doc(hidden)]
pub fn write(level: Level, args: std::fmt::Arguments<'_>) {
    let unix_ms = crate::clock::unix_millis_now();
    let ts = crate::clock::IsoTime::new(unix_ms, OFFSET.load(Ordering::Relaxed));
    let mut line = String::with_capacity(128);
    line.push_str(ts.as_str());
    line.push(' ');
    line.push_str(level.label());
    line.push(' ');
    let start = line.len();
    let _ = std::fmt::Write::write_fmt(&mut Escaped(&mut line), args);
    if level <= Level::Warn {
        keep_recent(unix_ms, level, &line[start..]);
    }
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// How many WARN and ERROR lines are kept in memory for the console.
pub const RECENT_LINES: usize = 200;
/// The longest kept line (bytes; a longer one is cut and says so).
const RECENT_LINE_BYTES: usize = 1024;

/// A WARN or ERROR line as it was logged (escaped, without its time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recent {
    pub unix_ms: i64,
    pub level: Level,
    pub text: String,
}

/// The last [`RECENT_LINES`] WARN and ERROR lines, oldest first: at most
/// 200 KiB, whatever is logged (`GET /v1/logs`; no file is read).
static RECENT: Mutex<VecDeque<Recent>> = Mutex::new(VecDeque::new());

fn keep_recent(unix_ms: i64, level: Level, text: &str) {
    let text = if text.len() > RECENT_LINE_BYTES {
        let mut end = RECENT_LINE_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{} [cut at {RECENT_LINE_BYTES} bytes]", &text[..end])
    } else {
        text.to_string()
    };
    // A thread that panicked while holding the lock left a ring that is
    // still whole (each change is one push or pop).
    let mut ring = RECENT.lock().unwrap_or_else(|e| e.into_inner());
    if ring.len() == RECENT_LINES {
        ring.pop_front();
    }
    ring.push_back(Recent {
        unix_ms,
        level,
        text,
    });
}

/// The kept WARN and ERROR lines, oldest first.
pub fn recent() -> Vec<Recent> {
    let ring = RECENT.lock().unwrap_or_else(|e| e.into_inner());
    ring.iter().cloned().collect()
}

/// Writes text with every control character escaped (`\n`, `\r`, `\t`,
/// `\x1b` ...), so that no text a peer or user supplied (a stream name, an
/// SRT streamid, a URL) can start a forged log line or drive a terminal.
/// Applied to the whole message: one event is always one line.
pub struct Escaped<'a>(pub &'a mut String);

impl std::fmt::Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        for c in s.chars() {
            match c {
                '\n' => self.0.push_str("\\n"),
                '\r' => self.0.push_str("\\r"),
                '\t' => self.0.push_str("\\t"),
                '\\' => self.0.push_str("\\\\"),
                c if c.is_control() => {
                    let _ = write!(self.0, "\\x{:02x}", c as u32);
                }
                c if is_format(c) => {
                    let _ = write!(self.0, "\\u{{{:04x}}}", c as u32);
                }
                c => self.0.push(c),
            }
        }
        Ok(())
    }
}

/// Unicode format and separator characters that change how a line reads
/// without being control characters: bidi embeddings, overrides and
/// isolates (U+202A-202E, U+2066-2069; "Trojan Source"), marks, zero-width
/// characters, the BOM, soft hyphen, and the line and paragraph separators.
pub fn is_format(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x061C | 0x180E | 0x200B..=0x200F | 0x2028..=0x202E
        | 0x2060..=0x2064 | 0x2066..=0x206F | 0xFEFF | 0xFFF9..=0xFFFB)
}

/// Log lines a peer can cause again and again (a refused handshake, a
/// timeout, a cap reached) are written once per (kind, address) per
/// minute; the next one says how many were left out. Bounded: at most
/// [`THROTTLE_KEYS`] keys are remembered; past that, every address shares
/// one key per kind.
pub struct Throttle {
    keys: std::collections::HashMap<ThrottleKey, (std::time::Instant, u64)>,
}

/// What one throttled line is counted under: its kind, the peer's address,
/// and a discriminator (a hash of the reason, so that distinct refusals of
/// one address each show once; 0 when not used).
type ThrottleKey = (&'static str, std::net::IpAddr, u64);

/// Most keys [`Throttle`] remembers.
pub const THROTTLE_KEYS: usize = 4096;
/// The address of throttled lines that are about no one peer (a listener
/// out of descriptors, a TLS port without a certificate).
pub const NO_ADDRESS: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);

/// One line per key in this window.
pub const THROTTLE_WINDOW: std::time::Duration = std::time::Duration::from_secs(60);

impl Throttle {
    fn new() -> Self {
        Throttle {
            keys: std::collections::HashMap::new(),
        }
    }

    /// `Some(left_out)` when a line for `(kind, addr)` may be written now
    /// (`left_out`: how many were suppressed since the last one), else
    /// `None` (counted).
    #[cfg(test)]
    fn admit(
        &mut self,
        kind: &'static str,
        addr: std::net::IpAddr,
        now: std::time::Instant,
    ) -> Option<u64> {
        self.admit_keyed((kind, addr, 0), now)
    }

    /// [`admit`](Self::admit) with a discriminator in the key.
    pub fn admit_keyed(&mut self, key: ThrottleKey, now: std::time::Instant) -> Option<u64> {
        if self.keys.len() >= THROTTLE_KEYS && !self.keys.contains_key(&key) {
            self.keys
                .retain(|_, (at, _)| now.saturating_duration_since(*at) < THROTTLE_WINDOW);
        }
        let key = if self.keys.len() >= THROTTLE_KEYS && !self.keys.contains_key(&key) {
            (key.0, NO_ADDRESS, 0)
        } else {
            key
        };
        match self.keys.get_mut(&key) {
            Some((at, left)) if now.saturating_duration_since(*at) < THROTTLE_WINDOW => {
                *left += 1;
                None
            }
            Some((at, left)) => {
                let n = *left;
                *at = now;
                *left = 0;
                Some(n)
            }
            None => {
                self.keys.insert(key, (now, 0));
                Some(0)
            }
        }
    }
}

static THROTTLE: std::sync::Mutex<Option<Throttle>> = std::sync::Mutex::new(None);

/// [`Throttle::admit_keyed`] on the process's one throttle; `reason` (may
/// be empty) is hashed into the key.
pub fn throttle(
    kind: &'static str,
    addr: std::net::IpAddr,
    reason: &str,
    now: std::time::Instant,
) -> Option<u64> {
    let disc = if reason.is_empty() {
        0
    } else {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        reason.hash(&mut h);
        h.finish()
    };
    let mut g = match THROTTLE.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    };
    g.get_or_insert_with(Throttle::new)
        .admit_keyed((kind, addr, disc), now)
}

/// The suffix of a throttled line: how many like it were left out.
pub struct LeftOut(pub u64);

impl std::fmt::Display for LeftOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            0 => f.write_str(" (logged at most once a minute)"),
            n => write!(f, " ({n} more like this in the last minute, not logged)"),
        }
    }
}

/// Logs at most once per minute per `(kind, address)`:
/// `log_throttled!(Level::Warn, "srt-refused", ip, "...", args)`, or per
/// `(kind, address, reason)` with `log_throttled!(Level::Warn, ("kind",
/// reason), ip, ...)`. The line ends with how many were left out.
#[macro_export]
macro_rules! log_throttled {
    ($lvl:expr, ($kind:expr, $reason:expr), $addr:expr, $($arg:tt)*) => {
        if $crate::log::enabled($lvl) {
            if let Some(n) = $crate::log::throttle($kind, $addr, $reason, std::time::Instant::now()) {
                $crate::log::write($lvl, format_args!("{}{}", format_args!($($arg)*), $crate::log::LeftOut(n)));
            }
        }
    };
    ($lvl:expr, $kind:expr, $addr:expr, $($arg:tt)*) => {
        $crate::log_throttled!($lvl, ($kind, ""), $addr, $($arg)*)
    };
}

#[macro_export]
macro_rules! log_at {
    ($lvl:expr, $($arg:tt)*) => {
        if $crate::log::enabled($lvl) {
            $crate::log::write($lvl, format_args!($($arg)*));
        }
    };
}
#[macro_export]
macro_rules! error { ($($arg:tt)*) => { $crate::log_at!($crate::log::Level::Error, $($arg)*) }; }
#[macro_export]
macro_rules! warn { ($($arg:tt)*) => { $crate::log_at!($crate::log::Level::Warn, $($arg)*) }; }
#[macro_export]
macro_rules! info { ($($arg:tt)*) => { $crate::log_at!($crate::log::Level::Info, $($arg)*) }; }
#[macro_export]
macro_rules! debug { ($($arg:tt)*) => { $crate::log_at!($crate::log::Level::Debug, $($arg)*) }; }
#[macro_export]
macro_rules! trace { ($($arg:tt)*) => { $crate::log_at!($crate::log::Level::Trace, $($arg)*) }; }

#[cfg(test)]
mod tests {
    use super::{recent, write, Level, RECENT_LINES, RECENT_LINE_BYTES};

    /// The ring keeps the last 200 WARN/ERROR lines, each bounded, escaped
    /// as the log writes them; INFO lines are not kept.
    #[test]
    fn the_recent_ring_keeps_the_last_warnings_bounded() {
        for i in 0..(RECENT_LINES + 30) {
            write(Level::Warn, format_args!("ring test {i}"));
        }
        write(Level::Info, format_args!("ring test info"));
        write(
            Level::Error,
            format_args!("ring test\nforged {}", "x".repeat(5000)),
        );
        let kept = recent();
        assert!(kept.len() <= RECENT_LINES);
        // (other tests log too: find this test's lines by their text)
        let last = (kept.iter().rev())
            .find(|r| r.text.starts_with("ring test\\n"))
            .unwrap();
        assert_eq!(last.level, Level::Error);
        assert!(
            last.text.starts_with("ring test\\nforged xxx"),
            "{}",
            last.text
        );
        assert!(last.text.len() < RECENT_LINE_BYTES + 40);
        assert!(last.text.ends_with("[cut at 1024 bytes]"));
        assert!(!kept.iter().any(|r| r.text == "ring test info"));
        assert!(kept
            .iter()
            .any(|r| r.text == format!("ring test {}", RECENT_LINES + 29)));
        assert!(!kept.iter().any(|r| r.text == "ring test 0"));
    }

    use super::Escaped;
    use std::fmt::Write;

    #[test]
    fn control_characters_are_escaped() {
        let mut s = String::new();
        // Peer text reaches the log as a format argument.
        let peer = "a\n2026-01-01 INFO forged\x1b[31m\u{85}\\n";
        write!(Escaped(&mut s), "stream [{peer}]").unwrap();
        assert_eq!(s, "stream [a\\n2026-01-01 INFO forged\\x1b[31m\\x85\\\\n]");
        assert!(!s.chars().any(char::is_control));
    }

    #[test]
    fn bidi_and_format_characters_are_escaped() {
        let mut s = String::new();
        write!(
            Escaped(&mut s),
            "[abc\u{202E}fdp.exe\u{2066}\u{200B}\u{FEFF}\u{2028}x]"
        )
        .unwrap();
        assert_eq!(
            s,
            "[abc\\u{202e}fdp.exe\\u{2066}\\u{200b}\\u{feff}\\u{2028}x]"
        );
        assert!(!s.chars().any(super::is_format));
    }

    #[test]
    fn a_throttle_writes_once_per_key_per_window_and_counts_the_rest() {
        use std::net::{IpAddr, Ipv4Addr};
        use std::time::{Duration, Instant};
        let mut t = super::Throttle::new();
        let a = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
        let b = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3));
        let t0 = Instant::now();
        assert_eq!(t.admit("k", a, t0), Some(0));
        for _ in 0..10 {
            assert_eq!(t.admit("k", a, t0 + Duration::from_secs(1)), None);
        }
        assert_eq!(t.admit("k", b, t0), Some(0));
        assert_eq!(t.admit("other", a, t0), Some(0));
        assert_eq!(t.admit("k", a, t0 + Duration::from_secs(61)), Some(10));
        // A discriminator makes distinct reasons of one address separate.
        assert_eq!(t.admit_keyed(("r", a, 1), t0), Some(0));
        assert_eq!(t.admit_keyed(("r", a, 2), t0), Some(0));
        assert_eq!(t.admit_keyed(("r", a, 1), t0), None);

        // Bounded: a flood of addresses shares one key once the table is full.
        for i in 0..(super::THROTTLE_KEYS as u32 + 100) {
            let ip = IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
            t.admit("flood", ip, t0 + Duration::from_secs(62));
        }
        assert!(t.keys.len() <= super::THROTTLE_KEYS + 1);
    }
}
