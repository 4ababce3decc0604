//! A TCP connection, plain or through rustls, seen the same way by every
//! protocol on top (sozu's habit): `read` hands plaintext to a sink until
//! the socket would block and says whether the peer closed; `write` takes
//! what it can without blocking. Edge-triggered: both go until `WouldBlock`.
//!
//! It never buffers more than rustls does itself (rustls' own limit on
//! queued plaintext applies to writes).

use mio::net::TcpStream;
use std::io::{self, Read, Write};
use std::net::Shutdown;

/// Size of one read from the socket (or from rustls).
pub(crate) const READ_CHUNK: usize = 16 * 1024;

thread_local! {
    /// The read buffer of every connection: the loop is single-threaded and
    /// a sink consumes its bytes before the next read, so one buffer serves
    /// all (no 16 KiB zeroed per call, none held per connection).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(vec![0; READ_CHUNK]);
}

/// How a read ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadEnd {
    /// Nothing more for now.
    WouldBlock,
    /// The peer closed its side (FIN, or TLS close_notify).
    Closed,
    /// The sink asked to stop (backpressure); more may be waiting.
    Paused,
}

/// Backpressure, one rule for every TCP peer (HTTP and WebSocket viewers,
/// the TURN relay, the API): a peer is read only while what kiln has
/// queued for it is under the endpoint's high-water mark and its input
/// buffer has room. A read that stopped with input possibly left (the mark
/// reached, the buffer full) is *owed*: the socket is edge-triggered and
/// raises no new edge for bytes already waiting, so the endpoint reads
/// again itself once there is room (in the same turn, or by re-queuing:
/// its deadline set to now).
#[derive(Debug, Default)]
pub(crate) struct ReadGate {
    owed: bool,
}

impl ReadGate {
    /// May the endpoint read now? `queued`: bytes of output waiting for
    /// the peer; `input_full`: its input buffer takes no more.
    pub(crate) fn open(&mut self, queued: usize, high_water: usize, input_full: bool) -> bool {
        if queued >= high_water || input_full {
            self.owed = true;
            return false;
        }
        true
    }

    /// How the read it allowed ended.
    pub(crate) fn ended(&mut self, end: ReadEnd) {
        self.owed = end == ReadEnd::Paused;
    }

    /// A read is owed and there is room for it now.
    pub(crate) fn owed(&self, queued: usize, high_water: usize, input_full: bool) -> bool {
        self.owed && queued < high_water && !input_full
    }
}

pub(crate) struct Transport {
    stream: TcpStream,
    tls: Option<Box<rustls::Connection>>,
}

impl Transport {
    pub(crate) fn new(stream: TcpStream, tls: Option<rustls::ServerConnection>) -> Self {
        Transport {
            stream,
            tls: tls.map(|c| Box::new(rustls::Connection::Server(c))),
        }
    }

    /// The client side (push outputs): TLS when `tls` is set.
    pub(crate) fn client(stream: TcpStream, tls: Option<rustls::ClientConnection>) -> Self {
        Transport {
            stream,
            tls: tls.map(|c| Box::new(rustls::Connection::Client(c))),
        }
    }

    /// Starts TLS as the client on an established connection.
    pub(crate) fn with_client_tls(self, tls: rustls::ClientConnection) -> Self {
        Transport {
            stream: self.stream,
            tls: Some(Box::new(rustls::Connection::Client(tls))),
        }
    }

    pub(crate) fn stream_mut(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    pub(crate) fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    pub(crate) fn handshaking(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.is_handshaking())
    }

    /// The SNI name the TLS client asked for.
    pub(crate) fn sni(&self) -> Option<&str> {
        match self.tls.as_deref() {
            Some(rustls::Connection::Server(s)) => s.server_name(),
            _ => None,
        }
    }

