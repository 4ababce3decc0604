//! `originMapStore` (DECISIONS 12): the cluster's stream map in Redis,
//! sans-IO (the connection is `server/redis_io.rs`).
//!
//! An origin registers each stream that starts on a host with a map:
//! `SET {app}/{stream} srt://{originHostName}:{SRT port}/{app}/{stream} EX
//! 10 NX` (taken by another origin: tried again every second),
//! then refreshes it every 2.5 s with `SET ... EX 10` and `DEL`s it when
//! the stream ends. An edge that lacks a stream `GET`s its key and pulls
//! the URL (`srt://`; OME's `ovt://` values never).
//!
//! Redis down or restarted: local streams go on, the log says so once,
//! and every registration is made again (with `NX`) when it is back.
//! `AUTH` is sent first when the store has a password. A reply that does
//! not come within [`REPLY_TIMEOUT`] drops the connection.

use super::resp::{self, Reply};
use super::table::PullKey;
use crate::state::streams::StreamId;
use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

/// How long a registration lives in Redis without a refresh.
pub const TTL_SECS: u64 = 10;
/// Refresh period (a quarter of the TTL).
pub const REFRESH: Duration = Duration::from_millis(2500);
/// Retry period of a key another origin holds (its TTL may run out at
/// any moment: an origin that died does not delete it).
pub const TAKEN_RETRY: Duration = Duration::from_secs(1);
/// Reconnect period while Redis is unreachable.
pub const RETRY: Duration = Duration::from_secs(1);
/// A reply later than this drops the connection.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
/// Input held while a reply is incomplete.
const MAX_INPUT: usize = 128 * 1024;
/// Lookups waiting for the connection.
const MAX_WAITING: usize = 1024;

/// Where the store is and who this server is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapConfig {
    pub host: String,
    pub port: u16,
    pub auth: Option<String>,
    pub origin_host_name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Down { retry_at: Instant },
    Connecting,
    Up,
}

#[derive(Debug)]
enum Sent {
    Auth,
    Set { key: String, nx: bool },
    Del,
    Get { waiter: usize, key: PullKey },
}

#[derive(Debug)]
struct Registration {
    value: String,
    owned: bool,
    next: Instant,
    /// A SET is on its way.
    in_flight: bool,
    /// "Taken by another origin" was logged.
    taken_logged: bool,
}

/// The answer to a lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    pub waiter: usize,
    pub key: PullKey,
    /// The URL the map holds; `Err`: why there is none.
    pub url: Result<String, String>,
}

#[derive(Debug)]
pub struct OriginMap {
    pub config: MapConfig,
    /// The hosts whose streams this store maps.
    pub vhosts: Vec<String>,
    link: Link,
    out: Vec<u8>,
    input: Vec<u8>,
    sent: VecDeque<(Sent, Instant)>,
    regs: HashMap<String, Registration>,
    by_stream: HashMap<StreamId, String>,
    waiting: Vec<(usize, PullKey)>,
    answers: VecDeque<Lookup>,
    /// Why the connection must be dropped (the glue closes it).
    broken: Option<String>,
    down_logged: bool,
    /// The loop handle of the connection's endpoint.
    pub io: Option<usize>,
}

impl OriginMap {
    pub fn new(config: MapConfig, vhosts: Vec<String>, now: Instant) -> Self {
        OriginMap {
            config,
            vhosts,
            link: Link::Down { retry_at: now },
            out: Vec::new(),
            input: Vec::new(),
            sent: VecDeque::new(),
            regs: HashMap::new(),
            by_stream: HashMap::new(),
            waiting: Vec::new(),
            answers: VecDeque::new(),
            broken: None,
            down_logged: false,
            io: None,
        }
    }

    fn name(&self) -> String {
        format!("{}:{}", self.config.host, self.config.port)
    }

    /// Should the glue connect now? (Then it reports `handle_connected`
    /// or `handle_disconnected`.)
    pub fn poll_connect(&mut self, now: Instant) -> bool {
        match self.link {
            Link::Down { retry_at } if retry_at <= now => {
                self.link = Link::Connecting;
                true
            }
            _ => false,
        }
    }

