//! Catalogs of generated benchmark tables (`tpch`, `tpcds`): what they share. A
//! benchmark says what its tables are through [`GeneratedTable`]; this module makes
//! the catalog (a schema per scale factor), the table providers and the scan,
//! [`GeneratedScanExec`], a leaf that generates one table's partitions while the
//! query runs. The scan is self-describing (table, scale factor, partitions,
//! projection), which lets it travel between processes: the receiving process
//! regenerates exactly the same rows for the same partition.
//!
//! The CPU-bound generator runs on tokio's blocking pool, never stalling the async
//! workers, and hands batches over a small bounded channel, so it runs at most a
//! couple of batches ahead of its consumer. Nothing starts until the stream is first
//! polled, so a stream created but never read costs nothing.
//!
//! A catalog may spell its tables otherwise than the generator (Trino's `tpch` drops
//! the column prefixes and maps money to DOUBLE): its [`GeneratedTable::Spelling`]
//! gives the schema it shows, the scan carries it, and each generated batch is cast
//! and renamed to that schema after projection.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
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
use futures::{Stream, StreamExt};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A partition's batches, made on the generator thread.
pub type Batches = Box<dyn Iterator<Item = Result<RecordBatch>> + Send>;

/// One benchmark's tables, as its generator makes them.
pub trait GeneratedTable: Copy + PartialEq + fmt::Debug + Send + Sync + 'static {
    /// How a catalog spells the tables: its configuration, carried by each scan.
    type Spelling: Copy + PartialEq + fmt::Debug + Serialize + DeserializeOwned + Send + Sync + 'static;
    /// The generator's own spelling (what `schema` gives).
    const NATIVE: Self::Spelling;
    /// The benchmark's name in messages (`TPC-H`).
    const BENCHMARK: &'static str;
    /// The scan node's name in plans (`TpchScanExec`).
    const SCAN: &'static str;
    /// The schemas a catalog lists; any other valid `sfN` still resolves.
    const LISTED_SCHEMAS: [&'static str; 4] = ["tiny", "sf0_1", "sf1", "sf10"];
    /// Largest scale factor the generator takes.
    const MAX_SCALE: f64;
    /// Most partitions a scan may have.
    const MAX_PARTITIONS: usize;

    /// Every table, in the order a schema lists them.
    fn all() -> &'static [Self];
    /// SQL table name.
    fn name(self) -> &'static str;
    /// Full (unprojected) Arrow schema, exactly as the generator emits it.
    fn schema(self) -> SchemaRef;
    /// Full schema as a catalog spelled `spelling` shows it: the generator's
    /// columns in the same order, renamed or of another type.
    fn spelled_schema(self, spelling: Self::Spelling) -> SchemaRef;
    /// Partitions a scan of the table has when `wanted` are asked for.
    fn partitions(self, scale_factor: f64, wanted: usize) -> usize;
    /// Estimated rows of the table (`None`) or of partition `(part, parts)`.
    fn rows(self, scale_factor: f64, part: Option<(usize, usize)>) -> u64;
    /// The unprojected batches of partition `part` (0-based) of `parts`.
    fn batches(self, scale_factor: f64, part: usize, parts: usize, batch_size: usize) -> Batches;

    fn from_name(name: &str) -> Option<Self> {
        Self::all().iter().copied().find(|kind| kind.name() == name)
    }
}

/// Wire form of [`GeneratedScanExec`]; the schema and properties are rebuilt.
#[derive(Debug, Serialize, Deserialize)]
struct ScanSpec {
    table: String,
    scale_factor: f64,
    num_partitions: usize,
    projection: Option<Vec<usize>>,
    /// The catalog's spelling; absent means the generator's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spelling: Option<serde_json::Value>,
}

/// Leaf plan that generates one table; its partitions together hold each row once,
/// and any process can compute any partition.
#[derive(Debug, Clone)]
pub struct GeneratedScanExec<T: GeneratedTable> {
    table: T,
    scale_factor: f64,
    num_partitions: usize,
    projection: Option<Vec<usize>>,
    spelling: T::Spelling,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
}

impl<T: GeneratedTable> GeneratedScanExec<T> {
    /// A scan of the generator's own schema (see `try_new_spelled`).
    pub fn try_new(table: T, scale_factor: f64, num_partitions: usize, projection: Option<Vec<usize>>) -> Result<Self> {
        Self::try_new_spelled(table, scale_factor, num_partitions, projection, T::NATIVE)
    }

