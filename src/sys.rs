//! The one place kiln talks to libc directly: raising the open-files limit,
//! reading the local UTC offset, batched datagrams, and the memory files
//! LL-HLS parts live in (memfd, a read-only mapping, `sendfile`).
//! Everything else is safe Rust; the crate root denies `unsafe` and only
//! this module is allowed it, each block with the reason it is sound.
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

/// Asks the allocator to return freed memory to the system (glibc's
/// `malloc_trim`: free pages of every arena are released); a no-op
/// elsewhere.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only inspects and releases the allocator's free
    // memory; 0 keeps no padding.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// The open-files soft limit (what `accept` runs into).
pub fn nofile_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct we own; RLIMIT_NOFILE is valid.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    lim.rlim_cur
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

/// Sends several datagrams on a connected UDP socket in one system call
/// (`sendmmsg`). Returns how many were sent (a prefix of `datagrams`), or
/// the error of the first one (e.g. `WouldBlock`).
pub fn send_datagrams(fd: std::os::fd::RawFd, datagrams: &[&[u8]]) -> io::Result<usize> {
    send_batch(fd, datagrams, None)
}

/// Sends datagrams to their own addresses on an unconnected UDP socket in
/// one system call (`sendmmsg`). Returns how many were sent (a prefix), or
/// the error of the first one (e.g. `WouldBlock`).
///
/// Consecutive datagrams to one address, all of one size but the last (the
/// packets a frame is cut into, to one viewer), go as one message with UDP
/// GSO (`UDP_SEGMENT`): the kernel cuts them apart after its stack, which
/// it then crosses once per run instead of once per datagram. The wire sees
/// the same datagrams. Where the kernel or the route cannot (a kernel
/// before 4.18, a device without checksum offload), it is not used again.
pub fn send_datagrams_to(
    fd: std::os::fd::RawFd,
    datagrams: &[(std::net::SocketAddr, &[u8])],
) -> io::Result<usize> {
    if gso_usable() && datagrams.len() > 1 {
        return send_segmented(fd, datagrams);
    }
    send_each_to(fd, datagrams)
}

/// [`send_datagrams_to`] without GSO: one message per datagram.
fn send_each_to(
    fd: std::os::fd::RawFd,
    datagrams: &[(std::net::SocketAddr, &[u8])],
) -> io::Result<usize> {
    let n = datagrams.len().min(MAX_BATCH);
    let names: Vec<socket2::SockAddr> = datagrams[..n]
        .iter()
        .map(|(to, _)| socket2::SockAddr::from(*to))
        .collect();
    let bufs: Vec<&[u8]> = datagrams[..n].iter().map(|(_, b)| *b).collect();
    send_batch(fd, &bufs, Some(&names))
}

/// Bytes an unprivileged writer may still use on the file system holding
/// `path` (`statvfs`: available blocks times the fragment size).
pub fn free_bytes(path: &std::path::Path) -> io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `st` a struct we own; both
    // live through the call, which only writes `st`.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

/// UDP GSO: not yet probed, usable, or not.
const GSO_UNKNOWN: u8 = 0;
const GSO_ON: u8 = 1;
const GSO_OFF: u8 = 2;
static GSO: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(GSO_UNKNOWN);
/// Segments in one GSO message (the kernel's `UDP_MAX_SEGMENTS`).
const GSO_SEGMENTS: usize = 64;
/// Bytes in one GSO message (a UDP payload's limit, with room to spare).
const GSO_BYTES: usize = 60_000;
/// Buffers (datagrams) one `sendmmsg` of segmented messages carries.
const GSO_IOVECS: usize = 256;

/// Does this kernel take `UDP_SEGMENT`? Asked once, of a socket made for
/// the question (a kernel without it refuses the option); `KILN_NO_GSO=1`
/// says no (to compare).
fn gso_usable() -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    match GSO.load(Relaxed) {
        GSO_ON => return true,
        GSO_OFF => return false,
        _ => {}
    }
    let usable = std::env::var_os("KILN_NO_GSO").is_none_or(|v| v != "1")
        && socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)
            .ok()
            .is_some_and(|s| {
                use std::os::fd::AsRawFd;
                let size: libc::c_int = 1200;
                // SAFETY: setsockopt on a socket we own, with a c_int value
                // that lives through the call.
                unsafe {
                    libc::setsockopt(
                        s.as_raw_fd(),
                        libc::SOL_UDP,
                        libc::UDP_SEGMENT,
                        (&size as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                    ) == 0
                }
            });
    GSO.store(if usable { GSO_ON } else { GSO_OFF }, Relaxed);
    usable
}

