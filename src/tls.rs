//! TLS certificates: loading and checking PEM files into rustls certified
//! keys, and the resolvers that hand them to new handshakes. A resolver holds
//! its keys behind a lock so a reload swaps them atomically: handshakes that
//! start after the swap see the new key, open connections keep theirs.
//!
//! - [`ApiCertResolver`]: the API server's one certificate
//!   (`<Managers><Host><TLS>`).
//! - [`VhostCertResolver`]: every virtual host's certificate, chosen by SNI
//!   against the hosts' `host.names`; the media-side TLS listeners (RTMPS)
//!   use it.

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::{Arc, RwLock};

/// A certificate's files, as a virtual host or the API names them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TlsSpec {
    pub cert_path: String,
    pub key_path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain_cert_path: Option<String>,
}

/// Why a certificate could not be loaded; names the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertError {
    pub path: String,
    pub reason: String,
}

impl fmt::Display for CertError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

impl std::error::Error for CertError {}

pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_certs(path: &str) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let err = |reason: String| CertError {
        path: path.to_string(),
        reason,
    };
    let data = crate::sys::read_small_file(path.as_ref()).map_err(|e| err(e.to_string()))?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&data)
        .collect::<Result<_, _>>()
        .map_err(|e| err(format!("not a PEM certificate file: {e:?}")))?;
    if certs.is_empty() {
        return Err(err("no certificate found in the file".into()));
    }
    for c in &certs {
        rustls::server::ParsedCertificate::try_from(c)
            .map_err(|e| err(format!("certificate does not parse: {e}")))?;
    }
    Ok(certs)
}

/// Loads the certificate (plus chain) and key of `spec`, checking that the
/// chain parses and the key parses and matches the certificate.
pub fn load_certified_key(spec: &TlsSpec) -> Result<Arc<CertifiedKey>, CertError> {
    let mut chain = read_certs(&spec.cert_path)?;
    if let Some(chain_path) = &spec.chain_cert_path {
        chain.extend(read_certs(chain_path)?);
    }
    let key_err = |reason: String| CertError {
        path: spec.key_path.clone(),
        reason,
    };
    let key_data =
        crate::sys::read_small_file(spec.key_path.as_ref()).map_err(|e| key_err(e.to_string()))?;
    let key = PrivateKeyDer::from_pem_slice(&key_data)
        .map_err(|e| key_err(format!("not a PEM private key: {e:?}")))?;
    let provider = provider();
    let certified = CertifiedKey::from_der(chain, key, &provider).map_err(|e| {
        key_err(format!(
            "key does not match the certificate or is unusable: {e}"
        ))
    })?;
    Ok(Arc::new(certified))
}

/// A rustls server config that takes certificates from `resolver`, with the
/// ring provider and TLS 1.2 and 1.3.
pub fn server_config(resolver: Arc<dyn ResolvesServerCert>) -> Arc<rustls::ServerConfig> {
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map(|b| b.with_no_client_auth().with_cert_resolver(resolver));
    match config {
        Ok(c) => Arc::new(c),
        // panic-audit: both versions are in the ring provider; cannot fail.
        Err(e) => unreachable!("ring provider lacks TLS 1.2/1.3: {e}"),
    }
}

/// The API server's certificate; none while the configured files cannot be
/// loaded (DECISIONS 1: the port is bound and refuses handshakes with a TLS
/// alert until a reload succeeds).
#[derive(Debug)]
pub struct ApiCertResolver {
    current: RwLock<Option<Arc<CertifiedKey>>>,
    /// The TLS port, for the log line of a refused handshake.
    port: u16,
}

impl ApiCertResolver {
    pub fn new(key: Option<Arc<CertifiedKey>>, port: u16) -> Self {
        ApiCertResolver {
            current: RwLock::new(key),
            port,
        }
    }

    pub fn swap(&self, key: Arc<CertifiedKey>) {
        match self.current.write() {
            Ok(mut g) => *g = Some(key),
            Err(poisoned) => *poisoned.into_inner() = Some(key),
        }
    }

    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }
}

impl ResolvesServerCert for ApiCertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let key = self.current();
        if key.is_none() {
            refused_handshake(
                &format!("API TLS port {}", self.port),
                "the API certificate is not loaded; POST /v1/managers/api:reloadCertificate once the files are good",
            );
        }
        key
    }
}

