//! The cluster as the coordinator sees it: which workers are alive (`NodeManager`,
//! `WorkerNode`) and the coordinator's handle on each task it runs on one of them
//! (`HttpRemoteTask`). Neutral ground: the coordinator and the schedulers both use
//! it, and it imports neither.

pub mod node_manager;
pub mod remote_task;
