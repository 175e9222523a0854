//! `MemoryScanExec`: reads a `memory` table, one partition per fragment, each from
//! the worker holding it (`fragments::MemoryFragments::read`: at home without a
//! copy, from another worker over HTTP). The node lists the fragments the table had
//! when the query was planned, so a query sees one version of the table even while
//! an `INSERT` adds to it. It travels to workers as JSON.

use datafusion::common::exec_datafusion_err;
use std::fmt;
use std::sync::Arc;

use base64::Engine;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::stats::Precision;
use datafusion::common::{plan_datafusion_err, Statistics};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, StatisticsArgs,
};
use futures::StreamExt;
use serde::{Deserialize, Serialize};

use super::fragments::MemoryFragments;
use super::FragmentRef;
use crate::plan_node::plan_node;
use crate::util::{schema_from_bytes, schema_to_bytes};

#[derive(Debug)]
pub struct MemoryScanExec {
    /// The table's name, for plans.
    table: String,
    /// The table's whole schema.
    table_schema: SchemaRef,
    fragments: Vec<FragmentRef>,
    projection: Option<Vec<usize>>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

#[derive(Serialize, Deserialize)]
struct ScanSpec {
    table: String,
    schema: String,
    fragments: Vec<FragmentRef>,
    projection: Option<Vec<usize>>,
}

impl MemoryScanExec {
    pub fn try_new(
        table: &str,
        table_schema: SchemaRef,
        fragments: Vec<FragmentRef>,
        projection: Option<Vec<usize>>,
    ) -> Result<Self> {
        let schema = match &projection {
            Some(p) => Arc::new(table_schema.project(p)?),
            None => table_schema.clone(),
        };
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(fragments.len().max(1)),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Ok(MemoryScanExec { table: table.to_string(), table_schema, fragments, projection, schema, properties })
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let spec = ScanSpec {
            table: self.table.clone(),
            schema: base64::engine::general_purpose::STANDARD.encode(schema_to_bytes(&self.table_schema)?),
            fragments: self.fragments.clone(),
            projection: self.projection.clone(),
        };
        serde_json::to_vec(&spec).map_err(|e| DataFusionError::External(Box::new(e)))
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let spec: ScanSpec =
            serde_json::from_slice(bytes).map_err(|e| plan_datafusion_err!("malformed MemoryScanExec: {e}"))?;
        let schema = base64::engine::general_purpose::STANDARD
            .decode(spec.schema)
            .map_err(|e| plan_datafusion_err!("malformed MemoryScanExec schema: {e}"))?;
        Self::try_new(&spec.table, schema_from_bytes(&schema)?, spec.fragments, spec.projection)
    }

    fn statistics_for(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        let rows: u64 = match partition {
            None => self.fragments.iter().map(|f| f.rows).sum(),
            Some(p) => self.fragments.get(p).map(|f| f.rows).unwrap_or(0),
        };
        // Inexact: exact counts would answer `count(*)` from these numbers alone, so a
        // table whose worker died would still count the rows it lost.
        let rows = usize::try_from(rows).unwrap_or(usize::MAX);
        Ok(Arc::new(Statistics::new_unknown(&self.schema).with_num_rows(Precision::Inexact(rows))))
    }
}

impl DisplayAs for MemoryScanExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "MemoryScanExec: table={}, fragments={}", self.table, self.fragments.len())?;
        if self.projection.is_some() {
            let names: Vec<&str> = self.schema.fields().iter().map(|c| c.name().as_str()).collect();
            write!(f, ", projection=[{}]", names.join(", "))?;
        }
        Ok(())
    }
}

impl ExecutionPlan for MemoryScanExec {
    plan_node!(leaf "MemoryScanExec");

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let schema = self.schema.clone();
        let Some(fragment) = self.fragments.get(partition).cloned() else {
            // A table without rows has one empty partition.
            return Ok(Box::pin(RecordBatchStreamAdapter::new(schema, futures::stream::empty())));
        };
        let held = context
            .session_config()
            .get_extension::<MemoryFragments>()
            .ok_or_else(|| exec_datafusion_err!("memory table {} is read on workers only", self.table))?;
        let (projection, out) = (self.projection.clone(), schema.clone());
        let stream = futures::stream::once(async move {
            let batches = held.read(&fragment.worker, &fragment.id).await?;
            // Under the table's own schema: a writer's batches may name their columns
            // as its query did.
            let projected: Vec<Result<_>> = batches
                .iter()
                .map(|b| {
                    let b = match &projection {
                        Some(p) => b.project(p)?,
                        None => b.clone(),
                    };
                    let rows = RecordBatchOptions::new().with_row_count(Some(b.num_rows()));
                    Ok(RecordBatch::try_new_with_options(out.clone(), b.columns().to_vec(), &rows)?)
                })
                .collect();
            Ok::<_, DataFusionError>(futures::stream::iter(projected))
        })
        .map(|r| match r {
            Ok(s) => s.boxed(),
            Err(e) => futures::stream::iter(vec![Err(e)]).boxed(),
        })
        .flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        self.statistics_for(args.partition())
    }

    #[allow(deprecated)]
    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        self.statistics_for(partition)
    }
}
