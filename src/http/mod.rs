//! HTTP/1.1 for the management API, sans-IO: [`request`] turns bytes into
//! requests, [`response`] turns responses into bytes. The connection glue in
//! `server` owns the sockets, TLS and time-outs.

pub mod request;
pub mod response;

pub use request::{ReaderLimits, Request, RequestError, RequestReader};
pub use response::{write_response, Response};
