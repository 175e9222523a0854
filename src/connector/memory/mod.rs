//! The `memory` catalog, Trino's memory connector: tables whose rows live in the
//! workers' memory pools, split over the workers that wrote them, and gone when the
//! table is dropped or a worker restarts. `CREATE TABLE memory.s.t (columns)` or
//! `... AS SELECT` makes one, `INSERT`, `DELETE`, `UPDATE` and `MERGE` change it (`write`:
//! writers on workers, `TableWriterExec` with the `MEMORY` format).
//!
//! The coordinator keeps each table's schema and the addresses of its fragments
//! (`FragmentRef`: worker and id); the rows stay where their writer ran
//! (`fragments::MemoryFragments`), and `scan::MemoryScanExec` reads them there.
//! Dropping a table (or a schema with its tables) tells the workers to let its
//! fragments go, so their pools get the bytes back.

pub mod fragments;
pub mod scan;
pub mod write;

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{CatalogProvider, SchemaProvider, Session, TableProvider};
use datafusion::common::exec_err;
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_plan::ExecutionPlan;
use serde::{Deserialize, Serialize};

use super::Connector;
use crate::cluster::node_manager::WorkerNode;

/// The built-in catalog's name.
pub const MEMORY_CATALOG: &str = "memory";

/// How long the fragments a row-level change replaced stay for the queries that
/// still read them.
const REPLACED_FRAGMENTS_KEPT: std::time::Duration = std::time::Duration::from_secs(5);

/// The schema every memory catalog starts with, as in Trino.
pub const DEFAULT_SCHEMA: &str = "default";

/// Where one fragment of a table is: its worker's URL and its id there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FragmentRef {
    pub worker: String,
    pub id: String,
    pub rows: u64,
}

/// How the coordinator reaches its workers: to settle writes and drop fragments.
pub struct ClusterHandle {
    pub http: reqwest::Client,
    /// The coordinator's runtime: a `DROP` is planned on a runtime of its own that
    /// runs only while it plans.
    pub runtime: tokio::runtime::Handle,
    pub workers: Box<dyn Fn() -> Vec<WorkerNode> + Send + Sync>,
}

/// What the catalog, its schemas and its tables share.
#[derive(Default)]
pub struct Shared {
    cluster: OnceLock<ClusterHandle>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("attached", &self.cluster.get().is_some()).finish()
    }
}

impl Shared {
    /// Tells every worker holding some of `fragments` to let them go, in the
    /// background: the statement that dropped them is done.
    fn drop_fragments(&self, fragments: Vec<FragmentRef>) {
        let Some(cluster) = self.cluster.get() else { return };
        let mut by_worker: HashMap<String, Vec<String>> = HashMap::new();
        for f in fragments {
            by_worker.entry(f.worker).or_default().push(f.id);
        }
        for (worker, ids) in by_worker {
            let http = cluster.http.clone();
            cluster.runtime.spawn(async move {
                let sent = http.post(format!("{worker}/v1/memory/drop")).json(&ids).send().await;
                if let Err(e) = sent.and_then(|r| r.error_for_status()) {
                    tracing::warn!(%worker, "cannot drop memory table fragments: {e}");
                }
            });
        }
    }

    /// Tells the workers to let `fragments` go a while from now: queries that began
    /// before a row-level change replaced them still read them (a concurrent change
    /// then fails as a conflict at its commit, not on a missing fragment).
    fn drop_fragments_later(self: &Arc<Self>, fragments: Vec<FragmentRef>) {
        let Some(cluster) = self.cluster.get() else { return };
        let this = self.clone();
        cluster.runtime.spawn(async move {
            tokio::time::sleep(REPLACED_FRAGMENTS_KEPT).await;
            this.drop_fragments(fragments);
        });
    }

