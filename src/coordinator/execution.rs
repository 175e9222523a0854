//! Running one query to a final state: plan the SQL, cut the plan into fragments,
//! drive the `PipelinedQueryScheduler` (or, under `retry_policy=task`, the
//! `FaultTolerantQueryScheduler`) for the worker stages and run the root stage here,
//! streaming its batches into the query's results channel; retry the whole query
//! under `retry_policy=query`. Whatever way the query ends, every task of it is
//! deleted from every worker before the query reaches a final state. Spawned, and
//! supervised, by the coordinator for each submitted query.

use crate::error_code::ErrorCode;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::RecordBatch;
use datafusion::physical_plan::ExecutionPlan;
use futures::StreamExt;

use super::planner::{planning_error, session_context, QueryError, SessionSpec};
use super::planning::Planned;
use super::query_errors::{root_error, task_failure_error};
use super::remote_task::HttpRemoteTaskFactory;
use super::root_stage::SpooledRootStage;
use super::CoordinatorState;
use crate::cluster::node_manager::NodeManager;
use crate::codec::FlotillaCodec;
use crate::config::{ExecutionPolicy, RetryPolicy, SessionProperties};
use crate::exchange::client::ExchangeClient;
use crate::exchange::remote_source::{attach_resolver, SourceLocations, SourceResolver};
use crate::plan::dynamic_filter::{self, dynamic_filters};
use crate::plan::fragmenter::FragmentedPlan;
use crate::protocol::SourceUpdate;
use crate::scheduling::fault_tolerant::{FaultTolerantQueryScheduler, RetryLimits};
use crate::scheduling::phased::{AllAtOnceExecutionSchedule, ExecutionSchedule, PhasedExecutionSchedule};
use crate::scheduling::pipelined::{
    query_failure, PipelinedFailure, PipelinedQueryScheduler, QueryFailure, RootSourceSink, SchedulerError,
    SchedulerSettings, StageExecution,
};
use crate::scheduling::remote_task::delete_all;
use crate::scheduling::state_machine::QueryState;

use super::query::QueryExecution;

impl RootSourceSink for SourceLocations {
    fn add_source(&self, update: SourceUpdate) {
        self.add(vec![update]);
    }
}

/// Runs the query to a final state.
pub async fn run_query(coord: Arc<CoordinatorState>, q: Arc<QueryExecution>) {
    // QUEUED until a slot frees (query.max-concurrent-queries); held to the end.
    let admitted = tokio::select! {
        slot = coord.admission.admit() => slot,
        _ = q.cancelled() => Err(q.stop_reason()),
    };
    let _slot = match admitted {
        Ok(slot) => slot,
        Err(e) => {
            q.fail(e);
            return;
        }
    };
    let outcome = match prepare_run(&coord, &q) {
        Ok(run) => {
            let limit = run.props.query_max_memory.or(coord.config.query_max_memory).unwrap_or(0);
            q.memory_limit.store(limit, std::sync::atomic::Ordering::Relaxed);
            run_attempts(&coord, &q, &run).await
        }
        Err(e) => Err(e),
    };
    // A write's staged files go whatever the outcome; its tasks are gone by now.
    let writes: Vec<_> = std::mem::take(&mut q.progress().writes);
    // A row-level change that failed reading what a concurrent change replaced
    // failed as a conflict (a cancel stays a cancel).
    let outcome = match outcome {
        Err(e) if !matches!(e.error_name.known(), Some(ErrorCode::UserCanceled | ErrorCode::AbandonedQuery)) => {
            let mut outcome = Err(e);
            for w in &writes {
                if let Some(conflict) = w.conflict().await {
                    outcome = Err(conflict);
                }
            }
            outcome
        }
        other => other,
    };
    let mut made_tables = false;
    for w in writes {
        w.finish().await;
        made_tables |= w.update_count().is_some() && w.creates_table();
    }
    // A view over a table of that name, stale until now, reads the new one.
    if made_tables {
        super::ddl::rebind_views(&coord.connectors).await;
    }
    match outcome {
        Ok(()) => {
            q.transition(QueryState::Finishing);
            q.transition(QueryState::Finished);
        }
        Err(e) => q.fail(e),
    }
    crate::metrics::QUERY_LATENCY.observe(q.elapsed().as_secs_f64());
}

