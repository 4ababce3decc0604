//! Port lists as `server.xml` and the API write them (OME's syntax), shared
//! by the config reader and the applications' MPEG-TS stream maps.

/// A port list: `1935`, `1935/tcp`, `4000/udp`, `4000-4003/udp`, or several
/// of these separated by commas. Returns the ports and whether `/udp` was said.
pub fn parse_ports(text: &str) -> Result<(Vec<u16>, Option<&'static str>), String> {
    let mut ports = Vec::new();
    let mut proto = None;
    for part in text.split(',').map(str::trim) {
        let (range, p) = match part.rsplit_once('/') {
            Some((r, "tcp")) => (r, Some("tcp")),
            Some((r, "udp")) => (r, Some("udp")),
            Some((_, other)) => return Err(format!("unknown transport [{other}] in [{part}]")),
            None => (part, None),
        };
        if p.is_some() {
            if proto.is_some() && proto != p {
                return Err("mixed /tcp and /udp".into());
            }
            proto = p;
        }
        let port = |s: &str| -> Result<u16, String> {
            match s.trim().parse::<u16>() {
                Ok(0) | Err(_) => Err(format!("[{s}] is not a port number (1-65535)")),
                Ok(n) => Ok(n),
            }
        };
        match range.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (port(a)?, port(b)?);
                if b < a || (b - a) > 1024 {
                    return Err(format!("bad port range [{range}]"));
                }
                ports.extend(a..=b);
            }
            None => ports.push(port(range)?),
        }
    }
    Ok((ports, proto))
}
