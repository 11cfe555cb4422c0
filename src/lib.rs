//! lockgate: an HTTP/REST gateway to distributed locks kept in Redis.
//!
//! Programs that cannot or should not embed a Redis client take, renew, release and inspect
//! locks over HTTP; lockgate turns each call into one atomic step on Redis (a Lua script, or a
//! native command) and answers with a token, a fence and the validity left.
//!
//! Modules, from the outside in. Dependencies point one way, `http → lock → backend`;
//! `config` is read by `app` and `cli` only; `telemetry`, `access`, `name`, `operation`,
//! `tls`, `wall_clock`, `entropy` and `watch` are leaves that the others use; `backend` imports none of `http`, `config`, `access`, `app` or `cli`, and
//! `lock` none of `http`, `config`, `access`. `client` uses `http`'s bodies, nothing above.
//! `primitive` uses `http`, `lock` and `backend`; of them, only `http`'s route table names
//! it (one line per kind that has routes).
//!
//! * [`app`]: the composition root: configuration → backend → lock service → router → server.
//! * [`config`]: every flag and environment variable, validated once.
//! * [`http`]: the serving loop, the route table and the gate that routes by it, thin handlers over the lease engine, extractors,
//!   JSON bodies (shared with [`client`]), problem documents, OpenAPI.
//! * [`lock`]: the lease engine (acquire with idempotency and validity, renew, release,
//!   inspect, blocking waits, hold streams' watchdog) and the primitives built on it. No
//!   HTTP, no Redis.
//! * [`primitive`]: a kind of lease's own code, one folder each (today the semaphore's: its
//!   primitive, bodies, routes and handlers).
//! * [`backend`]: where locks are kept: Redis (standalone, Sentinel, Cluster), Redlock over
//!   several Redis, or in memory for `--dev`.
//! * [`access`]: API keys and their scopes.
//! * [`name`]: lock names, validated: the one user-chosen string that reaches a store's key.
//! * [`operation`]: the API's operations, which keys allow and metrics count.
//! * [`telemetry`]: metrics and logging.
//! * [`client`]: a typed client of lockgate's own API, used by [`cli`].
//! * [`cli`]: `lockgate run` and `lockgate healthcheck`.
//! * [`tls`]: the process-wide rustls crypto provider.
//! * [`wall_clock`]: the time of day the gateway reads (the simulation sets it per thread).
//! * [`entropy`]: every random byte the gateway uses, from the OS (the simulation seeds it per
//!   thread).
//! * [`watch`]: a watch channel whose waiters wake in a fixed order (tokio's wakes them in a
//!   random one).

pub mod access;
pub mod app;
pub mod backend;
pub mod build_info;
pub mod cli;
pub mod client;
pub mod config;
pub mod entropy;
pub mod http;
pub mod lock;
pub mod name;
pub mod operation;
pub mod primitive;
pub mod telemetry;
pub mod tls;
pub mod wall_clock;
pub mod watch;
