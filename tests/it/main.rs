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
//! * `run_tree`: `lockgate run` and the command's whole process tree: a frozen gateway, a
//!   killed `lockgate run`, what the command leaves behind.
//! * `cli`: the binary's exit codes, errors and `--dev` mode.
//! * `openapi`: the committed OpenAPI document matches the code.
//! * `ha`: Sentinel failover, Redis Cluster and Redlock against real processes.
//! * `fences`: the fence recipes of docs/fences.md (PostgreSQL, an HTTP resource, Redis), each
//!   refusing a stale holder's late write.
//! * `faults`: the fault suite: a checked workload while processes are paused, restarted,
//!   partitioned or failed over.
//! * `grant_rules`: the Lua rules of a grant (fence, stem, holder record) against their Rust
//!   twins.
//! * `data_loss`: a Redis that forgot its data (restart without persistence, FLUSHALL):
//!   grants held back for the longest lease, on every gateway.
//! * `guards`: Redis settings that lose locks silently (eviction), refused or reported.
//! * `access`: API keys and scopes.
//! * `security`: the attacker's view: name spellings × scopes, forged tokens, cursors.
//! * `metrics`: the Prometheus metrics.
//! * `limits`: the concurrency limit, the request timeout, large requests.
//! * `max_hold`: bounded holds (`max_hold_ms`, `--max-hold`).
//! * `simulated_redis`: the simulated Redis of the deterministic simulation (sim/redis)
//!   against a real Redis or Valkey: the same replies to what gateways really sent.
//! * `simulation`: the deterministic simulation's world: gateways over a simulated Redis on one
//!   paused runtime per seed, the history judged afterwards.
//! * `min_hold`: minimum holds (`min_hold_ms`, `lockgate run --min-hold`): once per schedule.
//! * `reentrant`: reentrant locks (`reentrant: true`, `hold_count`).
//! * `shutdown`: graceful shutdown of the real binary.
//! * `operations`: request ids, logs, TLS to Redis.
//! * `traces`: OpenTelemetry spans over OTLP/HTTP.
//! * `semaphores`, `rwlocks`, `multilocks`, `fair`: the other primitives and fair queues, each
//!   on the backends that offer it (and Redlock's `not-offered`).
//! * `prefix_events`: watching every name under a prefix.
//! * `quiet_logs`: logs while Redis is down, a few lines per cause.
//! * `console`: the operator's console (`/ui`) in headless Chromium.
//!
//! How a test talks to a gateway: lock calls go through the project's own client
//! (`lockgate::client`), as `Gateway::locks()` (JSON bodies as a curl user writes them), and
//! the answer is checked by `support::answers::Answered`: `.done(201)` gives the server's own
//! typed body, `.refused(409, "lock-held")` the problem document, anything else fails with
//! what came instead. Raw HTTP (`gw.http`, `support::status_json`) is kept where the wire is
//! the subject: headers, a field that must be absent (the typed bodies read absent as
//! `None`), a token that must not appear in a text, streams, the multi-lock `Location`,
//! re-entry (`reentrant`) and the API contract itself (`api`, `security`).
//!
//! Where a feature runs: its walk, written once as an `async fn(&Gateway)`, and one line
//! naming the backends, `on_backends!(every_walk: dev, redis, sentinel, cluster)`
//! (`support::backends`), which makes the tests `every_walk::dev`, `every_walk::redis`, … A
//! backend's own extra checks (keys left in Redis, each Redlock node's view) are tests of their
//! own beside that line.
#![allow(clippy::unwrap_used)]

mod support;

mod access;
mod api;
mod cli;
mod console;
mod contention;
mod data_loss;
mod events;
mod fair;
mod faults;
mod fences;
mod grant_rules;
mod guards;
mod ha;
mod hold;
mod holders;
mod limits;
mod max_hold;
mod metrics;
mod min_hold;
mod multilocks;
mod openapi;
mod operations;
mod prefix_events;
mod quiet_logs;
mod redis_e2e;
mod reentrant;
mod revoke;
mod run_command;
mod run_tree;
mod rwlocks;
mod security;
mod semaphores;
mod shutdown;
mod simulated_redis;
mod simulation;
mod traces;
mod waiting;
