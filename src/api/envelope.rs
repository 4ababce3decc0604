//! The response envelope (`statusCode`, `message`, `response`, in that
//! order) and the one table of error messages, so every handler answers in
//! the specification's words.

use crate::http::Response;
use serde::Serialize;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope<'a, T: Serialize> {
    pub status_code: u16,
    pub message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response: Option<T>,
}

/// The `message` of a successful response.
pub const OK: &str = "OK";

fn to_body<T: Serialize>(value: &T) -> Vec<u8> {
    // Serialising our own plain data cannot fail; an empty body is the
    // least harmful answer if it ever did.
    serde_json::to_vec(value).unwrap_or_default()
}

/// 200 with a `response`.
pub fn ok<T: Serialize>(response: T) -> Response {
    Response::new(
        200,
        to_body(&Envelope {
            status_code: 200,
            message: OK,
            response: Some(response),
        }),
    )
}

/// 200 without a `response` (simple confirmations).
pub fn ok_empty() -> Response {
    Response::new(
        200,
        to_body(&Envelope::<()> {
            status_code: 200,
            message: OK,
            response: None,
        }),
    )
}

/// The answer to a batch creation (`POST /v1/vhosts`, `POST .../apps`): a
/// bare array of per-item envelopes; the status is the items' common code,
/// or 207 when they differ (200 for an empty batch). `Ok` items carry their
/// `response`.
pub fn batch<T: Serialize>(items: &[Result<T, ApiError>]) -> Response {
    batch_with(items, |body, response| {
        serde_json::to_writer(
            body,
            &Envelope {
                status_code: 200,
                message: OK,
                response: Some(response),
            },
        )
    })
}

/// A batch of confirmations (`:sendEvents`): as [`batch`], with `Ok`
/// items as `{"statusCode":200,"message":"OK"}`.
pub fn batch_status(items: &[Result<(), ApiError>]) -> Response {
    batch_with(items, |body, _| {
        serde_json::to_writer(
            body,
            &Envelope::<()> {
                status_code: 200,
                message: OK,
                response: None,
            },
        )
    })
}

fn batch_with<T>(
    items: &[Result<T, ApiError>],
    write_ok: impl Fn(&mut Vec<u8>, &T) -> serde_json::Result<()>,
) -> Response {
    // Written item by item (not through `Value`, whose maps sort keys) so
    // each keeps the envelope's key order.
    let mut body = Vec::with_capacity(64 * items.len() + 2);
    body.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        let _ = match item {
            Ok(response) => write_ok(&mut body, response),
            Err(e) => {
                // OME's items carry the bare text (no `[HTTP] ... (409)`).
                e.write_item_envelope(&mut body);
                Ok(())
            }
        };
    }
    body.push(b']');
    let code = |item: &Result<T, ApiError>| item.as_ref().map_or_else(|e| e.status(), |_| 200);
    let status = match items.first() {
        None => 200,
        Some(first) if items.iter().all(|i| code(i) == code(first)) => code(first),
        Some(_) => 207,
    };
    Response::new(status, body)
}

/// What an API call can fail with. Each variant's status code and its
/// text (the specification's / DECISIONS' words) are in one place:
/// [`ApiError::status`] and the `Display` impl; the envelope's `message`
/// is `[HTTP] {text} ({status})`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApiError {
    /// 400 with what is wrong (bodies, names, fields).
    BadRequest(String),
    /// 400 from OME's config layer: its message is `[Config] ...`, with no
    /// `[HTTP]` around it (a required field missing from an item).
    Config(String),
    /// A `:startPush` body the push module refused.
    Push(crate::push::request::RequestError),
    /// A virtual host, application or output profile the registry refused:
    /// `what` it is, which item of a batch (if one), and why.
    InvalidSpec {
        what: &'static str,
        item: Option<usize>,
        error: crate::state::SpecError,
    },
    AuthRequired,
    InvalidAuthHeader,
    InvalidCredential,
    ReadOnly {
        vhost: String,
    },
    VhostNotFound {
        vhost: String,
    },
    AppNotFound {
        vhost: String,
        app: String,
    },
    StreamNotFound {
        vhost: String,
        app: String,
        stream: String,
    },
    AppExists {
        vhost: String,
        app: String,
    },
    VhostExists {
        vhost: String,
    },
    ControllerNotFound,
    MethodNotAllowed,
    Misdirected {
        host: String,
    },
    Internal,
    /// Errors of the HTTP layer and others with their own status (408,
    /// 413, 431, 409 for a push id in use, ...).
    Http {
        status: u16,
        text: String,
    },
}

