//! `information_schema` of every catalog, in Trino's shape: `schemata`, `tables`,
//! `columns` (with 1-based `ordinal_position`, `comment`, and Trino type names in
//! `data_type`), `views` (with `view_owner` and `view_definition`). Comments and
//! view definitions come from the catalog's metastore, when it has one. BI tools and Trino's SQLAlchemy dialect reflect tables by
//! querying these; DataFusion's own information schema has Arrow type names and other
//! columns. `WithInformationSchema` wraps a connector's catalog and adds the schema,
//! built on demand from that catalog's schemas and tables as small in-memory tables,
//! read on the coordinator.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{CatalogProvider, MemTable, SchemaProvider, TableProvider};
use datafusion::error::Result;
use datafusion::logical_expr::TableType;

use super::metastore::Metastore;
use super::view::as_view;
use crate::format::field_type;

pub const NAME: &str = "information_schema";
const TABLES: [&str; 4] = ["columns", "schemata", "tables", "views"];

/// A connector's catalog with Trino's `information_schema` added.
#[derive(Debug)]
pub struct WithInformationSchema {
    name: String,
    inner: Arc<dyn CatalogProvider>,
    metastore: Option<Arc<Metastore>>,
}

impl WithInformationSchema {
    pub fn new(name: &str, inner: Arc<dyn CatalogProvider>) -> Self {
        WithInformationSchema { name: name.to_string(), inner, metastore: None }
    }

    /// Comments and view definitions from `metastore`.
    pub fn with_metastore(mut self, metastore: Option<Arc<Metastore>>) -> Self {
        self.metastore = metastore;
        self
    }
}

impl CatalogProvider for WithInformationSchema {
    fn schema_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.inner.schema_names().into_iter().filter(|n| n != NAME).collect();
        names.push(NAME.to_string());
        names
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if name == NAME {
            return Some(Arc::new(TrinoInformationSchema {
                catalog: self.name.clone(),
                inner: self.inner.clone(),
                metastore: self.metastore.clone(),
            }));
        }
        self.inner.schema(name)
    }

    fn register_schema(&self, name: &str, schema: Arc<dyn SchemaProvider>) -> Result<Option<Arc<dyn SchemaProvider>>> {
        self.inner.register_schema(name, schema)
    }

    fn deregister_schema(&self, name: &str, cascade: bool) -> Result<Option<Arc<dyn SchemaProvider>>> {
        self.inner.deregister_schema(name, cascade)
    }
}

/// A listed table: schema, name, columns, and whether it is a view.
struct Listed {
    schema: String,
    table: String,
    layout: SchemaRef,
    /// A view's definition (None for a table): its query.
    view: Option<String>,
}

#[derive(Debug)]
pub struct TrinoInformationSchema {
    catalog: String,
    inner: Arc<dyn CatalogProvider>,
    metastore: Option<Arc<Metastore>>,
}

impl TrinoInformationSchema {
    fn schemas(&self) -> Vec<String> {
        let mut v: Vec<String> = self.inner.schema_names().into_iter().filter(|n| n != NAME).collect();
        v.sort();
        v.push(NAME.to_string());
        v
    }

    /// Every table of the catalog, this schema's own included.
    async fn tables(&self) -> Result<Vec<Listed>> {
        let mut out = Vec::new();
        for s in self.schemas().into_iter().filter(|s| s != NAME) {
            let Some(provider) = self.inner.schema(&s) else { continue };
            let mut names = provider.table_names();
            names.sort();
            for t in names {
                if let Some(table) = provider.table(&t).await? {
                    let view = (table.table_type() == TableType::View).then(|| {
                        let kept = self.metastore.as_ref().and_then(|m| m.view(&s, &t)).map(|v| v.query);
                        let planned = || as_view(table.as_ref()).and_then(|v| v.definition().cloned());
                        kept.or_else(planned).unwrap_or_default()
                    });
                    out.push(Listed { schema: s.clone(), table: t, layout: table.schema(), view });
                }
            }
        }
        for t in TABLES {
            out.push(Listed { schema: NAME.to_string(), table: t.to_string(), layout: self.layout(t), view: None });
        }
        Ok(out)
    }