    pub fn handle_connected(&mut self, now: Instant) {
        self.link = Link::Up;
        self.broken = None;
        if self.down_logged {
            crate::info!(
                "origin map {}: Redis is back; registering again",
                self.name()
            );
            self.down_logged = false;
        }
        if let Some(auth) = self.config.auth.clone() {
            resp::write_command(&mut self.out, &[b"AUTH", auth.as_bytes()]);
            self.sent.push_back((Sent::Auth, now));
        }
        for r in self.regs.values_mut() {
            r.owned = false;
            r.in_flight = false;
            r.next = now;
        }
        self.refresh(now);
        for (waiter, key) in std::mem::take(&mut self.waiting) {
            self.send_get(waiter, key, now);
        }
    }

    /// The connection failed or ended.
    pub fn handle_disconnected(&mut self, why: &str, now: Instant) {
        if !self.down_logged {
            crate::warn!(
                "origin map {}: Redis unreachable ({}); local streams go on, registration resumes when it is back",
                self.name(),
                why.escape_debug()
            );
            self.down_logged = true;
        }
        self.link = Link::Down {
            retry_at: now + RETRY,
        };
        self.out.clear();
        self.input.clear();
        self.broken = None;
        for (sent, _) in std::mem::take(&mut self.sent) {
            if let Sent::Get { waiter, key } = sent {
                self.answers.push_back(Lookup {
                    waiter,
                    key,
                    url: Err("the origin map (Redis) is unreachable".into()),
                });
            }
        }
        for (waiter, key) in std::mem::take(&mut self.waiting) {
            self.answers.push_back(Lookup {
                waiter,
                key,
                url: Err("the origin map (Redis) is unreachable".into()),
            });
        }
        for r in self.regs.values_mut() {
            r.owned = false;
            r.in_flight = false;
        }
    }

    /// Why the glue must drop the connection, if it must.
    pub fn broken(&self) -> Option<&str> {
        self.broken.as_deref()
    }

    /// Bytes read from Redis.
    pub fn handle_input(&mut self, data: &[u8], now: Instant) {
        if self.broken.is_some() {
            return;
        }
        self.input.extend_from_slice(data);
        let mut at = 0;
        loop {
            match resp::parse(&self.input[at..]) {
                Ok(Some((reply, used))) => {
                    at += used;
                    self.on_reply(reply, now);
                }
                Ok(None) => break,
                Err(e) => {
                    self.broken = Some(format!("bad reply: {}", e.0));
                    break;
                }
            }
        }
        self.input.drain(..at);
        if self.input.len() > MAX_INPUT {
            self.broken = Some("a reply over 128 KiB".into());
        }
    }

    fn on_reply(&mut self, reply: Reply, now: Instant) {
        let Some((sent, _)) = self.sent.pop_front() else {
            self.broken = Some("a reply nothing asked for".into());
            return;
        };
        match sent {
            Sent::Auth => {
                if let Reply::Error(e) = reply {
                    crate::error!(
                        "origin map {}: AUTH refused: {}",
                        self.name(),
                        e.escape_debug()
                    );
                    self.broken = Some("AUTH refused".into());
                }
            }
            Sent::Set { key, nx } => {
                let name = self.name();
                let Some(r) = self.regs.get_mut(&key) else {
                    return; // unregistered meanwhile
                };
                r.in_flight = false;
                match reply {
                    Reply::Simple(_) => {
                        if !r.owned && nx {
                            crate::info!("origin map {name}: [{key}] registered as {}", r.value);
                        }
                        r.owned = true;
                        r.taken_logged = false;
                    }
                    Reply::Nil => {
                        r.owned = false;
                        r.next = r.next.min(now + TAKEN_RETRY);
                        if !r.taken_logged {
                            crate::warn!(
                                "origin map {name}: [{key}] is registered by another origin; trying again every {} ms",
                                TAKEN_RETRY.as_millis()
                            );
                            r.taken_logged = true;
                        }
                    }
                    other => {
                        crate::warn!("origin map {name}: SET [{key}]: {other:?}");
                    }
                }
            }
            Sent::Del => {}
            Sent::Get { waiter, key } => {
                let url = match reply {
                    Reply::Bulk(v) => String::from_utf8(v)
                        .map_err(|_| "the origin map's value is not text".to_string()),
                    Reply::Nil => Err("no origin has it (not in the origin map)".to_string()),
                    Reply::Error(e) => Err(format!("origin map: {}", e.escape_debug())),
                    other => Err(format!("origin map: unexpected {other:?}")),
                };
                self.answers.push_back(Lookup { waiter, key, url });
            }
        }
    }

