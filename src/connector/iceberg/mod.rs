//! The `iceberg` connector: Iceberg tables kept in an Iceberg catalog, configured
//! with Trino's keys. `iceberg.catalog.type=jdbc` is the SQL catalog (Trino calls it
//! JDBC) on SQLite or PostgreSQL, through iceberg-rust's `iceberg-catalog-sql`. The
//! catalog's namespaces are the schemas; every query that names a table loads its
//! metadata again (so it sees the newest snapshot), and `scan` plans its files.
//!
//! Names a query gives a table that are not plain table names: `t@<id>` and
//! `t@ts<millis>` are the table at a snapshot (from `FOR VERSION AS OF` and
//! `FOR TIMESTAMP AS OF`, see `time_travel`), `t$snapshots`, `t$history`, `t$files`
//! and `t$partitions` its metadata tables (`metadata`).
//!
//! Files (metadata, manifests, data) are read through the process's guarded object
//! stores (`storage`): local files under `iceberg.jdbc-catalog.default-warehouse-dir`
//! only, S3 under the warehouse's bucket and prefix with the catalog's `s3.*`
//! settings. Workers read data files through the same stores and never talk to the
//! catalog.
//!
//! `CREATE SCHEMA`, `DROP SCHEMA` and `DROP TABLE` reach the catalog through the
//! providers here (`ddl`); writes are begun and published by `table_write`, with
//! `write`, `partition` and `data_file`.

pub mod data_file;
mod ddl;
pub mod filter;
pub mod metadata;
pub mod partition;
pub mod scan;
pub mod schema;
pub mod storage;
pub mod table_write;
pub mod write;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use datafusion::catalog::{CatalogProvider, SchemaProvider, TableProvider};
use datafusion::common::{plan_datafusion_err, plan_err};
use datafusion::datasource::empty::EmptyTable;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::ExecutionPlan;
use iceberg::{Catalog, CatalogBuilder, NamespaceIdent, TableIdent};
use iceberg_catalog_sql::{SqlBindStyle, SqlCatalogBuilder};

use super::object_storage::{ObjectStores, S3Scope, S3Settings, S3_KEYS};
use super::Connector;
use crate::etc::{CatalogFile, EtcError};
use storage::{ObjectStoreStorage, ObjectStoreStorageFactory};

/// How long listed namespaces and tables are trusted before the catalog is asked
/// again.
const METADATA_TTL: Duration = Duration::from_secs(5);
/// How long reaching the catalog database may take.
const CATALOG_TIMEOUT: Duration = Duration::from_secs(20);

/// The catalog file's settings.
#[derive(Debug, Clone)]
pub struct IcebergSettings {
    /// sqlx's URL of the catalog database (`sqlite:PATH`, `postgresql://...`).
    pub connection_url: String,
    /// The catalog's name inside that database (`iceberg.jdbc-catalog.catalog-name`).
    pub catalog_name: String,
    /// Where new tables go, and where files may be read.
    pub warehouse: String,
    pub s3: Option<S3Settings>,
}

