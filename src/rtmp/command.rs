//! RTMP command and data messages: the AMF0 shape both sessions share
//! (`name, transaction id, command object, arguments...`), and the
//! status objects (`{level, code, description}`) servers answer with.
//!
//! Not here: what a command means (see `server` and `client`).

use bytes::Bytes;

use super::amf0::{self, Amf0Error, Amf0Value};
use super::chunk::{message_type, RtmpMessage};

/// A decoded command message (type 20, or 17 with the AMF0 body).
#[derive(Clone, Debug, PartialEq)]
pub struct Command {
    pub name: String,
    pub transaction_id: f64,
    /// The command object (often Null).
    pub object: Amf0Value,
    pub args: Vec<Amf0Value>,
}

impl Command {
    /// The first argument as a string.
    pub fn arg_str(&self, i: usize) -> Option<&str> {
        self.args.get(i).and_then(Amf0Value::as_str)
    }

    /// The `description` of the first status object among object and args.
    pub fn status_description(&self) -> Option<&str> {
        std::iter::once(&self.object)
            .chain(&self.args)
            .find_map(|v| v.get_str("description"))
    }

    /// The `code` of the first status object among object and args.
    pub fn status_code(&self) -> Option<&str> {
        std::iter::once(&self.object)
            .chain(&self.args)
            .find_map(|v| v.get_str("code"))
    }

    /// The `level` of the first status object among object and args.
    pub fn status_level(&self) -> Option<&str> {
        std::iter::once(&self.object)
            .chain(&self.args)
            .find_map(|v| v.get_str("level"))
    }
}

/// The AMF0 body of a command or data message: AMF3 variants (17, 15) carry
/// a leading 0x00 before AMF0 values.
pub fn amf0_body(msg: &RtmpMessage) -> &[u8] {
    let p: &Bytes = &msg.payload;
    match msg.type_id {
        message_type::COMMAND_AMF3 | message_type::DATA_AMF3 => match p.first() {
            Some(0) => &p[1..],
            _ => p,
        },
        _ => p,
    }
}

/// Decodes a command message; `Ok(None)` if it has no name.
pub fn parse_command(msg: &RtmpMessage) -> Result<Option<Command>, Amf0Error> {
    let mut values = amf0::decode_all(amf0_body(msg))?.into_iter();
    let Some(Amf0Value::String(name)) = values.next() else {
        return Ok(None);
    };
    let transaction_id = values.next().and_then(|v| v.as_f64()).unwrap_or(0.0);
    let object = values.next().unwrap_or(Amf0Value::Null);
    Ok(Some(Command {
        name,
        transaction_id,
        object,
        args: values.collect(),
    }))
}

/// Encodes `name, transaction_id, values...` into `out`.
pub fn write_command(out: &mut Vec<u8>, name: &str, transaction_id: f64, values: &[Amf0Value]) {
    amf0::encode_string(name, out);
    Amf0Value::Number(transaction_id).encode(out);
    amf0::encode_all(values, out);
}

/// A status object `{level, code, description}`.
pub fn status(level: &str, code: &str, description: &str) -> Amf0Value {
    Amf0Value::Object(vec![
        ("level".into(), level.into()),
        ("code".into(), code.into()),
        ("description".into(), description.into()),
    ])
}

/// Sends an AMF0 command: on the command chunk stream for the
/// NetConnection (stream 0), on the stream's chunk stream otherwise.
/// `scratch` is the caller's reusable encoding buffer.
pub fn send_command(
    conn: &mut super::chunk::RtmpConnection,
    scratch: &mut Vec<u8>,
    stream_id: super::chunk::MessageStreamId,
    name: &str,
    transaction_id: f64,
    values: &[Amf0Value],
) {
    use super::chunk::{csid, message_type};
    scratch.clear();
    write_command(scratch, name, transaction_id, values);
    let chunk_stream = if stream_id == 0 {
        csid::COMMAND
    } else {
        csid::STREAM
    };
    conn.write_message(
        chunk_stream,
        0,
        message_type::COMMAND_AMF0,
        stream_id,
        &[scratch],
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_roundtrip() {
        let mut body = vec![0u8];
        write_command(
            &mut body,
            "onStatus",
            0.0,
            &[
                Amf0Value::Null,
                status("error", "NetStream.Publish.BadName", "no"),
            ],
        );
        let msg = RtmpMessage {
            chunk_stream: 3,
            timestamp: 0,
            type_id: message_type::COMMAND_AMF3,
            stream_id: 1,
            payload: Bytes::from(body),
        };
        let c = parse_command(&msg).unwrap().unwrap();
        assert_eq!(c.name, "onStatus");
        assert_eq!(c.status_level(), Some("error"));
        assert_eq!(c.status_code(), Some("NetStream.Publish.BadName"));
        assert_eq!(c.status_description(), Some("no"));
    }
}
