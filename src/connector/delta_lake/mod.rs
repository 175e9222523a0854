//! The `delta_lake` connector: Delta Lake tables on local disk or in S3, read with
//! the `deltalake` crate's log replay (`deltalake-core`, without its DataFusion
//! integration) and scanned as DataFusion Parquet file scans, which travel to
//! workers in DataFusion's own plan encoding like any catalog of files.
//!
//! A Delta catalog is a catalog of files (`files::FilesConnector`) whose tables are
//! declared with `CREATE EXTERNAL TABLE c.s.t STORED AS DELTA LOCATION '...'` and
//! kept in its metastore. The table registered then (`DeltaTableHandle`) only knows
//! where the table is: every query that names it reads the log again (`DeltaSchema`),
//! so it sees the newest committed version, and `FOR VERSION AS OF n` (see
//! `connector::time_travel`) reads an older one. Which files a query reads, and with which
//! partition values and statistics, is `scan`'s business.
//!
//! Not read (refused with a clear error): tables using column mapping or holding
//! deletion vectors. Not written: `CREATE TABLE AS` and `INSERT` are refused.

pub mod scan;

use datafusion::common::{plan_datafusion_err, plan_err};
use std::any::Any;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{
    CatalogProvider, MemoryCatalogProvider, SchemaProvider, Session, TableProvider, TableProviderFactory,
};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::{CreateExternalTable, Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use deltalake_core::logstore::{
    default_logstore, logstore_factories, LogStore, LogStoreFactory, ObjectStoreRef, StorageConfig,
};
use deltalake_core::{DeltaTable, DeltaTableBuilder};
use url::Url;

use scan::DeltaSnapshotTable;

/// The catalog of a Delta connector: DataFusion's in-memory catalog, whose schemas
/// resolve table names to snapshots read at planning time.
#[derive(Debug)]
pub struct DeltaCatalog {
    inner: MemoryCatalogProvider,
}

impl DeltaCatalog {
    pub fn new(inner: MemoryCatalogProvider) -> Self {
        DeltaCatalog { inner }
    }
}

impl CatalogProvider for DeltaCatalog {
    fn schema_names(&self) -> Vec<String> {
        self.inner.schema_names()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        self.inner.schema(name).map(|inner| Arc::new(DeltaSchema { inner }) as Arc<dyn SchemaProvider>)
    }

    fn register_schema(&self, name: &str, schema: Arc<dyn SchemaProvider>) -> Result<Option<Arc<dyn SchemaProvider>>> {
        self.inner.register_schema(name, schema)
    }

    fn deregister_schema(&self, name: &str, cascade: bool) -> Result<Option<Arc<dyn SchemaProvider>>> {
        self.inner.deregister_schema(name, cascade)
    }
}

/// A schema of a Delta catalog. `table("t")` is table `t` at its newest version,
/// `table("t@3")` at version 3 (the name `time_travel` gives `t FOR VERSION AS OF 3`).
#[derive(Debug)]
struct DeltaSchema {
    inner: Arc<dyn SchemaProvider>,
}

#[async_trait]
impl SchemaProvider for DeltaSchema {
    fn table_names(&self) -> Vec<String> {
        self.inner.table_names()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let (base, version) = match super::time_travel::split_versioned_name(name) {
            Some((base, version)) => (base, Some(version)),
            None => (name, None),
        };
        let Some(table) = self.inner.table(base).await? else { return Ok(None) };
        match (table.as_ref() as &dyn Any).downcast_ref::<DeltaTableHandle>() {
            Some(handle) => Ok(Some(Arc::new(handle.snapshot(version).await?))),
            None if version.is_none() => Ok(Some(table)),
            None => plan_err!("table '{base}' is not a Delta table: it has no versions"),
        }
    }

    fn register_table(&self, name: String, table: Arc<dyn TableProvider>) -> Result<Option<Arc<dyn TableProvider>>> {
        self.inner.register_table(name, table)
    }

    fn deregister_table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        self.inner.deregister_table(name)
    }

    fn table_exist(&self, name: &str) -> bool {
        self.inner.table_exist(name)
    }
}

/// A Delta table as its catalog keeps it: where it lives, and its schema as last
/// read (for listings; queries read the log again).
#[derive(Debug)]
pub struct DeltaTableHandle {
    location: Url,
    store_url: ObjectStoreUrl,
    store: Arc<dyn deltalake_core::ObjectStore>,
    /// The newest version read so far, brought up to date by each query.
    latest: tokio::sync::Mutex<DeltaTable>,
    schema: parking_lot::RwLock<SchemaRef>,
}

impl DeltaTableHandle {
    /// Opens the Delta table at `location` (its log must be there) through the
    /// session's object stores.
    pub async fn open(state: &dyn Session, location: &str) -> Result<Self> {
        let location = table_url(location)?;
        let store_url = ObjectStoreUrl::parse(&location[..url::Position::BeforePath])?;
        let store = state.runtime_env().object_store(&store_url)?;
        let table = load(&location, store.clone(), None).await?;
        let schema = DeltaSnapshotTable::new(&location, store_url.clone(), &table)?.schema();
        Ok(DeltaTableHandle {
            location,
            store_url,
            store,
            latest: tokio::sync::Mutex::new(table),
            schema: parking_lot::RwLock::new(schema),
        })
    }