impl IcebergSettings {
    pub const KEYS: &'static [&'static str] = &[
        "connector.name",
        "iceberg.catalog.type",
        "iceberg.jdbc-catalog.driver-class",
        "iceberg.jdbc-catalog.connection-url",
        "iceberg.jdbc-catalog.connection-user",
        "iceberg.jdbc-catalog.connection-password",
        "iceberg.jdbc-catalog.catalog-name",
        "iceberg.jdbc-catalog.default-warehouse-dir",
        "iceberg.file-format",
    ];

    pub fn from_catalog(c: &CatalogFile) -> Result<Self, EtcError> {
        let p = &c.properties;
        p.check_keys(Self::KEYS, &|k| S3_KEYS.contains(&k))?;
        let invalid = |message: String| EtcError::Invalid { path: p.path.display().to_string(), message };
        match p.get("iceberg.catalog.type") {
            Some("jdbc") => {}
            Some(other @ ("rest" | "hive_metastore" | "glue" | "nessie" | "snowflake")) => {
                return Err(invalid(format!(
                    "iceberg.catalog.type={other} is not supported by this flotilla; it reads Iceberg SQL catalogs (jdbc)"
                )))
            }
            Some(other) => return Err(invalid(format!("iceberg.catalog.type={other} is not a catalog type"))),
            None => return Err(invalid("iceberg.catalog.type is missing (jdbc)".into())),
        }
        if let Some(f) = p.get("iceberg.file-format").filter(|f| !f.eq_ignore_ascii_case("parquet")) {
            return Err(invalid(format!("iceberg.file-format={f}: flotilla writes and reads Parquet")));
        }
        let url = p
            .get("iceberg.jdbc-catalog.connection-url")
            .ok_or_else(|| invalid("iceberg.jdbc-catalog.connection-url is missing".into()))?;
        let connection_url = sqlx_url(
            url,
            p.get("iceberg.jdbc-catalog.connection-user"),
            p.get("iceberg.jdbc-catalog.connection-password"),
        )
        .map_err(invalid)?;
        let catalog_name = p
            .get("iceberg.jdbc-catalog.catalog-name")
            .ok_or_else(|| invalid("iceberg.jdbc-catalog.catalog-name is missing".into()))?
            .to_string();
        let warehouse = p
            .get("iceberg.jdbc-catalog.default-warehouse-dir")
            .ok_or_else(|| invalid("iceberg.jdbc-catalog.default-warehouse-dir is missing".into()))?;
        storage::object_url(warehouse).map_err(invalid)?;
        let warehouse = storage::raw_location(warehouse).trim_end_matches('/').to_string();
        Ok(IcebergSettings { connection_url, catalog_name, warehouse, s3: S3Settings::from_properties(p)? })
    }

    fn bind_style(&self) -> SqlBindStyle {
        if self.connection_url.starts_with("sqlite:") {
            SqlBindStyle::QMark
        } else {
            SqlBindStyle::DollarNumeric
        }
    }

    /// The warehouse as a local directory, when it is one.
    fn local_warehouse(&self) -> Option<PathBuf> {
        url::Url::parse(&self.warehouse).ok().filter(|u| u.scheme() == "file").and_then(|u| u.to_file_path().ok())
    }
}

/// The connection URL as sqlx takes it: Trino's `jdbc:` prefix dropped, the user and
/// password put in for PostgreSQL, and a SQLite file made when missing (the catalog
/// makes its tables on first use, as Trino's does).
fn sqlx_url(url: &str, user: Option<&str>, password: Option<&str>) -> Result<String, String> {
    let url = url.strip_prefix("jdbc:").unwrap_or(url);
    if let Some(path) = url.strip_prefix("sqlite:") {
        if user.is_some() || password.is_some() {
            return Err("a SQLite catalog takes no connection-user or connection-password".into());
        }
        let path = path.trim_start_matches("//");
        return Ok(if path.contains('?') { format!("sqlite:{path}") } else { format!("sqlite:{path}?mode=rwc") });
    }
    if !(url.starts_with("postgresql://") || url.starts_with("postgres://")) {
        return Err(format!(
            "iceberg.jdbc-catalog.connection-url '{url}': expected sqlite:PATH or postgresql://HOST[:PORT]/DATABASE"
        ));
    }
    let mut parsed = url::Url::parse(url).map_err(|e| format!("iceberg.jdbc-catalog.connection-url: {e}"))?;
    if let Some(u) = user {
        parsed.set_username(u).map_err(|_| "iceberg.jdbc-catalog.connection-user cannot be set".to_string())?;
    }
    if let Some(p) = password {
        parsed
            .set_password(Some(p))
            .map_err(|_| "iceberg.jdbc-catalog.connection-password cannot be set".to_string())?;
    }
    Ok(parsed.to_string())
}

/// An Iceberg error as a DataFusion one, naming what it was about.
pub fn iceberg_error(what: &str, e: iceberg::Error) -> DataFusionError {
    match e.kind() {
        iceberg::ErrorKind::FeatureUnsupported => {
            DataFusionError::NotImplemented(format!("Iceberg table {what}: {}", e.message()))
        }
        _ => DataFusionError::External(format!("Iceberg {what}: {e}").into()),
    }
}

/// Namespaces and their tables, as last listed.
#[derive(Debug, Default)]
struct Listing {
    fetched: Option<Instant>,
    schemas: BTreeMap<String, Vec<String>>,
}

/// One Iceberg catalog: its settings, its connection to the catalog database (made
/// on first use) and what it last listed. Everything that talks to the database runs
/// on the catalog's own runtime: the pool's connections belong to the runtime they
/// were made on, and DataFusion asks for listings from synchronous code, which then
/// waits for that runtime without blocking the one it runs on.
#[derive(Debug)]
pub struct IcebergCatalogState {
    /// The name in SQL, for messages.
    name: String,
    settings: IcebergSettings,
    stores: Arc<ObjectStores>,
    catalog: tokio::sync::OnceCell<Arc<dyn Catalog>>,
    listing: parking_lot::Mutex<Listing>,
    runtime: std::sync::OnceLock<tokio::runtime::Handle>,
}