    fn layout(&self, table: &str) -> SchemaRef {
        let s = |n: &str| Field::new(n, DataType::Utf8, true);
        let fields = match table {
            "schemata" => vec![s("catalog_name"), s("schema_name")],
            "tables" => vec![s("table_catalog"), s("table_schema"), s("table_name"), s("table_type")],
            "views" => {
                vec![s("table_catalog"), s("table_schema"), s("table_name"), s("view_owner"), s("view_definition")]
            }
            _ => vec![
                s("table_catalog"),
                s("table_schema"),
                s("table_name"),
                s("column_name"),
                Field::new("ordinal_position", DataType::Int64, true),
                s("column_default"),
                s("is_nullable"),
                s("data_type"),
                s("comment"),
                s("extra_info"),
            ],
        };
        Arc::new(Schema::new(fields))
    }

    async fn batch(&self, table: &str) -> Result<RecordBatch> {
        let schema = self.layout(table);
        let text = |v: Vec<Option<String>>| Arc::new(StringArray::from(v)) as ArrayRef;
        let cat = |n: usize| text(vec![Some(self.catalog.clone()); n]);
        let columns: Vec<ArrayRef> = match table {
            "schemata" => {
                let names = self.schemas();
                vec![cat(names.len()), text(names.into_iter().map(Some).collect())]
            }
            "tables" => {
                let t: Vec<Listed> = self.tables().await?;
                let kind = |t: &Listed| Some(if t.view.is_some() { "VIEW" } else { "BASE TABLE" }.to_string());
                vec![
                    cat(t.len()),
                    text(t.iter().map(|x| Some(x.schema.clone())).collect()),
                    text(t.iter().map(|x| Some(x.table.clone())).collect()),
                    text(t.iter().map(kind).collect()),
                ]
            }
            "views" => {
                let t: Vec<Listed> = self.tables().await?.into_iter().filter(|t| t.view.is_some()).collect();
                let owner =
                    |x: &Listed| self.metastore.as_ref().and_then(|m| m.view(&x.schema, &x.table)).map(|v| v.owner);
                vec![
                    cat(t.len()),
                    text(t.iter().map(|x| Some(x.schema.clone())).collect()),
                    text(t.iter().map(|x| Some(x.table.clone())).collect()),
                    text(t.iter().map(owner).collect()),
                    text(t.iter().map(|x| x.view.clone()).collect()),
                ]
            }
            _ => {
                // One row per column: schema, table, its field, position, comment.
                let mut rows: Vec<(String, String, Field, i64, Option<String>)> = Vec::new();
                for Listed { schema: schema_name, table: table_name, layout, .. } in self.tables().await? {
                    let comments = self
                        .metastore
                        .as_ref()
                        .map(|m| m.column_comments(&schema_name, &table_name))
                        .unwrap_or_default();
                    for (i, f) in layout.fields().iter().enumerate() {
                        let comment = comments.get(f.name()).cloned();
                        rows.push((schema_name.clone(), table_name.clone(), f.as_ref().clone(), i as i64 + 1, comment));
                    }
                }
                let n = rows.len();
                vec![
                    cat(n),
                    text(rows.iter().map(|r| Some(r.0.clone())).collect()),
                    text(rows.iter().map(|r| Some(r.1.clone())).collect()),
                    text(rows.iter().map(|r| Some(r.2.name().clone())).collect()),
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
                    text(vec![None; n]),
                    text(rows.iter().map(|r| Some(if r.2.is_nullable() { "YES" } else { "NO" }.to_string())).collect()),
                    text(rows.iter().map(|r| Some(field_type(&r.2))).collect()),
                    text(rows.iter().map(|r| r.4.clone()).collect()),
                    text(vec![None; n]),
                ]
            }
        };
        Ok(RecordBatch::try_new(schema, columns)?)
    }
}

