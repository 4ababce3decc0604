//! Small building blocks shared by the SRT listener and caller: the outgoing
//! datagram queue (with buffer recycling), the loss list (sorted ranges of
//! sequence numbers) and time helpers. Internal; not a protocol state machine.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::packet::SeqNumber;

/// Most datagrams kept waiting for `poll_transmit`; beyond that new ones are
/// dropped, like a full socket buffer would.
const MAX_QUEUED: usize = 8192;
/// Most spare buffers kept for reuse.
const MAX_POOLED: usize = 64;

/// Outgoing datagrams, built eagerly, drained by `poll_transmit`.
#[derive(Debug, Default)]
pub(crate) struct OutQueue {
    queue: VecDeque<(SocketAddr, Vec<u8>)>,
    pool: Vec<Vec<u8>>,
}

impl OutQueue {
    /// Builds one datagram for `to` with `f`.
    pub(crate) fn push_with(&mut self, to: SocketAddr, f: impl FnOnce(&mut Vec<u8>)) {
        if self.queue.len() >= MAX_QUEUED {
            return;
        }
        let mut b = self.pool.pop().unwrap_or_default();
        b.clear();
        f(&mut b);
        self.queue.push_back((to, b));
    }

    /// Moves the next datagram into `out` (replacing its contents).
    pub(crate) fn pop_into(&mut self, out: &mut Vec<u8>) -> Option<SocketAddr> {
        let (to, mut b) = self.queue.pop_front()?;
        std::mem::swap(out, &mut b);
        b.clear();
        if self.pool.len() < MAX_POOLED {
            self.pool.push(b);
        }
        Some(to)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// Largest range a [`LossSet`] accepts (far more than any buffer).
pub(crate) const MAX_SPAN: i32 = 1 << 20;

/// A set of sequence numbers kept as sorted, disjoint, non-adjacent inclusive
/// ranges. All members must lie within a window of 2^30 (guaranteed by the
/// bounded buffers that feed it).
#[derive(Debug, Default, Clone)]
pub(crate) struct LossSet {
    ranges: Vec<(SeqNumber, SeqNumber)>,
}

impl LossSet {
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub(crate) fn ranges(&self) -> impl Iterator<Item = (SeqNumber, SeqNumber)> + '_ {
        self.ranges.iter().copied()
    }

    /// Adds `a..=b` (ignored when `b` is before `a` or the span exceeds
    /// [`MAX_SPAN`]).
    pub(crate) fn insert(&mut self, a: SeqNumber, b: SeqNumber) {
        if b.before(a) || b.diff(a) > MAX_SPAN {
            return;
        }
        let i = self.ranges.partition_point(|r| r.1.diff(a) < -1);
        let j = self.ranges.partition_point(|r| r.0.diff(b) <= 1);
        if i >= j {
            self.ranges.insert(i, (a, b));
            return;
        }
        let lo = if self.ranges[i].0.before(a) {
            self.ranges[i].0
        } else {
            a
        };
        let hi = if b.before(self.ranges[j - 1].1) {
            self.ranges[j - 1].1
        } else {
            b
        };
        self.ranges.drain(i + 1..j);
        self.ranges[i] = (lo, hi);
    }

    /// Removes `a..=b`.
    pub(crate) fn remove_range(&mut self, a: SeqNumber, b: SeqNumber) {
        if b.before(a) {
            return;
        }
        let i = self.ranges.partition_point(|r| r.1.before(a));
        let j = self.ranges.partition_point(|r| !b.before(r.0));
        if i >= j {
            return;
        }
        let first = self.ranges[i];
        let last = self.ranges[j - 1];
        let mut pieces: [Option<(SeqNumber, SeqNumber)>; 2] = [None, None];
        if first.0.before(a) {
            pieces[0] = Some((first.0, a.sub(1)));
        }
        if b.before(last.1) {
            pieces[1] = Some((b.add(1), last.1));
        }
        self.ranges.splice(i..j, pieces.into_iter().flatten());
    }

    /// Removes one sequence number; returns whether it was present.
    pub(crate) fn remove(&mut self, s: SeqNumber) -> bool {
        let present = self.contains(s);
        if present {
            self.remove_range(s, s);
        }
        present
    }

    /// Removes everything before `s`.
    pub(crate) fn remove_before(&mut self, s: SeqNumber) {
        let i = self.ranges.partition_point(|r| r.1.before(s));
        self.ranges.drain(..i);
        if let Some(first) = self.ranges.first_mut() {
            if first.0.before(s) {
                first.0 = s;
            }
        }
    }

    pub(crate) fn contains(&self, s: SeqNumber) -> bool {
        let i = self.ranges.partition_point(|r| r.1.before(s));
        self.ranges.get(i).is_some_and(|r| !s.before(r.0))
    }

    /// Takes the first member.
    pub(crate) fn pop_first(&mut self) -> Option<SeqNumber> {
        let first = self.ranges.first_mut()?;
        let s = first.0;
        if first.0 == first.1 {
            self.ranges.remove(0);
        } else {
            first.0 = first.0.next();
        }
        Some(s)
    }
}

/// Microseconds from `start` to `now`, truncated to the 32-bit SRT timestamp.
pub(crate) fn timestamp_us(start: Instant, now: Instant) -> u32 {
    now.saturating_duration_since(start).as_micros() as u32
}

/// `a + d`, or `a` when it would overflow.
pub(crate) fn add_or_same(a: Instant, d: Duration) -> Instant {
    a.checked_add(d).unwrap_or(a)
}

pub(crate) use crate::clock::earliest;

/// Smoothed round-trip time estimator (RFC 6298 style, as libsrt).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RttEstimate {
    /// Smoothed RTT, microseconds.
    pub(crate) rtt_us: u32,
    /// RTT variance, microseconds.
    pub(crate) var_us: u32,
    first: bool,
}

