//! Adaptive planning in the fault-tolerant scheduler: when a stage first resolves,
//! its producers' spooled outputs tell how many bytes each of its partitions reads.
//! `scheduling::adaptive` decides the stage's tasks (small neighbours together, a
//! skewed partition of a join's probe side split by its producers); the graph takes
//! the new count, each task is sent its partitions, a split task only its share of
//! the probe side's producers, and consumers learn which partitions each task holds.
//!
//! Before that, a partitioned join whose build stage finished small while its probe
//! stage has yet to start broadcasts the build side: the join stage takes the probe
//! stage's work in (`plan::probe_join::broadcast_build_side`), the graph drops the
//! probe stage (`merge_into_consumer`), and the probe side is never repartitioned.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::super::adaptive::{self, StageInput, TaskSlice};
use super::super::pipelined::output_spec;
use super::super::stage_execution::StageExecution;
use super::{ExecutionStage, FaultTolerantQueryScheduler, RetryLimits, TaskDescription};
use crate::plan::fragmenter::{Fragment, FragmentOutput};
use crate::plan::probe_join::{broadcast_build_side, build_stages, probe_stage};
use crate::protocol::{Base64Bytes, OutputBufferSpec, SourceUpdate, TaskId};

/// A stage adaptive planning changed: its tasks, and the input a split task reads
/// only some producers of.
#[derive(Debug, Clone)]
pub(super) struct AdaptedStage {
    slices: Vec<TaskSlice>,
    split_input: Option<usize>,
}

/// A join stage that may broadcast its build side once that stage has run, taking
/// in its probe stage.
#[derive(Debug, Clone, Copy)]
pub(super) struct BroadcastCandidate {
    join: usize,
    build: usize,
    probe: usize,
}

/// The joins that may broadcast at run time: a stage ending in a partitioned join
/// (`probe_join`) that scans nothing and reads just its build stage and its probe
/// stage, both repartitioned for it, and whose own output is not kept apart by
/// partition (a merge downstream counts on the join's partitions).
pub(super) fn broadcast_candidates(
    limits: &RetryLimits,
    stages: &BTreeMap<usize, Arc<StageExecution>>,
) -> Vec<BroadcastCandidate> {
    if limits.adaptive.is_none_or(|p| p.broadcast_bytes == 0) {
        return Vec::new();
    }
    let repartitions =
        |id: usize| stages.get(&id).is_some_and(|s| matches!(s.fragment().output, FragmentOutput::Repartition { .. }));
    let candidate = |(&join, stage): (&usize, &Arc<StageExecution>)| {
        let fragment = stage.fragment();
        if fragment.has_scan || fragment.output == FragmentOutput::Passthrough || fragment.inputs.len() != 2 {
            return None;
        }
        let probe = probe_stage(&fragment.plan)?;
        let build = build_stages(&fragment.plan);
        let build = build.first().copied().filter(|_| build.len() == 1)?;
        (repartitions(build) && repartitions(probe)).then_some(BroadcastCandidate { join, build, probe })
    };
    stages.iter().filter_map(candidate).collect()
}

impl FaultTolerantQueryScheduler {
    /// Decides each candidate join once its build stage has succeeded: it
    /// broadcasts if that stage wrote at most `adaptive_join_max_broadcast_size` and
    /// neither the join nor its probe stage has started or been adapted.
    pub(super) fn broadcast_small_build_sides(&mut self) {
        let Some(policy) = self.limits.adaptive else { return };
        for c in std::mem::take(&mut self.broadcast_candidates) {
            let built = matches!(self.graph.stage(c.build).map(|s| &s.state), Some(ExecutionStage::Successful { .. }));
            if !built {
                self.broadcast_candidates.push(c);
            } else if let Err(reason) = self.broadcast(c, policy.broadcast_bytes) {
                tracing::debug!(query = %self.settings.query_id, stage = c.join, "build side not broadcast: {reason}");
            }
        }
    }

    fn broadcast(&mut self, c: BroadcastCandidate, limit: u64) -> Result<(), String> {
        if self.adapted.contains(&c.join) || self.adapted_stages.contains_key(&c.probe) {
            return Err("already adapted".into());
        }
        let join = self.stages[&c.join].fragment();
        let probe = self.stages[&c.probe].fragment();
        let written = self.partition_bytes_by_producer(c.build, join.partitions).ok_or("unreported build bytes")?;
        let bytes: u64 = written.iter().flatten().sum();
        if bytes > limit {
            return Err(format!("its {bytes} B are over {limit} B"));
        }
        let plan = broadcast_build_side(&join.plan, c.probe, &probe.plan).map_err(|e| e.to_string())?;
        let plan = plan.ok_or("the plans are not of a join over a repartitioned probe stage")?;
        let encoded = self.settings.codec.encode_plan(plan.clone()).map_err(|e| e.to_string())?;
        let tasks = probe.partitions.max(1);
        self.graph.merge_into_consumer(c.probe, c.join, tasks).map_err(|e| e.to_string())?;
        let inputs = join.inputs.iter().filter(|i| **i != c.probe).chain(&probe.inputs).copied().collect();
        let fused = Fragment { plan, partitions: tasks, inputs, has_scan: probe.has_scan, ..(*join).clone() };
        self.fragments.insert(c.join, Base64Bytes(encoded));
        self.stages[&c.join].replace_fragment(Arc::new(fused));
        let change = format!(
            "adaptive: build side (stage {}, {bytes} B) broadcast; probe stage {} runs in this stage's {tasks} tasks",
            c.build, c.probe
        );
        tracing::debug!(query = %self.settings.query_id, stage = c.join, "{change}");
        self.stages[&c.join].adapt(tasks, change);
        self.stages[&c.probe].adapt(0, format!("adaptive: runs in stage {}", c.join));
        if let Some(s) = &mut self.stragglers {
            s.set_partitions(c.join, tasks);
        }
        self.adapted.extend([c.join, c.probe]);
        self.merged.insert(c.probe, c.join);
        Ok(())
    }

