//! Scheduling: the state machines, Trino's phased and all-at-once execution
//! schedules, the node scheduler that places tasks, and the pipelined query scheduler
//! that drives a query's stages; for retry policy `task`, the `ExecutionGraph` and the
//! fault-tolerant scheduler around it. Everything here but `pipelined` and
//! `fault_tolerant` is free of I/O.

pub mod adaptive;
pub mod execution_graph;
pub mod fault_tolerant;
pub mod node_scheduler;
pub mod phased;
pub mod pipelined;
pub(crate) mod planted;
pub mod remote_task;
pub mod speculation;
pub mod stage_execution;
pub mod state_machine;
#[cfg(test)]
pub(crate) mod testing;