impl ApiError {
    pub fn status(&self) -> u16 {
        match self {
            ApiError::BadRequest(_)
            | ApiError::Config(_)
            | ApiError::Push(_)
            | ApiError::InvalidSpec { .. } => 400,
            ApiError::AuthRequired | ApiError::InvalidAuthHeader | ApiError::InvalidCredential => {
                401
            }
            ApiError::ReadOnly { .. } => 403,
            ApiError::VhostNotFound { .. }
            | ApiError::AppNotFound { .. }
            | ApiError::StreamNotFound { .. }
            | ApiError::ControllerNotFound => 404,
            ApiError::MethodNotAllowed => 405,
            ApiError::AppExists { .. } | ApiError::VhostExists { .. } => 409,
            ApiError::Misdirected { .. } => 421,
            ApiError::Internal => 500,
            ApiError::Http { status, .. } => *status,
        }
    }

    /// The envelope's `message`.
    pub fn message(&self) -> String {
        match self {
            ApiError::Config(_) => format!("[Config] {self}"),
            _ => format!("[HTTP] {self} ({})", self.status()),
        }
    }

    pub fn bad_request(why: impl std::fmt::Display) -> Self {
        ApiError::BadRequest(why.to_string())
    }
    pub fn auth_required() -> Self {
        ApiError::AuthRequired
    }
    pub fn invalid_auth_header() -> Self {
        ApiError::InvalidAuthHeader
    }
    pub fn invalid_credential() -> Self {
        ApiError::InvalidCredential
    }
    pub fn read_only(vhost: &str) -> Self {
        ApiError::ReadOnly {
            vhost: vhost.into(),
        }
    }
    pub fn vhost_not_found(vhost: &str) -> Self {
        ApiError::VhostNotFound {
            vhost: vhost.into(),
        }
    }
    pub fn app_not_found(vhost: &str, app: &str) -> Self {
        ApiError::AppNotFound {
            vhost: vhost.into(),
            app: app.into(),
        }
    }
    pub fn stream_not_found(vhost: &str, app: &str, stream: &str) -> Self {
        ApiError::StreamNotFound {
            vhost: vhost.into(),
            app: app.into(),
            stream: stream.into(),
        }
    }
    pub fn app_exists(vhost: &str, app: &str) -> Self {
        ApiError::AppExists {
            vhost: vhost.into(),
            app: app.into(),
        }
    }
    pub fn controller_not_found() -> Self {
        ApiError::ControllerNotFound
    }
    pub fn method_not_allowed() -> Self {
        ApiError::MethodNotAllowed
    }
    pub fn vhost_exists(vhost: &str) -> Self {
        ApiError::VhostExists {
            vhost: vhost.into(),
        }
    }
    pub fn misdirected(host: &str) -> Self {
        ApiError::Misdirected { host: host.into() }
    }
    pub fn internal() -> Self {
        ApiError::Internal
    }
    pub fn http(status: u16, text: impl std::fmt::Display) -> Self {
        ApiError::Http {
            status,
            text: text.to_string(),
        }
    }
    /// A spec the registry refused (`what`: "application", "virtual host",
    /// "output profile"; `item`: its place in a batch).
    pub fn invalid_spec(
        what: &'static str,
        item: Option<usize>,
        error: crate::state::SpecError,
    ) -> Self {
        ApiError::InvalidSpec { what, item, error }
    }

