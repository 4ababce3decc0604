//! The one place kiln talks to libc directly: raising the open-files limit
//! and reading the local UTC offset. Everything else is safe Rust; the crate
//! root denies `unsafe` and only this module is allowed it, each block with
//! the reason it is sound.
#![allow(unsafe_code)]

use std::io;

/// Raises the soft limit on open files to the hard limit (many systems start
/// at 1024, too few for thousands of connections). Returns (old, new).
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own; RLIMIT_NOFILE is valid.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let old = lim.rlim_cur;
    if lim.rlim_cur < lim.rlim_max {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: setrlimit reads the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((old, lim.rlim_cur))
}

/// The local time zone's offset from UTC in seconds, at the given Unix time.
/// Called once at start (the server keeps one offset for its life, as the
/// timestamps of the API show "the server's offset").
pub fn local_utc_offset_seconds(unix_seconds: i64) -> i32 {
    let t: libc::time_t = unix_seconds as libc::time_t;
    // SAFETY: an all-zero `tm` is a valid value of this plain C struct.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: localtime_r is the re-entrant form; both pointers are to values
    // we own and that live through the call. It is called before any thread
    // could change the environment (kiln has one thread).
    let r = unsafe { libc::localtime_r(&t, &mut tm) };
    if r.is_null() {
        0
    } else {
        tm.tm_gmtoff as i32
    }
}
