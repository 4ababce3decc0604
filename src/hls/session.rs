//! Player sessions of LL-HLS and HLS: each multivariant playlist kiln
//! serves writes a token of its own into its chunklist URIs
//! (`chunklist_...m3u8?session=TOKEN`, as OME writes its session key), so
//! the players behind one address are told apart: each is its own row in
//! the sessions API and can be ended alone.
//!
//! A token is a counter and its HMAC under a key of this process (16 hex
//! digits): kiln keeps no state for the tokens it hands out, and a token a
//! peer made up is not one (its requests count by address, as a request
//! without a token does).

use std::cell::Cell;

/// Issues and checks session tokens.
pub struct SessionTokens {
    /// None when the system could not give random bytes: no tokens then
    /// (viewers count by address).
    key: Option<ring::hmac::Key>,
    next: Cell<u32>,
}

impl Default for SessionTokens {
    fn default() -> Self {
        let mut secret = [0u8; 32];
        let random = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut secret);
        SessionTokens {
            key: random
                .is_ok()
                .then(|| ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &secret)),
            next: Cell::new(0),
        }
    }
}

impl SessionTokens {
    fn mac(key: &ring::hmac::Key, counter: u32) -> u32 {
        let tag = ring::hmac::sign(key, &counter.to_be_bytes());
        let t = tag.as_ref();
        u32::from_be_bytes([t[0], t[1], t[2], t[3]])
    }

    /// A new token (16 hex digits), or None without a key.
    pub fn issue(&self) -> Option<String> {
        let key = self.key.as_ref()?;
        let counter = self.next.get();
        self.next.set(counter.wrapping_add(1));
        Some(format!("{counter:08x}{:08x}", Self::mac(key, counter)))
    }

    /// The session a token names (a number for the audience), when it is
    /// one this process issued.
    pub fn verify(&self, token: &str) -> Option<u64> {
        let key = self.key.as_ref()?;
        let value = parse_token_text(token)?;
        let (counter, mac) = ((value >> 32) as u32, value as u32);
        (Self::mac(key, counter) == mac).then_some(value)
    }

    /// The `session=` parameter of a request target's query, if any.
    pub fn of_target(target: &str) -> Option<&str> {
        let query = target.split_once('?')?.1;
        query.split('&').find_map(|kv| kv.strip_prefix("session="))
    }
}

/// A session's token as the sessions API names it (`llhls-<token>`).
pub fn token_text(session: u64) -> String {
    format!("{session:016x}")
}

/// The session a token's text names (16 hex digits), whether or not it is
/// one this process issued.
pub fn parse_token_text(text: &str) -> Option<u64> {
    if text.len() != 16 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(text, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked_and_made_up_ones_refused() {
        let t = SessionTokens::default();
        let a = t.issue().unwrap();
        let b = t.issue().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 16);
        let id = t.verify(&a).unwrap();
        assert_eq!(token_text(id), a);
        assert_eq!(parse_token_text(&a), Some(id));
        assert!(t.verify(&b).is_some());
        // One digit changed, another process's, or not hex: not a session.
        let mut forged = a.clone().into_bytes();
        forged[15] = if forged[15] == b'0' { b'1' } else { b'0' };
        assert_eq!(t.verify(std::str::from_utf8(&forged).unwrap()), None);
        assert_eq!(SessionTokens::default().verify(&a), None);
        assert_eq!(t.verify("zz"), None);
        assert_eq!(t.verify(&format!("{a}0")), None);
        assert_eq!(
            SessionTokens::of_target("/app/s/chunklist_1.m3u8?_HLS_msn=3&session=ab&x=1"),
            Some("ab")
        );
        assert_eq!(SessionTokens::of_target("/app/s/llhls.m3u8"), None);
    }
}