impl IcebergCatalogState {
    /// The catalog's runtime: one thread, made on first use, living as long as the
    /// process (as its connections do).
    fn handle(&self) -> Result<tokio::runtime::Handle> {
        if let Some(h) = self.runtime.get() {
            return Ok(h.clone());
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("iceberg-catalog")
            .enable_all()
            .build()
            .map_err(|e| DataFusionError::External(Box::new(e)))?;
        let handle = self.runtime.get_or_init(|| runtime.handle().clone()).clone();
        std::mem::forget(runtime);
        Ok(handle)
    }

    /// Runs `f` on the catalog's runtime.
    async fn on_runtime<T, F>(self: &Arc<Self>, f: impl FnOnce(Arc<Self>) -> F) -> Result<T>
    where
        F: std::future::Future<Output = Result<T>> + Send + 'static,
        T: Send + 'static,
    {
        let task = self.handle()?.spawn(f(self.clone()));
        task.await.map_err(|e| DataFusionError::External(Box::new(e)))?
    }

    async fn catalog(&self) -> Result<Arc<dyn Catalog>> {
        let made = self.catalog.get_or_try_init(|| async {
            let storage = ObjectStoreStorage::new(self.stores.clone());
            let builder = SqlCatalogBuilder::default()
                .uri(self.settings.connection_url.clone())
                .warehouse_location(self.settings.warehouse.clone())
                .sql_bind_style(self.settings.bind_style())
                .with_storage_factory(Arc::new(ObjectStoreStorageFactory::new(storage)));
            let load = builder.load(self.settings.catalog_name.clone(), HashMap::new());
            let catalog = tokio::time::timeout(CATALOG_TIMEOUT, load)
                .await
                .map_err(|_| {
                    plan_datafusion_err!(
                        "Iceberg catalog {}: its database did not answer in {CATALOG_TIMEOUT:?}",
                        self.name
                    )
                })?
                .map_err(|e| iceberg_error(&format!("catalog {}", self.name), e))?;
            Ok::<_, DataFusionError>(Arc::new(catalog) as Arc<dyn Catalog>)
        });
        made.await.cloned()
    }

    /// The namespaces and tables, listed again when stale.
    async fn refresh(self: &Arc<Self>, force: bool) -> Result<()> {
        let fresh = self.listing.lock().fetched.is_some_and(|t| t.elapsed() < METADATA_TTL);
        if fresh && !force {
            return Ok(());
        }
        self.on_runtime(|s| async move { s.list().await }).await
    }

    async fn list(&self) -> Result<()> {
        let catalog = self.catalog().await?;
        let what = format!("catalog {}", self.name);
        let mut schemas = BTreeMap::new();
        let mut pending: Vec<Option<NamespaceIdent>> = vec![None];
        while let Some(parent) = pending.pop() {
            let namespaces = catalog.list_namespaces(parent.as_ref()).await.map_err(|e| iceberg_error(&what, e))?;
            for ns in namespaces {
                if parent.as_ref() == Some(&ns) {
                    continue;
                }
                let tables = catalog.list_tables(&ns).await.map_err(|e| iceberg_error(&what, e))?;
                schemas.insert(schema_name(&ns), tables.into_iter().map(|t| t.name().to_string()).collect());
                pending.push(Some(ns));
            }
        }
        *self.listing.lock() = Listing { fetched: Some(Instant::now()), schemas };
        Ok(())
    }

    /// The same from synchronous code (DataFusion's catalog listing), waiting for the
    /// catalog's runtime. A failure leaves the last listing and is logged.
    fn refresh_blocking(self: &Arc<Self>) {
        if self.listing.lock().fetched.is_some_and(|t| t.elapsed() < METADATA_TTL) {
            return;
        }
        if let Err(e) = futures::executor::block_on(self.refresh(false)) {
            tracing::warn!("{e}");
        }
    }

    /// The table at `schema.table`, loaded from the catalog now.
    async fn load(self: &Arc<Self>, schema: &str, table: &str) -> Result<Option<iceberg::table::Table>> {
        let (schema, table) = (schema.to_string(), table.to_string());
        self.on_runtime(|s| async move { s.load_here(&schema, &table).await }).await
    }

    async fn load_here(&self, schema: &str, table: &str) -> Result<Option<iceberg::table::Table>> {
        let catalog = self.catalog().await?;
        let ident = TableIdent::new(namespace(schema), table.to_string());
        let what = format!("table {}.{schema}.{table}", self.name);
        match catalog.load_table(&ident).await {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == iceberg::ErrorKind::TableNotFound => Ok(None),
            Err(e) => Err(iceberg_error(&what, e)),
        }
    }
}

/// A namespace as a schema name: its levels joined by dots.
fn schema_name(ns: &NamespaceIdent) -> String {
    ns.as_ref().join(".")
}

fn namespace(schema: &str) -> NamespaceIdent {
    NamespaceIdent::from_vec(schema.split('.').map(str::to_string).collect())
        .unwrap_or_else(|_| NamespaceIdent::new(schema.to_string()))
}

/// The `iceberg` connector.
#[derive(Debug, Clone)]
pub struct IcebergConnector {
    state: Arc<IcebergCatalogState>,
}

impl IcebergConnector {
    pub fn from_catalog(c: &CatalogFile) -> Result<Self, EtcError> {
        Ok(Self::new(&c.name, IcebergSettings::from_catalog(c)?))
    }

