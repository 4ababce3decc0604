//! RESP2, the Redis protocol, as far as the origin map needs it: commands
//! out as arrays of bulk strings, replies in (simple strings, errors,
//! integers, bulk strings, nil, arrays). Bounded: a bulk string over
//! [`MAX_BULK`] or an array over [`MAX_ARRAY`] items is an error; never
//! panics on input.

/// Largest bulk string taken (an origin URL is far shorter).
pub const MAX_BULK: usize = 64 * 1024;
/// Most items in an array reply.
pub const MAX_ARRAY: usize = 1024;
/// Longest line (simple string, error, integer).
const MAX_LINE: usize = 4096;

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Simple(String),
    Error(String),
    Integer(i64),
    Bulk(Vec<u8>),
    Nil,
    Array(Vec<Reply>),
}

/// Why the input cannot be read on (the connection is dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RespError(pub &'static str);

/// Appends a command (`SET k v EX 10` is `["SET", "k", "v", "EX", "10"]`).
pub fn write_command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
}

/// Parses one reply from the front of `data`: the reply and the bytes it
/// took, `None` when incomplete.
pub fn parse(data: &[u8]) -> Result<Option<(Reply, usize)>, RespError> {
    parse_depth(data, 0)
}

fn parse_depth(data: &[u8], depth: usize) -> Result<Option<(Reply, usize)>, RespError> {
    if depth > 4 {
        return Err(RespError("nested too deep"));
    }
    let Some(&kind) = data.first() else {
        return Ok(None);
    };
    // The line after the type byte (which may itself be a stray CR).
    let Some(end) = data[1..]
        .windows(2)
        .take(MAX_LINE)
        .position(|w| w == b"\r\n")
        .map(|p| p + 1)
    else {
        if data.len() > MAX_LINE {
            return Err(RespError("line too long"));
        }
        return Ok(None);
    };
    let line = std::str::from_utf8(&data[1..end]).map_err(|_| RespError("not UTF-8"))?;
    let after = end + 2;
    let int = || line.parse::<i64>().map_err(|_| RespError("bad number"));
    match kind {
        b'+' => Ok(Some((Reply::Simple(line.to_string()), after))),
        b'-' => Ok(Some((Reply::Error(line.to_string()), after))),
        b':' => Ok(Some((Reply::Integer(int()?), after))),
        b'$' => {
            let n = int()?;
            if n < 0 {
                return Ok(Some((Reply::Nil, after)));
            }
            let n = n as usize;
            if n > MAX_BULK {
                return Err(RespError("bulk string too long"));
            }
            if data.len() < after + n + 2 {
                return Ok(None);
            }
            if &data[after + n..after + n + 2] != b"\r\n" {
                return Err(RespError("bulk string not terminated"));
            }
            Ok(Some((
                Reply::Bulk(data[after..after + n].to_vec()),
                after + n + 2,
            )))
        }
        b'*' => {
            let n = int()?;
            if n < 0 {
                return Ok(Some((Reply::Nil, after)));
            }
            if n as usize > MAX_ARRAY {
                return Err(RespError("array too long"));
            }
            let mut items = Vec::new();
            let mut at = after;
            for _ in 0..n {
                match parse_depth(&data[at..], depth + 1)? {
                    Some((r, used)) => {
                        items.push(r);
                        at += used;
                    }
                    None => return Ok(None),
                }
            }
            Ok(Some((Reply::Array(items), at)))
        }
        _ => Err(RespError("unknown reply type")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_replies() {
        let mut out = Vec::new();
        write_command(
            &mut out,
            &[
                b"SET",
                b"app/cam",
                b"srt://a:9999/app/cam",
                b"EX",
                b"10",
                b"NX",
            ],
        );
        assert_eq!(
            out,
            b"*6\r\n$3\r\nSET\r\n$7\r\napp/cam\r\n$20\r\nsrt://a:9999/app/cam\r\n$2\r\nEX\r\n$2\r\n10\r\n$2\r\nNX\r\n"
        );
        assert_eq!(parse(b"+OK\r\n"), Ok(Some((Reply::Simple("OK".into()), 5))));
        assert_eq!(parse(b"$-1\r\n"), Ok(Some((Reply::Nil, 5))));
        assert_eq!(
            parse(b"$3\r\nabc\r\n+"),
            Ok(Some((Reply::Bulk(b"abc".to_vec()), 9)))
        );
        assert_eq!(parse(b"$3\r\nab"), Ok(None));
        assert_eq!(parse(b":12\r\n"), Ok(Some((Reply::Integer(12), 5))));
        assert!(
            matches!(parse(b"-WRONGPASS invalid\r\n"), Ok(Some((Reply::Error(e), _))) if e.starts_with("WRONGPASS"))
        );
        assert_eq!(
            parse(b"*2\r\n:1\r\n$-1\r\n"),
            Ok(Some((
                Reply::Array(vec![Reply::Integer(1), Reply::Nil]),
                13
            )))
        );
        assert_eq!(parse(b"*2\r\n:1\r\n"), Ok(None));
    }

    #[test]
    fn bounds() {
        assert!(parse(b"$999999999\r\n").is_err());
        assert!(parse(b"*99999\r\n").is_err());
        assert!(parse(&[b'+'; MAX_LINE + 10]).is_err());
        assert!(parse(b"?x\r\n").is_err());
        assert!(parse(b"$3\r\nabcXY").is_err());
        assert!(parse(b"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n").is_err());
        assert!(parse(b":x\r\n").is_err());
        // Found by fuzzing: a reply that starts with its own CRLF.
        assert!(parse(b"\r\n\r\n").is_err());
        assert_eq!(parse(b"+\r\n"), Ok(Some((Reply::Simple(String::new()), 3))));
    }
}
