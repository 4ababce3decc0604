//! Just enough STUN (RFC 8489) to route a datagram to its WebRTC session
//! before the session knows the peer's address: the local ICE ufrag in
//! a Binding request's USERNAME (`local:remote`). The session's ICE agent
//! checks the message fully (MESSAGE-INTEGRITY with its password); this
//! only picks which agent sees it. Bounded: reads at most the datagram.

const MAGIC_COOKIE: [u8; 4] = [0x21, 0x12, 0xA4, 0x42];
const HEADER: usize = 20;
const USERNAME: u16 = 0x0006;
const MESSAGE_INTEGRITY: u16 = 0x0008;

/// Is this datagram STUN (first two bits zero, the magic cookie)?
pub fn is_stun(data: &[u8]) -> bool {
    data.len() >= HEADER && data[0] < 4 && data[4..8] == MAGIC_COOKIE
}

/// Is this STUN message signed with `pass` (ICE's short-term credential:
/// a MESSAGE-INTEGRITY, HMAC-SHA1 over the message up to it, with the
/// header's length counting to its end)? Checked before a session takes
/// the sender's address: a wrong signature must not use up its slots.
pub fn integrity_ok(data: &[u8], pass: &str) -> bool {
    if !is_stun(data) {
        return false;
    }
    let len = u16::from_be_bytes([data[2], data[3]]) as usize;
    let Some(body) = data.get(HEADER..HEADER + len) else {
        return false;
    };
    let mut at = 0;
    while at + 4 <= body.len() {
        let kind = u16::from_be_bytes([body[at], body[at + 1]]);
        let alen = u16::from_be_bytes([body[at + 2], body[at + 3]]) as usize;
        let Some(value) = body.get(at + 4..at + 4 + alen) else {
            return false;
        };
        if kind == MESSAGE_INTEGRITY {
            if alen != 20 {
                return false;
            }
            let end = HEADER + at;
            let mut covered = data[..end].to_vec();
            let covered_len = (end - HEADER + 24) as u16;
            covered[2..4].copy_from_slice(&covered_len.to_be_bytes());
            let key =
                ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, pass.as_bytes());
            return ring::hmac::verify(&key, &covered, value).is_ok();
        }
        at += 4 + alen.div_ceil(4) * 4;
    }
    false
}

/// The local ufrag a STUN message's USERNAME names (the part before ':'),
/// if it is STUN and has one.
pub fn local_ufrag(data: &[u8]) -> Option<&str> {
    if !is_stun(data) {
        return None;
    }
    let len = u16::from_be_bytes([data[2], data[3]]) as usize;
    let body = data.get(HEADER..HEADER + len)?;
    let mut at = 0;
    while at + 4 <= body.len() {
        let kind = u16::from_be_bytes([body[at], body[at + 1]]);
        let alen = u16::from_be_bytes([body[at + 2], body[at + 3]]) as usize;
        let value = body.get(at + 4..at + 4 + alen)?;
        if kind == USERNAME {
            let name = std::str::from_utf8(value).ok()?;
            return name.split(':').next().filter(|u| !u.is_empty());
        }
        at += 4 + alen.div_ceil(4) * 4;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(username: &[u8]) -> Vec<u8> {
        let mut attrs = Vec::new();
        attrs.extend_from_slice(&USERNAME.to_be_bytes());
        attrs.extend_from_slice(&(username.len() as u16).to_be_bytes());
        attrs.extend_from_slice(username);
        while attrs.len() % 4 != 0 {
            attrs.push(0);
        }
        let mut m = vec![0x00, 0x01];
        m.extend_from_slice(&(attrs.len() as u16).to_be_bytes());
        m.extend_from_slice(&MAGIC_COOKIE);
        m.extend_from_slice(&[7; 12]);
        m.extend_from_slice(&attrs);
        m
    }

    fn signed(username: &[u8], pass: &str) -> Vec<u8> {
        let mut m = binding(username);
        let len = (m.len() - HEADER + 24) as u16;
        m[2..4].copy_from_slice(&len.to_be_bytes());
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA1_FOR_LEGACY_USE_ONLY, pass.as_bytes());
        let tag = ring::hmac::sign(&key, &m);
        m.extend_from_slice(&MESSAGE_INTEGRITY.to_be_bytes());
        m.extend_from_slice(&20u16.to_be_bytes());
        m.extend_from_slice(tag.as_ref());
        m
    }

    #[test]
    fn integrity_is_checked_with_the_password() {
        let m = signed(b"abcd:wxyz", "secret-password");
        assert!(integrity_ok(&m, "secret-password"));
        assert!(!integrity_ok(&m, "another-password"));
        // Unsigned, cut or flipped: not ok.
        assert!(!integrity_ok(&binding(b"abcd:wxyz"), "secret-password"));
        for cut in 0..m.len() {
            assert!(!integrity_ok(&m[..cut], "secret-password"));
        }
        let mut flipped = m.clone();
        flipped[HEADER + 5] ^= 1;
        assert!(!integrity_ok(&flipped, "secret-password"));
    }

    #[test]
    fn finds_the_local_ufrag() {
        assert_eq!(local_ufrag(&binding(b"abcd:wxyz")), Some("abcd"));
        assert_eq!(local_ufrag(&binding(b":wxyz")), None);
        assert_eq!(local_ufrag(b"not stun at all, no"), None);
    }

    #[test]
    fn truncated_and_lying_lengths_are_none() {
        let m = binding(b"abcd:wxyz");
        for cut in 0..m.len() {
            let _ = local_ufrag(&m[..cut]);
        }
        let mut lying = m.clone();
        lying[2] = 0xff;
        assert_eq!(local_ufrag(&lying), None);
    }
}
