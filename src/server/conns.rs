//! Who may hold a connection: the caps on accepted TCP connections per
//! service and, for the API, per client address, and the descriptor
//! reserve. An unauthenticated peer must not be able to take the
//! descriptors an operator's `curl` or a live stream needs:
//!
//! - every service has a cap on open connections (beyond: accept and close);
//! - the API has a cap per client address (`MaxConnectionsPerAddress`),
//!   and so has the viewer port (LL-HLS, HLS, WebRTC signalling and the
//!   TCP relay together: `<Bind><Publishers><LLHLS><MaxConnectionsPerAddress>`,
//!   512 of its 8192 by default), and so have the RTMP(S) ports
//!   ([`MAX_RTMP_PER_ADDRESS`] of 4096), so one address cannot take every
//!   slot;
//! - when the process nears its open-files limit, the loop first closes the
//!   oldest connections that never completed a request, publish or play
//!   ([`Endpoint::unproven_since`](super::endpoint::Endpoint::unproven_since)),
//!   on any port, before it refuses anyone.
//!
//! Every refusal is logged once a minute per address.

use super::Service;
use crate::config::ApiLimits;
use crate::log::Level;
use std::collections::HashMap;
use std::net::IpAddr;

/// Most RTMP(S) connections at once, and from one address (an encoder
/// farm behind one NAT has room; one address cannot take every
/// descriptor: a multitrack publisher holds one per track's memory file).
const MAX_RTMP_CONNECTIONS: usize = 4096;
pub(crate) const MAX_RTMP_PER_ADDRESS: usize = 64;
/// Most viewer connections at once (each pins at most ~16 KiB of request
/// bytes until it is answered).
const MAX_VIEWER_CONNECTIONS: usize = 8192;

/// Why a connection is not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The service's cap on open connections.
    ServiceCap(usize),
    /// The API's or the viewer port's cap per client address.
    AddressCap(usize),
}

#[derive(Debug)]
pub(crate) struct ConnCaps {
    api: usize,
    rtmp: usize,
    viewer: usize,
    api_by_address: HashMap<IpAddr, usize>,
    viewer_by_address: HashMap<IpAddr, usize>,
    rtmp_by_address: HashMap<IpAddr, usize>,
    /// Viewer-port connections from one address (0: no cap).
    max_viewer_per_address: usize,
    /// `Managers/API/Limits/MaxConnections` and `MaxConnectionsPerAddress`.
    max_api: usize,
    max_api_per_address: usize,
    /// Descriptors kept free for what the loop opens itself (pushes,
    /// pulls, webhooks, files, the state journal).
    reserve: usize,
    nofile: usize,
}

impl ConnCaps {
    pub(crate) fn new(limits: &ApiLimits, nofile: u64) -> Self {
        let nofile = usize::try_from(nofile).unwrap_or(usize::MAX);
        ConnCaps {
            api: 0,
            rtmp: 0,
            viewer: 0,
            api_by_address: HashMap::new(),
            viewer_by_address: HashMap::new(),
            rtmp_by_address: HashMap::new(),
            max_viewer_per_address: 0,
            max_api: limits.max_connections,
            max_api_per_address: limits.max_connections_per_address,
            reserve: (nofile / 16).max(64),
            nofile,
        }
    }

    /// With a cap on viewer-port connections from one address (0: none).
    pub(crate) fn with_viewer_share(mut self, per_address: usize) -> Self {
        self.max_viewer_per_address = per_address;
        self
    }

    /// Takes a connection of `service` from `ip`, or says why not (logged).
    pub(crate) fn admit(&mut self, service: Service, ip: IpAddr) -> Result<(), Refusal> {
        let (open, cap) = match service {
            Service::Api => (self.api, self.max_api),
            Service::Rtmp => (self.rtmp, MAX_RTMP_CONNECTIONS),
            Service::Viewer | Service::WebRtcRelay => (self.viewer, MAX_VIEWER_CONNECTIONS),
        };
        if open >= cap {
            crate::log_throttled!(
                Level::Warn,
                "connection-cap",
                ip,
                "{service:?} connection cap ({cap}) reached: a connection from {ip} is closed"
            );
            return Err(Refusal::ServiceCap(cap));
        }
        if service == Service::Api {
            let per = self.max_api_per_address;
            let n = self.api_by_address.get(&ip).copied().unwrap_or(0);
            if per > 0 && n >= per {
                crate::log_throttled!(
                    Level::Warn,
                    "api-address-cap",
                    ip,
                    "API connections from {ip}: the cap of {per} per address (Managers/API/Limits/MaxConnectionsPerAddress) is reached; new ones are closed"
                );
                return Err(Refusal::AddressCap(per));
            }
            *self.api_by_address.entry(ip).or_insert(0) += 1;
        }
        if matches!(service, Service::Viewer | Service::WebRtcRelay) {
            let per = self.max_viewer_per_address;
            let n = self.viewer_by_address.get(&ip).copied().unwrap_or(0);
            if per > 0 && n >= per {
                crate::log_throttled!(
                    Level::Warn,
                    "viewer-address-cap",
                    ip,
                    "viewer connections from {ip}: the cap of {per} per address (<Bind><Publishers><LLHLS><MaxConnectionsPerAddress>) is reached; new ones are closed"
                );
                return Err(Refusal::AddressCap(per));
            }
            *self.viewer_by_address.entry(ip).or_insert(0) += 1;
        }
        if service == Service::Rtmp {
            let per = MAX_RTMP_PER_ADDRESS;
            let n = self.rtmp_by_address.get(&ip).copied().unwrap_or(0);
            if n >= per {
                crate::log_throttled!(
                    Level::Warn,
                    "rtmp-address-cap",
                    ip,
                    "RTMP connections from {ip}: the cap of {per} per address is reached; new ones are closed"
                );
                return Err(Refusal::AddressCap(per));
            }
            *self.rtmp_by_address.entry(ip).or_insert(0) += 1;
        }
        *self.count(service) += 1;
        Ok(())
    }

