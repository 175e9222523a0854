//! Parquet columns matched to table columns by field id rather than by name, as
//! Iceberg requires: a column renamed after a file was written keeps its id, so the
//! old file's column under the old name is still the table's column; a column
//! dropped and added again under the same name has a new id, so old files have
//! none of it (nulls), not the dropped column's values.
//!
//! A table schema asks for it with `FIELD_ID_MAPPING` in its metadata and ids on
//! its fields. DataFusion's Parquet scan adapts each file with a
//! `PhysicalExprAdapterFactory`; the one here renames the table's columns to the
//! file's names for the same ids and leaves casts and missing columns to
//! DataFusion's default adapter. Scans get it where they are planned (the Iceberg
//! connector) and again where a worker decodes them (`codec`), since DataFusion's
//! plan encoding does not carry adapters.

use std::sync::Arc;

use datafusion::arrow::datatypes::{Field, FieldRef, Schema, SchemaRef};
use datafusion::common::tree_node::{Transformed, TransformedResult, TreeNode};
use datafusion::datasource::physical_plan::{FileScanConfig, FileScanConfigBuilder};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result;
use datafusion::parquet::arrow::PARQUET_FIELD_ID_META_KEY;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_adapter::{
    DefaultPhysicalExprAdapterFactory, PhysicalExprAdapter, PhysicalExprAdapterFactory,
};
use datafusion::physical_plan::ExecutionPlan;

/// Schema metadata that marks a table schema whose scans match file columns by id.
pub const FIELD_ID_MAPPING: &str = "flotilla.field-id-mapping";

/// The field id an Arrow field carries, if any.
pub fn field_id(field: &Field) -> Option<i32> {
    field.metadata().get(PARQUET_FIELD_ID_META_KEY).and_then(|v| v.parse().ok())
}

/// Whether scans of a table with this schema match columns by field id.
pub fn wants_field_ids(schema: &Schema) -> bool {
    schema.metadata().get(FIELD_ID_MAPPING).is_some_and(|v| v == "true")
}

/// Adapts each file of a scan by field id (see the module).
#[derive(Debug, Default)]
pub struct FieldIdAdapterFactory;

impl PhysicalExprAdapterFactory for FieldIdAdapterFactory {
    fn create(
        &self,
        logical_file_schema: SchemaRef,
        physical_file_schema: SchemaRef,
    ) -> Result<Arc<dyn PhysicalExprAdapter>> {
        let renamed = Arc::new(renamed_by_id(&logical_file_schema, &physical_file_schema));
        let inner = DefaultPhysicalExprAdapterFactory.create(renamed.clone(), physical_file_schema)?;
        Ok(Arc::new(FieldIdAdapter { renamed, inner }))
    }
}

#[derive(Debug)]
struct FieldIdAdapter {
    /// The logical file schema with each field under the file's name for its id.
    renamed: SchemaRef,
    inner: Arc<dyn PhysicalExprAdapter>,
}

impl PhysicalExprAdapter for FieldIdAdapter {
    fn rewrite(&self, expr: Arc<dyn PhysicalExpr>) -> Result<Arc<dyn PhysicalExpr>> {
        let renamed = expr
            .transform(|e| {
                let Some(column) = e.downcast_ref::<Column>() else { return Ok(Transformed::no(e)) };
                match self.renamed.fields().get(column.index()) {
                    Some(f) if f.name() != column.name() => {
                        Ok(Transformed::yes(Arc::new(Column::new(f.name(), column.index())) as Arc<dyn PhysicalExpr>))
                    }
                    _ => Ok(Transformed::no(e)),
                }
            })
            .data()?;
        self.inner.rewrite(renamed)
    }
}

/// `logical` with each field that has an id renamed to the name the file gives that
/// id; a field whose id the file lacks gets a name the file cannot have, so the
/// default adapter reads it as missing. A file without any ids (written before the
/// table was Iceberg's) is matched by name.
fn renamed_by_id(logical: &Schema, physical: &Schema) -> Schema {
    if !physical.fields().iter().any(|f| field_id(f).is_some()) {
        return logical.clone();
    }
    let fields: Vec<FieldRef> = logical
        .fields()
        .iter()
        .map(|f| {
            let Some(id) = field_id(f) else { return f.clone() };
            let name = match physical.fields().iter().find(|p| field_id(p) == Some(id)) {
                Some(p) => p.name().clone(),
                None => format!("\u{0}missing field {id}"),
            };
            Arc::new(f.as_ref().clone().with_name(name))
        })
        .collect();
    Schema::new_with_metadata(fields, logical.metadata().clone())
}

/// `plan` with the field-id adapter on every Parquet scan whose table asks for it
/// and has none: what a worker does to a decoded fragment.
pub fn attach(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let Some(exec) = node.downcast_ref::<DataSourceExec>() else { return Ok(Transformed::no(node)) };
        let Some(config) = exec.data_source().downcast_ref::<FileScanConfig>() else {
            return Ok(Transformed::no(node));
        };
        let table = config.file_source().table_schema().table_schema();
        if config.expr_adapter_factory.is_some() || !wants_field_ids(table) {
            return Ok(Transformed::no(node));
        }
        let adapted = FileScanConfigBuilder::from(config.clone())
            .with_expr_adapter(Some(Arc::new(FieldIdAdapterFactory)))
            .build();
        Ok(Transformed::yes(DataSourceExec::from_data_source(adapted) as Arc<dyn ExecutionPlan>))
    })
    .data()
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::DataType;
    use std::collections::HashMap;

    fn field(name: &str, id: i32, t: DataType) -> Field {
        Field::new(name, t, true).with_metadata(HashMap::from([(PARQUET_FIELD_ID_META_KEY.into(), id.to_string())]))
    }

    #[test]
    fn columns_are_renamed_to_the_file_names_of_their_ids() {
        let logical = Schema::new(vec![
            field("id", 1, DataType::Int64),
            field("label", 2, DataType::Utf8),
            field("name", 4, DataType::Utf8),
        ]);
        // The file was written before `name` (2) became `label` and a new `name` (4)
        // was added.
        let physical = Schema::new(vec![field("id", 1, DataType::Int32), field("name", 2, DataType::Utf8)]);
        let renamed = renamed_by_id(&logical, &physical);
        let names: Vec<&str> = renamed.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names[..2], ["id", "name"]);
        assert!(physical.field_with_name(names[2]).is_err(), "id 4 is missing from the file, not its `name`");
        assert_eq!(renamed.field(0).data_type(), &DataType::Int64, "types stay the table's, cast later");
    }

    #[test]
    fn files_without_ids_are_matched_by_name() {
        let logical = Schema::new(vec![field("a", 1, DataType::Int64)]);
        let physical = Schema::new(vec![Field::new("a", DataType::Int64, true)]);
        assert_eq!(renamed_by_id(&logical, &physical), logical);
    }
}
