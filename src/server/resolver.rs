//! Host name resolution off the loop: one worker thread runs the system
//! resolver (`getaddrinfo` through `ToSocketAddrs`) and wakes the poll when
//! an answer is ready. IP literals never reach it. This is the one thread
//! besides the loop; it touches no shared state but its two channels.

use mio::{Token, Waker};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;

pub(crate) struct Query {
    pub token: Token,
    pub host: String,
    pub port: u16,
}

pub(crate) struct Answer {
    pub token: Token,
    pub result: Result<Vec<SocketAddr>, String>,
}

pub(crate) struct Resolver {
    queries: Sender<Query>,
    answers: Receiver<Answer>,
}

impl Resolver {
    pub(crate) fn start(waker: Arc<Waker>) -> std::io::Result<Resolver> {
        let (qtx, qrx) = mpsc::channel::<Query>();
        let (atx, arx) = mpsc::channel::<Answer>();
        std::thread::Builder::new()
            .name("kiln-resolver".into())
            .spawn(move || {
                for q in qrx {
                    let result = (q.host.as_str(), q.port)
                        .to_socket_addrs()
                        .map(|a| a.collect::<Vec<_>>())
                        .map_err(|e| format!("cannot resolve [{}]: {e}", q.host))
                        .and_then(|v| {
                            if v.is_empty() {
                                Err(format!("cannot resolve [{}]: no address", q.host))
                            } else {
                                Ok(v)
                            }
                        });
                    if atx
                        .send(Answer {
                            token: q.token,
                            result,
                        })
                        .is_err()
                    {
                        return;
                    }
                    let _ = waker.wake();
                }
            })?;
        Ok(Resolver {
            queries: qtx,
            answers: arx,
        })
    }

    /// An IP literal now, or `None` after asking the worker.
    pub(crate) fn resolve(&self, token: Token, host: &str, port: u16) -> Option<Vec<SocketAddr>> {
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = literal.parse::<IpAddr>() {
            return Some(vec![SocketAddr::new(ip, port)]);
        }
        let _ = self.queries.send(Query {
            token,
            host: host.to_string(),
            port,
        });
        None
    }

    pub(crate) fn answers(&self) -> impl Iterator<Item = Answer> + '_ {
        self.answers.try_iter()
    }
}