    /// A connection taken by [`admit`](Self::admit) is closed.
    pub(crate) fn release(&mut self, service: Service, ip: IpAddr) {
        let c = self.count(service);
        *c = c.saturating_sub(1);
        let by_address = match service {
            Service::Api => &mut self.api_by_address,
            Service::Viewer | Service::WebRtcRelay => &mut self.viewer_by_address,
            Service::Rtmp => &mut self.rtmp_by_address,
        };
        if let Some(n) = by_address.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                by_address.remove(&ip);
            }
        }
    }

    fn count(&mut self, service: Service) -> &mut usize {
        match service {
            Service::Api => &mut self.api,
            Service::Rtmp => &mut self.rtmp,
            Service::Viewer | Service::WebRtcRelay => &mut self.viewer,
        }
    }

    /// How many unproven connections to close before taking another, with
    /// `open` descriptors in use: none while the reserve is free; near the
    /// limit (or `short`: `accept` failed for want of them), a batch, so the
    /// scan for them is not paid per accept.
    pub(crate) fn to_reap(&self, open: usize, short: bool) -> usize {
        if !short && open + self.reserve < self.nofile {
            0
        } else {
            (self.nofile / 8).max(16)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(n: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, n])
    }

    #[test]
    fn rtmp_has_a_share_per_address() {
        let mut c = ConnCaps::new(&ApiLimits::default(), 65_536);
        for _ in 0..MAX_RTMP_PER_ADDRESS {
            assert!(c.admit(Service::Rtmp, ip(2)).is_ok());
        }
        assert_eq!(
            c.admit(Service::Rtmp, ip(2)),
            Err(Refusal::AddressCap(MAX_RTMP_PER_ADDRESS))
        );
        assert!(c.admit(Service::Rtmp, ip(3)).is_ok());
        c.release(Service::Rtmp, ip(2));
        assert!(c.admit(Service::Rtmp, ip(2)).is_ok());
    }

    #[test]
    fn the_api_cap_is_per_address_and_released() {
        let limits = ApiLimits {
            max_connections_per_address: 2,
            ..ApiLimits::default()
        };
        let mut c = ConnCaps::new(&limits, 100_000);
        assert!(c.admit(Service::Api, ip(2)).is_ok());
        assert!(c.admit(Service::Api, ip(2)).is_ok());
        assert_eq!(c.admit(Service::Api, ip(2)), Err(Refusal::AddressCap(2)));
        // Another address is not affected.
        assert!(c.admit(Service::Api, ip(3)).is_ok());
        c.release(Service::Api, ip(2));
        assert!(c.admit(Service::Api, ip(2)).is_ok());
        // Viewers (unless given one) and RTMP have no per-address cap.
        for _ in 0..10 {
            assert!(c.admit(Service::Viewer, ip(2)).is_ok());
        }
    }

    #[test]
    fn the_viewer_port_has_a_share_per_address_with_the_relay() {
        let mut c = ConnCaps::new(&ApiLimits::default(), 100_000).with_viewer_share(3);
        assert!(c.admit(Service::Viewer, ip(2)).is_ok());
        assert!(c.admit(Service::WebRtcRelay, ip(2)).is_ok());
        assert!(c.admit(Service::Viewer, ip(2)).is_ok());
        assert_eq!(c.admit(Service::Viewer, ip(2)), Err(Refusal::AddressCap(3)));
        assert_eq!(
            c.admit(Service::WebRtcRelay, ip(2)),
            Err(Refusal::AddressCap(3))
        );
        assert!(c.admit(Service::Viewer, ip(3)).is_ok());
        c.release(Service::WebRtcRelay, ip(2));
        assert!(c.admit(Service::Viewer, ip(2)).is_ok());
    }

    #[test]
    fn zero_means_no_per_address_cap_and_the_service_cap_holds() {
        let limits = ApiLimits {
            max_connections_per_address: 0,
            max_connections: 3,
            ..ApiLimits::default()
        };
        let mut c = ConnCaps::new(&limits, 100_000);
        for _ in 0..3 {
            assert!(c.admit(Service::Api, ip(2)).is_ok());
        }
        assert_eq!(c.admit(Service::Api, ip(4)), Err(Refusal::ServiceCap(3)));
    }

    #[test]
    fn reaping_starts_near_the_descriptor_limit() {
        let c = ConnCaps::new(&ApiLimits::default(), 1024);
        assert_eq!(c.to_reap(100, false), 0);
        assert!(c.to_reap(1000, false) >= 16);
        assert!(c.to_reap(100, true) >= 16);
    }
}