#[async_trait]
impl SchemaProvider for TrinoInformationSchema {
    fn table_names(&self) -> Vec<String> {
        TABLES.iter().map(|t| t.to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        if !TABLES.contains(&name) {
            return Ok(None);
        }
        let batch = self.batch(name).await?;
        Ok(Some(Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch]])?)))
    }

    fn table_exist(&self, name: &str) -> bool {
        TABLES.contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connector::tpch::{TpchCatalog, TpchSpelling, LISTED_SCHEMAS};

    fn tpch() -> TrinoInformationSchema {
        tpch_spelled(TpchSpelling::default())
    }

    fn tpch_spelled(spelling: TpchSpelling) -> TrinoInformationSchema {
        TrinoInformationSchema { catalog: "tpch".into(), inner: Arc::new(TpchCatalog::new(spelling)), metastore: None }
    }

    /// Column `column` of lineitem: its position and type.
    async fn lineitem_column(schema: TrinoInformationSchema, column: &str) -> (i64, String) {
        let b = schema.batch("columns").await.unwrap();
        let col = |name: &str| b.column_by_name(name).unwrap().as_any().downcast_ref::<StringArray>().unwrap().clone();
        let (tables, columns, types) = (col("table_name"), col("column_name"), col("data_type"));
        let pos = b.column_by_name("ordinal_position").unwrap().as_any().downcast_ref::<Int64Array>().unwrap();
        let i = (0..b.num_rows()).find(|&i| tables.value(i) == "lineitem" && columns.value(i) == column).unwrap();
        (pos.value(i), types.value(i).to_string())
    }

    /// Trino's tpch connector by default: plain names, money as double; with
    /// STANDARD naming and DECIMAL mapping, the prefixes and decimal(12,2).
    #[tokio::test]
    async fn columns_use_trino_names_and_positions() {
        assert_eq!(lineitem_column(tpch(), "orderkey").await, (1, "bigint".into()));
        assert_eq!(lineitem_column(tpch(), "linenumber").await, (4, "integer".into()));
        assert_eq!(lineitem_column(tpch(), "quantity").await, (5, "double".into()));
        assert_eq!(lineitem_column(tpch(), "shipdate").await, (11, "date".into()));
        let benchmark = || tpch_spelled(TpchSpelling::BENCHMARK);
        assert_eq!(lineitem_column(benchmark(), "l_orderkey").await, (1, "bigint".into()));
        assert_eq!(lineitem_column(benchmark(), "l_quantity").await, (5, "decimal(12,2)".into()));
    }

    #[tokio::test]
    async fn tables_list_every_table_per_schema() {
        let b = tpch().batch("tables").await.unwrap();
        assert_eq!(b.num_rows(), LISTED_SCHEMAS.len() * 8 + TABLES.len());
        let schemata = tpch().batch("schemata").await.unwrap();
        assert_eq!(schemata.num_rows(), LISTED_SCHEMAS.len() + 1);
    }

    #[tokio::test]
    async fn a_memory_catalog_lists_its_tables_and_views() {
        use datafusion::catalog::{MemoryCatalogProvider, MemorySchemaProvider};
        use datafusion::prelude::SessionContext;
        let ctx = SessionContext::new();
        let catalog = Arc::new(MemoryCatalogProvider::new());
        catalog.register_schema("default", Arc::new(MemorySchemaProvider::new())).unwrap();
        ctx.register_catalog("files", Arc::new(WithInformationSchema::new("files", catalog)));
        ctx.sql("CREATE TABLE files.default.t AS VALUES (1)").await.unwrap().collect().await.unwrap();
        ctx.sql("CREATE VIEW files.default.v AS SELECT * FROM files.default.t").await.unwrap().collect().await.unwrap();
        let batches = ctx
            .sql("SELECT table_name, table_type FROM files.information_schema.tables WHERE table_schema = 'default'")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = datafusion::arrow::util::pretty::pretty_format_batches(&batches).unwrap().to_string();
        assert!(text.contains("| t          | BASE TABLE |"), "{text}");
        assert!(text.contains("| v          | VIEW       |"), "{text}");
        let names = ctx.catalog("files").unwrap().schema_names();
        assert_eq!(names, vec!["default".to_string(), NAME.to_string()]);
    }
}
