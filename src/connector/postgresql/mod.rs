//! The `postgresql` connector: a PostgreSQL database as a catalog. Its schemas and
//! tables (and their columns) are read from the server's `information_schema`; a
//! scan is one SQL query, with the projection and every filter that has an exact SQL
//! equivalent pushed into it (`pushdown`), run by one worker task (`scan`).
//!
//! Configured as Trino's: `connection-url=jdbc:postgresql://host:port/database`,
//! `connection-user`, `connection-password`. Workers need the same catalog file: they
//! connect to the database themselves. Catalog metadata is cached for a few seconds;
//! the catalog API DataFusion calls is synchronous, so a refresh runs on a thread of
//! its own.

pub mod pushdown;
pub mod scan;

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::{CatalogProvider, SchemaProvider, Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use serde::{Deserialize, Serialize};

use super::Connector;
use crate::etc::{CatalogFile, EtcError};
use pushdown::{filter_sql, quote_ident, PushdownColumn};
use scan::PostgresScanExec;

/// How a column travels from PostgreSQL: the SQL that reads it and the Arrow type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ColumnKind {
    Bool,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    /// `numeric(p, s)`, read as text and parsed exactly.
    Numeric {
        precision: u8,
        scale: i8,
    },
    /// Days since 1970-01-01.
    Date,
    /// Microseconds since the epoch; `utc` for `timestamp with time zone`.
    Timestamp {
        utc: bool,
    },
    /// `text`, `character varying`, `name`: compared as DataFusion compares strings.
    Text,
    /// Any other type, read as its text form; its own comparison rules (uuid, citext,
    /// char(n) padding, json) differ from its text's, so no filter on it is pushed.
    Other,
}

impl ColumnKind {
    /// From `information_schema.columns`' `data_type`, precision and scale.
    fn of(data_type: &str, precision: Option<i32>, scale: Option<i32>) -> (ColumnKind, DataType) {
        match data_type {
            "boolean" => (ColumnKind::Bool, DataType::Boolean),
            "smallint" => (ColumnKind::Int16, DataType::Int16),
            "integer" => (ColumnKind::Int32, DataType::Int32),
            "bigint" => (ColumnKind::Int64, DataType::Int64),
            "real" => (ColumnKind::Float32, DataType::Float32),
            "double precision" => (ColumnKind::Float64, DataType::Float64),
            "numeric" => {
                // Unconstrained numeric: the widest decimal, scale as Trino maps it.
                let (p, s) = match (precision, scale) {
                    // A negative scale (PostgreSQL 15) rounds to tens, hundreds...:
                    // whole numbers with that many more digits.
                    (Some(p), Some(s)) if s < 0 && (1..=38).contains(&(p - s)) => ((p - s) as u8, 0),
                    (Some(p), Some(s)) if (1..=38).contains(&p) && (0..=p).contains(&s) => (p as u8, s as i8),
                    _ => (38, 10),
                };
                (ColumnKind::Numeric { precision: p, scale: s }, DataType::Decimal128(p, s))
            }
            "date" => (ColumnKind::Date, DataType::Date32),
            "timestamp without time zone" => {
                (ColumnKind::Timestamp { utc: false }, DataType::Timestamp(TimeUnit::Microsecond, None))
            }
            "timestamp with time zone" => {
                (ColumnKind::Timestamp { utc: true }, DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())))
            }
            "text" | "character varying" | "name" => (ColumnKind::Text, DataType::Utf8),
            _ => (ColumnKind::Other, DataType::Utf8),
        }
    }

    /// The select-list expression reading column `name`.
    pub fn select(self, name: &str) -> String {
        let c = quote_ident(name);
        match self {
            ColumnKind::Numeric { .. } | ColumnKind::Text | ColumnKind::Other => format!("{c}::text"),
            ColumnKind::Date => format!("({c} - DATE '1970-01-01')"),
            ColumnKind::Timestamp { .. } => format!("(EXTRACT(EPOCH FROM {c}) * 1000000)::int8"),
            _ => c,
        }
    }
}

/// What went wrong talking to the database (connecting, logging in, reading its
/// catalog or rows): a query error of its own (`JDBC_ERROR`, Trino's code for it),
/// with the server's words, never a table that seems not to exist.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct PostgresError(String);

impl PostgresError {
    /// Whether `e` is one, however DataFusion wrapped it.
    pub fn is(e: &DataFusionError) -> bool {
        matches!(e.find_root(), DataFusionError::External(inner) if inner.is::<PostgresError>())
    }
}