    /// Ends a write on every live worker: the fragments in `keep` stay, the write's
    /// others go.
    pub async fn settle(&self, settle: fragments::Settle) {
        let Some(cluster) = self.cluster.get() else { return };
        let sends = (cluster.workers)().into_iter().map(|w| {
            let (http, settle) = (cluster.http.clone(), &settle);
            async move {
                let sent = http.post(format!("{}/v1/memory/settle", w.url)).json(settle).send().await;
                if let Err(e) = sent.and_then(|r| r.error_for_status()) {
                    tracing::warn!(worker = %w.url, "cannot settle a memory table write: {e}");
                }
            }
        });
        futures::future::join_all(sends).await;
    }
}

/// A table of the memory catalog.
#[derive(Debug)]
pub struct MemoryTable {
    name: String,
    schema: SchemaRef,
    /// Shared by every handle on the table (see `same`).
    fragments: Arc<parking_lot::RwLock<Vec<FragmentRef>>>,
    shared: Arc<Shared>,
}

impl MemoryTable {
    pub fn new(name: &str, schema: SchemaRef, shared: Arc<Shared>) -> Self {
        MemoryTable { name: name.to_string(), schema, fragments: Default::default(), shared }
    }

    /// Another handle on the same table: what it appends, the table has.
    pub fn same(&self) -> Self {
        MemoryTable {
            name: self.name.clone(),
            schema: self.schema.clone(),
            fragments: self.fragments.clone(),
            shared: self.shared.clone(),
        }
    }

    /// The columns declared `NOT NULL`: writers refuse a null there.
    pub fn not_null_columns(&self) -> Vec<String> {
        super::writes::not_null_columns(&self.schema)
    }

    /// Publishes a committed write's fragments.
    pub fn append(&self, fragments: Vec<FragmentRef>) {
        self.fragments.write().extend(fragments);
    }

    pub fn fragments(&self) -> Vec<FragmentRef> {
        self.fragments.read().clone()
    }

    /// Swaps `new` in for the table's fragments if they are still exactly `read`
    /// (a row-level change's publish), and lets the workers drop the old ones;
    /// false, and nothing changed, when another write changed them meanwhile.
    pub fn replace(&self, read: &[FragmentRef], new: Vec<FragmentRef>) -> bool {
        let mut fragments = self.fragments.write();
        if fragments.as_slice() != read {
            return false;
        }
        let old = std::mem::replace(&mut *fragments, new);
        drop(fragments);
        self.shared.drop_fragments_later(old);
        true
    }

    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

#[async_trait]
impl TableProvider for MemoryTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let scan =
            scan::MemoryScanExec::try_new(&self.name, self.schema.clone(), self.fragments(), projection.cloned())?;
        Ok(Arc::new(scan))
    }
}

/// A schema of the memory catalog: its tables (and views) by name.
#[derive(Debug)]
struct MemorySchema {
    tables: parking_lot::RwLock<HashMap<String, Arc<dyn TableProvider>>>,
    shared: Arc<Shared>,
}

impl MemorySchema {
    fn fragments_of(table: &Arc<dyn TableProvider>) -> Vec<FragmentRef> {
        table.downcast_ref::<MemoryTable>().map(MemoryTable::fragments).unwrap_or_default()
    }
}

#[async_trait]
impl SchemaProvider for MemorySchema {
    fn table_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.tables.read().keys().cloned().collect();
        names.sort();
        names
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(self.tables.read().get(name).cloned())
    }

    fn register_table(&self, name: String, table: Arc<dyn TableProvider>) -> Result<Option<Arc<dyn TableProvider>>> {
        let mut tables = self.tables.write();
        if tables.contains_key(&name) {
            return exec_err!("Table '{name}' already exists");
        }
        Ok(tables.insert(name, table))
    }

    fn deregister_table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let gone = self.tables.write().remove(name);
        if let Some(t) = &gone {
            self.shared.drop_fragments(Self::fragments_of(t));
        }
        Ok(gone)
    }

    fn table_exist(&self, name: &str) -> bool {
        self.tables.read().contains_key(name)
    }
}

