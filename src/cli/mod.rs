//! The client subcommands: `lockgate run` ([`run`]) and `lockgate healthcheck`
//! ([`healthcheck`]), both speaking to a gateway over HTTP through [`crate::client`].

pub mod healthcheck;
pub mod run;
