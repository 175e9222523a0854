//! Connectors: where tables come from. A `Connector` is one catalog: its name, the
//! DataFusion catalog that session setup registers (schemas and tables), which plan
//! nodes are its table scans, and how a scan that DataFusion's own plan encoding
//! cannot carry travels to a worker. `Connectors` is the set a process knows; the
//! coordinator plans with it, the fragmenter asks it what reads tables, and the plan
//! codec asks it to encode and decode scans.
//!
//! Every catalog gets Trino's `information_schema` listing its own tables, built
//! from the catalog itself, so a new connector needs nothing more to be listed.
//! Built in: `tpch` and `tpcds` (generated data), `memory` (tables in the workers'
//! memory) and `files` (external Parquet/CSV tables).

#[cfg(feature = "delta-lake")]
pub mod delta_lake;
pub mod field_ids;
pub mod files;
pub mod generated;
#[cfg(feature = "iceberg")]
pub mod iceberg;
pub mod information_schema;
pub mod local_files;
pub mod memory;
pub mod metastore;
pub mod object_storage;
pub mod postgresql;
pub mod staged_files;
pub mod system;
pub mod time_travel;
pub mod tpcds;
pub mod tpch;
pub mod view;
pub mod writes;

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use datafusion::catalog::{CatalogProvider, MemorySchemaProvider};
use datafusion::common::plan_datafusion_err;
use datafusion::error::Result;
use datafusion::execution::runtime_env::{RuntimeEnv, RuntimeEnvBuilder};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;

use crate::etc::{CatalogFile, EtcError};
use information_schema::WithInformationSchema;

pub trait Connector: Send + Sync + fmt::Debug {
    /// The catalog's name in SQL (`tpch.sf1.lineitem`).
    fn catalog_name(&self) -> &str;

    /// Its `connector.name`, as `system.metadata.catalogs` lists it.
    fn connector_name(&self) -> &str;

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

    /// Prepares what its scans need once per process, in the background, so that the
    /// first query does not wait for it. Workers call it when they start.
    fn warm_up(&self) {}

    /// Whether a table of this catalog may live at `location` (and `COPY TO` write
    /// there). Only catalogs of files say yes, and only inside their allowed places.
    fn allows_location(&self, _location: &str) -> bool {
        false
    }

    /// How its S3 locations are reached, for a catalog of files in object storage.
    fn s3_scope(&self) -> Option<object_storage::S3Scope> {
        None
    }

    /// Local directories its scans read files under, besides a catalog of files'
    /// allowed locations (an Iceberg catalog's warehouse).
    fn readable_directories(&self) -> Vec<std::path::PathBuf> {
        Vec::new()
    }

    /// Why its schemas and tables cannot be listed now (a remote database refusing the
    /// login), or None: `SHOW SCHEMAS` and `SHOW TABLES` report it rather than answer
    /// an empty or stale list, since the catalog traits list without errors.
    fn listing_failure(&self) -> Option<crate::error_code::QueryError> {
        None
    }

    /// Whether its tables have versions a query can read (`FOR VERSION AS OF`).
    fn has_versions(&self) -> bool {
        self.files().is_some_and(|f| f.is_delta_lake())
    }

    /// Its write half, for a catalog whose tables can be written: every write is
    /// planned through it (`writes`).
    fn writes(&self) -> Option<&dyn writes::ConnectorWrites> {
        None
    }

    /// The catalog as a catalog of files (tables kept in a metastore), if it is one.
    fn files(&self) -> Option<&files::FilesConnector> {
        None
    }

    /// The catalog as a `memory` catalog (tables in the workers' memory), if it is one.
    fn memory(&self) -> Option<&memory::MemoryConnector> {
        None
    }

    /// The catalog as an Iceberg catalog, if it is one.
    #[cfg(feature = "iceberg")]
    fn iceberg(&self) -> Option<&iceberg::IcebergConnector> {
        None
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
    /// Execution resources over the catalogs' object stores, shared by every
    /// session of the process.
    runtime: Arc<RuntimeEnv>,
    /// DataFusion's functions, rules and planners over `runtime`, registered once (see
    /// `session_template`).
    template: Arc<std::sync::OnceLock<datafusion::execution::SessionState>>,
    /// The local directories the object stores open files under.
    local: local_files::AllowedDirectories,
}

impl Connectors {
    pub fn new(list: Vec<Arc<dyn Connector>>) -> Self {
        let scopes = list.iter().filter_map(|c| c.s3_scope()).collect();
        // Local files are opened only under the catalogs' own directories, whatever a
        // plan names (see `local_files`).
        let local = local_files::AllowedDirectories::new(
            list.iter()
                .filter_map(|c| c.files())
                .flat_map(|f| f.allowed_directories().to_vec())
                .chain(list.iter().flat_map(|c| c.readable_directories())),
        );
        // No cache of directory listings: DataFusion keeps one forever by default, and
        // a table's files change under it (our own writes, other writers).
        let caches =
            datafusion::execution::cache::cache_manager::CacheManagerConfig::default().with_list_files_cache_limit(0);
        let runtime = RuntimeEnvBuilder::new()
            .with_cache_manager(caches)
            .with_object_store_registry(Arc::new(object_storage::ObjectStores::new(scopes, local.clone())))
            .build_arc()
            .expect("a runtime environment without limits builds");
        Connectors { list, runtime, template: Default::default(), local }
    }