#[derive(Debug, Clone)]
struct Table {
    schema: SchemaRef,
    kinds: Vec<ColumnKind>,
}

#[derive(Debug, Default)]
struct Metadata {
    fetched: Option<Instant>,
    schemas: BTreeMap<String, BTreeMap<String, Table>>,
    /// Why the last reading failed (a refused login, an unreachable server), until a
    /// reading succeeds: listings report it instead of answering from the cache.
    failure: Option<String>,
}

/// How long catalog metadata is trusted before it is read again.
const METADATA_TTL: Duration = Duration::from_secs(5);

/// Longest wait for the catalog's metadata: a stalled server must not hold planning
/// (or the thread asking) for ever.
const METADATA_TIMEOUT: Duration = Duration::from_secs(15);

#[derive(Debug)]
struct Database {
    catalog: String,
    /// `split-column`: integer columns tables are read by ranges of, as `column`
    /// (any table), `table.column` or `schema.table.column`.
    split_columns: Vec<String>,
    config: tokio_postgres::Config,
    /// `host:port/database`, for messages.
    display: String,
    metadata: parking_lot::Mutex<Metadata>,
}

impl Database {
    async fn connect(&self) -> Result<tokio_postgres::Client> {
        let (client, connection) =
            tokio::time::timeout(Duration::from_secs(10), self.config.connect(tokio_postgres::NoTls))
                .await
                .map_err(|_| self.message("connecting timed out after 10s"))?
                .map_err(|e| self.error(e))?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    /// The error and its causes: tokio-postgres says "db error" and keeps the server's
    /// words ("password authentication failed for user ...") in its source.
    fn error(&self, e: impl std::error::Error) -> DataFusionError {
        let mut text = e.to_string();
        let mut source = e.source();
        while let Some(cause) = source {
            text.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        self.message(text)
    }

    fn message(&self, text: impl std::fmt::Display) -> DataFusionError {
        let catalog = &self.catalog;
        DataFusionError::External(Box::new(PostgresError(format!(
            "PostgreSQL {} (catalog {catalog}): {text}",
            self.display
        ))))
    }

    async fn read_metadata(&self) -> Result<BTreeMap<String, BTreeMap<String, Table>>> {
        let client = self.connect().await?;
        let mut schemas: BTreeMap<String, BTreeMap<String, Table>> = BTreeMap::new();
        let names = client
            .query(
                "SELECT schema_name::text FROM information_schema.schemata WHERE schema_name NOT IN \
                 ('pg_catalog', 'information_schema') AND schema_name NOT LIKE 'pg\\_%'",
                &[],
            )
            .await
            .map_err(|e| self.error(e))?;
        for row in names {
            schemas.entry(row.get(0)).or_default();
        }
        let rows = client
            .query(
                "SELECT c.table_schema::text, c.table_name::text, c.column_name::text, c.data_type::text, \
                 c.numeric_precision::int4, c.numeric_scale::int4, c.is_nullable::text = 'YES' \
                 FROM information_schema.columns c JOIN information_schema.tables t \
                 ON t.table_schema = c.table_schema AND t.table_name = c.table_name \
                 WHERE c.table_schema NOT IN ('pg_catalog', 'information_schema') \
                 ORDER BY 1, 2, c.ordinal_position",
                &[],
            )
            .await
            .map_err(|e| self.error(e))?;
        let mut columns: BTreeMap<(String, String), (Vec<Field>, Vec<ColumnKind>)> = BTreeMap::new();
        for r in rows {
            let (kind, ty) = ColumnKind::of(r.get::<_, String>(3).as_str(), r.get(4), r.get(5));
            let entry = columns.entry((r.get(0), r.get(1))).or_default();
            entry.0.push(Field::new(r.get::<_, String>(2), ty, r.get(6)));
            entry.1.push(kind);
        }
        for ((schema, table), (fields, kinds)) in columns {
            schemas.entry(schema).or_default().insert(table, Table { schema: Arc::new(Schema::new(fields)), kinds });
        }
        Ok(schemas)
    }

    /// The metadata, read again when stale (`force`: whatever its age).
    async fn refresh(&self, force: bool) -> Result<()> {
        let fresh = self.metadata.lock().fetched.is_some_and(|t| t.elapsed() < METADATA_TTL);
        if fresh && !force {
            return Ok(());
        }
        let read = tokio::time::timeout(METADATA_TIMEOUT, self.read_metadata())
            .await
            .map_err(|_| self.message(format!("reading the catalog took longer than {METADATA_TIMEOUT:?}")))
            .and_then(|r| r);
        match read {
            Ok(schemas) => {
                *self.metadata.lock() = Metadata { fetched: Some(Instant::now()), schemas, failure: None };
                Ok(())
            }
            Err(e) => {
                tracing::warn!("{e}");
                self.metadata.lock().failure = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// The same, from synchronous code: on a thread of its own with its own runtime,
    /// so no caller's runtime is blocked or re-entered. An unreachable server leaves
    /// the cached metadata (and says so in the log).
    fn refresh_blocking(&self) {
        let fresh = self.metadata.lock().fetched.is_some_and(|t| t.elapsed() < METADATA_TTL);
        if fresh {
            return;
        }
        // A failure was logged by `refresh`; the cached metadata stays.
        let _ = std::thread::scope(|s| {
            s.spawn(|| {
                tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| self.error(e))
                    .and_then(|rt| rt.block_on(self.refresh(false)))
            })
            .join()
        });
    }

    /// Whether the catalog was never read (the server unreachable or refusing the
    /// login since the start): nothing can be said to be missing from it.
    fn never_read(&self) -> bool {
        self.metadata.lock().fetched.is_none()
    }

    fn table(&self, schema: &str, table: &str) -> Option<Table> {
        self.metadata.lock().schemas.get(schema).and_then(|s| s.get(table)).cloned()
    }
}

#[derive(Debug)]
pub struct PostgresConnector {
    db: Arc<Database>,
}

impl PostgresConnector {
    pub const KEYS: &'static [&'static str] =
        &["connector.name", "connection-url", "connection-user", "connection-password", "split-column"];

    pub fn from_catalog(c: &CatalogFile) -> Result<Self, EtcError> {
        c.properties.check_keys(Self::KEYS, &|_| false)?;
        let invalid = |message: String| EtcError::Invalid { path: c.properties.path.display().to_string(), message };
        let url = c.properties.get("connection-url").ok_or_else(|| invalid("connection-url is missing".into()))?;
        let mut config = Self::parse_url(url).map_err(invalid)?;
        if let Some(u) = c.properties.get("connection-user") {
            config.user(u);
        }
        if let Some(p) = c.properties.get("connection-password") {
            config.password(p);
        }
        // Literals are quoted the standard way; a server set otherwise would read a
        // backslash in one as an escape. Statements cannot stall a scan forever.
        config
            .application_name("flotilla")
            .connect_timeout(Duration::from_secs(10))
            .options("-c standard_conforming_strings=on");
        // Never the URL itself in messages: it may carry the password.
        let hosts: Vec<String> = config
            .get_hosts()
            .iter()
            .zip(config.get_ports().iter().chain(std::iter::repeat(&5432)))
            .map(|(h, p)| match h {
                tokio_postgres::config::Host::Tcp(h) => format!("{h}:{p}"),
                tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
            })
            .collect();
        let display = format!("{}/{}", hosts.join(","), config.get_dbname().unwrap_or_default());
        let split_columns = c
            .properties
            .get("split-column")
            .map(|v| v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect())
            .unwrap_or_default();
        Ok(PostgresConnector {
            db: Arc::new(Database {
                catalog: c.name.clone(),
                split_columns,
                config,
                display,
                metadata: Default::default(),
            }),
        })
    }

    /// `jdbc:postgresql://host:port/database` (Trino's form) or a libpq URL.
    fn parse_url(url: &str) -> Result<tokio_postgres::Config, String> {
        let url = url.strip_prefix("jdbc:").unwrap_or(url);
        if !url.starts_with("postgresql://") && !url.starts_with("postgres://") {
            return Err("connection-url is not jdbc:postgresql://host:port/database".into());
        }
        url.parse::<tokio_postgres::Config>().map_err(|e| format!("connection-url: {e}"))
    }
}

impl Connector for PostgresConnector {
    fn catalog_name(&self) -> &str {
        &self.db.catalog
    }

    fn listing_failure(&self) -> Option<crate::error_code::QueryError> {
        self.db.refresh_blocking();
        let failure = self.db.metadata.lock().failure.clone()?;
        Some(crate::error_code::QueryError::new(crate::error_code::ErrorCode::JdbcError, failure))
    }

    fn connector_name(&self) -> &str {
        "postgresql"
    }

    fn catalog(&self) -> Arc<dyn CatalogProvider> {
        Arc::new(PostgresCatalog { db: self.db.clone() })
    }

    fn is_scan(&self, plan: &dyn ExecutionPlan) -> bool {
        (plan as &dyn Any).downcast_ref::<PostgresScanExec>().is_some_and(|s| s.catalog() == self.db.catalog)
    }

    fn encode_scan(&self, plan: &dyn ExecutionPlan) -> Option<Vec<u8>> {
        let scan = (plan as &dyn Any).downcast_ref::<PostgresScanExec>()?;
        (scan.catalog() == self.db.catalog).then(|| scan.encode())?.ok()
    }

    fn decode_scan(&self, bytes: &[u8]) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(PostgresScanExec::decode(bytes, self.db.clone())?))
    }
}

#[derive(Debug)]
struct PostgresCatalog {
    db: Arc<Database>,
}

impl CatalogProvider for PostgresCatalog {
    fn schema_names(&self) -> Vec<String> {
        self.db.refresh_blocking();
        self.db.metadata.lock().schemas.keys().cloned().collect()
    }