    /// A stream started on a mapped host: registers it.
    pub fn register(
        &mut self,
        stream: StreamId,
        app: &str,
        name: &str,
        value: String,
        now: Instant,
    ) {
        let key = format!("{app}/{name}");
        self.by_stream.insert(stream, key.clone());
        self.regs.insert(
            key,
            Registration {
                value,
                owned: false,
                next: now,
                in_flight: false,
                taken_logged: false,
            },
        );
        self.refresh(now);
    }

    /// A stream ended: its key goes (if this origin holds it).
    pub fn unregister(&mut self, stream: StreamId, now: Instant) {
        let Some(key) = self.by_stream.remove(&stream) else {
            return;
        };
        if let Some(r) = self.regs.remove(&key) {
            if r.owned && self.link == Link::Up {
                resp::write_command(&mut self.out, &[b"DEL", key.as_bytes()]);
                self.sent.push_back((Sent::Del, now));
            }
        }
    }

    /// Asks where `key` is; the answer comes out of `poll_lookup`.
    pub fn lookup(&mut self, waiter: usize, key: PullKey, now: Instant) {
        match self.link {
            Link::Up => self.send_get(waiter, key, now),
            Link::Connecting if self.waiting.len() < MAX_WAITING => {
                self.waiting.push((waiter, key))
            }
            _ => self.answers.push_back(Lookup {
                waiter,
                key,
                url: Err("the origin map (Redis) is unreachable".into()),
            }),
        }
    }

    fn send_get(&mut self, waiter: usize, key: PullKey, now: Instant) {
        let k = format!("{}/{}", key.app, key.name);
        resp::write_command(&mut self.out, &[b"GET", k.as_bytes()]);
        self.sent.push_back((Sent::Get { waiter, key }, now));
    }

    pub fn poll_lookup(&mut self) -> Option<Lookup> {
        self.answers.pop_front()
    }

    /// Sends the registrations that are due.
    fn refresh(&mut self, now: Instant) {
        if self.link != Link::Up {
            return;
        }
        let ttl = TTL_SECS.to_string();
        for (key, r) in self.regs.iter_mut() {
            if r.in_flight || r.next > now {
                continue;
            }
            let mut args: Vec<&[u8]> = vec![
                b"SET",
                key.as_bytes(),
                r.value.as_bytes(),
                b"EX",
                ttl.as_bytes(),
            ];
            if !r.owned {
                args.push(b"NX");
            }
            resp::write_command(&mut self.out, &args);
            self.sent.push_back((
                Sent::Set {
                    key: key.clone(),
                    nx: !r.owned,
                },
                now,
            ));
            r.in_flight = true;
            r.next = now + REFRESH;
        }
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        if self.link == Link::Up {
            if self
                .sent
                .front()
                .is_some_and(|(_, at)| now.saturating_duration_since(*at) >= REPLY_TIMEOUT)
            {
                self.broken = Some(format!("no reply within {} s", REPLY_TIMEOUT.as_secs()));
                return;
            }
            self.refresh(now);
        }
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.link {
            Link::Down { retry_at } => Some(retry_at),
            Link::Connecting => None,
            Link::Up => {
                let refresh = self
                    .regs
                    .values()
                    .filter(|r| !r.in_flight)
                    .map(|r| r.next)
                    .min();
                let stall = self.sent.front().map(|(_, at)| *at + REPLY_TIMEOUT);
                crate::clock::earliest(refresh, stall)
            }
        }
    }

    /// Appends what to send to `buf`.
    pub fn poll_transmit(&mut self, buf: &mut Vec<u8>) {
        buf.append(&mut self.out);
    }