    /// The local directories of this process's `files` catalog (its warehouse and
    /// allowed locations), which a worker of the built-in catalogs takes as its own.
    pub fn files_directories(&self) -> Vec<std::path::PathBuf> {
        let files = self.get(files::FILES_CATALOG).and_then(|c| c.files());
        files.map(|f| f.allowed_directories().to_vec()).unwrap_or_default()
    }

    /// Lets the object stores open files under `dirs` too; returns those added.
    pub fn adopt_directories(&self, dirs: &[std::path::PathBuf]) -> Vec<std::path::PathBuf> {
        self.local.adopt(dirs)
    }

    /// Each catalog's `warm_up`.
    pub fn warm_up(&self) {
        self.list.iter().for_each(|c| c.warm_up());
    }

    /// A session state with DataFusion's default functions, rules and planners, to be
    /// given a query's configuration and catalogs. Building one registers some 300
    /// functions one by one, a seventh of the coordinator's CPU for `SELECT 1`; a
    /// clone copies maps of pointers. Its functions saw the default configuration:
    /// what a query changes must not be read by functions (the time zone is).
    pub fn session_template(&self) -> datafusion::execution::SessionState {
        self.template
            .get_or_init(|| {
                let mut state = datafusion::execution::SessionStateBuilder::new()
                    .with_config(datafusion::prelude::SessionConfig::new())
                    .with_runtime_env(self.runtime.clone())
                    .with_default_features()
                    .with_type_planner(Arc::new(crate::functions::types::TrinoTypes))
                    // A row's subscript is Trino's before DataFusion's planners see it.
                    .with_expr_planners(
                        std::iter::once(Arc::new(crate::functions::row_subscript::RowSubscripts) as _)
                            .chain(datafusion::execution::SessionStateDefaults::default_expr_planners())
                            .collect(),
                    )
                    .build();
                // Trino's functions, over DataFusion's of the same name.
                crate::functions::register(&mut state).expect("registering functions cannot fail");
                register_functions(&mut state).expect("registering functions cannot fail");
                state
            })
            .clone()
    }

    /// The runtime environment sessions read and write files through.
    pub fn runtime(&self) -> Arc<RuntimeEnv> {
        self.runtime.clone()
    }

    /// The built-in catalogs: `tpch` spelled as Trino's, `tpcds`, `memory`, and a
    /// `files` catalog that allows no location.
    pub fn builtin() -> Self {
        Self::builtin_with_files(&[])
    }

    /// The built-in catalogs with `tpch` spelled as the TPC-H queries spell it
    /// (`TpchSpelling::BENCHMARK`): what the tests and benchmarks run.
    pub fn benchmark() -> Self {
        Self::builtin_with(files::FilesSettings::default(), tpch::TpchSpelling::BENCHMARK)
    }

    /// The built-in catalogs, `files` allowing tables under `allowed`.
    pub fn builtin_with_files(allowed: &[String]) -> Self {
        let files = files::FilesSettings { allowed: allowed.to_vec(), ..Default::default() };
        Self::builtin_with(files, tpch::TpchSpelling::default())
    }

    /// The built-in catalogs, `files` set up and `tpch` spelled as given.
    pub fn builtin_with(settings: files::FilesSettings, tpch: tpch::TpchSpelling) -> Self {
        Connectors::new(vec![
            Arc::new(tpch::TpchConnector::new(tpch::TPCH_CATALOG_NAME, tpch)),
            Arc::new(tpcds::TpcdsConnector::new(tpcds::TPCDS_CATALOG_NAME)),
            Arc::new(memory::MemoryConnector::new(memory::MEMORY_CATALOG)),
            Arc::new(files::FilesConnector::with_settings(files::FILES_CATALOG, settings)),
        ])
    }

