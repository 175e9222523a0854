//! Integration tests on real processes: a `flotilla coordinator` and `flotilla worker`
//! processes on loopback, checked against single-node DataFusion. One test binary
//! (modules below) keeps link time down.

mod integration {
    pub mod common;
    pub mod dbt;
    #[cfg(feature = "delta-lake")]
    pub mod delta_lake;
    pub mod deployment;
    pub mod differential;
    pub mod dynamic_filters;
    pub mod failure_matrix;
    pub mod failures;
    pub mod fault_tolerant;
    pub mod files;
    pub mod flight_sql;
    #[cfg(feature = "iceberg")]
    pub mod iceberg;
    pub mod lifecycle;
    pub mod memory;
    pub mod netns;
    pub mod node_client;
    pub mod object_storage;
    pub mod postgresql;
    pub mod protocol;
    pub mod python_client;
    pub mod robustness;
    pub mod row_changes;
    pub mod scheduling;
    pub mod security;
    pub mod shapes;
    pub mod sqllogictest;
    pub mod tpcds;
    pub mod tpch;
    pub mod trino_docs;
    pub mod trino_functions;
    pub mod trino_sql;
    pub mod web_ui;
    pub mod writes;
}
