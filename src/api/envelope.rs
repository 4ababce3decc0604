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
    // Written item by item (not through `Value`, whose maps sort keys) so
    // each keeps the envelope's key order.
    let mut body = Vec::with_capacity(64 * items.len() + 2);
    body.push(b'[');
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        let _ = match item {
            Ok(response) => serde_json::to_writer(
                &mut body,
                &Envelope {
                    status_code: 200,
                    message: OK,
                    response: Some(response),
                },
            ),
            Err(e) => serde_json::to_writer(&mut body, &e.envelope()),
        };
    }
    body.push(b']');
    let code = |item: &Result<T, ApiError>| item.as_ref().map_or_else(|e| e.status, |_| 200);
    let status = match items.first() {
        None => 200,
        Some(first) if items.iter().all(|i| code(i) == code(first)) => code(first),
        Some(_) => 207,
    };
    Response::new(status, body)
}

/// An error: status and the message text of the specification / DECISIONS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
}

impl ApiError {
    fn new(status: u16, text: impl std::fmt::Display) -> Self {
        ApiError {
            status,
            message: format!("[HTTP] {text} ({status})"),
        }
    }
    pub fn bad_request(why: impl std::fmt::Display) -> Self {
        Self::new(400, why)
    }
    pub fn auth_required() -> Self {
        Self::new(401, "Authorization header is required to call API")
    }
    pub fn invalid_auth_header() -> Self {
        Self::new(401, "Invalid authorization header")
    }
    pub fn invalid_credential() -> Self {
        Self::new(401, "Invalid credential")
    }
    pub fn read_only(vhost: &str) -> Self {
        Self::new(403, format_args!("The VirtualHost is read-only: [{vhost}]"))
    }
    pub fn vhost_not_found(vhost: &str) -> Self {
        Self::new(
            404,
            format_args!("Could not find the virtual host: [{vhost}]"),
        )
    }
    pub fn app_not_found(vhost: &str, app: &str) -> Self {
        Self::new(
            404,
            format_args!("Could not find the application: [{vhost}/{app}]"),
        )
    }
    pub fn stream_not_found(vhost: &str, app: &str, stream: &str) -> Self {
        Self::new(
            404,
            format_args!("Could not find the stream: [{vhost}/{app}/{stream}]"),
        )
    }
    pub fn app_exists(vhost: &str, app: &str) -> Self {
        Self::new(
            409,
            format_args!("The application already exists: [{vhost}/{app}]"),
        )
    }
    pub fn controller_not_found() -> Self {
        Self::new(404, "Controller not found")
    }
    pub fn method_not_allowed() -> Self {
        Self::new(405, "Method not allowed")
    }
    pub fn vhost_exists(vhost: &str) -> Self {
        Self::new(
            409,
            format_args!("The virtual host already exists: [{vhost}]"),
        )
    }
    pub fn misdirected(host: &str) -> Self {
        Self::new(
            421,
            format_args!("Misdirected request: host [{host}] is not served"),
        )
    }
    pub fn internal() -> Self {
        Self::new(500, "Internal Server Error")
    }
    /// Errors of the HTTP layer (408, 413, 431, 400, ...).
    pub fn http(status: u16, text: impl std::fmt::Display) -> Self {
        Self::new(status, text)
    }
    pub fn invalid_json(e: &serde_json::Error) -> Self {
        let text = e.to_string();
        let what = match text.find(" at line ") {
            Some(i) => &text[..i],
            None => &text,
        };
        Self::new(
            400,
            format_args!(
                "Invalid JSON at line {} column {}: {what}",
                e.line(),
                e.column()
            ),
        )
    }

    /// The envelope of this error.
    pub fn envelope(&self) -> Envelope<'_, ()> {
        Envelope {
            status_code: self.status,
            message: &self.message,
            response: None,
        }
    }

    pub fn to_response(&self) -> Response {
        Response::new(self.status, to_body(&self.envelope()))
    }
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
        let msg = ApiError::invalid_json(&e).message;
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
            assert_eq!(e.status, 400);
            assert!(e.message.contains("duplicate key"), "{}", e.message);
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
