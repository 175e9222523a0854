//! Plans DataFusion makes must survive the cut: nodes that check their children's
//! partitioning when rebuilt (`InterleaveExec`, under a `UNION ALL` of inputs
//! hash-partitioned alike, as in TPC-DS q14, q23, q33, q56, q60 and q66) are rebuilt
//! over remote sources by the fragmenter, and again by the codec on a worker.

use std::sync::Arc;
use std::time::Duration;

use datafusion::execution::TaskContext;
use datafusion::physical_plan::union::InterleaveExec;
use datafusion::physical_plan::{ExecutionPlan, ExecutionPlanProperties, Partitioning};

use super::{plan, PlanRequest, Planned};
use crate::codec::FlotillaCodec;
use crate::config::SessionProperties;
use crate::connector::Connectors;
use crate::coordinator::planner::{session_context, SessionSpec};
use crate::exchange::remote_source::RemoteSourceExec;
use crate::plan::fragmenter::FragmentedPlan;

/// Union shapes whose single-node plans interleave hash-partitioned inputs.
const UNIONS: [&str; 3] = [
    // Two aggregations on the same key, summed again by it (q33, q56, q60).
    "SELECT k, sum(s) FROM (\
         SELECT o_custkey k, sum(o_totalprice) s FROM orders GROUP BY o_custkey \
         UNION ALL SELECT c_custkey k, sum(c_acctbal) s FROM customer GROUP BY c_custkey) t \
     GROUP BY k",
    // Three branches, a join in one (q14, q23).
    "SELECT k, count(*), sum(v) FROM (\
         SELECT o_custkey k, max(o_totalprice) v FROM orders GROUP BY o_custkey \
         UNION ALL SELECT c_custkey k, max(c_acctbal) v FROM customer GROUP BY c_custkey \
         UNION ALL SELECT c_custkey k, max(o_totalprice) v FROM customer JOIN orders ON c_custkey = o_custkey \
             GROUP BY c_custkey) t \
     GROUP BY k",
    // Keys of two columns, grouped again by both (q66).
    "SELECT a, b, sum(n) FROM (\
         SELECT o_custkey a, o_orderstatus b, count(*) n FROM orders GROUP BY 1, 2 \
         UNION ALL SELECT o_custkey, o_orderpriority, count(*) FROM orders GROUP BY 1, 2) t \
     GROUP BY a, b",
];

fn count<T: 'static>(plan: &Arc<dyn ExecutionPlan>) -> usize {
    usize::from((plan.as_ref() as &dyn std::any::Any).is::<T>())
        + plan.children().into_iter().map(count::<T>).sum::<usize>()
}

fn interleaves(plan: &Arc<dyn ExecutionPlan>, out: &mut Vec<Arc<dyn ExecutionPlan>>) {
    if (plan.as_ref() as &dyn std::any::Any).is::<InterleaveExec>() {
        out.push(plan.clone());
    }
    for c in plan.children() {
        interleaves(c, out);
    }
}

/// The plan DataFusion made, its fragments, and the context of a task that runs them
/// (our functions registered, as on a worker).
async fn planned(sql: &str) -> (Arc<dyn ExecutionPlan>, Arc<FragmentedPlan>, Arc<TaskContext>) {
    let ctx = session_context(&SessionSpec::default(), &SessionProperties::default(), 4, &Connectors::benchmark());
    let task_ctx = ctx.task_ctx();
    let request = PlanRequest { dynamic_filtering: false, ..PlanRequest::for_tests(ctx, 2) };
    match plan(request, sql.to_string(), Duration::from_secs(60)).await {
        Ok(Planned::Query { physical, fragments: Some(f), .. }) => (physical, f, task_ctx),
        Ok(_) => panic!("{sql}: not a distributed plan"),
        Err(e) => panic!("{sql}: {e:?}"),
    }
}

#[tokio::test]
async fn interleaved_unions_are_cut_and_decoded_with_their_partitioning() {
    let codec = FlotillaCodec::new(Connectors::benchmark());
    for sql in UNIONS {
        let (physical, cut, task_ctx) = planned(sql).await;
        assert!(count::<InterleaveExec>(&physical) > 0, "{sql}: DataFusion's plan interleaves its inputs");
        let mut found = Vec::new();
        for f in &cut.fragments {
            interleaves(&f.plan, &mut found);
            // A worker rebuilds every node from the fragment's bytes.
            let decoded = codec.decode_plan(&codec.encode_plan(f.plan.clone()).unwrap(), &task_ctx);
            let decoded = decoded.unwrap_or_else(|e| panic!("{sql}: fragment {} decodes: {e}", f.id));
            assert_eq!(count::<InterleaveExec>(&decoded), count::<InterleaveExec>(&f.plan), "{sql}");
            // Unknown partitionings are never equal to each other; their text is.
            let text = |p: &Arc<dyn ExecutionPlan>| format!("{:?}", p.output_partitioning());
            assert_eq!(text(&decoded), text(&f.plan), "{sql}");
        }
        assert!(!found.is_empty(), "{sql}: the interleave survives the cut");
        for i in found {
            // Its inputs are remote sources declaring their producers' hash partitioning.
            for child in i.children() {
                let rs = (child.as_ref() as &dyn std::any::Any).downcast_ref::<RemoteSourceExec>();
                if let Some(rs) = rs {
                    assert!(matches!(rs.partitioning(), Partitioning::Hash(..)), "{sql}: {:?}", rs.partitioning());
                }
            }
        }
    }
}
