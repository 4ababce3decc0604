//! The operator console at `/console/`: three static files built into the
//! binary (no framework). They hold no secrets and are served without
//! authentication; the page asks for the access token and calls the API
//! with it, like any other client.

use crate::http::{Request, Response};

const INDEX: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");
/// The page's icon (a browser asks for one; a 404 in its console otherwise).
const ICON: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#1d232a"/><path d="M4 12h8L8 3z" fill="#f2a900"/></svg>"##;

/// The answer for a console path, `None` for any other path. `webrtc`:
/// the WebRTC signalling ports, which the page's preview may reach (its
/// only connections beyond the API).
pub(super) fn serve(req: &Request, webrtc: (Option<u16>, Option<u16>)) -> Option<Response> {
    let path = req.path();
    if path != "/console" && !path.starts_with("/console/") {
        return None;
    }
    if req.method() != "GET" && req.method() != "HEAD" {
        return Some(
            super::envelope::ApiError::method_not_allowed()
                .to_response()
                .with_header("Allow", "GET, HEAD, OPTIONS"),
        );
    }
    if path == "/console" {
        // The page's relative links need the trailing slash.
        return Some(Response::new(301, Vec::new()).with_header("Location", "/console/"));
    }
    let (body, content_type) = match path {
        "/console/" | "/console/index.html" => (INDEX, "text/html; charset=utf-8"),
        "/console/console.js" => (SCRIPT, "text/javascript; charset=utf-8"),
        "/console/console.css" => (STYLE, "text/css; charset=utf-8"),
        "/console/favicon.svg" => (ICON, "image/svg+xml"),
        _ => return Some(super::envelope::ApiError::controller_not_found().to_response()),
    };
    Some(
        Response::new(200, body.as_bytes().to_vec())
            .with_header("Content-Type", content_type)
            .with_header("Cache-Control", "no-cache")
            .with_header("X-Content-Type-Options", "nosniff")
            .with_header("Content-Security-Policy", policy(webrtc)),
    )
}

/// The page's Content-Security-Policy: its own files, the API, and the
/// WebRTC signalling ports on any host (the preview's WHEP requests).
fn policy((port, tls_port): (Option<u16>, Option<u16>)) -> String {
    let mut connect = String::from("'self'");
    if let Some(p) = port {
        connect.push_str(&format!(" http://*:{p}"));
    }
    if let Some(p) = tls_port {
        connect.push_str(&format!(" https://*:{p}"));
    }
    format!("default-src 'self'; connect-src {connect}; media-src 'self' blob: mediastream:; frame-ancestors 'none'")
}