    /// Checks the arguments and builds the node, whose rows are spelled as
    /// `spelling` says; the table may take fewer partitions than asked for
    /// (`GeneratedTable::partitions`).
    pub fn try_new_spelled(
        table: T,
        scale_factor: f64,
        num_partitions: usize,
        projection: Option<Vec<usize>>,
        spelling: T::Spelling,
    ) -> Result<Self> {
        if !(scale_factor.is_finite() && scale_factor > 0.0 && scale_factor <= T::MAX_SCALE) {
            return plan_err!(
                "{} scale factor must be above 0 and at most {}, got {scale_factor}",
                T::BENCHMARK,
                T::MAX_SCALE
            );
        }
        if num_partitions == 0 || num_partitions > T::MAX_PARTITIONS {
            return plan_err!("invalid {} partition count {num_partitions} (1 to {})", T::BENCHMARK, T::MAX_PARTITIONS);
        }
        let num_partitions = table.partitions(scale_factor, num_partitions);
        let full_schema = table.spelled_schema(spelling);
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
        Ok(GeneratedScanExec {
            table,
            scale_factor,
            num_partitions,
            projection,
            spelling,
            schema,
            properties: Arc::new(properties),
        })
    }

    pub fn table(&self) -> T {
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
        let spec = ScanSpec {
            table: self.table.name().to_string(),
            scale_factor: self.scale_factor,
            num_partitions: self.num_partitions,
            projection: self.projection.clone(),
            spelling: (self.spelling != T::NATIVE)
                .then(|| serde_json::to_value(self.spelling).expect("a spelling is always serializable")),
        };
        // serde_json fails only on non-string map keys or failing Serialize impls.
        serde_json::to_vec(&spec).expect("a scan spec is always serializable")
    }

    /// Decodes bytes made by [`GeneratedScanExec::to_bytes`], checking them again:
    /// they come from another process.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let spec: ScanSpec =
            serde_json::from_slice(bytes).map_err(|e| plan_datafusion_err!("malformed {} encoding: {e}", T::SCAN))?;
        let table = T::from_name(&spec.table)
            .ok_or_else(|| plan_datafusion_err!("unknown {} table '{}'", T::BENCHMARK, spec.table))?;
        let spelling = match spec.spelling {
            None => T::NATIVE,
            Some(v) => {
                serde_json::from_value(v).map_err(|e| plan_datafusion_err!("malformed {} spelling: {e}", T::SCAN))?
            }
        };
        Self::try_new_spelled(table, spec.scale_factor, spec.num_partitions, spec.projection, spelling)
    }

    fn statistics_for(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        let part = match partition {
            None => None,
            Some(p) if p < self.num_partitions => Some((p, self.num_partitions)),
            Some(p) => {
                return internal_err!(
                    "{} has {} partitions, asked for statistics of partition {p}",
                    T::SCAN,
                    self.num_partitions
                )
            }
        };
        let rows = usize::try_from(self.table.rows(self.scale_factor, part)).unwrap_or(usize::MAX);
        // Inexact even where the count is exact, so that no optimizer rule
        // substitutes these numbers for the generated rows.
        Ok(Arc::new(Statistics::new_unknown(&self.schema).with_num_rows(Precision::Inexact(rows))))
    }
}

impl<T: GeneratedTable> DisplayAs for GeneratedScanExec<T> {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(
                    f,
                    "{}: table={}, sf={}, partitions={}",
                    T::SCAN,
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

impl<T: GeneratedTable> ExecutionPlan for GeneratedScanExec<T> {
    fn name(&self) -> &str {
        T::SCAN
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
            return internal_err!("{} is a leaf, got {} children", T::SCAN, children.len());
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
                "{} has {} partitions, asked to execute partition {partition}",
                T::SCAN,
                self.num_partitions
            );
        }
        let (table, sf, parts, projection) =
            (self.table, self.scale_factor, self.num_partitions, self.projection.clone());
        let spelled = (self.spelling != T::NATIVE).then(|| Arc::clone(&self.schema));
        // A zero batch size would make a generator report the end of its data at once.
        let batch_size = context.session_config().batch_size().max(1);
        let stream = generate(T::BENCHMARK, move || {
            spelled_as(projected(table.batches(sf, partition, parts, batch_size), projection), spelled)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(Arc::clone(&self.schema), stream)))
    }

    fn statistics_from_inputs(
        &self,
        _input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        self.statistics_for(args.partition())
    }

    // Still overridden because some callers ask through the deprecated entry point.
    #[allow(deprecated)]
    fn partition_statistics(&self, partition: Option<usize>) -> Result<Arc<Statistics>> {
        self.statistics_for(partition)
    }
}

/// Scale factor named by a schema: `tiny` = 0.01, otherwise `sf` followed by a
/// positive decimal number that uses `_` as the decimal point (SQL identifiers
/// cannot hold `.`), e.g. `sf1`, `sf0_1`, `sf0_01`, `sf100`.
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

/// A generated catalog: schemas are made on lookup, spelled as the catalog is.
#[derive(Debug)]
pub struct GeneratedCatalog<T: GeneratedTable> {
    spelling: T::Spelling,
}

impl<T: GeneratedTable> GeneratedCatalog<T> {
    pub fn new(spelling: T::Spelling) -> Self {
        GeneratedCatalog { spelling }
    }
}