/// Session properties are parsed and checked once, here; a bad one fails the query.
fn prepare_run(coord: &CoordinatorState, q: &QueryExecution) -> Result<Run, QueryError> {
    let mut properties = q.session.properties.clone();
    for (k, v) in &coord.config.session_defaults {
        properties.entry(k.clone()).or_insert_with(|| v.clone());
    }
    let inject_panic = properties.remove(INJECT_RUNNER_PANIC).is_some() && coord.config.enable_failure_injection;
    let props =
        SessionProperties::parse(&properties).map_err(|m| QueryError::new(ErrorCode::InvalidSessionProperty, m))?;
    // The client's zone (`X-Trino-Time-Zone`) is checked as `SET TIME ZONE`'s is:
    // DataFusion would take any text and `current_timezone()` answer it.
    if let Some(zone) = &q.session.time_zone {
        crate::config::time_zone(zone).map_err(|m| QueryError::new(ErrorCode::NotSupported, m))?;
    }
    Ok(Run { props, session: properties, inject_panic })
}

/// Runs the query, again under retry_policy=query, until an attempt's outcome is final.
async fn run_attempts(coord: &Arc<CoordinatorState>, q: &Arc<QueryExecution>, run: &Run) -> Result<(), QueryError> {
    // retry_policy=query: a retryable failure before any row reached the client runs
    // the whole query again, a bounded number of times.
    let attempts = match run.props.retry_policy {
        RetryPolicy::Query => run.props.query_retry_attempts.saturating_add(1),
        _ => 1,
    };
    let mut attempt = 0;
    loop {
        // A stop wins over an attempt that ends in the same poll: an abandoned or
        // cancelled query ends with its reason, never as FINISHED.
        let outcome = tokio::select! {
            biased;
            _ = q.cancelled() => Err(q.stop_reason()),
            r = execute(coord, q, run, attempt) => r,
        };
        // Tasks are deleted inside `execute` on every path it finishes; a cancel that
        // dropped it mid-way leaves the stages' tasks, which are removed here.
        if outcome.is_err() {
            remove_stage_tasks(&coord.nodes, q).await;
        }
        match outcome {
            // A write whose publishing began may have put rows in the table: never again.
            Err(e)
                if attempt + 1 < attempts
                    && e.is_retryable()
                    && q.output_rows() == 0
                    && !*q.cancel.borrow()
                    && !q.progress().writes.iter().any(|w| w.commit_started()) =>
            {
                tracing::warn!(query = %q.id, attempt, "query attempt failed, retrying: {e}");
                attempt += 1;
                q.retries.fetch_add(1, Ordering::Relaxed);
                // Give the node manager time to notice a lost worker before replanning.
                tokio::time::sleep(Duration::from_millis(500 * attempt as u64)).await;
            }
            other => return other,
        }
    }
}

/// The runner of `q` panicked: the query fails and its tasks go.
pub(crate) async fn fail_after_runner_died(nodes: &NodeManager, q: &Arc<QueryExecution>, why: String) {
    q.fail(QueryError::new(ErrorCode::GenericInternalError, why));
    remove_stage_tasks(nodes, q).await;
}

/// Session property that makes the runner panic once rows flow, on a coordinator
/// started with `--enable-failure-injection` (tests only).
pub const INJECT_RUNNER_PANIC: &str = "test_inject_runner_panic";

/// Deletes every task of the query, not waiting on workers that are lost.
async fn remove_stage_tasks(nodes: &NodeManager, q: &QueryExecution) {
    let tasks = q.stages().into_iter().flat_map(|s| s.tasks()).collect();
    delete_all(tasks, true, |w| !nodes.is_alive(&w.node_id)).await;
}

/// What every attempt of a query shares.
struct Run {
    props: SessionProperties,
    /// The properties as the client set them, forwarded to workers (test hooks removed).
    session: std::collections::BTreeMap<String, String>,
    /// Test hook: panic once rows flow (`INJECT_RUNNER_PANIC`).
    inject_panic: bool,
}