    /// The table at `version`, or at its newest version.
    async fn snapshot(&self, version: Option<i64>) -> Result<DeltaSnapshotTable> {
        let table = match version {
            Some(v) => {
                let newest = {
                    let mut latest = self.latest.lock().await;
                    latest.update_incremental(None).await.map_err(|e| delta_error(&self.location, e))?;
                    latest.version().unwrap_or_default()
                };
                match u64::try_from(v) {
                    Ok(v) if v <= newest => load(&self.location, self.store.clone(), Some(v)).await?,
                    _ => {
                        return plan_err!(
                            "the Delta table at {} has no version {v} (its newest is {newest})",
                            self.location
                        )
                    }
                }
            }
            None => {
                let mut latest = self.latest.lock().await;
                latest.update_incremental(None).await.map_err(|e| delta_error(&self.location, e))?;
                latest.clone()
            }
        };
        let snapshot = DeltaSnapshotTable::new(&self.location, self.store_url.clone(), &table)?;
        if version.is_none() {
            *self.schema.write() = snapshot.schema();
        }
        Ok(snapshot)
    }
}

#[async_trait]
impl TableProvider for DeltaTableHandle {
    fn schema(&self) -> SchemaRef {
        self.schema.read().clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    /// Only reached when the handle itself is planned (not through `DeltaSchema`):
    /// the newest version, which must still have the schema planned with.
    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let planned = self.schema();
        let snapshot = self.snapshot(None).await?;
        if snapshot.schema() != planned {
            return plan_err!(
                "the schema of the Delta table at {} changed while the query was planned; run it again",
                self.location
            );
        }
        snapshot.scan(state, projection, filters, limit).await
    }
}

/// `CREATE EXTERNAL TABLE ... STORED AS DELTA LOCATION '...'`: opens the table.
/// Which catalogs may hold one, and where, the coordinator checks before.
#[derive(Debug, Default)]
pub struct DeltaTableFactory;

#[async_trait]
impl TableProviderFactory for DeltaTableFactory {
    async fn create(&self, state: &dyn Session, cmd: &CreateExternalTable) -> Result<Arc<dyn TableProvider>> {
        if !cmd.table_partition_cols.is_empty() || !cmd.schema.fields().is_empty() {
            return plan_err!("a Delta table brings its own columns and partitioning: declare it without them");
        }
        let [location] = cmd.locations.as_slice() else {
            return plan_err!("a Delta table has one location");
        };
        Ok(Arc::new(DeltaTableHandle::open(state, location).await?))
    }
}

/// A table location as a URL ending in `/` (local paths become `file://` URLs).
fn table_url(location: &str) -> Result<Url> {
    let mut url = if location.contains("://") {
        Url::parse(location).map_err(|e| plan_datafusion_err!("'{location}' is not a location: {e}"))?
    } else {
        let path =
            std::path::absolute(location).map_err(|e| plan_datafusion_err!("'{location}' is not a location: {e}"))?;
        Url::from_directory_path(&path).map_err(|_| plan_datafusion_err!("'{location}' is not an absolute path"))?
    };
    if !url.path().ends_with('/') {
        url.set_path(&format!("{}/", url.path()));
    }
    Ok(url)
}

/// delta-rs finds a table's log store by URL scheme and knows `file://` by itself;
/// its S3 one comes with the `deltalake-aws` crate, for writers, which need a lock
/// on commits. Reading needs none, so S3 tables get the default log store over our
/// own object stores.
struct ReadingLogStores;

impl LogStoreFactory for ReadingLogStores {
    fn with_options(
        &self,
        prefixed_store: ObjectStoreRef,
        root_store: ObjectStoreRef,
        location: &Url,
        options: &StorageConfig,
    ) -> deltalake_core::DeltaResult<Arc<dyn LogStore>> {
        Ok(default_logstore(prefixed_store, root_store, location, options))
    }
}

fn register_log_stores() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let s3 = Url::parse("s3://").expect("a URL");
        logstore_factories().entry(s3).or_insert_with(|| Arc::new(ReadingLogStores));
    });
}

/// The table's log replayed up to `version` (the newest without one).
async fn load(location: &Url, store: Arc<dyn deltalake_core::ObjectStore>, version: Option<u64>) -> Result<DeltaTable> {
    register_log_stores();
    let mut builder = DeltaTableBuilder::from_url(location.clone())
        .map_err(|e| delta_error(location, e))?
        .with_storage_backend(store, location.clone());
    if let Some(v) = version {
        builder = builder.with_version(v as _);
    }
    builder.load().await.map_err(|e| delta_error(location, e))
}

fn delta_error(location: &Url, e: deltalake_core::DeltaTableError) -> DataFusionError {
    use deltalake_core::DeltaTableError as E;
    match e {
        E::InvalidVersion(v) => plan_datafusion_err!("the Delta table at {location} has no version {v}"),
        E::NotATable(_) => plan_datafusion_err!("no Delta table at {location} (no _delta_log there)"),
        E::ObjectStore { source } => DataFusionError::ObjectStore(Box::new(source)),
        other => plan_datafusion_err!("Delta table at {location}: {other}"),
    }
}