    pub fn invalid_json(e: &serde_json::Error) -> Self {
        let text = e.to_string();
        let what = match text.find(" at line ") {
            Some(i) => &text[..i],
            None => &text,
        };
        ApiError::BadRequest(format!(
            "Invalid JSON at line {} column {}: {what}",
            e.line(),
            e.column()
        ))
    }

    fn write_envelope(&self, out: &mut Vec<u8>) {
        let message = self.message();
        let _ = serde_json::to_writer(
            out,
            &Envelope::<()> {
                status_code: self.status(),
                message: &message,
                response: None,
            },
        );
    }

    /// An item of a batch answer: the text alone, as OME writes it.
    fn write_item_envelope(&self, out: &mut Vec<u8>) {
        let _ = serde_json::to_writer(
            out,
            &Envelope::<()> {
                status_code: self.status(),
                message: &self.to_string(),
                response: None,
            },
        );
    }

    pub fn to_response(&self) -> Response {
        let mut body = Vec::new();
        self.write_envelope(&mut body);
        Response::new(self.status(), body)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::BadRequest(why) | ApiError::Config(why) => f.write_str(why),
            ApiError::Push(e) => write!(f, "{e}"),
            ApiError::InvalidSpec { what, item, error } => match item {
                Some(i) => write!(f, "Invalid {what} (item {i}): {error}"),
                None => write!(f, "Invalid {what}: {error}"),
            },
            ApiError::AuthRequired => f.write_str("Authorization header is required to call API"),
            ApiError::InvalidAuthHeader => f.write_str("Invalid authorization header"),
            ApiError::InvalidCredential => f.write_str("Invalid credential"),
            ApiError::ReadOnly { vhost } => write!(f, "The VirtualHost is read-only: [{vhost}]"),
            ApiError::VhostNotFound { vhost } => {
                write!(f, "Could not find the virtual host: [{vhost}]")
            }
            ApiError::AppNotFound { vhost, app } => {
                write!(f, "Could not find the application: [{vhost}/{app}]")
            }
            ApiError::StreamNotFound { vhost, app, stream } => {
                // OME names the application by its internal name
                // (`#vhost#app`), and scripts match on it.
                write!(
                    f,
                    "Could not find the stream: [{vhost}/#{vhost}#{app}/{stream}]"
                )
            }
            ApiError::AppExists { vhost, app } => {
                write!(f, "The application already exists: [{vhost}/{app}]")
            }
            ApiError::VhostExists { vhost } => {
                write!(f, "The virtual host already exists: [{vhost}]")
            }
            ApiError::ControllerNotFound => f.write_str("Controller not found"),
            ApiError::MethodNotAllowed => f.write_str("Method not allowed"),
            ApiError::Misdirected { host } => {
                write!(f, "Misdirected request: host [{host}] is not served")
            }
            ApiError::Internal => f.write_str("Internal Server Error"),
            ApiError::Http { text, .. } => f.write_str(text),
        }
    }
}

impl From<crate::push::request::RequestError> for ApiError {
    fn from(e: crate::push::request::RequestError) -> Self {
        ApiError::Push(e)
    }
}

/// A request body that must be a JSON object, as OME's action bodies are:
/// not JSON is 400 with the syntax error, another JSON value 400 "Request
/// body must be an object". `empty_is_object`: an empty body reads as `{}`.
pub fn object_body(body: &[u8], empty_is_object: bool) -> Result<serde_json::Value, ApiError> {
    if empty_is_object && body.iter().all(u8::is_ascii_whitespace) {
        return Ok(serde_json::Value::Object(Default::default()));
    }
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| ApiError::invalid_json(&e))?;
    if !value.is_object() {
        return Err(ApiError::bad_request("Request body must be an object"));
    }
    Ok(value)
}