/// One attempt at the query: the statement is parsed once (`sql_parser`) and
/// dispatched on its kind, as Trino maps a statement's class to its task
/// (`DataDefinitionExecution` for those answered here, `SqlQueryExecution` for
/// those planned and run).
async fn execute(
    coord: &Arc<CoordinatorState>,
    q: &Arc<QueryExecution>,
    run: &Run,
    attempt: usize,
) -> Result<(), QueryError> {
    use super::planning::Purpose;
    use super::sql_parser::Statement;
    q.transition(QueryState::Planning);
    let props = &run.props;
    let workers = coord.nodes.live_workers();
    super::session_bounds::check(props, &coord.cluster_memory.capacities(&workers))?;
    let partitions = props.hash_partition_count.unwrap_or(workers.len().max(1) * coord.config.partitions_per_worker);
    let ctx = query_context(coord, &q.session, props, partitions);
    let access = access_check(coord, &q.session.user);
    let statement = super::sql_parser::parse(&q.sql, &q.session.prepared)?;
    // A statement in a transaction names one that is open (ending one checks itself).
    let ends_or_starts = matches!(&statement, Statement::Session(s) if s.is_transaction_control());
    if let (Some(id), false) = (&q.session.transaction, ends_or_starts) {
        coord.transactions.touch(id, std::time::Instant::now())?;
    }
    let (sql, purpose) = match statement {
        Statement::Prepare { name, statement } => {
            let header = format!("{name}={}", super::session_statement::form_encode(&statement));
            return answer_with_headers(q, vec![("x-trino-added-prepare", header)], "PREPARE");
        }
        Statement::Deallocate { name } => {
            return answer_with_headers(q, vec![("x-trino-deallocated-prepare", name)], "DEALLOCATE");
        }
        Statement::Session(stmt) => {
            let changes = stmt.changes(&ctx, &q.session, &coord.transactions)?;
            return answer_with_headers(q, changes, stmt.update_type());
        }
        Statement::Metadata(stmt) => {
            let batch = super::metadata::run(&ctx, &coord.connectors, &q.session, &stmt, access.as_ref()).await?;
            return emit_answer(q, batch).await;
        }
        Statement::ShowStats(target) => (target.query(), Purpose::ShowStats),
        Statement::Explain(e) => (e.statement, Purpose::Explain(e.kind, e.format)),
        Statement::DescribePrepared { output, statement } => {
            let purpose = if output { Purpose::DescribeOutput } else { Purpose::DescribeInput };
            (super::sql_parser::numbered_parameters(&statement)?, purpose)
        }
        Statement::Planned(sql) => (sql, Purpose::Run),
    };
    let request = super::planning::PlanRequest {
        ctx: ctx.clone(),
        connectors: coord.connectors.clone(),
        access,
        query_id: q.id.to_string(),
        workers: workers.len(),
        single_task_max_rows: usize::try_from(props.single_task_max_rows).unwrap_or(usize::MAX),
        dynamic_filtering: props.runs_dynamic_filters(),
        in_transaction: q.session.transaction.is_some(),
        user: q.session.user.clone(),
        purpose,
    };
    let planned = super::planning::plan(request, sql, props.query_max_planning_time).await?;
    execute_planned(coord, q, run, attempt, ctx, workers, planned).await
}

/// A statement answered by the headers that change the client's session.
fn answer_with_headers(
    q: &QueryExecution,
    changes: Vec<super::session_statement::SessionChange>,
    update_type: &'static str,
) -> Result<(), QueryError> {
    {
        let mut p = q.progress();
        p.session_changes = changes;
        p.update_type = Some(update_type);
    }
    q.transition(QueryState::Starting);
    q.transition(QueryState::Running);
    Ok(())
}

/// The planning context of a query of `session`: the coordinator's catalogs and
/// Trino's `system` catalog over what the session's user may see.
pub(super) fn query_context(
    coord: &Arc<CoordinatorState>,
    session: &SessionSpec,
    props: &crate::config::SessionProperties,
    partitions: usize,
) -> datafusion::prelude::SessionContext {
    let ctx = session_context(session, props, partitions, &coord.connectors);
    let system = super::system_tables::CoordinatorSystem::new(coord, &session.user);
    let system = crate::connector::system::SystemCatalog::new(Arc::new(system));
    let system = crate::connector::information_schema::WithInformationSchema::new("system", Arc::new(system));
    ctx.register_catalog(crate::connector::system::SYSTEM_CATALOG, Arc::new(system));
    ctx
}

