//! The exchange: how rows move between stages. Producers lay pages into an
//! `OutputBuffer`; consumers pull them over HTTP with an `ExchangeClient`, inside a
//! `RemoteSourceExec` leaf of their fragment. `page` is the wire codec (the plan codec
//! is `crate::codec`). In fault-tolerant mode producers
//! write to a `spool` on disk instead of an in-memory buffer.

pub mod client;
pub mod local;
pub mod output_buffer;
pub mod page;
pub mod remote_source;
pub mod spool;
pub mod validate;
