//! How simulated readers read: a pipelined task (or the coordinator's root) waits
//! for its inputs to be done producing, a spooled task (or the fault-tolerant root)
//! reads finished outputs; either fails with a fetch failure naming an output that is
//! gone, and every read is checked to name each input partition exactly once.

use std::collections::BTreeMap;

use super::{merge_sources, Cursor, Inputs, State, Wake, World};
use crate::error_code::ErrorCode;
use crate::protocol::{SourceUpdate, TaskFailure, TaskId, TaskState, UpstreamTask};

impl World {
    /// Where a pipelined task (or, for None, the coordinator's root) stands with its
    /// inputs: all done producing, some still running, or one unreadable; with the
    /// wake-up of whatever it waits on, taken under the same lock.
    pub(super) fn pipelined_inputs(&self, task: Option<(usize, &TaskId)>) -> (Inputs, Wake) {
        self.world_work(|| {
            let mut guard = self.state.lock();
            let s = &mut *guard;
            let (stage, cursor, own) = match task {
                Some((w, id)) => match s.workers[w].tasks.get(&id.to_string()) {
                    Some(t) => (id.stage, t.cursor, t.notify.clone()),
                    None => return (Inputs::Gone, Wake::default()),
                },
                None => (0, s.root_cursor, self.stage_changed[0].clone()),
            };
            let (inputs, cursor) = self.look_at_inputs(s, task, stage, cursor);
            match task {
                Some((w, id)) => s.workers[w].tasks.get_mut(&id.to_string()).expect("present").cursor = cursor,
                None => s.root_cursor = cursor,
            }
            let wake = match &inputs {
                Inputs::Waiting => {
                    let input = self.plan.fragments[stage].inputs.get(cursor.input).copied();
                    let wake = Wake::default().on(&own).on(&self.broken);
                    match input {
                        Some(i) => wake.on(&self.stage_changed[i]),
                        None => wake,
                    }
                }
                _ => Wake::default(),
            };
            (inputs, wake)
        })
    }

    /// Walks a reader's inputs from its cursor: after a breakage, first every
    /// upstream task it passed, for one now unreadable.
    fn look_at_inputs(
        &self,
        s: &State,
        task: Option<(usize, &TaskId)>,
        stage: usize,
        mut cursor: Cursor,
    ) -> (Inputs, Cursor) {
        let (sources, complete) = match task {
            Some((w, id)) => {
                let t = &s.workers[w].tasks[&id.to_string()];
                (&t.sources, &t.complete)
            }
            None => (&s.root_sources, &s.root_complete),
        };
        let inputs = &self.plan.fragments[stage].inputs;
        let list = |input: usize| sources.get(&input).map(|l| l.as_slice()).unwrap_or_default();
        if cursor.epoch != s.breakage {
            // Every complete input's tasks, for one that broke since the last look.
            for &input in inputs.iter().filter(|i| complete.contains(i)) {
                for u in list(input) {
                    if let Err(f) = self.upstream_state(s, u) {
                        return (Inputs::Broken(f), cursor);
                    }
                }
            }
            cursor.epoch = s.breakage;
        }
        while let Some(&input) = inputs.get(cursor.input) {
            if !complete.contains(&input) {
                return (Inputs::Waiting, cursor);
            }
            let upstream = list(input);
            while let Some(u) = upstream.get(cursor.upstream) {
                match self.upstream_state(s, u) {
                    Err(f) => return (Inputs::Broken(f), cursor),
                    Ok(TaskState::Flushing | TaskState::Finished) => cursor.upstream += 1,
                    Ok(_) => return (Inputs::Waiting, cursor),
                }
            }
            cursor.input += 1;
            cursor.upstream = 0;
        }
        (Inputs::Ready, cursor)
    }