/// The memory catalog: schemas made by `CREATE SCHEMA`, `default` from the start.
#[derive(Debug)]
struct MemoryCatalog {
    schemas: parking_lot::RwLock<HashMap<String, Arc<MemorySchema>>>,
    shared: Arc<Shared>,
}

impl MemoryCatalog {
    fn new(shared: Arc<Shared>) -> Self {
        let catalog = MemoryCatalog { schemas: Default::default(), shared };
        catalog.schemas.write().insert(DEFAULT_SCHEMA.to_string(), catalog.new_schema());
        catalog
    }

    fn new_schema(&self) -> Arc<MemorySchema> {
        Arc::new(MemorySchema { tables: Default::default(), shared: self.shared.clone() })
    }
}

impl CatalogProvider for MemoryCatalog {
    fn schema_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.schemas.read().keys().cloned().collect();
        names.sort();
        names
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        self.schemas.read().get(name).map(|s| s.clone() as Arc<dyn SchemaProvider>)
    }

    /// DataFusion hands over a schema of its own kind; the catalog keeps one of its
    /// own instead, whose tables give their bytes back when dropped.
    fn register_schema(&self, name: &str, _schema: Arc<dyn SchemaProvider>) -> Result<Option<Arc<dyn SchemaProvider>>> {
        let schema = self.new_schema();
        Ok(self.schemas.write().insert(name.to_string(), schema).map(|s| s as Arc<dyn SchemaProvider>))
    }

    fn deregister_schema(&self, name: &str, cascade: bool) -> Result<Option<Arc<dyn SchemaProvider>>> {
        let mut schemas = self.schemas.write();
        let Some(schema) = schemas.get(name).cloned() else { return Ok(None) };
        let tables: Vec<String> = schema.tables.read().keys().cloned().collect();
        if !tables.is_empty() && !cascade {
            return exec_err!("Cannot drop non-empty schema '{name}': it has {} tables", tables.len());
        }
        for t in tables {
            schema.deregister_table(&t)?;
        }
        Ok(schemas.remove(name).map(|s| s as Arc<dyn SchemaProvider>))
    }
}

/// The `memory` connector.
#[derive(Debug)]
pub struct MemoryConnector {
    name: String,
    catalog: Arc<MemoryCatalog>,
    shared: Arc<Shared>,
}

impl MemoryConnector {
    pub fn new(name: &str) -> Self {
        let shared = Arc::new(Shared::default());
        MemoryConnector { name: name.to_string(), catalog: Arc::new(MemoryCatalog::new(shared.clone())), shared }
    }

    /// The coordinator's way to its workers (only the coordinator writes and drops
    /// tables); the first call wins.
    pub fn attach(&self, cluster: ClusterHandle) {
        let _ = self.shared.cluster.set(cluster);
    }

    /// A new, empty table for `CREATE TABLE`, not yet in its schema.
    pub fn new_table(&self, name: &str, schema: SchemaRef) -> Arc<MemoryTable> {
        Arc::new(MemoryTable::new(name, schema, self.shared.clone()))
    }
}

impl Connector for MemoryConnector {
    fn catalog_name(&self) -> &str {
        &self.name
    }

    fn connector_name(&self) -> &str {
        "memory"
    }

    fn catalog(&self) -> Arc<dyn CatalogProvider> {
        self.catalog.clone()
    }

    fn is_scan(&self, plan: &dyn ExecutionPlan) -> bool {
        (plan as &dyn Any).is::<scan::MemoryScanExec>()
    }

    fn encode_scan(&self, plan: &dyn ExecutionPlan) -> Option<Vec<u8>> {
        (plan as &dyn Any).downcast_ref::<scan::MemoryScanExec>().and_then(|s| s.to_bytes().ok())
    }

    fn decode_scan(&self, bytes: &[u8]) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(scan::MemoryScanExec::from_bytes(bytes)?))
    }

    fn memory(&self) -> Option<&MemoryConnector> {
        Some(self)
    }

    fn writes(&self) -> Option<&dyn super::writes::ConnectorWrites> {
        Some(self)
    }
}
