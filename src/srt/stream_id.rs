//! SRT stream ids as callers write them (OME's forms): SRT's access-control
//! form `#!::h=host,r=app/stream,m=publish` (also percent-encoded, as some
//! URL-driven callers send it), and the URL forms
//! `srt://host[:port]/app/stream[?mode=request]`, `host/app/stream`,
//! `app/stream`. A core piece: the SRT listener and the API's push checks
//! read them the same way.

/// The mode a streamid asks for: `m=` in the access-control form, `mode=`
/// in the query of the URL forms; `None` when it says none (publish).
pub fn stream_id_mode(id: &str) -> Option<String> {
    let id = access_control_form(id);
    if let Some(acl) = id.strip_prefix("#!::") {
        return acl
            .split(',')
            .find_map(|kv| kv.strip_prefix("m="))
            .map(str::to_string);
    }
    let (_, query) = id.split_once('?')?;
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("mode="))
        .map(str::to_string)
}

/// The streamid trimmed, and percent-decoded when that makes it SRT's
/// access-control form (`%23!::r=...` as some URL-driven callers send it).
pub fn access_control_form(id: &str) -> std::borrow::Cow<'_, str> {
    let id = id.trim();
    if !id.starts_with("#!::") && id.starts_with("%23") {
        if let Some(decoded) = crate::http::percent_decode(id) {
            if decoded.starts_with("#!::") {
                return decoded.into();
            }
        }
    }
    id.into()
}

/// (host or vhost name, app, stream) from a streamid.
pub fn parse_stream_id(id: &str) -> Option<(Option<String>, String, String)> {
    let id = access_control_form(id);
    let id = id.as_ref();
    if let Some(acl) = id.strip_prefix("#!::") {
        let (mut host, mut resource, mut mode) = (None, None, None);
        for kv in acl.split(',') {
            match kv.split_once('=') {
                Some(("h", v)) => host = Some(v.to_string()),
                Some(("r", v)) => resource = Some(v.to_string()),
                Some(("m", v)) => mode = Some(v.to_string()),
                _ => {}
            }
        }
        if mode.is_some_and(|m| m != "publish" && m != "request") {
            return None;
        }
        let (app, stream) = resource?
            .split_once('/')
            .map(|(a, s)| (a.to_string(), s.to_string()))?;
        return (!app.is_empty() && !stream.is_empty()).then_some((host, app, stream));
    }
    let decoded = crate::http::percent_decode(id).unwrap_or_else(|| id.to_string());
    let path = match decoded.split_once("://") {
        Some((_, rest)) => rest.to_string(),
        None => decoded,
    };
    let path = path.split('?').next().unwrap_or("");
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    match parts.as_slice() {
        [host, app, stream] => Some((
            Some(crate::http::host::host_without_port(host).to_string()),
            app.to_string(),
            stream.to_string(),
        )),
        [app, stream] => Some((None, app.to_string(), stream.to_string())),
        _ => None,
    }
}
