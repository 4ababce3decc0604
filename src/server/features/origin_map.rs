//! The origin maps (`originMapStore`, one per Redis): streams that start
//! here are registered and unregistered when they end; lookups become
//! on-demand pulls; each map's Redis connection ([`RedisIo`]) is flushed
//! when the map has something to send or a timer due.

use crate::pull::on_demand::{self, OnDemand};
use crate::pull::origin_map::{MapConfig, OriginMap};
use crate::pull::table::{PullAnswer, NO_WAITER};
use crate::pull::PullKey;
use crate::server::core::Core;
use crate::server::feature::Feature;
use crate::server::redis_io::RedisIo;
use crate::state::streams::IngestOutput;
use mio::Token;
use std::time::Instant;

pub(crate) struct OriginMaps;

impl Feature for OriginMaps {
    /// One origin map (and its Redis connection) per Redis the hosts'
    /// `originMapStore` name.
    fn start(&mut self, core: &mut Core, now: Instant) {
        let mut maps: Vec<OriginMap> = Vec::new();
        for v in core.api.registry.vhosts() {
            let Some(store) = &v.spec.origin_map_store else {
                continue;
            };
            let Some((host, port)) = crate::http::url::split_authority(&store.redis_server.host)
                .ok()
                .map(|(h, p)| (h.to_string(), p.unwrap_or(6379)))
            else {
                crate::warn!(
                    "virtual host [{}]: originMapStore Redis host [{}] is not host:port; ignored",
                    v.spec.name,
                    store.redis_server.host.escape_debug()
                );
                continue;
            };
            let config = MapConfig {
                host,
                port,
                auth: store.redis_server.auth.clone().filter(|a| !a.is_empty()),
                origin_host_name: store.origin_host_name.clone(),
            };
            match maps.iter_mut().find(|m| m.config == config) {
                Some(m) => m.vhosts.push(v.spec.name.clone()),
                None => maps.push(OriginMap::new(config, vec![v.spec.name.clone()], now)),
            }
        }
        if maps.is_empty() {
            return;
        }
        if core.srt_port.is_none() {
            crate::warn!("originMapStore: no SRT port (Bind/Providers/SRT); this server registers no stream, edges pull over SRT");
        }
        let n = maps.len();
        core.api.pulls.maps = maps;
        for i in 0..n {
            let m = &core.api.pulls.maps[i];
            crate::info!(
                "origin map on Redis {}:{} for [{}]",
                m.config.host,
                m.config.port,
                m.vhosts.join(", ")
            );
            if let Some(token) = core.add_endpoint(now, |_| Box::new(RedisIo::new(i))) {
                core.api.pulls.maps[i].io = Some(token.0);
            }
        }
    }

    /// A stream started or ended: the origin maps of its host hear it.
    fn on_ingest(&mut self, o: &IngestOutput, core: &mut Core, now: Instant) {
        let api = &mut core.api;
        if api.pulls.maps.is_empty() {
            return;
        }
        if let Some(id) = o.ended {
            for m in api.pulls.maps.iter_mut() {
                m.unregister(id, now);
            }
        }
        let (Some(id), Some(port)) = (o.started, core.srt_port) else {
            return;
        };
        let Some(s) = api.registry.streams.get(id) else {
            return;
        };
        let key = PullKey {
            vhost: s.vhost.clone(),
            app: s.app.clone(),
            name: s.name.clone(),
        };
        if api.pulls.table.is_on_demand(&key) {
            return; // an edge's copy: the origin holds the key
        }
        for m in api
            .pulls
            .maps
            .iter_mut()
            .filter(|m| m.vhosts.contains(&key.vhost))
        {
            let value = format!(
                "srt://{}:{port}/{}/{}",
                m.config.origin_host_name, key.app, key.name
            );
            m.register(id, &key.app, &key.name, value, now);
        }
    }

    /// Turns lookups into on-demand pulls and lets each map's connection
    /// send and run its timers.
    fn drive(&mut self, core: &mut Core, now: Instant) -> Option<Instant> {
        for i in 0..core.api.pulls.maps.len() {
            while let Some(l) = core.api.pulls.maps[i].poll_lookup() {
                let api = &mut core.api;
                let outcome = match &l.url {
                    Ok(url) => on_demand::from_map(
                        &api.registry,
                        &mut api.pulls,
                        &l.key,
                        url,
                        l.waiter,
                        now,
                    ),
                    Err(why) => OnDemand::Refused(404, why.clone()),
                };
                let why = match outcome {
                    OnDemand::Waiting => continue,
                    _ if l.waiter == NO_WAITER => continue,
                    OnDemand::NotFound => "not found".to_string(),
                    OnDemand::Refused(_, why) => why,
                };
                let answer = PullAnswer {
                    waiter: l.waiter,
                    key: l.key,
                    result: Err(why),
                };
                let _ = core.guarded(Token(answer.waiter), now, |ep, cx| {
                    ep.pull_answered(answer, cx)
                });
            }
            let m = &core.api.pulls.maps[i];
            let due = m.has_output() || m.poll_timeout().is_some_and(|t| t <= now);
            if let (true, Some(io)) = (due, m.io) {
                let _ = core.guarded(Token(io), now, |ep, cx| ep.flush(cx));
            }
        }
        core.api
            .pulls
            .maps
            .iter()
            .filter_map(|m| m.poll_timeout())
            .min()
    }
}