/// The runs of `datagrams` one GSO message each may carry: (start, count,
/// segment size). A run is datagrams to one address, all `size` long but
/// the last, which may be shorter.
fn segment_runs(datagrams: &[(std::net::SocketAddr, &[u8])], out: &mut Vec<(usize, usize, usize)>) {
    out.clear();
    let mut iovecs = 0;
    let mut i = 0;
    while i < datagrams.len() && out.len() < MAX_BATCH {
        let (to, first) = datagrams[i];
        let size = first.len();
        let (mut count, mut bytes) = (1, size);
        while let Some((next_to, next)) = datagrams.get(i + count) {
            let fits = *next_to == to
                && !next.is_empty()
                && next.len() <= size
                && count < GSO_SEGMENTS
                && bytes + next.len() <= GSO_BYTES
                && iovecs + count < GSO_IOVECS;
            if !fits {
                break;
            }
            count += 1;
            bytes += next.len();
            if next.len() < size {
                break; // a shorter one ends its run
            }
        }
        if iovecs + count > GSO_IOVECS {
            break;
        }
        out.push((i, count, size));
        iovecs += count;
        i += count;
    }
}

/// `sendmmsg` of [`segment_runs`]: runs of more than one datagram carry a
/// `UDP_SEGMENT` control message. Returns how many datagrams were sent (a
/// prefix of `datagrams`), or the error of the first message.
fn send_segmented(
    fd: std::os::fd::RawFd,
    datagrams: &[(std::net::SocketAddr, &[u8])],
) -> io::Result<usize> {
    /// Room for one `cmsghdr` and its u16 (`CMSG_SPACE(2)`: 24 bytes on
    /// 64-bit Linux), 8-byte aligned as the kernel reads it.
    #[derive(Clone, Copy)]
    #[repr(C, align(8))]
    struct Control([u8; 32]);
    let mut runs = Vec::with_capacity(MAX_BATCH);
    segment_runs(datagrams, &mut runs);
    let n = runs.len();
    if n == 0 {
        return Ok(0);
    }
    let mut iovecs: [libc::iovec; GSO_IOVECS] = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; GSO_IOVECS];
    let names: Vec<socket2::SockAddr> = runs
        .iter()
        .map(|&(start, _, _)| socket2::SockAddr::from(datagrams[start].0))
        .collect();
    let mut controls = [Control([0; 32]); MAX_BATCH];
    // SAFETY: an all-zero mmsghdr (null name, null control, zero lengths) is
    // a valid value of this plain C struct.
    let mut headers: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
    let mut at = 0;
    for (k, &(start, count, size)) in runs.iter().enumerate() {
        for (j, (_, data)) in datagrams[start..start + count].iter().enumerate() {
            iovecs[at + j] = libc::iovec {
                iov_base: data.as_ptr() as *mut libc::c_void,
                iov_len: data.len(),
            };
        }
        let h = &mut headers[k].msg_hdr;
        h.msg_iov = &mut iovecs[at];
        h.msg_iovlen = count as _;
        h.msg_name = names[k].as_ptr() as *mut libc::c_void;
        h.msg_namelen = names[k].len();
        if count > 1 {
            let control = &mut controls[k];
            h.msg_control = control.0.as_mut_ptr().cast();
            // SAFETY: CMSG_SPACE and CMSG_LEN are arithmetic on a constant.
            h.msg_controllen = unsafe { libc::CMSG_SPACE(2) } as _;
            // SAFETY: the header points at `control`, which is 8-byte
            // aligned and longer than CMSG_SPACE(2); CMSG_FIRSTHDR of it is
            // its start, and CMSG_DATA leaves room for the u16 written.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(h);
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = libc::UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(2) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), size as u16);
            }
        }
        at += count;
    }
    // SAFETY: `headers[..n]` point at `iovecs`, `names` and `controls`,
    // which point into the caller's slices or live on this frame; all of
    // them outlive the call, and the kernel only reads them (it writes
    // `msg_len` into our headers).
    let sent = unsafe {
        libc::sendmmsg(
            fd,
            headers.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    if sent < 0 {
        let e = io::Error::last_os_error();
        if runs[0].1 > 1 && matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL)) {
            // The first message was refused for its segments (a route
            // without checksum offload): plain datagrams from now on.
            GSO.store(GSO_OFF, std::sync::atomic::Ordering::Relaxed);
            return send_each_to(fd, datagrams);
        }
        return Err(e);
    }
    Ok(runs[..sent as usize]
        .iter()
        .map(|&(_, count, _)| count)
        .sum())
}

