//! `IGNORE NULLS` of window functions brought back after decoding. datafusion-proto 55
//! encodes a window function of `WindowUDF` kind (`first_value`, `last_value`,
//! `nth_value`, `lag`, `lead`) with `ignore_nulls` always false, since
//! `WindowUDFExpr` gives no way to read it; a window that ran on a worker then
//! answered `first_value(x) IGNORE NULLS OVER ()` as if the NULLs counted (a wrong
//! row, no error). The window's name is encoded, and DataFusion writes `IGNORE NULLS`
//! into it right after the call's parentheses; the decoded window is made again with
//! the flag where its name says so. Called by `FlotillaCodec::decode_plan`.

use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::error::Result;
use datafusion::logical_expr::WindowFunctionDefinition;
use datafusion::physical_plan::windows::{
    create_window_expr, BoundedWindowAggExec, StandardWindowExpr, WindowAggExec, WindowUDFExpr,
};
use datafusion::physical_plan::{ExecutionPlan, WindowExpr};

/// What DataFusion writes into a window's name after the call for `IGNORE NULLS`.
const MARK: &str = ") IGNORE NULLS";

/// `plan` with every decoded window function whose name says `IGNORE NULLS` made
/// again with it.
pub fn restore(plan: Arc<dyn ExecutionPlan>) -> Result<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        if let Some(w) = node.downcast_ref::<WindowAggExec>() {
            if let Some(exprs) = restored(w.window_expr(), w.input())? {
                let can_repartition = !w.partition_keys().is_empty();
                return Ok(Transformed::yes(
                    Arc::new(WindowAggExec::try_new(exprs, w.input().clone(), can_repartition)?)
                        as Arc<dyn ExecutionPlan>,
                ));
            }
        }
        if let Some(w) = node.downcast_ref::<BoundedWindowAggExec>() {
            if let Some(exprs) = restored(w.window_expr(), w.input())? {
                let can_repartition = !w.partition_keys().is_empty();
                return Ok(Transformed::yes(Arc::new(BoundedWindowAggExec::try_new(
                    exprs,
                    w.input().clone(),
                    w.input_order_mode.clone(),
                    can_repartition,
                )?) as Arc<dyn ExecutionPlan>));
            }
        }
        Ok(Transformed::no(node))
    })
    .map(|t| t.data)
}

/// The window expressions again, those named with `IGNORE NULLS` made with it; `None`
/// when there is none.
fn restored(exprs: &[Arc<dyn WindowExpr>], input: &Arc<dyn ExecutionPlan>) -> Result<Option<Vec<Arc<dyn WindowExpr>>>> {
    let mut changed = false;
    let mut out = Vec::with_capacity(exprs.len());
    for e in exprs {
        let udf = e
            .as_any()
            .downcast_ref::<StandardWindowExpr>()
            .and_then(|s| s.get_standard_func_expr().as_any().downcast_ref::<WindowUDFExpr>());
        match udf {
            Some(udf) if e.name().contains(MARK) => {
                changed = true;
                out.push(create_window_expr(
                    &WindowFunctionDefinition::WindowUDF(udf.fun().clone()),
                    e.name().to_string(),
                    udf.args(),
                    e.partition_by(),
                    e.order_by(),
                    e.get_window_frame().clone(),
                    input.schema(),
                    true,
                    false,
                    None,
                )?);
            }
            _ => out.push(e.clone()),
        }
    }
    Ok(changed.then_some(out))
}
