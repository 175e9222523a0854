//! The built-in `tpch` catalog: TPC-H tables generated on the fly.
//!
//! Every schema of the catalog is a scale factor (`tiny` = 0.01, `sf1`,
//! `sf0_1` = 0.1, any `sfN` with `_` as the decimal point), and every schema
//! holds the eight TPC-H tables. Rows are produced by `tpchgen` /
//! `tpchgen-arrow` while the query runs and are never written to disk, so a
//! benchmark needs no data loading and every process can produce any slice of
//! any table by itself.
//!
//! [`register_tpch`] is called by session setup. [`TpchScanExec`] is the leaf
//! plan node; it is self-describing (table, scale factor, part split,
//! projection), which is what lets it travel between processes through
//! [`TpchScanExec::to_bytes`] / [`TpchScanExec::from_bytes`]: the receiving
//! process regenerates exactly the same rows for the same partition.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{CatalogProvider, SchemaProvider, Session, TableProvider};
use datafusion::common::stats::Precision;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{exec_datafusion_err, internal_err, plan_datafusion_err, plan_err, Statistics};
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::{Expr, TableType};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    ChildrenPropertiesMode, DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PhysicalExpr, PlanProperties,
    ReplaceChildrenOptions, StatisticsArgs,
};
use datafusion::prelude::SessionContext;
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

/// Name under which [`register_tpch`] registers the catalog.
pub const TPCH_CATALOG_NAME: &str = "tpch";

/// Schemas the catalog lists. Any other valid `sfN` name still resolves;
/// listing them all is impossible.
pub const LISTED_SCHEMAS: [&str; 4] = ["tiny", "sf0_1", "sf1", "sf10"];

/// Batches buffered between the generator thread and the consumer. Small on
/// purpose: generation is cheap to resume, memory for lineitem batches is not.
const CHANNEL_CAPACITY: usize = 2;

/// The eight TPC-H tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TpchTableKind {
    Nation,
    Region,
    Part,
    Supplier,
    PartSupp,
    Customer,
    Orders,
    LineItem,
}

impl TpchTableKind {
    /// All tables, in the order `table_names` reports them.
    pub const ALL: [Self; 8] = [
        Self::Nation,
        Self::Region,
        Self::Part,
        Self::Supplier,
        Self::PartSupp,
        Self::Customer,
        Self::Orders,
        Self::LineItem,
    ];

    /// SQL table name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nation => "nation",
            Self::Region => "region",
            Self::Part => "part",
            Self::Supplier => "supplier",
            Self::PartSupp => "partsupp",
            Self::Customer => "customer",
            Self::Orders => "orders",
            Self::LineItem => "lineitem",
        }
    }

    /// Inverse of [`TpchTableKind::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.name() == name)
    }

    /// Full (unprojected) Arrow schema, exactly as the generator emits it.
    pub fn schema(self) -> SchemaRef {
        match self {
            Self::Nation => NationArrow::schema_ref(),
            Self::Region => RegionArrow::schema_ref(),
            Self::Part => PartArrow::schema_ref(),
            Self::Supplier => SupplierArrow::schema_ref(),
            Self::PartSupp => PartSuppArrow::schema_ref(),
            Self::Customer => CustomerArrow::schema_ref(),
            Self::Orders => OrderArrow::schema_ref(),
            Self::LineItem => LineItemArrow::schema_ref(),
        }
    }

    /// Total row count at `scale_factor`. Exact for every table except
    /// lineitem, whose lines per order are random; there it is an estimate.
    pub fn row_count(self, scale_factor: f64) -> u64 {
        self.part_row_count(scale_factor, 1, 1)
    }

    /// Whether the generator honours its part arguments. The nation and
    /// region generators ignore them and always emit the whole table, so
    /// splitting those would duplicate rows.
    pub fn is_splittable(self) -> bool {
        !matches!(self, Self::Nation | Self::Region)
    }

    /// Row count of generator part `part` (1-based) of `parts`.
    fn part_row_count(self, sf: f64, part: i32, parts: i32) -> u64 {
        let rows = match self {
            Self::Nation => 25,
            Self::Region => 5,
            Self::Part => PartGenerator::calculate_row_count(sf, part, parts),
            Self::Supplier => SupplierGenerator::calculate_row_count(sf, part, parts),
            // calculate_row_count counts parts; each has four partsupp rows.
            Self::PartSupp => PartSuppGenerator::calculate_row_count(sf, part, parts).saturating_mul(4),
            Self::Customer => CustomerGenerator::calculate_row_count(sf, part, parts),
            Self::Orders => OrderGenerator::calculate_row_count(sf, part, parts),
            // Lineitem is split by order; 1..=7 lines per order, 4 on average.
            Self::LineItem => OrderGenerator::calculate_row_count(sf, part, parts).saturating_mul(4),
        };
        u64::try_from(rows).unwrap_or(0)
    }
}

