//! A simulated Redis for lockgate's deterministic simulation.
//!
//! It runs lockgate's real scripts (an embedded Lua 5.1, as Redis embeds) over a keyspace whose
//! expiries follow a simulated [`Clock`], and speaks RESP2 over any byte stream, so that the
//! real `backend::redis` code, through redis-rs, talks to it as to a server. It copies Redis
//! 7.0 for what lockgate uses — strings, hashes, sorted sets, pub/sub, `TIME`, `SCAN`, scripts,
//! a replica and `WAIT`, a Sentinel — and refuses everything else loudly ([`Server::gaps`]). A test in lockgate's suite replays
//! the commands a gateway sent to a real server on both this one and a real Redis or Valkey
//! whose clock is frozen at the same instants, and compares every reply and the keyspace, so
//! that the simulation cannot drift from Redis silently.
//!
//! * [`resp`]: the wire format.
//! * [`clock`]: the simulated wall clock.
//! * [`keyspace`]: keys, values, expiries.
//! * [`commands`]: the data commands.
//! * [`scripting`]: `EVAL`, `EVALSHA`, `SCRIPT`, the `redis` table.
//! * [`pubsub`]: channels, patterns, listeners.
//! * [`replication`]: a replica fed asynchronously, `WAIT`, failovers.
//! * [`sentinel`]: a Sentinel's answers and announcements.
//! * [`server`]: connections and the order of replies.

pub mod clock;
pub mod commands;
mod glob;
pub mod keyspace;
pub mod pubsub;
pub mod replication;
pub mod resp;
pub mod scripting;
pub mod sentinel;
pub mod server;
mod signal;

pub use clock::Clock;
pub use keyspace::{Entry, Value};
pub use resp::Frame;
pub use server::Server;
