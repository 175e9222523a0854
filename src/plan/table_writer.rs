//! `TableWriterExec`: one writer per partition of its input, each writing its rows as
//! new files into a directory of its own under the write's staging location, and
//! answering one row: how many rows it wrote and that directory (Trino's table
//! writer "fragment"). The coordinator's commit (`coordinator::write`) publishes
//! exactly the directories the successful writers reported, so the files of a failed
//! or retried attempt never reach the table.
//!
//! The writers are DataFusion's file sinks (Parquet, CSV, JSON, Hive-style partition
//! directories included), so files look as DataFusion's own `INSERT` writes them. The
//! fragmenter sees an ordinary node: a stage of writers runs on workers, spread over
//! tasks as any stage is.

use datafusion::common::{exec_datafusion_err, exec_err, not_impl_err};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use crate::plan_node::plan_node;
use datafusion::arrow::array::{RecordBatch, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::config::{ConfigFileType, TableOptions};
use datafusion::common::file_options::csv_writer::CsvWriterOptions;
use datafusion::common::file_options::json_writer::JsonWriterOptions;
use datafusion::datasource::file_format::csv::CsvSink;
use datafusion::datasource::file_format::json::JsonSink;
use datafusion::datasource::file_format::parquet::ParquetSink;
use datafusion::datasource::listing::ListingTableUrl;
use datafusion::datasource::physical_plan::{FileOutputMode, FileSinkConfig};
use datafusion::datasource::sink::DataSink;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning, PlanProperties,
    SendableRecordBatchStream,
};
use serde::{Deserialize, Serialize};

/// Where and how a write puts its files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WriteTarget {
    /// The staging location, ending in `/`; each writer makes a directory below it.
    pub staging: String,
    /// `PARQUET`, `CSV` or `JSON`.
    pub format: String,
    /// The table's format options (`CREATE EXTERNAL TABLE ... OPTIONS`).
    pub options: HashMap<String, String>,
    /// Hive-style partition columns, the last columns of the input, in order.
    pub partition_columns: Vec<String>,
    /// Columns declared `NOT NULL`: a null there fails the write (memory tables).
    #[serde(default)]
    pub not_null: Vec<String>,
    /// Each column's field id, written into the Parquet schema (Iceberg tables,
    /// whose readers match columns by id); none for other tables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub field_ids: Vec<i32>,
}

/// The format of a write into a `memory` table: its writers keep their rows in
/// their worker's memory (`connector::memory::fragments`) and report
/// `STAGING` `ID@WORKER_URL`.
pub const MEMORY_FORMAT: &str = "MEMORY";

impl WriteTarget {
    /// Whether its writers must run on workers (where the rows of memory tables live).
    pub fn needs_worker(&self) -> bool {
        self.format == MEMORY_FORMAT
    }

    pub fn file_extension(&self) -> String {
        self.format.to_lowercase()
    }
}

/// The schema of what writers answer: rows written, and the directory they went to.
pub fn fragment_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("rows", DataType::UInt64, false),
        Field::new("fragment", DataType::Utf8, false),
    ]))
}

#[derive(Debug)]
pub struct TableWriterExec {
    input: Arc<dyn ExecutionPlan>,
    target: WriteTarget,
    properties: Arc<PlanProperties>,
}

impl TableWriterExec {
    pub fn new(input: Arc<dyn ExecutionPlan>, target: WriteTarget) -> Self {
        let partitions = input.output_partitioning().partition_count();
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(fragment_schema()),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        TableWriterExec { input, target, properties }
    }

    pub fn target(&self) -> &WriteTarget {
        &self.target
    }

    /// The schema files are written with: the input's, with the target's field ids.
    fn written_schema(&self) -> Result<SchemaRef> {
        let schema = self.input.schema();
        if self.target.field_ids.is_empty() {
            return Ok(schema);
        }
        if self.target.field_ids.len() != schema.fields().len() {
            return exec_err!("{} field ids for {} columns", self.target.field_ids.len(), schema.fields().len());
        }
        let key = datafusion::parquet::arrow::PARQUET_FIELD_ID_META_KEY;
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .zip(&self.target.field_ids)
            .map(|(f, id)| f.as_ref().clone().with_metadata(HashMap::from([(key.to_string(), id.to_string())])))
            .collect();
        Ok(Arc::new(Schema::new(fields)))
    }

