//! A TCP listener (API or RTMP, plain or TLS): accepts until `WouldBlock`
//! and hands each connection to the loop, which opens its endpoint (or
//! closes it at once over the connection cap). Out of descriptors, it
//! rests for a while instead of spinning.

use super::endpoint::{Accepted, Cx, Endpoint};
use super::Service;
use mio::net::TcpListener;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a listener rests when the process is out of file descriptors.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

pub(crate) struct Listener {
    service: Service,
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    /// Accepting is paused until then (out of descriptors).
    paused_until: Option<Instant>,
}

impl Listener {
    pub(crate) fn new(
        service: Service,
        listener: TcpListener,
        tls: Option<Arc<rustls::ServerConfig>>,
    ) -> Self {
        Listener {
            service,
            listener,
            tls,
            paused_until: None,
        }
    }

    fn accept(&mut self, cx: &mut Cx<'_>) {
        if self.paused_until.is_some() {
            return;
        }
        loop {
            let (stream, peer) = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if is_out_of_descriptors(&e) => {
                    crate::log_throttled!(
                        crate::log::Level::Warn,
                        "accept-emfile",
                        crate::log::NO_ADDRESS,
                        "accept failed: {e} (out of file descriptors); pausing the {:?} listener for {} ms",
                        self.service,
                        ACCEPT_PAUSE.as_millis()
                    );
                    self.paused_until = Some(cx.now + ACCEPT_PAUSE);
                    cx.out.descriptors_short = Some(cx.token);
                    return;
                }
                Err(e) => {
                    crate::debug!("accept failed: {e}");
                    continue;
                }
            };
            let tls = match &self.tls {
                Some(cfg) => match rustls::ServerConnection::new(cfg.clone()) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        crate::warn!("TLS session for {peer} failed: {e}");
                        continue;
                    }
                },
                None => None,
            };
            cx.out.accepted.push(Accepted {
                service: self.service,
                stream,
                peer,
                tls,
            });
        }
    }
}

impl Endpoint for Listener {
    fn ready(&mut self, cx: &mut Cx<'_>, _peer_closed: bool) {
        self.accept(cx);
    }

    fn timeout(&mut self, cx: &mut Cx<'_>) {
        self.paused_until = None;
        self.accept(cx);
    }

    fn deadline(&self) -> Option<Instant> {
        self.paused_until
    }

    fn is_closed(&self) -> bool {
        false
    }

    fn deregister(&mut self, poll: &mio::Registry) {
        let _ = poll.deregister(&mut self.listener);
    }

    fn abort(&mut self, _cx: &mut Cx<'_>) {}
}

fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EMFILE) | Some(libc::ENFILE) | Some(libc::ENOBUFS) | Some(libc::ENOMEM)
    )
}