/// The access rules as they apply to `user`, when there are rules.
pub(super) fn access_check(coord: &CoordinatorState, user: &str) -> Option<super::planning::AccessCheck> {
    coord.config.security.rules.as_ref().map(|r| {
        let who = r.identity(user);
        super::planning::AccessCheck { rules: r.clone(), who }
    })
}

/// A planned statement: an `EXPLAIN`'s text, a plan run here (metadata and constant
/// queries need no workers), or the distributed plan run by a scheduler.
async fn execute_planned(
    coord: &Arc<CoordinatorState>,
    q: &Arc<QueryExecution>,
    run: &Run,
    attempt: usize,
    ctx: datafusion::prelude::SessionContext,
    workers: Vec<crate::cluster::node_manager::WorkerNode>,
    planned: Planned,
) -> Result<(), QueryError> {
    let (physical, fragments, analyze) = match planned {
        Planned::Answer(batch) => return emit_answer(q, batch).await,
        Planned::Done(update_type) => {
            q.progress().update_type = Some(update_type);
            q.transition(QueryState::Starting);
            q.transition(QueryState::Running);
            return Ok(());
        }
        Planned::Query { physical, fragments, analyze, write } => {
            if let Some(w) = write {
                let mut p = q.progress();
                p.writes.push(w.clone());
                p.update = Some(w);
            }
            (physical, fragments, analyze)
        }
    };
    if !analyze {
        q.progress().schema = Some(physical.schema());
    }
    let Some(fragmented) = fragments else {
        return execute_here(q, physical, &ctx).await;
    };
    if workers.is_empty() {
        return Err(QueryError::new(
            ErrorCode::NoNodesAvailable,
            "no live workers: start one with `flotilla worker --coordinator <coordinator url>`",
        ));
    }
    q.nodes.store(workers.len() as u64, Ordering::Relaxed);
    q.progress().fragments = Some(fragmented.clone());
    let props = &run.props;
    let exchange = coord.exchange_config(props);
    let settings = SchedulerSettings {
        query_id: q.id.clone(),
        attempt,
        remote_tasks: Arc::new(HttpRemoteTaskFactory {
            http: coord.http.clone(),
            max_error_duration: exchange.max_error_duration,
            nodes: Some(coord.nodes.clone()),
        }),
        codec: FlotillaCodec::new(coord.connectors.clone()),
        workers,
        node_scheduler: coord.node_scheduler.clone(),
        session: run.session.clone(),
        nodes: Some(coord.nodes.clone()),
        tick: crate::scheduling::pipelined::IDLE_TICK,
    };
    if props.retry_policy == RetryPolicy::Task {
        let limits = RetryLimits::from_properties(props, coord.config.partitions_per_worker);
        let root = Arc::new(SpooledRootStage::new(
            q.clone(),
            fragmented.root().plan.clone(),
            ctx.task_ctx(),
            coord.exchange_http.clone(),
            exchange,
            analyze,
        ));
        return execute_fault_tolerant(q, limits, fragmented, settings, root, analyze).await;
    }
    let client = ExchangeClient::new(coord.exchange_http.clone(), exchange, q.root_input.clone());
    execute_pipelined(q, run, fragmented, settings, client, &ctx, analyze).await
}

/// A plan with no stage for workers, run on this node's compute runtime like every
/// other execution: a constant query can be big (`range(1e11)`), and must not starve
/// the control plane.
async fn execute_here(
    q: &QueryExecution,
    physical: Arc<dyn ExecutionPlan>,
    ctx: &datafusion::prelude::SessionContext,
) -> Result<(), QueryError> {
    q.transition(QueryState::Starting);
    q.transition(QueryState::Running);
    let mut stream = crate::runtime::execute_on_compute(physical, ctx.task_ctx());
    while let Some(b) = stream.next().await {
        let b = b.map_err(|e| root_error(&e))?;
        if !q.emit(b).await {
            break;
        }
    }
    q.mark_output_complete();
    Ok(())
}

