//! Connectors: where tables come from. A `Connector` is one catalog: its name, the
//! DataFusion catalog that session setup registers (schemas and tables), which plan
//! nodes are its table scans, and how a scan that DataFusion's own plan encoding
//! cannot carry travels to a worker. `Connectors` is the set a process knows; the
//! coordinator plans with it, the fragmenter asks it what reads tables, and the plan
//! codec asks it to encode and decode scans.
//!
//! Every catalog gets Trino's `information_schema` listing its own tables, built
//! from the catalog itself, so a new connector needs nothing more to be listed.
//! Built in: `tpch` (generated data) and `files` (external Parquet/CSV tables).

pub mod files;
pub mod information_schema;
pub mod tpch;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

use datafusion::catalog::CatalogProvider;
use datafusion::common::plan_datafusion_err;
use datafusion::error::Result;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

use crate::etc::{CatalogFile, EtcError};
use information_schema::WithInformationSchema;

pub trait Connector: Send + Sync + fmt::Debug {
    /// The catalog's name in SQL (`tpch.sf1.lineitem`).
    fn catalog_name(&self) -> &str;

    /// The catalog as DataFusion sees it; the same object for every session, so
    /// tables created in it stay.
    fn catalog(&self) -> Arc<dyn CatalogProvider>;

    /// Whether `plan` is one of this connector's table scans: a stage holding one
    /// reads table data and runs on workers.
    fn is_scan(&self, plan: &dyn ExecutionPlan) -> bool;

    /// One of its scans as bytes for a worker, or None when `plan` is not a node of
    /// its own (DataFusion's file scans travel in DataFusion's own encoding).
    fn encode_scan(&self, _plan: &dyn ExecutionPlan) -> Option<Vec<u8>> {
        None
    }

    /// Whether a table of this catalog may live at `location` (and `COPY TO` write
    /// there). Only catalogs of files say yes, and only inside their allowed places.
    fn allows_location(&self, _location: &str) -> bool {
        false
    }

    /// The scan that `encode_scan` made these bytes of.
    fn decode_scan(&self, _bytes: &[u8]) -> Result<Arc<dyn ExecutionPlan>> {
        Err(plan_datafusion_err!("catalog '{}' ships no scans of its own", self.catalog_name()))
    }
}

/// The connectors of one process, in the order their catalogs are registered.
#[derive(Debug, Clone)]
pub struct Connectors {
    list: Vec<Arc<dyn Connector>>,
}

impl Connectors {
    pub fn new(list: Vec<Arc<dyn Connector>>) -> Self {
        Connectors { list }
    }

    /// The built-in catalogs: `tpch`, and a `files` catalog that allows no location.
    pub fn builtin() -> Self {
        Self::builtin_with_files(&[])
    }

    /// The built-in catalogs, `files` allowing tables under `allowed`.
    pub fn builtin_with_files(allowed: &[PathBuf]) -> Self {
        Connectors::new(vec![
            Arc::new(tpch::TpchConnector::new(tpch::TPCH_CATALOG_NAME)),
            Arc::new(files::FilesConnector::new(files::FILES_CATALOG, allowed)),
        ])
    }

    /// The catalogs of a configuration directory, one per `catalog/*.properties`.
    pub fn from_catalogs(catalogs: &[CatalogFile]) -> Result<Self, EtcError> {
        let mut list: Vec<Arc<dyn Connector>> = Vec::new();
        for c in catalogs {
            let connector: Arc<dyn Connector> = match c.connector.as_str() {
                "tpch" => {
                    c.properties.check_keys(&["connector.name"], &|_| false)?;
                    Arc::new(tpch::TpchConnector::new(&c.name))
                }
                "files" => {
                    c.properties.check_keys(&["connector.name", "files.allowed-locations"], &|_| false)?;
                    let allowed =
                        c.properties.parsed("files.allowed-locations", files::FilesConnector::parse_allowed)?;
                    Arc::new(files::FilesConnector::new(&c.name, &allowed.unwrap_or_default()))
                }
                other => {
                    return Err(EtcError::Invalid {
                        path: c.properties.path.display().to_string(),
                        message: format!("unknown connector.name '{other}' (known: tpch, files)"),
                    })
                }
            };
            list.push(connector);
        }
        Ok(Connectors::new(list))
    }

    pub fn get(&self, catalog: &str) -> Option<&Arc<dyn Connector>> {
        self.list.iter().find(|c| c.catalog_name() == catalog)
    }

    /// Whether some catalog allows files at `location` (a `COPY TO` target).
    pub fn any_allows_location(&self, location: &str) -> bool {
        self.list.iter().any(|c| c.allows_location(location))
    }

    /// Registers every catalog, each with its `information_schema`.
    pub fn register(&self, ctx: &SessionContext) {
        for c in &self.list {
            ctx.register_catalog(c.catalog_name(), Arc::new(WithInformationSchema::new(c.catalog_name(), c.catalog())));
        }
    }

    pub fn is_scan(&self, plan: &dyn ExecutionPlan) -> bool {
        self.list.iter().any(|c| c.is_scan(plan))
    }

    /// The catalog a scan belongs to and its bytes, when a connector encodes it.
    pub fn encode_scan(&self, plan: &dyn ExecutionPlan) -> Option<(&str, Vec<u8>)> {
        self.list.iter().find_map(|c| c.encode_scan(plan).map(|bytes| (c.catalog_name(), bytes)))
    }

    pub fn decode_scan(&self, catalog: &str, bytes: &[u8]) -> Result<Arc<dyn ExecutionPlan>> {
        let connector = self.list.iter().find(|c| c.catalog_name() == catalog).ok_or_else(|| {
            plan_datafusion_err!("a plan scans catalog '{catalog}', which this process does not have")
        })?;
        connector.decode_scan(bytes)
    }
}
