//! `RemoteSourceExec`: the leaf the fragmenter puts where it cut a plan. Executing
//! partition `p` reads, through an `ExchangeClient`, the buffers of the upstream stage
//! that hold that partition's rows. Which buffers those are follows from the exchange
//! mode and the upstream task locations, which a `SourceResolver` supplies: the worker
//! task (locations arrive in task updates) or the coordinator's root stage.

use datafusion::common::{exec_err, internal_datafusion_err, internal_err};
use std::fmt;
use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties, SendableRecordBatchStream,
};
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use serde::{Deserialize, Serialize};

use super::client::{ExchangeClient, ExchangeSource};
use std::collections::HashMap;
use tokio::sync::watch;

use crate::plan_node::plan_node;
use crate::protocol::{SourceUpdate, UpstreamTask};

/// How consumer partitions map onto upstream buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExchangeMode {
    /// Partition `p` reads buffer `p` of every upstream task (hash or round robin).
    Repartition,
    /// Every partition (usually one) reads the buffer numbered by this task's index
    /// from every upstream task: each consumer task sees all rows.
    Broadcast,
    /// Partition `p` reads buffer `p` of the one upstream task that ran fragment
    /// partition `p`, keeping partitions apart for a sort-preserving merge.
    Passthrough,
}

impl fmt::Display for ExchangeMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ExchangeMode::Repartition => "repartition",
            ExchangeMode::Broadcast => "broadcast",
            ExchangeMode::Passthrough => "passthrough",
        })
    }
}

/// Supplies upstream locations to remote sources of one running fragment.
pub trait SourceResolver: fmt::Debug + Send + Sync {
    /// This task's index in its stage.
    fn task_index(&self) -> usize;
    /// All tasks of upstream `stage`, once the coordinator has said there are no more.
    fn locations(&self, stage: usize) -> BoxFuture<'static, Result<Vec<UpstreamTask>>>;
    fn exchange_client(&self) -> ExchangeClient;
}

/// The usual resolver: locations per upstream stage in a `watch` map, filled by task
/// updates (worker) or by the scheduler directly (coordinator root stage).
#[derive(Debug)]
pub struct SourceLocations {
    task_index: usize,
    sources: watch::Sender<HashMap<usize, SourceUpdate>>,
    client: ExchangeClient,
}

impl SourceLocations {
    pub fn new(task_index: usize, client: ExchangeClient) -> Self {
        let (sources, _) = watch::channel(HashMap::new());
        SourceLocations { task_index, sources, client }
    }

    /// Adds locations; an update of a stage already complete is ignored.
    pub fn add(&self, updates: Vec<SourceUpdate>) {
        if updates.is_empty() {
            return;
        }
        self.sources.send_modify(|map| {
            for u in updates {
                let complete = map.get(&u.stage).map(|s| s.no_more).unwrap_or(false);
                if !complete {
                    map.insert(u.stage, u);
                }
            }
        });
    }
}

impl SourceResolver for SourceLocations {
    fn task_index(&self) -> usize {
        self.task_index
    }

    fn locations(&self, stage: usize) -> BoxFuture<'static, Result<Vec<UpstreamTask>>> {
        let mut rx = self.sources.subscribe();
        Box::pin(async move {
            loop {
                if let Some(update) = rx.borrow_and_update().get(&stage) {
                    if update.no_more {
                        return Ok(update.tasks.clone());
                    }
                }
                if rx.changed().await.is_err() {
                    return exec_err!("task ended before locations of stage {stage} arrived");
                }
            }
        })
    }

    fn exchange_client(&self) -> ExchangeClient {
        self.client.clone()
    }
}

/// Gives every `RemoteSourceExec` in `plan` the resolver.
pub fn attach_resolver(
    plan: Arc<dyn ExecutionPlan>,
    resolver: &Arc<dyn SourceResolver>,
) -> Result<Arc<dyn ExecutionPlan>> {
    if let Some(rs) = (plan.as_ref() as &dyn std::any::Any).downcast_ref::<RemoteSourceExec>() {
        return Ok(Arc::new(rs.clone().with_resolver(resolver.clone())));
    }
    let children: Vec<Arc<dyn ExecutionPlan>> = plan.children().into_iter().cloned().collect();
    if children.is_empty() {
        return Ok(plan);
    }
    let new_children = children.into_iter().map(|c| attach_resolver(c, resolver)).collect::<Result<Vec<_>>>()?;
    #[allow(deprecated)]
    plan.with_new_children(new_children)
}

#[derive(Debug, Clone)]
pub struct RemoteSourceExec {
    stage: usize,
    mode: ExchangeMode,
    partitions: usize,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    resolver: Option<Arc<dyn SourceResolver>>,
}

