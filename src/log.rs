//! Logging to stderr: one line per event, `TIMESTAMP LEVEL message`. The level
//! is set once at start (`KILN_LOG` or `--log-level`). No crate: kiln logs
//! little, and a logger it owns cannot surprise it.

use std::io::Write;
use std::sync::atomic::{AtomicI32, AtomicU8, Ordering};

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
    let ts = crate::clock::IsoTime::new(
        crate::clock::unix_millis_now(),
        OFFSET.load(Ordering::Relaxed),
    );
    let mut line = String::with_capacity(128);
    line.push_str(ts.as_str());
    line.push(' ');
    line.push_str(level.label());
    line.push(' ');
    let _ = std::fmt::Write::write_fmt(&mut Escaped(&mut line), args);
    line.push('\n');
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
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
                c => self.0.push(c),
            }
        }
        Ok(())
    }
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
}
