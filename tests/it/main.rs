//! lockgate's integration tests, one binary (see Cargo.toml):
//!
//! * `api`: the HTTP contract in-process (`oneshot`) on the memory backend.
//! * `redis_e2e`: HTTP on a socket against real `redis-server` processes.
//! * `waiting`: blocking acquire against real Redis.
//! * `hold`: hold streams and their watchdog against real Redis.
//! * `events`: watching locks (SSE, NDJSON), leader hand-off, many watchers.
//! * `holders`: who holds what (owner, metadata, inspect, listing) on every backend.
//! * `revoke`: revoking locks, and `lockgate run` stopping its command in time.
//! * `run_command`: the `lockgate run` subcommand, end to end.
//! * `cli`: the binary's exit codes, errors and `--dev` mode.
//! * `openapi`: the committed OpenAPI document matches the code.
//! * `ha`: Sentinel failover, Redis Cluster and Redlock against real processes.
//! * `faults`: the fault suite: a checked workload while processes are paused, restarted,
//!   partitioned or failed over.
//! * `grant_rules`: the Lua rules of a grant (fence, stem, holder record) against their Rust
//!   twins.
//! * `guards`: Redis settings that lose locks silently (eviction), refused or reported.
//! * `access`: API keys and scopes.
//! * `security`: the attacker's view: name spellings × scopes, forged tokens, cursors.
//! * `metrics`: the Prometheus metrics.
//! * `limits`: the concurrency limit, the request timeout, large requests.
//! * `max_hold`: bounded holds (`max_hold_ms`, `--max-hold`).
//! * `reentrant`: reentrant locks (`reentrant: true`, `hold_count`).
//! * `shutdown`: graceful shutdown of the real binary.
//! * `operations`: request ids, logs, TLS to Redis.
//! * `traces`: OpenTelemetry spans over OTLP/HTTP.
#![allow(clippy::unwrap_used)]

mod support;

mod access;
mod api;
mod cli;
mod console;
mod events;
mod fair;
mod faults;
mod grant_rules;
mod guards;
mod ha;
mod hold;
mod holders;
mod limits;
mod max_hold;
mod metrics;
mod multilocks;
mod openapi;
mod operations;
mod prefix_events;
mod quiet_logs;
mod redis_e2e;
mod reentrant;
mod revoke;
mod run_command;
mod rwlocks;
mod security;
mod semaphores;
mod shutdown;
mod traces;
mod waiting;
