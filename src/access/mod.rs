//! Access: who may do what to which lock names.
//!
//! [`ApiKeys`] (in [`keys`]) are the configured bearer keys, each scoped to name prefixes and
//! operations; [`MetricsAuth`] says whether `/metrics` needs one. The HTTP gate checks a
//! request's key once, against its operation and lock name. This module knows nothing of
//! HTTP, locks or Redis: it answers "may this key do this operation on this name".

pub mod keys;

pub use self::keys::{ApiKey, ApiKeys};

/// Whether /metrics needs an API key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MetricsAuth {
    /// Open to anyone who can reach the port (metrics carry no names or tokens).
    Open,
    /// A key allowed the `metrics` operation.
    Required,
}