impl RemoteSourceExec {
    pub fn new(stage: usize, mode: ExchangeMode, partitions: usize, schema: SchemaRef) -> Self {
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema.clone()),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        RemoteSourceExec { stage, mode, partitions, schema, properties, resolver: None }
    }

    /// The same source declaring `partitioning` for the rows it reads: the hash
    /// partitioning of the repartition it stands in for, or its producer's own when
    /// partitions pass through unchanged. Parents that check their children's
    /// partitioning when they are rebuilt (DataFusion's `InterleaveExec` under a
    /// `UNION ALL` of inputs hash-partitioned alike) see after the cut what they saw
    /// before it. A partitioning of another partition count is not the rows' and is
    /// ignored.
    pub fn with_partitioning(mut self, partitioning: Partitioning) -> Self {
        if partitioning.partition_count() == self.partitions {
            let mut properties = (*self.properties).clone();
            properties.partitioning = partitioning;
            self.properties = Arc::new(properties);
        }
        self
    }

    /// The partitioning it declares (`with_partitioning`).
    pub fn partitioning(&self) -> &Partitioning {
        &self.properties.partitioning
    }

    pub fn with_resolver(mut self, resolver: Arc<dyn SourceResolver>) -> Self {
        self.resolver = Some(resolver);
        self
    }

    pub fn stage(&self) -> usize {
        self.stage
    }

    pub fn mode(&self) -> ExchangeMode {
        self.mode
    }

    pub fn partitions(&self) -> usize {
        self.partitions
    }
}

/// The upstream buffers that consumer partition `partition` of task `task_index` reads.
pub fn sources_for_partition(
    mode: ExchangeMode,
    partition: usize,
    task_index: usize,
    upstream: &[UpstreamTask],
) -> Vec<ExchangeSource> {
    let source =
        |t: &UpstreamTask, buffer: usize| ExchangeSource { task_id: t.task_id.clone(), url: t.url.clone(), buffer };
    match mode {
        ExchangeMode::Repartition => upstream.iter().map(|t| source(t, partition)).collect(),
        ExchangeMode::Broadcast => upstream.iter().map(|t| source(t, task_index)).collect(),
        ExchangeMode::Passthrough => {
            upstream.iter().filter(|t| t.partitions.contains(&partition)).map(|t| source(t, partition)).collect()
        }
    }
}

impl DisplayAs for RemoteSourceExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "RemoteSourceExec: stage={}, mode={}, partitions={}", self.stage, self.mode, self.partitions)
    }
}

impl ExecutionPlan for RemoteSourceExec {
    plan_node!(leaf "RemoteSourceExec");

    fn execute(&self, partition: usize, _context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        if partition >= self.partitions {
            return internal_err!(
                "RemoteSourceExec of stage {} has {} partitions, asked for {partition}",
                self.stage,
                self.partitions
            );
        }
        let resolver = self.resolver.clone().ok_or_else(|| {
            internal_datafusion_err!("RemoteSourceExec of stage {} has no source resolver", self.stage)
        })?;
        let (stage, mode, schema) = (self.stage, self.mode, self.schema.clone());
        let stream_schema = schema.clone();
        let stream = futures::stream::once(async move {
            let upstream = resolver.locations(stage).await?;
            let sources = sources_for_partition(mode, partition, resolver.task_index(), &upstream);
            Ok::<_, DataFusionError>(resolver.exchange_client().stream(schema, sources))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(stream_schema, stream.boxed())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::TaskId;

    fn upstream() -> Vec<UpstreamTask> {
        (0..2)
            .map(|t| UpstreamTask {
                task_id: TaskId::new("q", 1, t, 0),
                url: format!("http://w{t}"),
                partitions: if t == 0 { vec![0, 1] } else { vec![2, 3] },
            })
            .collect()
    }

    #[test]
    fn repartition_reads_the_same_buffer_of_every_upstream_task() {
        let s = sources_for_partition(ExchangeMode::Repartition, 3, 9, &upstream());
        assert_eq!(s.len(), 2);
        assert!(s.iter().all(|s| s.buffer == 3));
    }

    #[test]
    fn broadcast_reads_the_buffer_of_this_task() {
        let s = sources_for_partition(ExchangeMode::Broadcast, 0, 1, &upstream());
        assert_eq!(s.len(), 2);
        assert!(s.iter().all(|s| s.buffer == 1));
    }

    #[test]
    fn passthrough_reads_only_the_task_owning_the_partition() {
        let s = sources_for_partition(ExchangeMode::Passthrough, 2, 0, &upstream());
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].url, "http://w1");
        assert_eq!(s[0].buffer, 2);
    }
}