    pub fn new(name: &str, settings: IcebergSettings) -> Self {
        let local = super::local_files::AllowedDirectories::new(settings.local_warehouse());
        let scopes = settings.s3.iter().map(|s3| S3Scope { prefixes: s3_prefixes(&settings), settings: s3.clone() });
        let stores = Arc::new(ObjectStores::new(scopes.collect(), local));
        let state = IcebergCatalogState {
            name: name.to_string(),
            settings,
            stores,
            catalog: tokio::sync::OnceCell::new(),
            listing: Default::default(),
            runtime: std::sync::OnceLock::new(),
        };
        IcebergConnector { state: Arc::new(state) }
    }
}

/// The S3 prefix of the warehouse, when it is in S3.
fn s3_prefixes(settings: &IcebergSettings) -> Vec<String> {
    let w = &settings.warehouse;
    if w.starts_with("s3://") {
        vec![format!("{w}/")]
    } else {
        Vec::new()
    }
}

impl Connector for IcebergConnector {
    fn catalog_name(&self) -> &str {
        &self.state.name
    }

    fn connector_name(&self) -> &str {
        "iceberg"
    }

    fn catalog(&self) -> Arc<dyn CatalogProvider> {
        Arc::new(IcebergCatalog { state: self.state.clone() })
    }

    /// Its scans are DataFusion's Parquet scans.
    fn is_scan(&self, plan: &dyn ExecutionPlan) -> bool {
        super::files::is_file_scan(plan)
    }

    fn s3_scope(&self) -> Option<S3Scope> {
        let s3 = self.state.settings.s3.clone()?;
        Some(S3Scope { prefixes: s3_prefixes(&self.state.settings), settings: s3 })
    }

    fn readable_directories(&self) -> Vec<PathBuf> {
        self.state.settings.local_warehouse().into_iter().collect()
    }

    fn has_versions(&self) -> bool {
        true
    }

    fn iceberg(&self) -> Option<&IcebergConnector> {
        Some(self)
    }

    fn writes(&self) -> Option<&dyn super::writes::ConnectorWrites> {
        Some(self)
    }
}

/// The catalog as DataFusion sees it: one schema per namespace.
#[derive(Debug)]
struct IcebergCatalog {
    state: Arc<IcebergCatalogState>,
}

impl CatalogProvider for IcebergCatalog {
    fn schema_names(&self) -> Vec<String> {
        self.state.refresh_blocking();
        self.state.listing.lock().schemas.keys().cloned().collect()
    }

    /// A schema the catalog lists; when it could never be listed, any schema, so
    /// that loading the table (which can fail) says why rather than "not found".
    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        self.state.refresh_blocking();
        let listing = self.state.listing.lock();
        let known = listing.schemas.contains_key(name) || listing.fetched.is_none();
        known.then(|| Arc::new(IcebergSchema { state: self.state.clone(), name: name.to_string() }) as _)
    }

    fn register_schema(&self, name: &str, _schema: Arc<dyn SchemaProvider>) -> Result<Option<Arc<dyn SchemaProvider>>> {
        self.state.create_namespace(name)?;
        Ok(None)
    }

    fn deregister_schema(&self, name: &str, cascade: bool) -> Result<Option<Arc<dyn SchemaProvider>>> {
        let dropped = self.state.drop_namespace(name, cascade)?;
        Ok(dropped.then(|| Arc::new(IcebergSchema { state: self.state.clone(), name: name.to_string() }) as _))
    }
}

