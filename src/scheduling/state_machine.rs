//! The state machines of queries, stages and tasks: plain structs driven by
//! `transition`, with no I/O. Each kind of state says which transitions are legal;
//! an illegal one is refused (and logged), final states stay final, and every change
//! bumps a version that long polls wait on.
//!
//! Owned by the coordinator's query, stage and remote-task objects and by the worker's
//! task; they wrap the machine in whatever lock and wake-up they need.

use std::fmt::Debug;
use std::hash::Hash;

use serde::{Deserialize, Serialize};

pub use crate::protocol::TaskState;

/// A kind of state with its transition rules.
pub trait StateKind: Copy + Eq + Hash + Debug + Send + Sync + 'static {
    fn is_final(self) -> bool;
    /// Whether `from -> to` is legal (`from` is never final here).
    fn can_transition(from: Self, to: Self) -> bool;
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal {machine} transition {from} -> {to}")]
pub struct IllegalTransition {
    pub machine: String,
    pub from: String,
    pub to: String,
}

pub struct StateMachine<S: StateKind> {
    name: String,
    state: S,
    version: u64,
}

impl<S: StateKind> Debug for StateMachine<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMachine")
            .field("name", &self.name)
            .field("state", &self.state)
            .field("version", &self.version)
            .finish()
    }
}

impl<S: StateKind> StateMachine<S> {
    pub fn new(name: impl Into<String>, initial: S) -> Self {
        StateMachine { name: name.into(), state: initial, version: 0 }
    }

    pub fn state(&self) -> S {
        self.state
    }

    /// Increases with every change, for long polls.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn is_final(&self) -> bool {
        self.state.is_final()
    }

    /// Moves to `to`. Ok(false) when already there; an error (logged) when illegal or
    /// when the machine is final.
    pub fn transition(&mut self, to: S) -> Result<bool, IllegalTransition> {
        if self.state == to {
            return Ok(false);
        }
        if self.state.is_final() || !S::can_transition(self.state, to) {
            let err = IllegalTransition {
                machine: self.name.clone(),
                from: format!("{:?}", self.state),
                to: format!("{to:?}"),
            };
            tracing::debug!("{err}");
            return Err(err);
        }
        self.state = to;
        self.version += 1;
        Ok(true)
    }

    /// Like `transition`, but an illegal move is only logged: for events that may
    /// legitimately arrive late (a status after an abort).
    pub fn try_transition(&mut self, to: S) -> bool {
        self.transition(to).unwrap_or(false)
    }
}

/// Query states, as in Trino.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum QueryState {
    Queued,
    Planning,
    Starting,
    Running,
    Finishing,
    Finished,
    Failed,
}

impl StateKind for QueryState {
    fn is_final(self) -> bool {
        matches!(self, QueryState::Finished | QueryState::Failed)
    }

    fn can_transition(from: Self, to: Self) -> bool {
        use QueryState::*;
        match to {
            Failed => true,
            Finished => matches!(from, Finishing | Running | Starting | Planning),
            _ => rank_query(to) > rank_query(from),
        }
    }
}

fn rank_query(s: QueryState) -> u8 {
    match s {
        QueryState::Queued => 0,
        QueryState::Planning => 1,
        QueryState::Starting => 2,
        QueryState::Running => 3,
        QueryState::Finishing => 4,
        QueryState::Finished | QueryState::Failed => 5,
    }
}

/// Stage states, as in Trino's `StageStateMachine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum StageState {
    Planned,
    Scheduling,
    Scheduled,
    Running,
    Flushing,
    Finished,
    Canceled,
    Aborted,
    Failed,
}

impl StageState {
    /// Done producing output: what a partitioned join's probe side waits for.
    pub fn is_done_producing(self) -> bool {
        matches!(self, StageState::Flushing | StageState::Finished)
    }
}

fn rank_stage(s: StageState) -> u8 {
    match s {
        StageState::Planned => 0,
        StageState::Scheduling => 1,
        StageState::Scheduled => 2,
        StageState::Running => 3,
        StageState::Flushing => 4,
        _ => 5,
    }
}

impl StateKind for StageState {
    fn is_final(self) -> bool {
        matches!(self, StageState::Finished | StageState::Canceled | StageState::Aborted | StageState::Failed)
    }

    fn can_transition(from: Self, to: Self) -> bool {
        use StageState::*;
        match to {
            Canceled | Aborted | Failed => true,
            // Tasks may finish before the stage notices it was scheduled, so a stage can
            // skip forward, but never go back.
            Finished => matches!(from, Scheduled | Running | Flushing),
            Scheduling => from == Planned,
            _ => rank_stage(to) > rank_stage(from) && from != Planned,
        }
    }
}

impl StateKind for TaskState {
    fn is_final(self) -> bool {
        self.is_done()
    }