/// Most datagrams one `sendmmsg` takes here.
const MAX_BATCH: usize = 64;

/// `sendmmsg` of `bufs` (at most [`MAX_BATCH`]), each to `names[i]` when
/// given (else the connected peer).
fn send_batch(
    fd: std::os::fd::RawFd,
    bufs: &[&[u8]],
    names: Option<&[socket2::SockAddr]>,
) -> io::Result<usize> {
    let n = bufs.len().min(MAX_BATCH);
    if n == 0 {
        return Ok(0);
    }
    let mut iovecs: [libc::iovec; MAX_BATCH] = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_BATCH];
    // SAFETY: an all-zero mmsghdr (null name, null control, zero lengths) is
    // a valid value of this plain C struct.
    let mut headers: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..n {
        iovecs[i] = libc::iovec {
            iov_base: bufs[i].as_ptr() as *mut libc::c_void,
            iov_len: bufs[i].len(),
        };
        headers[i].msg_hdr.msg_iov = &mut iovecs[i];
        headers[i].msg_hdr.msg_iovlen = 1;
        if let Some(name) = names.and_then(|names| names.get(i)) {
            headers[i].msg_hdr.msg_name = name.as_ptr() as *mut libc::c_void;
            headers[i].msg_hdr.msg_namelen = name.len();
        }
    }
    // SAFETY: `headers[..n]` point at `iovecs[..n]` (and at `names`), which
    // point into the caller's slices; all of them outlive the call, and the
    // kernel only reads them (it writes `msg_len` into our headers). Without
    // names the socket is connected, so no address is needed.
    let sent = unsafe {
        libc::sendmmsg(
            fd,
            headers.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
        )
    };
    if sent < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(sent as usize)
    }
}

/// One datagram [`recv_datagrams`] read: its length, its sender, and
/// whether it was longer than its slot (then cut: the caller drops it).
#[derive(Debug, Clone, Copy)]
pub struct Received {
    /// Its slot.
    pub slot: usize,
    pub len: usize,
    pub from: std::net::SocketAddr,
    pub truncated: bool,
}

/// `recvmmsg` (non-blocking) into `slots` (each one datagram, at most
/// [`MAX_BATCH`] of them): what was read, in order, into `out` (cleared).
/// `WouldBlock` when nothing waits. One system call for a batch: a port
/// flooded with datagrams is read many times faster than one `recvfrom`
/// each.
pub fn recv_datagrams(
    fd: std::os::fd::RawFd,
    slots: &mut [Vec<u8>],
    out: &mut Vec<Received>,
) -> io::Result<usize> {
    out.clear();
    let n = slots.len().min(MAX_BATCH);
    if n == 0 {
        return Ok(0);
    }
    let mut iovecs: [libc::iovec; MAX_BATCH] = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; MAX_BATCH];
    // SAFETY: all-zero sockaddr_storage and mmsghdr values are valid
    // values of these plain C structs.
    let mut names: [libc::sockaddr_storage; MAX_BATCH] = unsafe { std::mem::zeroed() };
    let mut headers: [libc::mmsghdr; MAX_BATCH] = unsafe { std::mem::zeroed() };
    for i in 0..n {
        iovecs[i] = libc::iovec {
            iov_base: slots[i].as_mut_ptr() as *mut libc::c_void,
            iov_len: slots[i].len(),
        };
        headers[i].msg_hdr.msg_iov = &mut iovecs[i];
        headers[i].msg_hdr.msg_iovlen = 1;
        headers[i].msg_hdr.msg_name = &mut names[i] as *mut _ as *mut libc::c_void;
        headers[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as u32;
    }
    // SAFETY: `headers[..n]` point at `iovecs[..n]` and `names[..n]`, which
    // point into `slots` and this frame; all outlive the call. The kernel
    // writes at most each iovec's length into its slot, and fills names
    // and lengths in our headers.
    let got = unsafe {
        libc::recvmmsg(
            fd,
            headers.as_mut_ptr(),
            n as libc::c_uint,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
        )
    };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    for i in 0..got as usize {
        let h = &headers[i];
        let Some(from) = socket_addr(&names[i], h.msg_hdr.msg_namelen) else {
            continue;
        };
        out.push(Received {
            slot: i,
            len: (h.msg_len as usize).min(slots[i].len()),
            from,
            truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
        });
    }
    Ok(out.len())
}

