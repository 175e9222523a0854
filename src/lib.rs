//! flotilla: a distributed SQL query engine. A coordinator plans SQL with DataFusion,
//! cuts the plan into a DAG of stages and schedules them phase by phase onto workers
//! as HTTP remote tasks; workers stream Arrow pages to each other through an exchange.

pub mod bench;
pub mod cli;
pub mod client;
pub mod cluster;
pub mod codec;
pub mod config;
pub mod connector;
pub mod coordinator;
pub mod error_code;
pub mod etc;
pub mod exchange;
pub mod failure;
pub mod format;
pub mod generate;
pub mod http;
pub mod local;
pub mod metrics;
pub mod plan;
pub mod plan_node;
pub mod printer;
pub mod protocol;
pub mod runtime;
pub mod scheduling;
pub mod security;
pub mod tls;
pub mod util;
pub mod worker;

#[cfg(test)]
#[path = "module_graph_tests.rs"]
mod module_graph_tests;
