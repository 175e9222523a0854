//! `Display` of the `ExecutionGraph`, its stages and task attempts, in the layout of
//! Ballista's rendering (final stage first); query info and the web UI show it.

use std::fmt;

use super::{is_available, ExecutionGraph, ExecutionStage, Stage, TaskAttemptStatus, TaskInfo};

impl fmt::Display for TaskAttemptStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskAttemptStatus::Running => write!(f, "Running"),
            TaskAttemptStatus::Successful { locations } => {
                let paths: Vec<&str> = locations.iter().map(|l| l.path.as_str()).collect();
                write!(f, "Successful({})", paths.join(", "))
            }
            TaskAttemptStatus::Failed { reason } => write!(f, "Failed({reason})"),
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (id, n, attempt) = (self.stage_id, self.partitions, self.stage_attempt);
        let mut slots: Vec<Option<&TaskInfo>> = Vec::new();
        match &self.state {
            ExecutionStage::Unresolved => {
                writeln!(f, "=========UnResolvedStage[id={id}, children={}]=========", self.inputs.len())?
            }
            ExecutionStage::Resolved => writeln!(f, "=========ResolvedStage[id={id}, partitions={n}]=========")?,
            ExecutionStage::Running { tasks } => {
                let (mut successful, mut running) = (0, 0);
                for t in tasks.iter().flatten() {
                    match t.status {
                        TaskAttemptStatus::Successful { .. } => successful += 1,
                        TaskAttemptStatus::Running => running += 1,
                        TaskAttemptStatus::Failed { .. } => {}
                    }
                }
                let available = tasks.iter().filter(|t| is_available(t)).count();
                writeln!(f, "=========RunningStage[id={id}, partitions={n}, attempt={attempt}, successful={successful}, running={running}, available={available}]=========")?;
                slots = tasks.iter().map(Option::as_ref).collect();
            }
            ExecutionStage::Successful { tasks, lost } => {
                let lost = if lost.is_empty() { String::new() } else { format!(", lost={lost:?}") };
                writeln!(f, "=========SuccessfulStage[id={id}, partitions={n}, attempt={attempt}{lost}]=========")?;
                slots = tasks.iter().map(Some).collect();
            }
            ExecutionStage::Failed { error } => {
                writeln!(f, "=========FailedStage[id={id}, partitions={n}]=========\nError: {error}")?
            }
        }
        if !self.inputs.is_empty() {
            let inputs: Vec<String> = self
                .inputs
                .iter()
                .map(|(i, o)| {
                    let locs: Vec<String> = o
                        .locations
                        .iter()
                        .map(|(p, l)| {
                            format!("{p}: {}", l.iter().map(|l| l.executor_id.as_str()).collect::<Vec<_>>().join("+"))
                        })
                        .collect();
                    format!(
                        "{i}: StageOutput {{ partition_locations: {{{}}}, complete: {} }}",
                        locs.join(", "),
                        o.complete
                    )
                })
                .collect();
            writeln!(f, "Inputs{{{}}}", inputs.join(", "))?;
        }
        if !self.failure_reasons.is_empty() {
            let mut reasons: Vec<&str> = self.failure_reasons.iter().map(String::as_str).collect();
            reasons.sort_unstable();
            writeln!(f, "Previous attempt failed: {}", reasons.join("; "))?;
        }
        for (p, slot) in slots.iter().enumerate() {
            match slot {
                None => writeln!(f, "  partition {p}: pending")?,
                Some(t) => {
                    writeln!(f, "  partition {p}: {} (attempt={}, executor={})", t.status, t.task_id, t.executor_id)?
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for ExecutionGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "ExecutionGraph[job_id={}, available_tasks={}, complete={}]",
            self.job_id,
            self.available_tasks(),
            self.is_complete()
        )?;
        // Final stage first, leaves last, as in Ballista's rendering.
        for id in self.topo.iter().rev() {
            write!(f, "{}", self.stages[id])?;
        }
        Ok(())
    }
}
