//! Trino's `system` catalog: `system.metadata` (catalogs, table comments, table and
//! schema properties, materialized views) and `system.runtime` (nodes, queries,
//! tasks). Tools read it to find their way around a cluster: dbt-trino lists
//! relations against `metadata.materialized_views` and documents tables from
//! `metadata.table_comments`; Trino's SQLAlchemy dialect reads table comments there.
//!
//! The rows come from the coordinator's own state through [`SystemState`], which the
//! coordinator implements and registers per query (so `runtime.queries` shows what
//! that query's user may see). Each table is built when scanned, with the filters on
//! `catalog_name` pushed in, so reading one catalog's comments does not list every
//! catalog. Read on the coordinator only: no connector ships these scans.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{
    ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::catalog::{CatalogProvider, SchemaProvider, Session, TableProvider};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::Result;
use datafusion::logical_expr::{Expr, Operator, TableProviderFilterPushDown, TableType};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::scalar::ScalarValue;

pub const SYSTEM_CATALOG: &str = "system";

/// A catalog as `metadata.catalogs` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogRow {
    pub name: String,
    pub connector: String,
}

/// A table or view as `metadata.table_comments` lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct CommentRow {
    pub catalog: String,
    pub schema: String,
    pub table: String,
    pub comment: Option<String>,
}

/// A property `CREATE TABLE ... WITH (...)` (or `CREATE SCHEMA`) takes in a catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct PropertyRow {
    pub catalog: String,
    pub name: String,
    pub default_value: String,
    pub type_name: String,
    pub description: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct NodeRow {
    pub node_id: String,
    pub http_uri: String,
    pub coordinator: bool,
    /// Trino's node states: `active`, `shutting_down`, `inactive`.
    pub state: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct QueryRow {
    pub query_id: String,
    pub state: String,
    pub user: String,
    pub query: String,
    pub created_ms: i64,
    pub ended_ms: Option<i64>,
    pub error_type: Option<String>,
    pub error_code: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TaskRow {
    pub node_id: String,
    pub task_id: String,
    pub stage_id: String,
    pub query_id: String,
    pub state: String,
    pub output_rows: i64,
    pub output_bytes: i64,
}

/// What the coordinator knows, as rows. `catalog` narrows to one catalog when the
/// query asks for one (`WHERE catalog_name = '...'`).
pub trait SystemState: Send + Sync + std::fmt::Debug {
    fn catalogs(&self) -> Vec<CatalogRow>;
    fn table_comments(&self, catalog: Option<&str>) -> Vec<CommentRow>;
    fn table_properties(&self, catalog: Option<&str>) -> Vec<PropertyRow>;
    fn schema_properties(&self, catalog: Option<&str>) -> Vec<PropertyRow>;
    fn nodes(&self) -> Vec<NodeRow>;
    fn queries(&self) -> Vec<QueryRow>;
    fn tasks(&self) -> Vec<TaskRow>;
}

const METADATA: [&str; 5] =
    ["catalogs", "materialized_views", "schema_properties", "table_comments", "table_properties"];
const RUNTIME: [&str; 3] = ["nodes", "queries", "tasks"];

/// The `system` catalog over a coordinator's state.
#[derive(Debug)]
pub struct SystemCatalog {
    state: Arc<dyn SystemState>,
}

impl SystemCatalog {
    pub fn new(state: Arc<dyn SystemState>) -> Self {
        SystemCatalog { state }
    }
}

impl CatalogProvider for SystemCatalog {
    fn schema_names(&self) -> Vec<String> {
        vec!["metadata".into(), "runtime".into()]
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        let tables: &'static [&'static str] = match name {
            "metadata" => &METADATA,
            "runtime" => &RUNTIME,
            _ => return None,
        };
        Some(Arc::new(SystemSchema { tables, state: self.state.clone() }))
    }
}

#[derive(Debug)]
struct SystemSchema {
    tables: &'static [&'static str],
    state: Arc<dyn SystemState>,
}