    /// The catalogs of a configuration directory, one per `catalog/*.properties`.
    /// With a `data_dir` (the coordinator's `node.data-dir`), a catalog of files
    /// without a `files.metastore-path` keeps its tables in
    /// `DATA_DIR/catalogs/NAME.json`.
    pub fn from_catalogs(catalogs: &[CatalogFile], data_dir: Option<&Path>) -> Result<Self, EtcError> {
        let mut list: Vec<Arc<dyn Connector>> = Vec::new();
        for c in catalogs {
            let connector: Arc<dyn Connector> = match c.connector.as_str() {
                "tpch" => {
                    let keys = ["connector.name", "tpch.column-naming", "tpch.double-type-mapping"];
                    c.properties.check_keys(&keys, &|_| false)?;
                    let spelling = tpch::TpchSpelling::from_properties(
                        c.properties.get("tpch.column-naming"),
                        c.properties.get("tpch.double-type-mapping"),
                    )
                    .map_err(|message| EtcError::Invalid { path: c.properties.path.display().to_string(), message })?;
                    Arc::new(tpch::TpchConnector::new(&c.name, spelling))
                }
                "tpcds" => {
                    c.properties.check_keys(&["connector.name"], &|_| false)?;
                    Arc::new(tpcds::TpcdsConnector::new(&c.name))
                }
                "files" | "hive" | "delta_lake" => {
                    if c.connector == "delta_lake" && cfg!(not(feature = "delta-lake")) {
                        return Err(EtcError::Invalid {
                            path: c.properties.path.display().to_string(),
                            message:
                                "this flotilla was built without the Delta Lake connector (cargo feature delta-lake)"
                                    .into(),
                        });
                    }
                    let keys = ["connector.name", "files.allowed-locations", "files.warehouse", "files.metastore-path"];
                    c.properties.check_keys(&keys, &|k| object_storage::S3_KEYS.contains(&k))?;
                    let allowed =
                        c.properties.parsed("files.allowed-locations", files::FilesConnector::parse_allowed)?;
                    let warehouse = c.properties.parsed("files.warehouse", |v| {
                        files::check_location(v).map(|_| v.trim_end_matches('/').to_string())
                    })?;
                    let metastore = c
                        .properties
                        .get("files.metastore-path")
                        .map(std::path::PathBuf::from)
                        .or_else(|| data_dir.map(|d| d.join("catalogs").join(format!("{}.json", c.name))));
                    let settings = files::FilesSettings {
                        allowed: allowed.unwrap_or_default(),
                        s3: object_storage::S3Settings::from_properties(&c.properties)?,
                        warehouse,
                        metastore,
                        delta_lake: c.connector == "delta_lake",
                    };
                    Arc::new(files::FilesConnector::with_settings(&c.name, settings))
                }
                "memory" => {
                    c.properties.check_keys(&["connector.name"], &|_| false)?;
                    Arc::new(memory::MemoryConnector::new(&c.name))
                }
                "postgresql" => Arc::new(postgresql::PostgresConnector::from_catalog(c)?),
                #[cfg(feature = "iceberg")]
                "iceberg" => Arc::new(iceberg::IcebergConnector::from_catalog(c)?),
                #[cfg(not(feature = "iceberg"))]
                "iceberg" => {
                    return Err(EtcError::Invalid {
                        path: c.properties.path.display().to_string(),
                        message: "this flotilla was built without the Iceberg connector (cargo feature iceberg)".into(),
                    })
                }
                other => {
                    return Err(EtcError::Invalid {
                        path: c.properties.path.display().to_string(),
                        message: format!(
                            "unknown connector.name '{other}' (known: tpch, tpcds, memory, files, hive, delta_lake, iceberg, postgresql)"
                        ),
                    })
                }
            };
            list.push(connector);
        }
        Ok(Connectors::new(list))
    }

    /// Every catalog, in registration order.
    pub fn list(&self) -> &[Arc<dyn Connector>] {
        &self.list
    }

    /// The catalogs of files among them.
    pub fn files_catalogs(&self) -> impl Iterator<Item = &files::FilesConnector> {
        self.list.iter().filter_map(|c| c.files())
    }

    /// Gives the memory catalogs the coordinator's way to its workers.
    pub fn attach_cluster(&self, make: &dyn Fn() -> memory::ClusterHandle) {
        self.list.iter().filter_map(|c| c.memory()).for_each(|m| m.attach(make()));
    }

    pub fn get(&self, catalog: &str) -> Option<&Arc<dyn Connector>> {
        self.list.iter().find(|c| c.catalog_name() == catalog)
    }

    /// The catalogs that allow files at `location` (a `COPY TO` target): writing
    /// there writes into each of them.
    pub fn allowing_location(&self, location: &str) -> Vec<&Arc<dyn Connector>> {
        self.list.iter().filter(|c| c.allows_location(location)).collect()
    }