/// retry_policy=none or query: the `PipelinedQueryScheduler` runs the worker stages
/// phase by phase, the root stage runs here; tasks are removed before it returns.
async fn execute_pipelined(
    q: &Arc<QueryExecution>,
    run: &Run,
    fragmented: Arc<FragmentedPlan>,
    settings: SchedulerSettings,
    client: ExchangeClient,
    ctx: &datafusion::prelude::SessionContext,
    analyze: bool,
) -> Result<(), QueryError> {
    let props = &run.props;
    let stage_ids = fragmented.worker_stages();
    let filters = match props.runs_dynamic_filters() {
        true => dynamic_filters(&fragmented),
        false => Vec::new(),
    };
    let schedule: Box<dyn ExecutionSchedule> = match props.execution_policy {
        ExecutionPolicy::AllAtOnce => Box::new(AllAtOnceExecutionSchedule::new(&stage_ids)),
        ExecutionPolicy::Phased => Box::new(
            PhasedExecutionSchedule::new(&stage_ids, &dynamic_filter::dependencies(&fragmented, &filters))
                .map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))?,
        ),
    };
    let sources = Arc::new(SourceLocations::new(0, client));
    let mut scheduler = PipelinedQueryScheduler::new(settings, fragmented.clone(), schedule, sources.clone())
        .with_dynamic_filters(filters);
    q.progress().stages = scheduler.stages();
    q.transition(QueryState::Starting);
    let resolver: Arc<dyn SourceResolver> = sources;
    let root = attach_resolver(fragmented.root().plan.clone(), &resolver).map_err(|e| planning_error(&e))?;
    let outcome = run_stages(q, &mut scheduler, root, ctx, analyze, run.inject_panic).await;
    if outcome.is_ok() && !analyze && q.progress().writes.is_empty() {
        // Every row is at the root: the client may have its last page while the tasks
        // are removed, a round trip to each worker (0.3 to 0.7 ms of a query of 30 ms
        // on loopback), as Trino answers before its tasks are cleaned up. The stages
        // are settled first, so that query info reads final. A write keeps the order
        // below: its commit comes after its tasks are gone.
        scheduler.settle_stages(false);
        tokio::spawn(async move { scheduler.remove_all_tasks(false).await });
        return Ok(());
    }
    let aborting = outcome.is_err();
    let reported = scheduler.remove_all_tasks(aborting).await;
    // After the removal: each task's last status came with its delete, its
    // statistics final.
    let analysis = analyze.then(|| explain_analyze(&fragmented, &scheduler.stages(), q.elapsed()));
    match outcome {
        Ok(rows) => match analysis {
            Some(text) => emit_text(q, "Query Plan", format!("Output: {rows} rows\n\n{text}")).await,
            None => Ok(()),
        },
        Err(failure) => Err(match query_failure(failure, reported) {
            QueryFailure::Task(best) => task_failure_error(&best),
            QueryFailure::RemoteTask(e) => QueryError::new(e.error_code(), e.to_string()),
            QueryFailure::Scheduler(e) => QueryError::new(ErrorCode::RemoteTaskError, e.to_string()),
            QueryFailure::Root(e) => e,
        }),
    }
}

/// retry_policy=task: the `FaultTolerantQueryScheduler` runs every stage, the root
/// included, recomputing what fails.
async fn execute_fault_tolerant(
    q: &Arc<QueryExecution>,
    limits: RetryLimits,
    fragmented: Arc<FragmentedPlan>,
    settings: SchedulerSettings,
    root: Arc<SpooledRootStage>,
    analyze: bool,
) -> Result<(), QueryError> {
    let mut scheduler = FaultTolerantQueryScheduler::new(settings, limits, fragmented.clone())
        .map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))?;
    q.progress().stages = scheduler.stages();
    q.progress().graph = Some(scheduler.display());
    q.transition(QueryState::Starting);
    let outcome = scheduler.run(root.clone()).await;
    let analysis = analyze.then(|| explain_analyze(&fragmented, &scheduler.stages(), q.elapsed()));
    scheduler.remove_all_tasks(outcome.is_err()).await;
    match outcome {
        Ok(()) => match analysis {
            Some(text) => emit_text(q, "Query Plan", format!("Output: {} rows\n\n{text}", root.rows())).await,
            None => Ok(()),
        },
        Err(SchedulerError::TaskFailed(report)) => Err(task_failure_error(&report)),
        Err(SchedulerError::Root(e)) => Err(e),
        Err(e @ SchedulerError::NoWorkers(_)) => Err(QueryError::new(ErrorCode::NoNodesAvailable, e.to_string())),
        Err(e) => Err(QueryError::new(ErrorCode::GenericInternalError, e.to_string())),
    }
}

