//! The queries the simulator runs: a random DAG of stages cut as the fragmenter cuts
//! (producers numbered below their consumers, stage 0 the coordinator's root), with
//! partition counts, exchange kinds and, for the phased schedule, join dependencies
//! between sibling inputs. The simulated workers do not run the fragments' plans,
//! they only need the stages' shape; the plans are empty but for the partitioned
//! joins and repartitions that the fault-tolerant scheduler's adaptive planning
//! reads (a join may broadcast its build side and take in its probe stage).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::{JoinType, NullEquality};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::empty::EmptyExec;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, Partitioning};
use rand::rngs::StdRng;
use rand::Rng;

use crate::exchange::remote_source::{ExchangeMode, RemoteSourceExec};
use crate::plan::fragmenter::{Fragment, FragmentOutput, FragmentedPlan};
use crate::plan::DependencyKind;

/// A query's stages and the phased schedule's dependencies among them.
pub struct QueryShape {
    pub plan: Arc<FragmentedPlan>,
    pub dependencies: Vec<(usize, usize, DependencyKind)>,
}

impl QueryShape {
    /// `stages` worker stages (at least 1) of up to `max_partitions` partitions each.
    pub fn random(rng: &mut StdRng, stages: usize, max_partitions: usize) -> QueryShape {
        let stages = stages.max(1);
        let n = stages + 1;
        // consumer[s] for s in 1..n: a later stage, or the root. The last stage always
        // feeds the root; an earlier one now and then does too (a union at the top).
        let mut consumer = vec![None; n];
        for (s, slot) in consumer.iter_mut().enumerate().skip(1) {
            let to_root = s == n - 1 || rng.random_bool(0.1);
            *slot = Some(if to_root { 0 } else { rng.random_range(s + 1..n) });
        }
        let partitions: Vec<usize> =
            (0..n).map(|s| if s == 0 { 1 } else { rng.random_range(1..=max_partitions.max(1)) }).collect();
        let inputs = |stage: usize| (1..n).filter(|&p| consumer[p] == Some(stage)).collect::<Vec<_>>();
        // Drawn in stage order, as before the shapes shared `assemble`: seeds replay.
        let outputs: Vec<FragmentOutput> = (0..n)
            .map(|s| match consumer[s] {
                None => FragmentOutput::Root,
                Some(c) if rng.random_bool(0.25) || c == 0 => FragmentOutput::Broadcast,
                Some(c) => FragmentOutput::Repartition { partitions: partitions[c] },
            })
            .collect();
        let inputs: Vec<Vec<usize>> = (0..n).map(inputs).collect();
        let has_scan: Vec<bool> = inputs.iter().map(Vec::is_empty).collect();
        let (fragments, graph) = assemble(&consumer, &partitions, outputs, inputs, &has_scan);
        // A stage with two or more inputs joins them: its first input is the build
        // side, the second the probe side, as Trino's phased policy orders them.
        let mut dependencies = Vec::new();
        for f in fragments.iter().skip(1) {
            if let [build, probe, ..] = f.inputs[..] {
                let kind = match fragments[build].output {
                    FragmentOutput::Broadcast => DependencyKind::BroadcastJoinBuild,
                    _ => DependencyKind::PartitionedJoinBuild,
                };
                dependencies.push((build, probe, kind));
            }
        }
        QueryShape { plan: Arc::new(FragmentedPlan { fragments, graph }), dependencies }
    }

    /// A query for the scale runs: a left-deep chain of partitioned joins, each
    /// joining a scan stage (its build side, a task per worker, as a scan over many
    /// splits gets) with the joins below it, `hash_partitions` partitions each; with
    /// an even `stages`, an aggregation on top. The last stage feeds the root.
    pub fn scale(stages: usize, workers: usize, hash_partitions: usize) -> QueryShape {
        let stages = stages.max(1);
        let n = stages + 1;
        // Stage 1 scans; then each join (id j) reads a scan (j - 1) and the stage
        // below (j - 2); an aggregation (the last, with even stages) reads j - 1.
        let mut consumer = vec![None; n];
        let mut inputs = vec![Vec::new(); n];
        let mut is_scan = vec![false; n];
        is_scan[1] = true;
        let mut top = 1;
        let mut next = 2;
        while next + 1 < n {
            is_scan[next] = true;
            inputs[next + 1] = vec![next, top];
            consumer[next] = Some(next + 1);
            consumer[top] = Some(next + 1);
            top = next + 1;
            next += 2;
        }
        if next < n {
            inputs[next] = vec![top];
            consumer[top] = Some(next);
            top = next;
        }
        consumer[top] = Some(0);
        inputs[0] = vec![top];
        let partitions: Vec<usize> = (0..n)
            .map(|s| match s {
                0 => 1,
                _ if is_scan[s] => workers.max(1),
                _ => hash_partitions.max(1),
            })
            .collect();
        let outputs: Vec<FragmentOutput> = (0..n)
            .map(|s| match consumer[s] {
                None => FragmentOutput::Root,
                Some(0) => FragmentOutput::Broadcast,
                Some(c) => FragmentOutput::Repartition { partitions: partitions[c] },
            })
            .collect();
        let dependencies = inputs
            .iter()
            .filter_map(|i| match i[..] {
                [build, probe] => Some((build, probe, DependencyKind::PartitionedJoinBuild)),
                _ => None,
            })
            .collect();
        let (fragments, graph) = assemble(&consumer, &partitions, outputs, inputs, &is_scan);
        QueryShape { plan: Arc::new(FragmentedPlan { fragments, graph }), dependencies }
    }

