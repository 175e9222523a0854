//! `CREATE SCHEMA`, `DROP SCHEMA` and `DROP TABLE` in an Iceberg catalog, as
//! DataFusion's DDL asks them of the catalog and schema providers (`mod.rs`): a
//! namespace made, an empty namespace dropped (Trino drops no schema that has
//! tables), and a table dropped from the catalog with its files, as Trino's Iceberg
//! connector drops it. Files go only under the table's own location, and only when
//! that is inside the warehouse: a table whose metadata points elsewhere never takes
//! another table's files with it.
//!
//! The providers' methods are not async, so these wait on the catalog's own runtime.

use std::sync::Arc;

use datafusion::common::{plan_datafusion_err, DataFusionError};
use datafusion::error::Result;
use iceberg::TableIdent;

use super::{iceberg_error, namespace, IcebergCatalogState};

impl IcebergCatalogState {
    fn wait<T: Send + 'static, F>(self: &Arc<Self>, f: impl FnOnce(Arc<Self>) -> F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>> + Send + 'static,
    {
        let outcome = futures::executor::block_on(self.on_runtime(f));
        self.listing.lock().fetched = None;
        outcome
    }

    /// `CREATE SCHEMA catalog.schema`.
    pub(super) fn create_namespace(self: &Arc<Self>, schema: &str) -> Result<()> {
        let (ns, what) = (namespace(schema), format!("schema {}.{schema}", self.name));
        self.wait(|s| async move {
            let catalog = s.catalog().await?;
            if catalog.namespace_exists(&ns).await.map_err(|e| iceberg_error(&what, e))? {
                return Err(plan_datafusion_err!("Schema '{}' already exists", what.trim_start_matches("schema ")));
            }
            catalog.create_namespace(&ns, Default::default()).await.map(|_| ()).map_err(|e| iceberg_error(&what, e))
        })
    }

    /// `DROP SCHEMA catalog.schema`: whether there was one. One with tables stays.
    pub(super) fn drop_namespace(self: &Arc<Self>, schema: &str, cascade: bool) -> Result<bool> {
        let name = format!("{}.{schema}", self.name);
        if cascade {
            return Err(DataFusionError::NotImplemented(format!(
                "DROP SCHEMA {name} CASCADE: drop its tables first (Trino's Iceberg connector drops no schema with tables)"
            )));
        }
        let ns = namespace(schema);
        self.wait(|s| async move {
            let catalog = s.catalog().await?;
            let what = format!("schema {name}");
            if !catalog.namespace_exists(&ns).await.map_err(|e| iceberg_error(&what, e))? {
                return Ok(false);
            }
            if !catalog.list_tables(&ns).await.map_err(|e| iceberg_error(&what, e))?.is_empty() {
                return Err(plan_datafusion_err!("Cannot drop non-empty schema '{name}'"));
            }
            catalog.drop_namespace(&ns).await.map_err(|e| iceberg_error(&what, e))?;
            Ok(true)
        })
    }

    /// `DROP TABLE catalog.schema.table`: whether there was one.
    pub(super) fn drop_table_and_files(self: &Arc<Self>, schema: &str, table: &str) -> Result<bool> {
        let (schema, table) = (schema.to_string(), table.to_string());
        self.wait(|s| async move {
            let Some(loaded) = s.load_here(&schema, &table).await? else { return Ok(false) };
            let what = format!("table {}.{schema}.{table}", s.name);
            let catalog = s.catalog().await?;
            let ident = TableIdent::new(namespace(&schema), table.clone());
            catalog.drop_table(&ident).await.map_err(|e| iceberg_error(&what, e))?;
            let location = loaded.metadata().location().trim_end_matches('/');
            match location.strip_prefix(&s.settings.warehouse).is_some_and(|rest| rest.starts_with('/')) {
                true => {
                    // The table is gone from the catalog already: a file left is only space.
                    if let Err(e) = loaded.file_io().delete_prefix(format!("{location}/")).await {
                        tracing::warn!("{what} was dropped, but not all of its files under {location}: {e}");
                    }
                }
                false => tracing::warn!("{what} was dropped; its files at {location} are outside the warehouse, left"),
            }
            Ok(true)
        })
    }
}
