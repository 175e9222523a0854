//! Scheduling: the state machines, Trino's phased and all-at-once execution
//! schedules, the node scheduler that places tasks, and the pipelined query scheduler
//! that drives a query's stages. Everything here but `pipelined` is free of I/O.

pub mod execution_graph;
pub mod node_scheduler;
pub mod phased;
pub mod pipelined;
pub mod state_machine;
