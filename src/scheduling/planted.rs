//! Bugs planted on purpose, in test builds only, to show that the simulator (`sim`)
//! finds what it is meant to find. A test turns one on for its own thread (the
//! simulator runs a query on the thread that calls it), so tests running beside it
//! are not touched. Outside tests `is` is a constant false, and the branches it
//! guards compile away.

use std::cell::Cell;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bug {
    /// The pipelined scheduler subscribes to stage changes after a scheduling round
    /// instead of before it, and so sleeps through changes made during the round.
    LateWakeup,
    /// The fault-tolerant scheduler names one upstream output twice to its reader.
    DoubleRead,
    /// The pipelined scheduler waits, after the root has every row, for stages to
    /// finish whose unread pages keep them from it.
    WaitForDrain,
}

thread_local! {
    static PLANTED: Cell<Option<Bug>> = const { Cell::new(None) };
}

/// Whether `bug` is planted on this thread.
pub fn is(bug: Bug) -> bool {
    cfg!(test) && PLANTED.with(|p| p.get() == Some(bug))
}

/// Plants `bug` on this thread until the guard is dropped.
#[cfg(test)]
pub fn plant(bug: Bug) -> Planted {
    PLANTED.with(|p| p.set(Some(bug)));
    Planted
}

#[cfg(test)]
pub struct Planted;

#[cfg(test)]
impl Drop for Planted {
    fn drop(&mut self) {
        PLANTED.with(|p| p.set(None));
    }
}
