//! Multi-locks: several locks taken under one token and one ttl, all or none.
//!
//! Each name of the set is an ordinary lock whose key holds the set's token, so every name
//! looks held (by a plain `GET`, by `GET /locks/{name}`, by a `SET NX` client) for exactly as
//! long as the set is. Acquire takes every name in one atomic step or none (no partial grant
//! is ever made, so two clients taking overlapping sets in any order cannot deadlock: neither
//! ever holds part of its set while waiting for the rest). Renew and release act on every name
//! at once. The set's fence is issued once, from the counter every name of the set shares
//! (the one counter of a server; in a Cluster, the names' one hash slot's), so it is greater
//! than every fence any of its names had before.
//!
//! In a Cluster one step can only touch one hash slot: every name of a set must map to the
//! same slot ([`Backend::offers`](super::Backend::offers)). Redlock does not offer multi-locks.
