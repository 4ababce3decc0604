//! Who may publish and who may watch (DECISIONS section 11): OME's
//! SignedPolicy ([`policy`]) and AdmissionWebhooks ([`webhook`], sent with
//! the sans-IO [`http_client`]), decided per session by the
//! [`manager::AccessManager`]. The loop's glue sends the webhook requests
//! (`server/webhook_io.rs`); RTMP, SRT and viewer connections ask the
//! manager before a session starts.

pub mod http_client;
pub mod manager;
pub mod policy;
pub mod webhook;

/// Does a URL authority (`host`, `host:port`, `[v6]:port`) name a port?
/// The signed URL always has one; kiln adds the listener's when not.
pub fn has_port(authority: &str) -> bool {
    match authority.strip_prefix('[') {
        Some(v6) => v6.contains("]:"),
        None => authority.contains(':'),
    }
}

/// (vhost, app, stream) a webhook's `new_url` names on this server.
pub fn redirect(
    registry: &crate::state::Registry,
    url: &str,
) -> Result<(String, String, String), String> {
    let bad = || format!("the webhook's new_url [{}] names no stream here", url);
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let rest = rest.split('?').next().unwrap_or("");
    let mut parts = rest.split('/').filter(|p| !p.is_empty());
    let (Some(authority), Some(app), Some(stream)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let host = crate::http::host::host_without_port(authority);
    let vhost = registry.vhost_serving(host).ok_or_else(bad)?;
    Ok((vhost.spec.name.clone(), app.to_string(), stream.to_string()))
}