    fn can_transition(from: Self, to: Self) -> bool {
        use TaskState::*;
        match to {
            Canceled | Aborted | Failed => true,
            Planned => false,
            Running => from == Planned,
            Flushing => matches!(from, Planned | Running),
            Finished => matches!(from, Running | Flushing),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_follows_the_legal_path() {
        let mut m = StateMachine::new("stage 1", StageState::Planned);
        for s in [
            StageState::Scheduling,
            StageState::Scheduled,
            StageState::Running,
            StageState::Flushing,
            StageState::Finished,
        ] {
            assert_eq!(m.transition(s), Ok(true), "to {s:?}");
            assert_eq!(m.state(), s);
        }
        assert_eq!(m.version(), 5);
        assert!(m.is_final());
    }

    #[test]
    fn illegal_transitions_are_refused_and_change_nothing() {
        use StageState::*;
        let mut m = StateMachine::new("stage", Planned);
        assert!(m.transition(Running).is_err(), "must pass through SCHEDULING");
        assert!(m.transition(Finished).is_err());
        assert_eq!(m.state(), Planned);
        m.transition(Scheduling).unwrap();
        m.transition(Running).unwrap();
        assert!(m.transition(Scheduled).is_err(), "no going back");
        assert_eq!(m.version(), 2);
    }

    #[test]
    fn final_states_are_final() {
        let mut m = StateMachine::new("task", TaskState::Planned);
        m.transition(TaskState::Failed).unwrap();
        for to in [TaskState::Running, TaskState::Finished, TaskState::Aborted, TaskState::Canceled] {
            assert!(m.transition(to).is_err());
        }
        assert_eq!(m.state(), TaskState::Failed);
        let mut q = StateMachine::new("query", QueryState::Queued);
        q.transition(QueryState::Planning).unwrap();
        q.transition(QueryState::Finished).unwrap();
        assert!(q.transition(QueryState::Failed).is_err());
    }

    #[test]
    fn the_version_counts_changes_only() {
        let mut m = StateMachine::new("task", TaskState::Planned);
        m.transition(TaskState::Running).unwrap();
        assert_eq!(m.transition(TaskState::Running), Ok(false));
        let _ = m.transition(TaskState::Planned);
        m.transition(TaskState::Flushing).unwrap();
        m.transition(TaskState::Finished).unwrap();
        assert_eq!(m.version(), 3);
    }

    #[test]
    fn task_and_query_legal_paths() {
        use TaskState::*;
        for (from, to) in
            [(Planned, Running), (Running, Flushing), (Flushing, Finished), (Running, Finished), (Planned, Flushing)]
        {
            assert!(TaskState::can_transition(from, to), "{from:?} -> {to:?}");
        }
        for (from, to) in [(Running, Planned), (Flushing, Running), (Planned, Finished)] {
            assert!(!TaskState::can_transition(from, to), "{from:?} -> {to:?}");
        }
        use QueryState as Q;
        let mut q = StateMachine::new("query", Q::Queued);
        for s in [Q::Planning, Q::Starting, Q::Running, Q::Finishing, Q::Finished] {
            q.transition(s).unwrap();
        }
        assert!(!QueryState::can_transition(Q::Running, Q::Queued));
    }

    /// The full transition table of each machine: every legal move is accepted and
    /// every other one refused.
    fn check_table<S: StateKind>(all: &[S], legal: &[(S, S)]) {
        for &from in all {
            for &to in all {
                if from == to || from.is_final() {
                    continue;
                }
                let expected = legal.contains(&(from, to));
                assert_eq!(S::can_transition(from, to), expected, "{from:?} -> {to:?}");
                let mut m = StateMachine::new("m", from);
                assert_eq!(m.transition(to).is_ok(), expected, "{from:?} -> {to:?} through the machine");
            }
        }
    }

    #[test]
    fn task_transition_table() {
        use TaskState::*;
        let all = [Planned, Running, Flushing, Finished, Canceled, Aborted, Failed];
        let mut legal = vec![
            (Planned, Running),
            (Planned, Flushing),
            (Running, Flushing),
            (Running, Finished),
            (Flushing, Finished),
        ];
        for from in [Planned, Running, Flushing] {
            legal.extend([(from, Canceled), (from, Aborted), (from, Failed)]);
        }
        check_table(&all, &legal);
    }

    #[test]
    fn query_transition_table() {
        use QueryState::*;
        let all = [Queued, Planning, Starting, Running, Finishing, Finished, Failed];
        let order = [Queued, Planning, Starting, Running, Finishing];
        let mut legal = Vec::new();
        for (i, &from) in order.iter().enumerate() {
            for &to in &order[i + 1..] {
                legal.push((from, to));
            }
            legal.push((from, Failed));
            if from != Queued {
                legal.push((from, Finished));
            }
        }
        check_table(&all, &legal);
    }

    #[test]
    fn stage_transition_table() {
        use StageState::*;
        let all = [Planned, Scheduling, Scheduled, Running, Flushing, Finished, Canceled, Aborted, Failed];
        let mut legal = vec![
            (Planned, Scheduling),
            (Scheduling, Scheduled),
            (Scheduling, Running),
            (Scheduling, Flushing),
            (Scheduled, Running),
            (Scheduled, Flushing),
            (Scheduled, Finished),
            (Running, Flushing),
            (Running, Finished),
            (Flushing, Finished),
        ];
        for from in [Planned, Scheduling, Scheduled, Running, Flushing] {
            legal.extend([(from, Canceled), (from, Aborted), (from, Failed)]);
        }
        check_table(&all, &legal);
    }
}
