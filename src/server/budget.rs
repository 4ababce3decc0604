//! One server-wide budget for the bytes ingest connections hold in their
//! buffers (partial RTMP messages, messages held while `publish` is
//! decided), DECISIONS section 15. Each connection has a [`BudgetShare`]
//! that it updates after each read; a connection that grows past what is
//! left is closed, and a share gives its bytes back when dropped, however
//! the connection ends.

use std::cell::Cell;
use std::rc::Rc;

/// The default budget: enough for hundreds of publishers mid-keyframe,
/// far less than the 4,096 connections x 16 MiB that per-connection limits
/// alone would allow.
pub(crate) const DEFAULT_INGEST_BUDGET: usize = 128 * 1024 * 1024;

#[derive(Debug, Clone)]
pub(crate) struct IngestBudget {
    used: Rc<Cell<usize>>,
    limit: usize,
    /// Bytes given back (shares that shrank or were dropped) since the loop
    /// last asked: what the heap may return to the system.
    released: Rc<Cell<usize>>,
}

impl IngestBudget {
    pub(crate) fn new(limit: usize) -> Self {
        IngestBudget {
            used: Rc::new(Cell::new(0)),
            limit,
            released: Rc::new(Cell::new(0)),
        }
    }

    /// Bytes given back since the last call.
    pub(crate) fn take_released(&self) -> usize {
        self.released.replace(0)
    }

    pub(crate) fn share(&self) -> BudgetShare {
        BudgetShare {
            budget: self.clone(),
            held: 0,
        }
    }

    #[cfg(test)]
    pub(crate) fn used(&self) -> usize {
        self.used.get()
    }
}

/// One connection's part of the budget.
#[derive(Debug)]
pub(crate) struct BudgetShare {
    budget: IngestBudget,
    held: usize,
}

/// The budget is used up and this connection's holding grew.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BudgetExhausted;

impl BudgetShare {
    /// Records that the connection now holds `held` bytes. An error when it
    /// grew and the server-wide total is past the limit: close it.
    pub(crate) fn update(&mut self, held: usize) -> Result<(), BudgetExhausted> {
        let used = self.budget.used.get() - self.held + held;
        let grew = held > self.held;
        if !grew {
            self.budget.note_released(self.held - held);
        }
        self.budget.used.set(used);
        self.held = held;
        if grew && used > self.budget.limit {
            return Err(BudgetExhausted);
        }
        Ok(())
    }
}

impl IngestBudget {
    fn note_released(&self, bytes: usize) {
        self.released.set(self.released.get().saturating_add(bytes));
    }
}

impl Drop for BudgetShare {
    fn drop(&mut self) {
        self.budget.used.set(self.budget.used.get() - self.held);
        self.budget.note_released(self.held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_are_returned() {
        let b = IngestBudget::new(100);
        let mut x = b.share();
        let mut y = b.share();
        assert_eq!(x.update(60), Ok(()));
        assert_eq!(y.update(30), Ok(()));
        assert_eq!(y.update(50), Err(BudgetExhausted));
        assert_eq!(b.used(), 110);
        // shrinking is never refused
        assert_eq!(x.update(40), Ok(()));
        assert_eq!(b.used(), 90);
        drop(y);
        assert_eq!(b.used(), 40);
        drop(x);
        assert_eq!(b.used(), 0);
        // 60 - 40 shrunk, then 50 and 40 dropped (y's refused growth to 50
        // was recorded as held).
        assert_eq!(b.take_released(), 20 + 50 + 40);
        assert_eq!(b.take_released(), 0);
    }
}