/// Logs (once a minute per port) a TLS handshake refused for want of a
/// certificate; rustls answers the client with a `handshake_failure` alert.
fn refused_handshake(what: &str, why: &str) {
    // Keyed by the port (`what`), not by `why`: it may hold a peer's SNI.
    crate::log_throttled!(
        crate::log::Level::Error,
        ("tls-no-certificate", what),
        crate::log::NO_ADDRESS,
        "{what}: handshake refused with a TLS alert: {why}"
    );
}

/// One virtual host's certificate and the names it serves.
#[derive(Debug, Clone)]
pub struct VhostCert {
    pub vhost: String,
    pub names: Vec<String>,
    pub key: Arc<CertifiedKey>,
}

/// Virtual hosts' certificates, chosen by SNI.
#[derive(Debug, Default)]
pub struct VhostCertResolver {
    certs: RwLock<Vec<VhostCert>>,
}

impl VhostCertResolver {
    /// Replaces (or adds) the certificates of the given hosts at once.
    pub fn install(&self, certs: Vec<VhostCert>) {
        let mut guard = match self.certs.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        for c in certs {
            match guard.iter_mut().find(|x| x.vhost == c.vhost) {
                Some(slot) => *slot = c,
                None => guard.push(c),
            }
        }
    }

    /// Forgets a host's certificate (host deleted).
    pub fn remove(&self, vhost: &str) {
        let mut guard = match self.certs.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        guard.retain(|c| c.vhost != vhost);
    }

    /// The key for an SNI name: an exact-pattern match first, then the first
    /// host whose names match (wildcards), then, without SNI, the first host.
    pub fn key_for(&self, sni: Option<&str>) -> Option<Arc<CertifiedKey>> {
        let guard = match self.certs.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        match sni {
            Some(name) => guard
                .iter()
                .find(|c| c.names.iter().any(|n| n.eq_ignore_ascii_case(name)))
                .or_else(|| {
                    guard
                        .iter()
                        .find(|c| c.names.iter().any(|n| crate::wildcard::matches(n, name)))
                })
                .map(|c| c.key.clone()),
            None => guard.first().map(|c| c.key.clone()),
        }
    }

    pub fn hosts(&self) -> Vec<String> {
        match self.certs.read() {
            Ok(g) => g.iter().map(|c| c.vhost.clone()).collect(),
            Err(p) => p.into_inner().iter().map(|c| c.vhost.clone()).collect(),
        }
    }
}

impl ResolvesServerCert for VhostCertResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let key = self.key_for(hello.server_name());
        if key.is_none() {
            refused_handshake(
                "media TLS port",
                &format!(
                    "no virtual host certificate is loaded for SNI [{}]; reload with :reloadCertificate once the files are good",
                    hello.server_name().unwrap_or("")
                ),
            );
        }
        key
    }
}

/// The client config push outputs use for RTMPS: the web PKI roots
/// (Mozilla's, compiled in), TLS 1.2 and 1.3.
/// When the environment variable `SSL_CERT_FILE` names a PEM file, its
/// certificates are trusted too (private CAs; OpenSSL's convention).
pub fn client_config() -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = std::env::var_os("SSL_CERT_FILE") {
        let path = path.to_string_lossy().into_owned();
        match read_certs(&path) {
            Ok(certs) => {
                let (added, _) = roots.add_parsable_certificates(certs);
                crate::info!(
                    "TLS client (pushes, webhooks): {added} extra trusted certificate(s) from SSL_CERT_FILE {path}"
                );
            }
            Err(e) => crate::warn!("TLS client (pushes, webhooks): SSL_CERT_FILE not used: {e}"),
        }
    }
    client_config_with_roots(roots)
}

/// A client config trusting `roots` (tests add their own CA).
pub fn client_config_with_roots(roots: rustls::RootCertStore) -> Arc<rustls::ClientConfig> {
    match rustls::ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
    {
        Ok(b) => Arc::new(b.with_root_certificates(roots).with_no_client_auth()),
        // panic-audit: both versions are in the ring provider; cannot fail.
        Err(e) => unreachable!("ring provider lacks TLS 1.2/1.3: {e}"),
    }
}