impl Default for RttEstimate {
    fn default() -> Self {
        RttEstimate {
            rtt_us: 100_000,
            var_us: 50_000,
            first: true,
        }
    }
}

impl RttEstimate {
    /// Folds in one sample (microseconds).
    pub(crate) fn sample(&mut self, s: u32) {
        let s = s.min(10_000_000);
        if self.first {
            self.first = false;
            self.rtt_us = s;
            self.var_us = s / 2;
            return;
        }
        let dev = self.rtt_us.abs_diff(s);
        self.var_us = ((u64::from(self.var_us) * 3 + u64::from(dev)) / 4) as u32;
        self.rtt_us = ((u64::from(self.rtt_us) * 7 + u64::from(s)) / 8) as u32;
    }

    /// Takes the values reported by the peer (sender side, from ACKs).
    pub(crate) fn set(&mut self, rtt: u32, var: u32) {
        self.first = false;
        self.rtt_us = rtt.min(10_000_000);
        self.var_us = var.min(10_000_000);
    }

    pub(crate) fn rtt(&self) -> Duration {
        Duration::from_micros(u64::from(self.rtt_us))
    }

    pub(crate) fn var(&self) -> Duration {
        Duration::from_micros(u64::from(self.var_us))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: u32) -> SeqNumber {
        SeqNumber::new(v)
    }

    fn all(l: &LossSet) -> Vec<(u32, u32)> {
        l.ranges().map(|(a, b)| (a.value(), b.value())).collect()
    }

    #[test]
    fn loss_set_insert_merge_remove() {
        let mut l = LossSet::default();
        l.insert(s(10), s(12));
        l.insert(s(20), s(20));
        l.insert(s(13), s(14));
        assert_eq!(all(&l), vec![(10, 14), (20, 20)]);
        l.insert(s(5), s(25));
        assert_eq!(all(&l), vec![(5, 25)]);
        l.remove_range(s(8), s(9));
        assert_eq!(all(&l), vec![(5, 7), (10, 25)]);
        assert!(l.remove(s(12)));
        assert!(!l.remove(s(12)));
        assert_eq!(all(&l), vec![(5, 7), (10, 11), (13, 25)]);
        l.remove_before(s(11));
        assert_eq!(all(&l), vec![(11, 11), (13, 25)]);
        assert_eq!(l.pop_first(), Some(s(11)));
        assert_eq!(l.pop_first(), Some(s(13)));
        assert!(l.contains(s(14)));
        assert!(!l.contains(s(26)));
        l.remove_range(s(0), s(100));
        assert!(l.is_empty());
    }

    #[test]
    fn loss_set_across_wrap() {
        let mut l = LossSet::default();
        l.insert(s(SeqNumber::MAX - 1), s(SeqNumber::MAX));
        l.insert(s(0), s(2));
        assert_eq!(all(&l), vec![(SeqNumber::MAX - 1, 2)]);
        l.remove(s(0));
        assert_eq!(all(&l), vec![(SeqNumber::MAX - 1, SeqNumber::MAX), (1, 2)]);
    }

    proptest::proptest! {
        #[test]
        fn loss_set_matches_model(ops in proptest::collection::vec((0u8..3, 0u32..64, 0u32..8), 0..64)) {
            let mut l = LossSet::default();
            let mut model = std::collections::BTreeSet::new();
            for (op, a, len) in ops {
                let b = a + len;
                match op {
                    0 => { l.insert(s(a), s(b)); model.extend(a..=b); }
                    1 => { l.remove_range(s(a), s(b)); for x in a..=b { model.remove(&x); } }
                    _ => { l.remove_before(s(a)); model.retain(|x| *x >= a); }
                }
                let got: Vec<u32> = l.ranges().flat_map(|(a, b)| a.value()..=b.value()).collect();
                let want: Vec<u32> = model.iter().copied().collect();
                proptest::prop_assert_eq!(got, want);
                for w in all(&l).windows(2) {
                    proptest::prop_assert!(w[0].1 + 1 < w[1].0);
                }
            }
        }
    }
}