    /// A sink writing into `dir` with the target's format and options.
    fn sink(&self, dir: &str, ctx: &TaskContext) -> Result<Arc<dyn DataSink>> {
        let schema = self.written_schema()?;
        let table_partition_cols = self
            .target
            .partition_columns
            .iter()
            .map(|c| Ok((c.clone(), schema.field_with_name(c)?.data_type().clone())))
            .collect::<Result<Vec<_>>>()?;
        let url = ListingTableUrl::parse(dir)?;
        let config = FileSinkConfig {
            original_url: dir.to_string(),
            object_store_url: url.object_store(),
            file_group: Default::default(),
            table_paths: vec![url],
            output_schema: schema.clone(),
            table_partition_cols,
            insert_op: InsertOp::Append,
            keep_partition_by_columns: false,
            file_extension: self.target.file_extension(),
            file_output_mode: FileOutputMode::Directory,
        };
        let mut options = TableOptions::default_from_session_config(ctx.session_config().options());
        let kind = match self.target.format.as_str() {
            "PARQUET" => ConfigFileType::PARQUET,
            "CSV" => ConfigFileType::CSV,
            "JSON" => ConfigFileType::JSON,
            other => return not_impl_err!("writing {other} files"),
        };
        options.set_config_format(kind.clone());
        options.alter_with_string_hash_map(&self.target.options)?;
        Ok(match kind {
            ConfigFileType::PARQUET => Arc::new(ParquetSink::new(config, options.parquet)),
            ConfigFileType::CSV => Arc::new(CsvSink::new(config, CsvWriterOptions::try_from(&options.csv)?)),
            ConfigFileType::JSON => Arc::new(JsonSink::new(config, JsonWriterOptions::try_from(&options.json)?)),
        })
    }
}

impl TableWriterExec {
    /// A memory table's writer: one fragment per partition, held by this worker.
    fn execute_into_memory(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        use crate::connector::memory::fragments::MemoryFragments;
        let held = context
            .session_config()
            .get_extension::<MemoryFragments>()
            .ok_or_else(|| exec_datafusion_err!("memory tables are written on workers only"))?;
        let id = format!("w{partition}-{}", crate::util::random_suffix(16).to_lowercase());
        let staging = self.target.staging.clone();
        let input = refusing_nulls(self.input.execute(partition, context)?, &self.target.not_null)?;
        let stream = futures::stream::once(async move {
            let rows = held.write(&staging, &id, input).await?;
            let address = format!("{staging}{id}@{}", held.url());
            Ok(RecordBatch::try_new(
                fragment_schema(),
                vec![Arc::new(UInt64Array::from(vec![rows])), Arc::new(StringArray::from(vec![address]))],
            )?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(fragment_schema(), stream)))
    }
}

/// `input`'s batches under `schema`, the same columns with other metadata.
fn with_schema(input: SendableRecordBatchStream, schema: SchemaRef) -> SendableRecordBatchStream {
    use futures::StreamExt;
    if input.schema() == schema {
        return input;
    }
    let out = schema.clone();
    let stream = input.map(move |batch| Ok(RecordBatch::try_new(out.clone(), batch?.columns().to_vec())?));
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

/// `input`, failing at the first null in one of the `not_null` columns (Trino's
/// message).
fn refusing_nulls(input: SendableRecordBatchStream, not_null: &[String]) -> Result<SendableRecordBatchStream> {
    use futures::StreamExt;
    let schema = input.schema();
    let checked: Vec<(usize, String)> =
        not_null.iter().map(|c| Ok((schema.index_of(c)?, c.clone()))).collect::<Result<_>>()?;
    if checked.is_empty() {
        return Ok(input);
    }
    let stream = input.map(move |batch| {
        let batch = batch?;
        match checked.iter().find(|(i, _)| batch.column(*i).null_count() > 0) {
            Some((_, name)) => {
                exec_err!("NULL value not allowed for NOT NULL column: {name}")
            }
            None => Ok(batch),
        }
    });
    Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
}

impl DisplayAs for TableWriterExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "TableWriterExec: format={}, staging={}", self.target.format, self.target.staging)?;
        if !self.target.partition_columns.is_empty() {
            write!(f, ", partitioned_by=[{}]", self.target.partition_columns.join(", "))?;
        }
        Ok(())
    }
}

impl ExecutionPlan for TableWriterExec {
    plan_node!(
        unary "TableWriterExec",
        input: input,
        properties: own,
        rebuild: |this, child| TableWriterExec::new(child, this.target.clone())
    );

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if self.target.needs_worker() {
            return self.execute_into_memory(partition, context);
        }
        // A directory per execution: a retried attempt writes beside, never over, the
        // files of the one before, and only the reported directory is published.
        let dir = format!("{}w{partition}-{}/", self.target.staging, crate::util::random_suffix(10).to_lowercase());
        let sink = self.sink(&dir, &context)?;
        let input = with_schema(self.input.execute(partition, context.clone())?, self.written_schema()?);
        let stream = futures::stream::once(async move {
            let rows = sink.write_all(input, &context).await?;
            let batch = RecordBatch::try_new(
                fragment_schema(),
                vec![Arc::new(UInt64Array::from(vec![rows])), Arc::new(StringArray::from(vec![dir]))],
            )?;
            Ok(batch)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(fragment_schema(), stream)))
    }
}