/// One namespace.
#[derive(Debug)]
struct IcebergSchema {
    state: Arc<IcebergCatalogState>,
    name: String,
}

/// What a table name in a query asks for (see the module).
#[derive(Debug, PartialEq, Eq)]
enum TableName<'a> {
    Current(&'a str),
    Snapshot(&'a str, i64),
    AsOf(&'a str, i64),
    Metadata(&'a str, metadata::MetadataTable),
}

impl<'a> TableName<'a> {
    fn parse(name: &'a str) -> Self {
        if let Some((base, kind)) = name.rsplit_once('$') {
            if let Some(kind) = metadata::MetadataTable::parse(kind) {
                return TableName::Metadata(base, kind);
            }
        }
        match super::time_travel::split_travel_name(name) {
            Some((base, super::time_travel::TravelPoint::Version(v))) => TableName::Snapshot(base, v),
            Some((base, super::time_travel::TravelPoint::Timestamp(ms))) => TableName::AsOf(base, ms),
            None => TableName::Current(name),
        }
    }
}

#[async_trait]
impl SchemaProvider for IcebergSchema {
    fn table_names(&self) -> Vec<String> {
        self.state.refresh_blocking();
        self.state.listing.lock().schemas.get(&self.name).cloned().unwrap_or_default()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let parsed = TableName::parse(name);
        let base = match parsed {
            TableName::Current(b) | TableName::Snapshot(b, _) | TableName::AsOf(b, _) | TableName::Metadata(b, _) => b,
        };
        let Some(table) = self.state.load(&self.name, base).await? else { return Ok(None) };
        let full = format!("{}.{}.{base}", self.state.name, self.name);
        Ok(Some(match parsed {
            TableName::Current(_) => Arc::new(scan::IcebergSnapshotTable::new(full, table, None)?),
            TableName::Snapshot(_, id) => Arc::new(scan::IcebergSnapshotTable::new(full, table, Some(id))?),
            TableName::AsOf(_, ms) => {
                let id = metadata::snapshot_as_of(table.metadata(), ms).ok_or_else(|| {
                    plan_datafusion_err!("Iceberg table {full} has no snapshot at or before {ms} ms since the epoch")
                })?;
                Arc::new(scan::IcebergSnapshotTable::new(full, table, Some(id))?)
            }
            TableName::Metadata(_, kind) => metadata::table(kind, &full, &table).await?,
        }))
    }

    fn deregister_table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let TableName::Current(table) = TableName::parse(name) else {
            return plan_err!("{name} is not a table of {}.{} that can be dropped", self.state.name, self.name);
        };
        let dropped = self.state.drop_table_and_files(&self.name, table)?;
        let gone = || Arc::new(EmptyTable::new(Arc::new(datafusion::arrow::datatypes::Schema::empty()))) as _;
        Ok(dropped.then(gone))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.state.refresh_blocking();
        let listing = self.state.listing.lock();
        let base = match TableName::parse(name) {
            TableName::Current(b) | TableName::Snapshot(b, _) | TableName::AsOf(b, _) | TableName::Metadata(b, _) => b,
        };
        listing.schemas.get(&self.name).is_some_and(|t| t.iter().any(|t| t == base))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_urls_are_taken_as_trino_writes_them() {
        assert_eq!(sqlx_url("jdbc:sqlite:/w/catalog.db", None, None).unwrap(), "sqlite:/w/catalog.db?mode=rwc");
        assert_eq!(sqlx_url("sqlite:///w/c.db", None, None).unwrap(), "sqlite:/w/c.db?mode=rwc");
        assert_eq!(
            sqlx_url("jdbc:postgresql://127.0.0.1:5432/lake", Some("ice"), Some("p w")).unwrap(),
            "postgresql://ice:p%20w@127.0.0.1:5432/lake"
        );
        assert!(sqlx_url("jdbc:mysql://h/db", None, None).is_err());
        assert!(sqlx_url("sqlite:/w/c.db", Some("u"), None).is_err());
    }

    #[test]
    fn table_names_say_what_is_asked_for() {
        assert_eq!(TableName::parse("t"), TableName::Current("t"));
        assert_eq!(TableName::parse("t@42"), TableName::Snapshot("t", 42));
        assert_eq!(TableName::parse("t@ts1700000000000"), TableName::AsOf("t", 1_700_000_000_000));
        assert_eq!(TableName::parse("t$snapshots"), TableName::Metadata("t", metadata::MetadataTable::Snapshots));
        assert_eq!(TableName::parse("t$nothing"), TableName::Current("t$nothing"));
    }
}
