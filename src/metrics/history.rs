//! The last five minutes of the figures the console draws, kept in the
//! server so its graphs are full when a page opens (issue 42, part 4): a
//! small ring per series (a stream's input bit rate and frame rate, a
//! task's state, the viewers of each protocol), sampled every
//! [`INTERVAL`]. Bounded: [`SAMPLES`] values per series, at most
//! [`MAX_SERIES`] series; a series not sampled for a minute goes (its
//! stream or task is gone), as the console forgets its own.

use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

pub(crate) const INTERVAL: Duration = Duration::from_secs(5);
/// Five minutes at one sample per interval.
pub(crate) const SAMPLES: usize = 60;
pub(crate) const MAX_SERIES: usize = 4096;
/// Rounds a series may miss before it goes (a minute).
const FORGET_AFTER: u64 = 12;

/// One sample: a figure or a state's name.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub(crate) enum Sample {
    Number(f64),
    State(&'static str),
}

#[derive(Default)]
struct Series {
    /// Oldest first; `None` where the series was not sampled.
    values: VecDeque<Option<Sample>>,
    /// The round it was last sampled in.
    seen: u64,
}

#[derive(Default)]
pub(crate) struct History {
    series: HashMap<String, Series>,
    round: u64,
}

impl History {
    /// Starts a sampling round: each series gets one value (or a gap).
    pub(crate) fn begin_round(&mut self) {
        self.round += 1;
    }

    /// `key`'s value this round (a new series past the bound is dropped).
    pub(crate) fn record(&mut self, key: String, value: Sample) {
        if !self.series.contains_key(&key) && self.series.len() >= MAX_SERIES {
            return;
        }
        let s = self.series.entry(key).or_default();
        if s.seen == self.round {
            return;
        }
        s.seen = self.round;
        s.values.push_back(Some(value));
        if s.values.len() > SAMPLES {
            s.values.pop_front();
        }
    }

    /// Ends the round: a gap in each series not sampled; those not sampled
    /// for a minute go.
    pub(crate) fn end_round(&mut self) {
        let round = self.round;
        self.series
            .retain(|_, s| round.saturating_sub(s.seen) <= FORGET_AFTER);
        for s in self.series.values_mut().filter(|s| s.seen != round) {
            s.values.push_back(None);
            if s.values.len() > SAMPLES {
                s.values.pop_front();
            }
        }
    }

    /// Every series, by key, oldest value first.
    pub(crate) fn series(&self) -> BTreeMap<&str, &VecDeque<Option<Sample>>> {
        self.series
            .iter()
            .map(|(k, s)| (k.as_str(), &s.values))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rings_are_bounded_gapped_and_forgotten() {
        let mut h = History::default();
        for i in 0..(SAMPLES + 5) {
            h.begin_round();
            h.record("in:a".into(), Sample::Number(i as f64));
            if i % 2 == 0 {
                h.record("push:x".into(), Sample::State("pushing"));
            }
            h.end_round();
        }
        let s = h.series();
        assert_eq!(s["in:a"].len(), SAMPLES);
        assert_eq!(
            s["in:a"].back(),
            Some(&Some(Sample::Number((SAMPLES + 4) as f64)))
        );
        assert_eq!(s["push:x"].len(), SAMPLES);
        assert!(s["push:x"].contains(&None));
        // Not sampled for a minute: gone.
        for _ in 0..=FORGET_AFTER {
            h.begin_round();
            h.record("in:a".into(), Sample::Number(1.0));
            h.end_round();
        }
        assert!(!h.series().contains_key("push:x"));
        // At most MAX_SERIES series.
        h.begin_round();
        for i in 0..(MAX_SERIES + 10) {
            h.record(format!("in:{i}"), Sample::Number(0.0));
        }
        h.end_round();
        assert_eq!(h.series().len(), MAX_SERIES);
    }
}
