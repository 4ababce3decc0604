//! Pulled streams (DECISIONS 12): `POST .../apps/{app}/streams` makes kiln
//! take a stream from another server (an IP camera over RTSP), trying the
//! request's URLs in order and again after a back-off. `request` is the
//! API body and the durable spec, `table` every pull's course (sans-IO);
//! the protocol cores are `crate::rtsp`, the I/O `server/pull_io.rs`.

pub mod on_demand;
pub mod origin_map;
pub mod origins;
pub mod request;
pub mod resp;
pub mod table;

pub use request::{PullSpec, Source};
pub use table::{PullKey, PullTable};

/// The pull feature's state: every pull's course and the origin maps
/// (one per Redis the hosts' `originMapStore` name).
#[derive(Debug, Default)]
pub struct Pulls {
    pub table: PullTable,
    pub maps: Vec<origin_map::OriginMap>,
}

/// How the state file keeps persistent pulls (`"pulls"`, `addPull`/`deletePull`).
pub static KIND: crate::state::store::TaskKind = crate::state::store::TaskKind {
    list: "pulls",
    item: "pull",
    id_field: "name",
};

/// Fuzz entry: any Redis reply bytes into the RESP parser and an origin
/// map with a registration and a lookup in flight; never panics, bounded.
pub fn fuzz(data: &[u8]) {
    let _ = resp::parse(data);
    let now = std::time::Instant::now();
    let mut map = origin_map::OriginMap::new(
        origin_map::MapConfig {
            host: "127.0.0.1".into(),
            port: 6379,
            auth: Some("pw".into()),
            origin_host_name: "o".into(),
        },
        vec!["v".into()],
        now,
    );
    map.poll_connect(now);
    map.handle_connected(now);
    map.register(1, "app", "cam", "srt://o:1/app/cam".into(), now);
    map.lookup(
        3,
        PullKey {
            vhost: "v".into(),
            app: "app".into(),
            name: "cam".into(),
        },
        now,
    );
    for piece in data.chunks(61) {
        map.handle_input(piece, now);
        while map.poll_lookup().is_some() {}
        if map.broken().is_some() {
            break;
        }
    }
    map.handle_timeout(now + std::time::Duration::from_secs(3));
    let mut out = Vec::new();
    map.poll_transmit(&mut out);
}

#[cfg(test)]
mod fuzz_seeds {
    #[test]
    fn the_fuzz_entry_takes_replies_and_garbage() {
        for seed in [
            &b"+OK\r\n+OK\r\n$3\r\nabc\r\n"[..],
            b"-ERR\r\n$-1\r\n*2\r\n:1\r\n$1\r\nx\r\n",
            b"$99999999999999999999\r\n",
            b"*-1\r\n+OK\r\n+OK\r\n+OK\r\n+OK\r\n",
            &[b'$'; 200],
            b"",
        ] {
            super::fuzz(seed);
        }
    }
}
