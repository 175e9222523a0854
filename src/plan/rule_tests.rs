//! Test support for the logical rules (`join_order`, `semi_join`,
//! `semi_join_reduction`): a query planned and run over small tables without the
//! rule and with it.

use std::sync::Arc;

use datafusion::arrow::util::pretty::pretty_format_batches;
use datafusion::logical_expr::LogicalPlan;
use datafusion::optimizer::OptimizerRule;
use datafusion::prelude::SessionContext;

/// One run: the optimized plan and the answer as a printed table.
pub(crate) struct Run {
    pub plan: LogicalPlan,
    pub answer: String,
}

async fn run(setup: &[&str], rule: Option<Arc<dyn OptimizerRule + Send + Sync>>, sql: &str) -> Run {
    let ctx = SessionContext::new();
    if let Some(rule) = rule {
        ctx.add_optimizer_rule(rule);
    }
    for statement in setup {
        ctx.sql(statement).await.unwrap().collect().await.unwrap();
    }
    let df = ctx.sql(sql).await.unwrap();
    let plan = df.clone().into_optimized_plan().unwrap();
    let batches = df.collect().await.unwrap();
    Run { plan, answer: pretty_format_batches(&batches).unwrap().to_string() }
}

/// `sql` over the tables `setup` creates, by DataFusion alone and then with `rule`
/// after DataFusion's own rules.
pub(crate) async fn without_and_with(
    setup: &[&str],
    rule: Arc<dyn OptimizerRule + Send + Sync>,
    sql: &str,
) -> (Run, Run) {
    (run(setup, None, sql).await, run(setup, Some(rule), sql).await)
}

/// Asserts that `rule` leaves `sql`'s plan as DataFusion made it; returns that run.
pub(crate) async fn assert_untouched(setup: &[&str], rule: Arc<dyn OptimizerRule + Send + Sync>, sql: &str) -> Run {
    let (before, after) = without_and_with(setup, rule, sql).await;
    assert_eq!(after.plan.display_indent().to_string(), before.plan.display_indent().to_string(), "{sql}");
    assert_eq!(after.answer, before.answer, "{sql}");
    before
}

/// The rows `sql` answers in `ctx`, each as its printed line without spaces
/// (`|1|a|`), in the order they came; the analyzer rules' tests compare them with rows
/// worked out by hand.
pub(crate) async fn table_rows(ctx: &SessionContext, sql: &str) -> datafusion::common::Result<Vec<String>> {
    printed_rows(&ctx.sql(sql).await?.collect().await?)
}

/// `batches` as `table_rows` prints them.
pub(crate) fn printed_rows(
    batches: &[datafusion::arrow::record_batch::RecordBatch],
) -> datafusion::common::Result<Vec<String>> {
    let text = pretty_format_batches(batches)?.to_string();
    Ok(text.lines().skip(3).filter(|l| l.starts_with('|')).map(|l| l.split_whitespace().collect()).collect())
}
