//! The console's five-minute history ([`crate::metrics::history`]): the
//! API samples its figures every interval, on this feature's timer.

use crate::metrics::history::INTERVAL;
use crate::server::core::Core;
use crate::server::feature::Feature;
use std::time::Instant;

#[derive(Default)]
pub(crate) struct History {
    next: Option<Instant>,
}

impl Feature for History {
    fn start(&mut self, _core: &mut Core, now: Instant) {
        self.next = Some(now + INTERVAL);
    }

    fn drive(&mut self, _core: &mut Core, _now: Instant) -> Option<Instant> {
        self.next
    }

    fn timeout(&mut self, core: &mut Core, now: Instant) {
        if self.next.is_some_and(|at| at <= now) {
            core.api.sample_history(now);
            self.next = Some(now + INTERVAL);
        }
    }
}