#[async_trait]
impl SchemaProvider for SystemSchema {
    fn table_names(&self) -> Vec<String> {
        self.tables.iter().map(|t| t.to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(self.tables.iter().find(|t| **t == name).map(|t| {
            Arc::new(SystemTable { name: t, schema: layout(t), state: self.state.clone() }) as Arc<dyn TableProvider>
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.tables.contains(&name)
    }
}

fn text(name: &str) -> Field {
    Field::new(name, DataType::Utf8, true)
}

fn timestamp(name: &str) -> Field {
    Field::new(name, DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), true)
}

/// Each table's columns, as Trino names and types them.
fn layout(table: &str) -> SchemaRef {
    let fields = match table {
        "catalogs" => vec![text("catalog_name"), text("connector_id"), text("connector_name")],
        "materialized_views" => vec![
            text("catalog_name"),
            text("schema_name"),
            text("name"),
            text("storage_catalog"),
            text("storage_schema"),
            text("storage_table"),
            text("freshness"),
            timestamp("last_fresh_time"),
            text("comment"),
            text("definition"),
        ],
        "table_comments" => vec![text("catalog_name"), text("schema_name"), text("table_name"), text("comment")],
        "schema_properties" | "table_properties" => {
            vec![text("catalog_name"), text("property_name"), text("default_value"), text("type"), text("description")]
        }
        "nodes" => vec![
            text("node_id"),
            text("http_uri"),
            text("node_version"),
            Field::new("coordinator", DataType::Boolean, true),
            text("state"),
        ],
        "queries" => vec![
            text("query_id"),
            text("state"),
            text("user"),
            text("source"),
            text("query"),
            timestamp("created"),
            timestamp("end"),
            text("error_type"),
            text("error_code"),
        ],
        _ => vec![
            text("node_id"),
            text("task_id"),
            text("stage_id"),
            text("query_id"),
            text("state"),
            Field::new("output_rows", DataType::Int64, true),
            Field::new("output_bytes", DataType::Int64, true),
        ],
    };
    Arc::new(Schema::new(fields))
}

#[derive(Debug)]
struct SystemTable {
    name: &'static str,
    schema: SchemaRef,
    state: Arc<dyn SystemState>,
}

/// The catalog a conjunct `catalog_name = 'x'` (either way round) names.
fn catalog_of(filter: &Expr) -> Option<String> {
    let Expr::BinaryExpr(b) = filter else { return None };
    if b.op != Operator::Eq {
        return None;
    }
    match (b.left.as_ref(), b.right.as_ref()) {
        (Expr::Column(c), Expr::Literal(ScalarValue::Utf8(Some(v)), _))
        | (Expr::Literal(ScalarValue::Utf8(Some(v)), _), Expr::Column(c))
            if c.name == "catalog_name" =>
        {
            Some(v.clone())
        }
        _ => None,
    }
}

fn strings<I: IntoIterator<Item = Option<String>>>(values: I) -> ArrayRef {
    Arc::new(StringArray::from_iter(values))
}

fn timestamps<I: IntoIterator<Item = Option<i64>>>(values: I) -> ArrayRef {
    Arc::new(TimestampMillisecondArray::from_iter(values).with_timezone("UTC"))
}

impl SystemTable {
    fn batch(&self, catalog: Option<&str>) -> Result<RecordBatch> {
        let s = &self.state;
        let columns: Vec<ArrayRef> = match self.name {
            "catalogs" => {
                let rows = s.catalogs();
                vec![
                    strings(rows.iter().map(|r| Some(r.name.clone()))),
                    strings(rows.iter().map(|r| Some(r.name.clone()))),
                    strings(rows.iter().map(|r| Some(r.connector.clone()))),
                ]
            }
            // None exist: no connector here makes materialized views.
            "materialized_views" => {
                self.schema.fields().iter().map(|f| datafusion::arrow::array::new_empty_array(f.data_type())).collect()
            }
            "table_comments" => {
                let rows = s.table_comments(catalog);
                vec![
                    strings(rows.iter().map(|r| Some(r.catalog.clone()))),
                    strings(rows.iter().map(|r| Some(r.schema.clone()))),
                    strings(rows.iter().map(|r| Some(r.table.clone()))),
                    strings(rows.iter().map(|r| r.comment.clone())),
                ]
            }
            "schema_properties" | "table_properties" => {
                let rows = match self.name {
                    "schema_properties" => s.schema_properties(catalog),
                    _ => s.table_properties(catalog),
                };
                vec![
                    strings(rows.iter().map(|r| Some(r.catalog.clone()))),
                    strings(rows.iter().map(|r| Some(r.name.clone()))),
                    strings(rows.iter().map(|r| Some(r.default_value.clone()))),
                    strings(rows.iter().map(|r| Some(r.type_name.clone()))),
                    strings(rows.iter().map(|r| Some(r.description.clone()))),
                ]
            }
            "nodes" => {
                let rows = s.nodes();
                vec![
                    strings(rows.iter().map(|r| Some(r.node_id.clone()))),
                    strings(rows.iter().map(|r| Some(r.http_uri.clone()))),
                    strings(rows.iter().map(|_| Some(env!("CARGO_PKG_VERSION").to_string()))),
                    Arc::new(BooleanArray::from_iter(rows.iter().map(|r| Some(r.coordinator)))),
                    strings(rows.iter().map(|r| Some(r.state.clone()))),
                ]
            }
            "queries" => {
                let rows = s.queries();
                vec![
                    strings(rows.iter().map(|r| Some(r.query_id.clone()))),
                    strings(rows.iter().map(|r| Some(r.state.clone()))),
                    strings(rows.iter().map(|r| Some(r.user.clone()))),
                    strings(rows.iter().map(|_| None)),
                    strings(rows.iter().map(|r| Some(r.query.clone()))),
                    timestamps(rows.iter().map(|r| Some(r.created_ms))),
                    timestamps(rows.iter().map(|r| r.ended_ms)),
                    strings(rows.iter().map(|r| r.error_type.clone())),
                    strings(rows.iter().map(|r| r.error_code.clone())),
                ]
            }
            _ => {
                let rows = s.tasks();
                vec![
                    strings(rows.iter().map(|r| Some(r.node_id.clone()))),
                    strings(rows.iter().map(|r| Some(r.task_id.clone()))),
                    strings(rows.iter().map(|r| Some(r.stage_id.clone()))),
                    strings(rows.iter().map(|r| Some(r.query_id.clone()))),
                    strings(rows.iter().map(|r| Some(r.state.clone()))),
                    Arc::new(Int64Array::from_iter(rows.iter().map(|r| Some(r.output_rows)))),
                    Arc::new(Int64Array::from_iter(rows.iter().map(|r| Some(r.output_bytes)))),
                ]
            }
        };
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}

#[async_trait]
impl TableProvider for SystemTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    /// Every filter is applied again above the scan; `catalog_name = '...'` also
    /// narrows what the scan lists.
    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> Result<Vec<TableProviderFilterPushDown>> {
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let catalog = filters.iter().find_map(catalog_of);
        let batch = self.batch(catalog.as_deref())?;
        let source = MemorySourceConfig::try_new(&[vec![batch]], self.schema.clone(), projection.cloned())?;
        Ok(datafusion::datasource::source::DataSourceExec::from_data_source(source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::prelude::SessionContext;

    #[derive(Debug)]
    struct Fixed;

    impl SystemState for Fixed {
        fn catalogs(&self) -> Vec<CatalogRow> {
            vec![CatalogRow { name: "tpch".into(), connector: "tpch".into() }]
        }
        fn table_comments(&self, catalog: Option<&str>) -> Vec<CommentRow> {
            let all = [("files", "s", "t", Some("rows")), ("tpch", "tiny", "nation", None)];
            all.iter()
                .filter(|r| catalog.is_none_or(|c| c == r.0))
                .map(|r| CommentRow {
                    catalog: r.0.into(),
                    schema: r.1.into(),
                    table: r.2.into(),
                    comment: r.3.map(String::from),
                })
                .collect()
        }
        fn table_properties(&self, _: Option<&str>) -> Vec<PropertyRow> {
            Vec::new()
        }
        fn schema_properties(&self, _: Option<&str>) -> Vec<PropertyRow> {
            Vec::new()
        }
        fn nodes(&self) -> Vec<NodeRow> {
            vec![NodeRow {
                node_id: "c".into(),
                http_uri: "http://c".into(),
                coordinator: true,
                state: "active".into(),
            }]
        }
        fn queries(&self) -> Vec<QueryRow> {
            Vec::new()
        }
        fn tasks(&self) -> Vec<TaskRow> {
            Vec::new()
        }
    }

    async fn rows(ctx: &SessionContext, sql: &str) -> String {
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        datafusion::arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string()
    }

    #[tokio::test]
    async fn tables_are_read_with_their_filters() {
        let ctx = SessionContext::new();
        ctx.register_catalog(SYSTEM_CATALOG, Arc::new(SystemCatalog::new(Arc::new(Fixed))));
        let text =
            rows(&ctx, "SELECT table_name, comment FROM system.metadata.table_comments WHERE catalog_name = 'files'")
                .await;
        assert!(text.contains("| t          | rows    |") && !text.contains("nation"), "{text}");
        let text = rows(&ctx, "SELECT count(*) AS n FROM system.metadata.table_comments WHERE comment IS NULL").await;
        assert!(text.contains("| 1 |"), "{text}");
        let text = rows(&ctx, "SELECT count(*) AS n FROM system.metadata.materialized_views").await;
        assert!(text.contains("| 0 |"), "{text}");
        let text = rows(&ctx, "SELECT node_id, coordinator, state FROM system.runtime.nodes").await;
        assert!(text.contains("| c       | true        | active |"), "{text}");
    }
}
