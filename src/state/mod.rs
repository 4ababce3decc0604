//! The registry: one plain-data table of everything kiln manages: virtual
//! hosts (from the config file or the API) and, as they land, applications,
//! streams and push tasks. API handlers read and change it; the loop carries
//! out the effects. [`store`] keeps its API-made part on disk.

pub mod store;
pub mod vhost;

use crate::config::{AppConfig, Config};
use store::{DurableState, FORMAT};
use vhost::VhostSpec;

/// Where a virtual host was declared. Config-file hosts are read-only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    ConfigFile,
    Api,
}

#[derive(Debug, Clone)]
pub struct Vhost {
    pub spec: VhostSpec,
    pub origin: Origin,
    pub apps: Vec<AppConfig>,
}

impl Vhost {
    /// `distribution`: the host's own, else the server's `<Name>`, else `kiln`.
    pub fn distribution<'a>(&'a self, server_name: Option<&'a str>) -> &'a str {
        self.spec
            .distribution
            .as_deref()
            .or(server_name)
            .unwrap_or("kiln")
    }
}

#[derive(Debug, Default)]
pub struct Registry {
    /// Creation order, config-file hosts first.
    vhosts: Vec<Vhost>,
    pub server_name: Option<String>,
}

impl Registry {
    pub fn from_config(config: &Config) -> Self {
        Registry {
            vhosts: config
                .vhosts
                .iter()
                .map(|v| Vhost {
                    spec: v.spec.clone(),
                    origin: Origin::ConfigFile,
                    apps: v.applications.clone(),
                })
                .collect(),
            server_name: config.name.clone(),
        }
    }

    /// Adds the API-made hosts of a loaded state file. Returns the names
    /// skipped because the config file now declares them.
    pub fn restore(&mut self, state: DurableState) -> Vec<String> {
        let mut skipped = Vec::new();
        for spec in state.vhosts {
            if self.vhost(&spec.name).is_some() {
                skipped.push(spec.name);
            } else {
                self.add_api_vhost(spec);
            }
        }
        skipped
    }

    pub fn vhosts(&self) -> &[Vhost] {
        &self.vhosts
    }

    pub fn vhost(&self, name: &str) -> Option<&Vhost> {
        self.vhosts.iter().find(|v| v.spec.name == name)
    }

    pub fn add_api_vhost(&mut self, spec: VhostSpec) {
        self.vhosts.push(Vhost {
            spec,
            origin: Origin::Api,
            apps: Vec::new(),
        });
    }

    pub fn remove_vhost(&mut self, name: &str) -> Option<Vhost> {
        let i = self.vhosts.iter().position(|v| v.spec.name == name)?;
        Some(self.vhosts.remove(i))
    }

    /// The part of the registry the state file keeps.
    pub fn durable(&self) -> DurableState {
        DurableState {
            format: FORMAT,
            vhosts: self
                .vhosts
                .iter()
                .filter(|v| v.origin == Origin::Api)
                .map(|v| v.spec.clone())
                .collect(),
        }
    }
}
