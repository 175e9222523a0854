//! `EXPLAIN` of a distributed query: each fragment with its partitioning, tasks, the
//! exchanges feeding it, what it waits for and the dynamic filters it runs with, then
//! its plan. The coordinator's planning renders it; it reads the fragmenter's output and
//! the dynamic filters, so the fragmenter itself knows neither EXPLAIN nor filters.

use std::fmt::Write;

use datafusion::physical_plan::{displayable, ExecutionPlanProperties};

use super::dynamic_filter::DynamicFilter;
use super::fragmenter::{Fragment, FragmentOutput, FragmentedPlan};
use super::DependencyKind;

/// `EXPLAIN`: each fragment with its partitioning, tasks and the exchanges feeding it.
/// `filters`: the dynamic filters it runs with (`plan::dynamic_filter`).
pub fn explain(plan: &FragmentedPlan, task_counts: &dyn Fn(&Fragment) -> usize, filters: &[DynamicFilter]) -> String {
    let mut out = String::new();
    let dependencies = super::dynamic_filter::dependencies(plan, filters);
    for f in &plan.fragments {
        let output = match f.output {
            FragmentOutput::Root => "SINGLE (to client)".to_string(),
            FragmentOutput::Repartition { partitions } => {
                let kind = match f.plan.output_partitioning() {
                    datafusion::physical_plan::Partitioning::Hash(exprs, _) => {
                        let e: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
                        format!("HASH [{}]", e.join(", "))
                    }
                    _ => "ROUND_ROBIN".to_string(),
                };
                format!("{kind} into {partitions} partitions")
            }
            FragmentOutput::Broadcast => "BROADCAST".to_string(),
            FragmentOutput::Passthrough => "PASSTHROUGH (partitions kept apart)".to_string(),
        };
        let location = if f.id == 0 { "coordinator".to_string() } else { format!("{} tasks", task_counts(f)) };
        let _ = writeln!(out, "Fragment {} [{}]", f.id, if f.has_scan { "SOURCE" } else { "INTERMEDIATE" });
        let _ = writeln!(out, "    Partitions: {}, {location}", f.partitions);
        let _ = writeln!(
            out,
            "    Output: {output}{}",
            f.consumer.map(|c| format!(" -> fragment {c}")).unwrap_or_default()
        );
        if !f.inputs.is_empty() {
            let inputs: Vec<String> =
                f.inputs.iter().map(|i| format!("fragment {} ({})", i, plan.fragments[*i].exchange_mode())).collect();
            let _ = writeln!(out, "    Inputs: {}", inputs.join(", "));
        }
        let waits: Vec<String> = dependencies
            .iter()
            .filter(|(_, stage, _)| *stage == f.id)
            .map(|(build, _, kind)| match kind {
                DependencyKind::BroadcastJoinBuild => format!("fragment {build} (its broadcast join's build)"),
                DependencyKind::PartitionedJoinBuild => {
                    format!("fragment {build} (the build of the join it feeds)")
                }
            })
            .collect();
        if !waits.is_empty() {
            let _ = writeln!(out, "    Starts after: {}", waits.join(", "));
        }
        for d in filters.iter().filter(|d| d.probe == f.id) {
            let schema = f.plan.schema();
            let keys: Vec<&str> = d.probe_keys.iter().map(|k| schema.field(*k).name().as_str()).collect();
            let _ =
                writeln!(out, "    Dynamic filter: keeps rows whose [{}] fragment {} has", keys.join(", "), d.build);
        }
        for line in displayable(f.plan.as_ref()).indent(false).to_string().lines() {
            let _ = writeln!(out, "    {line}");
        }
        out.push('\n');
    }
    out
}