    /// An upstream task's state, or the fetch failure of reading it.
    pub(super) fn upstream_state(&self, s: &State, u: &UpstreamTask) -> Result<TaskState, TaskFailure> {
        let w = self.worker_index(u.url.trim_start_matches("http://"));
        let unreachable = |why: &str| {
            let message = format!("cannot read {} on {}: {why}", u.task_id, u.url);
            TaskFailure::fetch(ErrorCode::RemoteTaskUnreachable, message, u.task_id.clone(), u.url.clone())
        };
        if !s.workers[w].up {
            return Err(unreachable("its worker is down"));
        }
        let Some(t) = s.workers[w].tasks.get(&u.task_id.to_string()) else {
            return Err(unreachable("the task is gone"));
        };
        match t.state {
            TaskState::Failed | TaskState::Aborted | TaskState::Canceled => {
                let message = format!("upstream task {} failed", u.task_id);
                // As a worker answers a reader of a failed task: with its own code.
                let own = t.failure.as_ref().filter(|_| t.state == TaskState::Failed).and_then(|f| f.code.known());
                let code = own.unwrap_or(ErrorCode::RemoteTaskFailed);
                Err(TaskFailure::fetch(code, message, u.task_id.clone(), u.url.clone()))
            }
            _ if t.output_lost => Err(unreachable("its output is lost")),
            state => Ok(state),
        }
    }

    /// A spooled task reads every input partition's output once, at its start.
    pub(super) fn read_spooled_inputs(&self, w: usize, id: &TaskId) -> Result<(), TaskFailure> {
        let sources = {
            let s = self.state.lock();
            match s.workers[w].tasks.get(&id.to_string()) {
                Some(t) => t.sources.iter().map(|(k, v)| (*k, v.as_ref().clone())).collect(),
                None => return Ok(()),
            }
        };
        let inputs = self.plan.fragments[id.stage].inputs.clone();
        self.world_work(|| self.read_spooled_now(&format!("{id}"), Some(id.stage), inputs, &sources))
    }

    /// Reads spooled outputs: every partition of every input stage exactly once, from
    /// a finished attempt, or the fetch failure of the first that cannot be read.
    pub fn read_spooled(
        &self,
        reader: &str,
        inputs: Vec<usize>,
        sources: &BTreeMap<usize, Vec<UpstreamTask>>,
    ) -> Result<(), TaskFailure> {
        self.world_work(|| self.read_spooled_now(reader, None, inputs, sources))
    }

    /// Reads as `read_spooled`, for a task of stage `stage` (None: the root).
    fn read_spooled_now(
        &self,
        reader: &str,
        stage: Option<usize>,
        inputs: Vec<usize>,
        sources: &BTreeMap<usize, Vec<UpstreamTask>>,
    ) -> Result<(), TaskFailure> {
        let mut s = self.state.lock();
        let inputs = match stage {
            Some(stage) => self.inputs_read(&mut s, stage, inputs, sources),
            None => inputs,
        };
        for input in inputs {
            let list = sources.get(&input).map(Vec::as_slice).unwrap_or_default();
            for u in list {
                match self.upstream_state(&s, u) {
                    Err(f) => return Err(f),
                    Ok(TaskState::Finished) => {}
                    Ok(state) => {
                        let message = format!("{reader} was given {} while it was {state:?}", u.task_id);
                        drop(s);
                        self.violation(message.clone());
                        return Err(TaskFailure::new(ErrorCode::GenericInternalError, message));
                    }
                }
            }
            let partitions = self.partitions_of(&s, input);
            if let Err(why) = covers_once(list, partitions) {
                drop(s);
                self.violation(format!("{reader} reads stage {input} wrong: {why}"));
                return Ok(());
            }
        }
        Ok(())
    }

    /// What a spooled task of `stage` reads: its inputs as planned, but for one the
    /// fault-tolerant scheduler took into it (a join that broadcast its build side
    /// runs its probe stage's work), which never ran a task and which the sources
    /// leave out: its own inputs are read in its place. Each such merge is
    /// recorded, so that readers of `stage` count its partitions as the taken-in
    /// stage's.
    fn inputs_read(
        &self,
        s: &mut State,
        stage: usize,
        inputs: Vec<usize>,
        sources: &BTreeMap<usize, Vec<UpstreamTask>>,
    ) -> Vec<usize> {
        let mut read = Vec::with_capacity(inputs.len());
        for input in inputs {
            if sources.contains_key(&input) || s.counts[input].created > 0 {
                read.push(input);
                continue;
            }
            s.merged.insert(input, stage);
            let own = self.plan.fragments[input].inputs.clone();
            read.extend(self.inputs_read(s, input, own, sources));
        }
        read
    }