/// Scale factor named by a schema: `tiny` = 0.01, otherwise `sf` followed by
/// a positive decimal number that uses `_` as the decimal point (SQL
/// identifiers cannot contain `.`), e.g. `sf1`, `sf0_1`, `sf0_01`, `sf100`.
pub fn parse_schema_name(name: &str) -> Option<f64> {
    if name == "tiny" {
        return Some(0.01);
    }
    let number = name.strip_prefix("sf")?;
    let (whole, fraction) = match number.split_once('_') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (number, None),
    };
    // Digits only: f64::from_str would also take "inf", "1e3", "-1", ...
    let is_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !is_digits(whole) || !fraction.is_none_or(is_digits) {
        return None;
    }
    let text = match fraction {
        Some(fraction) => format!("{whole}.{fraction}"),
        None => whole.to_string(),
    };
    let scale_factor: f64 = text.parse().ok()?;
    (scale_factor.is_finite() && scale_factor > 0.0).then_some(scale_factor)
}

/// Registers the `tpch` catalog on `ctx`.
pub fn register_tpch(ctx: &SessionContext) {
    ctx.register_catalog(TPCH_CATALOG_NAME, Arc::new(TpchCatalog));
}

/// The `tpch` catalog. Stateless: schemas are created on lookup.
#[derive(Debug, Clone, Copy)]
pub struct TpchCatalog;

impl CatalogProvider for TpchCatalog {
    fn schema_names(&self) -> Vec<String> {
        LISTED_SCHEMAS.iter().map(|s| s.to_string()).collect()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        if name == super::information_schema::NAME {
            return Some(Arc::new(super::information_schema::TrinoInformationSchema::new(TPCH_CATALOG_NAME)));
        }
        let scale_factor = parse_schema_name(name)?;
        Some(Arc::new(TpchSchema { scale_factor }) as Arc<dyn SchemaProvider>)
    }
}

/// One scale factor of the `tpch` catalog.
#[derive(Debug, Clone, Copy)]
pub struct TpchSchema {
    pub scale_factor: f64,
}

#[async_trait]
impl SchemaProvider for TpchSchema {
    fn table_names(&self) -> Vec<String> {
        TpchTableKind::ALL.iter().map(|k| k.name().to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let scale_factor = self.scale_factor;
        let table = TpchTableKind::from_name(name).map(|kind| TpchTable { kind, scale_factor });
        Ok(table.map(|table| Arc::new(table) as Arc<dyn TableProvider>))
    }

    fn table_exist(&self, name: &str) -> bool {
        TpchTableKind::from_name(name).is_some()
    }
}

/// One TPC-H table at one scale factor.
#[derive(Debug, Clone, Copy)]
pub struct TpchTable {
    pub kind: TpchTableKind,
    pub scale_factor: f64,
}

#[async_trait]
impl TableProvider for TpchTable {
    fn schema(&self) -> SchemaRef {
        self.kind.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        // No filters arrive: the default `supports_filters_pushdown` says
        // Unsupported, as the generator must produce every row anyway. The
        // limit is ignored because DataFusion keeps its own above the scan.
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let partitions = state.config().target_partitions();
        let exec = TpchScanExec::try_new(self.kind, self.scale_factor, partitions, projection.cloned())?;
        Ok(Arc::new(exec))
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Array, Int64Array};
    use datafusion::physical_plan::common::collect;
    use datafusion::physical_plan::DefaultDisplay;
    use datafusion::prelude::SessionConfig;

    fn task_ctx(batch_size: usize) -> Arc<TaskContext> {
        let config = SessionConfig::new().with_batch_size(batch_size);
        SessionContext::new_with_config(config).task_ctx()
    }

    async fn run(exec: &TpchScanExec, partition: usize, batch_size: usize) -> Vec<RecordBatch> {
        collect(exec.execute(partition, task_ctx(batch_size)).unwrap()).await.unwrap()
    }

    fn rows(batches: &[RecordBatch]) -> usize {
        batches.iter().map(|b| b.num_rows()).sum()
    }

    fn int64(batch: &RecordBatch, column: usize) -> &Int64Array {
        batch.column(column).as_any().downcast_ref::<Int64Array>().unwrap()
    }

    #[test]
    fn schema_names_parse_to_scale_factors() {
        let good = [("tiny", 0.01), ("sf0_1", 0.1), ("sf1", 1.0), ("sf10", 10.0)];
        for (name, sf) in good.into_iter().chain([("sf0_01", 0.01), ("sf100", 100.0)]) {
            assert_eq!(parse_schema_name(name), Some(sf), "{name}");
        }
        for bad in [
            "", "sf", "sf0", "sf0_0", "sf-1", "sf_1", "sf1_", "sf1_2_3", "sf1e3", "sfinf", "SF1", "sf1.5", "huge",
            "default",
        ] {
            assert_eq!(parse_schema_name(bad), None, "{bad:?} should be rejected");
        }
    }

    #[test]
    fn row_counts_match_the_spec() {
        // TPC-H specification, section 4.2.5: base cardinalities at SF 1.
        assert_eq!(TpchTableKind::Orders.row_count(1.0), 1_500_000);
        assert_eq!(TpchTableKind::PartSupp.row_count(1.0), 800_000);
        assert_eq!(TpchTableKind::Supplier.row_count(0.01), 100);
        for kind in TpchTableKind::ALL {
            assert_eq!(TpchTableKind::from_name(kind.name()), Some(kind));
        }
    }

