//! `TpchScanExec`: the leaf plan node of the `tpch` catalog, generating one table's
//! rows while the query runs. It is self-describing (table, scale factor, part split,
//! projection), which is what lets it travel between processes; the receiving process
//! regenerates exactly the same rows for the same partition.

use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{exec_datafusion_err, internal_err, plan_datafusion_err, plan_err, Statistics};
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PhysicalExpr, PlanProperties,
    ReplaceChildrenOptions, StatisticsArgs,
};
use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator, PartSuppGenerator,
    RegionGenerator, SupplierGenerator,
};
use tpchgen_arrow::{
    CustomerArrow, LineItemArrow, NationArrow, OrderArrow, PartArrow, PartSuppArrow, RegionArrow, SupplierArrow,
};

use super::TpchTableKind;

/// Batches buffered between the generator thread and the consumer. Small on
/// purpose: generation is cheap to resume, memory for lineitem batches is not.
const CHANNEL_CAPACITY: usize = 2;

/// Wire form of [`TpchScanExec`]. The schema and plan properties are derived
/// data and are rebuilt on the receiving side rather than shipped.
#[derive(Debug, Serialize, Deserialize)]
struct TpchScanSpec {
    table: String,
    scale_factor: f64,
    num_partitions: usize,
    projection: Option<Vec<usize>>,
}

/// Leaf plan that generates one TPC-H table. Output partition `p` is
/// generator part `p + 1` of `num_partitions`, so the partitions together
/// hold each row exactly once, and any process can compute any partition.
#[derive(Debug, Clone)]
pub struct TpchScanExec {
    table: TpchTableKind,
    scale_factor: f64,
    num_partitions: usize,
    projection: Option<Vec<usize>>,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl TpchScanExec {
    /// Validates the arguments and builds the node. Nation and region are
    /// always given one partition (see [`TpchTableKind::is_splittable`]).
    pub fn try_new(
        table: TpchTableKind,
        scale_factor: f64,
        num_partitions: usize,
        projection: Option<Vec<usize>>,
    ) -> Result<Self> {
        if !(scale_factor.is_finite() && scale_factor > 0.0) {
            return plan_err!("TPC-H scale factor must be positive, got {scale_factor}");
        }
        // tpchgen takes the part numbers as i32.
        if num_partitions == 0 || i32::try_from(num_partitions).is_err() {
            return plan_err!("invalid TPC-H partition count {num_partitions}");
        }
        let num_partitions = if table.is_splittable() { num_partitions } else { 1 };
        let full_schema = table.schema();
        let schema = match &projection {
            Some(indices) => Arc::new(full_schema.project(indices)?),
            None => full_schema,
        };
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            Partitioning::UnknownPartitioning(num_partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(TpchScanExec { table, scale_factor, num_partitions, projection, schema, properties: Arc::new(properties) })
    }

    pub fn table(&self) -> TpchTableKind {
        self.table
    }

    pub fn scale_factor(&self) -> f64 {
        self.scale_factor
    }

    pub fn num_partitions(&self) -> usize {
        self.num_partitions
    }

    /// Column indices into the full table schema, if projected.
    pub fn projection(&self) -> Option<&[usize]> {
        self.projection.as_deref()
    }

    /// Encodes the node for shipping to another process.
    pub fn to_bytes(&self) -> Vec<u8> {
        let spec = TpchScanSpec {
            table: self.table.name().to_string(),
            scale_factor: self.scale_factor,
            num_partitions: self.num_partitions,
            projection: self.projection.clone(),
        };
        // serde_json only fails on non-string map keys or failing Serialize
        // impls; this struct has neither.
        serde_json::to_vec(&spec).expect("TpchScanSpec is always serializable")
    }

    /// Decodes bytes produced by [`TpchScanExec::to_bytes`], re-validating
    /// everything since the bytes come from another process.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let spec: TpchScanSpec =
            serde_json::from_slice(bytes).map_err(|e| plan_datafusion_err!("malformed TpchScanExec encoding: {e}"))?;
        let table = TpchTableKind::from_name(&spec.table)
            .ok_or_else(|| plan_datafusion_err!("unknown TPC-H table '{}'", spec.table))?;
        Self::try_new(table, spec.scale_factor, spec.num_partitions, spec.projection)
    }

    fn statistics_for(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        let rows = match partition {
            None => self.table.row_count(self.scale_factor),
            Some(p) if p < self.num_partitions => {
                // Both fit in i32: checked in try_new.
                let (part, parts) = (p as i32 + 1, self.num_partitions as i32);
                self.table.part_row_count(self.scale_factor, part, parts)
            }
            Some(p) => {
                return internal_err!(
                    "TpchScanExec has {} partitions, asked for statistics of partition {p}",
                    self.num_partitions
                )
            }
        };
        let rows = usize::try_from(rows).unwrap_or(usize::MAX);
        // Inexact even where the count is exact, so that no optimizer rule
        // substitutes these numbers for generated data; lineitem's count is
        // only an estimate anyway.
        let stats = Statistics::new_unknown(&self.schema).with_num_rows(Precision::Inexact(rows));
        Ok(Arc::new(stats))
    }
}

impl DisplayAs for TpchScanExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "TpchScanExec: table={}, sf={}, partitions={}",
                    self.table.name(),
                    self.scale_factor,
                    self.num_partitions
                )?;
                if self.projection.is_some() {
                    let names: Vec<&str> = self.schema.fields().iter().map(|c| c.name().as_str()).collect();
                    write!(f, ", projection=[{}]", names.join(", "))?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                writeln!(f, "table={}", self.table.name())?;
                writeln!(f, "sf={}", self.scale_factor)?;
                write!(f, "partitions={}", self.num_partitions)
            }
        }
    }
}