    /// The table (or warehouse) of any catalog of files that `location` falls inside.
    pub fn holder_of(&self, location: &str) -> Option<String> {
        self.files_catalogs().find_map(|f| f.holder_of(location))
    }

    /// Registers every catalog, each with its `information_schema`, and the table
    /// formats they declare tables in.
    pub fn register(&self, ctx: &SessionContext) {
        for c in &self.list {
            let metastore = c.files().and_then(|f| f.metastore()).cloned();
            let catalog = WithInformationSchema::new(c.catalog_name(), c.catalog()).with_metastore(metastore);
            ctx.register_catalog(c.catalog_name(), Arc::new(catalog));
        }
        #[cfg(feature = "delta-lake")]
        if self.list.iter().any(|c| c.files().is_some_and(|f| f.is_delta_lake())) {
            let state = ctx.state_ref();
            let mut state = state.write();
            for format in files::DELTA_FORMATS {
                state.table_factories_mut().insert(format.to_string(), Arc::new(delta_lake::DeltaTableFactory));
            }
        }
    }

    /// Brings back what the catalogs' metastores keep (the coordinator, at start-up):
    /// their schemas and tables, made again in `ctx`. A table that cannot be made (its
    /// files are gone, its bucket unreachable, a Parquet file corrupt) is logged and
    /// left in the metastore: one bad table never keeps the coordinator from starting.
    pub async fn restore(&self, ctx: &SessionContext) -> Result<(), String> {
        for c in &self.list {
            let Some(store) = c.files().and_then(|f| f.metastore()) else { continue };
            store.load()?;
            let catalog = c.catalog();
            for schema in store.schemas() {
                if catalog.schema(&schema).is_none() {
                    let _ = catalog.register_schema(&schema, Arc::new(MemorySchemaProvider::new()));
                }
            }
            let task_ctx = ctx.task_ctx();
            let mut restored = 0;
            for table in store.tables() {
                let made = match table.plan(&task_ctx) {
                    Ok(plan) => make_restored(ctx, plan, &table.location).await,
                    Err(e) => Err(e.to_string()),
                };
                match made {
                    Ok(()) => restored += 1,
                    Err(e) => tracing::warn!(
                        "catalog {}: table {}.{} at {} is not available: {e}",
                        c.catalog_name(),
                        table.schema,
                        table.name,
                        table.location
                    ),
                }
            }
            tracing::info!("catalog {}: {restored} tables from {}", c.catalog_name(), store.describe());
        }
        Ok(())
    }

    /// The first corrupt Parquet file among the catalogs' local Parquet tables whose
    /// names `sql` mentions, by `files::check_parquet_footers`: asked after the
    /// Parquet reader panicked, which says neither file nor cause.
    pub fn find_corrupt_parquet(&self, sql: &str) -> Option<String> {
        let sql = sql.to_lowercase();
        let stores = self.list.iter().filter_map(|c| c.files().and_then(|f| f.metastore()));
        let tables = stores.flat_map(|m| m.tables()).filter(|t| t.format.eq_ignore_ascii_case("parquet"));
        let mentioned = tables.filter(|t| sql.contains(&t.name.to_lowercase()));
        mentioned.into_iter().find_map(|t| files::check_parquet_footers(&t.location).err())
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

/// Makes one restored table. Its Parquet footers are checked first, and a panic of
/// the Parquet reader (it panics on some corrupt footers) is caught: either way the
/// table is reported, not the coordinator brought down.
async fn make_restored(
    ctx: &SessionContext,
    plan: datafusion::logical_expr::LogicalPlan,
    location: &str,
) -> Result<(), String> {
    use futures::FutureExt;
    let parquet = matches!(&plan, datafusion::logical_expr::LogicalPlan::Ddl(
        datafusion::logical_expr::DdlStatement::CreateExternalTable(t)) if t.file_type.eq_ignore_ascii_case("parquet"));
    if parquet {
        files::check_parquet_footers(location)?;
    }
    match std::panic::AssertUnwindSafe(ctx.execute_logical_plan(plan)).catch_unwind().await {
        Ok(made) => made.map(|_| ()).map_err(|e| e.to_string()),
        Err(_) => Err("reading its files failed (a corrupt file?)".into()),
    }
}
/// The functions the connectors' plans name (an Iceberg write's
/// `$iceberg_partition`), registered beside Trino's library on every node, so that
/// such a plan decodes on any worker.
pub fn register_functions(registry: &mut dyn datafusion::execution::FunctionRegistry) -> Result<()> {
    #[cfg(feature = "iceberg")]
    for f in iceberg::partition::functions() {
        registry.register_udf(Arc::new(f))?;
    }
    let _ = registry;
    Ok(())
}
