//! flotilla: a distributed SQL query engine. A coordinator plans SQL with DataFusion,
//! cuts the plan into a DAG of stages and schedules them phase by phase onto workers
//! as HTTP remote tasks; workers stream Arrow pages to each other through an exchange.
//!
//! The public surface is what the `flotilla` command and the integration tests use:
//! servers and their configuration, the client, and the tools. The engine's inner
//! layers (plans, scheduling, the exchange, the wire protocol) are the crate's own.
//! See docs/architecture.md for how they fit.

// Servers and what configures them.
pub mod config;
pub mod connector;
pub mod coordinator;
pub mod etc;
pub mod http;
pub mod local;
pub mod runtime;
pub mod security;
pub mod tls;
pub mod worker;

// Clients: the statement protocol's client, its shell and result formats, and the
// error taxonomy they report.
pub mod cli;
pub mod client;
pub mod error_code;
pub mod format;

// Tools: benchmarks, the data generator, the differential tester, and the
// schedulers' simulator.
pub mod bench;
pub mod difftest;
pub mod generate;
pub mod sim;

pub mod util;

// The engine's layers, bottom up: the wire protocol, the plan and its nodes, the
// plan codec, the exchange, cluster membership, scheduling, failures, metrics.
pub(crate) mod cluster;
pub(crate) mod codec;
pub(crate) mod exchange;
pub(crate) mod failure;
pub(crate) mod functions;
pub(crate) mod metrics;
pub(crate) mod plan;
pub(crate) mod plan_node;
pub(crate) mod printer;
pub(crate) mod protocol;
pub(crate) mod scheduling;

#[cfg(test)]
#[path = "module_graph_tests.rs"]
mod module_graph_tests;