impl ExecutionPlan for TpchScanExec {
    fn name(&self) -> &str {
        "TpchScanExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn replace_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
        _options: ReplaceChildrenOptions,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        if !children.is_empty() {
            return internal_err!("TpchScanExec is a leaf, got {} children", children.len());
        }
        Ok(self)
    }

    #[allow(deprecated)]
    fn with_new_children(self: Arc<Self>, children: Vec<Arc<dyn ExecutionPlan>>) -> Result<Arc<dyn ExecutionPlan>> {
        self.replace_children(children, ReplaceChildrenOptions::new(ChildrenPropertiesMode::Recompute))
    }

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if partition >= self.num_partitions {
            return internal_err!(
                "TpchScanExec has {} partitions, asked to execute partition {partition}",
                self.num_partitions
            );
        }
        let job = PartitionJob {
            table: self.table,
            scale_factor: self.scale_factor,
            // Both fit in i32: checked in try_new.
            part: partition as i32 + 1,
            part_count: self.num_partitions as i32,
            // A zero batch size would make the generator report end of data
            // immediately.
            batch_size: context.session_config().batch_size().max(1),
            projection: self.projection.clone(),
        };
        Ok(Box::pin(RecordBatchStreamAdapter::new(Arc::clone(&self.schema), generate(job))))
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        self.statistics_for(args.partition())
    }

    // Still overridden because some callers (and older optimizer paths) ask
    // for statistics through the deprecated entry point directly.
    #[allow(deprecated)]
    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        self.statistics_for(partition)
    }
}

/// Raw generator output, before projection.
type GeneratedBatches = Box<dyn Iterator<Item = Result<RecordBatch, ArrowError>> + Send>;

/// Everything one partition needs, owned so it can move to a blocking thread.
struct PartitionJob {
    table: TpchTableKind,
    scale_factor: f64,
    part: i32,
    part_count: i32,
    batch_size: usize,
    projection: Option<Vec<usize>>,
}

impl PartitionJob {
    /// Synchronous iterator of projected batches for this part.
    fn into_batches(self) -> impl Iterator<Item = Result<RecordBatch>> + Send {
        let (sf, part, n, bs) = (self.scale_factor, self.part, self.part_count, self.batch_size);
        macro_rules! boxed {
            ($arrow:ident, $generator:ident) => {
                Box::new($arrow::new($generator::new(sf, part, n)).with_batch_size(bs))
            };
        }
        let batches: GeneratedBatches = match self.table {
            TpchTableKind::Nation => boxed!(NationArrow, NationGenerator),
            TpchTableKind::Region => boxed!(RegionArrow, RegionGenerator),
            TpchTableKind::Part => boxed!(PartArrow, PartGenerator),
            TpchTableKind::Supplier => boxed!(SupplierArrow, SupplierGenerator),
            TpchTableKind::PartSupp => boxed!(PartSuppArrow, PartSuppGenerator),
            TpchTableKind::Customer => boxed!(CustomerArrow, CustomerGenerator),
            TpchTableKind::Orders => boxed!(OrderArrow, OrderGenerator),
            TpchTableKind::LineItem => boxed!(LineItemArrow, LineItemGenerator),
        };
        let projection = self.projection;
        batches.map(move |batch| -> Result<RecordBatch> {
            let batch = batch?;
            match &projection {
                Some(indices) => Ok(batch.project(indices)?),
                None => Ok(batch),
            }
        })
    }
}

/// Consumer-side state of one partition's generation.
enum Feed {
    /// Nothing spawned yet: spawning is deferred to the first poll so that a
    /// stream that is created but never read costs nothing.
    NotStarted(PartitionJob),
    Running {
        rx: mpsc::Receiver<Result<RecordBatch>>,
        producer: JoinHandle<()>,
    },
    Finished,
}

/// Runs the CPU-bound generator on tokio's blocking pool, so it never stalls
/// the async workers, and hands batches over a small bounded channel so the
/// generator runs at most a couple of batches ahead of the consumer.
fn start_producer(job: PartitionJob) -> (mpsc::Receiver<Result<RecordBatch>>, JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    let producer = tokio::task::spawn_blocking(move || {
        for item in job.into_batches() {
            let failed = item.is_err();
            // A send error means the stream was dropped (query cancelled or
            // limit reached): stop generating rows nobody will read.
            if tx.blocking_send(item).is_err() || failed {
                break;
            }
        }
    });
    (rx, producer)
}

fn generate(job: PartitionJob) -> impl Stream<Item = Result<RecordBatch>> + Send + 'static {
    futures::stream::unfold(Feed::NotStarted(job), |feed| async move {
        let (mut rx, producer) = match feed {
            Feed::NotStarted(job) => start_producer(job),
            Feed::Running { rx, producer } => (rx, producer),
            Feed::Finished => return None,
        };
        if let Some(item) = rx.recv().await {
            return Some((item, Feed::Running { rx, producer }));
        }
        // The channel also closes when the producer panics; without this
        // check a panic would look like a short but successful scan.
        match producer.await {
            Ok(()) => None,
            Err(e) => Some((Err(exec_datafusion_err!("TPC-H generator task failed: {e}")), Feed::Finished)),
        }
    })
    // Unfold panics if polled after it ended; some consumers poll once more.
    .fuse()
}
