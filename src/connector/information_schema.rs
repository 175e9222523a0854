//! `information_schema` of the `tpch` catalog in Trino's shape: `schemata`, `tables`,
//! `columns` (with 1-based `ordinal_position`, `comment`, and Trino type names in
//! `data_type`), `views`. BI tools and Trino's SQLAlchemy dialect reflect tables by
//! querying these; DataFusion's own information schema has Arrow type names and other
//! columns. Built on demand as small in-memory tables, read on the coordinator.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::{MemTable, SchemaProvider, TableProvider};
use datafusion::error::Result;

use super::tpch::{TpchTableKind, LISTED_SCHEMAS};
use crate::format::trino_type;

pub const NAME: &str = "information_schema";
const TABLES: [&str; 4] = ["columns", "schemata", "tables", "views"];

#[derive(Debug)]
pub struct TrinoInformationSchema {
    catalog: String,
}

impl TrinoInformationSchema {
    pub fn new(catalog: &str) -> Self {
        TrinoInformationSchema { catalog: catalog.to_string() }
    }

    fn schemas(&self) -> Vec<String> {
        let mut v: Vec<String> = LISTED_SCHEMAS.iter().map(|s| s.to_string()).collect();
        v.push(NAME.to_string());
        v
    }

    /// Every (schema, table, table schema), this schema's own tables included.
    fn tables(&self) -> Vec<(String, String, SchemaRef)> {
        let mut out = Vec::new();
        for s in LISTED_SCHEMAS {
            for t in TpchTableKind::ALL {
                out.push((s.to_string(), t.name().to_string(), t.schema()));
            }
        }
        for t in TABLES {
            out.push((NAME.to_string(), t.to_string(), self.layout(t)));
        }
        out
    }

    fn layout(&self, table: &str) -> SchemaRef {
        let s = |n: &str| Field::new(n, DataType::Utf8, true);
        let fields = match table {
            "schemata" => vec![s("catalog_name"), s("schema_name")],
            "tables" | "views" => vec![s("table_catalog"), s("table_schema"), s("table_name"), s("table_type")],
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

    fn batch(&self, table: &str) -> Result<RecordBatch> {
        let schema = self.layout(table);
        let text = |v: Vec<Option<String>>| Arc::new(StringArray::from(v)) as ArrayRef;
        let cat = |n: usize| text(vec![Some(self.catalog.clone()); n]);
        let columns: Vec<ArrayRef> = match table {
            "schemata" => {
                let names = self.schemas();
                vec![cat(names.len()), text(names.into_iter().map(Some).collect())]
            }
            "tables" => {
                let t = self.tables();
                vec![
                    cat(t.len()),
                    text(t.iter().map(|x| Some(x.0.clone())).collect()),
                    text(t.iter().map(|x| Some(x.1.clone())).collect()),
                    text(vec![Some("BASE TABLE".to_string()); t.len()]),
                ]
            }
            "views" => vec![cat(0), text(vec![]), text(vec![]), text(vec![])],
            _ => {
                let mut rows: Vec<(String, String, String, i64, bool, String)> = Vec::new();
                for (schema_name, table_name, layout) in self.tables() {
                    for (i, f) in layout.fields().iter().enumerate() {
                        rows.push((
                            schema_name.clone(),
                            table_name.clone(),
                            f.name().clone(),
                            i as i64 + 1,
                            f.is_nullable(),
                            trino_type(f.data_type()),
                        ));
                    }
                }
                let n = rows.len();
                vec![
                    cat(n),
                    text(rows.iter().map(|r| Some(r.0.clone())).collect()),
                    text(rows.iter().map(|r| Some(r.1.clone())).collect()),
                    text(rows.iter().map(|r| Some(r.2.clone())).collect()),
                    Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.3))),
                    text(vec![None; n]),
                    text(rows.iter().map(|r| Some(if r.4 { "YES" } else { "NO" }.to_string())).collect()),
                    text(rows.iter().map(|r| Some(r.5.clone())).collect()),
                    text(vec![None; n]),
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
        let batch = self.batch(name)?;
        Ok(Some(Arc::new(MemTable::try_new(batch.schema(), vec![vec![batch]])?)))
    }

    fn table_exist(&self, name: &str) -> bool {
        TABLES.contains(&name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_use_trino_names_and_positions() {
        let s = TrinoInformationSchema::new("tpch");
        let b = s.batch("columns").unwrap();
        let col = |name: &str| b.column_by_name(name).unwrap().as_any().downcast_ref::<StringArray>().unwrap().clone();
        let (tables, columns, types) = (col("table_name"), col("column_name"), col("data_type"));
        let idx =
            (0..b.num_rows()).find(|&i| tables.value(i) == "lineitem" && columns.value(i) == "l_quantity").unwrap();
        assert_eq!(types.value(idx), "decimal(15,2)");
        let pos = b.column_by_name("ordinal_position").unwrap().as_any().downcast_ref::<Int64Array>().unwrap();
        let first =
            (0..b.num_rows()).find(|&i| tables.value(i) == "lineitem" && columns.value(i) == "l_orderkey").unwrap();
        assert_eq!(pos.value(first), 1);
        assert_eq!(types.value(first), "bigint");
    }

    #[test]
    fn tables_list_every_tpch_table_per_schema() {
        let s = TrinoInformationSchema::new("tpch");
        let b = s.batch("tables").unwrap();
        assert_eq!(b.num_rows(), LISTED_SCHEMAS.len() * 8 + TABLES.len());
    }
}