    /// A schema the catalog has; when the catalog could never be read, any schema, so
    /// that the table lookup (which can fail) reports why rather than "not found".
    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        self.db.refresh_blocking();
        let known = self.db.metadata.lock().schemas.contains_key(name) || self.db.never_read();
        known.then(|| Arc::new(PostgresSchema { db: self.db.clone(), schema: name.to_string() }) as _)
    }
}

#[derive(Debug)]
struct PostgresSchema {
    db: Arc<Database>,
    schema: String,
}

#[async_trait]
impl SchemaProvider for PostgresSchema {
    fn table_names(&self) -> Vec<String> {
        self.db.refresh_blocking();
        self.db.metadata.lock().schemas.get(&self.schema).map(|t| t.keys().cloned().collect()).unwrap_or_default()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        self.db.refresh(false).await?;
        if self.db.table(&self.schema, name).is_none() {
            // A table made a moment ago: look once more before saying it is not there.
            self.db.refresh(true).await?;
        }
        Ok(self.db.table(&self.schema, name).map(|t| {
            Arc::new(PostgresTable {
                db: self.db.clone(),
                schema: self.schema.clone(),
                name: name.to_string(),
                table: t,
            }) as Arc<dyn TableProvider>
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.db.refresh_blocking();
        self.db.table(&self.schema, name).is_some()
    }
}

#[derive(Debug)]
struct PostgresTable {
    db: Arc<Database>,
    schema: String,
    name: String,
    table: Table,
}

impl PostgresTable {
    /// The integer column this table is read by ranges of, if one is configured.
    fn split_column(&self) -> Option<String> {
        let prefixes = [String::new(), format!("{}.", self.name), format!("{}.{}.", self.schema, self.name)];
        self.table.schema.fields().iter().zip(&self.table.kinds).find_map(|(f, k)| {
            let integer = matches!(k, ColumnKind::Int16 | ColumnKind::Int32 | ColumnKind::Int64);
            let named = prefixes.iter().any(|p| self.db.split_columns.contains(&format!("{p}{}", f.name())));
            (integer && named).then(|| f.name().clone())
        })
    }

    /// Conditions cutting `[min, max]` of `column` (under `conditions`) into at most
    /// `parts` ranges of equal width; NULLs go with the first.
    async fn ranges(&self, column: &str, conditions: &[String], parts: usize) -> Result<Vec<String>> {
        let c = quote_ident(column);
        let mut sql = format!(
            "SELECT min({c})::int8, max({c})::int8 FROM {}.{}",
            quote_ident(&self.schema),
            quote_ident(&self.name)
        );
        if !conditions.is_empty() {
            sql.push_str(&format!(" WHERE {}", conditions.join(" AND ")));
        }
        let client = self.db.connect().await?;
        let row = client.query_one(sql.as_str(), &[]).await.map_err(|e| self.db.error(e))?;
        let (Some(lo), Some(hi)) = (row.get::<_, Option<i64>>(0), row.get::<_, Option<i64>>(1)) else {
            // No row, or only NULLs: one range that takes them all.
            return Ok(vec!["TRUE".to_string()]);
        };
        Ok(split_ranges(&c, lo, hi, parts))
    }

    fn pushdown_columns(&self) -> Vec<PushdownColumn<'_>> {
        self.table
            .schema
            .fields()
            .iter()
            .zip(&self.table.kinds)
            .map(|(f, k)| PushdownColumn { name: f.name(), kind: *k })
            .collect()
    }
}

#[async_trait]
impl TableProvider for PostgresTable {
    fn schema(&self) -> SchemaRef {
        self.table.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        let columns = self.pushdown_columns();
        Ok(filters
            .iter()
            .map(|f| match filter_sql(f, &columns) {
                Some(_) => TableProviderFilterPushDown::Exact,
                None => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let all: Vec<usize> = (0..self.table.kinds.len()).collect();
        let projection = projection.unwrap_or(&all);
        let schema = Arc::new(self.table.schema.project(projection)?);
        let kinds: Vec<ColumnKind> = projection.iter().map(|&i| self.table.kinds[i]).collect();
        let select: Vec<String> =
            projection.iter().map(|&i| self.table.kinds[i].select(self.table.schema.field(i).name())).collect();
        let columns = self.pushdown_columns();
        let conditions: Vec<String> = filters.iter().filter_map(|f| filter_sql(f, &columns)).collect();
        let from = format!("{}.{}", quote_ident(&self.schema), quote_ident(&self.name));
        let select =
            format!("SELECT {} FROM {from}", if select.is_empty() { "NULL".to_string() } else { select.join(", ") });
        let with = |extra: Option<String>| {
            let all: Vec<String> = conditions.iter().cloned().chain(extra).collect();
            match all.is_empty() {
                true => select.clone(),
                false => format!("{select} WHERE {}", all.join(" AND ")),
            }
        };
        // Filters DataFusion keeps would have to run before a limit.
        if let Some(n) = limit.filter(|_| conditions.len() == filters.len()) {
            let sql = format!("{} LIMIT {n}", with(None));
            return Ok(Arc::new(PostgresScanExec::new(self.db.clone(), vec![sql], schema, kinds)));
        }
        let parts = state.config().target_partitions().max(1);
        let sqls = match (self.split_column(), parts > 1) {
            (Some(column), true) => {
                let ranges = self.ranges(&column, &conditions, parts).await?;
                ranges.into_iter().map(|r| with(Some(r))).collect()
            }
            _ => vec![with(None)],
        };
        Ok(Arc::new(PostgresScanExec::new(self.db.clone(), sqls, schema, kinds)))
    }
}

/// `[lo, hi]` of column `c` as at most `parts` conditions over ranges of equal width,
/// together covering every value, NULL (with the first) included.
fn split_ranges(c: &str, lo: i64, hi: i64, parts: usize) -> Vec<String> {
    let (lo, hi) = (lo as i128, hi as i128);
    let span = (hi - lo + 1) as u128;
    let parts = (parts as u128).clamp(1, span);
    let step = span.div_ceil(parts) as i128;
    let mut out = Vec::new();
    let mut start = lo;
    while start <= hi {
        let end = start + step;
        let range = match end > hi {
            true => format!("{c} >= {start}"),
            false => format!("{c} >= {start} AND {c} < {end}"),
        };
        // The first range is open below (keys added since the minimum was read).
        out.push(match (out.is_empty(), end > hi) {
            (true, true) => "TRUE".to_string(),
            (true, false) => format!("({c} IS NULL OR {c} < {end})"),
            (false, _) => format!("({range})"),
        });
        start = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_every_key_once() {
        assert_eq!(
            split_ranges("k", 0, 24, 4),
            ["(k IS NULL OR k < 7)", "(k >= 7 AND k < 14)", "(k >= 14 AND k < 21)", "(k >= 21)"]
        );
        assert_eq!(split_ranges("k", 5, 6, 8).len(), 2, "no more ranges than keys");
        assert_eq!(split_ranges("k", i64::MIN, i64::MAX, 3).len(), 3);
    }

    #[test]
    fn trino_urls_and_types_map() {
        let c = PostgresConnector::parse_url("jdbc:postgresql://127.0.0.1:5433/shop").unwrap();
        assert_eq!(c.get_dbname(), Some("shop"));
        assert!(PostgresConnector::parse_url("jdbc:mysql://x/y").is_err());
        assert_eq!(ColumnKind::of("numeric", Some(15), Some(2)).1, DataType::Decimal128(15, 2));
        assert_eq!(ColumnKind::of("numeric", None, None).1, DataType::Decimal128(38, 10));
        assert_eq!(ColumnKind::of("character varying", None, None).0, ColumnKind::Text);
        assert_eq!(ColumnKind::of("uuid", None, None).0, ColumnKind::Other);
        assert_eq!(ColumnKind::of("numeric", Some(5), Some(-2)).1, DataType::Decimal128(7, 0));
        assert_eq!(ColumnKind::Date.select("d"), "(\"d\" - DATE '1970-01-01')");
        assert_eq!(ColumnKind::Int64.select("k"), "\"k\"");
    }
}
