//! Built-in data connectors: catalogs whose tables are not registered by the
//! user but exist as soon as a session is created.
//!
//! Session setup (on the coordinator and on every worker) calls the
//! `register_*` functions here so that the same catalog names resolve to the
//! same tables everywhere. The physical plan codec calls the connectors' scan
//! nodes' `to_bytes`/`from_bytes` so that a scan planned on the coordinator
//! can be shipped to, and executed by, a worker process.
//!
//! This module owns the catalog/schema/table providers and the leaf scan
//! execution plans for each connector; it owns no stored data.

pub mod information_schema;
pub mod tpch;