impl<T: GeneratedTable> CatalogProvider for GeneratedCatalog<T> {
    fn schema_names(&self) -> Vec<String> {
        T::LISTED_SCHEMAS.iter().map(|s| s.to_string()).collect()
    }

    fn schema(&self, name: &str) -> Option<Arc<dyn SchemaProvider>> {
        let scale_factor = parse_schema_name(name)?;
        Some(Arc::new(GeneratedSchema::<T> { scale_factor, spelling: self.spelling }) as Arc<dyn SchemaProvider>)
    }
}

/// One scale factor of a generated catalog.
#[derive(Debug)]
pub struct GeneratedSchema<T: GeneratedTable> {
    pub scale_factor: f64,
    spelling: T::Spelling,
}

#[async_trait]
impl<T: GeneratedTable> SchemaProvider for GeneratedSchema<T> {
    fn table_names(&self) -> Vec<String> {
        T::all().iter().map(|k| k.name().to_string()).collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let (scale_factor, spelling) = (self.scale_factor, self.spelling);
        let table = T::from_name(name).map(|kind| GeneratedTableProvider { kind, scale_factor, spelling });
        Ok(table.map(|table| Arc::new(table) as Arc<dyn TableProvider>))
    }

    fn table_exist(&self, name: &str) -> bool {
        T::from_name(name).is_some()
    }
}

/// One table at one scale factor.
#[derive(Debug, Clone, Copy)]
pub struct GeneratedTableProvider<T: GeneratedTable> {
    pub kind: T,
    pub scale_factor: f64,
    pub spelling: T::Spelling,
}

#[async_trait]
impl<T: GeneratedTable> TableProvider for GeneratedTableProvider<T> {
    fn schema(&self) -> SchemaRef {
        self.kind.spelled_schema(self.spelling)
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        // No filters are taken, as the generator makes every row anyway; the limit
        // stays with DataFusion, above the scan.
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let partitions = state.config().target_partitions().min(T::MAX_PARTITIONS);
        let exec = GeneratedScanExec::try_new_spelled(
            self.kind,
            self.scale_factor,
            partitions,
            projection.cloned(),
            self.spelling,
        )?;
        Ok(Arc::new(exec))
    }
}

/// Batches buffered between the generator thread and the consumer. Small on
/// purpose: generation is cheap to resume, memory for large batches is not.
const CHANNEL_CAPACITY: usize = 2;

/// Consumer-side state of one partition's generation.
enum Feed<F> {
    NotStarted(F),
    Running { rx: mpsc::Receiver<Result<RecordBatch>>, producer: JoinHandle<()> },
    Finished,
}

fn start_producer<F>(make: F) -> (mpsc::Receiver<Result<RecordBatch>>, JoinHandle<()>)
where
    F: FnOnce() -> Batches + Send + 'static,
{
    let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
    let producer = tokio::task::spawn_blocking(move || {
        for item in make() {
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

/// The batches `make` produces, generated on the blocking pool; `what` names the
/// generator in the error a panic becomes.
fn generate<F>(what: &'static str, make: F) -> impl Stream<Item = Result<RecordBatch>> + Send + 'static
where
    F: FnOnce() -> Batches + Send + 'static,
{
    futures::stream::unfold(Feed::NotStarted(make), move |feed| async move {
        let (mut rx, producer) = match feed {
            Feed::NotStarted(make) => start_producer(make),
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
            Err(e) => Some((Err(exec_datafusion_err!("{what} generator task failed: {e}")), Feed::Finished)),
        }
    })
    // Unfold panics if polled after it ended; some consumers poll once more.
    .fuse()
}

/// A generator's batches as `Batches`.
pub fn boxed(batches: impl Iterator<Item = std::result::Result<RecordBatch, ArrowError>> + Send + 'static) -> Batches {
    Box::new(batches.map(|b| b.map_err(Into::into)))
}

/// `batches` with only the columns of `projection`, when there is one.
fn projected(batches: Batches, projection: Option<Vec<usize>>) -> Batches {
    match projection {
        None => batches,
        Some(indices) => Box::new(batches.map(move |batch| Ok(batch?.project(&indices)?))),
    }
}

/// `batches` cast and renamed to `schema` (of the same columns), when there is one.
fn spelled_as(batches: Batches, schema: Option<SchemaRef>) -> Batches {
    let Some(schema) = schema else { return batches };
    Box::new(batches.map(move |batch| {
        let batch = batch?;
        let columns = batch
            .columns()
            .iter()
            .zip(schema.fields())
            .map(|(column, field)| match column.data_type() == field.data_type() {
                true => Ok(Arc::clone(column)),
                false => datafusion::arrow::compute::cast(column, field.data_type()),
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        // With the row count: a projection may keep no column (`count(*)`).
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(Arc::clone(&schema), columns, &options)?)
    }))
}
