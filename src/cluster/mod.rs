//! The cluster as the coordinator sees it: which workers are alive (`NodeManager`,
//! `WorkerNode`). Neutral ground: the coordinator and the schedulers both use it, and
//! it imports neither.

pub mod node_manager;