    /// The graph's stage that runs stage `id`'s work: `id`, or the stage it was
    /// taken into, and so on.
    pub(super) fn running_as(&self, mut id: usize) -> usize {
        while let Some(&into) = self.merged.get(&id) {
            id = into;
        }
        id
    }

    /// How a stage's tasks lay out their output: a broadcast to a stage taken into
    /// another has a buffer per task of that one.
    pub(super) fn output_spec(&self, fragment: &Fragment) -> OutputBufferSpec {
        match fragment.consumer.map(|c| self.running_as(c)) {
            Some(c) if Some(c) != fragment.consumer => {
                output_spec(&Fragment { consumer: Some(c), ..fragment.clone() }, &self.stages)
            }
            _ => output_spec(fragment, &self.stages),
        }
    }

    /// The fragment partitions task `task` of stage `stage` runs: its slice's if the
    /// stage was adapted, else the partition of the same number.
    pub(super) fn fragment_partitions(&self, stage: usize, task: usize) -> Vec<usize> {
        match self.adapted_stages.get(&stage).and_then(|a| a.slices.get(task)) {
            Some(slice) => slice.partitions.clone(),
            None => vec![task],
        }
    }

    /// A split task reads only its producers of the split input.
    pub(super) fn restrict_to_slice(&self, desc: &TaskDescription, updates: &mut [SourceUpdate]) {
        let Some(adapted) = self.adapted_stages.get(&desc.stage_id) else { return };
        let (Some(input), Some(slice)) = (adapted.split_input, adapted.slices.get(desc.partition)) else { return };
        let Some(producers) = &slice.producers else { return };
        for u in updates.iter_mut().filter(|u| u.stage == input) {
            u.tasks.retain(|t| producers.contains(&t.task_id.task));
        }
    }

    /// Plans the stages that have just resolved, before their first task starts.
    /// Each stage is looked at once: a stage rolled back later keeps its tasks.
    pub(super) fn adapt_resolved_stages(&mut self) {
        let Some(policy) = self.limits.adaptive else { return };
        for id in self.graph.unstarted_resolved_stages() {
            if id == 0 || !self.adapted.insert(id) {
                continue;
            }
            let Some((input, split_input)) = self.stage_input(id) else { continue };
            let slots = self.live_workers().len() * self.limits.slots_per_worker;
            let Some((slices, change)) = adaptive::plan_tasks(&policy, &input, slots) else { continue };
            if self.graph.set_task_count(id, slices.len()).is_err() {
                continue;
            }
            if let Some(s) = &mut self.stragglers {
                s.set_partitions(id, slices.len());
            }
            tracing::debug!(query = %self.settings.query_id, stage = id, "{change}");
            self.stages[&id].adapt(slices.len(), change.to_string());
            self.adapted_stages.insert(id, AdaptedStage { slices, split_input });
        }
    }

    /// What stage `id`'s producers wrote for it, and the input it may be split by;
    /// None when it may not be adapted: a single partition, an input that keeps
    /// partitions apart (passthrough, for a merge), no partitioned input, or a
    /// producer task that did not report its partitions' bytes.
    fn stage_input(&self, id: usize) -> Option<(StageInput, Option<usize>)> {
        let fragment = self.stages.get(&id)?.fragment();
        let n = fragment.partitions;
        if n < 2 {
            return None;
        }
        let mut partition_bytes = vec![0u64; n];
        let mut partitioned = false;
        let mut broadcast = false;
        let probe = probe_stage(&fragment.plan).filter(|_| !fragment.has_scan);
        let mut splittable = None;
        for input in &fragment.inputs {
            let producer = self.stages.get(input)?;
            match producer.fragment().output {
                FragmentOutput::Repartition { partitions } if partitions == n => partitioned = true,
                // Every task reads all of it, however many there are.
                FragmentOutput::Broadcast => {
                    broadcast = true;
                    continue;
                }
                _ => return None,
            }
            let by_producer = self.partition_bytes_by_producer(*input, n)?;
            for written in &by_producer {
                for (b, w) in partition_bytes.iter_mut().zip(written) {
                    *b += w;
                }
            }
            if probe == Some(*input) {
                splittable = Some(by_producer);
            }
        }
        // A task past the count its broadcast producers wrote buffers for would
        // find none: a stage with a broadcast input is only coalesced.
        let splittable = splittable.filter(|_| !broadcast);
        let split_input = splittable.as_ref().and(probe);
        partitioned.then_some((StageInput { partition_bytes, splittable }, split_input))
    }

    /// What each successful task of stage `input` wrote to each of `n` partitions.
    fn partition_bytes_by_producer(&self, input: usize, n: usize) -> Option<Vec<Vec<u64>>> {
        let producer = self.stages.get(&input)?;
        let ExecutionStage::Successful { tasks, .. } = &self.graph.stage(input)?.state else { return None };
        let reports: HashMap<TaskId, Vec<u64>> =
            producer.tasks().iter().map(|t| (t.task_id().clone(), t.status().stats.output_partition_bytes)).collect();
        let written = tasks.iter().enumerate().map(|(p, attempt)| {
            let task_id = TaskId::new(&self.settings.query_id, input, p, attempt.task_id);
            reports.get(&task_id).filter(|w| w.len() == n).cloned()
        });
        written.collect()
    }
}