/// The IPv4 or IPv6 address the kernel wrote into `name` (`len` bytes).
fn socket_addr(
    name: &libc::sockaddr_storage,
    len: libc::socklen_t,
) -> Option<std::net::SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
    match i32::from(name.ss_family) {
        libc::AF_INET if len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says this storage holds a sockaddr_in,
            // and it is at least that long (storage is larger than any).
            let a = unsafe { &*(name as *const _ as *const libc::sockaddr_in) };
            let ip = Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for a sockaddr_in6.
            let a = unsafe { &*(name as *const _ as *const libc::sockaddr_in6) };
            let ip = Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::V6(SocketAddrV6::new(
                ip,
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// An anonymous file in memory (`memfd_create`, close-on-exec): writing it
/// never waits for a disk.
pub fn memory_file(name: &str) -> io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    let name = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by memfd_create and is owned by no one
    // else; the File takes it over (and closes it).
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

const PAGE: u64 = 4096;

/// `len` rounded up to whole pages.
pub fn page_round(len: u64) -> u64 {
    len.div_ceil(PAGE) * PAGE
}

/// A read-only shared mapping of `len` bytes at a page-aligned `offset` of
/// a memory file. Dropping it unmaps it and gives the range's pages back
/// (`FALLOC_FL_PUNCH_HOLE`): the range is used by nothing else.
pub struct FileRegion {
    ptr: *const u8,
    len: usize,
    file: std::sync::Arc<std::fs::File>,
    offset: u64,
}

// SAFETY: the mapping is read-only and private to this value; the pointer
// stays valid until drop, whichever thread drops it.
unsafe impl Send for FileRegion {}
// SAFETY: only shared reads of immutable memory go through `&FileRegion`.
unsafe impl Sync for FileRegion {}

impl FileRegion {
    pub fn map(file: std::sync::Arc<std::fs::File>, offset: u64, len: usize) -> io::Result<Self> {
        use std::os::fd::AsRawFd;
        if len == 0 || offset % PAGE != 0 {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        // SAFETY: a fresh mapping chosen by the kernel (null hint), of a
        // file we hold open, read-only; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(FileRegion {
            ptr: ptr as *const u8,
            len,
            file,
            offset,
        })
    }
}

impl AsRef<[u8]> for FileRegion {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` maps `len` readable bytes until drop; the file's
        // range is written before the mapping is made and never again.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for FileRegion {
    fn drop(&mut self) {
        use std::os::fd::AsRawFd;
        // SAFETY: unmaps exactly the mapping this value made, once; no
        // reference into it outlives `self` (AsRef borrows `self`).
        unsafe {
            libc::munmap(self.ptr as *mut libc::c_void, self.len);
        }
        // SAFETY: plain syscall on a file we hold; it only frees the pages
        // of this value's range (page-rounded: the next range starts on the
        // next page).
        unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                self.offset as libc::off_t,
                page_round(self.len as u64) as libc::off_t,
            );
        }
    }
}

/// `sendfile(2)`: up to `len` bytes of `file` from `offset` to the socket,
/// without copying them through user space. `WouldBlock` when the socket
/// takes nothing now.
pub fn send_file(
    socket: std::os::fd::RawFd,
    file: std::os::fd::RawFd,
    offset: u64,
    len: usize,
) -> io::Result<usize> {
    let mut off = offset as libc::off_t;
    // SAFETY: two descriptors the caller holds open; `off` is ours.
    let n = unsafe { libc::sendfile(socket, file, &mut off, len) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// `sendmsg` with `MSG_MORE`: the bytes wait for what follows (a response
/// head for the `sendfile` of its body) instead of leaving as their own
/// small packet.
pub fn send_more(socket: std::os::fd::RawFd, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
    // SAFETY: an all-zero msghdr (no name, no control) is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = bufs.len() as _;
    // SAFETY: IoSlice is ABI-compatible with iovec on Unix (std documents
    // it); the slices outlive the call and the kernel only reads them.
    let n = unsafe {
        libc::sendmsg(
            socket,
            &msg,
            libc::MSG_MORE | libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn datagrams_are_read_in_batches_with_their_senders() {
        use std::net::UdpSocket;
        for (here, there) in [("127.0.0.1:0", "127.0.0.1:0"), ("[::1]:0", "[::1]:0")] {
            let Ok(rx) = UdpSocket::bind(here) else {
                continue; // no IPv6 here
            };
            rx.set_nonblocking(true).unwrap();
            let tx = UdpSocket::bind(there).unwrap();
            let mut slots = vec![vec![0u8; 8]; 4];
            let mut got = Vec::new();
            let e = super::recv_datagrams(rx.as_raw_fd(), &mut slots, &mut got).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
            for d in [&b"one"[..], b"two", b"longer than eight"] {
                tx.send_to(d, rx.local_addr().unwrap()).unwrap();
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert_eq!(
                super::recv_datagrams(rx.as_raw_fd(), &mut slots, &mut got).unwrap(),
                3
            );
            assert_eq!(got[0].from, tx.local_addr().unwrap());
            assert_eq!(&slots[got[1].slot][..got[1].len], b"two");
            assert!(!got[1].truncated);
            assert!(got[2].truncated);
        }
    }

    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn runs_to_one_address_of_one_size_are_grouped() {
        let a: std::net::SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let b: std::net::SocketAddr = "127.0.0.1:5001".parse().unwrap();
        let full = [7u8; 1200];
        let d = [
            (a, &full[..]),
            (a, &full[..]),
            (a, &full[..300]), // shorter: ends the run
            (a, &full[..]),
            (b, &full[..]), // another address
            (b, &full[..1100]),
            (b, &full[..1200]), // longer than the run's size: a new run
            (a, &full[..0]),
        ];
        let mut runs = Vec::new();
        segment_runs(&d, &mut runs);
        assert_eq!(
            runs,
            vec![
                (0, 3, 1200),
                (3, 1, 1200),
                (4, 2, 1200),
                (6, 1, 1200),
                (7, 1, 0)
            ]
        );
        // Bounded: 64 segments and 60,000 bytes a message.
        let many = vec![(a, &full[..]); 200];
        segment_runs(&many, &mut runs);
        assert_eq!(runs[0], (0, 50, 1200));
        let small = vec![(a, &full[..100]); 200];
        segment_runs(&small, &mut runs);
        assert_eq!(runs[..2], [(0, 64, 100), (64, 64, 100)]);
        assert_eq!(runs.iter().map(|r| r.1).sum::<usize>(), 200);
    }

    #[test]
    fn segmented_sends_arrive_as_the_same_datagrams() {
        use std::net::UdpSocket;
        let rx1 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx2 = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (a, b) = (rx1.local_addr().unwrap(), rx2.local_addr().unwrap());
        let frames: Vec<Vec<u8>> = (0..40u8)
            .map(|i| vec![i; if i % 10 == 9 { 333 } else { 1180 }])
            .collect();
        let mut list = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            list.push((if i < 20 { a } else { b }, &f[..]));
        }
        let mut sent = 0;
        while sent < list.len() {
            sent += send_datagrams_to(tx.as_raw_fd(), &list[sent..]).unwrap();
        }
        rx1.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        rx2.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let mut buf = [0u8; 2048];
        for (i, f) in frames.iter().enumerate() {
            let rx = if i < 20 { &rx1 } else { &rx2 };
            let (n, from) = rx.recv_from(&mut buf).unwrap();
            assert_eq!(
                (&buf[..n], from),
                (&f[..], tx.local_addr().unwrap()),
                "datagram {i}"
            );
        }
        // Sent segmented (Linux >= 4.18; loopback offloads checksums), not
        // fallen back to one message per datagram.
        assert!(gso_usable(), "UDP_SEGMENT refused on loopback");
    }

    #[test]
    fn a_memory_file_region_maps_what_was_written_and_sends_it() {
        use std::io::Read;
        use std::os::unix::fs::FileExt;
        let file = std::sync::Arc::new(memory_file("kiln-test").unwrap());
        let data: Vec<u8> = (0..10_000u32).map(|i| i as u8).collect();
        file.write_all_at(&data, 8192).unwrap();
        let region = FileRegion::map(file.clone(), 8192, data.len()).unwrap();
        assert_eq!(region.as_ref(), &data[..]);
        assert!(FileRegion::map(file.clone(), 100, 10).is_err(), "unaligned");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut rx = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (tx, _) = listener.accept().unwrap();
        let head = b"head:";
        assert_eq!(
            send_more(tx.as_raw_fd(), &[io::IoSlice::new(head)]).unwrap(),
            5
        );
        let mut sent = 0;
        while sent < data.len() {
            sent += send_file(
                tx.as_raw_fd(),
                file.as_raw_fd(),
                8192 + sent as u64,
                data.len() - sent,
            )
            .unwrap();
        }
        drop(tx);
        let mut got = Vec::new();
        rx.read_to_end(&mut got).unwrap();
        assert_eq!(&got[..5], head);
        assert_eq!(&got[5..], &data[..]);
        drop(region);
        assert_eq!(page_round(1), 4096);
        assert_eq!(page_round(4096), 4096);
    }

    #[test]
    fn batch_of_datagrams_arrives_whole() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        let a = vec![1u8; 1316];
        let b = vec![2u8; 500];
        let sent = send_datagrams(tx.as_raw_fd(), &[&a, &b]).unwrap();
        assert_eq!(sent, 2);
        let mut buf = [0u8; 2000];
        assert_eq!(rx.recv(&mut buf).unwrap(), 1316);
        assert_eq!(buf[0], 1);
        assert_eq!(rx.recv(&mut buf).unwrap(), 500);
        assert_eq!(buf[0], 2);
        assert_eq!(send_datagrams(tx.as_raw_fd(), &[]).unwrap(), 0);
    }
}

/// The addresses of this host's interfaces (for telling whether a
/// destination is kiln itself); empty when they cannot be read.
pub fn local_addresses() -> Vec<std::net::IpAddr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list it allocates; it
    // is walked read-only and freed once with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr whose family says which
            // struct it is; only AF_INET and AF_INET6 are read as such.
            match i32::from(unsafe { (*ifa.ifa_addr).sa_family }) {
                libc::AF_INET => {
                    let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                    out.push(std::net::IpAddr::from(
                        u32::from_be(sin.sin_addr.s_addr).to_be_bytes(),
                    ));
                }
                libc::AF_INET6 => {
                    let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                    out.push(std::net::IpAddr::from(sin6.sin6_addr.s6_addr));
                }
                _ => {}
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: freed once, not used after.
    unsafe { libc::freeifaddrs(list) };
    out
}

/// Why [`read_small_file`] refused a file.
#[derive(Debug)]
pub enum SmallFileError {
    Io(io::Error),
    /// A FIFO, device, socket or directory: reading it could block the loop
    /// or never end.
    NotRegular,
    /// Larger than the cap (the size found, when known).
    TooLarge(u64),
}

impl std::fmt::Display for SmallFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SmallFileError::Io(e) => write!(f, "cannot read: {e}"),
            SmallFileError::NotRegular => write!(f, "not a regular file"),
            SmallFileError::TooLarge(n) => write!(
                f,
                "too large ({n} bytes; at most {} KiB)",
                SMALL_FILE_MAX / 1024
            ),
        }
    }
}

/// The cap on files named through the API or the config (certificates,
/// keys): DECISIONS section 15.
pub const SMALL_FILE_MAX: u64 = 1024 * 1024;

/// Reads a small regular file whole, safely from the loop thread: the open
/// is non-blocking (a FIFO cannot stall it), anything but a regular file is
/// refused, and at most [`SMALL_FILE_MAX`] bytes are read (a sparse 2 GB
/// file or a file that grows is refused, not loaded).
pub fn read_small_file(path: &std::path::Path) -> Result<Vec<u8>, SmallFileError> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)
        .map_err(SmallFileError::Io)?;
    let meta = file.metadata().map_err(SmallFileError::Io)?;
    if !meta.file_type().is_file() {
        return Err(SmallFileError::NotRegular);
    }
    if meta.len() > SMALL_FILE_MAX {
        return Err(SmallFileError::TooLarge(meta.len()));
    }
    let mut data = Vec::with_capacity(meta.len() as usize);
    file.take(SMALL_FILE_MAX + 1)
        .read_to_end(&mut data)
        .map_err(SmallFileError::Io)?;
    if data.len() as u64 > SMALL_FILE_MAX {
        return Err(SmallFileError::TooLarge(data.len() as u64));
    }
    Ok(data)
}

#[cfg(test)]
mod small_file_tests {
    use super::*;

    #[test]
    fn fifo_device_directory_and_large_files_are_refused() {
        let dir = std::env::temp_dir().join(format!("kiln-small-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(matches!(
            read_small_file(&fifo),
            Err(SmallFileError::NotRegular)
        ));
        assert!(matches!(
            read_small_file(std::path::Path::new("/dev/zero")),
            Err(SmallFileError::NotRegular)
        ));
        assert!(matches!(
            read_small_file(&dir),
            Err(SmallFileError::NotRegular)
        ));
        let sparse = dir.join("sparse");
        std::fs::File::create(&sparse)
            .unwrap()
            .set_len(2 << 30)
            .unwrap();
        let e = read_small_file(&sparse).unwrap_err();
        assert!(matches!(e, SmallFileError::TooLarge(n) if n == 2 << 30));
        assert!(e.to_string().contains("too large"));
        let ok = dir.join("ok");
        std::fs::write(&ok, b"pem").unwrap();
        assert_eq!(read_small_file(&ok).unwrap(), b"pem");
        assert!(matches!(
            read_small_file(&dir.join("nope")),
            Err(SmallFileError::Io(_))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// Asks the CPU to bring the cache lines holding the first and the last
/// byte of `value` closer (a field can straddle two lines; for a larger
/// value, its two ends). A hint: nothing is read, nothing can fault. The
/// fan-out loops use it for the next endpoints' memory, which each write
/// before them has evicted.
#[inline(always)]
pub fn prefetch<T: ?Sized>(value: &T) {
    let first = (value as *const T).cast::<u8>();
    let last = first.wrapping_add(std::mem::size_of_val(value).saturating_sub(1));
    prefetch_line(first);
    if (first as usize) / 64 != (last as usize) / 64 {
        prefetch_line(last);
    }
}

#[inline(always)]
fn prefetch_line(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: PREFETCHT0 is in SSE, which every x86_64 CPU has; it takes an
    // address, reads nothing the program can see and never faults (the
    // address is within a live reference's value anyway).
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(address.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// The machine's interface addresses of one family (for `*` and `[::]`
/// in an ICE candidate): link-local IPv6 left out, loopback last.
pub fn interface_addresses(v6: bool) -> Vec<std::net::IpAddr> {
    let mut out: Vec<std::net::IpAddr> = local_addresses()
        .into_iter()
        .filter(|ip| match ip {
            std::net::IpAddr::V4(_) => !v6,
            std::net::IpAddr::V6(a) => v6 && a.segments()[0] & 0xffc0 != 0xfe80,
        })
        .collect();
    out.sort_by_key(|ip| ip.is_loopback());
    out.dedup();
    out
}