    #[tokio::test]
    async fn orders_split_four_ways_matches_single_part() {
        let whole = TpchScanExec::try_new(TpchTableKind::Orders, 0.01, 1, Some(vec![0])).unwrap();
        let split = TpchScanExec::try_new(TpchTableKind::Orders, 0.01, 4, Some(vec![0])).unwrap();
        let whole_batches = run(&whole, 0, 1000).await;
        let mut split_batches = Vec::new();
        for p in 0..4 {
            let part = run(&split, p, 1000).await;
            // Per-partition statistics predict what each partition produces.
            #[allow(deprecated)]
            let stats = split.partition_statistics(Some(p)).unwrap();
            assert_eq!(stats.num_rows, Precision::Inexact(rows(&part)));
            split_batches.extend(part);
        }
        // TPC-H spec: orders has 1,500,000 * SF rows.
        assert_eq!(rows(&whole_batches), 15_000);
        assert_eq!(rows(&split_batches), 15_000);
        let key_sum =
            |batches: &[RecordBatch]| -> i64 { batches.iter().map(|b| int64(b, 0).values().iter().sum::<i64>()).sum() };
        assert_eq!(key_sum(&whole_batches), key_sum(&split_batches));
        assert!(whole_batches.iter().all(|b| b.num_rows() <= 1000));
        #[allow(deprecated)]
        let total = split.partition_statistics(None).unwrap();
        assert_eq!(total.num_rows, Precision::Inexact(15_000));
    }

    #[tokio::test]
    async fn nation_has_25_rows_in_one_partition() {
        let exec = TpchScanExec::try_new(TpchTableKind::Nation, 1.0, 8, None).unwrap();
        assert_eq!(exec.num_partitions(), 1);
        assert_eq!(rows(&run(&exec, 0, 8192).await), 25);
    }

    #[tokio::test]
    async fn projected_scan_yields_projected_schema() {
        let exec = TpchScanExec::try_new(TpchTableKind::LineItem, 0.01, 2, Some(vec![0, 4]));
        let exec = exec.unwrap();
        let names: Vec<_> = exec.schema().fields().iter().map(|f| f.name().clone()).collect();
        assert_eq!(names, ["l_orderkey", "l_quantity"]);
        let batches = run(&exec, 1, 4096).await;
        assert!(!batches.is_empty());
        assert!(batches.iter().all(|b| b.schema() == exec.schema()));
        assert_eq!(
            DefaultDisplay(exec.clone()).to_string(),
            "TpchScanExec: table=lineitem, sf=0.01, partitions=2, \
             projection=[l_orderkey, l_quantity]"
        );
        assert!(exec.execute(2, task_ctx(4096)).is_err());
        assert!(TpchScanExec::try_new(TpchTableKind::Region, 1.0, 1, Some(vec![3])).is_err());
    }

    #[tokio::test]
    async fn dropping_the_stream_early_is_clean() {
        let exec = TpchScanExec::try_new(TpchTableKind::LineItem, 0.1, 1, None).unwrap();
        let mut stream = exec.execute(0, task_ctx(100)).unwrap();
        assert_eq!(stream.next().await.unwrap().unwrap().num_rows(), 100);
    }

    #[test]
    fn bytes_round_trip() {
        let exec = TpchScanExec::try_new(TpchTableKind::PartSupp, 0.1, 3, Some(vec![1, 0]));
        let exec = exec.unwrap();
        let back = TpchScanExec::from_bytes(&exec.to_bytes()).unwrap();
        assert_eq!(back.table(), TpchTableKind::PartSupp);
        assert_eq!((back.scale_factor(), back.num_partitions()), (0.1, 3));
        assert_eq!(back.projection(), Some(&[1, 0][..]));
        assert_eq!(back.schema(), exec.schema());
        assert!(TpchScanExec::from_bytes(b"not json").is_err());
        let bad = br#"{"table":"widgets","scale_factor":1.0,"num_partitions":1,"projection":null}"#;
        assert!(TpchScanExec::from_bytes(bad).is_err());
    }

    #[tokio::test]
    async fn catalog_resolves_through_sql() {
        let ctx = SessionContext::new();
        register_tpch(&ctx);
        let catalog = ctx.catalog(TPCH_CATALOG_NAME).unwrap();
        assert_eq!(catalog.schema_names(), ["tiny", "sf0_1", "sf1", "sf10"]);
        let unlisted = catalog.schema("sf0_01").unwrap();
        assert!(unlisted.table_exist("lineitem") && !unlisted.table_exist("widgets"));
        assert_eq!(unlisted.table_names().len(), 8);
        assert!(catalog.schema("public").is_none());
        for (sql, expected) in [
            ("SELECT count(*) FROM tpch.tiny.nation", 25),
            ("SELECT count(*) FROM tpch.sf0_01.region", 5),
            ("SELECT count(*) FROM tpch.tiny.orders", 15_000),
        ] {
            let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
            assert_eq!(int64(&batches[0], 0).value(0), expected, "{sql}");
        }
    }
}