    /// The partitions of a stage's output: the taken-in stage's, if it took one in.
    fn partitions_of(&self, s: &State, stage: usize) -> usize {
        match s.merged.iter().find(|(_, into)| **into == stage) {
            Some((&taken_in, _)) => self.partitions_of(s, taken_in),
            None => self.plan.fragments[stage].partitions,
        }
    }

    /// A pipelined task with all its inputs done producing reads them: each input
    /// stage's partitions must be named exactly once by the tasks it was told of.
    pub(super) fn check_pipelined_reads(&self, w: usize, id: &TaskId) {
        let wrong = {
            let s = self.state.lock();
            let Some(task) = s.workers[w].tasks.get(&id.to_string()) else { return };
            self.plan.fragments[id.stage].inputs.iter().find_map(|&input| {
                let list = task.sources.get(&input).map(|l| l.as_slice()).unwrap_or_default();
                covers_once(list, self.plan.fragments[input].partitions).err().map(|why| (input, why))
            })
        };
        if let Some((input, why)) = wrong {
            self.violation(format!("{id} reads stage {input} wrong: {why}"));
        }
    }

    /// The coordinator's pipelined root learns where its inputs run.
    pub fn add_root_source(&self, update: SourceUpdate) {
        {
            let mut guard = self.state.lock();
            let s = &mut *guard;
            merge_sources(&mut s.interned, &mut s.root_sources, &mut s.root_complete, &update);
            s.root_cursor = Cursor::default();
        }
        self.touched(0, None);
    }

    /// The pipelined root reads until every input is done producing (or, with the
    /// seed's `root_limit`, until its first input is: a LIMIT that stops early and
    /// leaves pages nobody reads); a broken input fails it.
    pub async fn run_pipelined_root(&self) -> Result<(), TaskFailure> {
        loop {
            let limit_reached = self.params.root_limit && self.root_has_some_input();
            let (inputs, wake) = self.pipelined_inputs(None);
            match inputs {
                Inputs::Ready => break,
                Inputs::Broken(f) => return Err(f),
                Inputs::Waiting if limit_reached => break,
                Inputs::Waiting | Inputs::Gone => {}
            }
            // With a LIMIT, any input's progress may be enough.
            let wake = match self.params.root_limit {
                true => self.plan.fragments[0].inputs.iter().fold(wake, |w, &i| w.on(&self.stage_changed[i])),
                false => wake,
            };
            wake.wait().await;
        }
        if !self.params.root_limit {
            let s = self.state.lock();
            for &input in &self.plan.fragments[0].inputs {
                let list = s.root_sources.get(&input).map(|l| l.as_slice()).unwrap_or_default();
                if let Err(why) = covers_once(list, self.plan.fragments[input].partitions) {
                    drop(s);
                    self.violation(format!("the root reads stage {input} wrong: {why}"));
                    break;
                }
            }
        }
        self.mark_root_done();
        Ok(())
    }

    pub(super) fn root_has_some_input(&self) -> bool {
        self.world_work(|| self.root_has_some_input_now())
    }

    fn root_has_some_input_now(&self) -> bool {
        let s = self.state.lock();
        s.root_sources
            .values()
            .flat_map(|l| l.iter())
            .any(|u| matches!(self.upstream_state(&s, u), Ok(TaskState::Flushing | TaskState::Finished)))
    }

    pub fn mark_root_done(&self) {
        let at = self.now_ms();
        self.state.lock().record.root_done_at = Some(at);
        self.event("the root has every row");
        self.touched(0, None);
    }
}

/// Whether `tasks` name each of `partitions` exactly once.
fn covers_once(tasks: &[UpstreamTask], partitions: usize) -> Result<(), String> {
    let mut seen = vec![0usize; partitions.max(1)];
    for t in tasks {
        for &p in &t.partitions {
            match seen.get_mut(p) {
                Some(n) => *n += 1,
                None => return Err(format!("{} names partition {p} of {partitions}", t.task_id)),
            }
        }
    }
    match seen.iter().position(|&n| n != 1) {
        Some(p) => Err(format!("partition {p} is named {} times", seen[p])),
        None => Ok(()),
    }
}