type RunFailure = PipelinedFailure<QueryError>;

/// Runs the worker stages and the root stage together until the root has all rows
/// (`PipelinedQueryScheduler::run_with_root`); returns the number of rows. With
/// `analyze` the rows are counted, not kept.
async fn run_stages(
    q: &Arc<QueryExecution>,
    scheduler: &mut PipelinedQueryScheduler,
    root: Arc<dyn ExecutionPlan>,
    ctx: &datafusion::prelude::SessionContext,
    analyze: bool,
    inject_panic: bool,
) -> Result<u64, RunFailure> {
    let task_ctx = ctx.task_ctx();
    let pump = async {
        let mut stream = crate::runtime::execute_on_compute(root, task_ctx);
        q.transition(QueryState::Running);
        let mut rows = 0u64;
        while let Some(batch) = stream.next().await {
            let batch = batch.map_err(|e| RunFailure::Root(root_error(&e)))?;
            assert!(!inject_panic, "injected panic in the runner of query {}", q.id);
            rows += batch.num_rows() as u64;
            if !analyze && !q.emit(batch).await {
                break;
            }
        }
        if !analyze {
            q.mark_output_complete();
        }
        Ok::<u64, RunFailure>(rows)
    };
    scheduler.run_with_root(pump).await
}

/// EXPLAIN ANALYZE's report: each stage with its tasks' rows, bytes and times.
fn explain_analyze(plan: &FragmentedPlan, stages: &[Arc<StageExecution>], elapsed: Duration) -> String {
    use std::fmt::Write;
    let mut out = format!("Query elapsed: {:.3}s\n", elapsed.as_secs_f64());
    let _ = writeln!(
        out,
        "Fragment 0 [coordinator] reads {}",
        plan.root().inputs.iter().map(|i| format!("stage {i}")).collect::<Vec<_>>().join(", ")
    );
    for s in stages.iter().rev() {
        let info = s.info();
        let (rows_in, bytes_in, rows_out, bytes_out) = info.tasks.iter().fold((0, 0, 0, 0), |a, t| {
            (a.0 + t.stats.input_rows, a.1 + t.stats.input_bytes, a.2 + t.stats.output_rows, a.3 + t.stats.output_bytes)
        });
        let _ = writeln!(
            out,
            "Fragment {} [{}] {} tasks, {} partitions: input {rows_in} rows / {bytes_in} B, output {rows_out} rows / {bytes_out} B, memory peak {} B, spilled {} B",
            info.stage,
            format!("{:?}", info.state).to_uppercase(),
            info.task_count,
            info.partitions,
            info.memory.peak_bytes,
            info.memory.spilled_bytes
        );
        if let Some(change) = &info.adaptive {
            let _ = writeln!(out, "    {change}");
        }
        for t in &info.tasks {
            let _ = writeln!(
                out,
                "    task {} on {} {}: input {} rows / {} B, output {} rows / {} B, {} ms, memory peak {} B, spilled {} B",
                t.task_id,
                t.node_id,
                format!("{:?}", t.state).to_uppercase(),
                t.stats.input_rows,
                t.stats.input_bytes,
                t.stats.output_rows,
                t.stats.output_bytes,
                t.stats.elapsed_ms,
                t.stats.memory_peak_bytes,
                t.stats.spilled_bytes
            );
        }
    }
    out
}

/// Rows answered without running a plan: one batch, then the end.
async fn emit_answer(q: &QueryExecution, batch: RecordBatch) -> Result<(), QueryError> {
    q.progress().schema = Some(batch.schema());
    q.transition(QueryState::Starting);
    q.transition(QueryState::Running);
    q.mark_output_complete();
    q.emit(batch).await;
    Ok(())
}

/// One row of text in one column (`EXPLAIN ANALYZE`'s report).
async fn emit_text(q: &QueryExecution, column: &str, text: String) -> Result<(), QueryError> {
    use datafusion::arrow::array::StringArray;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    let schema = Arc::new(Schema::new(vec![Field::new(column, DataType::Utf8, false)]));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(vec![text]))])
        .map_err(|e| QueryError::new(ErrorCode::GenericInternalError, e.to_string()))?;
    emit_answer(q, batch).await
}
