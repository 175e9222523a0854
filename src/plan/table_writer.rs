//! `TableWriterExec`: one writer per partition of its input, each writing its rows as
//! new files into a directory of its own under the write's staging location, and
//! answering one row: how many rows it wrote and that directory (Trino's table
//! writer "fragment"). The connector's publish (`connector::writes`) takes
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
use std::sync::atomic::{AtomicU64, Ordering};

use crate::connector::writes::{RowOperation, OPERATION_COLUMN};

pub use crate::connector::writes::WriteTarget;

/// The schema of what writers answer: rows written, the directory (or memory
/// fragment) they went to, and the rows the statement changed through them.
pub fn fragment_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("rows", DataType::UInt64, false),
        Field::new("fragment", DataType::Utf8, false),
        Field::new("changed", DataType::UInt64, false),
    ]))
}

/// One writer's answer.
fn fragment_batch(rows: u64, address: String, changed: u64) -> Result<RecordBatch> {
    Ok(RecordBatch::try_new(
        fragment_schema(),
        vec![
            Arc::new(UInt64Array::from(vec![rows])),
            Arc::new(StringArray::from(vec![address])),
            Arc::new(UInt64Array::from(vec![changed])),
        ],
    )?)
}

/// The rows of a row-level change's input a writer writes: those its operation
/// column keeps, without that column; the changed rows are counted in `changed`.
fn applying_operations(input: SendableRecordBatchStream, changed: Arc<AtomicU64>) -> Result<SendableRecordBatchStream> {
    use datafusion::arrow::array::{BooleanArray, Int8Array};
    use datafusion::arrow::compute::filter_record_batch;
    use futures::StreamExt;
    let schema = input.schema();
    let width = schema.fields().len();
    if width == 0 || schema.field(width - 1).name() != OPERATION_COLUMN {
        return exec_err!("a row-level change's input lacks its operation column");
    }
    let written = Arc::new(schema.project(&(0..width - 1).collect::<Vec<_>>())?);
    let out = written.clone();
    let stream = input.map(move |batch| {
        let batch = batch?;
        let Some(ops) = batch.column(width - 1).as_any().downcast_ref::<Int8Array>() else {
            return exec_err!("the operation column is not Int8");
        };
        let keep = RowOperation::Keep as i8;
        let deleted = RowOperation::Deleted as i8;
        let counted = ops.iter().filter(|op| op.is_some_and(|op| op != keep)).count();
        changed.fetch_add(counted as u64, Ordering::Relaxed);
        let mask: BooleanArray = ops.iter().map(|op| Some(op.is_some_and(|op| op != deleted))).collect();
        let batch = batch.project(&(0..width - 1).collect::<Vec<_>>())?;
        Ok(filter_record_batch(&batch, &mask)?.with_schema(out.clone())?)
    });
    Ok(Box::pin(RecordBatchStreamAdapter::new(written, stream)))
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

    /// The rows a writer writes (a row-level change's without its operation
    /// column), and the count of the changed ones it saw.
    fn rows(&self, partition: usize, context: Arc<TaskContext>) -> Result<(SendableRecordBatchStream, Arc<AtomicU64>)> {
        let input = self.input.execute(partition, context)?;
        let changed = Arc::new(AtomicU64::new(0));
        match self.target.operations {
            true => Ok((applying_operations(input, changed.clone())?, changed)),
            false => Ok((input, changed)),
        }
    }

    /// The columns written: the input's, but a row-level change's operation column.
    fn written_columns(&self) -> SchemaRef {
        let schema = self.input.schema();
        match self.target.operations {
            true => Arc::new(Schema::new(schema.fields()[..schema.fields().len().saturating_sub(1)].to_vec())),
            false => schema,
        }
    }

    /// The schema files are written with: the written columns, with the target's
    /// field ids.
    fn written_schema(&self) -> Result<SchemaRef> {
        let schema = self.written_columns();
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
        let (rows, changed) = self.rows(partition, context)?;
        let operations = self.target.operations;
        let input = refusing_nulls(rows, &self.target.not_null)?;
        let stream = futures::stream::once(async move {
            let rows = held.write(&staging, &id, input).await?;
            let address = format!("{staging}{id}@{}", held.url());
            let changed = if operations { changed.load(Ordering::Relaxed) } else { rows };
            fragment_batch(rows, address, changed)
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
        let (rows, changed) = self.rows(partition, context.clone())?;
        let operations = self.target.operations;
        let input = with_schema(refusing_nulls(rows, &self.target.not_null)?, self.written_schema()?);
        let stream = futures::stream::once(async move {
            let rows = sink.write_all(input, &context).await?;
            let changed = if operations { changed.load(Ordering::Relaxed) } else { rows };
            fragment_batch(rows, dir, changed)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(fragment_schema(), stream)))
    }
}
