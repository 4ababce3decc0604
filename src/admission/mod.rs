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
