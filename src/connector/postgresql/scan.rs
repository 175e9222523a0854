//! `PostgresScanExec`: SQL queries against PostgreSQL, one per partition, their rows
//! turned into Arrow batches as they arrive. A table is one partition (one task of
//! the leaf stage reads it), or, with a split column, one partition per range of that
//! integer column, spread over tasks like any splits. It travels to workers as its
//! SQL, column kinds and schema (a worker connects with its own copy of the catalog's
//! settings).

use datafusion::common::{exec_datafusion_err, internal_datafusion_err, internal_err};
use std::fmt;
use std::sync::Arc;

use base64::Engine;
use datafusion::arrow::array::{
    ArrayBuilder, ArrayRef, BooleanBuilder, Date32Builder, Decimal128Builder, Float32Builder, Float64Builder,
    Int16Builder, Int32Builder, Int64Builder, RecordBatch, RecordBatchOptions, StringBuilder,
    TimestampMicrosecondBuilder,
};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
};
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};
use tokio_postgres::Row;

use super::{ColumnKind, Database};
use crate::plan_node::plan_node;
use crate::util::{schema_from_bytes, schema_to_bytes};

#[derive(Debug)]
pub struct PostgresScanExec {
    db: Arc<Database>,
    /// One statement per partition.
    sqls: Vec<String>,
    schema: SchemaRef,
    kinds: Vec<ColumnKind>,
    properties: Arc<PlanProperties>,
}

#[derive(Serialize, Deserialize)]
struct ScanProto {
    sqls: Vec<String>,
    kinds: Vec<ColumnKind>,
    /// Arrow IPC stream holding only the schema, base64.
    schema: String,
}

impl PostgresScanExec {
    pub(super) fn new(db: Arc<Database>, sqls: Vec<String>, schema: SchemaRef, kinds: Vec<ColumnKind>) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(sqls.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        PostgresScanExec { db, sqls, schema, kinds, properties }
    }

    pub fn catalog(&self) -> &str {
        &self.db.catalog
    }

    pub(super) fn encode(&self) -> Result<Vec<u8>> {
        let proto = ScanProto {
            sqls: self.sqls.clone(),
            kinds: self.kinds.clone(),
            schema: base64::engine::general_purpose::STANDARD.encode(schema_to_bytes(&self.schema)?),
        };
        serde_json::to_vec(&proto).map_err(|e| DataFusionError::External(Box::new(e)))
    }

    pub(super) fn decode(bytes: &[u8], db: Arc<Database>) -> Result<Self> {
        let p: ScanProto =
            serde_json::from_slice(bytes).map_err(|e| internal_datafusion_err!("bad PostgreSQL scan: {e}"))?;
        let schema = base64::engine::general_purpose::STANDARD
            .decode(p.schema)
            .map_err(|e| internal_datafusion_err!("bad PostgreSQL scan schema: {e}"))?;
        if p.sqls.is_empty() {
            return internal_err!("a PostgreSQL scan without SQL");
        }
        Ok(PostgresScanExec::new(db, p.sqls, schema_from_bytes(&schema)?, p.kinds))
    }
}

impl DisplayAs for PostgresScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(
            f,
            "PostgresScanExec: catalog={}, partitions={}, sql={}",
            self.db.catalog,
            self.sqls.len(),
            self.sqls[0]
        )?;
        if self.sqls.len() > 1 {
            write!(f, " ... {}", self.sqls[self.sqls.len() - 1])?;
        }
        Ok(())
    }
}

/// Rows per batch.
const BATCH_ROWS: usize = 8192;

fn builder(ty: &DataType) -> Box<dyn ArrayBuilder> {
    match ty {
        DataType::Boolean => Box::new(BooleanBuilder::new()),
        DataType::Int16 => Box::new(Int16Builder::new()),
        DataType::Int32 => Box::new(Int32Builder::new()),
        DataType::Int64 => Box::new(Int64Builder::new()),
        DataType::Float32 => Box::new(Float32Builder::new()),
        DataType::Float64 => Box::new(Float64Builder::new()),
        DataType::Decimal128(p, s) => Box::new(Decimal128Builder::new().with_data_type(DataType::Decimal128(*p, *s))),
        DataType::Date32 => Box::new(Date32Builder::new()),
        DataType::Timestamp(_, tz) => Box::new(TimestampMicrosecondBuilder::new().with_timezone_opt(tz.clone())),
        _ => Box::new(StringBuilder::new()),
    }
}

fn downcast<T: 'static>(b: &mut Box<dyn ArrayBuilder>) -> &mut T {
    b.as_any_mut().downcast_mut::<T>().expect("builder of the column's type")
}

/// Whether `v` has at most `precision` digits.
fn fits(v: i128, precision: u8) -> bool {
    10u128.checked_pow(u32::from(precision)).is_none_or(|limit| v.unsigned_abs() < limit)
}