    pub fn has_output(&self) -> bool {
        !self.out.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(auth: Option<&str>, now: Instant) -> OriginMap {
        OriginMap::new(
            MapConfig {
                host: "127.0.0.1".into(),
                port: 6379,
                auth: auth.map(str::to_string),
                origin_host_name: "origin-a".into(),
            },
            vec!["default".into()],
            now,
        )
    }

    fn sent(m: &mut OriginMap) -> String {
        let mut b = Vec::new();
        m.poll_transmit(&mut b);
        String::from_utf8(b).unwrap()
    }

    fn key() -> PullKey {
        PullKey {
            vhost: "default".into(),
            app: "app".into(),
            name: "cam".into(),
        }
    }

    #[test]
    fn registers_refreshes_and_deletes() {
        let t0 = Instant::now();
        let mut m = map(Some("pw"), t0);
        assert!(m.poll_connect(t0));
        m.register(7, "app", "cam", "srt://origin-a:9999/app/cam".into(), t0);
        assert_eq!(sent(&mut m), "", "nothing before the connection is up");
        m.handle_connected(t0);
        assert_eq!(
            sent(&mut m),
            "*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*6\r\n$3\r\nSET\r\n$7\r\napp/cam\r\n$27\r\nsrt://origin-a:9999/app/cam\r\n$2\r\nEX\r\n$2\r\n10\r\n$2\r\nNX\r\n"
        );
        m.handle_input(b"+OK\r\n+OK\r\n", t0);
        assert_eq!(m.poll_timeout(), Some(t0 + REFRESH));
        m.handle_timeout(t0 + REFRESH);
        let s = sent(&mut m);
        assert!(
            s.starts_with("*5\r\n$3\r\nSET"),
            "a refresh, without NX: {s}"
        );
        m.handle_input(b"+OK\r\n", t0 + REFRESH);
        m.unregister(7, t0 + REFRESH);
        assert_eq!(sent(&mut m), "*2\r\n$3\r\nDEL\r\n$7\r\napp/cam\r\n");
        m.handle_input(b":1\r\n", t0 + REFRESH);
        assert!(m.broken().is_none());
    }

    #[test]
    fn taken_keys_are_tried_again_with_nx() {
        let t0 = Instant::now();
        let mut m = map(None, t0);
        m.poll_connect(t0);
        m.handle_connected(t0);
        m.register(1, "app", "cam", "srt://a:1/app/cam".into(), t0);
        sent(&mut m);
        m.handle_input(b"$-1\r\n", t0);
        assert_eq!(m.poll_timeout(), Some(t0 + TAKEN_RETRY));
        m.handle_timeout(t0 + TAKEN_RETRY);
        assert!(sent(&mut m).ends_with("$2\r\nNX\r\n"));
    }

    #[test]
    fn lookups_and_outages() {
        let t0 = Instant::now();
        let mut m = map(None, t0);
        // Down: answered at once.
        m.link = Link::Down {
            retry_at: t0 + RETRY,
        };
        m.lookup(5, key(), t0);
        assert!(m.poll_lookup().unwrap().url.is_err());
        assert!(!m.poll_connect(t0));
        assert!(m.poll_connect(t0 + RETRY));
        // Connecting: waits, then asked.
        m.lookup(6, key(), t0);
        m.handle_connected(t0 + RETRY);
        assert_eq!(sent(&mut m), "*2\r\n$3\r\nGET\r\n$7\r\napp/cam\r\n");
        let reply = b"$27\r\nsrt://origin-b:9999/app/cam\r\n";
        m.handle_input(&reply[..10], t0);
        assert!(m.poll_lookup().is_none(), "incomplete");
        m.handle_input(&reply[10..], t0);
        assert_eq!(
            m.poll_lookup(),
            Some(Lookup {
                waiter: 6,
                key: key(),
                url: Ok("srt://origin-b:9999/app/cam".into())
            })
        );
        m.lookup(7, key(), t0);
        sent(&mut m);
        m.handle_input(b"$-1\r\n", t0);
        assert!(m
            .poll_lookup()
            .unwrap()
            .url
            .unwrap_err()
            .contains("not in the origin map"));
        // A stalled Redis drops the connection; registrations resume later.
        let mut m = map(None, t0);
        m.poll_connect(t0);
        m.handle_connected(t0);
        m.register(1, "app", "cam", "srt://a:1/app/cam".into(), t0);
        m.handle_timeout(t0 + REPLY_TIMEOUT);
        assert!(m.broken().is_some());
        m.lookup(9, key(), t0 + REPLY_TIMEOUT);
        m.handle_disconnected("stalled", t0 + REPLY_TIMEOUT);
        let lost: Vec<_> = std::iter::from_fn(|| m.poll_lookup()).collect();
        assert_eq!(lost.len(), 1);
        assert!(m.poll_connect(t0 + REPLY_TIMEOUT + RETRY));
        m.handle_connected(t0 + REPLY_TIMEOUT + RETRY);
        assert!(sent(&mut m).contains("NX"), "registered again");
    }

    #[test]
    fn auth_refused_breaks_the_connection() {
        let t0 = Instant::now();
        let mut m = map(Some("bad"), t0);
        m.poll_connect(t0);
        m.handle_connected(t0);
        m.handle_input(b"-WRONGPASS invalid username-password pair\r\n", t0);
        assert_eq!(m.broken(), Some("AUTH refused"));
    }
}
