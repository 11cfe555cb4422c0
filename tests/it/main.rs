//! lockgate's integration tests, one binary (see Cargo.toml):
//!
//! * `api`: the HTTP contract in-process (`oneshot`) on the memory backend.
//! * `redis_e2e`: HTTP on a socket against real `redis-server` processes.
//! * `waiting`: blocking acquire and hold streams against real Redis.
//! * `run_command`: the `lockgate run` subcommand, end to end.
//! * `cli`: the binary's exit codes, errors and `--dev` mode.
//! * `openapi`: the committed OpenAPI document matches the code.
//! * `ha`: Sentinel failover, Redis Cluster and Redlock against real processes.
//! * `faults`: the fault suite: a checked workload while processes are paused, restarted,
//!   partitioned or failed over.
//! * `operations`: API keys, metrics, limits, graceful shutdown, logs, TLS to Redis.
//! * `vendored`: the build uses the patched hyper in `vendor/hyper`.
#![allow(clippy::unwrap_used)]

mod support;

mod api;
mod cli;
mod faults;
mod ha;
mod openapi;
mod operations;
mod redis_e2e;
mod run_command;
mod vendored;
mod waiting;
