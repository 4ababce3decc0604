//! The token table: endpoints live in a slab, and a `mio::Token` carries the
//! slot index in its low 32 bits and the slot's generation in the high 32,
//! so an event or timer for an endpoint that is gone (its slot since reused)
//! is recognised as stale and dropped.

use mio::Token;
use slab::Slab;

struct Slot<T> {
    generation: u32,
    value: T,
}

pub(crate) struct TokenTable<T> {
    slab: Slab<Slot<T>>,
    next_generation: u32,
}

impl<T> Default for TokenTable<T> {
    fn default() -> Self {
        TokenTable {
            slab: Slab::new(),
            next_generation: 1,
        }
    }
}

fn split(token: Token) -> (usize, u32) {
    ((token.0 & 0xFFFF_FFFF), (token.0 >> 32) as u32)
}

impl<T> TokenTable<T> {
    /// The token the next `insert` will return.
    pub(crate) fn vacant_token(&self) -> Token {
        Token(self.slab.vacant_key() | ((self.next_generation as usize) << 32))
    }

    pub(crate) fn insert(&mut self, value: T) -> Token {
        let generation = self.next_generation;
        self.next_generation = self.next_generation.wrapping_add(1).max(1);
        let index = self.slab.insert(Slot { generation, value });
        Token(index | ((generation as usize) << 32))
    }

    pub(crate) fn get(&self, token: Token) -> Option<&T> {
        let (index, generation) = split(token);
        self.slab
            .get(index)
            .filter(|s| s.generation == generation)
            .map(|s| &s.value)
    }

    pub(crate) fn get_mut(&mut self, token: Token) -> Option<&mut T> {
        let (index, generation) = split(token);
        self.slab
            .get_mut(index)
            .filter(|s| s.generation == generation)
            .map(|s| &mut s.value)
    }

    /// How many values it holds.
    pub(crate) fn len(&self) -> usize {
        self.slab.len()
    }

    /// Every value with its token, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (Token, &T)> {
        self.slab
            .iter()
            .map(|(i, s)| (Token(i | ((s.generation as usize) << 32)), &s.value))
    }

    pub(crate) fn remove(&mut self, token: Token) -> Option<T> {
        let (index, generation) = split(token);
        match self.slab.get(index) {
            Some(s) if s.generation == generation => Some(self.slab.remove(index).value),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_tokens_miss() {
        let mut t = TokenTable::default();
        let a = t.insert("a");
        assert_eq!(t.get(a), Some(&"a"));
        assert_eq!(t.remove(a), Some("a"));
        let b = t.insert("b");
        // Same slot, new generation: the old token no longer reaches it.
        assert_eq!(a.0 & 0xFFFF_FFFF, b.0 & 0xFFFF_FFFF);
        assert_eq!(t.get(a), None);
        assert_eq!(t.remove(a), None);
        assert_eq!(t.get(b), Some(&"b"));
    }

    #[test]
    fn vacant_token_predicts_insert() {
        let mut t = TokenTable::default();
        let predicted = t.vacant_token();
        assert_eq!(t.insert(1), predicted);
    }
}
