//! Timers: a min-heap of (deadline, token). Owners keep their own current
//! deadline; an entry that fires is checked against it by the owner, so
//! moving a deadline later needs no heap surgery (the early entry fires,
//! the owner finds it not yet due and schedules again). The poll timeout is
//! the nearest deadline.

use mio::Token;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

#[derive(Default)]
pub(crate) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
}

impl Timers {
    pub(crate) fn schedule(&mut self, at: Instant, token: Token) {
        self.heap.push(Reverse((at, token.0)));
    }

    /// How long the poll may sleep.
    pub(crate) fn timeout(&self, now: Instant) -> Option<Duration> {
        self.heap
            .peek()
            .map(|Reverse((at, _))| at.saturating_duration_since(now))
    }

    /// The next entry due at `now`, if any.
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<Token> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => self.heap.pop().map(|Reverse((_, t))| Token(t)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first() {
        let mut t = Timers::default();
        let now = Instant::now();
        t.schedule(now + Duration::from_secs(2), Token(2));
        t.schedule(now + Duration::from_secs(1), Token(1));
        assert_eq!(t.timeout(now), Some(Duration::from_secs(1)));
        assert_eq!(t.pop_due(now), None);
        let later = now + Duration::from_secs(3);
        assert_eq!(t.pop_due(later), Some(Token(1)));
        assert_eq!(t.pop_due(later), Some(Token(2)));
        assert_eq!(t.pop_due(later), None);
    }
}
