//! The `files` catalog: external tables over Parquet, CSV or JSON files, created with
//! `CREATE EXTERNAL TABLE files.default.t STORED AS PARQUET LOCATION '...'`. The
//! tables live in the coordinator's memory (one `default` schema); their scans are
//! DataFusion's file scans, which travel to workers in DataFusion's own plan encoding.

use std::sync::Arc;

use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider, MemorySchemaProvider};
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::physical_plan::ExecutionPlan;

use super::Connector;

pub const FILES_CATALOG: &str = "files";

#[derive(Debug)]
pub struct FilesConnector {
    catalog: Arc<MemoryCatalogProvider>,
}

impl FilesConnector {
    pub fn new() -> Self {
        let catalog = MemoryCatalogProvider::new();
        let _ = catalog.register_schema("default", Arc::new(MemorySchemaProvider::new()));
        FilesConnector { catalog: Arc::new(catalog) }
    }
}

impl Default for FilesConnector {
    fn default() -> Self {
        Self::new()
    }
}

impl Connector for FilesConnector {
    fn catalog_name(&self) -> &str {
        FILES_CATALOG
    }

    fn catalog(&self) -> Arc<dyn CatalogProvider> {
        self.catalog.clone()
    }

    /// A file scan (in-memory tables, like `information_schema`'s, stay on the
    /// coordinator).
    fn is_scan(&self, plan: &dyn ExecutionPlan) -> bool {
        (plan as &dyn std::any::Any)
            .downcast_ref::<DataSourceExec>()
            .is_some_and(|d| (d.data_source().as_ref() as &dyn std::any::Any).is::<FileScanConfig>())
    }
}