/// `123.4` at scale 2 as 12340; None when the text is not a number that fits.
fn parse_decimal(text: &str, scale: i8) -> Option<i128> {
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    let scale = scale.max(0) as usize;
    let mut frac: String = frac.chars().take(scale).collect();
    while frac.len() < scale {
        frac.push('0');
    }
    let value: i128 = format!("{int}{frac}").parse().ok()?;
    Some(if negative { -value } else { value })
}

fn append(b: &mut Box<dyn ArrayBuilder>, kind: ColumnKind, row: &Row, i: usize) -> Result<()> {
    let bad = |e: tokio_postgres::Error| exec_datafusion_err!("reading PostgreSQL column {i}: {e}");
    match kind {
        ColumnKind::Bool => {
            downcast::<BooleanBuilder>(b).append_option(row.try_get::<_, Option<bool>>(i).map_err(bad)?)
        }
        ColumnKind::Int16 => downcast::<Int16Builder>(b).append_option(row.try_get::<_, Option<i16>>(i).map_err(bad)?),
        ColumnKind::Int32 | ColumnKind::Date => {
            let v = row.try_get::<_, Option<i32>>(i).map_err(bad)?;
            match kind {
                ColumnKind::Date => downcast::<Date32Builder>(b).append_option(v),
                _ => downcast::<Int32Builder>(b).append_option(v),
            }
        }
        ColumnKind::Int64 => downcast::<Int64Builder>(b).append_option(row.try_get::<_, Option<i64>>(i).map_err(bad)?),
        ColumnKind::Timestamp { .. } => {
            downcast::<TimestampMicrosecondBuilder>(b).append_option(row.try_get::<_, Option<i64>>(i).map_err(bad)?)
        }
        ColumnKind::Float32 => {
            downcast::<Float32Builder>(b).append_option(row.try_get::<_, Option<f32>>(i).map_err(bad)?)
        }
        ColumnKind::Float64 => {
            downcast::<Float64Builder>(b).append_option(row.try_get::<_, Option<f64>>(i).map_err(bad)?)
        }
        ColumnKind::Numeric { precision, scale } => {
            let text = row.try_get::<_, Option<String>>(i).map_err(bad)?;
            let value =
                match text {
                    Some(t) => Some(parse_decimal(&t, scale).filter(|v| fits(*v, precision)).ok_or_else(|| {
                        exec_datafusion_err!("PostgreSQL numeric '{t}' does not fit its decimal type")
                    })?),
                    None => None,
                };
            downcast::<Decimal128Builder>(b).append_option(value)
        }
        ColumnKind::Text | ColumnKind::Other => {
            downcast::<StringBuilder>(b).append_option(row.try_get::<_, Option<String>>(i).map_err(bad)?)
        }
    }
    Ok(())
}

fn finish(schema: &SchemaRef, builders: &mut [Box<dyn ArrayBuilder>], rows: usize) -> Result<RecordBatch> {
    let columns: Vec<ArrayRef> = builders.iter_mut().map(|b| b.finish()).collect();
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(schema.clone(), columns, &options)?)
}

impl ExecutionPlan for PostgresScanExec {
    plan_node!(leaf "PostgresScanExec");

    fn execute(&self, partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let Some(sql) = self.sqls.get(partition).cloned() else {
            return internal_err!("PostgresScanExec has {} partitions, asked for {partition}", self.sqls.len());
        };
        let (db, schema, kinds) = (self.db.clone(), self.schema.clone(), self.kinds.clone());
        let out_schema = schema.clone();
        let rows = futures::stream::once(async move {
            let client = db.connect().await?;
            let rows = client.query_raw(sql.as_str(), std::iter::empty::<i32>()).await.map_err(|e| db.error(e))?;
            // The client lives as long as the rows are read.
            Ok::<_, DataFusionError>(rows.map_err(move |e| db.error(e)).map(move |r| {
                let _alive = &client;
                r
            }))
        })
        .try_flatten();
        let batches = rows.try_chunks(BATCH_ROWS).map(move |chunk| {
            let chunk = chunk.map_err(|e| e.1)?;
            let mut builders: Vec<Box<dyn ArrayBuilder>> =
                schema.fields().iter().map(|f| builder(f.data_type())).collect();
            for row in &chunk {
                for (i, (b, k)) in builders.iter_mut().zip(&kinds).enumerate() {
                    append(b, *k, row, i)?;
                }
            }
            finish(&schema, &mut builders, chunk.len())
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(out_schema, batches)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_text_becomes_an_exact_decimal() {
        assert_eq!(parse_decimal("123.4", 2), Some(12340));
        assert_eq!(parse_decimal("-0.05", 2), Some(-5));
        assert_eq!(parse_decimal("7", 3), Some(7000));
        assert_eq!(parse_decimal("NaN", 2), None);
        assert!(fits(99_999, 5) && !fits(100_000, 5) && !fits(-100_000, 5));
        assert!(!fits(parse_decimal("1e39", 0).unwrap_or(i128::MAX), 38), "too many digits for decimal(38)");
    }
}