/// An object body as the handler's request type: a missing or mistyped
/// field is 400 "Invalid request: ...".
pub fn from_object<T: serde::de::DeserializeOwned>(
    value: serde_json::Value,
) -> Result<T, ApiError> {
    typed(value).map_err(|e| ApiError::bad_request(format_args!("Invalid request: {e}")))
}

/// A JSON value as `T`; the error names the path of the field it is about
/// (`outputProfiles.outputProfile[0].encodes.videos[1]: missing field
/// \`bypass\``), so "missing field `name`" is never read as the object's own.
/// serde_path_to_error: a small crate (dtolnay's) that tracks the path
/// while serde deserializes; doing the same by hand means a Deserializer
/// wrapper of every serde_json type.
pub fn typed<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." {
            inner.to_string()
        } else {
            format!("{path}: {inner}")
        }
    })
}

/// A request body (bytes) as `T`: syntax errors as [`ApiError::invalid_json`],
/// data errors with the field's path, prefixed by `what`.
pub fn typed_body<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, ApiError> {
    let value: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| ApiError::invalid_json(&e))?;
    typed(value).map_err(|e| ApiError::bad_request(format_args!("{what}: {e}")))
}

/// Refuses a JSON body with a key twice in one object (400), which serde
/// would otherwise take as "last wins". Bodies that are not JSON pass here
/// and get their syntax error from the handler that parses them.
pub fn check_duplicate_keys(body: &[u8]) -> Result<(), ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    match serde_json::from_slice::<NoDuplicateKeys>(body) {
        Err(e) if e.to_string().starts_with(DUPLICATE_KEY) => Err(ApiError::invalid_json(&e)),
        _ => Ok(()),
    }
}

const DUPLICATE_KEY: &str = "duplicate key";

/// Walks any JSON value, failing on the first object with a repeated key.
struct NoDuplicateKeys;

impl<'de> serde::Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NoDuplicateKeysVisitor)
    }
}

struct NoDuplicateKeysVisitor;

impl<'de> serde::de::Visitor<'de> for NoDuplicateKeysVisitor {
    type Value = NoDuplicateKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(NoDuplicateKeys)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
        Ok(NoDuplicateKeys)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if seen.contains(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "{DUPLICATE_KEY} [{key}]"
                )));
            }
            seen.insert(key);
            map.next_value::<NoDuplicateKeys>()?;
        }
        Ok(NoDuplicateKeys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_texts() {
        let r = ApiError::vhost_not_found("x").to_response();
        assert_eq!(
            String::from_utf8(r.body).unwrap(),
            r#"{"statusCode":404,"message":"[HTTP] Could not find the virtual host: [x] (404)"}"#
        );
        let r = ok(vec!["a"]);
        assert_eq!(
            String::from_utf8(r.body).unwrap(),
            r#"{"statusCode":200,"message":"OK","response":["a"]}"#
        );
    }

    #[test]
    fn json_error_names_position() {
        let e = serde_json::from_str::<serde_json::Value>("[1, }").unwrap_err();
        let msg = ApiError::invalid_json(&e).message();
        assert!(
            msg.starts_with("[HTTP] Invalid JSON at line 1 column 5: "),
            "{msg}"
        );
        assert!(msg.ends_with(" (400)"));
    }

    #[test]
    fn duplicate_keys_are_refused_anywhere() {
        for body in [
            &br#"{"a":1,"a":2}"#[..],
            br#"[{"name":"x","host":{"names":["*"],"names":["y"]}}]"#,
        ] {
            let e = check_duplicate_keys(body).unwrap_err();
            assert_eq!(e.status(), 400);
            assert!(e.message().contains("duplicate key"), "{}", e.message());
        }
        for body in [
            &b""[..],
            b"  ",
            br#"{"a":{"a":1},"b":[{"a":1},{"a":2}]}"#,
            b"[not json",
        ] {
            assert!(check_duplicate_keys(body).is_ok());
        }
    }
}