    /// Encrypted bytes rustls still has to send.
    pub(crate) fn has_pending_tls(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| t.wants_write())
    }

    /// Reads until the socket would block, the peer closes, or `sink`
    /// returns false. Returns whether any bytes arrived, and how it ended.
    ///
    /// With `drain` false, a plain TCP read that comes back short ends the
    /// call as `WouldBlock`: a short read took everything the kernel held,
    /// and what arrives later raises a new edge, so the read that would
    /// only say EAGAIN is saved (a third of an API request's syscalls). The
    /// one thing a short read can hide is a FIN that came with the data;
    /// callers pass `drain` true once the poller reported the peer's close.
    pub(crate) fn read(
        &mut self,
        drain: bool,
        mut sink: impl FnMut(&[u8]) -> bool,
    ) -> io::Result<(bool, ReadEnd)> {
        SCRATCH.with(|scratch| match scratch.try_borrow_mut() {
            Ok(mut buf) => self.read_with(&mut buf, drain, &mut sink),
            // Only if a sink read another transport (none does).
            Err(_) => self.read_with(&mut vec![0; READ_CHUNK], drain, &mut sink),
        })
    }

    fn read_with(
        &mut self,
        buf: &mut [u8],
        drain: bool,
        sink: &mut impl FnMut(&[u8]) -> bool,
    ) -> io::Result<(bool, ReadEnd)> {
        let mut got = false;
        loop {
            match &mut self.tls {
                None => match self.stream.read(buf) {
                    Ok(0) => return Ok((got, ReadEnd::Closed)),
                    Ok(n) => {
                        got = true;
                        if !sink(&buf[..n]) {
                            return Ok((got, ReadEnd::Paused));
                        }
                        if n < buf.len() && !drain {
                            return Ok((got, ReadEnd::WouldBlock));
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        return Ok((got, ReadEnd::WouldBlock))
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                },
                Some(tls) => {
                    let eof = match tls.read_tls(&mut self.stream) {
                        Ok(0) => true,
                        Ok(_) => false,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            return Ok((got, ReadEnd::WouldBlock))
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    };
                    got = true;
                    if let Err(e) = tls.process_new_packets() {
                        // Send the alert rustls queued, then give up.
                        let _ = tls.write_tls(&mut self.stream);
                        return Err(io::Error::new(io::ErrorKind::InvalidData, e));
                    }
                    loop {
                        match tls.reader().read(buf) {
                            Ok(0) => return Ok((got, ReadEnd::Closed)),
                            Ok(n) => {
                                if !sink(&buf[..n]) {
                                    return Ok((got, ReadEnd::Paused));
                                }
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(e) => return Err(e),
                        }
                    }
                    if eof {
                        return Ok((got, ReadEnd::Closed));
                    }
                }
            }
        }
    }

    /// Writes as much of `data` as the socket takes now; returns how many
    /// bytes were taken (for TLS: taken into rustls and flushed as far as
    /// possible). Errors are the connection's end.
    pub(crate) fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        match &mut self.tls {
            None => {
                let mut done = 0;
                while done < data.len() {
                    match self.stream.write(&data[done..]) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(n) => done += n,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(done)
            }
            Some(tls) => {
                let mut done = 0;
                loop {
                    if done < data.len() && !tls.is_handshaking() {
                        done += tls.writer().write(&data[done..])?;
                    }
                    if !tls.wants_write() {
                        if done < data.len() && !tls.is_handshaking() {
                            continue;
                        }
                        return Ok(done);
                    }
                    match tls.write_tls(&mut self.stream) {
                        Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(done),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
            }
        }
    }

    /// Writes what `out` holds until the socket would block and drops what
    /// went from it; returns what is left.
    pub(crate) fn write_from(&mut self, out: &mut Vec<u8>) -> io::Result<usize> {
        while !out.is_empty() {
            match self.write(out)? {
                0 => break,
                n => {
                    out.drain(..n);
                }
            }
        }
        Ok(out.len())
    }

    /// Writes as much of `bufs`, in order, as the socket takes now: one
    /// `writev` per call on plain TCP (shared payloads go out without being
    /// copied into a per-connection buffer); through rustls with TLS.
    pub(crate) fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        if self.tls.is_some() {
            let mut done = 0;
            for b in bufs {
                let n = self.write(b)?;
                done += n;
                if n < b.len() {
                    break;
                }
            }
            // Flush what rustls holds even when nothing new was given.
            if bufs.is_empty() {
                self.write(&[])?;
            }
            return Ok(done);
        }
        if bufs.iter().all(|b| b.is_empty()) {
            return Ok(0);
        }
        loop {
            match self.stream.write_vectored(bufs) {
                Ok(0) if bufs.iter().any(|b| !b.is_empty()) => {
                    return Err(io::ErrorKind::WriteZero.into())
                }
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Ends our side: TLS close_notify, then FIN. Reading may go on.
    pub(crate) fn close_write(&mut self) {
        if let Some(tls) = self.tls.as_mut() {
            tls.send_close_notify();
            let _ = tls.write_tls(&mut self.stream);
        }
        let _ = self.stream.shutdown(Shutdown::Write);
    }
}
