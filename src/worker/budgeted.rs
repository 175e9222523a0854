//! `BudgetedExec`: spends tokio's cooperative budget for each batch an operator
//! returns, so that an operator looping over its input yields to the runtime every
//! so often, which is when a cancelled task's abort lands. The task puts one over
//! every operator of its plan (`worker::task`).
//!
//! Why not DataFusion's `CooperativeExec`: it takes its unit of budget before asking
//! its input, so one poll going down through more of them than the budget holds
//! (128) always runs out of budget before it reaches a leaf, returns Pending, and
//! starts again from the top with a new budget: a 100-way join (two of them per join
//! level) never produced a row, and hung CI. This one pays after its input produced
//! a batch; when the budget is out it keeps the batch and hands it over at the next
//! poll, so every poll gets at least one level further up.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::plan_node::plan_node;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, RecordBatchStream, SendableRecordBatchStream,
};
use futures::{Stream, StreamExt};

/// Passes its input's batches on, paying a unit of the task's budget for each.
#[derive(Debug)]
pub struct BudgetedExec {
    input: Arc<dyn ExecutionPlan>,
}

impl BudgetedExec {
    pub fn new(input: Arc<dyn ExecutionPlan>) -> Self {
        BudgetedExec { input }
    }
}

/// `plan` with a `BudgetedExec` over each of its operators.
pub fn budgeted(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    use datafusion::common::tree_node::{Transformed, TreeNode};
    let wrapped = plan.transform_up(|node| {
        if (node.as_ref() as &dyn std::any::Any).is::<BudgetedExec>() {
            return Ok(Transformed::no(node));
        }
        Ok(Transformed::yes(Arc::new(BudgetedExec::new(node)) as Arc<dyn ExecutionPlan>))
    })?;
    Ok(wrapped.data)
}

impl DisplayAs for BudgetedExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "BudgetedExec")
    }
}

impl ExecutionPlan for BudgetedExec {
    plan_node!(
        unary "BudgetedExec",
        input: input,
        properties: input,
        rebuild: |_this, child| BudgetedExec::new(child)
    );

    fn execute(&self, partition: usize, context: Arc<TaskContext>) -> Result<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        Ok(Box::pin(BudgetedStream { input, held: None }))
    }
}

struct BudgetedStream {
    input: SendableRecordBatchStream,
    /// A batch produced when the budget was out, handed over at the next poll.
    held: Option<Result<RecordBatch>>,
}

impl Stream for BudgetedStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(item) = self.held.take() {
            return Poll::Ready(Some(item));
        }
        match self.input.poll_next_unpin(cx) {
            Poll::Ready(Some(item)) => match tokio::task::coop::poll_proceed(cx) {
                Poll::Ready(spent) => {
                    spent.made_progress();
                    Poll::Ready(Some(item))
                }
                // The budget is out: tokio wakes the task once it has yielded.
                Poll::Pending => {
                    self.held = Some(item);
                    Poll::Pending
                }
            },
            other => other,
        }
    }
}

impl RecordBatchStream for BudgetedStream {
    fn schema(&self) -> SchemaRef {
        self.input.schema()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_plan::stream::RecordBatchStreamAdapter;

    fn batches(schema: &SchemaRef, n: i64) -> SendableRecordBatchStream {
        let items: Vec<Result<RecordBatch>> = (0..n)
            .map(|b| Ok(RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![b]))]).unwrap()))
            .collect();
        Box::pin(RecordBatchStreamAdapter::new(schema.clone(), futures::stream::iter(items)))
    }

    /// 300 levels, more than tokio's budget of 128 a poll: every batch still comes
    /// up, in order, and the task yields to the runtime on the way.
    #[tokio::test]
    async fn a_stack_deeper_than_the_budget_passes_every_batch_on() {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let mut stream = batches(&schema, 50);
        for _ in 0..300 {
            stream = Box::pin(BudgetedStream { input: stream, held: None });
        }
        let polls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = polls.clone();
        let mut out = Vec::new();
        let values = std::future::poll_fn(move |cx| {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            loop {
                match stream.poll_next_unpin(cx) {
                    Poll::Ready(Some(b)) => {
                        let b = b.unwrap();
                        out.push(b.column(0).as_any().downcast_ref::<Int64Array>().unwrap().value(0));
                    }
                    Poll::Ready(None) => return Poll::Ready(std::mem::take(&mut out)),
                    Poll::Pending => return Poll::Pending,
                }
            }
        });
        let values = tokio::time::timeout(std::time::Duration::from_secs(10), values).await.expect("no livelock");
        assert_eq!(values, (0..50).collect::<Vec<i64>>());
        assert!(polls.load(std::sync::atomic::Ordering::Relaxed) > 1, "the budget made the task yield");
    }
}