    pub fn stages(&self) -> usize {
        self.plan.fragments.len() - 1
    }
}

/// The fragments and their exchange graph, from each stage's consumer, partitions,
/// output, inputs and whether it scans (plans: `stage_plan`).
fn assemble(
    consumer: &[Option<usize>],
    partitions: &[usize],
    outputs: Vec<FragmentOutput>,
    inputs: Vec<Vec<usize>>,
    has_scan: &[bool],
) -> (Vec<Fragment>, petgraph::graph::DiGraph<usize, ExchangeMode>) {
    let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]));
    let mut graph = petgraph::graph::DiGraph::new();
    let nodes: Vec<_> = (0..consumer.len()).map(|i| graph.add_node(i)).collect();
    let mut fragments = Vec::with_capacity(consumer.len());
    let kinds = outputs.clone();
    for (s, (output, inputs)) in outputs.into_iter().zip(inputs).enumerate() {
        if let Some(c) = consumer[s] {
            let mode = match output {
                FragmentOutput::Repartition { .. } => ExchangeMode::Repartition,
                _ => ExchangeMode::Broadcast,
            };
            graph.add_edge(nodes[s], nodes[c], mode);
        }
        fragments.push(Fragment {
            id: s,
            plan: stage_plan(partitions[s], &output, &inputs, &kinds, &schema),
            output,
            partitions: partitions[s],
            consumer: consumer[s],
            has_scan: has_scan[s],
            inputs,
        });
    }
    (fragments, graph)
}

/// A stage's plan: a partitioned inner join of its two inputs when both are
/// repartitioned for it (the first the build side), else rows from nowhere; under
/// the repartition for its consumer when it has one.
fn stage_plan(
    partitions: usize,
    output: &FragmentOutput,
    inputs: &[usize],
    outputs: &[FragmentOutput],
    schema: &SchemaRef,
) -> Arc<dyn ExecutionPlan> {
    let repartitioned = |i: usize| matches!(outputs[i], FragmentOutput::Repartition { .. });
    let x = || Arc::new(Column::new("x", 0)) as _;
    let body: Arc<dyn ExecutionPlan> = match inputs {
        [build, probe] if repartitioned(*build) && repartitioned(*probe) => {
            let side = |stage| {
                Arc::new(RemoteSourceExec::new(stage, ExchangeMode::Repartition, partitions, schema.clone())) as _
            };
            let (build, probe, on) = (side(*build), side(*probe), vec![(x(), x())]);
            let mode = PartitionMode::Partitioned;
            let nulls = NullEquality::NullEqualsNothing;
            let join = HashJoinExec::try_new(build, probe, on, None, &JoinType::Inner, None, mode, nulls, false);
            Arc::new(join.expect("a join on one column"))
        }
        _ => Arc::new(EmptyExec::new(schema.clone()).with_partitions(partitions)),
    };
    match output {
        FragmentOutput::Repartition { partitions } => {
            let hash = Partitioning::Hash(vec![x()], *partitions);
            Arc::new(RepartitionExec::try_new(body, hash).expect("a repartition on one column"))
        }
        _ => body,
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn shapes_are_dags_cut_as_the_fragmenter_cuts() {
        for seed in 0..200 {
            let mut rng = StdRng::seed_from_u64(seed);
            let shape = QueryShape::random(&mut rng, 1 + seed as usize % 12, 6);
            let fragments = &shape.plan.fragments;
            assert_eq!(fragments[0].output, FragmentOutput::Root);
            assert!(!fragments[0].inputs.is_empty(), "the root reads something");
            for f in fragments.iter().skip(1) {
                let c = f.consumer.expect("a worker stage has a consumer");
                assert!(c == 0 || c > f.id, "producers come before consumers");
                assert!(fragments[c].inputs.contains(&f.id));
                if let FragmentOutput::Repartition { partitions } = f.output {
                    assert_eq!(partitions, fragments[c].partitions);
                }
            }
            let stages = shape.plan.worker_stages();
            crate::scheduling::phased::PhasedExecutionSchedule::new(&stages, &shape.dependencies)
                .expect("the dependencies make a valid schedule");
        }
    }

    #[test]
    fn scale_shapes_chain_joins_over_scans() {
        for stages in 1..12 {
            let shape = QueryShape::scale(stages, 7, 3);
            let fragments = &shape.plan.fragments;
            assert_eq!(fragments.len(), stages + 1);
            assert_eq!(fragments[0].inputs.len(), 1, "the root reads the top stage");
            for f in fragments.iter().skip(1) {
                let c = f.consumer.expect("a worker stage has a consumer");
                assert!(c == 0 || c > f.id, "producers come before consumers");
                assert!(fragments[c].inputs.contains(&f.id));
                assert_eq!(f.partitions, if f.has_scan { 7 } else { 3 }, "stage {}", f.id);
                assert!(f.has_scan == f.inputs.is_empty());
            }
            let joins = fragments.iter().filter(|f| f.inputs.len() == 2).count();
            assert_eq!(joins, (stages - 1) / 2, "{stages} stages");
            assert_eq!(shape.dependencies.len(), joins);
            crate::scheduling::phased::PhasedExecutionSchedule::new(&shape.plan.worker_stages(), &shape.dependencies)
                .expect("a valid schedule");
        }
    }
}
